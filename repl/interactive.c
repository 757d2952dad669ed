/* The interactive prompt: GNU readline through its callback interface, so that Ctrl-C at the prompt
 * is handled in the main loop (discard the line, new prompt) rather than inside a signal handler,
 * and Ctrl-C during a command only raises the flag the command polls. Completion is generated from
 * the command table: commands, option names (`epochs=`), enum values, session names and paths. */
#define _GNU_SOURCE /* open_memstream */
#include <errno.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "repl.h"

static rs_session *cur;          /* readline's callbacks take no user pointer */
static char *pending_line;       /* set by the line handler, consumed by the loop */
static bool got_eof;

static void on_line(char *line)
{
    if (!line) {
        got_eof = true;
        rl_callback_handler_remove();
        return;
    }
    pending_line = line;
}

/* ---- completion ---- */

static const rs_cmddef *line_command(const char *buf, int upto, int *nwords, int *in_rest)
{
    /* Words before the cursor: the command is the first one. */
    char first[64] = "";
    int n = 0;
    *in_rest = 0;
    for (int i = 0; i < upto;) {
        while (i < upto && (buf[i] == ' ' || buf[i] == '\t')) i++;
        if (i >= upto) break;
        int b = i;
        while (i < upto && buf[i] != ' ' && buf[i] != '\t') i++;
        if (i >= upto) break; /* the word being completed */
        if (n == 0) snprintf(first, sizeof first, "%.*s", i - b, buf + b);
        if (i - b == 1 && buf[b] == '=') *in_rest = 1;
        n++;
    }
    *nwords = n;
    return n ? rs_cmd_find(first) : NULL;
}

static char **matches;
static int nmatches, match_i;

static void add_match(const char *prefix, const char *cand, const char *suffix)
{
    size_t pl = strlen(prefix);
    if (strncmp(cand, prefix, pl)) return;
    char **n = realloc(matches, (size_t)(nmatches + 2) * sizeof *n);
    if (!n) return;
    matches = n;
    size_t len = strlen(cand) + strlen(suffix) + 1;
    matches[nmatches] = malloc(len);
    if (matches[nmatches]) snprintf(matches[nmatches++], len, "%s%s", cand, suffix);
}

static char *gen(const char *text, int state)
{
    (void)text;
    if (!state) match_i = 0;
    if (match_i < nmatches) return strdup(matches[match_i++]);
    return NULL;
}

static char **complete(const char *text, int start, int end)
{
    (void)end;
    for (int i = 0; i < nmatches; i++) free(matches[i]);
    free(matches);
    matches = NULL;
    nmatches = 0;
    rl_attempted_completion_over = 1;
    int nwords, in_rest;
    const rs_cmddef *c = line_command(rl_line_buffer, start, &nwords, &in_rest);
    if (nwords == 0) {
        for (const rs_cmddef *k = rs_commands; k->name; k++) add_match(text, k->name, " ");
        rl_completion_suppress_append = 1; /* the match carries its own space */
        return rl_completion_matches(text, gen);
    }
    if (!c) return NULL;
    const char *eq = strchr(text, '=');
    if (eq && c->opts) {
        /* key=VALUE: enum choices, booleans, files */
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - text), text);
        for (const rs_optdef *o = c->opts; o->name; o++) {
            if (strcmp(o->name, key)) continue;
            char pre[128];
            snprintf(pre, sizeof pre, "%s=", key);
            if (o->type == RS_T_ENUM)
                for (int i = 0; o->choices[i]; i++) {
                    char full[128];
                    snprintf(full, sizeof full, "%s%s", pre, o->choices[i]);
                    add_match(text, full, " ");
                }
            else if (o->type == RS_T_BOOL) {
                char on[160], off[160];
                snprintf(on, sizeof on, "%son", pre);
                snprintf(off, sizeof off, "%soff", pre);
                add_match(text, on, " ");
                add_match(text, off, " ");
            } else if (o->type == RS_T_PATH) {
                char *f;
                for (int st = 0; (f = rl_filename_completion_function(eq + 1, st)); st++) {
                    char full[1024];
                    snprintf(full, sizeof full, "%s%s", pre, f);
                    add_match(text, full, "");
                    free(f);
                }
            }
        }
        return nmatches ? rl_completion_matches(text, gen) : NULL;
    }
    /* Positional argument at this index (bindings: the name, '=', then free text). */
    int argi = c->binding ? -1 : nwords - 1;
    if (argi >= 0 && argi < c->nargs) {
        const rs_argdef *a = &c->args[argi];
        if (a->kind == RS_A_KEYWORD) add_match(text, a->name, " ");
        else if (a->kind == RS_A_PATH) {
            rl_attempted_completion_over = 0; /* readline's own file name completion */
            return NULL;
        } else if (a->kind == RS_A_MODEL || a->kind == RS_A_DATA || a->kind == RS_A_NAME) {
            for (int i = 0; i < cur->nobjs; i++) {
                const rs_obj *o = &cur->objs[i];
                if (a->kind == RS_A_NAME || (a->kind == RS_A_MODEL) == (o->kind == RS_OBJ_MODEL))
                    add_match(text, o->name, " ");
            }
            if (!strcmp(c->name, "show")) add_match(text, "run", " ");
        } else if (!strcmp(c->name, "help")) {
            for (const rs_cmddef *k = rs_commands; k->name; k++) add_match(text, k->name, "");
        } else if (!strcmp(c->name, "play")) {
            add_match(text, "tour", " ");
            rl_attempted_completion_over = 0;
        }
    }
    if (c->binding && in_rest) {
        static const char *const words[] = {"mlp", "seq", "digits", "fashion", "idx", "cifar", "csv", "linear(",
                                            "conv(", "maxpool(", "avgpool(", "relu", "gelu", "tanh", "flatten",
                                            "dropout(", "layernorm", NULL};
        for (int i = 0; words[i]; i++) add_match(text, words[i], strchr(words[i], '(') ? "" : " ");
    }
    if (c->opts && (!c->binding || in_rest))
        for (const rs_optdef *o = c->opts; o->name; o++) add_match(text, o->name, "=");
    if (!nmatches) return NULL;
    rl_completion_suppress_append = 1;
    return rl_completion_matches(text, gen);
}

