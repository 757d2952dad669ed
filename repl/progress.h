/* Training progress for a person: a live bar on a terminal, one line per epoch otherwise.
 * It is an observer of rs_train's events; the engine itself prints nothing. */
#ifndef RS_PROGRESS_H
#define RS_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

#include "engine/train/train.h"

typedef struct rs_progress {
    FILE *out;
    bool tty;          /* redraw one line in place */
    bool color;
    double last_draw;  /* seconds, to cap redraws at 10 per second */
    bool open;         /* a bar is on the line without its newline: finish it before anything else */
} rs_progress;

void rs_progress_init(rs_progress *p, FILE *out);
/* rs_train_hooks.on_event */
void rs_progress_event(void *ud, const rs_train_event *ev);
/* Ends a bar left open (a run stopped or failed mid-epoch): the next line starts on its own. */
void rs_progress_close(rs_progress *p);

/* eval's progress: "eval: done/total samples [###---] ETA" redrawn in place on a terminal (10 per
 * second at most), nothing otherwise; done == total finishes the line. */
void rs_progress_count(rs_progress *p, const char *what, uint64_t done, uint64_t total, double elapsed_s);

#endif
