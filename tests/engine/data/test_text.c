/* Character-level text: the vocabulary and encode/decode, windows shifted by one and equal to the text,
 * the 90/10 split, the lazy windows through the shuffled loader, every refusal with its message, the
 * source strings ranks reopen, the built-in corpus (deterministic, big enough, and with structure a
 * model can learn: n-gram figures), and fortune files (a made-up directory here; Debian's package with
 * the argument `fortunes`, skipped when it is not installed). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/data.h"
#include "engine/data/gen/story.h"
#include "engine/data/loader.h"
#include "engine/data/source.h"
#include "engine/nn/spec.h"
#include "engine/train/train.h"
#include "tests/engine/data/datatest.h"

/* A text of n characters from a few words, seeded: known content, long enough for any split. */
static char *sample_text(size_t n)
{
    static const char *const words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat.\n", "Dog? ", "yes, "};
    char *s = malloc(n + 16);
    size_t k = 0;
    uint32_t r = 7;
    while (k < n) {
        r = r * 1103515245u + 12345u;
        const char *w = words[(r >> 16) % 8];
        size_t l = strlen(w);
        memcpy(s + k, w, l);
        k += l;
    }
    s[n] = '\0';
    return s;
}

/* The window of sample i of d as characters: x and y decoded. */
static void window(const rs_dataset *d, uint32_t i, char *xs, char *ys)
{
    const rs_text_vocab *v = rs_text_vocab_of(d);
    int32_t x[256], y[256];
    rs_dataset_get(d, i, x, y);
    rs_text_decode(v, x, (size_t)d->w, xs);
    rs_text_decode(v, y, (size_t)d->y_len, ys);
}

static void test_vocab(void)
{
    const char *t = "banana bread, baked.\n";
    char buf[2048];
    size_t n = 0;
    while (n + strlen(t) < sizeof buf - 1) n += (size_t)snprintf(buf + n, sizeof buf - n, "%s", t);
    rs_data_pair p;
    rs_err e = {0};
    RS_CHECK(rs_data_text_parse((const uint8_t *)buf, n, "bread.txt", 8, &p, &e) == RS_OK, "%s", e.msg);
    if (!p.train) return;
    const rs_text_vocab *v = rs_text_vocab_of(p.train);
    RS_CHECK(v && v == rs_text_vocab_of(p.train) && rs_text_vocab_of(p.test), "both parts have the vocabulary");
    const char *want = "\n ,.abdekInr"; /* sorted distinct bytes of t */
    want = "\n ,.abdeknr";
    RS_CHECK(v->n == (int)strlen(want) && !memcmp(v->chars, want, strlen(want)), "vocabulary %d: %.*s", v->n, v->n,
             (const char *)v->chars);
    RS_CHECK(p.train->n_classes == v->n && p.test->n_classes == v->n, "n_classes is the vocabulary size");
    RS_CHECK(v->id['a'] == 4 && v->id['z'] == -1 && v->id['\n'] == 0, "ids: a=%d z=%d", v->id['a'], v->id['z']);
    RS_CHECK(!strcmp(p.train->name, "bread-train") && !strcmp(p.test->name, "bread-val"), "names %s %s",
             p.train->name, p.test->name);
    RS_CHECK(p.train->tokens && p.train->y_len == 8 && p.train->c == 1 && p.train->h == 1 && p.train->w == 8 &&
                 !p.train->x && !p.train->y && p.train->fetch,
             "a lazy token set of windows of 8");
    int32_t ids[64];
    char back[65];
    const char *msg = "a bread, baked banana.";
    RS_CHECK(rs_text_encode(v, msg, strlen(msg), ids, &e) == RS_OK, "%s", e.msg);
    rs_text_decode(v, ids, strlen(msg), back);
    RS_CHECK(!strcmp(back, msg), "round trip: '%s'", back);
    rs_status st = rs_text_encode(v, "bad zebra", 9, ids, &e);
    EXPECT_ERR(st, RS_ERR_ARG, e, "'z'", "offset 4", "vocabulary of 11");
    st = rs_text_encode(v, "ab\x01", 3, ids, &e);
    EXPECT_ERR(st, RS_ERR_ARG, e, "0x01", "offset 2");
    ids[0] = 99;
    ids[1] = -1;
    rs_text_decode(v, ids, 2, back);
    RS_CHECK(!strcmp(back, "??"), "ids outside the vocabulary decode as '?': %s", back);
    rs_data_pair_clear(&p);
}

