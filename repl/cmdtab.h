/* Between the command rows (cmdtab.c) and the options and words they name (cmdtab_opts.c): one
 * table each, terminated by a NULL name (options) or NULL (words). Nothing outside those two files
 * reads these; everyone else reads the rows through cmd.h. */
#ifndef RS_CMDTAB_H
#define RS_CMDTAB_H

#include "cmd.h"

extern const rs_optdef rs_opts_model[];
extern const rs_optdef rs_opts_data[];
/* train's own options, then every strategy's (dist/train/registry.h), appended before main runs;
 * read-only from then on. */
extern rs_optdef rs_opts_train[RS_MAX_OPTS + 1];
extern const rs_optdef rs_opts_generate[];
extern const rs_optdef rs_opts_eval[];
extern const rs_optdef rs_opts_predict[];
extern const rs_optdef rs_opts_runs[];
extern const rs_optdef rs_opts_compare[];
extern const rs_optdef rs_opts_sql[];
extern const rs_optdef rs_opts_history[];
extern const rs_optdef rs_opts_set[];
extern const rs_optdef rs_opts_play[];
extern const rs_optdef rs_opts_view[];
extern const rs_optdef rs_opts_serve[];
extern const rs_optdef rs_opts_infer[];
extern const rs_optdef rs_opts_jobs[];
extern const rs_optdef rs_opts_collective[];
extern const rs_optdef rs_opts_bench[];
extern const rs_optdef rs_opts_p2p[];
extern const rs_optdef rs_opts_world[];
extern const rs_optdef rs_opts_tp[];
extern const rs_optdef rs_opts_pi[];
extern const rs_optdef rs_opts_export[];
extern const rs_optdef rs_opts_compile[];
extern const rs_optdef rs_opts_plan[];
extern const rs_optdef rs_opts_onnx[];

/* play's modes (play MODE, play mode=). */
extern const char *const rs_words_play[];
/* What `to MODEL DEVICE` offers: each device kind's name, cuda also as cuda:0 (built before main). */
extern const char *rs_words_device[];

#endif
