/* CPU transformer kernels: token + position embedding, causal multi-head self-attention (forward,
 * backward, one decoding step against a KV cache).
 * Attention works on one (batch, head) pair at a time: Q, K, V of a head are strided views into qkv
 * (row stride 3C), so the products go straight to OpenBLAS with no packing. Queries are taken in
 * blocks of ROW_BLOCK rows; rows [t0, t1) see keys [0, t1) only, which skips most of the masked upper
 * triangle. Pairs are spread over OpenMP threads (OpenBLAS runs single-threaded inside the region);
 * each pair is computed the same way whatever the thread count, so results do not depend on it. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_scope.h"
#include "vmath.h"

#define PAR_MIN 32768
#define ROW_BLOCK 32
#define STEP_CHUNK 128 /* keys per chunk of the decoding step's online softmax */

static inline int imin(int a, int b) { return a < b ? a : b; }

/* Threads for a loop over n independent items: the configured count, at most n. */
static int team_for(const rs_kctx *ctx, int n)
{
    int nt = ctx->threads;
    if (nt > n) nt = n;
    return nt < 1 ? 1 : nt;
}

/* Per thread: one (T, T) block for dP / dS, rounded to whole cache lines. */
static size_t bwd_thread_floats(int T) { return ((size_t)T * T + 15) & ~(size_t)15; }

static size_t bwd_workspace(const rs_kctx *ctx, int B, int T, int NH)
{
    return (size_t)team_for(ctx, B * NH) * bwd_thread_floats(T) * sizeof(float);
}

/* B, T >= 0 and NH >= 1 heads that split C evenly. */
static rs_status check_heads(rs_kctx *ctx, const char *who, int B, int T, int C, int NH)
{
    CPU_NONNEG(ctx, who, B);
    CPU_NONNEG(ctx, who, T);
    if (NH < 1 || C < 1 || C % NH)
        return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: C=%d does not split into NH=%d heads (need C, NH >= 1, C %% NH == 0)",
                            who, C, NH);
    return RS_OK;
}

static rs_status check_ws(rs_kctx *ctx, const char *who, const float *ws, size_t ws_bytes, int B, int T, int NH)
{
    size_t need = bwd_workspace(ctx, B, T, NH);
    if (B && T && (!ws || ws_bytes < need))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: workspace of %zu bytes, %zu needed for B=%d T=%d NH=%d on %d threads "
                            "(ask attn_workspace)", who, ws ? ws_bytes : 0, need, B, T, NH, ctx->threads);
    return RS_OK;
}

static rs_status check_step(rs_kctx *ctx, const char *who, int B, int len, int maxT, int C, int NH)
{
    RS_KTRY(check_heads(ctx, who, B, maxT, C, NH));
    if (B && (len < 1 || len > maxT))
        return rs_kctx_fail(ctx, RS_ERR_ARG, "%s: len=%d is outside the cache's [1, %d]", who, len, maxT);
    return RS_OK;
}

/* ---- embedding ---- */

