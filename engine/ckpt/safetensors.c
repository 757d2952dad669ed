/* safetensors reader and writer (see safetensors.h).
 * The header goes through jansson; every bound the reference reader checks is checked here before a
 * byte of tensor data is handed out, so a damaged file becomes a message, never a crash. */
#include "engine/ckpt/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this file reads and writes host order"
#endif

typedef struct name_idx {
    const char *name;
    int i; /* into rs_st_file.t */
} name_idx;

struct rs_st_file {
    char *name;          /* for messages; owned */
    uint8_t *alloc;      /* owned; the file's bytes start at alloc + shift */
    const uint8_t *data; /* data region (data_len bytes), 16-byte aligned */
    size_t data_len;
    json_t *hdr;         /* parsed header; owns the strings that names and metadata point into */
    int n;
    rs_st_info *t;       /* (n) in data order; owned */
    name_idx *by_name;   /* (n) sorted by name, for rs_st_find; owned */
    int n_meta;
    const char **meta;   /* (2 * n_meta) key, value, ... pointing into hdr; owned array */
};

/* Every dtype the format defines, so that a valid file with one we do not carry gets "unsupported"
 * rather than "corrupt". */
static const char *const spec_dtypes[] = {
    "BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64",
    "C64", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2",
};

/* Names go into messages truncated, so that one absurd name cannot crowd out what would work. */
static const char *q(const char *s, char buf[72])
{
    size_t n = strlen(s);
    if (n < 64) return s;
    snprintf(buf, 72, "%.60s...", s);
    return buf;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}

/* Where to place a file of len bytes in a fresh malloc block so its data region lands 16-byte
 * aligned (malloc gives 16): then tensors whose offsets suit their dtype can be read in place. */
static size_t shift_for(const uint8_t *first8, size_t len)
{
    if (len < 8) return 0;
    uint64_t n = get_le64(first8);
    if (n > len - 8) return 0;
    return (size_t)((16 - (8 + n) % 16) % 16);
}

void rs_st_close(rs_st_file *f)
{
    if (!f) return;
    json_decref(f->hdr);
    free(f->t);
    free(f->by_name);
    free(f->meta);
    free(f->alloc);
    free(f->name);
    free(f);
}

/* ---- reading ---- */

static rs_status parse_meta(rs_st_file *f, json_t *m, rs_err *err)
{
    if (json_is_null(m)) return RS_OK; /* the reference reader takes null as "no metadata" */
    if (!json_is_object(m))
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: \"__metadata__\" is %s; it must be an object of string -> string",
                          f->name, json_kind(m));
    f->meta = malloc(2 * (json_object_size(m) + 1) * sizeof *f->meta);
    if (!f->meta) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory for metadata", f->name);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        char b[72];
        if (!json_is_string(v))
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: \"__metadata__\" value of '%s' is %s; metadata values must be "
                              "strings (write it quoted, e.g. \"3\")",
                              f->name, q(k, b), json_kind(v));
        f->meta[2 * f->n_meta] = k;
        f->meta[2 * f->n_meta + 1] = json_string_value(v);
        f->n_meta++;
    }
    return RS_OK;
}

