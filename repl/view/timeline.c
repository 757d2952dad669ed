/* The timeline: per rank, a Gantt strip of its phases over the last seconds, one cell a slice of time,
 * letters F B C O D and '.' for idle. Communication is kept apart from compute in the model because
 * their overlap is the lesson: with room for two rows a rank, the second row marks communication
 * ('C') under the compute row, so overlap is the C under a B and a bubble is '.' with nothing under
 * it. With one row a rank, a cell with communication shows 'C' when the rank computes nothing (waits),
 * and the compute letter in lower case and reverse video when both happen (backward overlapped with
 * the all-reduce of an earlier bucket): visible in a text snapshot, under NO_COLOR, and on a
 * monochrome terminal alike. */
#include "pane.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_CELLS 1024

/* The window [t0, t1]: the last window_s seconds up to now, or (window_s <= 0) the spans of the last
 * few steps any rank reported, so a run whose steps take a millisecond is still readable. */
static bool window(const rs_view_model *vm, int world, double now, const rs_view_opts *o, double *t0, double *t1)
{
    if (o->window_s > 0) {
        *t0 = now - o->window_s;
        *t1 = now;
        return true;
    }
    int steps = o->window_steps > 0 ? o->window_steps : 3;
    int64_t top = -1;
    double hi = -INFINITY;
    for (int i = 0; i < world; i++) {
        const rs_view_rank *r = &vm->ranks[i];
        for (int k = 0; k < r->n_span; k++) {
            const rs_view_span *sp = rs_view_span_at(r, k);
            if (sp->step > top) top = sp->step;
            if (sp->t1 > hi) hi = sp->t1;
        }
        if (r->coll_t0 >= 0 && now > hi) hi = now; /* a collective still running reaches to now */
    }
    bool open = false;
    for (int i = 0; i < world; i++) open = open || vm->ranks[i].coll_t0 >= 0;
    if (top < 0 && !open) return false;
    double lo = hi;
    for (int i = 0; i < world; i++) {
        const rs_view_rank *r = &vm->ranks[i];
        for (int k = 0; k < r->n_span; k++) {
            const rs_view_span *sp = rs_view_span_at(r, k);
            if (sp->step > top - steps && sp->t0 < lo) lo = sp->t0;
        }
        if (r->coll_t0 >= 0 && r->coll_t0 < lo) lo = r->coll_t0;
    }
    if (!(hi > lo)) lo = hi - 1e-3;
    *t0 = lo;
    *t1 = hi;
    return true;
}

/* Coverage of each cell by each state (compute) and by communication, in seconds. */
static void cover(const rs_view_rank *r, double t0, double dt, int n, double now, float cov[][RS_VIEW_ST_COUNT],
                  float *comm)
{
    for (int c = 0; c < n; c++) {
        comm[c] = 0;
        for (int k = 0; k < RS_VIEW_ST_COUNT; k++) cov[c][k] = 0;
    }
    double t1 = t0 + dt * n;
    for (int k = 0; k <= r->n_span; k++) {
        rs_view_span open = {r->coll_t0, now, r->step, RS_VIEW_ST_COMM, true, -1, -1};
        const rs_view_span *sp = k < r->n_span ? rs_view_span_at(r, k) : (r->coll_t0 >= 0 ? &open : NULL);
        if (!sp || sp->t1 <= t0 || sp->t0 >= t1) continue;
        int c0 = (int)floor((sp->t0 - t0) / dt), c1 = (int)floor((sp->t1 - t0) / dt);
        if (c0 < 0) c0 = 0;
        if (c1 >= n) c1 = n - 1;
        for (int c = c0; c <= c1; c++) {
            double a = t0 + dt * c, b = a + dt;
            double ov = (sp->t1 < b ? sp->t1 : b) - (sp->t0 > a ? sp->t0 : a);
            if (ov <= 0) continue;
            if (sp->comm) comm[c] += (float)ov;
            else cov[c][sp->state] += (float)ov;
        }
    }
}

