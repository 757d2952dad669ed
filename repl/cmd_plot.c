/* `plot N M ... [-> FILE.png|FILE.svg]`: the curves the session log holds for runs N, M, ..., drawn by
 * Debian's gnuplot through a pipe: its dumb terminal on the screen (one chart per quantity, the runs on
 * shared axes), pngcairo or svg for a file (the charts stacked in one picture, for slides). What is
 * drawn is read from the metrics table as `sql` would show it; a quantity a run did not log is left
 * out, and a chart no run logged anything for is not drawn. */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "call.h"
#include "dist/train/pipe_sched.h"
#include "lang/lex.h"
#include "repl.h"
#include "repl_log.h"
#include "slog/slog.h"
#include "wrap.h"

extern char **environ;

#define PLOT_MAX_RUNS 8
#define PLOT_MAX_METRICS 3

/* A chart: the metrics it draws (the first as a line, the others with points: an epoch's figure), on
 * the x axis the metric's step (a bench logs its rows at step = message size in bytes). `alt` names a
 * metric drawn only for a run that did not log the second one (test_loss where no val_loss). */
typedef struct plot_chart {
    const char *title;
    const char *xlabel;
    bool logx;
    const char *metrics[PLOT_MAX_METRICS];
} plot_chart;

static const plot_chart charts[] = {
    {"loss", "step", false, {"loss", "val_loss", "test_loss"}},
    {"accuracy", "step", false, {"train_acc", "test_acc", NULL}},
    {"learning rate", "step", false, {"lr", NULL, NULL}},
    {"loss scale", "step", false, {"loss_scale", NULL, NULL}},
    {"samples/s", "step", false, {"samples_per_s", NULL, NULL}},
    {"bus bandwidth (GB/s)", "size (bytes)", true, {"busbw", "algbw", NULL}},
};
#define PLOT_NCHARTS (sizeof charts / sizeof charts[0])

/* Each run's colour, the same in every chart (and the test's reference): matplotlib's first eight. */
static const char *const run_colours[PLOT_MAX_RUNS] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                       "#9467bd", "#8c564b", "#e377c2", "#17becf"};

typedef struct plot_series {
    size_t n, cap;
    double *xy; /* (n, 2): step, value (the mean over ranks where several logged it) */
} plot_series;

/* Pipeline runs of one schedule and shape: each run's measured bubble at its m (micro-batches), drawn
 * against the schedule's formula (rs_pipe_bubble_formula: (p-1)/(m+p-1) for GPipe and 1F1B). */
typedef struct plot_bubbles {
    int kind, P, V; /* rs_pipe_kind, pipeline stages, stages per rank */
    int n;
    double m[PLOT_MAX_RUNS], b[PLOT_MAX_RUNS];
} plot_bubbles;

typedef struct plot_ctx {
    int nruns;
    int64_t run[PLOT_MAX_RUNS];
    size_t run_pos[PLOT_MAX_RUNS], run_len[PLOT_MAX_RUNS];
    char desc[PLOT_MAX_RUNS][160]; /* what ran, for the line under the charts */
    plot_series s[PLOT_MAX_RUNS][PLOT_NCHARTS][PLOT_MAX_METRICS];
    char *file; /* NULL: the screen; owned */
    plot_bubbles bub[PLOT_MAX_RUNS];
    int nbub;
    size_t file_pos;
} plot_ctx;

static void plot_ctx_free(plot_ctx *p)
{
    for (int r = 0; r < PLOT_MAX_RUNS; r++)
        for (size_t c = 0; c < PLOT_NCHARTS; c++)
            for (int m = 0; m < PLOT_MAX_METRICS; m++) free(p->s[r][c][m].xy);
    free(p->file);
}

static int add_point(void *ud, int stmt, int ncols, const char *const *names, const char *const *values)
{
    (void)stmt;
    (void)names;
    plot_series *ps = ud;
    if (!values || ncols < 2 || !values[0] || !values[1]) return 0;
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 64;
        double *xy = realloc(ps->xy, cap * 2 * sizeof *xy);
        if (!xy) return 1;
        ps->xy = xy;
        ps->cap = cap;
    }
    ps->xy[2 * ps->n] = strtod(values[0], NULL);
    ps->xy[2 * ps->n + 1] = strtod(values[1], NULL);
    ps->n++;
    return 0;
}

