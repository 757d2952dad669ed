/* The ranks' progress board (rank_status.h): a memfd of slots the launcher makes, ranks on its host
 * write, and the launcher reads when a rank fails, to tell the rank that hung from the ones that
 * waited for it. */
#define _GNU_SOURCE /* memfd_create */
#include "dist/launch/rank_status.h"

#include "engine/train/train.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BOARD_MAGIC 0x52534252u /* "RSBR" */

typedef struct board_head {
    uint32_t magic;
    int32_t nslots;
    char pad[120];
} board_head;

struct rs_rank_board {
    int fd, n;
    size_t bytes;
    board_head *head; /* the mapping: the head, then n slots */
    char env[96];     /* RINGSIDE_RANK_STATUS=/proc/PID/fd/N */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static rs_rank_status *slots_of(board_head *h)
{
    return (rs_rank_status *)(h + 1);
}

rs_rank_board *rs_rank_board_new(int n, const char **env)
{
    *env = NULL;
    if (n < 1) return NULL;
    rs_rank_board *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->n = n;
    b->bytes = sizeof(board_head) + (size_t)n * sizeof(rs_rank_status);
    b->fd = memfd_create("ringside-ranks", MFD_CLOEXEC); /* the ranks open it by path, not by inheritance */
    if (b->fd < 0 || ftruncate(b->fd, (off_t)b->bytes) < 0) goto fail;
    b->head = mmap(NULL, b->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
    if (b->head == MAP_FAILED) {
        b->head = NULL;
        goto fail;
    }
    rs_rank_status *s = slots_of(b->head);
    for (int r = 0; r < n; r++) {
        atomic_store(&s[r].op, -1);
        atomic_store(&s[r].step, -1);
        atomic_store(&s[r].phase, -1);
    }
    b->head->nslots = n;
    atomic_thread_fence(memory_order_release);
    b->head->magic = BOARD_MAGIC;
    snprintf(b->env, sizeof b->env, "%s=/proc/%d/fd/%d", RS_RANK_STATUS_ENV, (int)getpid(), b->fd);
    *env = b->env;
    return b;
fail:
    rs_rank_board_free(b);
    return NULL;
}

void rs_rank_board_free(rs_rank_board *b)
{
    if (!b) return;
    if (b->head) munmap(b->head, b->bytes);
    if (b->fd >= 0) close(b->fd);
    free(b);
}

const rs_rank_status *rs_rank_board_slot(const rs_rank_board *b, int r)
{
    if (!b || r < 0 || r >= b->n) return NULL;
    return &slots_of(b->head)[r];
}

int rs_rank_board_fault(const rs_rank_board *b)
{
    for (int r = 0; b && r < b->n; r++)
        if (atomic_load(&slots_of(b->head)[r].fault) != RS_RANK_FAULT_NONE) return r;
    return -1;
}

double rs_rank_board_idle_s(const rs_rank_board *b, int r)
{
    const rs_rank_status *s = rs_rank_board_slot(b, r);
    if (!s || !atomic_load(&s->pid)) return -1;
    return (double)(now_ns() - atomic_load(&s->progress_ns)) * 1e-9;
}

int rs_rank_board_hung(const rs_rank_board *b, int failed, const int *running, int n)
{
    const rs_rank_status *f = rs_rank_board_slot(b, failed);
    /* only a rank that gave up waiting (its fault record) waited for someone: one killed inside a collective
     * is itself the fault, and its peers may be a collective further on */
    if (!f || !atomic_load(&f->pid) || atomic_load(&f->fault) != RS_RANK_FAULT_IN_COLL) return -1;
    int fop = atomic_load(&f->op), fgroup = atomic_load(&f->group);
    uint64_t fcoll = atomic_load(&f->coll);
    int best = -1;
    int64_t best_t = 0;
    for (int r = 0; r < n && r < b->n; r++) {
        const rs_rank_status *s = rs_rank_board_slot(b, r);
        if (r == failed || !running[r] || !atomic_load(&s->pid)) continue;
        bool same = atomic_load(&s->in_coll) && atomic_load(&s->group) == fgroup && atomic_load(&s->coll) == fcoll &&
                    atomic_load(&s->op) == fop;
        if (same) continue; /* waiting in the same collective: a waiter too */
        int64_t t = atomic_load(&s->progress_ns);
        if (best < 0 || t < best_t) best = r, best_t = t;
    }
    return best;
}

/* "2.0 MiB", "64.0 KiB", "8 B" */
static void fmt_bytes(char *buf, size_t cap, uint64_t b)
{
    if (b < 1024) snprintf(buf, cap, "%llu B", (unsigned long long)b);
    else if (b < (1u << 20)) snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, cap, "%.1f MiB", (double)b / (1024.0 * 1024.0));
}

size_t rs_rank_board_describe(const rs_rank_board *b, int r, char *buf, size_t cap, size_t at)
{
    const rs_rank_status *s = rs_rank_board_slot(b, r);
    if (!s || !atomic_load(&s->pid) || at >= cap) return at;
    int64_t step = atomic_load(&s->step);
    int phase = atomic_load(&s->phase);
    if (step >= 0 && phase >= 0 && phase < RS_PHASE_COUNT)
        at += (size_t)snprintf(buf + at, cap - at, "step %lld, after %s; ", (long long)step,
                               rs_phase_name((rs_phase)phase));
    else if (step >= 0)
        at += (size_t)snprintf(buf + at, cap - at, "step %lld; ", (long long)step);
    if (at >= cap) return cap;
    int op = atomic_load(&s->op);
    if (atomic_load(&s->in_coll) && op >= 0 && op < RS_OP_KIND_COUNT) {
        char by[32];
        fmt_bytes(by, sizeof by, atomic_load(&s->bytes));
        at += (size_t)snprintf(buf + at, cap - at, "in %s #%llu of %s", rs_pg_op_name((rs_pg_opkind)op),
                               (unsigned long long)atomic_load(&s->coll), by);
    } else {
        at += (size_t)snprintf(buf + at, cap - at, "not in a collective, %llu finished",
                               (unsigned long long)atomic_load(&s->finished));
    }
    return at < cap ? at : cap;
}

/* ---- a rank's side -------------------------------------------------------------------------- */

rs_rank_status *rs_rank_status_attach(int rank, int world)
{
    const char *path = getenv(RS_RANK_STATUS_ENV);
    if (!path || !*path || rank < 0 || world < 1) return NULL;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t bytes = sizeof(board_head) + (size_t)world * sizeof(rs_rank_status);
    off_t size = lseek(fd, 0, SEEK_END);
    void *m = size == (off_t)bytes ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED) return NULL; /* another run's board, or another world (mpirun's ranks) */
    board_head *h = m;
    if (h->magic != BOARD_MAGIC || h->nslots != world || rank >= world) {
        munmap(m, bytes);
        return NULL;
    }
    rs_rank_status *s = &slots_of(h)[rank];
    s->rank = rank;
    atomic_store(&s->progress_ns, now_ns());
    atomic_store(&s->pid, (int32_t)getpid());
    return s;
}