/* ---- the loop ---- */

static volatile sig_atomic_t sigint_seen;

static void on_sigint(int sig)
{
    (void)sig;
    sigint_seen = 1;
    if (cur && cur->interrupt) *cur->interrupt = 1;
}

/* Text printed above the prompt without breaking the line being typed: the line and its cursor are
 * saved, the prompt line cleared, the text written, then the prompt and the line drawn again. */
static void print_above(const char *text, size_t len)
{
    int point = rl_point;
    char *saved = rl_copy_text(0, rl_end);
    rl_save_prompt();
    rl_replace_line("", 0);
    rl_redisplay();
    fputs("\r\033[K", stdout); /* the (now empty) prompt line: the text starts at its column 0 */
    fwrite(text, 1, len, stdout);
    if (len && text[len - 1] != '\n') fputc('\n', stdout);
    fflush(stdout);
    rl_restore_prompt();
    rl_replace_line(saved ? saved : "", 0);
    rl_point = point <= rl_end ? point : rl_end;
    rl_on_new_line();
    rl_forced_update_display();
    free(saved);
}

/* Background runs (`q` in the live view): their output and exits, and the end of those that finished,
 * printed above the prompt. */
static void pump_jobs(rs_session *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return;
    FILE *out = s->out;
    s->out = m;
    rs_jobs_pump(s);
    s->out = out;
    fclose(m);
    if (len) print_above(buf, len);
    free(buf);
}

static void prompt_for(rs_session *s, char *buf, size_t n)
{
    /* \001 \002 tell readline the colour codes take no columns. */
    if (s->color) snprintf(buf, n, "\001\033[1;32m\002ringside>\001\033[0m\002 ");
    else snprintf(buf, n, "ringside> ");
}

int rs_repl_interactive(rs_session *s, const char *history_path)
{
    cur = s;
    rl_readline_name = "ringside";
    rl_attempted_completion_function = complete;
    rl_catch_signals = 0; /* our handler; readline must not install its own */
    rl_catch_sigwinch = 1;
    using_history();
    stifle_history(2000);
    if (history_path) read_history(history_path);
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: select() must wake up */
    sigaction(SIGINT, &sa, NULL);

    char prompt[64];
    prompt_for(s, prompt, sizeof prompt);
    rl_callback_handler_install(prompt, on_line);
    int errors = 0;
    while (!s->quit && !got_eof) {
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(STDIN_FILENO, &fds);
        /* with runs in the background, wake often to service them (rs_jobs_pump drains for ~15 ms) */
        struct timeval tick = {0, 5000};
        int r = select(STDIN_FILENO + 1, &fds, NULL, NULL, rs_jobs_count(s) ? &tick : NULL);
        if (rs_jobs_count(s)) pump_jobs(s);
        if (sigint_seen) {
            /* Ctrl-C at the prompt: drop what was typed, start a fresh line. */
            sigint_seen = 0;
            if (s->interrupt) *s->interrupt = 0;
            rl_free_line_state();
            rl_callback_sigcleanup();
            rl_replace_line("", 0);
            fputs("^C\n", stdout);
            rl_on_new_line();
            rl_redisplay();
            continue;
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (r == 0 || !FD_ISSET(STDIN_FILENO, &fds)) continue; /* a tick for the background runs, no key */
        rl_callback_read_char();
        if (pending_line) {
            char *line = pending_line;
            pending_line = NULL;
            /* Run the command with readline's terminal settings restored to normal. */
            rl_callback_handler_remove();
            if (*line) {
                add_history(line);
                if (history_path) {
                    /* Append as we go so a crash keeps the history. */
                    if (append_history(1, history_path) != 0) write_history(history_path);
                }
            }
            s->can_detach = true; /* `q` in a live view sends the run to the background */
            errors += rs_repl_line(s, line) ? 1 : 0;
            s->can_detach = false;
            sigint_seen = 0;
            if (s->interrupt) *s->interrupt = 0;
            free(line);
            if (!s->quit) rl_callback_handler_install(prompt, on_line);
        }
    }
    if (got_eof) fputc('\n', stdout);
    rl_callback_handler_remove();
    rs_jobs_stop_all(s, true); /* quit or end of input: background runs end with the session */
    if (history_path) history_truncate_file(history_path, 2000);
    for (int i = 0; i < nmatches; i++) free(matches[i]);
    free(matches);
    matches = NULL;
    nmatches = 0;
    cur = NULL;
    return errors;
}
