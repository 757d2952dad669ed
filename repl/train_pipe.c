/* The end of a `train ... mode=pipeline` run as the REPL prints it: the bubble measured from every
 * rank's trace of its micro-batches beside the formula, and each stage's activations in flight
 * (measured at the allocator, the peak of the ACTS pool during the schedule) beside what the schedule
 * holds: GPipe all m micro-batches, 1F1B at most p - stage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/train/pipe_sched.h"
#include "dist/train/registry.h"
#include "ranks_job.h"
#include "ranks_train.h"
#include "result.h"
#include "train_pipe.h"
#include "view/render.h"

void rs_train_pipe_begin(rs_job *j, const rs_strategy_args *sa)
{
    rs_ranks_train *tr = j->state;
    tr->pipe_kind = rs_strategy_choice(sa, "schedule");
    tr->pipe_m = (int)rs_strategy_int(sa, "micro");
    if (tr->pipe_kind == RS_PIPE_NAIVE && !rs_strategy_given(sa, "micro")) tr->pipe_m = 1;
    tr->pipe_v = rs_strategy_given(sa, "virtual") ? (int)rs_strategy_int(sa, "virtual")
                : tr->pipe_kind == RS_PIPE_INTERLEAVED ? 2 : 1;
    tr->pipe_dp = (int)rs_strategy_int(sa, "dp");
    tr->pipe_tp = rs_strategy_given(sa, "tp") ? (int)rs_strategy_int(sa, "tp") : 1;
    static const char *const parts[] = {"uniform", "parameters", "time"}; /* rs_pipe_partition */
    int part = rs_strategy_choice(sa, "partition");
    if (rs_strategy_str(sa, "split")) snprintf(tr->pipe_cut, sizeof tr->pipe_cut, "split=%s", rs_strategy_str(sa, "split"));
    else snprintf(tr->pipe_cut, sizeof tr->pipe_cut, "partition=%s", parts[part >= 0 && part < 3 ? part : 1]);
}

/* Stages' ranks in one pipeline, and the stage rank r runs (dp x pp x tp, dist/train/grid.h). */
static int pipe_pp(const rs_job *j)
{
    const rs_ranks_train *tr = j->state;
    return j->world / (tr->pipe_dp * tr->pipe_tp);
}
static int stage_of(const rs_job *j, int r)
{
    const rs_ranks_train *tr = j->state;
    return r / (tr->pipe_dp * tr->pipe_tp);
}

static double fig_max(const rs_job *j, int r, const char *name)
{
    const rs_ranks_train *tr = j->state;
    for (int i = 0; tr->figs && i < 8; i++)
        if (!strcmp(tr->figs[r][i].name, name)) return tr->figs[r][i].max;
    return -1;
}

double rs_train_pipe_bubble(const rs_job *j, int *steps)
{
    const rs_ranks_train *tr = j->state;
    rs_pipe_span *sp = malloc(sizeof *sp * (size_t)(tr->nmicros ? tr->nmicros : 1));
    if (!sp) return -1;
    for (int i = 0; i < tr->nmicros; i++) {
        const rs_train_line *t = &tr->micros[i];
        sp[i] = (rs_pipe_span){t->rank, t->step, t->work, t->micro, t->stage, t->t0, t->t1};
    }
    double b = rs_pipe_bubble_measured(sp, tr->nmicros, j->world, steps);
    free(sp);
    return b;
}

/* Each stage's mean forward and backward of one micro-batch, over the steps the bubble counts (tf, tb:
 * S = P*V each; a stage run by several ranks, dp or tp, averages them). False without spans of some
 * stage. */
static bool stage_costs(const rs_job *j, int S, double *tf, double *tb)
{
    const rs_ranks_train *tr = j->state;
    int *nf = calloc((size_t)S, sizeof *nf), *nb = calloc((size_t)S, sizeof *nb);
    bool ok = nf && nb;
    for (int s = 0; ok && s < S; s++) tf[s] = tb[s] = 0;
    for (int i = 0; ok && i < tr->nmicros; i++) {
        const rs_train_line *t = &tr->micros[i];
        if (t->stage < 0 || t->stage >= S || t->step < 1) continue; /* step 0 warms up: allocations, caches */
        if (t->work == 'F') tf[t->stage] += t->t1 - t->t0, nf[t->stage]++;
        else tb[t->stage] += t->t1 - t->t0, nb[t->stage]++;
    }
    for (int s = 0; ok && s < S; s++) {
        ok = nf[s] && nb[s];
        if (ok) tf[s] /= nf[s], tb[s] /= nb[s];
    }
    free(nf);
    free(nb);
    return ok;
}

