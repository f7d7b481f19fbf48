/* test_core.c — core kernels against their plain-loop twins and known
 * values, the thread pool, the string map and error messages. Needs no
 * fixtures. */
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/kernels.h"
#include "core/kernels_avx512.h"
#include "core/openblas.h"
#include "core/quantize.h"
#include "core/pool.h"
#include "core/strmap.h"
#include "tests/support.h"
#include "core/encoder_layer.h"

static void test_linear_matches_reference(void **state) {
    (void)state;
    /* odd sizes on purpose, with strides, single- and multi-threaded (without a
     * pool the AVX-512 kernel cuts the depth into blocks). Rows: one (sgemv), a few
     * (dot products), panels of 48 with 0, 1-4 (1 and 2 folded into the micro-kernel, 3 and 4 dot products after
     * it, in pairs and alone) and 5-15 (padded) rows left over, and 49-64 rows left as two panels of 32 (64, 112,
     * 400; 65 with one row folded); depths with a masked tail (without a pool, also a tail in each block of the
     * depth: 18 and 65 rows); columns not a multiple of 8. */
    const size_t shapes[][3] = {{1, 7, 5},     {17, 48, 100}, {50, 768, 3072}, {3, 129, 257}, {16, 300, 13},
                                {29, 517, 40}, {77, 512, 100}, {400, 96, 24},  {98, 33, 9},   {35, 20, 11},
                                {52, 70, 41},  {18, 300, 13}, {65, 517, 20},   {64, 300, 40}, {112, 96, 72}};
    pool *threads;
    assert_int_equal(pool_create(3, &threads), GLIMPSE_STATUS_OK);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2], in_stride = in + 3, out_stride = out + 2;
        float *x = test_random_array(rows * in_stride), *w = test_random_array(out * in), *b = test_random_array(out);
        float *fast = calloc(rows * out_stride, sizeof *fast), *slow = calloc(rows * out_stride, sizeof *slow);
        const kernel_weight weight = kernel_weight_f32(w);
        for (int use_pool = 0; use_pool < 2; use_pool++)
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                kernel_linear(fast, out_stride, x, in_stride, &weight, with_bias ? b : NULL, rows, in, out, false,
                              use_pool ? threads : NULL);
                kernel_linear_reference(slow, out_stride, x, in_stride, w, with_bias ? b : NULL, rows, in, out);
                for (size_t r = 0; r < rows; r++) {
                    double d = relative_difference(fast + r * out_stride, slow + r * out_stride, out);
                    if (d > 1e-5 * sqrt((double)in)) fail_msg("linear %zux%zux%zu differs by %g", rows, in, out, d);
                }
                /* accumulated on top: twice the product (plus bias twice) */
                kernel_linear(fast, out_stride, x, in_stride, &weight, with_bias ? b : NULL, rows, in, out, true,
                              use_pool ? threads : NULL);
                for (size_t r = 0; r < rows; r++) {
                    for (size_t o = 0; o < out; o++) slow[r * out_stride + o] *= 2.0f;
                    double d = relative_difference(fast + r * out_stride, slow + r * out_stride, out);
                    if (d > 1e-5 * sqrt((double)in))
                        fail_msg("linear accumulated %zux%zux%zu differs by %g", rows, in, out, d);
                }
            }
        free(x), free(w), free(b), free(fast), free(slow);
    }
    pool_free(threads);
}

/* kernel_linear_rowwise gives each row bit for bit what a one-row kernel_linear gives it, at any row count and
 * on every path (test_core_without_avx512 runs this on OpenBLAS's), and kernel_linear does too wherever
 * kernel_linear_rows_exact says so: continuous batching's captions rest on it (fusion/caption_batch.c). Shapes:
 * products too small to split over the threads at one row but not at many, columns not a multiple of 8 or 4. */
/* A float32 product split over 2 or 3 threads gives a one-thread pool's bits: the AVX-512 kernel computes each
 * column alike whichever task takes it, and the tasks balance their columns between them (taking the others'
 * once theirs are done, pass by pass over 48 rows). Every call starts from NaN, so a column no task computed
 * fails it; accumulated on top, a column computed twice does. (Run last: the values it draws from the shared
 * random sequence leave the other tests' data as they were.) */
static void test_linear_split_is_one_thread(void **state) {
    (void)state;
    if (!cpu_has_avx512()) skip(); /* (OpenBLAS's sums depend on how the columns are split) */
    const size_t shapes[][3] = {{50, 768, 3072}, {77, 512, 1536}, {400, 96, 200}, {17, 48, 100}, {52, 70, 1000},
                                {130, 300, 264}, {64, 256, 520}};
    pool *pools[3];
    for (int p = 0; p < 3; p++) assert_int_equal(pool_create(p + 1, &pools[p]), GLIMPSE_STATUS_OK);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2], in_stride = in + 3, out_stride = out + 2;
        size_t cells = rows * out_stride;
        float *x = test_random_array(rows * in_stride), *w = test_random_array(out * in), *b = test_random_array(out);
        float *one = malloc(cells * sizeof *one), *split = malloc(cells * sizeof *split);
        const kernel_weight weight = kernel_weight_f32(w);
        for (int accumulate = 0; accumulate < 2; accumulate++) {
            for (size_t i = 0; i < cells; i++) one[i] = accumulate ? (float)(i % 7) : NAN;
            kernel_linear(one, out_stride, x, in_stride, &weight, b, rows, in, out, accumulate, pools[0]);
            for (int p = 1; p < 3; p++)
                for (int round = 0; round < 5; round++) { /* (which task takes which columns varies) */
                    for (size_t i = 0; i < cells; i++) split[i] = accumulate ? (float)(i % 7) : NAN;
                    kernel_linear(split, out_stride, x, in_stride, &weight, b, rows, in, out, accumulate, pools[p]);
                    for (size_t r = 0; r < rows; r++)
                        if (memcmp(split + r * out_stride, one + r * out_stride, out * sizeof *one) != 0)
                            fail_msg("linear %zux%zux%zu on %d threads (accumulate %d): row %zu differs from one "
                                     "thread's", rows, in, out, p + 1, accumulate, r);
                }
        }
        free(x), free(w), free(b), free(one), free(split);
    }
    for (int p = 0; p < 3; p++) pool_free(pools[p]);
}

static void test_linear_rowwise_is_row_exact(void **state) {
    (void)state;
    const size_t shapes[][2] = {{32, 99}, {96, 1003}, {768, 300}};
    const size_t row_counts[] = {2, 3, 5, 15, 16, 17, 48, 70};
    pool *threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t in = shapes[s][0], out = shapes[s][1], most = 70;
        float *x = test_random_array(most * in), *w = test_random_array(out * in), *b = test_random_array(out);
        float *alone = calloc(most * out, sizeof *alone), *together = calloc(most * out, sizeof *together);
        const kernel_weight weight = kernel_weight_f32(w);
        for (size_t r = 0; r < most; r++)
            kernel_linear(alone + r * out, out, x + r * in, in, &weight, b, 1, in, out, false, threads);
        for (size_t c = 0; c < sizeof row_counts / sizeof row_counts[0]; c++) {
            size_t rows = row_counts[c];
            kernel_linear_rowwise(together, out, x, in, &weight, b, rows, in, out, false, threads);
            if (memcmp(together, alone, rows * out * sizeof(float)) != 0)
                fail_msg("rowwise %zu rows x %zu x %zu differs from one row at a time", rows, in, out);
            if (!kernel_linear_rows_exact(rows)) continue;
            kernel_linear(together, out, x, in, &weight, b, rows, in, out, false, threads);
            if (memcmp(together, alone, rows * out * sizeof(float)) != 0)
                fail_msg("%zu rows x %zu x %zu, said to be row-exact, differ from one row at a time", rows, in, out);
        }
        free(x), free(w), free(b), free(alone), free(together);
    }
    assert_true(kernel_linear_rows_exact(1));
    assert_true(kernel_linear_rows_exact(KERNEL_LINEAR_FEW_ROWS - 1) == cpu_has_avx512());
    assert_false(kernel_linear_rows_exact(KERNEL_LINEAR_FEW_ROWS));
    pool_free(threads);
}

/* Random finite 16-bit weights: float16 with subnormals among them, or bfloat16. */
static uint16_t *random_halves(size_t n, weight_type type) {
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = test_random_bits() >> 8;
        uint16_t sign = (uint16_t)((bits & 1) << 15), mantissa = (uint16_t)((bits >> 1) & 0x7f);
        if (type == WEIGHT_TYPE_F16) /* exponents 0 (subnormal) .. 16 */
            h[i] = (uint16_t)(sign | ((bits >> 8) % 17) << 10 | (uint16_t)((bits >> 13) & 0x3ff));
        else /* about 2^-8 .. 2 */
            h[i] = (uint16_t)(sign | (uint16_t)(119 + (bits >> 8) % 9) << 7 | mantissa);
    }
    return h;
}

