/* Each command's options and the words its arguments take (the rows that name them are in cmdtab.c).
 * A word a module interprets (a backend, an algorithm, an optimizer, a precision, ...) is that module's
 * own list, the one its parser reads, so a new one reaches parsing, `help` and completion with no edit
 * here (docs/add-a-command.md); the words written out here are the REPL's own, read by its handlers. */
#include "cmdtab.h"

#include <stdio.h>
#include <string.h>

#include "dist/launch/bind.h"
#include "dist/pg/pg.h"
#include "dist/train/registry.h"
#include "dist/worker/pi.h"
#include "dist/worker/worker.h"
#include "engine/core/device.h"
#include "engine/nn/generate.h"
#include "engine/optim/optim.h"
#include "engine/optim/sched.h"
#include "plan/plan.h"
#include "serve/ranks.h"
#include "serve/serve_limits.h"

const char *const rs_words_play[] = {"interactive", "auto", "step", NULL};
static const char *const split_words[] = {"test", "train", NULL};

/* Filled before main runs from owners that name their words through a function or a registry rather
 * than a NULL-terminated array (words_from_owners and train_opts_from_registry, below). */
static const char *prec_words[RS_PREC_COUNT + 1];
const char *rs_words_device[2 * RS_DEV_KIND_COUNT + 1];
static const char *mode_choices[32];
static char mode_help[256];

const rs_optdef rs_opts_model[] = {
    {.name = "seed", .type = RS_T_INT, .help = "initial weights' seed (default: the session's seed)"},
    {.name = "device", .type = RS_T_STRING,
     .help = "where it lives: cpu, cuda, cuda:N, guard (default: the session's, `set device=`)"},
    {.name = NULL},
};

const rs_optdef rs_opts_data[] = {
    {.name = "n", .type = RS_T_INT, .def = "20000",
     .help = "digits: number of training samples (a sixth as many for test)"},
    {.name = "seed", .type = RS_T_INT, .help = "generator seed / split seed (default: the session's seed)"},
    {.name = "ctx", .type = RS_T_INT, .def = "64", .help = "text: bytes (tokens) per window, the model's context"},
    {.name = NULL},
};

/* Where rank processes run (dist/launch/bind.h): train's ranks and every other command that starts them. */
#define BIND_OPT                                                                                                       \
    {.name = "bind", .type = RS_T_ENUM, .def = "core", .choices = rs_bind_names,                                      \
     .help = "across ranks: core: a core of its own for each rank, in one L3 cache (as mpirun); numa; none"}

