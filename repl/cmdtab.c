/* The one command table (see cmd.h). Adding a command: declare it here, write its handler in the
 * cmd_*.c file of its group; parsing, help and completion pick it up from this table. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "dist/train/registry.h"

/* Handlers (repl/cmd_*.c). */
int rs_cmd_model(rs_session *, const rs_call *);
int rs_cmd_data(rs_session *, const rs_call *);
int rs_cmd_show(rs_session *, const rs_call *);
int rs_cmd_ls(rs_session *, const rs_call *);
int rs_cmd_drop(rs_session *, const rs_call *);
int rs_cmd_reset(rs_session *, const rs_call *);
int rs_cmd_to(rs_session *, const rs_call *);
int rs_cmd_train(rs_session *, const rs_call *);
int rs_cmd_generate(rs_session *, const rs_call *);
int rs_cmd_eval(rs_session *, const rs_call *);
int rs_cmd_predict(rs_session *, const rs_call *);
int rs_cmd_save(rs_session *, const rs_call *);
int rs_cmd_load(rs_session *, const rs_call *);
int rs_cmd_runs(rs_session *, const rs_call *);
int rs_cmd_compare(rs_session *, const rs_call *);
int rs_cmd_sql(rs_session *, const rs_call *);
int rs_cmd_history(rs_session *, const rs_call *);
int rs_cmd_replay(rs_session *, const rs_call *);
int rs_cmd_export(rs_session *, const rs_call *);
int rs_cmd_play(rs_session *, const rs_call *);
int rs_cmd_say(rs_session *, const rs_call *);
int rs_cmd_pause(rs_session *, const rs_call *);
int rs_cmd_clear(rs_session *, const rs_call *);
int rs_cmd_set(rs_session *, const rs_call *);
int rs_cmd_help(rs_session *, const rs_call *);
int rs_cmd_quit(rs_session *, const rs_call *);
int rs_cmd_version(rs_session *, const rs_call *);
int rs_cmd_devices(rs_session *, const rs_call *);
int rs_cmd_onnx(rs_session *, const rs_call *);
int rs_cmd_collective(rs_session *, const rs_call *);
int rs_cmd_bench(rs_session *, const rs_call *);
int rs_cmd_p2p(rs_session *, const rs_call *);
int rs_cmd_tp(rs_session *, const rs_call *);
int rs_cmd_backends(rs_session *, const rs_call *);
int rs_cmd_view(rs_session *, const rs_call *);
int rs_cmd_jobs(rs_session *, const rs_call *);
int rs_cmd_expect(rs_session *, const rs_call *);
int rs_cmd_world(rs_session *, const rs_call *);
int rs_cmd_serve(rs_session *, const rs_call *);
int rs_cmd_infer(rs_session *, const rs_call *);
int rs_cmd_pi(rs_session *, const rs_call *);
int rs_cmd_compile(rs_session *, const rs_call *);
int rs_cmd_plan(rs_session *, const rs_call *);

static const char *const opt_kinds[] = {"sgd", "adam", "adamw", NULL};
static const char *const sched_kinds[] = {"constant", "step", "cosine", NULL};
static const char *const play_modes[] = {"interactive", "auto", "step", NULL};