static void test_linear_16bit_weights(void **state) {
    (void)state;
    /* A weight kept 16-bit gives what its float32 widening gives: bit for bit
     * on the AVX-512 kernels (the same sums in the same order), within
     * rounding on the plain loops. Shapes cover the dot-product tiles (1-15
     * rows), panels with remainders, masked depth tails and partial columns;
     * from 96 rows, the kernel that carries its sums over blocks of the depth
     * (995 x 1000: 21 panels a pass, 4 blocks and 3 rows left for the dot
     * products; 1500 rows: two passes) against one block of the whole depth. From 96 rows, too, the remainder's
     * dot products (chained_product) against the float32 kernel's fold of 1 or 2 rows into the micro-kernel:
     * 97 and 146 rows, with a masked tail. */
    const size_t shapes[][3] = {{1, 7, 5},      {3, 129, 257},  {15, 40, 33},  {17, 48, 100},
                                {50, 768, 64},  {29, 517, 40},  {98, 33, 9},   {400, 96, 24},
                                {995, 1000, 40}, {1500, 300, 17}, {97, 300, 17}, {146, 70, 24}};
    pool *threads;
    assert_int_equal(pool_create(3, &threads), GLIMPSE_STATUS_OK);
    bool exact = cpu_has_avx512();
    for (int t = 0; t < 2; t++) {
        weight_type type = t ? WEIGHT_TYPE_BF16 : WEIGHT_TYPE_F16;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            size_t rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2], in_stride = in + 3, out_stride = out + 2;
            float *x = test_random_array(rows * in_stride), *b = test_random_array(out), *wide = malloc(out * in * sizeof *wide);
            uint16_t *half = random_halves(out * in, type);
            kernel_widen(wide, half, type, out * in);
            float *a = test_random_array(rows * out_stride), *c = malloc(rows * out_stride * sizeof *c);
            memcpy(c, a, rows * out_stride * sizeof *c);
            const kernel_weight w = {.data = half, .type = type}, w_wide = kernel_weight_f32(wide);
            for (int use_pool = 0; use_pool < 2; use_pool++)
                for (int accumulate = 0; accumulate < 2; accumulate++) {
                    pool *p = use_pool ? threads : NULL;
                    kernel_linear(a, out_stride, x, in_stride, &w, b, rows, in, out, accumulate, p);
                    kernel_linear(c, out_stride, x, in_stride, &w_wide, b, rows, in, out, accumulate, p);
                    for (size_t r = 0; r < rows; r++) {
                        double d = relative_difference(a + r * out_stride, c + r * out_stride, out);
                        if (exact ? d != 0.0 : d > 1e-5 * sqrt((double)in))
                            fail_msg("%s weights %zux%zux%zu (pool %d, accumulate %d) differ by %g",
                                     t ? "bf16" : "f16", rows, in, out, use_pool, accumulate, d);
                    }
                }
            /* int8 from 16-bit weights (quantized over the pool's 3 threads): the same as from their widening (on one),
             * in either layout */
            for (q8_layout layout = Q8_LAYOUT_ROWS; layout <= Q8_LAYOUT_STRIPS; layout++) {
                kernel_q8 from_half, from_wide;
                assert_int_equal(kernel_q8_quantize(&from_half, &w, out, in, layout, threads), GLIMPSE_STATUS_OK);
                assert_int_equal(kernel_q8_quantize(&from_wide, &w_wide, out, in, layout, NULL), GLIMPSE_STATUS_OK);
                size_t columns = layout == Q8_LAYOUT_ROWS ? out + 16 : (out + 47) / 48 * 48;
                assert_memory_equal(from_half.weight, from_wide.weight, columns * from_wide.depth + 64);
                assert_memory_equal(from_half.scale, from_wide.scale, out * sizeof(float));
                assert_memory_equal(from_half.sum, from_wide.sum, out * sizeof(int32_t));
                kernel_q8_free(&from_half), kernel_q8_free(&from_wide);
            }
            free(x), free(b), free(wide), free(half), free(a), free(c);
        }
    }
    pool_free(threads);
}

/* kernel_widen (vectorised where AVX-512 runs) against the one-value conversions, every float16 and bfloat16
 * value, at an odd length and an odd start (any alignment): the same bits (NaNs: NaN). */
static void test_widen_every_16bit_value(void **state) {
    (void)state;
    uint16_t *values = malloc((65536 + 1) * sizeof *values);
    float *wide = malloc(65536 * sizeof *wide);
    for (int type = 0; type < 2; type++) {
        for (uint32_t v = 0; v < 65536; v++) values[v + 1] = (uint16_t)v;
        kernel_widen(wide, values + 1, type ? WEIGHT_TYPE_BF16 : WEIGHT_TYPE_F16, 65535);
        for (uint32_t v = 0; v < 65535; v++) {
            float want = type ? kernel_bf16_to_f32((uint16_t)v) : kernel_f16_to_f32((uint16_t)v);
            if (isnan(want) ? !isnan(wide[v]) : memcmp(&want, &wide[v], sizeof want) != 0)
                fail_msg("%s 0x%04x widened to %a, not %a", type ? "bfloat16" : "float16", v, wide[v], want);
        }
    }
    free(values), free(wide);
}

static void test_linear_q8_matches_integer_reference(void **state) {
    (void)state;
    /* Both layouts of the weights (rows; strips, which VNNI or else the plain loops run).
     * rows: one, a few (dot tiles), panels with 0, 1-4 and 5-15 rows left over;
     * depths not a multiple of 4 or of 64; columns not a multiple of 8. Products
     * of more than 128 columns and 1e5 multiply-adds are split into column tasks
     * over the 2-thread pool, which share the input quantized once (16 rows or
     * more); the others, and every product on the 1-thread pool, quantize it in
     * their scratch a chunk of rows at a time; without a pool, a row at a time.
     * On VNNI the column tasks of the strips take their columns 48 at a time and
     * take the others' once theirs are done (also over a 3-thread pool): every
     * call starts from NaN, so a column no task computed shows. */
    const size_t shapes[][3] = {{1, 7, 5},      {3, 129, 257}, {16, 300, 13},   {17, 48, 100},  {29, 517, 40},
                                {50, 768, 96},  {77, 64, 100}, {400, 96, 24},   {700, 1540, 9}, {1, 768, 300},
                                {5, 200, 520},  {50, 768, 300}, {53, 64, 260},  {100, 130, 1000},
                                {130, 1540, 260}, {400, 200, 300}, {20, 22000, 5}};
    /* (700 and 130 x 1540: several scratch-sized chunks on AVX2; 400 x 200 x 300: 25 parts the two tasks prepare;
     * 20 x 22000: rows so deep that 47 fill a thread's scratch) */
    pool *threads, *one_thread, *three_threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    assert_int_equal(pool_create(1, &one_thread), GLIMPSE_STATUS_OK);
    assert_int_equal(pool_create(3, &three_threads), GLIMPSE_STATUS_OK);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2], in_stride = in + 3, out_stride = out + 2;
        float *x = test_random_array(rows * in_stride), *w = test_random_array(out * in), *b = test_random_array(out);
        float *fast = calloc(rows * out_stride, sizeof *fast), *exact = calloc(rows * out_stride, sizeof *exact);
        float *real = calloc(rows * out_stride, sizeof *real);
        for (q8_layout layout = Q8_LAYOUT_ROWS; layout <= Q8_LAYOUT_STRIPS; layout++) {
            kernel_q8 q;
            kernel_weight weight = kernel_weight_f32(w);
            /* (quantized over the 2-thread pool; kernel_q8_quantize's tasks share out its 48-column blocks) */
            assert_int_equal(kernel_q8_quantize(&q, &weight, out, in, layout, threads), GLIMPSE_STATUS_OK);
            for (size_t c = 0; c < out; c++) { /* the weights: per-row scale, rounding to nearest even, the sums */
                float largest = 0;
                for (size_t k = 0; k < in; k++) largest = fmaxf(largest, fabsf(w[c * in + k]));
                float scale = largest / 127.0f, inverse = 1.0f / scale;
                int32_t sum = 0;
                assert_float_equal(q.scale[c], scale, 0);
                for (size_t k = 0; k < q.depth; k++) {
                    int expected = k < in ? (int)nearbyintf(w[c * in + k] * inverse) : 0;
                    assert_int_equal(q.weight[q8_weight_offset(&q, c, k)], expected);
                    sum += expected;
                }
                assert_int_equal(q.sum[c], sum);
            }
            /* the oracle: the integer sums of quantize.h's definition, finished the same way */
            uint8_t *u8 = malloc(q.depth), *u8_fast = malloc(q.depth);
            for (size_t r = 0; r < rows; r++) {
                float scale = q8_quantize_row(u8, x + r * in_stride, in, q.depth);
#ifdef GLIMPSE_HAVE_AVX512
                if (cpu_has_avx512_vnni()) {
                    assert_float_equal(q8_quantize_row_avx512(u8_fast, x + r * in_stride, in, q.depth), scale, 0);
                    assert_memory_equal(u8_fast, u8, q.depth);
                }
#endif
                for (size_t c = 0; c < out; c++) {
                    int32_t total = 0;
                    for (size_t k = 0; k < q.depth; k++)
                        total += (int32_t)u8[k] * q.weight[q8_weight_offset(&q, c, k)];
                    exact[r * out_stride + c] = q8_finish(total, q.sum[c], scale, q.scale[c], b + c);
                }
            }
            weight.q8 = &q; /* the int8 twin, which kernel_linear then takes */
            /* (the 2-thread pool last: its results are checked below) */
            pool *pools[] = {NULL, one_thread, three_threads, threads};
            for (size_t p = 0; p < 4; p++) {
                for (size_t i = 0; i < rows * out_stride; i++) fast[i] = NAN;
                kernel_linear(fast, out_stride, x, in_stride, &weight, b, rows, in, out, false, pools[p]);
                for (size_t r = 0; r < rows; r++)
                    for (size_t c = 0; c < out; c++) {
                        float got = fast[r * out_stride + c], want = exact[r * out_stride + c];
                        if (got != want)
                            fail_msg("q8 %zux%zux%zu (%s), %d threads, [%zu][%zu]: %.9g, integer reference %.9g",
                                     rows, in, out, layout ? "strips" : "rows", pool_threads(pools[p]), r, c, got,
                                     want);
                    }
            }
            kernel_linear_reference(real, out_stride, x, in_stride, w, b, rows, in, out);
            /* and close to the float product: int8 keeps about 2 significant digits per term,
             * so each row's error is a small fraction of its size (bias left out of both) */
            for (size_t r = 0; r < rows; r++) {
                double error = 0, size = 0;
                for (size_t c = 0; c < out; c++) {
                    double d = fast[r * out_stride + c] - real[r * out_stride + c], v = real[r * out_stride + c] - b[c];
                    error += d * d, size += v * v;
                }
                if (sqrt(error / size) > 0.02)
                    fail_msg("q8 %zux%zux%zu row %zu is %g from the float product", rows, in, out, r,
                             sqrt(error / size));
            }
            /* accumulate: on top of what is there */
            kernel_linear(fast, out_stride, x, in_stride, &weight, b, rows, in, out, true, threads);
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < out; c++)
                    assert_float_equal(fast[r * out_stride + c], 2.0f * exact[r * out_stride + c], 0);
            kernel_q8_free(&q);
            free(u8), free(u8_fast);
        }
        free(x), free(w), free(b), free(fast), free(exact), free(real);
    }
    pool_free(threads);
    pool_free(one_thread);
    pool_free(three_threads);
}

