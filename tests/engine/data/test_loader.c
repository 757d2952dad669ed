/* The loader: batches walk this rank's samples in order, the last batch is partial unless
 * drop_last_batch, the end of an epoch returns 0 until the next set_epoch, and W loaders at batch b
 * together yield exactly the batches of one loader at batch W*b. */
#include <stdlib.h>
#include <string.h>

#include "engine/data/loader.h"
#include "tests/rs_test.h"

enum { PER = 3 };

/* n samples of shape (1,1,3): x = (10i, 10i+1, 10i+2), y = i % 7. */
static rs_dataset *make(uint32_t n)
{
    rs_dataset *d = rs_dataset_new(n, 1, 1, PER, 7);
    for (uint32_t i = 0; i < n; i++) {
        for (int k = 0; k < PER; k++) d->x[i * PER + k] = (float)(10 * i + k);
        d->y[i] = (int32_t)(i % 7);
    }
    return d;
}

/* Runs an epoch; checks each row against the sampler's order; returns rows seen, fills sizes. */
static uint32_t run_epoch(rs_loader *l, const rs_dataset *d, int batch, int *sizes, int *nb)
{
    float *x = malloc((size_t)batch * PER * sizeof *x);
    int32_t *y = malloc((size_t)batch * sizeof *y);
    const uint32_t *order = rs_sampler_indices(rs_loader_sampler(l));
    uint32_t seen = 0;
    int rows, bad = 0;
    *nb = 0;
    while ((rows = rs_loader_next(l, x, y)) > 0) {
        const uint32_t *li = rs_loader_last_indices(l);
        for (int r = 0; r < rows; r++) {
            uint32_t want = order[seen + r];
            bad += li[r] != want || y[r] != d->y[want] || x[r * PER + 2] != (float)(10 * want + 2);
        }
        seen += (uint32_t)rows;
        sizes[(*nb)++] = rows;
    }
    RS_CHECK(bad == 0, "%d rows are not the sampler's samples in order", bad);
    free(x);
    free(y);
    return seen;
}

