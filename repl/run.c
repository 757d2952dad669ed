/* Running commands from a line, a script file or a tutorial: split, lex, parse against the table,
 * log, dispatch. Scripts stop at the first error unless --keep-going; errors start with file:line:. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "repl.h"
#include "wrap.h"
#include "repl_log.h"
#include "slog/slog.h"

const char *rs_repl_tutorial_dir(void)
{
    const char *env = getenv("RINGSIDE_TUTORIALS");
    if (env && *env) return env;
#ifdef RS_SOURCE_DIR
    return RS_SOURCE_DIR "/tutorials";
#else
    return "tutorials";
#endif
}

/* Runs one command (the span of line); returns 0 ok, 1 error, 2 cancelled. */
static int run_command(rs_session *s, const char *line, rs_span span)
{
    rs_tokens t = {0};
    size_t pos = (size_t)-1;
    rs_err err = {0};
    int rc = 0;
    rs_status lexed = rs_lex_command(line, span, &t, &pos, &err);
    if (lexed == RS_OK && t.n == 0) {
        rs_lex_free(&t);
        return 0;
    }
    /* The command's own text, for echo and the log: what was typed, even when it does not lex. */
    size_t end = lexed == RS_OK && t.end > span.off ? t.end : span.off + span.len;
    while (end > span.off && (line[end - 1] == ' ' || line[end - 1] == '\t')) end--;
    const char *from = line + span.off;
    while (*from == ' ' || *from == '\t') from++;
    char *text = strndup(from, end > (size_t)(from - line) ? end - (size_t)(from - line) : 0);
    /* Narration is its own output: echoing `say "..."` before it would print it twice. */
    bool narration = lexed == RS_OK && t.tok[0].kind == RS_TOK_WORD &&
                     (!strcmp(t.tok[0].text, "say") || !strcmp(t.tok[0].text, "pause"));
    if (s->echo && !narration)
        fprintf(s->out, "%s> %s%s\n", rs_sty(s, "\033[2m"), text ? text : "", rs_sty(s, "\033[0m"));
    int64_t saved_cmd = s->cmd_id;
    s->cmd_id = s->log ? rs_slog_command_begin(s->log, text ? text : "", s->source) : 0;
    int errors_before = s->errors;
    rs_call c = {0};
    if (lexed != RS_OK) {
        rs_session_line_error(s, line, pos, 1, "%s", err.msg);
        rc = 1;
    } else if (rs_call_parse(s, line, &t, &c)) {
        rc = 1;
    } else {
        rc = c.cmd->fn(s, &c);
    }
    rs_call_free(&c);
    if (s->log) {
        const char *status = rc == 0 ? "ok" : rc == 2 ? "cancelled" : "error";
        rs_slog_command_end(s->log, s->cmd_id, status, rc == 1 ? s->last_error : NULL);
        rs_log_check(s);
    }
    if (rc == 1 && s->errors == errors_before) s->errors++;
    s->cmd_id = saved_cmd;
    free(text);
    rs_lex_free(&t);
    fflush(s->out);
    return rc;
}

int rs_repl_line(rs_session *s, const char *line)
{
    rs_span spans[64];
    int n = rs_lex_split_commands(line, spans, 64);
    if (n > 64) return rs_session_line_error(s, line, (size_t)-1, 0, "at most 64 commands on one line");
    int failed = 0;
    for (int i = 0; i < n && !s->quit; i++) {
        int rc = run_command(s, line, spans[i]);
        if (rc == 1) failed++;
        if (rc && !s->keep_going) break; /* `a; b`: b runs only if a worked */
    }
    return failed;
}

/* Asks before a command in step mode: Enter runs it, s skips, q stops the tutorial. */
static int step_prompt(rs_session *s, const char *line)
{
    fprintf(s->out, "%snext:%s %s   [Enter: run, s: skip, q: stop] ", rs_sty(s, "\033[1m"), rs_sty(s, "\033[0m"), line);
    fflush(s->out);
    int ch = getchar(), first = ch;
    while (ch != EOF && ch != '\n') ch = getchar();
    if (first == EOF) clearerr(stdin);
    rs_wrap_line_start(s->out); /* the terminal echoed the Enter */
    if (first == 'q' || first == 'Q') return 2;
    if (first == 's' || first == 'S') return 1;
    return 0;
}