void rs_view_draw_timeline(rs_view_screen *s, const rs_view_rect *r, int lanes, const rs_view_model *vm,
                           double now, const rs_view_opts *o)
{
    /* the legend is the title: every letter the rows use (single-spaced where a frame leaves less room) */
    rs_view_rect in = rs_view_pane_frame(s, r, r->w >= 74 ? "timeline  D data  F forward  B backward  C comm  O optimizer  . idle"
                                                         : "timeline D data F forward B backward C comm O optimizer . idle",
                                         o);
    if (in.w <= 0 || in.h <= 0) return;
    rs_view_screen_clip(s, &in);
    int world = vm->world > 0 ? vm->world : vm->nranks;
    if (world > RS_VIEW_MAX_RANKS) world = RS_VIEW_MAX_RANKS;
    double t0, t1;
    const int label = 5;
    int n = in.w - label;
    if (n > MAX_CELLS) n = MAX_CELLS;
    if (n < 4 || !window(vm, world, now, o, &t0, &t1)) {
        rs_view_screen_put(s, in.x, in.y, "no phases yet", -1, rs_view_role(o, RS_VIEW_C_DIM), 0);
        rs_view_screen_clip(s, NULL);
        return;
    }
    if (lanes < 1) lanes = 1;
    if (lanes > 2) lanes = 2;
    double dt = (t1 - t0) / n;
    static float cov[MAX_CELLS][RS_VIEW_ST_COUNT]; /* drawing is single-threaded: one frame at a time */
    static float comm[MAX_CELLS];
    int rows = in.h - 1; /* the last row is the time axis */
    int y = in.y;
    for (int i = 0; i < world && y + lanes <= in.y + rows; i++) {
        const rs_view_rank *rk = &vm->ranks[i];
        cover(rk, t0, dt, n, now, cov, comm);
        rs_view_screen_printf(s, in.x, y, label, 0, RS_VIEW_A_BOLD, "r%d", i);
        if (lanes == 2) rs_view_screen_put(s, in.x + 1, y + 1, " ", label - 1, rs_view_role(o, RS_VIEW_C_DIM), 0);
        for (int c = 0; c < n; c++) {
            int best = -1;
            float bv = 0, total = 0;
            for (int k = 0; k < RS_VIEW_ST_COUNT; k++) {
                total += cov[c][k];
                if (cov[c][k] > bv) bv = cov[c][k], best = k;
            }
            bool busy = best >= 0 && best != RS_VIEW_ST_IDLE && best != RS_VIEW_ST_WAIT;
            /* a cell is "communicating" when at least half of it is (a quarter, on its own row): a
             * span that only grazes the cell edge would otherwise mark every neighbour of a transfer */
            bool has_comm = comm[c] >= (lanes == 2 ? 0.25 : 0.5) * dt || (comm[c] > 0 && total < 0.5 * dt);
            uint32_t ch = best >= 0 ? (uint32_t)rs_view_state_letter((rs_view_state)best) : ' ';
            int color = best >= 0 ? rs_view_state_color((rs_view_state)best) : 0, attr = 0;
            if (lanes == 2) {
                if (has_comm)
                    rs_view_screen_set(s, in.x + label + c, y + 1, 'C', rs_view_role(o, RS_VIEW_C_COMM),
                                       o->color ? RS_VIEW_A_REVERSE : 0);
            } else if (has_comm && !busy) {
                ch = 'C';
                color = RS_VIEW_C_COMM;
            } else if (has_comm) {
                ch = (uint32_t)tolower((int)ch);
                attr = RS_VIEW_A_REVERSE;
            }
            rs_view_screen_set(s, in.x + label + c, y, ch, rs_view_role(o, color),
                               attr | (o->color && ch != ' ' && ch != '.' ? RS_VIEW_A_REVERSE : 0));
        }
        y += lanes;
    }
    if (y < in.y + rows && world > 0) {
        int shown = lanes == 2 ? (y - in.y) / 2 : y - in.y;
        if (shown < world)
            rs_view_screen_printf(s, in.x, y, -1, rs_view_role(o, RS_VIEW_C_DIM), 0, "+%d more ranks", world - shown);
    }
    /* the axis: how far back the left edge is, and the width of one cell */
    char left[32], mid[32];
    double span = t1 - t0;
    if (span < 1) snprintf(left, sizeof left, "-%.1f ms", span * 1e3);
    else snprintf(left, sizeof left, "-%.2f s", span);
    if (dt < 1e-3) snprintf(mid, sizeof mid, "1 cell = %.0f us", dt * 1e6);
    else if (dt < 1) snprintf(mid, sizeof mid, "1 cell = %.2f ms", dt * 1e3);
    else snprintf(mid, sizeof mid, "1 cell = %.2f s", dt);
    int ay = in.y + in.h - 1, dim = rs_view_role(o, RS_VIEW_C_DIM);
    rs_view_screen_put(s, in.x + label, ay, left, -1, dim, 0);
    int ml = (int)strlen(mid);
    rs_view_screen_put(s, in.x + label + (n - ml) / 2, ay, mid, -1, dim, 0);
    /* a fixed window ends now; a fitted one at the last span reported */
    rs_view_screen_put(s, in.x + in.w - 4, ay, o->window_s > 0 ? " now" : "last", -1, dim, 0);
    rs_view_screen_clip(s, NULL);
}
