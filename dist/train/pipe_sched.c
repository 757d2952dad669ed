/* Pipeline schedules (see pipe_sched.h): the orders, the messages they imply, a fixed-cost simulation
 * and the bubble. Pure functions of their arguments; they allocate only scratch they free. */
#include "pipe_sched.h"

#include <stdlib.h>
#include <string.h>

const char *rs_pipe_kind_name(rs_pipe_kind k)
{
    static const char *const n[RS_PIPE_KIND_COUNT] = {"naive", "gpipe", "1f1b", "interleaved"};
    return (unsigned)k < RS_PIPE_KIND_COUNT ? n[k] : "?";
}

bool rs_pipe_kind_from_name(const char *s, rs_pipe_kind *out)
{
    for (int k = 0; k < RS_PIPE_KIND_COUNT; k++)
        if (!strcmp(s, rs_pipe_kind_name((rs_pipe_kind)k))) {
            *out = (rs_pipe_kind)k;
            return true;
        }
    return false;
}

rs_status rs_pipe_check(rs_pipe_kind k, int P, int M, int V, rs_err *err)
{
    if (P < 1 || P > 4096 || M < 1 || M > 65536 || V < 1 || V > 256)
        return rs_err_set(err, RS_ERR_ARG, "pipeline: %d ranks, %d micro-batches, %d stages per rank is out of range",
                          P, M, V);
    switch (k) {
    case RS_PIPE_NAIVE:
        if (M != 1 || V != 1)
            return rs_err_set(err, RS_ERR_ARG,
                              "schedule=naive runs the whole batch through the stages at once (micro=1, virtual=1); "
                              "micro-batches are schedule=gpipe or 1f1b");
        return RS_OK;
    case RS_PIPE_GPIPE:
    case RS_PIPE_1F1B:
        if (V != 1)
            return rs_err_set(err, RS_ERR_ARG, "schedule=%s runs one stage per rank (virtual=1); several are "
                                               "schedule=interleaved", rs_pipe_kind_name(k));
        return RS_OK;
    case RS_PIPE_INTERLEAVED:
        if (V < 2)
            return rs_err_set(err, RS_ERR_ARG, "schedule=interleaved needs virtual=2 or more stages per rank");
        if (M % P)
            return rs_err_set(err, RS_ERR_ARG,
                              "schedule=interleaved sends micro-batches round the %d ranks in groups of %d: micro=%d "
                              "must be a multiple of %d (try micro=%d)",
                              P, P, M, P, (M / P + 1) * P);
        return RS_OK;
    default: return rs_err_set(err, RS_ERR_ARG, "pipeline: no schedule %d", (int)k);
    }
}

/* Megatron-LM's interleaved order: the k-th forward (or backward) of a rank runs micro-batch
 * group*P + k%P on chunk (k % PV) / P, going up the chunks forward and down them backward. */
static rs_pipe_op interleaved_op(int P, int V, int r, int k, bool fwd)
{
    int in_group = k % (P * V), chunk = in_group / P;
    if (!fwd) chunk = V - 1 - chunk;
    int micro = (k / (P * V)) * P + k % P;
    return (rs_pipe_op){fwd ? 'F' : 'B', micro, chunk, chunk * P + r};
}

int rs_pipe_schedule(rs_pipe_kind k, int P, int M, int V, int r, rs_pipe_op *out)
{
    if (rs_pipe_check(k, P, M, V, NULL) || r < 0 || r >= P) return -1;
    int n = 0;
#define F(m) (out[n++] = (rs_pipe_op){'F', (m), 0, r})
#define B(m) (out[n++] = (rs_pipe_op){'B', (m), 0, r})
    switch (k) {
    case RS_PIPE_NAIVE:
    case RS_PIPE_GPIPE:
        for (int m = 0; m < M; m++) F(m);
        for (int m = 0; m < M; m++) B(m);
        break;
    case RS_PIPE_1F1B: {
        /* the stages after this one need warm-up forwards before the first backward comes back */
        int warm = P - r - 1 < M ? P - r - 1 : M;
        for (int m = 0; m < warm; m++) F(m);
        for (int i = 0; i < M - warm; i++) {
            F(warm + i);
            B(i);
        }
        for (int m = M - warm; m < M; m++) B(m);
        break;
    }
    case RS_PIPE_INTERLEAVED: {
        int total = M * V, warm = M == P ? total : (P - r - 1) * 2 + (V - 1) * P;
        if (warm > total) warm = total;
        for (int i = 0; i < warm; i++) out[n++] = interleaved_op(P, V, r, i, true);
        for (int i = 0; i < total - warm; i++) {
            out[n++] = interleaved_op(P, V, r, warm + i, true);
            out[n++] = interleaved_op(P, V, r, i, false);
        }
        for (int i = total - warm; i < total; i++) out[n++] = interleaved_op(P, V, r, i, false);
        break;
    }
    default: return -1;
    }
#undef F
#undef B
    return n;
}

