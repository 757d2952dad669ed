/* The pipeline schedules as lists (dist/train/pipe_sched.h), against orders written out by hand from
 * the papers (GPipe, PipeDream-Flush's 1F1B, Megatron-LM's interleaved 1F1B), and for every size up to
 * 8 ranks and 16 micro-batches: each rank runs every forward and backward of its stages exactly once,
 * a backward after its forward; a fixed-cost simulation never deadlocks and its bubble is the formula;
 * 1F1B holds at most P - rank micro-batches, GPipe all M; the messages are what the ops produce. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/train/pipe_sched.h"
#include "tests/rs_test.h"

/* "F0 F1 B0 ..." (interleaved: "F0.1" is micro 0 on chunk 1). */
static void text(const rs_pipe_op *o, int n, bool chunks, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < cap; i++) {
        int w = chunks ? snprintf(buf + k, cap - k, "%s%c%d.%d", i ? " " : "", o[i].kind, o[i].micro, o[i].chunk)
                       : snprintf(buf + k, cap - k, "%s%c%d", i ? " " : "", o[i].kind, o[i].micro);
        if (w > 0) k += (size_t)w;
    }
}

static void expect(rs_pipe_kind k, int P, int M, int V, int r, const char *want)
{
    rs_pipe_op ops[512];
    char got[4096];
    int n = rs_pipe_schedule(k, P, M, V, r, ops);
    text(ops, n, V > 1, got, sizeof got);
    RS_CHECK(!strcmp(got, want), "%s P=%d M=%d V=%d rank %d:\n  got  %s\n  want %s", rs_pipe_kind_name(k), P, M, V, r,
             got, want);
}

/* Every (micro, chunk) forward and backward once, B after F, stages right for the rank. */
static void well_formed(rs_pipe_kind k, int P, int M, int V)
{
    int total = 2 * M * V;
    rs_pipe_op *ops = malloc(sizeof *ops * (size_t)total);
    int *fpos = malloc(sizeof *fpos * (size_t)M * (size_t)V), *bpos = malloc(sizeof *bpos * (size_t)M * (size_t)V);
    for (int r = 0; r < P; r++) {
        for (int i = 0; i < M * V; i++) fpos[i] = bpos[i] = -1;
        int n = rs_pipe_schedule(k, P, M, V, r, ops);
        RS_CHECK(n == total, "%s P=%d M=%d V=%d rank %d: %d ops, want %d", rs_pipe_kind_name(k), P, M, V, r, n, total);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            const rs_pipe_op *o = &ops[i];
            if (o->micro < 0 || o->micro >= M || o->chunk < 0 || o->chunk >= V || o->stage != o->chunk * P + r) {
                bad++;
                continue;
            }
            int *pos = o->kind == 'F' ? fpos : bpos;
            if (pos[o->micro * V + o->chunk] >= 0) bad++;
            pos[o->micro * V + o->chunk] = i;
        }
        for (int i = 0; i < M * V; i++)
            if (fpos[i] < 0 || bpos[i] < 0 || bpos[i] < fpos[i]) bad++;
        RS_CHECK(bad == 0, "%s P=%d M=%d V=%d rank %d: %d ops missing, repeated or out of order", rs_pipe_kind_name(k),
                 P, M, V, r, bad);
    }
    free(ops);
    free(fpos);
    free(bpos);
}

