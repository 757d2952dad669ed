/* The pipeline schedule pane (pipe_sched_pane.c): in a mode=pipeline run, the timeline's place shows
 * one optimizer step as the pipeline papers draw it, stage by time, from the ranks' own micro-batch
 * spans. Not part of the view's API beyond what render.c needs to choose it. */
#ifndef RS_VIEW_PIPE_PANE_H
#define RS_VIEW_PIPE_PANE_H

#include "render.h"

/* Whether the model holds a pipeline's micro-batch spans (the pane replaces the timeline then). */
bool rs_view_pipe_active(const rs_view_model *vm);
/* Makes the timeline's rect tall enough for `world` rank rows, a time axis and the bubble line on
 * narrow screens, taking the rows from the collective and log panes below it (never below 4 rows). */
void rs_view_pipe_layout(rs_view_layout *l, int w, int h, int world);
/* The newest step every rank has finished (the run's last once all are done; the first while it
 * runs): each rank a row of cells, F or B and the micro-batch's number where its forward or backward
 * ran, '.' where the rank idled; the scale, the step's measured bubble beside the formula. */
void rs_view_draw_pipe(rs_view_screen *s, const rs_view_rect *r, const rs_view_model *vm, const rs_view_opts *o);

#endif