static void test_batches(void)
{
    rs_dataset *d = make(23);
    rs_err e = {0};
    int sizes[32], nb;
    rs_sampler_cfg cfg = {.rank = 0, .world = 1, .shuffle = false};
    rs_loader *l = rs_loader_new(d, 5, &cfg, &e);
    RS_CHECK(l && rs_loader_batches(l) == 5 && rs_loader_samples(l) == 23, "batches %u",
             l ? rs_loader_batches(l) : 0);
    RS_CHECK(run_epoch(l, d, 5, sizes, &nb) == 23 && nb == 5 && sizes[4] == 3, "partial last batch: %d batches",
             nb);
    float x[5 * PER];
    int32_t y[5];
    RS_CHECK(rs_loader_next(l, x, y) == 0 && rs_loader_next(l, x, y) == 0, "0 after the end, and again");
    rs_loader_set_epoch(l, 0);
    RS_CHECK(rs_loader_next(l, x, y) == 5 && y[0] == 0 && x[PER * 4] == 40, "replay from the first sample");
    rs_loader_free(l);

    cfg.drop_last_batch = true;
    l = rs_loader_new(d, 5, &cfg, &e);
    RS_CHECK(rs_loader_batches(l) == 4, "drop_last_batch: %u batches", rs_loader_batches(l));
    RS_CHECK(run_epoch(l, d, 5, sizes, &nb) == 20 && nb == 4, "drop_last_batch: %d batches", nb);
    rs_loader_free(l);

    /* one rank of three, shuffled, several epochs */
    cfg = (rs_sampler_cfg){.rank = 1, .world = 3, .shuffle = true, .seed = 9};
    l = rs_loader_new(d, 4, &cfg, &e);
    RS_CHECK(rs_loader_samples(l) == 8 && rs_loader_batches(l) == 2, "rank share %u", rs_loader_samples(l));
    for (int ep = 0; ep < 3; ep++) {
        rs_loader_set_epoch(l, ep);
        RS_CHECK(run_epoch(l, d, 4, sizes, &nb) == 8 && nb == 2, "epoch %d", ep);
    }
    rs_loader_free(l);

    /* NULL cfg: rank 0 of 1, shuffled */
    l = rs_loader_new(d, 10, NULL, &e);
    RS_CHECK(l && rs_loader_batches(l) == 3 && rs_loader_samples(l) == 23, "default cfg");
    const uint32_t *o = rs_sampler_indices(rs_loader_sampler(l));
    int ident = 0;
    for (int i = 0; i < 23; i++) ident += o[i] == (uint32_t)i;
    RS_CHECK(ident < 23, "default cfg does not shuffle");
    rs_loader_free(l);
    rs_dataset_free(d);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* W ranks at batch b against one process at batch W*b, batch for batch. */
static void test_ddp_equivalence(uint32_t n, int W, int b)
{
    rs_dataset *d = make(n);
    rs_err e = {0};
    rs_loader *ranks[4], *one;
    rs_sampler_cfg c = {.rank = 0, .world = 1, .shuffle = true, .seed = 1234};
    one = rs_loader_new(d, W * b, &c, &e);
    rs_loader_set_epoch(one, 3);
    for (int r = 0; r < W; r++) {
        c = (rs_sampler_cfg){.rank = r, .world = W, .shuffle = true, .seed = 1234};
        ranks[r] = rs_loader_new(d, b, &c, &e);
        rs_loader_set_epoch(ranks[r], 3);
    }
    float *x = malloc((size_t)W * b * PER * sizeof *x);
    int32_t *y = malloc((size_t)W * b * sizeof *y);
    uint32_t *u = malloc((size_t)W * b * sizeof *u), *v = malloc((size_t)W * b * sizeof *v);
    int steps = 0, bad = 0, got;
    while ((got = rs_loader_next(one, x, y)) > 0) {
        memcpy(v, rs_loader_last_indices(one), (size_t)got * sizeof *v);
        int k = 0;
        for (int r = 0; r < W; r++) {
            int rows = rs_loader_next(ranks[r], x, y);
            memcpy(u + k, rs_loader_last_indices(ranks[r]), (size_t)rows * sizeof *u);
            k += rows;
        }
        qsort(u, (size_t)k, sizeof *u, cmp_u32);
        qsort(v, (size_t)got, sizeof *v, cmp_u32);
        bad += k != got || memcmp(u, v, (size_t)k * sizeof *u) != 0;
        steps++;
    }
    for (int r = 0; r < W; r++) RS_CHECK(rs_loader_next(ranks[r], x, y) == 0, "rank %d has batches left", r);
    RS_CHECK(bad == 0 && steps == (int)((n + W * b - 1) / (W * b)),
             "n=%u W=%d b=%d: %d of %d steps differ from one process at batch %d", n, W, b, bad, steps, W * b);
    free(x);
    free(y);
    free(u);
    free(v);
    rs_loader_free(one);
    for (int r = 0; r < W; r++) rs_loader_free(ranks[r]);
    rs_dataset_free(d);
}

static void test_args(void)
{
    rs_dataset *d = make(4);
    rs_err e = {0};
    RS_CHECK(!rs_loader_new(d, 0, NULL, &e) && e.code == RS_ERR_ARG && strstr(e.msg, "batch size 0"), "%s", e.msg);
    RS_CHECK(!rs_loader_new(NULL, 4, NULL, &e) && e.code == RS_ERR_ARG, "NULL data set");
    RS_CHECK(!rs_loader_new(d, 4, &(rs_sampler_cfg){.rank = 1, .world = 1}, &e) && strstr(e.msg, "rank 1"), "%s",
             e.msg);
    rs_loader_free(NULL);
    rs_dataset_free(d);
}

int main(void)
{
    test_batches();
    test_ddp_equivalence(24, 3, 4); /* n divisible by W*b */
    test_ddp_equivalence(30, 3, 4); /* partial last batch, n divisible by W */
    test_ddp_equivalence(100, 4, 8);
    test_ddp_equivalence(60000, 4, 64);
    test_args();
    return rs_test_finish("data-loader");
}