int main(void)
{
    /* GPipe (Huang et al. 2019, figure 2): all forwards, then all backwards */
    expect(RS_PIPE_GPIPE, 4, 4, 1, 0, "F0 F1 F2 F3 B0 B1 B2 B3");
    expect(RS_PIPE_GPIPE, 4, 4, 1, 3, "F0 F1 F2 F3 B0 B1 B2 B3");
    expect(RS_PIPE_NAIVE, 4, 1, 1, 2, "F0 B0");
    /* 1F1B (Narayanan et al. 2021, figure 4, top): rank r warms up with P-r-1 forwards */
    expect(RS_PIPE_1F1B, 4, 8, 1, 0, "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
    expect(RS_PIPE_1F1B, 4, 8, 1, 1, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
    expect(RS_PIPE_1F1B, 4, 8, 1, 3, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
    expect(RS_PIPE_1F1B, 4, 2, 1, 0, "F0 F1 B0 B1");
    /* interleaved (figure 4, bottom; Megatron-LM's order): micro-batches in groups of P up the chunks,
     * warm-up (P-r-1)*2 + (V-1)*P forwards */
    expect(RS_PIPE_INTERLEAVED, 2, 4, 2, 0, "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
    expect(RS_PIPE_INTERLEAVED, 2, 4, 2, 1, "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");

    /* sizes each schedule refuses, with what would work */
    rs_err e = {0};
    RS_CHECK(rs_pipe_check(RS_PIPE_NAIVE, 2, 4, 1, &e) == RS_ERR_ARG && strstr(e.msg, "micro=1"), "naive micro=4: %s",
             e.msg);
    RS_CHECK(rs_pipe_check(RS_PIPE_INTERLEAVED, 4, 6, 2, &e) == RS_ERR_ARG && strstr(e.msg, "try micro=8"),
             "interleaved 4 ranks micro=6: %s", e.msg);
    RS_CHECK(rs_pipe_check(RS_PIPE_INTERLEAVED, 2, 4, 1, &e) == RS_ERR_ARG, "interleaved virtual=1 refused");
    RS_CHECK(rs_pipe_check(RS_PIPE_1F1B, 2, 4, 2, &e) == RS_ERR_ARG, "1f1b virtual=2 refused");
    RS_CHECK(rs_pipe_schedule(RS_PIPE_1F1B, 2, 4, 1, 2, NULL) == -1, "rank 2 of 2 refused");

    /* every size: well formed, no deadlock, the bubble of the formula, what each rank holds */
    int sims = 0;
    for (int k = 0; k < RS_PIPE_KIND_COUNT; k++)
        for (int P = 1; P <= 8; P++)
            for (int M = 1; M <= 16; M++)
                for (int V = 1; V <= 4; V++) {
                    if (rs_pipe_check((rs_pipe_kind)k, P, M, V, NULL)) continue;
                    well_formed((rs_pipe_kind)k, P, M, V);
                    double mk = 0;
                    rs_status st = rs_pipe_simulate((rs_pipe_kind)k, P, M, V, 1.0, 2.0, NULL, NULL, &mk, &e);
                    RS_CHECK(!st, "%s", e.msg);
                    sims++;
                    double busy = (double)M * V * 3.0, bubble = 1 - busy / mk;
                    double want = rs_pipe_bubble_formula((rs_pipe_kind)k, P, M, V);
                    RS_CHECK_CLOSE(bubble, want, 1e-12, 0, "simulated bubble vs formula");
                    for (int r = 0; r < P; r++) {
                        int held = rs_pipe_peak_inflight((rs_pipe_kind)k, P, M, V, r);
                        if (k == RS_PIPE_GPIPE) RS_CHECK(held == M, "gpipe P=%d M=%d rank %d holds %d", P, M, r, held);
                        if (k == RS_PIPE_1F1B)
                            RS_CHECK(held == (P - r < M ? P - r : M), "1f1b P=%d M=%d rank %d holds %d", P, M, r, held);
                    }
                    /* what rank r sends rank r+1 forward and rank r-1 back, one message per op that
                     * crosses a stage boundary to that rank */
                    for (int r = 0; r < P && P > 1; r++)
                        for (int to = 0; to < P; to++) {
                            int n = rs_pipe_messages((rs_pipe_kind)k, P, M, V, r, to, NULL, 0), want_n = 0;
                            for (int s = r; s < P * V; s += P) {
                                if (s + 1 < P * V && (s + 1) % P == to) want_n += M;
                                if (s > 0 && (s - 1) % P == to) want_n += M;
                            }
                            RS_CHECK(n == want_n, "%s P=%d M=%d V=%d: rank %d sends rank %d %d messages, want %d",
                                     rs_pipe_kind_name((rs_pipe_kind)k), P, M, V, r, to, n, want_n);
                        }
                }
    printf("%d schedules simulated\n", sims);

    /* the order of what rank 0 sends rank 1 in 1F1B: activations as its forwards run, gradients never
     * (it has no stage before it) */
    rs_pipe_msg msg[16];
    int n = rs_pipe_messages(RS_PIPE_1F1B, 2, 3, 1, 0, 1, msg, 16);
    RS_CHECK(n == 3 && msg[0].kind == 'A' && msg[0].micro == 0 && msg[0].stage == 1 && msg[2].micro == 2,
             "1f1b P=2 M=3: rank 0 sends 3 activations in micro order");
    n = rs_pipe_messages(RS_PIPE_1F1B, 2, 3, 1, 1, 0, msg, 16);
    RS_CHECK(n == 3 && msg[0].kind == 'G' && msg[0].stage == 0 && msg[1].micro == 1, "rank 1 sends 3 gradients back");

    /* the bubble measured from spans: the simulation's own trace gives the formula back */
    {
        int P = 4, M = 8, total = 2 * M;
        double st[4 * 16], en[4 * 16];
        rs_pipe_simulate(RS_PIPE_1F1B, P, M, 1, 1.0, 2.0, st, en, NULL, &e);
        rs_pipe_span sp[2 * 4 * 16];
        int ns = 0;
        for (int step = 0; step < 2; step++)
            for (int r = 0; r < P; r++)
                for (int i = 0; i < total; i++)
                    sp[ns++] = (rs_pipe_span){r, step, 'F', 0, r, st[r * total + i] + 100 * step, en[r * total + i] + 100 * step};
        int steps = 0;
        double b = rs_pipe_bubble_measured(sp, ns, P, &steps);
        RS_CHECK(steps == 2, "two steps measured, got %d", steps);
        RS_CHECK_CLOSE(b, 3.0 / 11.0, 1e-12, 0, "measured bubble of the simulated 1F1B trace");
        RS_CHECK(rs_pipe_bubble_measured(sp, ns, 5, &steps) == -1 && steps == 0, "a rank without spans: no figure");
    }
    /* Unequal stages, worked by hand: GPipe, 2 ranks, 2 micro-batches, stage 0 (F 1, B 1), stage 1 (F 2,
     * B 2). Rank 0 F0 0-1, F1 1-2; rank 1 F0 1-3, F1 3-5, B0 5-7, B1 7-9; rank 0 B0 7-8, B1 9-10: 10 units,
     * 12 of them busy of 20, bubble 0.4; every stage at the mean (1.5, 1.5) gives the formula's 1/3. */
    {
        double tf[2] = {1, 2}, tb[2] = {1, 2}, mk = 0;
        rs_err e = {0};
        RS_CHECK(rs_pipe_simulate_costs(RS_PIPE_GPIPE, 2, 2, 1, tf, tb, NULL, NULL, &mk, &e) == RS_OK && mk == 10,
                 "unequal stages: makespan %g, by hand 10", mk);
        RS_CHECK(fabs(rs_pipe_bubble_of_costs(RS_PIPE_GPIPE, 2, 2, 1, tf, tb) - 0.4) < 1e-12, "unequal stages: bubble 0.4");
        rs_pipe_bubble_parts bp;
        RS_CHECK(rs_pipe_bubble_split(RS_PIPE_GPIPE, 2, 2, 1, tf, tb, 0.5, &bp, &e) == RS_OK, "split: %s", e.msg);
        RS_CHECK(fabs(bp.schedule - 1.0 / 3) < 1e-12 && fabs(bp.imbalance - (0.4 - 1.0 / 3)) < 1e-12 &&
                     fabs(bp.overhead - 0.1) < 1e-12 && bp.measured == 0.5,
                 "split of 0.5: schedule %g (1/3), unequal %g (0.0667), rest %g (0.1)", bp.schedule, bp.imbalance,
                 bp.overhead);
        /* equal stages: nothing is imbalance, for every schedule and size */
        for (int k = RS_PIPE_GPIPE; k <= RS_PIPE_1F1B; k++)
            for (int M = 1; M <= 8; M *= 2) {
                double f[4] = {1, 1, 1, 1}, b[4] = {2, 2, 2, 2};
                RS_CHECK(rs_pipe_bubble_split((rs_pipe_kind)k, 4, M, 1, f, b, 0.9, &bp, &e) == RS_OK &&
                             fabs(bp.imbalance) < 1e-12 &&
                             fabs(bp.schedule - rs_pipe_bubble_formula((rs_pipe_kind)k, 4, M, 1)) < 1e-12,
                         "%s m=%d equal stages: schedule %g = formula, imbalance %g = 0", rs_pipe_kind_name((rs_pipe_kind)k),
                         M, bp.schedule, bp.imbalance);
            }
    }
    return rs_test_finish("pipe-sched");
}
