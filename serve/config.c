/* config.pbtxt reader: protobuf text format (fields `name: value`, messages `name { ... }` or `< ... >`,
 * lists `[a, b]`, repeated fields, # comments) mapped straight onto rs_serve_config. Each message
 * type has one handler that knows its fields; anything else is an error at file:line:column. Fields
 * Triton has but ringside does not act on (optimization, parameters, ...) are read and skipped. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_EOF, T_IDENT, T_NUM, T_STR, T_PUNCT };

typedef struct tok {
    int type;
    const char *p;
    size_t len;
    int line, col;
} tok;

typedef struct P {
    const char *s, *file;
    size_t n, i;
    int line, col, depth;
    tok cur; /* the next token, not yet consumed */
    rs_err *err;
} P;

#define MAX_DEPTH 32

static rs_status fail(P *p, const tok *t, const char *fmt, const char *a, const char *b)
{
    char what[400];
    snprintf(what, sizeof what, fmt, a ? a : "", b ? b : "");
    return rs_err_set(p->err, RS_ERR_FORMAT, "%s:%d:%d: %s", p->file, t->line, t->col, what);
}

static void advance(P *p)
{
    for (;;) {
        while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\r' || p->s[p->i] == '\n')) {
            if (p->s[p->i] == '\n') p->line++, p->col = 1;
            else p->col++;
            p->i++;
        }
        if (p->i < p->n && p->s[p->i] == '#') {
            while (p->i < p->n && p->s[p->i] != '\n') p->i++;
            continue;
        }
        break;
    }
    tok t = {T_EOF, p->s + p->i, 0, p->line, p->col};
    if (p->i >= p->n) {
        p->cur = t;
        return;
    }
    char c = p->s[p->i];
    size_t j = p->i;
    if (c == '"' || c == '\'') {
        j++;
        while (j < p->n && p->s[j] != c && p->s[j] != '\n') j += (p->s[j] == '\\' && j + 1 < p->n) ? 2 : 1;
        t.type = T_STR;
        if (j < p->n && p->s[j] == c) j++;
        else t.type = T_PUNCT, t.len = 0; /* unterminated: reported by whoever expected a value */
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
        while (j < p->n && ((p->s[j] >= 'a' && p->s[j] <= 'z') || (p->s[j] >= 'A' && p->s[j] <= 'Z') ||
                            (p->s[j] >= '0' && p->s[j] <= '9') || p->s[j] == '_' || p->s[j] == '.'))
            j++;
        t.type = T_IDENT;
    } else if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.') {
        j++;
        while (j < p->n && ((p->s[j] >= '0' && p->s[j] <= '9') || p->s[j] == '.' || p->s[j] == 'e' ||
                            p->s[j] == 'E' || p->s[j] == 'x' || p->s[j] == 'X' ||
                            ((p->s[j] == '-' || p->s[j] == '+') && (p->s[j - 1] == 'e' || p->s[j - 1] == 'E')) ||
                            (p->s[j] >= 'a' && p->s[j] <= 'f') || (p->s[j] >= 'A' && p->s[j] <= 'F')))
            j++;
        t.type = T_NUM;
    } else {
        j++;
        t.type = T_PUNCT;
    }
    if (t.len == 0 && !(t.type == T_PUNCT && j > p->i + 1)) t.len = j - p->i;
    if (t.type == T_PUNCT && t.len == 0) t.len = 1; /* an unterminated string: its quote */
    p->col += (int)(j - p->i);
    p->i = j;
    p->cur = t;
}

static bool is_punct(const tok *t, char c) { return t->type == T_PUNCT && t->len == 1 && t->p[0] == c; }
static bool tok_is(const tok *t, const char *w) { return t->len == strlen(w) && !memcmp(t->p, w, t->len); }

static void tok_text(const tok *t, char *buf, size_t n)
{
    if (t->type == T_EOF) {
        snprintf(buf, n, "end of file");
        return;
    }
    size_t k = t->len < n - 1 ? t->len : n - 1;
    if (k > 40) k = 40;
    memcpy(buf, t->p, k);
    buf[k] = '\0';
}

