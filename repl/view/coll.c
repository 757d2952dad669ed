/* The collective pane: the ranks on a ring (or, for tree algorithms, in a binomial tree) with the
 * chunks of the current algorithm step on the way between them, step k of K, bytes moved and the
 * bandwidths once the operation ended. A training run's strategy collectives (@comm) carry no steps:
 * the pane lists each rank's last one with its size, time and bandwidth instead, or, when a step has
 * several numbered ones (tensor parallel's all-reduces in every block's forward and backward, DDP's
 * buckets), how many the step has had so far, their numbers, bytes and time. */
#include "pane.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct pos { double x, y; } pos;

/* Where rank i of n sits inside the area (ring: clockwise from the top; tree: rows by depth, the
 * depth of r in a binomial tree rooted at 0 being its number of set bits). */
static pos place(int i, int n, rs_pg_algo algo, const rs_view_rect *a)
{
    pos p;
    if (algo == RS_ALGO_TREE) {
        int depth = __builtin_popcount((unsigned)i), maxd = 0, idx = 0, cnt = 0;
        for (int k = 0; k < n; k++) {
            int d = __builtin_popcount((unsigned)k);
            if (d > maxd) maxd = d;
            if (d == depth) {
                if (k < i) idx++;
                cnt++;
            }
        }
        p.x = a->x + (a->w - 2) * (idx + 0.5) / cnt;
        p.y = a->y + (maxd ? (a->h - 1) * (double)depth / maxd : 0);
        return p;
    }
    double th = -M_PI / 2 + 2 * M_PI * i / (n > 0 ? n : 1);
    double rx = (a->w - 4) / 2.0, ry = (a->h - 1) / 2.0;
    p.x = a->x + 1 + rx + rx * cos(th);
    p.y = a->y + ry + ry * sin(th);
    return p;
}

/* An arrow glyph for the direction (dx, dy) in cells (a cell is about twice as high as wide). */
static uint32_t arrow(double dx, double dy, bool utf8)
{
    static const uint32_t u[8] = {0x2192, 0x2198, 0x2193, 0x2199, 0x2190, 0x2196, 0x2191, 0x2197};
    static const char a[8] = {'>', '\\', 'v', '/', '<', '\\', '^', '/'};
    double ang = atan2(dy * 2, dx);
    int k = (int)lround(ang / (M_PI / 4));
    k = ((k % 8) + 8) % 8;
    return utf8 ? u[k] : (uint32_t)a[k];
}

static void draw_ring(rs_view_screen *s, const rs_view_rect *a, const rs_view_model *vm, int world,
                      const rs_view_opts *o)
{
    if (a->w < 8 || a->h < 3 || world < 1) return;
    rs_pg_algo algo = vm->coll.algo;
    /* the moves first, so the rank labels stay readable where they meet */
    for (int i = 0; i < world; i++) {
        const rs_view_rank *r = &vm->ranks[i];
        if (r->coll_step <= 0 || r->coll_peer < 0 || r->coll_peer >= world || r->coll_peer == i) continue;
        pos p = place(i, world, algo, a), q = place(r->coll_peer, world, algo, a);
        /* a third of the way from the sender: two ranks sending to each other do not overwrite */
        double mx = p.x + (q.x - p.x) * 0.4, my = p.y + (q.y - p.y) * 0.4;
        char lab[16];
        int n = snprintf(lab, sizeof lab, "c%d", r->coll_chunk);
        int x = (int)lround(mx) - n / 2, y = (int)lround(my);
        int c = rs_view_role(o, RS_VIEW_C_COMM);
        rs_view_screen_put(s, x, y, lab, -1, c, RS_VIEW_A_BOLD);
        rs_view_screen_set(s, x + n, y, arrow(q.x - p.x, q.y - p.y, o->utf8), c, RS_VIEW_A_BOLD);
    }
    for (int i = 0; i < world; i++) {
        pos p = place(i, world, algo, a);
        char lab[8];
        int n = snprintf(lab, sizeof lab, "r%d", i);
        const rs_view_rank *r = &vm->ranks[i];
        int attr = RS_VIEW_A_BOLD | (r->state == RS_VIEW_ST_COMM ? RS_VIEW_A_REVERSE : 0);
        rs_view_screen_put(s, (int)lround(p.x) - n / 2, (int)lround(p.y), lab, -1,
                           rs_view_role(o, rs_view_state_color(r->state)), attr);
    }
}

