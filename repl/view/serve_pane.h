/* The dashboard's serve pane (`view serve`): what the server started at the prompt is doing, drawn
 * from a summary (serve/summary.h) into a virtual screen, so it is tested as text like every pane.
 * Each model version shows the lines `serve` prints (one formatter: rs_serve_summary_text), with the
 * batches the dynamic batcher formed drawn as a histogram by size instead of `serve`'s "batches:" line. */
#ifndef RS_VIEW_SERVE_PANE_H
#define RS_VIEW_SERVE_PANE_H

#include "render.h"
#include "serve/summary.h"

/* Every version of sum in r: a block each (framed on roomy screens, a title row otherwise), the rest
 * of the room shared by their histograms; versions that do not fit become "+N more". sum NULL: no
 * server, and the line says how to start one. */
void rs_view_draw_serve(rs_view_screen *s, const rs_view_rect *r, const rs_serve_summary *sum, const rs_view_opts *o);
/* The whole screen: a two-row header (models, total requests/s, the addresses) and the pane; below
 * RS_VIEW_MIN_W x RS_VIEW_MIN_H only "terminal too small", as the run dashboard. Clears s first. */
void rs_view_draw_serve_frame(rs_view_screen *s, const rs_serve_summary *sum, const rs_view_opts *o);

#endif