/* Windows against the file's text, and the split sizes. */
static void test_windows(void)
{
    enum { N = 5003, T = 32 };
    char *text = sample_text(N);
    const char *path = tmp_write("story.txt", text, N, false);
    rs_data_pair p;
    rs_err e = {0};
    RS_CHECK(rs_data_text_load(path, T, &p, &e) == RS_OK, "%s", e.msg);
    if (!p.train) return;
    size_t ntrain = (size_t)N * 9 / 10; /* nanoGPT's int(n*0.9) */
    RS_CHECK(rs_text_len(p.train) == ntrain && rs_text_len(p.test) == N - ntrain, "split %zu + %zu",
             rs_text_len(p.train), rs_text_len(p.test));
    RS_CHECK(p.train->n == ntrain - T && p.test->n == N - ntrain - T, "windows %u + %u", p.train->n, p.test->n);
    char xs[T + 1], ys[T + 1];
    int bad = 0;
    for (uint32_t i = 0; i < p.train->n; i += 97) {
        window(p.train, i, xs, ys);
        bad += memcmp(xs, text + i, T) != 0 || memcmp(ys, text + i + 1, T) != 0;
    }
    window(p.train, p.train->n - 1, xs, ys);
    bad += memcmp(ys, text + ntrain - T, T) != 0; /* the last train window ends at the split */
    for (uint32_t i = 0; i < p.test->n; i += 13) {
        window(p.test, i, xs, ys);
        bad += memcmp(xs, text + ntrain + i, T) != 0 || memcmp(ys, text + ntrain + i + 1, T) != 0;
    }
    window(p.test, p.test->n - 1, xs, ys);
    bad += memcmp(ys, text + N - T, T) != 0;
    RS_CHECK(bad == 0, "%d windows differ from the text", bad);
    /* the parts alone: y without x and x without y */
    int32_t y[T], x[T], y2[T];
    rs_dataset_get(p.train, 5, NULL, y);
    rs_dataset_get(p.train, 5, x, NULL);
    rs_dataset_get(p.train, 6, NULL, y2);
    RS_CHECK(!memcmp(x + 1, y, (T - 1) * sizeof *x) && !memcmp(y2, y + 1, (T - 1) * sizeof *y),
             "y is x shifted by one; window 6 is window 5 shifted by one");
    RS_CHECK(strstr(p.train->source, path) && strstr(p.train->source, "ctx=32"), "source %s", p.train->source);

    /* a .gz file reads the same */
    const char *gz = tmp_write("story.txt.gz", text, N, true);
    rs_data_pair q;
    RS_CHECK(rs_data_text_load(gz, T, &q, &e) == RS_OK, "%s", e.msg);
    if (q.train) {
        int32_t a[T], b[T];
        rs_dataset_get(p.test, 3, a, NULL);
        rs_dataset_get(q.test, 3, b, NULL);
        RS_CHECK(q.train->n == p.train->n && !memcmp(a, b, sizeof a) && !strcmp(q.train->name, "story-train"),
                 ".gz: %u windows, name %s", q.train->n, q.train->name);
    }
    rs_data_pair_clear(&q);

    /* split materialises a lazy set's samples: the tokens flag and y_len go along */
    rs_dataset *val = p.test;
    p.test = NULL;
    rs_data_pair s;
    RS_CHECK(rs_data_split(val, 0.5, 3, &s, &e) == RS_OK, "%s", e.msg);
    if (s.train) {
        RS_CHECK(s.train->tokens && s.train->y_len == T && s.train->x && s.train->n + s.test->n == N - ntrain - T,
                 "split of a text part");
        int32_t a[T], b[T];
        rs_dataset_get(s.train, 0, a, b);
        RS_CHECK(!memcmp(a + 1, b, (T - 1) * sizeof *a), "materialised windows keep x and y");
    }
    rs_data_pair_clear(&s);
    rs_data_pair_clear(&p);
    free(text);
}

