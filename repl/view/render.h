/* The dashboard's panes drawn from the model into a virtual screen: the layout for a terminal size and
 * world, and one draw of every pane. Pure functions of (model, now, options, size): the live view and
 * the snapshot tests call the same code. */
#ifndef RS_VIEW_RENDER_H
#define RS_VIEW_RENDER_H

#include <stdbool.h>

#include "model.h"
#include "screen.h"

#define RS_VIEW_MIN_W 80
#define RS_VIEW_MIN_H 24
#define RS_VIEW_MAX_BOXES 8 /* rank boxes side by side; ranks beyond get a compact row each */

typedef struct rs_view_opts {
    bool color;       /* false: no colour roles written (NO_COLOR, TERM=dumb); bold/reverse stay */
    bool utf8;        /* false: ASCII only (sparkline _.-=#, frames +-|) */
    double window_s;  /* timeline width in seconds; <= 0: fit the last `window_steps` steps */
    int window_steps; /* for window_s <= 0; 0 means 3 */
} rs_view_opts;

/* Options for this environment: NO_COLOR set (any value) or TERM=dumb/unset turn colour off; TERM=dumb
 * or a non-UTF-8 locale (utf8_locale false) turn UTF-8 off. Arguments are getenv()'s results. */
rs_view_opts rs_view_opts_detect(const char *term, const char *no_color, bool utf8_locale);

typedef struct rs_view_layout {
    bool too_small;         /* below RS_VIEW_MIN_W x RS_VIEW_MIN_H: only a message is drawn */
    rs_view_rect header;    /* run, mode, backend, world, step, elapsed, ETA, samples/s */
    rs_view_rect ranks;     /* the rank boxes row, then compact rows */
    rs_view_rect coll;      /* the collective pane */
    rs_view_rect timeline;
    rs_view_rect log;
    int boxes;              /* ranks drawn as boxes (side by side, top of `ranks`); 0: all compact rows */
    int box_h;              /* height of a box row */
    int rows;               /* compact rank rows that fit under the boxes (ranks past boxes+rows: "+N more") */
    int lanes;              /* timeline rows per rank: 2 (compute, then communication) or 1 (merged) */
} rs_view_layout;

/* Where each pane goes on a w x h screen for `world` ranks. Rects never overlap and lie inside the
 * screen; an empty rect (w or h 0) is a pane that does not fit and is not drawn. */
rs_view_layout rs_view_layout_for(int w, int h, int world);

/* Draws every pane of vm as of time `now` (monotonic seconds) into s, clearing it first. */
void rs_view_draw(rs_view_screen *s, const rs_view_model *vm, double now, const rs_view_opts *o);

/* The panes one by one, into their rect (used by rs_view_draw; exposed so a test can look at one). */
void rs_view_draw_header(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, double now,
                         const rs_view_opts *o);
void rs_view_draw_ranks(rs_view_screen *s, const rs_view_layout *l, const rs_view_model *vm,
                        const rs_view_opts *o);
void rs_view_draw_coll(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, const rs_view_opts *o);
void rs_view_draw_timeline(rs_view_screen *s, const rs_view_rect *r, int lanes, const rs_view_model *vm,
                           double now, const rs_view_opts *o);
/* The values each rank's collective works in (`collective ... step=1`), in the timeline's place while
 * rs_view_has_data. */
void rs_view_draw_data(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, const rs_view_opts *o);
void rs_view_draw_log(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, const rs_view_opts *o);
/* A line of text in at most max cells from (x, y); a longer one shows its first max - 1 cells and a cut
 * mark ("…", or ">" in ASCII), so a reader knows there is more. Returns the cells written. */
int rs_view_put_cut(rs_view_screen *s, int x, int y, const char *text, int max, int color, int attr,
                    const rs_view_opts *o);

/* "1.5 MiB", "940 KiB", "32 B": bytes for a narrow field (out: 16 bytes). */
const char *rs_view_fmt_bytes(char out[16], double bytes);

#endif