/* "train a on d epochs=2 (done, 24 steps)": the command that started the run, and how it ended. */
static int describe(void *ud, int stmt, int ncols, const char *const *names, const char *const *values)
{
    (void)stmt;
    (void)names;
    if (!values || ncols < 4) return 0;
    snprintf(ud, 160, "%s (%s, %s steps)", values[0] ? values[0] : values[1], values[2] ? values[2] : "?",
             values[3] ? values[3] : "0");
    return 0;
}

static int describe_first(void *ud, int stmt, int ncols, const char *const *names, const char *const *values)
{
    (void)stmt;
    (void)names;
    if (values && ncols > 0 && values[0]) snprintf(ud, 64, "%s", values[0]);
    return 0;
}

/* The words after `plot`: run numbers, then `-> FILE`. None: the newest run that logged metrics. */
static int parse_words(rs_session *s, const rs_call *c, plot_ctx *p)
{
    rs_tokens t = {0};
    size_t epos = 0;
    rs_err err = {0};
    if (rs_lex_line(c->line, &t, &epos, &err)) return rs_session_error(s, c, epos, 1, "plot: %s", err.msg);
    int rc = 0;
    for (int i = 1; i < t.n && !rc; i++) {
        const rs_token *k = &t.tok[i];
        if (k->kind == RS_TOK_ARROW) {
            if (i + 1 >= t.n || t.tok[i + 1].kind == RS_TOK_ARROW || t.tok[i + 1].kind == RS_TOK_EQUALS)
                rc = rs_session_error(s, c, k->off, k->len, "plot: '->' takes a file: plot 3 4 -> curves.png");
            else if (i + 2 < t.n)
                rc = rs_session_error(s, c, t.tok[i + 2].off, t.tok[i + 2].len,
                                      "plot: nothing goes after the file: plot 3 4 -> curves.png");
            else {
                p->file_pos = t.tok[i + 1].off;
                p->file = strdup(t.tok[i + 1].text); /* decoded ("a b.png" too); the tokens go below */
                if (!p->file) rc = rs_session_error(s, c, (size_t)-1, 0, "plot: out of memory");
            }
            break;
        }
        char *end;
        long long id = strtoll(k->text, &end, 10);
        if (k->kind != RS_TOK_WORD || *end || id < 1)
            rc = rs_session_error(s, c, k->off, k->len, "plot: '%s' is not a run number (`runs` lists them)", k->text);
        else if (p->nruns == PLOT_MAX_RUNS)
            rc = rs_session_error(s, c, k->off, k->len, "plot: at most %d runs in one picture", PLOT_MAX_RUNS);
        else {
            p->run_pos[p->nruns] = k->off;
            p->run_len[p->nruns] = k->len;
            p->run[p->nruns++] = id;
        }
    }
    rs_lex_clear(&t);
    return rc;
}

/* Each run's row and curves from the log. */
static int bubble_count(const plot_ctx *p)
{
    int n = 0;
    for (int g = 0; g < p->nbub; g++) n += p->bub[g].n;
    return n;
}

