/* A virtual screen: W x H cells, each one code point and an attribute. The panes draw here and never
 * into a terminal, so they are tested headless (rs_view_screen_text) and the curses side is one blit
 * (curses.h). Drawing outside the screen or a clip rectangle is silently clipped: a pane that would
 * spill on a small terminal loses its edge, it never corrupts another pane. */
#ifndef RS_VIEW_SCREEN_H
#define RS_VIEW_SCREEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"

/* Colour roles; curses.c maps each to a colour pair. 0 is the terminal's default. */
typedef enum rs_view_color {
    RS_VIEW_C_DEFAULT = 0,
    RS_VIEW_C_DATA, RS_VIEW_C_FORWARD, RS_VIEW_C_BACKWARD, RS_VIEW_C_COMM, RS_VIEW_C_OPTIM, RS_VIEW_C_IDLE,
    RS_VIEW_C_DONE,
    RS_VIEW_C_POOL0,                       /* RS_VIEW_C_POOL0 + rs_pool: the memory bar's pools */
    RS_VIEW_C_TITLE = RS_VIEW_C_POOL0 + 8,
    RS_VIEW_C_DIM,
    RS_VIEW_C_WARN,
    RS_VIEW_C_COUNT
} rs_view_color;

enum { RS_VIEW_A_BOLD = 1u, RS_VIEW_A_REVERSE = 2u, RS_VIEW_A_UNDERLINE = 4u };

typedef struct rs_view_cell {
    uint32_t ch;      /* a Unicode code point of width 1 */
    uint8_t color;    /* rs_view_color */
    uint8_t attr;     /* RS_VIEW_A_* */
} rs_view_cell;

typedef struct rs_view_rect { int x, y, w, h; } rs_view_rect;

typedef struct rs_view_screen {
    int w, h;
    rs_view_cell *cells;   /* owned, w*h, row-major */
    rs_view_rect clip;     /* drawing outside is dropped; the whole screen after rs_view_screen_clip(NULL) */
    char *text;            /* owned, the buffer rs_view_screen_text returns */
    size_t text_cap;
} rs_view_screen;

/* A blank w x h screen (caller owns; rs_view_screen_free), or NULL with err set. */
rs_view_screen *rs_view_screen_new(int w, int h, rs_err *err);
void rs_view_screen_free(rs_view_screen *s);
/* New size, contents cleared (after SIGWINCH). */
rs_status rs_view_screen_resize(rs_view_screen *s, int w, int h, rs_err *err);
void rs_view_screen_clear(rs_view_screen *s);
/* Restricts drawing to r intersected with the screen; NULL: the whole screen. */
void rs_view_screen_clip(rs_view_screen *s, const rs_view_rect *r);

void rs_view_screen_set(rs_view_screen *s, int x, int y, uint32_t ch, int color, int attr);
/* Writes UTF-8 text from (x, y) on one row, at most max cells (max < 0: to the clip's edge); an invalid
 * byte becomes '?', a control character ' '. Returns the cells written. */
int rs_view_screen_put(rs_view_screen *s, int x, int y, const char *utf8, int max, int color, int attr);
/* printf into the row, like rs_view_screen_put. */
int rs_view_screen_printf(rs_view_screen *s, int x, int y, int max, int color, int attr, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* Fills a rectangle with ch. */
void rs_view_screen_fill(rs_view_screen *s, const rs_view_rect *r, uint32_t ch, int color, int attr);
/* A frame around r with a title in its top edge: box-drawing characters, or +-| when ascii. */
void rs_view_screen_box(rs_view_screen *s, const rs_view_rect *r, const char *title, bool ascii, int color);
const rs_view_cell *rs_view_screen_at(const rs_view_screen *s, int x, int y);

/* The screen as UTF-8 text: rows joined by '\n', trailing spaces trimmed, ending in '\n'. The buffer
 * belongs to s and is valid until the next call; NULL only when out of memory. */
const char *rs_view_screen_text(rs_view_screen *s);
/* The UTF-8 encoding of a code point into out (4 bytes room); returns its length. */
int rs_view_utf8_encode(uint32_t cp, char *out);

#endif
