/* Large-model inference across ranks (TorchServe's, seed 002): a model served by N rank processes,
 * as pipeline stages (rank r runs a contiguous range of layers, the activations go rank to rank) or
 * as tensor shards (Megatron's split, engine/nn/tp.h: every rank runs its shard, one all-reduce per
 * column/row pair). The server keeps one connection to rank 0 and sends it each batch; rank 0 hands
 * it to the others through their process group and writes the whole model's output back.
 *
 * The server's side (ranks.c) starts the ranks with the project's launcher (`ringside --worker serve`,
 * the torchrun variables, a rendezvous store the server hosts), from a thread of its own that lives as
 * long as they do: the launcher's children die with the thread that forked them (PR_SET_PDEATHSIG),
 * and with the store's host, so ranks never outlive their server, killed or not. The ranks' side is
 * ranks_worker.c. */
#ifndef RS_SERVE_RANKS_H
#define RS_SERVE_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "engine/core/status.h"

typedef struct rs_serve_ranks rs_serve_ranks;

typedef struct rs_serve_ranks_cfg {
    const char *model;      /* the model file (what rs_serve_backend_load reads) */
    int ranks;              /* 2..64 */
    const char *mode;       /* one of rs_serve_ranks_modes: "pipeline" or "tensor" */
    int max_batch;          /* the largest batch a request carries (>= 1) */
    size_t in_bytes;        /* per sample: floats, or int32 token ids */
    size_t out_numel;       /* floats per sample */
    const char *exe;        /* the ringside binary; NULL: /proc/self/exe */
    int worker_index;       /* which model's ranks these are on this host: devices go round-robin by it */
} rs_serve_ranks_cfg;

/* The modes a model across ranks runs in, NULL-terminated: what `serve ... mode=` takes. */
extern const char *const rs_serve_ranks_modes[];

/* Starts the ranks and waits (60 s at most) until rank 0 has connected and every rank has loaded its
 * part. A rank that fails to start is an error with its message. Caller owns *out. */
rs_status rs_serve_ranks_start(const rs_serve_ranks_cfg *cfg, rs_serve_ranks **out, rs_err *err);
/* Stops the ranks (rank 0 sees the connection close and the group leaves) and frees. NULL: no-op. */
void rs_serve_ranks_stop(rs_serve_ranks *r);
/* y (B, out_numel) = model(x (B, in_bytes)), through the ranks; one batch at a time (callers are
 * serialised). RS_ERR_IO when the ranks have died, naming how. */
rs_status rs_serve_ranks_run(rs_serve_ranks *r, const void *x, int B, float *y, rs_err *err);
/* false, with why (cap bytes) saying how, once a rank has died or the ranks have ended; looks at the
 * processes themselves, so a rank killed is seen before the launcher has reaped the others. */
bool rs_serve_ranks_alive(rs_serve_ranks *r, char *why, size_t cap);
/* What each rank said it holds ("rank 1: stage 1 of 2, layers 3..4"), one line each, into buf. */
void rs_serve_ranks_describe(rs_serve_ranks *r, char *buf, size_t cap);
/* The rank processes' ids (for tests that check they end with the server); returns how many. */
int rs_serve_ranks_pids(rs_serve_ranks *r, int *pids, int max);

/* The rank job: `ringside --worker serve model=PATH mode=pipeline|tensor feed=PORT max_batch=N ...`
 * (ranks_worker.c); returns the process exit code. */
int rs_serve_rank_main(int argc, char **argv, FILE *out, FILE *errf);

/* Whole transfers on the loopback socket between the server and rank 0 (both sides use them): false
 * when the peer closed or the socket failed. */
bool rs_serve_ranks_put_all(int fd, const void *p, size_t n);
bool rs_serve_ranks_get_all(int fd, void *p, size_t n);

#endif