static rs_status unexpected(P *p, const char *wanted)
{
    char got[48];
    tok_text(&p->cur, got, sizeof got);
    return fail(p, &p->cur, "expected %s, found '%s'", wanted, got);
}

/* ---- values ---- */

/* After a field name: the optional ':' before a scalar. */
static void colon(P *p)
{
    if (is_punct(&p->cur, ':')) advance(p);
}

static rs_status read_str(P *p, char *buf, size_t n)
{
    colon(p);
    if (p->cur.type != T_STR) return unexpected(p, "a \"quoted string\"");
    size_t k = 0;
    for (size_t j = 1; j + 1 < p->cur.len; j++) {
        char c = p->cur.p[j];
        if (c == '\\' && j + 2 < p->cur.len) {
            c = p->cur.p[++j];
            if (c == 'n') c = '\n';
            else if (c == 't') c = '\t';
        }
        if (k + 1 >= n) return fail(p, &p->cur, "string too long (at most %s bytes)", n == 64 ? "63" : "127", NULL);
        buf[k++] = c;
    }
    buf[k] = '\0';
    advance(p);
    return RS_OK;
}

/* A file's name in the model's folder: a string with no '/' and not "." or "..". */
static rs_status read_file_name(P *p, char *buf, size_t n)
{
    colon(p);
    tok at = p->cur;
    rs_status st = read_str(p, buf, n);
    if (st) return st;
    if (!buf[0] || strchr(buf, '/') || !strcmp(buf, ".") || !strcmp(buf, ".."))
        return fail(p, &at, "'%s' is not a file name in the model's folder (no '/', not . or ..)", buf, NULL);
    return RS_OK;
}

static rs_status read_int_tok(P *p, int64_t lo, int64_t hi, int64_t *v)
{
    if (p->cur.type != T_NUM) return unexpected(p, "an integer");
    char buf[48];
    tok_text(&p->cur, buf, sizeof buf); /* at most 40 characters: a longer number is refused, not cut */
    errno = 0;
    char *end;
    long long x = strtoll(buf, &end, 0);
    if (*end || errno || p->cur.len != strlen(buf)) return fail(p, &p->cur, "'%s' is not an integer", buf, NULL);
    if (x < lo || x > hi) {
        char r[64];
        snprintf(r, sizeof r, "%lld..%lld", (long long)lo, (long long)hi);
        return fail(p, &p->cur, "%s is out of range (%s)", buf, r);
    }
    *v = x;
    advance(p);
    return RS_OK;
}

static rs_status read_int(P *p, int64_t lo, int64_t hi, int64_t *v)
{
    colon(p);
    return read_int_tok(p, lo, hi, v);
}

static rs_status read_bool(P *p, bool *v)
{
    colon(p);
    if (p->cur.type == T_IDENT && (tok_is(&p->cur, "true") || tok_is(&p->cur, "True"))) *v = true;
    else if (p->cur.type == T_IDENT && (tok_is(&p->cur, "false") || tok_is(&p->cur, "False"))) *v = false;
    else if (p->cur.type == T_NUM && tok_is(&p->cur, "1")) *v = true;
    else if (p->cur.type == T_NUM && tok_is(&p->cur, "0")) *v = false;
    else return unexpected(p, "true or false");
    advance(p);
    return RS_OK;
}

static rs_status read_ident(P *p, char *buf, size_t n)
{
    colon(p);
    if (p->cur.type != T_IDENT || p->cur.len >= n) return unexpected(p, "an enum name");
    memcpy(buf, p->cur.p, p->cur.len);
    buf[p->cur.len] = '\0';
    advance(p);
    return RS_OK;
}

/* A repeated integer: `dims: [1, 2]`, or one `dims: 3` (repeated fields may appear several times).
 * Appends to out[*count] up to max. */