int rs_repl_file(rs_session *s, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return rs_session_line_error(s, NULL, (size_t)-1, 0, "cannot open %s: %s", path, strerror(errno));
    const char *old_file = s->where_file, *old_source = s->source;
    int old_line = s->where_line;
    char source[600];
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int errors = 0, lineno = 0;
    s->where_file = path;
    while (!s->quit && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        s->where_line = lineno;
        snprintf(source, sizeof source, "script:%s:%d", path, lineno);
        s->source = source;
        if (s->play_depth && s->play_mode == RS_PLAY_STEP && s->interactive) {
            const char *p = line;
            while (*p == ' ' || *p == '\t') p++;
            bool narration = !strncmp(p, "say ", 4) || !strncmp(p, "pause", 5) || *p == '#' || !*p;
            if (!narration) {
                int a = step_prompt(s, p);
                if (a == 2) break;
                if (a == 1) continue;
            }
        }
        int failed = rs_repl_line(s, line);
        errors += failed;
        if (s->interrupt && *s->interrupt) {
            fprintf(s->out, "stopped %s at line %d (Ctrl-C)\n", path, lineno);
            break;
        }
        if (failed && !s->keep_going) break;
    }
    free(line);
    fclose(f);
    s->where_file = old_file;
    s->where_line = old_line;
    s->source = old_source;
    return errors;
}

int rs_cmd_play(rs_session *s, const rs_call *c)
{
    char path[1024];
    const char *arg = c->args[0];
    if (!strcmp(arg, "tour")) snprintf(path, sizeof path, "%s/00-tour.ring", rs_repl_tutorial_dir());
    else if (access(arg, R_OK) != 0 && !strchr(arg, '/')) {
        /* A bare name: look in the tutorials folder, with or without .ring, and without its number
         * (`play collectives` finds 01-collectives.ring). */
        snprintf(path, sizeof path, "%s/%s%s", rs_repl_tutorial_dir(), arg, strstr(arg, ".ring") ? "" : ".ring");
        DIR *d = access(path, R_OK) != 0 ? opendir(rs_repl_tutorial_dir()) : NULL;
        for (struct dirent *e; d && (e = readdir(d));) {
            const char *dash = strchr(e->d_name, '-');
            size_t n = strlen(arg);
            if (dash && !strncmp(dash + 1, arg, n) && !strcmp(dash + 1 + n, strstr(arg, ".ring") ? "" : ".ring")) {
                snprintf(path, sizeof path, "%s/%s", rs_repl_tutorial_dir(), e->d_name);
                break;
            }
        }
        if (d) closedir(d);
    } else snprintf(path, sizeof path, "%s", arg);
    if (access(path, R_OK) != 0) {
        if (!strcmp(arg, "tour") || strcmp(path, arg))
            return rs_session_error(s, c, c->arg_pos[0], strlen(arg),
                                    "play: no file '%s' here, and no tutorial %s (%s)", arg, path, strerror(errno));
        return rs_session_error(s, c, c->arg_pos[0], strlen(arg), "play: cannot read %s: %s", path, strerror(errno));
    }
    rs_play_mode mode = (rs_play_mode)rs_call_opt(c, "mode")->v.choice;
    if (c->nargs > 1) {
        if (!strcmp(c->args[1], "auto")) mode = RS_PLAY_AUTO;
        else if (!strcmp(c->args[1], "step")) mode = RS_PLAY_STEP;
        else if (!strcmp(c->args[1], "interactive")) mode = RS_PLAY_INTERACTIVE;
        else
            return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]),
                                    "play: mode '%s' is not one of interactive, auto, step", c->args[1]);
    }
    if (s->play_depth >= 4) return rs_session_error(s, c, c->arg_pos[0], strlen(arg), "play: tutorials nest at most 4 deep");
    rs_play_mode old_mode = s->play_mode;
    bool old_echo = s->echo, old_keep = s->keep_going;
    s->play_mode = mode;
    s->play_depth++;
    s->echo = true;
    s->keep_going = false;
    int errors = rs_repl_file(s, path);
    s->play_depth--;
    s->play_mode = old_mode;
    s->echo = old_echo;
    s->keep_going = old_keep;
    if (errors) return rs_session_error(s, c, (size_t)-1, 0, "play: %s stopped after an error", path);
    return 0;
}
