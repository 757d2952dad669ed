/* The single-process training loop: epochs over a loader, optimizer and schedule on the model's flat
 * buffers, evaluation on the test split, checkpoints and exact resume.
 * It prints nothing: figures go to an observer callback (the REPL's progress bar, the rank event
 * stream, the session log subscribe to it) and a stop callback is polled between steps (Ctrl-C). */
#ifndef RS_TRAIN_H
#define RS_TRAIN_H

#include "engine/data/dataset.h"
#include "engine/nn/model.h"
#include "engine/optim/optim.h"
#include "engine/optim/sched.h"
#include "engine/train/scaler.h"

typedef struct rs_train_strategy rs_train_strategy;

typedef struct rs_train_cfg {
    int epochs;             /* default 1 */
    int batch;              /* default 64 */
    rs_opt_cfg opt;         /* default Adam, lr 1e-3 */
    rs_sched sched;         /* base_lr is set from opt.lr; cosine total 0 = the whole run */
    uint64_t seed;          /* data order (the model's seed drives init and dropout masks) */
    int threads;            /* 0 = leave the current setting */
    int64_t max_steps;      /* stop after this many steps in all (0 = run every epoch) */
    bool eval;              /* evaluate on the test split after each epoch, and at the end of a run
                               that stops inside one (steps=); off also turns eval_every off */
    int eval_batch;         /* 0 = the training batch (activation memory stays the same) */
    const char *ckpt_path;  /* checkpoint here (weights; optimizer state beside it) ... */
    int64_t ckpt_every;     /* ... every N steps, and at the end; 0 = only at the end */
    const char *resume;     /* continue exactly from this checkpoint */
    int accum;              /* micro-batches of `batch` per optimizer step (gradient accumulation, the
                               loss of each scaled by 1/accum); 0 or 1 = none */
    const rs_train_strategy *strategy; /* NULL: one process, one optimizer over the whole buffer;
                                          rs_train calls its teardown once, however it ends */
    int64_t eval_every;     /* > 0: evaluate every N steps (and after the last) instead of after each
                               epoch, on eval_samples samples of the test split spread over it */
    int64_t eval_samples;   /* 0 = all */
    float clip;             /* > 0: scale the gradient to this global L2 norm when it is larger
                               (torch.nn.utils.clip_grad_norm_), after it is combined across ranks */
    /* Mixed precision (torch.autocast + GradScaler; docs/engine.md "Mixed precision"): the compute type
     * of the products (gemm, convolution, attention) during the run; parameters, gradients and the
     * optimizer stay fp32. FP16 runs with a dynamic loss scaler (engine/train/scaler.h). */
    rs_prec precision;
    float loss_scale;       /* fp16: the scaler's first scale (0 = 65536) */
    int scale_window;       /* fp16: finite steps before the scale doubles (0 = 2000) */
    bool drop_last;         /* leave out the epoch's tail that does not fill a global batch (torch's
                               DistributedSampler and DataLoader drop_last): with W ranks nothing is
                               padded, and every mode trains exactly the steps one process does */
    int64_t inject_inf;     /* > 0, fp16: step number inject_inf (1-based) runs its backward with an
                               infinite loss scale, as an overflow would (tests and the tutorial) */
    const int64_t *tune_flips; /* tests: the thread tuner switches counts after these steps (1-based,
                               ascending, ended by 0) instead of timing them (engine/train/tune.h) */
} rs_train_cfg;

/* The phases of a step, for timelines (rs_train_hooks.on_phase). */
typedef enum rs_phase {
    RS_PHASE_DATA, RS_PHASE_FORWARD, RS_PHASE_BACKWARD, RS_PHASE_COMM, RS_PHASE_OPTIM, RS_PHASE_IDLE,
    RS_PHASE_COUNT
} rs_phase;
const char *rs_phase_name(rs_phase p);

/* How the loop combines gradients and updates parameters when training is split: DataParallel's
 * replicas (engine/train/dp.c), DDP and ZeRO across ranks (dist/train). The loop keeps everything
 * else — data order, micro-batches, schedule, events, evaluation — so every mode is the same loop.
 * Every entry but step may be NULL. */
