/* Tests of engine/optim: SGD/Adam/AdamW against hand-computed steps and against an independent
 * double-precision reference written from torch.optim's documented algorithms; the slice property
 * ZeRO relies on; state accounting and restore; configuration checks; learning-rate schedules. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/optim/optim.h"
#include "engine/optim/sched.h"
#include "tests/rs_test.h"

/* ---------------------------------------------------------------------------------------------- */
/* Hand-computed steps: 3 parameters, a fixed gradient per step, lr 0.1.                          */

static const float P0[3] = {1.0f, -0.5f, 2.0f};
static const float G[3][3] = {{0.5f, -1.0f, 0.25f}, {0.25f, 0.5f, -1.0f}, {-0.5f, 0.25f, 0.5f}};

static rs_opt_cfg cfg_of(rs_opt_kind kind, float lr, float momentum, float dampening, float wd,
                         bool nesterov)
{
    rs_opt_cfg c = rs_opt_defaults(kind);
    c.lr = lr;
    c.momentum = momentum;
    c.dampening = dampening;
    c.weight_decay = wd;
    c.nesterov = nesterov;
    return c;
}

/* Runs 3 steps of cfg from P0 with gradients G and checks p after each step against want. */
static void check_hand(const char *name, rs_opt_cfg cfg, const double want[3][3])
{
    rs_err err = {0};
    rs_optim *o = rs_optim_new(&cfg, rs_device_cpu(), 3, NULL, &err);
    RS_CHECK(o != NULL, "%s: %s", name, err.msg);
    if (!o) return;
    float p[3];
    memcpy(p, P0, sizeof p);
    for (int t = 0; t < 3; t++) {
        RS_CHECK(rs_optim_step(o, p, G[t], cfg.lr) == RS_OK, "%s step %d", name, t + 1);
        for (int i = 0; i < 3; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s step %d p[%d]", name, t + 1, i);
            RS_CHECK_CLOSE(p[i], want[t][i], 0.0, 1e-6, what);
        }
    }
    RS_CHECK(rs_optim_step_count(o) == 3, "%s: step count %lld", name,
             (long long)rs_optim_step_count(o));
    rs_optim_free(o);
}

