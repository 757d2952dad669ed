/* Every backend against a serial computation: `test-coll BACKEND MODE WORLD`. For shm and tcp the
 * parent hosts the store and forks `world` ranks; with mpi the process is one rank of an mpirun job.
 * Each rank builds the group, runs the operations over dtypes x reduce ops x counts (also on
 * sub-groups, and immediate send/recv), and checks its result against the reduction it computes
 * itself in rank order. A rank exits non-zero on a mismatch. `matrix-onecpu` runs the matrix with
 * every rank moved onto one CPU after the group is made, as the kernel places them on a busy machine:
 * each wait then finds its peer on its own CPU (shm sleeps on its bell, the peer rings it). */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/launch/launch.h"
#include "dist/pg/pg.h"
#include "dist/store/store.h"
#include "tests/dist/forkranks.h"
#include "tests/rs_test.h"

typedef struct ctx {
    rs_pg *g;
    int r, w;
    int fails;
    const char *what; /* the case being checked, for messages */
    const char *backend;
    rs_pg_event ev[64];
    int nev;
} ctx;

static const rs_dtype dtypes[] = {RS_F32, RS_F64, RS_I32, RS_I64};

/* Rank r's element i. Products use factors in {±1, ±2} (or [0.5, 1.5] for floats) so 8 ranks cannot
 * overflow; the rest small values with fractions for floats, so sums round differently by order. */
static double value(rs_redop op, bool isf, int r, size_t i)
{
    if (op == RS_PRODUCT) {
        static const double f[5] = {1, 2, -1, 1, -2};
        return isf ? 0.5 + (double)(((size_t)r * 7 + i * 3) % 11) * 0.1 : f[((size_t)r * 5 + i * 3) % 5];
    }
    double v = (double)(((size_t)r * 31 + i * 17) % 23) - 11;
    return isf ? v * 0.37 + r * 0.001 : v;
}

static void fill(void *buf, size_t n, rs_dtype t, rs_redop op, int r, size_t base)
{
    for (size_t i = 0; i < n; i++) {
        double v = value(op, t == RS_F32 || t == RS_F64, r, base + i);
        switch (t) {
        case RS_F32: ((float *)buf)[i] = (float)v; break;
        case RS_F64: ((double *)buf)[i] = v; break;
        case RS_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
        default: ((int64_t *)buf)[i] = (int64_t)v; break;
        }
    }
}

static double get(const void *buf, size_t i, rs_dtype t)
{
    switch (t) {
    case RS_F32: return ((const float *)buf)[i];
    case RS_F64: return ((const double *)buf)[i];
    case RS_I32: return ((const int32_t *)buf)[i];
    default: return (double)((const int64_t *)buf)[i];
    }
}

/* The serial reference: rank 0's data, then ranks 1..w-1 folded in, AVG divided once. */
static void expected(void *out, size_t n, rs_dtype t, rs_redop op, int w, size_t base)
{
    fill(out, n, t, op, 0, base);
    void *tmp = malloc(n * rs_dtype_size(t) + 1);
    for (int r = 1; r < w; r++) {
        fill(tmp, n, t, op, r, base);
        rs_pg_reduce_into(out, tmp, n, t, op);
    }
    free(tmp);
    if (op == RS_AVG) rs_pg_scale_avg(out, n, t, w);
}

/* Integers, MIN and MAX exactly; float sums and products within a tolerance (their order differs). */
static void compare(ctx *c, const void *got, const void *want, size_t n, rs_dtype t, rs_redop op, const char *what)
{
    bool exact = t == RS_I32 || t == RS_I64 || op == RS_MIN || op == RS_MAX;
    double tol = t == RS_F32 ? 2e-5 : 1e-12;
    for (size_t i = 0; i < n; i++) {
        double a = get(got, i, t), b = get(want, i, t);
        if (exact ? a != b : fabs(a - b) > tol * (1 + fabs(b))) {
            fprintf(stderr, "rank %d: %s %s %s n=%zu: element %zu: got %.9g want %.9g\n", c->r, what, rs_dtype_name(t),
                    rs_redop_name(op), n, i, a, b);
            c->fails++;
            return;
        }
    }
}

static bool ok(ctx *c, rs_status st, const rs_err *e, const char *what)
{
    if (st == RS_OK) return true;
    fprintf(stderr, "rank %d: %s: %s\n", c->r, what, e->msg);
    c->fails++;
    return false;
}

