/* The shm process-group backend: ranks on one host move bytes through one POSIX shared-memory segment.
 * This file is the transport (mailboxes of chunks between every pair of ranks) and the segment's
 * setup; the collectives are dist/pg/step.c's, shared with tcp. */
#define _GNU_SOURCE
#include "dist/pg/step.h"
#include "place.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Layout of the segment, all offsets fixed by (world):
 *   header (one cache line): magic, world, chunk size, slots per mailbox
 *   world rank lines, one per rank (see shm_idle): the CPU it last waited on, whether it may be
 *     asleep, its bell (a futex word that whoever hands it a chunk rings while it sleeps), and the
 *     CPU it was on when the group was made (see place.h), and its affinity then (bound apart or not)
 *   world*world mailboxes, box(src,dst): SHM_SLOTS slot heads, each one cache line written only by src
 *     (a sequence number and, for a chunk of at most SHM_SMALL bytes, the chunk itself), and
 *     `consumed` on a line of its own, written only by dst
 *   world*world data areas of SHM_SLOTS slots of SHM_CHUNK bytes each.
 * A message of B bytes moves as ceil(B/SHM_CHUNK) chunks; chunk k of a pair's stream goes to slot
 * k % SHM_SLOTS, and is there once the slot head's sequence number reads k+1 (release/acquire). Slots
 * let the sender fill some while the receiver drains others (pipelining); four rather than two halve
 * the hand-overs when two ranks share a CPU (a busy machine: 16 MiB at 2 ranks beside one busy process,
 * 4.8-5.3 -> 5.7-6.3 GB/s), and 64 KiB chunks keep a world of 8 at 16 MiB of segment while staying large
 * enough for memcpy speed. A small message rides in
 * the slot head itself, so it costs the receiver one cache line from the sender's core, as Open MPI's
 * "fast boxes" do. Each side counts its own chunks, and the sender re-reads `consumed` (a line the
 * receiver owns) only when the slots look full. */
#define SHM_MAGIC 0x72736834u /* "rsh4" */
#define SHM_CHUNK (64u << 10)
#define SHM_SLOTS 4u
#define SHM_MAX_WORLD 64 /* 4096 mailboxes, 1 GiB of (sparse) segment */
#define SHM_LINE 64
#define SHM_SMALL (SHM_LINE - 8)

typedef struct shm_head {
    uint32_t magic, world, chunk, slots;
    char pad[SHM_LINE - 16];
} shm_head;

typedef struct shm_rank_line {
    _Alignas(SHM_LINE) _Atomic int32_t cpu1; /* sched_getcpu() + 1 where the rank last waited; 0: not yet */
    _Atomic uint32_t sleeping;                /* 1 from just before it may sleep until it moves again */
    _Atomic uint32_t bell;                    /* futex word: bumped by a peer that finds `sleeping` set */
    int32_t start_cpu1;                       /* sched_getcpu() + 1 when the group was made (place.h) */
    _Atomic uint64_t moves;                   /* progress calls that moved data: who ran while we yielded */
    cpu_set_t mask;                           /* its affinity when the group was made: ranks bound apart
                                                 (bind=core, mpirun) have disjoint ones (see bound_apart) */
} shm_rank_line;

typedef struct shm_slot_head {
    _Alignas(SHM_LINE) _Atomic uint64_t seq; /* k+1 once chunk k is in this slot */
    char small[SHM_SMALL];                    /* the chunk, when it is at most SHM_SMALL bytes */
} shm_slot_head;

typedef struct shm_box {
    shm_slot_head head[SHM_SLOTS];
    _Alignas(SHM_LINE) _Atomic uint64_t consumed; /* chunks the receiver has finished with */
} shm_box;