/* The lazy windows through the shuffled loader: every row is the window at its index. */
static void test_loader(void)
{
    enum { N = 3000, T = 16, B = 37 };
    char *text = sample_text(N);
    rs_data_pair p;
    rs_err e = {0};
    RS_CHECK(rs_data_text_parse((const uint8_t *)text, N, "loader.txt", T, &p, &e) == RS_OK, "%s", e.msg);
    if (!p.train) return;
    const rs_text_vocab *v = rs_text_vocab_of(p.train);
    rs_sampler_cfg cfg = rs_sampler_cfg_default();
    cfg.seed = 5;
    rs_loader *l = rs_loader_new(p.train, B, &cfg, &e);
    RS_CHECK(l != NULL, "%s", e.msg);
    if (!l) return;
    int32_t *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    uint8_t *seen = calloc(p.train->n, 1);
    int rows, bad = 0, inorder = 0, total = 0;
    rs_loader_set_epoch(l, 1);
    while ((rows = rs_loader_next(l, x, y)) > 0) {
        const uint32_t *idx = rs_loader_last_indices(l);
        for (int r = 0; r < rows; r++) {
            char xs[T + 1], ys[T + 1];
            rs_text_decode(v, x + (size_t)r * T, T, xs);
            rs_text_decode(v, y + (size_t)r * T, T, ys);
            bad += memcmp(xs, text + idx[r], T) != 0 || memcmp(ys, text + idx[r] + 1, T) != 0;
            seen[idx[r]]++;
            inorder += idx[r] == (uint32_t)total;
            total++;
        }
    }
    int once = 0;
    for (uint32_t i = 0; i < p.train->n; i++) once += seen[i] == 1;
    RS_CHECK(bad == 0, "%d loader rows are not the windows at their indices", bad);
    RS_CHECK(total == (int)p.train->n && once == (int)p.train->n, "an epoch takes every window once: %d of %u",
             once, p.train->n);
    RS_CHECK(inorder < total / 10, "windows are shuffled (%d of %d in order)", inorder, total);
    free(seen);
    free(x);
    free(y);
    rs_loader_free(l);
    rs_data_pair_clear(&p);
    free(text);
}

/* Refusals: each names the text and what would work. */
static void test_bad(void)
{
    rs_data_pair p;
    rs_err e = {0};
    rs_status st = rs_data_text_load(tmp_write("empty.txt", "", 0, false), 64, &p, &e);
    EXPECT_ERR(st, RS_ERR_FORMAT, e, "empty.txt is empty", "at least 641 bytes");
    RS_CHECK(!p.train && !p.test, "nothing left on failure");

    char bin[4000];
    for (size_t i = 0; i < sizeof bin; i++) bin[i] = (char)('a' + i % 26);
    bin[1234] = '\0';
    st = rs_data_text_load(tmp_write("nul.bin", bin, sizeof bin, false), 64, &p, &e);
    EXPECT_ERR(st, RS_ERR_FORMAT, e, "nul.bin is binary", "NUL byte at offset 1234", "plain text file");

    for (size_t i = 0; i < sizeof bin; i++) bin[i] = (char)(i % 3 ? 'a' : 1 + i % 7);
    st = rs_data_text_load(tmp_write("ctl.bin", bin, sizeof bin, false), 64, &p, &e);
    EXPECT_ERR(st, RS_ERR_FORMAT, e, "ctl.bin does not look like text", "1334 of its 4000 bytes",
               "the first at offset 0");
    /* a few control characters in real text pass */
    for (size_t i = 0; i < sizeof bin; i++) bin[i] = (char)(i % 100 == 50 ? '\x1b' : 'a' + i % 26);
    st = rs_data_text_load(tmp_write("esc.txt", bin, sizeof bin, false), 64, &p, &e);
    RS_CHECK(st == RS_OK, "1%% control characters are text: %s", e.msg);
    rs_data_pair_clear(&p);

    st = rs_data_text_load(tmp_write("short.txt", bin, 500, false), 64, &p, &e);
    EXPECT_ERR(st, RS_ERR_FORMAT, e, "short.txt has 500 bytes", "too short for ctx=64", "at least 641",
               "ctx=49");
    st = rs_data_text_load(tmp_write("tiny.txt", "ab", 2, false), 64, &p, &e);
    EXPECT_ERR(st, RS_ERR_FORMAT, e, "tiny.txt has 2 bytes", "at least 641", "use a longer text");
    /* exactly 10*ctx+1 characters is enough: the validation part has ctx+1 */
    st = rs_data_text_load(tmp_write("just.txt", bin, 641, false), 64, &p, &e);
    RS_CHECK(st == RS_OK && p.test && p.test->n == 1 && p.train->n == 576 - 64, "641 characters: %s",
             st ? e.msg : "ok");
    rs_data_pair_clear(&p);

    st = rs_data_text_load("/nonexistent/book.txt", 64, &p, &e);
    EXPECT_ERR(st, RS_ERR_IO, e, "/nonexistent/book.txt", "No such file", "`text` for the built-in corpus");
    st = rs_data_text_load(tmp_root, 64, &p, &e);
    EXPECT_ERR(st, RS_ERR_IO, e, "is a directory");
    st = rs_data_text_load(tmp_write("ok.txt", bin, 1000, false), 0, &p, &e);
    EXPECT_ERR(st, RS_ERR_ARG, e, "ctx=0 is out of range", "1..8192");
    st = rs_data_text_fortunes("/nonexistent/fortunes", 64, &p, &e);
    EXPECT_ERR(st, RS_ERR_IO, e, "/nonexistent/fortunes", "apt-get install fortunes");
}

