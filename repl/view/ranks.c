/* The rank panes: a box per rank on roomy screens (up to RS_VIEW_MAX_BOXES side by side), a compact
 * row per rank otherwise and for ranks past the boxes. Each shows the phase (letter and word in its
 * colour), the step, a loss sparkline, samples/s and the memory by pool as a stacked bar. */
#include "pane.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Memory bars of all ranks share one scale (the largest rank's total), so a ZeRO shard looks smaller
 * than a replica instead of every bar being full. */
static double mem_scale(const rs_view_model *vm)
{
    double m = 0;
    for (int i = 0; i < vm->nranks; i++) {
        double t = 0;
        for (int p = 0; p < RS_POOL_COUNT; p++) t += (double)vm->ranks[i].live[p];
        if (t > m) m = t;
    }
    return m;
}

static double mem_total(const rs_view_rank *r)
{
    double t = 0;
    for (int p = 0; p < RS_POOL_COUNT; p++) t += (double)r->live[p];
    return t;
}

/* The bar, w cells: each pool's letter over its share, cumulative rounding so the parts add up. */
static void mem_bar(rs_view_screen *s, int x, int y, int w, const rs_view_rank *r, double scale,
                    const rs_view_opts *o)
{
    if (w <= 0) return;
    double acc = 0;
    int done = 0;
    for (int p = 0; p < RS_POOL_COUNT && scale > 0; p++) {
        acc += (double)r->live[p];
        int end = (int)lround(acc / scale * w);
        if (end > w) end = w;
        if (r->live[p] > 0 && end <= done && done < w) end = done + 1; /* a pool in use never vanishes */
        for (; done < end; done++)
            rs_view_screen_set(s, x + done, y, (uint32_t)rs_view_pool_letter(p),
                               rs_view_role(o, RS_VIEW_C_POOL0 + p), o->color ? RS_VIEW_A_REVERSE : 0);
    }
    for (; done < w; done++) rs_view_screen_set(s, x + done, y, o->utf8 ? 0x00B7 : ' ', rs_view_role(o, RS_VIEW_C_DIM), 0);
}

