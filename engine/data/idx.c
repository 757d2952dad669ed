/* IDX, the format MNIST and Fashion-MNIST ship in: a 4-byte magic (00 00 type ndims), ndims big-endian
 * u32 sizes, then the elements. Only unsigned-byte files are read. The header is never trusted: every
 * size is checked against the real length before anything is allocated. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/data.h"
#include "engine/data/internal.h"

static const char *idx_type_name(int t)
{
    switch (t) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    }
    return "not an IDX type";
}

/* "60000 x 28 x 28" */
static void dims_str(const uint32_t *dims, int nd, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < nd && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%u", i ? " x " : "", dims[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

rs_status rs_data_idx_parse(const uint8_t *buf, size_t len, const char *name, rs_idx *out, rs_err *err)
{
    memset(out, 0, sizeof *out);
    if (len > RS_DATA_FILE_MAX) /* keeps every dimension below INT_MAX */
        return rs_err_set(err, RS_ERR_ARG, "%s: %zu bytes is more than a data file may hold (%zu)", name,
                          len, RS_DATA_FILE_MAX);
    if (len < 4)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset %zu: file ends inside the 4-byte IDX magic (%zu bytes); expected "
                          "an MNIST-style IDX file such as train-images-idx3-ubyte.gz",
                          name, len, len);
    uint32_t magic = rs_data_be32(buf);
    if (buf[0] || buf[1]) {
        const char *hint = buf[0] == 0x1f && buf[1] == 0x8b
                               ? " (the data is still gzip-compressed after one decompression: was it "
                                 "compressed twice?)"
                               : "";
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset 0: bad magic 0x%08X: an IDX file starts with 00 00, then the type "
                          "(08 = unsigned byte) and the dimension count%s",
                          name, magic, hint);
    }
    if (buf[2] != 0x08)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset 2: IDX element type 0x%02X (%s) is not supported; ringside reads "
                          "unsigned-byte IDX files (type 0x08), as MNIST ships them",
                          name, buf[2], idx_type_name(buf[2]));
    int nd = buf[3];
    if (nd < 1 || nd > 4)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset 3: IDX dimension count %d is not 1..4; MNIST images have 3 "
                          "(n, rows, cols) and labels 1",
                          name, nd);
    size_t hdr = 4 + 4 * (size_t)nd;
    if (len < hdr)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset %zu: file ends inside the header (a %d-dimensional IDX header is "
                          "%zu bytes); the file is truncated",
                          name, len, nd, hdr);
    out->magic = magic;
    out->ndims = nd;
    for (int i = 0; i < nd; i++) {
        out->dims[i] = rs_data_be32(buf + 4 + 4 * i);
        if (out->dims[i] == 0)
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: offset %d: dimension %d is 0; an IDX data set needs at least one "
                              "element along every dimension",
                              name, 4 + 4 * i, i);
    }
    /* Multiply only while the product still fits in what the file holds: no overflow possible. */
    size_t avail = len - hdr, count = 1;
    char ds[128];
    dims_str(out->dims, nd, ds, sizeof ds);
    for (int i = 0; i < nd; i++) {
        if (count > avail / out->dims[i]) {
            uint64_t want = 1;
            bool wraps = false;
            for (int j = 0; j < nd; j++) wraps |= __builtin_mul_overflow(want, out->dims[j], &want);
            char ws[200];
            if (nd == 1) snprintf(ws, sizeof ws, "%s", ds);
            else if (wraps) snprintf(ws, sizeof ws, "%s = more than 2^64", ds);
            else snprintf(ws, sizeof ws, "%s = %llu", ds, (unsigned long long)want);
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: offset %zu: the header declares %s bytes of data but only %zu "
                              "follow it (truncated file, or a header that does not belong to it)",
                              name, len, ws, avail);
        }
        count *= out->dims[i];
    }
    if (count < avail)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset %zu: %zu more byte%s the %s = %zu bytes the header "
                          "declares; the dimensions do not match the file",
                          name, hdr + count, avail - count, avail - count == 1 ? " follows" : "s follow", ds, count);
    out->count = count;
    out->data = buf + hdr;
    return RS_OK;
}

static rs_status check_role(const rs_idx *v, const char *name, bool images, rs_err *err)
{
    uint32_t want = images ? RS_IDX_MAGIC_IMAGES : RS_IDX_MAGIC_LABELS;
    if (v->magic == want) return RS_OK;
    uint32_t other = images ? RS_IDX_MAGIC_LABELS : RS_IDX_MAGIC_IMAGES;
    if (v->magic == other)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset 0: magic 0x%08X is an IDX %s file, expected %s (0x%08X); were the "
                          "images and labels files swapped?",
                          name, v->magic, images ? "labels" : "images", images ? "images" : "labels",
                          want);
    return rs_err_set(err, RS_ERR_FORMAT,
                      "%s: offset 3: an IDX %s file has %d dimension%s (magic 0x%08X); MNIST %s are %s "
                      "(magic 0x%08X)",
                      name, images ? "images" : "labels", v->ndims, v->ndims == 1 ? "" : "s", v->magic,
                      images ? "images" : "labels", images ? "n x rows x cols" : "a list of n bytes",
                      want);
}

rs_status rs_data_idx_from_memory(const uint8_t *images, size_t images_len, const char *images_name,
                                  const uint8_t *labels, size_t labels_len, const char *labels_name,
                                  rs_dataset **out, rs_err *err)
{
    *out = NULL;
    rs_idx im, lb;
    rs_status s;
    if ((s = rs_data_idx_parse(images, images_len, images_name, &im, err))) return s;
    if ((s = check_role(&im, images_name, true, err))) return s;
    if ((s = rs_data_idx_parse(labels, labels_len, labels_name, &lb, err))) return s;
    if ((s = check_role(&lb, labels_name, false, err))) return s;
    uint32_t n = im.dims[0];
    if (lb.dims[0] != n)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: labels file has %u labels but images file %s has %u images; use the "
                          "labels file that belongs to these images",
                          labels_name, lb.dims[0], images_name, n);
    /* rows * cols <= count <= the file length, which is far below INT_MAX after the read cap. */
    int rows = (int)im.dims[1], cols = (int)im.dims[2];
    int maxl = 0;
    for (uint32_t i = 0; i < n; i++)
        if (lb.data[i] > maxl) maxl = lb.data[i];
    rs_dataset *d = rs_dataset_new(n, 1, rows, cols, maxl + 1 < 10 ? 10 : maxl + 1); /* caller owns */
    if (!d)
        return rs_err_set(err, RS_ERR_NOMEM, "%s: cannot allocate %u x %d x %d floats", images_name, n,
                          rows, cols);
    for (size_t i = 0; i < im.count; i++) d->x[i] = rs_data_u8_unit(im.data[i]);
    for (uint32_t i = 0; i < n; i++) d->y[i] = lb.data[i];
    rs_data_name_from_path(d, images_name);
    rs_data_add_source(d, images_name);
    rs_data_add_source(d, labels_name);
    *out = d;
    return RS_OK;
}

rs_status rs_data_idx_load(const char *images, const char *labels, rs_dataset **out, rs_err *err)
{
    *out = NULL;
    uint8_t *ib = NULL, *lbuf = NULL; /* ours, freed below */
    size_t il = 0, ll = 0;
    rs_status s = rs_data_read_file(images, 0, &ib, &il, err);
    if (s == RS_OK) s = rs_data_read_file(labels, 0, &lbuf, &ll, err);
    if (s == RS_OK) s = rs_data_idx_from_memory(ib, il, images, lbuf, ll, labels, out, err);
    free(ib);
    free(lbuf);
    return s;
}
