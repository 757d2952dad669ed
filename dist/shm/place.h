/* Where the shm backend's ranks run: a block of CPUs of its own for each rank while it moves small
 * messages, the kernel's choice while it moves large ones (measurements in docs/dist.md, "shm on a
 * busy machine"); for ranks the launcher bound apart (bind=core), their own core for small messages and
 * every rank's CPUs for large ones. Affinity is per thread: these act on the calling thread. Needs _GNU_SOURCE (cpu_set_t)
 * before the first include, as shm.c and place.c have. */
#ifndef RS_SHM_PLACE_H
#define RS_SHM_PLACE_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* Transfers of this many bytes or more run with the thread's own affinity (loose), smaller ones bound
 * to the block: a ring all_reduce of 256 KiB or more at 2 ranks. */
#define RS_SHM_LOOSE_BYTES (128u << 10)

typedef struct rs_shm_place {
    bool on;             /* we manage this thread's affinity (bound or loose) */
    bool loose;          /* running with `wide` for a large transfer */
    cpu_set_t orig;      /* the thread's affinity before the group (given back at the end) */
    cpu_set_t block;     /* this rank's own CPUs */
    cpu_set_t wide;      /* its CPUs for a large transfer: `orig`, or all the ranks' (rs_shm_place_init_wide) */
} rs_shm_place;

/* Binds rank `rank` of `world` to a block of its own of the CPUs this thread may use, when there are
 * at least `world` of them. start_cpu[q]: the CPU rank q was on when the group was made (-1: unknown);
 * every rank passes the same array and so computes the same assignment. Does nothing (p->on false)
 * with fewer CPUs than ranks or RINGSIDE_SHM_BIND=off; a failed system call only leaves placement off. */
void rs_shm_place_init(rs_shm_place *p, int rank, int world, const int *start_cpu);

/* Ranks the launcher bound apart (bind=core: a core each, packed into one L3 cache): this thread keeps
 * its own CPUs (`block` = `orig`, its affinity now) for small transfers and runs on `wide` (every rank's
 * CPUs, so still within that L3 cache) for large ones, for the reason given in place.c. Does nothing
 * when wide adds nothing to the thread's CPUs or RINGSIDE_SHM_BIND=off. */
void rs_shm_place_init_wide(rs_shm_place *p, const cpu_set_t *wide);

/* Before a transfer of `bytes` (the larger side): bound below RS_SHM_LOOSE_BYTES, `wide` from there. If
 * something else changed the thread's affinity meanwhile (taskset, a test), placement stops: theirs. */
void rs_shm_place_for(rs_shm_place *p, size_t bytes);

/* Gives the thread its affinity back. */
void rs_shm_place_end(rs_shm_place *p);

#endif
