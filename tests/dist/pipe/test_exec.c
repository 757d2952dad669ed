/* The pipeline executor on real ranks: `test-pipe-exec BACKEND P M SCHEDULE [V] [bubble]`. Each stage's
 * forward adds its number to what it received, its backward does the same going back, and every rank
 * checks that each message it gets holds exactly the values of that micro-batch from the stage before
 * (or after) it, with a size that differs per micro-batch and stage: a message routed to the wrong
 * stage, micro-batch or order fails. Each forward takes 20 ms and each backward 40 ms (sleeping, so
 * the test measures the schedule, not who got a core on a busy machine); with `bubble` rank 0 gathers
 * every rank's trace and checks the bubble of its least disturbed step is within 15% of (p-1)/(m+p-1). The stage
 * inputs a rank holds at once: GPipe all m, 1F1B at most p - rank (+1 received ahead). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/train/pipe_run.h"
#include "tests/dist/forkranks.h"
#include "tests/rs_test.h"

#define MAX_SPANS 4096
#define STEPS 3

typedef struct job {
    const char *backend;
    int M, V;
    rs_pipe_kind kind;
    bool bubble;
    double tf, tb;
} job;

typedef struct stage_io {
    job *j;
    int rank, P;
    float out[4096];
    int wrong;
    char what[160];
    int nspans;
    rs_pipe_span spans[MAX_SPANS];
} stage_io;

static size_t numel(void *ud, int micro, int stage)
{
    (void)ud;
    return (size_t)(4 * (micro + 1) + stage);
}

/* The values after stage s's forward (what stage s+1 receives), and the gradient stage s's backward
 * sends back (what stage s-1 receives). */
static float act(int micro, int s, size_t i) { return (float)(micro * 1000 + (int)i + 7 * s); }
static float grad(int micro, int s, size_t i) { return (float)(-(micro * 1000) - (int)i - 3 * s); }

static void nap(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t)) {
    }
}

static rs_status fwd(void *ud, int micro, int chunk, const float *in, const float **out, rs_err *err)
{
    stage_io *x = ud;
    int s = chunk * x->P + x->rank;
    size_t n = numel(NULL, micro, s);
    for (size_t i = 0; in && i < n; i++)
        if (in[i] != act(micro, s - 1, i) && !x->wrong++)
            snprintf(x->what, sizeof x->what, "stage %d micro %d: activation[%zu] = %g, want %g", s, micro, i,
                     (double)in[i], (double)act(micro, s - 1, i));
    size_t no = numel(NULL, micro, s + 1);
    for (size_t i = 0; i < no; i++) x->out[i] = act(micro, s, i);
    *out = x->out;
    nap(x->j->tf);
    (void)err;
    return RS_OK;
}

static rs_status bwd(void *ud, int micro, int chunk, const float *in, const float *dout, float *din, rs_err *err)
{
    stage_io *x = ud;
    int s = chunk * x->P + x->rank, S = x->P * x->j->V;
    size_t n = numel(NULL, micro, s + 1);
    for (size_t i = 0; dout && i < n; i++)
        if (dout[i] != grad(micro, s + 1, i) && !x->wrong++)
            snprintf(x->what, sizeof x->what, "stage %d micro %d: gradient[%zu] = %g, want %g", s, micro, i,
                     (double)dout[i], (double)grad(micro, s + 1, i));
    if ((s == S - 1) != (dout == NULL) && !x->wrong++) snprintf(x->what, sizeof x->what, "stage %d: dout %p", s, (void *)dout);
    /* the input of forward is still there for backward */
    for (size_t i = 0; in && i < numel(NULL, micro, s); i++)
        if (in[i] != act(micro, s - 1, i) && !x->wrong++)
            snprintf(x->what, sizeof x->what, "stage %d micro %d: input[%zu] changed before backward", s, micro, i);
    for (size_t i = 0; din && i < numel(NULL, micro, s); i++) din[i] = grad(micro, s, i);
    nap(x->j->tb);
    (void)err;
    return RS_OK;
}

static void on_work(void *ud, int64_t step, char kind, int micro, int stage, double t0, double t1)
{
    stage_io *x = ud;
    if (x->nspans < MAX_SPANS) x->spans[x->nspans++] = (rs_pipe_span){x->rank, step, kind, micro, stage, t0, t1};
}

