/* Each rank's progress where its launcher can read it without the rank's help: one slot per rank in a
 * memfd the launcher makes and maps, which a rank on the same host opens by path (/proc/PID/fd/N in
 * RINGSIDE_RANK_STATUS, so nothing is left in /dev/shm when the launcher dies). A rank counts the
 * collectives it entered and finished (the one it is in, with its number, op and bytes), notes its
 * training step and last phase, the time of its last progress, and a fault record when it gives up.
 * When a rank fails, the launcher compares the slots as NCCL's flight recorder compares sequence
 * numbers: the rank that never entered the collective the others waited in is the hung one.
 * Every field is an atomic written by its own rank (several threads of it: a communication thread
 * counts collectives while the main thread notes phases); a reader may see a mix of two moments,
 * which is all a diagnosis needs. */
#ifndef RS_RANK_STATUS_H
#define RS_RANK_STATUS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dist/pg/pg.h"

#define RS_RANK_STATUS_ENV "RINGSIDE_RANK_STATUS"

enum { RS_RANK_FAULT_NONE = 0, RS_RANK_FAULT_IN_COLL, RS_RANK_FAULT_OTHER };

typedef struct rs_rank_status {
    _Atomic int32_t pid;        /* 0 until the rank attached */
    int32_t rank;               /* set with pid: the slot's place on the board */
    _Atomic int32_t in_coll;    /* 1 from a collective's begin to its end (stays 1 when it fails inside) */
    _Atomic int32_t op;         /* rs_pg_opkind of the last collective entered, -1 none */
    _Atomic int32_t group;      /* its group's number (rs_pg_event.group) */
    _Atomic int32_t phase;      /* rs_phase of the last phase finished, -1 none */
    _Atomic int32_t fault;      /* RS_RANK_FAULT_*: set as the rank gives up */
    int32_t spare;
    _Atomic uint64_t coll;      /* the collective's number in that group, the same on every rank */
    _Atomic uint64_t entered, finished; /* collectives begun and ended, all groups */
    _Atomic uint64_t bytes;     /* of the last collective entered */
    _Atomic int64_t step;       /* last training step begun or finished, -1 none */
    _Atomic int64_t progress_ns; /* CLOCK_MONOTONIC of the last progress (begin, end, phase, step) */
    _Atomic int64_t fault_ns;
    char pad[40];
} rs_rank_status;
_Static_assert(sizeof(rs_rank_status) == 128, "a slot is two cache lines, its own");

/* ---- the launcher's side ---------------------------------------------------------------------- */

typedef struct rs_rank_board rs_rank_board;

/* A board of n slots (memfd, mapped). *env is "RINGSIDE_RANK_STATUS=/proc/PID/fd/N" for the ranks'
 * environment, valid until _free. NULL when the kernel has no memfd or memory is short: the launcher
 * then reports without it. The caller owns the result (rs_rank_board_free). */
rs_rank_board *rs_rank_board_new(int n, const char **env);
void rs_rank_board_free(rs_rank_board *b);
/* Rank r's slot (read-only use), NULL when out of range or b is NULL. */
const rs_rank_status *rs_rank_board_slot(const rs_rank_board *b, int r);
/* A rank that attached and gave up (fault record set), -1 none. */
int rs_rank_board_fault(const rs_rank_board *b);

/* The rank a failed rank waited for, when it gave up in a collective (its fault record): among those
 * still running (running[r] non-zero), one that never entered the collective `failed` gave up in (not in
 * a collective, in an earlier one of that group, or a different op at that number), the one with the
 * oldest progress first. -1 when the board cannot tell (no slots, the failed rank did not give up in a
 * collective, every other rank waits in the same one). */
int rs_rank_board_hung(const rs_rank_board *b, int failed, const int *running, int n);

/* Appends to buf (at most cap bytes, at `at`) what slot r says: "step 4, after forward; computing, not in a
 * collective" or "in all_reduce #37 of 2.1 MB". Returns the new end, as the launcher's message builder. */
size_t rs_rank_board_describe(const rs_rank_board *b, int r, char *buf, size_t cap, size_t at);
/* Seconds since slot r's last progress, -1 when unknown. */
double rs_rank_board_idle_s(const rs_rank_board *b, int r);

/* ---- a rank's side ---------------------------------------------------------------------------- */

/* This rank's slot, when RINGSIDE_RANK_STATUS names a board of exactly `world` slots; NULL otherwise
 * (started by hand, on another host, under mpirun). The mapping is the caller's (rs_rank_status_detach). */
rs_rank_status *rs_rank_status_attach(int rank, int world);
void rs_rank_status_detach(rs_rank_status *s); /* NULL: no-op */
/* An rs_pg_trace_fn: ud is the slot (NULL: nothing). Counts BEGIN and END. */
void rs_rank_status_trace(void *ud, const rs_pg_event *ev);
/* A training step began (phase < 0) or a phase of it finished. */
void rs_rank_status_phase(rs_rank_status *s, int64_t step, int phase);
/* The rank gives up: RS_RANK_FAULT_IN_COLL when a collective was under way. */
void rs_rank_status_fault(rs_rank_status *s);

#endif