/* Rank r's forwards and backwards per step, seconds (mean of the steps after the first; -1: none). */
static double rank_busy(const rs_job *j, int r)
{
    const rs_ranks_train *tr = j->state;
    double sum = 0;
    int64_t lo = -1, hi = -1;
    for (int i = 0; i < tr->nmicros; i++) {
        const rs_train_line *t = &tr->micros[i];
        if (t->rank != r || t->step < 1) continue;
        sum += t->t1 - t->t0;
        if (lo < 0 || t->step < lo) lo = t->step;
        if (t->step > hi) hi = t->step;
    }
    return lo < 0 ? -1 : sum / (double)(hi - lo + 1);
}

/* The measured bubble of each step with spans of every rank, the least of them in *best (-1: none). */
static double bubble_best(const rs_job *j)
{
    const rs_ranks_train *tr = j->state;
    rs_pipe_span *sp = malloc(sizeof *sp * (size_t)(tr->nmicros ? tr->nmicros : 1));
    double best = -1;
    int64_t last = -1;
    for (int i = 0; sp && i < tr->nmicros; i++)
        if (tr->micros[i].step > last) last = tr->micros[i].step;
    for (int64_t step = 0; sp && step <= last; step++) {
        int n = 0, k = 0;
        for (int i = 0; i < tr->nmicros; i++) {
            const rs_train_line *t = &tr->micros[i];
            if (t->step == step) sp[n++] = (rs_pipe_span){t->rank, t->step, t->work, t->micro, t->stage, t->t0, t->t1};
        }
        double b = n ? rs_pipe_bubble_measured(sp, n, j->world, &k) : -1;
        if (k && b >= 0 && (best < 0 || b < best)) best = b;
    }
    free(sp);
    return best;
}

/* The measured bubble taken apart (pipe_sched.h); false without every stage's spans. */
static bool bubble_parts(const rs_job *j, rs_pipe_bubble_parts *bp, double *tf, double *tb)
{
    const rs_ranks_train *tr = j->state;
    int P = pipe_pp(j), S = P * tr->pipe_v, steps = 0;
    double b = rs_train_pipe_bubble(j, &steps);
    return b >= 0 && stage_costs(j, S, tf, tb) &&
           !rs_pipe_bubble_split((rs_pipe_kind)tr->pipe_kind, P, tr->pipe_m, tr->pipe_v, tf, tb, b, bp, NULL);
}

/* Lines of at most 80 columns: a projector's width. */
void rs_train_pipe_summary(rs_job *j, FILE *f)
{
    rs_ranks_train *tr = j->state;
    rs_pipe_kind k = (rs_pipe_kind)tr->pipe_kind;
    int P = pipe_pp(j), M = tr->pipe_m, V = tr->pipe_v, steps = 0;
    double b = rs_train_pipe_bubble(j, &steps), want = rs_pipe_bubble_formula(k, P, M, V);
    fprintf(f, "pipeline: schedule=%s, %d stages on %d ranks, %d micro-batches per batch\n", rs_pipe_kind_name(k),
            P * V, P, M);
    if (P != j->world && tr->pipe_tp > 1)
        fprintf(f, "  dp=%d x pp=%d x tp=%d = %d ranks: rank = %d x stage + %d x replica + shard\n", tr->pipe_dp, P,
                tr->pipe_tp, j->world, tr->pipe_dp * tr->pipe_tp, tr->pipe_tp);
    else if (P != j->world)
        fprintf(f, "  dp=%d x pp=%d = %d ranks: rank = %d x stage + replica\n", tr->pipe_dp, P, j->world, tr->pipe_dp);
    if (b >= 0)
        fprintf(f, "  bubble: %.1f%% of each step idle, measured from the ranks' traces (%d steps)\n"
                   "          formula %s = %.1f%%\n",
                100 * b, steps, k == RS_PIPE_INTERLEAVED ? "(p-1)/(v*m+p-1)" : "(p-1)/(m+p-1)", 100 * want);
    int S = P * V;
    double *tf = calloc((size_t)S, sizeof *tf), *tb = calloc((size_t)S, sizeof *tb);
    rs_pipe_bubble_parts bp;
    bool parts = tf && tb && bubble_parts(j, &bp, tf, tb);
    double best = bubble_best(j);
    if (best >= 0 && steps > 1) fprintf(f, "          the least in one step: %.1f%%\n", 100 * best);
    if (parts)
        fprintf(f, "          = schedule %.1f%% + unequal stages %.1f%% + the rest %.1f%%\n"
                   "          (schedule: simulated with every stage at the stages' mean time;\n"
                   "          unequal: with each stage's own; rest: messages, waits, shared cores)\n",
                100 * bp.schedule, 100 * bp.imbalance, 100 * bp.overhead);
    /* with several stages a rank (interleaved) or ranks a stage (dp, tp), each stage's own time too */
    if (parts && S != j->world) {
        fprintf(f, "  stage time per step (forwards + backwards):\n   ");
        for (int s = 0; s < S; s++)
            fprintf(f, "%s stage %d %.2f ms", s ? (s % 3 ? "," : ",\n   ") : "", s, 1e3 * M * (tf[s] + tb[s]));
        fputc('\n', f);
    }
    free(tf);
    free(tb);
    fprintf(f, "  stages cut by %s; time/step: its forwards + backwards\n", tr->pipe_cut);
    fprintf(f, "  %-4s %-20s %10s %22s %10s\n", "rank", "stage:layers", "time/step", "in flight (measured)", "schedule");
    for (int r = 0; r < j->world; r++) {
        char bytes[32] = "-", held[40] = "-", busy[24] = "-";
        double peak = fig_max(j, r, "acts_peak_bytes"), sets = fig_max(j, r, "acts_inflight"), t = rank_busy(j, r);
        if (peak >= 0) rs_view_fmt_bytes(bytes, peak);
        if (sets >= 0) snprintf(held, sizeof held, "%s (%.0f micro)", bytes, sets);
        if (t >= 0) snprintf(busy, sizeof busy, "%.2f ms", 1e3 * t);
        fprintf(f, "  %-4d %-20.20s %10s %22s %4d micro\n", r, tr->stage_short ? tr->stage_short[r] : "", busy, held,
                rs_pipe_peak_inflight(k, P, M, V, stage_of(j, r)));
    }
    fprintf(f, "  (in flight: activations a stage holds for its backward, peak of the ACTS pool\n"
               "   during a step; the schedule holds gpipe m micro-batches, 1f1b p - stage)\n");
    /* each rank keeps its stages' parameters alone (the other stages' pages go back to the system) */
    bool any = false;
    for (int r = 0; r < j->world; r++) any |= fig_max(j, r, "stage_params") >= 0;
    if (!any || !tr->mem) return;
    fprintf(f, "  parameters per rank, measured (PARAMS pool) | formula 4 x (its stages' + tied)\n");
    for (int r = 0; r < j->world; r++) {
        char got[32], want[32];
        double n = fig_max(j, r, "stage_params");
        rs_view_fmt_bytes(got, (double)tr->mem[r].live[RS_POOL_PARAMS]);
        rs_view_fmt_bytes(want, 4 * n);
        fprintf(f, "  %-4d %-24.24s %10s | 4 x %.0f = %s\n", r, tr->stage_short ? tr->stage_short[r] : "", got, n, want);
    }
}

