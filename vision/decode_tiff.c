/* decode_tiff.c — TIFF through libtiff, first page only, as Pillow 9.4 reads
 * it: the sample layouts of Pillow's OPEN_INFO table that convert("RGB") takes
 * (bilevel, 2/4/8-bit grey, 16/32-bit integer and 32-bit float grey clipped,
 * grey+alpha, RGB(A/X) and premultiplied RGBa at 8 or 16 bits, palette, CMYK,
 * JPEG-compressed YCbCr),
 * strips or tiles, contiguous or separate planes, every compression Pillow
 * names. Like Pillow's loader it turns the image by its own Orientation tag,
 * and reports that tag again for exif_transpose (Pillow 9.4 applies it twice).
 * libtiff prints nothing: its messages go to the error text. libtiff is opened
 * at the first TIFF (tiff_library.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "vision/decoders.h"
#include "vision/tiff_library.h"

#define TAG_PHOTOMETRIC 262

typedef struct tiff_source {
    const uint8_t *bytes;
    size_t size;
    uint64_t at;
    char message[256]; /* libtiff's first error */
} tiff_source;

static tmsize_t source_read(thandle_t handle, void *target, tmsize_t wanted) {
    tiff_source *source = handle;
    if (wanted <= 0 || source->at >= source->size) return 0;
    uint64_t left = source->size - source->at, count = (uint64_t)wanted < left ? (uint64_t)wanted : left;
    memcpy(target, source->bytes + source->at, (size_t)count);
    source->at += count;
    return (tmsize_t)count;
}

static tmsize_t source_write(thandle_t handle, void *data, tmsize_t size) {
    (void)handle;
    (void)data;
    (void)size;
    return -1;
}

static toff_t source_seek(thandle_t handle, toff_t offset, int whence) {
    tiff_source *source = handle;
    uint64_t base = whence == SEEK_CUR ? source->at : whence == SEEK_END ? source->size : 0;
    if (offset > UINT64_MAX - base) return (toff_t)-1;
    source->at = base + offset;
    return source->at;
}

static int source_close(thandle_t handle) {
    (void)handle;
    return 0;
}

static toff_t source_size(thandle_t handle) { return ((tiff_source *)handle)->size; }

static int source_map(thandle_t handle, void **base, toff_t *size) {
    (void)handle;
    (void)base;
    (void)size;
    return 0; /* no mapping: libtiff reads through source_read */
}

static void source_unmap(thandle_t handle, void *base, toff_t size) {
    (void)handle;
    (void)base;
    (void)size;
}

static int tiff_error(TIFF *tiff, void *user, const char *module, const char *format, va_list arguments) {
    (void)tiff;
    (void)module;
    tiff_source *source = user;
    if (!source->message[0]) vsnprintf(source->message, sizeof source->message, format, arguments);
    return 1; /* handled: libtiff's default handler, which prints, is not called */
}

static int tiff_warning(TIFF *tiff, void *user, const char *module, const char *format, va_list arguments) {
    (void)tiff;
    (void)user;
    (void)module;
    (void)format;
    (void)arguments;
    return 1;
}

/* ------------------------------------------------------------ sample layouts */

typedef enum sample_kind { KIND_GREY, KIND_PALETTE, KIND_RGB, KIND_CMYK } sample_kind;

typedef struct sample_layout {
    sample_kind kind;
    int bits;          /* per sample: 1, 2, 4 (one sample a pixel), 8 or 16 */
    int samples;       /* per pixel, as decoded (contiguous) */
    int inverted;      /* MinIsWhite grey below 16 bits */
    int sample_format; /* SAMPLEFORMAT_UINT, _INT or _IEEEFP (grey of 16 or 32 bits only) */
    int premultiplied; /* RGB with associated alpha (Pillow's "RGBa") */
    uint8_t palette[256][3];
} sample_layout;

/* Sample s of pixel x in a decoded row, at 8 bits: 16-bit samples (native
 * order from libtiff) keep their high byte. */
static unsigned sample8(const sample_layout *layout, const uint8_t *row, size_t x, int s) {
    size_t index = x * (size_t)layout->samples + (size_t)s;
    if (layout->bits == 8) return row[index];
    uint16_t wide;
    memcpy(&wide, row + 2 * index, 2);
    return wide >> 8;
}

/* A 16- or 32-bit grey sample (native order) clipped to 0..255 as
 * convert("RGB") clips modes I;16, I and F (floats truncated toward zero). */
