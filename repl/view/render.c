/* The layout and the frame of the dashboard (render.h), with its two simplest panes: the header and
 * the log. The rank, collective and timeline panes have a file each (ranks.c, coll.c, timeline.c). */
#include "pane.h"
#include "pipe_pane.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

rs_view_opts rs_view_opts_detect(const char *term, const char *no_color, bool utf8_locale)
{
    bool dumb = !term || !*term || !strcmp(term, "dumb");
    /* no-color.org: NO_COLOR present and not empty disables colour */
    rs_view_opts o = {.color = !dumb && !(no_color && *no_color), .utf8 = utf8_locale && !dumb,
                      .window_s = 0, .window_steps = 3};
    return o;
}

const char *rs_view_fmt_bytes(char out[16], double b)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    if (!(b >= 0)) b = 0;
    while (b >= 1024 && i < 4) b /= 1024, i++;
    if (i == 0) snprintf(out, 16, "%.0f B", b);
    else snprintf(out, 16, b < 10 ? "%.2f %s" : b < 100 ? "%.1f %s" : "%.0f %s", b, u[i]);
    return out;
}

char rs_view_pool_letter(int pool)
{
    static const char l[] = "PGOACSH"; /* params grads optimizer activations comm scratch host(offload) */
    return pool >= 0 && pool < (int)sizeof l - 1 ? l[pool] : '?';
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* Frames cost two rows and two columns a pane: worth it from 120x40, not at 80x24. */
static bool roomy(const rs_view_screen *s) { return s->w >= 120 && s->h >= 40; }

rs_view_rect rs_view_pane_frame(rs_view_screen *s, const rs_view_rect *r, const char *title, const rs_view_opts *o)
{
    if (r->w <= 0 || r->h <= 0) return (rs_view_rect){r->x, r->y, 0, 0};
    if (roomy(s) && r->w >= 4 && r->h >= 3) {
        rs_view_screen_box(s, r, title, !o->utf8, rs_view_role(o, RS_VIEW_C_DIM));
        return (rs_view_rect){r->x + 1, r->y + 1, r->w - 2, r->h - 2};
    }
    rs_view_rect t = {r->x, r->y, r->w, 1};
    rs_view_screen_fill(s, &t, ' ', rs_view_role(o, RS_VIEW_C_TITLE), RS_VIEW_A_REVERSE);
    rs_view_screen_printf(s, r->x, r->y, r->w, rs_view_role(o, RS_VIEW_C_TITLE), RS_VIEW_A_REVERSE | RS_VIEW_A_BOLD,
                          " %s", title);
    return (rs_view_rect){r->x, r->y + 1, r->w, r->h - 1};
}

rs_view_layout rs_view_layout_for(int w, int h, int world)
{
    rs_view_layout l = {0};
    if (w < RS_VIEW_MIN_W || h < RS_VIEW_MIN_H) {
        l.too_small = true;
        return l;
    }
    world = imax(1, imin(world, RS_VIEW_MAX_RANKS));
    bool framed = w >= 120 && h >= 40;
    l.header = (rs_view_rect){0, 0, w, 2};
    int y = 2;
    int nb = imin(world, RS_VIEW_MAX_BOXES);
    if (h >= 40 && w / nb >= 20) {
        /* boxes for the first eight ranks; the others a row each, as many as leave half the screen */
        l.boxes = nb;
        l.box_h = 8;
        int extra = world - nb;
        int cap = imax(0, (h - y - l.box_h) / 2 - 2);
        l.rows = imin(extra, cap);
        int more = extra > l.rows ? 1 : 0;
        /* under the boxes a legend row: the boxes spell the phases out but not the memory letters */
        l.ranks = (rs_view_rect){0, y, w, l.box_h + 1 + (extra > 0 ? 1 + l.rows + more : 0)};
    } else {
        int cap = imax(1, h / 4 - 1);
        l.rows = imin(world, cap);
        if (world > l.rows && l.rows > 1) l.rows--; /* room for the "+N more" line */
        l.ranks = (rs_view_rect){0, y, w, 1 + l.rows + (world > l.rows ? 1 : 0)};
    }
    y += l.ranks.h;
    int rem = h - y, fr = framed ? 2 : 1; /* rows a frame or a title row costs */
    if (w >= 120) {
        int mid = rem * 3 / 5;
        l.lanes = mid - fr - 1 >= 2 * world ? 2 : 1;
        l.coll = (rs_view_rect){0, y, w * 2 / 5, mid};
        l.timeline = (rs_view_rect){l.coll.w, y, w - l.coll.w, mid};
        l.log = (rs_view_rect){0, y + mid, w, rem - mid};
    } else {
        l.lanes = fr + 1 + 2 * world <= rem / 2 ? 2 : 1;
        int th = imin(fr + 1 + l.lanes * world, rem / 2);
        l.timeline = (rs_view_rect){0, y, w, th};
        l.coll = (rs_view_rect){0, y + th, w / 2, rem - th};
        l.log = (rs_view_rect){w / 2, y + th, w - w / 2, rem - th};
    }
    return l;
}

static void fmt_secs(char out[24], double s)
{
    if (!(s >= 0)) s = 0;
    if (s < 10) snprintf(out, 24, "%.2fs", s);
    else if (s < 60) snprintf(out, 24, "%.1fs", s);
    else if (s < 3600) snprintf(out, 24, "%d:%02d", (int)s / 60, (int)s % 60);
    else snprintf(out, 24, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
}

/* Time left, to the second: a countdown, not a measurement. */
static void fmt_eta(char out[24], double s)
{
    if (!(s >= 0)) s = 0;
    if (s < 60) snprintf(out, 24, "%.0fs", ceil(s));
    else if (s < 3600) snprintf(out, 24, "%d:%02d", (int)s / 60, (int)s % 60);
    else snprintf(out, 24, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
}

void rs_view_draw_header(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, double now,
                         const rs_view_opts *o)
{
    if (r->h < 1) return;
    rs_view_screen_clip(s, r);
    int title = rs_view_role(o, RS_VIEW_C_TITLE);
    const char *dot = o->utf8 ? " \xc2\xb7 " : " | ";
    int world = vm->world > 0 ? vm->world : vm->nranks;
    int x = r->x;
    x += rs_view_screen_put(s, x, r->y, "ringside", -1, title, RS_VIEW_A_BOLD);
    x += rs_view_screen_printf(s, x, r->y, -1, 0, RS_VIEW_A_BOLD, "%s%s%s%s", dot, vm->kind[0] ? vm->kind : "run",
                               vm->run_id[0] ? " " : "", vm->run_id);
    if (vm->mode[0]) x += rs_view_screen_printf(s, x, r->y, -1, 0, 0, "%smode %s", dot, vm->mode);
    if (vm->backend[0]) x += rs_view_screen_printf(s, x, r->y, -1, 0, 0, "%sbackend %s", dot, vm->backend);
    x += rs_view_screen_printf(s, x, r->y, -1, 0, 0, "%sworld %d", dot, world);

    char el[24], eta[24], right[64];
    /* A finished run's clock stops at its last event, so the live view's final frame and a replay's
     * (whose `now` is that event) agree to the digit. */
    double until = rs_view_all_done(vm) && vm->t_last > 0 ? vm->t_last : now;
    double elapsed = vm->t_start >= 0 ? until - vm->t_start : 0;
    fmt_secs(el, elapsed);
    int64_t step = rs_view_min_step(vm);
    /* "done" once every rank said so; a rank not heard from yet is starting, not done */
    if (rs_view_all_done(vm)) snprintf(right, sizeof right, "elapsed %s  done", el);
    else snprintf(right, sizeof right, "elapsed %s", el);
    int rl = (int)strlen(right);
    bool right_done = x + 2 + rl <= r->x + r->w; /* else it goes to the end of the second line */
    if (right_done) rs_view_screen_put(s, r->x + r->w - rl, r->y, right, -1, 0, 0);

    if (r->h < 2) goto out;
    x = r->x;
    double sps = 0, loss = 0;
    int nloss = 0, epoch = 0, seen = 0;
    for (int i = 0; i < vm->nranks; i++) seen += vm->ranks[i].seen;
    /* ranks take seconds to start on a loaded machine: say how many have (torchrun's count) */
    if (seen < world && !rs_view_all_done(vm))
        x += rs_view_screen_printf(s, x, r->y + 1, -1, rs_view_role(o, RS_VIEW_C_DIM), RS_VIEW_A_BOLD,
                                   "starting ranks %d/%d  ", seen, world);
    for (int i = 0; i < vm->nranks; i++) {
        const rs_view_rank *k = &vm->ranks[i];
        if (!k->seen) continue;
        sps += k->sps;
        if (k->n_loss) loss += k->loss, nloss++;
        if (k->epoch > epoch) epoch = k->epoch;
    }
    if (rs_view_training(vm)) {
        if (vm->steps_total > 0)
            x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "step %lld/%lld  ", (long long)step,
                                       (long long)vm->steps_total);
        else x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "step %lld  ", (long long)step);
        if (vm->epochs > 0) x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "epoch %d/%d  ", epoch + 1, vm->epochs);
        else x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "epoch %d  ", epoch + 1);
        /* the time left at the pace so far (start-up included, so it errs long early on) */
        if (vm->steps_total > 0 && step > 0 && step < vm->steps_total && !rs_view_all_done(vm)) {
            fmt_eta(eta, elapsed / (double)step * (double)(vm->steps_total - step));
            x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, RS_VIEW_A_BOLD, "ETA %s  ", eta);
        }
        if (nloss) x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "loss %.4g  ", loss / nloss);
        /* each rank reports the samples it read itself, so the run's rate is their sum */
        if (sps > 0) x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "%.0f samples/s  ", sps);
        if (vm->eval_epoch >= 0)
            x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "eval acc %.1f%%  ", 100 * vm->eval_acc);
    }
    if (!strcmp(vm->kind, "bench") || vm->bench_rows) { /* bench: sizes done of all, the last one's figures */
        const rs_view_bench_row *b = rs_view_bench_at(vm, 0);
        char by[16];
        x += rs_view_screen_printf(s, x, r->y + 1, -1, rs_view_role(o, RS_VIEW_C_COMM), 0, "bench %s",
                                   vm->bench_rows ? rs_pg_op_name(vm->bench_op) : "");
        if (vm->steps_total > 0)
            x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "  size %d of %lld", vm->bench_rows,
                                       (long long)vm->steps_total);
        else x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "  %d sizes", vm->bench_rows);
        if (b)
            x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "  last %s: busbw %.2f GB/s",
                                       rs_view_fmt_bytes(by, (double)b->bytes), b->busbw);
    }
    const rs_view_coll *c = vm->coll.any ? &vm->coll : NULL;
    if (c) {
        int kmin, kmax;
        char by[16];
        rs_view_coll_progress(vm, &kmin, &kmax);
        x += rs_view_screen_printf(s, x, r->y + 1, -1, rs_view_role(o, RS_VIEW_C_COMM), 0, "%s #%llu %s",
                                   rs_pg_op_name(c->op), (unsigned long long)c->coll, c->active ? "running" : "done");
        if (c->active && c->steps && kmin == kmax)
            x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, " step %d of %d", kmax, c->steps);
        else if (c->active && c->steps)
            x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, " step %d-%d of %d", kmin, kmax, c->steps);
        x += rs_view_screen_printf(s, x, r->y + 1, -1, 0, 0, "  moved %s", rs_view_fmt_bytes(by, (double)c->moved));
    }
    if (!right_done && x + 2 + rl <= r->x + r->w) rs_view_screen_put(s, r->x + r->w - rl, r->y + 1, right, -1, 0, 0);