rs_optdef rs_opts_train[RS_MAX_OPTS + 1] = {
    {.name = "epochs", .type = RS_T_INT, .def = "1", .help = "passes over the training data"},
    {.name = "batch", .type = RS_T_INT, .def = "64", .help = "samples per step"},
    {.name = "lr", .type = RS_T_FLOAT, .help = "learning rate (default: adam 1e-3, sgd 0.01)"},
    {.name = "opt", .type = RS_T_ENUM, .def = "adam", .choices = rs_opt_kind_names, .help = "optimizer"},
    {.name = "momentum", .type = RS_T_FLOAT, .def = "0", .help = "SGD momentum"},
    {.name = "nesterov", .type = RS_T_BOOL, .def = "off", .help = "SGD Nesterov momentum"},
    {.name = "wd", .type = RS_T_FLOAT,
     .help = "weight decay (L2 for sgd/adam, decoupled for adamw; adamw default 0.01)"},
    {.name = "sched", .type = RS_T_ENUM, .def = "constant", .choices = rs_sched_kind_names,
     .help = "learning-rate schedule"},
    {.name = "warmup", .type = RS_T_INT, .def = "0", .help = "linear warm-up steps"},
    {.name = "step_size", .type = RS_T_INT, .def = "1000", .help = "sched=step: steps between decays"},
    {.name = "gamma", .type = RS_T_FLOAT, .def = "0.1", .help = "sched=step: decay factor"},
    {.name = "min_lr", .type = RS_T_FLOAT, .def = "0", .help = "sched=cosine: final learning rate"},
    {.name = "steps", .type = RS_T_INT, .def = "0", .help = "stop after this many steps (0: run all epochs)"},
    {.name = "seed", .type = RS_T_INT, .help = "data order seed (default: the session's seed)"},
    {.name = "threads", .type = RS_T_INT, .help = "threads for this run (default: the session's setting)"},
    {.name = "eval", .type = RS_T_BOOL, .def = "on", .help = "evaluate on the test split after each epoch"},
    {.name = "ckpt", .type = RS_T_PATH, .help = "write a training checkpoint to FILE.safetensors"},
    {.name = "ckpt_every", .type = RS_T_INT, .def = "0", .help = "checkpoint every N steps (0: at the end)"},
    {.name = "resume", .type = RS_T_PATH, .help = "continue exactly from a training checkpoint"},
    {.name = "accum", .type = RS_T_INT, .def = "1",
     .help = "micro-batches of `batch` per optimizer step (gradient accumulation)"},
    {.name = "clip", .type = RS_T_FLOAT, .def = "0",
     .help = "clip the gradient's global L2 norm to this (0: off; nanoGPT uses 1.0)"},
    {.name = "eval_every", .type = RS_T_INT, .def = "0",
     .help = "evaluate every N steps instead of after each epoch (text: validation loss)"},
    {.name = "eval_samples", .type = RS_T_INT, .def = "0",
     .help = "eval_every: samples of the test split to evaluate on (0: all)"},
    {.name = "betas", .type = RS_T_STRING, .def = "0.9,0.999",
     .help = "adam/adamw: B1,B2, the moments' decay rates (nanoGPT's recipe: 0.9,0.99)"},
    {.name = "drop_last", .type = RS_T_BOOL, .def = "off",
     .help = "leave out the epoch's tail that does not fill a global batch: ranks then train what one process does"},
    {.name = "precision", .type = RS_T_ENUM, .def = "fp32", .choices = prec_words,
     .help = "compute type of the products (autocast): bf16, fp16 (with a loss scaler); weights stay fp32"},
    {.name = "loss_scale", .type = RS_T_FLOAT, .def = "65536", .help = "precision=fp16: the loss scaler's first scale"},
    {.name = "inject_inf", .type = RS_T_INT, .def = "0",
     .help = "precision=fp16: this step's gradients overflow (to see a step skipped)"},
    /* mode=: its choices and help come from the registry of strategies (train_opts_from_registry, below) */
    {.name = "mode", .type = RS_T_ENUM, .def = "single", .choices = mode_choices, .help = mode_help},
    {.name = "ranks", .type = RS_T_INT, .def = "2", .help = "dp: replicas; across ranks: rank processes"},
    {.name = "backend", .type = RS_T_ENUM, .def = "shm", .choices = rs_pg_backend_names,
     .help = "across ranks: how the ranks talk"},
    {.name = "timeout", .type = RS_T_DURATION, .def = "60s",
     .help = "across ranks: a rank waiting this long for another fails, naming it"},
    BIND_OPT,
    {.name = "view", .type = RS_T_BOOL, .def = "on",
     .help = "across ranks: live dashboard while the ranks run (on a terminal)"},
    {.name = "kill", .type = RS_T_STRING,
     .help = "across ranks: RANK:STEP, that rank dies (SIGKILL) after that step, to practise a fault"},
    {.name = "hostfile", .type = RS_T_PATH,
     .help = "DeepSpeed's hostfile (HOST slots=N a line): the ranks on those hosts, by mpirun (mpi) or ssh (tcp)"},
    {.name = "config", .type = RS_T_PATH,
     .help = "DeepSpeed's ds_config.json: its keys become these options (options on the line win)"},
    {.name = NULL},
    /* every strategy's own options are appended here (room up to RS_MAX_OPTS) */
};

