/* The last result: the named numbers of the last command that gave any (train: loss, accuracy, memory by
 * pool per rank...; collective: each rank's buffer...), kept as values so that `expect` checks numbers,
 * not printed text. A command that gives numbers starts a new result with rs_result_begin and records
 * into it; commands that give none (say, sql, help, expect itself) leave it alone, so a tutorial can
 * talk between a command and its checks. docs/repl.md lists what each command records. */
#ifndef RS_RESULT_H
#define RS_RESULT_H

#include <stdbool.h>

#include "session.h"

typedef struct rs_result_val {
    char name[64];
    int rank;   /* -1: one value of the whole command; >= 0: that rank's */
    double *v;  /* (n) owned; one number or a vector (a rank's buffer) */
    int n;
} rs_result_val;

typedef struct rs_results {
    char cmd[160];      /* the command that gave them, as typed (cut) */
    char main[32];      /* what `rank N` alone means (collective: out); "" none */
    bool failed;        /* that command failed: its numbers are not to be trusted */
    bool nomem;         /* a value could not be kept */
    unsigned gen;       /* counts rs_result_begin calls (run.c tells whether a command began one) */
    rs_result_val *vals;/* (n) owned */
    int n, cap;
} rs_results;

/* A new last result for the command cmd (as typed; NULL: the command being run, s->cmd_text). Commands
 * call it first thing, so that a command that fails leaves no older numbers to be checked as its own. */
void rs_result_begin(rs_session *s, const char *cmd);
/* Records one number; a name given twice keeps the last value. An allocation failure sets nomem, which
 * `expect` reports. */
void rs_result_num(rs_session *s, const char *name, double v);
/* One rank's number. */
void rs_result_rank(rs_session *s, const char *name, int rank, double v);
/* A vector (rank -1: of the command). */
void rs_result_vec(rs_session *s, const char *name, int rank, const double *v, int n);
/* The per-rank name that `expect rank N = ...` checks when no name follows the rank. */
void rs_result_main(rs_session *s, const char *name);
/* Marks the last result as that of a failed command (run.c, when the command that began it failed). */
void rs_result_fail(rs_session *s);
/* How many results were begun so far (0 with none). */
unsigned rs_result_gen(const rs_session *s);

/* The value name of rank (-1: the command's own), or NULL. */
const rs_result_val *rs_result_find(const rs_results *r, const char *name, int rank);
/* Whether any value is named name: *per_rank (may be NULL) says whether it is kept per rank. */
bool rs_result_has(const rs_results *r, const char *name, bool *per_rank);

void rs_results_free(rs_results *r);

#endif
