/* Placement of shm ranks (see place.h). Why bind at all: left to itself, the kernel puts two ranks that
 * hand each other data on one CPU as soon as anything else is busy (each looks like half a CPU of load,
 * and a woken rank joins its waker), and then every hand-over is a context switch: an 8 B all_reduce at
 * 2 ranks beside one busy process took 7-12 us unbound, 0.10 bound, against Open MPI's 0.2 (mpirun binds
 * each of 2 ranks to a core). Why not stay bound for large messages: with many busy processes (load
 * average 10-20 on 2 CPUs) a bound rank waits behind everything on its CPU, and the two ranks rarely run
 * at once: 16 MiB at 2 ranks took 70 ms bound (each rank ~90 ms of CPU and ~1 s waiting for it, 30
 * voluntary switches) against 17 ms unbound, where the kernel keeps the two on one CPU taking turns
 * through the bell (1300 switches, each short). A transfer that takes long enough to amortise two
 * system calls runs with the thread's own affinity; the next small one binds again.
 * Ranks the launcher bound apart (bind=core, dist/launch/bind.c) do the same the other way round: a
 * large transfer widens a rank to every rank's CPUs (one L3 cache: the launcher packed them there), a
 * small one narrows it back to its own core. Measured on 2 vCPUs with 8-11 runnable processes beside
 * (bench/shm_vs_mpi.sh, docs/dist.md "Binding figures"): bound for everything, 16 MiB at 2 ranks gave a
 * median 0.40 GB/s against 2.57 left to the kernel. */
#define _GNU_SOURCE
#include "place.h"

#include <stdlib.h>
#include <string.h>

/* A rank keeps the block holding the CPU it was started on (the kernel chose it, knowing the load)
 * unless a lower rank has that block; then it takes the first free one. Blocks split the usable CPUs
 * in order: position i belongs to block i*world/m (2 ranks on 2 CPUs: one each; 2 on 8: four each). */
static bool place_off(void)
{
    const char *env = getenv("RINGSIDE_SHM_BIND");
    return env && (!strcmp(env, "off") || !strcmp(env, "0"));
}

void rs_shm_place_init(rs_shm_place *p, int rank, int world, const int *start_cpu)
{
    memset(p, 0, sizeof *p);
    if (place_off()) return;
    cpu_set_t mask;
    if (world < 2 || rank < 0 || rank >= world || sched_getaffinity(0, sizeof mask, &mask) != 0) return;
    int m = CPU_COUNT(&mask);
    if (m < world) return;
    int pos[CPU_SETSIZE]; /* CPU -> its position among the usable ones; -1: not usable */
    for (int c = 0, i = 0; c < CPU_SETSIZE; c++) pos[c] = CPU_ISSET(c, &mask) ? i++ : -1;
    bool *taken = calloc((size_t)world, sizeof *taken); /* owned here */
    if (!taken) return;
    int mine = 0;
    for (int q = 0; q < world; q++) {
        int c = start_cpu[q];
        int b = c >= 0 && c < CPU_SETSIZE && pos[c] >= 0 ? (int)((long)pos[c] * world / m) : -1;
        if (b < 0 || taken[b])
            for (b = 0; taken[b]; b++) {}
        taken[b] = true;
        if (q == rank) mine = b;
    }
    free(taken);
    CPU_ZERO(&p->block);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (pos[c] >= 0 && (long)pos[c] * world / m == mine) CPU_SET(c, &p->block);
    if (sched_setaffinity(0, sizeof p->block, &p->block) != 0) return;
    p->orig = mask;
    p->wide = mask;
    p->on = true;
}

void rs_shm_place_init_wide(rs_shm_place *p, const cpu_set_t *wide)
{
    memset(p, 0, sizeof *p);
    cpu_set_t mask, both;
    if (place_off() || sched_getaffinity(0, sizeof mask, &mask) != 0) return;
    CPU_OR(&both, &mask, wide);
    if (CPU_EQUAL(&both, &mask)) return;
    p->orig = p->block = mask;
    p->wide = both;
    p->on = true;
}

void rs_shm_place_for(rs_shm_place *p, size_t bytes)
{
    bool loose = bytes >= RS_SHM_LOOSE_BYTES;
    if (!p->on || loose == p->loose) return;
    cpu_set_t now;
    if (sched_getaffinity(0, sizeof now, &now) != 0 || !CPU_EQUAL(&now, p->loose ? &p->wide : &p->block)) {
        p->on = false;
        return;
    }
    if (sched_setaffinity(0, sizeof now, loose ? &p->wide : &p->block) == 0) p->loose = loose;
}

void rs_shm_place_end(rs_shm_place *p)
{
    cpu_set_t now;
    if (p->on && sched_getaffinity(0, sizeof now, &now) == 0 && CPU_EQUAL(&now, p->loose ? &p->wide : &p->block))
        sched_setaffinity(0, sizeof p->orig, &p->orig);
    p->on = false;
}