/* What `expect` reads after a pipeline run (docs/repl.md): the measured bubble beside its formula and
 * each stage's micro-batches in flight (measured) beside the schedule's. */
void rs_train_pipe_record(rs_job *j)
{
    rs_ranks_train *tr = j->state;
    rs_pipe_kind k = (rs_pipe_kind)tr->pipe_kind;
    int P = pipe_pp(j), M = tr->pipe_m, V = tr->pipe_v, steps = 0;
    double b = rs_train_pipe_bubble(j, &steps);
    if (b >= 0) rs_result_num(j->s, "bubble", b);
    double best = bubble_best(j);
    if (best >= 0) rs_result_num(j->s, "bubble.best", best);
    int S = P * V;
    double *tf = calloc((size_t)S, sizeof *tf), *tb = calloc((size_t)S, sizeof *tb);
    rs_pipe_bubble_parts bp;
    if (tf && tb && bubble_parts(j, &bp, tf, tb)) {
        rs_result_num(j->s, "bubble.schedule", bp.schedule);
        rs_result_num(j->s, "bubble.imbalance", bp.imbalance);
        rs_result_num(j->s, "bubble.rest", bp.overhead);
        double lo = 0, hi = 0;
        for (int s = 0; s < S; s++) {
            double t = M * (tf[s] + tb[s]);
            if (!s || t < lo) lo = t;
            if (!s || t > hi) hi = t;
        }
        rs_result_num(j->s, "stage_spread", lo > 0 ? hi / lo : 0); /* slowest stage over fastest */
    }
    free(tf);
    free(tb);
    rs_result_num(j->s, "formula.bubble", rs_pipe_bubble_formula(k, P, M, V));
    rs_result_num(j->s, "micro", M);
    for (int r = 0; r < j->world; r++) {
        double sets = fig_max(j, r, "acts_inflight"), peak = fig_max(j, r, "acts_peak_bytes");
        if (sets >= 0) rs_result_rank(j->s, "inflight", r, sets);
        if (peak >= 0) rs_result_rank(j->s, "inflight_bytes", r, peak);
        rs_result_rank(j->s, "formula.inflight", r, rs_pipe_peak_inflight(k, P, M, V, stage_of(j, r)));
        double n = fig_max(j, r, "stage_params");
        if (n >= 0 && tr->mem) rs_result_rank(j->s, "stage_param_bytes", r, (double)tr->mem[r].live[RS_POOL_PARAMS]);
        if (n >= 0) rs_result_rank(j->s, "formula.stage_param_bytes", r, 4 * n);
    }
}