struct rs_train_strategy {
    const char *name;
    void *ud;
    int rank, world;      /* the sampler's split: this rank reads batch/world samples of each global
                             batch (batch must divide by world) */
    bool report;          /* this rank evaluates and writes checkpoints (rank 0) */
    /* Once, before the first step: the optimizer state this rank keeps, parameters made equal. */
    rs_status (*setup)(void *ud, rs_model *m, const rs_opt_cfg *opt, rs_err *err);
    /* Forward, loss and backward of one micro-batch in the strategy's own way (replicas); NULL: the
     * loop's own. loss: the micro-batch's mean; *logits: B rows for accuracy. */
    rs_status (*forward_backward)(void *ud, const float *x, const int32_t *y, int B, float loss_scale, float *loss,
                                  const float **logits, rs_err *err);
    /* forward_backward keeps its own activation sets (a pipeline stage holds one per micro-batch in
     * flight): the loop reserves none of the model's, so the ACTS pool counts only the strategy's. */
    bool own_acts;
    /* forward_backward reports each micro-batch's compute itself (a pipeline's forwards and backwards
     * per stage, with the idle time between them): the loop reports no phase spanning the call. */
    bool own_phases;
    /* Around the backward of each micro-batch; last: the one whose gradients complete the step. */
    rs_status (*before_backward)(void *ud, bool last, rs_err *err);
    rs_status (*after_backward)(void *ud, rs_err *err); /* after the last micro-batch: combine */
    rs_status (*step)(void *ud, float lr, rs_err *err);   /* the update */
    /* The whole parameters in the model, before evaluation, a checkpoint or the end. */
    rs_status (*gather)(void *ud, rs_err *err);
    /* The whole optimizer for checkpoints (NULL: this strategy checkpoints weights only). Called once,
     * only when the run checkpoints or resumes. */
    rs_optim *(*optimizer)(void *ud);
    /* Strategies that shard the optimizer: to_full gathers every rank's state into optimizer()'s before
     * a checkpoint (every rank calls it); !to_full takes this rank's shard back out of it after a
     * resume loaded it, which is how a checkpoint re-shards for another world size. */
    rs_status (*sync_optimizer)(void *ud, bool to_full, rs_err *err);
    void (*teardown)(void *ud);
    /* For clip=: the global sum of squares of the gradient step() will apply, and scaling it. NULL:
     * the model's gradient buffer holds the whole combined gradient after after_backward. */
    rs_status (*grad_sumsq)(void *ud, double *sumsq, rs_err *err);
    void (*grad_scale)(void *ud, float s);
};

rs_train_cfg rs_train_defaults(void);

typedef enum rs_train_ev_kind {
    RS_TRAIN_EV_BEGIN,  /* before the first step */
    RS_TRAIN_EV_STEP,   /* after every optimizer step */
    RS_TRAIN_EV_EPOCH,  /* after the last step of an epoch, and after the last step of a run that
                           ends inside an epoch (steps=): batch < batches then */
    RS_TRAIN_EV_EVAL,   /* test figures of the epoch */
    RS_TRAIN_EV_CKPT,   /* a checkpoint was written to path */
    RS_TRAIN_EV_END,
} rs_train_ev_kind;

typedef struct rs_train_event {
    rs_train_ev_kind kind;
    int epoch, epochs;          /* epoch is 0-based */
    int64_t step;               /* optimizer steps completed in the whole run */
    int64_t steps_total;        /* planned */
    int64_t batch, batches;     /* within the epoch: done, per epoch */
    int64_t samples, epoch_samples; /* within the epoch: done, per epoch */
    float loss;                 /* this step's mean loss */
    float lr;                   /* rate used by this step */
    double epoch_loss;          /* mean over the epoch so far */
    double epoch_acc;           /* training accuracy over the epoch so far */
    double samples_per_s;       /* over the epoch so far */
    double elapsed_s, eta_s;    /* within the epoch */
    double test_acc, test_loss; /* EVAL */
    double train_eval_loss;     /* EVAL under eval_every: the training split's loss now, on as many
                                   samples as the test figures (nanoGPT's estimate_loss); -1 otherwise */
    double t_data, t_fwd, t_bwd, t_opt; /* seconds in each phase within the epoch */
    double grad_norm;           /* STEP with clip=: the norm before clipping */
    int64_t skipped;            /* fp16: steps skipped for inf/NaN gradients in the whole run */
    float loss_scale;           /* fp16: the scaler's scale after this step (1 otherwise) */
    rs_prec prec;               /* the run's precision */
    int rows;                   /* labels per sample: 1, or the positions of a token model (tokens/s =
                                   samples_per_s * rows) */
    const char *path;           /* CKPT */
} rs_train_event;

