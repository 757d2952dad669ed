/* The guard device's memory (guard_arena.h): address space reserved once with PROT_NONE, blocks of
 * whole pages handed out first-fit from a sorted list of segments, and the seal.
 *
 * Only [base, base + hi), the part handed out so far, is ever opened; everything above hi stays
 * PROT_NONE. While no kernel call runs, [base, hi) is PROT_NONE too; the first call in opens it
 * (PROT_READ|PROT_WRITE) and the last one out closes it, so OpenMP threads inside a call and threads
 * calling entries at once all see it open. The state below is one per process, under one mutex:
 * acceptable only because this is a test device (guard.h), never for a real device table.
 *
 * Zero-filling costs nothing: untouched pages of an anonymous private mapping read as zero, and a
 * freed block's pages are dropped with MADV_DONTNEED, which gives them back to the system and makes
 * them read as zero when they are used again, so mem_alloc never writes a byte. */
#include "guard_arena.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct seg {
    size_t off, len; /* pages [off, off + len) of the arena */
    size_t bytes;    /* what mem_alloc was asked for (a used block) */
    bool used;
} seg;

/* Lives as long as the process: the mapping is never unmapped, and segs (malloc'd) is owned here. */
static struct {
    char *base;       /* NULL when the reservation failed (why says why) */
    size_t size, page;
    size_t hi;        /* handed out so far: [0, hi); read without the lock by rs_guard_owns */
    int depth;        /* kernel calls running now, in all threads */
    bool sealing;     /* false with RINGSIDE_GUARD=off */
    seg *segs;        /* sorted by off, covering [0, hi); the last one is used */
    size_t nsegs, cap;
    const char *why;
} A;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void reserve(void)
{
    const char *env = getenv("RINGSIDE_GUARD");
    A.sealing = !(env && !strcmp(env, "off"));
    long pg = sysconf(_SC_PAGESIZE);
    A.page = pg > 0 ? (size_t)pg : 4096;
    /* address space only (MAP_NORESERVE): pages exist once a block is written; smaller reservations
     * for a process under a tight RLIMIT_AS */
    static const size_t sizes[] = {(size_t)8 << 30, (size_t)1 << 30, (size_t)256 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *p = mmap(NULL, sizes[i], A.sealing ? PROT_NONE : PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            /* Opening and sealing rewrite a page table entry per page in use; transparent huge pages
             * (where the system allows them) make that one per 2 MiB: a call with 16 MiB written cost
             * 570 us with 4 KiB pages, 80 with huge ones (test-guard prints it). Advice only. */
            madvise(p, sizes[i], MADV_HUGEPAGE);
            A.base = p;
            A.size = sizes[i];
            return;
        }
    }
    A.why = "the guard arena's address space could not be reserved (mmap of 256 MiB failed)";
}

/* The arena reserved (once; later calls are one load): base, size and page are then fixed. */
static bool ready(void)
{
    pthread_once(&once, reserve);
    return A.base != NULL;
}

/* Fails only on a broken invariant: the arena is one mapping changed as one or two ranges. */
static void protect(size_t off, size_t len, int prot)
{
    if (!len || !A.sealing) return;
    if (mprotect(A.base + off, len, prot) != 0) {
        fprintf(stderr, "guard: mprotect(%p, %zu, %d) failed: %s\n", (void *)(A.base + off), len, prot,
                strerror(errno));
        abort();
    }
}

static bool segs_insert(size_t at, seg s)
{
    if (A.nsegs == A.cap) {
        size_t cap = A.cap ? 2 * A.cap : 64;
        seg *n = realloc(A.segs, cap * sizeof *n);
        if (!n) return false;
        A.segs = n;
        A.cap = cap;
    }
    memmove(A.segs + at + 1, A.segs + at, (A.nsegs - at) * sizeof *A.segs);
    A.segs[at] = s;
    A.nsegs++;
    return true;
}

static void segs_remove(size_t at)
{
    memmove(A.segs + at, A.segs + at + 1, (A.nsegs - at - 1) * sizeof *A.segs);
    A.nsegs--;
}

