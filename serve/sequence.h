/* Triton's sequence batcher, direct strategy, for the front ends: a request's sequence_id,
 * sequence_start and sequence_end (HTTP "parameters", gRPC request parameters) checked in Triton's
 * words, the sequence recorded with the model's scheduler (rs_serve_sched_sequence), and every control
 * input of the config (START, END, READY, CORRID) filled for the model. As Triton's direct scheduler
 * does, the scheduler pins each live sequence to one instance: its requests all run there, in order. */
#ifndef RS_SERVE_SEQUENCE_H
#define RS_SERVE_SEQUENCE_H

#include "sched.h"

typedef struct rs_serve_seq {
    bool given;                   /* a sequence_id came (an integer or a string) */
    bool is_str;
    uint64_t id;
    char sid[RS_SERVE_NAME_MAX];
    bool start, end;
} rs_serve_seq;

/* For a model with sequence_batching: checks q, records it with s (pin gets the instance the request
 * runs on: pass it to rs_serve_sched_infer_pinned), fills each control input i of c into x[i] (malloc'd,
 * the caller frees). False with msg (400: the client's to fix) otherwise. */
bool rs_serve_seq_apply(const rs_serve_config *c, rs_serve_sched *s, const rs_serve_seq *q, int64_t B,
                        rs_serve_tensor *x, rs_serve_pin *pin, char *msg, size_t n);

#endif