/* One member of data_offsets: an integer >= 0. */
static bool get_uint(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static rs_status parse_entry(rs_st_file *f, const char *name, const json_t *e, rs_st_info *ti,
                             rs_err *err)
{
    char b[72], sb[160];
    const char *nm = q(name, b);
    ti->name = name;
    if (!json_is_object(e))
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: tensor '%s' is %s; each tensor maps to an object "
                          "{\"dtype\": \"F32\", \"shape\": [...], \"data_offsets\": [begin, end]}",
                          f->name, nm, json_kind(e));
    static const char *const fields[] = {"dtype", "shape", "data_offsets"};
    for (int i = 0; i < 3; i++)
        if (!json_object_get(e, fields[i]))
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: tensor '%s' has no \"%s\"; each tensor needs \"dtype\", "
                              "\"shape\" and \"data_offsets\"",
                              f->name, nm, fields[i]);

    const json_t *dt = json_object_get(e, "dtype");
    if (!json_is_string(dt))
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: tensor '%s': \"dtype\" is %s, expected a string such as \"F32\"",
                          f->name, nm, json_kind(dt));
    const char *ds = json_string_value(dt);
    if (!rs_dtype_from_st_name(ds, &ti->dtype)) {
        bool known = false;
        for (size_t i = 0; i < sizeof spec_dtypes / sizeof *spec_dtypes; i++)
            known |= strcmp(ds, spec_dtypes[i]) == 0;
        char db[72];
        return rs_err_set(err, known ? RS_ERR_UNSUPPORTED : RS_ERR_FORMAT,
                          "%s: tensor '%s': %s dtype '%s'; this build reads F32, F16, BF16, F64, "
                          "I8, U8, I32 and I64",
                          f->name, nm, known ? "unsupported" : "unknown", q(ds, db));
    }

    const json_t *sh = json_object_get(e, "shape");
    if (!json_is_array(sh))
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: tensor '%s': \"shape\" is %s, expected an array of dims such as "
                          "[3, 4] ([] for a scalar)",
                          f->name, nm, json_kind(sh));
    size_t nd = json_array_size(sh);
    if (nd > RS_MAX_DIMS)
        return rs_err_set(err, RS_ERR_UNSUPPORTED,
                          "%s: tensor '%s' has %zu dims; this build handles up to %d", f->name, nm,
                          nd, RS_MAX_DIMS);
    ti->shape.ndim = (int)nd;
    /* Checked products: `big` over the non-zero dims keeps a huge dim beside a 0 from overflowing
     * the strides someone computes later; `numel` is what the bytes must hold. */
    int64_t big = 1, numel = 1;
    for (size_t i = 0; i < nd; i++) {
        const json_t *d = json_array_get(sh, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: tensor '%s': shape[%zu] is %s; dims must be integers >= 0",
                              f->name, nm, i, json_is_integer(d) ? "negative" : json_kind(d));
        int64_t v = json_integer_value(d);
        ti->shape.d[i] = v;
        if (v && __builtin_mul_overflow(big, v, &big))
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: tensor '%s': shape %s has more than 2^63 elements; the dims are "
                              "not a real tensor's",
                              f->name, nm, rs_shape_str(&ti->shape, sb, sizeof sb));
        numel *= v; /* cannot overflow: |numel| <= big */
    }

    const json_t *of = json_object_get(e, "data_offsets");
    uint64_t beg, end;
    if (!json_is_array(of) || json_array_size(of) != 2 || !get_uint(json_array_get(of, 0), &beg) ||
        !get_uint(json_array_get(of, 1), &end))
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: tensor '%s': \"data_offsets\" must be [begin, end], two integers "
                          ">= 0 relative to the end of the header (got %s%s)",
                          f->name, nm, json_kind(of),
                          json_is_array(of) ? " of another length or with bad members" : "");
    if (end < beg)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                          f->name, nm, (unsigned long long)beg, (unsigned long long)end);
    uint64_t want;
    if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)rs_dtype_size(ti->dtype), &want) ||
        want != end - beg)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: tensor '%s': shape %s of %s needs %s%llu bytes but data_offsets "
                          "[%llu, %llu] span %llu; the shape, dtype or offsets are wrong",
                          f->name, nm, rs_shape_str(&ti->shape, sb, sizeof sb), ds,
                          want == 0 && numel ? "over 2^64 " : "", (unsigned long long)want,
                          (unsigned long long)beg, (unsigned long long)end,
                          (unsigned long long)(end - beg));
    if (end > f->data_len)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu] run past the data region, "
                          "which is %zu bytes (the file is truncated, or its offsets are wrong)",
                          f->name, nm, (unsigned long long)beg, (unsigned long long)end,
                          f->data_len);
    ti->offset = (size_t)beg;
    ti->nbytes = (size_t)(end - beg);
    return RS_OK;
}

/* qsort is not stable, so entries carry their header position: empty tensors sharing an offset
 * then keep header order, and the order is the same on every libc. No globals: opens may run in
 * several threads at once. */
typedef struct pos_info {
    rs_st_info info;
    size_t pos;
} pos_info;

static int cmp_data(const void *a, const void *b)
{
    const pos_info *x = a, *y = b;
    if (x->info.offset != y->info.offset) return x->info.offset < y->info.offset ? -1 : 1;
    if (x->info.nbytes != y->info.nbytes) return x->info.nbytes < y->info.nbytes ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const name_idx *)a)->name, ((const name_idx *)b)->name);
}

