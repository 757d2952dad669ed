/* The dashboard's model: what the panes draw, folded from the lines the ranks write (rs_wire_* parsed)
 * and their plain log lines. It knows nothing of terminals, so a recorded stream replayed into it gives
 * the same picture as the live run, and tests compare that picture as text. Time is always passed in
 * (monotonic seconds, the clock the ranks stamp their events with), which is what lets a replay run at
 * any speed. All memory is taken in rs_view_model_new; feeding an event never allocates. */
#ifndef RS_VIEW_MODEL_H
#define RS_VIEW_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "dist/worker/worker.h"
#include "engine/core/mem.h"
#include "engine/core/status.h"

#define RS_VIEW_MAX_RANKS 64  /* ranks beyond this are counted in `dropped`, not shown */
#define RS_VIEW_LOSS_N 64     /* losses kept per rank for the sparkline */
#define RS_VIEW_SPAN_N 1024   /* timeline spans kept per rank (phases and communication together) */
#define RS_VIEW_LOG_N 200     /* log lines kept */
#define RS_VIEW_LOG_W 200     /* bytes kept of one log line (longer lines are cut) */
#define RS_VIEW_BENCH_N 64    /* bench rows kept (sizes 1 B..4 GiB doubling are 33) */

/* What a rank is doing, as the panes name it. The compute phases mirror rs_phase (engine/train);
 * WAIT is "nothing heard yet" (the rank is starting: joining its group, filling its buffers) and DONE
 * "the rank said @done". */
typedef enum rs_view_state {
    RS_VIEW_ST_WAIT = 0,
    RS_VIEW_ST_DATA,
    RS_VIEW_ST_FORWARD,
    RS_VIEW_ST_BACKWARD,
    RS_VIEW_ST_COMM,
    RS_VIEW_ST_OPTIM,
    RS_VIEW_ST_IDLE,
    RS_VIEW_ST_DONE,
    RS_VIEW_ST_COUNT
} rs_view_state;
const char *rs_view_state_word(rs_view_state s); /* "forward", ... */
char rs_view_state_letter(rs_view_state s);      /* F B C O . D (data) ? (starting) = (done) */

/* One span of the timeline. Communication spans (@comm, or a collective from BEGIN to END) are kept
 * beside the compute spans rather than replacing them, because their overlap with backward is the
 * thing the timeline exists to show. */
typedef struct rs_view_span {
    double t0, t1;       /* monotonic seconds */
    int64_t step;
    uint8_t state;       /* rs_view_state */
    bool comm;           /* a communication span (state is RS_VIEW_ST_COMM) */
    int16_t micro, stage; /* a pipeline's forward or backward: its micro-batch and stage; else -1 */
} rs_view_span;

typedef struct rs_view_rank {
    bool seen;
    rs_view_state state;
    double state_t;                 /* when the state was last reported */
    int64_t step;                   /* last optimizer step reported (@step) */
    int epoch;
    double loss, lr, sps;           /* last @step */
    float losses[RS_VIEW_LOSS_N];   /* ring: the last n_loss losses, oldest at (loss_head - n_loss) */
    int loss_head, n_loss;
    int64_t live[RS_POOL_COUNT], peak[RS_POOL_COUNT]; /* last @mem, bytes by rs_pool */
    bool has_mem;
    rs_view_span spans[RS_VIEW_SPAN_N]; /* ring, in arrival order */
    int span_head, n_span;
    /* the running collective, as this rank last reported it */
    int coll_step, coll_steps, coll_peer, coll_chunk; /* last STEP: sends chunk to peer (-1: local) */
    uint64_t coll_step_bytes;
    double coll_t0;                 /* BEGIN of the collective this rank is in, or < 0 */
    double coll_step_t;             /* when it reported its last STEP (step=1: it waits there for a key) */
    double coll_held;               /* step=1: seconds this rank was held for keys in this collective */
    int coll_released;              /* the last step index whose hold was counted (-1: none) */
    /* last strategy collective (@comm) */
    char comm_op[24];
    int comm_index;
    uint64_t comm_bytes;
    double comm_t0, comm_t1;
    /* the numbered collectives (index >= 0) of the step of the last one: DDP's buckets, FSDP's units,
     * tensor parallel's all-reduces inside each block's forward and backward */
    char comm_nop[24];              /* the op of the last numbered one */
    int64_t comm_step;
    int comm_n, comm_lo, comm_hi;
    uint64_t comm_set;     /* the numbers seen in the step (those below 64): FSDP's units with weights
                            * are 0, 2, 4 of 0..4, so "x3 #0-4" would read as a miscount */
    uint64_t comm_sum_bytes;
    double comm_sum_s;
    double done_s, done_sps;        /* @done figures */
    /* `collective ... step=1`: the values of the buffer the collective works in, as this rank last
     * reported them (@data), and as it reported them the time before (what changed) */
    bool has_data, has_prev;
    rs_data_line data, prev;
} rs_view_rank;

