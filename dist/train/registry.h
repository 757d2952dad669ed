/* The registry of training strategies: every `mode=` of `train` declared once, as data. Each entry
 * gives the mode's name, its own options (types, defaults, ranges, help), whether it runs as rank
 * processes, and the factory that makes its rs_train_strategy on a rank. Everything that used to keep
 * a mode in sync by hand reads this table instead:
 *   - the command table (repl/cmdtab_opts.c): `mode=` choices, the strategies' options, help, completion;
 *   - `train` at the prompt (repl/cmd_train.c): an option of another mode is refused, ranges checked;
 *   - the lines handed to the ranks (repl/cmd_train_ranks.c): "mode=NAME" and one "key=value" line per
 *     option of the mode (rs_strategy_args_lines);
 *   - the worker (dist/worker/train_job.c): an unknown mode, or an option the mode does not have, is
 *     refused with the list of what exists; the factory is looked up here;
 *   - the session log (repl/repl_log.c): a run records the options its mode reads (rs_strategy_uses).
 *
 * Adding a strategy (docs/add-a-strategy.md): a file that defines
 *     const rs_strategy_def rs_strategy_NAME = {.name = "NAME", .opts = ..., .make = ..., ...};
 * one line in the list in registry.c, its extern below, and its test; more where the mode brings the
 * loop, the ranks' reports or the REPL something new (that page names the files). */
#ifndef RS_REGISTRY_H
#define RS_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtrain.h"

/* The types of a strategy's options (the command table maps them onto its own). */
typedef enum rs_sopt_type {
    RS_SOPT_INT,    /* 12 */
    RS_SOPT_FLOAT,  /* 0.5, 1e-3 */
    RS_SOPT_SIZE,   /* bytes: 25M, 16K, 1048576 (powers of 1024) */
    RS_SOPT_BOOL,   /* on/off, true/false, yes/no, 1/0 */
    RS_SOPT_ENUM,   /* one of choices */
    RS_SOPT_STRING, /* a word: split=0,4,8 (no spaces) */
} rs_sopt_type;

typedef struct rs_strategy_opt {
    const char *name;
    rs_sopt_type type;
    const char *def;               /* default as typed; NULL: none (the strategy decides) */
    const char *help;              /* one line, as `help train` shows it ("pipeline: ...") */
    const char *const *choices;    /* ENUM: NULL-terminated */
    double min, max;               /* INT, FLOAT, SIZE: the accepted range, both ends included */
} rs_strategy_opt;

/* What the common options of `train` mean to a mode (the session log records those that apply). */
enum {
    RS_SUSE_RANKS = 1u,   /* ranks= */
    RS_SUSE_PROCS = 2u,   /* backend=, timeout=, view=: rank processes */
    RS_SUSE_THREADS = 4u, /* threads=: the run's own process (ranks take one thread each) */
    RS_SUSE_WHOLE_BATCH = 8u, /* every rank reads the whole global batch (pipeline stages), not
                                 batch/ranks of it */
    RS_SUSE_INLINE_COMM = 16u, /* its collectives sit inside the layers' passes, which wait for them
                                  (tensor parallel's all-reduces): none is hidden behind compute */
};

#define RS_STRATEGY_MAX_OPTS 16
#define RS_STRATEGY_VAL_MAX 256

typedef struct rs_strategy_def rs_strategy_def;

/* The values of one mode's options for one run, as canonical text (an INT as digits, a SIZE in bytes,
 * a BOOL as 1/0, an ENUM as its word): what the REPL sends and the worker reads back. */
typedef struct rs_strategy_args {
    const rs_strategy_def *def;
    bool given[RS_STRATEGY_MAX_OPTS];
    char text[RS_STRATEGY_MAX_OPTS][RS_STRATEGY_VAL_MAX]; /* "" with no default and not given */
} rs_strategy_args;

/* Where a factory's strategy reports (every entry may be NULL). */
typedef struct rs_strategy_ctx {
    rs_pg *g;                      /* the world group; borrowed, outlives the run */
    rs_model *m;                   /* borrowed, outlives the run */
    const rs_strategy_args *args;  /* the mode's options */
    const rs_train_cfg *cfg;       /* the run's settings (batch, accum, optimizer, ...) */
    rs_dtrain_comm_fn comm;        /* collectives' spans */
    void *comm_ud;
    rs_dtrain_work_fn work;        /* per micro-batch compute spans (pipeline) */
    void *work_ud;
    /* A figure of this rank at a step (pipeline: "acts_peak_bytes", "acts_inflight"): the session log
     * keeps it as the rank's metric. */
    void (*metric)(void *ud, int64_t step, const char *name, double value);
    /* This rank runs (virtual) stage `stage` of `stages`: layers first..last (pipeline). */
    void (*stage)(void *ud, int stage, int stages, int first, int last);
    void *ud;                      /* for metric and stage */
} rs_strategy_ctx;

