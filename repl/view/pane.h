/* Helpers the pane files share (not part of the view's API). */
#ifndef RS_VIEW_PANE_H
#define RS_VIEW_PANE_H

#include "render.h"

/* The colour role when colour is on, else the terminal's default: NO_COLOR keeps every glyph. */
static inline int rs_view_role(const rs_view_opts *o, int c) { return o->color ? c : RS_VIEW_C_DEFAULT; }

static inline int rs_view_state_color(rs_view_state s)
{
    return s == RS_VIEW_ST_WAIT ? RS_VIEW_C_DIM : RS_VIEW_C_DATA + (int)s - RS_VIEW_ST_DATA;
}

/* A pane's frame (roomy screens) or a reverse-video title row (small ones); returns the inside. */
rs_view_rect rs_view_pane_frame(rs_view_screen *s, const rs_view_rect *r, const char *title,
                                const rs_view_opts *o);

/* Below RS_VIEW_MIN_W x RS_VIEW_MIN_H the whole screen is this one centred line (every dashboard). */
void rs_view_draw_too_small(rs_view_screen *s, const rs_view_opts *o);

/* The letter of a memory pool in the bar and its legend. */
char rs_view_pool_letter(int pool);

#endif
