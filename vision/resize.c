/* resize.c — Pillow-exact resampling (libImaging/Resample.c's algorithm,
 * re-derived): for each output pixel a window of input pixels centred on
 * (x + 0.5)·scale, weights from the filter stretched by the scale when
 * shrinking, normalised, then rounded to fixed point. Each pass rounds and
 * clips to 8 bits, as Pillow does. On AVX-512 the passes run in
 * resize_avx512.c, with the same integer arithmetic (identical results). */
#include "vision/resize.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "vision/resize_kernels.h"

#define PRECISION_BITS RESIZE_PRECISION_BITS

typedef struct filter_spec {
    double support;
    double (*weight)(double x);
} filter_spec;

static double bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double bilinear(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double lanczos(double x) {
    if (-3.0 <= x && x < 3.0) return sinc(x) * sinc(x / 3);
    return 0.0;
}

static int spec_for(resize_filter filter, filter_spec *spec) {
    switch (filter) {
    case RESIZE_FILTER_BICUBIC: *spec = (filter_spec){2.0, bicubic}; return 1;
    case RESIZE_FILTER_BILINEAR: *spec = (filter_spec){1.0, bilinear}; return 1;
    case RESIZE_FILTER_LANCZOS: *spec = (filter_spec){3.0, lanczos}; return 1;
    }
    return 0;
}

int resize_filter_supported(int pillow_resample) {
    filter_spec spec;
    return spec_for((resize_filter)pillow_resample, &spec);
}

/* Per output position: first input index, count, and `window` fixed-point
 * weights. */
typedef struct coefficients {
    int window;
    int *first, *count;
    int32_t *weights; /* [out_size, window] */
} coefficients;

static void coefficients_free(coefficients *c) {
    free(c->first);
    free(c->count);
    free(c->weights);
}

static glimpse_status coefficients_make(coefficients *c, int in_size, int out_size, const filter_spec *spec) {
    double scale = (double)in_size / out_size;
    double filter_scale = scale < 1.0 ? 1.0 : scale;
    double support = spec->support * filter_scale;
    int window = (int)ceil(support) * 2 + 1;
    c->window = window;
    c->first = malloc((size_t)out_size * sizeof(int));
    c->count = malloc((size_t)out_size * sizeof(int));
    c->weights = calloc((size_t)out_size * (size_t)window, sizeof(int32_t));
    double *row = malloc((size_t)window * sizeof(double));
    if (!c->first || !c->count || !c->weights || !row) {
        free(row);
        coefficients_free(c);
        return ERROR_OOM();
    }
    for (int o = 0; o < out_size; o++) {
        double center = (o + 0.5) * scale;
        double inverse = 1.0 / filter_scale;
        int low = (int)(center - support + 0.5);
        if (low < 0) low = 0;
        int high = (int)(center + support + 0.5);
        if (high > in_size) high = in_size;
        int count = high - low;
        double total = 0.0;
        for (int i = 0; i < count; i++) {
            row[i] = spec->weight((i + low - center + 0.5) * inverse);
            total += row[i];
        }
        for (int i = 0; i < count; i++) {
            double w = total != 0.0 ? row[i] / total : row[i];
            c->weights[(size_t)o * window + i] =
                (int32_t)(w < 0 ? -0.5 + w * (1 << PRECISION_BITS) : 0.5 + w * (1 << PRECISION_BITS));
        }
        c->first[o] = low;
        c->count[o] = count;
    }
    free(row);
    return GLIMPSE_STATUS_OK;
}

static uint8_t clip8(int32_t value) {
    value >>= PRECISION_BITS;
    return value < 0 ? 0 : value > 255 ? 255 : (uint8_t)value;
}

static glimpse_status pass_horizontal(glimpse_image *out, const glimpse_image *in, const coefficients *c,
                                      bool vectorised) {
#ifdef GLIMPSE_HAVE_AVX512
    if (vectorised) { /* 16 rows at a time through two column-major scratch blocks */
        size_t columns_bytes = (size_t)in->width * 3 * 64, results_bytes = (size_t)out->width * 3 * 64;
        void *scratch = aligned_alloc(64, columns_bytes + results_bytes);
        if (!scratch) return ERROR_OOM();
        resize_horizontal_avx512(out->pixels, out->width, in->pixels, in->width, out->height, c->first, c->count,
                                 c->weights, c->window, scratch, (int32_t(*)[16])((char *)scratch + columns_bytes));
        free(scratch);
        return GLIMPSE_STATUS_OK;
    }
#endif
    for (int y = 0; y < out->height; y++) {
        const uint8_t *source = in->pixels + (size_t)y * in->width * 3;
        uint8_t *target = out->pixels + (size_t)y * out->width * 3;
        for (int x = 0; x < out->width; x++) {
            const int32_t *w = c->weights + (size_t)x * c->window;
            const uint8_t *p = source + (size_t)c->first[x] * 3;
            int32_t r = 1 << (PRECISION_BITS - 1), g = r, b = r;
            for (int i = 0; i < c->count[x]; i++) {
                r += p[3 * i] * w[i];
                g += p[3 * i + 1] * w[i];
                b += p[3 * i + 2] * w[i];
            }
            target[3 * x] = clip8(r);
            target[3 * x + 1] = clip8(g);
            target[3 * x + 2] = clip8(b);
        }
    }
    return GLIMPSE_STATUS_OK;
}

static void pass_vertical(glimpse_image *out, const glimpse_image *in, const coefficients *c, bool vectorised) {
#ifdef GLIMPSE_HAVE_AVX512
    if (vectorised) {
        resize_vertical_avx512(out->pixels, out->height, in->pixels, in->width, c->first, c->count, c->weights,
                               c->window);
        return;
    }
#endif
    size_t row = (size_t)in->width * 3;
    for (int y = 0; y < out->height; y++) {
        const int32_t *w = c->weights + (size_t)y * c->window;
        const uint8_t *source = in->pixels + (size_t)c->first[y] * row;
        uint8_t *target = out->pixels + (size_t)y * row;
        for (size_t x = 0; x < row; x++) {
            int32_t sum = 1 << (PRECISION_BITS - 1);
            for (int i = 0; i < c->count[y]; i++) sum += source[i * row + x] * w[i];
            target[x] = clip8(sum);
        }
    }
}

glimpse_status image_resize(const glimpse_image *source, int width, int height, resize_filter filter,
                            glimpse_image **out) {
    return image_resize_on(source, width, height, filter, cpu_has_avx512(), out);
}

glimpse_status image_resize_on(const glimpse_image *source, int width, int height, resize_filter filter,
                               bool vectorised, glimpse_image **out) {
    *out = NULL;
    vectorised = vectorised && cpu_has_avx512(); /* (never on a CPU without) */
    filter_spec spec;
    if (!spec_for(filter, &spec)) return error_set(GLIMPSE_STATUS_UNSUPPORTED, "resampling filter %d", (int)filter);
    if (width <= 0 || height <= 0)
        return error_set(GLIMPSE_STATUS_INVALID_ARGUMENT, "cannot resize to %dx%d", width, height);
    glimpse_status status;
    glimpse_image *current = NULL;
    /* Pillow returns an unfiltered copy when the size does not change, and
     * skips a pass whose dimension does not change. */
    int need_horizontal = width != source->width, need_vertical = height != source->height;
    if (need_horizontal) {
        coefficients c;
        if ((status = coefficients_make(&c, source->width, width, &spec))) return status;
        if ((status = image_allocate(width, source->height, &current))) {
            coefficients_free(&c);
            return status;
        }
        status = pass_horizontal(current, source, &c, vectorised);
        coefficients_free(&c);
        if (status) {
            glimpse_image_free(current);
            return status;
        }
    }
    if (need_vertical) {
        const glimpse_image *input = current ? current : source;
        coefficients c;
        glimpse_image *next;
        if ((status = coefficients_make(&c, input->height, height, &spec))) {
            glimpse_image_free(current);
            return status;
        }
        if ((status = image_allocate(input->width, height, &next))) {
            coefficients_free(&c);
            glimpse_image_free(current);
            return status;
        }
        pass_vertical(next, input, &c, vectorised);
        coefficients_free(&c);
        glimpse_image_free(current);
        current = next;
    }
    if (!current) {
        if ((status = image_allocate(source->width, source->height, &current))) return status;
        memcpy(current->pixels, source->pixels, (size_t)source->width * source->height * 3);
    }
    *out = current;
    return GLIMPSE_STATUS_OK;
}