int rs_pipe_messages(rs_pipe_kind k, int P, int M, int V, int from, int to, rs_pipe_msg *out, int cap)
{
    int total = 2 * M * V, S = P * V, n = 0;
    if (rs_pipe_check(k, P, M, V, NULL) || from < 0 || from >= P || to < 0 || to >= P) return -1;
    rs_pipe_op *ops = malloc(sizeof *ops * (size_t)total);
    if (!ops) return -1;
    rs_pipe_schedule(k, P, M, V, from, ops);
    for (int i = 0; i < total; i++) {
        const rs_pipe_op *o = &ops[i];
        rs_pipe_msg msg;
        if (o->kind == 'F' && o->stage + 1 < S && (o->stage + 1) % P == to)
            msg = (rs_pipe_msg){'A', o->micro, o->stage + 1};
        else if (o->kind == 'B' && o->stage > 0 && (o->stage - 1) % P == to)
            msg = (rs_pipe_msg){'G', o->micro, o->stage - 1};
        else
            continue;
        if (n < cap) out[n] = msg;
        n++;
    }
    free(ops);
    return n;
}

rs_status rs_pipe_simulate(rs_pipe_kind k, int P, int M, int V, double tf, double tb, double *start, double *end,
                           double *makespan, rs_err *err)
{
    rs_status st = rs_pipe_check(k, P, M, V, err);
    if (st) return st;
    int S = P * V;
    double *c = malloc(sizeof *c * 2 * (size_t)S);
    if (!c) return rs_err_set(err, RS_ERR_NOMEM, "pipeline simulation: out of memory");
    for (int s = 0; s < S; s++) c[s] = tf, c[S + s] = tb;
    st = rs_pipe_simulate_costs(k, P, M, V, c, c + S, start, end, makespan, err);
    free(c);
    return st;
}

rs_status rs_pipe_simulate_costs(rs_pipe_kind k, int P, int M, int V, const double *tf, const double *tb,
                                 double *start, double *end, double *makespan, rs_err *err)
{
    rs_status st = rs_pipe_check(k, P, M, V, err);
    if (st) return st;
    int total = 2 * M * V, S = P * V;
    rs_pipe_op *ops = malloc(sizeof *ops * (size_t)total * (size_t)P);
    double *fend = malloc(sizeof *fend * (size_t)M * (size_t)S), *bend = malloc(sizeof *bend * (size_t)M * (size_t)S);
    double *free_at = calloc((size_t)P, sizeof *free_at);
    int *next = calloc((size_t)P, sizeof *next);
    if (!ops || !fend || !bend || !free_at || !next) {
        st = rs_err_set(err, RS_ERR_NOMEM, "pipeline simulation: out of memory");
        goto out;
    }
    for (int i = 0; i < M * S; i++) fend[i] = bend[i] = -1;
    for (int r = 0; r < P; r++) rs_pipe_schedule(k, P, M, V, r, ops + (size_t)r * total);
    /* Each rank runs its ops in order; an op starts when the rank is free and its input is there (the
     * previous stage's forward, the next stage's backward). Sweep until nothing can start. */
    int done = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < P; r++)
            while (next[r] < total) {
                const rs_pipe_op *o = &ops[(size_t)r * total + next[r]];
                double dep;
                if (o->kind == 'F') dep = o->stage == 0 ? 0 : fend[o->micro * S + o->stage - 1];
                else dep = o->stage == S - 1 ? fend[o->micro * S + o->stage] : bend[o->micro * S + o->stage + 1];
                if (dep < 0) break;
                double t0 = dep > free_at[r] ? dep : free_at[r], t1 = t0 + (o->kind == 'F' ? tf : tb)[o->stage];
                (o->kind == 'F' ? fend : bend)[o->micro * S + o->stage] = t1;
                if (start) start[(size_t)r * total + next[r]] = t0;
                if (end) end[(size_t)r * total + next[r]] = t1;
                free_at[r] = t1;
                next[r]++;
                done++;
                moved = true;
            }
    }
    if (done < total * P) {
        st = rs_err_set(err, RS_ERR_INTERNAL, "schedule=%s with %d ranks, micro=%d, virtual=%d deadlocks after %d of %d ops",
                        rs_pipe_kind_name(k), P, M, V, done, total * P);
        goto out;
    }
    double mk = 0;
    for (int r = 0; r < P; r++)
        if (free_at[r] > mk) mk = free_at[r];
    if (makespan) *makespan = mk;
