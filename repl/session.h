/* A workbench session: the named models and data sets a person has built, the settings, where
 * output goes, and the session log. One per REPL process; commands get it as their first argument. */
#ifndef RS_SESSION_H
#define RS_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "cmd.h"
#include "engine/data/dataset.h"
#include "engine/nn/model.h"

typedef struct rs_slog rs_slog;

typedef enum rs_obj_kind { RS_OBJ_MODEL, RS_OBJ_DATA } rs_obj_kind;

typedef struct rs_obj {
    char name[64];
    rs_obj_kind kind;
    rs_model *model;        /* RS_OBJ_MODEL, owned; inference-only (rs_model_inference_only) for an
                               imported ONNX graph that is not a plain sequence of engine layers: eval,
                               predict and show run it, nothing trains or saves it */
    struct rs_plan *plan;   /* RS_OBJ_MODEL from `model p = plan FILE` (plan/plan.h), owned; model is NULL
                               then, and only eval, predict, show, ls and drop take it */
    char *spec;             /* the spec it was built from (owned); "onnx FILE" for an inference-only one,
                               "plan FILE" for a plan */
    rs_data_pair data;      /* RS_OBJ_DATA, owned */
    char source[256];       /* what `data` was given, as rs_data_open reads it ("digits:6000") */
    uint64_t data_seed;     /* the seed it was opened with: ranks open the same data from both */
    bool source_cut;        /* source was too long to keep whole: ranks cannot reopen it */
    int64_t trained_run;    /* RS_OBJ_MODEL: the run whose weights it holds (> 0 its id in the session log,
                               -1 a run not logged), 0 while it has its initial weights */
    int64_t busy_run;       /* > 0: a background run (`jobs`) uses it; it must not change or go until
                               that run ends (0: free) */
} rs_obj;

typedef enum rs_play_mode { RS_PLAY_INTERACTIVE, RS_PLAY_AUTO, RS_PLAY_STEP } rs_play_mode;

struct rs_session {
    rs_obj *objs;
    int nobjs, cap;
    uint64_t seed;
    int threads;
    rs_device device;       /* `set device=`: cpu (zero) or a GPU the driver reports (repl/cmd_devices.c) */
    FILE *out;
    FILE *err;              /* errors and warnings: stderr in scripts, -c and pipes; NULL: out (the prompt) */
    int help_cols;          /* while help is written to memory for the pager: the terminal's width (else 0) */
    bool color;             /* NO_COLOR, TERM=dumb and non-terminals turn it off */
    bool interactive;       /* a person at a terminal: prompts, pauses wait */
    bool echo;              /* scripts: print each command before running it */
    bool keep_going;        /* scripts: continue after an error */
    bool quit;
    const char *where_file; /* scripts: errors start with file:line: */
    int where_line;
    rs_play_mode play_mode; /* while playing a tutorial */
    int play_depth;
    bool pause_served;      /* play: a run's view waited for a key for the `pause` line after it, which
                               then goes on without asking again (repl/ranks_job.c, cmd_session.c) */
    rs_slog *log;           /* may be NULL (no log) */
    int64_t cmd_id;         /* the command being run, in the log */
    const char *cmd_text;   /* the command being run, as typed (run.c); NULL between commands */
    const char *source;     /* 'tty', '-c', 'script:...', 'replay:N' */
    volatile sig_atomic_t *interrupt; /* set by Ctrl-C; commands poll it */
    int errors;             /* errors so far (scripts exit with it) */
    bool warned_log;        /* the log's write failure was reported once */
    char last_error[512];   /* the message of the last error, for the log */
    void *onnx_builder;     /* the graph `onnx new` started (rs_onnx_builder, owned), or NULL */
    bool can_detach;        /* the interactive prompt runs this line: `q` in the live view may send a
                               run to the background (scripts and -c never detach) */
    struct rs_results *results; /* the last result `expect` checks (repl/result.h), owned; NULL before any */
    struct rs_job *jobs;    /* background runs (repl/ranks_job.c's list, owned); the prompt pumps them
                               with rs_jobs_pump and ends them with rs_jobs_stop_all */
    struct rs_serve_server *server; /* `serve`'s running server (owned), or NULL */
    struct rs_hostfile *launch; /* `ringside launch`'s hosts (dist/launch/hostfile.h, owned), or NULL: the
                                   default of rank-starting commands (ranks= their slots, hostfile= them) */
};

rs_session *rs_session_new(FILE *out);
void rs_session_free(rs_session *s);

rs_obj *rs_session_find(rs_session *s, const char *name);
/* The session's thread count, given to every model and graph it holds (and to those put later). */
void rs_session_set_threads(rs_session *s, int threads);
/* Adds or replaces a named object; takes ownership of model/spec/data in o. */
rs_obj *rs_session_put(rs_session *s, const rs_obj *o);
bool rs_session_drop(rs_session *s, const char *name);

/* Reports an error for call c (may be NULL) with a caret under [pos, pos+len) of its line:
 *   file:line: train: unknown option 'epochz' (did you mean 'epochs='?)
 *     train m on d epochz=2
 *                  ^^^^^^
 * pos == (size_t)-1 means no caret. Always returns 1, so handlers can `return rs_session_error(...)`. */
int rs_session_error(rs_session *s, const rs_call *c, size_t pos, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Same line shape for a line that failed before it became a call. */
int rs_session_line_error(rs_session *s, const char *line, size_t pos, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void rs_session_warn(rs_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A name a background run uses (rs_obj.busy_run): reports "CMD: NAME is in use by run N ..." for call c
 * (caret under [pos, pos+len)) and returns 1; 0 when o is NULL or free. */
int rs_session_check_busy(rs_session *s, const rs_call *c, const rs_obj *o, size_t pos, size_t len);
/* A device word (cpu, cuda, cuda:N, guard) -> *d, checked usable on this machine; 1 after reporting at
 * [pos, pos+len) as `who`, ending with `stays` (what stays where). repl/cmd_devices.c */
int rs_repl_device_parse(rs_session *s, const rs_call *c, const char *who, const char *v, size_t pos, size_t len,
                         const char *stays, rs_device *d);
/* "cpu", "cuda:0", "guard" into buf; returns buf. */
const char *rs_repl_device_str(rs_device d, char *buf, size_t n);

/* Background runs (repl/ranks_job.c). rs_jobs_count: how many are in progress. rs_jobs_pump: services each one
 * once without blocking (a few ms at most) and prints the end of those that finished to s->out.
 * rs_jobs_stop_all: stops every one, waits for their ranks, says so when `say`, and frees them. */
int rs_jobs_count(const rs_session *s);
void rs_jobs_pump(rs_session *s);
void rs_jobs_stop_all(rs_session *s, bool say);

/* What `set` changes (repl/cmd_session.c), saved around a tutorial so that playing one leaves the session
 * as it was. A setting `set` learns must be added here too. */
typedef struct rs_settings {
    int threads;        /* s->threads: every object's kernel context follows it (rs_session_set_threads) */
    uint64_t seed;
    bool color;
} rs_settings;
void rs_settings_save(const rs_session *s, rs_settings *out);
void rs_settings_restore(rs_session *s, const rs_settings *in);

/* Styling that honours NO_COLOR: returns "" when colour is off. */
const char *rs_sty(const rs_session *s, const char *code);

#endif
