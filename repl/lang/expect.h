/* The condition of `expect`, the command a script uses to check the last result's numbers:
 *
 *   expect accuracy >= 0.85
 *   expect rank 0 = [2, 110]
 *   expect memory.optimizer per rank ~= formula within 1%
 *   expect busbw.1M > 0
 *
 *   condition := subject OP value [within TOL[%]]
 *   subject   := NAME [per rank] | rank N [NAME]
 *   OP        := = (or ==)  !=  <  <=  >  >=  ~=
 *   value     := NUMBER[%] | [NUMBER, NUMBER, ...] | NAME
 *   NAME      := a letter or '_', then letters, digits, '_'; '.' parts may start with a digit (busbw.1M)
 *
 * Parsing is pure (no session): the fuzz target and the REPL share it. What the names mean, and the
 * comparison against a result, live in repl/result.c and repl/cmd_expect.c. */
#ifndef RS_EXPECT_H
#define RS_EXPECT_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/core/status.h"

#define RS_EXPECT_NAME_MAX 64
#define RS_EXPECT_VEC_MAX 64

typedef enum rs_expect_op {
    RS_EXPECT_EQ,     /* = : equal to 6 significant digits (as %g prints) */
    RS_EXPECT_NE,     /* != : not = */
    RS_EXPECT_LT,
    RS_EXPECT_LE,
    RS_EXPECT_GT,
    RS_EXPECT_GE,
    RS_EXPECT_APPROX, /* ~= : within the tolerance (which ~= requires) */
} rs_expect_op;

typedef enum rs_expect_kind {
    RS_EXPECT_NUMBER, /* vals[0] */
    RS_EXPECT_VECTOR, /* vals[0 .. nvals) */
    RS_EXPECT_NAME,   /* another value of the result: ref */
} rs_expect_kind;

/* A byte range of the condition's text, for a caret under it. */
typedef struct rs_expect_span {
    size_t off, len;
} rs_expect_span;

typedef struct rs_expect {
    char name[RS_EXPECT_NAME_MAX]; /* the value checked; "" for `rank N` alone (the result's main value) */
    rs_expect_span subject;        /* where the subject is written */
    int rank;                      /* `rank N ...`: N; -1 when not given */
    bool per_rank;                 /* `NAME per rank`: every rank's value */
    rs_expect_op op;
    rs_expect_span op_at;
    rs_expect_kind kind;
    double vals[RS_EXPECT_VEC_MAX];
    int nvals;
    char ref[RS_EXPECT_NAME_MAX];  /* RS_EXPECT_NAME */
    rs_expect_span value_at;       /* where the value is written */
    bool has_tol, tol_rel;         /* within TOL (absolute) or within TOL% (relative to the value) */
    double tol;                    /* TOL, or TOL% as a fraction (1% -> 0.01) */
    rs_expect_span tol_at;
} rs_expect;

/* Parses cond into *out. On error returns RS_ERR_ARG with a message (no position in it) and *at (may be
 * NULL) covering the fault in cond, for a caret. */
rs_status rs_expect_parse(const char *cond, rs_expect *out, rs_expect_span *at, rs_err *err);

/* "=", "!=", "<", "<=", ">", ">=", "~=". */
const char *rs_expect_op_text(rs_expect_op op);

/* Whether got OP want holds for one pair of numbers under e's operator and tolerance. NaN holds only
 * for != . */
bool rs_expect_holds(const rs_expect *e, double got, double want);

#endif
