/* The pipeline schedule pane (repl/view/pipe_sched_pane.c), headless at 80x24: each schedule's ops, with
 * the start and end times its simulation gives for equal stages (forward 1 ms, backward 2 ms;
 * dist/train/pipe_sched.h, whose orders tests/dist/pipe/test_sched.c checks against the papers), are
 * fed to the dashboard's model as the ranks report them, two steps of them. On screen, each rank's
 * row must list its ops in the schedule's order with their micro-batch numbers (F0 F1 .. B0), GPipe's
 * first stage every forward before its first backward, 1F1B's first stage alternating after its p - 1
 * warm-up forwards, interleaved's later stage in lower case; the idle cells must be the simulated idle
 * time to a cell a gap, and the bubble line the simulated bubble beside (p-1)/(m+p-1). While the
 * second step runs the pane shows the first (the newest every rank finished); once all are done, the
 * last. Usage: test-pipe-pane (RS_TEST_SHOW=1 prints each screen) */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/train/pipe_sched.h"
#include "repl/view/render.h"
#include "rs_test.h"

#define W 80
#define H 24

/* Feeds step `step` of schedule k (simulated, starting at t0 seconds) into vm; returns its makespan. */
static double feed_step(rs_view_model *vm, rs_pipe_kind k, int P, int M, int V, int64_t step, double t0, double *idle,
                        int *gaps)
{
    int total = 2 * M * V;
    double *st = malloc(sizeof *st * (size_t)(P * total)), *en = malloc(sizeof *en * (size_t)(P * total)), mk = 0;
    rs_pipe_op *ops = malloc(sizeof *ops * (size_t)total);
    rs_err e = {0};
    RS_CHECK(rs_pipe_simulate(k, P, M, V, 1e-3, 2e-3, st, en, &mk, &e) == RS_OK, "simulate: %s", e.msg);
    *idle = 0;
    *gaps = 0;
    for (int r = 0; r < P; r++) {
        rs_pipe_schedule(k, P, M, V, r, ops);
        for (int i = 0; i < total; i++) {
            const rs_pipe_op *o = &ops[i];
            rs_train_line tl = {.kind = RS_TL_MICRO, .rank = r, .step = step, .work = o->kind, .micro = o->micro,
                                .stage = o->stage, .t0 = t0 + st[r * total + i], .t1 = t0 + en[r * total + i]};
            rs_view_feed_train(vm, &tl);
            *idle -= en[r * total + i] - st[r * total + i];
            *gaps += st[r * total + i] > (i ? en[r * total + i - 1] : 0) + 1e-9;
        }
        *gaps += en[r * total + total - 1] < mk - 1e-9;
    }
    *idle += P * mk;
    free(st);
    free(en);
    free(ops);
    return mk;
}

/* The row of rank r on screen (from "rR " to the busy column), or NULL. */
static const char *row_of(const char *text, int r, char *out)
{
    char head[8];
    snprintf(head, sizeof head, "r%d ", r);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, head, strlen(head)) && strchr(p, '%') && (p[4] == '.' || isalpha((unsigned char)p[4]))) {
            int n = 0;
            while (p[n] && p[n] != '\n' && n < W) n++;
            memcpy(out, p, (size_t)n);
            out[n] = 0;
            out[W - 5] = 0; /* the busy column */
            return out + 4;
        }
    return NULL;
}

