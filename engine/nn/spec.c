/* Parser for model specs (see spec.h). A hand-written recursive descent over a tiny grammar; every
 * error names the word, what was expected, and a near miss when there is one. */
#include "spec.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct parser {
    const char *s;
    size_t pos;
    size_t *err_pos;
    rs_err *err;
} parser;


static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32) return 99;
    int d[33][33];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = c < del ? (c < ins ? c : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

const char *rs_spec_near_miss(const char *word, const char *const *cands, int n)
{
    const char *best = NULL;
    int bd = 3;
    for (int i = 0; i < n; i++) {
        int d = edit_distance(word, cands[i]);
        if (d < bd) {
            bd = d;
            best = cands[i];
        }
    }
    return best;
}

/* Made once from the descriptors, read-only after: every caller sees the same list. */
static struct {
    pthread_once_t once;
    const char *w[RS_LAYER_KIND_COUNT + 5];
} spec_words = {.once = PTHREAD_ONCE_INIT};

static void make_spec_words(void)
{
    static const char *const own[] = {"res[", "ctx=", "[", "]"};
    int n = 0;
    for (const char *const *w = rs_layer_words(); *w; w++) spec_words.w[n++] = *w;
    for (size_t i = 0; i < sizeof own / sizeof *own; i++) spec_words.w[n++] = own[i];
}

const char *const *rs_spec_words(void)
{
    pthread_once(&spec_words.once, make_spec_words);
    return spec_words.w;
}

static rs_status fail(parser *p, size_t at, rs_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static rs_status fail(parser *p, size_t at, rs_status code, const char *fmt, ...)
{
    char msg[RS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->err_pos) *p->err_pos = at;
    return rs_err_set(p->err, code, "%s", msg);
}

static void skip_ws(parser *p)
{
    while (p->s[p->pos] && isspace((unsigned char)p->s[p->pos])) p->pos++;
}

/* A word: letters, digits, '_', '.', '-', 'x' runs; stops at space, '(', ')', ',', '=', '[', ']'. */
static size_t word_end(const char *s, size_t i)
{
    while (s[i] && !isspace((unsigned char)s[i]) && !strchr("(),=[]", s[i])) i++;
    return i;
}

static void copy_word(const parser *p, size_t a, size_t b, char *buf, size_t n)
{
    size_t len = b - a < n - 1 ? b - a : n - 1;
    memcpy(buf, p->s + a, len);
    buf[len] = '\0';
}

static bool parse_int(const char *w, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(w, &end, 10);
    if (errno || end == w || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* "3" -> (3,3); "3x5" -> (3,5) */
static bool parse_pair(const char *w, long lo, long hi, int *a, int *b)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s", w);
    char *x = strchr(tmp, 'x');
    long va, vb;
    if (!x) {
        if (!parse_int(tmp, lo, hi, &va)) return false;
        *a = *b = (int)va;
        return true;
    }
    *x = '\0';
    if (!parse_int(tmp, lo, hi, &va) || !parse_int(x + 1, lo, hi, &vb)) return false;
    *a = (int)va;
    *b = (int)vb;
    return true;
}

static bool parse_bool(const char *w, bool *out)
{
    if (!strcmp(w, "1") || !strcmp(w, "true") || !strcmp(w, "on") || !strcmp(w, "yes")) *out = true;
    else if (!strcmp(w, "0") || !strcmp(w, "false") || !strcmp(w, "off") || !strcmp(w, "no")) *out = false;
    else return false;
    return true;
}

/* Options a layer accepts, by position first then by name: its descriptor's list. */
static const char *const *layer_opts(rs_layer_kind k, int *n)
{
    const char *const *o = rs_layer_ops_for(k)->opts;
    *n = 0;
    while (o && o[*n]) (*n)++;
    return o;
}

static rs_status set_layer_opt(parser *p, rs_layer_cfg *c, const char *key, const char *val, size_t at,
                               bool *stride_set)
{
    const char *kind = rs_layer_kind_name(c->kind);
    if (!strcmp(key, "out")) {
        long v;
        if (!parse_int(val, 1, 1 << 24, &v))
            return fail(p, at, RS_ERR_ARG, "%s: '%s' is not a valid size; expected a whole number >= 1", kind, val);
        c->out = (int)v;
    } else if (!strcmp(key, "k")) {
        if (!parse_pair(val, 1, 1024, &c->kh, &c->kw))
            return fail(p, at, RS_ERR_ARG, "%s: kernel '%s' is not valid; expected N or HxW, e.g. 3 or 3x5", kind, val);
        if (!*stride_set && c->kind != RS_LAYER_CONV2D) { /* a pool's stride follows its kernel */
            c->sh = c->kh;
            c->sw = c->kw;
        }
    } else if (!strcmp(key, "stride")) {
        if (!parse_pair(val, 1, 1024, &c->sh, &c->sw))
            return fail(p, at, RS_ERR_ARG, "%s: stride '%s' is not valid; expected N or HxW >= 1", kind, val);
        *stride_set = true;
    } else if (!strcmp(key, "pad")) {
        if (!parse_pair(val, 0, 1024, &c->ph, &c->pw))
            return fail(p, at, RS_ERR_ARG, "%s: padding '%s' is not valid; expected N or HxW >= 0", kind, val);
    } else if (!strcmp(key, "bias")) {
        if (!parse_bool(val, &c->bias))
            return fail(p, at, RS_ERR_ARG, "%s: bias='%s' is not valid; expected 1 or 0", kind, val);
    } else if (!strcmp(key, "p")) {
        char *end;
        double v = strtod(val, &end);
        if (end == val || *end || !(v >= 0.0 && (float)v < 1.0f))
            return fail(p, at, RS_ERR_ARG, "dropout: p='%s' is not valid; expected a number in [0, 1)", val);
        c->p = (float)v;
    } else if (!strcmp(key, "vocab")) {
        long v;
        if (!parse_int(val, 1, 1 << 24, &v))
            return fail(p, at, RS_ERR_ARG, "%s: vocabulary '%s' is not valid; expected a whole number >= 1", kind, val);
        c->vocab = (int)v;
    } else if (!strcmp(key, "heads")) {
        long v;
        if (!parse_int(val, 1, 4096, &v))
            return fail(p, at, RS_ERR_ARG, "%s: heads '%s' is not valid; expected a whole number >= 1", kind, val);
        c->heads = (int)v;
    } else if (!strcmp(key, "approx")) {
        if (!strcmp(val, "tanh")) c->approx_tanh = true;
        else if (!strcmp(val, "none")) c->approx_tanh = false;
        else return fail(p, at, RS_ERR_ARG, "gelu: '%s' is not an approximation; expected gelu(tanh) or gelu(none)", val);
    } else if (!strcmp(key, "std")) {
        char *end;
        double v = strtod(val, &end);
        if (end == val || *end || !(v > 0.0 && v < 10.0))
            return fail(p, at, RS_ERR_ARG, "%s: std='%s' is not valid; expected a small number > 0, e.g. 0.02", kind, val);
        c->init_std = (float)v;
    } else if (!strcmp(key, "tie")) {
        if (strlen(val) >= sizeof c->tie || !strchr(val, '.'))
            return fail(p, at, RS_ERR_ARG, "%s: tie='%s' is not a parameter name; expected LAYER.NAME, e.g. tie=0.wte",
                        kind, val);
        snprintf(c->tie, sizeof c->tie, "%s", val);
    } else if (!strcmp(key, "eps")) {
        char *end;
        double v = strtod(val, &end);
        if (end == val || *end || !(v > 0.0 && v < 1.0))
            return fail(p, at, RS_ERR_ARG, "layernorm: eps='%s' is not valid; expected a small number > 0", val);
        c->eps = (float)v;
    }
    return RS_OK;
}

static rs_status parse_layer_at(parser *p, rs_layer_cfg *cfg)
{
    skip_ws(p);
    size_t a = p->pos, b = word_end(p->s, a);
    char name[64];
    copy_word(p, a, b, name, sizeof name);
    rs_layer_kind which = rs_layer_kind_by_name(name);
    if (which == RS_LAYER_KIND_COUNT) {
        const char *const *names = rs_layer_names();
        int nn = 0;
        while (names[nn]) nn++;
        const char *near = rs_spec_near_miss(name, names, nn);
        if (near)
            return fail(p, a, RS_ERR_ARG, "unknown layer '%s' (did you mean '%s'?)", name, near);
        return fail(p, a, RS_ERR_ARG,
                    "unknown layer '%s'; layers are %s; res[ ... ] adds a block's input to its output", name,
                    rs_layer_synopses());
    }
    *cfg = rs_layer_cfg_default(which);
    const rs_layer_ops *ops = rs_layer_ops_for(which);
    p->pos = b;
    int nopts;
    const char *const *opts = layer_opts(cfg->kind, &nopts);
    int npos = 0;
    bool stride_set = false;
    if (p->s[p->pos] == '(') {
        p->pos++;
        for (;;) {
            skip_ws(p);
            if (p->s[p->pos] == ')') {
                p->pos++;
                break;
            }
            size_t ka = p->pos, kb = word_end(p->s, ka);
            if (kb == ka)
                return fail(p, ka, RS_ERR_ARG, "%s: expected an argument or ')' here", name);
            char key[64], val[64];
            copy_word(p, ka, kb, key, sizeof key);
            p->pos = kb;
            size_t vat = ka;
            if (p->s[p->pos] == '=') {
                p->pos++;
                vat = p->pos;
                size_t vb = word_end(p->s, vat);
                copy_word(p, vat, vb, val, sizeof val);
                p->pos = vb;
                bool known = false;
                for (int i = 0; i < nopts; i++)
                    if (!strcmp(key, opts[i])) known = true;
                if (!known) {
                    const char *near = nopts ? rs_spec_near_miss(key, opts, nopts) : NULL;
                    if (near) return fail(p, ka, RS_ERR_ARG, "%s: unknown option '%s' (did you mean '%s='?)", name, key, near);
                    return fail(p, ka, RS_ERR_ARG, "%s: unknown option '%s'%s", name, key,
                                nopts ? "" : " (this layer takes no options)");
                }
            } else {
                /* positional */
                if (nopts == 0)
                    return fail(p, ka, RS_ERR_ARG, "%s takes no arguments; write it as plain `%s`", name, name);
                if (npos >= ops->npos)
                    return fail(p, ka, RS_ERR_ARG, "%s: too many arguments at '%s'; name it, e.g. pad=%s", name, key, key);
                snprintf(val, sizeof val, "%s", key);
                snprintf(key, sizeof key, "%s", opts[npos++]);
            }
            rs_status st = set_layer_opt(p, cfg, key, val, vat, &stride_set);
            if (st) return st;
            skip_ws(p);
            if (p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->s[p->pos] == ')') {
                p->pos++;
                break;
            }
            return fail(p, p->pos, RS_ERR_ARG, "%s: expected ',' or ')' here", name);
        }
    }
    const char *missing = ops->missing ? ops->missing(cfg) : NULL;
    if (missing) return fail(p, a, RS_ERR_ARG, "%s", missing);
    return RS_OK;
}

rs_status rs_layer_parse(const char *word, rs_layer_cfg *cfg, size_t *err_pos, rs_err *err)
{
    parser p = {.s = word, .err_pos = err_pos, .err = err};
    rs_status st = parse_layer_at(&p, cfg);
    if (st) return st;
    skip_ws(&p);
    if (p.s[p.pos]) return fail(&p, p.pos, RS_ERR_ARG, "unexpected text after the layer");
    return RS_OK;
}

static bool parse_shape(const char *w, rs_shape *out)
{
    /* "784" or "1x28x28" */
    rs_shape s = {0};
    const char *c = w;
    while (*c) {
        if (s.ndim == 3) return false;
        char *end;
        errno = 0;
        long v = strtol(c, &end, 10);
        if (errno || end == c || v < 1 || v > (1 << 24)) return false;
        s.d[s.ndim++] = v;
        if (*end == 'x') c = end + 1;
        else if (*end == '\0') c = end;
        else return false;
    }
    if (s.ndim == 0 || s.ndim == 2) return false;
    if (rs_shape_numel(&s) > RS_MODEL_MAX_ELEMS) return false; /* each dim <= 2^24: no overflow */
    *out = s;
    return true;
}

const char *rs_spec_activations(char *buf, size_t n)
{
    const char *acts[RS_LAYER_KIND_COUNT];
    int na = 0;
    for (const char *const *w = rs_layer_names(); *w; w++)
        if (rs_layer_ops_for(rs_layer_kind_by_name(*w))->unary_of) acts[na++] = *w;
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < na; i++) {
        int k = snprintf(buf + at, n - at, "%s%s", i == 0 ? "" : i == na - 1 ? " or " : ", ", acts[i]);
        if (k < 0 || at + (size_t)k >= n) break;
        at += (size_t)k;
    }
    return buf;
}

typedef struct spec_opts {
    rs_shape in;
    bool have_in;
    int ctx;          /* seq ctx=T: the input is T tokens */
    rs_layer_kind act;
    float dropout;
} spec_opts;

static rs_status parse_opt(parser *p, size_t a, const char *key, const char *val, spec_opts *o, bool mlp)
{
    static const char *const mlp_keys[] = {"act", "dropout", "in"};
    static const char *const seq_keys[] = {"in", "ctx"};
    if (!mlp && !strcmp(key, "ctx")) {
        long v;
        if (!parse_int(val, 1, 1 << 16, &v))
            return fail(p, a, RS_ERR_ARG, "ctx='%s' is not a context length; expected a whole number >= 1, e.g. ctx=64", val);
        o->ctx = (int)v;
        o->in = (rs_shape){1, {v}};
    } else if (!strcmp(key, "in")) {
        if (!parse_shape(val, &o->in))
            return fail(p, a, RS_ERR_ARG, "in='%s' is not a shape; expected FEATURES or CxHxW, e.g. in=1x28x28", val);
        o->have_in = true;
    } else if (mlp && !strcmp(key, "act")) {
        rs_layer_kind k = rs_layer_kind_by_name(val);
        if (k == RS_LAYER_KIND_COUNT || !rs_layer_ops_for(k)->unary_of) {
            char acts[256];
            return fail(p, a, RS_ERR_ARG, "act='%s' is not an activation; expected %s", val,
                        rs_spec_activations(acts, sizeof acts));
        }
        o->act = k;
    } else if (mlp && !strcmp(key, "dropout")) {
        char *end;
        double v = strtod(val, &end);
        if (end == val || *end || !(v >= 0.0 && (float)v < 1.0f))
            return fail(p, a, RS_ERR_ARG, "dropout='%s' is not valid; expected a number in [0, 1)", val);
        o->dropout = (float)v;
    } else {
        const char *near = mlp ? rs_spec_near_miss(key, mlp_keys, 3) : rs_spec_near_miss(key, seq_keys, 2);
        if (near) return fail(p, a, RS_ERR_ARG, "unknown option '%s' (did you mean '%s='?)", key, near);
        return fail(p, a, RS_ERR_ARG, "unknown option '%s'; %s takes %s", key, mlp ? "mlp" : "seq",
                    mlp ? "act=, dropout=, in=" : "in=, ctx=");
    }
    return RS_OK;
}

/* The next `key=value` word of a preset's options (mlp, gpt) into key and val, *at where it starts;
 * *done at the end of the text. A word that is not key=value is an error naming the preset. */
static rs_status next_option(parser *p, const char *preset, const char *example, char key[64], char val[128],
                             size_t *at, bool *done)
{
    skip_ws(p);
    *done = !p->s[p->pos];
    if (*done) return RS_OK;
    size_t ka = p->pos, kb = word_end(p->s, ka);
    copy_word(p, ka, kb, key, 64);
    if (p->s[kb] != '=')
        return fail(p, ka, RS_ERR_ARG, "%s: expected an option such as %s here, got '%s'", preset, example, key);
    size_t vb = word_end(p->s, kb + 1);
    copy_word(p, kb + 1, vb, val, 128);
    p->pos = vb;
    *at = ka;
    return RS_OK;
}

static rs_status parse_mlp(parser *p, const char *name, rs_device dev, rs_mem *mem, rs_model **out)
{
    skip_ws(p);
    size_t a = p->pos, b = word_end(p->s, a);
    char sizes[256], work[256];
    copy_word(p, a, b, sizes, sizeof sizes);
    memcpy(work, sizes, sizeof work); /* strtok_r cuts its input; messages quote the original */
    p->pos = b;
    long dims[32];
    size_t at[32]; /* where each size starts in the line */
    int nd = 0;
    /* Sizes split at each '-' by hand: strtok would read 784--10 as 784-10. */
    for (size_t i = 0;; nd++) {
        size_t j = i;
        while (sizes[j] && sizes[j] != '-') j++;
        if (nd == 32) return fail(p, a, RS_ERR_ARG, "mlp: at most 32 sizes");
        at[nd] = a + i;
        if (j == i)
            return fail(p, a + i, RS_ERR_ARG, "mlp: an empty size in '%s'%s; expected e.g. 784-256-10", sizes,
                        i > 0 && sizes[j] ? " (two '-' in a row)" : "");
        char t[64];
        snprintf(t, sizeof t, "%.*s", (int)(j - i < 63 ? j - i : 63), sizes + i);
        if (!parse_int(t, 1, LONG_MAX, &dims[nd]))
            return fail(p, a + i, RS_ERR_ARG, "mlp: '%s' in '%s' is not a size; expected e.g. 784-256-10", t, sizes);
        if (!sizes[j]) {
            nd++;
            break;
        }
        i = j + 1;
    }
    /* A typo such as 784-100000000-10 is refused here, with the arithmetic, before anything is allocated. */
    double params = 0;
    int widest = 0;
    for (int k = 0; k + 1 < nd; k++) params += (double)dims[k] * (double)dims[k + 1] + (double)dims[k + 1];
    for (int k = 0; k < nd; k++)
        if (dims[k] > dims[widest]) widest = k;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0, need = params * 4.0 * 2.0;
    if (have > 0 && need > 0.75 * have) {
        char terms[160] = "";
        size_t tn = 0;
        for (int k = 0; k + 1 < nd && tn + 48 < sizeof terms; k++)
            tn += (size_t)snprintf(terms + tn, sizeof terms - tn, "%s%ldx%ld+%ld", k ? " + " : "", dims[k], dims[k + 1],
                                   dims[k + 1]);
        if (nd > 4) snprintf(terms, sizeof terms, "%d layers", nd - 1);
        return fail(p, at[widest], RS_ERR_NOMEM,
                    "mlp: %ld is too large: %s = %.0f parameters, x 4 B x 2 (parameters and gradients) = %.1f GiB, "
                    "more than 3/4 of this machine's %.1f GiB of memory",
                    dims[widest], terms, params, need / (1 << 30), have / (1 << 30));
    }
    if (dims[widest] > (1l << 24))
        return fail(p, at[widest], RS_ERR_ARG, "mlp: %ld is too large: a layer holds at most %ld units", dims[widest],
                    1l << 24);
    if (nd < 2) return fail(p, a, RS_ERR_ARG, "mlp needs at least an input and an output size, e.g. mlp 784-256-10");
    spec_opts o = {.act = RS_LAYER_RELU};
    for (;;) {
        char key[64], val[128];
        size_t ka;
        bool done;
        rs_status st = next_option(p, "mlp", "act=relu", key, val, &ka, &done);
        if (st) return st;
        if (done) break;
        st = parse_opt(p, ka, key, val, &o, true);
        if (st) return st;
    }
    rs_shape in = {1, {dims[0]}};
    if (o.have_in && rs_shape_numel(&o.in) != dims[0])
        return fail(p, a, RS_ERR_SHAPE, "mlp: input size %ld does not match in= (%lld values)", dims[0],
                    (long long)rs_shape_numel(&o.in));
    if (o.have_in) in = o.in;
    rs_model *m = rs_model_new(name, &in, dev, mem);
    if (!m) return rs_err_set(p->err, RS_ERR_NOMEM, "out of memory");
    rs_status st = RS_OK;
    if (in.ndim != 1) {
        rs_layer_cfg f = rs_layer_cfg_default(RS_LAYER_FLATTEN);
        st = rs_model_add(m, &f, p->err);
    }
    for (int i = 1; i < nd && !st; i++) {
        rs_layer_cfg c = rs_layer_cfg_default(RS_LAYER_LINEAR);
        c.out = (int)dims[i];
        st = rs_model_add(m, &c, p->err);
        if (!st) rs_model_layer(m, rs_model_layer_count(m) - 1)->src_pos = a;
        if (i < nd - 1 && !st) {
            rs_layer_cfg act = rs_layer_cfg_default(o.act);
            st = rs_model_add(m, &act, p->err);
            if (o.dropout > 0.0f && !st) {
                rs_layer_cfg d = rs_layer_cfg_default(RS_LAYER_DROPOUT);
                d.p = o.dropout;
                st = rs_model_add(m, &d, p->err);
            }
        }
    }
    if (st) {
        rs_model_free(m);
        return st;
    }
    *out = m;
    return RS_OK;
}

static rs_status parse_seq(parser *p, const char *name, rs_device dev, rs_mem *mem, rs_model **out)
{
    /* Options may come first; layers follow. Read options in a first pass so in= can be anywhere. */
    spec_opts o = {.in = {3, {1, 28, 28}}};
    size_t start = p->pos;
    int paren = 0;
    for (;;) {
        skip_ws(p);
        char c = p->s[p->pos];
        if (!c) break;
        if (strchr("[](),=", c)) {
            paren += (c == '(') - (c == ')');
            p->pos++;
            continue;
        }
        size_t ka = p->pos, kb = word_end(p->s, ka);
        p->pos = kb;
        /* Only key=value words outside any layer's parentheses are model options. */
        if (p->s[kb] != '=' || paren) continue;
        char key[64], val[128];
        copy_word(p, ka, kb, key, sizeof key);
        size_t vb = word_end(p->s, kb + 1);
        copy_word(p, kb + 1, vb, val, sizeof val);
        p->pos = vb;
        rs_status st = parse_opt(p, ka, key, val, &o, false);
        if (st) return st;
    }
    p->pos = start;
    rs_model *m = rs_model_new(name, &o.in, dev, mem);
    if (!m) return rs_err_set(p->err, RS_ERR_NOMEM, "out of memory");
    if (o.ctx) rs_model_set_tokens(m, true);
    int depth = 0, nl = 0;
    rs_status st = RS_OK;
    for (;;) {
        skip_ws(p);
        char c = p->s[p->pos];
        if (!c) break;
        size_t at = p->pos;
        if (c == '[') {
            p->pos++;
            st = rs_model_begin_block(m, p->err);
            depth++;
        } else if (c == ']') {
            if (!depth) {
                st = fail(p, at, RS_ERR_ARG, "']' closes no block");
                break;
            }
            p->pos++;
            st = rs_model_end_block(m, p->err);
            if (st && p->err_pos) *p->err_pos = at;
            depth--;
        } else {
            size_t kb = word_end(p->s, at);
            if (p->s[kb] == '=') { /* a model option, read above */
                p->pos = word_end(p->s, kb + 1);
                continue;
            }
            if (p->s[kb] == '[' && kb - at == 3 && !strncmp(p->s + at, "res", 3)) {
                p->pos = kb + 1;
                st = rs_model_begin_residual(m, p->err);
                depth++;
                if (st) break;
                continue;
            }
            rs_layer_cfg cfg;
            skip_ws(p);
            size_t lpos = p->pos;
            st = parse_layer_at(p, &cfg);
            if (!st) st = rs_model_add(m, &cfg, p->err);
            if (!st) rs_model_layer(m, rs_model_layer_count(m) - 1)->src_pos = lpos;
            nl++;
        }
        if (st) break;
    }
    if (!st && depth) st = fail(p, strlen(p->s), RS_ERR_ARG, "%d block(s) not closed; add ']'", depth);
    if (!st && !nl)
        st = fail(p, p->pos, RS_ERR_ARG, "seq needs layers, e.g. seq conv(16,3,pad=1) relu maxpool(2) flatten linear(10)");
    if (st) {
        rs_model_free(m);
        return st;
    }
    *out = m;
    return RS_OK;
}


/* gpt layers=L heads=H dim=C ctx=T vocab=V [dropout=P]: nanoGPT's GPT-2 model written out in the
 * seq grammar (pre-norm residual blocks of attention and a 4x MLP, a final norm, the head tied to the
 * token embedding, GPT-2's N(0, 0.02) initialisation with the residual projections scaled by
 * 1/sqrt(2L)), so `show` and the spec of a GPT are ordinary layers. */
static rs_status parse_gpt(parser *p, const char *name, rs_device dev, rs_mem *mem, rs_model **out)
{
    static const char *const keys[] = {"layers", "heads", "dim", "ctx", "vocab", "dropout"};
    long v[5] = {4, 4, 128, 64, 0}; /* layers heads dim ctx vocab */
    long hi[5] = {256, 256, 1 << 14, 1 << 16, 1 << 24};
    double drop = 0.0;
    size_t at[6] = {0};
    for (;;) {
        char key[64], val[128];
        size_t ka;
        bool done;
        rs_status st = next_option(p, "gpt", "layers=4", key, val, &ka, &done);
        if (st) return st;
        if (done) break;
        int k = -1;
        for (int i = 0; i < 6; i++)
            if (!strcmp(key, keys[i])) k = i;
        if (k < 0) {
            const char *near = rs_spec_near_miss(key, keys, 6);
            if (near) return fail(p, ka, RS_ERR_ARG, "gpt: unknown option '%s' (did you mean '%s='?)", key, near);
            return fail(p, ka, RS_ERR_ARG, "gpt: unknown option '%s'; gpt takes layers=, heads=, dim=, ctx=, vocab=, dropout=", key);
        }
        at[k] = ka;
        if (k == 5) {
            char *end;
            drop = strtod(val, &end);
            if (end == val || *end || !(drop >= 0.0 && (float)drop < 1.0f))
                return fail(p, ka, RS_ERR_ARG, "gpt: dropout='%s' is not valid; expected a number in [0, 1)", val);
        } else if (!parse_int(val, 1, hi[k], &v[k])) {
            return fail(p, ka, RS_ERR_ARG, "gpt: %s='%s' is not valid; expected a whole number from 1 to %ld", key, val, hi[k]);
        }
    }
    long L = v[0], H = v[1], C = v[2], T = v[3], V = v[4];
    if (!V)
        return fail(p, p->pos, RS_ERR_ARG, "gpt needs vocab=N, the number of distinct tokens (a text data set's "
                    "vocabulary: `show DATA` prints it)");
    if (C % H) return fail(p, at[1] ? at[1] : at[2], RS_ERR_ARG, "gpt: %ld heads do not divide dim=%ld", H, C);
    /* Worst case per block: two residual blocks of ~110 characters; generous. */
    size_t cap = 256 + (size_t)L * 320;
    char *spec = malloc(cap); /* owned here */
    if (!spec) return rs_err_set(p->err, RS_ERR_NOMEM, "out of memory");
    char dr[32] = "";
    if (drop > 0.0) snprintf(dr, sizeof dr, " dropout(%g)", drop);
    double s2 = 0.02 / sqrt(2.0 * (double)L);
    size_t n = (size_t)snprintf(spec, cap, "seq ctx=%ld embed(%ld,%ld,std=0.02)%s", T, V, C, dr);
    for (long i = 0; i < L && n < cap; i++)
        n += (size_t)snprintf(spec + n, cap - n,
                              " res[ layernorm linear(%ld,std=0.02) attn(%ld) linear(%ld,std=%.6g)%s ]"
                              " res[ layernorm linear(%ld,std=0.02) gelu(tanh) linear(%ld,std=%.6g)%s ]",
                              3 * C, H, C, s2, dr, 4 * C, C, s2, dr);
    if (n < cap) n += (size_t)snprintf(spec + n, cap - n, " layernorm linear(%ld,bias=0,tie=0.wte)", V);
    rs_status st;
    if (n >= cap) {
        st = rs_err_set(p->err, RS_ERR_ARG, "gpt: the expanded spec is too long");
    } else {
        parser q = {.s = spec, .pos = 3, .err_pos = NULL, .err = p->err};
        st = parse_seq(&q, name, dev, mem, out);
    }
    free(spec);
    return st;
}

rs_status rs_model_parse_layout(const char *spec, const char *name, rs_device dev, rs_mem *mem, rs_model **out,
                                size_t *err_pos, rs_err *err)
{
    parser p = {.s = spec, .err_pos = err_pos, .err = err};
    *out = NULL;
    skip_ws(&p);
    size_t a = p.pos, b = word_end(spec, a);
    char kind[32];
    copy_word(&p, a, b, kind, sizeof kind);
    p.pos = b;
    rs_model *m = NULL;
    rs_status st;
    if (!strcmp(kind, "mlp")) st = parse_mlp(&p, name, dev, mem, &m);
    else if (!strcmp(kind, "seq")) st = parse_seq(&p, name, dev, mem, &m);
    else if (!strcmp(kind, "gpt")) st = parse_gpt(&p, name, dev, mem, &m);
    else {
        static const char *const kinds[] = {"mlp", "seq", "gpt"};
        const char *near = rs_spec_near_miss(kind, kinds, 3);
        if (near) return fail(&p, a, RS_ERR_ARG, "unknown model kind '%s' (did you mean '%s'?)", kind, near);
        return fail(&p, a, RS_ERR_ARG,
                    "unknown model kind '%s'; expected `mlp 784-256-10`, `seq conv(16,3,pad=1) relu ...` or "
                    "`gpt layers=4 heads=4 dim=128 ctx=64 vocab=65`", kind);
    }
    if (st) return st;
    if (!strcmp(kind, "gpt")) /* its layers come from the expansion: point at the word gpt */
        for (int i = 0; i < rs_model_layer_count(m); i++) rs_model_layer(m, i)->src_pos = a;
    st = rs_model_layout(m, err);
    if (st) {
        int bad = rs_model_failed_layer(m);
        if (err_pos) *err_pos = bad >= 0 ? rs_model_layer(m, bad)->src_pos : a;
        rs_model_free(m);
        return st;
    }
    *out = m;
    return RS_OK;
}

rs_status rs_model_parse(const char *spec, const char *name, rs_device dev, rs_mem *mem, uint64_t seed,
                         rs_model **out, size_t *err_pos, rs_err *err)
{
    rs_status st = rs_model_parse_layout(spec, name, dev, mem, out, err_pos, err);
    if (st) return st;
    st = rs_model_build(*out, seed, err);
    if (st) {
        if (err_pos) *err_pos = 0;
        rs_model_free(*out);
        *out = NULL;
    }
    return st;
}
