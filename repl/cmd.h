/* The command table: every command of the language declared once, as data.
 * Parsing, `help`, `help CMD`, tab completion and error messages are all generated from these
 * declarations, so they cannot disagree. A command is
 *     [NAME =] WORD ARG... [key=value]...      e.g.  train m on d epochs=2 lr=1e-3
 * Bindings (`model m = mlp 784-256-10`) hand the raw text after '=' to the handler, which gives
 * it to the engine's own parser (model specs, data sources). */
#ifndef RS_CMD_H
#define RS_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rs_session rs_session;

typedef enum rs_opt_type {
    RS_T_INT,      /* 12 */
    RS_T_FLOAT,    /* 1e-3, 0.05 */
    RS_T_SIZE,     /* bytes: 16M (powers of 1024) */
    RS_T_DURATION, /* 500us, 2ms, 1.5s */
    RS_T_BOOL,     /* on/off, true/false, yes/no, 1/0 */
    RS_T_ENUM,     /* one of choices */
    RS_T_STRING,   /* a word or a "quoted string" */
    RS_T_PATH,     /* a file name (completion offers files) */
} rs_opt_type;

typedef struct rs_optdef {
    const char *name;
    rs_opt_type type;
    const char *def;               /* default as the user would type it; NULL = unset */
    const char *help;              /* one line */
    const char *const *choices;    /* RS_T_ENUM: NULL-terminated */
} rs_optdef;

/* What a positional argument names: drives checking and completion. */
typedef enum rs_arg_kind {
    RS_A_WORD,     /* any word */
    RS_A_MODEL,    /* a model in the session */
    RS_A_DATA,     /* a data set in the session */
    RS_A_NAME,     /* any session name */
    RS_A_PATH,     /* a file */
    RS_A_KEYWORD,  /* the literal word in `help` (e.g. "on" in `train m on d`) */
    RS_A_INT,
    RS_A_STRING,   /* a word or "quoted string" */
    RS_A_COMMAND,  /* a command of this table (`help train`) */
    RS_A_NONE,     /* nothing (a binding's form that takes no further words: `data d = digits`) */
    RS_A_TUTORIAL, /* a tutorial of the tutorials folder (number or name; completion lists them) or a file */
} rs_arg_kind;

typedef struct rs_argdef {
    const char *name;   /* shown in synopses: MODEL, DATA, FILE; for keywords the word itself */
    rs_arg_kind kind;
    bool optional;      /* may be left out (only at the end) */
    /* Words the argument takes besides what its kind names, NULL-terminated (may be NULL): offered by
     * completion. A WORD argument with choices is checked by its handler (which may take aliases);
     * a MODEL/DATA/NAME one takes these words without looking them up (`show run 3`). */
    const char *const *choices;
    const char *const *exts; /* RS_A_PATH, RS_A_TUTORIAL: the endings of the files it reads (".onnx"),
                              * NULL-terminated; completion lists those and folders. NULL: any file */
} rs_argdef;

/* A binding's forms: the word that starts the text after '=' and what the words after it are, e.g.
 * {"idx", RS_A_PATH} (files), {"seq", RS_A_WORD, layers} (layer words). Completion reads them; the
 * engine's own parser checks the text. */
typedef struct rs_formdef {
    const char *word;
    rs_arg_kind then;            /* RS_A_PATH, RS_A_WORD, RS_A_NONE */
    const char *const *words;    /* words that may follow (NULL-terminated; may be NULL) */
    const char *const *(*words_fn)(void); /* or their owner's list, made at run time (may be NULL) */
    const char *const *exts;     /* then == RS_A_PATH: the files' endings, as rs_argdef's (may be NULL) */
} rs_formdef;

#define RS_MAX_ARGS 6
#define RS_MAX_OPTS 64

typedef struct rs_call rs_call;
/* Returns 0 on success, 1 on an error (already reported through rs_session_error). */
typedef int (*rs_cmd_fn)(rs_session *s, const rs_call *c);

typedef struct rs_cmddef {
    const char *name;
    const char *group;      /* for `help`: "models", "training", "session log", "playback", "session" */
    const char *synopsis;   /* one line for `help` */
    const char *help;       /* full text for `help CMD` (may be NULL) */
    bool binding;           /* NAME = ... form; the raw text after '=' is in call->rest */
    const char *rest_name;  /* for bindings: how `help` names the text after '=' ("SPEC", "SOURCE"); for a
                               command that is not a binding, that it takes the text after its name whole
                               in call->rest, and how `help` names it (`expect CONDITION`) */
    rs_argdef args[RS_MAX_ARGS];
    int nargs;
    const rs_optdef *opts;  /* terminated by a NULL name; may be NULL */
    bool opts_in_rest;      /* bindings whose trailing key=value options are ours, not the engine's */
    rs_cmd_fn fn;
    const rs_formdef *forms;/* bindings: the forms of the text after '=' (terminated by a NULL word) */
    /* A list `help CMD` prints after the help text that only the running program knows (the layer
     * kinds, from their descriptors): "Layers: linear(OUT), ...". Optional. */
    const char *(*help_list)(char *buf, size_t n);
} rs_cmddef;

typedef struct rs_optval {
    bool set;               /* given on the line (else the default applies, if any) */
    const char *text;       /* as typed (or the default); points into the call's storage */
    size_t pos;             /* byte offset of the key in the line (for carets) */
    union {
        long long i;
        double f;
        bool b;
        uint64_t size;
        int choice;         /* index into choices */
    } v;
} rs_optval;

struct rs_call {
    const rs_cmddef *cmd;
    const char *line;           /* the whole command as typed */
    char bind[64];              /* NAME of `NAME = ...` (or of `model NAME = ...`) */
    size_t bind_pos;
    int nargs;
    char *args[RS_MAX_ARGS];    /* positional words, decoded */
    size_t arg_pos[RS_MAX_ARGS];
    const char *rest;           /* bindings: raw text after '=', options of ours removed; commands with a
                                   rest_name that are not bindings: the text after the command's name */
    size_t rest_pos;            /* its offset in line */
    rs_optval opts[RS_MAX_OPTS];/* parallel to cmd->opts */
    char *store;                /* owned storage for decoded words */
};

/* The table (repl/cmdtab.c), terminated by a NULL name. */
extern const rs_cmddef rs_commands[];
const rs_cmddef *rs_cmd_find(const char *name);

/* A language model's vocabulary as `generate` picks it (cmd_generate.c): data=NAME, else the newest
 * text data set of V characters, else the built-in corpus when it has V (held in *builtin, which the
 * caller frees with rs_data_pair_clear). NULL when none fits. */
struct rs_text_vocab;
struct rs_data_pair;
const struct rs_text_vocab *rs_generate_vocab(rs_session *s, const rs_call *c, int V, struct rs_data_pair *builtin);

/* Option lookup by name in a parsed call: NULL when the command has no such option. */
const rs_optval *rs_call_opt(const rs_call *c, const char *name);
/* Convenience: the option's value, or its default, or fallback when neither exists. */
long long rs_call_int(const rs_call *c, const char *name, long long fallback);
double rs_call_float(const rs_call *c, const char *name, double fallback);
bool rs_call_bool(const rs_call *c, const char *name, bool fallback);
const char *rs_call_str(const rs_call *c, const char *name, const char *fallback);
bool rs_call_given(const rs_call *c, const char *name);

#endif
