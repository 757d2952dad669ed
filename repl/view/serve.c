/* The serve pane (serve_pane.h): a block per model version holding the text `serve` prints (wrapped
 * to the pane) and a histogram of its batches by size, under a header with the server's addresses. */
#include "serve_pane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pane.h"

#define WRAP_INDENT 8
#define MAXBINS 256   /* histogram rows at most (a 256-row terminal) */ /* a wrapped line goes on under the figures, not under the name */

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* One line of text (no '\n') in rows of w cells, broken where it fits (see below), continuation rows
 * indented; draws them from (x, y) when s is not NULL. Returns the rows it takes. The text is ASCII
 * (names are checked by rs_serve_name_ok; the figures are numbers), so a byte is a cell. */
static int wrap(rs_view_screen *s, int x, int y, int w, const char *line, size_t len, int color)
{
    int rows = 0, indent = 0;
    if (w <= WRAP_INDENT + 8) w = imax(w, 1), indent = -1; /* too narrow to indent: plain cut */
    while (len > 0 || rows == 0) {
        int room = w - imax(indent, 0);
        size_t take = len;
        if ((int)len > room) {
            /* after the last comma that fits (a figure stays whole with its label), else the last space */
            take = 0;
            for (size_t k = (size_t)room; k > 0 && !take; k--)
                if (line[k] == ' ' && line[k - 1] == ',') take = k;
            for (size_t k = (size_t)room; k > 0 && !take; k--)
                if (line[k] == ' ') take = k;
            if (!take) take = (size_t)room;
        }
        if (s) rs_view_screen_printf(s, x + imax(indent, 0), y + rows, room, color, 0, "%.*s", (int)take, line);
        rows++;
        line += take, len -= take;
        while (len > 0 && *line == ' ') line++, len--;
        if (indent == 0) indent = WRAP_INDENT;
    }
    return rows;
}

/* The rows rs_serve_summary_text's lines take at width w (drawn when s is not NULL, at most max rows). */
static int text_rows(rs_view_screen *s, int x, int y, int w, int max, const char *text, const rs_view_opts *o)
{
    int rows = 0;
    for (const char *l = text, *nl; *l; l = nl + 1) {
        if (!(nl = strchr(l, '\n'))) nl = l + strlen(l);
        int need = wrap(NULL, 0, 0, w, l, (size_t)(nl - l), 0);
        /* a line that would be cut is left out whole: half a figure reads as a wrong one */
        if (s && rows + need <= max) wrap(s, x, y + rows, w, l, (size_t)(nl - l), rs_view_role(o, RS_VIEW_C_DEFAULT));
        rows += need;
        if (!*nl) break;
    }
    return rows;
}

/* Batch sizes that ran, as histogram bins: one per size when they fit in `rows`, else ranges of `span`
 * sizes; lo/hi/count filled for the bins that hold batches. Returns how many. */
static int bins(const rs_serve_summary_row *r, int rows, int *lo, int *hi, uint64_t *count)
{
    int sizes = 0, top = 0;
    for (int b = 1; b <= r->max_batch && r->batch_count; b++)
        if (r->batch_count[b]) sizes++, top = b;
    if (!sizes || rows <= 0) return 0;
    int span = sizes <= rows ? 1 : (top + rows - 1) / rows;
    int n = 0;
    for (int first = 1; first <= top; first += span) {
        uint64_t c = 0;
        for (int b = first; b < first + span && b <= top; b++) c += r->batch_count[b];
        if (!c) continue;
        lo[n] = first, hi[n] = imin(first + span - 1, top), count[n] = c;
        n++;
    }
    return n;
}

static int distinct_sizes(const rs_serve_summary_row *r)
{
    int n = 0;
    for (int b = 1; b <= r->max_batch && r->batch_count; b++) n += r->batch_count[b] != 0;
    return n;
}