typedef struct rs_train_hooks {
    void (*on_event)(void *ud, const rs_train_event *ev); /* may be NULL */
    /* A phase of step `step` ran from t0 to t1 (rs_train_now seconds); may be NULL. */
    void (*on_phase)(void *ud, int64_t step, rs_phase p, double t0, double t1);
    bool (*should_stop)(void *ud);                        /* may be NULL; polled between steps */
    void *ud;
} rs_train_hooks;

typedef struct rs_train_result {
    int64_t steps;            /* steps of this call (not counting those before a resume) */
    int64_t global_step;      /* steps in all */
    int epochs_done;
    bool stopped;             /* should_stop asked to stop; the model holds the last finished step */
    double train_loss;        /* mean loss of the last epoch (so far) */
    double test_acc, test_loss; /* last evaluation; -1 when none ran */
    double train_eval_loss;   /* the last eval_every evaluation's training loss (nanoGPT's estimate_loss); -1 */
    double seconds, samples_per_s;
    double t_data, t_fwd, t_bwd, t_opt;
    int64_t skipped;          /* fp16: steps skipped for inf/NaN gradients (counted in steps) */
    float loss_scale;         /* fp16: the scaler's last scale (1 otherwise) */
} rs_train_result;

rs_status rs_train(rs_model *m, const rs_data_pair *data, const rs_train_cfg *cfg, const rs_train_hooks *hooks,
                   rs_train_result *res, rs_err *err);

/* What a long evaluation tells its caller and asks it, between batches: both may be NULL. */
typedef struct rs_eval_hooks {
    void (*progress)(void *ud, uint32_t done, uint32_t total, double elapsed_s); /* after each batch */
    bool (*should_stop)(void *ud); /* true: stop, rs_evaluate_hooked returns RS_ERR_CANCELLED */
    void *ud;
} rs_eval_hooks;

/* rs_evaluate_n with hooks (h may be NULL): Ctrl-C and a progress bar for `eval`. */
rs_status rs_evaluate_hooked(rs_model *m, const rs_dataset *d, int batch, uint32_t max_samples, const rs_eval_hooks *h,
                             double *acc, double *loss, rs_err *err);

/* The same on max_samples samples spread evenly over d (0 or >= n: all of them). */
rs_status rs_evaluate_n(rs_model *m, const rs_dataset *d, int batch, uint32_t max_samples, double *acc,
                        double *loss, rs_err *err);
/* Accuracy and mean loss of the model on d, in eval mode (dropout off), batch by batch. With y_len > 1
 * (text windows) both are per label: the share of tokens predicted right and the mean loss per token. */
rs_status rs_evaluate(rs_model *m, const rs_dataset *d, int batch, double *acc, double *loss, rs_err *err);

/* With opt.groups, gives o nanoGPT's weight-decay group of m (rs_model_decay_ranges); base is the
 * model offset of o's first element (a shard's start). Does nothing without opt.groups. */
rs_status rs_train_apply_groups(rs_optim *o, const rs_model *m, size_t base, rs_err *err);

/* The clock phases and events are stamped with (monotonic seconds). */
double rs_train_now(void);

/* Checks that d's samples fit m's input (same number of values) and its labels m's classes. Token data
 * (d->tokens) needs a model that reads token ids (its first layer an embedding) with a context of the
 * window length and exactly n_classes scores per token; a model of ids refuses float data. */
rs_status rs_train_check_data(const rs_model *m, const rs_dataset *d, rs_err *err);

#endif
