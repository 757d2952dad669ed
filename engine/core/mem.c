/* Counting allocator (see mem.h). */
#include "mem.h"

#include <stdlib.h>
#include <string.h>

const char *rs_pool_name(rs_pool p)
{
    static const char *names[RS_POOL_COUNT] = {"params", "grads", "optimizer", "activations",
                                               "comm", "scratch", "offload"};
    return (unsigned)p < RS_POOL_COUNT ? names[p] : "?";
}

static void bump_peak(int64_t *peak, int64_t now)
{
    int64_t old = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (now > old &&
           !__atomic_compare_exchange_n(peak, &old, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

void *rs_mem_alloc(rs_mem *m, rs_pool p, size_t bytes)
{
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded == 0) rounded = 64;
    void *ptr = aligned_alloc(64, rounded);
    if (!ptr) return NULL;
    memset(ptr, 0, rounded);
    if (m && (unsigned)p < RS_POOL_COUNT) {
        int64_t now = __atomic_add_fetch(&m->live[p], (int64_t)bytes, __ATOMIC_RELAXED);
        bump_peak(&m->peak[p], now);
        int64_t tot = __atomic_add_fetch(&m->live_total, (int64_t)bytes, __ATOMIC_RELAXED);
        bump_peak(&m->peak_total, tot);
    }
    return ptr;
}

void rs_mem_free(rs_mem *m, rs_pool p, void *ptr, size_t bytes)
{
    if (!ptr) return;
    free(ptr);
    if (m && (unsigned)p < RS_POOL_COUNT) {
        __atomic_sub_fetch(&m->live[p], (int64_t)bytes, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&m->live_total, (int64_t)bytes, __ATOMIC_RELAXED);
    }
}

void rs_mem_count(rs_mem *m, rs_pool p, int64_t delta)
{
    if (!m || (unsigned)p >= RS_POOL_COUNT || delta == 0) return;
    int64_t now = __atomic_add_fetch(&m->live[p], delta, __ATOMIC_RELAXED);
    int64_t tot = __atomic_add_fetch(&m->live_total, delta, __ATOMIC_RELAXED);
    if (delta > 0) {
        bump_peak(&m->peak[p], now);
        bump_peak(&m->peak_total, tot);
    }
}

void rs_mem_reset_peaks(rs_mem *m)
{
    if (!m) return;
    for (int i = 0; i < RS_POOL_COUNT; i++) m->peak[i] = m->live[i];
    m->peak_total = m->live_total;
}
