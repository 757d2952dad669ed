/* Character-level text, as nanoGPT's shakespeare_char prepares it, at the byte level: the vocabulary
 * is the text's distinct bytes in order (an ASCII character is one token; another UTF-8 character is
 * its two to four bytes, so a model may sample a cut one), the first 90% of the bytes train and the
 * rest validate, and sample i
 * of a part is the window x = tokens [i, i+T), y = tokens [i+1, i+T+1). The windows overlap almost
 * entirely, so they are made on demand from one copy of each part's tokens (a lazy rs_dataset). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/data.h"
#include "engine/data/gen/story.h"
#include "engine/data/internal.h"

/* One part (train or validation) of a text: its tokens and the whole text's vocabulary. */
typedef struct text_part {
    rs_text_vocab vocab;
    uint8_t *tok;  /* (len) token ids, owned */
    size_t len;
    int T;         /* window length */
} text_part;

static void part_free(void *p)
{
    text_part *t = p;
    if (t) free(t->tok);
    free(t);
}

static void fetch_window(const rs_dataset *d, uint32_t i, void *x, int32_t *y)
{
    const text_part *t = d->impl;
    const uint8_t *w = t->tok + i;
    if (x) {
        unsigned char *o = x; /* int32 ids written bytewise: the caller's buffer may be typed float */
        for (int k = 0; k < t->T; k++) {
            int32_t v = w[k];
            memcpy(o + (size_t)k * sizeof v, &v, sizeof v);
        }
    }
    if (y)
        for (int k = 0; k < t->T; k++) y[k] = w[k + 1];
}

const rs_text_vocab *rs_text_vocab_of(const rs_dataset *d)
{
    return d && d->fetch == fetch_window ? &((const text_part *)d->impl)->vocab : NULL;
}

size_t rs_text_len(const rs_dataset *d)
{
    return d && d->fetch == fetch_window ? ((const text_part *)d->impl)->len : 0;
}

rs_status rs_text_encode(const rs_text_vocab *v, const char *s, size_t n, int32_t *ids, rs_err *err)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (v->id[c] < 0) {
            if (c >= 0x20 && c < 0x7f)
                return rs_err_set(err, RS_ERR_ARG,
                                  "character '%c' at offset %zu is not in the text's vocabulary of %d bytes",
                                  (char)c, i, v->n);
            return rs_err_set(err, RS_ERR_ARG,
                              "byte 0x%02x at offset %zu is not in the text's vocabulary of %d bytes", c, i,
                              v->n);
        }
        ids[i] = v->id[c];
    }
    return RS_OK;
}

void rs_text_decode(const rs_text_vocab *v, const int32_t *ids, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) out[i] = ids[i] >= 0 && ids[i] < v->n ? (char)v->chars[ids[i]] : '?';
    out[n] = '\0';
}

size_t rs_data_text_min_chars(int ctx) { return (size_t)ctx * 10 + 1; }

/* Binary files: any NUL byte, or more than 5% control characters other than tab, newline, carriage
 * return, form feed and vertical tab (bytes >= 0x80 are allowed: UTF-8 text reads as its bytes). */
static rs_status check_text(const uint8_t *buf, size_t len, const char *what, rs_err *err)
{
    const uint8_t *nul = memchr(buf, 0, len);
    if (nul)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "text: %s is binary, not text: a NUL byte at offset %zu; give a plain text file "
                          "(ASCII or UTF-8)",
                          what, (size_t)(nul - buf));
    size_t ctl = 0, first = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = buf[i];
        if ((c < 0x20 && !strchr("\t\n\r\f\v", c)) || c == 0x7f) {
            if (!ctl) first = i;
            ctl++;
        }
    }
    if (ctl * 20 > len)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "text: %s does not look like text: %zu of its %zu bytes are control characters (the "
                          "first at offset %zu); give a plain text file (ASCII or UTF-8)",
                          what, ctl, len, first);
    return RS_OK;
}

static rs_dataset *make_part(const uint8_t *text, size_t len, const rs_text_vocab *v, int T, const char *base,
                             const char *suffix, const char *source)
{
    text_part *t = calloc(1, sizeof *t); /* owned by the data set once made */
    if (!t || !(t->tok = malloc(len))) {
        part_free(t);
        return NULL;
    }
    t->vocab = *v;
    t->len = len;
    t->T = T;
    for (size_t i = 0; i < len; i++) t->tok[i] = (uint8_t)v->id[text[i]];
    rs_dataset *d = rs_dataset_new_lazy((uint32_t)(len - (size_t)T), 1, 1, T, v->n, T, fetch_window, t, part_free);
    if (!d) return NULL;
    d->tokens = true;
    snprintf(d->name, sizeof d->name, "%.40s-%s", base, suffix);
    snprintf(d->source, sizeof d->source, "%s", source);
    return d;
}