static rs_status read_ints(P *p, int64_t lo, int64_t hi, int64_t *out, int *count, int max, const char *field)
{
    colon(p);
    bool list = is_punct(&p->cur, '[');
    if (list) advance(p);
    while (!(list && is_punct(&p->cur, ']'))) {
        if (*count >= max) {
            char m[16];
            snprintf(m, sizeof m, "%d", max);
            return fail(p, &p->cur, "too many values for %s (at most %s)", field, m);
        }
        rs_status st = read_int_tok(p, lo, hi, &out[*count]);
        if (st) return st;
        (*count)++;
        if (!list) return RS_OK;
        if (is_punct(&p->cur, ',')) advance(p);
        else if (!is_punct(&p->cur, ']')) return unexpected(p, "',' or ']'");
    }
    advance(p);
    return RS_OK;
}

/* ---- messages ---- */

typedef rs_status (*field_fn)(P *p, const tok *name, void *ctx);

static rs_status skip_value(P *p);

/* Fields until close (or end of file at depth 0), each handed to fn. */
static rs_status body(P *p, field_fn fn, void *ctx, char close)
{
    for (;;) {
        if (close ? is_punct(&p->cur, close) : p->cur.type == T_EOF) break;
        if (p->cur.type == T_EOF) return unexpected(p, close == '}' ? "'}'" : "'>'");
        if (p->cur.type != T_IDENT) return unexpected(p, "a field name");
        tok name = p->cur;
        advance(p);
        rs_status st = fn(p, &name, ctx);
        if (st) return st;
        if (is_punct(&p->cur, ',') || is_punct(&p->cur, ';')) advance(p);
    }
    if (close) advance(p);
    return RS_OK;
}

static rs_status message(P *p, field_fn fn, void *ctx)
{
    colon(p);
    char close;
    if (is_punct(&p->cur, '{')) close = '}';
    else if (is_punct(&p->cur, '<')) close = '>';
    else return unexpected(p, "'{'");
    if (++p->depth > MAX_DEPTH) return fail(p, &p->cur, "messages nested too deep (more than 32 levels)", NULL, NULL);
    advance(p);
    rs_status st = body(p, fn, ctx, close);
    p->depth--;
    return st;
}

/* A repeated message: `input [ {...}, {...} ]` or `input {...}`; begin gives each element's target. */
typedef void *(*begin_fn)(P *p, const tok *at, void *ctx);

static rs_status messages(P *p, field_fn fn, begin_fn begin, void *ctx)
{
    colon(p);
    bool list = is_punct(&p->cur, '[');
    if (list) advance(p);
    while (!(list && is_punct(&p->cur, ']'))) {
        tok at = p->cur;
        void *el = begin(p, &at, ctx);
        if (!el) return p->err ? p->err->code : RS_ERR_FORMAT;
        rs_status st = message(p, fn, el);
        if (st) return st;
        if (!list) return RS_OK;
        if (is_punct(&p->cur, ',')) advance(p);
        else if (!is_punct(&p->cur, ']')) return unexpected(p, "',' or ']'");
    }
    advance(p);
    return RS_OK;
}

static rs_status skip_field(P *p, const tok *name, void *ctx)
{
    (void)name, (void)ctx;
    return skip_value(p);
}

static rs_status skip_value(P *p)
{
    if (is_punct(&p->cur, ':')) advance(p);
    if (is_punct(&p->cur, '{') || is_punct(&p->cur, '<')) return message(p, skip_field, NULL);
    if (is_punct(&p->cur, '[')) {
        if (++p->depth > MAX_DEPTH) return fail(p, &p->cur, "lists nested too deep (more than 32 levels)", NULL, NULL);
        advance(p);
        while (!is_punct(&p->cur, ']')) {
            rs_status st = skip_value(p);
            if (st) return st;
            if (is_punct(&p->cur, ',')) advance(p);
            else if (!is_punct(&p->cur, ']')) return unexpected(p, "',' or ']'");
        }
        p->depth--;
        advance(p);
        return RS_OK;
    }
    if (p->cur.type == T_STR || p->cur.type == T_NUM || p->cur.type == T_IDENT) {
        advance(p);
        return RS_OK;
    }
    return unexpected(p, "a value");
}