/* The options the registry declares for each mode (dist/train/registry.h) join train's options, so
 * parsing, `help train` and completion know them like any other; a name two modes share appears once.
 * Built before main runs (a constructor), so every reader of the table sees it finished and nothing
 * changes it afterwards. */
static rs_opt_type opt_type(rs_sopt_type t)
{
    switch (t) {
    case RS_SOPT_INT: return RS_T_INT;
    case RS_SOPT_FLOAT: return RS_T_FLOAT;
    case RS_SOPT_SIZE: return RS_T_SIZE;
    case RS_SOPT_BOOL: return RS_T_BOOL;
    case RS_SOPT_ENUM: return RS_T_ENUM;
    case RS_SOPT_STRING: return RS_T_STRING;
    }
    return RS_T_STRING;
}

__attribute__((constructor)) static void train_opts_from_registry(void)
{
    const rs_strategy_def *const *all = rs_strategy_list();
    int n = 0, k = 0;
    while (rs_opts_train[n].name) n++;
    int n0 = n; /* the common options end here */
    /* mode=: "single process; dp: threads as replicas; ddp, fsdp, ...: rank processes" */
    size_t h = (size_t)snprintf(mode_help, sizeof mode_help, "how training is split:");
    for (int i = 0; all[i] && k < (int)(sizeof mode_choices / sizeof mode_choices[0]) - 1; i++) {
        mode_choices[k++] = all[i]->name;
        bool first = true;
        for (int j = 0; j < i; j++) first &= strcmp(all[j]->kind, all[i]->kind) != 0;
        if (!first) continue;
        h += (size_t)snprintf(mode_help + h, h < sizeof mode_help ? sizeof mode_help - h : 0, "%s ", i ? ";" : "");
        int same = 0;
        for (int j = i; all[j]; j++)
            if (!strcmp(all[j]->kind, all[i]->kind))
                h += (size_t)snprintf(mode_help + h, h < sizeof mode_help ? sizeof mode_help - h : 0, "%s%s",
                                      same++ ? ", " : "", all[j]->name);
        h += (size_t)snprintf(mode_help + h, h < sizeof mode_help ? sizeof mode_help - h : 0, ": %s", all[i]->kind);
    }
    mode_choices[k] = NULL;
    for (int i = 0; all[i]; i++)
        for (const rs_strategy_opt *o = all[i]->opts; o && o->name; o++) {
            bool dup = false;
            for (int j = 0; j < n; j++) {
                if (strcmp(rs_opts_train[j].name, o->name)) continue;
                dup = true;
                /* modes that share a name with different defaults (fsdp's zero=3, pipeline's zero=0): the
                 * table gives none, each mode takes its own from the registry, the help says both */
                if (j >= n0 && (!rs_opts_train[j].def || !o->def || strcmp(rs_opts_train[j].def, o->def)))
                    rs_opts_train[j].def = NULL;
            }
            if (dup || n >= RS_MAX_OPTS) continue; /* the registry's test checks every option made it */
            rs_opts_train[n++] = (rs_optdef){.name = o->name, .type = opt_type(o->type), .def = o->def,
                                             .help = o->help, .choices = o->choices};
            rs_opts_train[n] = (rs_optdef){.name = NULL};
        }
}

