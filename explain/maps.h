/* maps.h — turning recorded attention probabilities into maps over the image's patch grid: averaging layers,
 * heads and rows, attention rollout through the vision tower's layers, and upsampling a grid onto the original
 * picture through the region the preprocessing kept. Pure functions on float arrays: outputs first, no
 * allocation, nothing about models or files. */
#ifndef GLIMPSE_EXPLAIN_MAPS_H
#define GLIMPSE_EXPLAIN_MAPS_H

#include <stddef.h>

/* A half-open range of layers or heads. */
typedef struct explain_range {
    size_t first, end;
} explain_range;

/* out[columns - first_column] = the mean, over layers and heads in the ranges, of row `row` of probabilities
 * [layers][heads][rows][columns] (one sequence of a record), from column first_column on, renormalised to
 * sum 1 (left all zeros when they sum to 0). */
void explain_average_row(float *out, const float *probabilities, size_t heads, size_t rows, size_t columns,
                         explain_range layers, explain_range heads_used, size_t row, size_t first_column);

/* The same over columns kept.first .. kept.end - 1 alone: out[kept.end - kept.first] (BLIP-2: a word's row over
 * the query positions, the first columns of the language model's self-attention). */
void explain_average_span(float *out, const float *probabilities, size_t heads, size_t rows, size_t columns,
                          explain_range layers, explain_range heads_used, size_t row, explain_range kept);

/* One layer of rollout, walked from the last layer to the first: vector[tokens] (the attention a pooled
 * output pays to this layer's outputs) becomes vector · Â with Â = (A + I), rows renormalised, A the mean of
 * heads_used of probabilities [heads][tokens][tokens] (the layer's self-attention). scratch[tokens]. */
void explain_rollout_step(float *vector, float *scratch, const float *probabilities, size_t heads, size_t tokens,
                          explain_range heads_used);

/* Divides values[count] by their sum (left alone when it is 0). */
void explain_normalize(float *values, size_t count);

/* out[height × width] covers a picture of picture_width × picture_height pixels: each pixel's centre is mapped
 * into region (left, top, right, bottom, picture pixels) and the grid [grid_height × grid_width] there
 * bilinearly interpolated (cells are sampled at their centres, clamped at the edges); NAN outside region. */
void explain_upsample(float *out, int width, int height, const float *grid, int grid_width, int grid_height,
                      const float region[4], int picture_width, int picture_height);

#endif
