/* The pipeline schedule pane (pipe_pane.h): one step of a mode=pipeline run drawn as GPipe's and
 * PipeDream's figures draw it, a row per rank, time left to right, each forward or backward a cell
 * labelled F or B with its micro-batch's number (F0 B3), idle time '.'. The cells are the ranks' own
 * trace (the model's micro-batch spans), scaled so the step fills the width: GPipe's fill and drain,
 * 1F1B's alternation after its warm-up and the stages' unequal times are what the row shows, not
 * what the schedule says should happen. With several stages per rank (interleaved), the rank's later
 * stages are in lower case (f0 b0). */
#include "pipe_pane.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist/train/pipe_sched.h"
#include "pane.h"

#define LABEL_W 4 /* "r12 " */
#define BUSY_W 5  /* " 78%" */

static bool is_micro(const rs_view_span *sp) { return sp->micro >= 0 && sp->stage >= 0; }

bool rs_view_pipe_active(const rs_view_model *vm) { return vm->pipe_stages > 0; }

void rs_view_pipe_layout(rs_view_layout *l, int w, int h, int world)
{
    if (l->too_small || w >= 120) return; /* side by side, the timeline's place has rows to spare */
    int fr = w >= 120 && h >= 40 ? 2 : 1, need = fr + world + 2;
    int below = l->coll.h; /* coll and log share the rows under the timeline */
    int give = need - l->timeline.h;
    if (give > below - 4) give = below - 4;
    if (give <= 0) return;
    l->timeline.h += give;
    l->coll.y += give, l->coll.h -= give;
    l->log.y += give, l->log.h -= give;
}

/* The step to draw: the newest that every rank with micro-batch spans has gone past (or, once all are
 * done, the last one; while the first runs, that one), and its time span. False: nothing yet. */
static bool pick_step(const rs_view_model *vm, int64_t *step, double *t0, double *t1)
{
    int64_t lo_top = INT64_MAX, hi_top = -1;
    for (int i = 0; i < vm->nranks; i++) {
        const rs_view_rank *r = &vm->ranks[i];
        int64_t top = -1;
        for (int k = 0; k < r->n_span; k++) {
            const rs_view_span *sp = rs_view_span_at(r, k);
            if (is_micro(sp) && sp->step > top) top = sp->step;
        }
        if (top < 0) continue;
        if (top < lo_top) lo_top = top;
        if (top > hi_top) hi_top = top;
    }
    if (hi_top < 0) return false;
    *step = rs_view_all_done(vm) ? hi_top : lo_top - 1;
    *t0 = INFINITY, *t1 = -INFINITY;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < vm->nranks; i++) {
            const rs_view_rank *r = &vm->ranks[i];
            for (int k = 0; k < r->n_span; k++) {
                const rs_view_span *sp = rs_view_span_at(r, k);
                if (!is_micro(sp) || sp->step != *step) continue;
                if (sp->t0 < *t0) *t0 = sp->t0;
                if (sp->t1 > *t1) *t1 = sp->t1;
            }
        }
        if (*t1 >= *t0) break;
        *step = hi_top; /* the first step, still running (or its spans left the ring) */
    }
    if (!(*t1 >= *t0)) return false;
    if (!(*t1 > *t0)) *t1 = *t0 + 1e-6;
    return true;
}

/* A rank's stages in the step: the lowest and how many (more than one: interleaved). */
static int rank_stages(const rs_view_rank *r, int64_t step, int *lo)
{
    int seen[8], n = 0;
    *lo = -1;
    for (int k = 0; k < r->n_span; k++) {
        const rs_view_span *sp = rs_view_span_at(r, k);
        if (!is_micro(sp) || sp->step != step) continue;
        bool dup = false;
        for (int j = 0; j < n; j++) dup = dup || seen[j] == sp->stage;
        if (!dup && n < 8) seen[n++] = sp->stage;
        if (*lo < 0 || sp->stage < *lo) *lo = sp->stage;
    }
    return n;
}

