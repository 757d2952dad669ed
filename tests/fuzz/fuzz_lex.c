/* Fuzz target for the command language's lexer and typed values: any bytes (cut at the first NUL, as a
 * C string line is) must split and lex without a crash, into tokens that lie inside their command, in
 * order, without overlap, with word texts equal to their bytes and string texts no longer than their
 * span; lexing the whole line must agree with splitting it; every word parses as every value type to
 * a value or an error with a message, and parsed sizes and durations survive a format round trip. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "repl/lang/lex.h"
#include "repl/lang/value.h"

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Tokens of the command in line[lo, hi). */
static void check_tokens(const char *line, size_t lo, size_t hi, const rs_tokens *t)
{
    size_t prev = lo;
    for (int i = 0; i < t->n; i++) {
        const rs_token *k = &t->tok[i];
        if (k->off < prev || k->len == 0 || k->off + k->len > hi || !k->text) __builtin_trap();
        prev = k->off + k->len;
        switch (k->kind) {
        case RS_TOK_WORD:
            if (strlen(k->text) != k->len || memcmp(k->text, line + k->off, k->len)) __builtin_trap();
            if (blank(k->text[0]) || blank(k->text[k->len - 1])) __builtin_trap();
            break;
        case RS_TOK_STRING:
            if (k->len < 2 || line[k->off] != '"' || line[k->off + k->len - 1] != '"') __builtin_trap();
            if (strlen(k->text) > k->len - 2) __builtin_trap();
            break;
        case RS_TOK_EQUALS:
            if (k->len != 1 || line[k->off] != '=' || strcmp(k->text, "=")) __builtin_trap();
            break;
        case RS_TOK_ARROW:
            if (k->len != 2 || memcmp(line + k->off, "->", 2) || strcmp(k->text, "->")) __builtin_trap();
            break;
        default: __builtin_trap();
        }
        size_t rl;
        const char *rest = rs_lex_rest(t, i, &rl);
        if (rest != line + k->off || k->off + rl != t->end) __builtin_trap();
    }
    if (t->end < lo || t->end > hi || (t->n && t->end != prev)) __builtin_trap();
}

static bool same_tokens(const rs_tokens *a, const rs_tokens *b)
{
    if (a->n != b->n || a->end != b->end) return false;
    for (int i = 0; i < a->n; i++)
        if (a->tok[i].kind != b->tok[i].kind || a->tok[i].off != b->tok[i].off || a->tok[i].len != b->tok[i].len ||
            strcmp(a->tok[i].text, b->tok[i].text))
            return false;
    return true;
}

static void expect_failed(rs_status st, const rs_err *e)
{
    if (st != RS_ERR_ARG || !e->msg[0]) __builtin_trap();
}