static void test_hand_computed(void)
{
    /* SGD, momentum 0.9. p[0]: g = 0.5, 0.25, -0.5
     *   step 1: buf = g = 0.5 (torch starts the buffer from the first gradient, undamped)
     *           p = 1 - 0.1*0.5 = 0.95
     *   step 2: buf = 0.9*0.5 + 0.25 = 0.7;  p = 0.95 - 0.1*0.7 = 0.88
     *   step 3: buf = 0.9*0.7 - 0.5 = 0.13;  p = 0.88 - 0.013 = 0.867 */
    static const double sgd_mom[3][3] = {
        {0.95, -0.4, 1.975}, {0.88, -0.36, 2.0525}, {0.867, -0.349, 2.07225}};
    check_hand("sgd momentum", cfg_of(RS_OPT_SGD, 0.1f, 0.9f, 0, 0, false), sgd_mom);

    /* SGD, momentum 0.9, dampening 0.5, weight decay 0.1. p[0]:
     *   step 1: g' = 0.5 + 0.1*1 = 0.6;  buf = 0.6 (no dampening on the first step);  p = 1 - 0.06 = 0.94
     *   step 2: g' = 0.25 + 0.1*0.94 = 0.344;  buf = 0.9*0.6 + 0.5*0.344 = 0.54 + 0.172 = 0.712
     *           p = 0.94 - 0.0712 = 0.8688 */
    static const double sgd_damp[3][3] = {{0.94, -0.395, 1.955},
                                          {0.8688, -0.323525, 1.954725},
                                          {0.825376, -0.270079875, 1.919703875}};
    check_hand("sgd dampening+wd", cfg_of(RS_OPT_SGD, 0.1f, 0.9f, 0.5f, 0.1f, false), sgd_damp);

    /* SGD, nesterov, momentum 0.9, weight decay 0.1. p[0]:
     *   step 1: g' = 0.6;  buf = 0.6;  d = 0.6 + 0.9*0.6 = 1.14;  p = 1 - 0.114 = 0.886
     *   step 2: g' = 0.25 + 0.0886 = 0.3386;  buf = 0.54 + 0.3386 = 0.8786
     *           d = 0.3386 + 0.9*0.8786 = 1.12934;  p = 0.886 - 0.112934 = 0.773066 */
    static const double sgd_nest[3][3] = {{0.886, -0.3005, 1.9145},
                                          {0.773066, -0.3047405, 2.0316745},
                                          {0.782211146, -0.3079713805, 1.9307602345}};
    check_hand("sgd nesterov+wd", cfg_of(RS_OPT_SGD, 0.1f, 0.9f, 0, 0.1f, true), sgd_nest);

    /* Adam, betas (0.9, 0.999), eps 1e-8. p[0]:
     *   step 1: m = 0.1*0.5 = 0.05;  v = 0.001*0.25 = 0.00025;  m^ = 0.05/0.1 = 0.5
     *           v^ = 0.00025/0.001 = 0.25;  p = 1 - 0.1*0.5/(0.5 + 1e-8) = 0.900000002
     *   step 2: m = 0.9*0.05 + 0.1*0.25 = 0.07;  v = 0.999*0.00025 + 0.001*0.0625 = 0.00031225
     *           m^ = 0.07/(1 - 0.81) = 0.368421053;  v^ = 0.00031225/(1 - 0.998001) = 0.156203102
     *           p = 0.900000002 - 0.1*0.368421053/(0.395225381 + 1e-8) = 0.900000002 - 0.093217962
     *             = 0.806782040 */
    static const double adam[3][3] = {{0.900000002, -0.400000001, 1.900000004},
                                      {0.806782040477, -0.373366297371, 1.95595035264},
                                      {0.795703733601, -0.367227411185, 1.96696771887}};
    check_hand("adam", cfg_of(RS_OPT_ADAM, 0.1f, 0, 0, 0, false), adam);

    /* Adam with L2 weight decay 0.1 (added to the gradient). p[0]:
     *   step 1: g' = 0.5 + 0.1*1 = 0.6;  m^ = 0.6, v^ = 0.36;  p = 1 - 0.1*0.6/(0.6 + 1e-8) = 0.9000000017
     *   step 2: g' = 0.25 + 0.1*0.9000000017 = 0.34;  m = 0.9*0.06 + 0.1*0.34 = 0.088
     *           v = 0.999*0.00036 + 0.001*0.1156 = 0.00047524;  m^ = 0.088/0.19 = 0.463157895
     *           v^ = 0.00047524/0.001999 = 0.237738869;  p = 0.9000000017 - 0.1*0.463157895/0.487584731
     *             = 0.9000000017 - 0.094990236 = 0.805009766 */
    static const double adam_l2[3][3] = {{0.900000001667, -0.400000000952, 1.90000000222},
                                         {0.805009765861, -0.368503480378, 1.93252846878},
                                         {0.775511505151, -0.356255849452, 1.91437359985}};
    check_hand("adam l2", cfg_of(RS_OPT_ADAM, 0.1f, 0, 0, 0.1f, false), adam_l2);

    /* AdamW, weight decay 0.1 (decoupled: p *= 1 - lr*wd before the Adam step). p[0]:
     *   step 1: p = 1*(1 - 0.01) = 0.99;  then as Adam: p = 0.99 - 0.099999998 = 0.890000002
     *   step 2: p = 0.890000002*0.99 = 0.881100002;  m, v as Adam;  p = 0.881100002 - 0.093217962
     *             = 0.787882040 */
    static const double adamw[3][3] = {{0.890000002, -0.395000001, 1.880000004},
                                       {0.787882040457, -0.364416297361, 1.9171503526},
                                       {0.768924913177, -0.354633248201, 1.9089962153}};
    check_hand("adamw", cfg_of(RS_OPT_ADAMW, 0.1f, 0, 0, 0.1f, false), adamw);
}

/* ---------------------------------------------------------------------------------------------- */
/* Independent reference in double, from the pseudo-code in torch.optim's documentation (SGD, Adam,
 * AdamW pages). Hyper-parameters are the float values the optimizer was given, widened. t >= 1.  */

static void ref_step(const rs_opt_cfg *c, double *th, const double *grad, double *s0, double *s1,
                     size_t n, double lr, int64_t t)
{
    const double wd = c->weight_decay, mu = c->momentum, tau = c->dampening;
    const double b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    for (size_t i = 0; i < n; i++) {
        double g = grad[i];
        if (c->kind == RS_OPT_SGD) {
            if (wd != 0) g = g + wd * th[i];
            if (mu != 0) {
                s0[i] = t > 1 ? mu * s0[i] + (1 - tau) * g : g;
                g = c->nesterov ? g + mu * s0[i] : s0[i];
            }
            th[i] = th[i] - lr * g;
            continue;
        }
        if (c->kind == RS_OPT_ADAMW) th[i] = th[i] - lr * wd * th[i];
        else if (wd != 0) g = g + wd * th[i];
        s0[i] = b1 * s0[i] + (1 - b1) * g;
        s1[i] = b2 * s1[i] + (1 - b2) * g * g;
        double mhat = s0[i] / (1 - pow(b1, (double)t));
        double vhat = s1[i] / (1 - pow(b2, (double)t));
        th[i] = th[i] - lr * mhat / (sqrt(vhat) + eps);
    }
}

/* Gradients that change sign and size every step and span `decades` decades across elements from
 * 1e-3 up: Adam gets six, so it runs both where eps matters and where it does not; SGD gets three,
 * so its parameters stay O(1) (its steps are not normalised). */
