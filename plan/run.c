/* Running a plan: a pass over its nodes, oneDNN primitives for the products and pools, the engine's
 * CPU table for everything else, every value in the one arena; and the runtime that compile
 * (compile.c) and load (file.c) both open. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/core/kernels.h"
#include "ir.h"

double rs_plan_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void rs_plan_free(rs_plan *p)
{
    if (!p) return;
    rs_plan_dnnl_close(p);
    rs_plan_cuda_close(p);
    for (int i = 0; i < p->ntensors; i++) free(p->tensors[i].data);
    free(p->tensors);
    free(p->nodes);
    free(p->values);
    free(p->fusions);
    free(p->arena);
    free(p);
}

/* The runtime half, shared by compile and load: oneDNN's engine and primitives for the plan's batch,
 * the CPU table's context, the arena. */
rs_status rs_plan_open_runtime(rs_plan *p, rs_err *err)
{
    if (p->dev == RS_PLAN_DEV_CUDA) return rs_plan_cuda_open(p, err);
    if (p->build_threads < 1) p->build_threads = 1;
    if (p->threads < 1) p->threads = p->build_threads;
    rs_status st = rs_kctx_init(&p->ctx, rs_kernels_for(rs_device_cpu()), p->threads > 0 ? p->threads : 1, err);
    if (st) return st;
    st = rs_plan_dnnl_open(p, err);
    if (st) return st;
    size_t scratch = 0;
    int was = omp_get_max_threads();
    omp_set_num_threads(p->build_threads);
    st = rs_plan_dnnl_prepare(p, p->batch, &scratch, err);
    omp_set_num_threads(was);
    if (st) return st;
    if (scratch > p->scratch_bytes) { /* possible only for a plan of this ISA made by another build */
        p->scratch_bytes = scratch;
        p->arena_bytes = p->scratch_off + (scratch + 63) / 64 * 64;
    }
    p->arena = rs_plan_aligned_alloc(p->arena_bytes);
    if (!p->arena) return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory for a %zu-byte arena", p->arena_bytes);
    p->arena_cap = p->arena_bytes;
    /* start the OpenMP team now: the thread tuner's first run at `threads` would otherwise pay for
     * creating it, and a probe that costs a run more than one thread is abandoned */
    if (p->threads > 1) {
        #pragma omp parallel num_threads(p->threads)
        {
        }
    }
    return RS_OK;
}

float *rs_plan_value_ptr(rs_plan *p, int v, const void *x)
{
    rs_plan_mem m = {(char *)p->arena, x, NULL};
    return rs_plan_mem_value(p, &m, v);
}

static const float *host_tensor(const rs_plan *p, int t) { return p->tensors[t].data; }

static rs_status run_node(rs_plan *p, int i, const void *x, int B, rs_err *err)
{
    const rs_pnode *n = &p->nodes[i];
    if (p->calib && (n->kind == RS_PK_CONV || n->kind == RS_PK_LINEAR)) {
        /* a blocked value's padding channels are zeros: they add to the histogram's first bin */
        const rs_pvalue *v = &p->values[rs_plan_root(p, n->in[0])];
        size_t cnt = (size_t)B * (size_t)(v->padded > v->numel ? v->padded : v->numel);
        rs_plan_calib_observe(p->calib, i, rs_plan_value_ptr(p, n->in[0], x), cnt);
    }
    if (rs_plan_node_is_dnnl(n)) return rs_plan_dnnl_exec(p, i, x, B, err);
    rs_plan_mem m = {(char *)p->arena, x, host_tensor};
    return rs_plan_table_node(p, &p->ctx, &m, n, B, err);
}