static uint64_t hash(const void *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

/* Every rank must hold the same bits: all_gather the hashes and compare. */
static void same_everywhere(ctx *c, const void *buf, size_t bytes, const char *what)
{
    int64_t h = (int64_t)hash(buf, bytes), all[64];
    rs_err e = {0};
    if (!ok(c, rs_pg_all_gather(c->g, &h, all, 1, RS_I64, &e), &e, "all_gather of hashes")) return;
    for (int r = 0; r < c->w; r++)
        if (all[r] != h) {
            fprintf(stderr, "rank %d: %s: result bits differ from rank %d's\n", c->r, what, r);
            c->fails++;
            return;
        }
}

static void check_all_reduce(ctx *c, size_t n, rs_dtype t, rs_redop op, rs_pg_algo a)
{
    size_t es = rs_dtype_size(t);
    char *buf = malloc(n * es + 1), *want = malloc(n * es + 1), what[64];
    snprintf(what, sizeof what, "all_reduce(%s)", rs_pg_algo_name(a));
    fill(buf, n, t, op, c->r, 0);
    expected(want, n, t, op, c->w, 0);
    rs_err e = {0};
    c->g->algo = a;
    if (ok(c, rs_pg_all_reduce(c->g, buf, n, t, op, &e), &e, what)) {
        compare(c, buf, want, n, t, op, what);
        same_everywhere(c, buf, n * es, what);
    }
    c->g->algo = RS_ALGO_AUTO;
    free(buf);
    free(want);
}

static void check_reduce(ctx *c, size_t n, rs_dtype t, rs_redop op, int root)
{
    size_t es = rs_dtype_size(t);
    char *buf = malloc(n * es + 1), *want = malloc(n * es + 1);
    fill(buf, n, t, op, c->r, 0);
    if (c->r == root) expected(want, n, t, op, c->w, 0);
    else fill(want, n, t, op, c->r, 0); /* non-root inputs are left alone */
    rs_err e = {0};
    if (ok(c, rs_pg_reduce(c->g, buf, n, t, op, root, &e), &e, "reduce")) compare(c, buf, want, n, t, op, "reduce");
    free(buf);
    free(want);
}

static void check_reduce_scatter(ctx *c, size_t n, rs_dtype t, rs_redop op)
{
    size_t es = rs_dtype_size(t), w = (size_t)c->w;
    char *send = malloc(w * n * es + 1), *recv = malloc(n * es + 1), *want = malloc(n * es + 1);
    fill(send, w * n, t, op, c->r, 0);
    expected(want, n, t, op, c->w, (size_t)c->r * n);
    rs_err e = {0};
    if (ok(c, rs_pg_reduce_scatter(c->g, send, recv, n, t, op, &e), &e, "reduce_scatter"))
        compare(c, recv, want, n, t, op, "reduce_scatter");
    free(send);
    free(recv);
    free(want);
}

/* The copying operations: broadcast, scatter, gather, all_gather, all_to_all, send/recv. */
static void check_moves(ctx *c, size_t n, rs_dtype t, int root)
{
    size_t es = rs_dtype_size(t), w = (size_t)c->w;
    char *a = malloc(w * n * es + 1), *b = malloc(w * n * es + 1), *want = malloc(w * n * es + 1);
    rs_err e = {0};

    if (c->r == root) fill(a, n, t, RS_SUM, root, 0);
    else memset(a, 0x5a, n * es);
    fill(want, n, t, RS_SUM, root, 0);
    if (ok(c, rs_pg_broadcast(c->g, a, n, t, root, &e), &e, "broadcast")) compare(c, a, want, n, t, RS_MAX, "broadcast");

    fill(a, w * n, t, RS_SUM, root, 0); /* only the root's is read */
    fill(want, n, t, RS_SUM, root, (size_t)c->r * n);
    if (ok(c, rs_pg_scatter(c->g, a, b, n, t, root, &e), &e, "scatter")) compare(c, b, want, n, t, RS_MAX, "scatter");

    fill(a, n, t, RS_SUM, c->r, 0);
    for (size_t r = 0; r < w; r++) fill(want + r * n * es, n, t, RS_SUM, (int)r, 0);
    if (ok(c, rs_pg_gather(c->g, a, b, n, t, root, &e), &e, "gather") && c->r == root)
        compare(c, b, want, w * n, t, RS_MAX, "gather");
    if (ok(c, rs_pg_all_gather(c->g, a, b, n, t, &e), &e, "all_gather")) compare(c, b, want, w * n, t, RS_MAX, "all_gather");

    fill(a, w * n, t, RS_SUM, c->r, 0);
    for (size_t r = 0; r < w; r++) fill(want + r * n * es, n, t, RS_SUM, (int)r, (size_t)c->r * n);
    if (ok(c, rs_pg_all_to_all(c->g, a, b, n, t, &e), &e, "all_to_all"))
        compare(c, b, want, w * n, t, RS_MAX, "all_to_all");

    /* send/recv within pairs (0,1), (2,3), ...: there and back; a last odd rank sits out */
    int peer = c->r ^ 1;
    if (peer < c->w) {
        int lo = c->r < peer ? c->r : peer;
        fill(want, n, t, RS_SUM, lo, 0);
        if (c->r == lo) {
            fill(a, n, t, RS_SUM, c->r, 0);
            if (ok(c, rs_pg_send(c->g, a, n, t, peer, &e), &e, "send") &&
                ok(c, rs_pg_recv(c->g, b, n, t, peer, &e), &e, "recv"))
                compare(c, b, want, n, t, RS_MAX, "send/recv");
        } else if (ok(c, rs_pg_recv(c->g, b, n, t, peer, &e), &e, "recv")) {
            compare(c, b, want, n, t, RS_MAX, "send/recv");
            ok(c, rs_pg_send(c->g, b, n, t, peer, &e), &e, "send");
        }
    }
    free(a);
    free(b);
    free(want);
}

static const rs_redop redops[] = {RS_SUM, RS_PRODUCT, RS_MIN, RS_MAX, RS_AVG};

static void matrix(ctx *c)
{
    int w = c->w, root = w - 1;
    size_t counts[] = {0, 1, 7, (size_t)(3 * w + 1) + (w == 1 ? 4 : 0)};
    rs_err e = {0};
    for (size_t ti = 0; ti < 4; ti++)
        for (size_t ci = 0; ci < 4; ci++) {
            size_t n = counts[ci];
            rs_dtype t = dtypes[ti];
            for (size_t oi = 0; oi < 5; oi++) {
                for (int a = RS_ALGO_AUTO; a < RS_ALGO_COUNT; a++) check_all_reduce(c, n, t, redops[oi], (rs_pg_algo)a);
                check_reduce(c, n, t, redops[oi], root);
                check_reduce(c, n, t, redops[oi], 0);
                check_reduce_scatter(c, n, t, redops[oi]);
            }
            check_moves(c, n, t, root);
            check_moves(c, n, t, w / 2);
        }
    ok(c, rs_pg_barrier(c->g, &e), &e, "barrier");
    /* the big count, on a subset so the suite stays fast on 2 cores */
    size_t big = 1000003, per = big / (size_t)w + 1;
    check_all_reduce(c, big, RS_F32, RS_SUM, RS_ALGO_RING);
    check_all_reduce(c, big, RS_F32, RS_SUM, RS_ALGO_TREE);
    check_all_reduce(c, big, RS_F32, RS_SUM, RS_ALGO_RECDOUBLING);
    check_all_reduce(c, big, RS_F64, RS_AVG, RS_ALGO_AUTO);
    check_all_reduce(c, big, RS_I64, RS_MAX, RS_ALGO_RECDOUBLING);
    check_all_reduce(c, big, RS_I32, RS_PRODUCT, RS_ALGO_RING);
    check_reduce(c, big, RS_F64, RS_SUM, root);
    check_reduce_scatter(c, per, RS_F32, RS_SUM);
    check_moves(c, per, RS_I32, 0);
    ok(c, rs_pg_barrier(c->g, &e), &e, "barrier");
}

/* The lecture's examples, on 2 ranks. */
static void examples(ctx *c)
{
    rs_err e = {0};
    float all[4] = {0, 1, 2, 3}, mine[2] = {-1, -1};
    if (ok(c, rs_pg_scatter(c->g, all, mine, 2, RS_F32, 0, &e), &e, "scatter")) {
        printf("rank %d: scatter -> [%g, %g]\n", c->r, mine[0], mine[1]);
        RS_CHECK(mine[0] == 2 * c->r && mine[1] == 2 * c->r + 1, "rank %d got [%g,%g]", c->r, mine[0], mine[1]);
    }
    float x[2] = {(float)(1 + c->r), (float)(10 + c->r)};
    if (ok(c, rs_pg_reduce(c->g, x, 2, RS_F32, RS_PRODUCT, 0, &e), &e, "reduce") && c->r == 0) {
        printf("rank 0: reduce(product) of [1,10] and [2,11] -> [%g, %g]\n", x[0], x[1]);
        RS_CHECK(x[0] == 2 && x[1] == 110, "got [%g,%g]", x[0], x[1]);
    }
    c->fails += rs_test_failures;
}

static void on_event(void *ud, const rs_pg_event *ev)
{
    ctx *c = ud;
    if (c->nev < 64) c->ev[c->nev++] = *ev;
}

/* One ring all_reduce of 4 ranks: 2(n-1) = 6 steps on every rank, each sending to the next rank. */
static void trace(ctx *c)
{
    rs_err e = {0};
    float buf[1000];
    fill(buf, 1000, RS_F32, RS_SUM, c->r, 0);
    c->g->algo = RS_ALGO_RING;
    c->g->trace = on_event;
    c->g->trace_ud = c;
    ok(c, rs_pg_all_reduce(c->g, buf, 1000, RS_F32, RS_SUM, &e), &e, "all_reduce");
    c->g->trace = NULL;
    int steps = 0, begins = 0, ends = 0;
    for (int i = 0; i < c->nev; i++) {
        const rs_pg_event *ev = &c->ev[i];
        if (ev->kind == RS_PG_EV_BEGIN) begins++;
        if (ev->kind == RS_PG_EV_END) ends++;
        if (ev->kind != RS_PG_EV_STEP) continue;
        RS_CHECK(ev->step == steps && ev->steps == 2 * (c->w - 1) && ev->peer == (c->r + 1) % c->w &&
                     ev->rank == c->r && ev->op == RS_OP_ALL_REDUCE && ev->algo == RS_ALGO_RING && ev->bytes == 250 * 4,
                 "rank %d event %d: step %d/%d peer %d chunk %d bytes %zu", c->r, i, ev->step, ev->steps, ev->peer,
                 ev->chunk, ev->bytes);
        steps++;
    }
    RS_CHECK(steps == 2 * (c->w - 1) && begins == 1 && ends == 1, "rank %d: %d steps, %d begins, %d ends", c->r,
             steps, begins, ends);
    c->fails += rs_test_failures;
}

/* Rank 2 dies at step 3 of a ring all_reduce (from inside its trace hook, so truly mid-operation); the
 * others must fail with RS_ERR_TIMEOUT within the timeout plus slack, rank 0's message naming rank 2. */
static void die_mid_step(void *ud, const rs_pg_event *ev)
{
    (void)ud;
    if (ev->kind == RS_PG_EV_STEP && ev->step == 2) _exit(3);
}

#define FAULT_TIMEOUT 1.5

static void fault(ctx *c)
{
    rs_err e = {0};
    size_t n = 1000003;
    float *buf = malloc(n * sizeof *buf);
    fill(buf, n, RS_F32, RS_SUM, c->r, 0);
    c->g->algo = RS_ALGO_RING;
    if (c->r == 2) c->g->trace = die_mid_step;
    double t0 = rs_pg_now();
    rs_status st = rs_pg_all_reduce(c->g, buf, n, RS_F32, RS_SUM, &e);
    double dt = rs_pg_now() - t0;
    printf("rank %d: %s after %.2f s: %s\n", c->r, rs_status_name(st), dt, e.msg);
    /* shm can only notice silence (the timeout); tcp sees the connection close */
    bool want = st == RS_ERR_TIMEOUT || (strcmp(c->backend, "tcp") == 0 && st == RS_ERR_IO);
    RS_CHECK(want, "rank %d: status %s", c->r, rs_status_name(st));
    RS_CHECK(dt < FAULT_TIMEOUT + 3, "rank %d took %.2f s", c->r, dt);
    RS_CHECK(strstr(e.msg, "all_reduce") != NULL, "message does not name the operation: %s", e.msg);
    if (c->r == 0) RS_CHECK(strstr(e.msg, "rank 2") != NULL, "message does not name rank 2: %s", e.msg);
    free(buf);
    c->fails += rs_test_failures;
}

/* A smaller matrix, for sub-groups: every operation, two dtypes, three reduce ops. */
static void sub_matrix(ctx *c)
{
    int w = c->w;
    size_t counts[] = {0, 1, 7, (size_t)(3 * w + 1)};
    rs_dtype ts[] = {RS_F32, RS_I64};
    rs_redop ops[] = {RS_SUM, RS_MAX, RS_AVG};
    for (size_t ti = 0; ti < 2; ti++)
        for (size_t ci = 0; ci < 4; ci++) {
            for (size_t oi = 0; oi < 3; oi++) {
                check_all_reduce(c, counts[ci], ts[ti], ops[oi], RS_ALGO_AUTO);
                check_all_reduce(c, counts[ci], ts[ti], ops[oi], RS_ALGO_RING);
                check_reduce(c, counts[ci], ts[ti], ops[oi], w - 1);
                check_reduce_scatter(c, counts[ci], ts[ti], ops[oi]);
            }
            check_moves(c, counts[ci], ts[ti], 0);
        }
}

/* new_group: evens and odds (every rank calls both, as torch requires), each runs the smaller matrix;
 * a group inside a group; trace events in global ranks; bad rank lists refused with a message. */
static void groups(ctx *c)
{
    rs_err e = {0};
    /* zeroed: gcc -O3 sees them passed on unwritten when w is 0 */
    int w = c->w, ev[64] = {0}, od[64] = {0}, ne = 0, no = 0;
    for (int r = 0; r < w; r++) {
        if (r % 2) od[no++] = r;
        else ev[ne++] = r;
    }
    rs_pg *ge = NULL, *go = NULL;
    /* the odd list reversed: order does not matter, group ranks follow sorted global ranks */
    int odr[64];
    for (int i = 0; i < no; i++) odr[i] = od[no - 1 - i];
    if (!ok(c, rs_pg_new_group(c->g, ev, ne, &ge, &e), &e, "new_group(evens)")) return;
    if (no && !ok(c, rs_pg_new_group(c->g, odr, no, &go, &e), &e, "new_group(odds)")) return;
    rs_pg *mine = c->r % 2 ? go : ge, *other = c->r % 2 ? ge : go;
    RS_CHECK(mine && !other, "rank %d: member of its group %p, not of the other %p", c->r, (void *)mine, (void *)other);
    if (!mine) {
        c->fails += rs_test_failures;
        return;
    }
    RS_CHECK(mine->rank == c->r / 2 && mine->world == (c->r % 2 ? no : ne) &&
                 rs_pg_global_rank(mine, mine->rank) == c->r,
             "rank %d: group rank %d of %d, global %d", c->r, mine->rank, mine->world,
             rs_pg_global_rank(mine, mine->rank));
    ctx s = {.g = mine, .r = mine->rank, .w = mine->world, .backend = c->backend};
    sub_matrix(&s);

    /* trace events of a sub-group speak global ranks and carry the group's number (evens 1, odds 2) */
    ctx t = {.g = mine, .r = mine->rank, .w = mine->world};
    mine->trace = on_event;
    mine->trace_ud = &t;
    float x[5] = {1, 2, 3, 4, 5};
    ok(&s, rs_pg_all_reduce(mine, x, 5, RS_F32, RS_SUM, &e), &e, "traced all_reduce");
    mine->trace = NULL;
    for (int i = 0; i < t.nev; i++)
        RS_CHECK(t.ev[i].rank == c->r && t.ev[i].group == (c->r % 2 ? 2 : 1) &&
                     (t.ev[i].peer < 0 || t.ev[i].peer % 2 == c->r % 2),
                 "rank %d: event %d says rank %d group %d peer %d", c->r, i, t.ev[i].rank, t.ev[i].group, t.ev[i].peer);

    /* a group inside a group: the first two members of each, if there are two */
    if (mine->world >= 2) {
        int two[2] = {0, 1};
        rs_pg *inner = NULL;
        if (ok(&s, rs_pg_new_group(mine, two, 2, &inner, &e), &e, "nested new_group")) {
            RS_CHECK((mine->rank < 2) == (inner != NULL), "rank %d: nested membership wrong", c->r);
            if (inner) {
                int64_t v = c->r, want = rs_pg_global_rank(mine, 0) + rs_pg_global_rank(mine, 1);
                if (ok(&s, rs_pg_all_reduce(inner, &v, 1, RS_I64, RS_SUM, &e), &e, "nested all_reduce"))
                    RS_CHECK(v == want, "rank %d: nested sum %lld, want %lld", c->r, (long long)v, (long long)want);
                rs_pg_destroy(inner);
            }
        }
    }
    /* the world group still works while sub-groups exist */
    check_all_reduce(c, 7, RS_F32, RS_SUM, RS_ALGO_AUTO);

    int dup[2] = {0, 0}, out_of_range[1] = {w};
    rs_pg *bad = NULL;
    rs_status st = rs_pg_new_group(c->g, dup, 2, &bad, &e);
    RS_CHECK(st == RS_ERR_ARG && strstr(e.msg, "twice") && !bad, "duplicate rank: %s", e.msg);
    st = rs_pg_new_group(c->g, out_of_range, 1, &bad, &e);
    RS_CHECK(st == RS_ERR_ARG && strstr(e.msg, "not in this group") && !bad, "rank out of range: %s", e.msg);
    if (c->r == 0)
        printf("groups: evens %d ranks, odds %d ranks, %d traced events, %d failures\n", ne, no, t.nev, s.fails);
    rs_pg_destroy(ge);
    rs_pg_destroy(go);
    c->fails += s.fails + rs_test_failures;
}

/* Immediate send/recv: every rank isends two ~1 MiB messages to every other rank before posting any
 * receive (more than any mailbox or socket buffer holds, so progress must come from the waits), then
 * waits in reverse order; order between one pair is posting order. Then a blocking recv while our own
 * isend to the same neighbour is pending, and test() polling. */
static void p2p(ctx *c)
{
    rs_err e = {0};
    int w = c->w, r = c->r;
    size_t n = (1u << 18) + 3, es = sizeof(float);
    float *out = malloc(2 * (size_t)w * n * es), *in = malloc(2 * (size_t)w * n * es),
          *want = malloc(n * es);
    rs_work *works[4 * 64];
    int nw = 0;
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < w; p++) {
            if (p == r) continue;
            float *o = out + ((size_t)k * (size_t)w + (size_t)p) * n;
            fill(o, n, RS_F32, RS_SUM, r, ((size_t)k * (size_t)w + (size_t)p) * n);
            if (!ok(c, rs_pg_isend(c->g, o, n, RS_F32, p, &works[nw], &e), &e, "isend")) goto out;
            nw++;
        }
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < w; p++) {
            if (p == r) continue;
            if (!ok(c, rs_pg_irecv(c->g, in + ((size_t)k * (size_t)w + (size_t)p) * n, n, RS_F32, p, &works[nw], &e), &e,
                    "irecv"))
                goto out;
            nw++;
        }
    for (int i = nw - 1; i >= 0; i--) ok(c, rs_work_wait(works[i], &e), &e, "wait");
    for (int k = 0; k < 2 && !c->fails; k++)
        for (int p = 0; p < w; p++) {
            if (p == r) continue;
            fill(want, n, RS_F32, RS_SUM, p, ((size_t)k * (size_t)w + (size_t)r) * n);
            compare(c, in + ((size_t)k * (size_t)w + (size_t)p) * n, want, n, RS_F32, RS_MAX, "isend/irecv");
        }
    for (int i = 0; i < nw; i++) rs_work_free(works[i]);
    nw = 0;
    if (w >= 2) {
        /* ring shift: isend right, blocking recv from the left, then wait */
        int right = (r + 1) % w, left = (r - 1 + w) % w;
        rs_work *s = NULL;
        fill(out, n, RS_F32, RS_SUM, r, 7);
        if (ok(c, rs_pg_isend(c->g, out, n, RS_F32, right, &s, &e), &e, "isend right") &&
            ok(c, rs_pg_recv(c->g, in, n, RS_F32, left, &e), &e, "recv left") && ok(c, rs_work_wait(s, &e), &e, "wait")) {
            fill(want, n, RS_F32, RS_SUM, left, 7);
            compare(c, in, want, n, RS_F32, RS_MAX, "isend + blocking recv");
        }
        rs_work_free(s);
        /* test(): rank 0 polls for a message rank 1 sends after a pause */
        if (r == 0) {
            rs_work *q = NULL;
            int64_t v = -1;
            bool done = false;
            long polls = 0;
            if (ok(c, rs_pg_irecv(c->g, &v, 1, RS_I64, 1, &q, &e), &e, "irecv")) {
                double t0 = rs_pg_now();
                while (!done && rs_pg_now() - t0 < 10 && ok(c, rs_work_test(q, &done, &e), &e, "test")) {
                    polls++;
                    usleep(1000);
                }
                RS_CHECK(done && v == 4242 && polls > 1, "test(): done %d v %lld after %ld polls", done, (long long)v, polls);
            }
            rs_work_free(q);
        } else if (r == 1) {
            usleep(50000);
            int64_t v = 4242;
            ok(c, rs_pg_send(c->g, &v, 1, RS_I64, 0, &e), &e, "send");
        }
    }
    ok(c, rs_pg_barrier(c->g, &e), &e, "barrier");