static void fmt_ms(char *out, size_t cap, double s)
{
    double ms = 1e3 * s;
    snprintf(out, cap, ms >= 100 ? "%.0f ms" : ms >= 10 ? "%.1f ms" : ms >= 1 ? "%.2f ms" : "%.3f ms", ms);
}

/* One rank's row: '.' idle, each op its cells in reverse video with its label at the start. Returns
 * the seconds the rank computed in the step. */
static double draw_row(rs_view_screen *s, int x, int y, int cols, const rs_view_rank *r, int64_t step, double t0,
                       double dt, int stages_per_rank, int pp, const rs_view_opts *o)
{
    int idle = rs_view_role(o, RS_VIEW_C_DIM);
    for (int c = 0; c < cols; c++) rs_view_screen_set(s, x + c, y, o->utf8 ? 0xB7 : '.', idle, 0);
    double busy = 0;
    int next = 0; /* every op keeps a cell of its own: the row lists the rank's order even when ops are short */
    for (int k = r->n_span - 1; k >= 0; k--) { /* oldest first */
        const rs_view_span *sp = rs_view_span_at(r, k);
        if (!is_micro(sp) || sp->step != step) continue;
        busy += sp->t1 - sp->t0;
        int c0 = (int)floor((sp->t0 - t0) / dt + 0.5), c1 = (int)floor((sp->t1 - t0) / dt + 0.5);
        if (c0 < next) c0 = next;
        if (c0 >= cols) c0 = cols - 1;
        if (c1 > cols) c1 = cols;
        if (c1 <= c0) c1 = c0 + 1;
        next = c0 + 1;
        bool fwd = sp->state == RS_VIEW_ST_FORWARD;
        int chunk = stages_per_rank > 1 && pp > 0 ? sp->stage / pp : 0;
        char label[16];
        snprintf(label, sizeof label, "%c%d", fwd ? 'F' : 'B', sp->micro);
        if (chunk % 2) label[0] = (char)tolower((unsigned char)label[0]);
        int role = rs_view_role(o, fwd ? RS_VIEW_C_FORWARD : RS_VIEW_C_BACKWARD);
        for (int c = c0; c < c1; c++) {
            int i = c - c0;
            uint32_t ch = i < (int)strlen(label) ? (uint32_t)label[i] : ' ';
            /* a label cut by the op's end keeps its letter, never a bare digit */
            if (i > 0 && c1 - c0 < (int)strlen(label)) ch = ' ';
            rs_view_screen_set(s, x + c, y, ch, role, RS_VIEW_A_REVERSE | (i == 0 ? RS_VIEW_A_BOLD : 0));
        }
    }
    return busy;
}