static float grad_at(size_t i, int t, int decades)
{
    double scale = pow(10.0, (double)(i % (size_t)decades) - 3.0);
    return (float)(scale * (sin(0.37 * (double)i + 1.3 * t) + 0.3 * cos(0.11 * (double)t * (double)i)));
}

static void test_reference(void)
{
    enum { N = 37, STEPS = 50 };
    struct {
        const char *name;
        rs_opt_cfg cfg;
    } cases[] = {
        {"sgd", cfg_of(RS_OPT_SGD, 0.05f, 0, 0, 0, false)},
        {"sgd wd", cfg_of(RS_OPT_SGD, 0.05f, 0, 0, 0.01f, false)},
        {"sgd momentum", cfg_of(RS_OPT_SGD, 0.05f, 0.9f, 0, 0, false)},
        {"sgd momentum+dampening+wd", cfg_of(RS_OPT_SGD, 0.05f, 0.8f, 0.3f, 0.02f, false)},
        {"sgd nesterov+wd", cfg_of(RS_OPT_SGD, 0.05f, 0.9f, 0, 0.01f, true)},
        {"adam", cfg_of(RS_OPT_ADAM, 0.01f, 0, 0, 0, false)},
        {"adam l2", cfg_of(RS_OPT_ADAM, 0.01f, 0, 0, 0.05f, false)},
        {"adamw", cfg_of(RS_OPT_ADAMW, 0.01f, 0, 0, 0.1f, false)},
        {"adamw beta1=0 eps=1e-3", cfg_of(RS_OPT_ADAMW, 0.01f, 0, 0, 0.1f, false)},
    };
    cases[8].cfg.beta1 = 0.0f;
    cases[8].cfg.eps = 1e-3f;
    /* lr changes every step, as it does under a schedule. */
    const rs_sched sched = {.kind = RS_SCHED_COSINE, .base_lr = 1, .warmup = 5, .total = STEPS,
                            .min_lr = 0.1f};

    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const rs_opt_cfg *c = &cases[k].cfg;
        rs_err err = {0};
        rs_optim *o = rs_optim_new(c, rs_device_cpu(), N, NULL, &err);
        RS_CHECK(o != NULL, "%s: %s", cases[k].name, err.msg);
        if (!o) continue;
        float p[N], g[N];
        double th[N], gd[N], s0[N] = {0}, s1[N] = {0};
        for (size_t i = 0; i < N; i++) th[i] = p[i] = (float)(1.5 * cos(0.9 * (double)i));
        double max_rel = 0;
        int bad = 0;
        for (int t = 1; t <= STEPS; t++) {
            float lr = c->lr * rs_sched_lr(&sched, t - 1);
            for (size_t i = 0; i < N; i++) gd[i] = g[i] = grad_at(i, t, c->kind == RS_OPT_SGD ? 4 : 7);
            rs_optim_step(o, p, g, lr);
            ref_step(c, th, gd, s0, s1, N, lr, t);
            for (size_t i = 0; i < N; i++) {
                double d = fabs(p[i] - th[i]), rel = d / fmax(fabs(th[i]), 1e-30);
                if (rel > max_rel) max_rel = rel;
                if (d > 1e-5 * fabs(th[i]) && bad++ < 4)
                    fprintf(stderr, "  %s step %d p[%zu]: got %.9g want %.9g\n", cases[k].name, t, i,
                            (double)p[i], th[i]);
            }
        }
        printf("reference %-26s max relative difference over %d steps: %.3g\n", cases[k].name, STEPS,
               max_rel);
        RS_CHECK(bad == 0, "%s: %d values differ from the double reference by more than 1e-5 "
                 "relative (max %.3g)", cases[k].name, bad, max_rel);
        rs_optim_free(o);
    }
}

/* With a constant gradient and eps 0, Adam's bias-corrected step is exactly lr * sign(g) at every
 * step: m^ = g and v^ = g^2 exactly. In float this holds to a few ulps only if the bias corrections
 * 1 - beta^t are formed in double, as torch does (Python floats); in float, 1 - 0.999f^t cancels
 * away about four digits for small t and the step is off by ~3e-6. */
static void test_adam_constant_gradient(void)
{
    rs_opt_cfg c = rs_opt_defaults(RS_OPT_ADAM);
    c.eps = 0.0f;
    rs_optim *o = rs_optim_new(&c, rs_device_cpu(), 2, NULL, NULL);
    RS_CHECK(o != NULL, "adam");
    if (!o) return;
    const float g[2] = {0.75f, -3.0f};
    double worst = 0;
    int64_t worst_t = 0;
    for (int t = 1; t <= 200; t++) {
        float p[2] = {0.0f, 0.0f}; /* 0: the subtraction itself is exact, only the step is measured */
        rs_optim_step(o, p, g, 1.0f);
        for (int i = 0; i < 2; i++) {
            double e = fabs(fabs((double)p[i]) - 1.0);
            if (e > worst) worst = e, worst_t = t;
        }
    }
    printf("adam constant gradient: worst |step - lr| / lr over 200 steps %.3g (step %lld)\n", worst,
           (long long)worst_t);
    RS_CHECK(worst <= 1e-6, "adam step with a constant gradient is off by %.3g relative at step %lld",
             worst, (long long)worst_t);
    rs_optim_free(o);
}