/* The collective the ranks are in (the one with the highest number seen), and the last finished one. */
typedef struct rs_view_coll {
    bool active;              /* some rank has begun it and not every rank has ended it */
    bool any;                 /* a collective has been seen at all */
    rs_pg_opkind op;
    rs_pg_algo algo;
    uint64_t coll;
    size_t msg_bytes;         /* the message, from BEGIN */
    uint64_t moved;           /* bytes sent by all ranks' steps so far (steps with a peer) */
    int steps;                /* K */
    int begun, ended;         /* ranks */
    double t_begin, t_end;    /* first BEGIN, last END */
    double held;              /* step=1: the time every rank was held for keys (the least any rank was) */
    double slowest;           /* seconds: the longest any rank spent in it (its END - its BEGIN - its time held
                                 for keys), the figure the REPL prints as "(slowest rank)"; t_end - t_begin
                                 also counts how far apart the ranks began */
    double algbw, busbw;      /* GB/s (1e9 bytes/s) over slowest, once every rank ended */
} rs_view_coll;

/* What the run is, from the command that started it (rs_view_set_run). Strings are copied. */
typedef struct rs_view_run {
    const char *id;           /* run id in the session log, e.g. "r12" */
    const char *kind;         /* "train", "collective", "bench" */
    const char *mode;         /* "ddp", "fsdp", "ring", ... */
    const char *backend;      /* "shm", "tcp", ... */
    int world;
    int64_t steps_total;      /* train: planned optimizer steps; bench: message sizes; 0 when unknown */
    int epochs;               /* 0 when unknown */
    double t_start;           /* monotonic seconds; < 0: the first event's time */
} rs_view_run;

/* One row of `bench` (rank 0's @bench line): a message size done. */
typedef struct rs_view_bench_row {
    uint64_t bytes;
    double time_us, algbw, busbw;
    uint64_t wrong;
} rs_view_bench_row;

typedef struct rs_view_log_line {
    int rank;                 /* -1: the REPL itself */
    char text[RS_VIEW_LOG_W];
} rs_view_log_line;

typedef struct rs_view_model {
    char run_id[32], kind[16], mode[24], backend[16];
    int world;
    int64_t steps_total;
    int epochs;
    double t_start;           /* < 0 until known */
    double t_last;            /* latest timestamp of any event (for replays: a natural `now`) */
    int nranks;               /* ranks[0..nranks) are valid: max(world, highest rank seen + 1) */
    rs_view_rank *ranks;      /* owned, RS_VIEW_MAX_RANKS */
    rs_view_coll coll, last_coll;
    rs_view_log_line *log;    /* owned ring of RS_VIEW_LOG_N */
    int log_head, n_log;
    uint64_t fed, ignored, dropped; /* events taken, lines not understood, events of ranks out of range */
    int pipe_stages;          /* a pipeline's stages seen in micro-batch spans (0: no pipeline) */
    double eval_acc, eval_loss;
    int eval_epoch;           /* -1: none */
    rs_view_bench_row bench[RS_VIEW_BENCH_N]; /* ring of `bench` rows, oldest at (bench_head - n_bench) */
    int bench_head, n_bench, bench_rows; /* bench_rows: every row seen (n_bench: those kept) */
    double bench_clock; /* seconds of collectives the bench rows measured so far (time x iterations): the
                           timeline's clock for a bench, the same live and replayed */
    rs_pg_opkind bench_op;
} rs_view_model;