/* Source strings as the REPL writes them and rank workers reopen them. */
static void test_sources(void)
{
    char *text = sample_text(3000);
    const char *path = tmp_write("a,b.txt", text, 3000, false); /* a comma in the name */
    char src[700];
    rs_data_pair p;
    rs_err e = {0};
    snprintf(src, sizeof src, "text:%s,ctx=16", path);
    RS_CHECK(rs_data_open(src, 0, &p, &e) == RS_OK && p.train->w == 16 && p.train->n == 2700 - 16, "%s: %s", src,
             e.msg);
    rs_data_pair_clear(&p);
    snprintf(src, sizeof src, "text:%s", path);
    RS_CHECK(rs_data_open(src, 0, &p, &e) == RS_OK && p.train->w == RS_DATA_TEXT_CTX, "%s: %s", src, e.msg);
    rs_data_pair_clear(&p);
    RS_CHECK(rs_data_open("text", 9, &p, &e) == RS_OK && p.train->w == 64 && !strcmp(p.train->name, "text-train"),
             "text: %s", e.msg);
    uint32_t n64 = p.train ? p.train->n : 0;
    rs_data_pair_clear(&p);
    RS_CHECK(rs_data_open("text:builtin,ctx=32", 1, &p, &e) == RS_OK && p.train->w == 32 && p.train->n == n64 + 32,
             "text:builtin,ctx=32: %s", e.msg);
    rs_data_pair_clear(&p);
    RS_CHECK(rs_data_open("text:ctx=8", 1, &p, &e) == RS_OK && p.train->w == 8, "text:ctx=8: %s", e.msg);
    rs_data_pair_clear(&p);
    rs_status st = rs_data_open("text:builtin,ctx=x", 1, &p, &e);
    EXPECT_ERR(st, RS_ERR_ARG, e, "ctx=x is not a number");
    st = rs_data_open("text:builtin,ctx=99999", 1, &p, &e);
    EXPECT_ERR(st, RS_ERR_ARG, e, "out of range");
    st = rs_data_open("textual", 1, &p, &e);
    EXPECT_ERR(st, RS_ERR_ARG, e, "unknown data source", "text[:FILE|fortunes]");
    free(text);
}

/* Cross-entropy (nats per character) of the validation part under an order-k character model counted
 * on the training part, add-one smoothed: a figure of how much structure there is to learn. */