/* ---------------------------------------------------------------------------------------------- */
/* Slices: what ZeRO relies on. Sizes straddle the CPU kernels' parallel threshold and include a
 * one-element shard.                                                                              */

enum { SN = 100003 };
static const size_t CUTS[4] = {0, 33331, 33332, SN};

static void fill_grad(float *g, size_t n, int t)
{
    for (size_t i = 0; i < n; i++) g[i] = (float)sin(0.001 * (double)i * (t + 1) + t);
}

static bool same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static void test_slices(void)
{
    const rs_opt_cfg cfgs[] = {
        cfg_of(RS_OPT_SGD, 0.1f, 0, 0, 0.01f, false),
        cfg_of(RS_OPT_SGD, 0.1f, 0.9f, 0, 0.01f, true),
        cfg_of(RS_OPT_SGD, 0.1f, 0.9f, 0.2f, 0, false),
        cfg_of(RS_OPT_ADAM, 1e-2f, 0, 0, 0.01f, false),
        cfg_of(RS_OPT_ADAMW, 1e-2f, 0, 0, 0.1f, false),
    };
    static float whole[SN], sliced[SN], g[SN];
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        const char *name = rs_opt_kind_name(cfgs[k].kind);
        rs_mem mem = {0};
        rs_optim *one = rs_optim_new(&cfgs[k], rs_device_cpu(), SN, &mem, NULL);
        rs_optim *part[3];
        for (int s = 0; s < 3; s++)
            part[s] = rs_optim_new(&cfgs[k], rs_device_cpu(), CUTS[s + 1] - CUTS[s], &mem, NULL);
        RS_CHECK(one && part[0] && part[1] && part[2], "%s: rs_optim_new failed", name);
        if (!one || !part[0] || !part[1] || !part[2]) return;
        RS_CHECK(mem.live[RS_POOL_OPTIM] == 2 * (int64_t)rs_optim_state_bytes(one),
                 "%s: 3 shards hold %lld bytes, the whole %zu", name,
                 (long long)(mem.live[RS_POOL_OPTIM] - (int64_t)rs_optim_state_bytes(one)),
                 rs_optim_state_bytes(one));
        for (size_t i = 0; i < SN; i++) whole[i] = sliced[i] = (float)cos(0.01 * (double)i);
        for (int t = 0; t < 5; t++) {
            fill_grad(g, SN, t);
            float lr = cfgs[k].lr / (float)(t + 1);
            rs_optim_step(one, whole, g, lr);
            for (int s = 0; s < 3; s++) rs_optim_step(part[s], sliced + CUTS[s], g + CUTS[s], lr);
        }
        RS_CHECK(same_bits(whole, sliced, SN), "%s: sliced parameters differ from the whole", name);
        for (int j = 0; j < rs_optim_state_count(one); j++) {
            for (int s = 0; s < 3; s++)
                RS_CHECK(same_bits(rs_optim_state(one, j) + CUTS[s], rs_optim_state(part[s], j),
                                   CUTS[s + 1] - CUTS[s]),
                         "%s: %s of shard %d differs", name, rs_optim_state_name(one, j), s);
        }
        for (int s = 0; s < 3; s++) rs_optim_free(part[s]);
        rs_optim_free(one);
        RS_CHECK(mem.live[RS_POOL_OPTIM] == 0, "%s: %lld bytes left", name,
                 (long long)mem.live[RS_POOL_OPTIM]);
    }
}

/* Re-sharding: 3 steps on one optimizer, its state and step count copied into 3 shard optimizers,
 * 3 more steps there, must equal 6 steps on one optimizer bit for bit. Covers checkpoint restore
 * too, including SGD's "first step" which must not recur after a restore. */
