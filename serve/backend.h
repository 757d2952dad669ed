/* What serve/ asks of a served model: load a model file, describe its tensors, complete its config,
 * and run batches (or generate text) on an instance. Each kind of model is a backend, a table of
 * functions in a file of its own (backend_ops.h); these calls go through the table, so the server
 * core never tests which kind it holds. The rank processes of a model served across ranks run it
 * too (ranks_worker.c), with the engine model a backend hands them (rs_serve_backend_model). */
#ifndef RS_SERVE_BACKEND_H
#define RS_SERVE_BACKEND_H

#include "config.h"

typedef struct rs_serve_backend rs_serve_backend; /* a loaded model, shared by its instances */
typedef struct rs_serve_inst rs_serve_inst;       /* one instance: what a pass writes (the backend says what) */

/* Loads path: an .onnx file (kind "engine"), a model.plan compiled by `compile` (kind "plan": refused
 * with the plan loader's reason when it was built for another ISA or oneDNN, or is corrupted), or a
 * model.safetensors holding a token model (a GPT; kind "gpt") with a vocab.json beside it ({"chars": [byte of token 0, byte of token 1, ...]}): text in,
 * text out, served decoupled (a response per generated token). Caller owns *out. */
rs_status rs_serve_backend_load(const char *path, rs_serve_backend **out, rs_err *err);
void rs_serve_backend_free(rs_serve_backend *b); /* after every instance; NULL is a no-op */
/* The model's inputs and outputs as a config states them (per sample: no batch dim), in the order a
 * run takes them. */
typedef struct rs_serve_ios {
    int nin, nout;
    rs_serve_io in[RS_SERVE_MAX_IO], out[RS_SERVE_MAX_IO];
} rs_serve_ios;
void rs_serve_backend_ios(const rs_serve_backend *b, rs_serve_ios *io);
/* Its first input and output: what a model of one tensor in and one out (the REPL's `infer`, the
 * benches) needs. */
void rs_serve_backend_io(const rs_serve_backend *b, rs_serve_io *in, rs_serve_io *out);
/* Checks the model's config c against the model (where: its file, for messages) and fills in what c
 * leaves out: tensors, platform, instance defaults. A config naming another backend (ringside_plan
 * without a model.plan, a TensorRT engine), or decoupled for a model that does not generate, is refused. */
rs_status rs_serve_backend_complete(const rs_serve_backend *b, rs_serve_config *c, const char *where, rs_err *err);
/* The backend's name: "engine" (an ONNX graph on the engine's executor, an activation set per
 * instance), "plan" (a compiled plan), "gpt" (a token model that generates: rs_serve_inst_generate)
 * or "ranks" (a model served across ranks: rs_serve_backend_use_ranks). */
const char *rs_serve_backend_kind(const rs_serve_backend *b);
bool rs_serve_backend_generates(const rs_serve_backend *b);
/* The largest batch the model runs: a plan's compiled batch; 0 for any. */
int rs_serve_backend_max_batch(const rs_serve_backend *b);

/* Serves the model across `ranks` rank processes (serve/ranks.h) in mode "pipeline" or "tensor", for
 * batches up to max_batch: from here on every instance's run (and a GPT's generation, one full
 * forward per token) goes through them, one batch at a time. worker_index numbers the models served
 * across ranks on this host (their devices go round-robin by it). */
rs_status rs_serve_backend_use_ranks(rs_serve_backend *b, int ranks, const char *mode, int max_batch, int worker_index,
                                     rs_err *err);
/* false, with why, when the processes a model across ranks runs in have died (true in-process). */
bool rs_serve_backend_alive(const rs_serve_backend *b, char *why, size_t cap);
/* The ranks' own lines (what each holds), "" for a model served in-process. */
void rs_serve_backend_ranks_text(rs_serve_backend *b, char *buf, size_t cap);
/* The model the backend runs (borrowed; NULL for a plan): what a rank of a model across ranks cuts its
 * part from. A plan is refused by use_ranks: it runs in one process. */
struct rs_model *rs_serve_backend_model(rs_serve_backend *b);

/* An instance for batches up to max_batch. Instances of one backend run at the same time. */
rs_status rs_serve_inst_new(rs_serve_backend *b, int max_batch, rs_serve_inst **out, rs_err *err);
void rs_serve_inst_free(rs_serve_inst *in);
/* B samples of every input (x, in the order of rs_serve_backend_ios, the wire's layout: dtype.h) give
 * B samples of every output: y[k].data malloc'd, the caller's. The inputs' sizes must fit the model's
 * (the front ends check them against the config). */
rs_status rs_serve_inst_run_tensors(rs_serve_inst *in, const rs_serve_tensor *x, int B, rs_serve_tensor *y,
                                    rs_err *err);
/* y (B, output numel) = model(x (B, input numel)) for a model of one FP32 input and one FP32 output. */
rs_status rs_serve_inst_run(rs_serve_inst *in, const float *x, int B, float *y, rs_err *err);

/* One generation request: the prompt's text, the sampling settings (the engine's rs_gen_cfg), and
 * where each token's text goes as soon as it is drawn. stop is polled before each token. */
typedef struct rs_serve_gen {
    const char *prompt;
    size_t plen;
    int max_tokens;
    float temperature;
    int top_k;
    uint64_t seed;
    void (*on_text)(void *ud, const char *text, size_t n);
    bool (*stop)(void *ud);
    void *ud;
    int tokens;            /* out: tokens generated */
} rs_serve_gen;

/* Defaults of a request that says nothing: `generate`'s (200 tokens, temperature 0.8, top_k 40, seed 1). */
void rs_serve_gen_init(rs_serve_gen *g);
/* Generates on an instance of a "gpt" backend. A prompt character outside the vocabulary is RS_ERR_ARG. */
rs_status rs_serve_inst_generate(rs_serve_inst *in, rs_serve_gen *g, rs_err *err);

#endif