static double ngram_nats(const char *s, size_t ntrain, size_t n, int k)
{
    /* contexts hashed into a table of counts per next byte */
    enum { H = 1 << 16 };
    uint32_t(*cnt)[64] = calloc(H, sizeof *cnt);
    uint32_t *tot = calloc(H, sizeof *tot);
    int id[256], nv = 0;
    for (int c = 0; c < 256; c++) id[c] = -1;
    for (size_t i = 0; i < n; i++)
        if (id[(uint8_t)s[i]] < 0) id[(uint8_t)s[i]] = nv++;
    double nats = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = (size_t)k + (pass ? ntrain : 0); i < (pass ? n : ntrain); i++) {
            uint32_t h = 2166136261u;
            for (int j = 1; j <= k; j++) h = (h ^ (uint8_t)s[i - (size_t)j]) * 16777619u;
            h &= H - 1;
            int c = id[(uint8_t)s[i]];
            if (!pass) cnt[h][c]++, tot[h]++;
            else nats -= log((cnt[h][c] + 1.0) / (tot[h] + (double)nv));
        }
    free(cnt);
    free(tot);
    return nats / (double)(n - ntrain - (size_t)k);
}

static void test_builtin(void)
{
    size_t a, b;
    char *s1 = rs_data_story(RS_DATA_STORY_SEED, RS_DATA_STORY_BYTES, &a);
    char *s2 = rs_data_story(RS_DATA_STORY_SEED, RS_DATA_STORY_BYTES, &b);
    RS_CHECK(s1 && s2 && a == b && !memcmp(s1, s2, a), "the built-in corpus is deterministic");
    RS_CHECK(a >= 150000 && a <= 300000 && strlen(s1) == a, "%zu bytes", a);
    char *s3 = rs_data_story(RS_DATA_STORY_SEED + 1, 5000, &b);
    RS_CHECK(s3 && b >= 5000 && memcmp(s1, s3, 1000) != 0, "another seed, other tales");
    free(s3);
    /* a fixed fingerprint: the corpus must not drift unnoticed (tutorials and golden files show it) */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < a; i++) h = (h ^ (uint8_t)s1[i]) * 1099511628211ull;
    printf("built-in corpus: %zu bytes, FNV-1a %016llx\n  %.*s\n", a, (unsigned long long)h, 300, s1);
    RS_CHECK(!memchr(s1, '\0', a) && !strstr(s1, "\n ") && !strstr(s1, "\n\n\n"), "clean lines");
    rs_data_pair p;
    rs_err e = {0};
    RS_CHECK(rs_data_text_builtin(64, &p, &e) == RS_OK, "%s", e.msg);
    if (p.train) {
        const rs_text_vocab *v = rs_text_vocab_of(p.train);
        RS_CHECK(v->n >= 30 && v->n <= 64, "a small vocabulary: %d", v->n);
        RS_CHECK(rs_text_len(p.train) + rs_text_len(p.test) == a, "the pair is the corpus");
        RS_CHECK(strstr(p.train->source, "builtin"), "source %s", p.train->source);
    }
    rs_data_pair_clear(&p);
    /* structure to learn: each order of context lowers the cross-entropy well below uniform */
    size_t nt = a * 9 / 10;
    double h0 = ngram_nats(s1, nt, a, 0), h2 = ngram_nats(s1, nt, a, 2), h4 = ngram_nats(s1, nt, a, 4);
    printf("validation nats/char with a k-gram model counted on train: k=0 %.3f, k=2 %.3f, k=4 %.3f (uniform "
           "%.3f)\n",
           h0, h2, h4, log(50.0));
    RS_CHECK(h2 < 0.7 * h0 && h4 < 1.0, "learnable: k=0 %.3f k=2 %.3f k=4 %.3f", h0, h2, h4);
    free(s1);
    free(s2);
}

