/* test_bf16x3.c — float32 products on AMX's bfloat16 tiles (core/bf16x3.h):
 * the three-part split loses nothing, and kernel_linear with a bf16x3 twin
 * is at least as close to double-precision sums as plain float32 loops, at
 * every shape the kernel cuts differently (partial tiles, one block, spans of
 * the depth, strides, bias, accumulation, one thread or a pool). Skipped
 * (77) where the CPU has no AMX-BF16. Needs no fixtures. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/bf16x3.h"
#include "core/kernels.h"
#include "core/pool.h"

static uint32_t random_state = 987654321u;
static uint32_t random_bits(void) {
    random_state ^= random_state << 13, random_state ^= random_state >> 17, random_state ^= random_state << 5;
    return random_state;
}
static float random_float(void) { return (float)((random_bits() >> 8) / 16777216.0 * 2.0 - 1.0); }

static double bf16_value(uint16_t part) {
    uint32_t bits = (uint32_t)part << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* hi + mid + lo == x, in double (exact there), for a million values of every sign and exponent of normal
 * float32 above 2^-100, and for values whose bits are all set below the top. */
static void test_split_is_exact(void **state) {
    (void)state;
    for (int i = 0; i < 1000000; i++) {
        uint32_t bits = random_bits();
        uint32_t exponent = 27 + (bits >> 23 & 0xFF) % 200; /* 2^-100 .. 2^100 */
        bits = (bits & 0x807FFFFFu) | exponent << 23;
        if (i < 256) bits = (bits & 0xFF800000u) | (0x7FFFFFu >> (i % 24)); /* long runs of ones */
        float x;
        memcpy(&x, &bits, sizeof x);
        uint16_t parts[3];
        bf16x3_split_value(x, parts);
        double sum = bf16_value(parts[0]) + bf16_value(parts[1]) + bf16_value(parts[2]);
        if (sum != (double)x) fail_msg("%.9g (0x%08x) splits into %.9g", x, bits, sum);
    }
    uint16_t parts[3];
    bf16x3_split_value(0.0f, parts);
    assert_true(parts[0] == 0 && parts[1] == 0 && parts[2] == 0);
    /* from 2^127 up: cut to bfloat16, never rounded up to infinity; infinities and NaNs stay so */
    const float big[] = {3.4028235e38f, -3.4e38f, 0x1p127f, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        bf16x3_split_value(big[i], parts);
        double hi = bf16_value(parts[0]);
        assert_true(parts[1] == 0 && parts[2] == 0);
        if (isnan(big[i])) assert_true(isnan(hi));
        else if (isinf(big[i])) assert_true(hi == (double)big[i]);
        else assert_true(isfinite(hi) && fabs(hi - big[i]) <= fabs(big[i]) / 128);
    }
}

/* Worst |result - double sum| over the results, for out[rows][out_stride]. */
static double worst_error(const float *out, size_t out_stride, const double *exact, size_t rows, size_t columns) {
    double worst = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < columns; c++) {
            double e = fabs(out[r * out_stride + c] - exact[r * columns + c]);
            if (e > worst) worst = e;
        }
    return worst;
}