static rs_status unknown(P *p, const tok *name, const char *where, const char *known)
{
    char n[48], w[200];
    tok_text(name, n, sizeof n);
    snprintf(w, sizeof w, "%s (known: %s)", where, known);
    return fail(p, name, "unknown field '%s' in %s", n, w);
}

static bool ignored(const tok *name, const char *const *list)
{
    for (; *list; list++)
        if (tok_is(name, *list)) return true;
    return false;
}

/* ---- the config's message types ---- */

static rs_status f_reshape(P *p, const tok *name, void *ctx)
{
    rs_serve_io *io = ctx;
    if (tok_is(name, "shape"))
        return read_ints(p, -1, (int64_t)1 << 40, io->reshape, &io->reshape_rank, RS_SERVE_MAX_DIMS, "shape");
    return unknown(p, name, "reshape", "shape");
}

static rs_status f_io(P *p, const tok *name, void *ctx)
{
    rs_serve_io *io = ctx;
    static const char *const skip[] = {"format", "is_shape_tensor", "allow_ragged_batch", "is_non_linear_format_io",
                                       NULL};
    if (tok_is(name, "name")) return read_str(p, io->name, sizeof io->name);
    if (tok_is(name, "reshape")) {
        io->has_reshape = true;
        return message(p, f_reshape, io);
    }
    if (tok_is(name, "optional")) return read_bool(p, &io->optional);
    if (tok_is(name, "label_filename")) return read_file_name(p, io->labels, sizeof io->labels);
    if (tok_is(name, "data_type")) {
        colon(p);
        tok at = p->cur;
        char t[32];
        rs_status st = read_ident(p, t, sizeof t);
        if (st) return st;
        io->dtype = rs_serve_dtype_from_config(t);
        if (io->dtype == RS_SERVE_INVALID)
            return fail(p, &at, "unknown data_type '%s' (TYPE_FP32, TYPE_INT64, TYPE_INT32, TYPE_UINT8, ...)", t, NULL);
        return RS_OK;
    }
    if (tok_is(name, "dims")) return read_ints(p, -1, (int64_t)1 << 40, io->dims, &io->rank, RS_SERVE_MAX_DIMS, "dims");
    if (ignored(name, skip)) return skip_value(p);
    return unknown(p, name, "input/output", "name, data_type, dims");
}

static void *begin_input(P *p, const tok *at, void *ctx)
{
    rs_serve_config *c = ctx;
    if (c->ninputs >= RS_SERVE_MAX_IO) {
        fail(p, at, "too many inputs (at most %s)", RS_SERVE_MAX_IO_TEXT, NULL);
        return NULL;
    }
    return &c->inputs[c->ninputs++];
}

static void *begin_output(P *p, const tok *at, void *ctx)
{
    rs_serve_config *c = ctx;
    if (c->noutputs >= RS_SERVE_MAX_IO) {
        fail(p, at, "too many outputs (at most %s)", RS_SERVE_MAX_IO_TEXT, NULL);
        return NULL;
    }
    return &c->outputs[c->noutputs++];
}

/* Each instance_group element counts 1 instance unless its count says otherwise (Triton's default). */
static rs_status f_group(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    static const char *const skip[] = {"name", "gpus", "profile", "passive", "host_policy", "secondary_devices",
                                       "rate_limiter", NULL};
    if (tok_is(name, "count")) {
        int64_t v;
        rs_status st = read_int(p, 1, 1024, &v);
        if (!st) c->instance_count += (int)v - 1;
        return st;
    }
    if (tok_is(name, "kind")) {
        colon(p);
        tok at = p->cur;
        rs_status st = read_ident(p, c->instance_kind, sizeof c->instance_kind);
        if (st) return st;
        const char *k = c->instance_kind;
        if (strcmp(k, "KIND_CPU") && strcmp(k, "KIND_GPU") && strcmp(k, "KIND_AUTO") && strcmp(k, "KIND_MODEL"))
            return fail(p, &at, "unknown kind '%s' (KIND_AUTO, KIND_CPU, KIND_GPU, KIND_MODEL)", k, NULL);
        return RS_OK;
    }
    if (ignored(name, skip)) return skip_value(p);
    return unknown(p, name, "instance_group", "count, kind");
}

