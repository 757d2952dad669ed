/* The words an option or argument takes at the prompt are its owner's: completion offers each owner's
 * list element by element, in its order, and the parser takes every word of it as the owner's own
 * index (the handlers cast that index to the owner's enum). A new backend, algorithm, optimizer or
 * precision added to its module's list passes here with no edit in repl/ (docs/add-a-command.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "complete.h"
#include "dist/pg/pg.h"
#include "dist/train/registry.h"
#include "dist/worker/pi.h"
#include "dist/worker/worker.h"
#include "engine/core/device.h"
#include "engine/optim/optim.h"
#include "engine/optim/sched.h"
#include "lang/lex.h"
#include "plan/plan.h"
#include "repl.h"
#include "rs_test.h"
#include "serve/ranks.h"
#include "session.h"

/* Completion of the last word of line against words[0..n), in order; what follows '=' in the line's
 * last word prefixes each candidate (`opt=` -> `opt=sgd `). */
static void offers(const char *line, const char *const *words, int n)
{
    int start = (int)strlen(line);
    while (start > 0 && line[start - 1] != ' ') start--;
    rs_compl o;
    rs_complete(NULL, line, start, (int)strlen(line), &o);
    RS_CHECK(n > 0 && o.n == n, "%s: %d candidates, the owner has %d", line, o.n, n);
    for (int i = 0; i < n && i < o.n; i++) {
        char want[128];
        snprintf(want, sizeof want, "%s%s ", line + start, words[i]);
        RS_CHECK(!strcmp(o.words[i], want), "%s: candidate %d is '%s', the owner's is '%s'", line, i, o.words[i],
                 want);
    }
    rs_compl_clear(&o);
}

static int count(const char *const *words)
{
    int n = 0;
    while (words[n]) n++;
    return n;
}

/* `cmd KEY=WORD` for every word of the owner's list: taken, as the owner's index. */
static void parses(rs_session *s, const char *cmd, const char *key, const char *const *words, int n)
{
    for (int i = 0; i < n; i++) {
        char line[256];
        snprintf(line, sizeof line, "%s %s=%s", cmd, key, words[i]);
        rs_tokens t = {0};
        rs_err err = {0};
        RS_CHECK(rs_lex_line(line, &t, NULL, &err) == RS_OK, "%s: %s", line, err.msg);
        rs_call c;
        int bad = rs_call_parse(s, line, &t, &c);
        RS_CHECK(!bad, "%s: refused", line);
        const rs_optval *v = bad ? NULL : rs_call_opt(&c, key);
        RS_CHECK(!v || (v->set && v->v.choice == i), "%s: parsed as choice %d, the owner's index is %d", line,
                 v ? v->v.choice : -1, i);
        if (!bad) rs_call_clear(&c);
        rs_lex_clear(&t);
    }
}

/* Both at once, for an enum option with a NULL-terminated owner list. */
static void owned(rs_session *s, const char *cmd, const char *key, const char *const *words)
{
    char line[256];
    snprintf(line, sizeof line, "%s %s=", cmd, key);
    offers(line, words, count(words));
    parses(s, cmd, key, words, count(words));
}

int main(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    rs_session *s = rs_session_new(out);
    s->err = out;
    /* train checks that its MODEL and DATA exist before it reads the options */
    RS_CHECK(!rs_repl_line(s, "model m = mlp 4-2") && !rs_repl_line(s, "data d = digits n=60"), "model m, data d");

    owned(s, "train m on d", "opt", rs_opt_kind_names);
    owned(s, "train m on d", "sched", rs_sched_kind_names);
    owned(s, "train m on d", "backend", rs_pg_backend_names);
    const char *prec[RS_PREC_COUNT + 1] = {0}; /* rs_prec names its words one at a time */
    for (int p = 0; p < RS_PREC_COUNT; p++) prec[p] = rs_prec_name((rs_prec)p);
    owned(s, "train m on d", "precision", prec);
    const char *modes[64] = {0}; /* the registry of strategies */
    for (int i = 0; rs_strategy_list()[i] && i < 63; i++) modes[i] = rs_strategy_list()[i]->name;
    owned(s, "train m on d", "mode", modes);

    const char *const *collectives = RS_PG_COLLECTIVE_NAMES;
    offers("collective ", collectives, count(collectives));
    offers("bench ", collectives, count(collectives));
    RS_CHECK(!strcmp(collectives[0], "broadcast") && !strcmp(collectives[count(collectives) - 1], "barrier"),
             "collectives run from broadcast to barrier, not %s to %s", collectives[0],
             collectives[count(collectives) - 1]);
    const char *const ranks_cmds[] = {"collective all_reduce", "bench all_reduce"};
    for (int i = 0; i < 2; i++) {
        owned(s, ranks_cmds[i], "backend", rs_pg_backend_names);
        owned(s, ranks_cmds[i], "algo", rs_pg_algo_names);
        owned(s, ranks_cmds[i], "op", rs_redop_names);
        owned(s, ranks_cmds[i], "dtype", rs_pg_dtype_names);
    }
    owned(s, "world", "backend", rs_pg_backend_names);
    owned(s, "tp matmul", "split", rs_matmul_split_names);
    owned(s, "pi", "method", rs_pi_method_names);

    owned(s, "compile m -> m.plan", "precision", rs_plan_prec_names);
    owned(s, "compile m -> m.plan", "calib_method", rs_plan_calib_names);
    owned(s, "compile m -> m.plan", "device", rs_plan_dev_names);
    owned(s, "serve m", "mode", rs_serve_ranks_modes);

    /* `to MODEL DEVICE`: each device kind's name, cuda also as cuda:0 */
    const char *dev[2 * RS_DEV_KIND_COUNT + 1] = {0};
    int nd = 0;
    for (int k = 0; k < RS_DEV_KIND_COUNT; k++) {
        dev[nd++] = rs_device_name((rs_device){.kind = (rs_device_kind)k});
        if (k == RS_DEV_CUDA) dev[nd++] = "cuda:0";
    }
    offers("to m ", dev, nd);

    rs_session_free(s);
    fclose(out);
    free(buf);
    return rs_test_finish("choices");
}