static void test_restore_reshard(void)
{
    const rs_opt_cfg cfgs[] = {
        cfg_of(RS_OPT_SGD, 0.1f, 0.9f, 0.1f, 0.01f, false),
        cfg_of(RS_OPT_ADAM, 1e-2f, 0, 0, 0, false),
        cfg_of(RS_OPT_ADAMW, 1e-2f, 0, 0, 0.1f, false),
    };
    enum { N = 1000 };
    const size_t cuts[4] = {0, 400, 401, N};
    static float ref[N], p[N], g[N];
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        const char *name = rs_opt_kind_name(cfgs[k].kind);
        rs_optim *a = rs_optim_new(&cfgs[k], rs_device_cpu(), N, NULL, NULL);
        rs_optim *b = rs_optim_new(&cfgs[k], rs_device_cpu(), N, NULL, NULL);
        rs_optim *part[3];
        for (int s = 0; s < 3; s++)
            part[s] = rs_optim_new(&cfgs[k], rs_device_cpu(), cuts[s + 1] - cuts[s], NULL, NULL);
        for (size_t i = 0; i < N; i++) ref[i] = p[i] = (float)i / N - 0.5f;
        for (int t = 0; t < 6; t++) {
            fill_grad(g, N, t);
            rs_optim_step(a, ref, g, cfgs[k].lr);
            if (t < 3) {
                rs_optim_step(b, p, g, cfgs[k].lr);
                continue;
            }
            if (t == 3) {
                for (int s = 0; s < 3; s++) {
                    rs_optim_set_step_count(part[s], rs_optim_step_count(b));
                    for (int j = 0; j < rs_optim_state_count(b); j++)
                        memcpy(rs_optim_state(part[s], j), rs_optim_state(b, j) + cuts[s],
                               (cuts[s + 1] - cuts[s]) * sizeof(float));
                }
            }
            for (int s = 0; s < 3; s++) rs_optim_step(part[s], p + cuts[s], g + cuts[s], cfgs[k].lr);
        }
        RS_CHECK(same_bits(ref, p, N), "%s: restored and re-sharded run differs", name);
        RS_CHECK(rs_optim_step_count(part[0]) == 6, "%s: step count %lld after restore", name,
                 (long long)rs_optim_step_count(part[0]));
        rs_optim_free(a);
        rs_optim_free(b);
        for (int s = 0; s < 3; s++) rs_optim_free(part[s]);
    }
}

/* ---------------------------------------------------------------------------------------------- */

static void test_state_memory(void)
{
    enum { N = 1001 };
    struct {
        rs_opt_cfg cfg;
        int count;
        const char *names[2];
    } cases[] = {
        {cfg_of(RS_OPT_SGD, 0.1f, 0, 0, 0, false), 0, {NULL, NULL}},
        {cfg_of(RS_OPT_SGD, 0.1f, 0.9f, 0, 0, false), 1, {"momentum_buffer", NULL}},
        {rs_opt_defaults(RS_OPT_ADAM), 2, {"exp_avg", "exp_avg_sq"}},
        {rs_opt_defaults(RS_OPT_ADAMW), 2, {"exp_avg", "exp_avg_sq"}},
    };
    static float p[N], g[N];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *name = rs_opt_kind_name(cases[k].cfg.kind);
        rs_mem mem = {0};
        rs_err err = {0};
        rs_optim *o = rs_optim_new(&cases[k].cfg, rs_device_cpu(), N, &mem, &err);
        RS_CHECK(o != NULL, "%s: %s", name, err.msg);
        if (!o) continue;
        const int64_t want = (int64_t)N * 4 * cases[k].count;
        RS_CHECK(rs_optim_state_count(o) == cases[k].count, "%s: %d state buffers, want %d", name,
                 rs_optim_state_count(o), cases[k].count);
        RS_CHECK(mem.live[RS_POOL_OPTIM] == want, "%s: tracker says %lld bytes, want n*4*%d = %lld",
                 name, (long long)mem.live[RS_POOL_OPTIM], cases[k].count, (long long)want);
        RS_CHECK((int64_t)rs_optim_state_bytes(o) == want, "%s: state_bytes %zu, want %lld", name,
                 rs_optim_state_bytes(o), (long long)want);
        RS_CHECK(rs_optim_numel(o) == N, "%s: numel %zu", name, rs_optim_numel(o));
        RS_CHECK(rs_optim_cfg(o)->kind == cases[k].cfg.kind, "%s: cfg not kept", name);
        for (int j = 0; j < cases[k].count; j++) {
            RS_CHECK(strcmp(rs_optim_state_name(o, j), cases[k].names[j]) == 0, "%s: state %d is %s",
                     name, j, rs_optim_state_name(o, j));
            float z = 0;
            for (size_t i = 0; i < N; i++) z += fabsf(rs_optim_state(o, j)[i]);
            RS_CHECK(z == 0.0f, "%s: %s not zeroed", name, cases[k].names[j]);
        }
        RS_CHECK(rs_optim_state(o, cases[k].count) == NULL && rs_optim_state(o, -1) == NULL &&
                     rs_optim_state_name(o, cases[k].count) == NULL,
                 "%s: out-of-range state index must give NULL", name);
        /* A step does not allocate (at least not through the tracker). */
        for (int t = 0; t < 3; t++) rs_optim_step(o, p, g, 0.01f);
        RS_CHECK(mem.live[RS_POOL_OPTIM] == want && mem.peak[RS_POOL_OPTIM] == want,
                 "%s: stepping changed the optimizer pool (live %lld, peak %lld)", name,
                 (long long)mem.live[RS_POOL_OPTIM], (long long)mem.peak[RS_POOL_OPTIM]);
        rs_optim_free(o);
        RS_CHECK(mem.live[RS_POOL_OPTIM] == 0 && mem.live_total == 0,
                 "%s: %lld bytes still live after free", name, (long long)mem.live[RS_POOL_OPTIM]);
    }
    rs_optim_free(NULL);

    /* An empty shard is legal and steps as a no-op. */
    rs_mem mem = {0};
    rs_opt_cfg adam = rs_opt_defaults(RS_OPT_ADAM);
    rs_optim *o = rs_optim_new(&adam, rs_device_cpu(), 0, &mem, NULL);
    RS_CHECK(o && rs_optim_state_bytes(o) == 0 && mem.live[RS_POOL_OPTIM] == 0, "empty shard");
    RS_CHECK(o && rs_optim_step(o, NULL, NULL, 0.1f) == RS_OK, "empty shard step");
    rs_optim_free(o);

    /* A bad lr is refused and leaves everything as it was. */
    rs_optim *s = rs_optim_new(&adam, rs_device_cpu(), 3, NULL, NULL);
    float q[3] = {1, 2, 3};
    const float gq[3] = {1, 1, 1};
    RS_CHECK(rs_optim_step(s, q, gq, -0.1f) == RS_ERR_ARG, "negative lr accepted");
    RS_CHECK(rs_optim_step(s, q, gq, NAN) == RS_ERR_ARG, "NaN lr accepted");
    RS_CHECK(rs_optim_step(s, NULL, gq, 0.1f) == RS_ERR_ARG, "NULL params accepted");
    RS_CHECK(q[0] == 1 && rs_optim_step_count(s) == 0, "a refused step changed the optimizer");
    rs_optim_set_step_count(s, -4);
    RS_CHECK(rs_optim_step_count(s) == 0, "negative step count kept");
    rs_optim_free(s);
}

