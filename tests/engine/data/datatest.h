/* Helpers of the data tests: scratch files in a private mkdtemp directory, written plain or
 * gzip-compressed (through zlib, as the readers read them) and removed at the end, and EXPECT_ERR, which
 * checks a failure's status and that its message names what it must (file, offset, the fault). */
#ifndef RS_TEST_DATATEST_H
#define RS_TEST_DATATEST_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/core/status.h"
#include "tests/rs_test.h"

#define TMP_MAX_FILES 64

static char tmp_root[512];
static char tmp_files[TMP_MAX_FILES][600];
static int tmp_nfiles;

/* Creates the directory on first use; returns dir/name in a slot that lives until tmp_cleanup. */
static const char *tmp_path(const char *name)
{
    if (!tmp_root[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(tmp_root, sizeof tmp_root, "%s/rs-data-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmp_root)) {
            perror("mkdtemp");
            exit(1);
        }
    }
    if (tmp_nfiles == TMP_MAX_FILES) {
        fprintf(stderr, "tmp_path: too many files\n");
        exit(1);
    }
    char *p = tmp_files[tmp_nfiles++];
    snprintf(p, sizeof tmp_files[0], "%s/%s", tmp_root, name);
    return p;
}

/* Writes data to dir/name (gzip-compressed when gz) and returns the path. */
static const char *tmp_write(const char *name, const void *data, size_t n, bool gz)
{
    const char *p = tmp_path(name);
    if (gz) {
        gzFile g = gzopen(p, "wb");
        if (!g || (n && gzwrite(g, data, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) {
            fprintf(stderr, "cannot write %s\n", p);
            exit(1);
        }
    } else {
        FILE *f = fopen(p, "wb");
        if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
            fprintf(stderr, "cannot write %s\n", p);
            exit(1);
        }
    }
    return p;
}

static void tmp_cleanup(void)
{
    for (int i = tmp_nfiles - 1; i >= 0; i--) {
        unlink(tmp_files[i]);
        rmdir(tmp_files[i]); /* slots that name subdirectories */
    }
    if (tmp_root[0]) rmdir(tmp_root);
}

/* Prints each message (the test log doubles as a gallery of what users read) and checks it. */
static void expect_err_(int line, rs_status got, rs_status want, const rs_err *e, const char *const *subs)
{
    printf("  line %d: %s\n", line, e->msg);
    RS_CHECK(got == want, "line %d: status '%s', want '%s' (message: %s)", line, rs_status_name(got),
             rs_status_name(want), e->msg);
    for (; *subs; subs++)
        RS_CHECK(strstr(e->msg, *subs) != NULL, "line %d: message lacks '%s': %s", line, *subs, e->msg);
}
#define EXPECT_ERR(got, want, e, ...)                                                              \
    expect_err_(__LINE__, (got), (want), &(e), (const char *const[]){__VA_ARGS__, NULL})

#endif