/* A pipeline run's row: bubble, micro, schedule, ranks, dp, tp, virtual (the options as `train` took them). */
static int bubble_row(void *ud, int stmt, int ncols, const char *const *names, const char *const *values)
{
    (void)stmt;
    (void)names;
    plot_ctx *p = ud;
    rs_pipe_kind k;
    if (!values || ncols < 7 || !values[0] || !values[1] || !values[2] || !rs_pipe_kind_from_name(values[2], &k)) return 0;
    int dp = values[4] ? atoi(values[4]) : 1, tp = values[5] ? atoi(values[5]) : 1;
    int P = atoi(values[3]) / (dp > 0 ? dp : 1) / (tp > 0 ? tp : 1);
    int V = values[6] ? atoi(values[6]) : k == RS_PIPE_INTERLEAVED ? 2 : 1; /* as train_pipe.c reads it */
    int g = 0;
    while (g < p->nbub && !(p->bub[g].kind == (int)k && p->bub[g].P == P && p->bub[g].V == V)) g++;
    if (g == PLOT_MAX_RUNS) return 0;
    plot_bubbles *b = &p->bub[g];
    if (g == p->nbub) *b = (plot_bubbles){.kind = (int)k, .P = P, .V = V}, p->nbub++;
    int i = b->n++; /* sorted by m as they come */
    double m = strtod(values[1], NULL);
    while (i > 0 && b->m[i - 1] > m) b->m[i] = b->m[i - 1], b->b[i] = b->b[i - 1], i--;
    b->m[i] = m;
    b->b[i] = strtod(values[0], NULL);
    return 0;
}

static int load_runs(rs_session *s, const rs_call *c, plot_ctx *p)
{
    char sql[512];
    rs_err err = {0};
    if (!p->nruns) {
        char last[64] = "";
        if (rs_slog_sql(s->log, "SELECT MAX(run_id) FROM metrics", describe_first, last, &err) || !last[0])
            return rs_session_error(s, c, (size_t)-1, 0, "plot: no run has logged any curves yet (train one first)");
        p->run[0] = atoll(last);
        p->run_pos[0] = (size_t)-1;
        p->nruns = 1;
    }
    for (int r = 0; r < p->nruns; r++) {
        snprintf(sql, sizeof sql,
                 "SELECT c.text, r.kind, r.status, r.steps FROM runs r LEFT JOIN commands c ON c.id = r.command_id "
                 "WHERE r.id = %lld",
                 (long long)p->run[r]);
        p->desc[r][0] = 0;
        if (rs_slog_sql(s->log, sql, describe, p->desc[r], &err))
            return rs_session_error(s, c, (size_t)-1, 0, "plot: %s", err.msg);
        if (!p->desc[r][0])
            return rs_session_error(s, c, p->run_pos[r], p->run_len[r], "plot: there is no run %lld (`runs` lists them)",
                                    (long long)p->run[r]);
        bool any = false;
        for (size_t ch = 0; ch < PLOT_NCHARTS; ch++)
            for (int m = 0; m < PLOT_MAX_METRICS && charts[ch].metrics[m]; m++) {
                if (m == 2 && p->s[r][ch][1].n) continue; /* the alternative to a metric it did log */
                snprintf(sql, sizeof sql,
                         "SELECT step, AVG(value) FROM metrics WHERE run_id = %lld AND name = '%s' AND step IS NOT NULL "
                         "AND value IS NOT NULL GROUP BY step ORDER BY step",
                         (long long)p->run[r], charts[ch].metrics[m]);
                if (rs_slog_sql(s->log, sql, add_point, &p->s[r][ch][m], &err))
                    return rs_session_error(s, c, (size_t)-1, 0, "plot: %s", err.msg);
                any |= p->s[r][ch][m].n > 0;
            }
        int had = bubble_count(p);
        snprintf(sql, sizeof sql,
                 "SELECT json_extract(final, '$.bubble'), json_extract(options, '$.micro'), "
                 "json_extract(options, '$.schedule'), world_size, json_extract(options, '$.dp'), "
                 "json_extract(options, '$.tp'), json_extract(options, '$.virtual') FROM runs "
                 "WHERE id = %lld AND mode = 'pipeline'",
                 (long long)p->run[r]);
        if (rs_slog_sql(s->log, sql, bubble_row, p, &err)) return rs_session_error(s, c, (size_t)-1, 0, "plot: %s", err.msg);
        any |= bubble_count(p) > had;
        if (!any)
            return rs_session_error(s, c, p->run_pos[r], p->run_len[r],
                                    "plot: run %lld (%s) logged no curves: plot draws what training runs and benches log",
                                    (long long)p->run[r], p->desc[r]);
    }
    return 0;
}

