/* Session commands: set, help (generated from the command table), version, say, pause, quit. */
#define _GNU_SOURCE /* strcasestr */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "engine/cpu/blas.h"
#include "session.h"
#include "tutorials.h"
#include "wrap.h"

static const char *type_name(const rs_optdef *o, char *buf, size_t n)
{
    switch (o->type) {
    case RS_T_INT: return "N";
    case RS_T_FLOAT: return "X";
    case RS_T_SIZE: return "SIZE";
    case RS_T_DURATION: return "TIME";
    case RS_T_BOOL: return "on|off";
    case RS_T_STRING: return "TEXT";
    case RS_T_PATH: return "FILE";
    case RS_T_ENUM: {
        size_t k = 0;
        buf[0] = '\0';
        for (int i = 0; o->choices[i]; i++)
            k += (size_t)snprintf(buf + k, n > k ? n - k : 0, i ? "|%s" : "%s", o->choices[i]);
        return buf;
    }
    }
    return "?";
}

/* The usage line of a command, built from its declaration. */
void rs_cmd_usage(const rs_cmddef *c, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s", c->name);
    if (c->binding) k += (size_t)snprintf(buf + k, n > k ? n - k : 0, " NAME = %s", c->rest_name);
    else if (c->rest_name) k += (size_t)snprintf(buf + k, n > k ? n - k : 0, " %s", c->rest_name);
    for (int i = 0; i < c->nargs; i++)
        k += (size_t)snprintf(buf + k, n > k ? n - k : 0, c->args[i].optional ? " [%s]" : " %s", c->args[i].name);
    if (c->opts && c->opts[0].name) snprintf(buf + k, n > k ? n - k : 0, " [options]");
}

static void help_all(rs_session *s)
{
    static const char *const groups[] = {"models", "training", "ranks", "session log", "playback", "session"};
    /* the usage column: 44 wide where there is room, narrower on a projector's 80 columns; a longer
     * usage gets a line of its own and its description goes under it */
    int cols = s->help_cols ? s->help_cols : rs_wrap_cols(s->out), uw = cols >= 120 ? 44 : cols * 2 / 5;
    fprintf(s->out, "Commands (`help CMD` for one in full; `play tour` for a three-minute tour):\n");
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        fprintf(s->out, "%s%s%s\n", rs_sty(s, "\033[1m"), groups[g], rs_sty(s, "\033[0m"));
        for (const rs_cmddef *c = rs_commands; c->name; c++) {
            if (strcmp(c->group, groups[g])) continue;
            const char *gap = strstr(c->synopsis, "  ");
            int ul = gap ? (int)(gap - c->synopsis) : (int)strlen(c->synopsis);
            const char *desc = gap ? gap : "";
            while (*desc == ' ') desc++;
            if (ul > uw) fprintf(s->out, "  %.*s\n", ul, c->synopsis);
            else fprintf(s->out, "  %-*.*s", uw + 1, ul, c->synopsis);
            if (ul > uw) fprintf(s->out, "  %*s", uw + 1, "");
            rs_wrap_fill(s->out, desc, cols, uw + 3, uw + 3);
        }
    }
}

/* Whether option o belongs under `help CMD TOPIC`: TOPIC in its name, its choices or its description,
 * any case. */
static bool about(const rs_optdef *o, const char *topic, const char *type)
{
    return !topic || strcasestr(o->name, topic) || strcasestr(o->help, topic) || strcasestr(type, topic);
}

