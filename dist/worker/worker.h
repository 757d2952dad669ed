/* Worker mode: what one rank process does when the REPL (or mpirun, or a user with the torchrun
 * variables) starts `ringside --worker JOB key=value...`. The rank finds the others through the
 * rendezvous store at MASTER_ADDR:MASTER_PORT (mpi: through mpirun), builds its process group and runs
 * the job. It reports to the launching REPL on stdout: human lines ("rank 1: in [...] -> out [...]")
 * and machine lines starting with '@' (trace events, bench rows, check results), which the REPL
 * parses (rs_wire_*) and stores in the session log. */
#ifndef RS_WORKER_H
#define RS_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dist/pg/pg.h"

/* Runs the job in argv (argv[0] is the job name: "collective", "bench", "p2p", "world", "train"); returns the process
 * exit code (0 ok, 1 the job failed or found wrong results, 2 bad arguments). Messages go to out/errf. */
int rs_worker_main(int argc, char **argv, FILE *out, FILE *errf);

/* The largest count a rank takes in iters=, warmup=, root=, show= and trace= (below it): the REPL
 * refuses a larger one at the prompt, before any rank starts. */
#define RS_WORKER_COUNT_MAX 1000000

/* ---- joining the group (shared by the jobs) ----------------------------------------------------- */

typedef struct rs_worker_conn {
    int rank, world;
    rs_pg *g;                 /* owned */
    rs_store *store;          /* owned; NULL under mpirun */
    rs_store_server *server;  /* owned; rank 0 hosts the store when started by hand */
    struct rs_rank_status *status; /* owned mapping: this rank's slot on the launcher's board, NULL without one
                                      (dist/launch/rank_status.h); the group's trace counts collectives in it */
} rs_worker_conn;

/* Who am I (torchrun variables, or Open MPI's under mpirun), the store (the launcher's, or rank 0
 * hosts it), the rendezvous, and the group of `backend` named `group`. Returns 0, or the exit code
 * after printing why to errf (c holds what was made: rs_worker_leave frees it). */
int rs_worker_join(const char *backend, const char *group, double timeout, bool store_from_launcher, FILE *errf,
                   rs_worker_conn *c);
/* A last barrier through the store (when ok) so no rank tears down its group while a peer still reads
 * it, then frees everything. Not ok: the fault record goes on the board first (the collective the rank
 * gave up in, if any), for the launcher to tell the rank that hung from this one that waited. */
void rs_worker_leave(rs_worker_conn *c, bool ok, double timeout);

/* The `train` job (dist/worker/train_job.c): one rank of `train ... mode=NAME`, any mode with a factory
 * in the registry of strategies (dist/train/registry.h); an unknown mode or option exits 2. */
int rs_worker_train(int argc, char **argv, FILE *out, FILE *errf);

/* The `matmul` job (dist/worker/matmul_job.c): the lecture's tensor-parallel matrix product, split by
 * B's columns (all_gather) and by the inner dimension (all_reduce), each rank printing its part. */
int rs_worker_matmul(int argc, char **argv, FILE *out, FILE *errf);
/* What its split= takes, NULL-terminated: both, cols (then all_gather), rows (then all_reduce). */
extern const char *const rs_matmul_split_names[];
/* The demo's matrices: A (m x k) = 0, 1, 2, ...; B (k x n) goes on from m*k (row-major). */
void rs_matmul_demo_fill(float *a, float *b, int m, int k, int n);
/* "[[76, 82], [252, 274]]" (rows x cols of x, row stride ld), or "(R x C)" past 64 elements. */
void rs_matmul_demo_print(FILE *f, const float *x, int rows, int cols, int ld);

/* ---- the lines a worker writes and the REPL reads --------------------------------------------- */