static unsigned clipped_wide_sample(const uint8_t *at, const sample_layout *layout) {
    double value;
    if (layout->bits == 16) {
        uint16_t bits16;
        memcpy(&bits16, at, 2);
        value = layout->sample_format == SAMPLEFORMAT_INT ? (double)(int16_t)bits16 : (double)bits16;
    } else if (layout->sample_format == SAMPLEFORMAT_IEEEFP) {
        float real;
        memcpy(&real, at, 4);
        value = real;
    } else {
        int32_t whole;
        memcpy(&whole, at, 4);
        value = whole;
    }
    if (!(value > 0)) return 0; /* negatives and NaN */
    return value >= 255 ? 255 : (unsigned)value;
}

/* Pixels [0, count) of a decoded contiguous row to RGB. */
static void convert_row(uint8_t *target, const uint8_t *row, size_t count, const sample_layout *layout) {
    for (size_t x = 0; x < count; x++, target += 3) {
        unsigned value;
        switch (layout->kind) {
        case KIND_GREY:
        case KIND_PALETTE:
            if (layout->bits < 8) {
                size_t bit = x * (size_t)layout->bits;
                unsigned mask = (1u << layout->bits) - 1;
                value = (row[bit / 8] >> (8 - layout->bits - bit % 8)) & mask;
                if (layout->kind == KIND_GREY) value = value * (255 / mask);
            } else if (layout->bits >= 16) { /* modes I;16, I and F: convert("RGB") clips */
                value = clipped_wide_sample(row + (size_t)layout->bits / 8 * x, layout);
            } else {
                value = row[x * (size_t)layout->samples];
            }
            if (layout->kind == KIND_PALETTE) {
                memcpy(target, layout->palette[value], 3);
            } else {
                if (layout->inverted) value = 255 - value;
                target[0] = target[1] = target[2] = (uint8_t)value;
            }
            break;
        case KIND_RGB:
            for (int c = 0; c < 3; c++) target[c] = (uint8_t)sample8(layout, row, x, c);
            if (layout->premultiplied) { /* Pillow's unpackRGBa: floor(c × 255 / a), clipped; 0 for a = 0 */
                unsigned alpha = sample8(layout, row, x, 3);
                for (int c = 0; c < 3; c++) {
                    unsigned un = alpha == 0 ? 0 : alpha == 255 ? target[c] : target[c] * 255u / alpha;
                    target[c] = (uint8_t)(un > 255 ? 255 : un);
                }
            }
            break;
        case KIND_CMYK:
            cmyk_to_rgb(target, (int)sample8(layout, row, x, 0), (int)sample8(layout, row, x, 1),
                        (int)sample8(layout, row, x, 2), (int)sample8(layout, row, x, 3));
            break;
        }
    }
}

static int extras_are(const uint16_t *extras, uint16_t count, int first, int more) {
    if (count == 0) return 0;
    if (extras[0] != first) return 0;
    for (uint16_t i = 1; i < count; i++)
        if (extras[i] != more) return 0;
    return 1;
}

/* Fills layout from the first page's tags, accepting exactly the layouts
 * Pillow's OPEN_INFO maps to a mode convert("RGB") takes. */
