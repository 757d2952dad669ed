/* Placement of shm ranks (dist/shm/place.c): the assignment of CPU blocks, worked out for every world
 * the machine's CPUs allow and every way the ranks may have started, against the rules (disjoint,
 * non-empty, inside the usable CPUs, sizes m/world rounded either way, a rank keeps its start CPU's
 * block when no lower rank has it); then through the backend itself, with two rank processes: bound to
 * different CPUs once the group is made, loose during a large transfer, bound again for a small one,
 * their own affinity back at the end, and nothing touched with RINGSIDE_SHM_BIND=off or when someone
 * else has moved the rank. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "dist/pg/pg.h"
#include "dist/shm/place.h"
#include "tests/dist/forkranks.h"
#include "tests/rs_test.h"

static cpu_set_t affinity(void)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    sched_getaffinity(0, sizeof s, &s);
    return s;
}

static int first_cpu(const cpu_set_t *s)
{
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, s)) return c;
    return -1;
}

/* The c-th usable CPU of mask (c from 0). */
static int nth_cpu(const cpu_set_t *mask, int n)
{
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, mask) && n-- == 0) return c;
    return -1;
}

/* One world, one way the ranks started: every rank's block, checked against the rules. */
static void check_assignment(const cpu_set_t *mask, int world, const int *start, const char *how)
{
    int m = CPU_COUNT(mask);
    cpu_set_t blocks[8], all;
    CPU_ZERO(&all);
    for (int r = 0; r < world; r++) {
        rs_shm_place p;
        rs_shm_place_init(&p, r, world, start);
        RS_CHECK(p.on, "world %d (%s) rank %d: not placed with %d CPUs", world, how, r, m);
        blocks[r] = affinity();
        RS_CHECK(CPU_EQUAL(&blocks[r], &p.block), "world %d (%s) rank %d: affinity is not the block", world, how, r);
        rs_shm_place_end(&p);
        cpu_set_t back = affinity();
        RS_CHECK(CPU_EQUAL(&back, mask), "world %d (%s) rank %d: affinity not given back", world, how, r);
        int n = CPU_COUNT(&blocks[r]);
        RS_CHECK(n == m / world || n == (m + world - 1) / world, "world %d (%s) rank %d: %d CPUs of %d", world, how, r,
                 n, m);
        cpu_set_t in;
        CPU_AND(&in, &blocks[r], mask);
        RS_CHECK(CPU_EQUAL(&in, &blocks[r]), "world %d (%s) rank %d: a CPU it may not use", world, how, r);
        CPU_AND(&in, &blocks[r], &all);
        RS_CHECK(CPU_COUNT(&in) == 0, "world %d (%s) rank %d: shares a CPU with a lower rank", world, how, r);
        CPU_OR(&all, &all, &blocks[r]);
    }
    /* A rank whose start CPU's block no lower rank holds keeps it. */
    for (int r = 0; r < world; r++) {
        if (start[r] < 0) continue;
        bool lower = false;
        for (int q = 0; q < r; q++) lower |= CPU_ISSET(start[r], &blocks[q]) != 0;
        if (!lower)
            RS_CHECK(CPU_ISSET(start[r], &blocks[r]), "world %d (%s) rank %d: left the block of CPU %d it started on",
                     world, how, r, start[r]);
    }
}

static void assignments(const cpu_set_t *mask)
{
    int m = CPU_COUNT(mask);
    for (int world = 2; world <= m && world <= 8; world++) {
        int start[8];
        for (int r = 0; r < world; r++) start[r] = first_cpu(mask);
        check_assignment(mask, world, start, "all on one CPU");
        for (int r = 0; r < world; r++) start[r] = nth_cpu(mask, m - 1 - r);
        check_assignment(mask, world, start, "spread, in reverse");
        for (int r = 0; r < world; r++) start[r] = -1;
        check_assignment(mask, world, start, "unknown");
    }
    /* More ranks than CPUs, or switched off: nothing happens. */
    int start[65];
    for (int r = 0; r <= m && r < 65; r++) start[r] = -1;
    rs_shm_place p;
    if (m < 65) {
        rs_shm_place_init(&p, 0, m + 1, start);
        RS_CHECK(!p.on, "world %d on %d CPUs was placed", m + 1, m);
    }
    setenv("RINGSIDE_SHM_BIND", "off", 1);
    rs_shm_place_init(&p, 0, 2, start);
    RS_CHECK(!p.on, "placed with RINGSIDE_SHM_BIND=off");
    unsetenv("RINGSIDE_SHM_BIND");
    cpu_set_t now = affinity();
    RS_CHECK(CPU_EQUAL(&now, mask), "affinity changed by a placement that did not happen");

    /* Loose for a large transfer, bound for a small one; someone else's change ends our management. */
    for (int r = 0; r < 2; r++) start[r] = -1;
    rs_shm_place_init(&p, 1, 2, start);
    rs_shm_place_for(&p, RS_SHM_LOOSE_BYTES);
    now = affinity();
    RS_CHECK(p.loose && CPU_EQUAL(&now, mask), "a large transfer did not run with the thread's own affinity");
    rs_shm_place_for(&p, RS_SHM_LOOSE_BYTES - 1);
    now = affinity();
    RS_CHECK(!p.loose && CPU_EQUAL(&now, &p.block), "a small transfer did not run bound");
    cpu_set_t theirs;
    CPU_ZERO(&theirs);
    CPU_SET(first_cpu(mask), &theirs);
    if (CPU_EQUAL(&theirs, &p.block)) {
        CPU_ZERO(&theirs);
        CPU_SET(nth_cpu(mask, 1), &theirs);
    }
    sched_setaffinity(0, sizeof theirs, &theirs);
    rs_shm_place_for(&p, RS_SHM_LOOSE_BYTES);
    now = affinity();
    RS_CHECK(!p.on && CPU_EQUAL(&now, &theirs), "placement overrode an affinity someone else set");
    rs_shm_place_end(&p);
    now = affinity();
    RS_CHECK(CPU_EQUAL(&now, &theirs), "the end of placement overrode an affinity someone else set");
    sched_setaffinity(0, sizeof *mask, mask);
}

