#!/usr/bin/env bash
# The GPU bench (issue 49, item 5), from binaries built beforehand, on a machine without Rust:
#
#   BIN_DIR=gpu-carry DEVICE=cuda:0 bench/gpu/run.sh    # the full run, < 10 min on a GPU
#   BIN_DIR=target/debug DEVICE=wgpu bench/gpu/run.sh --smoke   # one step of each (CI, lavapipe)
#
# BIN_DIR holds bench_models, bench_towers and bench_step built with the GPU backend's feature, or
# bench/gpu/build.sh's archives (NVIDIA machines: bench.tar.xz, the binaries, the cifar10 and
# inception examples; tests.tar.xz, the GPU tests; each with the stubs their LLVM-free build
# needs, preloaded here; kernels compile with NVRTC from the CUDA toolkit at CUDA_PATH, default
# /usr/local/cuda). Default target/release.
#
# The full run, each stage cut off at DEADLINE (default 510 s from the script's start), none
# past HARD_END (570 s), so that one call of a 10-minute device lease (600 s) comes back with
# its logs and tuning; the rest still reported:
# 0. With --tests: the GPU tests on DEVICE (TOWERS_GPU_DEVICE), from build.sh's two test
#    binaries, each result against flex's, Burn's own long reductions among them (that this GPU,
#    unlike lavapipe, runs its loops to the end: gpu::burns_long_reductions_show_whether_loops_
#    stop_early); where BIN_DIR has no benches, only these.
# Tuning: a cold H200 tuned the CIFAR-10 trainer's first step for 340 s (2026-12-04), more
# than a lease can spare. So a GPU's tuning is kept between leases, in bench/gpu/tuning/<the
# GPU's name, as nvidia-smi gives it, spaces as dashes>.db, used by default (TUNING_BUNDLE
# names another, or `none` for a cold run); a GPU without one takes its architecture's
# (tuning/by-architecture, by compute capability) as a seed. Each run brings back
# $OUT/tuning.db, all it tuned and loaded, saved after each stage and however the run ends:
# commit it there under the GPU's name, and the next lease tunes only what is still missing.
# 1. Cold tuning, where BIN_DIR has the examples and no bundle was found or given: 3 steps of
#    the cifar10 example, then 2 of inception (299x299, batch 32), each timed and cut off at
#    COLD_TUNING_LIMIT (default 200 s), on built-in data (the issue's bar: both in 5 minutes);
#    the bundle becomes CubeCL's tuning database, where CubeCL looks from the working directory:
#    `target/environment/default.db` under the outermost Cargo.toml above it, else
#    `~/.cache/cubecl/default.db`.
# 2. PyTorch's steps on the same GPU, every model, f32 and bf16, where python3 has torch
#    (bench/peers/torch_step.py): nothing to tune, so a lease the tuning runs out still has
#    each ratio's other half.
# 3. The CIFAR-10 net whole: our training step in f32 on 1 tower (bench_models: forward,
#    backward, plain SGD); its step on 2 towers of the one GPU and through `Towers` on 1
#    (bench_towers; flex+GPU towers are not timed here: bench_towers pairs one device with
#    itself); the trainer's step on 1 and 2 towers counted: kernel launches and host syncs per
#    step (bench_step counts, issue 49's item 3; not in the smoke run); the step recorded as a
#    CUDA graph and replayed (bench_graph; on other devices each replay re-runs the step): its
#    pace against the eager step's, and its losses, which must follow the eager run's (in
#    ratios.txt); then its bf16 step.
# 4. Inception v3 the same (f32, graph, bf16), whose first rows tune for minutes on a GPU that
#    has not seen them (10 decisions in 146 s on the H200, 2026-12-04). Then the ratios
#    (PyTorch's ms/image over ours: above 1, we are faster).
# 5. Where the Inception v3 step's kernel launches go on this GPU: per kernel and per phase
#    (forward, backward, update; `bench_models 1 inception counts`), as time allows; then
#    ResNet-50 (224x224, batch 32), ours and PyTorch's, f32 and bf16, and their ratios.
# A check of what the binaries print that fails ends the smoke run (CI); the full run says so
# and goes on.
# Logs in $OUT (default gpu-bench-results/): eight files at most, what a device lease brings back.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BIN_DIR="${BIN_DIR:-target/release}"
DEVICE="${DEVICE:-wgpu}"
OUT="${OUT:-gpu-bench-results}"
smoke=false tests=false
for arg in "$@"; do
  case $arg in
    --smoke) smoke=true ;;
    --tests) tests=true ;;
    *) echo "usage: bench/gpu/run.sh [--smoke] [--tests]" >&2; exit 2 ;;
  esac