static int rank_main(void *ud, int rank, int world, rs_store *st)
{
    job *j = ud;
    rs_err e = {0};
    rs_pg *g = NULL;
    rs_mem mem = {0};
    if (rs_pg_new(j->backend, st, "pipe", rank, world, 30, &g, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        return 2;
    }
    stage_io *x = calloc(1, sizeof *x);
    x->j = j;
    x->rank = rank;
    x->P = world;
    rs_pipe_exec *ex = rs_pipe_exec_new(g, &mem, &e);
    rs_pipe_io io = {.forward = fwd, .backward = bwd, .numel = numel, .ud = x};
    int fails = 0;
    size_t peak = 0;
    for (int step = 0; step < STEPS && ex; step++) {
        if (rs_pipe_exec_step(ex, j->kind, j->M, j->V, &io, step, on_work, x, &e)) {
            fprintf(stderr, "rank %d: %s\n", rank, e.msg);
            fails++;
            break;
        }
        if (rs_pipe_exec_peak_inputs(ex) > peak) peak = rs_pipe_exec_peak_inputs(ex);
    }
    RS_CHECK(x->wrong == 0, "rank %d: %d wrong values; first: %s", rank, x->wrong, x->what);
    RS_CHECK(x->nspans == STEPS * 2 * j->M * j->V, "rank %d traced %d ops, want %d", rank, x->nspans,
             STEPS * 2 * j->M * j->V);
    /* the inputs held at once, in micro-batches of the largest message (what stage inputs can be) */
    size_t biggest = 0;
    for (int m = 0; m < j->M; m++)
        for (int s = 1; s < world * j->V; s++)
            if (numel(NULL, m, s) > biggest) biggest = numel(NULL, m, s);
    double held = (double)peak / (double)(biggest * sizeof(float));
    printf("rank %d: held up to %zu bytes of stage inputs (%.2f micro-batches of the largest)\n", rank, peak, held);
    if (rank > 0 && j->kind == RS_PIPE_GPIPE)
        RS_CHECK(peak >= (size_t)j->M * 4 * sizeof(float), "gpipe rank %d held %zu bytes: fewer than %d inputs", rank,
                 peak, j->M);
    if (rank > 0 && j->kind == RS_PIPE_1F1B)
        RS_CHECK(held <= world - rank + 1, "1f1b rank %d held %.2f micro-batches of inputs, more than %d", rank, held,
                 world - rank + 1);

    if (j->bubble) {
        /* every rank's spans to rank 0 (the ranks share the host's monotonic clock) */
        double *mine = calloc(MAX_SPANS * 5, sizeof *mine), *all = rank == 0 ? calloc((size_t)world * MAX_SPANS * 5, sizeof *all) : NULL;
        for (int i = 0; i < x->nspans; i++) {
            double *d = mine + i * 5;
            d[0] = 1, d[1] = (double)x->spans[i].step, d[2] = x->spans[i].kind, d[3] = x->spans[i].t0, d[4] = x->spans[i].t1;
        }
        if (rs_pg_gather(g, mine, all, MAX_SPANS * 5, RS_F64, 0, &e)) {
            fprintf(stderr, "rank %d: gather: %s\n", rank, e.msg);
            fails++;
        } else if (rank == 0) {
            rs_pipe_span *sp = calloc((size_t)world * MAX_SPANS, sizeof *sp);
            int n = 0;
            for (int r = 0; r < world; r++)
                for (int i = 0; i < MAX_SPANS; i++) {
                    const double *d = all + ((size_t)r * MAX_SPANS + (size_t)i) * 5;
                    if (d[0] != 1) continue;
                    sp[n++] = (rs_pipe_span){r, (int64_t)d[1], (char)d[2], 0, 0, d[3], d[4]};
                }
            int steps = 0;
            double mean = rs_pipe_bubble_measured(sp, n, world, &steps),
                   want = rs_pipe_bubble_formula(j->kind, world, j->M, j->V);
            /* A busy machine only ever adds idle time (a rank woken late after its sleep or its
             * message), never removes it, so the step least disturbed is the schedule's own figure:
             * the smallest of the steps' bubbles, each step measured alone. */
            double b = -1;
            rs_pipe_span *one = calloc((size_t)n, sizeof *one);
            for (int st = 0; st < STEPS; st++) {
                int k = 0, s1 = 0;
                for (int i = 0; i < n; i++)
                    if (sp[i].step == st) one[k++] = sp[i];
                double bs = rs_pipe_bubble_measured(one, k, world, &s1);
                if (s1 == 1 && (b < 0 || bs < b)) b = bs;
            }
            free(one);
            printf("%s p=%d m=%d: bubble measured %.4f (least disturbed of %d steps; mean %.4f), formula (p-1)/(m+p-1) = "
                   "%.4f (%.1f%% off)\n",
                   rs_pipe_kind_name(j->kind), world, j->M, b, steps, mean, want, 100 * (b - want) / want);
            RS_CHECK(steps == STEPS, "bubble over %d steps, want %d", steps, STEPS);
            RS_CHECK(b > 0 && (b - want) / want <= 0.15 && (want - b) / want <= 0.15,
                     "measured bubble %.4f is not within 15%% of %.4f", b, want);
            free(sp);
        }
        free(mine);
        free(all);
    }
    rs_pipe_exec_free(ex);
    RS_CHECK(mem.live[RS_POOL_ACTS] == 0 && mem.live[RS_POOL_COMM] == 0, "rank %d: %lld + %lld bytes left counted",
             rank, (long long)mem.live[RS_POOL_ACTS], (long long)mem.live[RS_POOL_COMM]);
    rs_pg_destroy(g);
    free(x);
    return fails + rs_test_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: test-pipe-exec shm|tcp P M naive|gpipe|1f1b|interleaved [V] [bubble]\n");
        return 2;
    }
    job j = {.backend = argv[1], .M = atoi(argv[3]), .V = 1, .tf = 0.002, .tb = 0.004};
    int P = atoi(argv[2]);
    if (!rs_pipe_kind_from_name(argv[4], &j.kind)) {
        fprintf(stderr, "unknown schedule %s\n", argv[4]);
        return 2;
    }
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "bubble")) j.bubble = true, j.tf = 0.020, j.tb = 0.040;
        else j.V = atoi(argv[i]);
    }
    int exits[64];
    int bad = rs_fork_ranks(P, rank_main, &j, NULL, exits);
    printf("%s %s P=%d M=%d V=%d: %s\n", j.backend, argv[4], P, j.M, j.V, bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
