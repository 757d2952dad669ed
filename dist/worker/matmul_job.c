/* The `matmul` job: the lecture's worked example of tensor parallelism (seed 001, section 3.2.3) on
 * real ranks. A (m x k) holds 0, 1, 2, ... and B (k x n) goes on from m*k (the lecture's 2x4 and 4x2,
 * whose product is [[76, 82], [252, 274]]).
 *   cols: rank r holds B's columns [r n/W, (r+1) n/W) and computes its block of Y's columns,
 *         Y_r = A . B_r (m x n/W); an all_gather sets the blocks side by side: Y = Y_0 || Y_1.
 *   rows: rank r holds A's columns and B's rows [r k/W, (r+1) k/W) (the inner dimension) and
 *         computes a partial product Y_r (m x n); an all_reduce adds them: Y = Y_0 + Y_1.
 * This is Megatron's MLP in miniature: its first linear is split like `cols`, its second like
 * `rows`. Every rank checks its Y against the product it computes serially (in double, by the
 * definition) and reports "@check RANK WRONG SECONDS". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/kernels.h"
#include "worker.h"

void rs_matmul_demo_fill(float *a, float *b, int m, int k, int n)
{
    for (int i = 0; i < m * k; i++) a[i] = (float)i;
    for (int i = 0; i < k * n; i++) b[i] = (float)(m * k + i);
}

void rs_matmul_demo_print(FILE *f, const float *x, int rows, int cols, int ld)
{
    if (rows * cols > 64) {
        fprintf(f, "(%d x %d)", rows, cols);
        return;
    }
    fputc('[', f);
    for (int i = 0; i < rows; i++) {
        fputs(i ? ", [" : "[", f);
        for (int j = 0; j < cols; j++) fprintf(f, j ? ", %g" : "%g", (double)x[(size_t)i * (size_t)ld + (size_t)j]);
        fputc(']', f);
    }
    fputc(']', f);
}

typedef struct mjob {
    FILE *out, *errf;
    const char *backend, *group, *split;
    int m, k, n, trace;
    double timeout;
    bool store_from_launcher;
    rs_pg *g;
} mjob;

const char *const rs_matmul_split_names[] = {"both", "cols", "rows", NULL};

static bool split_known(const char *v)
{
    for (int i = 0; rs_matmul_split_names[i]; i++)
        if (!strcmp(v, rs_matmul_split_names[i])) return true;
    return false;
}

static int parse(mjob *j, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(j->errf, "ringside --worker matmul: '%s' is not key=value\n", argv[i]);
            return 2;
        }
        size_t kl = (size_t)(eq - argv[i]);
        const char *v = eq + 1;
        char *end = NULL;
        long x = strtol(v, &end, 10);
        bool num = *v && !*end;
#define KEY(s) (kl == strlen(s) && !strncmp(argv[i], s, kl))
        bool good = true;
        if (KEY("backend")) j->backend = v;
        else if (KEY("group")) j->group = v;
        else if (KEY("store")) j->store_from_launcher = !strcmp(v, "launcher");
        else if (KEY("split")) good = split_known(v), j->split = v;
        else if (KEY("timeout")) good = (j->timeout = strtod(v, &end)) > 0 && !*end;
        else if (KEY("m") || KEY("k") || KEY("n")) {
            good = num && x >= 1 && x <= 4096;
            *(KEY("m") ? &j->m : KEY("k") ? &j->k : &j->n) = (int)x;
        } else if (KEY("trace")) good = num, j->trace = (int)x;
        else good = false;
#undef KEY
        if (!good) {
            fprintf(j->errf, "ringside --worker matmul: unknown option or bad value '%s'\n", argv[i]);
            return 2;
        }
    }
    return 0;
}

static void trace_line(void *ud, const rs_pg_event *ev)
{
    mjob *j = ud;
    char line[256];
    rs_wire_format_event(line, sizeof line, ev);
    fprintf(j->out, "%s\n", line);
}

/* Elements of y (m x n) that differ from the serial product. */
static uint64_t wrong(const float *y, const float *a, const float *b, int m, int k, int n)
{
    uint64_t bad = 0;
    for (int i = 0; i < m; i++)
        for (int c = 0; c < n; c++) {
            double s = 0;
            for (int p = 0; p < k; p++) s += (double)a[i * k + p] * b[p * n + c];
            if (fabs(y[i * n + c] - s) > 1e-5 * (1 + fabs(s))) bad++;
        }
    return bad;
}