/* ---------------------------------------------------------------------------------------------- */

static void expect_reject(const char *what, const rs_opt_cfg *c, const char *s1, const char *s2)
{
    rs_err err = {0};
    rs_mem mem = {0};
    RS_CHECK(rs_opt_cfg_check(c, &err) == RS_ERR_ARG, "%s: accepted", what);
    RS_CHECK(strstr(err.msg, s1) && strstr(err.msg, s2), "%s: message '%s' lacks '%s' or '%s'", what,
             err.msg, s1, s2);
    rs_err err2 = {0};
    rs_optim *o = rs_optim_new(c, rs_device_cpu(), 10, &mem, &err2);
    RS_CHECK(o == NULL && err2.code == RS_ERR_ARG && mem.live_total == 0,
             "%s: rs_optim_new did not refuse cleanly", what);
    rs_optim_free(o);
}

static void test_config(void)
{
    rs_opt_cfg s = rs_opt_defaults(RS_OPT_SGD), a = rs_opt_defaults(RS_OPT_ADAM),
               w = rs_opt_defaults(RS_OPT_ADAMW);
    RS_CHECK(s.lr == 0.01f && s.momentum == 0 && s.dampening == 0 && s.weight_decay == 0 &&
                 !s.nesterov, "sgd defaults");
    RS_CHECK(a.lr == 1e-3f && a.beta1 == 0.9f && a.beta2 == 0.999f && a.eps == 1e-8f &&
                 a.weight_decay == 0, "adam defaults");
    RS_CHECK(w.lr == 1e-3f && w.beta1 == 0.9f && w.beta2 == 0.999f && w.eps == 1e-8f &&
                 w.weight_decay == 1e-2f, "adamw defaults");
    rs_err err = {0};
    RS_CHECK(rs_opt_cfg_check(&s, &err) == RS_OK && rs_opt_cfg_check(&a, &err) == RS_OK &&
                 rs_opt_cfg_check(&w, &err) == RS_OK, "defaults rejected: %s", err.msg);

    rs_opt_kind k = RS_OPT_SGD;
    RS_CHECK(rs_opt_kind_parse("adamw", &k, &err) == RS_OK && k == RS_OPT_ADAMW, "parse adamw");
    RS_CHECK(rs_opt_kind_parse("Adam", &k, &err) == RS_OK && k == RS_OPT_ADAM, "parse Adam");
    RS_CHECK(rs_opt_kind_parse("adagrad", &k, &err) == RS_ERR_ARG &&
                 strstr(err.msg, "'adagrad'") && strstr(err.msg, "sgd, adam, adamw"),
             "parse adagrad: '%s'", err.msg);
    RS_CHECK(rs_opt_kind_parse(NULL, &k, &err) == RS_ERR_ARG, "parse NULL");
    for (int i = 0; i < RS_OPT_KIND_COUNT; i++)
        RS_CHECK(rs_opt_kind_parse(rs_opt_kind_name((rs_opt_kind)i), &k, NULL) == RS_OK &&
                     k == (rs_opt_kind)i, "name/parse round trip %d", i);

    rs_opt_cfg c;
    c = s, c.lr = -0.1f;
    expect_reject("sgd lr<0", &c, "lr=-0.1", ">= 0");
    c = a, c.lr = NAN;
    expect_reject("adam lr=nan", &c, "lr=nan", ">= 0");
    c = s, c.momentum = -0.5f;
    expect_reject("sgd momentum<0", &c, "momentum=-0.5", ">= 0");
    c = s, c.weight_decay = -1e-4f;
    expect_reject("sgd wd<0", &c, "weight_decay=-0.0001", ">= 0");
    c = w, c.weight_decay = -0.01f;
    expect_reject("adamw wd<0", &c, "weight_decay=-0.01", ">= 0");
    c = s, c.nesterov = true;
    expect_reject("nesterov without momentum", &c, "nesterov", "momentum > 0");
    c = s, c.nesterov = true, c.momentum = 0.9f, c.dampening = 0.1f;
    expect_reject("nesterov with dampening", &c, "dampening=0.1", "dampening = 0");
    c = a, c.beta1 = 1.0f;
    expect_reject("beta1=1", &c, "beta1=1", "0 <= beta1 < 1");
    c = a, c.beta2 = -0.1f;
    expect_reject("beta2<0", &c, "beta2=-0.1", "0 <= beta2 < 1");
    c = w, c.eps = -1e-8f;
    expect_reject("eps<0", &c, "eps=-1e-08", ">= 0");
    c = a, c.kind = (rs_opt_kind)7;
    expect_reject("bad kind", &c, "7", "sgd, adam, adamw");

    /* Fields of the other family are ignored, and the edges torch allows are allowed. */
    c = a, c.momentum = -3.0f, c.nesterov = true;
    RS_CHECK(rs_opt_cfg_check(&c, &err) == RS_OK, "adam should ignore SGD fields: %s", err.msg);
    c = s, c.nesterov = true, c.momentum = 0.9f, c.lr = 0.0f;
    RS_CHECK(rs_opt_cfg_check(&c, &err) == RS_OK, "nesterov sgd lr=0: %s", err.msg);
    c = a, c.beta1 = 0.0f, c.eps = 0.0f;
    RS_CHECK(rs_opt_cfg_check(&c, &err) == RS_OK, "beta1=0 eps=0: %s", err.msg);

    /* A device with no kernels is refused, not crashed on. */
    rs_optim *o = rs_optim_new(&a, (rs_device){RS_DEV_CUDA, 0}, 4, NULL, &err);
    RS_CHECK(o == NULL && err.code == RS_ERR_UNSUPPORTED && strstr(err.msg, "cuda"),
             "cuda optimizer: '%s'", err.msg);
    rs_optim_free(o);
}