static void *begin_group(P *p, const tok *at, void *ctx)
{
    (void)p, (void)at;
    rs_serve_config *c = ctx;
    if (c->instance_count >= 1024) {
        fail(p, at, "more than %s instances", "1024", NULL);
        return NULL;
    }
    c->instance_count++;
    return c;
}

static rs_status f_queue(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    static const char *const skip[] = {"timeout_action", "default_timeout_microseconds", "allow_timeout_override", NULL};
    if (tok_is(name, "max_queue_size")) return read_int(p, 0, (int64_t)1 << 30, &c->max_queue_size);
    if (ignored(name, skip)) return skip_value(p);
    return unknown(p, name, "default_queue_policy", "max_queue_size");
}

static rs_status f_batching(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    static const char *const skip[] = {"preserve_ordering", "priority_levels", "default_priority_level",
                                       "priority_queue_policy", NULL};
    if (tok_is(name, "preferred_batch_size")) {
        int64_t v[RS_SERVE_MAX_PREFERRED];
        int n = c->npreferred;
        for (int i = 0; i < n; i++) v[i] = c->preferred[i];
        rs_status st = read_ints(p, 1, 1 << 20, v, &n, RS_SERVE_MAX_PREFERRED, "preferred_batch_size");
        for (int i = 0; i < n; i++) c->preferred[i] = (int)v[i];
        c->npreferred = n;
        return st;
    }
    if (tok_is(name, "max_queue_delay_microseconds")) return read_int(p, 0, (int64_t)1 << 40, &c->max_queue_delay_us);
    if (tok_is(name, "default_queue_policy")) return message(p, f_queue, c);
    if (ignored(name, skip)) return skip_value(p);
    return unknown(p, name, "dynamic_batching", "preferred_batch_size, max_queue_delay_microseconds, default_queue_policy");
}

static rs_status f_txn(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    if (tok_is(name, "decoupled")) return read_bool(p, &c->decoupled);
    return unknown(p, name, "model_transaction_policy", "decoupled");
}

static rs_status f_latest(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    if (tok_is(name, "num_versions")) {
        int64_t v;
        rs_status st = read_int(p, 1, 1 << 20, &v);
        c->latest_n = (int)v;
        return st;
    }
    return unknown(p, name, "version_policy.latest", "num_versions");
}

static rs_status f_specific(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    if (tok_is(name, "versions"))
        return read_ints(p, 1, (int64_t)1 << 40, c->versions, &c->nversions, RS_SERVE_MAX_VERSIONS, "versions");
    return unknown(p, name, "version_policy.specific", "versions");
}

static rs_status f_none(P *p, const tok *name, void *ctx)
{
    (void)ctx;
    return unknown(p, name, "version_policy.all", "no fields");
}

static rs_status f_vpolicy(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    if (tok_is(name, "latest")) {
        c->vpolicy = RS_SERVE_VP_LATEST;
        return message(p, f_latest, c);
    }
    if (tok_is(name, "all")) {
        c->vpolicy = RS_SERVE_VP_ALL;
        return message(p, f_none, c);
    }
    if (tok_is(name, "specific")) {
        c->vpolicy = RS_SERVE_VP_SPECIFIC;
        return message(p, f_specific, c);
    }
    return unknown(p, name, "version_policy", "latest, all, specific");
}

/* One parameters entry (Triton's map<string, ModelParameter>): key and value { string_value } in either
 * order; ringside acts on "ranks" and "ranks_mode", other keys are read and kept out. */
typedef struct param {
    rs_serve_config *c;
    char key[64], val[64];
    tok at;                 /* where the value was, for its error */
    bool have_val;
} param;

