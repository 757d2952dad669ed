/* DistributedSampler semantics: for n in {10, 11, 13, 100}, W in {1..4}, drop_last on and off, every
 * rank gets the same count, ranks are disjoint when nothing is padded, the epoch is covered, padding
 * repeats the permutation from its start, epochs reshuffle reproducibly, and the union over ranks of
 * batch s is the contiguous block [W*s*b, W*(s+1)*b) of the epoch permutation (what makes W ranks at
 * batch b equal one process at batch W*b). */
#include <stdlib.h>
#include <string.h>

#include "engine/data/loader.h"
#include "tests/rs_test.h"

enum { MAXW = 4 };

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static bool same_multiset(uint32_t *a, uint32_t *b, size_t n)
{
    qsort(a, n, sizeof *a, cmp_u32);
    qsort(b, n, sizeof *b, cmp_u32);
    return !memcmp(a, b, n * sizeof *a);
}

static void check_case(uint32_t n, int W, bool drop, bool shuffle, int epoch)
{
    rs_sampler *s[MAXW] = {0};
    rs_err e = {0};
    for (int r = 0; r < W; r++) {
        rs_sampler_cfg c = {.rank = r, .world = W, .shuffle = shuffle, .drop_last = drop, .seed = 42};
        s[r] = rs_sampler_new(n, &c, &e);
        RS_CHECK(s[r] != NULL, "new: %s", e.msg);
        if (!s[r]) goto out;
        rs_sampler_set_epoch(s[r], epoch);
    }
    char what[80];
    snprintf(what, sizeof what, "n=%u W=%d drop_last=%d shuffle=%d epoch=%d", n, W, drop, shuffle, epoch);

    uint32_t count = drop ? n / W : (n + W - 1) / W, total = count * W;
    for (int r = 0; r < W; r++)
        RS_CHECK(rs_sampler_count(s[r]) == count && rs_sampler_total(s[r]) == total, "%s: rank %d count %u", what,
                 r, rs_sampler_count(s[r]));

    uint32_t *perm = malloc(n * sizeof *perm), *seq = malloc((total + 1) * sizeof *seq);
    rs_sampler_epoch_perm(n, shuffle, 42, epoch, perm);
    /* the permutation is one */
    uint8_t *seen = calloc(n, 1);
    for (uint32_t i = 0; i < n; i++) seen[perm[i]]++;
    int dup = 0;
    for (uint32_t i = 0; i < n; i++) dup += seen[i] != 1;
    RS_CHECK(dup == 0, "%s: epoch permutation is not a permutation", what);
    if (!shuffle) {
        int moved = 0;
        for (uint32_t i = 0; i < n; i++) moved += perm[i] != i;
        RS_CHECK(moved == 0, "%s: no shuffle but not identity", what);
    }

    /* rank r holds positions r, r+W, ...; position p of the epoch is perm[p % n] (padding repeats the
     * start of the permutation) */
    for (int r = 0; r < W; r++)
        for (uint32_t i = 0; i < count; i++) seq[r + (size_t)i * W] = rs_sampler_indices(s[r])[i];
    int off = 0;
    for (uint32_t p = 0; p < total; p++) off += seq[p] != perm[p % n];
    RS_CHECK(off == 0, "%s: %d positions differ from perm[p %% n]", what, off);
    if (total > n) RS_CHECK(seq[n] == perm[0], "%s: padding does not start from perm[0]", what);

    /* disjoint without padding, covering with it */
    memset(seen, 0, n);
    for (uint32_t p = 0; p < total; p++) seen[seq[p]]++;
    int twice = 0, missed = 0;
    for (uint32_t i = 0; i < n; i++) twice += seen[i] > 1, missed += seen[i] == 0;
    if (total <= n) RS_CHECK(twice == 0, "%s: %d samples on two ranks", what, twice);
    if (!drop) RS_CHECK(missed == 0, "%s: %d samples on no rank", what, missed);
    else RS_CHECK(missed == (int)(n - total), "%s: drop_last dropped %d, want %u", what, missed, n - total);

    /* contiguous blocks, for several batch sizes, against the permutation and a world-1 sampler */
    rs_sampler_cfg one = {.rank = 0, .world = 1, .shuffle = shuffle, .seed = 42};
    rs_sampler *single = rs_sampler_new(n, &one, &e);
    rs_sampler_set_epoch(single, epoch);
    for (uint32_t b = 1; b <= 5; b++) {
        int bad = 0, bad_single = 0;
        for (uint32_t st = 0; st * b < count; st++) {
            uint32_t rows = count - st * b < b ? count - st * b : b;
            uint32_t u[MAXW * 5], want[MAXW * 5], k = 0;
            for (int r = 0; r < W; r++)
                for (uint32_t i = 0; i < rows; i++) u[k++] = rs_sampler_indices(s[r])[st * b + i];
            for (uint32_t i = 0; i < k; i++) want[i] = perm[(W * st * b + i) % n];
            uint32_t u2[MAXW * 5];
            memcpy(u2, u, sizeof u2);
            bad += !same_multiset(u, want, k);
            /* one process at batch W*b sees the same block wherever the block lies inside the
             * unpadded permutation: the whole epoch when total == n */
            if (W * st * b + k <= n) {
                uint32_t w2[MAXW * 5];
                memcpy(w2, rs_sampler_indices(single) + W * st * b, k * sizeof *w2);
                bad_single += !same_multiset(u2, w2, k);
            }
        }
        RS_CHECK(bad == 0, "%s b=%u: %d batches are not contiguous blocks", what, b, bad);
        RS_CHECK(bad_single == 0, "%s b=%u: %d batches differ from one process at batch %u", what, b,
                 bad_single, W * b);
    }
    rs_sampler_free(single);
    free(seen);
    free(perm);
    free(seq);
out:
    for (int r = 0; r < W; r++) rs_sampler_free(s[r]);
}

