/* `expect`: the condition parser (repl/lang/expect.c) on what it takes and what it refuses, with the
 * span a caret goes under; then the command against a result recorded by hand (repl/result.h), as a
 * collective and a training run across ranks record theirs: checks that hold, checks that fail with the
 * numbers they read, names that are not there, and the rules for ranks (rank N, per rank, NAME.LEFT). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/expect.h"
#include "repl.h"
#include "result.h"
#include "rs_test.h"

static void parses(const char *cond, const char *name, int rank, bool per_rank, rs_expect_op op, rs_expect_kind kind,
                   int nvals, double v0)
{
    rs_expect e;
    rs_expect_span at;
    rs_err err = {0};
    rs_status st = rs_expect_parse(cond, &e, &at, &err);
    RS_CHECK(st == RS_OK, "'%s' refused: %s", cond, err.msg);
    if (st) return;
    RS_CHECK(!strcmp(e.name, name) && e.rank == rank && e.per_rank == per_rank && e.op == op && e.kind == kind,
             "'%s': name '%s' rank %d per_rank %d op %s kind %d", cond, e.name, e.rank, e.per_rank,
             rs_expect_op_text(e.op), e.kind);
    if (kind != RS_EXPECT_NAME)
        RS_CHECK(e.nvals == nvals && e.vals[0] == v0, "'%s': %d values, first %g (want %d, %g)", cond, e.nvals,
                 e.vals[0], nvals, v0);
}

/* Refused, with the caret at [off, off+len) and the message holding `says`. */
static void refused(const char *cond, size_t off, size_t len, const char *says)
{
    rs_expect e;
    rs_expect_span at = {99, 99};
    rs_err err = {0};
    rs_status st = rs_expect_parse(cond, &e, &at, &err);
    RS_CHECK(st == RS_ERR_ARG, "'%s' was taken", cond);
    RS_CHECK(at.off == off && at.len == len, "'%s': caret at %zu+%zu, want %zu+%zu (%s)", cond, at.off, at.len, off, len,
             err.msg);
    RS_CHECK(strstr(err.msg, says) != NULL, "'%s': message '%s' lacks '%s'", cond, err.msg, says);
}

/* Runs `expect COND` in s; returns what it printed, and *failed whether it failed. */
static const char *run(rs_session *s, char **buf, size_t *len, const char *cond, int *failed)
{
    char line[256];
    snprintf(line, sizeof line, "expect %s", cond);
    fflush(s->out);
    long before = ftell(s->out);
    *failed = rs_repl_line(s, line);
    fflush(s->out);
    (void)len;
    return *buf + before;
}