rs_status rs_plan_run(rs_plan *p, const void *x, int B, const float **out, rs_err *err)
{
    if (B < 1 || B > p->batch)
        return rs_err_set(err, RS_ERR_ARG, "plan: batch %d, but it was compiled for 1..%d (compile ... batch=%d)", B,
                          p->batch, B);
    if (p->tokens) {
        const int32_t *t = x;
        int64_t n = (int64_t)B * rs_shape_numel(&p->in);
        for (int64_t i = 0; i < n; i++)
            if (t[i] < 0 || t[i] >= p->vocab)
                return rs_err_set(err, RS_ERR_ARG, "plan: token %d at %lld is outside the vocabulary of %d", t[i],
                                  (long long)i, p->vocab);
    }
    if (p->dev == RS_PLAN_DEV_CUDA) return rs_plan_cuda_run(p, x, B, out, err);
    /* Threads: on a loaded machine a team of N waits at every primitive and kernel for its slowest
     * member, which gets a core one scheduler slice at a time (the GPT at two threads: every node 12 ms,
     * embedding included, at load 4 on 2 cores). So a plan of N > 1 threads runs with the training
     * loop's tuner (engine/train/tune.h): windows of runs at 1 and at N, the faster kept, probed again
     * now and then; RINGSIDE_TUNE_THREADS=off fixes N. A new batch size starts it again. */
    if (p->tune_B != B) {
        rs_kctx_set_threads(&p->ctx, p->threads);
        rs_thread_tuner_init(&p->tune, &p->ctx, rs_plan_now_s());
        p->tune_B = B;
    }
    /* oneDNN (OpenMP build) sizes its regions from the calling thread's setting when a primitive is
     * made and runs that many: the run's count (its primitives are kept per count and batch), the
     * caller's put back after */
    int was = omp_get_max_threads();
    omp_set_num_threads(rs_kctx_threads(&p->ctx));
    size_t scratch = 0;
    rs_status st = rs_plan_dnnl_prepare(p, B, &scratch, err);
    if (st) {
        omp_set_num_threads(was);
        return st;
    }
    size_t need = p->scratch_off + (scratch + 63) / 64 * 64;
    if (need > p->arena_cap) { /* a smaller batch whose primitives want more scratch: rare, grow once */
        void *a = rs_plan_aligned_alloc(need);
        if (!a) {
            omp_set_num_threads(was);
            return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory growing the arena to %zu bytes", need);
        }
        memcpy(a, p->arena, p->arena_cap);
        free(p->arena);
        p->arena = a;
        p->arena_cap = need;
    }
    double t0 = rs_plan_now_s();
    if (p->node_s) { /* the CPU stream runs a primitive before execute returns: a node's time is its own */
        for (int i = 0; i < p->nnodes && !st; i++) {
            double t0 = rs_plan_now_s();
            st = run_node(p, i, x, B, err);
            p->node_s[i] = rs_plan_now_s() - t0;
        }
    } else {
        for (int i = 0; i < p->nnodes && !st; i++) st = run_node(p, i, x, B, err);
    }
    if (!st) st = rs_plan_dnnl_sync(p, err);
    double t1 = rs_plan_now_s();
    if (!st) rs_thread_tuner_step(&p->tune, t1 - t0, t1);
    omp_set_num_threads(was);
    if (st) return st;
    *out = rs_plan_value_ptr(p, p->output, x);
    return RS_OK;
}