/* The histogram in rect h: a head row, then a bar per bin scaled to the fullest, its count after it. */
static void histogram(rs_view_screen *s, const rs_view_rect *h, const rs_serve_summary_row *r, const rs_view_opts *o)
{
    if (h->h < 2 || h->w < 40) return;
    int lo[MAXBINS], hi[MAXBINS];
    uint64_t count[MAXBINS];
    int n = bins(r, imin(h->h - 1, MAXBINS), lo, hi, count);
    if (!n) return;
    uint64_t most = 0;
    for (int i = 0; i < n; i++)
        if (count[i] > most) most = count[i];
    rs_view_screen_printf(s, h->x, h->y, h->w, rs_view_role(o, RS_VIEW_C_DIM), RS_VIEW_A_BOLD,
                          "  batch size  batches run (%llu samples in %llu batches)",
                          (unsigned long long)r->samples, (unsigned long long)r->batches);
    int bar_w = h->w - 14 - 12;
    for (int i = 0; i < n; i++) {
        char label[24];
        if (lo[i] == hi[i]) snprintf(label, sizeof label, "%d", lo[i]);
        else snprintf(label, sizeof label, "%d-%d", lo[i], hi[i]);
        int y = h->y + 1 + i, x = h->x;
        x += rs_view_screen_printf(s, x, y, 14, 0, 0, "  %10s  ", label);
        /* a bin with batches never shows an empty bar */
        int len = (int)((double)count[i] / (double)most * bar_w + 0.5);
        if (len < 1) len = 1;
        for (int k = 0; k < len; k++)
            rs_view_screen_set(s, x + k, y, o->utf8 ? 0x2588 : '#', rs_view_role(o, RS_VIEW_C_FORWARD), 0);
        rs_view_screen_printf(s, x + len + 1, y, -1, 0, 0, "%llu", (unsigned long long)count[i]);
    }
}

void rs_view_draw_serve(rs_view_screen *s, const rs_view_rect *r, const rs_serve_summary *sum, const rs_view_opts *o)
{
    if (r->w <= 0 || r->h <= 0) return;
    rs_view_screen_clip(s, r);
    int warn = rs_view_role(o, RS_VIEW_C_WARN);
    if (!sum || sum->n == 0) {
        const char *msg = !sum ? "nothing is served: start a server with `serve MODEL` (or `serve FILE.onnx`, "
                                 "`serve REPOSITORY`), then `view serve`"
                               : "the server holds no loaded model: `serve` lists what it serves; "
                                 "POST /v2/repository/models/NAME/load loads one";
        wrap(s, r->x + 2, r->y + r->h / 3, r->w - 4, msg, strlen(msg), warn);
        rs_view_screen_clip(s, NULL);
        return;
    }
    bool framed = s->w >= 120 && s->h >= 40; /* as rs_view_pane_frame decides */
    int fr = framed ? 2 : 1, inner_w = framed ? r->w - 2 : r->w;
    /* each block's text, and the rows it needs with one bar; the room left goes to the histograms */
    char **text = calloc((size_t)sum->n, sizeof *text); /* freed below, with each text */
    int *need = calloc((size_t)sum->n, sizeof *need), *height = calloc((size_t)sum->n, sizeof *height);
    if (!text || !need || !height) goto out;
    int shown = 0, used = 0, with_hist = 0;
    for (int i = 0; i < sum->n; i++) {
        /* `serve`'s text, but the batch sizes as the histogram rather than a line of "N of SIZE" */
        bool hist = distinct_sizes(&sum->rows[i]) > 0;
        int len = rs_serve_summary_text(&sum->rows[i], !hist, NULL, 0);
        if (!(text[i] = malloc((size_t)len + 1))) goto out;
        rs_serve_summary_text(&sum->rows[i], !hist, text[i], (size_t)len + 1);
        need[i] = fr + text_rows(NULL, 0, 0, inner_w, 0, text[i], o) + (hist ? 2 : 0);
    }
    /* the first blocks that fit whole, with a row for "+N more" when not all of them do */
    for (int k = 1; k <= sum->n; k++) {
        int rows = 0;
        for (int i = 0; i < k; i++) rows += need[i];
        if (rows + (k < sum->n ? 1 : 0) > r->h) break;
        shown = k, used = rows + (k < sum->n ? 1 : 0);
    }
    for (int i = 0; i < shown; i++) {
        height[i] = need[i];
        with_hist += distinct_sizes(&sum->rows[i]) > 0;
    }
    if (shown == 0) {
        /* not even the first fits (a model across many ranks, a line each): its first lines, no bars */
        shown = 1, used = r->h, with_hist = 0;
        height[0] = r->h - (sum->n > 1 ? 1 : 0);
    }
    /* the spare rows, one at a time to each histogram in turn, until each has a bar per size */
    for (int spare = r->h - used, given = 1; spare > 0 && with_hist && given;) {
        given = 0;
        for (int i = 0; i < shown && spare > 0; i++)
            if (height[i] - need[i] + 1 < distinct_sizes(&sum->rows[i])) height[i]++, spare--, given = 1;
    }
    /* sizes merged into ranges may need fewer rows than were given: no blank rows under the bars */
    for (int i = 0; i < shown; i++) {
        int lo[MAXBINS], hi[MAXBINS];
        uint64_t count[MAXBINS];
        int nb = bins(&sum->rows[i], imin(height[i] - need[i] + 1, MAXBINS), lo, hi, count);
        if (nb > 0) height[i] = need[i] - 1 + nb;
    }
    int y = r->y;
    for (int i = 0; i < shown; i++) {
        const rs_serve_summary_row *row = &sum->rows[i];
        char title[RS_SERVE_NAME_MAX + 64];
        snprintf(title, sizeof title, "%s v%lld", row->name, (long long)row->version);
        rs_view_rect b = {r->x, y, r->w, height[i]};
        rs_view_rect in = rs_view_pane_frame(s, &b, title, o);
        rs_view_screen_clip(s, &in);
        int rows = text_rows(s, in.x, in.y, in.w, in.h, text[i], o);
        rs_view_rect h = {in.x, in.y + rows, in.w, in.h - rows};
        histogram(s, &h, row, o);
        rs_view_screen_clip(s, r);
        y += height[i];
    }
    if (shown < sum->n)
        rs_view_screen_printf(s, r->x + 2, r->y + r->h - 1, r->w - 2, warn, RS_VIEW_A_BOLD,
                              "+%d more model versions (a taller terminal shows them; `serve` lists all)",
                              sum->n - shown);
out:
    for (int i = 0; text && i < sum->n; i++) free(text[i]);
    free(text);
    free(need);
    free(height);
    rs_view_screen_clip(s, NULL);
}

