/* A model's configuration, as Triton's config.pbtxt states it (protobuf text format of
 * inference.ModelConfig): the subset ringside acts on. rs_serve_config_parse reads the text; fields
 * it does not know are errors with file:line:column, so a typo is never silently ignored. */
#ifndef RS_SERVE_CONFIG_H
#define RS_SERVE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "engine/core/status.h"

#define RS_SERVE_MAX_IO 16
#define RS_SERVE_MAX_IO_TEXT "16"
#define RS_SERVE_MAX_DIMS 8
#define RS_SERVE_MAX_PREFERRED 16
#define RS_SERVE_MAX_VERSIONS 16
#define RS_SERVE_NAME_MAX 128

/* A sequence batcher's control input (sequence_batching control_input): filled by the server from the
 * request's sequence_id, sequence_start and sequence_end, never sent by the client. */
typedef enum rs_serve_control {
    RS_SERVE_CTL_NONE = 0, RS_SERVE_CTL_START, RS_SERVE_CTL_END, RS_SERVE_CTL_READY, RS_SERVE_CTL_CORRID
} rs_serve_control;

typedef struct rs_serve_io {
    char name[RS_SERVE_NAME_MAX];
    rs_serve_dtype dtype;
    int rank;
    int64_t dims[RS_SERVE_MAX_DIMS]; /* without the batch dim when max_batch_size > 0; -1 = any */
    /* reshape { shape: [...] }: the model's own shape of the tensor (the same elements as dims) */
    bool has_reshape;
    int reshape_rank;
    int64_t reshape[RS_SERVE_MAX_DIMS];
    bool optional;                   /* an input the request may leave out: the backend gets it absent (data NULL) */
    char labels[512];                /* an output's label_filename, as a path beside config.pbtxt; "" none */
    rs_serve_control control;        /* an input the sequence batcher fills; dims [ 1 ] */
    double false_true[2];            /* its values for false and true (START, END, READY) */
} rs_serve_io;

#define RS_SERVE_MAX_STEPS 8

/* One step of an ensemble (ensemble_scheduling { step [...] }): the model it runs and how its tensors
 * are named in the ensemble: in[k] = {key: the model's input, value: the ensemble's tensor}, out[k] =
 * {key: the model's output, value: the ensemble's tensor it becomes}. */
typedef struct rs_serve_step {
    char model[RS_SERVE_NAME_MAX];
    int64_t version;                 /* -1: the newest */
    int nin, nout;
    struct {
        char key[RS_SERVE_NAME_MAX], value[RS_SERVE_NAME_MAX];
    } in[RS_SERVE_MAX_IO], out[RS_SERVE_MAX_IO];
} rs_serve_step;

typedef enum rs_serve_vpolicy { RS_SERVE_VP_LATEST = 0, RS_SERVE_VP_ALL, RS_SERVE_VP_SPECIFIC } rs_serve_vpolicy;

typedef struct rs_serve_config {
    char name[RS_SERVE_NAME_MAX];
    char platform[64];               /* "onnxruntime_onnx" */
    char backend[64];                /* "onnxruntime" */
    int max_batch_size;              /* 0: no batch dim, no batching */
    /* max_batch_size 0 and every input's and output's dims hold the batch first, as Triton writes a
     * model without batching ([ -1, 4 ] or [ 2, 4 ]): set by the backend's completion; a request's
     * shape is then the dims themselves. Without it, ringside's form: dims per sample, a request
     * [N, dims...]. */
    bool full_dims;
    int ninputs, noutputs;
    rs_serve_io inputs[RS_SERVE_MAX_IO], outputs[RS_SERVE_MAX_IO];
    int instance_count;              /* sum over instance_group entries; 0 = not stated (1) */
    char instance_kind[32];          /* "KIND_CPU" (KIND_AUTO/KIND_GPU/KIND_MODEL accepted) */
    bool dynamic_batching;           /* the dynamic_batching { } block is present */
    int npreferred;
    int preferred[RS_SERVE_MAX_PREFERRED];
    int64_t max_queue_delay_us;
    int64_t max_queue_size;          /* default_queue_policy { max_queue_size }; 0 = ringside's default */
    bool decoupled;                  /* model_transaction_policy { decoupled } */
    rs_serve_vpolicy vpolicy;
    int latest_n;                    /* latest { num_versions }, default 1 */
    int nversions;
    int64_t versions[RS_SERVE_MAX_VERSIONS]; /* specific { versions: [...] } */
    /* parameters { key: "ranks" value: { string_value: "2" } } and key "ranks_mode" ("pipeline" or
     * "tensor"): the model is served by that many rank processes (serve/ranks.h); 0 or 1: in-process */
    int ranks;
    char ranks_mode[16];
    char default_model_filename[RS_SERVE_NAME_MAX]; /* the file a version folder serves; "" the backend's */
    /* What a config may say that ringside does not do: refused by name at load (response_cache with
     * enable: true, sequence_batching, ensemble_scheduling, a KIND_GPU instance group) or, for
     * model_warmup, read and reported as not run (rs_serve_config_ignored). */
    bool response_cache, sequence_batching, ensemble, warmup;
    /* sequence_batching: the direct strategy (oldest and implicit state are refused by name) */
    bool sequence_oldest, sequence_state;
    int64_t max_sequence_idle_us;    /* 0: Triton's default, 1 s */
    int nsteps;                      /* an ensemble's steps, in the order they run */
    rs_serve_step steps[RS_SERVE_MAX_STEPS];
} rs_serve_config;

/* The version folder's file c names (default_model_filename) into buf, when it names one; buf is left
 * as it is (the backends' probe: rs_serve_repo_model_path) otherwise. */
void rs_serve_config_model_path(const rs_serve_config *c, const char *repo, const char *name, int64_t version,
                                char *buf, size_t n);
/* What c states that the server reads but does not do, for the load's message ("model_warmup: not
 * run"), or "" when nothing. */
const char *rs_serve_config_ignored(const rs_serve_config *c);
/* Refuses what c states that ringside cannot honour, naming it (where: the config's file). */
rs_status rs_serve_config_check_supported(const rs_serve_config *c, const char *where, rs_err *err);

/* Defaults: latest 1 version, no batching settings, one instance. */
void rs_serve_config_init(rs_serve_config *c);
/* Parses text (n bytes, need not be NUL-terminated); file names the source in messages, which read
 * "file:line:column: what is wrong (what would work)". */
rs_status rs_serve_config_parse(const char *text, size_t n, const char *file, rs_serve_config *c, rs_err *err);
rs_status rs_serve_config_load(const char *path, rs_serve_config *c, rs_err *err);
/* Writes c in protobuf text format (what `serve` puts in a repository it writes). Caller frees. */
char *rs_serve_config_write(const rs_serve_config *c);

#endif