out:
    for (int i = 0; i < nw; i++) rs_work_wait(works[i], &e), rs_work_free(works[i]);
    free(out);
    free(in);
    free(want);
    c->fails += rs_test_failures;
}

/* ---- the data a step reports: what the algorithm's buffer holds as each step begins */

#define SD_N 64 /* elements in the stepped all_reduce */

typedef struct stepdata {
    int nsnap;
    int step[16];
    double v[16][SD_N];
    int blocks[16];
    size_t count[16];
} stepdata;

static void on_step_data(void *ud, const rs_pg_event *ev)
{
    stepdata *d = ud;
    if (ev->kind != RS_PG_EV_STEP || !ev->data || d->nsnap >= 16) return;
    d->step[d->nsnap] = ev->step;
    d->blocks[d->nsnap] = ev->blocks;
    d->count[d->nsnap] = ev->count;
    for (size_t i = 0; i < ev->count && i < SD_N; i++) d->v[d->nsnap][i] = get(ev->data, i, ev->dtype);
    d->nsnap++;
}

/* The serial reference for every rank's buffer after `k` steps of algo on w ranks: the inputs
 * value(SUM, r, i) moved and added as the algorithm moves them. x: (w, n). */
static void stepped(double *x, int w, size_t n, rs_pg_algo a, int k)
{
    double *old = malloc(sizeof *old * (size_t)w * n);
    for (int r = 0; r < w; r++)
        for (size_t i = 0; i < n; i++) x[(size_t)r * n + i] = value(RS_SUM, false, r, i);
    int K = 0;
    while ((1 << K) < w) K++;
    int p = 1;
    while (p * 2 <= w) p *= 2;
    int rem = w - p;
    for (int s = 0; s < k; s++) {
        memcpy(old, x, sizeof *old * (size_t)w * n);
#define X(r, i) x[(size_t)(r) * n + (i)]
#define O(r, i) old[(size_t)(r) * n + (i)]
        for (int r = 0; r < w; r++) {
            if (a == RS_ALGO_RING) { /* reduce-scatter, then all-gather; block b is [n*b/w, n*(b+1)/w) */
                bool gather = s >= w - 1;
                int g = gather ? s - (w - 1) : s, b = ((gather ? r - g : r - g - 1) % w + w) % w, prev = (r - 1 + w) % w;
                for (size_t i = n * (size_t)b / (size_t)w; i < n * (size_t)(b + 1) / (size_t)w; i++)
                    X(r, i) = gather ? O(prev, i) : O(r, i) + O(prev, i);
            } else if (a == RS_ALGO_TREE) { /* binomial reduce to 0, widest distance last; broadcast widest first */
                int mask = s < K ? 1 << s : 1 << (K - 1 - (s - K));
                bool active = s < K ? (r & (mask - 1)) == 0 && !(r & mask) && r + mask < w : (r & (2 * mask - 1)) == mask;
                if (active)
                    for (size_t i = 0; i < n; i++) X(r, i) = s < K ? O(r, i) + O(r + mask, i) : O(r - mask, i);
            } else { /* recursive doubling over p ranks, the first 2*rem folded in pairs first and last */
                int last = (rem ? 1 : 0) + (p > 1 ? __builtin_ctz((unsigned)p) : 0);
                int vr = r < 2 * rem ? (r % 2 ? r / 2 : -1) : r - rem;
                if (rem && s == 0) {
                    if (r < 2 * rem && r % 2)
                        for (size_t i = 0; i < n; i++) X(r, i) = O(r - 1, i) + O(r, i);
                } else if (rem && s == last) {
                    if (r < 2 * rem && r % 2 == 0)
                        for (size_t i = 0; i < n; i++) X(r, i) = O(r + 1, i);
                } else if (vr >= 0) {
                    int vp = vr ^ (1 << (s - (rem ? 1 : 0))), peer = vp < rem ? vp * 2 + 1 : vp + rem;
                    for (size_t i = 0; i < n; i++) X(r, i) = O(r, i) + O(peer, i);
                }
            }
        }
#undef X
#undef O
    }
    free(old);
}

