/* The data pane (`collective ... step=1`): the values each rank's buffer holds as the algorithm goes,
 * one row a rank, read from what the ranks report (@data), never recomputed here. Chunks as the
 * algorithm cuts the buffer are split by a bar; values the last step changed are in reverse video; a
 * buffer too long for the pane shows the first values of every chunk, then "…". It takes the
 * timeline's place while a collective has values, since a stepped collective has no timeline to speak of. */
#include "pane.h"

#include <stdio.h>
#include <string.h>

#define CELL_W 24 /* bytes of one formatted value (an i64 takes up to 20) */

/* A value as a class reads it: integers whole, others with 6 significant digits. */
static void fmt_value(char out[CELL_W], double v, rs_dtype t)
{
    if ((t == RS_I32 || t == RS_I64) && v > -9.2e18 && v < 9.2e18) snprintf(out, CELL_W, "%lld", (long long)v);
    else snprintf(out, CELL_W, "%.6g", v);
}

typedef struct layout {
    int more_w;            /* cells of the "more values" mark: "…", or ".." in ASCII */
    int blocks, head;      /* values shown per chunk (at most the listed ones) */
    int chunks;            /* chunks shown (the rest: "+N chunks") */
    int colw[RS_WIRE_DATA_MAX]; /* width of the value at each listed position, across the rows */
} layout;

static bool same_shape(const rs_data_line *a, const rs_data_line *b)
{
    return a->count == b->count && a->blocks == b->blocks && a->head == b->head && a->n == b->n;
}

/* Index in d->v of chunk b's first listed value. */
static int first_of(const rs_data_line *d, int b)
{
    int i = 0;
    for (int k = 0; k < b; k++) i += rs_wire_chunk_listed(d, k);
    return i;
}

/* Whether chunk b has elements beyond the first `shown` (left off by the pane or by the rank). */
static bool more_in(const rs_data_line *d, int b, int shown)
{
    return rs_wire_chunk_len(d->count, d->blocks, b) > (uint64_t)shown;
}

/* Values of chunk b shown with at most `head` a chunk. */
static int shown_in(const rs_data_line *d, int b, int head)
{
    int n = rs_wire_chunk_listed(d, b);
    return n < head ? n : head;
}

/* Cells one row takes with `head` values a chunk over the first `chunks` chunks. */
static int row_width(const rs_data_line *d, const layout *l, int head, int chunks)
{
    int w = 0;
    for (int b = 0; b < chunks; b++) {
        int show = shown_in(d, b, head), at = first_of(d, b);
        if (b) w += 2; /* "│ " */
        for (int i = 0; i < show; i++) w += l->colw[at + i] + 1;
        if (more_in(d, b, show)) w += l->more_w + 1;
    }
    if (chunks < d->blocks) w += 12; /* "+NN chunks" */
    return w;
}

/* The most values a chunk that fit in `avail` cells, the same for every chunk (rows line up). */
static void fit(const rs_data_line *ref, layout *l, int avail)
{
    l->blocks = ref->blocks;
    l->chunks = ref->blocks;
    for (int h = ref->head; h >= 1; h--) {
        l->head = h;
        if (row_width(ref, l, h, l->chunks) <= avail) return;
    }
    l->head = 1;
    while (l->chunks > 1 && row_width(ref, l, 1, l->chunks) > avail) l->chunks--;
}

static void draw_row(rs_view_screen *s, int x, int y, int x1, const rs_view_rank *r, int rank, const layout *l,
                     int lw, const rs_view_opts *o)
{
    const rs_data_line *d = &r->data;
    int c = rs_view_role(o, RS_VIEW_C_COMM), dim = rs_view_role(o, RS_VIEW_C_DIM);
    rs_view_screen_printf(s, x, y, lw, rs_view_role(o, RS_VIEW_C_TITLE), RS_VIEW_A_BOLD, "r%d", rank);
    x += lw;
    const char *bar = o->utf8 ? "\xe2\x94\x82" : "|", *more = o->utf8 ? "\xe2\x80\xa6" : "..";
    int chunks = l->chunks < d->blocks ? l->chunks : d->blocks;
    for (int b = 0; b < chunks && x < x1; b++) {
        int n = shown_in(d, b, l->head), at = first_of(d, b);
        if (b) {
            rs_view_screen_put(s, x, y, bar, 1, dim, 0);
            x += 2;
        }
        for (int i = 0; i < n; i++) {
            char v[CELL_W];
            fmt_value(v, d->v[at + i], d->dtype);
            int w = l->colw[at + i], len = (int)strlen(v);
            bool changed = r->has_prev && r->prev.v[at + i] != d->v[at + i];
            rs_view_screen_put(s, x + (w > len ? w - len : 0), y, v, -1, changed ? c : 0,
                               changed ? RS_VIEW_A_REVERSE | RS_VIEW_A_BOLD : 0);
            x += w + 1;
        }
        if (more_in(d, b, n)) {
            rs_view_screen_put(s, x, y, more, l->more_w, dim, 0);
            x += l->more_w + 1;
        }
    }
    if (chunks < d->blocks) rs_view_screen_printf(s, x, y, -1, dim, 0, "+%d chunks", d->blocks - chunks);
}