/* "r0 -c0-> r1  256 KiB", one line per rank sending this step. */
static void draw_moves(rs_view_screen *s, const rs_view_rect *a, const rs_view_model *vm, int world,
                       const rs_view_opts *o)
{
    int y = a->y;
    char by[16];
    for (int i = 0; i < world && y < a->y + a->h; i++) {
        const rs_view_rank *r = &vm->ranks[i];
        if (r->coll_step <= 0) continue;
        if (r->coll_peer < 0)
            rs_view_screen_printf(s, a->x, y++, a->w, 0, 0, "r%d %s c%d  %s", i, rs_view_local_step_word(vm->coll.op),
                                  r->coll_chunk, rs_view_fmt_bytes(by, (double)r->coll_step_bytes));
        else
            rs_view_screen_printf(s, a->x, y++, a->w, rs_view_role(o, RS_VIEW_C_COMM), 0, "r%d -c%d-> r%d  %s", i,
                                  r->coll_chunk, r->coll_peer, rs_view_fmt_bytes(by, (double)r->coll_step_bytes));
    }
}

/* The numbers of a step's collectives: "#0-3" when they run without a gap, else the list ("#0,2,4"),
 * so the count beside them and the numbers agree; a list too long for a pane, as "#0-40 (12 numbers)". */
static int comm_numbers(rs_view_screen *s, int x, int y, const rs_view_rank *r)
{
    int span = r->comm_hi - r->comm_lo + 1, seen = __builtin_popcountll(r->comm_set);
    if (r->comm_hi >= 64 || seen == span) return rs_view_screen_printf(s, x, y, -1, 0, 0, " #%d-%d", r->comm_lo, r->comm_hi);
    char buf[256];
    int k = snprintf(buf, sizeof buf, " #");
    for (int i = r->comm_lo; i <= r->comm_hi; i++)
        if (r->comm_set >> i & 1) k += snprintf(buf + k, sizeof buf - (size_t)k, k > 2 ? ",%d" : "%d", i);
    if (k > 16) snprintf(buf, sizeof buf, " #%d-%d (%d numbers)", r->comm_lo, r->comm_hi, seen);
    return rs_view_screen_put(s, x, y, buf, -1, 0, 0);
}