/* kernel_linear_after's steps in the tests below: a LayerNorm from source into the product's input, or GELU in
 * place on it; made[r] counts the times row r was made. */
typedef struct after_step {
    float *in;
    const float *source; /* NULL: in place */
    const float *weight, *bias;
    size_t width, in_stride;
    atomic_int *made;
} after_step;

static void after_step_run(const void *argument, size_t first, size_t count) {
    const after_step *step = argument;
    for (size_t r = first; r < first + count; r++) {
        float *row = step->in + r * step->in_stride;
        if (step->source)
            kernel_layernorm(row, step->source + r * step->width, step->weight, step->bias, 1, step->width, 1e-5f);
        else
            kernel_gelu(row, step->width);
        atomic_fetch_add(&step->made[r], 1);
    }
}

static void test_linear_after_is_step_then_linear(void **state) {
    (void)state;
    /* kernel_linear_after gives kernel_rows_run then kernel_linear bit for bit, each row made once: float32 and
     * both int8 layouts, without a pool, on one thread and on two. On two threads with VNNI, 50, 77 and 400 rows
     * at int8 (either layout) are where the column tasks make each 16-row part just before they quantize it (4, 5
     * and 25 parts between 2 tasks); a few rows, a one-task product and float32 make every row before the product. */
    const size_t shapes[][3] = {{50, 768, 300}, {77, 512, 1536}, {5, 200, 520}, {40, 64, 40}, {400, 96, 300}};
    pool *two, *one;
    assert_int_equal(pool_create(2, &two), GLIMPSE_STATUS_OK);
    assert_int_equal(pool_create(1, &one), GLIMPSE_STATUS_OK);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2], in_stride = in + 16, out_stride = out + 2;
        float *source = test_random_array(rows * in), *w = test_random_array(out * in), *b = test_random_array(out);
        float *norm_w = test_random_array(in), *norm_b = test_random_array(in);
        float *x = calloc(rows * in_stride, sizeof *x), *want_in = calloc(rows * in_stride, sizeof *want_in);
        float *got = calloc(rows * out_stride, sizeof *got), *want = calloc(rows * out_stride, sizeof *want);
        atomic_int *made = calloc(rows, sizeof *made);
        kernel_q8 q[2];
        for (q8_layout layout = Q8_LAYOUT_ROWS; layout <= Q8_LAYOUT_STRIPS; layout++)
            assert_int_equal(kernel_q8_quantize(&q[layout], &(kernel_weight){.data = w}, out, in, layout, two),
                             GLIMPSE_STATUS_OK);
        pool *pools[] = {NULL, one, two};
        for (int kind = 0; kind < 3; kind++)             /* float32, int8 rows, int8 strips */
            for (int in_place = 0; in_place < 2; in_place++) /* GELU in place on x, or a LayerNorm into it */
                for (size_t p = 0; p < 3; p++) {
                    kernel_weight weight = kernel_weight_f32(w);
                    if (kind) weight.q8 = &q[kind - 1];
                    after_step step = {x, in_place ? NULL : source, norm_w, norm_b, in, in_stride, made};
                    kernel_rows_step before = {after_step_run, &step, PROFILE_NORMS};
                    for (size_t r = 0; r < rows; r++) /* (GELU's input: the source's rows) */
                        memcpy(x + r * in_stride, source + r * in, in * sizeof *x), atomic_init(&made[r], 0);
                    kernel_linear_after(got, out_stride, x, in_stride, &before, &weight, b, rows, in, out, false,
                                        pools[p]);
                    memcpy(want_in, x, rows * in_stride * sizeof *x);
                    for (size_t r = 0; r < rows; r++) {
                        if (atomic_load(&made[r]) != 1)
                            fail_msg("%zux%zux%zu kind %d: row %zu made %d times", rows, in, out, kind, r,
                                     atomic_load(&made[r]));
                        memcpy(x + r * in_stride, source + r * in, in * sizeof *x);
                    }
                    kernel_rows_run(&before, rows, in, pools[p]);
                    assert_memory_equal(x, want_in, rows * in_stride * sizeof *x);
                    kernel_linear(want, out_stride, x, in_stride, &weight, b, rows, in, out, false, pools[p]);
                    for (size_t r = 0; r < rows; r++)
                        if (memcmp(got + r * out_stride, want + r * out_stride, out * sizeof *got))
                            fail_msg("%zux%zux%zu kind %d, %s, %d threads: row %zu differs", rows, in, out, kind,
                                     in_place ? "in place" : "LayerNorm", pool_threads(pools[p]), r);
                }
        kernel_q8_free(&q[0]), kernel_q8_free(&q[1]);
        free(source), free(w), free(b), free(norm_w), free(norm_b), free(x), free(want_in), free(got), free(want);
        free(made);
    }
    pool_free(two);
    pool_free(one);
}

static void test_attention_matches_reference(void **state) {
    (void)state;
    pool *threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    /* (queries, keys, heads, head_dim): square, a cached step, odd head size,
     * ViT's 50 and CLIP text's 77 tokens (1-4 and 5-15 queries past a panel),
     * more keys than queries with 16+ queries (the causal mask shifted), a
     * caption step's 1-15 queries against 16+ keys (577: BLIP's image tokens),
     * queries in three blocks of the head's loop (48, 48, 4) with the causal mask shifted, and a step over 300
     * keys with heads of 130 (blocks of 144 keys, the last shorter than a head; a masked last vector) */
    const size_t cases[][4] = {{17, 17, 4, 12}, {1, 9, 3, 10},   {5, 12, 2, 7},  {50, 50, 12, 64}, {77, 77, 8, 64},
                               {20, 45, 2, 24}, {1, 577, 2, 64}, {3, 40, 4, 24}, {15, 100, 2, 70},
                               {100, 130, 2, 16}, {1, 300, 3, 130}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int m = 0; m < 2; m++) {
            size_t nq = cases[c][0], nk = cases[c][1], heads = cases[c][2], hd = cases[c][3], width = heads * hd;
            kernel_mask mask = m ? KERNEL_MASK_CAUSAL : KERNEL_MASK_NONE;
            float *q = test_random_array(nq * 3 * width), *kv = test_random_array(nk * 2 * width);
            float *fast = malloc(nq * width * sizeof *fast), *slow = malloc(nq * width * sizeof *slow);
            float *scratch = malloc(heads * nq * nk * sizeof *scratch);
            float scale = 1.0f / sqrtf((float)hd);
            kernel_attention(fast, width, NULL, q, 3 * width, kv, kv + width, 2 * width, nq, nk, heads, hd, scale,
                             mask, scratch, threads);
            kernel_attention_reference(slow, width, q, 3 * width, kv, kv + width, 2 * width, nq, nk, heads, hd, scale,
                                       mask);
            double d = relative_difference(fast, slow, nq * width);
            if (d > 1e-5) fail_msg("attention case %zu mask %d differs by %g", c, m, d);
            free(q), free(kv), free(fast), free(slow), free(scratch);
        }
    pool_free(threads);
}

/* The one-pass attention block (scores left a line of queries per key, the softmax down the keys) against the
 * three kernels it replaces, bit for bit: scores, softmax, weighted values; causal, with the keys that no
 * query of the block sees left out too (a block seeing the last keys but 3, and a self-attention's first
 * block, which sees as many keys as it has queries); and the blocks it refuses. */