/* With trace on, every step of a ring, tree and recursive-doubling all_reduce carries the buffer as it
 * stands; those values (what a class watches in `collective ... step=1`) must be the serial partial
 * sums after the steps before it, on every rank. */
static void step_data(ctx *c)
{
    static const rs_pg_algo algos[] = {RS_ALGO_RING, RS_ALGO_TREE, RS_ALGO_RECDOUBLING};
    size_t n = (size_t)(2 * c->w + 1); /* blocks of uneven length */
    double *want = malloc(sizeof *want * (size_t)c->w * n);
    for (int ai = 0; ai < 3; ai++) {
        rs_pg_algo a = algos[ai];
        int32_t buf[SD_N];
        for (size_t i = 0; i < n; i++) buf[i] = (int32_t)value(RS_SUM, false, c->r, i);
        stepdata d = {0};
        rs_err e = {0};
        c->g->algo = a;
        c->g->trace = on_step_data;
        c->g->trace_ud = &d;
        ok(c, rs_pg_all_reduce(c->g, buf, n, RS_I32, RS_SUM, &e), &e, "stepped all_reduce");
        c->g->trace = NULL;
        RS_CHECK(d.nsnap > 0 || c->w == 1, "rank %d %s: no step carried data", c->r, rs_pg_algo_name(a));
        for (int k = 0; k < d.nsnap; k++) {
            stepped(want, c->w, n, a, d.step[k]);
            RS_CHECK(d.count[k] == n && d.blocks[k] == (a == RS_ALGO_RING ? c->w : 1), "rank %d %s step %d: %zu elements "
                     "in %d chunks", c->r, rs_pg_algo_name(a), d.step[k], d.count[k], d.blocks[k]);
            for (size_t i = 0; i < n; i++)
                if (d.v[k][i] != want[(size_t)c->r * n + i]) {
                    RS_CHECK(0, "rank %d %s as step %d begins: element %zu is %g, the serial partial sum %g", c->r,
                             rs_pg_algo_name(a), d.step[k], i, d.v[k][i], want[(size_t)c->r * n + i]);
                    break;
                }
        }
        /* and the last state of the reference is the result */
        int steps = a == RS_ALGO_RING ? 2 * (c->w - 1) : 0;
        if (a != RS_ALGO_RING) {
            int K = 0, p = 1;
            while ((1 << K) < c->w) K++;
            while (p * 2 <= c->w) p *= 2;
            steps = a == RS_ALGO_TREE ? 2 * K : __builtin_ctz((unsigned)p) + (c->w > p ? 2 : 0);
        }
        stepped(want, c->w, n, a, steps);
        for (size_t i = 0; i < n; i++)
            if (buf[i] != (int32_t)want[(size_t)c->r * n + i]) {
                RS_CHECK(0, "rank %d %s: result element %zu is %d, the stepped reference ends at %g", c->r,
                         rs_pg_algo_name(a), i, buf[i], want[(size_t)c->r * n + i]);
                break;
            }
    }
    free(want);
    c->fails += rs_test_failures;
}