static int help_one(rs_session *s, const rs_call *c, const rs_cmddef *d)
{
    const char *topic = c->nargs > 1 ? c->args[1] : NULL;
    char usage[256], tb[128];
    rs_cmd_usage(d, usage, sizeof usage);
    fprintf(s->out, "%s%s%s\n", rs_sty(s, "\033[1m"), usage, rs_sty(s, "\033[0m"));
    const char *gap = strstr(d->synopsis, "  ");
    const char *desc = gap ? gap : "";
    while (*desc == ' ') desc++;
    /* the help text's prose is filled to the terminal (100 columns at most, for reading), its indented
     * examples kept as written; option descriptions go on under their own column */
    int cols = s->help_cols ? s->help_cols : rs_wrap_cols(s->out);
    if (!topic) rs_wrap_print(s->out, d->help ? d->help : desc, cols < 100 ? cols : 100, 2);
    if (d->help_list && !topic) {
        char list[1024];
        rs_wrap_print(s->out, d->help_list(list, sizeof list), cols < 100 ? cols : 100, 2);
    }
    int shown = 0;
    if (d->opts && d->opts[0].name) {
        if (topic) fprintf(s->out, "options about '%s':\n", topic);
        else fprintf(s->out, "options:\n");
        int kw = cols >= 100 ? 26 : 22;
        for (const rs_optdef *o = d->opts; o->name; o++) {
            char key[96], text[400];
            if (!about(o, topic, type_name(o, tb, sizeof tb))) continue;
            shown++;
            snprintf(key, sizeof key, "%s=%s", o->name, type_name(o, tb, sizeof tb));
            snprintf(text, sizeof text, "%s%s%s%s", o->help, o->def ? " (default " : "", o->def ? o->def : "",
                     o->def ? ")" : "");
            if ((int)strlen(key) > kw) fprintf(s->out, "  %s\n  %*s", key, kw + 1, "");
            else fprintf(s->out, "  %-*s ", kw, key);
            rs_wrap_fill(s->out, text, cols, kw + 3, kw + 3);
        }
    }
    if (topic && !shown)
        return rs_session_error(s, c, c->arg_pos[1], strlen(topic),
                                "help: no option of %s mentions '%s'; `help %s` shows them all", d->name, topic, d->name);
    if (!strcmp(d->name, "play") && !topic) rs_play_list(s); /* the tutorials are files: only the running program knows them */
    return 0;
}

/* The pager for help longer than the screen: $PAGER, else less (-R colours, -F leave at once when it
 * fits after all, -X keep the text on the screen); NULL where neither is there. */
static const char *pager(char *buf, size_t n)
{
    const char *p = getenv("PAGER");
    if (p && *p) return p;
    const char *path = getenv("PATH");
    for (const char *d = path ? path : "/usr/bin:/bin"; d && *d;) {
        size_t len = strcspn(d, ":");
        snprintf(buf, n, "%.*s/less", (int)len, d);
        if (len && access(buf, X_OK) == 0) return "less -R -F -X";
        d += len + (d[len] == ':');
    }
    return NULL;
}

/* Help at a person's terminal goes through a pager when it is longer than the screen; in scripts,
 * pipes and tests it is printed as it is. Returns the text's status (the help's own). */
static int help_paged(rs_session *s, const rs_call *c);

int rs_cmd_help(rs_session *s, const rs_call *c)
{
    struct winsize ws;
    int fd = rs_wrap_fd(s->out);
    char pbuf[512];
    if (s->interactive && fd == STDOUT_FILENO && isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 2 &&
        pager(pbuf, sizeof pbuf)) {
        /* the help is written to memory at the terminal's width, then paged if it does not fit */
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len); /* owned here: text freed below */
        if (mem) {
            FILE *out = s->out;
            s->out = mem;
            s->help_cols = ws.ws_col;
            int rc = help_paged(s, c);
            s->out = out;
            s->help_cols = 0;
            fclose(mem);
            int lines = 0;
            for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
            FILE *pg = lines >= ws.ws_row - 1 ? (fflush(out), popen(pager(pbuf, sizeof pbuf), "w")) : NULL;
            if (pg) {
                fwrite(text, 1, len, pg);
                if (pclose(pg) != 0) fwrite(text, 1, len, out); /* the pager did not run: the text all the same */
            } else {
                fwrite(text, 1, len, out);
            }
            free(text);
            return rc;
        }
    }
    return help_paged(s, c);
}

static int help_paged(rs_session *s, const rs_call *c)
{
    if (c->nargs == 0) {
        help_all(s);
        return 0;
    }
    const rs_cmddef *d = rs_cmd_find(c->args[0]);
    if (!d) {
        const char *names[64];
        int n = 0;
        for (const rs_cmddef *k = rs_commands; k->name && n < 64; k++) names[n++] = k->name;
        extern const char *rs_spec_near_miss(const char *, const char *const *, int);
        const char *near = rs_spec_near_miss(c->args[0], names, n);
        if (near)
            return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]),
                                    "help: no command '%s' (did you mean '%s'?)", c->args[0], near);
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]), "help: no command '%s'; `help` lists them",
                                c->args[0]);
    }
    return help_one(s, c, d);
}

int rs_cmd_set_device(rs_session *s, const rs_call *c); /* repl/cmd_devices.c */