static void test_attention_block_is_the_three_kernels(void **state) {
    (void)state;
#ifdef GLIMPSE_HAVE_AVX512
    if (!cpu_has_avx512()) skip();
    float *scratch = aligned_alloc(64, POOL_SCRATCH_FLOATS * sizeof(float));
    /* (queries, keys, head_dim): BLIP 384's 48-query blocks of 577 keys, CLIP text's 29 after 48, SigLIP
     * so400m's head of 72, odd sizes, fewer keys than a micro-kernel's 8, a whole 16 */
    const size_t cases[][3] = {{48, 577, 64}, {29, 77, 64}, {48, 729, 72}, {37, 45, 13}, {16, 5, 64}, {32, 16, 80},
                               {21, 300, 64}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int causal = 0; causal < 3; causal++) {
            size_t nq = cases[c][0], nk = cases[c][1], hd = cases[c][2], stride = 3 * hd + 5;
            float *q = test_random_array(nq * stride), *kv = test_random_array(nk * stride);
            float *fast = calloc(nq * hd, sizeof *fast), *slow = calloc(nq * hd, sizeof *slow);
            float *probabilities = calloc(nq * nk, sizeof *probabilities), *scores = malloc(nq * nk * sizeof *scores);
            float scale = 1.0f / sqrtf((float)hd);
            long long visible = causal == 1 ? (long long)nk - (long long)nq - 3 : 0; /* (1: some queries see no key) */
            kernel_attention_block block = {.out = fast, .out_stride = hd, .q = q, .q_stride = stride, .k = kv,
                                            .v = kv + hd, .kv_stride = stride, .count = nq, .keys = nk,
                                            .head_dim = hd, .scale = scale, .causal = causal > 0, .visible = visible,
                                            .probabilities = probabilities, .probability_stride = nk};
            assert_true(kernel_attention_block_avx512(&block, scratch, POOL_SCRATCH_FLOATS));
            kernel_product product = {.out = scores, .out_stride = nk, .in = q, .in_stride = stride, .weight = kv,
                                      .weight_type = WEIGHT_TYPE_F32, .column_stride = stride, .depth_stride = 1,
                                      .scale = scale, .rows = nq, .depth = hd};
            kernel_product_avx512(&product, 0, nk, scratch, POOL_SCRATCH_FLOATS);
            for (size_t i = 0; causal && i < nq; i++)
                for (size_t j = 0; j < nk; j++)
                    if ((long long)j > (long long)i + visible) scores[i * nk + j] = -INFINITY;
            kernel_softmax_avx512(scores, nq, nk);
            kernel_product values = {.out = slow, .out_stride = hd, .in = scores, .in_stride = nk, .weight = kv + hd,
                                     .weight_type = WEIGHT_TYPE_F32, .column_stride = 1, .depth_stride = stride,
                                     .scale = 1.0f, .rows = nq, .depth = nk};
            kernel_product_avx512(&values, 0, hd, scratch, POOL_SCRATCH_FLOATS);
            if (memcmp(probabilities, scores, nq * nk * sizeof *scores) != 0)
                fail_msg("attention block case %zu causal %d: probabilities differ", c, causal);
            if (memcmp(fast, slow, nq * hd * sizeof *fast) != 0)
                fail_msg("attention block case %zu causal %d: outputs differ", c, causal);
            /* with the values regrouped first (a head's several blocks): the same, bit for bit */
            float *packed = aligned_alloc(64, (kernel_attention_packed_floats(nk, hd) + 15) / 16 * 16 * sizeof(float));
            kernel_attention_pack_values_avx512(packed, kv + hd, stride, nk, hd);
            block.packed_v = packed, block.probabilities = NULL;
            memset(fast, 0, nq * hd * sizeof *fast);
            assert_true(kernel_attention_block_avx512(&block, scratch, POOL_SCRATCH_FLOATS));
            if (memcmp(fast, slow, nq * hd * sizeof *fast) != 0)
                fail_msg("attention block case %zu causal %d: outputs from regrouped values differ", c, causal);
            long long sees = (long long)nq + visible; /* the keys the block's last query sees */
            assert_true(sees > 0);
            if (causal && (size_t)sees < nk) { /* those alone: the same, the recording's zeros written past them */
                block.seen = (size_t)sees, block.packed_v = NULL, block.probabilities = probabilities;
                for (size_t i = 0; i < nq * nk; i++) probabilities[i] = NAN;
                memset(fast, 0, nq * hd * sizeof *fast);
                assert_true(kernel_attention_block_avx512(&block, scratch, POOL_SCRATCH_FLOATS));
                if (memcmp(probabilities, scores, nq * nk * sizeof *scores) != 0)
                    fail_msg("attention block case %zu causal %d, %zu keys seen: probabilities differ", c, causal,
                             block.seen);
                if (memcmp(fast, slow, nq * hd * sizeof *fast) != 0)
                    fail_msg("attention block case %zu causal %d, %zu keys seen: outputs differ", c, causal, block.seen);
                block.packed_v = packed, block.probabilities = NULL;
                memset(fast, 0, nq * hd * sizeof *fast);
                assert_true(kernel_attention_block_avx512(&block, scratch, POOL_SCRATCH_FLOATS));
                if (memcmp(fast, slow, nq * hd * sizeof *fast) != 0)
                    fail_msg("attention block case %zu causal %d, %zu keys seen: regrouped values differ", c, causal,
                             block.seen);
            }
            free(packed), free(q), free(kv), free(fast), free(slow), free(probabilities), free(scores);
        }
    /* blocks the product kernel would split (1-4 rows past 16 go to dot products), too few or too many
     * queries, or a scratch too small: refused, untouched */
    const size_t refused[][2] = {{18, POOL_SCRATCH_FLOATS}, {4, POOL_SCRATCH_FLOATS}, {49, POOL_SCRATCH_FLOATS},
                                 {48, 1000}};
    for (size_t c = 0; c < sizeof refused / sizeof refused[0]; c++) {
        float q[49 * 64] = {0}, kv[64 * 64] = {0}, out[49 * 64];
        kernel_attention_block block = {.out = out, .out_stride = 64, .q = q, .q_stride = 64, .k = kv, .v = kv,
                                        .kv_stride = 64, .count = refused[c][0], .keys = 64, .head_dim = 64,
                                        .scale = 1.0f};
        assert_false(kernel_attention_block_avx512(&block, scratch, refused[c][1]));
    }
    free(scratch);
#else
    skip();
#endif
}

/* x rounded to bfloat16 (to nearest, ties to even), back as a float: written from the format, not the kernel's
 * conversions. */
static float bf16_rounded(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    bits &= 0xFFFF0000u;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* kernel_attention_bf16's documented sums, in double: q, k, v rounded to bfloat16, the softmax of the scores
 * (into softmax), then the weighted sum of the values by the probabilities the kernel recorded (`recorded`),
 * rounded: from its own, so that a probability rounded the other way at a tie does not count against it
 * (those are checked against the softmax). Heads of head_dim, rows width apart. */
static void attention_bf16_reference(float *out, float *softmax, const float *recorded, const float *q,
                                     const float *k, const float *v, size_t width, size_t nq, size_t nk,
                                     size_t heads, size_t hd, float scale, bool causal) {
    double *p = malloc(nk * sizeof *p);
    for (size_t h = 0; h < heads; h++)
        for (size_t i = 0; i < nq; i++) {
            double top = -INFINITY, sum = 0.0;
            for (size_t j = 0; j < nk; j++) {
                double s = 0.0;
                for (size_t d = 0; d < hd; d++)
                    s += (double)bf16_rounded(q[i * 3 * width + h * hd + d]) *
                         bf16_rounded(k[j * 2 * width + h * hd + d]);
                p[j] = causal && j > i + (nk - nq) ? -INFINITY : (double)(float)(s * scale);
                if (p[j] > top) top = p[j];
            }
            for (size_t j = 0; j < nk; j++) sum += p[j] = exp(p[j] - top);
            for (size_t j = 0; j < nk; j++) softmax[(h * nq + i) * nk + j] = (float)(p[j] / sum);
            for (size_t d = 0; d < hd; d++) {
                double o = 0.0;
                for (size_t j = 0; j < nk; j++)
                    o += (double)bf16_rounded(recorded[(h * nq + i) * nk + j]) *
                         bf16_rounded(v[j * 2 * width + h * hd + d]);
                out[i * width + h * hd + d] = (float)o;
            }
        }
    free(p);
}

/* Attention on bfloat16 (the int8 encoder layers') against those sums (within 1e-6: float32's own outputs are
 * 3e-4 to 4e-3 from them), its recorded probabilities against the softmax: blocks of 1-48 queries (50 = 48 + 2,
 * 77 = 48 + 29), causal and not, more keys than queries, odd head sizes and key counts, on two threads and on
 * one (small work runs on the caller, with its scratch). Where the CPU lacks AVX512_BF16 it must be
 * kernel_attention bit for bit. */
static void test_attention_bf16_matches_rounded_reference(void **state) {
    (void)state;
    pool *pools[2];
    assert_int_equal(pool_create(2, &pools[0]), GLIMPSE_STATUS_OK);
    assert_int_equal(pool_create(1, &pools[1]), GLIMPSE_STATUS_OK);
    const size_t cases[][4] = {{50, 50, 12, 64}, {77, 77, 8, 64}, {17, 17, 4, 10}, {5, 12, 2, 7},
                               {20, 45, 2, 24}, {100, 131, 2, 16}, {97, 97, 2, 80}, {200, 577, 1, 64}};
    double worst = 0.0, worst_probability = 0.0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int m = 0; m < 2; m++)
            for (int t = 0; t < 2; t++) {
                size_t nq = cases[c][0], nk = cases[c][1], heads = cases[c][2], hd = cases[c][3], width = heads * hd;
                kernel_mask mask = m ? KERNEL_MASK_CAUSAL : KERNEL_MASK_NONE;
                float *q = test_random_array(nq * 3 * width), *kv = test_random_array(nk * 2 * width);
                float *rounded = malloc(nq * width * sizeof(float)), *exact = malloc(nq * width * sizeof(float));
                float *seen = malloc(heads * nq * nk * sizeof(float));
                float *softmax = malloc(heads * nq * nk * sizeof(float));
                float *scratch = malloc(heads * nq * nk * sizeof *scratch);
                float scale = 1.0f / sqrtf((float)hd);
                kernel_attention_rows rows = {.out = seen, .head_stride = nq * nk, .row_stride = nk};
                kernel_attention_bf16(rounded, width, &rows, q, 3 * width, kv, kv + width, 2 * width, nq, nk, heads, hd,
                                      scale, mask, scratch, pools[t]);
                kernel_attention(exact, width, NULL, q, 3 * width, kv, kv + width, 2 * width, nq, nk, heads, hd, scale,
                                 mask, scratch, pools[t]);
                if (cpu_has_avx512_bf16()) {
                    float *expected = malloc(nq * width * sizeof(float));
                    attention_bf16_reference(expected, softmax, seen, q, kv, kv + width, width, nq, nk, heads, hd,
                                             scale, m);
                    double d = relative_difference(rounded, expected, nq * width);
                    double dp = relative_difference(seen, softmax, heads * nq * nk);
                    worst = d > worst ? d : worst, worst_probability = dp > worst_probability ? dp : worst_probability;
                    if (!(d <= 1e-6) || !(dp <= 1e-6))
                        fail_msg("bfloat16 attention case %zu mask %d threads %d: %g from the rounded sums, "
                                 "probabilities %g from the softmax", c, m, 2 - t, d, dp);
                    if (memcmp(rounded, exact, nq * width * sizeof(float)) == 0)
                        fail_msg("bfloat16 attention case %zu mask %d: float32's outputs", c, m);
                    free(expected);
                } else if (memcmp(rounded, exact, nq * width * sizeof(float)) != 0) {
                    fail_msg("attention without AVX512_BF16, case %zu mask %d: not kernel_attention's", c, m);
                }
                free(q), free(kv), free(rounded), free(exact), free(seen), free(softmax), free(scratch);
            }
    if (cpu_has_avx512_bf16())
        fprintf(stderr, "bfloat16 attention: largest difference to the rounded sums %.2e, probabilities %.2e\n",
                worst, worst_probability);
    pool_free(pools[0]);
    pool_free(pools[1]);
}

/* Grouped-query attention in one call against a call per query head on its key/value head, bit for bit:
 * a decoder step's one query, a block and a remainder, a prompt of several blocks; causal and not; on two
 * threads (the heads then shared over them). */