out:
    rs_view_screen_clip(s, NULL);
}

int rs_view_put_cut(rs_view_screen *s, int x, int y, const char *text, int max, int color, int attr,
                    const rs_view_opts *o)
{
    int cells = 0; /* a cell per code point (the screen's cells are one column each) */
    for (const char *p = text; *p; p++) cells += ((unsigned char)*p & 0xC0) != 0x80;
    if (max <= 0) return 0;
    if (cells <= max) return rs_view_screen_put(s, x, y, text, max, color, attr);
    int n = rs_view_screen_put(s, x, y, text, max - 1, color, attr);
    return n + rs_view_screen_put(s, x + n, y, o->utf8 ? "\xe2\x80\xa6" : ">", 1, rs_view_role(o, RS_VIEW_C_DIM), 0);
}

void rs_view_draw_log(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, const rs_view_opts *o)
{
    rs_view_rect in = rs_view_pane_frame(s, r, "log", o);
    if (in.w <= 0 || in.h <= 0) return;
    rs_view_screen_clip(s, &in);
    int n = imin(in.h, vm->n_log);
    for (int i = 0; i < n; i++) {
        const rs_view_log_line *l = rs_view_log_at(vm, n - 1 - i); /* oldest of those shown first */
        int y = in.y + i, x = in.x;
        if (l->rank >= 0)
            x += rs_view_screen_printf(s, x, y, -1, rs_view_role(o, RS_VIEW_C_DIM), RS_VIEW_A_BOLD, "[r%d] ", l->rank);
        rs_view_put_cut(s, x, y, l->text, in.x + in.w - x, 0, 0, o);
    }
    rs_view_screen_clip(s, NULL);
}