/* The pair of a text already in memory. what: how messages name it; base: the data sets' name. */
static rs_status build(const uint8_t *buf, size_t len, const char *what, const char *base, const char *source,
                       int ctx, rs_data_pair *out, rs_err *err)
{
    memset(out, 0, sizeof *out);
    if (ctx < 1 || ctx > RS_DATA_TEXT_CTX_MAX)
        return rs_err_set(err, RS_ERR_ARG, "text: ctx=%d is out of range; use 1..%d (the model's context, e.g. ctx=%d)",
                          ctx, RS_DATA_TEXT_CTX_MAX, RS_DATA_TEXT_CTX);
    size_t need = rs_data_text_min_chars(ctx);
    if (len == 0)
        return rs_err_set(err, RS_ERR_FORMAT, "text: %s is empty; give a text of at least %zu bytes (ctx=%d)",
                          what, need, ctx);
    rs_status st = check_text(buf, len, what, err);
    if (st) return st;
    if (len < need) {
        int fit = (int)((len - 1) / 10);
        if (fit > 0)
            return rs_err_set(err, RS_ERR_FORMAT,
                              "text: %s has %zu bytes, too short for ctx=%d: a tenth is kept for validation "
                              "and each part needs ctx+1, so at least %zu are needed; use a longer text or ctx=%d",
                              what, len, ctx, need, fit);
        return rs_err_set(err, RS_ERR_FORMAT,
                          "text: %s has %zu bytes, too short for ctx=%d: at least %zu are needed (a tenth is "
                          "kept for validation and each part needs ctx+1); use a longer text",
                          what, len, ctx, need);
    }
    if (len > UINT32_MAX)
        return rs_err_set(err, RS_ERR_FORMAT, "text: %s has %zu bytes; at most %u are read", what, len,
                          (unsigned)UINT32_MAX);
    rs_text_vocab v = {0};
    bool seen[256] = {false};
    for (size_t i = 0; i < len; i++) seen[buf[i]] = true;
    for (int c = 0; c < 256; c++) {
        v.id[c] = seen[c] ? (int16_t)v.n : -1;
        if (seen[c]) v.chars[v.n++] = (uint8_t)c;
    }
    size_t ntrain = (size_t)((uint64_t)len * 9 / 10); /* nanoGPT: data[:int(n*0.9)] */
    out->train = make_part(buf, ntrain, &v, ctx, base, "train", source);
    out->test = out->train ? make_part(buf + ntrain, len - ntrain, &v, ctx, base, "val", source) : NULL;
    if (!out->test) {
        rs_data_pair_clear(out);
        return rs_err_set(err, RS_ERR_NOMEM, "text: out of memory for %zu bytes of %s", len, what);
    }
    return RS_OK;
}

rs_status rs_data_text_parse(const uint8_t *buf, size_t len, const char *name, int ctx, rs_data_pair *out,
                             rs_err *err)
{
    rs_dataset tmp = {0};
    rs_data_name_from_path(&tmp, name);
    char source[600];
    snprintf(source, sizeof source, "text(file=%s,ctx=%d)", name, ctx);
    return build(buf, len, name, tmp.name, source, ctx, out, err);
}

rs_status rs_data_text_load(const char *path, int ctx, rs_data_pair *out, rs_err *err)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    rs_status st = rs_data_read_file(path, 0, &buf, &len, err);
    if (st) {
        rs_err_prefix(err, "text");
        if (st == RS_ERR_IO) {
            rs_err e = *err;
            rs_err_set(err, st, "%s; give a readable text file, `text fortunes` or `text` for the built-in corpus",
                       e.msg);
        }
        return st;
    }
    st = rs_data_text_parse(buf, len, path, ctx, out, err);
    free(buf);
    return st;
}