const rs_optdef rs_opts_generate[] = {
    {.name = "prompt", .type = RS_T_STRING, .help = "text to continue (default: a new line)"},
    {.name = "n", .type = RS_T_INT, .def = "200", .help = "tokens (bytes of the text) to sample"},
    {.name = "temp", .type = RS_T_FLOAT, .def = "0.8",
     .help = "temperature: lower is more predictable, 0 always takes the likeliest"},
    {.name = "top_k", .type = RS_T_INT, .def = "40", .help = "sample among the k likeliest tokens (0: all)"},
    {.name = "seed", .type = RS_T_INT, .help = "sampling seed (default: the session's seed)"},
    {.name = "cache", .type = RS_T_BOOL, .def = "on",
     .help = "KV cache: while the text fits the context each token runs the model on one position; the same text"},
    {.name = "window", .type = RS_T_ENUM, .def = "crop", .choices = rs_gen_window_words,
     .help = "past the context: crop (the last ctx tokens, nanoGPT's text) or shift (faster; keeps the newest half "
             "in the cache, so the text differs from nanoGPT's)"},
    {.name = "data", .type = RS_T_STRING,
     .help = "the text data set whose bytes the model uses (default: the newest)"},
    {.name = NULL},
};

const rs_optdef rs_opts_eval[] = {
    {.name = "batch", .type = RS_T_INT, .def = "256", .help = "samples per forward pass"},
    {.name = "split", .type = RS_T_ENUM, .def = "test", .choices = split_words,
     .help = "which part of the data set"},
    {.name = NULL},
};

const rs_optdef rs_opts_predict[] = {
    {.name = "n", .type = RS_T_INT, .def = "4", .help = "how many samples to show"},
    {.name = "seed", .type = RS_T_INT, .help = "which samples (default: the first ones)"},
    {.name = "split", .type = RS_T_ENUM, .def = "test", .choices = split_words,
     .help = "which part of the data set"},
    {.name = NULL},
};

const rs_optdef rs_opts_runs[] = {
    {.name = "n", .type = RS_T_INT, .def = "20", .help = "how many of the most recent runs"},
    {.name = NULL},
};

const rs_optdef rs_opts_compare[] = {
    {.name = "all", .type = RS_T_BOOL, .def = "off",
     .help = "every field in one table, the equal ones too"},
    {.name = NULL},
};

/* read by rs_cmd_sql (repl_log.c), indexed by rs_sql_format */
const char *const rs_words_sql_format[] = {"table", "csv", "json", NULL};
const rs_optdef rs_opts_sql[] = {
    {.name = "format", .type = RS_T_ENUM, .def = "table", .choices = rs_words_sql_format,
     .help = "table (aligned, at most 200 rows), csv (RFC 4180, every row) or json (an array of objects a "
             "statement, every row)"},
    {.name = NULL},
};

const rs_optdef rs_opts_history[] = {
    {.name = "n", .type = RS_T_INT, .def = "20", .help = "how many of the most recent commands"},
    {.name = NULL},
};

const rs_optdef rs_opts_set[] = {
    {.name = "threads", .type = RS_T_INT, .help = "CPU threads for kernels and BLAS"},
    {.name = "seed", .type = RS_T_INT, .help = "default seed for models, data and runs"},
    {.name = "color", .type = RS_T_BOOL, .help = "coloured output"},
    {.name = "device", .type = RS_T_STRING,
     .help = "cpu, cuda, cuda:N or guard: where new models are built (`devices` lists the GPUs)"},
    {.name = NULL},
};

const rs_optdef rs_opts_play[] = {
    {.name = "mode", .type = RS_T_ENUM, .def = "interactive", .choices = rs_words_play, .help = "the modes above"},
    {.name = NULL},
};

const rs_optdef rs_opts_view[] = {
    {.name = "speed", .type = RS_T_FLOAT, .def = "1",
     .help = "playback speed (0.001: a millisecond collective takes a second)"},
    {.name = NULL},
};

