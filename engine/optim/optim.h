/* Optimizers (SGD, Adam, AdamW) over a slice [offset, offset+n) of a model's flat parameter and
 * gradient buffers. Working on a slice rather than on tensors is what lets ZeRO give each rank only its
 * shard: n optimizers over n slices step bit-for-bit like one optimizer over the whole buffer. */
#ifndef RS_OPTIM_H
#define RS_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/device.h"
#include "engine/core/mem.h"
#include "engine/core/status.h"

typedef enum rs_opt_kind { RS_OPT_SGD, RS_OPT_ADAM, RS_OPT_ADAMW, RS_OPT_KIND_COUNT } rs_opt_kind;

/* Hyper-parameters, named and defaulted as in torch.optim. Fields that do not apply to `kind` are
 * ignored (momentum, dampening, nesterov are SGD's; beta1, beta2, eps are Adam's); the front end is
 * the one that knows which options the user actually wrote and can say they do not apply. */
typedef struct rs_opt_cfg {
    rs_opt_kind kind;
    float lr;           /* base rate a schedule starts from; each step is given its own lr */
    float momentum;     /* SGD */
    float dampening;    /* SGD */
    float weight_decay; /* SGD, Adam: L2 added to the gradient; AdamW: decoupled p *= 1 - lr*wd */
    float beta1, beta2; /* Adam/AdamW */
    float eps;          /* Adam/AdamW */
    bool nesterov;      /* SGD */
    bool groups;        /* nanoGPT's parameter groups: weight decay on matrix weights only, none on
                           biases, norms and embeddings (the optimizer's owner sets the ranges with
                           rs_optim_set_decay_ranges) */
} rs_opt_cfg;

/* torch.optim's defaults; SGD gets lr 0.01 because torch has none to copy. */
rs_opt_cfg rs_opt_defaults(rs_opt_kind kind);
/* "sgd", "adam", "adamw" (case-insensitive). */
rs_status rs_opt_kind_parse(const char *s, rs_opt_kind *out, rs_err *err);
const char *rs_opt_kind_name(rs_opt_kind kind);
/* The kinds' names, indexed by rs_opt_kind and NULL-terminated: the one list the parser above and the
 * prompt's opt= (offered, completed, parsed by index) read, so a new kind needs no edit in repl/. */
extern const char *const rs_opt_kind_names[RS_OPT_KIND_COUNT + 1];
/* Rejects what torch.optim rejects (and non-finite values), naming the value and the valid range. */
rs_status rs_opt_cfg_check(const rs_opt_cfg *c, rs_err *err);

typedef struct rs_optim rs_optim;

/* An optimizer for n elements on device dev, its state zeroed and counted in RS_POOL_OPTIM of mem
 * (mem may be NULL: uncounted). SGD keeps a momentum buffer only when momentum != 0; Adam and AdamW
 * keep exp_avg and exp_avg_sq. The caller owns the result (rs_optim_free). n == 0 is allowed: a ZeRO
 * rank may own an empty shard. */
rs_optim *rs_optim_new(const rs_opt_cfg *cfg, rs_device dev, size_t n, rs_mem *mem, rs_err *err);
void rs_optim_free(rs_optim *o);

/* Weight decay applies only inside ranges[0..n) (pairs {begin, end} of the model's buffer, sorted);
 * base is the model offset of this optimizer's element 0, so a ZeRO shard keeps the ranges that fall
 * inside it. Without a call every element decays, as in a single torch param group. Elementwise
 * updates make the split exact: an element steps as it would in its torch group. */
rs_status rs_optim_set_decay_ranges(rs_optim *o, size_t base, const size_t (*ranges)[2], int n, rs_err *err);

/* The kernel context updates run on: the optimizer's own (the device's default threads) until a
 * caller gives it another, ctx (borrowed; it must outlive the optimizer or be taken back with NULL).
 * The training loop gives it the model's, so one thread count, tuned or set, covers the whole step.
 * RS_ERR_ARG when ctx is on another device's table. */
rs_status rs_optim_set_ctx(rs_optim *o, rs_kctx *ctx);
rs_kctx *rs_optim_ctx(rs_optim *o);

/* One update of p(n) from g(n), both pointing at the start of this optimizer's slice, with learning
 * rate lr (from a schedule). Increments the step count; never allocates. RS_ERR_ARG for a negative
 * or non-finite lr, or NULL buffers with n > 0; p is untouched then. A kernel failure, or one still
 * pending on the context (a backward's), is returned with its message left in the context
 * (rs_kctx_check(rs_optim_ctx(o), err)); p is untouched when it was pending. */
rs_status rs_optim_step(rs_optim *o, float *p, const float *g, float lr);

/* State, for checkpoints and re-sharding. Entry i (0 <= i < count) is n floats named as torch names
 * it ("momentum_buffer", "exp_avg", "exp_avg_sq"); an index out of range gives NULL. Writing the
 * entries and the step count restores an optimizer exactly (SGD's first step, which copies the
 * gradient into the momentum buffer, is the step taken at count 0). */
int rs_optim_state_count(const rs_optim *o);
const char *rs_optim_state_name(const rs_optim *o, int i);
float *rs_optim_state(rs_optim *o, int i);
int64_t rs_optim_step_count(const rs_optim *o);
/* Negative counts are taken as 0. */
void rs_optim_set_step_count(rs_optim *o, int64_t steps);
/* Bytes of state this optimizer holds: count * n * sizeof(float). */
size_t rs_optim_state_bytes(const rs_optim *o);
const rs_opt_cfg *rs_optim_cfg(const rs_optim *o);
size_t rs_optim_numel(const rs_optim *o);

#endif
