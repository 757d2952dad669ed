/* Helpers shared by the readers of engine/data and by nothing else (not part of the public API; the
 * names carry the rs_data_ prefix only because C has no module-private linkage across files). */
#ifndef RS_DATA_INTERNAL_H
#define RS_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/data/dataset.h"

/* The last path component, without ".gz" and then without one more extension: the data set's short
 * name ("train-images-idx3-ubyte.gz" -> "train-images-idx3-ubyte", "iris.csv" -> "iris"). */
void rs_data_name_from_path(rs_dataset *d, const char *path);

/* Appends s to d->source, separated by ", " when not the first, truncating with "..." if needed. */
void rs_data_add_source(rs_dataset *d, const char *s);

static inline uint32_t rs_data_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Pixel byte to [0,1] exactly as torchvision's ToTensor does it: a float32 division by 255. */
static inline float rs_data_u8_unit(uint8_t v) { return (float)v / 255.0f; }

#endif
