/* Open MPI's own MPI_Allreduce (sum of floats) of the bytes bench_mpi exchanges, blocking and
 * as MPI_Iallreduce completed by an MPI_Test loop (what bench_mpi's exchange does): the peers
 * its exchange rows are compared with.
 *
 *   mpicc -O2 -o /tmp/mpi_allreduce bench/peers/mpi_allreduce.c
 *   mpirun --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo -np 2 /tmp/mpi_allreduce 5
 *
 * Rank 0 prints the median of REPS (default 5) timed all-reduces per size, after one untimed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, reps = argc > 1 ? atoi(argv[1]) : 5;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* The TF CIFAR-10 net's and Inception v3's (with aux head) trainable floats. */
    const long sizes[] = {1068298, 27145092};
    const char *names[] = {"TF CIFAR-10 net", "Inception v3"};
    for (int s = 0; s < 2; s++) {
        long n = sizes[s];
        float *send = malloc(n * sizeof(float)), *recv = malloc(n * sizeof(float));
        for (long i = 0; i < n; i++) send[i] = 1.0f;
        double *times = malloc(reps * sizeof(double));
        double medians[2];
        for (int blocking = 1; blocking >= 0; blocking--) {
            for (int r = -1; r < reps; r++) { /* r = -1: untimed */
                MPI_Barrier(MPI_COMM_WORLD);
                double start = MPI_Wtime();
                if (blocking) {
                    MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                } else {
                    MPI_Request request;
                    int done = 0;
                    MPI_Iallreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                   &request);
                    while (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
                }
                if (r >= 0) times[r] = MPI_Wtime() - start;
            }
            qsort(times, reps, sizeof(double), compare);
            medians[blocking] = times[reps / 2];
        }
        if (rank == 0)
            printf("| %s | %.2f MB | MPI_Allreduce %.1f ms | MPI_Iallreduce + MPI_Test %.1f ms |\n",
                   names[s], n * 4 / 1e6, medians[1] * 1e3, medians[0] * 1e3);
        free(send); free(recv); free(times);
    }
    MPI_Finalize();
    return 0;
}