static rs_status f_pvalue(P *p, const tok *name, void *ctx)
{
    param *q = ctx;
    if (tok_is(name, "string_value")) {
        q->at = p->cur;
        q->have_val = true;
        return read_str(p, q->val, sizeof q->val);
    }
    return skip_value(p);
}

static rs_status param_apply(P *p, param *q)
{
    if (!q->have_val || !q->key[0]) return RS_OK;
    if (!strcmp(q->key, "ranks")) {
        char *end;
        long v = strtol(q->val, &end, 10);
        if (!q->val[0] || *end || v < 1 || v > 64)
            return fail(p, &q->at, "parameter ranks is '%s' (a count of rank processes, 1..64, as a string: \"2\")",
                        q->val, NULL);
        q->c->ranks = (int)v;
    } else if (!strcmp(q->key, "ranks_mode")) {
        if (strcmp(q->val, "pipeline") && strcmp(q->val, "tensor"))
            return fail(p, &q->at, "parameter ranks_mode is '%s' (\"pipeline\" or \"tensor\")", q->val, NULL);
        strcpy(q->c->ranks_mode, strcmp(q->val, "tensor") ? "pipeline" : "tensor");
    }
    return RS_OK;
}

static rs_status f_param(P *p, const tok *name, void *ctx)
{
    param *q = ctx;
    rs_status st;
    if (tok_is(name, "key")) st = read_str(p, q->key, sizeof q->key);
    else if (tok_is(name, "value")) st = message(p, f_pvalue, q);
    else return unknown(p, name, "parameters", "key, value");
    return st ? st : param_apply(p, q);
}

static void *begin_param(P *p, const tok *at, void *ctx)
{
    (void)p, (void)at;
    param *q = ctx;
    rs_serve_config *c = q->c;
    *q = (param){.c = c};
    return q;
}

/* ---- ensemble_scheduling { step [ { model_name model_version input_map output_map } ] } ---- */

typedef struct map_ctx {
    rs_serve_step *st;
    bool out;
} map_ctx;

static rs_status f_map(P *p, const tok *name, void *ctx)
{
    map_ctx *m = ctx;
    int k = (m->out ? m->st->nout : m->st->nin) - 1;
    char *key = m->out ? m->st->out[k].key : m->st->in[k].key, *val = m->out ? m->st->out[k].value : m->st->in[k].value;
    if (tok_is(name, "key")) return read_str(p, key, RS_SERVE_NAME_MAX);
    if (tok_is(name, "value")) return read_str(p, val, RS_SERVE_NAME_MAX);
    return unknown(p, name, m->out ? "output_map" : "input_map", "key, value");
}

static void *begin_map(P *p, const tok *at, void *ctx)
{
    map_ctx *m = ctx;
    int *n = m->out ? &m->st->nout : &m->st->nin;
    if (*n >= RS_SERVE_MAX_IO) {
        fail(p, at, "too many entries in a step's map (at most %s)", RS_SERVE_MAX_IO_TEXT, NULL);
        return NULL;
    }
    (*n)++;
    return m;
}

static rs_status f_step(P *p, const tok *name, void *ctx)
{
    rs_serve_step *st = ctx;
    if (tok_is(name, "model_name")) return read_str(p, st->model, sizeof st->model);
    if (tok_is(name, "model_version")) return read_int(p, -1, INT64_MAX, &st->version);
    if (tok_is(name, "input_map") || tok_is(name, "output_map")) {
        map_ctx m = {.st = st, .out = tok_is(name, "output_map")};
        return messages(p, f_map, begin_map, &m);
    }
    return unknown(p, name, "step", "model_name, model_version, input_map, output_map");
}

static void *begin_step(P *p, const tok *at, void *ctx)
{
    rs_serve_config *c = ctx;
    if (c->nsteps >= RS_SERVE_MAX_STEPS) {
        fail(p, at, "too many ensemble steps (at most %s)", "8", NULL);
        return NULL;
    }
    rs_serve_step *st = &c->steps[c->nsteps++];
    st->version = -1;
    return st;
}

