/* libjpeg calls for tf_jpeg.rs: TensorFlow's DecodeJpeg settings and error handling
 * (tensorflow/core/lib/jpeg/jpeg_mem.cc, `UncompressLow`; jpeg_handle.cc, its memory source).
 *
 * libjpeg reports a fatal error by calling `error_exit`, which must not return: here it
 * longjmps back to the call that began in this file (as TF's `CatchError` does), so no Rust
 * frame is ever jumped over, and the object is reset for its next image.
 *
 * Two bounds TF does not set, so that a small hostile file costs little: libjpeg's memory
 * (`max_memory_to_use`, given per image: the whole-image buffers of a progressive JPEG must fit
 * in it, as libjpeg has no backing store here) and the number of scans (`TOWERS_JPEG_MAX_SCANS`,
 * checked by a progress monitor as libjpeg-turbo's `djpeg -maxscans` does). */

#include <setjmp.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "jpeglib.h"
#include "jerror.h"

/* Scans allowed in one JPEG. Each scan of a progressive JPEG walks every block of its
 * component, and a scan of nothing but an end-of-band run takes a few bytes: a file of many
 * empty scans costs CPU in proportion to scans x blocks (Red Hat bug 1344214, libjpeg-turbo's
 * `-maxscans`). Encoders write at most a few dozen (libjpeg's own progressive script: 10 for
 * colour, 6 for grey); the report above puts real-world needs under 100. */
#define TOWERS_JPEG_MAX_SCANS 100

typedef struct towers_jpeg {
  struct jpeg_decompress_struct cinfo;
  struct jpeg_error_mgr err;
  struct jpeg_source_mgr src;
  struct jpeg_progress_mgr progress;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
} towers_jpeg;

static void error_exit(j_common_ptr cinfo) {
  towers_jpeg *self = (towers_jpeg *)cinfo->client_data;
  if (cinfo->err->msg_code == JERR_NO_BACKING_STORE) {
    /* libjpeg's way of saying its whole-image buffers do not fit in `max_memory_to_use`
     * ("Backing store not supported"): said as what it means here. */
    snprintf(self->message, sizeof self->message,
             "a multi-scan JPEG needs more than the decoder's memory limit of %ld bytes",
             cinfo->mem->max_memory_to_use);
  } else {
    (*cinfo->err->format_message)(cinfo, self->message);
  }
  longjmp(self->jump, 1);
}

/* libjpeg calls this before it reads each piece of a multi-scan JPEG's input (and in each
 * output pass); past the cap it ends the image as a fatal error would, with djpeg's message.
 * Every call comes from inside `towers_jpeg_decode`, whose setjmp catches the longjmp. */
static void progress_monitor(j_common_ptr cinfo) {
  towers_jpeg *self = (towers_jpeg *)cinfo->client_data;
  int scan = ((j_decompress_ptr)cinfo)->input_scan_number;
  if (scan > TOWERS_JPEG_MAX_SCANS) {
    snprintf(self->message, sizeof self->message, "Scan number %d exceeds maximum scans (%d)",
             scan, TOWERS_JPEG_MAX_SCANS);
    longjmp(self->jump, 1);
  }
}

/* Warnings are counted (`num_warnings`) and the image kept, as in TF; they are not printed. */
static void output_message(j_common_ptr cinfo) { (void)cinfo; }

static void init_source(j_decompress_ptr cinfo) { (void)cinfo; }

static void term_source(j_decompress_ptr cinfo) { (void)cinfo; }

/* All the data is in the buffer from the start. Needing more is TF's truncated JPEG, which it
 * refuses with `try_recover_truncated=false` (its default): FALSE suspends libjpeg, and the
 * calls below turn a suspension into an error. */
static boolean fill_input_buffer(j_decompress_ptr cinfo) {
  (void)cinfo;
  return FALSE;
}

static void skip_input_data(j_decompress_ptr cinfo, long count) {
  struct jpeg_source_mgr *src = cinfo->src;
  if (count <= 0) return;
  if ((size_t)count > src->bytes_in_buffer) count = (long)src->bytes_in_buffer;
  src->next_input_byte += count;
  src->bytes_in_buffer -= (size_t)count;
}

static void set_message(towers_jpeg *self, const char *message) {
  snprintf(self->message, sizeof self->message, "%s", message);
}

/* libjpeg's `jpeg_create_decompress`, which fails only when out of memory: 0, or -1. */
static int create(towers_jpeg *self) {
  if (setjmp(self->jump)) return -1;
  jpeg_create_decompress(&self->cinfo);
  return 0;
}