static bool chart_has_data(const plot_ctx *p, size_t ch)
{
    for (int r = 0; r < p->nruns; r++)
        for (int m = 0; m < PLOT_MAX_METRICS; m++)
            if (p->s[r][ch][m].n) return true;
    return false;
}

/* A string as a gnuplot single-quoted literal (a quote is doubled). */
static void put_quoted(FILE *f, const char *text)
{
    fputc('\'', f);
    for (const char *q = text; *q; q++) {
        if (*q == '\'') fputc('\'', f);
        fputc(*q, f);
    }
    fputc('\'', f);
}

/* One chart's `plot` command over the datablocks $dR_C_M. */
static void put_chart(FILE *f, const plot_ctx *p, size_t ch, bool screen)
{
    const plot_chart *k = &charts[ch];
    fprintf(f, "set title '%s'\nset xlabel '%s'\n", k->title, k->xlabel);
    if (k->logx) fprintf(f, "set logscale x 2\nset format x '%s'\n", screen ? "%.0b%B" : "%.0b%BB");
    else fprintf(f, "unset logscale x\nset format x '%%g'\n");
    const char *sep = "plot ";
    for (int r = 0; r < p->nruns; r++)
        for (int m = 0; m < PLOT_MAX_METRICS; m++) {
            if (!p->s[r][ch][m].n) continue;
            const char *style = m == 0 ? "lines lw 2" : "linespoints lw 2 dt 2 pt 7 ps 0.8";
            if (p->s[r][ch][m].n == 1) style = "points pt 7 ps 1.2";
            fprintf(f, "%s$d%d_%zu_%d with %s lc rgb '%s' title 'run %lld %s'", sep, r, ch, m, style, run_colours[r],
                    (long long)p->run[r], k->metrics[m]);
            sep = ", \\\n     ";
        }
    fprintf(f, "\n");
}

/* The pipeline runs' measured bubbles over m, each group against its schedule's formula over 1..m. */
static void put_bubbles(FILE *f, const plot_ctx *p)
{
    for (int g = 0; g < p->nbub; g++) {
        const plot_bubbles *b = &p->bub[g];
        fprintf(f, "$b%d << EOD\n", g);
        for (int i = 0; i < b->n; i++) fprintf(f, "%.10g %.10g\n", b->m[i], b->b[i]);
        fprintf(f, "EOD\n$f%d << EOD\n", g);
        int top = (int)b->m[b->n - 1];
        for (int m = 1; m <= top && m <= 4096; m++)
            fprintf(f, "%d %.10g\n", m, rs_pipe_bubble_formula((rs_pipe_kind)b->kind, b->P, m, b->V));
        fprintf(f, "EOD\n");
    }
    fprintf(f, "set title 'pipeline bubble over micro-batches'\nset xlabel 'micro-batches m'\nunset logscale x\n"
               "set format x '%%g'\n");
    const char *sep = "plot ";
    for (int g = 0; g < p->nbub; g++) {
        const plot_bubbles *b = &p->bub[g];
        const char *formula = b->kind == RS_PIPE_NAIVE         ? "(p-1)/p"
                              : b->kind == RS_PIPE_INTERLEAVED ? "(p-1)/(v*m+p-1)"
                                                               : "(p-1)/(m+p-1)";
        char name[64];
        snprintf(name, sizeof name, b->V > 1 ? "%s p=%d v=%d" : "%s p=%d", rs_pipe_kind_name((rs_pipe_kind)b->kind), b->P,
                 b->V);
        fprintf(f, "%s$b%d with linespoints lw 2 pt 7 lc rgb '%s' title '%s measured', \\\n     $f%d with lines lw 2 dt 2 "
                   "lc rgb '%s' title '%s %s'",
                sep, g, run_colours[g], name, g, run_colours[g], name, formula);
        sep = ", \\\n     ";
    }
    fprintf(f, "\n");
}

/* The gnuplot script: the curves as datablocks, then the charts. screen: the dumb terminal, w x h
 * characters, each chart a page; else the file's terminal (by its extension), the charts stacked. */