static glimpse_status choose_layout(TIFF *tiff, const uint8_t *bytes, size_t size, const char *label,
                                    sample_layout *layout) {
    uint16_t bits = 1, samples = 1, format = SAMPLEFORMAT_UINT, photometric = 0, compression = 1,
             planar = PLANARCONFIG_CONTIG, extra_count = 0;
    uint16_t *extras = NULL;
    libtiff.TIFFGetFieldDefaulted(tiff, TIFFTAG_BITSPERSAMPLE, &bits);
    libtiff.TIFFGetFieldDefaulted(tiff, TIFFTAG_SAMPLESPERPIXEL, &samples);
    libtiff.TIFFGetFieldDefaulted(tiff, TIFFTAG_SAMPLEFORMAT, &format);
    libtiff.TIFFGetFieldDefaulted(tiff, TIFFTAG_COMPRESSION, &compression);
    libtiff.TIFFGetFieldDefaulted(tiff, TIFFTAG_PLANARCONFIG, &planar);
    libtiff.TIFFGetFieldDefaulted(tiff, TIFFTAG_EXTRASAMPLES, &extra_count, &extras);
    /* Pillow reads a missing Photometric as 0 (MinIsWhite); libtiff would guess. */
    if (tiff_file_has_tag(bytes, size, TAG_PHOTOMETRIC)) libtiff.TIFFGetField(tiff, TIFFTAG_PHOTOMETRIC, &photometric);
    int big_endian = libtiff.TIFFIsBigEndian(tiff);
    memset(layout, 0, sizeof *layout);
    layout->bits = bits;
    layout->samples = samples;
    int known_compression = compression == COMPRESSION_NONE || compression == COMPRESSION_CCITTRLE ||
                            compression == COMPRESSION_CCITTFAX3 || compression == COMPRESSION_CCITTFAX4 ||
                            compression == COMPRESSION_LZW || compression == COMPRESSION_JPEG ||
                            compression == COMPRESSION_ADOBE_DEFLATE || compression == COMPRESSION_DEFLATE ||
                            compression == COMPRESSION_PACKBITS || compression == COMPRESSION_LZMA ||
                            compression == COMPRESSION_ZSTD || compression == COMPRESSION_WEBP;
    int ok = known_compression && extra_count < samples;
    int colour_samples = samples - extra_count;
    int grey = photometric == PHOTOMETRIC_MINISWHITE || photometric == PHOTOMETRIC_MINISBLACK;
    if (ok && format != SAMPLEFORMAT_UINT) {
        /* Pillow's modes I and F, which convert("RGB") clips to 0..255: signed 16
         * and 32 bits (MinIsBlack), 32-bit floats (either photometric) */
        ok = grey && samples == 1 && extra_count == 0 &&
             ((format == SAMPLEFORMAT_INT && (bits == 16 || bits == 32) && photometric == PHOTOMETRIC_MINISBLACK) ||
              (format == SAMPLEFORMAT_IEEEFP && bits == 32));
        photometric = ok ? PHOTOMETRIC_MINISBLACK : photometric;
    }
    layout->sample_format = format;
    switch (ok ? photometric : 0xffff) {
    case PHOTOMETRIC_MINISWHITE:
    case PHOTOMETRIC_MINISBLACK:
        layout->kind = KIND_GREY;
        if (format != SAMPLEFORMAT_UINT) {
            /* checked above */
        } else if (samples == 1 && extra_count == 0 && bits == 32) {
            ok = photometric == PHOTOMETRIC_MINISBLACK && !big_endian; /* Pillow's I;32N: read as signed */
            layout->sample_format = SAMPLEFORMAT_INT;
        } else if (samples == 1 && extra_count == 0 && (bits == 1 || bits == 2 || bits == 4 || bits == 8)) {
            layout->inverted = photometric == PHOTOMETRIC_MINISWHITE;
        } else if (samples == 1 && extra_count == 0 && bits == 16) {
            ok = photometric == PHOTOMETRIC_MINISBLACK || !big_endian; /* Pillow has no MM MinIsWhite I;16 */
        } else {
            ok = photometric == PHOTOMETRIC_MINISBLACK && samples == 2 && bits == 8 && extra_count == 1 && extras[0] == 2;
        }
        break;
    case PHOTOMETRIC_PALETTE: {
        layout->kind = KIND_PALETTE;
        ok = (samples == 1 && extra_count == 0 && (bits == 1 || bits == 2 || bits == 4 || bits == 8)) ||
             (samples == 2 && bits == 8 && extra_count == 1 && extras[0] == 2);
        uint16_t *red, *green, *blue;
        if (ok && libtiff.TIFFGetField(tiff, TIFFTAG_COLORMAP, &red, &green, &blue)) {
            for (int i = 0; i < (1 << bits); i++) { /* Pillow: each 16-bit entry // 256 */
                layout->palette[i][0] = (uint8_t)(red[i] >> 8);
                layout->palette[i][1] = (uint8_t)(green[i] >> 8);
                layout->palette[i][2] = (uint8_t)(blue[i] >> 8);
            }
        } else {
            ok = 0;
        }
        break;
    }
    case PHOTOMETRIC_RGB:
        layout->kind = KIND_RGB;
        ok = colour_samples == 3 && (bits == 8 || bits == 16) && extra_count <= (bits == 8 ? 3 : 1);
        if (ok && extra_count > 0) {
            /* 8 bits: (0|1|2|999, 0, 0...); 16 bits: one extra, 0, 1 or 2 */
            int first = extras[0];
            ok = (first == 0 || first == 1 || first == 2 || (first == 999 && extra_count == 1 && bits == 8)) &&
                 extras_are(extras, extra_count, first, 0);
            layout->premultiplied = first == EXTRASAMPLE_ASSOCALPHA;
        }
        break;
    case PHOTOMETRIC_SEPARATED:
        layout->kind = KIND_CMYK;
        ok = colour_samples == 4 && ((bits == 8 && extra_count <= 2 && (extra_count == 0 || extras_are(extras, extra_count, 0, 0))) ||
                                     (bits == 16 && extra_count == 0 && !big_endian));
        break;
    case PHOTOMETRIC_YCBCR: /* only as JPEG in one plane, which libtiff hands over as RGB */
        layout->kind = KIND_RGB;
        ok = compression == COMPRESSION_JPEG && planar == PLANARCONFIG_CONTIG && samples == 3 && bits == 8;
        if (ok) ok = libtiff.TIFFSetField(tiff, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
        break;
    default: ok = 0;
    }
    /* Separate planes: Pillow copies plane by plane into its bands (grey+alpha:
     * the grey is the first), premultiplied alpha is not undone there, and
     * 16-bit planes are only read through libtiff (compressed). */
    if (ok && planar == PLANARCONFIG_SEPARATE && samples > 1)
        ok = !layout->premultiplied && samples <= 4 && layout->kind != KIND_PALETTE &&
             (bits == 8 || compression != COMPRESSION_NONE);
    if (!ok)
        return error_set(GLIMPSE_STATUS_UNSUPPORTED,
                         "%s: TIFF with photometric %u, %u samples of %u bits (%u extra), sample format %u and "
                         "compression %u is not a layout Pillow converts to RGB",
                         label, photometric, samples, bits, extra_count, format, compression);
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------ reading */

/* One decoded block (strip or tile) of plane `plane`: rows [y, y + rows) and
 * columns [x, x + columns) of the image, row_bytes apart. Separate planes put
 * their band straight into the RGB (CMYK's black into key). */
static void place_block(glimpse_image *image, uint8_t *key, const uint8_t *block, size_t row_bytes, uint32_t x,
                        uint32_t y, uint32_t columns, uint32_t rows, int planes, int plane, const sample_layout *layout) {
    size_t width = (size_t)image->width;
    for (uint32_t r = 0; r < rows; r++) {
        const uint8_t *row = block + (size_t)r * row_bytes;
        size_t at = (size_t)(y + r) * width + x;
        if (planes == 1) {
            convert_row(image->pixels + 3 * at, row, columns, layout);
            continue;
        }
        for (uint32_t c = 0; c < columns; c++) {
            uint16_t wide = row[c];
            if (layout->bits == 16) memcpy(&wide, row + 2 * (size_t)c, 2);
            uint8_t value = (uint8_t)(layout->bits == 16 ? wide >> 8 : wide);
            if (layout->kind == KIND_GREY) {
                if (plane == 0) memset(image->pixels + 3 * (at + c), value, 3);
            } else if (plane < 3) {
                image->pixels[3 * (at + c) + (size_t)plane] = value;
            }
            else if (plane == 3 && key) key[at + c] = value;
        }
    }
}

static glimpse_status read_pixels(TIFF *tiff, tiff_source *source, const char *label, const sample_layout *layout,
                                  glimpse_image *image) {
    uint32_t width = (uint32_t)image->width, height = (uint32_t)image->height;
    uint16_t planar = PLANARCONFIG_CONTIG;
    libtiff.TIFFGetFieldDefaulted(tiff, TIFFTAG_PLANARCONFIG, &planar);
    int planes = planar == PLANARCONFIG_SEPARATE ? layout->samples : 1;
    uint8_t *key = NULL; /* CMYK's K plane, when planes are separate */
    if (planes > 1 && layout->kind == KIND_CMYK && !(key = malloc((size_t)width * height))) return ERROR_OOM();
    int tiled = libtiff.TIFFIsTiled(tiff);
    uint32_t block_width = width, block_height = 0;
    tmsize_t block_size, row_bytes;
    if (tiled) {
        libtiff.TIFFGetField(tiff, TIFFTAG_TILEWIDTH, &block_width);
        libtiff.TIFFGetField(tiff, TIFFTAG_TILELENGTH, &block_height);
        block_size = libtiff.TIFFTileSize(tiff);
        row_bytes = libtiff.TIFFTileRowSize(tiff);
        /* a tile far larger than the image is a lie, not a layout */
        if (block_width == 0 || block_height == 0 ||
            (uint64_t)block_width * block_height > 4 * (uint64_t)width * height + ((uint64_t)1 << 20))
            block_size = 0;
    } else {
        libtiff.TIFFGetFieldDefaulted(tiff, TIFFTAG_ROWSPERSTRIP, &block_height);
        if (block_height == 0 || block_height > height) block_height = height;
        block_size = libtiff.TIFFStripSize(tiff);
        row_bytes = libtiff.TIFFScanlineSize(tiff);
    }
    uint8_t *block = block_size > 0 && row_bytes > 0 ? malloc((size_t)block_size) : NULL;
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (!block) status = block_size > 0 && row_bytes > 0 ? ERROR_OOM()
                                                          : error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken TIFF: bad strip or tile size", label);
    for (int plane = 0; plane < planes && !status; plane++)
        for (uint32_t y = 0; y < height && !status; y += block_height)
            for (uint32_t x = 0; x < width && !status; x += block_width) {
                uint32_t rows = block_height < height - y ? block_height : height - y;
                uint32_t columns = block_width < width - x ? block_width : width - x;
                tmsize_t got, needed;
                if (tiled) {
                    got = libtiff.TIFFReadEncodedTile(tiff, libtiff.TIFFComputeTile(tiff, x, y, 0, (uint16_t)plane),
                                                      block, block_size);
                    needed = block_size;
                } else {
                    got = libtiff.TIFFReadEncodedStrip(tiff, libtiff.TIFFComputeStrip(tiff, y, (uint16_t)plane),
                                                       block, block_size);
                    needed = row_bytes * (tmsize_t)rows;
                }
                if (got < needed) {
                    status = error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken TIFF: %s", label,
                                       source->message[0] ? source->message : "image file is truncated");
                    break;
                }
                place_block(image, key, block, (size_t)row_bytes, x, y, columns, rows, planes, plane, layout);
            }
    if (!status && key) /* separate CMYK planes: C, M, Y sit in the RGB, K beside it */
        for (size_t i = 0; i < (size_t)width * height; i++) {
            uint8_t *p = image->pixels + 3 * i;
            cmyk_to_rgb(p, p[0], p[1], p[2], key[i]);
        }
    free(block);
    free(key);
    return status;
}

glimpse_status decode_tiff(const uint8_t *bytes, size_t size, const char *label, uint64_t max_pixels,
                           glimpse_image **out, int *orientation) {
    const char *why;
    if (!tiff_library_load(&why)) return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: %s", label, why);
    tiff_source source = {bytes, size, 0, {0}};
    TIFFOpenOptions *options = libtiff.TIFFOpenOptionsAlloc();
    if (!options) return ERROR_OOM();
    libtiff.TIFFOpenOptionsSetErrorHandlerExtR(options, tiff_error, &source);
    libtiff.TIFFOpenOptionsSetWarningHandlerExtR(options, tiff_warning, &source);
    /* no single allocation beyond what the largest allowed image needs */
    uint64_t most = max_pixels > ((uint64_t)1 << 40) ? ((uint64_t)1 << 40) : max_pixels;
    libtiff.TIFFOpenOptionsSetMaxSingleMemAlloc(options, (tmsize_t)(most * 8 + ((uint64_t)64 << 20)));
    TIFF *tiff = libtiff.TIFFClientOpenExt(label, "rm", &source, source_read, source_write, source_seek,
                                           source_close, source_size, source_map, source_unmap, options);
    libtiff.TIFFOpenOptionsFree(options);
    if (!tiff)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: broken TIFF: %s", label,
                         source.message[0] ? source.message : "cannot read its first directory");
    uint32_t width = 0, height = 0;
    libtiff.TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &width);
    libtiff.TIFFGetField(tiff, TIFFTAG_IMAGELENGTH, &height);
    sample_layout layout;
    glimpse_image *image = NULL;
    glimpse_status status = check_dimensions(label, width, height, max_pixels);
    if (!status) status = choose_layout(tiff, bytes, size, label, &layout);
    if (!status && (status = image_allocate((int)width, (int)height, &image))) status = error_prefix(status, "%s", label);
    if (!status) status = read_pixels(tiff, &source, label, &layout, image);
    libtiff.TIFFClose(tiff);
    /* Pillow's TIFF loader turns the image by its Orientation (load_end), and
     * exif_transpose reads the same tag again. */
    int turn = tiff_file_orientation(bytes, size);
    if (!status) status = image_orient(&image, turn);
    if (status) {
        glimpse_image_free(image);
        return status;
    }
    *orientation = turn;
    *out = image;
    return GLIMPSE_STATUS_OK;
}