/* One split; the line this rank prints into f. */
static rs_status one_split(mjob *j, bool cols, const float *a, const float *b, float *y, FILE *f, uint64_t *bad,
                           rs_err *err)
{
    const rs_kernels *K = rs_kernels_for(rs_device_cpu());
    int W = j->g->world, r = j->g->rank, m = j->m, k = j->k, n = j->n;
    rs_kctx kc; /* this split's kernel calls: the worker's default thread count */
    rs_status st = rs_kctx_init(&kc, K, 0, err);
    if (st) return st;
    if (cols) {
        int w = n / W, c0 = r * w;
        float *bc = malloc(sizeof *bc * (size_t)(k * w)), *yr = malloc(sizeof *yr * (size_t)(m * w)),
              *all = malloc(sizeof *all * (size_t)(m * n));
        if (!bc || !yr || !all) {
            free(bc), free(yr), free(all);
            return rs_err_set(err, RS_ERR_NOMEM, "matmul: out of memory");
        }
        for (int p = 0; p < k; p++) memcpy(bc + p * w, b + p * n + c0, sizeof *bc * (size_t)w);
        /* the shapes are the same on every rank, so a failing gemm fails on all of them alike */
        if (K->gemm(&kc, false, false, m, w, k, 1.0f, a, k, bc, w, 0.0f, yr, w)) {
            free(bc), free(yr), free(all);
            return rs_kctx_check(&kc, err);
        }
        fprintf(f, "columns: Y_%d = A . B[:, %d:%d] = ", r, c0, c0 + w);
        rs_matmul_demo_print(f, yr, m, w, w);
        /* the blocks arrive one after another (rank order); Y puts them side by side */
        st = rs_pg_all_gather(j->g, yr, all, (size_t)(m * w), RS_F32, err);
        for (int q = 0; !st && q < W; q++)
            for (int i = 0; i < m; i++) memcpy(y + i * n + q * w, all + q * m * w + i * w, sizeof *y * (size_t)w);
        fputs(" -> all_gather -> Y = ", f);
        free(bc), free(yr), free(all);
    } else {
        int h = k / W, p0 = r * h;
        float *ar = malloc(sizeof *ar * (size_t)(m * h));
        if (!ar) return rs_err_set(err, RS_ERR_NOMEM, "matmul: out of memory");
        for (int i = 0; i < m; i++) memcpy(ar + i * h, a + i * k + p0, sizeof *ar * (size_t)h);
        if (K->gemm(&kc, false, false, m, n, h, 1.0f, ar, h, b + p0 * n, n, 0.0f, y, n)) {
            free(ar);
            return rs_kctx_check(&kc, err);
        }
        fprintf(f, "rows: Y_%d = A[:, %d:%d] . B[%d:%d, :] = ", r, p0, p0 + h, p0, p0 + h);
        rs_matmul_demo_print(f, y, m, n, n);
        st = rs_pg_all_reduce(j->g, y, (size_t)(m * n), RS_F32, RS_SUM, err);
        fputs(" -> all_reduce -> Y = ", f);
        free(ar);
    }
    if (st) return st;
    rs_matmul_demo_print(f, y, m, n, n);
    *bad += wrong(y, a, b, m, k, n);
    return RS_OK;
}

int rs_worker_matmul(int argc, char **argv, FILE *out, FILE *errf)
{
    mjob j = {.out = out, .errf = errf, .backend = "shm", .group = "matmul", .split = "both", .m = 2, .k = 4, .n = 2,
              .timeout = 30};
    int rc = parse(&j, argc, argv);
    if (rc) return rc;
    rs_worker_conn conn;
    rc = rs_worker_join(j.backend, j.group, j.timeout, j.store_from_launcher, errf, &conn);
    j.g = conn.g;
    bool cols = strcmp(j.split, "rows") != 0, rows = strcmp(j.split, "cols") != 0;
    if (!rc && ((cols && j.n % conn.world) || (rows && j.k % conn.world))) {
        fprintf(errf, "rank %d: matmul: %d ranks do not divide %s\n", conn.rank, conn.world,
                cols && j.n % conn.world ? "B's columns (n=)" : "the inner dimension (k=)");
        rc = 2;
    }
    float *a = NULL, *b = NULL, *y = NULL;
    if (!rc) {
        a = malloc(sizeof *a * (size_t)(j.m * j.k));
        b = malloc(sizeof *b * (size_t)(j.k * j.n));
        y = malloc(sizeof *y * (size_t)(j.m * j.n));
        if (!a || !b || !y) {
            fprintf(errf, "rank %d: matmul: out of memory\n", conn.rank);
            rc = 1;
        }
    }
    if (!rc) {
        rs_matmul_demo_fill(a, b, j.m, j.k, j.n);
        if (j.trace) {
            j.g->trace = trace_line;
            j.g->trace_ud = &j;
        }
        uint64_t bad = 0;
        rs_err e = {0};
        double t0 = rs_pg_now();
        for (int s = 0; s < 2 && !rc; s++) {
            if (!(s == 0 ? cols : rows)) continue;
            char *line = NULL;
            size_t cap = 0;
            FILE *f = open_memstream(&line, &cap);
            if (!f) {
                rc = 1;
                break;
            }
            rs_status st = one_split(&j, s == 0, a, b, y, f, &bad, &e);
            fclose(f);
            if (st) {
                fprintf(errf, "rank %d: %s\n", conn.rank, e.msg);
                rc = 1;
            } else {
                fprintf(out, "rank %d: %s\n", conn.rank, line);
            }
            free(line);
        }
        if (!rc) fprintf(out, "@check %d %llu %.9f\n", conn.rank, (unsigned long long)bad, rs_pg_now() - t0);
        if (bad) rc = 1;
    }
    free(a);
    free(b);
    free(y);
    fflush(out);
    rs_worker_leave(&conn, rc == 0, j.timeout);
    return rc;
}