static const rs_optdef model_opts[] = {
    {"seed", RS_T_INT, NULL, "initial weights' seed (default: the session's seed)", NULL},
    {"device", RS_T_STRING, NULL, "where it lives: cpu, cuda, cuda:N, guard (default: the session's, `set device=`)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef data_opts[] = {
    {"n", RS_T_INT, "20000", "digits: number of training samples (a sixth as many for test)", NULL},
    {"seed", RS_T_INT, NULL, "generator seed / split seed (default: the session's seed)", NULL},
    {"ctx", RS_T_INT, "64", "text: characters per window, the model's context", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const char *mode_choices[32];
static char mode_help[256];

static rs_optdef train_opts[RS_MAX_OPTS + 1] = {
    {"epochs", RS_T_INT, "1", "passes over the training data", NULL},
    {"batch", RS_T_INT, "64", "samples per step", NULL},
    {"lr", RS_T_FLOAT, NULL, "learning rate (default: adam 1e-3, sgd 0.01)", NULL},
    {"opt", RS_T_ENUM, "adam", "optimizer", opt_kinds},
    {"momentum", RS_T_FLOAT, "0", "SGD momentum", NULL},
    {"nesterov", RS_T_BOOL, "off", "SGD Nesterov momentum", NULL},
    {"wd", RS_T_FLOAT, NULL, "weight decay (L2 for sgd/adam, decoupled for adamw; adamw default 0.01)", NULL},
    {"sched", RS_T_ENUM, "constant", "learning-rate schedule", sched_kinds},
    {"warmup", RS_T_INT, "0", "linear warm-up steps", NULL},
    {"step_size", RS_T_INT, "1000", "sched=step: steps between decays", NULL},
    {"gamma", RS_T_FLOAT, "0.1", "sched=step: decay factor", NULL},
    {"min_lr", RS_T_FLOAT, "0", "sched=cosine: final learning rate", NULL},
    {"steps", RS_T_INT, "0", "stop after this many steps (0: run all epochs)", NULL},
    {"seed", RS_T_INT, NULL, "data order seed (default: the session's seed)", NULL},
    {"threads", RS_T_INT, NULL, "threads for this run (default: the session's setting)", NULL},
    {"eval", RS_T_BOOL, "on", "evaluate on the test split after each epoch", NULL},
    {"ckpt", RS_T_PATH, NULL, "write a training checkpoint to FILE.safetensors", NULL},
    {"ckpt_every", RS_T_INT, "0", "checkpoint every N steps (0: at the end)", NULL},
    {"resume", RS_T_PATH, NULL, "continue exactly from a training checkpoint", NULL},
    {"accum", RS_T_INT, "1", "micro-batches of `batch` per optimizer step (gradient accumulation)", NULL},
    {"clip", RS_T_FLOAT, "0", "clip the gradient's global L2 norm to this (0: off; nanoGPT uses 1.0)", NULL},
    {"eval_every", RS_T_INT, "0", "evaluate every N steps instead of after each epoch (text: validation loss)",
     NULL},
    {"eval_samples", RS_T_INT, "0", "eval_every: samples of the test split to evaluate on (0: all)", NULL},
    {"precision", RS_T_ENUM, "fp32", "compute type of the products (autocast): bf16, fp16 (with a loss scaler); weights stay fp32",
     (const char *const[]){"fp32", "bf16", "fp16", NULL}},
    {"loss_scale", RS_T_FLOAT, "65536", "precision=fp16: the loss scaler's first scale", NULL},
    {"inject_inf", RS_T_INT, "0", "precision=fp16: this step's gradients overflow (to see a step skipped)", NULL},
    /* mode=: its choices and help come from the registry of strategies (train_opts_from_registry) */
    {"mode", RS_T_ENUM, "single", mode_help, mode_choices},
    {"ranks", RS_T_INT, "2", "dp: replicas; across ranks: rank processes", NULL},
    {"backend", RS_T_ENUM, "shm", "across ranks: how the ranks talk", (const char *const[]){"shm", "tcp", "mpi", "nccl", NULL}},
    {"timeout", RS_T_DURATION, "60s", "across ranks: a rank waiting this long for another fails, naming it", NULL},
    {"view", RS_T_BOOL, "on", "across ranks: live dashboard while the ranks run (on a terminal)", NULL},
    {"kill", RS_T_STRING, NULL, "across ranks: RANK:STEP, that rank dies (SIGKILL) after that step, to practise a fault", NULL},
    {NULL, 0, NULL, NULL, NULL},
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
    while (train_opts[n].name) n++;
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
                if (strcmp(train_opts[j].name, o->name)) continue;
                dup = true;
                /* modes that share a name with different defaults (fsdp's zero=3, pipeline's zero=0): the
                 * table gives none, each mode takes its own from the registry, the help says both */
                if (j >= n0 && (!train_opts[j].def || !o->def || strcmp(train_opts[j].def, o->def)))
                    train_opts[j].def = NULL;
            }
            if (dup || n >= RS_MAX_OPTS) continue; /* the registry's test checks every option made it */
            train_opts[n++] = (rs_optdef){o->name, opt_type(o->type), o->def, o->help, o->choices};
            train_opts[n] = (rs_optdef){NULL, 0, NULL, NULL, NULL};
        }
}

static const rs_optdef generate_opts[] = {
    {"prompt", RS_T_STRING, NULL, "text to continue (default: a new line)", NULL},
    {"n", RS_T_INT, "200", "characters to sample", NULL},
    {"temp", RS_T_FLOAT, "0.8", "temperature: lower is more predictable, 0 always takes the likeliest", NULL},
    {"top_k", RS_T_INT, "40", "sample among the k likeliest characters (0: all)", NULL},
    {"seed", RS_T_INT, NULL, "sampling seed (default: the session's seed)", NULL},
    {"cache", RS_T_BOOL, "on", "KV cache: each character runs the model on one position", NULL},
    {"data", RS_T_STRING, NULL, "the text data set whose characters the model uses (default: the newest)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef eval_opts[] = {
    {"batch", RS_T_INT, "256", "samples per forward pass", NULL},
    {"split", RS_T_ENUM, "test", "which part of the data set", (const char *const[]){"test", "train", NULL}},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef predict_opts[] = {
    {"n", RS_T_INT, "4", "how many samples to show", NULL},
    {"seed", RS_T_INT, NULL, "which samples (default: the first ones)", NULL},
    {"split", RS_T_ENUM, "test", "which part of the data set", (const char *const[]){"test", "train", NULL}},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef runs_opts[] = {
    {"n", RS_T_INT, "20", "how many of the most recent runs", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef history_opts[] = {
    {"n", RS_T_INT, "20", "how many of the most recent commands", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef set_opts[] = {
    {"threads", RS_T_INT, NULL, "CPU threads for kernels and BLAS", NULL},
    {"seed", RS_T_INT, NULL, "default seed for models, data and runs", NULL},
    {"color", RS_T_BOOL, NULL, "coloured output", NULL},
    {"device", RS_T_STRING, NULL, "cpu, cuda, cuda:N or guard: where new models are built (`devices` lists the GPUs)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef play_opts[] = {
    {"mode", RS_T_ENUM, "interactive", "the modes above",
     play_modes},
    {NULL, 0, NULL, NULL, NULL},
};

static const char *const view_words[] = {"run", "serve", NULL};
static const rs_optdef view_opts[] = {
    {"speed", RS_T_FLOAT, "1", "playback speed (0.001: a millisecond collective takes a second)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const char *const serve_modes[] = {"pipeline", "tensor", NULL};
static const rs_optdef serve_opts[] = {
    {"name", RS_T_STRING, NULL, "the model's name in the repository (default: the model's or file's name)", NULL},
    {"http", RS_T_INT, "8000", "KServe v2 HTTP port (0: any free port)", NULL},
    {"grpc", RS_T_INT, "8001", "gRPC port, Triton's GRPCInferenceService (0: any free port; -1: none)", NULL},
    {"metrics", RS_T_INT, "8002", "Prometheus metrics port (-1: none)", NULL},
    {"host", RS_T_STRING, "127.0.0.1", "address to bind (0.0.0.0: every interface)", NULL},
    {"max_batch", RS_T_INT, "64", "max_batch_size: the largest batch the batcher forms", NULL},
    {"delay", RS_T_DURATION, "500us", "max_queue_delay: how long a request waits for a fuller batch", NULL},
    {"instances", RS_T_INT, "1", "instances of the model running in parallel, each with its own activations", NULL},
    {"repo", RS_T_PATH, NULL, "where to write the repository for a model or file (default: a new /tmp folder)", NULL},
    {"data", RS_T_STRING, NULL, "a GPT's text data set: its characters are the tokens (default: as generate picks)", NULL},
    {"ranks", RS_T_INT, "1", "rank processes serving the model (2..64: large-model inference across ranks)", NULL},
    {"mode", RS_T_ENUM, "pipeline", "across ranks: pipeline stages or tensor shards", serve_modes},
    {NULL, 0, NULL, NULL, NULL},
};
static const char *const serve_words[] = {"stop", NULL};
static const rs_optdef infer_opts[] = {
    {"n", RS_T_INT, "16", "requests to send, one sample each (a tensor model)", NULL},
    {"clients", RS_T_INT, "16", "threads sending them at once (the batcher merges what waits together)", NULL},
    {"seed", RS_T_INT, "1", "the inputs' random seed; a GPT's sampling seed", NULL},
    {"prompt", RS_T_STRING, NULL, "a GPT: the text to continue", NULL},
    {"tokens", RS_T_INT, "40", "a GPT: tokens to generate, each streamed as it is drawn", NULL},
    {"temp", RS_T_FLOAT, "0.8", "a GPT: sampling temperature", NULL},
    {"top_k", RS_T_INT, "40", "a GPT: sample among the k most likely", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef jobs_opts[] = {
    {"stop", RS_T_INT, NULL, "stop the background run with this number (its ranks are ended)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const char *const backend_kinds[] = {"shm", "tcp", "mpi", "nccl", NULL};
static const char *const algo_kinds[] = {"auto", "ring", "tree", "recursive-doubling", NULL};
static const char *const redop_kinds[] = {"sum", "product", "min", "max", "avg", NULL};
static const char *const coll_dtypes[] = {"f32", "f64", "i32", "i64", NULL};

#define DIST_OPTS                                                                                                      \
    {"ranks", RS_T_INT, "2", "rank processes to start", NULL},                                                     \
        {"backend", RS_T_ENUM, "shm", "how the ranks talk: shm, tcp, mpi (mpirun), nccl (GPUs)", backend_kinds},    \
        {"timeout", RS_T_DURATION, "30s", "a rank waiting this long for another fails, naming it", NULL}

static const rs_optdef collective_opts[] = {
    DIST_OPTS,
    {"count", RS_T_INT, NULL, "elements per rank (default 2, or size=)", NULL},
    {"size", RS_T_SIZE, NULL, "bytes per rank instead of count=", NULL},
    {"op", RS_T_ENUM, "sum", "reduction", redop_kinds},
    {"dtype", RS_T_ENUM, "f32", "element type", coll_dtypes},
    {"algo", RS_T_ENUM, "auto", "shm/tcp all_reduce algorithm", algo_kinds},
    {"root", RS_T_INT, "0", "root rank of broadcast, reduce, scatter, gather", NULL},
    {"show", RS_T_INT, "16", "elements printed per rank", NULL},
    {"step", RS_T_BOOL, "off", "wait for a key (n, Enter, Right) before each algorithm step (needs a terminal)", NULL},
    {"view", RS_T_BOOL, "on", "live dashboard while the ranks run (on a terminal)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef bench_opts[] = {
    DIST_OPTS,
    {"sizes", RS_T_STRING, "8..64M", "message sizes LO..HI, doubling (nccl-tests' -b/-e)", NULL},
    {"op", RS_T_ENUM, "sum", "reduction", redop_kinds},
    {"dtype", RS_T_ENUM, "f32", "element type", coll_dtypes},
    {"algo", RS_T_ENUM, "auto", "shm/tcp all_reduce algorithm", algo_kinds},
    {"iters", RS_T_INT, "0", "timed iterations per size (0: enough to move ~256 MiB)", NULL},
    {"view", RS_T_BOOL, "on", "live dashboard while the ranks run (on a terminal)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef p2p_opts[] = {
    DIST_OPTS,
    {"size", RS_T_SIZE, "1M", "message size", NULL},
    {"iters", RS_T_INT, "0", "iterations per measurement (0: automatic)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef world_opts[] = {
    DIST_OPTS,
    {"nodes", RS_T_INT, "1", "machines this host plays", NULL},
    {"store", RS_T_ENUM, "launcher", "who hosts the rendezvous: ringside, or rank 0",
     (const char *const[]){"launcher", "rank0", NULL}},
    {"view", RS_T_BOOL, "off", "live dashboard while the ranks run (on a terminal)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};
static const char *const tp_splits[] = {"both", "cols", "rows", NULL};
static const rs_optdef tp_opts[] = {
    DIST_OPTS,
    {"split", RS_T_ENUM, "both", "cols: B by columns, then all_gather; rows: the inner dimension, then all_reduce",
     tp_splits},
    {"m", RS_T_INT, "2", "rows of A (1..64)", NULL},
    {"k", RS_T_INT, "4", "columns of A, rows of B (1..64)", NULL},
    {"n", RS_T_INT, "2", "columns of B (1..64)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const char *const pi_methods[] = {"series", "midpoint", NULL};
static const rs_optdef pi_opts[] = {
    DIST_OPTS,
    {"n", RS_T_INT, NULL, "terms of the sum, dealt round the ranks (default: one per rank, as the lecture)", NULL},
    {"method", RS_T_ENUM, "series", "series: 4 x (1 - 1/3 + 1/5 ...); midpoint: 4/(1+x^2) over [0,1]", pi_methods},
    {"view", RS_T_BOOL, "off", "live dashboard while the ranks run (on a terminal)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef export_opts[] = {
    {"opset", RS_T_INT, "17", "ONNX opset to write (13..21)", NULL},
    {"softmax", RS_T_BOOL, "off", "end the graph with Softmax (output \"probs\" instead of \"logits\")", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const char *const precisions[] = {"fp32", "bf16", "int8", NULL};
static const char *const calib_methods[] = {"minmax", "percentile", "entropy", NULL};
static const char *const plan_devices[] = {"cpu", "cuda", NULL};
static const rs_optdef compile_opts[] = {
    {"precision", RS_T_ENUM, "fp32", "what convolutions and inner products compute in (bf16: fp32 accumulation)",
     precisions},
    {"batch", RS_T_INT, "64", "the largest batch the plan runs (its memory plan is made for it)", NULL},
    {"threads", RS_T_INT, NULL, "threads per run (default: the session's setting)", NULL},
    {"calib", RS_T_STRING, NULL, "int8: the data set whose training samples calibrate the input scales", NULL},
    {"calib_n", RS_T_INT, "512", "int8: how many calibration samples", NULL},
    {"calib_method", RS_T_ENUM, "minmax", "int8: the input threshold: the largest |x|, a percentile, or least KL "
     "divergence (TensorRT's entropy)", calib_methods},
    {"calib_pct", RS_T_FLOAT, "99.99", "int8, calib_method=percentile: the percent of |x| kept unclipped", NULL},
    {"device", RS_T_ENUM, "cpu", "what the plan runs on: this CPU (oneDNN) or a GPU (cuDNN, cuBLASLt; fp32 or bf16; "
     "compiles without one)", plan_devices},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef plan_opts[] = {
    {"threads", RS_T_INT, NULL, "bench: threads per run (default: the session's setting)", NULL},
    {"runs", RS_T_INT, "50", "bench: timed runs per batch size (the median is printed)", NULL},
    {"nodes", RS_T_BOOL, "off", "bench: each node's median time and oneDNN kernel too", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

static const rs_optdef onnx_opts[] = {
    {"opset", RS_T_INT, "17", "save: ONNX opset to write", NULL},
    {"dtype", RS_T_STRING, "float", "input/output/init: element type", NULL},
    {"seed", RS_T_INT, NULL, "init: random initial values from this seed (0: zeros)", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

#define A(n, k) {n, k, false, NULL}
#define AOPT(n, k) {n, k, true, NULL}
#define ACH(n, k, ch) {n, k, false, ch}

/* Collectives as `collective` and `bench` take them (rs_job_parse_op also takes nccl-tests' spellings). */
static const char *const coll_ops[] = {"broadcast", "reduce", "all_reduce", "scatter", "gather", "all_gather",
                                       "reduce_scatter", "all_to_all", "barrier", NULL};
static const char *const show_words[] = {"run", NULL};
static const char *const tp_demos[] = {"matmul", NULL};
static const char *const export_words[] = {"session", NULL};
static const char *const plan_words[] = {"show", "bench", NULL};
static const char *const device_words[] = {"cpu", "cuda", "cuda:0", "guard", NULL};

/* The words of a model spec after `seq` (engine/nn/spec.c parses them; "(" where arguments follow). */
static const char *const layer_words[] = {"linear(", "conv(", "maxpool(", "avgpool(", "relu", "gelu", "tanh",
                                          "flatten", "dropout(", "layernorm", "embed(", "attn(", "res[", "ctx=",
                                          "[", "]", NULL};

static const char *const gpt_words[] = {"layers=", "heads=", "dim=", "ctx=", "vocab=", "dropout=", NULL};

static const rs_formdef model_forms[] = {
    {"mlp", RS_A_WORD, NULL},
    {"seq", RS_A_WORD, layer_words},
    {"gpt", RS_A_WORD, gpt_words},
    {"onnx", RS_A_PATH, NULL},
    {"plan", RS_A_PATH, NULL},
    {NULL, 0, NULL},
};

static const rs_formdef data_forms[] = {
    {"digits", RS_A_NONE, NULL},
    {"fashion", RS_A_PATH, NULL},
    {"idx", RS_A_PATH, NULL},
    {"cifar", RS_A_PATH, NULL},
    {"csv", RS_A_PATH, NULL},
    {"text", RS_A_PATH, NULL},
    {NULL, 0, NULL},
};

const rs_cmddef rs_commands[] = {
    {"model", "models", "model NAME = mlp 784-256-10 | seq LAYERS... | gpt ...  build a model",
     "Builds a model and gives it a name. Three forms:\n"
     "  model m = mlp 784-256-10 [act=relu|gelu|tanh] [dropout=P] [in=1x28x28]\n"
     "  model c = seq conv(16,3,pad=1) relu maxpool(2) flatten linear(10)\n"
     "  model g = gpt [layers=4 heads=4 dim=128 ctx=64 vocab= dropout=0]\n"
     "Layers: linear(OUT) conv(OUT,K,stride=S,pad=P) maxpool(K) avgpool(K) relu gelu tanh flatten\n"
     "dropout(P) layernorm; [ ... ] groups layers into a block, res[ ... ] adds the block's\n"
     "input to its output. Text: seq ctx=T embed(VOCAB,WIDTH) ... attn(HEADS) gelu(tanh)\n"
     "linear(V,bias=0,tie=0.wte). gpt writes nanoGPT's model in those layers (show g lists\n"
     "them); its vocab= comes from the newest text data set. seed= sets the initial weights.\n"
     "  model m = onnx FILE.onnx    an imported ONNX graph\n"
     "  model p = plan FILE.plan    a compiled plan: eval and predict run it",
     true, "SPEC", {{0}}, 0, model_opts, true, rs_cmd_model, model_forms},
    {"data", "models", "data NAME = digits | fashion | idx F F | cifar F.. | csv F | text [F]  load a data set",
     "Loads a data set and gives it a name:\n"
     "  data d = digits [n=20000] [seed=1]  built-in handwritten digits, no download\n"
     "  data f = fashion                    Fashion-MNIST (dataset-fashion-mnist)\n"
     "  data x = idx IMAGES LABELS [TEST_IMAGES TEST_LABELS]\n"
     "                                      MNIST-format files (.gz too)\n"
     "  data c = cifar FILE...              CIFAR-10 binary batches\n"
     "  data t = csv FILE                   label first, then features\n"
     "  data s = text [FILE|fortunes] [ctx=64]\n"
     "                                      the built-in text, a file or fortunes;\n"
     "                                      windows of ctx characters\n"
     "Sources without a test part keep a sixth of the samples aside; text keeps its last tenth.",
     true, "SOURCE", {{0}}, 0, data_opts, true, rs_cmd_data, data_forms},
    {"show", "models", "show NAME | show run N    describe a model, a data set or a run", NULL, false, NULL,
     {ACH("NAME", RS_A_NAME, show_words), AOPT("N", RS_A_WORD)}, 2, NULL, false, rs_cmd_show, NULL},
    {"ls", "models", "ls    list the session's models and data sets", NULL, false, NULL, {{0}}, 0, NULL, false,
     rs_cmd_ls, NULL},
    {"drop", "models", "drop NAME    forget a model or data set", NULL, false, NULL, {A("NAME", RS_A_NAME)}, 1, NULL,
     false, rs_cmd_drop, NULL},
    {"to", "models", "to MODEL DEVICE    move a model to cpu, cuda, cuda:N or guard (torch's model.to)",
     "Moves a model's weights to another device, as torch's model.to(device): they are copied\n"
     "through host memory, the gradients start again at zero, and from then on its passes run on\n"
     "that device's kernels (eval, predict, train, save and export read it back as needed).\n"
     "  to m cuda        the session's GPU (refused, with the reason, where there is none)\n"
     "  to m cpu         back\n"
     "  to m guard       the test device: the CPU's kernels on memory sealed between kernel calls,\n"
     "                   so any code that reads device memory directly stops at once\n"
     "`show m` says where a model lives; `model m = ... device=` builds it there.",
     false, NULL, {A("MODEL", RS_A_MODEL), ACH("DEVICE", RS_A_WORD, device_words)}, 2, NULL, false, rs_cmd_to, NULL},
    {"reset", "models", "reset MODEL    back to its initial weights (from its seed), as `model` made them",
     "Training continues from a model's current weights; `reset m` puts back the weights `model m = ...`\n"
     "made from its seed, so that the next `train` starts afresh. Refused while a background run trains it.",
     false, NULL, {A("MODEL", RS_A_MODEL)}, 1, NULL, false, rs_cmd_reset, NULL},
    {"train", "training", "train MODEL on DATA [epochs=1] [batch=64] [lr=] [opt=adam] ...    train in this process",
     "Trains MODEL on DATA's training part and evaluates on its test part after each epoch.\n"
     "Ctrl-C stops at the next step boundary; the model keeps the weights of the last finished step.\n"
     "Across ranks: mode=ddp ranks=2 (DistributedDataParallel: gradients all-reduced in buckets during\n"
     "backward), mode=fsdp zero=1|2|3 (ZeRO: optimizer state, gradients, parameters sharded), mode=dp\n"
     "(DataParallel: threads as replicas in this process), mode=pipeline micro=4 schedule=1f1b (the layers\n"
     "cut into a stage per rank, micro-batches flowing through them; the bubble is measured). batch is the\n"
     "global batch; each data-parallel rank takes batch/ranks of it, so every mode trains the model one\n"
     "process would. At the end each rank's memory by pool is printed, measured, beside its formula.",
     false, NULL, {A("MODEL", RS_A_MODEL), A("on", RS_A_KEYWORD), A("DATA", RS_A_DATA)}, 3, train_opts, false,
     rs_cmd_train, NULL},
    {"eval", "training", "eval MODEL on DATA    accuracy and loss", NULL, false, NULL,
     {A("MODEL", RS_A_MODEL), A("on", RS_A_KEYWORD), A("DATA", RS_A_DATA)}, 3, eval_opts, false, rs_cmd_eval, NULL},
    {"generate", "training", "generate MODEL [prompt=\"...\"] [n=200] [temp=0.8] [top_k=40]    sample text",
     "Samples characters from a language model (model g = gpt, trained on text) and prints each as it is\n"
     "drawn; Ctrl-C stops. With the KV cache (cache=on) each new character runs every layer on one\n"
     "position and attention reads the earlier keys and values from the cache; cache=off recomputes the\n"
     "whole context per character, as nanoGPT's generate does. Both give the same text.",
     false, NULL, {A("MODEL", RS_A_MODEL)}, 1, generate_opts, false, rs_cmd_generate, NULL},
    {"predict", "training", "predict MODEL on DATA [n=4]    show samples with predicted and true labels", NULL,
     false, NULL, {A("MODEL", RS_A_MODEL), A("on", RS_A_KEYWORD), A("DATA", RS_A_DATA)}, 3, predict_opts, false,
     rs_cmd_predict, NULL},
    {"save", "models", "save MODEL FILE.safetensors    write the weights", NULL, false, NULL,
     {A("MODEL", RS_A_MODEL), A("FILE", RS_A_PATH)}, 2, NULL, false, rs_cmd_save, NULL},
    {"load", "models", "load NAME FILE.safetensors    read weights (builds the model if NAME is new)", NULL, false,
     NULL, {A("NAME", RS_A_WORD), A("FILE", RS_A_PATH)}, 2, NULL, false, rs_cmd_load, NULL},
    {"collective", "ranks",
     "collective OP [ranks=2] [count=2|size=] [backend=shm] [algo=] [op=sum]    one operation on real ranks",
     "Starts the ranks, runs one collective and prints each rank's input and result, checked against a\n"
     "serial computation. OP: broadcast reduce all_reduce scatter gather all_gather reduce_scatter\n"
     "all_to_all barrier. Inputs: rank r holds 1+r, 10+r, 19+r, ... (a scatter's root 0, 1, 2, ...).\n"
     "  collective scatter ranks=2              [0,1] to rank 0, [2,3] to rank 1\n"
     "  collective reduce ranks=2 op=product    [1,10] x [2,11] = [2,110] on rank 0\n"
     "  collective all_reduce ranks=4 algo=ring size=1M\n"
     "Every algorithm step goes to the session log (sql \"SELECT * FROM events WHERE kind='coll_step'\").",
     false, NULL, {ACH("OP", RS_A_WORD, coll_ops)}, 1, collective_opts, false, rs_cmd_collective, NULL},
    {"bench", "ranks", "bench OP [ranks=2] [sizes=8..64M] [backend=shm]    bandwidth table, as nccl-tests prints",
     "Times OP at each size from LO to HI (doubling) on real ranks and prints nccl-tests' columns:\n"
     "time (us, slowest rank), algbw = bytes/time and busbw = algbw x the bus factor (all_reduce\n"
     "2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; others 1), and #wrong, the elements\n"
     "that differ from a serial computation. Rows go to the session log as metrics.",
     false, NULL, {ACH("OP", RS_A_WORD, coll_ops)}, 1, bench_opts, false, rs_cmd_bench, NULL},
    {"p2p", "ranks", "p2p [ranks=2] [size=1M] [backend=shm]    blocking vs immediate send/recv, with timings",
     NULL, false, NULL, {{0}}, 0, p2p_opts, false, rs_cmd_p2p, NULL},
    {"world", "ranks", "world [ranks=2] [nodes=1] [store=rank0]    start ranks and show who each one is",
     "Starts the ranks; each prints what it was told (torchrun's RANK,\n"
     "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK; under backend=mpi,\n"
     "Open MPI's own), and an all_reduce of ones proves they all joined.\n"
     "nodes=3 plays three machines on this one: LOCAL_RANK starts again at 0 on\n"
     "each. store=rank0 leaves the rendezvous to rank 0, as when ranks are\n"
     "started by hand, and prints the shell lines that would start them.",
     false, NULL, {{0}}, 0, world_opts, false, rs_cmd_world, NULL},
    {"tp", "ranks", "tp matmul [ranks=2] [split=both|cols|rows]    the lecture's tensor-parallel matrix product",
     "Splits Y = A . B over real ranks as the lecture's example does (A 2x4 = 0..7, B 4x2 = 8..15):\n"
     "split=cols gives rank r B's columns r n/W.. and an all_gather sets the blocks Y_r side by side;\n"
     "split=rows gives rank r A's columns and B's rows r k/W.. (the inner dimension), and an all_reduce\n"
     "adds the partial products. Megatron's MLP is these two in a row (train ... mode=tensor).\n"
     "  tp matmul ranks=2                  [[76],[252]] || [[82],[274]], [[10,11],[82,91]] + [[66,71],[170,183]]\n"
     "  tp matmul ranks=4 split=rows k=8   four partial products, one all_reduce",
     false, NULL, {ACH("WHAT", RS_A_WORD, tp_demos)}, 1, tp_opts, false, rs_cmd_tp, NULL},
    {"pi", "ranks", "pi [ranks=2] [n=] [method=series] [backend=shm]    the lecture's pi on real ranks",
     "The annex program of the lecture: pi = 4 arctan(1) = 4 (1 - 1/3 + 1/5 - ...). Rank r sums\n"
     "terms r, r+W, r+2W, ... of n (default n = ranks: one term each, as the lecture's program),\n"
     "a reduce (SUM) adds the shares on rank 0, which prints pi and its error. method=midpoint\n"
     "integrates 4/(1+x^2) over [0,1] by the midpoint rule instead (MPICH's cpi.c): its error\n"
     "falls as 1/n^2, the series' as 1/n. The REPL sums the same terms in one process beside it.",
     false, NULL, {{0}}, 0, pi_opts, false, rs_cmd_pi, NULL},
    {"backends", "ranks", "backends    which operations each backend has, on CPU and GPU", NULL, false, NULL, {{0}}, 0,
     NULL, false, rs_cmd_backends, NULL},
    {"view", "ranks", "view run N | view serve    replay a logged run; watch the server live",
     "Replays run N of the session log (collective, bench, train across ranks) in the live dashboard's\n"
     "panes, at speed= times real time. Keys: space pauses, + and - change the speed, Left and Right\n"
     "scrub back and forth, tab moves the focus between panes, q leaves. Without a terminal it prints\n"
     "the run's final frame as text (as wide as the terminal, 80 in scripts; 30 rows).\n"
     "`view serve`: the serve pane, live until a key is pressed: per model version of the server `serve`\n"
     "started, the figures `serve` prints (requests/s over 10 s, p50/p99 latency, queue p50, queue now,\n"
     "ok/failed, each rank's line) and a histogram of the batches by size. Without a terminal: one frame.",
     false, NULL, {{"run|serve", RS_A_WORD, false, view_words}, {"N", RS_A_INT, true, NULL}}, 2, view_opts, false,
     rs_cmd_view, NULL},
    {"jobs", "ranks", "jobs [stop=N]    runs going on in the background (q in the live view sends one there)",
     "Lists the runs that left the live view with `q` at the prompt and go on in the background: run\n"
     "number, kind, ranks, time so far. Each one's end is printed at the prompt when its ranks finish.\n"
     "While a training run is in the background its model (and data) cannot be trained, dropped,\n"
     "loaded into or rebound; eval, predict and show see the weights from before the run.\n"
     "`jobs stop=N` stops run N; `quit` stops every one (Ctrl-C at the prompt does not).",
     false, NULL, {{0}}, 0, jobs_opts, false, rs_cmd_jobs, NULL},
    {"serve", "models", "serve MODEL|FILE.onnx|FILE.plan|REPO [http=8000] [grpc=8001] [max_batch=64] [delay=500us] ... | serve stop    Triton-compatible server",
     "Serves a session model, an ONNX file, a compiled plan or a Triton model repository over KServe v2 HTTP and gRPC\n"
     "(Triton's clients work as they are) with Prometheus metrics, in the background while the prompt\n"
     "goes on. A model or file is first written into a repository (NAME/config.pbtxt, NAME/1/model.onnx).\n"
     "Requests are merged by a dynamic batcher (max_batch=, delay=) and run on instances= threads.\n"
     "A GPT is served decoupled: one response per generated token over gRPC ModelStreamInfer, and\n"
     "HTTP POST /v2/models/NAME/generate and generate_stream (server-sent events).\n"
     "ranks=2 mode=pipeline|tensor serves it across rank processes (stages or shards), as one process answers.\n"
     "A plan (model p = plan FILE, or FILE.plan) is served as NAME/1/model.plan, platform ringside_plan,\n"
     "batches up to its compiled batch, in one process.\n"
     "`serve` alone shows what is served and its counters (`view serve`: live); `serve stop` drains and stops.\n"
     "Standalone: ringside serve --repo DIR [--http PORT] [--grpc PORT] [--metrics PORT] [--host ADDR].",
     false, NULL, {{"SRC", RS_A_PATH, true, serve_words}}, 1, serve_opts, false, rs_cmd_serve, NULL},
    {"infer", "models", "infer NAME [n=16] [clients=16] | infer GPT prompt=TEXT [tokens=40]    requests to the running server",
     "Sends requests to a model the running server holds, through its scheduler as HTTP and gRPC requests\n"
     "go (n= random inputs from clients= threads at once, so the dynamic batcher merges them), prints how\n"
     "they were batched and checks each answer against the session model of that name run alone.\n"
     "A GPT streams its tokens as they are drawn. `serve` then shows the counters and latencies.",
     false, NULL, {{"NAME", RS_A_WORD, true, NULL}}, 1, infer_opts, false, rs_cmd_infer, NULL},
    {"export", "models", "export MODEL FILE.onnx [opset=17] | export session N FILE.ring    ONNX, or a session as a script",
     "  export MODEL FILE.onnx [opset=17] [softmax=on]\n"
     "Writes MODEL as an ONNX file: Gemm, Conv, MaxPool, AveragePool, Relu, Gelu, Tanh, Flatten,\n"
     "LayerNormalization; a GPT's Gather, MatMul and causal attention (int64 tokens in, (batch, T, V)\n"
     "logits out); weights as initializers named after the layers; a symbolic batch dimension.\n"
     "ONNX Runtime runs it with ringside's answers; `onnx check FILE` says what the ONNX checker would.\n"
     "  export session N FILE.ring\n"
     "Writes the commands of a past session of the log as a script that `play` or `ringside FILE` runs.",
     false, NULL, {ACH("MODEL|session", RS_A_WORD, export_words), A("FILE|N", RS_A_WORD), AOPT("FILE", RS_A_PATH)}, 3, export_opts,
     false, rs_cmd_export, NULL},
    {"onnx", "models", "onnx show|check FILE | onnx new|input|output|init|node|save ...    inspect or build ONNX",
     "  onnx show FILE                 inputs, outputs, initializers and nodes\n"
     "  onnx check FILE                the structural checks of the ONNX checker\n"
     "Building a graph by hand:\n"
     "  onnx new gemm                  start a graph\n"
     "  onnx input X N,4               an input of shape [N, 4] (N: symbolic batch)\n"
     "  onnx init W 3,4 seed=1         an initializer (seed 0: zeros)\n"
     "  onnx init B 3\n"
     "  onnx node Gemm X,W,B Y \"transB=1\"\n"
     "  onnx output Y N,3\n"
     "  onnx save gemm.onnx            write it and check it\n"
     "Import: model m = onnx FILE (a trainable model when the graph is a plain layer sequence).",
     false, NULL, {A("WHAT", RS_A_WORD), AOPT("A", RS_A_STRING), AOPT("B", RS_A_STRING), AOPT("C", RS_A_STRING),
                   AOPT("D", RS_A_STRING)},
     5, onnx_opts, false, rs_cmd_onnx, NULL},
    {"compile", "models", "compile MODEL|FILE.onnx [precision=fp32|bf16|int8] [batch=64] [device=cpu|cuda] -> FILE.plan    an inference plan",
     "Compiles a session model or an ONNX file for this CPU, as TensorRT builds an engine: views and\n"
     "dead nodes removed, a folded BatchNorm's scale and shift folded into the conv before it,\n"
     "activations and residual adds fused into the conv or inner product (oneDNN post-ops), every value\n"
     "placed in one arena whose bytes are reused once a value is dead, weights reordered into the\n"
     "layout and precision oneDNN chose for this ISA. It prints each rewrite, the precision per node,\n"
     "the peak activation memory with and without reuse and the build time, and writes FILE.plan.\n"
     "  compile c -> c.plan\n"
     "  compile cnn.onnx precision=bf16 batch=64 -> cnn16.plan\n"
     "  compile c precision=int8 calib=f -> c8.plan\n"
     "  compile c precision=int8 calib=f calib_method=entropy -> c8e.plan\n"
     "int8 is calibrated on f's training samples (calib_n of them): each conv and inner product's\n"
     "input scale is 127 / a threshold of |x|: minmax takes the largest, percentile the calib_pct\n"
     "percentile, entropy the one whose clipped, 128-level histogram is closest to the original\n"
     "(least KL divergence, TensorRT's default); larger values saturate. compile prints the int8\n"
     "plan's accuracy on f's test part beside the model's.\n"
     "device=cuda makes a plan for a GPU (cuDNN convolutions and pools, cuBLASLt products, the\n"
     "engine's CUDA kernels for the rest; fp32 or bf16) on any machine; it runs where there is one.\n"
     "Then: plan show FILE, plan bench FILE, model p = plan FILE (eval p on d, predict p on d).",
     false, NULL, {A("SRC", RS_A_PATH), A("->", RS_A_KEYWORD), A("FILE", RS_A_PATH)}, 3, compile_opts, false,
     rs_cmd_compile, NULL},
    {"plan", "models", "plan show|bench FILE.plan    what a compiled plan holds, or how fast it runs",
     "  plan show FILE    what it was built for (ISA, oneDNN, precision; or cuda's\n"
     "                    target, cuDNN, cuBLASLt: read without a GPU too), its\n"
     "                    nodes with post-ops, precision and kernel, its memory\n"
     "                    plan (values, offsets, lifetimes) and its rewrites\n"
     "  plan bench FILE   median time per run at batch 1 and at its batch\n"
     "                    (nodes=on: each node's median and oneDNN kernel too)\n"
     "bench/plan.sh runs ONNX Runtime beside it on the same ONNX file.",
     false, NULL, {ACH("WHAT", RS_A_WORD, plan_words), AOPT("FILE", RS_A_PATH)}, 2, plan_opts, false, rs_cmd_plan,
     NULL},
    {"runs", "session log", "runs [n=20]    recent runs from the session log", NULL, false, NULL, {{0}}, 0, runs_opts,
     false, rs_cmd_runs, NULL},
    {"compare", "session log", "compare N M    two runs' settings and results side by side", NULL, false, NULL,
     {A("N", RS_A_INT), A("M", RS_A_INT)}, 2, NULL, false, rs_cmd_compare, NULL},
    {"sql", "session log", "sql \"SELECT ...\"    query the session log (read-only)", NULL, false, NULL,
     {A("QUERY", RS_A_STRING)}, 1, NULL, false, rs_cmd_sql, NULL},
    {"history", "session log", "history [n=20]    recent commands", NULL, false, NULL, {{0}}, 0, history_opts, false,
     rs_cmd_history, NULL},
    {"replay", "session log", "replay SESSION    run a past session's commands again", NULL, false, NULL,
     {A("SESSION", RS_A_INT)}, 1, NULL, false, rs_cmd_replay, NULL},
    {"play", "playback", "play [N|NAME|FILE] [auto|step]    the tutorials, or play one",
     "`play` alone lists the tutorials (so does `help play`); `play 2`, `play ranks`\n"
     "or `play 02-ranks` plays one; `play FILE.ring` plays a script of your own.\n"
     "Modes: interactive (pause waits for Enter), auto (no waiting: a class\n"
     "watches, or a test runs it), step (asks before each command: Enter runs it,\n"
     "s skips it, q stops). What the tutorial changes with `set` is put back when\n"
     "it ends or stops.",
     false, NULL, {{"TUTORIAL", RS_A_TUTORIAL, true, NULL}, {"MODE", RS_A_WORD, true, play_modes}}, 2, play_opts,
     false, rs_cmd_play, NULL},
    {"expect", "playback", "expect CONDITION    check the last result's numbers",
     "Checks numbers of the last command that gave some; in a script or `play`, a\n"
     "check that fails stops it, and ringside exits non-zero.\n"
     "  expect accuracy >= 0.85              a value of the command\n"
     "  expect rank 0 = [2, 110]             a rank's buffer, element by element\n"
     "  expect rank 1 sent_bytes > 0         a value of one rank\n"
     "  expect sent_bytes per rank = 48      every rank's ([64, 32]: rank by rank)\n"
     "  expect memory.optimizer per rank ~= formula within 1%\n"
     "  expect bubble ~= 0.43 within 15%     ~= takes within 0.01, or within 1%\n"
     "Comparisons: = != < <= > >= ~= (= is equal to 6 significant digits). On the\n"
     "right: a number (85% is 0.85), [a, vector] or a name; a name the result\n"
     "lacks is read as NAME.LEFT (formula above: formula.memory.optimizer). A name\n"
     "it does not have lists the names it has; docs/repl.md lists them all.",
     false, "CONDITION", {{0}}, 0, NULL, false, rs_cmd_expect, NULL},
    {"say", "playback", "say \"TEXT\"    narration in a tutorial", NULL, false, NULL, {A("TEXT", RS_A_STRING)}, 1,
     NULL, false, rs_cmd_say, NULL},
    {"pause", "playback", "pause    wait for Enter (in a tutorial)", NULL, false, NULL, {{0}}, 0, NULL, false,
     rs_cmd_pause, NULL},
    {"clear", "playback", "clear    clear the screen (on a terminal; elsewhere nothing)",
     "Clears the terminal, as clear(1) does, so the next part of a lesson starts on a fresh screen.\n"
     "Where the output is not a terminal (a script's output in a file or a pipe) it prints nothing.",
     false, NULL, {{0}}, 0, NULL, false, rs_cmd_clear, NULL},
    {"set", "session", "set [threads=N] [seed=N] [color=on|off] [device=cpu|cuda[:N]|guard]    session settings (none: show them)", NULL,
     false, NULL, {{0}}, 0, set_opts, false, rs_cmd_set, NULL},
    {"version", "session", "version    version, BLAS kernel, threads", NULL, false, NULL, {{0}}, 0, NULL, false,
     rs_cmd_version, NULL},
    {"devices", "session", "devices    is CUDA available: GPUs, memory, compute capability, versions", NULL, false, NULL,
     {{0}}, 0, NULL, false, rs_cmd_devices, NULL},
    {"help", "session", "help [COMMAND]    this list, or one command in full", NULL, false, NULL,
     {AOPT("COMMAND", RS_A_COMMAND)}, 1, NULL, false, rs_cmd_help, NULL},
    {"quit", "session", "quit    leave (Ctrl-D too)", NULL, false, NULL, {{0}}, 0, NULL, false, rs_cmd_quit, NULL},
    {NULL, NULL, NULL, NULL, false, NULL, {{0}}, 0, NULL, false, NULL, NULL},
};

const rs_cmddef *rs_cmd_find(const char *name)
{
    for (const rs_cmddef *c = rs_commands; c->name; c++)
        if (!strcmp(c->name, name)) return c;
    return NULL;
}
