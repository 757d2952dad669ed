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
} rs_progress;

void rs_progress_init(rs_progress *p, FILE *out);
/* rs_train_hooks.on_event */
void rs_progress_event(void *ud, const rs_train_event *ev);

#endif
