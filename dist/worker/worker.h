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

/* Runs the job in argv (argv[0] is the job name: "collective", "bench", "p2p"); returns the process
 * exit code (0 ok, 1 the job failed or found wrong results, 2 bad arguments). Messages go to out/errf. */
int rs_worker_main(int argc, char **argv, FILE *out, FILE *errf);

/* ---- the lines a worker writes and the REPL reads --------------------------------------------- */

/* "@ev KIND OP ALGO COLL STEP STEPS RANK PEER CHUNK BYTES GROUP T": one trace event (KIND b|s|e). */
int rs_wire_format_event(char *buf, size_t cap, const rs_pg_event *ev);
/* Parses a line written by rs_wire_format_event; false for anything else (never crashes on junk). */
bool rs_wire_parse_event(const char *line, rs_pg_event *ev);

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

/* Names as the REPL and the worker spell them. */
bool rs_pg_op_from_name(const char *s, rs_pg_opkind *out);
bool rs_redop_from_name(const char *s, rs_redop *out);
bool rs_pg_algo_from_name(const char *s, rs_pg_algo *out);
/* nccl-tests' bus factor: busbw = algbw * factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter,
 * all_to_all (n-1)/n; others 1). */
double rs_pg_bus_factor(rs_pg_opkind op, int world);

#endif
