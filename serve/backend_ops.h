/* Inside serve/'s backends: a served backend is a table of functions (rs_srv_backend_ops), one file
 * per backend (backend_engine.c, backend_plan.c, backend_gpt.c, backend_ranks.c), and backend.c
 * dispatches backend.h's calls through the table, so the server core never asks which kind it holds.
 * Adding a backend: docs/add-a-served-backend.md. */
#ifndef RS_SERVE_BACKEND_OPS_H
#define RS_SERVE_BACKEND_OPS_H

#include "backend.h"
#include "ranks.h"

/* One forward of a token model on T token ids, giving (T, vocab) logits into y: how a generation
 * runs when the model is not in this process (backend_ranks.c). */
typedef rs_status (*rs_srv_forward_fn)(void *ud, const int32_t *ids, float *y, rs_err *err);

typedef struct rs_srv_backend_ops {
    const char *name;     /* the kind rs_serve_backend_kind says: "engine", "plan", "gpt", "ranks" */
    const char *file;     /* what a version folder holds for it ("model.onnx"); NULL: not loaded from a file */
    const char *what;     /* the backend in messages ("a plan") */
    /* optional: the config platform (or backend) that names this backend alone; a config naming it is
     * refused when the version folder holds another backend's file */
    const char *platform;

    /* impl: the loaded model (caller owns it, freed with free). Required unless file is NULL. */
    rs_status (*load)(const char *path, void **impl, rs_err *err);
    void (*free)(void *impl);
    /* The model's inputs and outputs as a config states them (per sample: no batch dim), in the order
     * run takes them. */
    void (*io)(const void *impl, rs_serve_ios *io);
    /* Checks the config against the model file and fills in what it leaves out (tensors, platform,
     * instances); where names the file in messages. */
    rs_status (*complete)(const void *impl, rs_serve_config *c, const char *where, rs_err *err);
    /* An instance for batches up to max_batch; *inst may stay NULL when the backend needs no state
     * per instance. Instances of one backend run at the same time. */
    rs_status (*new_instance)(void *impl, int max_batch, void **inst, rs_err *err);
    void (*free_instance)(void *inst); /* optional: NULL when instances hold nothing */
    /* optional (NULL for a backend that only generates): B samples of every output from B samples of
     * every input, both in io's order and the wire's layout (dtype.h); y[k].data is malloc'd here and
     * the caller's (left NULL on failure). The inputs were checked against io: sizes need no check. */
    rs_status (*run)(void *impl, void *inst, const rs_serve_tensor *x, int B, rs_serve_tensor *y, rs_err *err);
    /* run copes with an absent input (x[i].data NULL: an optional input the request left out); when
     * false, such a request is refused before run */
    bool absent_inputs;
    /* optional (NULL for a backend that does not generate): one decoupled generation, g->on_text per
     * token. Its presence is what rs_serve_backend_generates says. */
    rs_status (*generate)(void *impl, void *inst, rs_serve_gen *g, rs_err *err);
    /* optional: the same generation with each forward done by fwd (a token model across ranks) */
    rs_status (*generate_with)(void *impl, rs_serve_gen *g, rs_srv_forward_fn fwd, void *ud, rs_err *err);
    /* optional: the largest batch the model runs (NULL: any) */
    int (*max_batch)(const void *impl);
    /* optional: fills what the rank job needs (in_bytes, out_numel, max_batch) to serve the model
     * across ranks; NULL, or an error it returns, keeps the model in one process */
    rs_status (*ranks_cfg)(const void *impl, const char *path, int max_batch, rs_serve_ranks_cfg *c, rs_err *err);
    /* optional: the engine model it runs (borrowed), what a rank cuts its part from */
    struct rs_model *(*model)(void *impl);
    /* optional: the lines a model across ranks shows (what each rank holds) */
    void (*describe)(void *impl, char *buf, size_t cap);
} rs_srv_backend_ops;

struct rs_serve_backend {
    const rs_srv_backend_ops *ops;
    void *impl;  /* owned: ops->free */
    char *path;  /* owned: the file it was loaded from */
};

/* The backends a version folder can hold, in the order a folder is probed (model.onnx first), and the
 * order in which backends sharing an extension try a file (the engine, then the cast backend),
 * NULL-terminated. backend_ranks.c's is not among them: it wraps one of these. */
extern const rs_srv_backend_ops *const rs_srv_backends[];
extern const rs_srv_backend_ops rs_srv_backend_engine, rs_srv_backend_cast, rs_srv_backend_plan, rs_srv_backend_gpt;

/* The backend serving path, by its file's extension; the engine's (ONNX) for any other name. */
const rs_srv_backend_ops *rs_srv_backend_for_path(const char *path);

/* Across ranks (backend_ranks.c): b's model moves behind a backend whose runs go through the rank
 * processes c describes (c->model, ranks, mode and worker_index set by the caller). */
rs_status rs_srv_ranks_wrap(rs_serve_backend *b, rs_serve_ranks_cfg *c, rs_err *err);

/* Shared by the tensor backends' complete: checks the config's inputs and outputs against the
 * model's (by name, data type and dims; the config's lists are put in the model's order) and fills in
 * what it leaves out. */
rs_status rs_srv_complete_tensors(rs_serve_config *c, const rs_serve_ios *io, const char *where, rs_err *err);
/* A backend's one FP32 output of B samples of numel each, copied from y into out[0] (malloc'd). */
rs_status rs_srv_output_f32(const float *y, size_t n, rs_serve_tensor *out, rs_err *err);

#endif