/* The parser: what each line parses to, and each refusal's column, width and words. */
static void parser_checks(void)
{
    parses("accuracy >= 0.85", "accuracy", -1, false, RS_EXPECT_GE, RS_EXPECT_NUMBER, 1, 0.85);
    parses("rank 0 = [2, 110]", "", 0, false, RS_EXPECT_EQ, RS_EXPECT_VECTOR, 2, 2);
    parses("rank 12 sent_bytes<=48", "sent_bytes", 12, false, RS_EXPECT_LE, RS_EXPECT_NUMBER, 1, 48);
    parses("memory.optimizer per rank ~= formula within 1%", "memory.optimizer", -1, true, RS_EXPECT_APPROX,
           RS_EXPECT_NAME, 0, 0);
    parses("bubble ~= 0.43 within 15%", "bubble", -1, false, RS_EXPECT_APPROX, RS_EXPECT_NUMBER, 1, 0.43);
    parses("busbw.1M != -1.5e-3", "busbw.1M", -1, false, RS_EXPECT_NE, RS_EXPECT_NUMBER, 1, -1.5e-3);
    parses("accuracy > 85%", "accuracy", -1, false, RS_EXPECT_GT, RS_EXPECT_NUMBER, 1, 0.85);
    parses("out per rank == [1,2,3]", "out", -1, true, RS_EXPECT_EQ, RS_EXPECT_VECTOR, 3, 1);
    parses("  loss<.5  ", "loss", -1, false, RS_EXPECT_LT, RS_EXPECT_NUMBER, 1, 0.5);
    {
        rs_expect e;
        rs_err err = {0};
        RS_CHECK(rs_expect_parse("x ~= 2 within 0.5", &e, NULL, &err) == RS_OK && e.has_tol && !e.tol_rel &&
                     e.tol == 0.5,
                 "absolute tolerance");
        RS_CHECK(rs_expect_parse("x ~= 2 within 15%", &e, NULL, &err) == RS_OK && e.tol_rel && e.tol == 0.15,
                 "relative tolerance as a fraction");
        RS_CHECK(rs_expect_holds(&e, 2.29, 2) && !rs_expect_holds(&e, 2.31, 2), "15%% of 2 is 0.3");
        rs_expect_parse("x = 1", &e, NULL, &err);
        RS_CHECK(rs_expect_holds(&e, 1.0000001, 1) && !rs_expect_holds(&e, 1.00001, 1), "= to 6 digits");
        rs_expect_parse("x >= 1", &e, NULL, &err);
        RS_CHECK(rs_expect_holds(&e, 0.9999999999, 1) && !rs_expect_holds(&e, 0.99, 1), ">= takes = as well");
    }
    refused("", 0, 1, "needs a condition");
    refused("accuracy", 8, 1, "expected a comparison");
    refused("accuracy => 3", 10, 1, "after '='");
    refused("accuracy = ", 11, 1, "after '='");
    refused("rank 0 = [2, 110", 9, 1, "no closing ']'");
    refused("rank 0 = [2 110]", 12, 4, "expected ',' or ']'");
    refused("x ~= 3", 6, 1, "needs a tolerance");
    refused("x = 3 within 2", 6, 6, "'within' goes with ~=");
    refused("x ~= 3 within -1", 14, 2, "0 or more");
    refused("x ~= 3 within", 13, 1, "a tolerance");
    refused("x = 3 4", 6, 1, "unexpected '4'");
    refused("x per ranks = 1", 6, 5, "expected 'rank' after 'per'");
    refused("rank = 1", 5, 1, "rank number");
    refused("rank 1x = 1", 5, 2, "rank number");
    refused("3 = 3", 0, 1, "name of a value");
    refused("x = 2e", 4, 2, "is not a number");
    refused("x = 1e400", 4, 5, "out of range");
    refused("x = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,"
            "38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65]",
            188, 3, "at most 64");
}

