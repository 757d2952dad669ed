/* Data sources by name (see source.h). */
#include "source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "gen/digits.h"

#define TEST_FRAC (1.0 / 6.0)

/* Splits "a,b,c" in place into at most max parts. */
static int split_commas(char *s, char **parts, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) parts[n++] = t;
    return n;
}

/* text[:WHAT][,ctx=N]: WHAT is builtin (the default), fortunes[=DIR] or a file path, which may itself
 * hold commas (only a last ",ctx=N" is taken off). */
static rs_status open_text(const char *arg, rs_data_pair *out, rs_err *err)
{
    char what[2048];
    snprintf(what, sizeof what, "%s", arg ? arg : "");
    long ctx = RS_DATA_TEXT_CTX;
    char *num = NULL; /* the digits after ctx=, cut off what */
    char *c = strrchr(what, ',');
    if (!strncmp(what, "ctx=", 4)) { /* "text:ctx=32" */
        num = what + 4;
        c = what;
    } else if (c && !strncmp(c + 1, "ctx=", 4)) {
        num = c + 5;
    }
    if (num) {
        char *end;
        ctx = strtol(num, &end, 10);
        if (*end || end == num)
            return rs_err_set(err, RS_ERR_ARG, "text: ctx=%s is not a number; e.g. text:builtin,ctx=64", num);
        if (ctx < 1 || ctx > RS_DATA_TEXT_CTX_MAX) ctx = RS_DATA_TEXT_CTX_MAX + 1; /* let the reader say the range */
        *c = '\0';
    }
    if (!what[0] || !strcmp(what, "builtin")) return rs_data_text_builtin((int)ctx, out, err);
    if (!strcmp(what, "fortunes")) return rs_data_text_fortunes(NULL, (int)ctx, out, err);
    if (!strncmp(what, "fortunes=", 9)) return rs_data_text_fortunes(what + 9, (int)ctx, out, err);
    return rs_data_text_load(what, (int)ctx, out, err);
}

rs_status rs_data_open(const char *source, uint64_t seed, rs_data_pair *out, rs_err *err)
{
    memset(out, 0, sizeof *out);
    if (!strncmp(source, "text", 4) && (source[4] == '\0' || source[4] == ':')) {
        rs_status st = open_text(source[4] ? source + 5 : NULL, out, err);
        if (st) rs_data_pair_clear(out);
        return st;
    }
    const char *colon = strchr(source, ':');
    size_t kl = colon ? (size_t)(colon - source) : strlen(source);
    const char *arg = colon ? colon + 1 : NULL;
    char *buf = arg ? strdup(arg) : NULL; /* owned here: split in place */
    char *parts[64];
    int np = buf ? split_commas(buf, parts, 64) : 0;
    rs_status st;
    rs_dataset *all = NULL;
    if (kl == 6 && !strncmp(source, "digits", kl)) {
        long n = 20000;
        if (np == 1) {
            char *end;
            n = strtol(parts[0], &end, 10);
            if (*end || n < 1) {
                free(buf);
                return rs_err_set(err, RS_ERR_ARG, "digits:%s: expected a sample count, e.g. digits:20000", arg);
            }
        }
        if (n > (long)RS_DATA_DIGITS_MAX_N) n = (long)RS_DATA_DIGITS_MAX_N + 1; /* let it say the range */
        st = rs_data_digits_pair((uint32_t)n, (uint32_t)(n / 6 > 0 ? n / 6 : 1), seed, out, err);
    } else if (kl == 7 && !strncmp(source, "fashion", kl)) {
        st = rs_data_fashion(np ? parts[0] : NULL, out, err);
    } else if (kl == 3 && !strncmp(source, "idx", kl)) {
        if (np != 2 && np != 4) {
            free(buf);
            return rs_err_set(err, RS_ERR_ARG,
                              "idx needs IMAGES,LABELS or IMAGES,LABELS,TEST_IMAGES,TEST_LABELS, e.g. "
                              "idx:train-images-idx3-ubyte.gz,train-labels-idx1-ubyte.gz");
        }
        st = rs_data_idx_load(parts[0], parts[1], np == 4 ? &out->train : &all, err);
        if (!st && np == 4) st = rs_data_idx_load(parts[2], parts[3], &out->test, err);
    } else if (kl == 5 && !strncmp(source, "cifar", kl)) {
        if (np < 1) {
            free(buf);
            return rs_err_set(err, RS_ERR_ARG, "cifar needs one or more batch files, e.g. cifar:data_batch_1.bin");
        }
        st = rs_data_cifar_load((const char *const *)parts, np, &all, err);
    } else if (kl == 3 && !strncmp(source, "csv", kl)) {
        if (np != 1) {
            free(buf);
            return rs_err_set(err, RS_ERR_ARG, "csv needs one file, e.g. csv:iris.csv");
        }
        st = rs_data_csv_load(parts[0], NULL, &all, err);
    } else {
        free(buf);
        return rs_err_set(err, RS_ERR_ARG,
                          "unknown data source '%.*s'; expected digits[:N], fashion[:DIR], idx:IMAGES,LABELS, "
                          "cifar:FILE[,FILE..], csv:FILE or text[:FILE|fortunes][,ctx=N]",
                          (int)kl, source);
    }
    free(buf);
    if (!st && all) st = rs_data_split(all, TEST_FRAC, seed, out, err); /* consumes all */
    if (st) rs_data_pair_clear(out);
    return st;
}
