/* Running commands from a line, a script file or a tutorial: split, lex, parse against the table,
 * log, dispatch. Scripts stop at the first error unless --keep-going; errors start with file:line:. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "repl.h"
#include "wrap.h"
#include "repl_log.h"
#include "result.h"
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
        rs_lex_clear(&t);
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
    const char *saved_text = s->cmd_text;
    s->cmd_text = text;
    s->cmd_id = s->log ? rs_slog_command_begin(s->log, text ? text : "", s->source) : 0;
    int errors_before = s->errors;
    unsigned result_gen = rs_result_gen(s);
    rs_call c = {0};
    if (lexed != RS_OK) {
        rs_session_line_error(s, line, pos, 1, "%s", err.msg);
        rc = 1;
    } else if (rs_call_parse(s, line, &t, &c)) {
        rc = 1;
    } else {
        rc = c.cmd->fn(s, &c);
    }
    rs_call_clear(&c);
    if (rc != 0 && rs_result_gen(s) != result_gen) rs_result_fail(s); /* its numbers are not to be checked */
    if (s->log) {
        const char *status = rc == 0 ? "ok" : rc == 2 ? "cancelled" : "error";
        rs_slog_command_end(s->log, s->cmd_id, status, rc == 1 ? s->last_error : NULL);
        rs_log_check(s);
    }
    if (rc == 1 && s->errors == errors_before) s->errors++;
    s->cmd_id = saved_cmd;
    s->cmd_text = saved_text;
    free(text);
    rs_lex_clear(&t);
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
            /* narration and checks run without asking: the class steps through what does something */
            bool narration = !strncmp(p, "say ", 4) || !strncmp(p, "pause", 5) || !strncmp(p, "expect ", 7) || *p == '#' ||
                             !*p;
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