struct rs_strategy_def {
    const char *name;              /* the mode= word */
    const char *kind;              /* how it runs, for the mode= help: "one process", "threads as
                                      replicas", "rank processes" */
    const char *about;             /* one line */
    unsigned uses;                 /* RS_SUSE_* */
    const rs_strategy_opt *opts;   /* its own options, terminated by a NULL name; may be NULL */
    /* Checks that go beyond one option's type and range (options against each other, the model, the
     * number of ranks, the run's settings), at the prompt before any rank starts and again on each
     * rank. m may be NULL (the worker before it built the model checks what it can). NULL: none. */
    rs_status (*check)(const rs_strategy_args *a, const rs_model *m, int world, const rs_train_cfg *cfg,
                       rs_err *err);
    /* Makes this rank's strategy (rs_train calls its teardown). NULL: the mode runs in the REPL's own
     * process (single, dp), not on ranks. */
    rs_status (*make)(const rs_strategy_ctx *ctx, rs_train_strategy *out, rs_err *err);
    /* Into how many parts the global batch splits, each read by world/parts ranks (the data-parallel
     * degree: tensor's dp = ranks/tp). NULL: world, or 1 with RS_SUSE_WHOLE_BATCH. */
    int (*batch_parts)(const rs_strategy_args *a, int world);
    /* Persistent bytes per rank (parameters, gradients, optimizer) its own formula predicts for model m,
     * k optimizer floats per parameter, and the formula as text, for the memory table. NULL: the ZeRO
     * paper's (with the mode's zero= when it has one). */
    void (*mem_formula)(const rs_strategy_args *a, const rs_model *m, int world, int k, double bytes[3], char *formula,
                    size_t cap);
};

/* d->batch_parts, or its default (see above). */
int rs_strategy_batch_parts(const rs_strategy_def *d, const rs_strategy_args *a, int world);

/* The strategies, in the order `help train` lists them, terminated by NULL. */
const rs_strategy_def *const *rs_strategy_list(void);
/* The entry of mode `name`, or NULL. */
const rs_strategy_def *rs_strategy_find(const char *name);
/* "single, dp, ddp, fsdp, pipeline" (ranks_only: those with a factory) into buf; returns buf. */
const char *rs_strategy_names(char *buf, size_t cap, bool ranks_only);
/* Option `name` of d (its index in d->opts into *index when index is non-NULL), or NULL. */
const rs_strategy_opt *rs_strategy_opt_find(const rs_strategy_def *d, const char *name, int *index);
/* The first strategy that has an option called `name`, or NULL (an option of every run). */
const rs_strategy_def *rs_strategy_opt_owner(const char *name);
/* Whether a run of mode d reads the common option `name` (ranks, backend, timeout, view, threads) or
 * its own option `name`. False for another mode's option; true for any other common option. */
bool rs_strategy_uses(const rs_strategy_def *d, const char *name);

/* Every option at its default, nothing given. */
void rs_strategy_args_init(rs_strategy_args *a, const rs_strategy_def *d);
/* Sets option key from text as a user or the REPL wrote it: checks the type, the choices and the range.
 * RS_ERR_ARG with a message naming the mode and what would work: an option the mode does not have
 * (with the mode's options, and the mode that has it when another does), a bad value, out of range. */
rs_status rs_strategy_args_set(rs_strategy_args *a, const char *key, const char *value, rs_err *err);
bool rs_strategy_given(const rs_strategy_args *a, const char *name);
/* The value of option `name` of a's mode (which must have it), by its type. Without a value (no default
 * and not given): 0, false, -1 for a choice, NULL for a string. */
long long rs_strategy_int(const rs_strategy_args *a, const char *name);
double rs_strategy_float(const rs_strategy_args *a, const char *name);
uint64_t rs_strategy_size(const rs_strategy_args *a, const char *name);
bool rs_strategy_bool(const rs_strategy_args *a, const char *name);
int rs_strategy_choice(const rs_strategy_args *a, const char *name); /* index into choices */
const char *rs_strategy_str(const rs_strategy_args *a, const char *name);
/* The lines a rank reads: "mode=NAME", then "key=value" for every option that was given (a default
 * is the rank's to take from the same declaration, so a given option and a default stay apart, as
 * rs_strategy_given tells them). Calls line(ud, text) for each (text is valid during the call);
 * returns how many. */
int rs_strategy_args_lines(const rs_strategy_args *a, void (*line)(void *ud, const char *text), void *ud);

/* The entries (each in its strategy's own file). */
extern const rs_strategy_def rs_strategy_single, rs_strategy_dp, rs_strategy_ddp, rs_strategy_fsdp,
    rs_strategy_pipeline, rs_strategy_tensor;

#endif