/* The format requires tensors to cover the data region exactly: no overlap, no hole. */
static rs_status check_cover(rs_st_file *f, rs_err *err)
{
    size_t pos = 0;
    char b1[72], b2[72];
    for (int i = 0; i < f->n; i++) {
        const rs_st_info *t = &f->t[i], *p = i ? &f->t[i - 1] : NULL;
        if (t->offset < pos)
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: tensor '%s' (data_offsets [%zu, %zu]) overlaps tensor '%s' "
                              "([%zu, %zu]); tensors must not share bytes",
                              f->name, q(t->name, b1), t->offset, t->offset + t->nbytes,
                              q(p->name, b2), p->offset, p->offset + p->nbytes);
        if (t->offset > pos)
            return rs_err_set(err, RS_ERR_FORMAT,
                              "%s: bytes [%zu, %zu) of the data region belong to no tensor "
                              "(a hole %s%s%s before '%s'); the format requires the tensors to "
                              "cover the data region without gaps",
                              f->name, pos, t->offset, p ? "after '" : "at the start",
                              p ? q(p->name, b2) : "", p ? "'" : "", q(t->name, b1));
        pos = t->offset + t->nbytes;
    }
    if (pos != f->data_len)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: the last %zu bytes of the data region (from offset %zu) belong to "
                          "no tensor; the file has trailing bytes or the header lacks a tensor",
                          f->name, f->data_len - pos, pos);
    return RS_OK;
}

/* Parses the len bytes at f->alloc + shift; f owns everything it holds, the caller closes it. */
static rs_status parse(rs_st_file *f, size_t shift, size_t len, rs_err *err)
{
    const uint8_t *buf = f->alloc + shift;
    if (len < 8)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: file is %zu bytes, shorter than the 8-byte header length a "
                          "safetensors file starts with (an empty or truncated file: write it again)",
                          f->name, len);
    uint64_t n = get_le64(buf);
    if (n > RS_ST_MAX_HEADER)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: header length %llu is over the 100 MB the format allows; the first "
                          "8 bytes are not a safetensors header length (is this a safetensors file?)",
                          f->name, (unsigned long long)n);
    if (n > len - 8)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: header length %llu runs past the end of the file (%zu bytes); the "
                          "file is truncated, or not safetensors",
                          f->name, (unsigned long long)n, len);
    /* The spec says the header MUST start with '{' (the reference reader does not enforce it yet):
     * holding to it means a file that opens here opens in every conforming reader. */
    if (n == 0 || buf[8] != '{')
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: header does not start with '{' (%s 0x%02x); a safetensors header "
                          "is a JSON object with no leading space",
                          f->name, n ? "byte 8 is" : "it is empty, byte 8 is", buf[8]);
    json_error_t je;
    f->hdr = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!f->hdr)
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: header JSON is invalid at line %d, column %d (header byte %d, file "
                          "offset %lld): %s",
                          f->name, je.line, je.column, je.position, (long long)je.position + 8,
                          je.text);
    if (!json_is_object(f->hdr))
        return rs_err_set(err, RS_ERR_FORMAT, "%s: header is not a JSON object", f->name);
    f->data = buf + 8 + n;
    f->data_len = len - 8 - (size_t)n;

    json_t *meta = json_object_get(f->hdr, "__metadata__");
    size_t cap = json_object_size(f->hdr) + 1;
    pos_info *tmp = calloc(cap, sizeof *tmp);
    f->t = calloc(cap, sizeof *f->t);
    f->by_name = calloc(cap, sizeof *f->by_name);
    if (!tmp || !f->t || !f->by_name) {
        free(tmp);
        return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory for %zu tensors", f->name, cap);
    }
    rs_status s = meta ? parse_meta(f, meta, err) : RS_OK;
    const char *k;
    json_t *v;
    json_object_foreach(f->hdr, k, v) {
        if (s) break;
        if (v == meta) continue;
        s = parse_entry(f, k, v, &tmp[f->n].info, err);
        tmp[f->n].pos = (size_t)f->n;
        f->n++;
    }
    if (!s) {
        qsort(tmp, (size_t)f->n, sizeof *tmp, cmp_data);
        for (int i = 0; i < f->n; i++) f->t[i] = tmp[i].info;
        s = check_cover(f, err);
    }
    free(tmp);
    if (s) return s;
    for (int i = 0; i < f->n; i++) f->by_name[i] = (name_idx){f->t[i].name, i};
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name);
    return RS_OK;
}