done
# The clock starts here, before the archives are unpacked: a device call's limit (600 s) counts
# from its start. DEADLINE cuts each stage; nothing runs past HARD_END (PyTorch's rows get the
# minute between), and the tuning is saved after each stage, so that a call cut short by the
# machine still brings back what it tuned.
start=$SECONDS
DEADLINE="${DEADLINE:-510}"
HARD_END="${HARD_END:-570}"
# Each example's cold tuning is cut off here (the issue's bar: both nets in 5 minutes), so that
# a tuning that runs long leaves the deadline time for the steps; what it tuned stays in CubeCL's
# database, and the benches' warm-ups tune the rest.
COLD_TUNING_LIMIT="${COLD_TUNING_LIMIT:-200}"
mkdir -p "$OUT"
export TOWERS_BENCH_DEVICE="$DEVICE"
# Python's lines as they come: a PyTorch run cut at its deadline kept none (block-buffered into
# tee, and SIGTERM does not flush).
export PYTHONUNBUFFERED=1
if ! $smoke && [ -n "${TOWERS_BENCH_BATCH:-}" ]; then
  echo "note: TOWERS_BENCH_BATCH=$TOWERS_BENCH_BATCH unset: the full run's rows are PyTorch's batches"
  unset TOWERS_BENCH_BATCH
