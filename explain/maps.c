/* maps.c — averaging, rollout and upsampling of attention maps (see maps.h). Plain loops: the sizes are one
 * row or one vector per layer, small beside the forward passes that recorded them. */
#include "explain/maps.h"

#include <math.h>

void explain_normalize(float *values, size_t count) {
    double sum = 0;
    for (size_t i = 0; i < count; i++) sum += values[i];
    if (sum == 0) return;
    for (size_t i = 0; i < count; i++) values[i] = (float)(values[i] / sum);
}

void explain_average_span(float *out, const float *probabilities, size_t heads, size_t rows, size_t columns,
                          explain_range layers, explain_range heads_used, size_t row, explain_range kept) {
    size_t width = kept.end - kept.first;
    for (size_t j = 0; j < width; j++) out[j] = 0;
    for (size_t l = layers.first; l < layers.end; l++)
        for (size_t h = heads_used.first; h < heads_used.end; h++) {
            const float *p = probabilities + ((l * heads + h) * rows + row) * columns + kept.first;
            for (size_t j = 0; j < width; j++) out[j] += p[j];
        }
    explain_normalize(out, width);
}

void explain_average_row(float *out, const float *probabilities, size_t heads, size_t rows, size_t columns,
                         explain_range layers, explain_range heads_used, size_t row, size_t first_column) {
    explain_average_span(out, probabilities, heads, rows, columns, layers, heads_used, row,
                         (explain_range){first_column, columns});
}

void explain_rollout_step(float *vector, float *scratch, const float *probabilities, size_t heads, size_t tokens,
                          explain_range heads_used) {
    float share = 1.0f / (float)(heads_used.end - heads_used.first);
    for (size_t k = 0; k < tokens; k++) scratch[k] = 0;
    for (size_t i = 0; i < tokens; i++) {
        /* row i of Â: (mean of the heads' row i + e_i) / its sum */
        double sum = 1.0;
        for (size_t h = heads_used.first; h < heads_used.end; h++) {
            const float *a = probabilities + (h * tokens + i) * tokens;
            for (size_t k = 0; k < tokens; k++) sum += (double)a[k] * share;
        }
        float weight = (float)(vector[i] / sum);
        for (size_t h = heads_used.first; h < heads_used.end; h++) {
            const float *a = probabilities + (h * tokens + i) * tokens;
            for (size_t k = 0; k < tokens; k++) scratch[k] += weight * share * a[k];
        }
        scratch[i] += weight;
    }
    for (size_t k = 0; k < tokens; k++) vector[k] = scratch[k];
}

/* The grid coordinate of picture coordinate `at` along one axis, or NAN outside [low, high). */
static float grid_coordinate(float at, float low, float high, int cells) {
    if (at < low || at >= high) return NAN;
    return (at - low) / (high - low) * (float)cells - 0.5f;
}

void explain_upsample(float *out, int width, int height, const float *grid, int grid_width, int grid_height,
                      const float region[4], int picture_width, int picture_height) {
    for (int y = 0; y < height; y++) {
        float v = grid_coordinate(((float)y + 0.5f) * (float)picture_height / (float)height, region[1], region[3],
                                  grid_height);
        for (int x = 0; x < width; x++) {
            float u = grid_coordinate(((float)x + 0.5f) * (float)picture_width / (float)width, region[0], region[2],
                                      grid_width);
            float *o = out + (size_t)y * (size_t)width + (size_t)x;
            if (isnan(u) || isnan(v)) {
                *o = NAN;
                continue;
            }
            float cu = u < 0 ? 0 : u > (float)(grid_width - 1) ? (float)(grid_width - 1) : u;
            float cv = v < 0 ? 0 : v > (float)(grid_height - 1) ? (float)(grid_height - 1) : v;
            int u0 = (int)cu, v0 = (int)cv;
            int u1 = u0 + 1 < grid_width ? u0 + 1 : u0, v1 = v0 + 1 < grid_height ? v0 + 1 : v0;
            float fu = cu - (float)u0, fv = cv - (float)v0;
            const float *r0 = grid + (size_t)v0 * (size_t)grid_width, *r1 = grid + (size_t)v1 * (size_t)grid_width;
            float top = r0[u0] + (r0[u1] - r0[u0]) * fu, bottom = r1[u0] + (r1[u1] - r1[u0]) * fu;
            *o = top + (bottom - top) * fv;
        }
    }
}