/* Returns a new, empty model (caller owns; rs_view_model_free). NULL and err set when out of memory. */
rs_view_model *rs_view_model_new(rs_err *err);
void rs_view_model_free(rs_view_model *vm);
/* Forgets everything (the next run starts clean) without freeing. */
void rs_view_model_reset(rs_view_model *vm);

void rs_view_set_run(rs_view_model *vm, const rs_view_run *run);
void rs_view_feed_event(rs_view_model *vm, const rs_pg_event *ev);
void rs_view_feed_train(rs_view_model *vm, const rs_train_line *tl);
/* A rank's values (@data): they replace its last ones, which become the "before" of what changed. */
void rs_view_feed_data(rs_view_model *vm, const rs_data_line *d);
/* A `bench` row: the ranks finished that size and go on with the next one (all of them at work). */
void rs_view_feed_bench(rs_view_model *vm, const rs_bench_row *row);
/* step=1: the REPL let the ranks run step k (0-based) of collective coll at time t. A rank that had
 * reported step k before t was held from its report to t; that wait is not the collective's time. */
void rs_view_feed_release(rs_view_model *vm, uint64_t coll, int k, double t);
/* A plain line of `rank` (-1: the REPL's own). Kept as given, cut to RS_VIEW_LOG_W - 1 bytes at a
 * UTF-8 boundary. */
void rs_view_feed_log(rs_view_model *vm, int rank, const char *line);
/* Any line a rank wrote: "@ev", "@bench" and the training lines are parsed and fed; other '@' lines
 * that no parser takes (@check, or junk) are counted in `ignored`; everything else is a log line.
 * Returns true when the line changed the model. */
bool rs_view_feed_line(rs_view_model *vm, int rank, const char *line);

/* The i-th newest loss of a rank (0 = newest); false past the ones kept. */
bool rs_view_rank_loss(const rs_view_rank *r, int i, float *out);
/* The i-th newest log line (0 = newest), or NULL. */
const rs_view_log_line *rs_view_log_at(const rs_view_model *vm, int i);
/* The i-th newest span of a rank (0 = newest), or NULL. */
const rs_view_span *rs_view_span_at(const rs_view_rank *r, int i);
/* The algorithm steps the ranks are at in the running collective (1-based; 0: not started). */
void rs_view_coll_progress(const rs_view_model *vm, int *kmin, int *kmax);
/* What a step with no peer (peer < 0) does in op: "reduces" for the reducing operations, "receives"
 * for the others (a broadcast's receiving ranks). */
const char *rs_view_local_step_word(rs_pg_opkind op);
/* Whether any rank reported training figures (a loss), i.e. the panes show a training run. */
bool rs_view_training(const rs_view_model *vm);
/* Smallest step any seen rank has reported (the run's progress), 0 when none. */
int64_t rs_view_min_step(const rs_view_model *vm);
/* The i-th newest bench row (0 = newest), or NULL. */
const rs_view_bench_row *rs_view_bench_at(const rs_view_model *vm, int i);
/* Every rank of the world has been heard from and said @done. */
bool rs_view_all_done(const rs_view_model *vm);
/* Whether some rank reported values (@data) of the collective the pane shows; *done: the most steps
 * any of them had done (the collective's progress as the values show it). */
bool rs_view_has_data(const rs_view_model *vm, int *done);
/* What `done` of `steps` steps of op/algo on `world` ranks have made of the data, for the data pane:
 * "input (nothing moved yet)", "after reduce-scatter step 2/3", "after all-gather step 3/3: the
 * result", "after broadcast step 1/2" (tree all_reduce), "after step 2/5". */
void rs_view_data_phase(char *out, size_t cap, rs_pg_opkind op, rs_pg_algo algo, int world, int done, int steps);

#endif
