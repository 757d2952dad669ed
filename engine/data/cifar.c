/* CIFAR-10 in its binary distribution (cifar-10-binary.tar.gz): each file is a run of 3073-byte records,
 * one label byte then the 32x32 red, green and blue planes, which is already the (3, 32, 32) layout. */
#include <stdlib.h>
#include <string.h>

#include "engine/data/data.h"
#include "engine/data/internal.h"

const char *const rs_data_cifar_classes[10] = {
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
};

#define CIFAR_PIXELS (RS_CIFAR_RECORD - 1)

static rs_status cifar_check(const uint8_t *buf, size_t len, const char *name, uint32_t *nrec,
                             rs_err *err)
{
    if (len > RS_DATA_FILE_MAX)
        return rs_err_set(err, RS_ERR_ARG, "%s: %zu bytes is more than a data file may hold (%zu)", name,
                          len, RS_DATA_FILE_MAX);
    if (len == 0)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset 0: file is empty; a CIFAR-10 binary batch holds 3073-byte records "
                          "(data_batch_1.bin .. data_batch_5.bin, test_batch.bin)",
                          name);
    if (len % RS_CIFAR_RECORD) {
        size_t whole = len / RS_CIFAR_RECORD;
        const char *hint = len % 3074 == 0 ? "; its size fits CIFAR-100's records (two label bytes), "
                                             "which ringside does not read"
                                           : "";
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset %zu: partial record %zu (%zu of %d bytes); a CIFAR-10 binary file "
                          "is a sequence of %d-byte records (1 label byte, then 32x32 red, green, blue): "
                          "truncated, or not a batch from cifar-10-binary.tar.gz%s",
                          name, whole * RS_CIFAR_RECORD, whole, len % RS_CIFAR_RECORD, RS_CIFAR_RECORD,
                          RS_CIFAR_RECORD, hint);
    }
    size_t n = len / RS_CIFAR_RECORD;
    if (n > UINT32_MAX)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: %zu records is more than a data set can hold", name, n);
    for (size_t r = 0; r < n; r++) {
        uint8_t l = buf[r * RS_CIFAR_RECORD];
        if (l > 9)
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: offset %zu: record %zu has label %u, not 0..9 (CIFAR-10 has 10 "
                              "classes; CIFAR-100 files are not read)",
                              name, r * RS_CIFAR_RECORD, r, l);
    }
    *nrec = (uint32_t)n;
    return RS_OK;
}

/* Records of a checked buffer into d from sample `first` on. */
static void cifar_fill(const uint8_t *buf, uint32_t n, rs_dataset *d, uint32_t first)
{
    for (uint32_t r = 0; r < n; r++) {
        const uint8_t *rec = buf + (size_t)r * RS_CIFAR_RECORD;
        float *x = d->x + (size_t)(first + r) * CIFAR_PIXELS;
        d->y[first + r] = rec[0];
        for (int i = 0; i < CIFAR_PIXELS; i++) x[i] = rs_data_u8_unit(rec[1 + i]);
    }
}

static rs_dataset *cifar_new(uint32_t n)
{
    rs_dataset *d = rs_dataset_new(n, 3, 32, 32, 10); /* caller owns */
    if (d) d->class_names = rs_data_cifar_classes;
    return d;
}

rs_status rs_data_cifar_parse(const uint8_t *buf, size_t len, const char *name, rs_dataset **out,
                              rs_err *err)
{
    *out = NULL;
    uint32_t n;
    rs_status s = cifar_check(buf, len, name, &n, err);
    if (s) return s;
    rs_dataset *d = cifar_new(n);
    if (!d) return rs_err_set(err, RS_ERR_NOMEM, "%s: cannot allocate %u x 3 x 32 x 32 floats", name, n);
    cifar_fill(buf, n, d, 0);
    rs_data_name_from_path(d, name);
    rs_data_add_source(d, name);
    *out = d;
    return RS_OK;
}

rs_status rs_data_cifar_load(const char *const *paths, int npaths, rs_dataset **out, rs_err *err)
{
    *out = NULL;
    if (!paths || npaths <= 0)
        return rs_err_set(err, RS_ERR_ARG, "cifar: no files given; pass data_batch_1.bin .. "
                                           "data_batch_5.bin for training or test_batch.bin");
    /* All raw files are held at once (150 MB for the full training set) so that the floats are
     * allocated once, not concatenated. */
    uint8_t **bufs = calloc((size_t)npaths, sizeof *bufs); /* ours, with each buffer */
    size_t *lens = calloc((size_t)npaths, sizeof *lens);
    uint32_t *counts = calloc((size_t)npaths, sizeof *counts);
    rs_status s = RS_OK;
    if (!bufs || !lens || !counts) s = rs_err_set(err, RS_ERR_NOMEM, "cifar: out of memory");
    uint64_t total = 0;
    for (int i = 0; s == RS_OK && i < npaths; i++) {
        s = rs_data_read_file(paths[i], 0, &bufs[i], &lens[i], err);
        if (s == RS_OK) s = cifar_check(bufs[i], lens[i], paths[i], &counts[i], err);
        total += counts[i];
    }
    if (s == RS_OK && total > UINT32_MAX)
        s = rs_err_set(err, RS_ERR_ARG, "cifar: %llu records in all is more than a data set can hold",
                       (unsigned long long)total);
    rs_dataset *d = NULL;
    if (s == RS_OK && !(d = cifar_new((uint32_t)total)))
        s = rs_err_set(err, RS_ERR_NOMEM, "cifar: cannot allocate %llu x 3 x 32 x 32 floats",
                       (unsigned long long)total);
    if (s == RS_OK) {
        uint32_t at = 0;
        for (int i = 0; i < npaths; i++) {
            cifar_fill(bufs[i], counts[i], d, at);
            at += counts[i];
            rs_data_add_source(d, paths[i]);
        }
        rs_data_name_from_path(d, paths[0]);
        if (npaths > 1 && !strncmp(d->name, "data_batch", 10)) strcpy(d->name, "cifar10-train");
        *out = d;
    }
    for (int i = 0; bufs && i < npaths; i++) free(bufs[i]);
    free(bufs);
    free(lens);
    free(counts);
    return s;
}