static char *make_script(const plot_ctx *p, bool screen, bool colour, int w, int h, const char *file, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    for (int r = 0; r < p->nruns; r++)
        for (size_t ch = 0; ch < PLOT_NCHARTS; ch++)
            for (int m = 0; m < PLOT_MAX_METRICS; m++) {
                const plot_series *ps = &p->s[r][ch][m];
                if (!ps->n) continue;
                fprintf(f, "$d%d_%zu_%d << EOD\n", r, ch, m);
                for (size_t i = 0; i < ps->n; i++) fprintf(f, "%.10g %.10g\n", ps->xy[2 * i], ps->xy[2 * i + 1]);
                fprintf(f, "EOD\n");
            }
    int ncharts = 0;
    for (size_t ch = 0; ch < PLOT_NCHARTS; ch++) ncharts += chart_has_data(p, ch);
    ncharts += p->nbub > 0;
    if (screen) fprintf(f, "set terminal dumb size %d,%d noenhanced %s\n", w, h, colour ? "ansi" : "mono");
    else {
        size_t n = strlen(file);
        bool svg = n >= 4 && !strcasecmp(file + n - 4, ".svg");
        fprintf(f, svg ? "set terminal svg size 960,%d dynamic noenhanced font 'sans,12' background rgb 'white'\n"
                       : "set terminal pngcairo size 960,%d noenhanced font 'sans,10' background rgb 'white'\n",
                300 * ncharts);
        fprintf(f, "set output ");
        put_quoted(f, file);
        fprintf(f, "\nset grid\nset multiplot layout %d,1\n", ncharts);
    }
    /* the key below the chart never hides a curve; a flat curve stays off the frame */
    fprintf(f, "set key below\nset autoscale xfix\nset offsets 0, 0, graph 0.05, graph 0.05\n");
    for (size_t ch = 0; ch < PLOT_NCHARTS; ch++)
        if (chart_has_data(p, ch)) put_chart(f, p, ch, screen);
    if (p->nbub) put_bubbles(f, p);
    if (!screen) fprintf(f, "unset multiplot\nset output\n");
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* A temporary file of our own (TMPDIR, else /tmp), unlinked at once: only the descriptor is kept. */
static int temp_fd(void)
{
    const char *dir = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/ringside-plot-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd >= 0) unlink(path);
    return fd;
}

/* Reads what fd holds from its start; the caller frees. NULL when empty or unreadable. */
static char *read_fd(int fd, size_t *len)
{
    off_t end = lseek(fd, 0, SEEK_END);
    *len = 0;
    if (end <= 0 || lseek(fd, 0, SEEK_SET) < 0) return NULL;
    char *b = malloc((size_t)end + 1);
    if (!b) return NULL;
    ssize_t k;
    while (*len < (size_t)end && (k = read(fd, b + *len, (size_t)end - *len)) > 0) *len += (size_t)k;
    b[*len] = 0;
    return b;
}

/* Runs gnuplot (RINGSIDE_GNUPLOT, else gnuplot in PATH) on script; its stdout and stderr go to out_fd
 * and err_fd. Returns 0, or 1 after reporting why it could not run or failed. */