const rs_optdef rs_opts_serve[] = {
    {.name = "name", .type = RS_T_STRING,
     .help = "the model's name in the repository (default: the model's or file's name)"},
    {.name = "http", .type = RS_T_INT, .def = "8000", .help = "KServe v2 HTTP port (0: any free port)"},
    {.name = "grpc", .type = RS_T_INT, .def = "8001",
     .help = "gRPC port, Triton's GRPCInferenceService (0: any free port; -1: none)"},
    {.name = "metrics", .type = RS_T_INT, .def = "8002", .help = "Prometheus metrics port (-1: none)"},
    {.name = "host", .type = RS_T_STRING, .def = "127.0.0.1", .help = "address to bind (0.0.0.0: every interface)"},
    {.name = "max_batch", .type = RS_T_INT, .def = "64", .help = "max_batch_size: the largest batch the batcher forms"},
    {.name = "delay", .type = RS_T_DURATION, .def = "500us",
     .help = "max_queue_delay: how long a request waits for a fuller batch"},
    {.name = "instances", .type = RS_T_INT, .def = "1",
     .help = "instances of the model running in parallel, each with its own activations"},
    {.name = "repo", .type = RS_T_PATH,
     .help = "where to write the repository for a model or file (default: a new /tmp folder)"},
    {.name = "data", .type = RS_T_STRING,
     .help = "a GPT's text data set: its distinct bytes are the tokens (default: as generate picks)"},
    {.name = "ranks", .type = RS_T_INT, .def = "1",
     .help = "rank processes serving the model (2..64: large-model inference across ranks)"},
    {.name = "mode", .type = RS_T_ENUM, .def = "pipeline", .choices = rs_serve_ranks_modes,
     .help = "across ranks: pipeline stages or tensor shards"},
/* the server's limits, declared once in serve/serve_limits.h */
#define RS_SERVE_LIMIT_OPT(f, cli, repl, dflt, lo, hi, text) {.name = repl, .type = RS_T_INT, .def = #dflt, .help = text},
    RS_SERVE_LIMITS(RS_SERVE_LIMIT_OPT)
#undef RS_SERVE_LIMIT_OPT
    {.name = NULL},
};

const rs_optdef rs_opts_infer[] = {
    {.name = "n", .type = RS_T_INT, .def = "16", .help = "requests to send, one sample each (a tensor model)"},
    {.name = "clients", .type = RS_T_INT, .def = "16",
     .help = "threads sending them at once (the batcher merges what waits together)"},
    {.name = "seed", .type = RS_T_INT, .def = "1", .help = "the inputs' random seed; a GPT's sampling seed"},
    {.name = "prompt", .type = RS_T_STRING, .help = "a GPT: the text to continue"},
    {.name = "tokens", .type = RS_T_INT, .def = "40",
     .help = "a GPT: tokens to generate, each streamed as it is drawn"},
    {.name = "temp", .type = RS_T_FLOAT, .def = "0.8", .help = "a GPT: sampling temperature"},
    {.name = "top_k", .type = RS_T_INT, .def = "40", .help = "a GPT: sample among the k most likely"},
    {.name = NULL},
};

const rs_optdef rs_opts_jobs[] = {
    {.name = "stop", .type = RS_T_INT, .help = "stop the background run with this number (its ranks are ended)"},
    {.name = NULL},
};

/* The options every command that starts ranks takes. */
#define DIST_OPTS                                                                                                      \
    {.name = "ranks", .type = RS_T_INT, .def = "2", .help = "rank processes to start"},                               \
        {.name = "backend", .type = RS_T_ENUM, .def = "shm", .choices = rs_pg_backend_names,                           \
         .help = "how the ranks talk: shm, tcp, mpi (mpirun), nccl (GPUs)"},                                          \
        {.name = "timeout", .type = RS_T_DURATION, .def = "30s",                                                      \
         .help = "a rank waiting this long for another fails, naming it"},                                             \
        BIND_OPT,                                                                                                      \
        {.name = "hostfile", .type = RS_T_PATH,                                                                        \
         .help = "DeepSpeed's hostfile (HOST slots=N a line): the ranks on those hosts, by mpirun (mpi) or ssh (tcp)"}