static void test_attention_grouped_is_per_head(void **state) {
    (void)state;
    pool *threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    /* a decoder step (1 query) takes the group's heads together: groups past the 8 queries a pass of the values
     * holds, and 301 keys (odd: the last key alone), with its probabilities recorded */
    const size_t groups[] = {3, 7, 9}, hd = 64;
    const size_t queries[] = {1, 1, 20, 50, 130}, extra[] = {7, 300, 7, 7, 7};
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (size_t c = 0; c < sizeof queries / sizeof queries[0]; c++)
            for (int m = 0; m < 2; m++) {
                size_t group = groups[g], heads = 2 * group, q_width = heads * hd, kv_width = heads / group * hd;
                size_t nq = queries[c], nk = nq + extra[c];
                kernel_mask mask = m ? KERNEL_MASK_CAUSAL : KERNEL_MASK_NONE;
                float *q = test_random_array(nq * q_width), *k = test_random_array(nk * kv_width);
                float *v = test_random_array(nk * kv_width), *scratch = malloc(heads * nq * nk * sizeof *scratch);
                float *together = malloc(nq * q_width * sizeof *together);
                float *apart = malloc(nq * q_width * sizeof *apart);
                float *seen = calloc(heads * nq * nk, sizeof *seen);
                float *seen_apart = calloc(heads * nq * nk, sizeof *seen_apart);
                kernel_attention_rows rows = {.out = seen, .head_stride = nq * nk, .row_stride = nk};
                kernel_attention_grouped(together, q_width, &rows, q, q_width, k, v, kv_width, nq, nk, heads, group,
                                         hd, 0.125f, mask, scratch, threads);
                for (size_t h = 0; h < heads; h++) {
                    kernel_attention_rows one = {.out = seen_apart + h * nq * nk, .head_stride = nq * nk,
                                                 .row_stride = nk};
                    kernel_attention(apart + h * hd, q_width, &one, q + h * hd, q_width, k + h / group * hd,
                                     v + h / group * hd, kv_width, nq, nk, 1, hd, 0.125f, mask, scratch, threads);
                }
                if (memcmp(together, apart, nq * q_width * sizeof *together) != 0)
                    fail_msg("grouped attention, group %zu, %zu queries, %zu keys, mask %d: differs from a call per "
                             "head", group, nq, nk, m);
                if (memcmp(seen, seen_apart, heads * nq * nk * sizeof *seen) != 0)
                    fail_msg("grouped attention, group %zu, %zu queries, %zu keys, mask %d: records other "
                             "probabilities than a call per head", group, nq, nk, m);
                /* a step's blocks of keys are fixed: the same sums on the calling thread alone, grouped or not */
                kernel_attention_grouped(apart, q_width, NULL, q, q_width, k, v, kv_width, nq, nk, heads, group, hd,
                                         0.125f, mask, scratch, NULL);
                if (memcmp(together, apart, nq * q_width * sizeof *together) != 0)
                    fail_msg("grouped attention, group %zu, %zu queries, %zu keys: one thread differs", group, nq, nk);
                free(q), free(k), free(v), free(scratch), free(together), free(apart), free(seen), free(seen_apart);
            }
    /* a step of 16 heads over 700 keys in blocks over two threads (and their 4 KiB rows), against one thread
     * and a call per head */
    const size_t heads = 16, nk = 700, width = heads * hd;
    float *q = test_random_array(width), *k = test_random_array(nk * width), *v = test_random_array(nk * width);
    float *scratch = malloc(heads * nk * sizeof *scratch), *shared = malloc(width * sizeof *shared);
    float *alone = malloc(width * sizeof *alone), *apart = malloc(width * sizeof *apart);
    kernel_attention(shared, width, NULL, q, width, k, v, width, 1, nk, heads, hd, 0.125f, KERNEL_MASK_CAUSAL,
                     scratch, threads);
    kernel_attention(alone, width, NULL, q, width, k, v, width, 1, nk, heads, hd, 0.125f, KERNEL_MASK_CAUSAL,
                     scratch, NULL);
    for (size_t h = 0; h < heads; h++)
        kernel_attention(apart + h * hd, width, NULL, q + h * hd, width, k + h * hd, v + h * hd, width, 1, nk, 1, hd,
                         0.125f, KERNEL_MASK_CAUSAL, scratch, threads);
    if (memcmp(shared, alone, width * sizeof *shared) || memcmp(shared, apart, width * sizeof *shared))
        fail_msg("a step of 16 heads over 700 keys: two threads, one thread and a call per head differ");
    free(q), free(k), free(v), free(scratch), free(shared), free(alone), free(apart);
    pool_free(threads);
}

/* A beam search's reordering of a key/value cache against a plain copy into new buffers: every mapping of 3 and
 * 4 sequences (kept, swapped, cycled, one copied to several), with and without a shared prefix, which stays
 * as it was; positions past the length untouched. */
static void test_kv_cache_reorder_is_a_copy(void **state) {
    (void)state;
    const size_t layers = 2, max_length = 9, hidden = 5, length = 7;
    for (size_t sequences = 3; sequences <= 4; sequences++) {
        size_t floats = sequences * layers * max_length * hidden, mappings = 1;
        for (size_t q = 0; q < sequences; q++) mappings *= sequences;
        for (size_t m = 0; m < mappings; m++)
            for (size_t shared = 0; shared <= 3; shared += 3) {
                size_t from[4], code = m;
                for (size_t q = 0; q < sequences; q++) from[q] = code % sequences, code /= sequences;
                float *keys = test_random_array(floats), *values = test_random_array(floats);
                float *spare_keys = test_random_array(floats), *spare_values = test_random_array(floats);
                float *expected_keys = malloc(floats * sizeof(float)), *expected_values = malloc(floats * sizeof(float));
                for (size_t q = 0; q < sequences; q++) /* the shared prefix: the same in every sequence */
                    for (size_t l = 0; l < layers; l++) {
                        memcpy(keys + (q * layers + l) * max_length * hidden, keys + l * max_length * hidden,
                               shared * hidden * sizeof(float));
                        memcpy(values + (q * layers + l) * max_length * hidden, values + l * max_length * hidden,
                               shared * hidden * sizeof(float));
                    }
                memcpy(expected_keys, keys, floats * sizeof(float)), memcpy(expected_values, values, floats * sizeof(float));
                for (size_t q = 0; q < sequences; q++)
                    for (size_t l = 0; l < layers; l++) {
                        size_t to = (q * layers + l) * max_length * hidden, at = (from[q] * layers + l) * max_length * hidden;
                        memcpy(expected_keys + to, keys + at, length * hidden * sizeof(float));
                        memcpy(expected_values + to, values + at, length * hidden * sizeof(float));
                    }
                kv_cache cache = {&keys, &values, &spare_keys, &spare_values, layers, max_length, hidden};
                kv_cache_reorder(&cache, shared, length, from, sequences);
                if (memcmp(keys, expected_keys, floats * sizeof(float)) ||
                    memcmp(values, expected_values, floats * sizeof(float)))
                    fail_msg("%zu sequences, mapping %zu, %zu shared: not the copy", sequences, m, shared);
                free(keys), free(values), free(spare_keys), free(spare_values), free(expected_keys), free(expected_values);
            }
    }
}

static void test_attention_keys_transposed(void **state) {
    (void)state;
    /* (the decoder stores keys so only where cpu_has_avx512(); elsewhere this runs on OpenBLAS) */
    pool *threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    /* (queries, keys, heads, head_dim): a caption step's 1-15 queries against
     * BLIP's 577 image tokens and fewer, and 16+ queries (ITM's text) on the panels */
    const size_t cases[][4] = {{1, 577, 2, 64}, {3, 577, 3, 64}, {15, 100, 2, 70}, {2, 5, 4, 24},
                               {16, 577, 2, 64}, {35, 50, 3, 24}, {7, 1, 2, 16}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t nq = cases[c][0], nk = cases[c][1], heads = cases[c][2], hd = cases[c][3], width = heads * hd;
        size_t room = nk + 5; /* keys_t rows longer than the keys, as a state's room for more tokens */
        float *q = test_random_array(nq * width), *kv = test_random_array(nk * 2 * width);
        float *keys_t = calloc(width * room, sizeof *keys_t);
        for (size_t j = 0; j < nk; j++)
            for (size_t d = 0; d < width; d++) keys_t[d * room + j] = kv[j * 2 * width + d];
        float *fast = malloc(nq * width * sizeof *fast), *slow = malloc(nq * width * sizeof *slow);
        float *scratch = malloc(heads * nq * nk * sizeof *scratch);
        float scale = 1.0f / sqrtf((float)hd);
        kernel_attention_keys_transposed(fast, width, NULL, q, width, keys_t, room, kv + width, 2 * width, nq, nk,
                                         heads, hd, scale, scratch, threads);
        kernel_attention_reference(slow, width, q, width, kv, kv + width, 2 * width, nq, nk, heads, hd, scale,
                                   KERNEL_MASK_NONE);
        double d = relative_difference(fast, slow, nq * width);
        if (d > 1e-5) fail_msg("transposed-keys attention case %zu differs by %g", c, d);
        free(q), free(kv), free(keys_t), free(fast), free(slow), free(scratch);
    }
    pool_free(threads);
}

static void test_causal_mask_hides_the_future(void **state) {
    (void)state;
    /* With one head of size 1 and v = position, query 0 can only see key 0. */
    float q[3] = {1, 1, 1}, k[3] = {1, 1, 1}, v[3] = {10, 20, 30}, out[3], scratch[9];
    kernel_attention(out, 1, NULL, q, 1, k, v, 1, 3, 3, 1, 1, 1.0f, KERNEL_MASK_CAUSAL, scratch, NULL);
    assert_float_equal(out[0], 10.0f, 1e-5);
    assert_float_equal(out[1], 15.0f, 1e-5);
    assert_float_equal(out[2], 20.0f, 1e-5);
}

/* Recorded probabilities: a cached step's 3 queries over 5 keys (causal: the
 * rows end in zeros, here and past the keys up to the row stride), the same
 * output as without recording, on keys in rows and keys transposed. */