rs_status rs_cpu_embed_fwd(rs_kctx *ctx, const int32_t *tok, const float *wte, const float *wpe, float *out, int B,
                           int T, int C)
{
    CPU_CTX(ctx, "embed_fwd");
    CPU_NONNEG(ctx, "embed_fwd", B);
    CPU_NONNEG(ctx, "embed_fwd", T);
    CPU_NONNEG(ctx, "embed_fwd", C);
    CPU_PTR(ctx, "embed_fwd", tok, B && T && C);
    CPU_PTR(ctx, "embed_fwd", wte, B && T && C);
    CPU_PTR(ctx, "embed_fwd", wpe, B && T && C);
    CPU_PTR(ctx, "embed_fwd", out, B && T && C);
    int prev = cpu_enter(ctx);
    const int rows = B * T;
    #pragma omp parallel for schedule(static) if ((size_t)rows * C >= PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *e = wte + (size_t)tok[r] * C, *p = wpe + (size_t)(r % T) * C;
        float *o = out + (size_t)r * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

/* Repeated tokens add into the same dwte row, so a thread owns whole rows: thread k of n takes the
 * tokens with id % n == k (and positions [T k / n, T (k+1) / n) for dwpe), scanning every (b, t) in
 * order. No races, and each row receives its additions in the same order for any thread count, so
 * the result does not depend on it. (Splitting the channels instead would make every thread touch
 * every row of the large table: the same page walks on each thread, and no gain on two threads.) */
rs_status rs_cpu_embed_bwd(rs_kctx *ctx, const int32_t *tok, const float *dout, float *dwte, float *dwpe, int B, int T,
                           int C)
{
    CPU_CTX(ctx, "embed_bwd");
    CPU_NONNEG(ctx, "embed_bwd", B);
    CPU_NONNEG(ctx, "embed_bwd", T);
    CPU_NONNEG(ctx, "embed_bwd", C);
    CPU_PTR(ctx, "embed_bwd", tok, B && T && C);
    CPU_PTR(ctx, "embed_bwd", dout, B && T && C);
    CPU_PTR(ctx, "embed_bwd", dwte, B && T && C);
    CPU_PTR(ctx, "embed_bwd", dwpe, B && T && C);
    int prev = cpu_enter(ctx);
    int nt = (size_t)B * T * C >= PAR_MIN ? team_for(ctx, B * T) : 1;
    #pragma omp parallel num_threads(nt)
    {
        const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        const int p0 = (int)((int64_t)T * tid / nth), p1 = (int)((int64_t)T * (tid + 1) / nth);
        for (int t = p0; t < p1; t++) {
            float *gp = dwpe + (size_t)t * C;
            for (int b = 0; b < B; b++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                for (int c = 0; c < C; c++) gp[c] += d[c];
            }
        }
        for (size_t r = 0; r < (size_t)B * T; r++) {
            if (tok[r] % nth != tid) continue;
            const float *d = dout + r * C;
            float *ge = dwte + (size_t)tok[r] * C;
            for (int c = 0; c < C; c++) ge[c] += d[c];
        }
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}

/* ---- row helpers of the decoding step: 8 independent lanes (element j to lane j % 8) so they vectorize without
 *      -ffast-math; the tail is padded with the neutral value into one more full step, which keeps
 *      the lanes in registers and gives the same bits as adding the tail one by one. ---- */

static inline float row_max(const float *x, int n)
{
    float m[8], tail[8];
    for (int l = 0; l < 8; l++) m[l] = x[0];
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) m[l] = x[j + l] > m[l] ? x[j + l] : m[l];
    if (j < n) {
        for (int l = 0; l < 8; l++) tail[l] = j + l < n ? x[j + l] : -INFINITY;
        for (int l = 0; l < 8; l++) m[l] = tail[l] > m[l] ? tail[l] : m[l];
    }
    for (int w = 4; w > 0; w /= 2)
        for (int l = 0; l < w; l++) m[l] = m[l + w] > m[l] ? m[l + w] : m[l];
    return m[0];
}

static inline float row_sum(const float *x, int n)
{
    float acc[8] = {0}, tail[8];
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[j + l];
    if (j < n) {
        for (int l = 0; l < 8; l++) tail[l] = j + l < n ? x[j + l] : 0.0f;
        for (int l = 0; l < 8; l++) acc[l] += tail[l];
    }
    for (int w = 4; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

/* Lanes of the softmax loops: one AVX-512 vector. Element j of a row goes to lane j % SM_LANES. */
#define SM_LANES 16

/* max over row[0, np) and sum over row[0, np) of a row padded to np, a multiple of SM_LANES. Only
 * constant lane indices, so the lanes stay in registers (a variable-index tail would put them on
 * the stack, and the reduction tree would wait on store forwarding). */
static inline float lanes_max(const float *row, int np)
{
    float m[SM_LANES];
    for (int l = 0; l < SM_LANES; l++) m[l] = row[l];
    for (int j = SM_LANES; j < np; j += SM_LANES)
        for (int l = 0; l < SM_LANES; l++) m[l] = row[j + l] > m[l] ? row[j + l] : m[l];
    for (int w = SM_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) m[l] = m[l + w] > m[l] ? m[l + w] : m[l];
    return m[0];
}

/* Row t of the scores when the row has no room for padding (the last rows when T % 16 != 0): the
 * same lanes, the tail added one element at a time; same bits as padding would give. */
static void softmax_row_tail(float *row, int n)
{
    float m = row[0], acc[SM_LANES] = {0};
    for (int s = 1; s < n; s++) m = row[s] > m ? row[s] : m;
    for (int s = 0; s < n; s++) {
        row[s] = rs_vexpf(row[s] - m);
        acc[s % SM_LANES] += row[s];
    }
    for (int w = SM_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    const float inv = 1.0f / acc[0];
    for (int s = 0; s < n; s++) row[s] *= inv;
}

/* Rows [t0, t1) of the scores (already scaled) -> probabilities over keys s <= t, zeros after.
 * Rows are short (T keys at most), so one row's max -> exp -> sum -> scale is a chain of latencies
 * rather than of work; the passes below go over all the block's rows in turn, so the rows of one
 * pass are independent and overlap in the core. The masked entries past t pad each row with -inf to
 * a multiple of SM_LANES (exp gives 0 there) where the row has room: every row when T % 16 == 0. */
RS_SIMD static void softmax_causal_rows(float *att, int t0, int t1, int T)
{
    float mx[ROW_BLOCK], inv[ROW_BLOCK];
    for (int t = t0; t < t1; t++) {
        float *row = att + (size_t)t * T;
        const int n = t + 1, np = (n + SM_LANES - 1) & ~(SM_LANES - 1);
        if (np > T) continue;
        for (int s = n; s < np; s++) row[s] = -INFINITY;
        mx[t - t0] = lanes_max(row, np);
    }
    for (int t = t0; t < t1; t++) {
        float *row = att + (size_t)t * T, acc[SM_LANES] = {0};
        const int n = t + 1, np = (n + SM_LANES - 1) & ~(SM_LANES - 1);
        if (np > T) {
            softmax_row_tail(row, n);
            continue;
        }
        const float x0 = mx[t - t0];
        for (int j = 0; j < np; j += SM_LANES)
            for (int l = 0; l < SM_LANES; l++) {
                float e = rs_vexpf(row[j + l] - x0);
                row[j + l] = e;
                acc[l] += e;
            }
        for (int w = SM_LANES / 2; w > 0; w /= 2)
            for (int l = 0; l < w; l++) acc[l] += acc[l + w];
        inv[t - t0] = 1.0f / acc[0];
    }
    for (int t = t0; t < t1; t++) {
        float *row = att + (size_t)t * T;
        const int n = t + 1, np = (n + SM_LANES - 1) & ~(SM_LANES - 1);
        int len = n;
        if (np <= T) {
            const float r = inv[t - t0];
            for (int j = 0; j < np; j += SM_LANES)
                for (int l = 0; l < SM_LANES; l++) row[j + l] *= r;
            len = np;
        }
        if (len < T) memset(row + len, 0, (size_t)(T - len) * sizeof *row);
    }
}

/* Rows [t0, t1) of dP -> dS[t,s] = P[t,s] (dP[t,s] - sum_u P[t,u] dP[t,u]) for s <= t, zeros on (t, t1).
 * Two passes over the block's rows (all the dots, then all the updates) for the same reason as the
 * forward; P is 0 past t, so the dots run to a multiple of SM_LANES where the block has room. */
RS_SIMD static void softmax_causal_rows_bwd(const float *att, float *dp, int t0, int t1, int T)
{
    float dot[ROW_BLOCK];
    for (int t = t0; t < t1; t++) {
        const float *pr = att + (size_t)t * T, *dr = dp + (size_t)t * T;
        const int n = t + 1, np = (n + SM_LANES - 1) & ~(SM_LANES - 1);
        float acc[SM_LANES] = {0};
        if (np <= t1) {
            for (int j = 0; j < np; j += SM_LANES)
                for (int l = 0; l < SM_LANES; l++) acc[l] += pr[j + l] * dr[j + l];
        } else {
            for (int s = 0; s < n; s++) acc[s % SM_LANES] += pr[s] * dr[s];
        }
        for (int w = SM_LANES / 2; w > 0; w /= 2)
            for (int l = 0; l < w; l++) acc[l] += acc[l + w];
        dot[t - t0] = acc[0];
    }
    for (int t = t0; t < t1; t++) {
        const float *pr = att + (size_t)t * T;
        float *dr = dp + (size_t)t * T;
        const int n = t + 1;
        const float d = dot[t - t0];
        for (int s = 0; s < n; s++) dr[s] = pr[s] * (dr[s] - d);
        for (int s = n; s < t1; s++) dr[s] = 0.0f;
    }
}

/* ---- attention ---- */

/* One (b, h) pair. q, k, v: (T, hs) with row stride 3C; out (T, hs) with row stride C; att (T, T). */
static void attn_fwd_pair(const float *q, const float *k, const float *v, float *out, float *att, int T, int C,
                          int hs, float scale, rs_prec prec, int *fail)
{
    const int C3 = 3 * C;
    for (int t0 = 0; t0 < T; t0 += ROW_BLOCK) {
        const int t1 = imin(t0 + ROW_BLOCK, T), m = t1 - t0;
        float *a = att + (size_t)t0 * T;
        /* S[t0:t1, 0:t1] = scale * Q[t0:t1] K[0:t1]^T */
        CPU_GEMM_PREC(fail, prec, false, true, m, t1, hs, scale, q + (size_t)t0 * C3, C3, k, C3, 0.0f, a, T);
        softmax_causal_rows(att, t0, t1, T);
        /* O[t0:t1] = P[t0:t1, 0:t1] V[0:t1] */
        CPU_GEMM_PREC(fail, prec, false, false, m, hs, t1, 1.0f, a, T, v, C3, 0.0f, out + (size_t)t0 * C, C);
    }
}

rs_status rs_cpu_attn_fwd(rs_kctx *ctx, const float *qkv, float *out, float *att, int B, int T, int C, int NH)
{
    CPU_CTX(ctx, "attn_fwd");
    RS_KTRY(check_heads(ctx, "attn_fwd", B, T, C, NH));
    CPU_PTR(ctx, "attn_fwd", qkv, B && T);
    CPU_PTR(ctx, "attn_fwd", out, B && T);
    CPU_PTR(ctx, "attn_fwd", att, B && T);
    if (!B || !T) return RS_OK;
    int fail = 0;
    int prev = cpu_enter(ctx);
    const int hs = C / NH, pairs = B * NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t work = (size_t)pairs * T * T * hs;
    #pragma omp parallel for schedule(static) num_threads(team_for(ctx, pairs)) if (work >= PAR_MIN)
    for (int p = 0; p < pairs; p++) {
        const int b = p / NH, h = p % NH;
        const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * hs;
        attn_fwd_pair(q, q + C, q + 2 * C, out + (size_t)b * T * C + (size_t)h * hs, att + (size_t)p * T * T, T,
                      C, hs, scale, ctx->prec, &fail);
    }
    cpu_leave(ctx, prev);
    if (fail) return rs_kctx_fail(ctx, RS_ERR_NOMEM, "attn_fwd: out of memory for the %s operands", rs_prec_name(ctx->prec));
    return RS_OK;
}

rs_status rs_cpu_attn_workspace(rs_kctx *ctx, int B, int T, int C, int NH, size_t *bytes)
{
    CPU_CTX(ctx, "attn_workspace");
    CPU_PTR(ctx, "attn_workspace", bytes, 1);
    RS_KTRY(check_heads(ctx, "attn_workspace", B, T, C, NH));
    *bytes = bwd_workspace(ctx, B, T, NH);
    return RS_OK;
}

/* One (b, h) pair, with P = att (T, T) and dP = dO V^T:
 *   dV = P^T dO,   dS[t,s] = P[t,s] (dP[t,s] - sum_u P[t,u] dP[t,u]),   dQ = scale dS K,   dK = scale dS^T Q.
 * Row blocks go last first: the last block covers keys [0, T), so its dK/dV products overwrite
 * (beta 0) and the earlier, shorter blocks add. dq, dk, dv have row stride 3C, dout stride C. */
static void attn_bwd_pair(const float *q, const float *k, const float *v, const float *att, const float *dout,
                          float *dq, float *dk, float *dv, float *dp, int T, int C, int hs, float scale,
                          rs_prec prec, int *fail)
{
    const int C3 = 3 * C;
    const int last = ((T - 1) / ROW_BLOCK) * ROW_BLOCK;
    for (int t0 = last; t0 >= 0; t0 -= ROW_BLOCK) {
        const int t1 = imin(t0 + ROW_BLOCK, T), m = t1 - t0;
        const float beta = t0 == last ? 0.0f : 1.0f;
        const float *P = att + (size_t)t0 * T, *dO = dout + (size_t)t0 * C;
        float *D = dp + (size_t)t0 * T;
        /* dP[t0:t1, 0:t1] = dO[t0:t1] V[0:t1]^T */
        CPU_GEMM_PREC(fail, prec, false, true, m, t1, hs, 1.0f, dO, C, v, C3, 0.0f, D, T);
        softmax_causal_rows_bwd(att, dp, t0, t1, T);
        /* dQ[t0:t1] = scale dS[t0:t1, 0:t1] K[0:t1] */
        CPU_GEMM_PREC(fail, prec, false, false, m, hs, t1, scale, D, T, k, C3, 0.0f, dq + (size_t)t0 * C3, C3);
        /* dK[0:t1] (+)= scale dS[t0:t1, 0:t1]^T Q[t0:t1];  dV[0:t1] (+)= P[t0:t1, 0:t1]^T dO[t0:t1] */
        CPU_GEMM_PREC(fail, prec, true, false, t1, hs, m, scale, D, T, q + (size_t)t0 * C3, C3, beta, dk, C3);
        CPU_GEMM_PREC(fail, prec, true, false, t1, hs, m, 1.0f, P, T, dO, C, beta, dv, C3);
    }
}

rs_status rs_cpu_attn_bwd(rs_kctx *ctx, const float *qkv, const float *att, const float *dout, float *dqkv, float *ws,
                          size_t ws_bytes, int B, int T, int C, int NH)
{
    CPU_CTX(ctx, "attn_bwd");
    RS_KTRY(check_heads(ctx, "attn_bwd", B, T, C, NH));
    CPU_PTR(ctx, "attn_bwd", qkv, B && T);
    CPU_PTR(ctx, "attn_bwd", att, B && T);
    CPU_PTR(ctx, "attn_bwd", dout, B && T);
    CPU_PTR(ctx, "attn_bwd", dqkv, B && T);
    RS_KTRY(check_ws(ctx, "attn_bwd", ws, ws_bytes, B, T, NH));
    if (!B || !T) return RS_OK;
    int fail = 0;
    int prev = cpu_enter(ctx);
    const int hs = C / NH, pairs = B * NH, nt = team_for(ctx, pairs);
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t work = (size_t)pairs * T * T * hs, tf = bwd_thread_floats(T);
    #pragma omp parallel for schedule(static) num_threads(nt) if (work >= PAR_MIN)
    for (int p = 0; p < pairs; p++) {
        const int b = p / NH, h = p % NH;
        const size_t o3 = (size_t)b * T * 3 * C + (size_t)h * hs;
        const float *q = qkv + o3;
        float *dq = dqkv + o3;
        attn_bwd_pair(q, q + C, q + 2 * C, att + (size_t)p * T * T, dout + (size_t)b * T * C + (size_t)h * hs, dq,
                      dq + C, dq + 2 * C, ws + (size_t)omp_get_thread_num() * tf, T, C, hs, scale, ctx->prec, &fail);
    }
    cpu_leave(ctx, prev);
    if (fail) return rs_kctx_fail(ctx, RS_ERR_NOMEM, "attn_bwd: out of memory for the %s operands", rs_prec_name(ctx->prec));
    return RS_OK;
}

/* One query against len cached keys, for one (b, h): an online softmax over chunks of keys keeps the
 * running maximum m, the running sum l and the unnormalised output in o, so no scratch beyond a
 * chunk of scores on the stack is needed whatever the cache length. The chunk's scores and its
 * weighted sum of values are two matrix-vector products (K and V rows have stride C). */
RS_SIMD static void attn_step_pair(const float *q, const float *kc, const float *vc, float *o, int len, int C,
                                        int hs, float scale)
{
    float sc[STEP_CHUNK], m = -INFINITY, l = 0.0f;
    memset(o, 0, (size_t)hs * sizeof *o); /* BLAS says beta 0 ignores y; some OpenBLAS releases scale it */
    for (int s0 = 0; s0 < len; s0 += STEP_CHUNK) {
        const int n = imin(STEP_CHUNK, len - s0);
        /* sc (n) = scale * K[s0:s0+n] (n, hs) . q */
        rs_cpu_blas_gemv(false, n, hs, scale, kc + (size_t)s0 * C, C, q, 0.0f, sc);
        const float cm = row_max(sc, n);
        float r = 0.0f; /* weight of what was summed under the old maximum (nothing before the first chunk) */
        if (cm > m) {
            if (s0 > 0) r = rs_vexpf(m - cm);
            m = cm;
        } else {
            r = 1.0f;
        }
        for (int j = 0; j < n; j++) sc[j] = rs_vexpf(sc[j] - m);
        l = l * r + row_sum(sc, n);
        /* o (hs) = r * o + V[s0:s0+n]^T (hs, n) . w */
        rs_cpu_blas_gemv(true, n, hs, 1.0f, vc + (size_t)s0 * C, C, sc, r, o);
    }
    const float inv = 1.0f / l;
    for (int i = 0; i < hs; i++) o[i] *= inv;
}

rs_status rs_cpu_attn_step(rs_kctx *ctx, const float *q, const float *kc, const float *vc, float *out, int B, int len,
                           int maxT, int C, int NH)
{
    CPU_CTX(ctx, "attn_step");
    RS_KTRY(check_step(ctx, "attn_step", B, len, maxT, C, NH));
    CPU_PTR(ctx, "attn_step", q, B);
    CPU_PTR(ctx, "attn_step", kc, B);
    CPU_PTR(ctx, "attn_step", vc, B);
    CPU_PTR(ctx, "attn_step", out, B);
    if (!B) return RS_OK;
    int prev = cpu_enter(ctx);
    const int hs = C / NH, pairs = B * NH;
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t work = (size_t)pairs * len * hs * 2;
    #pragma omp parallel for schedule(static) num_threads(team_for(ctx, pairs)) if (work >= PAR_MIN)
    for (int p = 0; p < pairs; p++) {
        const int b = p / NH, h = p % NH;
        const size_t kv = (size_t)b * maxT * C + (size_t)h * hs, qo = (size_t)b * C + (size_t)h * hs;
        attn_step_pair(q + qo, kc + kv, vc + kv, out + qo, len, C, hs, scale);
    }
    cpu_leave(ctx, prev);
    return RS_OK;
}