static void test_product_as_exact_as_float32(void **state) {
    (void)state;
    /* rows: one, under a block, one block, odd blocks; depths: under a tile line, a masked tail, more than one
     * span of 24 chunks (768 features); columns: under a tile, not a multiple of 16 or 32 */
    const size_t shapes[][3] = {{1, 7, 5},     {15, 33, 17},    {16, 32, 16},  {17, 100, 31},  {50, 768, 96},
                                {77, 800, 40}, {33, 1537, 65},  {400, 96, 24}, {130, 2500, 33},
                                {100, 800, 300}}; /* (the last: two column tasks, the input split by both threads) */
    pool *threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    for (size_t shape = 0; shape < sizeof shapes / sizeof shapes[0]; shape++) {
        size_t rows = shapes[shape][0], in = shapes[shape][1], out = shapes[shape][2];
        size_t in_stride = in + 3, out_stride = out + 5;
        float *x = malloc(rows * in_stride * sizeof *x), *w = malloc(out * in * sizeof *w), *b = malloc(out * sizeof *b);
        for (size_t i = 0; i < rows * in_stride; i++) x[i] = random_float();
        for (size_t i = 0; i < out * in; i++) w[i] = random_float() * 0.05f;
        for (size_t i = 0; i < out; i++) b[i] = random_float();
        float *start = malloc(rows * out_stride * sizeof *start), *plain = malloc(rows * out_stride * sizeof *plain);
        float *tiles = malloc(rows * out_stride * sizeof *tiles);
        double *exact = malloc(rows * out * sizeof *exact);
        for (size_t i = 0; i < rows * out_stride; i++) start[i] = random_float() * 4.0f;
        kernel_bf16x3 split;
        assert_int_equal(kernel_bf16x3_make(&split, w, out, in, shape % 2 ? threads : NULL), GLIMPSE_STATUS_OK);
        kernel_weight weight = kernel_weight_f32(w);
        weight.bf16x3 = &split;
        for (int variant = 0; variant < 4; variant++) {
            int with_bias = variant & 1, accumulate = variant >> 1;
            /* double sums, and plain float32 loops, in the FMA kernels' rounding of a residual: out + (sum + b) */
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < out; c++) {
                    double d = 0.0;
                    float f = 0.0f;
                    for (size_t k = 0; k < in; k++) {
                        d += (double)x[r * in_stride + k] * w[c * in + k];
                        f += x[r * in_stride + k] * w[c * in + k];
                    }
                    if (with_bias) d += b[c], f += b[c];
                    if (accumulate) d += start[r * out_stride + c], f += start[r * out_stride + c];
                    exact[r * out + c] = d;
                    plain[r * out_stride + c] = f;
                }
            double plain_error = worst_error(plain, out_stride, exact, rows, out);
            for (int use_pool = 0; use_pool < 2; use_pool++) {
                memcpy(tiles, start, rows * out_stride * sizeof *tiles);
                kernel_linear(tiles, out_stride, x, in_stride, &weight, with_bias ? b : NULL, rows, in, out,
                              accumulate, use_pool ? threads : NULL);
                double error = worst_error(tiles, out_stride, exact, rows, out);
                /* dropping even the smallest part product kept (lo · hi, 2^-16 of a term) is ~100x over this */
                if (use_pool && error > 2.0 * plain_error + 1e-7)
                    fail_msg("%zux%zux%zu (bias %d, accumulate %d): error %g, plain float32 loops %g", rows, in,
                             out, with_bias, accumulate, error, plain_error);
                /* each row alone gives the same numbers: no result depends on the rows beside it */
                if (use_pool && rows > 1) {
                    size_t r = rows / 2;
                    float *alone = malloc(out * sizeof *alone);
                    memcpy(alone, start + r * out_stride, out * sizeof *alone);
                    kernel_linear(alone, out, x + r * in_stride, in_stride, &weight, with_bias ? b : NULL, 1, in, out,
                                  accumulate, threads);
                    assert_memory_equal(alone, tiles + r * out_stride, out * sizeof *alone);
                    free(alone);
                }
                /* the columns outside each row are untouched */
                for (size_t r = 0; r < rows; r++)
                    for (size_t c = out; c < out_stride; c++)
                        if (use_pool) assert_true(tiles[r * out_stride + c] == start[r * out_stride + c]);
            }
        }
        kernel_bf16x3_free(&split);
        free(x), free(w), free(b), free(start), free(plain), free(tiles), free(exact);
    }
    pool_free(threads);
}

int main(void) {
    if (!bf16x3_available()) {
        printf("test_bf16x3: skipped, this CPU has no AMX-BF16 (or GLIMPSE_NO_AMX is set)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_split_is_exact),
                                       cmocka_unit_test(test_product_as_exact_as_float32)};
    return cmocka_run_group_tests_name("bf16x3", tests, NULL, NULL);
}