static rs_status f_ensemble(P *p, const tok *name, void *ctx)
{
    if (tok_is(name, "step")) return messages(p, f_step, begin_step, ctx);
    return unknown(p, name, "ensemble_scheduling", "step");
}

/* ---- sequence_batching { direct { } control_input [ { name control [ { kind ..._false_true } ] } ] } ---- */

/* fp32_false_true, int32_false_true, bool_false_true: [ false, true ] as numbers (or true/false) */
static rs_status read_pair(P *p, double *out)
{
    colon(p);
    if (!is_punct(&p->cur, '[')) return unexpected(p, "'[' (a list of two values)");
    advance(p);
    for (int k = 0; k < 2; k++) {
        char b[48];
        tok_text(&p->cur, b, sizeof b);
        char *end;
        out[k] = !strcmp(b, "true") ? 1.0 : !strcmp(b, "false") ? 0.0 : strtod(b, &end);
        if (p->cur.type != T_IDENT && (p->cur.type != T_NUM || *end)) return unexpected(p, "a number");
        advance(p);
        if (k == 0 && is_punct(&p->cur, ',')) advance(p);
    }
    if (!is_punct(&p->cur, ']')) return unexpected(p, "']' after two values");
    advance(p);
    return RS_OK;
}

static rs_status f_control(P *p, const tok *name, void *ctx)
{
    rs_serve_io *io = ctx;
    if (tok_is(name, "kind")) {
        colon(p);
        static const char *const kinds[] = {"", "CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY",
                                            "CONTROL_SEQUENCE_CORRID"};
        for (int k = 1; k < 5; k++)
            if (tok_is(&p->cur, kinds[k])) {
                io->control = (rs_serve_control)k;
                advance(p);
                return RS_OK;
            }
        return unexpected(p, "CONTROL_SEQUENCE_START, _END, _READY or _CORRID");
    }
    if (tok_is(name, "int32_false_true") || tok_is(name, "fp32_false_true") || tok_is(name, "bool_false_true")) {
        io->dtype = tok_is(name, "int32_false_true") ? RS_SERVE_INT32 : tok_is(name, "fp32_false_true") ? RS_SERVE_FP32
                                                                                                      : RS_SERVE_BOOL;
        return read_pair(p, io->false_true);
    }
    if (tok_is(name, "data_type")) {
        char t[32];
        tok at = p->cur;
        rs_status st = read_ident(p, t, sizeof t);
        if (!st && (io->dtype = rs_serve_dtype_from_config(t)) == RS_SERVE_INVALID)
            return fail(p, &at, "unknown data_type '%s'", t, NULL);
        return st;
    }
    return unknown(p, name, "control", "kind, int32_false_true, fp32_false_true, bool_false_true, data_type");
}

static void *begin_control(P *p, const tok *at, void *ctx)
{
    (void)p, (void)at;
    return ctx; /* one control per input is what ringside fills; a second overwrites the first */
}

static rs_status f_control_input(P *p, const tok *name, void *ctx)
{
    rs_serve_io *io = ctx;
    if (tok_is(name, "name")) return read_str(p, io->name, sizeof io->name);
    if (tok_is(name, "control")) return messages(p, f_control, begin_control, io);
    return unknown(p, name, "control_input", "name, control");
}

static void *begin_control_input(P *p, const tok *at, void *ctx)
{
    rs_serve_io *io = begin_input(p, at, ctx);
    if (io) {
        io->rank = 1;
        io->dims[0] = 1;
    }
    return io;
}

static rs_status f_sequence(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    if (tok_is(name, "direct")) return skip_value(p);
    if (tok_is(name, "oldest") || tok_is(name, "state")) {
        *(tok_is(name, "oldest") ? &c->sequence_oldest : &c->sequence_state) = true;
        return skip_value(p);
    }
    if (tok_is(name, "max_sequence_idle_microseconds")) return read_int(p, 0, INT64_MAX / 1000, &c->max_sequence_idle_us);
    if (tok_is(name, "control_input")) return messages(p, f_control_input, begin_control_input, c);
    return unknown(p, name, "sequence_batching", "direct, oldest, max_sequence_idle_microseconds, control_input, state");
}

