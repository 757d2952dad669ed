/* The one command table (see cmd.h): every command's row. Adding a command (docs/add-a-command.md):
 * its row here, its options in cmdtab_opts.c, its handler in the cmd_*.c file of its group; parsing,
 * help and completion pick it up from this table. */
#include <stdio.h>
#include <string.h>

#include "cmdtab.h"
#include "dist/pg/pg.h"
#include "engine/nn/spec.h"

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
int rs_cmd_plot(rs_session *, const rs_call *);
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

/* Words positional arguments take besides what their kind names (the handlers read them). */
static const char *const show_words[] = {"run", NULL};
static const char *const tp_demos[] = {"matmul", NULL};
static const char *const export_words[] = {"session", "config", NULL};
static const char *const plan_words[] = {"show", "bench", NULL};
static const char *const view_words[] = {"run", "serve", NULL};
static const char *const serve_words[] = {"stop", NULL};

#define A(n, k) {.name = n, .kind = k}
#define AOPT(n, k) {.name = n, .kind = k, .optional = true}
#define ACH(n, k, ch) {.name = n, .kind = k, .choices = ch}
/* A command's positional arguments, and their count from the same list. */
#define ARGS(...) .args = {__VA_ARGS__}, .nargs = (int)(sizeof((rs_argdef[]){__VA_ARGS__}) / sizeof(rs_argdef))

/* The files an argument reads, for completion (rs_argdef.exts). */
static const char *const onnx_files[] = {".onnx", NULL};
static const char *const plan_files[] = {".plan", NULL};
static const char *const ring_files[] = {".ring", NULL};
static const char *const safetensors_files[] = {".safetensors", NULL};

static const char *const gpt_words[] = {"layers=", "heads=", "dim=", "ctx=", "vocab=", "dropout=", NULL};

static const rs_formdef model_forms[] = {
    {.word = "mlp", .then = RS_A_WORD},
    {.word = "seq", .then = RS_A_WORD, .words_fn = rs_spec_words}, /* the layers' descriptors and the spec's syntax */
    {.word = "gpt", .then = RS_A_WORD, .words = gpt_words},
    {.word = "onnx", .then = RS_A_PATH, .exts = onnx_files},
    {.word = "plan", .then = RS_A_PATH, .exts = plan_files},
    {.word = NULL},
};

static const rs_formdef data_forms[] = {
    {.word = "digits", .then = RS_A_NONE},
    {.word = "fashion", .then = RS_A_PATH},
    {.word = "idx", .then = RS_A_PATH},
    {.word = "cifar", .then = RS_A_PATH},
    {.word = "csv", .then = RS_A_PATH},
    {.word = "text", .then = RS_A_PATH},
    {.word = NULL},
};

/* The layers and activations as their descriptors spell them (engine/nn/layers.def). */
static const char *model_help_list(char *buf, size_t n)
{
    char acts[256];
    snprintf(buf, n, "Layers: %s. Activations (mlp act=): %s.", rs_layer_synopses(),
             rs_spec_activations(acts, sizeof acts));
    return buf;
}