out:
    free(ops);
    free(fend);
    free(bend);
    free(free_at);
    free(next);
    return st;
}

int rs_pipe_peak_inflight(rs_pipe_kind k, int P, int M, int V, int r)
{
    int total = 2 * M * V, held = 0, peak = 0;
    rs_pipe_op *ops = malloc(sizeof *ops * (size_t)total);
    if (!ops || rs_pipe_schedule(k, P, M, V, r, ops) < 0) {
        free(ops);
        return -1;
    }
    for (int i = 0; i < total; i++) {
        held += ops[i].kind == 'F' ? 1 : -1;
        if (held > peak) peak = held;
    }
    free(ops);
    return peak;
}

double rs_pipe_bubble_formula(rs_pipe_kind k, int P, int M, int V)
{
    if (k == RS_PIPE_NAIVE) M = 1, V = 1;
    if (k != RS_PIPE_INTERLEAVED) V = 1;
    return (double)(P - 1) / ((double)V * M + P - 1);
}

static int by_step(const void *a, const void *b)
{
    const rs_pipe_span *x = a, *y = b;
    return (x->step > y->step) - (x->step < y->step);
}

double rs_pipe_bubble_measured(const rs_pipe_span *s, int n, int P, int *steps)
{
    if (steps) *steps = 0;
    if (n <= 0 || P < 1) return -1;
    rs_pipe_span *c = malloc(sizeof *c * (size_t)n);
    bool *seen = calloc((size_t)P, sizeof *seen);
    if (!c || !seen) {
        free(c);
        free(seen);
        return -1;
    }
    memcpy(c, s, sizeof *c * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, by_step);
    double sum = 0;
    int counted = 0;
    for (int i = 0; i < n;) {
        int j = i;
        double lo = 0, hi = 0, busy = 0;
        bool any = false;
        memset(seen, 0, sizeof *seen * (size_t)P);
        for (; j < n && c[j].step == c[i].step; j++) {
            if (c[j].rank < 0 || c[j].rank >= P || c[j].t1 < c[j].t0) continue;
            if (!any || c[j].t0 < lo) lo = c[j].t0;
            if (!any || c[j].t1 > hi) hi = c[j].t1;
            any = true;
            busy += c[j].t1 - c[j].t0;
            seen[c[j].rank] = true;
        }
        bool all = any && hi > lo;
        for (int r = 0; r < P && all; r++) all = seen[r];
        if (all) {
            sum += 1.0 - busy / ((double)P * (hi - lo));
            counted++;
        }
        i = j;
    }
    free(c);
    free(seen);
    if (steps) *steps = counted;
    return counted ? sum / counted : -1;
}

double rs_pipe_bubble_of_costs(rs_pipe_kind k, int P, int M, int V, const double *tf, const double *tb)
{
    int S = P * V;
    double mk = 0, busy = 0;
    if (rs_pipe_simulate_costs(k, P, M, V, tf, tb, NULL, NULL, &mk, NULL) || !(mk > 0)) return -1;
    for (int s = 0; s < S; s++) busy += M * (tf[s] + tb[s]);
    return 1.0 - busy / ((double)P * mk);
}

rs_status rs_pipe_bubble_split(rs_pipe_kind k, int P, int M, int V, const double *tf, const double *tb,
                               double measured, rs_pipe_bubble_parts *out, rs_err *err)
{
    int S = P * V;
    double *eq = malloc(sizeof *eq * 2 * (size_t)S), mf = 0, mb = 0;
    if (!eq) return rs_err_set(err, RS_ERR_NOMEM, "pipeline: out of memory");
    for (int s = 0; s < S; s++) mf += tf[s] / S, mb += tb[s] / S;
    for (int s = 0; s < S; s++) eq[s] = mf, eq[S + s] = mb;
    /* the same schedule with every stage at the mean: what the schedule alone leaves idle */
    double sched = rs_pipe_bubble_of_costs(k, P, M, V, eq, eq + S), own = rs_pipe_bubble_of_costs(k, P, M, V, tf, tb);
    free(eq);
    if (sched < 0 || own < 0)
        return rs_err_set(err, RS_ERR_ARG, "pipeline: no schedule %s for %d ranks, micro=%d, virtual=%d",
                          rs_pipe_kind_name(k), P, M, V);
    *out = (rs_pipe_bubble_parts){.measured = measured, .schedule = sched, .imbalance = own - sched,
                                  .overhead = measured - own};
    return RS_OK;
}