rs_status rs_plan_evaluate(rs_plan *p, const rs_dataset *d, double *acc, double *loss, rs_err *err)
{
    size_t per = rs_dataset_sample_numel(d);
    if ((int64_t)per != rs_shape_numel(&p->in) || d->tokens != p->tokens || d->y_len != p->rows ||
        d->n_classes > p->classes)
        return rs_err_set(err, RS_ERR_SHAPE,
                          "plan: %s has samples of %zu %s with %d label(s) of %d classes; the plan takes %lld %s and "
                          "gives %d row(s) of %d scores",
                          d->name, per, d->tokens ? "tokens" : "values", d->y_len, d->n_classes,
                          (long long)rs_shape_numel(&p->in), p->tokens ? "tokens" : "values", p->rows, p->classes);
    int Bm = p->batch;
    float *x = malloc((size_t)Bm * per * sizeof(float)); /* owned here */
    int32_t *y = malloc((size_t)Bm * (size_t)d->y_len * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return rs_err_set(err, RS_ERR_NOMEM, "plan: out of memory");
    }
    double right = 0, sum = 0, count = 0;
    rs_status st = RS_OK;
    for (uint32_t at = 0; at < d->n && !st; at += (uint32_t)Bm) {
        int B = (int)(d->n - at < (uint32_t)Bm ? d->n - at : (uint32_t)Bm);
        for (int i = 0; i < B; i++)
            rs_dataset_get(d, at + (uint32_t)i, x + (size_t)i * per, y + (size_t)i * (size_t)d->y_len);
        const float *z;
        st = rs_plan_run(p, x, B, &z, err);
        if (st) break;
        int C = p->classes;
        for (int64_t r = 0; r < (int64_t)B * p->rows; r++) {
            const float *row = z + r * C;
            int best = 0;
            float mx = row[0];
            for (int j = 1; j < C; j++)
                if (row[j] > mx) mx = row[best = j];
            double se = 0;
            for (int j = 0; j < C; j++) se += exp((double)row[j] - mx);
            sum += log(se) + mx - row[y[r]];
            right += best == y[r];
            count++;
        }
    }
    free(x);
    free(y);
    if (st) return st;
    *acc = count ? right / count : 0;
    *loss = count ? sum / count : 0;
    return RS_OK;
}

void rs_plan_set_threads(rs_plan *p, int threads)
{
    p->threads = threads > 0 ? threads : 1;
    p->tune_B = 0; /* the tuner starts again from the new count */
}
void rs_plan_time_nodes(rs_plan *p, double *s) { p->node_s = s; }

void rs_plan_node_label(const rs_plan *p, int i, char *buf, size_t n)
{
    if (!n) return;
    buf[0] = 0;
    if (i < 0 || i >= p->nnodes) return;
    const rs_pnode *d = &p->nodes[i];
    snprintf(buf, n, "%.60s (%s, %s)", d->name, rs_pk_name(d->kind),
             p->dev == RS_PLAN_DEV_CUDA ? rs_plan_cuda_impl(p, i)
             : rs_plan_node_is_dnnl(d)  ? rs_plan_dnnl_impl_ran(p, i)
                                        : "engine cpu table");
}
int rs_plan_batch(const rs_plan *p) { return p->batch; }
rs_plan_prec rs_plan_precision(const rs_plan *p) { return p->prec; }
const rs_shape *rs_plan_input_shape(const rs_plan *p) { return &p->in; }
bool rs_plan_tokens(const rs_plan *p) { return p->tokens; }
int rs_plan_classes(const rs_plan *p) { return p->classes; }
int rs_plan_rows(const rs_plan *p) { return p->rows; }
int rs_plan_vocab(const rs_plan *p) { return p->vocab; }
int rs_plan_node_count(const rs_plan *p) { return p->nnodes; }
const char *const rs_plan_dev_names[] = {[RS_PLAN_DEV_CPU] = "cpu", [RS_PLAN_DEV_CUDA] = "cuda", NULL};
const char *rs_plan_device(const rs_plan *p) { return rs_plan_dev_names[p->dev == RS_PLAN_DEV_CUDA ? RS_PLAN_DEV_CUDA : RS_PLAN_DEV_CPU]; }
const char *rs_plan_fusion(const rs_plan *p, int i) { return i >= 0 && i < p->nfusions ? p->fusions[i] : ""; }

void rs_plan_get_stats(const rs_plan *p, rs_plan_stats *st)
{
    memset(st, 0, sizeof *st);
    st->nodes_before = p->nodes_before;
    st->nodes_after = p->nnodes;
    st->views_removed = p->views_removed;
    st->fusions = p->nfusions;
    st->arena_bytes = p->arena_bytes;
    st->naive_bytes = p->naive_bytes;
    for (int i = 0; i < p->ntensors; i++) st->weight_bytes += p->tensors[i].bytes;
    st->build_s = p->build_s;
}
