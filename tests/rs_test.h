/* A tiny test harness: checks print what differed and count failures; main returns the count, so a
 * failing check always fails the test. RS_SKIP exits 77, meson's "skipped", with the reason. */
#ifndef RS_TEST_H
#define RS_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int rs_test_failures = 0;
static int rs_test_checks = 0;

#define RS_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        rs_test_checks++;                                                                          \
        if (!(cond)) {                                                                             \
            rs_test_failures++;                                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* |a - b| <= atol + rtol*|b| */
#define RS_CHECK_CLOSE(a, b, atol, rtol, what)                                                     \
    do {                                                                                           \
        double rs_a_ = (a), rs_b_ = (b);                                                           \
        RS_CHECK(fabs(rs_a_ - rs_b_) <= (atol) + (rtol) * fabs(rs_b_), "%s: got %.9g want %.9g",   \
                 (what), rs_a_, rs_b_);                                                            \
    } while (0)

#define RS_SKIP(...)                                                                               \
    do {                                                                                           \
        printf("SKIP: ");                                                                          \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        exit(77);                                                                                  \
    } while (0)

static inline int rs_test_finish(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, rs_test_checks, rs_test_failures);
    return rs_test_failures ? 1 : 0;
}

#endif