static rs_st_file *file_new(const char *name)
{
    rs_st_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->name = strdup(name);
    if (!f->name) {
        free(f);
        return NULL;
    }
    return f;
}

rs_status rs_st_parse(const uint8_t *buf, size_t len, const char *name_for_messages,
                      rs_st_file **out, rs_err *err)
{
    const char *name = name_for_messages ? name_for_messages : "<memory>";
    *out = NULL;
    if (!buf && len) return rs_err_set(err, RS_ERR_ARG, "%s: NULL buffer of %zu bytes", name, len);
    rs_st_file *f = file_new(name);
    size_t shift = buf ? shift_for(buf, len) : 0;
    if (f) f->alloc = malloc(len + shift + 1);
    if (!f || !f->alloc) {
        rs_st_close(f);
        return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory for a copy of %zu bytes", name, len);
    }
    if (len) memcpy(f->alloc + shift, buf, len);
    rs_status s = parse(f, shift, len, err);
    if (s) {
        rs_st_close(f);
        return s;
    }
    *out = f;
    return RS_OK;
}

static bool read_all(int fd, uint8_t *p, size_t n, off_t at)
{
    while (n) {
        ssize_t r = pread(fd, p, n, at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO; /* the file shrank while we read it */
            return false;
        }
        p += r;
        n -= (size_t)r;
        at += r;
    }
    return true;
}

rs_status rs_st_open(const char *path, rs_st_file **out, rs_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return rs_err_set(err, RS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st = {0};
    int e = fstat(fd, &st) == 0 ? 0 : errno;
    if (e || !S_ISREG(st.st_mode)) {
        close(fd);
        return rs_err_set(err, RS_ERR_IO, "%s: cannot read: %s", path,
                          e ? strerror(e)
                            : S_ISDIR(st.st_mode) ? "it is a folder, not a file" : "not a regular file");
    }
    size_t len = (size_t)st.st_size;
    uint8_t head[8] = {0};
    size_t shift = 0;
    if (len >= 8 && read_all(fd, head, 8, 0)) shift = shift_for(head, len);
    rs_st_file *f = file_new(path);
    if (f) f->alloc = malloc(len + shift + 1);
    if (!f || !f->alloc) {
        close(fd);
        rs_st_close(f);
        return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, len);
    }
    if (!read_all(fd, f->alloc + shift, len, 0)) {
        e = errno;
        close(fd);
        rs_st_close(f);
        return rs_err_set(err, RS_ERR_IO, "%s: read failed: %s", path, strerror(e));
    }
    close(fd);
    rs_status s = parse(f, shift, len, err);
    if (s) {
        rs_st_close(f);
        return s;
    }
    *out = f;
    return RS_OK;
}

int rs_st_count(const rs_st_file *f) { return f ? f->n : 0; }

const rs_st_info *rs_st_at(const rs_st_file *f, int i)
{
    return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const rs_st_info *rs_st_find(const rs_st_file *f, const char *name)
{
    if (!f || !name) return NULL;
    name_idx key = {name, 0};
    const name_idx *hit = bsearch(&key, f->by_name, (size_t)f->n, sizeof key, cmp_name);
    return hit ? &f->t[hit->i] : NULL;
}

const void *rs_st_data(const rs_st_file *f, const rs_st_info *info) { return f->data + info->offset; }

rs_status rs_st_copy(const rs_st_file *f, const char *name, rs_dtype dtype, const rs_shape *shape,
                     void *dst, rs_err *err)
{
    char b[72], s1[160], s2[160];
    const rs_st_info *t = rs_st_find(f, name);
    if (!t)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: no tensor named '%s' (the file has %d tensor%s%s%s%s)",
                          f->name, q(name, b), f->n, f->n == 1 ? "" : "s",
                          f->n ? ", e.g. '" : "", f->n ? f->t[0].name : "", f->n ? "'" : "");
    if (t->dtype != dtype)
        return rs_err_set(err, RS_ERR_FORMAT, "%s: tensor '%s' is %s, expected %s", f->name,
                          q(name, b), rs_dtype_st_name(t->dtype), rs_dtype_st_name(dtype));
    if (!rs_shape_eq(&t->shape, shape))
        return rs_err_set(err, RS_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", f->name,
                          q(name, b), rs_shape_str(&t->shape, s1, sizeof s1),
                          rs_shape_str(shape, s2, sizeof s2));
    if (t->nbytes) memcpy(dst, rs_st_data(f, t), t->nbytes);
    return RS_OK;
}