fi
ours=() # the prefix our binaries run under: the unpacked archives' LLVM stubs, preloaded
if compgen -G "$BIN_DIR/*.tar.xz" >/dev/null; then
  unpacked=$(mktemp -d)
  for archive in "$BIN_DIR"/*.tar.xz; do tar -xJf "$archive" -C "$unpacked"; done
  BIN_DIR=$unpacked
  [ -f "$BIN_DIR/built-from" ] && sed 's/^/binaries: /' "$BIN_DIR/built-from"
  # Our binaries only: preloaded into python3 (torch, triton) or nvidia-smi, the stubs would
  # stand in for the LLVM symbols those programs bring themselves.
  ours=(env "LD_PRELOAD=$unpacked/libllvm-stubs.so${LD_PRELOAD:+:$LD_PRELOAD}")
fi
if [[ "$DEVICE" == cuda* ]]; then # NVRTC and the CUDA runtime, from the toolkit
  export CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}"
  export LD_LIBRARY_PATH="$CUDA_PATH/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
need() { # BINARY...: each must be in BIN_DIR
  for bin in "$@"; do
    [ -x "$BIN_DIR/$bin" ] || { echo "error: no $BIN_DIR/$bin (set BIN_DIR)" >&2; exit 2; }
  done
}
if $tests; then need gpu-tests multigpu-gpu-tests; fi
# The tests alone where only tests.tar.xz came (a device call carrying one archive).
benches=true
$tests && [ ! -e "$BIN_DIR/bench_models" ] && benches=false
if $benches; then need bench_models bench_towers; fi
if $benches && ! $smoke; then need bench_step; fi
tuning_db() { # where CubeCL keeps its tuning, seen from here (cubecl-environment's root.rs)
  local dir=$PWD root=""
  while :; do
    [ -f "$dir/Cargo.toml" ] && root=$dir
    [ "$dir" = / ] && break
    dir=$(dirname "$dir")
  done
  if [ -n "$root" ]; then echo "$root/target/environment/default.db"
  else echo "${XDG_CACHE_HOME:-$HOME/.cache}/cubecl/default.db"; fi
}
# The GPU's seed bundle, bench/gpu/tuning/<its name>.db, unless TUNING_BUNDLE names another or
# is `none` (a cold run: the issue's cold-tuning bar).
# A GPU without one of its own takes a bundle of its architecture (tuning/by-architecture: the
# compute capability, then the file) as a seed: the same kernels run there, chosen for another
# card (an H100 seeded by the H200's: a cold start took a whole lease, 2026-12-04).
if [[ -z "${TUNING_BUNDLE:-}" && "$DEVICE" == cuda* ]] && command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 | tr ' ' '-' \
    || true)
  capability=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
    | head -n 1 | tr -d ' ' || true)
  if [ -n "$gpu" ] && [ -f "$here/tuning/$gpu.db" ]; then
    TUNING_BUNDLE="$here/tuning/$gpu.db"
  elif [ -n "$capability" ]; then
    seed=$(awk -v c="$capability" '$1 == c { print $2; exit }' "$here/tuning/by-architecture" \
      2>/dev/null || true)
    if [ -n "$seed" ] && [ -f "$here/tuning/$seed" ]; then
      TUNING_BUNDLE="$here/tuning/$seed"
      echo "tuning: no bundle for ${gpu:-this GPU}; seeded from $seed (compute capability" \
        "$capability), whose choices are another card's"
    fi
  fi
fi
[ "${TUNING_BUNDLE:-}" = none ] && TUNING_BUNDLE=""
if [ -n "${TUNING_BUNDLE:-}" ]; then
  db=$(tuning_db)
  mkdir -p "$(dirname "$db")"
  # With the old database's log and Turso's index, which would be read as the new file's (a
  # second call of a lease; .ci/run says what came of it).
  rm -f "$db-wal" "$db-tshm"
  cp "$TUNING_BUNDLE" "$db"
  echo "tuning: $TUNING_BUNDLE is now $db"
fi
save_tuning() { # $OUT/tuning.db: all this run tuned and loaded so far (the next TUNING_BUNDLE)
  # The benches' shapes and precisions too (the smoke run too, so that CI runs these lines).
  # One file: CubeCL's database keeps its latest entries in `default.db-wal` beside it (a copy
  # of the database alone held 56 of a lavapipe run's 92, 2026-12-04), so a copy of both is
  # checkpointed into one, by SQLite (Turso writes SQLite's format), where python3 is there.
  local db saved
  db=$(tuning_db)
  [ -f "$db" ] || return 0
  saved=$(mktemp -d)
  cp "$db" "$saved/tuning.db"
  [ -f "$db-wal" ] && cp "$db-wal" "$saved/tuning.db-wal"
  if [ -f "$saved/tuning.db-wal" ] && ! python3 -c 'import sqlite3, sys
sqlite3.connect(sys.argv[1]).execute("pragma wal_checkpoint(truncate)").fetchone()' \
    "$saved/tuning.db"; then
    echo "warning: $OUT/tuning.db lacks the entries still in $db-wal (no python3 sqlite3)"
  fi
  cp "$saved/tuning.db" "$OUT/tuning.db.part" && mv "$OUT/tuning.db.part" "$OUT/tuning.db"
  rm -rf "$saved"
}
# Whatever ends the run (a check that fails, a stage the machine cuts): what it tuned comes back.
$smoke || trap save_tuning EXIT

# Smoke: one timed step each, the small net only, at a batch of 16 (TOWERS_BENCH_BATCH: at the
# rows' 128, lavapipe's cold tuning and steps made this 7.7 min of CI's, 2026-11-30); the full
# run times the steps after the warm-ups (which also tune every kernel the steps use, shown on
# stderr).
if $smoke; then
  reps=1 towers_reps=1 graph_steps=2 models="cifar10"
  export TOWERS_BENCH_BATCH="${TOWERS_BENCH_BATCH:-16}"
else
  reps=5 towers_reps=10 graph_steps=20 models="cifar10 inception"
fi
in_time() { # COMMAND...: runs it, cut off at the deadline (KILL 10 s after TERM, never past
  # HARD_END); says so and returns 1 if it was
  local left=$((DEADLINE - (SECONDS - start))) hard=$((HARD_END - 10 - (SECONDS - start)))
  if $smoke; then "$@"; return; fi
  [ "$left" -gt "$hard" ] && left=$hard
  [ "$left" -gt 0 ] && timeout -k 10 "$left" "$@" && return
  echo "!! cut off (DEADLINE ${DEADLINE} s, HARD_END ${HARD_END} s) or failed: $*"
  return 1
}
failed() { # after a stage that failed: the smoke run (CI) stops there, the full run goes on
  if $smoke; then exit 1; fi
}

if $tests; then
  echo "== the GPU tests on $DEVICE, against flex (log: $OUT/gpu-tests.log)"
  for bin in gpu-tests multigpu-gpu-tests; do
    log=$(mktemp)
    TOWERS_GPU_DEVICE="$DEVICE" in_time "${ours[@]}" "$BIN_DIR/$bin" gpu:: >"$log" 2>&1 || failed
    echo "$bin: $(grep -E '^test result' "$log" || echo 'no result')"
    grep -E -A3 '^---- |panicked' "$log" | head -n 20 || true
    cat "$log" >>"$OUT/gpu-tests.log"
  done
  $benches || { echo "no bench binaries in $BIN_DIR: the tests alone"; exit 0; }
fi

if ! $smoke && [ -z "${TUNING_BUNDLE:-}" ] && [ -x "$BIN_DIR/cifar10" ]; then
  echo "== cold tuning: the examples' first steps on $DEVICE, on built-in data"
  for run in "cifar10 --max-steps 3" "inception --max-steps 2 --image-size 299 --batch-size 32"; do
    t0=$SECONDS outcome="trained"
    # shellcheck disable=SC2086 # the example's arguments, split on purpose
    # KILL 5 s after TERM: the examples take a first signal as "checkpoint after this step",
    # and a step that tunes goes on for minutes (cifar10's ran to 355 s of a 170 s limit).
    in_time timeout -k 5 "$COLD_TUNING_LIMIT" "${ours[@]}" "$BIN_DIR/"$run --devices "$DEVICE" --log-every 1 \
      --train-dir "$(mktemp -d)" \
      --save-tuning "$OUT/tuning.db" >>"$OUT/cold-tuning.log" 2>&1 \
      || { outcome="FAILED or cut (limit ${COLD_TUNING_LIMIT} s)"; failed; }
    echo "${run%% *}: $outcome in $((SECONDS - t0)) s (its tuning lines: $OUT/cold-tuning.log)"
  done
fi

time_ours() { # PRECISION MODEL...: our steps in that precision, added to ours.txt
  local precision=$1 model
  shift
  for model in "$@"; do
    in_time "${ours[@]}" "$BIN_DIR/bench_models" "$reps" "$model" "$precision" | tee -a "$OUT/ours.txt" || failed
  done
}
time_torch() { # MODEL...: PyTorch's steps in f32 and bf16, added to torch.txt
  # Its own minute past the deadline (never past HARD_END): the peer is what every ratio needs.
  local list
  list=$(IFS=,; echo "$*")
  DEADLINE=$((DEADLINE + 60)) in_time python3 "$here/../peers/torch_step.py" \
    --models "$list" --precisions f32,bf16 | tee -a "$OUT/torch.txt" || failed
}
graph() { # MODEL: our step replayed from a recording (CUDA graphs, issue 49's item 4), against
  # eager, added to ratios.txt; bench_graph fails where the replays' losses leave the eager run's
  [ -x "$BIN_DIR/bench_graph" ] || return 0
  echo "== $1: our step replayed from a recording (bench_graph), against eager"
  in_time "${ours[@]}" "$BIN_DIR/bench_graph" "$graph_steps" "$1" | tee -a "$OUT/ratios.txt" || failed
}
bad() { # MESSAGE: a check of what the binaries print failed: the smoke run (CI) stops, the full
  # run says so and goes on (its later figures and its tuning are worth the lease)
  echo "error: $1" >&2
  $smoke && exit 1
  return 0
}

torch_ok=false
if ! $smoke && python3 -c "import torch" 2>/dev/null; then
  torch_ok=true
  : >"$OUT/torch.txt"
fi
# PyTorch's rows first, every model in one process (a minute or two, nothing to tune), so that
# a lease the tuning runs out still has each ratio's other half.
: >"$OUT/ratios.txt"
if $torch_ok; then
  echo "== PyTorch's steps on the same GPU, f32 and bf16 (ms/image)"
  # shellcheck disable=SC2086 # the model names, split on purpose
  time_torch $models
fi
# Then the small net whole (its tuning is in the seed bundles), then each larger one; f32 before
# bf16: the issue's bars are f32's, and a lease's first bf16 rows tune cold for minutes.
echo "== cifar10: our step on $DEVICE in f32 (bench_models, ms/image)"
time_ours f32 cifar10
if $smoke; then # the binaries took the smoke's batch: its row says so
  row_batch=$(awk 'index($0, "CIFAR-10 net, 24x24 (f32)") == 1 { print $(NF-3) }' "$OUT/ours.txt")
  [ "$row_batch" = "$TOWERS_BENCH_BATCH" ] \
    || bad "bench_models ran batch '$row_batch', not TOWERS_BENCH_BATCH=$TOWERS_BENCH_BATCH"
fi
echo "== 1 tower and 2 towers of $DEVICE (bench_towers, CIFAR-10 net without LRN)"
in_time "${ours[@]}" "$BIN_DIR/bench_towers" "$towers_reps" | tee "$OUT/towers.txt" || failed
if ! $smoke; then # (lavapipe counts these in bench/README.md; on CI they would tune for minutes)
  echo "== the CIFAR-10 trainer's step through Towers on 1 and 2 towers of $DEVICE: kernel" \
    "launches and host syncs (bench_step counts; per kernel in towers.txt)"
  in_time "${ours[@]}" "$BIN_DIR/bench_step" 3 counts >>"$OUT/towers.txt" 2>&1 || failed
  grep -E 'launches per step|host syncs' "$OUT/towers.txt" || true
fi
graph cifar10
$smoke || save_tuning
echo "== cifar10: our step on $DEVICE in bf16 (bench_models, ms/image)"
time_ours bf16 cifar10
for model in $models; do
  [ "$model" = cifar10 ] && continue
  echo "== $model: our step on $DEVICE in f32 (bench_models, ms/image)"
  time_ours f32 "$model"
  $smoke || save_tuning
  graph "$model"
  echo "== $model: our step on $DEVICE in bf16, as time allows"
  time_ours bf16 "$model"
done

# Ratios: PyTorch's train-step ms/image over ours, per model and precision. bench_models'
# columns, as ours_ms reads them: a change there must come here too.
columns="model batch forward ms/image train step ms/image launches/step"
header=$(grep -s -m1 '^model ' "$OUT/ours.txt" | tr -s ' ' || true)
# (No header at all: no bench_models run finished, which only the full run forgives.)
if [ "$header" != "$columns" ] && { [ -n "$header" ] || $smoke; }; then
  bad "bench_models' columns are '$header'; this script reads '$columns'"
fi
ours_ms() { # MODEL-NAME PRECISION -> our train step ms/image (a row's last fields: train step
  # ms/image, launches/step); empty without the row (a precision the device lacks), an error
  # where that field is not a time
  local ms
  ms=$(awk -v name="$1 ($2)" 'index($0, name) == 1 { print $(NF-1) }' "$OUT/ours.txt" | tail -n 1)
  if [ -n "$ms" ] && ! [[ "$ms" =~ ^[0-9]+\.[0-9]+$ ]]; then
    bad "bench_models' row for $1 ($2) has '$ms' where its train step ms/image goes"
    return 0
  fi
  echo "$ms"
}
ratios() { # MODEL...: a line per model and precision, PyTorch's ms/image over ours
  local model name precision ours theirs
  for model in "$@"; do
    case $model in
      cifar10) name="CIFAR-10 net, 24x24";;
      inception) name="Inception v3, 299x299";;
      resnet50) name="ResNet-50, 224x224";;
      *) name=$model;;
    esac
    for precision in f32 bf16; do
      ours=$(ours_ms "$name" "$precision") theirs=""
      $torch_ok && theirs=$(awk -v m="$model" -v p="$precision" \
        '$1 == m && $2 == p { print $4 }' "$OUT/torch.txt")
      if [ -n "$ours" ] && [ -n "$theirs" ]; then
        awk -v o="$ours" -v t="$theirs" -v m="$model" -v p="$precision" \
          'BEGIN { printf "%-10s %-5s ours %8.3f  torch %8.3f  ratio %.2fx\n", m, p, o, t, t / o }'
      elif $torch_ok; then # a run cut at the deadline, or a precision the device lacks
        echo "$model $precision: ours ${ours:-?}, torch ${theirs:-?} ms/image (no ratio)"
      else
        echo "$model $precision: ours ${ours:-?} ms/image (no torch here: no ratio)"
      fi
    done
  done
}
echo "== ratios (PyTorch ms/image / ours; above 1: faster than PyTorch)"
# shellcheck disable=SC2086 # the model names, split on purpose
ratios $models | tee -a "$OUT/ratios.txt"
if ! $smoke; then
  echo "== where Inception v3's launches go on $DEVICE (log: $OUT/launches.txt)"
  in_time "${ours[@]}" "$BIN_DIR/bench_models" 1 inception counts >"$OUT/launches.txt" 2>&1 || failed
  grep -E 'launches$' "$OUT/launches.txt" || true
  echo "== ResNet-50 on $DEVICE, ours and PyTorch's, as time allows"
  time_ours f32 resnet50
  time_ours bf16 resnet50
  if $torch_ok; then time_torch resnet50; fi
  ratios resnet50 | tee -a "$OUT/ratios.txt"
fi
save_tuning
echo "done in $((SECONDS - start)) s; logs in $OUT/"