rs_status rs_data_text_builtin(int ctx, rs_data_pair *out, rs_err *err)
{
    memset(out, 0, sizeof *out);
    size_t len;
    char *s = rs_data_story(RS_DATA_STORY_SEED, RS_DATA_STORY_BYTES, &len);
    if (!s) return rs_err_set(err, RS_ERR_NOMEM, "text: out of memory writing the built-in corpus");
    char source[64];
    snprintf(source, sizeof source, "text(builtin,ctx=%d)", ctx);
    rs_status st = build((const uint8_t *)s, len, "the built-in corpus", "text", source, ctx, out, err);
    free(s);
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Appends one fortune file to *all, each line of a lone '%' (the separator) made an empty line, and the
 * terminal tricks of a few old fortunes taken out: a bell goes, and so does an overstrike "c<BS>"
 * (underlining written as "_<BS>x" keeps the x). */
static rs_status add_fortunes(const uint8_t *f, size_t n, const char *path, uint8_t **all, size_t *len,
                              size_t *cap, rs_err *err)
{
    size_t start = *len;
    if (*len + n + 1 > *cap) {
        size_t nc = (*len + n + 1) * 2;
        uint8_t *na = realloc(*all, nc);
        if (!na) return rs_err_set(err, RS_ERR_NOMEM, "text fortunes: out of memory reading %s", path);
        *all = na;
        *cap = nc;
    }
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && f[e] != '\n') e++;
        bool sep = (e - i == 1 && f[i] == '%') || (e - i == 2 && f[i] == '%' && f[i + 1] == '\r');
        size_t line = *len;
        for (size_t k = i; k < e && !sep; k++) {
            if (f[k] == '\b') *len -= *len > line;
            else if (f[k] != '\a') (*all)[(*len)++] = f[k];
        }
        if (e < n || sep) (*all)[(*len)++] = '\n';
        i = e + 1;
    }
    return check_text(*all + start, *len - start, path, err); /* the bells and overstrikes are gone by now */
}

rs_status rs_data_text_fortunes(const char *dir, int ctx, rs_data_pair *out, rs_err *err)
{
    memset(out, 0, sizeof *out);
    if (!dir) dir = RS_DATA_FORTUNES_DIR;
    DIR *dh = opendir(dir);
    if (!dh)
        return rs_err_set(err, RS_ERR_IO,
                          "text fortunes: %s: %s; install Debian's fortunes package (apt-get install fortunes) or "
                          "give a text file: data t = text FILE",
                          dir, strerror(errno));
    char **names = NULL; /* owned here, with each name */
    size_t nn = 0, capn = 0;
    rs_status st = RS_OK;
    char path[4096];
    for (struct dirent *e; (e = readdir(dh));) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || (l > 4 && !strcmp(e->d_name + l - 4, ".dat")) ||
            (l > 3 && !strcmp(e->d_name + l - 3, ".u8")))
            continue; /* strfile's index files and the UTF-8 links to the same texts */
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue; /* what a link points at counts */
        if (nn == capn) {
            capn = capn ? capn * 2 : 32;
            char **nv = realloc(names, capn * sizeof *names);
            if (!nv) {
                st = rs_err_set(err, RS_ERR_NOMEM, "text fortunes: out of memory");
                break;
            }
            names = nv;
        }
        if (!(names[nn] = strdup(e->d_name))) {
            st = rs_err_set(err, RS_ERR_NOMEM, "text fortunes: out of memory");
            break;
        }
        nn++;
    }
    closedir(dh);
    if (!st && nn == 0)
        st = rs_err_set(err, RS_ERR_IO,
                        "text fortunes: no fortune files in %s; install Debian's fortunes package (apt-get install "
                        "fortunes) or give a text file: data t = text FILE",
                        dir);
    if (names) qsort(names, nn, sizeof *names, cmp_str); /* a fixed order whatever readdir gives */
    uint8_t *all = NULL; /* owned here */
    size_t len = 0, cap = 0;
    for (size_t i = 0; i < nn && !st; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        uint8_t *f;
        size_t n;
        st = rs_data_read_file(path, 0, &f, &n, err);
        if (st) {
            rs_err_prefix(err, "text fortunes");
            break;
        }
        st = add_fortunes(f, n, path, &all, &len, &cap, err);
        free(f);
    }
    for (size_t i = 0; i < nn; i++) free(names[i]);
    free(names);
    if (!st) {
        char source[600];
        snprintf(source, sizeof source, "text(fortunes=%s,ctx=%d)", dir, ctx);
        char what[600];
        snprintf(what, sizeof what, "the fortunes in %s", dir);
        st = build(all ? all : (const uint8_t *)"", len, what, "fortunes", source, ctx, out, err);
    }
    free(all);
    return st;
}