const char *rs_st_meta(const rs_st_file *f, const char *key)
{
    if (!f || !key) return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

int rs_st_meta_count(const rs_st_file *f) { return f ? f->n_meta : 0; }

const char *rs_st_meta_at(const rs_st_file *f, int i, const char **value)
{
    if (!f || i < 0 || i >= f->n_meta) return NULL;
    if (value) *value = f->meta[2 * i + 1];
    return f->meta[2 * i];
}

const char *rs_st_name(const rs_st_file *f) { return f ? f->name : NULL; }

/* ---- writing ---- */

/* Builds the header JSON; the caller frees *json. Checks every argument first, so a bad call
 * creates no file at all. */
static rs_status build_header(const char *path, const rs_st_tensor *t, int n,
                              const char *const *meta, int n_meta, char **json, rs_err *err)
{
    char b[72], sb[160];
    json_t *root = json_object();
    rs_status s = RS_OK;
    if (!root) return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory for the header", path);
    /* __metadata__ first, as the reference writer does: a person reading the header sees it. */
    if (n_meta > 0) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, "__metadata__", m)) {
            json_decref(root);
            return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory for the header", path);
        }
        for (int i = 0; i < n_meta && !s; i++) {
            const char *k = meta[2 * i], *v = meta[2 * i + 1];
            if (!k || !v)
                s = rs_err_set(err, RS_ERR_ARG, "%s: metadata pair %d has a NULL %s", path, i,
                               k ? "value" : "key");
            else if (json_object_get(m, k))
                s = rs_err_set(err, RS_ERR_ARG, "%s: metadata key '%s' is given twice", path,
                               q(k, b));
            else if (json_object_set_new(m, k, json_string(v)))
                s = rs_err_set(err, RS_ERR_ARG,
                               "%s: metadata '%s' is not valid UTF-8 (JSON holds only UTF-8 text)",
                               path, q(k, b));
        }
    }
    uint64_t pos = 0;
    for (int i = 0; i < n && !s; i++) {
        const rs_st_tensor *x = &t[i];
        const char *nm = x->name ? q(x->name, b) : "";
        uint64_t numel = 1, nbytes = 0; /* then: this tensor's end offset */
        bool bad_dim = false;
        for (int d = 0; x->shape.ndim >= 0 && d < x->shape.ndim && d < RS_MAX_DIMS; d++) {
            bad_dim |= x->shape.d[d] < 0;
            if (!bad_dim && __builtin_mul_overflow(numel, (uint64_t)x->shape.d[d], &numel))
                bad_dim = true;
        }
        if (!x->name)
            s = rs_err_set(err, RS_ERR_ARG, "%s: tensor %d has no name", path, i);
        else if (strcmp(x->name, "__metadata__") == 0)
            s = rs_err_set(err, RS_ERR_ARG,
                           "%s: tensor %d is named '__metadata__', which the format reserves", path,
                           i);
        else if ((unsigned)x->dtype >= RS_DTYPE_COUNT)
            s = rs_err_set(err, RS_ERR_ARG, "%s: tensor '%s' has dtype %d, not an rs_dtype", path,
                           nm, (int)x->dtype);
        else if (x->shape.ndim < 0 || x->shape.ndim > RS_MAX_DIMS)
            s = rs_err_set(err, RS_ERR_ARG, "%s: tensor '%s' has %d dims; 0 to %d work", path, nm,
                           x->shape.ndim, RS_MAX_DIMS);
        else if (bad_dim || __builtin_mul_overflow(numel, rs_dtype_size(x->dtype), &nbytes) ||
                 __builtin_add_overflow(pos, nbytes, &nbytes) || nbytes > INT64_MAX)
            s = rs_err_set(err, RS_ERR_ARG,
                           "%s: tensor '%s' has shape %s; dims must be >= 0 and the tensors must "
                           "fit in 2^63 bytes",
                           path, nm, rs_shape_str(&x->shape, sb, sizeof sb));
        else if (nbytes > pos && !x->data)
            s = rs_err_set(err, RS_ERR_ARG, "%s: tensor '%s' has no data", path, nm);
        else if (json_object_get(root, x->name))
            s = rs_err_set(err, RS_ERR_ARG,
                           "%s: two tensors are named '%s'; names must be unique in a file", path, nm);
        if (s) break;
        /* The _new setters take ownership even when they fail, so only e needs freeing. */
        json_t *shape = json_array(), *e = json_object();
        bool ok = json_object_set_new(e, "dtype", json_string(rs_dtype_st_name(x->dtype))) == 0;
        ok = json_object_set_new(e, "shape", shape) == 0 && ok; /* first, so it always owns shape */
        for (int d = 0; ok && d < x->shape.ndim; d++)
            ok = json_array_append_new(shape, json_integer(x->shape.d[d])) == 0;
        ok = ok && json_object_set_new(e, "data_offsets",
                                       json_pack("[I, I]", (json_int_t)pos, (json_int_t)nbytes)) == 0;
        if (!ok) {
            json_decref(e);
            s = rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory for the header", path);
        } else if (json_object_set_new(root, x->name, e)) {
            s = rs_err_set(err, RS_ERR_ARG,
                           "%s: tensor name '%s' is not valid UTF-8 (JSON holds only UTF-8 text)",
                           path, nm);
        }
        pos = nbytes;
    }
    if (!s) {
        *json = json_dumps(root, JSON_COMPACT);
        if (!*json) s = rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory for the header", path);
        else if (strlen(*json) > RS_ST_MAX_HEADER - 8) {
            s = rs_err_set(err, RS_ERR_ARG,
                           "%s: the header would be %zu bytes, over the 100 MB readers accept; "
                           "save fewer tensors or less metadata per file",
                           path, strlen(*json));
            free(*json);
            *json = NULL;
        }
    }
    json_decref(root);
    return s;
}