const rs_cmddef rs_commands[] = {
    {
        .name = "model",
        .group = "models",
        .synopsis = "model NAME = mlp 784-256-10 | seq LAYERS... | gpt ...  build a model",
        .help = "Builds a model and gives it a name. Three forms:\n"
                "  model m = mlp 784-256-10 [act=ACTIVATION] [dropout=P] [in=1x28x28]\n"
                "  model c = seq conv(16,3,pad=1) relu maxpool(2) flatten linear(10)\n"
                "  model g = gpt [layers=4 heads=4 dim=128 ctx=64 vocab= dropout=0]\n"
                "[ ... ] groups layers into a block, res[ ... ] adds the block's\n"
                "input to its output. Text: seq ctx=T embed(VOCAB,WIDTH) ... attn(HEADS) gelu(tanh)\n"
                "linear(V,bias=0,tie=0.wte). gpt writes nanoGPT's model in those layers (show g lists\n"
                "them); its vocab= comes from the newest text data set. seed= sets the initial weights.\n"
                "  model m = onnx FILE.onnx    an imported ONNX graph\n"
                "  model p = plan FILE.plan    a compiled plan: eval and predict run it",
        .binding = true,
        .rest_name = "SPEC",
        .opts = rs_opts_model,
        .opts_in_rest = true,
        .fn = rs_cmd_model,
        .forms = model_forms,
        .help_list = model_help_list,
    },
    {
        .name = "data",
        .group = "models",
        .synopsis = "data NAME = digits | fashion | idx F F | cifar F.. | csv F | text [F]  load a data set",
        .help = "Loads a data set and gives it a name:\n"
                "  data d = digits [n=20000] [seed=1]  built-in handwritten digits, no download\n"
                "  data f = fashion                    Fashion-MNIST (dataset-fashion-mnist)\n"
                "  data x = idx IMAGES LABELS [TEST_IMAGES TEST_LABELS]\n"
                "                                      MNIST-format files (.gz too)\n"
                "  data c = cifar FILE...              CIFAR-10 binary batches\n"
                "  data t = csv FILE                   label first, then features\n"
                "  data s = text [FILE|fortunes] [ctx=64]\n"
                "                                      the built-in text, a file or fortunes;\n"
                "                                      windows of ctx bytes (the tokens)\n"
                "Sources without a test part keep a sixth of the samples aside; text keeps its last tenth.",
        .binding = true,
        .rest_name = "SOURCE",
        .opts = rs_opts_data,
        .opts_in_rest = true,
        .fn = rs_cmd_data,
        .forms = data_forms,
    },
    {
        .name = "show",
        .group = "models",
        .synopsis = "show NAME | show run N    describe a model, a data set or a run",
        ARGS(ACH("NAME", RS_A_NAME, show_words), AOPT("N", RS_A_WORD)),
        .fn = rs_cmd_show,
    },
    {
        .name = "ls",
        .group = "models",
        .synopsis = "ls    list the session's models and data sets",
        .fn = rs_cmd_ls,
    },
    {
        .name = "drop",
        .group = "models",
        .synopsis = "drop NAME    forget a model or data set",
        ARGS(A("NAME", RS_A_NAME)),
        .fn = rs_cmd_drop,
    },
    {
        .name = "to",
        .group = "models",
        .synopsis = "to MODEL DEVICE    move a model to cpu, cuda, cuda:N or guard (torch's model.to)",
        .help = "Moves a model's weights to another device, as torch's model.to(device): they are copied\n"
                "through host memory, the gradients start again at zero, and from then on its passes run on\n"
                "that device's kernels (eval, predict, train, save and export read it back as needed).\n"
                "  to m cuda        the session's GPU (refused, with the reason, where there is none)\n"
                "  to m cpu         back\n"
                "  to m guard       the test device: the CPU's kernels on memory sealed between kernel calls,\n"
                "                   so any code that reads device memory directly stops at once\n"
                "`show m` says where a model lives; `model m = ... device=` builds it there.",
        ARGS(A("MODEL", RS_A_MODEL), ACH("DEVICE", RS_A_WORD, rs_words_device)),
        .fn = rs_cmd_to,
    },
    {
        .name = "reset",
        .group = "models",
        .synopsis = "reset MODEL    back to its initial weights (from its seed), as `model` made them",
        .help = "Training continues from a model's current weights; `reset m` puts back the weights `model m = ...`\n"
                "made from its seed, so that the next `train` starts afresh. Refused while a background run trains it.",
        ARGS(A("MODEL", RS_A_MODEL)),
        .fn = rs_cmd_reset,
    },
    {
        .name = "train",
        .group = "training",
        .synopsis = "train MODEL on DATA [epochs=1] [batch=64] [lr=] [opt=adam] ...    train in this process",
        .help = "Trains MODEL on DATA's training part and evaluates on its test part after each epoch.\n"
                "Ctrl-C stops at the next step boundary; the model keeps the weights of the last finished step.\n"
                "Across ranks: mode=ddp ranks=2 (DistributedDataParallel: gradients all-reduced in buckets during\n"
                "backward), mode=fsdp zero=1|2|3 (ZeRO: optimizer state, gradients, parameters sharded), mode=dp\n"
                "(DataParallel: threads as replicas in this process), mode=pipeline micro=4 schedule=1f1b (the layers\n"
                "cut into a stage per rank, micro-batches flowing through them; the bubble is measured). batch is the\n"
                "global batch; each data-parallel rank takes batch/ranks of it, so every mode trains the model one\n"
                "process would. At the end each rank's memory by pool is printed, measured, beside its formula.",
        ARGS(A("MODEL", RS_A_MODEL), A("on", RS_A_KEYWORD), A("DATA", RS_A_DATA)),
        .opts = rs_opts_train,
        .fn = rs_cmd_train,
    },
    {
        .name = "eval",
        .group = "training",
        .synopsis = "eval MODEL on DATA    accuracy and loss",
        ARGS(A("MODEL", RS_A_MODEL), A("on", RS_A_KEYWORD), A("DATA", RS_A_DATA)),
        .opts = rs_opts_eval,
        .fn = rs_cmd_eval,
    },
    {
        .name = "generate",
        .group = "training",
        .synopsis = "generate MODEL [prompt=\"...\"] [n=200] [temp=0.8] [top_k=40]    sample text",
        .help = "Samples text from a language model (model g = gpt, trained on text) and prints each token as it is\n"
                "drawn, unaltered; Ctrl-C stops. The tokens are the text's distinct bytes: a character of ASCII text\n"
                "is one, other UTF-8 characters are several, and a sample may cut one. Each token is drawn from the\n"
                "logits of the last ctx tokens, as nanoGPT's generate does. With the KV cache (cache=on) each token\n"
                "runs every layer on one position while the text fits the context; past it the window slides and is\n"
                "recomputed in one batched forward per token. cache=off recomputes the window for every token. Both\n"
                "give the same text at any length. window=shift is faster past the context but its text differs:\n"
                "when the context is full it keeps the newest half in the cache and steps on. A model with a layer\n"
                "that has no one-position form (an imported ONNX graph) is recomputed, with the same text.",
        ARGS(A("MODEL", RS_A_MODEL)),
        .opts = rs_opts_generate,
        .fn = rs_cmd_generate,
    },
    {
        .name = "predict",
        .group = "training",
        .synopsis = "predict MODEL on DATA [n=4]    show samples with predicted and true labels",
        ARGS(A("MODEL", RS_A_MODEL), A("on", RS_A_KEYWORD), A("DATA", RS_A_DATA)),
        .opts = rs_opts_predict,
        .fn = rs_cmd_predict,
    },
    {
        .name = "save",
        .group = "models",
        .synopsis = "save MODEL FILE.safetensors    write the weights",
        ARGS(A("MODEL", RS_A_MODEL), A("FILE", RS_A_PATH)),
        .fn = rs_cmd_save,
    },
    {
        .name = "load",
        .group = "models",
        .synopsis = "load NAME FILE.safetensors    read weights (builds the model if NAME is new)",
        ARGS(A("NAME", RS_A_WORD), {.name = "FILE", .kind = RS_A_PATH, .exts = safetensors_files}),
        .fn = rs_cmd_load,
    },
    {
        .name = "collective",
        .group = "ranks",
        .synopsis = "collective OP [ranks=2] [count=2|size=] [backend=shm] [algo=] [op=sum]    one operation on real ranks",
        .help = "Starts the ranks, runs one collective and prints each rank's input and result, checked against a\n"
                "serial computation. OP: broadcast reduce all_reduce scatter gather all_gather reduce_scatter\n"
                "all_to_all barrier. Inputs: rank r holds 1+r, 10+r, 19+r, ... (a scatter's root 0, 1, 2, ...).\n"
                "  collective scatter ranks=2              [0,1] to rank 0, [2,3] to rank 1\n"
                "  collective reduce ranks=2 op=product    [1,10] x [2,11] = [2,110] on rank 0\n"
                "  collective all_reduce ranks=4 algo=ring size=1M\n"
                "Every algorithm step goes to the session log (sql \"SELECT * FROM events WHERE kind='coll_step'\").",
        ARGS(ACH("OP", RS_A_WORD, RS_PG_COLLECTIVE_NAMES)),
        .opts = rs_opts_collective,
        .fn = rs_cmd_collective,
    },
    {
        .name = "bench",
        .group = "ranks",
        .synopsis = "bench OP [ranks=2] [sizes=8..64M] [backend=shm]    bandwidth table, as nccl-tests prints",
        .help = "Times OP at each size from LO to HI (doubling) on real ranks and prints nccl-tests' columns:\n"
                "time (us, slowest rank), algbw = bytes/time and busbw = algbw x the bus factor (all_reduce\n"
                "2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; others 1), and #wrong, the elements\n"
                "that differ from a serial computation. Rows go to the session log as metrics.",
        ARGS(ACH("OP", RS_A_WORD, RS_PG_COLLECTIVE_NAMES)),
        .opts = rs_opts_bench,
        .fn = rs_cmd_bench,
    },
    {
        .name = "p2p",
        .group = "ranks",
        .synopsis = "p2p [ranks=2] [size=1M] [backend=shm]    blocking vs immediate send/recv, with timings",
        .opts = rs_opts_p2p,
        .fn = rs_cmd_p2p,
    },
    {
        .name = "world",
        .group = "ranks",
        .synopsis = "world [ranks=2] [nodes=1] [store=rank0]    start ranks and show who each one is",
        .help = "Starts the ranks; each prints what it was told (torchrun's RANK,\n"
                "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK; under backend=mpi,\n"
                "Open MPI's own), and an all_reduce of ones proves they all joined.\n"
                "nodes=3 plays three machines on this one: LOCAL_RANK starts again at 0 on\n"
                "each. store=rank0 leaves the rendezvous to rank 0, as when ranks are\n"
                "started by hand, and prints the shell lines that would start them.",
        .opts = rs_opts_world,
        .fn = rs_cmd_world,
    },
    {
        .name = "tp",
        .group = "ranks",
        .synopsis = "tp matmul [ranks=2] [split=both|cols|rows]    the lecture's tensor-parallel matrix product",
        .help = "Splits Y = A . B over real ranks as the lecture's example does (A 2x4 = 0..7, B 4x2 = 8..15):\n"
                "split=cols gives rank r B's columns r n/W.. and an all_gather sets the blocks Y_r side by side;\n"
                "split=rows gives rank r A's columns and B's rows r k/W.. (the inner dimension), and an all_reduce\n"
                "adds the partial products. Megatron's MLP is these two in a row (train ... mode=tensor).\n"
                "  tp matmul ranks=2                  [[76],[252]] || [[82],[274]], [[10,11],[82,91]] + [[66,71],[170,183]]\n"
                "  tp matmul ranks=4 split=rows k=8   four partial products, one all_reduce",
        ARGS(ACH("WHAT", RS_A_WORD, tp_demos)),
        .opts = rs_opts_tp,
        .fn = rs_cmd_tp,
    },
    {
        .name = "pi",
        .group = "ranks",
        .synopsis = "pi [ranks=2] [n=] [method=series] [backend=shm]    the lecture's pi on real ranks",
        .help = "The annex program of the lecture: pi = 4 arctan(1) = 4 (1 - 1/3 + 1/5 - ...). Rank r sums\n"
                "terms r, r+W, r+2W, ... of n (default n = ranks: one term each, as the lecture's program),\n"
                "a reduce (SUM) adds the shares on rank 0, which prints pi and its error. method=midpoint\n"
                "integrates 4/(1+x^2) over [0,1] by the midpoint rule instead (MPICH's cpi.c): its error\n"
                "falls as 1/n^2, the series' as 1/n. The REPL sums the same terms in one process beside it.",
        .opts = rs_opts_pi,
        .fn = rs_cmd_pi,
    },
    {
        .name = "backends",
        .group = "ranks",
        .synopsis = "backends    which operations each backend has, on CPU and GPU",
        .fn = rs_cmd_backends,
    },
    {
        .name = "view",
        .group = "ranks",
        .synopsis = "view run N | view serve    replay a logged run; watch the server live",
        .help = "Replays run N of the session log (collective, bench, train across ranks) in the live dashboard's\n"
                "panes, at speed= times real time. Keys: space pauses, + and - change the speed, Left and Right\n"
                "scrub back and forth, tab moves the focus between panes, q leaves. Without a terminal it prints\n"
                "the run's final frame as text (as wide as the terminal, 80 in scripts; 30 rows).\n"
                "`view serve`: the serve pane, live until a key is pressed: per model version of the server `serve`\n"
                "started, the figures `serve` prints (requests/s over 10 s, p50/p99 latency, queue p50, queue now,\n"
                "ok/failed, each rank's line) and a histogram of the batches by size. Without a terminal: one frame.",
        ARGS(ACH("run|serve", RS_A_WORD, view_words), AOPT("N", RS_A_INT)),
        .opts = rs_opts_view,
        .fn = rs_cmd_view,
    },
    {
        .name = "jobs",
        .group = "ranks",
        .synopsis = "jobs [stop=N]    runs going on in the background (q in the live view sends one there)",
        .help = "Lists the runs that left the live view with `q` at the prompt and go on in the background: run\n"
                "number, kind, ranks, time so far. Each one's end is printed at the prompt when its ranks finish.\n"
                "While a training run is in the background its model (and data) cannot be trained, dropped,\n"
                "loaded into or rebound; eval, predict and show see the weights from before the run.\n"
                "`jobs stop=N` stops run N; `quit` stops every one (Ctrl-C at the prompt does not).",
        .opts = rs_opts_jobs,
        .fn = rs_cmd_jobs,
    },
    {
        .name = "serve",
        .group = "models",
        .synopsis = "serve MODEL|FILE.onnx|FILE.plan|REPO [http=8000] [grpc=8001] [max_batch=64] [delay=500us] ... | serve stop    Triton-compatible server",
        .help = "Serves a session model, an ONNX file, a compiled plan or a Triton model repository over KServe v2 HTTP and gRPC\n"
                "(Triton's clients work as they are) with Prometheus metrics, in the background while the prompt\n"
                "goes on. A model or file is first written into a repository (NAME/config.pbtxt, NAME/1/model.onnx).\n"
                "Requests are merged by a dynamic batcher (max_batch=, delay=) and run on instances= threads.\n"
                "A GPT is served decoupled: one response per generated token over gRPC ModelStreamInfer, and\n"
                "HTTP POST /v2/models/NAME/generate and generate_stream (server-sent events).\n"
                "ranks=2 mode=pipeline|tensor serves it across rank processes (stages or shards), as one process answers.\n"
                "An imported graph that only runs (model m = onnx FILE) is served from FILE, the file it came from.\n"
                "A plan (model p = plan FILE, or FILE.plan) is served as NAME/1/model.plan, platform ringside_plan,\n"
                "batches up to its compiled batch, in one process.\n"
                "`serve` alone shows what is served and its counters (`view serve`: live); `serve stop` drains and stops.\n"
                "Standalone: ringside serve --repo DIR [--http PORT] [--grpc PORT] [--metrics PORT] [--host ADDR].",
        ARGS({.name = "SRC", .kind = RS_A_PATH, .optional = true, .choices = serve_words}),
        .opts = rs_opts_serve,
        .fn = rs_cmd_serve,
    },
    {
        .name = "infer",
        .group = "models",
        .synopsis = "infer NAME [n=16] [clients=16] | infer GPT prompt=TEXT [tokens=40]    requests to the running server",
        .help = "Sends requests to a model the running server holds, through its scheduler as HTTP and gRPC requests\n"
                "go (n= random inputs from clients= threads at once, so the dynamic batcher merges them), prints how\n"
                "they were batched and checks each answer against the session model of that name run alone.\n"
                "A GPT streams its tokens as they are drawn. `serve` then shows the counters and latencies.",
        ARGS(AOPT("NAME", RS_A_WORD)),
        .opts = rs_opts_infer,
        .fn = rs_cmd_infer,
    },
    {
        .name = "export",
        .group = "models",
        .synopsis = "export MODEL FILE.onnx [opset=17] | export session N FILE.ring | export config N FILE.json    ONNX, a session as a script, a run as DeepSpeed config",
        .help = "  export MODEL FILE.onnx [opset=17] [softmax=on]\n"
                "Writes MODEL as an ONNX file: Gemm, Conv, MaxPool, AveragePool, Relu, Gelu, Tanh, Flatten,\n"
                "LayerNormalization; a GPT's Gather, MatMul and causal attention (int64 tokens in, (batch, T, V)\n"
                "logits out); weights as initializers named after the layers; a symbolic batch dimension.\n"
                "ONNX Runtime runs it with ringside's answers; `onnx check FILE` says what the ONNX checker would.\n"
                "  export session N FILE.ring\n"
                "Writes the commands of a past session of the log as a script that `play` or `ringside FILE` runs.\n"
                "  export config N ds_config.json\n"
                "Writes training run N's settings (N: a number, or `last`) as DeepSpeed's config and shows it;\n"
                "`train ... config=FILE` reads it.",
        ARGS(ACH("MODEL|session", RS_A_WORD, export_words), A("FILE|N", RS_A_WORD), AOPT("FILE", RS_A_PATH)),
        .opts = rs_opts_export,
        .fn = rs_cmd_export,
    },
    {
        .name = "onnx",
        .group = "models",
        .synopsis = "onnx show|check FILE | onnx new|input|output|init|node|save ...    inspect or build ONNX",
        .help = "  onnx show FILE                 inputs, outputs, initializers and nodes\n"
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
        ARGS(A("WHAT", RS_A_WORD), AOPT("A", RS_A_STRING), AOPT("B", RS_A_STRING), AOPT("C", RS_A_STRING), AOPT("D", RS_A_STRING)),
        .opts = rs_opts_onnx,
        .fn = rs_cmd_onnx,
    },
    {
        .name = "compile",
        .group = "models",
        .synopsis = "compile MODEL|FILE.onnx [precision=fp32|bf16|int8] [batch=64] [device=cpu|cuda] -> FILE.plan    an inference plan",
        .help = "Compiles a session model or an ONNX file for this CPU, as TensorRT builds an engine: views and\n"
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
        ARGS(A("SRC", RS_A_PATH), A("->", RS_A_KEYWORD), A("FILE", RS_A_PATH)),
        .opts = rs_opts_compile,
        .fn = rs_cmd_compile,
    },
    {
        .name = "plan",
        .group = "models",
        .synopsis = "plan show|bench FILE.plan    what a compiled plan holds, or how fast it runs",
        .help = "  plan show FILE    what it was built for (ISA, oneDNN, precision; or cuda's\n"
                "                    target, cuDNN, cuBLASLt: read without a GPU too), its\n"
                "                    nodes with post-ops, precision and kernel, its memory\n"
                "                    plan (values, offsets, lifetimes) and its rewrites\n"
                "  plan bench FILE   median time per run at batch 1 and at its batch\n"
                "                    (nodes=on: each node's median and oneDNN kernel too)\n"
                "bench/plan.sh runs ONNX Runtime beside it on the same ONNX file.",
        ARGS(ACH("WHAT", RS_A_WORD, plan_words), {.name = "FILE", .kind = RS_A_PATH, .optional = true, .exts = plan_files}),
        .opts = rs_opts_plan,
        .fn = rs_cmd_plan,
    },
    {
        .name = "runs",
        .group = "session log",
        .synopsis = "runs [n=20]    recent runs from the session log",
        .opts = rs_opts_runs,
        .fn = rs_cmd_runs,
    },
    {
        .name = "compare",
        .group = "session log",
        .synopsis = "compare N M    two runs' settings and results side by side",
        .help = "What differs between runs N and M first (M - N for numbers, * for other\n"
                "differences), then in one paragraph what is the same; all=on prints every field\n"
                "in one table.",
        ARGS(A("N", RS_A_INT), A("M", RS_A_INT)),
        .opts = rs_opts_compare,
        .fn = rs_cmd_compare,
    },
    {
        .name = "sql",
        .group = "session log",
        .synopsis = "sql \"SELECT ...\"    query the session log (read-only)",
        .help = "Runs read-only statements on the session log (its schema: `sqlite3 FILE .schema`).\n"
                "format=table (default) aligns the columns to the terminal, 200 rows at most;\n"
                "format=csv and format=json print every row for other programs (json: an array\n"
                "of objects a statement; numbers as numbers, NULL as null).\n"
                "  sql \"SELECT name, count(*) FROM metrics GROUP BY name\" format=csv",
        ARGS(A("QUERY", RS_A_STRING)),
        .opts = rs_opts_sql,
        .fn = rs_cmd_sql,
    },
    {
        .name = "plot",
        .group = "session log",
        .synopsis = "plot [N ...] [-> FILE.png]    runs' curves from the session log, drawn",
        .help = "Draws what the session log holds for runs N, M, ... (at most 8; none: the newest\n"
                "run that logged any) on shared axes: training loss per step with the validation\n"
                "or test loss, accuracy, learning rate, loss scale and samples/s of training\n"
                "runs; a bench's bus and algorithm bandwidth over message size; pipeline runs'\n"
                "measured bubble over m against (p-1)/(m+p-1). Each run keeps\n"
                "its colour in every chart. On the screen gnuplot's text terminal draws one chart\n"
                "per quantity; `plot 3 4 -> curves.png` (or .svg) stacks them in one picture\n"
                "for slides. Needs gnuplot (Debian: apt-get install gnuplot-nox).",
        .rest_name = "[N M ...] [-> FILE]",
        .fn = rs_cmd_plot,
    },
    {
        .name = "history",
        .group = "session log",
        .synopsis = "history [n=20]    recent commands",
        .opts = rs_opts_history,
        .fn = rs_cmd_history,
    },
    {
        .name = "replay",
        .group = "session log",
        .synopsis = "replay SESSION    run a past session's commands again",
        ARGS(A("SESSION", RS_A_INT)),
        .fn = rs_cmd_replay,
    },
    {
        .name = "play",
        .group = "playback",
        .synopsis = "play [N|NAME|FILE] [auto|step]    the tutorials, or play one",
        .help = "`play` alone lists the tutorials (so does `help play`); `play 2`, `play ranks`\n"
                "or `play 02-ranks` plays one; `play FILE.ring` plays a script of your own.\n"
                "Modes: interactive (pause waits for Enter), auto (no waiting: a class\n"
                "watches, or a test runs it), step (asks before each command: Enter runs it,\n"
                "s skips it, q stops). What the tutorial changes with `set` is put back when\n"
                "it ends or stops.",
        ARGS({.name = "TUTORIAL", .kind = RS_A_TUTORIAL, .optional = true, .exts = ring_files}, {.name = "MODE", .kind = RS_A_WORD, .optional = true, .choices = rs_words_play}),
        .opts = rs_opts_play,
        .fn = rs_cmd_play,
    },
    {
        .name = "expect",
        .group = "playback",
        .synopsis = "expect CONDITION    check the last result's numbers",
        .help = "Checks numbers of the last command that gave some; in a script or `play`, a\n"
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
        .rest_name = "CONDITION",
        .fn = rs_cmd_expect,
    },
    {
        .name = "say",
        .group = "playback",
        .synopsis = "say \"TEXT\"    narration in a tutorial",
        ARGS(A("TEXT", RS_A_STRING)),
        .fn = rs_cmd_say,
    },
    {
        .name = "pause",
        .group = "playback",
        .synopsis = "pause    wait for Enter (in a tutorial)",
        .fn = rs_cmd_pause,
    },
    {
        .name = "clear",
        .group = "playback",
        .synopsis = "clear    clear the screen (on a terminal; elsewhere nothing)",
        .help = "Clears the terminal, as clear(1) does, so the next part of a lesson starts on a fresh screen.\n"
                "Where the output is not a terminal (a script's output in a file or a pipe) it prints nothing.",
        .fn = rs_cmd_clear,
    },
    {
        .name = "set",
        .group = "session",
        .synopsis = "set [threads=N] [seed=N] [color=on|off] [device=cpu|cuda[:N]|guard]    session settings (none: show them)",
        .opts = rs_opts_set,
        .fn = rs_cmd_set,
    },
    {
        .name = "version",
        .group = "session",
        .synopsis = "version    version, BLAS kernel, threads",
        .fn = rs_cmd_version,
    },
    {
        .name = "devices",
        .group = "session",
        .synopsis = "devices    is CUDA available: GPUs, memory, compute capability, versions",
        .fn = rs_cmd_devices,
    },
    {
        .name = "help",
        .group = "session",
        .synopsis = "help [COMMAND [TOPIC]]    this list, one command in full, or its options about TOPIC",
        .help = "Without a command: every command by group. `help CMD`: its usage, what it does and every option.\n"
                "`help CMD TOPIC`: only the options whose name or description mentions TOPIC, e.g.\n"
                "  help train fp16\n"
                "  help train pipeline\n"
                "At a terminal, help longer than the screen goes through a pager ($PAGER, else `less -R -F -X`;\n"
                "q leaves it).",
        ARGS(AOPT("COMMAND", RS_A_COMMAND), AOPT("TOPIC", RS_A_WORD)),
        .fn = rs_cmd_help,
    },
    {
        .name = "quit",
        .group = "session",
        .synopsis = "quit    leave (Ctrl-D too)",
        .fn = rs_cmd_quit,
    },
    {.name = NULL},
};

const rs_cmddef *rs_cmd_find(const char *name)
{
    for (const rs_cmddef *c = rs_commands; c->name; c++)
        if (!strcmp(c->name, name)) return c;
    return NULL;
}
