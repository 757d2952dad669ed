/* `generate MODEL [prompt="..."] [n=200] [temp=0.8] [top_k=40] [seed=] [cache=on] [window=crop] [data=]`:
 * samples tokens from a language model and streams them as they are drawn. A token is a byte of the
 * text data set the model reads (the newest one with the model's vocabulary, or data=); the bytes go
 * out as sampled, so a file or pipe gets exactly them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/data.h"
#include "engine/nn/generate.h"
#include "call.h"
#include "repl_log.h"
#include "session.h"
#include "wrap.h"

typedef struct gen_out {
    rs_session *s;
    const rs_text_vocab *v;
} gen_out;

static void on_token(void *ud, int32_t tok)
{
    gen_out *g = ud;
    char ch[2];
    rs_text_decode(g->v, &tok, 1, ch);
    /* as sampled: never wrapped at the terminal's width, also when piped (a file keeps the text); a
     * byte at a time, so the class watches it being written */
    rs_wrap_raw(g->s->out, ch, 1);
}

static bool should_stop(void *ud)
{
    gen_out *g = ud;
    return g->s->interrupt && *g->s->interrupt;
}

/* The vocabulary to decode with: data=NAME, else the newest text data set of the model's size, else
 * the built-in corpus when it matches (kept in *builtin, freed by the caller). `serve` uses it too. */
const rs_text_vocab *rs_generate_vocab(rs_session *s, const rs_call *c, int V, rs_data_pair *builtin)
{
    const char *want = rs_call_str(c, "data", NULL);
    for (int i = s->nobjs - 1; i >= 0; i--) {
        const rs_obj *o = &s->objs[i];
        if (o->kind != RS_OBJ_DATA || !o->data.train || (want && strcmp(o->name, want))) continue;
        const rs_text_vocab *v = rs_text_vocab_of(o->data.train);
        if (v && v->n == V) return v;
    }
    rs_err err = {0};
    if (!want && !rs_data_text_builtin(RS_DATA_TEXT_CTX, builtin, &err)) {
        const rs_text_vocab *v = rs_text_vocab_of(builtin->train);
        if (v && v->n == V) return v;
    }
    return NULL;
}

int rs_cmd_generate(rs_session *s, const rs_call *c)
{
    rs_obj *m = rs_session_find(s, c->args[0]);
    if (!m->model || !rs_model_tokens(m->model))
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]),
                                "generate: %s is not a language model; build one with `model g = gpt` and train it on "
                                "text (`data t = text`)", m->name);
    if (rs_session_check_busy(s, c, m, c->arg_pos[0], strlen(c->args[0]))) return 1;
    int V = rs_model_vocab(m->model);
    rs_data_pair builtin = {0};
    const rs_text_vocab *v = rs_generate_vocab(s, c, V, &builtin);
    if (!v) {
        rs_data_pair_clear(&builtin);
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]),
                                "generate: no text data set has %s's vocabulary of %d bytes; open the text it "
                                "was trained on (data t = text FILE) or name it with data=", m->name, V);
    }
    rs_gen_cfg cfg = rs_gen_defaults();
    cfg.n = (int)rs_call_int(c, "n", cfg.n);
    cfg.temp = (float)rs_call_float(c, "temp", cfg.temp);
    cfg.top_k = (int)rs_call_int(c, "top_k", cfg.top_k);
    cfg.seed = rs_call_given(c, "seed") ? (uint64_t)rs_call_int(c, "seed", 0) : s->seed;
    cfg.cache = rs_call_bool(c, "cache", true);
    cfg.window = strcmp(rs_call_str(c, "window", "crop"), "shift") ? RS_GEN_WINDOW_CROP : RS_GEN_WINDOW_SHIFT;
    int rc = 0;
    if (cfg.n < 0 || cfg.n > 100000 || !(cfg.temp >= 0.0f) || cfg.top_k < 0) {
        rc = rs_session_error(s, c, (size_t)-1, 0, "generate: n must be 0..100000, temp >= 0 and top_k >= 0");
        goto out;
    }
    /* The prompt: given, else a newline as nanoGPT starts (or the vocabulary's first byte). */
    const char *prompt = rs_call_str(c, "prompt", NULL);
    char nl[2] = {v->id['\n'] >= 0 ? '\n' : (char)v->chars[0], 0};
    if (!prompt || !*prompt) prompt = nl;
    size_t plen = strlen(prompt);
    int32_t *ids = malloc(plen * sizeof *ids); /* owned here */
    rs_err err = {0};
    if (!ids) {
        rc = rs_session_error(s, c, (size_t)-1, 0, "out of memory");
        goto out;
    }
    if (rs_text_encode(v, prompt, plen, ids, &err)) {
        free(ids);
        rc = rs_session_error(s, c, rs_call_given(c, "prompt") ? rs_call_opt(c, "prompt")->pos : (size_t)-1, 6,
                              "generate: %s", err.msg);
        goto out;
    }
    if (prompt != nl) rs_wrap_raw(s->out, prompt, strlen(prompt));
    gen_out g = {.s = s, .v = v};
    rs_gen_stats st;
    rs_status rs = rs_generate(m->model, ids, (int)plen, &cfg, on_token, should_stop, &g, &st, &err);
    free(ids);
    fputc('\n', s->out);
    if (rs) {
        rc = rs_session_error(s, c, (size_t)-1, 0, "generate: %s", err.msg);
        goto out;
    }
    char why[160] = "", how[256];
    if (cfg.cache && rs_gen_no_cache_reason(m->model, why, sizeof why))
        snprintf(how, sizeof how, "recomputing the window per token: %s", why);
    else if (!cfg.cache)
        snprintf(how, sizeof how, "recomputing the window per token");
    else if (st.recomputed && cfg.window == RS_GEN_WINDOW_CROP)
        snprintf(how, sizeof how, "KV cache; %d past the context recomputed", st.recomputed);
    else if (cfg.window == RS_GEN_WINDOW_SHIFT && (int)plen + st.tokens > rs_model_rows(m->model) + 1)
        snprintf(how, sizeof how, "KV cache, window=shift: not nanoGPT's text past the context");
    else
        snprintf(how, sizeof how, "KV cache");
    fprintf(s->out, "%s%d tokens in %.2fs, %.0f tokens/s (%s)\n", st.stopped ? "stopped: " : "", st.tokens,
            st.seconds, st.seconds > 0 ? st.tokens / st.seconds : 0.0, how);
    if (st.stopped && s->interrupt) *s->interrupt = 0;
out:
    rs_data_pair_clear(&builtin);
    return rc;
}
