/* Sub-groups as tensor parallelism lays them out: `test-grid BACKEND TP DP`. World tp*dp; global rank
 * d*tp + t. Every rank makes every tensor-parallel group {d*tp .. d*tp+tp-1} and every data-parallel
 * group {t, t+tp, ...} (each rank takes part in making each, as torch requires), so it belongs to two
 * overlapping sub-groups at once. Then, interleaved, as a dp x tp step uses them: all-reduces in the
 * tp group and the dp group, a send/recv between tp ranks, an all-gather in the dp group, against
 * serial computations of what every member holds; group ranks map to the global ranks expected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/pg/pg.h"
#include "tests/dist/forkranks.h"
#include "tests/rs_test.h"

typedef struct grid {
    const char *backend;
    int tp, dp;
} grid;

/* What global rank r holds in round k (exact in float). */
static float val(int r, int k, int i) { return (float)(100 * r + 10 * k + i); }

static int rank_main(void *ud, int rank, int world, rs_store *st)
{
    grid *gr = ud;
    rs_err e = {0};
    rs_pg *g = NULL, *tpg = NULL, *dpg = NULL;
    if (rs_pg_new(gr->backend, st, "grid", rank, world, 30, &g, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        return 2;
    }
    int tp = gr->tp, dp = gr->dp, t = rank % tp, d = rank / tp, ranks[64];
    for (int k = 0; k < dp; k++) {
        for (int i = 0; i < tp; i++) ranks[i] = k * tp + i;
        rs_pg *sub = NULL;
        if (rs_pg_new_group(g, ranks, tp, &sub, &e)) fprintf(stderr, "rank %d: tp group %d: %s\n", rank, k, e.msg);
        RS_CHECK((sub != NULL) == (k == d), "rank %d: member of tp group %d: %d", rank, k, sub != NULL);
        if (sub) tpg = sub;
    }
    for (int k = 0; k < tp; k++) {
        for (int i = 0; i < dp; i++) ranks[i] = i * tp + k;
        rs_pg *sub = NULL;
        if (rs_pg_new_group(g, ranks, dp, &sub, &e)) fprintf(stderr, "rank %d: dp group %d: %s\n", rank, k, e.msg);
        RS_CHECK((sub != NULL) == (k == t), "rank %d: member of dp group %d: %d", rank, k, sub != NULL);
        if (sub) dpg = sub;
    }
    if (!tpg || !dpg) return 1;
    RS_CHECK(tpg->rank == t && tpg->world == tp && dpg->rank == d && dpg->world == dp,
             "rank %d: tp rank %d of %d, dp rank %d of %d", rank, tpg->rank, tpg->world, dpg->rank, dpg->world);
    for (int i = 0; i < tp; i++) RS_CHECK(rs_pg_global_rank(tpg, i) == d * tp + i, "rank %d: tp member %d", rank, i);
    for (int i = 0; i < dp; i++) RS_CHECK(rs_pg_global_rank(dpg, i) == i * tp + t, "rank %d: dp member %d", rank, i);

    enum { N = 37 };
    float x[N], want[N], all[64 * N];
    for (int k = 0; k < 3; k++) {
        /* the tp group's all-reduce (a layer's), then the dp group's (the gradient average) */
        for (int i = 0; i < N; i++) {
            x[i] = val(rank, k, i);
            want[i] = 0;
            for (int q = 0; q < tp; q++) want[i] += val(d * tp + q, k, i);
        }
        if (rs_pg_all_reduce(tpg, x, N, RS_F32, RS_SUM, &e)) fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        RS_CHECK(!memcmp(x, want, sizeof x), "rank %d round %d: tp all_reduce differs from the serial sum", rank, k);
        for (int i = 0; i < N; i++) {
            want[i] = 0;
            for (int q = 0; q < dp; q++)
                for (int p = 0; p < tp; p++) want[i] += val(q * tp + p, k, i);
        }
        if (rs_pg_all_reduce(dpg, x, N, RS_F32, RS_SUM, &e)) fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        RS_CHECK(!memcmp(x, want, sizeof x), "rank %d round %d: dp all_reduce of tp sums is not the grid's sum", rank,
                 k);
        /* a shard to the tp group's rank 0 (the gather of whole weights) */
        if (t == 0) {
            for (int q = 1; q < tp; q++) {
                if (rs_pg_recv(tpg, x, N, RS_F32, q, &e)) fprintf(stderr, "rank %d: %s\n", rank, e.msg);
                RS_CHECK(x[N - 1] == val(d * tp + q, k, N - 1), "rank %d round %d: recv from tp rank %d", rank, k, q);
            }
        } else {
            for (int i = 0; i < N; i++) x[i] = val(rank, k, i);
            if (rs_pg_send(tpg, x, N, RS_F32, 0, &e)) fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        }
        for (int i = 0; i < N; i++) x[i] = val(rank, k, i);
        if (rs_pg_all_gather(dpg, x, all, N, RS_F32, &e)) fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        for (int q = 0; q < dp; q++)
            RS_CHECK(all[q * N + 5] == val(q * tp + t, k, 5), "rank %d round %d: dp all_gather block %d", rank, k, q);
    }
    rs_pg_destroy(tpg);
    rs_pg_destroy(dpg);
    rs_pg_destroy(g);
    return rs_test_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test-grid shm|tcp TP DP\n");
        return 2;
    }
    grid gr = {.backend = argv[1], .tp = atoi(argv[2]), .dp = atoi(argv[3])};
    if (gr.tp < 1 || gr.dp < 1 || gr.tp * gr.dp > 64) return 2;
    int bad = rs_fork_ranks(gr.tp * gr.dp, rank_main, &gr, NULL, NULL);
    RS_CHECK(bad == 0, "%d ranks failed", bad);
    printf("%s: tp=%d x dp=%d groups: %s\n", gr.backend, gr.tp, gr.dp, bad ? "FAILED" : "every sum as computed serially");
    return rs_test_finish("test-grid");
}