const rs_optdef rs_opts_collective[] = {
    DIST_OPTS,
    {.name = "count", .type = RS_T_INT, .help = "elements per rank (default 2, or size=)"},
    {.name = "size", .type = RS_T_SIZE, .help = "bytes per rank instead of count="},
    {.name = "op", .type = RS_T_ENUM, .def = "sum", .choices = rs_redop_names, .help = "reduction"},
    {.name = "dtype", .type = RS_T_ENUM, .def = "f32", .choices = rs_pg_dtype_names, .help = "element type"},
    {.name = "algo", .type = RS_T_ENUM, .def = "auto", .choices = rs_pg_algo_names,
     .help = "shm/tcp all_reduce algorithm"},
    {.name = "root", .type = RS_T_INT, .def = "0", .help = "root rank of broadcast, reduce, scatter, gather"},
    {.name = "show", .type = RS_T_INT, .def = "16", .help = "elements printed per rank"},
    {.name = "step", .type = RS_T_BOOL, .def = "off",
     .help = "wait for a key (n, Enter, Right) before each algorithm step (needs a terminal)"},
    {.name = "view", .type = RS_T_BOOL, .def = "on", .help = "live dashboard while the ranks run (on a terminal)"},
    {.name = NULL},
};

const rs_optdef rs_opts_bench[] = {
    DIST_OPTS,
    {.name = "sizes", .type = RS_T_STRING, .def = "8..64M",
     .help = "message sizes LO..HI, doubling (nccl-tests' -b/-e)"},
    {.name = "op", .type = RS_T_ENUM, .def = "sum", .choices = rs_redop_names, .help = "reduction"},
    {.name = "dtype", .type = RS_T_ENUM, .def = "f32", .choices = rs_pg_dtype_names, .help = "element type"},
    {.name = "algo", .type = RS_T_ENUM, .def = "auto", .choices = rs_pg_algo_names,
     .help = "shm/tcp all_reduce algorithm"},
    {.name = "iters", .type = RS_T_INT, .def = "0", .help = "timed iterations per size (0: enough to move ~256 MiB)"},
    {.name = "view", .type = RS_T_BOOL, .def = "on", .help = "live dashboard while the ranks run (on a terminal)"},
    {.name = NULL},
};

const rs_optdef rs_opts_p2p[] = {
    DIST_OPTS,
    {.name = "size", .type = RS_T_SIZE, .def = "1M", .help = "message size"},
    {.name = "iters", .type = RS_T_INT, .def = "0", .help = "iterations per measurement (0: automatic)"},
    {.name = NULL},
};

const rs_optdef rs_opts_world[] = {
    DIST_OPTS,
    {.name = "nodes", .type = RS_T_INT, .def = "1", .help = "machines this host plays"},
    {.name = "store", .type = RS_T_ENUM, .def = "launcher", .choices = (const char *const[]){"launcher", "rank0", NULL},
     .help = "who hosts the rendezvous: ringside, or rank 0"},
    {.name = "view", .type = RS_T_BOOL, .def = "off", .help = "live dashboard while the ranks run (on a terminal)"},
    {.name = NULL},
};

const rs_optdef rs_opts_tp[] = {
    DIST_OPTS,
    {.name = "split", .type = RS_T_ENUM, .def = "both", .choices = rs_matmul_split_names,
     .help = "cols: B by columns, then all_gather; rows: the inner dimension, then all_reduce"},
    {.name = "m", .type = RS_T_INT, .def = "2", .help = "rows of A (1..64)"},
    {.name = "k", .type = RS_T_INT, .def = "4", .help = "columns of A, rows of B (1..64)"},
    {.name = "n", .type = RS_T_INT, .def = "2", .help = "columns of B (1..64)"},
    {.name = NULL},
};

const rs_optdef rs_opts_pi[] = {
    DIST_OPTS,
    {.name = "n", .type = RS_T_INT,
     .help = "terms of the sum, dealt round the ranks (default: one per rank, as the lecture)"},
    {.name = "method", .type = RS_T_ENUM, .def = "series", .choices = rs_pi_method_names,
     .help = "series: 4 x (1 - 1/3 + 1/5 ...); midpoint: 4/(1+x^2) over [0,1]"},
    {.name = "view", .type = RS_T_BOOL, .def = "off", .help = "live dashboard while the ranks run (on a terminal)"},
    {.name = NULL},
};