static void test_attention_records_probabilities(void **state) {
    (void)state;
    enum { QUERIES = 3, KEYS = 5, HEADS = 2, DIM = 4, WIDTH = HEADS * DIM, STRIDE = 7 };
    float *q = test_random_array(QUERIES * WIDTH), *k = test_random_array(KEYS * WIDTH), *v = test_random_array(KEYS * WIDTH);
    float keys_t[WIDTH * KEYS], plain[QUERIES * WIDTH], recorded[QUERIES * WIDTH], scratch[HEADS * QUERIES * KEYS];
    float rows[HEADS * QUERIES * STRIDE];
    for (size_t j = 0; j < KEYS; j++)
        for (size_t d = 0; d < WIDTH; d++) keys_t[d * KEYS + j] = k[j * WIDTH + d];
    const kernel_attention_rows where = {.out = rows, .head_stride = QUERIES * STRIDE, .row_stride = STRIDE};
    float scale = 0.5f;
    for (int transposed = 0; transposed < 2; transposed++) {
        kernel_mask mask = transposed ? KERNEL_MASK_NONE : KERNEL_MASK_CAUSAL;
        for (size_t i = 0; i < HEADS * QUERIES * STRIDE; i++) rows[i] = -1.0f;
        if (transposed) {
            kernel_attention_keys_transposed(plain, WIDTH, NULL, q, WIDTH, keys_t, KEYS, v, WIDTH, QUERIES, KEYS,
                                             HEADS, DIM, scale, scratch, NULL);
            kernel_attention_keys_transposed(recorded, WIDTH, &where, q, WIDTH, keys_t, KEYS, v, WIDTH, QUERIES,
                                             KEYS, HEADS, DIM, scale, scratch, NULL);
        } else {
            kernel_attention(plain, WIDTH, NULL, q, WIDTH, k, v, WIDTH, QUERIES, KEYS, HEADS, DIM, scale, mask,
                             scratch, NULL);
            kernel_attention(recorded, WIDTH, &where, q, WIDTH, k, v, WIDTH, QUERIES, KEYS, HEADS, DIM, scale, mask,
                             scratch, NULL);
        }
        assert_memory_equal(plain, recorded, sizeof plain);
        for (size_t h = 0; h < HEADS; h++)
            for (size_t i = 0; i < QUERIES; i++) {
                const float *row = rows + h * QUERIES * STRIDE + i * STRIDE;
                size_t seen = mask == KERNEL_MASK_CAUSAL ? i + (KEYS - QUERIES) + 1 : KEYS;
                double scores[KEYS], top = -INFINITY, sum = 0;
                for (size_t j = 0; j < seen; j++) {
                    scores[j] = 0;
                    for (size_t d = 0; d < DIM; d++)
                        scores[j] += (double)q[i * WIDTH + h * DIM + d] * k[j * WIDTH + h * DIM + d] * scale;
                    if (scores[j] > top) top = scores[j];
                }
                for (size_t j = 0; j < seen; j++) sum += exp(scores[j] - top);
                for (size_t j = 0; j < STRIDE; j++)
                    assert_float_equal(row[j], j < seen ? exp(scores[j] - top) / sum : 0.0, 1e-6);
            }
    }
    free(q), free(k), free(v);
}

/* encoder_layer_forward_pooled against the whole layer: the pooled row of each
 * sequence (first, middle, last) matches, every other row is left as it came,
 * with separate or fused q/k/v and with or without the causal mask. */
static void test_encoder_layer_pooled_rows(void **state) {
    (void)state;
    pool *threads;
    assert_int_equal(pool_create(2, &threads), GLIMPSE_STATUS_OK);
    const size_t hidden = 32, heads = 4, inter = 80, lengths[3] = {7, 12, 5}, pooled[3] = {6, 4, 0}, rows = 24;
    float *weights = test_random_array(4 * hidden * hidden + 2 * hidden * inter), *biases = test_random_array(6 * hidden + inter);
    float *ones = malloc(hidden * sizeof *ones), *zeros = calloc(hidden, sizeof *zeros);
    for (size_t i = 0; i < hidden; i++) ones[i] = 1.0f;
    for (size_t i = 0; i < 4 * hidden * hidden + 2 * hidden * inter; i++) weights[i] *= 0.2f; /* ~1/sqrt(fan-in) */
    for (int fused = 0; fused < 2; fused++)
        for (int m = 0; m < 2; m++) {
            encoder_layer layer;
            test_wire_layer(&layer, weights, biases, ones, zeros, hidden, inter, fused);
            encoder_shape shape = {hidden, heads, inter, 1e-5f, ACTIVATION_QUICK_GELU,
                                   m ? KERNEL_MASK_CAUSAL : KERNEL_MASK_NONE};
            float *memory = malloc(encoder_scratch_floats(&shape, rows, 12) * sizeof(float));
            encoder_scratch scratch;
            encoder_scratch_carve(&scratch, memory, &shape, rows, 12);
            float *input = test_random_array(rows * hidden), *whole = malloc(rows * hidden * sizeof *whole);
            float *part = malloc(rows * hidden * sizeof *part);
            memcpy(whole, input, rows * hidden * sizeof *whole);
            memcpy(part, input, rows * hidden * sizeof *part);
            encoder_layer_forward(whole, NULL, 0, &layer, &shape, lengths, 3, &scratch, threads);
            encoder_layer_forward_pooled(part, &layer, &shape, lengths, pooled, 3, &scratch, threads);
            for (size_t s = 0, start = 0; s < 3; start += lengths[s], s++)
                for (size_t t = 0; t < lengths[s]; t++) {
                    size_t row = (start + t) * hidden;
                    if (t == pooled[s]) {
                        double d = relative_difference(part + row, whole + row, hidden);
                        if (d > 1e-5)
                            fail_msg("fused %d mask %d sequence %zu: pooled row differs by %g", fused, m, s, d);
                    } else if (memcmp(part + row, input + row, hidden * sizeof(float)) != 0) {
                        fail_msg("fused %d mask %d sequence %zu: row %zu was changed", fused, m, s, t);
                    }
                }
            free(memory), free(input), free(whole), free(part);
        }
    free(weights), free(biases), free(ones), free(zeros);
    pool_free(threads);
}

static void test_layernorm(void **state) {
    (void)state;
    float x[5] = {1, 2, 3, 4, 10}, weight[5] = {1, 2, 1, 1, 0.5f}, bias[5] = {0, 1, 0, -1, 0}, y[5];
    kernel_layernorm(y, x, weight, bias, 1, 5, 1e-5f);
    double mean = 4.0, variance = (9 + 4 + 1 + 0 + 36) / 5.0;
    for (int i = 0; i < 5; i++) {
        double expected = (x[i] - mean) / sqrt(variance + 1e-5) * weight[i] + bias[i];
        assert_float_equal(y[i], expected, 1e-6);
    }
}

static void test_layernorm_wide_rows(void **state) {
    (void)state;
    /* widths with and without a tail of 16, in place and not, against double maths; 2048 and 2049 on either
     * side of the widest row the AVX-512 kernel keeps widened on its stack */
    const size_t dims[] = {768, 77, 16, 1, 2048, 2049};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        size_t dim = dims[d], rows = 3;
        float *x = test_random_array(rows * dim), *w = test_random_array(dim), *b = test_random_array(dim);
        float *y = malloc(rows * dim * sizeof *y);
        for (size_t i = 0; i < rows * dim; i++) x[i] = x[i] * 4.0f + 3.0f; /* an offset mean */
        kernel_layernorm(y, x, w, b, rows, dim, 1e-5f);
        for (size_t r = 0; r < rows; r++) {
            const float *row = x + r * dim;
            double mean = 0, variance = 0;
            for (size_t i = 0; i < dim; i++) mean += row[i];
            mean /= (double)dim;
            for (size_t i = 0; i < dim; i++) variance += (row[i] - mean) * (row[i] - mean);
            variance /= (double)dim;
            for (size_t i = 0; i < dim; i++) {
                double expected = (row[i] - mean) / sqrt(variance + 1e-5) * w[i] + b[i];
                assert_float_equal(y[r * dim + i], expected, 1e-5);
            }
        }
        kernel_layernorm(x, x, w, b, rows, dim, 1e-5f); /* in place gives the same */
        for (size_t i = 0; i < rows * dim; i++) assert_float_equal(x[i], y[i], 0);
        free(x), free(w), free(b), free(y);
    }
}

static void test_activations_known_values(void **state) {
    (void)state;
    float g[3] = {1.0f, -1.0f, 0.0f}, q[2] = {1.0f, -2.0f}, t[1] = {1.0f};
    kernel_gelu(g, 3);
    assert_float_equal(g[0], 0.8413447f, 1e-6);
    assert_float_equal(g[1], -0.1586553f, 1e-6);
    assert_float_equal(g[2], 0.0f, 0);
    kernel_quick_gelu(q, 2);
    assert_float_equal(q[0], 1.0 / (1.0 + exp(-1.702)), 1e-6);
    assert_float_equal(q[1], -2.0 / (1.0 + exp(3.404)), 1e-6);
    kernel_gelu_tanh(t, 1);
    assert_float_equal(t[0], 0.8411920f, 1e-6);
    activation act;
    assert_true(activation_from_name("quick_gelu", &act) && act == ACTIVATION_QUICK_GELU);
    assert_true(activation_from_name("gelu", &act) && act == ACTIVATION_GELU);
    assert_false(activation_from_name("swish-ish", &act));
}

/* The vectorised activations and softmax (AVX-512 where the CPU has it)
 * against double-precision formulas over many values, tails included. */