/* The command, on a result recorded as a collective and a run across ranks record theirs. */
static void command_checks(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    rs_session *s = rs_session_new(out);
    s->err = out;
    int failed;
    const char *said = run(s, &buf, &len, "x = 1", &failed);
    RS_CHECK(failed && strstr(said, "no result to check yet"), "before any result: %s", said);

    rs_result_begin(s, "collective reduce ranks=2 op=product");
    double in0[] = {1, 10}, in1[] = {2, 11}, out0[] = {2, 110};
    rs_result_vec(s, "in", 0, in0, 2);
    rs_result_vec(s, "in", 1, in1, 2);
    rs_result_vec(s, "out", 0, out0, 2);
    rs_result_vec(s, "out", 1, in1, 2);
    rs_result_main(s, "out");
    rs_result_num(s, "steps", 1);
    rs_result_rank(s, "sent_bytes", 0, 0);
    rs_result_rank(s, "sent_bytes", 1, 8);
    rs_result_rank(s, "memory.optimizer", 0, 1000);
    rs_result_rank(s, "memory.optimizer", 1, 1010);
    rs_result_rank(s, "formula.memory.optimizer", 0, 1000);
    rs_result_rank(s, "formula.memory.optimizer", 1, 1000);

    said = run(s, &buf, &len, "rank 0 = [2, 110]", &failed);
    RS_CHECK(!failed && strstr(said, "ok: rank 0 is [2, 110]"), "rank 0's buffer: %s", said);
    said = run(s, &buf, &len, "rank 1 in = [2, 11]", &failed);
    RS_CHECK(!failed && strstr(said, "ok: in on rank 1 is [2, 11]"), "a named buffer of rank 1: %s", said);
    said = run(s, &buf, &len, "rank 0 = [2, 111]", &failed);
    RS_CHECK(failed && strstr(said, "expect failed: rank 0 is [2, 110], not = [2, 111] (element 1: 110 against 111)"),
             "a wrong element: %s", said);
    said = run(s, &buf, &len, "rank 0 = [2, 110, 0]", &failed);
    RS_CHECK(failed && strstr(said, "(2 numbers against 3)"), "a wrong length: %s", said);
    said = run(s, &buf, &len, "rank 0 != [2, 110, 0]", &failed);
    RS_CHECK(!failed, "!= holds for a wrong length: %s", said);
    said = run(s, &buf, &len, "rank 1 > 1", &failed);
    RS_CHECK(!failed, "a number applies to every element: %s", said);
    said = run(s, &buf, &len, "rank 1 > 2", &failed);
    RS_CHECK(failed && strstr(said, "(element 0: 2 against 2)"), "... and fails on the first that does not hold: %s",
             said);
    said = run(s, &buf, &len, "rank 2 = [1, 2]", &failed);
    RS_CHECK(failed && strstr(said, "has out for ranks 0..1, not for rank 2"), "a rank that is not there: %s", said);
    said = run(s, &buf, &len, "sent_bytes per rank = [0, 8]", &failed);
    RS_CHECK(!failed && strstr(said, "ok: sent_bytes is 0, 8 on ranks 0..1"), "one number per rank, in order: %s", said);
    said = run(s, &buf, &len, "sent_bytes per rank = [8, 0]", &failed);
    RS_CHECK(failed && strstr(said, "sent_bytes on rank 0 is 0, not = 8"), "rank 0 against the first number: %s", said);
    said = run(s, &buf, &len, "sent_bytes = 8", &failed);
    RS_CHECK(failed && strstr(said, "one value per rank"), "a per-rank name without per rank: %s", said);
    said = run(s, &buf, &len, "steps per rank = 1", &failed);
    RS_CHECK(failed && strstr(said, "not one per rank"), "per rank on a name of the command: %s", said);
    said = run(s, &buf, &len, "memory.optimizer per rank ~= formula within 1%", &failed);
    RS_CHECK(!failed && strstr(said, "ok: memory.optimizer is 1000, 1010 on ranks 0..1"),
             "formula reads formula.memory.optimizer rank by rank: %s", said);
    said = run(s, &buf, &len, "memory.optimizer per rank ~= formula within 0.5%", &failed);
    RS_CHECK(failed && strstr(said, "memory.optimizer on rank 1 is 1010, not ~= formula.memory.optimizer (1000) within "
                                    "0.5% (off by 1%)"),
             "a rank off the formula: %s", said);
    said = run(s, &buf, &len, "memory.optimizer per rank <= steps", &failed);
    RS_CHECK(failed && strstr(said, "not <= steps (1)"), "a name of the command against every rank: %s", said);
    said = run(s, &buf, &len, "stpes = 1", &failed);
    RS_CHECK(failed && strstr(said, "has no 'stpes' (did you mean 'steps'?); it has: in (per rank), out (per rank), "
                                    "steps, sent_bytes (per rank)"),
             "an unknown name lists the names: %s", said);
    said = run(s, &buf, &len, "steps = nothing", &failed);
    RS_CHECK(failed && strstr(said, "has no 'nothing'"), "an unknown name on the right: %s", said);

    /* a command that failed after it began its result: nothing of it is checked */
    rs_result_fail(s);
    said = run(s, &buf, &len, "steps = 1", &failed);
    RS_CHECK(failed && strstr(said, "`collective reduce ranks=2 op=product`, failed"), "a failed command: %s", said);
    /* a new result replaces the old one whole */
    rs_result_begin(s, "eval m on d");
    rs_result_num(s, "accuracy", 0.9);
    said = run(s, &buf, &len, "accuracy >= 0.85", &failed);
    RS_CHECK(!failed && strstr(said, "ok: accuracy is 0.9"), "a fresh result: %s", said);
    said = run(s, &buf, &len, "rank 0 = [2, 110]", &failed);
    RS_CHECK(failed && strstr(said, "has none"), "the old buffers are gone: %s", said);

    rs_session_free(s);
    fclose(out);
    free(buf);
}

int main(void)
{
    parser_checks();
    command_checks();
    return rs_test_finish("expect");
}