void rs_view_draw_pipe(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, const rs_view_opts *o)
{
    int64_t step = 0;
    double t0 = 0, t1 = 0;
    bool any = pick_step(vm, &step, &t0, &t1);
    char title[96];
    if (any)
        snprintf(title, sizeof title, "pipeline, step %lld: F3/B3 forward/backward of micro-batch 3, %s idle",
                 (long long)step, o->utf8 ? "\xc2\xb7" : ".");
    else snprintf(title, sizeof title, "pipeline schedule: no micro-batch done yet");
    rs_view_rect in = rs_view_pane_frame(s, r, title, o);
    if (in.w <= LABEL_W + BUSY_W + 4 || in.h <= 0 || !any) return;
    rs_view_screen_clip(s, &in);
    int cols = in.w - LABEL_W - BUSY_W, rows = in.h - 2 > 0 ? in.h - 2 : in.h;
    double dt = (t1 - t0) / cols;
    /* the ranks that ran the step, and how many stages each runs (interleaved: more than one) */
    int shown[RS_VIEW_MAX_RANKS], n = 0, per_rank = 1, micros = 0;
    for (int i = 0; i < vm->nranks && n < RS_VIEW_MAX_RANKS; i++) {
        int lo, k = rank_stages(&vm->ranks[i], step, &lo);
        if (!k) continue;
        shown[n++] = i;
        if (k > per_rank) per_rank = k;
    }
    int pp = vm->pipe_stages / per_rank; /* stages' ranks in one pipeline */
    double busy = 0;
    int dim = rs_view_role(o, RS_VIEW_C_DIM);
    for (int j = 0; j < n; j++) {
        const rs_view_rank *rk = &vm->ranks[shown[j]];
        for (int k = 0; k < rk->n_span; k++) {
            const rs_view_span *sp = rs_view_span_at(rk, k);
            if (is_micro(sp) && sp->step == step && sp->micro + 1 > micros) micros = sp->micro + 1;
        }
        int y = in.y + j;
        if (j >= rows - 1 && n > rows) { /* the last row says how many did not fit */
            rs_view_screen_printf(s, in.x, y, in.w, dim, 0, "+%d more ranks", n - j);
            for (int m = j; m < n; m++) /* their busy time still counts in the bubble */
                for (int k = 0; k < vm->ranks[shown[m]].n_span; k++) {
                    const rs_view_span *sp = rs_view_span_at(&vm->ranks[shown[m]], k);
                    if (is_micro(sp) && sp->step == step) busy += sp->t1 - sp->t0;
                }
            break;
        }
        rs_view_screen_printf(s, in.x, y, LABEL_W, dim, RS_VIEW_A_BOLD, "r%d", shown[j]);
        double b = draw_row(s, in.x + LABEL_W, y, cols, rk, step, t0, dt, per_rank, pp, o);
        busy += b;
        rs_view_screen_printf(s, in.x + LABEL_W + cols, y, BUSY_W, 0, 0, "%4.0f%%", 100 * b / (t1 - t0));
    }
    if (in.h < n + 2) goto out;
    /* the scale: where the step starts and ends, and what a column is */
    int ay = in.y + (n < rows ? n : rows);
    char end[24], col[24];
    fmt_ms(end, sizeof end, t1 - t0);
    fmt_ms(col, sizeof col, dt);
    rs_view_screen_printf(s, in.x, ay, -1, dim, 0, "%-*s0", LABEL_W, "ms");
    rs_view_screen_printf(s, in.x + LABEL_W + 2, ay, cols - (int)strlen(end) - 3, dim, 0,
                          "%s 1 column = %s %s%s", o->utf8 ? "\xe2\x94\x80" : "-", col, o->utf8 ? "\xe2\x94\x80" : "-",
                          per_rank > 1 ? "  f b: a later stage" : "");
    rs_view_screen_put(s, in.x + LABEL_W + cols - (int)strlen(end), ay, end, -1, dim, 0);
    rs_view_screen_put(s, in.x + LABEL_W + cols, ay, " busy", -1, dim, 0);
    /* the step's measured bubble beside the schedule's formula for equal stages */
    int p = pp > 0 ? pp : n;
    rs_pipe_kind kind = per_rank > 1 ? RS_PIPE_INTERLEAVED : RS_PIPE_GPIPE;
    double f = rs_pipe_bubble_formula(kind, p, micros > 0 ? micros : 1, per_rank);
    double bubble = n ? 1 - busy / (n * (t1 - t0)) : 0;
    int bx = rs_view_screen_printf(s, in.x, ay + 1, -1, 0, RS_VIEW_A_BOLD, "bubble %.1f%%", 100 * bubble);
    char v[16] = "";
    if (per_rank > 1) snprintf(v, sizeof v, " v=%d", per_rank);
    rs_view_screen_printf(s, in.x + bx, ay + 1, -1, 0, 0, " (measured)  formula %s = %.1f%%  p=%d m=%d%s",
                          per_rank > 1 ? "(p-1)/(vm+p-1)" : "(p-1)/(m+p-1)", 100 * f, p, micros, v);
out:
    rs_view_screen_clip(s, NULL);
}
