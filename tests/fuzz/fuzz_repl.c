/* Fuzz target for the REPL's front end: any bytes as a line are split into commands, lexed, and
 * parsed against the command table with a session that holds a model and a data set. Nothing is
 * run (a fuzzed `save` would write files, a `train` would take minutes): the parser must accept or
 * report an error, never crash or leak, and what it accepts must be consistent with the table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "engine/data/gen/digits.h"
#include "engine/nn/spec.h"
#include "fuzz.h"

static rs_session *session(void)
{
    static rs_session *s;
    if (s) return s;
    s = rs_session_new(fopen("/dev/null", "w"));
    rs_obj m = {.kind = RS_OBJ_MODEL};
    rs_err e = {0};
    rs_model_parse("mlp 784-16-10", "m", rs_device_cpu(), NULL, 1, &m.model, NULL, &e);
    m.spec = rs_model_spec(m.model);
    snprintf(m.name, sizeof m.name, "m");
    rs_session_put(s, &m);
    rs_obj d = {.kind = RS_OBJ_DATA};
    rs_data_digits_pair(20, 10, 1, &d.data, &e);
    snprintf(d.name, sizeof d.name, "d");
    rs_session_put(s, &d);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *line = malloc(size + 1);
    memcpy(line, data, size);
    line[size] = '\0';
    rs_session *s = session();
    rs_span spans[16];
    int n = rs_lex_split_commands(line, spans, 16);
    for (int i = 0; i < n && i < 16; i++) {
        rs_tokens t = {0};
        size_t pos;
        rs_err e = {0};
        if (rs_lex_command(line, spans[i], &t, &pos, &e) == RS_OK && t.n > 0) {
            rs_call c;
            if (rs_call_parse(s, line, &t, &c) == 0) {
                /* Accepted: the command exists, the arguments fit its declaration, options are typed. */
                if (!c.cmd || c.nargs > c.cmd->nargs) __builtin_trap();
                for (int a = 0; a < c.nargs; a++)
                    if (!c.args[a] || c.arg_pos[a] >= strlen(line)) __builtin_trap();
                if (c.cmd->binding && (!c.rest || c.rest_pos > strlen(line) || !c.bind[0])) __builtin_trap();
            }
            rs_call_clear(&c);
        }
        rs_lex_clear(&t);
    }
    free(line);
    return 0;
}

#define SEED(s) {(const uint8_t *)(s), sizeof(s) - 1}
static const rs_fuzz_seed seed_list[] = {
    SEED("model m2 = mlp 784-256-10 act=relu seed=3"),
    SEED("model c = seq conv(16,3,pad=1) relu maxpool(2) [ conv(32,3) relu ] flatten linear(10)"),
    SEED("data d2 = digits n=200 seed=1; data f = idx a.gz b.gz"),
    SEED("train m on d epochs=2 batch=32 lr=1e-3 opt=adamw sched=cosine warmup=10 ckpt=x.safetensors"),
    SEED("eval m on d split=train; predict m on d n=3 seed=2"),
    SEED("show run 3; compare 1 2; sql \"select * from runs where id > 1\"; history n=5"),
    SEED("export session 1 out.ring; replay 2; play tour auto; say \"hello; # not a comment\""),
    SEED("set threads=2 seed=7 color=off # trailing comment"),
    SEED("help train; help trian; trian m on d epochz=1"),
};

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    *seeds = seed_list;
    return sizeof seed_list / sizeof *seed_list;
}