/* Through the backend, two rank processes: their blocks (shared as bit words through an all_reduce)
 * must not overlap. */
#define WORDS (CPU_SETSIZE / 32)
static int rank_main(void *ud, int rank, int world, rs_store *st)
{
    (void)ud;
    cpu_set_t orig = affinity();
    rs_err e = {0};
    rs_pg *g = NULL;
    if (rs_pg_new("shm", st, "place", rank, world, 30, &g, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        return 2;
    }
    cpu_set_t block = affinity(), in;
    CPU_AND(&in, &block, &orig);
    RS_CHECK(CPU_COUNT(&block) <= (CPU_COUNT(&orig) + 1) / 2 && CPU_EQUAL(&in, &block),
             "rank %d: %d CPUs after the group was made, of %d", rank, CPU_COUNT(&block), CPU_COUNT(&orig));
    int32_t words[2 * WORDS];
    memset(words, 0, sizeof words);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &block)) words[rank * WORDS + c / 32] |= (int32_t)(1u << (c % 32));
    RS_CHECK(!rs_pg_all_reduce(g, words, 2 * WORDS, RS_I32, RS_SUM, &e), "rank %d: %s", rank, e.msg);
    int shared = 0;
    for (int w = 0; w < WORDS; w++) shared |= words[w] & words[WORDS + w];
    RS_CHECK(shared == 0, "rank %d: the two ranks' blocks overlap", rank);

    size_t n = (2 * RS_SHM_LOOSE_BYTES) / sizeof(float); /* a ring all_reduce: steps of RS_SHM_LOOSE_BYTES */
    float *big = calloc(n, sizeof *big);
    RS_CHECK(big && !rs_pg_all_reduce(g, big, n, RS_F32, RS_SUM, &e), "rank %d: large all_reduce", rank);
    free(big);
    cpu_set_t now = affinity();
    RS_CHECK(CPU_EQUAL(&now, &orig), "rank %d: still bound after a large all_reduce", rank);
    float one = 1;
    RS_CHECK(!rs_pg_all_reduce(g, &one, 1, RS_F32, RS_SUM, &e) && one == 2, "rank %d: small all_reduce", rank);
    now = affinity();
    RS_CHECK(CPU_EQUAL(&now, &block), "rank %d: not back on its block after a small all_reduce", rank);
    rs_pg_destroy(g);
    now = affinity();
    RS_CHECK(CPU_EQUAL(&now, &orig), "rank %d: affinity not given back when the group went", rank);
    return rs_test_failures ? 1 : 0;
}

/* Ranks the launcher bound apart (bind=core): own core for small transfers, every rank's CPUs (here all
 * of this process's) for large ones, own core again, and the own core back at the end; nothing with
 * RINGSIDE_SHM_BIND=off. */
static void wide(const cpu_set_t *mask)
{
    cpu_set_t own, now;
    CPU_ZERO(&own);
    CPU_SET(first_cpu(mask), &own);
    RS_CHECK(sched_setaffinity(0, sizeof own, &own) == 0, "binding to CPU %d", first_cpu(mask));
    rs_shm_place p;
    rs_shm_place_init_wide(&p, mask);
    RS_CHECK(p.on, "wide: placement on for a thread bound to one of %d CPUs", CPU_COUNT(mask));
    rs_shm_place_for(&p, 64);
    now = affinity();
    RS_CHECK(CPU_EQUAL(&now, &own), "wide: a small transfer runs on the rank's own core");
    rs_shm_place_for(&p, 1u << 20);
    now = affinity();
    RS_CHECK(p.loose && CPU_EQUAL(&now, mask), "wide: a 1 MiB transfer runs on every rank's CPUs");
    rs_shm_place_for(&p, 8);
    now = affinity();
    RS_CHECK(!p.loose && CPU_EQUAL(&now, &own), "wide: the next small transfer is back on its own core");
    rs_shm_place_for(&p, 1u << 20);
    rs_shm_place_end(&p);
    now = affinity();
    RS_CHECK(CPU_EQUAL(&now, &own), "wide: the end gives back the rank's own core (the launcher's binding)");
    setenv("RINGSIDE_SHM_BIND", "off", 1);
    rs_shm_place_init_wide(&p, mask);
    RS_CHECK(!p.on, "wide: RINGSIDE_SHM_BIND=off leaves the binding alone");
    unsetenv("RINGSIDE_SHM_BIND");
    rs_shm_place_init_wide(&p, &own);
    RS_CHECK(!p.on, "wide: nothing to widen to when every rank's CPUs are the rank's own");
    sched_setaffinity(0, sizeof *mask, mask);
}

int main(void)
{
    cpu_set_t mask = affinity();
    if (CPU_COUNT(&mask) < 2) RS_SKIP("one usable CPU: nothing to place");
    assignments(&mask);
    wide(&mask);
    RS_CHECK(rs_fork_ranks(2, rank_main, NULL, NULL, NULL) == 0, "a rank failed (see above)");
    return rs_test_finish("shm placement");
}
