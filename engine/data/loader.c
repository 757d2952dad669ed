/* The batch loader: walks this rank's sampler indices in order and copies samples into the caller's
 * batch buffers. Everything is allocated by rs_loader_new, so the training loop's steady state does not
 * touch the allocator. */
#include <stdlib.h>
#include <string.h>

#include "engine/data/loader.h"

struct rs_loader {
    const rs_dataset *d; /* borrowed */
    int batch;
    bool drop_last_batch;
    rs_sampler *s;       /* owned */
    uint32_t pos;        /* next position in the sampler's indices */
    uint32_t last_n;
    uint32_t *last;      /* (batch) the last batch's indices, owned */
};

rs_loader *rs_loader_new(const rs_dataset *d, int batch, const rs_sampler_cfg *cfg, rs_err *err)
{
    if (!d) {
        rs_err_set(err, RS_ERR_ARG, "loader: no data set");
        return NULL;
    }
    if (batch < 1) {
        rs_err_set(err, RS_ERR_ARG, "loader: batch size %d; it must be at least 1 (e.g. batch=64)", batch);
        return NULL;
    }
    rs_sampler_cfg c = cfg ? *cfg : rs_sampler_cfg_default();
    rs_sampler *s = rs_sampler_new(d->n, &c, err);
    if (!s) return NULL;
    rs_loader *l = calloc(1, sizeof *l); /* caller owns */
    if (!l) {
        rs_sampler_free(s);
        rs_err_set(err, RS_ERR_NOMEM, "loader: out of memory");
        return NULL;
    }
    l->last = malloc((size_t)batch * sizeof *l->last);
    if (!l->last) {
        rs_sampler_free(s);
        free(l);
        rs_err_set(err, RS_ERR_NOMEM, "loader: out of memory");
        return NULL;
    }
    l->d = d;
    l->batch = batch;
    l->drop_last_batch = c.drop_last_batch;
    l->s = s;
    return l;
}

void rs_loader_free(rs_loader *l)
{
    if (!l) return;
    rs_sampler_free(l->s);
    free(l->last);
    free(l);
}

void rs_loader_set_epoch(rs_loader *l, int epoch)
{
    rs_sampler_set_epoch(l->s, epoch);
    l->pos = 0;
    l->last_n = 0;
}

uint32_t rs_loader_batches(const rs_loader *l)
{
    uint32_t n = rs_sampler_count(l->s), b = (uint32_t)l->batch;
    return l->drop_last_batch ? n / b : n / b + (n % b != 0);
}

uint32_t rs_loader_samples(const rs_loader *l) { return rs_sampler_count(l->s); }

int rs_loader_next(rs_loader *l, void *x, int32_t *y)
{
    uint32_t count = rs_sampler_count(l->s), left = count - l->pos;
    uint32_t rows = left < (uint32_t)l->batch ? left : (uint32_t)l->batch;
    if (rows == 0 || (l->drop_last_batch && rows < (uint32_t)l->batch)) {
        l->pos = count;
        l->last_n = 0;
        return 0;
    }
    size_t per = rs_dataset_sample_numel(l->d) * 4, ny = (size_t)l->d->y_len; /* 4-byte elements */
    for (uint32_t i = 0; i < rows; i++) {
        l->last[i] = rs_sampler_index(l->s, l->pos + i);
        rs_dataset_get(l->d, l->last[i], (char *)x + i * per, y + i * ny);
    }
    l->last_n = rows;
    l->pos += rows;
    return (int)rows;
}

const uint32_t *rs_loader_last_indices(const rs_loader *l) { return l->last; }
const rs_sampler *rs_loader_sampler(const rs_loader *l) { return l->s; }