static void draw_strategy_comm(rs_view_screen *s, const rs_view_rect *in, const rs_view_model *vm, int world,
                               const rs_view_opts *o)
{
    int y = in->y;
    bool any = false;
    char by[16];
    for (int i = 0; i < world && y < in->y + in->h; i++) {
        const rs_view_rank *r = &vm->ranks[i];
        if (!r->comm_op[0]) continue;
        any = true;
        double dt = r->comm_t1 - r->comm_t0;
        int x = in->x;
        x += rs_view_screen_printf(s, x, y, -1, rs_view_role(o, RS_VIEW_C_COMM), RS_VIEW_A_BOLD, "r%d %s", i,
                                   r->comm_n > 1 ? r->comm_nop : r->comm_op);
        if (r->comm_n > 1) {
            /* several numbered ones in a step (tensor parallel's per-block all-reduces, DDP's buckets):
             * how many the step has had, their numbers, their bytes and time together */
            x += rs_view_screen_printf(s, x, y, -1, 0, RS_VIEW_A_BOLD, " x%d", r->comm_n);
            x += comm_numbers(s, x, y, r);
            rs_view_screen_printf(s, x, y, -1, 0, 0, in->w < 50 ? " %s %.2fms" : "  %s  %.2f ms in step %lld",
                                  rs_view_fmt_bytes(by, (double)r->comm_sum_bytes), r->comm_sum_s * 1e3,
                                  (long long)r->comm_step);
            y++;
            if (r->comm_index >= 0 || y >= in->y + in->h) continue;
            /* and the last one when it was another (a gather to rank 0 for evaluation) */
            x = in->x + rs_view_screen_printf(s, in->x, y, -1, rs_view_role(o, RS_VIEW_C_COMM), RS_VIEW_A_BOLD,
                                              "r%d %s", i, r->comm_op);
        }
        /* the bucket (DDP) or unit (FSDP) the collective carried */
        if (r->comm_index >= 0) x += rs_view_screen_printf(s, x, y, -1, 0, 0, " #%d", r->comm_index);
        rs_view_screen_printf(s, x, y, -1, 0, 0, in->w < 50 ? " %s %.2fms %.2fGB/s" : "  %s  %.2f ms  %.2f GB/s",
                              rs_view_fmt_bytes(by, (double)r->comm_bytes), dt * 1e3,
                              dt > 0 ? (double)r->comm_bytes / dt / 1e9 : 0.0);
        y++;
    }
    if (!any) rs_view_screen_put(s, in->x, in->y, "no collective yet", -1, rs_view_role(o, RS_VIEW_C_DIM), 0);
}

/* `bench`: the rows so far as a table that fits the pane (newest at the bottom), then the size the
 * ranks are at. The REPL prints nccl-tests' full table when the view closes. */
static void draw_bench(rs_view_screen *s, const rs_view_rect *in, const rs_view_model *vm, const rs_view_opts *o)
{
    bool wrong_col = in->w >= 41;
    int title = rs_view_role(o, RS_VIEW_C_TITLE);
    rs_view_screen_printf(s, in->x, in->y, in->w, title, RS_VIEW_A_BOLD, "%9s %10s %6s %6s%s", "size", "time us",
                          "algbw", "busbw", wrong_col ? " #wrong" : "");
    bool more = vm->steps_total <= 0 || vm->bench_rows < vm->steps_total;
    int room = in->h - 1 - (more ? 1 : 0);
    int n = vm->n_bench < room ? vm->n_bench : room;
    int y = in->y + 1;
    char by[16];
    for (int i = n - 1; i >= 0; i--, y++) {
        const rs_view_bench_row *b = rs_view_bench_at(vm, i);
        int x = in->x;
        x += rs_view_screen_printf(s, x, y, in->w, 0, 0, "%9s %10.1f %6.2f ", rs_view_fmt_bytes(by, (double)b->bytes),
                                   b->time_us, b->algbw);
        x += rs_view_screen_printf(s, x, y, in->x + in->w - x, rs_view_role(o, RS_VIEW_C_COMM), RS_VIEW_A_BOLD, "%6.2f",
                                   b->busbw);
        if (wrong_col)
            rs_view_screen_printf(s, x, y, in->x + in->w - x, b->wrong ? rs_view_role(o, RS_VIEW_C_WARN) : 0, 0,
                                  " %6llu", (unsigned long long)b->wrong);
    }
    if (more && y < in->y + in->h) {
        const rs_view_bench_row *b = rs_view_bench_at(vm, 0);
        if (b) rs_view_screen_printf(s, in->x, y, in->w, rs_view_role(o, RS_VIEW_C_DIM), 0, "%9s running",
                                     rs_view_fmt_bytes(by, 2.0 * (double)b->bytes));
        else rs_view_screen_put(s, in->x, y, "  first size running", in->w, rs_view_role(o, RS_VIEW_C_DIM), 0);
    }
    if (!more && y < in->y + in->h)
        rs_view_screen_put(s, in->x, y, "  every size done", in->w, rs_view_role(o, RS_VIEW_C_DONE), 0);
}