/* "@ev KIND OP ALGO COLL STEP STEPS RANK PEER CHUNK BYTES GROUP T": one trace event (KIND b|s|e). */
int rs_wire_format_event(char *buf, size_t cap, const rs_pg_event *ev);
/* Parses a line written by rs_wire_format_event; false for anything else (never crashes on junk). */
bool rs_wire_parse_event(const char *line, rs_pg_event *ev);

/* "@data RANK COLL DONE STEPS COUNT BLOCKS HEAD DTYPE T V...": what the buffer a rank's collective works
 * in holds after DONE of its STEPS algorithm steps (DONE = STEPS: the rank's result), at monotonic time
 * T. The buffer's COUNT elements are cut into BLOCKS chunks as the algorithm cuts them (chunk b starts
 * at element COUNT*b/BLOCKS); the first HEAD elements of every chunk are listed, chunk after chunk (a
 * shorter chunk lists all it has). The worker writes them with data=1 (`collective ... step=1`). */
#define RS_WIRE_DATA_MAX 64
typedef struct rs_data_line {
    int rank, done, steps, blocks, head, n; /* n: values listed in v */
    uint64_t coll, count;
    rs_dtype dtype;
    double t;
    double v[RS_WIRE_DATA_MAX];
} rs_data_line;
/* Chunk b of a buffer of count elements in blocks chunks: its first element and its length. */
static inline uint64_t rs_wire_chunk_off(uint64_t count, int blocks, int b)
{
    return blocks > 0 ? count * (uint64_t)b / (uint64_t)blocks : 0;
}
static inline uint64_t rs_wire_chunk_len(uint64_t count, int blocks, int b)
{
    return rs_wire_chunk_off(count, blocks, b + 1) - rs_wire_chunk_off(count, blocks, b);
}
/* How many values of chunk b a data line lists. */
static inline int rs_wire_chunk_listed(const rs_data_line *d, int b)
{
    uint64_t len = rs_wire_chunk_len(d->count, d->blocks, b);
    return len < (uint64_t)d->head ? (int)len : d->head;
}
/* The values of buf (count elements of t in `blocks` chunks, 1..RS_WIRE_DATA_MAX) into d: the whole
 * buffer when it has at most RS_WIRE_DATA_MAX elements, else the first ones of each chunk, as many as
 * the limit allows and at most 8 (a screen shows no more). Fills the counts and values only. */
void rs_wire_data_from(rs_data_line *d, const void *buf, uint64_t count, rs_dtype t, int blocks);
int rs_wire_format_data(char *buf, size_t cap, const rs_data_line *d);
/* Parses a line written by rs_wire_format_data; false for anything else (the counts must agree). */
bool rs_wire_parse_data(const char *line, rs_data_line *d);

/* "@bench OP BYTES COUNT DTYPE REDOP TIME_US ALGBW BUSBW WRONG ITERS": one row of `bench`, rank 0's. */
typedef struct rs_bench_row {
    rs_pg_opkind op;
    uint64_t bytes, count;
    rs_dtype dtype;
    rs_redop redop;
    double time_us, algbw, busbw; /* GB/s = 1e9 bytes/s, as nccl-tests */
    uint64_t wrong;
    int iters;
} rs_bench_row;
int rs_wire_format_bench(char *buf, size_t cap, const rs_bench_row *row);
bool rs_wire_parse_bench(const char *line, rs_bench_row *row);

/* "@check RANK WRONG SECONDS": a rank's own verdict on its result of `collective`. */
bool rs_wire_parse_check(const char *line, int *rank, uint64_t *wrong, double *seconds);

/* "@vals RANK WHICH N V1 .. VN": a rank's whole buffer (WHICH names it: in, out, data...), sent when it holds
 * at most RS_WIRE_VALS_MAX numbers, so that the REPL keeps the numbers themselves for `expect`. */