static rs_status f_cache(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    if (tok_is(name, "enable")) return read_bool(p, &c->response_cache);
    return unknown(p, name, "response_cache", "enable");
}

static rs_status f_model(P *p, const tok *name, void *ctx)
{
    rs_serve_config *c = ctx;
    static const char *const skip[] = {"optimization", "cc_model_filenames", "model_operations", "metric_tags",
                                       "runtime", "batch_input", "batch_output", "model_repository_agents", NULL};
    if (tok_is(name, "default_model_filename"))
        return read_file_name(p, c->default_model_filename, sizeof c->default_model_filename);
    if (tok_is(name, "response_cache")) return message(p, f_cache, c);
    if (tok_is(name, "ensemble_scheduling")) {
        c->ensemble = true;
        return message(p, f_ensemble, c);
    }
    if (tok_is(name, "sequence_batching")) {
        c->sequence_batching = true;
        return message(p, f_sequence, c);
    }
    if (tok_is(name, "model_warmup")) {
        c->warmup = true;
        return skip_value(p);
    }
    if (tok_is(name, "name")) return read_str(p, c->name, sizeof c->name);
    if (tok_is(name, "platform")) return read_str(p, c->platform, sizeof c->platform);
    if (tok_is(name, "backend")) return read_str(p, c->backend, sizeof c->backend);
    if (tok_is(name, "max_batch_size")) {
        int64_t v;
        rs_status st = read_int(p, 0, 1 << 20, &v);
        c->max_batch_size = (int)v;
        return st;
    }
    if (tok_is(name, "input")) return messages(p, f_io, begin_input, c);
    if (tok_is(name, "output")) return messages(p, f_io, begin_output, c);
    if (tok_is(name, "instance_group")) return messages(p, f_group, begin_group, c);
    if (tok_is(name, "dynamic_batching")) {
        c->dynamic_batching = true;
        return message(p, f_batching, c);
    }
    if (tok_is(name, "model_transaction_policy")) return message(p, f_txn, c);
    if (tok_is(name, "version_policy")) return message(p, f_vpolicy, c);
    if (tok_is(name, "parameters")) {
        param q = {.c = c};
        return messages(p, f_param, begin_param, &q);
    }
    if (ignored(name, skip)) return skip_value(p);
    return unknown(p, name, "the model config",
                   "name, platform, backend, max_batch_size, input, output, instance_group, dynamic_batching, "
                   "model_transaction_policy, version_policy, parameters");
}

void rs_serve_config_init(rs_serve_config *c)
{
    memset(c, 0, sizeof *c);
    c->latest_n = 1;
}

rs_status rs_serve_config_parse(const char *text, size_t n, const char *file, rs_serve_config *c, rs_err *err)
{
    rs_serve_config_init(c);
    P p = {.s = text, .file = file ? file : "config.pbtxt", .n = n, .line = 1, .col = 1, .err = err};
    advance(&p);
    rs_status st = body(&p, f_model, c, 0);
    if (st) return st;
    if (c->vpolicy == RS_SERVE_VP_SPECIFIC && c->nversions == 0)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: version_policy specific names no versions (versions: [1])", p.file);
    for (int i = 0; i < c->ninputs + c->noutputs; i++) {
        const rs_serve_io *io = i < c->ninputs ? &c->inputs[i] : &c->outputs[i - c->ninputs];
        if (!io->name[0])
            return rs_err_set(err, RS_ERR_FORMAT, "%s: an %s has no name (name: \"...\")", p.file,
                              i < c->ninputs ? "input" : "output");
        if (io->dtype == RS_SERVE_INVALID)
            return rs_err_set(err, RS_ERR_FORMAT, "%s: %s '%s' has no data_type (data_type: TYPE_FP32)", p.file,
                              i < c->ninputs ? "input" : "output", io->name);
    }
    return RS_OK;
}
