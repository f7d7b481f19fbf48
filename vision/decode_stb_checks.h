/* decode_stb_checks.h — inside vision/ only: what decode.c checks itself before stb_image (2.27, from
 * Debian's libstb-dev) sees a file, where stb's own checks are known to fall short (decode_stb_checks.c). */
#ifndef GLIMPSE_VISION_DECODE_STB_CHECKS_H
#define GLIMPSE_VISION_DECODE_STB_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "glimpse.h"

/* GLIMPSE_STATUS_OK, or BAD_FORMAT naming label for a file stb_image would decode unsafely. */
glimpse_status stb_check_data(const uint8_t *bytes, size_t size, const char *label);

#endif