/* Every value type on one word: a value, or RS_ERR_ARG with a message. */
static void parse_values(const char *w, size_t salt)
{
    static const char *const names[] = {"ring", "tree", "recursive-doubling", "rd", "relu", "epochs"};
    rs_err e = {0};
    rs_status st;
    int64_t i64;
    double d;
    uint64_t u, v;
    int b;
    char buf[64];
    if ((st = rs_val_int(w, &i64, &e)) != RS_OK) expect_failed(st, &e);
    if ((st = rs_val_float(w, &d, &e)) != RS_OK) expect_failed(st, &e);
    if ((st = rs_val_ratio(w, &d, &e)) != RS_OK) expect_failed(st, &e);
    else if (!(d >= 0 && d <= 1)) __builtin_trap();
    if ((st = rs_val_bool(w, &b, &e)) != RS_OK) expect_failed(st, &e);
    if ((st = rs_val_enum(w, names, 6, &b, &e)) != RS_OK) expect_failed(st, &e);
    else if (b < 0 || b >= 6) __builtin_trap();
    rs_val_near_miss(w, names, 6);
    if ((st = rs_val_size(w, &u, &e)) != RS_OK) {
        expect_failed(st, &e);
    } else {
        if (u > (uint64_t)INT64_MAX) __builtin_trap();
        rs_val_fmt_size(u, buf, sizeof buf);
        if (rs_val_size(buf, &v, &e) != RS_OK || v != u) __builtin_trap();
    }
    if ((st = rs_val_size_range(w, &u, &v, &e)) != RS_OK) expect_failed(st, &e);
    else if (u > v) __builtin_trap();
    if ((st = rs_val_duration(w, &d, &e)) != RS_OK) {
        expect_failed(st, &e);
    } else {
        double back;
        if (!(d >= 0)) __builtin_trap();
        rs_val_fmt_duration(d, buf, sizeof buf);
        if (rs_val_duration(buf, &back, &e) != RS_OK || back != d) __builtin_trap();
    }
    int64_t dims[RS_VAL_SHAPE_MAX];
    int nd, max = 1 + (int)(salt % RS_VAL_SHAPE_MAX);
    if ((st = rs_val_shape(w, dims, max, &nd, &e)) != RS_OK) {
        expect_failed(st, &e);
    } else {
        if (nd < 1 || nd > max) __builtin_trap();
        for (int i = 0; i < nd; i++)
            if (dims[i] < 1) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192) return 0;
    char *line = malloc(size + 1);
    if (!line) return 0;
    memcpy(line, data, size);
    line[size] = '\0';
    size_t len = strlen(line);

    int n = rs_lex_split_commands(line, NULL, 0);
    rs_span *sp = malloc((size_t)(n > 0 ? n : 1) * sizeof *sp);
    if (rs_lex_split_commands(line, sp, n) != n) __builtin_trap();
    rs_tokens t = {0}, whole = {0};
    rs_err e = {0};
    bool first_ok = false;
    size_t prev = 0;
    for (int c = 0; c < n; c++) {
        size_t lo = sp[c].off, hi = sp[c].off + sp[c].len;
        if (lo < prev || (c > 0 && lo == prev) || sp[c].len == 0 || hi > len) __builtin_trap();
        if (blank(line[lo]) || blank(line[hi - 1])) __builtin_trap();
        prev = hi;
        size_t pos = (size_t)-1;
        rs_status st = rs_lex_command(line, sp[c], &t, &pos, &e);
        if (st != RS_OK) {
            /* A split command never holds a second one; errors point inside it. */
            if (st != RS_ERR_ARG || !e.msg[0] || pos < lo || pos >= hi || strstr(e.msg, "only one command"))
                __builtin_trap();
            continue;
        }
        check_tokens(line, lo, hi, &t);
        if (c == 0) first_ok = true;
        for (int i = 0; i < t.n; i++) parse_values(t.tok[i].text, (size_t)i + size);
        if (c == 0) {
            /* The whole line lexes as one command exactly when it holds at most one. */
            rs_status sw = rs_lex_line(line, &whole, NULL, &e);
            if ((sw == RS_OK) != (n == 1) || (sw == RS_OK && !same_tokens(&t, &whole))) __builtin_trap();
        }
    }
    if (n == 0 && (rs_lex_line(line, &whole, NULL, &e) != RS_OK || whole.n != 0)) __builtin_trap();
    if (n >= 1 && !first_ok) {
        size_t pos = (size_t)-1;
        if (rs_lex_line(line, &whole, &pos, &e) == RS_OK || pos > len) __builtin_trap();
    }
    /* The value parsers on the raw line too: blanks, quotes and all. */
    if (len < 256) parse_values(line, size);
    rs_lex_clear(&t);
    rs_lex_clear(&whole);
    free(sp);
    free(line);
    return 0;
}

#define SEED(s) {(const uint8_t *)(s), sizeof(s) - 1}
static const rs_fuzz_seed seed_list[] = {
    SEED("model m = mlp 784-256-10 act=relu"),
    SEED("model c = seq conv(16,3,pad=1) relu maxpool(2) conv(32,3,pad=1) relu maxpool(2) flatten linear(10)"),
    SEED("data d = digits n=20000 seed=1            # built-in generator: the embedded default, no download"),
    SEED("data f = idx train-images-idx3-ubyte train-labels-idx1-ubyte"),
    SEED("show m                                    # layers, shapes, parameter count, bytes"),
    SEED("train m on d mode=ddp ranks=4 backend=shm epochs=2 batch=64 lr=0.05 opt=adam"),
    SEED("train m on d mode=fsdp zero=3 ranks=4 offload=cpu dropout=10%"),
    SEED("collective allreduce ranks=4 size=8..64M algo=ring in=1x28x28 warmup=on"),
    SEED("compile m.onnx precision=int8 calib=d -> m.plan"),
    SEED("serve m.plan name=digits http=8000 grpc=8001 max_batch=32 delay=500us instances=2 timeout=1.5s"),
    SEED("runs ; sql \"select * from runs where x = '#;' \\\"q\\\" \\n\" ; play tutorials/03-ddp.ring ; help train"),
    SEED("say \"Ring all-reduce: each rank sends a chunk\\tto the next\" # narration\npause"),
    SEED("model b = seq in=3x32x32 [ conv(8, 3x5, stride=2x1) gelu ] flatten linear(10) a=b=c x==y f(a->b)"),
    SEED("set threads=2 seed=1e3 lr=1.5e-3 size=1.5K bytes=2MiB wait=2m t=100ns q=\"unterminated"),
};

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    *seeds = seed_list;
    return sizeof seed_list / sizeof *seed_list;
}