int rs_cmd_set(rs_session *s, const rs_call *c)
{
    bool any = false;
    if (rs_call_given(c, "threads")) {
        long long t = rs_call_int(c, "threads", 1);
        if (t < 1 || t > 256)
            return rs_session_error(s, c, rs_call_opt(c, "threads")->pos, 7, "set: threads must be 1..256, got %lld", t);
        rs_session_set_threads(s, (int)t);
        any = true;
    }
    if (rs_call_given(c, "seed")) {
        long long v = rs_call_int(c, "seed", 1);
        if (v < 0) return rs_session_error(s, c, rs_call_opt(c, "seed")->pos, 4, "set: seed must be >= 0");
        s->seed = (uint64_t)v;
        any = true;
    }
    if (rs_call_given(c, "color")) {
        s->color = rs_call_bool(c, "color", false) && !getenv("NO_COLOR");
        any = true;
    }
    if (rs_call_given(c, "device")) {
        if (rs_cmd_set_device(s, c)) return 1;
        any = true;
    }
    if (!any || s->interactive || s->echo) {
        fprintf(s->out, "threads=%d seed=%llu color=%s", s->threads, (unsigned long long)s->seed, s->color ? "on" : "off");
        /* the device once another than the CPU was chosen (`devices` always names it) */
        char dv[32];
        if (s->device.kind != RS_DEV_CPU) fprintf(s->out, " device=%s", rs_repl_device_str(s->device, dv, sizeof dv));
        fputc('\n', s->out);
    }
    return 0;
}

void rs_settings_save(const rs_session *s, rs_settings *out)
{
    *out = (rs_settings){.threads = s->threads, .seed = s->seed, .color = s->color};
}

void rs_settings_restore(rs_session *s, const rs_settings *in)
{
    /* Objects the tutorial made or retuned get the session's count back too. */
    rs_session_set_threads(s, in->threads);
    s->seed = in->seed;
    s->color = in->color;
}

int rs_cmd_version(rs_session *s, const rs_call *c)
{
    (void)c;
    rs_blas_info b;
    rs_blas_get_info(&b);
    fprintf(s->out, "ringside %s\nBLAS: OpenBLAS kernel %s (%s); CPU AVX2 %s, AVX-512 %s\nthreads: %d\n", RS_VERSION,
            b.core, b.why, b.cpu_avx2 ? "yes" : "no", b.cpu_avx512 ? "yes" : "no",
            s->threads);
    return 0;
}

static int term_width(void)
{
    struct winsize w;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col >= 40) return w.ws_col;
    const char *cols = getenv("COLUMNS");
    int n = cols ? atoi(cols) : 0;
    return n >= 40 ? n : 80;
}

int rs_cmd_say(rs_session *s, const rs_call *c)
{
    /* Word-wrapped narration, indented by a bar so it stands apart from command output. */
    int width = term_width() - 4;
    if (width > 96) width = 96;
    const char *p = c->args[0];
    fputs(rs_sty(s, "\033[36m"), s->out);
    while (*p) {
        const char *nl = strchr(p, '\n');
        const char *end = nl ? nl : p + strlen(p);
        while (p < end) {
            while (p < end && *p == ' ') p++;
            const char *line_end = p, *last_space = NULL;
            while (line_end < end && line_end - p < width) {
                if (*line_end == ' ') last_space = line_end;
                line_end++;
            }
            if (line_end < end && last_space) line_end = last_space;
            fprintf(s->out, "%s| %s%.*s\n", rs_sty(s, "\033[1;36m"), rs_sty(s, "\033[0;36m"), (int)(line_end - p), p);
            p = line_end;
        }
        if (!nl) break;
        if (nl[1] == '\n' || nl[1] == '\0') fprintf(s->out, "%s|\n", rs_sty(s, "\033[1;36m"));
        p = nl + 1;
    }
    fputs(rs_sty(s, "\033[0m"), s->out);
    fflush(s->out);
    return 0;
}

int rs_cmd_pause(rs_session *s, const rs_call *c)
{
    (void)c;
    if (!s->interactive || s->play_mode == RS_PLAY_AUTO) return 0;
    if (s->pause_served) { /* the view before it already waited for a key */
        s->pause_served = false;
        return 0;
    }
    fprintf(s->out, "%s-- press Enter to continue --%s", rs_sty(s, "\033[2m"), rs_sty(s, "\033[0m"));
    fflush(s->out);
    int ch;
    while ((ch = getchar()) != EOF && ch != '\n') {
    }
    if (ch == EOF) clearerr(stdin);
    rs_wrap_line_start(s->out); /* the terminal echoed the Enter */
    return 0;
}

int rs_cmd_quit(rs_session *s, const rs_call *c)
{
    (void)c;
    s->quit = true;
    return 0;
}