/* The last w losses, oldest left; min..max of those shown mapped onto the glyphs. */
static void sparkline(rs_view_screen *s, int x, int y, int w, const rs_view_rank *r, const rs_view_opts *o)
{
    static const uint32_t blocks[8] = {0x2581, 0x2582, 0x2583, 0x2584, 0x2585, 0x2586, 0x2587, 0x2588};
    static const char ascii[5] = {'_', '.', '-', '=', '#'};
    int n = r->n_loss < w ? r->n_loss : w;
    float lo = INFINITY, hi = -INFINITY, v;
    for (int i = 0; i < n; i++)
        if (rs_view_rank_loss(r, i, &v) && isfinite(v)) {
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    int levels = o->utf8 ? 8 : 5;
    for (int i = 0; i < n; i++) {
        rs_view_rank_loss(r, n - 1 - i, &v);
        uint32_t g;
        if (!isfinite(v)) g = '!';
        else {
            int k = hi > lo ? (int)lroundf((v - lo) / (hi - lo) * (float)(levels - 1)) : levels / 2;
            g = o->utf8 ? blocks[k] : (uint32_t)ascii[k];
        }
        rs_view_screen_set(s, x + i, y, g, rs_view_role(o, RS_VIEW_C_FORWARD), 0);
    }
}

static void state_word(rs_view_screen *s, int x, int y, int w, const rs_view_rank *r, const rs_view_opts *o)
{
    int c = rs_view_role(o, rs_view_state_color(r->state));
    rs_view_screen_set(s, x, y, (uint32_t)rs_view_state_letter(r->state), c, RS_VIEW_A_BOLD | RS_VIEW_A_REVERSE);
    rs_view_screen_put(s, x + 2, y, rs_view_state_word(r->state), w - 2, c, RS_VIEW_A_BOLD);
}

static void rank_box(rs_view_screen *s, const rs_view_rect *b, const rs_view_model *vm, int rank, double scale,
                     const rs_view_opts *o)
{
    const rs_view_rank *r = &vm->ranks[rank];
    char t[24], by[16];
    snprintf(t, sizeof t, "rank %d", rank);
    rs_view_screen_clip(s, b);
    rs_view_screen_box(s, b, t, !o->utf8, rs_view_role(o, RS_VIEW_C_DIM));
    rs_view_rect in = {b->x + 1, b->y + 1, b->w - 2, b->h - 2};
    rs_view_screen_clip(s, &in);
    int x = in.x, w = in.w, y = in.y, ln = 1; /* ln: the next free line */
    bool train = rs_view_training(vm);
    state_word(s, x, y, w, r, o);
    char st[24];
    int sl = snprintf(st, sizeof st, "step %lld", (long long)r->step);
    if (train && w >= sl + 12) rs_view_screen_put(s, x + w - sl, y, st, -1, 0, 0);
    if (vm->coll.any && r->coll_step > 0 && ln + 1 < in.h) { /* where this rank is in the collective */
        rs_view_screen_printf(s, x, y + ln++, w, 0, RS_VIEW_A_BOLD, "step %d of %d", r->coll_step, r->coll_steps);
        if (r->coll_peer >= 0)
            rs_view_screen_printf(s, x, y + ln++, w, rs_view_role(o, RS_VIEW_C_COMM), 0, "c%d -> r%d  %s",
                                  r->coll_chunk, r->coll_peer, rs_view_fmt_bytes(by, (double)r->coll_step_bytes));
        else
            rs_view_screen_printf(s, x, y + ln++, w, 0, 0, "%s c%d", rs_view_local_step_word(vm->coll.op),
                                  r->coll_chunk);
    }
    if (train) {
        if (ln < in.h) {
            if (r->n_loss) rs_view_screen_printf(s, x, y + ln, w, 0, 0, "loss %.4f  ep %d", r->loss, r->epoch + 1);
            else rs_view_screen_put(s, x, y + ln, "loss -", w, rs_view_role(o, RS_VIEW_C_DIM), 0);
            ln++;
        }
        if (ln < in.h) sparkline(s, x, y + ln++, w, r, o);
        if (ln < in.h) rs_view_screen_printf(s, x, y + ln++, w, 0, 0, "%.0f samples/s", r->sps);
    }
    if (ln < in.h && r->has_mem) {
        int bl = w - 11 > 4 ? w - 11 : w;
        mem_bar(s, x, y + ln, bl, r, scale, o);
        if (bl < w) rs_view_screen_printf(s, x + bl + 1, y + ln, -1, 0, RS_VIEW_A_BOLD, "%s",
                                          rs_view_fmt_bytes(by, mem_total(r)));
        ln++;
    }
    if (ln < in.h && r->has_mem) { /* the legend with each pool's bytes, the pools in use, as many as fit */
        int cx = x;
        for (int p = 0; p < RS_POOL_COUNT; p++) {
            if (!r->live[p]) continue;
            char item[24];
            int il = snprintf(item, sizeof item, "%c %s", rs_view_pool_letter(p), rs_view_fmt_bytes(by, (double)r->live[p]));
            if (cx + il > x + w) break;
            rs_view_screen_set(s, cx, y + ln, (uint32_t)item[0], rs_view_role(o, RS_VIEW_C_POOL0 + p),
                               o->color ? RS_VIEW_A_REVERSE : RS_VIEW_A_BOLD);
            rs_view_screen_put(s, cx + 1, y + ln, item + 1, -1, 0, 0);
            cx += il + 1;
        }
    }
    rs_view_screen_clip(s, NULL);
}

/* "r0  B backward   step     5  loss 2.2181 ▇▆▅▃▂  1697/s  PPPGGGOOOOA·· 2.30 MiB" */
static void rank_row(rs_view_screen *s, int x, int y, int w, const rs_view_model *vm, int rank, double scale,
                     const rs_view_opts *o)
{
    const rs_view_rank *r = &vm->ranks[rank];
    int x1 = x + w;
    x += rs_view_screen_printf(s, x, y, x1 - x, 0, RS_VIEW_A_BOLD, "r%-3d", rank);
    state_word(s, x, y, 11, r, o);
    x += 12;
    if (!rs_view_training(vm)) { /* a collective run: where the rank is in the algorithm instead */
        char by[16];
        if (r->coll_step > 0 && r->coll_peer >= 0)
            x += rs_view_screen_printf(s, x, y, x1 - x, 0, 0, "step %d of %d  c%d -> r%d  %s ", r->coll_step,
                                       r->coll_steps, r->coll_chunk, r->coll_peer,
                                       rs_view_fmt_bytes(by, (double)r->coll_step_bytes));
        else if (r->coll_step > 0)
            x += rs_view_screen_printf(s, x, y, x1 - x, 0, 0, "step %d of %d  %s c%d ", r->coll_step,
                                       r->coll_steps, rs_view_local_step_word(vm->coll.op), r->coll_chunk);
        if (r->has_mem && x1 - x >= 14) {
            int bl = x1 - x - 11;
            mem_bar(s, x, y, bl, r, scale, o);
            rs_view_screen_printf(s, x + bl + 1, y, -1, 0, RS_VIEW_A_BOLD, "%s", rs_view_fmt_bytes(by, mem_total(r)));
        }
        return;
    }
    x += rs_view_screen_printf(s, x, y, x1 - x, 0, 0, "%6lld ", (long long)r->step);
    if (r->n_loss) x += rs_view_screen_printf(s, x, y, x1 - x, 0, 0, "%8.4f ", r->loss);
    else x += rs_view_screen_put(s, x, y, "       - ", x1 - x, 0, 0);
    int rest = x1 - x;
    int spark = rest >= 50 ? 12 : rest >= 36 ? 8 : 0;
    if (spark) {
        sparkline(s, x, y, spark, r, o);
        x += spark + 1;
    }
    if (x1 - x >= 9) x += rs_view_screen_printf(s, x, y, x1 - x, 0, 0, "%7.0f/s ", r->sps);
    if (r->has_mem && x1 - x >= 14) {
        char by[16];
        int bl = x1 - x - 11;
        mem_bar(s, x, y, bl, r, scale, o);
        rs_view_screen_printf(s, x + bl + 1, y, -1, 0, RS_VIEW_A_BOLD, "%s", rs_view_fmt_bytes(by, mem_total(r)));
    }
}

void rs_view_draw_ranks(rs_view_screen *s, const rs_view_layout *l, const rs_view_model *vm, const rs_view_opts *o)
{
    const rs_view_rect *r = &l->ranks;
    if (r->w <= 0 || r->h <= 0) return;
    int world = vm->world > 0 ? vm->world : vm->nranks;
    if (world > RS_VIEW_MAX_RANKS) world = RS_VIEW_MAX_RANKS;
    double scale = mem_scale(vm);
    int y = r->y;
    int first_row = 0;
    if (l->boxes > 0) {
        int bw = r->w / l->boxes;
        for (int i = 0; i < l->boxes && i < world; i++) {
            rs_view_rect b = {r->x + i * bw, y, i == l->boxes - 1 ? r->w - i * bw : bw, l->box_h};
            rank_box(s, &b, vm, i, scale, o);
        }
        y += l->box_h;
        rs_view_screen_clip(s, r);
        bool mem = false;
        for (int i = 0; i < world; i++) mem = mem || vm->ranks[i].has_mem;
        rs_view_screen_put(s, r->x, y++,
                           mem ? (r->w >= 100 ? " memory: P params  G grads  O optimizer  A activations  C comm  "
                                                "S scratch  H host (offload)"
                                              : " mem: P params G grads O optim A activ C comm S scratch H host")
                               : " ? starting  D data  F forward  B backward  C comm  O optimizer  . idle  = done",
                           -1, rs_view_role(o, RS_VIEW_C_DIM), 0);
        rs_view_screen_clip(s, NULL);
        first_row = l->boxes;
        if (first_row >= world) return;
    }
    rs_view_screen_clip(s, r);
    /* the column heads double as the memory legend */
    rs_view_rect head = {r->x, y, r->w, 1};
    rs_view_screen_fill(s, &head, ' ', rs_view_role(o, RS_VIEW_C_TITLE), RS_VIEW_A_REVERSE);
    bool train = rs_view_training(vm);
    rs_view_screen_put(s, r->x, y,
                       !train ? " rank phase      algorithm step, chunk sent -> to whom, bytes"
                       : r->w >= 100 ? " rank phase          step     loss  memory: P params G grads O optimizer "
                                     "A activations C comm S scratch H host"
                                   : " rank phase          step     loss  P par G grd O opt A act C com S scr H host",
                       -1, rs_view_role(o, RS_VIEW_C_TITLE), RS_VIEW_A_REVERSE | RS_VIEW_A_BOLD);
    y++;
    int shown = 0;
    for (int i = first_row; i < world && shown < l->rows; i++, shown++, y++)
        rank_row(s, r->x, y, r->w, vm, i, scale, o);
    if (first_row + shown < world)
        rs_view_screen_printf(s, r->x, y, r->w, rs_view_role(o, RS_VIEW_C_DIM), 0, "     +%d more ranks",
                              world - first_row - shown);
    rs_view_screen_clip(s, NULL);
}