/* One rank; st is NULL for mpi (no store). */
static int run_rank(const char *backend, const char *mode, int w, int r, rs_store *st)
{
    alarm(120); /* a hang becomes a visible failure, not a stuck suite */
    double timeout = strcmp(mode, "fault") == 0 ? FAULT_TIMEOUT : 30;
    rs_err e = {0};
    ctx c = {.r = r, .w = w, .backend = backend};
    char name[64];
    snprintf(name, sizeof name, "test-%s-%s-%d", backend, mode, w);
    /* The first CPU this process may use, read before the group is made (shm binds each rank to a CPU
     * of its own then). */
    cpu_set_t set;
    int first = 0;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        while (first < CPU_SETSIZE - 1 && !CPU_ISSET(first, &set)) first++;
    if (rs_pg_new(backend, st, name, r, w, timeout, &c.g, &e)) {
        fprintf(stderr, "rank %d: %s\n", r, e.msg);
        return 2;
    }
    if (strcmp(mode, "matrix-onecpu") == 0) {
        CPU_ZERO(&set);
        CPU_SET(first, &set);
        RS_CHECK(sched_setaffinity(0, sizeof set, &set) == 0, "rank %d: cannot move to CPU %d", r, first);
    }
    double t0 = rs_pg_now();
    if (strcmp(mode, "matrix") == 0 || strcmp(mode, "matrix-onecpu") == 0) matrix(&c);
    else if (strcmp(mode, "examples") == 0) examples(&c);
    else if (strcmp(mode, "trace") == 0) trace(&c);
    else if (strcmp(mode, "stepdata") == 0) step_data(&c);
    else if (strcmp(mode, "fault") == 0) fault(&c);
    else if (strcmp(mode, "groups") == 0) groups(&c);
    else if (strcmp(mode, "p2p") == 0) p2p(&c);
    if (r == 0)
        printf("%s %s world %d: %.2f s, %d failures on rank 0\n", backend, mode, w, rs_pg_now() - t0, c.fails);
    rs_pg_destroy(c.g);
    return c.fails ? 1 : 0;
}