static bool write_all(FILE *fp, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, fp) == n; }

/* Makes the rename itself durable. Some file systems refuse fsync on a folder; the file is already
 * safe by then, so that is not worth failing the save over. */
static void sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

rs_status rs_st_write(const char *path, const rs_st_tensor *t, int n, const char *const *meta,
                      int n_meta, rs_err *err)
{
    if (!path || n < 0 || (n > 0 && !t) || n_meta < 0 || (n_meta > 0 && !meta))
        return rs_err_set(err, RS_ERR_ARG, "%s: rs_st_write needs a path, n >= 0 tensors and "
                          "n_meta >= 0 metadata pairs", path ? path : "(null path)");
    char *json = NULL;
    rs_status s = build_header(path, t, n, meta, n_meta, &json, err);
    if (s) return s;
    size_t hlen = strlen(json), padded = (hlen + 7) / 8 * 8;

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5); /* owned here: path + ".tmp" */
    if (!tmp) {
        free(json);
        return rs_err_set(err, RS_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *fp = fopen(tmp, "wb");
    if (!fp) {
        int e = errno;
        free(json);
        s = rs_err_set(err, RS_ERR_IO, "cannot write '%s': %s%s", path, strerror(e),
                       e == ENOENT ? " (does the folder exist?)" : "");
        free(tmp);
        return s;
    }
    uint8_t len8[8];
    put_le64(len8, padded);
    static const char spaces[8] = "        ";
    bool ok = write_all(fp, len8, 8) && write_all(fp, json, hlen) &&
              write_all(fp, spaces, padded - hlen);
    free(json);
    for (int i = 0; ok && i < n; i++) {
        size_t nb = (size_t)rs_shape_numel(&t[i].shape) * rs_dtype_size(t[i].dtype);
        ok = write_all(fp, t[i].data, nb);
    }
    ok = ok && fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    int e = errno;
    if (fclose(fp) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        e = errno;
        s = rs_err_set(err, RS_ERR_IO, "%s: cannot rename '%s' over it: %s", path, tmp,
                       strerror(e));
    } else if (!ok) {
        s = rs_err_set(err, RS_ERR_IO, "%s: writing '%s' failed: %s%s", path, tmp, strerror(e),
                       e == ENOSPC ? " (the disk is full)" : "");
    }
    if (s) unlink(tmp);
    else sync_dir(path);
    free(tmp);
    return s;
}