#define RS_WIRE_VALS_MAX 256
typedef struct rs_wire_vals {
    int rank;
    char which[16];
    int n;
    double v[RS_WIRE_VALS_MAX];
} rs_wire_vals;
/* Needs about 25 bytes a number; returns the length it needs, as snprintf does. */
int rs_wire_format_vals(char *buf, size_t cap, const rs_wire_vals *v);
bool rs_wire_parse_vals(const char *line, rs_wire_vals *out);

/* "@num RANK NAME VALUE": one named number of a rank (the world job's RANK, LOCAL_RANK, ...), for `expect`.
 * NAME: 1 to 31 of a-z, 0-9, '_' and '.'. */
int rs_wire_format_num(char *buf, size_t cap, int rank, const char *name, double v);
bool rs_wire_parse_num(const char *line, int *rank, char name[32], double *v);

/* "@p2p BYTES ITERS ONEWAY EXCHANGE COMPUTE BLOCKING ISEND ISEND_TEST": rank 0's timings of `p2p`, in seconds
 * per message (see job_p2p in worker.c). */
typedef struct rs_p2p_times {
    uint64_t bytes;
    int iters;
    double oneway, exchange, compute, blocking, isend, isend_test;
} rs_p2p_times;
int rs_wire_format_p2p(char *buf, size_t cap, const rs_p2p_times *t);
bool rs_wire_parse_p2p(const char *line, rs_p2p_times *out);

/* What a training rank reports, one line each:
 *   @phase R STEP NAME T0 T1                 a phase span (rs_phase_name)
 *   @comm R STEP OP INDEX BYTES T0 T1        a collective of the strategy (bucket/unit INDEX, -1 none)
 *   @step R STEP EPOCH LOSS LR SAMPLES_PER_S after each optimizer step
 *   @mem R STEP LIVE*P PEAK*P                bytes by pool (rs_pool order, P = RS_POOL_COUNT) after each step
 *   @eval R EPOCH ACC LOSS                   test figures of an epoch
 *   @done R STEPS SECONDS SAMPLES_PER_S      the rank finished
 *   @ckpt R STEP                             a checkpoint was written (rank 0)
 *   @micro R STEP F|B MICRO STAGE T0 T1      a micro-batch's forward or backward on a pipeline stage
 *   @stage R STAGE STAGES FIRST LAST         pipeline: rank R runs (virtual) stage STAGE of STAGES, layers
 *                                            FIRST..LAST (one line per stage the rank holds)
 *   @metric R STEP NAME VALUE                a strategy's own figure of the rank at a step (pipeline:
 *                                            acts_peak_bytes, acts_inflight, act_set_bytes) */
typedef enum rs_tline_kind {
    RS_TL_PHASE, RS_TL_COMM, RS_TL_STEP, RS_TL_MEM, RS_TL_EVAL, RS_TL_DONE, RS_TL_CKPT, RS_TL_MICRO, RS_TL_STAGE,
    RS_TL_METRIC
} rs_tline_kind;
typedef struct rs_train_line {
    rs_tline_kind kind;
    int rank, epoch, index;
    char work;              /* MICRO: 'F' or 'B' */
    int micro, stage;       /* MICRO; STAGE: stage, with index = STAGES */
    int first, last;        /* STAGE: its layers */
    double value;           /* METRIC (its name in name) */
    int64_t step;
    char name[24];
    uint64_t bytes;
    double t0, t1, loss, lr, sps, acc, seconds;
    int64_t live[RS_POOL_COUNT], peak[RS_POOL_COUNT];
} rs_train_line;
bool rs_wire_parse_train(const char *line, rs_train_line *out);

/* Names as the REPL and the worker spell them. */
bool rs_pg_op_from_name(const char *s, rs_pg_opkind *out);
bool rs_redop_from_name(const char *s, rs_redop *out);
bool rs_pg_algo_from_name(const char *s, rs_pg_algo *out);
/* nccl-tests' bus factor: busbw = algbw * factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter,
 * all_to_all (n-1)/n; others 1). */
double rs_pg_bus_factor(rs_pg_opkind op, int world);

#endif