typedef struct job {
    const char *backend, *mode;
} job;

static int rank_main(void *ud, int rank, int world, rs_store *st)
{
    job *j = ud;
    return run_rank(j->backend, j->mode, world, rank, st);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test-coll shm|tcp|mpi matrix|matrix-onecpu|examples|trace|stepdata|fault|groups|p2p WORLD\n");
        return 2;
    }
    const char *backend = argv[1], *mode = argv[2];
    int w = atoi(argv[3]);
    if (!rs_pg_backend_find(backend)) {
        printf("SKIP: backend %s is not in this build\n", backend);
        return 77;
    }
    if (rs_pg_backend_find(backend)->needs_launcher) {
        /* one rank of an mpirun job: who we are comes from the launcher's environment */
        rs_launch_env env;
        rs_err e = {0};
        if (rs_launch_env_from_environ(&env, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            return 2;
        }
        if (env.world_size != w) {
            fprintf(stderr, "started with %d ranks, the test wants %d\n", env.world_size, w);
            return 2;
        }
        int rc = run_rank(backend, mode, w, env.rank, NULL);
        return rc;
    }
    if (w < 1 || w > 64) return 2;
    job j = {backend, mode};
    int want[64] = {0};
    if (strcmp(mode, "fault") == 0 && w > 2) want[2] = 3; /* the rank that dies on purpose */
    int bad = rs_fork_ranks(w, rank_main, &j, want, NULL);
    RS_CHECK(bad == 0, "%d ranks ended unexpectedly", bad);
    return rs_test_finish("test-coll");
}