/* Fortune files in a directory made here: '%' lines, the index files skipped, name order. */
static void test_fortune_dir(void)
{
    const char *dir = tmp_path("fortunes");
    mkdir(dir, 0700);
    char body[2000];
    size_t n = 0;
    while (n < 1400) n += (size_t)snprintf(body + n, sizeof body - n, "A wise cat naps.\n%%\nB_\bbold\a dogs.\n%%\n");
    tmp_write("fortunes/b", body, n, false);
    tmp_write("fortunes/a", "First.\n%\nSecond.\n", 17, false);
    tmp_write("fortunes/a.dat", "\x00\x00\x00\x02\x01", 5, false);
    tmp_write("fortunes/b.u8", "\x01\x02\x03", 3, false);
    rs_data_pair p;
    rs_err e = {0};
    RS_CHECK(rs_data_text_fortunes(dir, 8, &p, &e) == RS_OK, "%s", e.msg);
    if (p.train) {
        const rs_text_vocab *v = rs_text_vocab_of(p.train);
        char xs[9], ys[9];
        window(p.train, 0, xs, ys);
        RS_CHECK(!strcmp(xs, "First.\n\n"), "a comes first, '%%' became an empty line: '%s'", xs);
        window(p.train, 16, xs, ys); /* "First.\n\nSecond.\n" is 16 characters */
        RS_CHECK(!strcmp(xs, "A wise c"), "then b: '%s'", xs);
        window(p.train, 34, xs, ys);
        RS_CHECK(!strcmp(xs, "Bbold do"), "overstrike and bell removed: '%s'", xs);
        RS_CHECK(v->id['%'] < 0 && v->id['\b'] < 0 && v->id[1] < 0 && v->id[7] < 0,
                 "no separators, index bytes, backspaces or bells");
        RS_CHECK(!strcmp(p.train->name, "fortunes-train"), "name %s", p.train->name);
    }
    rs_data_pair_clear(&p);
    tmp_path("fortunes/a");
    tmp_path("fortunes/b");
    tmp_path("fortunes/a.dat");
    tmp_path("fortunes/b.u8");
}

/* Debian's package: read whole, about 2.5 MB. */
static int test_fortunes_package(void)
{
    struct stat sb;
    if (stat(RS_DATA_FORTUNES_DIR, &sb) != 0)
        RS_SKIP("%s is missing: Debian's fortunes package is not installed (apt-get install fortunes)",
                RS_DATA_FORTUNES_DIR);
    rs_data_pair p;
    rs_err e = {0};
    RS_CHECK(rs_data_open("text:fortunes,ctx=128", 0, &p, &e) == RS_OK, "%s", e.msg);
    if (p.train) {
        size_t n = rs_text_len(p.train) + rs_text_len(p.test);
        const rs_text_vocab *v = rs_text_vocab_of(p.train);
        printf("fortunes: %zu characters, vocabulary %d, %u + %u windows of 128\n", n, v->n, p.train->n, p.test->n);
        RS_CHECK(n > 1500000 && n < 6000000, "%zu characters", n);
        RS_CHECK(v->id['e'] >= 0 && v->id['\b'] < 0 && v->n < 160, "vocabulary %d", v->n);
        RS_CHECK(p.train->n == rs_text_len(p.train) - 128, "train windows");
    }
    rs_data_pair_clear(&p);
    return rs_test_finish("data-text-fortunes");
}

/* A float model refuses token data, naming both. */
static void test_check_data(void)
{
    rs_data_pair p;
    rs_err e = {0};
    RS_CHECK(rs_data_text_builtin(16, &p, &e) == RS_OK, "%s", e.msg);
    rs_model *m = NULL;
    RS_CHECK(rs_model_parse("mlp 16-8-50", "m", rs_device_cpu(), NULL, 1, &m, NULL, &e) == RS_OK, "%s", e.msg);
    if (m && p.train) {
        rs_status st = rs_train_check_data(m, p.train, &e);
        EXPECT_ERR(st, RS_ERR_SHAPE, e, "text-train holds token ids", "model m takes floats", "an embedding");
        double acc, loss;
        st = rs_evaluate(m, p.test, 64, &acc, &loss, &e);
        EXPECT_ERR(st, RS_ERR_SHAPE, e, "text-val holds token ids");
    }
    rs_model_free(m);
    rs_data_pair_clear(&p);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "fortunes")) return test_fortunes_package();
    test_vocab();
    test_windows();
    test_loader();
    test_bad();
    test_sources();
    test_builtin();
    test_fortune_dir();
    test_check_data();
    tmp_cleanup();
    return rs_test_finish("data-text");
}