void rs_view_draw_too_small(rs_view_screen *s, const rs_view_opts *o)
{
    char msg[64];
    snprintf(msg, sizeof msg, "terminal too small: need %dx%d", RS_VIEW_MIN_W, RS_VIEW_MIN_H);
    int len = (int)strlen(msg);
    rs_view_screen_put(s, imax(0, (s->w - len) / 2), s->h / 2, msg, -1, rs_view_role(o, RS_VIEW_C_WARN), RS_VIEW_A_BOLD);
}

void rs_view_draw(rs_view_screen *s, const rs_view_model *vm, double now, const rs_view_opts *o)
{
    rs_view_screen_clear(s);
    rs_view_screen_clip(s, NULL);
    int world = vm->world > 0 ? vm->world : vm->nranks;
    rs_view_layout l = rs_view_layout_for(s->w, s->h, world);
    bool pipe = rs_view_pipe_active(vm) && !rs_view_has_data(vm, NULL);
    if (pipe) rs_view_pipe_layout(&l, s->w, s->h, world);
    if (l.too_small) {
        rs_view_draw_too_small(s, o);
        return;
    }
    rs_view_draw_header(s, &l.header, vm, now, o);
    rs_view_draw_ranks(s, &l, vm, o);
    rs_view_draw_coll(s, &l.coll, vm, o);
    if (pipe) rs_view_draw_pipe(s, &l.timeline, vm, o); /* a pipeline: the schedule as the ranks ran it */
    else if (rs_view_has_data(vm, NULL)) rs_view_draw_data(s, &l.timeline, vm, o);
    else rs_view_draw_timeline(s, &l.timeline, l.lanes, vm, now, o);
    rs_view_draw_log(s, &l.log, vm, o);
}