void rs_rank_status_detach(rs_rank_status *s)
{
    if (!s) return;
    board_head *h = (board_head *)(s - s->rank) - 1; /* slots follow the head */
    munmap(h, sizeof(board_head) + (size_t)h->nslots * sizeof(rs_rank_status));
}

void rs_rank_status_trace(void *ud, const rs_pg_event *ev)
{
    rs_rank_status *s = ud;
    if (!s || ev->kind == RS_PG_EV_STEP) return;
    if (ev->op == RS_OP_SEND || ev->op == RS_OP_RECV) return; /* point-to-point: not a collective */
    if (ev->kind == RS_PG_EV_BEGIN) {
        atomic_store(&s->op, (int32_t)ev->op);
        atomic_store(&s->group, ev->group);
        atomic_store(&s->coll, ev->coll);
        atomic_store(&s->bytes, (uint64_t)ev->bytes);
        atomic_fetch_add(&s->entered, 1);
        atomic_store(&s->in_coll, 1);
    } else if (ev->failed) {
        rs_rank_status_fault(s); /* stays in it: the collective it gave up in, for the launcher */
    } else {
        atomic_fetch_add(&s->finished, 1);
        atomic_store(&s->in_coll, 0);
    }
    atomic_store(&s->progress_ns, now_ns());
}

void rs_rank_status_phase(rs_rank_status *s, int64_t step, int phase)
{
    if (!s) return;
    atomic_store(&s->step, step);
    if (phase >= 0) atomic_store(&s->phase, phase);
    atomic_store(&s->progress_ns, now_ns());
}

void rs_rank_status_fault(rs_rank_status *s)
{
    if (!s || atomic_load(&s->fault)) return;
    atomic_store(&s->fault_ns, now_ns());
    atomic_store(&s->fault, atomic_load(&s->in_coll) ? RS_RANK_FAULT_IN_COLL : RS_RANK_FAULT_OTHER);
}