/* ---------------------------------------------------------------------------------------------- */

static void check_lr(const rs_sched *s, int64_t step, double want)
{
    char what[64];
    snprintf(what, sizeof what, "%s lr(%lld)", rs_sched_kind_name(s->kind), (long long)step);
    RS_CHECK_CLOSE(rs_sched_lr(s, step), want, 1e-9, 1e-6, what);
}

static void test_schedules(void)
{
    rs_err err = {0};
    const rs_sched c0 = {.kind = RS_SCHED_CONSTANT, .base_lr = 0.1f};
    check_lr(&c0, 0, 0.1);
    check_lr(&c0, 1000000, 0.1);
    check_lr(&c0, -3, 0.1);
    /* warmup 4: (step+1)/4 of base: 0.025, 0.05, 0.075, then 0.1 from step 3 on */
    const rs_sched cw = {.kind = RS_SCHED_CONSTANT, .base_lr = 0.1f, .warmup = 4};
    check_lr(&cw, 0, 0.025);
    check_lr(&cw, 1, 0.05);
    check_lr(&cw, 2, 0.075);
    check_lr(&cw, 3, 0.1);
    check_lr(&cw, 4, 0.1);

    /* step decay after warmup 2, step_size 3, gamma 0.5, counted from the end of warmup:
     *   0: 0.05, 1: 0.1 (warmup);  2,3,4: 0.1;  5,6,7: 0.05;  8: 0.025;  2+3*10=32: 0.1*0.5^10 */
    const rs_sched st = {.kind = RS_SCHED_STEP, .base_lr = 0.1f, .warmup = 2, .step_size = 3,
                         .gamma = 0.5f};
    RS_CHECK(rs_sched_check(&st, &err) == RS_OK, "step: %s", err.msg);
    const double st_want[9] = {0.05, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025};
    for (int i = 0; i < 9; i++) check_lr(&st, i, st_want[i]);
    check_lr(&st, 32, 0.1 / 1024);
    const rs_sched st0 = {.kind = RS_SCHED_STEP, .base_lr = 1.0f, .step_size = 10, .gamma = 0.1f};
    check_lr(&st0, 9, 1.0);
    check_lr(&st0, 10, 0.1);
    check_lr(&st0, 25, 0.01);

    /* cosine base 0.1, min 0.01, warmup 2, total 12 (a 10-step half period):
     *   0: 0.05, 1: 0.1 (warmup);  2: cos 0 -> 0.1;  4: 0.01 + 0.045*(1 + cos(0.2 pi)) = 0.01 +
     *   0.045*1.809017 = 0.0914058;  7: cos(pi/2) = 0 -> 0.055;  11: 0.01 + 0.045*(1 + cos(0.9 pi))
     *   = 0.01 + 0.045*(1 - 0.951057) = 0.0122025;  12 and after: 0.01 */
    const rs_sched co = {.kind = RS_SCHED_COSINE, .base_lr = 0.1f, .warmup = 2, .total = 12,
                         .min_lr = 0.01f};
    RS_CHECK(rs_sched_check(&co, &err) == RS_OK, "cosine: %s", err.msg);
    check_lr(&co, 0, 0.05);
    check_lr(&co, 1, 0.1);
    check_lr(&co, 2, 0.1);
    check_lr(&co, 4, 0.0914057647);
    check_lr(&co, 7, 0.055);
    check_lr(&co, 11, 0.0122024568);
    RS_CHECK(rs_sched_lr(&co, 12) == 0.01f && rs_sched_lr(&co, 13) == 0.01f &&
                 rs_sched_lr(&co, 1000000) == 0.01f, "cosine must end exactly at min_lr");
    const rs_sched co0 = {.kind = RS_SCHED_COSINE, .base_lr = 1.0f, .total = 100};
    RS_CHECK(rs_sched_lr(&co0, 0) == 1.0f && rs_sched_lr(&co0, 100) == 0.0f, "cosine to 0");

    /* Never negative, cosine never rises after warmup and never dips under min_lr. */
    const rs_sched all[] = {c0, cw, st, st0, co, co0,
                            {.kind = RS_SCHED_COSINE, .base_lr = 3e-4f, .warmup = 7, .total = 8}};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        RS_CHECK(rs_sched_check(&all[k], &err) == RS_OK, "schedule %zu: %s", k, err.msg);
        float prev = INFINITY;
        for (int64_t i = -5; i < 300; i++) {
            float lr = rs_sched_lr(&all[k], i);
            RS_CHECK(lr >= 0.0f && isfinite(lr), "schedule %zu lr(%lld) = %g", k, (long long)i,
                     (double)lr);
            if (all[k].kind == RS_SCHED_COSINE && i >= all[k].warmup) {
                RS_CHECK(lr <= prev && lr >= all[k].min_lr, "cosine %zu lr(%lld) = %.9g after %.9g",
                         k, (long long)i, (double)lr, (double)prev);
                prev = lr;
            }
        }
    }

    rs_sched_kind sk = RS_SCHED_CONSTANT;
    RS_CHECK(rs_sched_kind_parse("cosine", &sk, &err) == RS_OK && sk == RS_SCHED_COSINE, "parse");
    RS_CHECK(rs_sched_kind_parse("linear", &sk, &err) == RS_ERR_ARG && strstr(err.msg, "'linear'") &&
                 strstr(err.msg, "constant, step, cosine"), "parse linear: '%s'", err.msg);

    struct {
        rs_sched s;
        const char *s1, *s2;
    } bad[] = {
        {{.kind = RS_SCHED_CONSTANT, .base_lr = -1}, "lr=-1", ">= 0"},
        {{.kind = RS_SCHED_CONSTANT, .base_lr = 1, .warmup = -2}, "warmup=-2", ">= 0"},
        {{.kind = RS_SCHED_STEP, .base_lr = 1, .gamma = 0.5f}, "step_size=0", ">= 1"},
        {{.kind = RS_SCHED_STEP, .base_lr = 1, .step_size = 5, .gamma = 0}, "gamma=0", "0 < gamma <= 1"},
        {{.kind = RS_SCHED_STEP, .base_lr = 1, .step_size = 5, .gamma = 1.5f}, "gamma=1.5", "<= 1"},
        {{.kind = RS_SCHED_COSINE, .base_lr = 1, .warmup = 10, .total = 10}, "total=10", "> warmup=10"},
        {{.kind = RS_SCHED_COSINE, .base_lr = 1, .total = 10, .min_lr = 2}, "min_lr=2", "<= lr=1"},
        {{.kind = RS_SCHED_COSINE, .base_lr = 1, .total = 10, .min_lr = -0.1f}, "min_lr=-0.1", "0 <="},
        {{.kind = (rs_sched_kind)9, .base_lr = 1}, "9", "constant, step, cosine"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        rs_err e = {0};
        RS_CHECK(rs_sched_check(&bad[k].s, &e) == RS_ERR_ARG, "bad schedule %zu accepted", k);
        RS_CHECK(strstr(e.msg, bad[k].s1) && strstr(e.msg, bad[k].s2),
                 "bad schedule %zu: message '%s' lacks '%s' or '%s'", k, e.msg, bad[k].s1, bad[k].s2);
    }
}

int main(void)
{
    test_hand_computed();
    test_reference();
    test_adam_constant_gradient();
    test_slices();
    test_restore_reshard();
    test_state_memory();
    test_config();
    test_schedules();
    return rs_test_finish("optim");
}