void rs_view_draw_serve_frame(rs_view_screen *s, const rs_serve_summary *sum, const rs_view_opts *o)
{
    rs_view_screen_clear(s);
    rs_view_screen_clip(s, NULL);
    if (s->w < RS_VIEW_MIN_W || s->h < RS_VIEW_MIN_H) {
        rs_view_draw_too_small(s, o);
        return;
    }
    const char *dot = o->utf8 ? " \xc2\xb7 " : " | ";
    int x = rs_view_screen_put(s, 0, 0, "ringside", -1, rs_view_role(o, RS_VIEW_C_TITLE), RS_VIEW_A_BOLD);
    x += rs_view_screen_printf(s, x, 0, -1, 0, RS_VIEW_A_BOLD, "%sserve", dot);
    if (sum) {
        double rate = 0;
        uint64_t ok = 0, failed = 0;
        int queued = 0;
        for (int i = 0; i < sum->n; i++)
            rate += sum->rows[i].rate, ok += sum->rows[i].ok, failed += sum->rows[i].failed,
                queued += sum->rows[i].queued;
        x += rs_view_screen_printf(s, x, 0, -1, 0, 0, "%s%d version%s%s%.1f requests/s%s%llu ok / %llu failed%s"
                                   "queued %d", dot, sum->n, sum->n == 1 ? "" : "s", dot, rate, dot,
                                   (unsigned long long)ok, (unsigned long long)failed, dot, queued);
        char head[1200];
        rs_serve_summary_head(sum, head, sizeof head);
        rs_view_screen_put(s, 0, 1, head, s->w, rs_view_role(o, RS_VIEW_C_DIM), 0);
    } else rs_view_screen_put(s, 0, 1, "no server", -1, rs_view_role(o, RS_VIEW_C_DIM), 0);
    rs_view_rect pane = {0, 2, s->w, s->h - 2};
    rs_view_draw_serve(s, &pane, sum, o);
}
