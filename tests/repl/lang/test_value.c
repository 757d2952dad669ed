/* Tests of the typed values: each type's accepted forms, its errors (with what the message must say),
 * overflow as an error rather than a wrap, near misses, and round trips parse(format(x)) == x for
 * sizes and durations. */
#include <locale.h>
#include <stdint.h>
#include <string.h>

#include "repl/lang/value.h"
#include "tests/rs_test.h"

/* Checks that st failed with a message containing `want` and quoting the word. */
static void expect_err(int at, rs_status st, const rs_err *e, const char *word, const char *want)
{
    RS_CHECK(st == RS_ERR_ARG, "line %d: '%s' should fail", at, word);
    RS_CHECK(strstr(e->msg, want), "line %d: '%s': message '%s' lacks '%s'", at, word, e->msg, want);
    printf("  %-26s -> %s\n", word, e->msg);
}

#define ERR(call, word, want)                                                                      \
    do {                                                                                           \
        rs_err e_ = {0};                                                                           \
        rs_status st_ = call(word, &e_);                                                           \
        expect_err(__LINE__, st_, &e_, word, want);                                                \
    } while (0)

static rs_status p_int(const char *w, rs_err *e) { int64_t v; return rs_val_int(w, &v, e); }
static rs_status p_float(const char *w, rs_err *e) { double v; return rs_val_float(w, &v, e); }
static rs_status p_ratio(const char *w, rs_err *e) { double v; return rs_val_ratio(w, &v, e); }
static rs_status p_size(const char *w, rs_err *e) { uint64_t v; return rs_val_size(w, &v, e); }
static rs_status p_range(const char *w, rs_err *e) { uint64_t a, b; return rs_val_size_range(w, &a, &b, e); }
static rs_status p_dur(const char *w, rs_err *e) { double v; return rs_val_duration(w, &v, e); }
static rs_status p_bool(const char *w, rs_err *e) { int v; return rs_val_bool(w, &v, e); }
static const char *const algos[] = {"ring", "tree", "rd"};
static rs_status p_enum(const char *w, rs_err *e) { int v; return rs_val_enum(w, algos, 3, &v, e); }
static rs_status p_shape(const char *w, rs_err *e)
{
    int64_t d[RS_VAL_SHAPE_MAX];
    int n;
    return rs_val_shape(w, d, 4, &n, e);
}

static void test_int(void)
{
    static const struct { const char *w; int64_t v; } ok[] = {
        {"10", 10}, {"-5", -5}, {"+7", 7}, {"0", 0}, {"007", 7},
        {"9223372036854775807", INT64_MAX}, {"-9223372036854775808", INT64_MIN},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        int64_t v = 0;
        rs_err e = {0};
        RS_CHECK(rs_val_int(ok[i].w, &v, &e) == RS_OK && v == ok[i].v, "int '%s': %lld (%s)", ok[i].w,
                 (long long)v, e.msg);
    }
    ERR(p_int, "9223372036854775808", "out of range");
    ERR(p_int, "-9223372036854775809", "out of range");
    ERR(p_int, "99999999999999999999999", "out of range");
    ERR(p_int, "4.5", "expected an integer");
    ERR(p_int, "16K", "expected an integer");
    ERR(p_int, "", "expected an integer");
    ERR(p_int, "-", "expected an integer");
    ERR(p_int, "1 2", "expected an integer");
}