void rs_view_draw_data(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, const rs_view_opts *o)
{
    int done = 0;
    rs_view_has_data(vm, &done);
    const rs_view_coll *c = &vm->coll;
    int world = vm->world > 0 ? vm->world : vm->nranks, steps = c->steps;
    char phase[96], title[160];
    rs_view_data_phase(phase, sizeof phase, c->op, c->algo, world, done, steps);
    snprintf(title, sizeof title, "data: %s", phase);
    rs_view_rect in = rs_view_pane_frame(s, r, title, o);
    if (in.w <= 0 || in.h <= 0) return;
    rs_view_screen_clip(s, &in);
    /* the rows shown: ranks of the current collective with values, as many as fit (one for the legend) */
    const rs_data_line *ref = NULL;
    int rows[RS_VIEW_MAX_RANKS], nrows = 0, total = 0;
    for (int i = 0; i < vm->nranks && i < RS_VIEW_MAX_RANKS; i++) {
        const rs_view_rank *k = &vm->ranks[i];
        if (!k->has_data || k->data.coll != c->coll) continue;
        total++;
        if (nrows < in.h - (in.h > 2 ? 1 : 0)) rows[nrows++] = i;
        if (!ref || k->data.n > ref->n) ref = &k->data;
    }
    if (!ref) {
        rs_view_screen_clip(s, NULL);
        return;
    }
    if (total > nrows && nrows > 1) nrows--; /* room for "+N more ranks" */
    layout l = {.more_w = o->utf8 ? 1 : 2};
    for (int j = 0; j < nrows; j++) {
        const rs_data_line *d = &vm->ranks[rows[j]].data;
        for (int i = 0; i < d->n; i++) {
            char v[CELL_W];
            fmt_value(v, d->v[i], d->dtype);
            int len = (int)strlen(v);
            if (same_shape(d, ref) && len > l.colw[i]) l.colw[i] = len;
        }
    }
    for (int j = 0; j < nrows; j++) { /* rows laid out otherwise get widths of their own */
        const rs_data_line *d = &vm->ranks[rows[j]].data;
        if (same_shape(d, ref)) continue;
        for (int i = 0; i < d->n; i++) {
            char v[CELL_W];
            fmt_value(v, d->v[i], d->dtype);
            if ((int)strlen(v) > l.colw[i]) l.colw[i] = (int)strlen(v);
        }
    }
    char last[16];
    int lw = snprintf(last, sizeof last, "r%d", rows[nrows - 1]) + 2;
    fit(ref, &l, in.w - lw);
    int y = in.y;
    for (int j = 0; j < nrows; j++, y++) draw_row(s, in.x, y, in.x + in.w, &vm->ranks[rows[j]], rows[j], &l, lw, o);
    int dim = rs_view_role(o, RS_VIEW_C_DIM);
    if (total > nrows && y < in.y + in.h) rs_view_screen_printf(s, in.x, y++, -1, dim, 0, "+%d more ranks", total - nrows);
    if (y < in.y + in.h) {
        /* every mark on screen is explained on screen */
        char legend[160];
        snprintf(legend, sizeof legend, "%s chunk edge  %s more values  reverse: changed by the last step  (%llu x %s)",
                 o->utf8 ? "\xe2\x94\x82" : "|", o->utf8 ? "\xe2\x80\xa6" : "..", (unsigned long long)ref->count,
                 rs_dtype_name(ref->dtype));
        rs_view_screen_put(s, in.x, y < in.y + in.h - 1 ? y + 1 : y, legend, -1, dim, 0);
    }
    rs_view_screen_clip(s, NULL);
}