void *rs_guard_block_alloc(size_t bytes, const char **why)
{
    if (!ready()) {
        *why = A.why;
        return NULL;
    }
    if (bytes > A.size - A.page) {
        *why = "the block is larger than the guard arena";
        return NULL;
    }
    size_t len = bytes ? (bytes + A.page - 1) / A.page * A.page : A.page;
    void *out = NULL;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < A.nsegs && !out; i++) {
        seg *s = &A.segs[i];
        if (s->used || s->len < len) continue;
        if (s->len > len && !segs_insert(i + 1, (seg){s->off + len, s->len - len, 0, false})) break;
        s = &A.segs[i];
        s->len = len;
        s->bytes = bytes;
        s->used = true;
        out = A.base + s->off;
    }
    if (!out && len <= A.size - A.hi) {
        if (segs_insert(A.nsegs, (seg){A.hi, len, bytes, true})) {
            if (A.depth > 0) protect(A.hi, len, PROT_READ | PROT_WRITE); /* a call is running: open like the rest */
            out = A.base + A.hi;
            __atomic_store_n(&A.hi, A.hi + len, __ATOMIC_RELEASE);
        }
    }
    if (!out) *why = len <= A.size - A.hi ? "no host memory for the guard's block list" : "the guard arena is full";
    pthread_mutex_unlock(&lock);
    return out;
}

/* The page contents of [off, off + len) dropped: zero when next read. */
static void drop(size_t off, size_t len)
{
    if (madvise(A.base + off, len, MADV_DONTNEED) == 0) return;
    /* not expected on an anonymous mapping; zero it by hand, opened for the moment if sealed */
    if (!A.depth) protect(off, len, PROT_READ | PROT_WRITE);
    memset(A.base + off, 0, len);
    if (!A.depth) protect(off, len, PROT_NONE);
}

int rs_guard_block_free(void *p, size_t bytes, size_t *was)
{
    if (!rs_guard_in_arena(p)) return -1;
    size_t off = (size_t)((char *)p - A.base);
    pthread_mutex_lock(&lock);
    size_t lo = 0, n = A.nsegs;
    while (lo < n) { /* the first segment with off >= p's */
        size_t mid = lo + (n - lo) / 2;
        if (A.segs[mid].off < off) lo = mid + 1;
        else n = mid;
    }
    int rc = 0;
    if (lo == A.nsegs || A.segs[lo].off != off || !A.segs[lo].used) rc = -1;
    else if (A.segs[lo].bytes != bytes) {
        *was = A.segs[lo].bytes;
        rc = -2;
    }
    if (rc) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    seg *s = &A.segs[lo];
    drop(s->off, s->len);
    s->used = false;
    if (lo + 1 < A.nsegs && !A.segs[lo + 1].used) {
        s->len += A.segs[lo + 1].len;
        segs_remove(lo + 1);
    }
    if (lo > 0 && !A.segs[lo - 1].used) {
        A.segs[lo - 1].len += A.segs[lo].len;
        segs_remove(lo);
        lo--;
    }
    if (lo == A.nsegs - 1) { /* the top block: hand its pages back to the sealed reserve */
        size_t top = A.segs[lo].off;
        if (A.depth > 0) protect(top, A.hi - top, PROT_NONE);
        __atomic_store_n(&A.hi, top, __ATOMIC_RELEASE);
        segs_remove(lo);
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

bool rs_guard_owns(const void *p, size_t bytes)
{
    if (!p || !ready()) return false;
    uintptr_t q = (uintptr_t)p, b = (uintptr_t)A.base;
    size_t hi = __atomic_load_n(&A.hi, __ATOMIC_ACQUIRE);
    return q >= b && q - b <= hi && bytes <= hi - (q - b);
}

bool rs_guard_in_arena(const void *p)
{
    if (!ready()) return false;
    uintptr_t q = (uintptr_t)p, b = (uintptr_t)A.base;
    return q >= b && q - b < A.size;
}

void rs_guard_enter(void)
{
    ready(); /* sealing is read below: fixed by the reservation */
    pthread_mutex_lock(&lock);
    if (A.depth++ == 0) protect(0, A.hi, PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&lock);
}

void rs_guard_leave(void)
{
    pthread_mutex_lock(&lock);
    if (--A.depth == 0) protect(0, A.hi, PROT_NONE);
    pthread_mutex_unlock(&lock);
}

bool rs_guard_sealing(void)
{
    ready();
    return A.sealing;
}