static void test_vector_maths_against_double(void **state) {
    (void)state;
    enum { N = 1003 };
    float gelu[N], quick[N], soft[N];
    double input[N];
    for (int i = 0; i < N; i++) {
        input[i] = -12.0 + 24.0 * i / (N - 1);
        gelu[i] = quick[i] = soft[i] = (float)input[i];
    }
    kernel_gelu(gelu, N);
    kernel_quick_gelu(quick, N);
    kernel_softmax(soft, 1, N);
    double sum = 0, largest = input[N - 1];
    for (int i = 0; i < N; i++) sum += exp(input[i] - largest);
    for (int i = 0; i < N; i++) {
        double x = (float)input[i];
        double g = 0.5 * x * (1.0 + erf(x / sqrt(2.0))), q = x / (1.0 + exp(-1.702 * x));
        double s = exp(x - largest) / sum;
        if (fabs(gelu[i] - g) > 2e-6 * (fabs(g) > 1 ? fabs(g) : 1)) fail_msg("gelu(%g) = %.9g, want %.9g", x, gelu[i], g);
        if (fabs(quick[i] - q) > 2e-6 * (fabs(q) > 1 ? fabs(q) : 1)) fail_msg("quick_gelu(%g) = %.9g, want %.9g", x, quick[i], q);
        if (fabs(soft[i] - s) > 1e-6 * s + 1e-12) fail_msg("softmax[%d] = %.9g, want %.9g", i, soft[i], s);
    }
}

/* Largest |fast - reference| / max(|reference|, floor) over n values. */
static double largest_difference(const float *fast, const float *reference, size_t n, double floor) {
    double largest = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)fast[i] - reference[i]) / fmax(fabs((double)reference[i]), floor);
        if (d > largest) largest = d;
    }
    return largest;
}

/* LayerNorm, softmax, GELU and quick GELU as the models call them (AVX-512
 * where cpu_has_avx512()) against their *_reference twins, both in this run:
 * widths from 1 to 3072 with every kind of tail past the 16-float vectors,
 * activations over [-12, 12], softmax rows with masked keys and one row all
 * masked. Where the dispatch takes the reference the two are bit for bit
 * equal. On AVX-512 exp and erf are polynomials where the reference calls
 * libm, and the compiler fuses LayerNorm's last multiply and add. Largest
 * differences on these inputs (per value, relative to max(|reference|, 1);
 * softmax relative to the value itself), measured with the AVX-512 kernels
 * emulated lane by lane: GELU 2.9e-7, quick GELU 1.5e-7, softmax 3.5e-7,
 * LayerNorm 0 unfused (fused, one rounding fewer moves a value by up to
 * 2.4e-7 on such rows). The bounds leave a little room over those: one or
 * two float roundings, far inside the parity tests' tolerances. */
static void test_row_kernels_match_reference(void **state) {
    (void)state;
    const size_t widths[] = {1, 7, 15, 16, 17, 31, 33, 64, 77, 577, 768, 1003, 3072};
    const size_t rows = 4;
    bool exact = !cpu_has_avx512();
    double gelu = 0, quick = 0, softmax = 0, layernorm = 0, gelu_tanh = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        size_t n = widths[w], count = rows * n;
        float *x = test_random_array(count), *fast = malloc(count * sizeof *fast), *slow = malloc(count * sizeof *slow);
        float *scale = test_random_array(n), *shift = test_random_array(n);
        for (size_t i = 0; i < count; i++) x[i] *= 12.0f;

        memcpy(fast, x, count * sizeof *fast), memcpy(slow, x, count * sizeof *slow);
        kernel_gelu(fast, count), kernel_gelu_reference(slow, count);
        gelu = fmax(gelu, largest_difference(fast, slow, count, 1.0));

        memcpy(fast, x, count * sizeof *fast), memcpy(slow, x, count * sizeof *slow);
        kernel_quick_gelu(fast, count), kernel_quick_gelu_reference(slow, count);
        quick = fmax(quick, largest_difference(fast, slow, count, 1.0));

        memcpy(fast, x, count * sizeof *fast), memcpy(slow, x, count * sizeof *slow); /* (AVX2 wherever it runs) */
        kernel_gelu_tanh(fast, count), kernel_gelu_tanh_reference(slow, count);
        gelu_tanh = fmax(gelu_tanh, largest_difference(fast, slow, count, 1.0));

        /* row 0 as it comes, row 1 causally masked past its middle, row 2 with every
         * other key masked, row 3 all masked (all zeros by definition) */
        for (size_t j = n / 2 + 1; j < n; j++) x[n + j] = -INFINITY;
        for (size_t j = 1; j < n; j += 2) x[2 * n + j] = -INFINITY;
        for (size_t j = 0; j < n; j++) x[3 * n + j] = -INFINITY;
        memcpy(fast, x, count * sizeof *fast), memcpy(slow, x, count * sizeof *slow);
        kernel_softmax(fast, rows, n), kernel_softmax_reference(slow, rows, n);
        softmax = fmax(softmax, largest_difference(fast, slow, count, 1e-30));
        for (size_t j = 0; j < n; j++) assert_float_equal(fast[3 * n + j], 0.0f, 0);

        for (size_t i = 0; i < count; i++) x[i] = 4.0f * test_random_float() + 3.0f; /* an offset mean */
        kernel_layernorm(fast, x, scale, shift, rows, n, 1e-5f);
        kernel_layernorm_reference(slow, x, scale, shift, rows, n, 1e-5f);
        layernorm = fmax(layernorm, largest_difference(fast, slow, count, 1.0));
        kernel_layernorm(x, x, scale, shift, rows, n, 1e-5f); /* in place: the same */
        assert_memory_equal(x, fast, count * sizeof *x);
        free(x), free(fast), free(slow), free(scale), free(shift);
    }
    fprintf(stderr, "row kernels vs reference (%s): gelu %.3g, quick_gelu %.3g, softmax %.3g, layernorm %.3g, "
            "gelu_tanh %.3g (%s)\n", exact ? "reference path" : "AVX-512", gelu, quick, softmax, layernorm, gelu_tanh,
            cpu_has_avx2() ? "AVX2" : "reference path");
    if (!cpu_has_avx2()) assert_true(gelu_tanh == 0);
    if (gelu_tanh > 4e-7) fail_msg("gelu_tanh differs from its reference by %g", gelu_tanh);
    if (exact) {
        assert_true(gelu == 0 && quick == 0 && softmax == 0 && layernorm == 0);
    } else {
        if (gelu > 4e-7) fail_msg("gelu differs from its reference by %g", gelu);
        if (quick > 2.5e-7) fail_msg("quick_gelu differs from its reference by %g", quick);
        if (softmax > 5e-7) fail_msg("softmax differs from its reference by %g", softmax);
        if (layernorm > 4e-7) fail_msg("layernorm differs from its reference by %g", layernorm);
    }
}

/* kernel_dot_rows against its double-summing twin: picked rows (repeated, in any order) and the
 * first rows (rows NULL), dimensions with and without a tail past 64 and 16, on no pool and on two
 * threads (blocks of 256 rows, so 700 rows split unevenly). */
static void test_dot_rows_matches_reference(void **state) {
    (void)state;
    const size_t count = 900, dims[] = {512, 77, 16, 3};
    pool *two;
    assert_int_equal(pool_create(2, &two), GLIMPSE_STATUS_OK);
    for (size_t t = 0; t < sizeof dims / sizeof *dims; t++) {
        size_t dim = dims[t], n = 700;
        float *matrix = test_random_array(count * dim), *x = test_random_array(dim);
        int64_t *rows = malloc(n * sizeof *rows);
        for (size_t i = 0; i < n; i++) rows[i] = (int64_t)((i * 7919u + 13u) % count);
        float *fast = malloc(n * sizeof *fast), *slow = malloc(n * sizeof *slow);
        for (int picked = 0; picked < 2; picked++)
            for (int threaded = 0; threaded < 2; threaded++) {
                memset(fast, 0xff, n * sizeof *fast);
                kernel_dot_rows(fast, matrix, dim, picked ? rows : NULL, n, x, threaded ? two : NULL);
                kernel_dot_rows_reference(slow, matrix, dim, picked ? rows : NULL, n, x);
                for (size_t i = 0; i < n; i++) {
                    const float *row = matrix + (picked ? (size_t)rows[i] : i) * dim;
                    double magnitude = 0;
                    for (size_t d = 0; d < dim; d++) magnitude += fabs((double)row[d] * x[d]);
                    assert_true(fabs((double)fast[i] - slow[i]) <= 1e-6 * magnitude + 1e-30);
                    if (!cpu_has_avx512()) assert_true(fast[i] == slow[i]);
                }
            }
        free(matrix), free(x), free(rows), free(fast), free(slow);
    }
    pool_free(two);
}

static void test_softmax_and_normalize(void **state) {
    (void)state;
    float x[6] = {1, 2, 3, 1000, 1000, -INFINITY};
    kernel_softmax(x, 2, 3);
    assert_float_equal(x[0] + x[1] + x[2], 1.0f, 1e-6);
    assert_float_equal(x[2] / x[1], expf(1.0f), 1e-4);
    assert_float_equal(x[3], 0.5f, 1e-6); /* large values do not overflow */
    assert_float_equal(x[5], 0.0f, 0);
    float v[2] = {3, 4};
    kernel_l2_normalize(v, 2);
    assert_float_equal(v[0], 0.6f, 1e-7);
    float zero[2] = {0, 0};
    kernel_l2_normalize(zero, 2);
    assert_float_equal(zero[0], 0.0f, 0);
}

/* kernel_add and kernel_multiply_add give, at every length (whole vectors and a masked tail), the bits of
 * the plain sums with each product rounded before it is added. */
static void test_elementwise_sums_are_the_plain_loops(void **state) {
    (void)state;
    const size_t lengths[] = {1, 15, 16, 17, 100};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        size_t n = lengths[l];
        float x[100], y[100], a[100], b[100], sum[100], multiplied[100];
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)rand() / RAND_MAX - 0.5f, y[i] = (float)rand() / RAND_MAX * 3.0f;
            a[i] = (float)rand() / RAND_MAX - 0.25f, b[i] = (float)rand() / RAND_MAX * 7.0f - 2.0f;
            volatile float product = a[i] * b[i]; /* (rounded, as the kernel's) */
            sum[i] = x[i] + y[i], multiplied[i] = x[i] + product;
        }
        float added[100], accumulated[100];
        memcpy(added, x, n * sizeof(float));
        memcpy(accumulated, x, n * sizeof(float));
        kernel_add(added, y, n);
        kernel_multiply_add(accumulated, a, b, n);
        assert_memory_equal(added, sum, n * sizeof(float));
        assert_memory_equal(accumulated, multiplied, n * sizeof(float));
    }
}