void rs_view_draw_coll(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, const rs_view_opts *o)
{
    bool bench = !strcmp(vm->kind, "bench") || vm->bench_rows > 0;
    rs_view_rect in = rs_view_pane_frame(s, r, bench ? "bench (GB/s)" : "collective", o);
    if (in.w <= 0 || in.h <= 0) return;
    rs_view_screen_clip(s, &in);
    if (bench) {
        draw_bench(s, &in, vm, o);
        rs_view_screen_clip(s, NULL);
        return;
    }
    int world = vm->world > 0 ? vm->world : vm->nranks;
    if (world > RS_VIEW_MAX_RANKS) world = RS_VIEW_MAX_RANKS;
    const rs_view_coll *c = &vm->coll;
    if (!c->any) {
        draw_strategy_comm(s, &in, vm, world, o);
        rs_view_screen_clip(s, NULL);
        return;
    }
    int kmin, kmax;
    rs_view_coll_progress(vm, &kmin, &kmax);
    char by[16], mv[16];
    int y = in.y, x = in.x;
    x += rs_view_screen_printf(s, x, y, -1, rs_view_role(o, RS_VIEW_C_COMM), RS_VIEW_A_BOLD, "%s %s #%llu",
                               rs_pg_op_name(c->op), rs_pg_algo_name(c->algo), (unsigned long long)c->coll);
    if (!c->active) rs_view_screen_put(s, x, y, "  done", -1, rs_view_role(o, RS_VIEW_C_DONE), 0);
    else if (!c->steps) rs_view_screen_put(s, x, y, "  running", -1, 0, 0);
    else if (kmin == kmax) rs_view_screen_printf(s, x, y, -1, 0, RS_VIEW_A_BOLD, "  step %d of %d", kmax, c->steps);
    else rs_view_screen_printf(s, x, y, -1, 0, RS_VIEW_A_BOLD, "  step %d-%d of %d", kmin, kmax, c->steps);
    y++;
    if (y < in.y + in.h)
        rs_view_screen_printf(s, in.x, y++, -1, 0, 0, "msg %s  moved %s", rs_view_fmt_bytes(by, (double)c->msg_bytes),
                              rs_view_fmt_bytes(mv, (double)c->moved));
    if (y < in.y + in.h) {
        if (!c->active && c->algbw > 0) { /* step=1: the waits for keys are not the collective's time */
            /* the slowest rank's own time, as the REPL prints it when the run ends (same unit and form) */
            char when[24];
            if (c->slowest < 1e-3) snprintf(when, sizeof when, "%.1f us", c->slowest * 1e6);
            else snprintf(when, sizeof when, "%.3f ms", c->slowest * 1e3);
            /* step=1: the view knows when each key was set, not when each rank woke to it (a rank
             * subtracts that too, so its printed time is the smaller): said, not hidden */
            rs_view_screen_printf(s, in.x, y++, -1, 0, 0, "%s (slowest rank%s)", when, c->held > 0 ? " + wake-ups" : "");
            /* narrow (the 80x24 layout's 40 columns): one unit for both, so the line keeps it */
            if (y < in.y + in.h)
                rs_view_screen_printf(s, in.x, y++, -1, 0, 0,
                                      in.w < 44 ? "algbw %.3f busbw %.3f GB/s" : "algbw %.3f GB/s  busbw %.3f GB/s",
                                      c->algbw, c->busbw);
        } else
            rs_view_screen_printf(s, in.x, y++, -1, rs_view_role(o, RS_VIEW_C_DIM), 0, "%d of %d ranks ended",
                                  c->ended, world);
    }
    rs_view_rect area = {in.x, y, in.w, in.y + in.h - y};
    if (area.w >= 56 && world <= area.h) { /* moves listed beside the ring */
        rs_view_rect list = {in.x + in.w - 24, y, 24, area.h};
        area.w -= 25;
        draw_moves(s, &list, vm, world, o);
    }
    draw_ring(s, &area, vm, world, o);
    rs_view_screen_clip(s, NULL);
}
