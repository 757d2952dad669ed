/* The interactive prompt: GNU readline through its callback interface, so that Ctrl-C at the prompt
 * is handled in the main loop (discard the line, new prompt) rather than inside a signal handler,
 * and Ctrl-C during a command only raises the flag the command polls. Completion is generated from
 * the command table (complete.c): commands, arguments, option names (`epochs=`), their values, a
 * binding's forms, session names and paths. */
#define _GNU_SOURCE /* open_memstream */
#include <errno.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <unistd.h>

#include "complete.h"
#include "repl.h"
#include "wrap.h"

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
    /* Removed here, inside the handler, so readline does not draw a fresh prompt on return: the
     * command's output would then start on that prompt's line (`1ingside>`, or after a stray
     * `ringside> ` where the terminal cannot move the cursor). The loop installs it again after
     * the command, below its output. */
    rl_callback_handler_remove();
    pending_line = line;
}

/* ---- completion (candidates from complete.c) ---- */

static char **matches;
static int nmatches, match_i;

static void clear_matches(void)
{
    for (int i = 0; i < nmatches; i++) free(matches[i]);
    free(matches);
    matches = NULL;
    nmatches = 0;
}

static void push_match(char *m)
{
    char **n = realloc(matches, (size_t)(nmatches + 1) * sizeof *n);
    if (!n) {
        free(m);
        return;
    }
    matches = n;
    matches[nmatches++] = m;
}

static char *gen(const char *text, int state)
{
    (void)text;
    if (!state) match_i = 0;
    if (match_i < nmatches) return strdup(matches[match_i++]);
    return NULL;
}

static bool ends_with_one(const char *f, const char *const *exts)
{
    size_t n = strlen(f);
    for (int i = 0; exts[i]; i++) {
        size_t k = strlen(exts[i]);
        if (n >= k && !strcasecmp(f + n - k, exts[i])) return true;
    }
    return false;
}

/* Files after pre ("ckpt=" or ""): directories end in '/', so completion goes on inside them; with
 * exts, only the files with one of those endings (and every folder). */
static void add_files(const char *text, const char *pre, const char *const *exts)
{
    size_t pl = strlen(pre);
    if (strncmp(text, pre, pl)) return;
    char *f;
    for (int st = 0; (f = rl_filename_completion_function(text + pl, st)); st++) {
        char *exp = tilde_expand(f);
        struct stat sb;
        bool dir = exp && stat(exp, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(exp);
        size_t fl = strlen(f);
        if ((!dir && exts && !ends_with_one(f, exts)) || !fl) {
            free(f);
            continue;
        }
        size_t len = pl + fl + 2;
        char *m = malloc(len);
        if (m) { /* readline may hand a folder back with its '/' already */
            snprintf(m, len, "%s%s%s", pre, f, dir ? (f[fl - 1] == '/' ? "" : "/") : " ");
            push_match(m);
        }
        free(f);
    }
    /* the '/' is ours: readline must not add another when it inserts or lists a folder (`exp//`) */
    rl_filename_completion_desired = 0;
}

static char **complete(const char *text, int start, int end)
{
    clear_matches();
    rl_attempted_completion_over = 1;  /* never readline's default (file names) behind our back */
    rl_completion_suppress_append = 1; /* each candidate carries what follows it */
    rs_compl o;
    rs_complete(cur, rl_line_buffer, start, end, &o);
    for (int i = 0; i < o.n; i++) {
        push_match(o.words[i]);
        o.words[i] = NULL;
    }
    if (o.files) add_files(text, o.file_pre, o.exts);
    rs_compl_clear(&o);
    return nmatches ? rl_completion_matches(text, gen) : NULL;
}

/* Listing candidates (Tab Tab): `opt=adam opt=adamw opt=sgd` shows as `adam adamw sgd`, a file as its
 * last path component, as shells list them. */
static void display_matches(char **list, int num, int max_length)
{
    (void)max_length;
    char **shown = calloc((size_t)num + 2, sizeof *shown);
    if (!shown) return;
    int longest = 0;
    for (int i = 0; i <= num; i++) {
        /* `opt=adam ` shows as adam; an option's name (`mode=`: nothing after '=') whole */
        const char *m = list[i], *eq = strchr(m, '='), *sl = strrchr(m, '/');
        const char *from = eq && eq[1] ? eq + 1 : m;
        if (sl && sl > from && sl[1]) from = sl + 1;
        else if (sl && sl > from && !sl[1]) { /* a directory "a/b/": show "b/" */
            const char *p = sl;
            while (p > from && p[-1] != '/') p--;
            from = p;
        }
        size_t l = strlen(from);
        if (l && from[l - 1] == ' ') l--;
        shown[i] = strndup(from, l);
        if (i && (int)l > longest) longest = (int)l;
    }
    rl_display_match_list(shown, num, longest);
    for (int i = 0; i <= num; i++) free(shown[i]);
    free(shown);
    rl_forced_update_display();
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
static void print_above(FILE *out, const char *text, size_t len)
{
    int point = rl_point;
    char *saved = rl_copy_text(0, rl_end);
    rl_save_prompt();
    rl_replace_line("", 0);
    rl_redisplay();
    fflush(stdout);
    /* the (now empty) prompt line: the text starts at its column 0, and goes through the session's
     * output so it is wrapped to the terminal like the rest */
    fputs("\r\033[K", out);
    fwrite(text, 1, len, out);
    if (len && text[len - 1] != '\n') fputc('\n', out);
    fflush(out);
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
    if (len) print_above(out, buf, len);
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
    rl_completion_display_matches_hook = display_matches;
    rl_basic_word_break_characters = " \t\n"; /* `opt=a` is one word: its key says what completes */
    rl_completer_word_break_characters = rl_basic_word_break_characters;
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
            /* The handler is removed (on_line): the terminal is back to normal for the command. */
            if (*line) {
                add_history(line);
                if (history_path) {
                    /* Append as we go so a crash keeps the history. */
                    if (append_history(1, history_path) != 0) write_history(history_path);
                }
            }
            s->can_detach = true; /* `q` in a live view sends the run to the background */
            rs_wrap_line_start(s->out); /* readline's Enter put the cursor at column 0 */
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
    clear_matches();
    cur = NULL;
    return errors;
}