towers_jpeg *towers_jpeg_new(void) {
  towers_jpeg *self = calloc(1, sizeof *self);
  if (self == NULL) return NULL;
  self->cinfo.err = jpeg_std_error(&self->err);
  self->err.error_exit = error_exit;
  self->err.output_message = output_message;
  self->cinfo.client_data = self;
  if (create(self) != 0) {
    free(self);
    return NULL;
  }
  self->src.init_source = init_source;
  self->src.fill_input_buffer = fill_input_buffer;
  self->src.skip_input_data = skip_input_data;
  self->src.resync_to_restart = jpeg_resync_to_restart;
  self->src.term_source = term_source;
  self->cinfo.src = &self->src;
  /* After jpeg_create_decompress, which zeroes `progress`; kept from image to image. */
  self->progress.progress_monitor = progress_monitor;
  self->cinfo.progress = &self->progress;
  return self;
}

void towers_jpeg_free(towers_jpeg *self) {
  jpeg_destroy_decompress(&self->cinfo);
  free(self);
}

const char *towers_jpeg_message(const towers_jpeg *self) { return self->message; }

/* Ends the current image, whatever state it is in, so the object can take the next one. */
void towers_jpeg_abort(towers_jpeg *self) { jpeg_abort_decompress(&self->cinfo); }

/* Reads the header of the `len` bytes at `data` (which must stay alive until the image is
 * decoded or aborted) and sets TF's parameters: RGB out, or CMYK for CMYK and YCCK JPEGs (TF
 * converts those to RGB itself), fancy upsampling, scale 1/1, the inverse DCT `fast_dct` (TF's
 * default `""` and "INTEGER_FAST" are JDCT_IFAST, "INTEGER_ACCURATE" JDCT_ISLOW). Gives the
 * output's size and channels (3 or 4) and the JPEG's own component count. `max_memory` bounds
 * what libjpeg may allocate for this image's whole-image buffers (0: no bound). 0, or -1 with a
 * message and the image aborted. */
int towers_jpeg_read_header(towers_jpeg *self, const unsigned char *data, size_t len,
                            size_t max_memory, int fast_dct, unsigned *width, unsigned *height, int *channels,
                            int *components) {
  struct jpeg_decompress_struct *cinfo = &self->cinfo;
  if (setjmp(self->jump)) {
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  self->src.next_input_byte = data;
  self->src.bytes_in_buffer = len;
  if (jpeg_read_header(cinfo, TRUE) != JPEG_HEADER_OK) {
    set_message(self, "JPEG data ends within the header");
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) {
    cinfo->out_color_space = JCS_CMYK;
  } else {
    cinfo->out_color_space = JCS_RGB;
  }
  cinfo->do_fancy_upsampling = TRUE;
  cinfo->scale_num = 1;
  cinfo->scale_denom = 1;
  cinfo->dct_method = fast_dct ? JDCT_IFAST : JDCT_ISLOW;
  /* Set per image (libjpeg reads the JPEGMEM environment variable only once, at creation). */
  cinfo->mem->max_memory_to_use = max_memory > (size_t)LONG_MAX ? LONG_MAX : (long)max_memory;
  jpeg_calc_output_dimensions(cinfo);
  *width = cinfo->output_width;
  *height = cinfo->output_height;
  *channels = cinfo->output_components;
  *components = cinfo->num_components;
  return 0;
}

/* Decodes the image whose header was read into `pixels` (height rows of width * channels
 * bytes). Sets `adobe` to whether an Adobe APP14 marker came before the scan (TF's CMYK
 * formula depends on it). 0, or -1 with a message: a fatal libjpeg error, or data ending before
 * the last row (TF: "Premature end of JPEG data"). Data ending after the last row is an image,
 * as in TF, which ignores `jpeg_finish_decompress`'s suspension. */
int towers_jpeg_decode(towers_jpeg *self, unsigned char *pixels, int *adobe) {
  struct jpeg_decompress_struct *cinfo = &self->cinfo;
  size_t stride;
  if (setjmp(self->jump)) {
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  /* A multi-scan (progressive) JPEG is read whole here: FALSE is its data ending early. */
  if (!jpeg_start_decompress(cinfo)) {
    set_message(self, "Premature end of JPEG data");
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  stride = (size_t)cinfo->output_width * (size_t)cinfo->output_components;
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = pixels + (size_t)cinfo->output_scanline * stride;
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
      snprintf(self->message, sizeof self->message,
               "Premature end of JPEG data, at row %u of %u", cinfo->output_scanline,
               cinfo->output_height);
      jpeg_abort_decompress(cinfo);
      return -1;
    }
  }
  *adobe = cinfo->saw_Adobe_marker ? 1 : 0;
  if (!jpeg_finish_decompress(cinfo)) jpeg_abort_decompress(cinfo);
  return 0;
}

/* Whether libjpeg-turbo was built with its SIMD code (mozjpeg-sys with NASM found); the
 * pixels are the same either way. */
int towers_jpeg_simd(void) {
#ifdef WITH_SIMD
  return 1;
#else
  return 0;
#endif
}
