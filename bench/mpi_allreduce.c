/* Open MPI's own MPI_Allreduce (float, sum, in place), measured the way nccl-tests' all_reduce_perf
 * reports: the baseline the mpi backend (dist/mpi) and ringside's own shm/tcp all_reduce are compared
 * with. Standalone: links MPI only, so the figures are MPI's and nothing of ours.
 *   mpirun --allow-run-as-root -np 4 --oversubscribe build/bench/mpi_allreduce [-b 8] [-e 64M] [-f 2] [-n ITERS] [-w WARMUP] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "64M" -> 67108864; 0 when the text is not a size. */
static size_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return 0;
    switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    default: break;
    }
    return *end ? 0 : (size_t)v;
}

/* Rank r's element i: small integers, so every partial sum is exact in float whatever order MPI
 * adds them in, and a wrong element is a real error, not rounding. */
static float seeded(int r, size_t i) { return (float)((int)((i * 31u + (size_t)r * 7919u) % 97u) - 48); }

/* Enough iterations that each size moves ~256 MiB (clamped to 5..1000): the sweep takes seconds. */
static int auto_iters(size_t bytes)
{
    size_t it = (256u << 20) / (bytes ? bytes : 1);
    return it < 5 ? 5 : it > 1000 ? 1000 : (int)it;
}

static void usage(void)
{
    fprintf(stderr, "usage: mpi_allreduce [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
                    "  sizes take K/M/G suffixes; defaults -b 8 -e 64M -f 2, iterations and warm-up by size\n");
}

int main(int argc, char **argv)
{
    size_t minb = 8, maxb = 64u << 20;
    int factor = 2, iters = 0, warmup = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v || a[0] != '-' || !a[1] || a[2]) {
            usage();
            return 2;
        }
        i++;
        switch (a[1]) {
        case 'b': minb = parse_size(v); break;
        case 'e': maxb = parse_size(v); break;
        case 'f': factor = atoi(v); break;
        case 'n': iters = atoi(v); break;
        case 'w': warmup = atoi(v); break;
        default: usage(); return 2;
        }
    }
    if (minb < sizeof(float) || maxb < minb || factor < 2 || iters < 0 || maxb / sizeof(float) > INT32_MAX) {
        fprintf(stderr, "mpi_allreduce: need 4 <= -b <= -e <= 8G, -f >= 2, -n >= 0 (got -b %zu -e %zu -f %d -n %d)\n",
                minb, maxb, factor, iters);
        return 2;
    }

    MPI_Init(&argc, &argv);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    MPI_Get_library_version(ver, &vlen);
    ver[strcspn(ver, ",\n")] = 0;

    size_t maxn = maxb / sizeof(float);
    float *buf = malloc(maxn * sizeof *buf);
    size_t cap = iters > 1000 ? (size_t)iters : 1000; /* auto_iters never passes 1000 */
    double *times = malloc(sizeof *times * cap), *tmax = malloc(sizeof *tmax * cap);
    if (!buf || !times || !tmax) {
        fprintf(stderr, "mpi_allreduce: rank %d: out of memory for %zu bytes\n", rank, maxb);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    double bus_factor = world > 1 ? 2.0 * (world - 1) / world : 0;
    double bus_sum = 0;
    int rows = 0;
    long long wrong_total = 0;
    if (rank == 0) {
        printf("# mpi_allreduce: %s, MPI_Allreduce in place, %d ranks\n", ver, world);
        printf("# time: average over iterations of the slowest rank; busbw = algbw * 2(n-1)/n\n#\n");
        printf("# %10s %12s %8s %6s %10s %8s %8s %7s %6s\n", "size", "count", "type", "redop", "time", "algbw", "busbw",
               "#wrong", "iters");
        printf("# %10s %12s %8s %6s %10s %8s %8s %7s %6s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "");
    }
    for (size_t bytes = minb; bytes <= maxb; bytes = bytes * (size_t)factor) {
        size_t n = bytes / sizeof(float);
        int it = iters ? iters : auto_iters(bytes);
        int wu = warmup >= 0 ? warmup : bytes <= (1u << 20) ? 5 : 2;

        /* Timing runs on zeros: a float sum's speed does not depend on the values (no denormals here),
         * and zeros do not overflow to inf over hundreds of in-place iterations. */
        memset(buf, 0, n * sizeof *buf);
        for (int k = 0; k < wu; k++) MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int k = 0; k < it; k++) {
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            times[k] = MPI_Wtime() - t0;
        }
        MPI_Reduce(times, tmax, it, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

        /* Correctness, separately: per-rank seeded data against the sum worked out here. */
        for (size_t i = 0; i < n; i++) buf[i] = seeded(rank, i);
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        long long wrong = 0;
        for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int r = 0; r < world; r++) want += seeded(r, i);
            wrong += buf[i] != want;
        }
        long long wrong_all = 0;
        MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);

        if (rank == 0) {
            double t = 0;
            for (int k = 0; k < it; k++) t += tmax[k];
            t /= it;
            double algbw = (double)bytes / t / 1e9, busbw = algbw * bus_factor;
            printf("  %10zu %12zu %8s %6s %10.2f %8.3f %8.3f %7lld %6d\n", bytes, n, "float", "sum", t * 1e6, algbw,
                   busbw, wrong_all, it);
            fflush(stdout);
            bus_sum += busbw;
            rows++;
            wrong_total += wrong_all;
        }
        if (bytes > maxb / (size_t)factor) break; /* the next size would pass -e (or overflow) */
    }
    if (rank == 0) {
        printf("# Out of bounds values : %lld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %.3f GB/s\n", rows ? bus_sum / rows : 0.0);
    }
    free(buf);
    free(times);
    free(tmax);
    MPI_Bcast(&wrong_total, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return wrong_total ? 1 : 0;
}