static void test_float(void)
{
    static const struct { const char *w; double v; } ok[] = {
        {"1e-3", 1e-3}, {"0.05", 0.05}, {".5", 0.5}, {"5.", 5}, {"-2.5E+2", -250}, {"3", 3}, {"1e-400", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        double v = -1;
        rs_err e = {0};
        RS_CHECK(rs_val_float(ok[i].w, &v, &e) == RS_OK && v == ok[i].v, "float '%s': %g (%s)", ok[i].w, v, e.msg);
    }
    ERR(p_float, "1e999", "too large");
    ERR(p_float, "inf", "expected a number such as 0.05");
    ERR(p_float, "nan", "expected a number");
    ERR(p_float, "0x10", "expected a number");
    ERR(p_float, "1e", "expected a number");
    ERR(p_float, "1,5", "expected a number");
    ERR(p_float, ".", "expected a number");
    ERR(p_float, "", "expected a number");

    double r = -1;
    RS_CHECK(rs_val_ratio("0.1", &r, NULL) == RS_OK && r == 0.1, "ratio 0.1: %g", r);
    RS_CHECK(rs_val_ratio("10%", &r, NULL) == RS_OK && r == 0.1, "ratio 10%%: %g", r);
    RS_CHECK(rs_val_ratio("100%", &r, NULL) == RS_OK && r == 1, "ratio 100%%: %g", r);
    RS_CHECK(rs_val_ratio("0", &r, NULL) == RS_OK && r == 0, "ratio 0: %g", r);
    ERR(p_ratio, "1.5", "ratio from 0 to 1");
    ERR(p_ratio, "150%", "ratio from 0 to 1");
    ERR(p_ratio, "-0.1", "ratio from 0 to 1");
    ERR(p_ratio, "%", "ratio from 0 to 1");
    ERR(p_ratio, "10%%", "ratio from 0 to 1");
}

static void test_size(void)
{
    static const struct { const char *w; uint64_t v; } ok[] = {
        {"8", 8}, {"16K", 16384}, {"16M", 16u << 20}, {"1G", 1u << 30}, {"64KB", 65536}, {"2MiB", 2u << 20},
        {"1.5K", 1536}, {"0.5M", 512u << 10}, {"16k", 16384}, {"100B", 100}, {"0", 0}, {".5K", 512},
        {"7E", UINT64_C(7) << 60}, {"1T", UINT64_C(1) << 40}, {"0.0009765625K", 1}, {"1.50000K", 1536},
        {"+4", 4}, {"8191.9990234375P", (UINT64_C(8191) << 50) + (UINT64_C(1023) << 40)},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        uint64_t v = 1;
        rs_err e = {0};
        RS_CHECK(rs_val_size(ok[i].w, &v, &e) == RS_OK && v == ok[i].v, "size '%s': %llu, want %llu (%s)", ok[i].w,
                 (unsigned long long)v, (unsigned long long)ok[i].v, e.msg);
    }
    ERR(p_size, "1.3K", "not a whole number of bytes");
    ERR(p_size, "1.5", "not a whole number of bytes");
    ERR(p_size, "0.00048828125K", "not a whole number of bytes");
    ERR(p_size, "-1", "cannot be negative");
    ERR(p_size, "16Q", "unknown unit 'Q' in '16Q'");
    ERR(p_size, "1e6", "unknown unit 'e6'");
    ERR(p_size, "99999999999999999999G", "too large");
    ERR(p_size, "99999999999999999999", "too large");
    ERR(p_size, "8E", "too large");
    ERR(p_size, "9223372036854775807.5", "not a whole number");
    ERR(p_size, "1.00000000000000000001K", "too many digits");
    ERR(p_size, "K", "expected a size such as 8, 16K or 1.5M");
    ERR(p_size, "", "expected a size");

    uint64_t lo = 1, hi = 1;
    RS_CHECK(rs_val_size_range("8..64M", &lo, &hi, NULL) == RS_OK && lo == 8 && hi == 64u << 20, "range 8..64M");
    RS_CHECK(rs_val_size_range("8M", &lo, &hi, NULL) == RS_OK && lo == 8u << 20 && hi == lo, "range 8M");
    RS_CHECK(rs_val_size_range("1K..1024", &lo, &hi, NULL) == RS_OK && lo == 1024 && hi == 1024, "range equal");
    ERR(p_range, "64M..8", "runs backwards: '64M' is more than '8'");
    ERR(p_range, "..8", "expected a size range such as 8..64M");
    ERR(p_range, "8..", "expected a size range");
    ERR(p_range, "8..64Q", "unknown unit 'Q' in '64Q'");
    ERR(p_range, "8...64M", "not a whole number of bytes");
}

static void test_duration(void)
{
    static const struct { const char *w; double v; } ok[] = {
        {"500us", 500e-6}, {"2ms", 0.002}, {"3ms", 0.003}, {"0.1ms", 1e-4}, {"1.5s", 1.5}, {"2m", 120},
        {"1h", 3600}, {"100ns", 1e-7}, {"1e3ms", 1}, {"5\xc2\xb5s", 5e-6}, {"0", 0}, {"90min", 5400},
        {"2sec", 2}, {"2MS", 0.002}, {".5s", 0.5}, {"0.7e-2s", 0.007}, {"7e+2ms", 0.7}, {"-0s", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        double v = -1;
        rs_err e = {0};
        /* Exact equality: the unit is folded into the decimal exponent, one rounding only. */
        RS_CHECK(rs_val_duration(ok[i].w, &v, &e) == RS_OK && v == ok[i].v, "duration '%s': %.17g (%s)", ok[i].w, v,
                 e.msg);
    }
    ERR(p_dur, "500", "could be '500ms' or '500s'");
    ERR(p_dur, "-1s", "cannot be negative");
    ERR(p_dur, "2mss", "did you mean 'ms'?");
    ERR(p_dur, "2days", "durations take ns, us, ms, s, m (minutes) or h");
    ERR(p_dur, "1e999s", "too long");
    ERR(p_dur, "abc", "expected a duration such as 500us");
    ERR(p_dur, "", "expected a duration");
}

static void test_bool_enum(void)
{
    static const struct { const char *w; int v; } ok[] = {
        {"on", 1}, {"OFF", 0}, {"true", 1}, {"False", 0}, {"yes", 1}, {"no", 0}, {"1", 1}, {"0", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        int v = -1;
        RS_CHECK(rs_val_bool(ok[i].w, &v, NULL) == RS_OK && v == ok[i].v, "bool '%s': %d", ok[i].w, v);
    }
    ERR(p_bool, "onn", "did you mean 'on'?");
    ERR(p_bool, "maybe", "expected on or off (or true/false, yes/no, 1/0), got 'maybe'");

    int v = -1;
    RS_CHECK(rs_val_enum("tree", algos, 3, &v, NULL) == RS_OK && v == 1, "enum tree: %d", v);
    RS_CHECK(rs_val_enum("RING", algos, 3, &v, NULL) == RS_OK && v == 0, "enum RING: %d", v);
    ERR(p_enum, "rign", "expected one of ring, tree, rd, got 'rign' (did you mean 'ring'?)");
    ERR(p_enum, "xyzzy", "expected one of ring, tree, rd, got 'xyzzy'");
    rs_err e = {0};
    RS_CHECK(rs_val_enum("x", algos, 0, &v, &e) == RS_ERR_INTERNAL, "enum with no names");
    /* A long word is cut in the message. */
    char big[200];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    RS_CHECK(rs_val_enum(big, algos, 3, &v, &e) == RS_ERR_ARG && strstr(e.msg, "...'") && strlen(e.msg) < 120,
             "long word: %s", e.msg);

    static const char *const opts[] = {"epochs", "batch", "lr", "relu"};
    const char *nm;
    RS_CHECK((nm = rs_val_near_miss("epochz", opts, 4)) && !strcmp(nm, "epochs"), "epochz");
    RS_CHECK((nm = rs_val_near_miss("EPOCHS", opts, 4)) && !strcmp(nm, "epochs"), "EPOCHS");
    RS_CHECK((nm = rs_val_near_miss("rel", opts, 4)) && !strcmp(nm, "relu"), "rel");
    RS_CHECK((nm = rs_val_near_miss("lt", opts, 4)) && !strcmp(nm, "lr"), "lt");
    RS_CHECK(!rs_val_near_miss("rd", opts, 4), "rd is two edits from relu and lr: no hint for a short word");
    RS_CHECK(!rs_val_near_miss("bl", opts, 4), "bl");
    RS_CHECK(!rs_val_near_miss("zzzzzz", opts, 4), "zzzzzz");
    /* an abbreviation of exactly one candidate (op=prod), none when two begin so */
    const char *const redops[] = {"sum", "product", "min", "max", "avg"};
    RS_CHECK((nm = rs_val_near_miss("prod", redops, 5)) && !strcmp(nm, "product"), "prod -> product");
    RS_CHECK((nm = rs_val_near_miss("PROD", redops, 5)) && !strcmp(nm, "product"), "PROD -> product");
    RS_CHECK(!rs_val_near_miss("m", redops, 5), "m begins min and max: no hint");
    const char *const two[] = {"product", "production"};
    RS_CHECK(!rs_val_near_miss("prod", two, 2), "prod begins two: no hint");
    RS_CHECK(!rs_val_near_miss("epochs", opts, 0) && !rs_val_near_miss(NULL, opts, 4), "no candidates");
}

static void test_shape(void)
{
    int64_t d[RS_VAL_SHAPE_MAX];
    int n = 0;
    RS_CHECK(rs_val_shape("1x28x28", d, 4, &n, NULL) == RS_OK && n == 3 && d[0] == 1 && d[1] == 28 && d[2] == 28,
             "1x28x28");
    RS_CHECK(rs_val_shape("784", d, 4, &n, NULL) == RS_OK && n == 1 && d[0] == 784, "784");
    RS_CHECK(rs_val_shape("3X32X32", d, 4, &n, NULL) == RS_OK && n == 3 && d[0] == 3, "3X32X32");
    ERR(p_shape, "1x0x2", "at least 1");
    ERR(p_shape, "1xx2", "expected a shape such as 1x28x28");
    ERR(p_shape, "x1", "expected a shape");
    ERR(p_shape, "1x", "expected a shape");
    ERR(p_shape, "1x2y", "expected a shape");
    ERR(p_shape, "", "expected a shape");
    ERR(p_shape, "1x2x3x4x5", "more than 4 dimensions");
    ERR(p_shape, "99999999999x99999999999", "too large");
    ERR(p_shape, "99999999999999999999999", "too large");
}

/* A deterministic stream of test values. */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void test_format(void)
{
    static const struct { uint64_t v; const char *s; } sz[] = {
        {16u << 20, "16M"}, {1536, "1.5K"}, {1000, "1000"}, {0, "0"}, {1024, "1K"}, {1280, "1.25K"},
        {1152, "1.125K"}, {1025, "1025"}, {UINT64_C(1) << 62, "4E"}, {(1u << 30) + (1u << 29), "1.5G"},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof sz / sizeof *sz; i++) {
        rs_val_fmt_size(sz[i].v, buf, sizeof buf);
        RS_CHECK(!strcmp(buf, sz[i].s), "fmt_size %llu: '%s', want '%s'", (unsigned long long)sz[i].v, buf, sz[i].s);
    }
    RS_CHECK(rs_val_fmt_size(16u << 20, NULL, 0) == 3, "fmt_size returns the length it needs");
    RS_CHECK(rs_val_fmt_size(123456789, buf, 4) == 9 && !strcmp(buf, "123"), "fmt_size truncates: '%s'", buf);

    static const struct { double v; const char *s; } du[] = {
        {0.0005, "500us"}, {0.002, "2ms"}, {1.5, "1.5s"}, {120, "2m"}, {3600, "1h"}, {90, "90s"}, {0, "0s"},
        {1e-7, "100ns"}, {0.1, "100ms"}, {7200 + 60, "121m"}, {0.0015, "1.5ms"},
    };
    for (size_t i = 0; i < sizeof du / sizeof *du; i++) {
        rs_val_fmt_duration(du[i].v, buf, sizeof buf);
        RS_CHECK(!strcmp(buf, du[i].s), "fmt_duration %g: '%s', want '%s'", du[i].v, buf, du[i].s);
    }

    /* Round trips: every size up to INT64_MAX, shaped to hit each unit and fraction; durations over
     * many magnitudes, bit-exact. */
    uint64_t s = 7;
    int bad_size = 0, bad_dur = 0;
    for (int i = 0; i < 20000; i++) {
        uint64_t r = mix(&s), v;
        switch (i % 4) {
        case 0: v = r >> 1; break;
        case 1: v = (r >> (r % 63)) >> 1; break;
        case 2: v = (r % 8192) << (10 * (1 + r % 5)); break;
        default: v = ((r % 8) << (10 * (1 + r % 5))) >> 3; break;
        }
        uint64_t back = 0;
        rs_val_fmt_size(v, buf, sizeof buf);
        if (rs_val_size(buf, &back, NULL) != RS_OK || back != v) {
            if (bad_size++ < 5) RS_CHECK(0, "size %llu -> '%s' -> %llu", (unsigned long long)v, buf, (unsigned long long)back);
        }
        double d = (double)(r >> 11) / (double)(UINT64_C(1) << 53) * pow(10, (double)(int)(r % 24) - 12);
        if (i % 3 == 0) d = (double)(r % 100000) * pow(10, (double)(int)(r % 13) - 9);
        double db = -1;
        rs_val_fmt_duration(d, buf, sizeof buf);
        if (rs_val_duration(buf, &db, NULL) != RS_OK || db != d) {
            if (bad_dur++ < 5) RS_CHECK(0, "duration %.17g -> '%s' -> %.17g", d, buf, db);
        }
    }
    RS_CHECK(bad_size == 0 && bad_dur == 0, "round trips: %d sizes and %d durations differ", bad_size, bad_dur);
    rs_val_fmt_duration(1e300, buf, sizeof buf);
    double db;
    RS_CHECK(rs_val_duration(buf, &db, NULL) == RS_OK && db == 1e300, "1e300 s -> '%s'", buf);
}

/* Under a locale whose decimal point is ',' the words read and print the same. */
static void test_locale(void)
{
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "ru_RU.UTF-8"};
    const char *got = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !got; i++) got = setlocale(LC_NUMERIC, names[i]);
    if (!got) {
        printf("  (no locale with a ',' decimal point installed: locale check not run)\n");
        return;
    }
    double v = 0;
    char buf[32];
    RS_CHECK(rs_val_float("0.05", &v, NULL) == RS_OK && v == 0.05, "float under %s: %g", got, v);
    RS_CHECK(rs_val_duration("1.5ms", &v, NULL) == RS_OK && v == 0.0015, "duration under %s", got);
    rs_val_fmt_duration(1.5, buf, sizeof buf);
    RS_CHECK(!strcmp(buf, "1.5s"), "fmt_duration under %s: %s", got, buf);
    setlocale(LC_NUMERIC, "C");
}

int main(void)
{
    test_int();
    test_float();
    test_size();
    test_duration();
    test_bool_enum();
    test_shape();
    test_format();
    test_locale();
    return rs_test_finish("lang-value");
}