typedef struct shm_impl {
    char *base;
    size_t size;
    shm_rank_line *ranks;  /* (world) */
    shm_box *boxes;        /* (world*world) */
    char *data;            /* (world*world, SHM_SLOTS, SHM_CHUNK) */
    char *tmp;             /* (SHM_CHUNK) scratch for "peer's data first" reductions */
    uint64_t *sent;        /* (world) chunks this rank has published to each peer */
    uint64_t *recvd;       /* (world) chunks this rank has taken from each peer */
    uint64_t *seen;        /* (world) each peer's `consumed` as last read: re-read only when full */
    bool own_core;         /* world <= the CPUs this rank may run on: waiting may spin */
    rs_shm_place place;    /* this rank's CPUs (place.h) */
    int cpu1;              /* what this rank last wrote to its rank line */
    int wait_peer;         /* the peer the last side that could not move waits for; -1: none yet */
    bool armed;            /* our `sleeping` is set; `bell` is the bell as read just before */
    uint32_t bell;
    double yield_again;    /* rs_pg_now() before which waiting sleeps rather than yields */
    uint64_t moves;        /* our own count, published in our rank line's `moves` */
    uint64_t to_ring;      /* bit p: we gave peer p something since the last rings (SHM_MAX_WORLD <= 64) */
} shm_impl;

static shm_impl *impl(rs_pg *g) { return g->impl; }
static shm_box *box(rs_pg *g, int src, int dst) { return &impl(g)->boxes[(size_t)src * (size_t)g->world + (size_t)dst]; }
static char *slot(rs_pg *g, int src, int dst, uint64_t k)
{
    size_t pair = (size_t)src * (size_t)g->world + (size_t)dst;
    return impl(g)->data + (pair * SHM_SLOTS + (size_t)(k % SHM_SLOTS)) * SHM_CHUNK;
}

/* ---------------------------------------------------------------- transport */

/* Wakes `peer` if it may be asleep on its bell. Called once a progress call has done all it can, for
 * each peer it gave something (a chunk published, a slot freed): once per call rather than per chunk,
 * since a peer woken on our CPU may take it from us at once, and 64 KiB a switch is too little. The
 * full fence pairs with the one in shm_idle after `sleeping` is set: either the peer's last look sees
 * our stores, or we see its flag and ring. */
