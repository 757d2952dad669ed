/* rs_data_split: sizes, disjoint and covering, each side in source order, same seed same split, and the
 * input consumed on success and failure alike (a leak would fail the sanitizer run). */
#include <string.h>

#include "engine/data/data.h"
#include "tests/rs_test.h"

static rs_dataset *make(uint32_t n)
{
    rs_dataset *d = rs_dataset_new(n, 1, 1, 2, 5);
    for (uint32_t i = 0; i < n; i++) d->x[2 * i] = (float)i, d->x[2 * i + 1] = -(float)i, d->y[i] = (int32_t)(i % 5);
    strcpy(d->name, "toy");
    strcpy(d->source, "toy.csv");
    return d;
}

static void check_pair(const rs_data_pair *p, uint32_t n, uint32_t ntest)
{
    RS_CHECK(p->test->n == ntest && p->train->n == n - ntest, "sizes %u/%u", p->train->n, p->test->n);
    char seen[1000] = {0};
    int bad = 0;
    const rs_dataset *parts[2] = {p->train, p->test};
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < parts[k]->n; i++) {
            uint32_t id = (uint32_t)parts[k]->x[2 * i];
            seen[id]++;
            bad += parts[k]->x[2 * i + 1] != -(float)id || parts[k]->y[i] != (int32_t)(id % 5);
            if (i) bad += parts[k]->x[2 * i] <= parts[k]->x[2 * (i - 1)]; /* source order */
        }
    int cover = 0;
    for (uint32_t i = 0; i < n; i++) cover += seen[i] == 1;
    RS_CHECK(cover == (int)n && bad == 0, "split is not a partition in source order (%d, %d bad)", cover, bad);
    RS_CHECK(p->train->n_classes == 5 && !strcmp(p->train->name, "toy-train") &&
                 !strcmp(p->test->name, "toy-test") && !strcmp(p->test->source, "toy.csv"),
             "metadata");
}

int main(void)
{
    rs_err e = {0};
    rs_data_pair a, b, c;
    RS_CHECK(rs_data_split(make(100), 0.2, 7, &a, &e) == RS_OK, "%s", e.msg);
    check_pair(&a, 100, 20);
    RS_CHECK(rs_data_split(make(100), 0.2, 7, &b, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(!memcmp(a.test->x, b.test->x, 40 * sizeof(float)), "same seed, different split");
    RS_CHECK(rs_data_split(make(100), 0.2, 8, &c, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(memcmp(a.test->x, c.test->x, 40 * sizeof(float)) != 0, "seeds 7 and 8 give the same split");
    rs_data_pair_clear(&a);
    rs_data_pair_clear(&b);
    rs_data_pair_clear(&c);

    RS_CHECK(rs_data_split(make(3), 0.5, 1, &a, &e) == RS_OK, "%s", e.msg); /* round(1.5) = 2 */
    check_pair(&a, 3, 2);
    rs_data_pair_clear(&a);

    const double bad[] = {0, 1, -0.5, 1.5, 0.0 / 0.0};
    for (int i = 0; i < 5; i++) {
        RS_CHECK(rs_data_split(make(10), bad[i], 1, &a, &e) == RS_ERR_ARG && !a.train && !a.test,
                 "test_frac %g accepted", bad[i]);
        printf("  %s\n", e.msg);
    }
    RS_CHECK(rs_data_split(make(10), 0.01, 1, &a, &e) == RS_ERR_ARG && strstr(e.msg, "test set"), "%s", e.msg);
    RS_CHECK(rs_data_split(make(10), 0.99, 1, &a, &e) == RS_ERR_ARG && strstr(e.msg, "training set"), "%s", e.msg);
    RS_CHECK(rs_data_split(make(1), 0.5, 1, &a, &e) == RS_ERR_ARG, "one sample");
    RS_CHECK(rs_data_split(NULL, 0.5, 1, &a, &e) == RS_ERR_ARG, "NULL");
    return rs_test_finish("data-split");
}
