/* decode_jpeg.c — JPEG through libjpeg-turbo exactly as Pillow 9.4 decodes it:
 * 1, 3 or 4 components become L, RGB or CMYK (4 components always read with
 * Adobe's inverted polarity, as Pillow assumes), then convert("RGB"). Reads
 * the first APP1 Exif block for the orientation. Truncation is an error. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "core/error.h"
#include "vision/decoders.h"

typedef struct jpeg_failure {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} jpeg_failure;

static void jpeg_fail(j_common_ptr info) {
    jpeg_failure *failure = (jpeg_failure *)info->err;
    info->err->format_message(info, failure->message);
    longjmp(failure->jump, 1);
}

/* Warnings go nowhere, except running out of data: Pillow refuses a
 * truncated JPEG ("image file is truncated"), so do we. */
static void jpeg_message(j_common_ptr info, int level) {
    if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF) {
        jpeg_failure *failure = (jpeg_failure *)info->err;
        snprintf(failure->message, sizeof failure->message, "image file is truncated");
        longjmp(failure->jump, 1);
    }
}

static void jpeg_silent(j_common_ptr info) { (void)info; }

/* Every scan of a progressive JPEG is a pass over the whole picture's coefficients, however few bytes it takes:
 * a 172 KB file of 1,000 repeated scans over 4000 x 4000 pixels took 10 s to decode, and nothing bounds the count
 * (libjpeg-turbo's audit finding LJT-01-004; its djpeg -maxscans is the remedy). Encoders write 6 to about 20; a
 * file with more is refused. */
#define JPEG_MAX_SCANS 100

static void jpeg_count_scans(j_common_ptr info) {
    j_decompress_ptr decompress = (j_decompress_ptr)info;
    if (decompress->input_scan_number > JPEG_MAX_SCANS) {
        jpeg_failure *failure = (jpeg_failure *)info->err;
        snprintf(failure->message, sizeof failure->message, "more than %d progressive scans (no encoder writes so many)",
                 JPEG_MAX_SCANS);
        longjmp(failure->jump, 1);
    }
}

/* Pillow keeps the first APP1 that starts "Exif\0" as the image's EXIF. */
static int jpeg_orientation(const struct jpeg_decompress_struct *info) {
    for (jpeg_saved_marker_ptr marker = info->marker_list; marker; marker = marker->next)
        if (marker->marker == JPEG_APP0 + 1 && marker->data_length >= 5 && memcmp(marker->data, "Exif", 5) == 0)
            return exif_orientation(marker->data, marker->data_length);
    return ORIENTATION_ABSENT;
}

/* The smallest libjpeg-turbo scale (num/8, num 1..8) at which both output
 * sides are at least min_side; 8/8 (full size) when none smaller is. */
static void jpeg_choose_scale(struct jpeg_decompress_struct *info, int min_side) {
    info->scale_denom = 8;
    for (unsigned num = 1; num <= 8; num++) {
        info->scale_num = num;
        jpeg_calc_output_dimensions(info);
        if (num == 8 || (info->output_width >= (unsigned)min_side && info->output_height >= (unsigned)min_side))
            return;
    }
}

glimpse_status decode_jpeg(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                           glimpse_image **out, int *orientation) {
    return decode_jpeg_scaled(bytes, size, label, max_pixels, 0, out, orientation);
}

glimpse_status decode_jpeg_scaled(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                                  int min_side, glimpse_image **out, int *orientation) {
    struct jpeg_decompress_struct info;
    jpeg_failure failure;
    glimpse_image *volatile image = NULL;
    JSAMPLE *volatile row = NULL;
    struct jpeg_progress_mgr progress = {.progress_monitor = jpeg_count_scans};
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_fail;
    failure.manager.emit_message = jpeg_message;
    failure.manager.output_message = jpeg_silent;
    if (setjmp(failure.jump)) {
        jpeg_destroy_decompress(&info);
        glimpse_image_free(image);
        free(row);
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken JPEG: %s", label, failure.message);
    }
    jpeg_create_decompress(&info);
    info.progress = &progress;
    jpeg_mem_src(&info, bytes, (unsigned long)size);
    jpeg_save_markers(&info, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(&info, TRUE);
    glimpse_status status = check_dimensions(label, info.image_width, info.image_height, max_pixels);
    if (status) {
        jpeg_destroy_decompress(&info);
        return status;
    }
    *orientation = jpeg_orientation(&info);
    /* Pillow: YCbCr and RGB decode to RGB, grey to L, CMYK/YCCK to CMYK read
     * as inverted ("CMYK;I", with or without an Adobe marker), then convert("RGB"). */
    int cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
    int grey = info.jpeg_color_space == JCS_GRAYSCALE;
    info.out_color_space = cmyk ? JCS_CMYK : grey ? JCS_GRAYSCALE : JCS_RGB;
    info.dct_method = JDCT_ISLOW;
    info.do_fancy_upsampling = TRUE;
    if (min_side > 0) jpeg_choose_scale(&info, min_side);
    jpeg_start_decompress(&info);
    glimpse_image *made;
    status = image_allocate((int)info.output_width, (int)info.output_height, &made);
    if (status) {
        jpeg_destroy_decompress(&info);
        return error_prefix(status, "%s", label);
    }
    image = made;
    int components = info.output_components;
    row = malloc((size_t)info.output_width * (size_t)components);
    if (!row) {
        jpeg_destroy_decompress(&info);
        glimpse_image_free(image);
        return ERROR_OOM();
    }
    while (info.output_scanline < info.output_height) {
        uint8_t *target = image->pixels + (size_t)info.output_scanline * (size_t)info.output_width * 3;
        /* RGB rows land in the image itself: no copy */
        JSAMPROW rows[1] = {components == 3 ? target : row};
        jpeg_read_scanlines(&info, rows, 1);
        if (components == 3) continue;
        for (size_t x = 0; x < info.output_width; x++) {
            const uint8_t *p = row + x * (size_t)components;
            if (components == 1) target[3 * x] = target[3 * x + 1] = target[3 * x + 2] = p[0];
            else if (components == 3) memcpy(target + 3 * x, p, 3);
            else cmyk_to_rgb(target + 3 * x, 255 - p[0], 255 - p[1], 255 - p[2], 255 - p[3]);
        }
    }
    jpeg_finish_decompress(&info);
    jpeg_destroy_decompress(&info);
    free(row);
    *out = image;
    return GLIMPSE_STATUS_OK;
}