static void ring(rs_pg *g, int peer)
{
    shm_rank_line *p = &impl(g)->ranks[peer];
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&p->sleeping, memory_order_relaxed)) return;
    atomic_fetch_add_explicit(&p->bell, 1, memory_order_release);
    syscall(SYS_futex, &p->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* We moved again: publishers need not ring for us any more. */
static void disarm(rs_pg *g)
{
    shm_impl *s = impl(g);
    atomic_store_explicit(&s->ranks[g->rank].sleeping, 0, memory_order_relaxed);
    s->armed = false;
}

static bool send_some(rs_pg *g, rs_pg_xfer *x)
{
    if (x->to < 0 || x->hold_send || x->soff >= x->sbytes) return false;
    shm_impl *s = impl(g);
    shm_box *b = box(g, g->rank, x->to);
    uint64_t k = s->sent[x->to];
    if (k - s->seen[x->to] >= SHM_SLOTS) {
        s->seen[x->to] = atomic_load_explicit(&b->consumed, memory_order_acquire);
        if (k - s->seen[x->to] >= SHM_SLOTS) {
            s->wait_peer = x->to;
            return false;
        }
    }
    size_t len = x->sbytes - x->soff < SHM_CHUNK ? x->sbytes - x->soff : SHM_CHUNK;
    shm_slot_head *h = &b->head[k % SHM_SLOTS];
    memcpy(len <= SHM_SMALL ? h->small : slot(g, g->rank, x->to, k), x->sp + x->soff, len);
    atomic_store_explicit(&h->seq, k + 1, memory_order_release);
    s->to_ring |= 1ull << x->to;
    s->sent[x->to] = k + 1;
    x->soff += len;
    return true;
}

static bool recv_some(rs_pg *g, rs_pg_xfer *x)
{
    if (x->from < 0 || x->hold_recv || x->roff >= x->rbytes) return false;
    size_t len = x->rbytes - x->roff < SHM_CHUNK ? x->rbytes - x->roff : SHM_CHUNK;
    if (x->after_send && x->soff < x->sbytes && x->roff + len > x->soff) return false;
    shm_impl *s = impl(g);
    shm_box *b = box(g, x->from, g->rank);
    uint64_t k = s->recvd[x->from];
    shm_slot_head *h = &b->head[k % SHM_SLOTS];
    if (atomic_load_explicit(&h->seq, memory_order_acquire) != k + 1) {
        s->wait_peer = x->from;
        return false;
    }
    const char *src = len <= SHM_SMALL ? h->small : slot(g, x->from, g->rank, k);
    char *dst = x->rp + x->roff;
    size_t n = len / rs_dtype_size(x->t);
    if (x->mode == RS_XF_COPY) {
        memcpy(dst, src, len);
    } else if (x->peer_first) {
        memcpy(s->tmp, src, len);
        rs_pg_reduce_into(s->tmp, dst, n, x->t, x->op);
        memcpy(dst, s->tmp, len);
    } else {
        rs_pg_reduce_into(dst, src, n, x->t, x->op);
    }
    s->recvd[x->from] = k + 1;
    atomic_store_explicit(&b->consumed, k + 1, memory_order_release);
    s->to_ring |= 1ull << x->from;
    x->roff += len;
    return true;
}

static bool shm_progress(rs_pg *g, rs_pg_xfer *x, rs_status *st, rs_err *err)
{
    (void)st, (void)err; /* shared memory cannot break; a dead peer shows as silence (the timeout) */
    bool moved = false;
    shm_impl *s = impl(g);
    if (s->place.on && x->soff == 0 && x->roff == 0)
        rs_shm_place_for(&s->place, x->sbytes > x->rbytes ? x->sbytes : x->rbytes);
    while (send_some(g, x)) moved = true;
    while (recv_some(g, x)) moved = true;
    for (; s->to_ring; s->to_ring &= s->to_ring - 1) ring(g, __builtin_ctzll(s->to_ring));
    if (moved && !(s->own_core && !g->polite)) /* only yielding waits read it (shm_idle) */
        atomic_store_explicit(&s->ranks[g->rank].moves, ++s->moves, memory_order_relaxed);
    if (moved && s->armed) disarm(g);
    return moved;
}

/* Waiting. With a core per rank (shm_place binds them, place.c) the peer we wait for is running: spin
 * (with the CPU's pause hint) for ~100 us, since a chunk then arrives in a few and a small message in
 * well under one; past the spin, sleep on our bell (a futex in the segment) until a peer hands us
 * something.
 *
 * Whatever the counts, the peer we wait for may share our CPU (a large transfer runs unbound, a user's
 * taskset): spinning there cost each 128 KiB handed over a whole spin phase of the CPU the peer needed,
 * and yielding is no better once anything else is on that CPU: under EEVDF a yield puts the yielder
 * behind the others there, so a busy process beside the ranks gets slice after slice. 16 MiB
 * all_reduce at 2 ranks went from 17 GB/s to 0.1-0.8 (docs/dist.md, "shm on a busy machine"). So each
 * rank publishes the CPU it waits on (sched_getcpu: rdpid, a nanosecond; written only when it changes),
 * and a rank whose peer was last seen on its own CPU sleeps at once: it leaves the CPU to its peer, and
 * the peer's ring makes it runnable the moment there is work.
 *
 * With more ranks than cores (4 ranks on 2 CPUs), or a communication thread beside compute (polite),
 * spin briefly, then yield: the CPU mostly goes to another of our ranks, the one we wait for or one it
 * waits for (8 B at 4 ranks on 2 CPUs: 3 us, against 27 sleeping at once). But a yield that keeps us
 * off the CPU for more than 200 us while none of our ranks moved data gave it to a stranger (a busy
 * process, a whole slice of it), and yielding again only gives it more: for the next 50 ms waits skip
 * the yields and sleep on the bell. (Without the `moves` test, a peer reducing a 1 MiB chunk for
 * 200 us counted as a stranger: 4 ranks on 2 CPUs on a quiet machine, 128 KiB to 1 MiB, fell from
 * 7.8-9.6 GB/s to 3.4-6.7.)
 * 4 ranks beside busy processes (load average 9-12), worst of 5 runs: 64 MiB 0.13 -> 1.67 GB/s, 8 B
 * median 1496 -> 53 us.
 *
 * Sleeping takes two calls: the first sets `sleeping` (then a full fence) and returns, so the caller
 * looks at every transfer once more; the second sleeps on the bell as it read it before. A chunk
 * published after that read finds `sleeping` set and bumps the bell, so the futex does not sleep. */
#define SHM_SPIN_OWN 4096u    /* pauses (~23 ns each on this machine's Zen 5) */
#define SHM_SPIN_SHARED 16u
#define SHM_YIELDS 1024u
#define SHM_YIELD_SLOW_S 200e-6 /* a yield that kept us off the CPU this long handed it to a stranger */
#define SHM_NO_YIELDS_S 50e-3   /* ... so for this long, waits sleep on the bell instead */
#define SHM_SLEEP_NS 20000000 /* a bell is never missed; this only bounds the gap between timeout checks */

/* Data the other ranks have moved so far: a long yield during which it grew went to one of them. */
static uint64_t others_moves(rs_pg *g)
{
    shm_impl *s = impl(g);
    uint64_t sum = 0;
    for (int r = 0; r < g->world; r++)
        if (r != g->rank) sum += atomic_load_explicit(&s->ranks[r].moves, memory_order_relaxed);
    return sum;
}

static void shm_idle(rs_pg *g, unsigned idle)
{
    shm_impl *s = impl(g);
    int cpu1 = sched_getcpu() + 1;
    if (cpu1 != s->cpu1) {
        s->cpu1 = cpu1;
        atomic_store_explicit(&s->ranks[g->rank].cpu1, cpu1, memory_order_relaxed);
    }
    bool peer_here = cpu1 > 0 && s->wait_peer >= 0 &&
                     atomic_load_explicit(&s->ranks[s->wait_peer].cpu1, memory_order_relaxed) == cpu1;
    bool own_core = s->own_core && !g->polite;
    unsigned spin = !own_core ? SHM_SPIN_SHARED : peer_here ? 0 : SHM_SPIN_OWN;
    if (idle <= spin) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    if (!own_core && idle <= SHM_SPIN_SHARED + SHM_YIELDS) {
        double t0 = rs_pg_now();
        if (t0 >= s->yield_again) {
            uint64_t before = others_moves(g);
            sched_yield();
            double t1 = rs_pg_now();
            if (t1 - t0 > SHM_YIELD_SLOW_S && others_moves(g) == before) s->yield_again = t1 + SHM_NO_YIELDS_S;
            return;
        }
    }
    shm_rank_line *me = &s->ranks[g->rank];
    if (!s->armed) {
        s->bell = atomic_load_explicit(&me->bell, memory_order_acquire);
        atomic_store_explicit(&me->sleeping, 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        s->armed = true;
        return;
    }
    struct timespec ts = {0, SHM_SLEEP_NS};
    syscall(SYS_futex, &me->bell, FUTEX_WAIT, s->bell, &ts, NULL, 0);
    s->bell = atomic_load_explicit(&me->bell, memory_order_acquire); /* stays armed: the caller looks again */
}

static const rs_pg_transport shm_transport = {.progress = shm_progress, .idle = shm_idle};

/* ---------------------------------------------------------------- setup */

static void shm_destroy(rs_pg *g)
{
    if (!g) return;
    shm_impl *s = g->impl;
    if (s) {
        if (s->base) munmap(s->base, s->size);
        rs_shm_place_end(&s->place);
        free(s->tmp);
        free(s->sent);
        free(s->recvd);
        free(s->seen);
        free(s);
    }
    free(g);
}

static rs_status shm_create(rs_store *store, const char *name, int rank, int world, double timeout_s,
                            const shm_impl *parent, rs_pg **out, rs_err *err);

/* A sub-group is a group of its own: its own segment, found through the same store. Its ranks are
 * some of the parent's, already placed: they keep their CPUs, and a core each if they had one. */
static rs_status shm_new_group(rs_pg *g, const int *ranks, int n, const char *name, rs_pg **out, rs_err *err)
{
    int me = 0;
    while (ranks[me] != g->rank) me++;
    return shm_create(g->store, name, me, n, g->timeout_s, impl(g), out, err);
}

const rs_pg_ops rs_pg_shm_ops = {RS_PG_STEP_OPS("shm", &shm_transport), .new_group = shm_new_group,
                                 .destroy = shm_destroy};

/* The CPUs this process may run on (its affinity mask: taskset, a cgroup), not all that are online. */
static int usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Every rank's affinity (published in its line) shares no CPU with another's: ranks bound apart. */
static bool bound_apart(rs_pg *g)
{
    shm_impl *s = impl(g);
    for (int q = 0; q < g->world; q++) {
        if (CPU_COUNT(&s->ranks[q].mask) == 0) return false;
        for (int r = q + 1; r < g->world; r++) {
            cpu_set_t both;
            CPU_AND(&both, &s->ranks[q].mask, &s->ranks[r].mask);
            if (CPU_COUNT(&both)) return false;
        }
    }
    return g->world > 1;
}

static size_t seg_size(int world)
{
    size_t pairs = (size_t)world * (size_t)world;
    return sizeof(shm_head) + (size_t)world * sizeof(shm_rank_line) + pairs * sizeof(shm_box) +
           pairs * SHM_SLOTS * SHM_CHUNK;
}

/* "/rs-<name with odd characters as '_'>-<pid><nanoseconds>": unique per run even when a crashed run
 * with the same group name left nothing behind or the same name is reused. */
static void seg_name(char *out, size_t cap, const char *name)
{
    char clean[40];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof clean; i++) {
        char c = name[i];
        clean[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ? c : '_';
    }
    clean[i] = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, cap, "/rs-%s-%ld-%lx", clean, (long)getpid(), (unsigned long)(ts.tv_nsec ^ (ts.tv_sec << 20)));
}

static rs_status map_segment(rs_pg *g, const char *seg, bool create, rs_err *err)
{
    shm_impl *s = impl(g);
    size_t size = seg_size(g->world);
    int fd = shm_open(seg, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
    if (fd < 0) return rs_err_set(err, RS_ERR_IO, "shm: shm_open %s: %s", seg, strerror(errno));
    if (create && ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(seg);
        return rs_err_set(err, RS_ERR_IO, "shm: ftruncate %s to %zu bytes: %s", seg, size, strerror(e));
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        if (create) shm_unlink(seg);
        return rs_err_set(err, RS_ERR_IO, "shm: mmap %s (%zu bytes): %s", seg, size, strerror(e));
    }
    s->base = p;
    s->size = size;
    s->ranks = (shm_rank_line *)(s->base + sizeof(shm_head));
    s->boxes = (shm_box *)(s->base + sizeof(shm_head) + (size_t)g->world * sizeof(shm_rank_line));
    s->data = (char *)(s->boxes + (size_t)g->world * (size_t)g->world);
    shm_head *h = (shm_head *)s->base;
    if (create) {
        *h = (shm_head){.magic = SHM_MAGIC, .world = (uint32_t)g->world, .chunk = SHM_CHUNK, .slots = SHM_SLOTS};
    } else if (h->magic != SHM_MAGIC || h->world != (uint32_t)g->world || h->chunk != SHM_CHUNK ||
               h->slots != SHM_SLOTS) {
        return rs_err_set(err, RS_ERR_ARG,
                          "shm: segment %s was made for world %u (chunk %u), this rank was started with world %d; "
                          "start every rank with the same world size and build",
                          seg, h->world, h->chunk, g->world);
    }
    return RS_OK;
}

rs_status rs_pg_shm_new(rs_store *store, const char *name, int rank, int world, double timeout_s, rs_pg **out,
                        rs_err *err)
{
    return shm_create(store, name, rank, world, timeout_s, NULL, out, err);
}

static rs_status shm_create(rs_store *store, const char *name, int rank, int world, double timeout_s,
                            const shm_impl *parent, rs_pg **out, rs_err *err)
{
    rs_pg *g = NULL;
    rs_status st = rs_step_pg_alloc(&rs_pg_shm_ops, store, name, rank, world, SHM_MAX_WORLD, timeout_s, &g, err);
    if (st) return st;
    shm_impl *s = calloc(1, sizeof *s);
    g->impl = s;
    if (s) {
        s->tmp = malloc(SHM_CHUNK);
        s->sent = calloc((size_t)world, sizeof *s->sent);
        s->recvd = calloc((size_t)world, sizeof *s->recvd);
        s->seen = calloc((size_t)world, sizeof *s->seen);
        s->own_core = parent && parent->own_core; /* a new group's: once every rank is in (shm_create) */
        s->wait_peer = -1;
    }
    if (!s || !s->tmp || !s->sent || !s->recvd || !s->seen) {
        shm_destroy(g);
        return rs_err_set(err, RS_ERR_NOMEM, "shm: out of memory");
    }

    char key[128], seg[96];
    snprintf(key, sizeof key, "shm/%s/segment", name);
    if (rank == 0) {
        seg_name(seg, sizeof seg, name);
        st = map_segment(g, seg, true, err);
        if (!st) st = rs_store_set(store, key, seg, strlen(seg), err);
    } else {
        void *val = NULL;
        size_t vn = 0;
        st = rs_store_get(store, key, &val, &vn, timeout_s, err);
        if (!st) {
            snprintf(seg, sizeof seg, "%s", (const char *)val);
            st = map_segment(g, seg, false, err);
        }
        free(val);
    }
    if (!st) { /* read by all after the barrier below */
        impl(g)->ranks[rank].start_cpu1 = sched_getcpu() + 1;
        if (sched_getaffinity(0, sizeof impl(g)->ranks[rank].mask, &impl(g)->ranks[rank].mask) != 0)
            CPU_ZERO(&impl(g)->ranks[rank].mask);
    }
    /* Once every rank has mapped it, the name goes: the memory lives while mapped and nothing is left in
     * /dev/shm if a rank crashes later. Rank 0 unlinks even when the barrier fails. */
    if (!st || rank == 0) {
        char bname[96];
        snprintf(bname, sizeof bname, "shm/%s/mapped", name);
        rs_status bst = st ? st : rs_store_barrier(store, bname, world, timeout_s, err);
        if (rank == 0 && impl(g)->base) shm_unlink(seg);
        st = bst;
    }
    if (st) {
        rs_err_prefix(err, "shm group '%s' rank %d", name, rank);
        shm_destroy(g);
        return st;
    }
    /* Ranks the launcher bound apart (bind=core, as mpirun binds) each have a core of their own already:
     * they wait as such, and keep to it but for large transfers, which may use every rank's CPUs
     * (place.h). Ranks left to the kernel get shm's own blocks when there are CPUs enough. */
    bool apart = !parent && bound_apart(g);
    if (!parent) impl(g)->own_core = apart || world <= usable_cpus();
    if (apart) {
        cpu_set_t wide;
        CPU_ZERO(&wide);
        for (int q = 0; q < world; q++) CPU_OR(&wide, &wide, &impl(g)->ranks[q].mask);
        rs_shm_place_init_wide(&impl(g)->place, &wide);
    } else if (!parent && impl(g)->own_core) {
        int start[SHM_MAX_WORLD];
        for (int q = 0; q < world; q++) start[q] = impl(g)->ranks[q].start_cpu1 - 1;
        rs_shm_place_init(&impl(g)->place, rank, world, start);
    }
    *out = g;
    return RS_OK;
}