static void count_task(void *argument, size_t index, float *scratch) {
    assert_non_null(scratch); /* every thread of a pool has its own, all of it usable */
    scratch[0] = scratch[POOL_SCRATCH_FLOATS - 1] = (float)index;
    int *counts = argument;
    __atomic_fetch_add(&counts[index], 1, __ATOMIC_RELAXED);
}

static void test_pool_runs_every_index_once(void **state) {
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        pool *p;
        assert_int_equal(pool_create(threads, &p), GLIMPSE_STATUS_OK);
        assert_int_equal(pool_threads(p), threads);
        for (int round = 0; round < 50; round++) {
            int counts[97] = {0};
            pool_for(p, 97, count_task, counts);
            for (int i = 0; i < 97; i++) assert_int_equal(counts[i], 1);
        }
        pool_free(p);
    }
    assert_int_not_equal(pool_create(100000, &(pool *){NULL}), GLIMPSE_STATUS_OK);
}

/* Jobs of different tasks, arguments and sizes one after another, some tasks
 * slow (a worker still busy, or not yet awake, when the caller runs out of
 * tasks): each job's tasks run once each, with that job's argument, and all
 * of them have finished when pool_for returns. */
typedef struct stress_job {
    int id;
    atomic_int runs[64];
} stress_job;

static void stress_task(void *argument, size_t index, float *scratch) {
    (void)scratch;
    stress_job *job = argument;
    if ((index + (size_t)job->id) % 7 == 0) usleep(50);
    atomic_fetch_add(&job->runs[index], 1);
}

static void stress_task_other(void *argument, size_t index, float *scratch) {
    stress_task(argument, index, scratch);
    atomic_fetch_add(&((stress_job *)argument)->runs[index], 1); /* twice: tells the two tasks apart */
}

static void test_pool_jobs_never_mix(void **state) {
    (void)state;
    for (int threads = 2; threads <= 3; threads++) {
        pool *p;
        assert_int_equal(pool_create(threads, &p), GLIMPSE_STATUS_OK);
        for (int round = 0; round < 600; round++) {
            stress_job job = {.id = round};
            for (int i = 0; i < 64; i++) atomic_init(&job.runs[i], 0);
            size_t count = 2 + (size_t)(round * 37 % 62);
            bool other = round % 3 == 0;
            pool_for(p, count, other ? stress_task_other : stress_task, &job);
            for (size_t i = 0; i < 64; i++)
                assert_int_equal(atomic_load(&job.runs[i]), i < count ? (other ? 2 : 1) : 0);
        }
        pool_free(p);
    }
}

static void test_strmap(void **state) {
    (void)state;
    strmap *map;
    assert_int_equal(strmap_create(1, &map), GLIMPSE_STATUS_OK);
    char key[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "key%d", i);
        assert_int_equal(strmap_put(map, key, strlen(key), i), GLIMPSE_STATUS_OK);
    }
    assert_int_equal(strmap_count(map), 5000);
    int32_t value;
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "key%d", i);
        assert_true(strmap_get(map, key, strlen(key), &value));
        assert_int_equal(value, i);
    }
    assert_false(strmap_get(map, "absent", 6, &value));
    assert_int_equal(strmap_put(map, "key7", 4, -1), GLIMPSE_STATUS_OK); /* overwrite */
    assert_true(strmap_get(map, "key7", 4, &value));
    assert_int_equal(value, -1);
    assert_int_equal(strmap_count(map), 5000);
    assert_true(strmap_put(map, "a\0b", 3, 9) == GLIMPSE_STATUS_OK && strmap_get(map, "a\0b", 3, &value) && value == 9);
    strmap_free(map);
}

static void test_errors(void **state) {
    (void)state;
    assert_int_equal(error_set(GLIMPSE_STATUS_IO, "%s: %d", "file", 3), GLIMPSE_STATUS_IO);
    assert_string_equal(glimpse_last_error(), "file: 3");
    error_prefix(GLIMPSE_STATUS_IO, "outer");
    assert_string_equal(glimpse_last_error(), "outer: file: 3");
    for (int s = GLIMPSE_STATUS_OK; s <= GLIMPSE_STATUS_BUSY; s++) assert_non_null(glimpse_status_string(s));
    assert_string_equal(glimpse_version(), GLIMPSE_VERSION_STRING);
}

/* The int8 scan of a search's codes (AVX2 where the CPU has it) against its plain twin and a loop of its own, on
 * codes of every value and depths that are and are not multiples of the 32 codes of a step; rows outside
 * [first, first + count) are left alone. */
static void test_dot_codes_matches_reference(void **state) {
    (void)state;
    enum { ROWS = 37, MAX_DEPTH = 100 };
    int8_t *codes = malloc(ROWS * MAX_DEPTH), query[MAX_DEPTH];
    assert_non_null(codes);
    uint32_t random = 99;
    for (size_t i = 0; i < ROWS * MAX_DEPTH; i++) {
        random = random * 1664525u + 1013904223u;
        codes[i] = (int8_t)((random >> 24) % 255 - 127);
    }
    for (size_t k = 0; k < MAX_DEPTH; k++) query[k] = (int8_t)(k % 255 - 127);
    const size_t depths[] = {1, 31, 32, 64, 100};
    for (size_t t = 0; t < sizeof depths / sizeof *depths; t++) {
        size_t depth = depths[t], first = t, count = ROWS - 2 * t;
        int32_t dots[ROWS], sums[ROWS], plain_dots[ROWS], plain_sums[ROWS];
        for (int r = 0; r < ROWS; r++) dots[r] = sums[r] = plain_dots[r] = plain_sums[r] = -7;
        kernel_dot_codes(dots, sums, query, codes, depth, first, count);
        kernel_dot_codes_reference(plain_dots, plain_sums, query, codes, depth, first, count);
        for (size_t r = 0; r < ROWS; r++) {
            int32_t dot = 0, sum = 0;
            for (size_t k = 0; k < depth; k++) dot += query[k] * codes[r * depth + k], sum += codes[r * depth + k];
            bool inside = r >= first && r < first + count;
            assert_int_equal(plain_dots[r], inside ? dot : -7);
            assert_int_equal(plain_sums[r], inside ? sum : -7);
            assert_int_equal(dots[r], inside ? dot : -7);
            assert_int_equal(sums[r], inside ? sum : -7);
        }
#ifdef GLIMPSE_HAVE_AVX2
        if (cpu_has_avx2()) {
            kernel_dot_codes_avx2(dots, sums, query, codes, depth, first, count);
            assert_memory_equal(dots, plain_dots, sizeof dots);
            assert_memory_equal(sums, plain_sums, sizeof sums);
        }
#endif
    }
    free(codes);
}

/* kernel_dot_double: the dot product in double and the second vector's L1 norm, on values whose sums are exact. */
static void test_dot_double_and_l1(void **state) {
    (void)state;
    const float x[] = {1.0f, 2.0f, 3.0f, -0.25f}, y[] = {-1.0f, 0.5f, 2.0f, 4.0f};
    double l1 = 0;
    assert_true(kernel_dot_double(x, y, 4, &l1) == 5.0);
    assert_true(l1 == 7.5);
    assert_true(kernel_dot_double(x, y, 3, NULL) == 6.0);
    assert_true(kernel_dot_double(x, y, 0, &l1) == 0.0 && l1 == 0.0);
}

/* Whether OpenBLAS opens (core/openblas.c) as the environment says it should: GLIMPSE_TEST_OPENBLAS=missing
 * (test_core_without_openblas, a file that is not a library first on the path) expects the failure naming it and
 * its package, so that the products above ran in the plain fallback; otherwise it opens. */
static void test_openblas_opens_or_says_why(void **state) {
    (void)state;
    const char *why = NULL, *expected = getenv("GLIMPSE_TEST_OPENBLAS");
    bool loaded = openblas_load(&why);
    if (expected && strcmp(expected, "missing") == 0) {
        assert_false(loaded);
        assert_non_null(strstr(why, "needs libopenblas.so.0, which cannot be loaded ("));
        assert_non_null(strstr(why, "on Debian it is the package libopenblas0"));
    } else {
        assert_true(loaded);
        assert_null(why);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openblas_opens_or_says_why),
        cmocka_unit_test(test_linear_matches_reference), cmocka_unit_test(test_linear_16bit_weights),
        cmocka_unit_test(test_linear_rowwise_is_row_exact), cmocka_unit_test(test_linear_q8_matches_integer_reference), cmocka_unit_test(test_linear_after_is_step_then_linear), cmocka_unit_test(test_widen_every_16bit_value), cmocka_unit_test(test_attention_matches_reference), cmocka_unit_test(test_attention_block_is_the_three_kernels), cmocka_unit_test(test_attention_bf16_matches_rounded_reference), cmocka_unit_test(test_attention_grouped_is_per_head), cmocka_unit_test(test_kv_cache_reorder_is_a_copy), cmocka_unit_test(test_attention_keys_transposed), cmocka_unit_test(test_attention_records_probabilities),
        cmocka_unit_test(test_causal_mask_hides_the_future), cmocka_unit_test(test_encoder_layer_pooled_rows),
        cmocka_unit_test(test_layernorm), cmocka_unit_test(test_layernorm_wide_rows),
        cmocka_unit_test(test_activations_known_values), cmocka_unit_test(test_softmax_and_normalize),
        cmocka_unit_test(test_elementwise_sums_are_the_plain_loops),
        cmocka_unit_test(test_dot_rows_matches_reference), cmocka_unit_test(test_dot_codes_matches_reference),
        cmocka_unit_test(test_dot_double_and_l1),
        cmocka_unit_test(test_vector_maths_against_double), cmocka_unit_test(test_row_kernels_match_reference),
        cmocka_unit_test(test_pool_runs_every_index_once),
        cmocka_unit_test(test_pool_jobs_never_mix), cmocka_unit_test(test_strmap),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_linear_split_is_one_thread), /* (last: see its comment) */
    };
    return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