static void check_epochs(void)
{
    uint32_t a[100], b[100], c[100];
    rs_sampler_epoch_perm(100, true, 42, 0, a);
    rs_sampler_epoch_perm(100, true, 42, 1, b);
    RS_CHECK(memcmp(a, b, sizeof a) != 0, "epochs 0 and 1 have the same order");
    rs_sampler_epoch_perm(100, true, 42, 1, c);
    RS_CHECK(!memcmp(b, c, sizeof b), "epoch 1 is not reproducible");
    rs_sampler_epoch_perm(100, true, 43, 1, c);
    RS_CHECK(memcmp(b, c, sizeof b) != 0, "seeds 42 and 43 give the same order");

    /* set_epoch on a live sampler: back and forth gives the same indices */
    rs_sampler_cfg cfg = {.rank = 1, .world = 3, .shuffle = true, .seed = 5};
    rs_sampler *s = rs_sampler_new(100, &cfg, NULL);
    uint32_t first[34];
    memcpy(first, rs_sampler_indices(s), sizeof first);
    rs_sampler_set_epoch(s, 7);
    RS_CHECK(rs_sampler_epoch(s) == 7 && memcmp(first, rs_sampler_indices(s), sizeof first) != 0,
             "epoch 7 = epoch 0");
    rs_sampler_set_epoch(s, 0);
    RS_CHECK(!memcmp(first, rs_sampler_indices(s), sizeof first), "epoch 0 changed after a round trip");
    rs_sampler_free(s);
}

static void check_args(void)
{
    rs_err e = {0};
    RS_CHECK(!rs_sampler_new(10, &(rs_sampler_cfg){.rank = 0, .world = 0}, &e) && e.code == RS_ERR_ARG, "world 0");
    RS_CHECK(!rs_sampler_new(10, &(rs_sampler_cfg){.rank = 2, .world = 2}, &e) && strstr(e.msg, "rank 2"),
             "rank 2 of 2: %s", e.msg);
    RS_CHECK(!rs_sampler_new(10, &(rs_sampler_cfg){.rank = -1, .world = 2}, &e), "rank -1");
    RS_CHECK(!rs_sampler_new(0, NULL, &e) && strstr(e.msg, "empty"), "n=0: %s", e.msg);
    rs_sampler *s = rs_sampler_new(3, &(rs_sampler_cfg){.rank = 3, .world = 4, .drop_last = true}, &e);
    RS_CHECK(s && rs_sampler_count(s) == 0, "n < W with drop_last: nothing for anyone");
    rs_sampler_free(s);
    s = rs_sampler_new(3, &(rs_sampler_cfg){.rank = 3, .world = 4}, &e);
    RS_CHECK(s && rs_sampler_count(s) == 1, "n < W padded: one each");
    rs_sampler_free(s);
    rs_sampler_free(NULL);
}

int main(void)
{
    const uint32_t ns[] = {10, 11, 13, 100};
    for (int i = 0; i < 4; i++)
        for (int W = 1; W <= MAXW; W++)
            for (int drop = 0; drop < 2; drop++)
                for (int epoch = 0; epoch < 2; epoch++) check_case(ns[i], W, drop, true, epoch);
    for (int W = 1; W <= MAXW; W++) check_case(11, W, false, false, 0);
    check_case(3, 4, false, true, 0); /* n < W: padding cycles */
    check_epochs();
    check_args();
    return rs_test_finish("data-sampler");
}
