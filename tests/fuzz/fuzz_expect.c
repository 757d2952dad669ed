/* Fuzz target for `expect`'s condition parser (repl/lang/expect.c): any bytes (cut at the first NUL) must
 * parse or be refused without a crash. A refusal has a message and a caret inside the text (or just
 * past its end); what parses has a well-formed name, finite numbers, a non-negative tolerance only with
 * ~=, spans inside the text, and reads back the same when written out again and parsed once more. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "repl/lang/expect.h"

static void check_name(const char *n, bool may_be_empty)
{
    size_t len = strlen(n);
    if (len >= RS_EXPECT_NAME_MAX || (!len && !may_be_empty)) __builtin_trap();
    for (size_t i = 0; i < len; i++) {
        char c = n[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
        if (!ok) __builtin_trap();
    }
}

static void in_text(rs_expect_span sp, size_t n)
{
    if (sp.off > n || sp.len > n - sp.off) __builtin_trap();
}

/* The condition written out as a user would, from its parts. */
static void write_out(const rs_expect *e, char *buf, size_t cap)
{
    size_t k = 0;
    if (e->rank >= 0) k += (size_t)snprintf(buf + k, cap - k, "rank %d %s", e->rank, e->name);
    else k += (size_t)snprintf(buf + k, cap - k, "%s%s", e->name, e->per_rank ? " per rank" : "");
    k += (size_t)snprintf(buf + k, cap - k, " %s ", rs_expect_op_text(e->op));
    if (e->kind == RS_EXPECT_NAME) k += (size_t)snprintf(buf + k, cap - k, "%s", e->ref);
    else if (e->kind == RS_EXPECT_NUMBER) k += (size_t)snprintf(buf + k, cap - k, "%.17g", e->vals[0]);
    else
        for (int i = 0; i < e->nvals && k < cap; i++)
            k += (size_t)snprintf(buf + k, cap - k, "%s%.17g%s", i ? ", " : "[", e->vals[i], i == e->nvals - 1 ? "]" : "");
    if (e->has_tol && k < cap)
        snprintf(buf + k, cap - k, " within %.17g%s", e->tol_rel ? e->tol * 100 : e->tol, e->tol_rel ? "%" : "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t n = strlen(text);
    rs_expect e, again;
    rs_expect_span at = {0, 0};
    rs_err err = {0};
    if (rs_expect_parse(text, &e, &at, &err) != RS_OK) {
        if (err.code != RS_ERR_ARG || !err.msg[0] || at.len == 0 || at.off > n) __builtin_trap();
        free(text);
        return 0;
    }
    check_name(e.name, e.rank >= 0);
    if (e.rank < -1 || (e.rank >= 0 && e.per_rank) || (unsigned)e.op > RS_EXPECT_APPROX) __builtin_trap();
    in_text(e.subject, n);
    in_text(e.op_at, n);
    in_text(e.value_at, n);
    if (e.kind == RS_EXPECT_NAME) check_name(e.ref, false);
    else if ((e.kind == RS_EXPECT_NUMBER && e.nvals != 1) || e.nvals < 1 || e.nvals > RS_EXPECT_VEC_MAX)
        __builtin_trap();
    for (int i = 0; e.kind != RS_EXPECT_NAME && i < e.nvals; i++)
        if (!isfinite(e.vals[i])) __builtin_trap();
    if ((e.op == RS_EXPECT_APPROX) != e.has_tol) __builtin_trap();
    if (e.has_tol && !(e.tol >= 0 && isfinite(e.tol))) __builtin_trap();
    if (e.has_tol) in_text(e.tol_at, n);
    /* written out and parsed again: the same condition (a relative tolerance may round in the last bit) */
    char buf[8192];
    write_out(&e, buf, sizeof buf);
    if (rs_expect_parse(buf, &again, NULL, &err) != RS_OK) __builtin_trap();
    if (strcmp(again.name, e.name) || again.rank != e.rank || again.per_rank != e.per_rank || again.op != e.op ||
        again.kind != e.kind || again.has_tol != e.has_tol || again.tol_rel != e.tol_rel)
        __builtin_trap();
    if (e.kind == RS_EXPECT_NAME && strcmp(again.ref, e.ref)) __builtin_trap();
    if (e.kind != RS_EXPECT_NAME &&
        (again.nvals != e.nvals || memcmp(again.vals, e.vals, sizeof e.vals[0] * (size_t)e.nvals)))
        __builtin_trap();
    if (e.has_tol && !(fabs(again.tol - e.tol) <= 1e-12 * fabs(e.tol))) __builtin_trap();
    free(text);
    return 0;
}

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
#define S(x) {(const uint8_t *)(x), sizeof(x) - 1}
    static const rs_fuzz_seed s[] = {
        S("accuracy >= 0.85"),
        S("rank 0 = [2, 110]"),
        S("memory.optimizer per rank ~= formula within 1%"),
        S("bubble ~= 0.43 within 15%"),
        S("busbw.1M != -1.5e-3"),
        S("rank 3 sent_bytes <= 48"),
        S("out per rank == [10, 46, 82, 118]"),
        S("accuracy > 85%"),
        S("x ~= 2 within 0.5"),
        S("rank 0 = [2, 110"),
        S("x = 1e400"),
        S("x per ranks = 1"),
    };
#undef S
    *seeds = s;
    return sizeof s / sizeof s[0];
}
