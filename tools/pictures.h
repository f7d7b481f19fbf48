/* pictures.h — synthetic pictures whose true description is known: a light
 * background with one or two coloured shapes (circle, square, triangle in
 * red, green, blue, yellow), and their captions ("a red circle", "a red
 * circle above a blue square"). Shared by glimpse-make-pictures, the demo
 * models' training data and the accuracy tests. Deterministic per seed. */
#ifndef GLIMPSE_TOOLS_PICTURES_H
#define GLIMPSE_TOOLS_PICTURES_H

#include <stddef.h>
#include <stdint.h>

#define PICTURE_SIDE 224

typedef enum picture_shape_kind { PICTURE_CIRCLE, PICTURE_SQUARE, PICTURE_TRIANGLE } picture_shape_kind;

typedef struct picture_shape {
    picture_shape_kind kind;
    int colour;     /* 0 red, 1 green, 2 blue, 3 yellow */
    uint8_t rgb[3]; /* the colour as drawn (varied by up to ±15) */
    int x, y, size; /* bounding box: top-left corner and side */
} picture_shape;

typedef struct picture_scene {
    int count;              /* 1 or 2 */
    picture_shape shapes[2]; /* shapes[0] is named first in the caption */
    char caption[160];
} picture_scene;

typedef struct picture_generator {
    uint64_t state;
} picture_generator;

void picture_generator_init(picture_generator *generator, uint64_t seed);
/* Draws the next picture: pixels [PICTURE_SIDE, PICTURE_SIDE, 3] RGB. */
void picture_draw(picture_generator *generator, uint8_t *pixels, picture_scene *scene);

extern const char *const picture_colour_names[4];
extern const char *const picture_shape_names[3];

/* 1 if caption truly describes the scene: the same shapes, and for two
 * shapes a relation that holds for the order the caption names them in
 * (either shape may be named first). */
int picture_caption_is_true(const picture_scene *scene, const char *caption);

#endif