const rs_optdef rs_opts_export[] = {
    {.name = "opset", .type = RS_T_INT, .def = "17", .help = "ONNX opset to write (13..21)"},
    {.name = "softmax", .type = RS_T_BOOL, .def = "off",
     .help = "end the graph with Softmax (output \"probs\" instead of \"logits\")"},
    {.name = NULL},
};

const rs_optdef rs_opts_compile[] = {
    {.name = "precision", .type = RS_T_ENUM, .def = "fp32", .choices = rs_plan_prec_names,
     .help = "what convolutions and inner products compute in (bf16: fp32 accumulation)"},
    {.name = "batch", .type = RS_T_INT, .def = "64",
     .help = "the largest batch the plan runs (its memory plan is made for it)"},
    {.name = "threads", .type = RS_T_INT, .help = "threads per run (default: the session's setting)"},
    {.name = "calib", .type = RS_T_STRING,
     .help = "int8: the data set whose training samples calibrate the input scales"},
    {.name = "calib_n", .type = RS_T_INT, .def = "512", .help = "int8: how many calibration samples"},
    {.name = "calib_method", .type = RS_T_ENUM, .def = "minmax", .choices = rs_plan_calib_names,
     .help = "int8: the input threshold: the largest |x|, a percentile, or least KL divergence (TensorRT's entropy)"},
    {.name = "calib_pct", .type = RS_T_FLOAT, .def = "99.99",
     .help = "int8, calib_method=percentile: the percent of |x| kept unclipped"},
    {.name = "device", .type = RS_T_ENUM, .def = "cpu", .choices = rs_plan_dev_names,
     .help = "what the plan runs on: this CPU (oneDNN) or a GPU (cuDNN, cuBLASLt; fp32 or bf16; compiles without one)"},
    {.name = NULL},
};

const rs_optdef rs_opts_plan[] = {
    {.name = "threads", .type = RS_T_INT, .help = "bench: threads per run (default: the session's setting)"},
    {.name = "runs", .type = RS_T_INT, .def = "50", .help = "bench: timed runs per batch size (the median is printed)"},
    {.name = "nodes", .type = RS_T_BOOL, .def = "off", .help = "bench: each node's median time and oneDNN kernel too"},
    {.name = NULL},
};

const rs_optdef rs_opts_onnx[] = {
    {.name = "opset", .type = RS_T_INT, .def = "17", .help = "save: ONNX opset to write"},
    {.name = "dtype", .type = RS_T_STRING, .def = "float", .help = "input/output/init: element type"},
    {.name = "seed", .type = RS_T_INT, .help = "init: random initial values from this seed (0: zeros)"},
    {.name = NULL},
};

/* train's precision= reads engine/core's rs_prec (rs_prec_parse takes the same names); `to`'s DEVICE
 * reads each device kind's name, and a kind with GPU ordinals (cuda) also as NAME:0, the NAME:N form
 * rs_repl_device_parse takes. Built before main runs, so every reader sees them finished. */
__attribute__((constructor)) static void words_from_owners(void)
{
    for (int p = 0; p < RS_PREC_COUNT; p++) prec_words[p] = rs_prec_name((rs_prec)p);
    static char indexed[RS_DEV_KIND_COUNT][24];
    int n = 0;
    for (int k = 0; k < RS_DEV_KIND_COUNT; k++) {
        rs_words_device[n++] = rs_device_name((rs_device){.kind = (rs_device_kind)k});
        if (k != RS_DEV_CUDA) continue;
        snprintf(indexed[k], sizeof indexed[k], "%s:0", rs_words_device[n - 1]);
        rs_words_device[n++] = indexed[k];
    }
}