static void check_case(rs_pipe_kind k, int P, int M, int V)
{
    char what[64];
    snprintf(what, sizeof what, "%s p=%d m=%d v=%d", rs_pipe_kind_name(k), P, M, V);
    rs_err e = {0};
    rs_view_model *vm = rs_view_model_new(&e);
    rs_view_screen *s = rs_view_screen_new(W, H, &e);
    rs_view_run run = {"r1", "train", "pipeline", "shm", P, 2, 1, -1};
    rs_view_set_run(vm, &run);
    rs_view_opts o = {.color = false, .utf8 = false};
    double idle0, idle1;
    int gaps0, gaps;
    double mk = feed_step(vm, k, P, M, V, 0, 10.0, &idle0, &gaps0);
    feed_step(vm, k, P, M, V, 1, 10.0 + mk + 1e-3, &idle1, &gaps);
    /* step 1 reported by every rank but nobody done: the pane shows step 0, the newest all finished */
    rs_view_draw(s, vm, 10.0 + 2 * mk, &o);
    const char *text = rs_view_screen_text(s);
    RS_CHECK(strstr(text, "pipeline, step 0:") != NULL, "%s: shows step 0 while step 1 is not done:\n%s", what, text);
    for (int r = 0; r < P; r++) {
        rs_train_line d = {.kind = RS_TL_DONE, .rank = r, .step = 2};
        rs_view_feed_train(vm, &d);
    }
    rs_view_draw(s, vm, 10.0 + 2 * mk, &o);
    text = rs_view_screen_text(s);
    RS_CHECK(strstr(text, "pipeline, step 1:") != NULL, "%s: the last step once all are done:\n%s", what, text);
    if (getenv("RS_TEST_SHOW")) printf("%s:\n%s", what, text); /* to look at the screens */

    int total = 2 * M * V, cols = W - 4 - 5;
    rs_pipe_op *ops = malloc(sizeof *ops * (size_t)total);
    double dt = mk / cols;
    int dots = 0;
    for (int r = 0; r < P; r++) {
        char buf[W + 1];
        const char *row = row_of(text, r, buf);
        RS_CHECK(row != NULL, "%s: no row for rank %d:\n%s", what, r, text);
        if (!row) continue;
        rs_pipe_schedule(k, P, M, V, r, ops);
        /* the labels in order: letter (case: the rank's chunk) and micro-batch number where it fits */
        int i = 0;
        for (const char *p = row; *p; p++) {
            if (*p == '.') dots++;
            if (!isalpha((unsigned char)*p)) continue;
            RS_CHECK(i < total, "%s: rank %d shows more than its %d ops: %s", what, r, total, row);
            if (i >= total) break;
            char want = ops[i].chunk % 2 ? (char)tolower(ops[i].kind) : ops[i].kind;
            RS_CHECK(*p == want, "%s: rank %d op %d is %c, the schedule's is %c%d: %s", what, r, i, *p, want,
                     ops[i].micro, row);
            if (isdigit((unsigned char)p[1]))
                RS_CHECK(atoi(p + 1) == ops[i].micro, "%s: rank %d op %d is micro-batch %d, not %d: %s", what, r, i,
                         atoi(p + 1), ops[i].micro, row);
            i++;
        }
        RS_CHECK(i == total, "%s: rank %d shows %d of its %d ops: %s", what, r, i, total, row);
        if (r == 0 && k == RS_PIPE_GPIPE) { /* fill, then drain: every forward before the first backward */
            const char *b = strchr(row, 'B'), *f = strrchr(row, 'F');
            RS_CHECK(b && f && f < b, "%s: GPipe's first stage runs every forward first: %s", what, row);
        }
        if (r == 0 && k == RS_PIPE_1F1B) { /* P - 1 warm-up forwards, then F B F B ... */
            char seq[128];
            int n = 0;
            for (const char *p = row; *p && n < 127; p++)
                if (*p == 'F' || *p == 'B') seq[n++] = *p;
            seq[n] = 0;
            for (int j = P; j + 1 < 2 * M - (P - 1); j += 2)
                RS_CHECK(seq[j] == 'B' && seq[j + 1] == 'F', "%s: 1F1B alternates after warm-up: %s", what, seq);
        }
    }
    /* idle: the simulated gaps, to a cell a gap (each gap's ends round to the nearest cell) */
    double want_dots = idle1 / dt;
    RS_CHECK(dots > 0 && fabs(dots - want_dots) <= gaps + 1, "%s: %d idle cells, the simulation's idle is %.1f cells "
             "in %d gaps", what, dots, want_dots, gaps);
    /* the bubble line: the step's simulated bubble, and the formula for equal stages */
    const char *bl = strstr(text, "bubble ");
    double shown = bl ? strtod(bl + 7, NULL) : -1, sim = 100 * idle1 / (P * mk);
    RS_CHECK(fabs(shown - sim) < 0.051, "%s: bubble %.1f%% on screen, simulated %.2f%%", what, shown, sim);
    char f[64];
    snprintf(f, sizeof f, "= %.1f%%", 100 * rs_pipe_bubble_formula(k, P, M, V));
    RS_CHECK(bl && strstr(bl, f), "%s: the formula %s beside the bubble:\n%s", what, f, text);
    if (k != RS_PIPE_INTERLEAVED) /* equal stages: measured (here simulated) and formula agree */
        RS_CHECK(fabs(sim - 100 * rs_pipe_bubble_formula(k, P, M, V)) < 1e-6, "%s: simulated %.2f%%", what, sim);
    free(ops);
    rs_view_screen_free(s);
    rs_view_model_free(vm);
}

int main(void)
{
    check_case(RS_PIPE_GPIPE, 2, 4, 1);
    check_case(RS_PIPE_GPIPE, 4, 8, 1);
    check_case(RS_PIPE_1F1B, 2, 8, 1);
    check_case(RS_PIPE_1F1B, 4, 8, 1);
    check_case(RS_PIPE_NAIVE, 3, 1, 1);
    check_case(RS_PIPE_INTERLEAVED, 2, 4, 2);
    return rs_test_finish("pipe-pane");
}