static int run_gnuplot(rs_session *s, const rs_call *c, const char *script, size_t len, int out_fd, int err_fd)
{
    const char *prog = getenv("RINGSIDE_GNUPLOT");
    if (!prog || !*prog) prog = "gnuplot";
    int fds[2];
    if (pipe(fds)) return rs_session_error(s, c, (size_t)-1, 0, "plot: pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    char *argv[] = {(char *)prog, NULL};
    pid_t pid;
    int e = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[0]);
    if (e) {
        close(fds[1]);
        if (e == ENOENT)
            return rs_session_error(s, c, (size_t)-1, 0,
                                    "plot: gnuplot is not installed (%s not found); on Debian or Ubuntu: "
                                    "sudo apt-get install gnuplot-nox",
                                    prog);
        return rs_session_error(s, c, (size_t)-1, 0, "plot: cannot run %s: %s", prog, strerror(e));
    }
    /* gnuplot that stops reading (a bad line) must not take the REPL down with SIGPIPE */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    for (size_t off = 0; off < len;) {
        ssize_t k = write(fds[1], script + off, len - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        off += (size_t)k;
    }
    close(fds[1]);
    sigaction(SIGPIPE, &old, NULL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    size_t n;
    char *msg = read_fd(err_fd, &n);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) msg[--n] = 0;
    const char *last = msg ? strrchr(msg, '\n') : NULL; /* gnuplot ends with the line that failed */
    int rc = rs_session_error(s, c, (size_t)-1, 0, "plot: %s failed: %s", prog,
                              msg ? (last ? last + 1 : msg) : "no message");
    free(msg);
    return rc;
}

/* Rows the screen's charts take: the terminal's less the prompt, else 24 (scripts, pipes). */
static int screen_rows(rs_session *s)
{
    struct winsize ws;
    int fd = rs_wrap_fd(s->out);
    if (fd >= 0 && isatty(fd) && !ioctl(fd, TIOCGWINSZ, &ws) && ws.ws_row >= 12)
        return ws.ws_row - 1 > 40 ? 40 : ws.ws_row - 1;
    return 24;
}

static int draw(rs_session *s, const rs_call *c, plot_ctx *p)
{
    int fd = rs_wrap_fd(s->out);
    bool screen = !p->file;
    size_t len;
    /* colours where the session has them (a terminal, not NO_COLOR, not `set color=off`) */
    char *script = make_script(p, screen, screen && s->color && fd >= 0 && isatty(fd), rs_wrap_cols(s->out), screen_rows(s),
                               p->file, &len);
    if (!script) return rs_session_error(s, c, (size_t)-1, 0, "plot: out of memory");
    int out_fd = temp_fd(), err_fd = temp_fd();
    int rc = out_fd < 0 || err_fd < 0 ? rs_session_error(s, c, (size_t)-1, 0, "plot: no temporary file: %s", strerror(errno))
                                      : run_gnuplot(s, c, script, len, out_fd, err_fd);
    free(script);
    if (!rc && screen) {
        size_t n;
        char *text = read_fd(out_fd, &n);
        /* the dumb terminal pads each line to the width and breaks pages with a form feed */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (text[i] == '\f') continue;
            if (text[i] == '\n')
                while (k && text[k - 1] == ' ') k--;
            text[k++] = text[i];
        }
        if (text) rs_wrap_raw(s->out, text, k);
        free(text);
    }
    if (out_fd >= 0) close(out_fd);
    if (err_fd >= 0) close(err_fd);
    return rc;
}

int rs_cmd_plot(rs_session *s, const rs_call *c)
{
    if (!s->log)
        return rs_session_error(s, c, (size_t)-1, 0, "plot: there is no session log in this session (started with --no-db?)");
    plot_ctx *p = calloc(1, sizeof *p);
    if (!p) return rs_session_error(s, c, (size_t)-1, 0, "plot: out of memory");
    rs_slog_flush(s->log);
    int rc = parse_words(s, c, p);
    if (!rc && p->file) {
        size_t n = strlen(p->file);
        if (n < 5 || (strcasecmp(p->file + n - 4, ".png") && strcasecmp(p->file + n - 4, ".svg")))
            rc = rs_session_error(s, c, p->file_pos, n, "plot: '%s': a picture is FILE.png or FILE.svg", p->file);
    }
    if (!rc) rc = load_runs(s, c, p);
    if (!rc) rc = draw(s, c, p);
    if (!rc) {
        for (int r = 0; r < p->nruns; r++) fprintf(s->out, "run %lld: %s\n", (long long)p->run[r], p->desc[r]);
        if (p->file) {
            FILE *f = fopen(p->file, "rb");
            long size = f && !fseek(f, 0, SEEK_END) ? ftell(f) : -1;
            if (f) fclose(f);
            fprintf(s->out, "wrote %s (%ld bytes)\n", p->file, size);
            rs_log_artifact(s, p->file, "plot");
        }
    }
    plot_ctx_free(p);
    free(p);
    return rc;
}
