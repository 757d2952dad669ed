/* The live dashboard's terminal side (view_live.h): curses setup and teardown, keys, SIGWINCH, the frame
 * clock, and the REPL's own output captured while curses owns the screen. Every pane is drawn by
 * repl/view into a virtual screen first, then blitted with one doupdate, so a frame never flickers. */
#define _GNU_SOURCE
#define _XOPEN_SOURCE_EXTENDED 1
#include "view_live.h"

#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <ncurses.h>

#include "dist/pg/pg.h"
#include "view/render.h"
#include "view/screen.h"
#include "view/view_curses.h"
#include "wrap.h"

enum { PANE_RANKS, PANE_COLL, PANE_TIMELINE, PANE_LOG, PANE_COUNT };

struct rs_live {
    rs_session *s;
    SCREEN *scr;
    rs_view_model *vm;      /* owned */
    rs_view_screen *sc;     /* owned, the terminal's size */
    rs_view_opts o;
    struct sigaction old_winch;
    char *old_ctype;        /* owned: the LC_CTYPE to restore */
    char *old_env[2];       /* owned: LINES and COLUMNS as they were (ncurses exports its size there) */
    FILE *real_out;         /* s->out before the view */
    FILE *cap;              /* s->out while the view is up (open_memstream over cap_buf) */
    char *cap_buf;
    size_t cap_len, cap_off;
    bool paused, dirty, replay;
    double speed;           /* live: frames per second; replay: playback factor */
    double last_draw;       /* monotonic seconds */
    double now;             /* < 0: the monotonic clock */
    int focus, log_scroll;
    char status[64];
    rs_live_draw_fn draw_fn; /* not NULL: draws the frame instead of the panes (rs_live_set_draw) */
    void *draw_ud;
};

/* Signal handlers only set flags; the tick does the work. */
static volatile sig_atomic_t winched;
static void on_winch(int sig) { (void)sig; winched = 1; }

bool rs_live_possible(const rs_session *s)
{
    const char *term = getenv("TERM");
    return s->interactive && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO) && term && *term && strcmp(term, "dumb");
}

static void restore_env(rs_live *lv)
{
    static const char *const envs[2] = {"LINES", "COLUMNS"};
    for (int i = 0; i < 2; i++) {
        if (lv->old_env[i]) setenv(envs[i], lv->old_env[i], 1);
        else unsetenv(envs[i]);
        free(lv->old_env[i]);
        lv->old_env[i] = NULL;
    }
}

rs_live *rs_live_start(rs_session *s, const rs_view_run *run)
{
    if (!rs_live_possible(s)) return NULL;
    rs_err e = {0};
    rs_live *lv = calloc(1, sizeof *lv);
    if (!lv) return NULL;
    lv->s = s;
    lv->now = -1;
    lv->speed = 10;
    lv->focus = PANE_COLL;
    lv->vm = rs_view_model_new(&e);
    const char *ct = setlocale(LC_CTYPE, NULL);
    lv->old_ctype = strdup(ct ? ct : "C");
    if (!lv->vm || !lv->old_ctype) goto fail;
    rs_view_set_run(lv->vm, run);
    /* only the character type: LC_NUMERIC stays "C" so every number the REPL prints keeps its '.' */
    setlocale(LC_CTYPE, "");
    fflush(s->out);
    fflush(stdout);
    /* ours before newterm: ncurses installs its own SIGWINCH handler only over SIG_DFL */
    struct sigaction sa = {0};
    sa.sa_handler = on_winch;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, &lv->old_winch);
    winched = 0;
    /* the size from the terminal, never from LINES/COLUMNS, which an earlier view left at its size */
    static const char *const envs[2] = {"LINES", "COLUMNS"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(envs[i]);
        lv->old_env[i] = v ? strdup(v) : NULL;
    }
    use_tioctl(TRUE);
    lv->scr = newterm(NULL, stdout, stdin);
    if (!lv->scr) {
        sigaction(SIGWINCH, &lv->old_winch, NULL);
        goto fail;
    }
    set_term(lv->scr);
    cbreak(); /* Ctrl-C still raises SIGINT: the session's flag stops the run as without the view */
    noecho();
    nodelay(stdscr, TRUE);
    keypad(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    bool colors = rs_view_curses_colors();
    lv->o = rs_view_opts_detect(getenv("TERM"), getenv("NO_COLOR"), rs_view_locale_utf8());
    lv->o.color = lv->o.color && colors && s->color;
    lv->sc = rs_view_screen_new(COLS, LINES, &e);
    lv->cap = open_memstream(&lv->cap_buf, &lv->cap_len);
    if (!lv->sc || !lv->cap) {
        endwin();
        delscreen(lv->scr);
        lv->scr = NULL;
        sigaction(SIGWINCH, &lv->old_winch, NULL);
        goto fail;
    }
    lv->real_out = s->out;
    s->out = lv->cap;
    lv->dirty = true;
    return lv;
fail:
    restore_env(lv);
    if (lv->cap) fclose(lv->cap);
    free(lv->cap_buf);
    if (lv->old_ctype) setlocale(LC_CTYPE, lv->old_ctype);
    free(lv->old_ctype);
    rs_view_screen_free(lv->sc);
    rs_view_model_free(lv->vm);
    free(lv);
    return NULL;
}

void rs_live_line(rs_live *lv, int rank, const char *line)
{
    if (lv) rs_view_feed_line(lv->vm, rank, line);
}

rs_view_model *rs_live_model(rs_live *lv) { return lv->vm; }
void rs_live_set_now(rs_live *lv, double now) { lv->now = now; }
double rs_live_speed(const rs_live *lv) { return lv->speed; }
bool rs_live_paused(const rs_live *lv) { return lv->paused; }
void rs_live_dirty(rs_live *lv) { lv->dirty = true; }

void rs_live_set_draw(rs_live *lv, rs_live_draw_fn fn, void *ud)
{
    lv->draw_fn = fn;
    lv->draw_ud = ud;
    lv->dirty = true;
}

void rs_live_set_speed(rs_live *lv, double speed, bool replay)
{
    lv->speed = speed;
    lv->replay = replay;
}

void rs_live_status(rs_live *lv, const char *text)
{
    snprintf(lv->status, sizeof lv->status, "%s", text ? text : "");
    lv->dirty = true;
}

/* What the REPL printed since the last tick: complete lines into the log pane (the text itself is
 * printed for real by rs_live_end). */
static void pump_output(rs_live *lv)
{
    fflush(lv->cap);
    while (lv->cap_off < lv->cap_len) {
        char *start = lv->cap_buf + lv->cap_off;
        char *nl = memchr(start, '\n', lv->cap_len - lv->cap_off);
        if (!nl) break;
        size_t n = (size_t)(nl - start);
        char line[RS_VIEW_LOG_W];
        if (n >= sizeof line) n = sizeof line - 1;
        memcpy(line, start, n);
        line[n] = 0;
        rs_view_feed_log(lv->vm, -1, line);
        lv->cap_off = (size_t)(nl - lv->cap_buf) + 1;
        lv->dirty = true;
    }
}

void rs_live_quiet(rs_live *lv, bool on)
{
    if (on) pump_output(lv); /* what came before still goes to the log pane */
    else {
        fflush(lv->cap);
        lv->cap_off = lv->cap_len;
    }
}

static void resize(rs_live *lv)
{
    struct winsize ws;
    /* resizeterm queues a KEY_RESIZE: only when the size really changed, or the keys never run dry */
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0 &&
        (ws.ws_row != LINES || ws.ws_col != COLS))
        resizeterm(ws.ws_row, ws.ws_col);
    if (lv->sc->w == COLS && lv->sc->h == LINES) return;
    rs_err e = {0};
    if (rs_view_screen_resize(lv->sc, COLS, LINES, &e) == RS_OK) {
        clearok(curscr, TRUE);
        lv->dirty = true;
    }
}

static rs_view_rect pane_rect(const rs_view_layout *l, int pane)
{
    switch (pane) {
    case PANE_RANKS: return l->ranks;
    case PANE_COLL: return l->coll;
    case PANE_TIMELINE: return l->timeline;
    default: return l->log;
    }
}

/* The log pane again, `log_scroll` lines back from the newest (rs_view_draw_log always shows the newest). */
static void draw_log_scrolled(rs_live *lv, const rs_view_layout *l)
{
    rs_view_screen *sc = lv->sc;
    const rs_view_model *vm = lv->vm;
    rs_view_rect r = l->log;
    bool framed = sc->w >= 120 && sc->h >= 40 && r.w >= 4 && r.h >= 3; /* as render.c frames a pane */
    rs_view_rect in = framed ? (rs_view_rect){r.x + 1, r.y + 1, r.w - 2, r.h - 2} : (rs_view_rect){r.x, r.y + 1, r.w, r.h - 1};
    if (in.w <= 0 || in.h <= 0) return;
    if (lv->log_scroll > vm->n_log - 1) lv->log_scroll = vm->n_log > 0 ? vm->n_log - 1 : 0;
    rs_view_screen_fill(sc, &in, ' ', 0, 0);
    rs_view_screen_clip(sc, &in);
    int avail = vm->n_log - lv->log_scroll, n = in.h < avail ? in.h : avail;
    for (int i = 0; i < n; i++) {
        const rs_view_log_line *ln = rs_view_log_at(vm, lv->log_scroll + n - 1 - i);
        if (!ln) continue;
        int x = in.x;
        if (ln->rank >= 0) x += rs_view_screen_printf(sc, x, in.y + i, -1, 0, RS_VIEW_A_BOLD, "[r%d] ", ln->rank);
        rs_view_put_cut(sc, x, in.y + i, ln->text, in.x + in.w - x, 0, 0, &lv->o);
    }
    rs_view_screen_clip(sc, NULL);
    rs_view_screen_printf(sc, r.x + r.w - 24, r.y, 22, 0, RS_VIEW_A_BOLD, " %d lines back ", lv->log_scroll);
}

/* The status (" done: press a key ") where it hides nothing of the frame: at the right end of the
 * header's second row, else of its first, else of the bottom row, the first with room after what is
 * drawn there (it used to cover the header's end: "eval a done", "busbw 0.22 GB", a URL's port). With
 * room nowhere, the bottom row's end: a log line's tail gives way, never the header's figures. */
static void put_status(rs_view_screen *sc, const char *st, int color)
{
    int len = 0;
    for (const char *p = st; *p; p++) len += ((unsigned char)*p & 0xC0) != 0x80;
    const int rows[] = {1, 0, sc->h - 1};
    int y = sc->h - 1;
    for (int i = 0; i < 3; i++) {
        int last = -1;
        for (int x = 0; x < sc->w; x++) {
            const rs_view_cell *c = rs_view_screen_at(sc, x, rows[i]);
            if (c && c->ch != ' ') last = x;
        }
        if (last + 2 + len <= sc->w) {
            y = rows[i];
            break;
        }
    }
    rs_view_screen_put(sc, sc->w - len, y, st, -1, color, RS_VIEW_A_REVERSE | RS_VIEW_A_BOLD);
}

static void draw(rs_live *lv)
{
    rs_view_screen *sc = lv->sc;
    double now = lv->now >= 0 ? lv->now : rs_pg_now();
    if (lv->draw_fn) {
        lv->draw_fn(lv->draw_ud, sc, &lv->o);
        char st[80];
        snprintf(st, sizeof st, " %s ", lv->status);
        if (lv->status[0] && sc->w >= RS_VIEW_MIN_W && sc->h >= RS_VIEW_MIN_H)
            put_status(sc, st, lv->o.color ? RS_VIEW_C_WARN : 0);
        rs_view_screen_to_curses(sc, stdscr);
        doupdate();
        return;
    }
    rs_view_draw(sc, lv->vm, now, &lv->o);
    int world = lv->vm->world > 0 ? lv->vm->world : lv->vm->nranks;
    rs_view_layout l = rs_view_layout_for(sc->w, sc->h, world);
    if (!l.too_small) {
        if (lv->log_scroll > 0) draw_log_scrolled(lv, &l);
        /* the focused pane: its title row underlined and bold (visible without colour too) */
        rs_view_rect f = pane_rect(&l, lv->focus);
        for (int x = f.x; x < f.x + f.w && f.h > 0; x++) {
            const rs_view_cell *c = rs_view_screen_at(sc, x, f.y);
            if (c) rs_view_screen_set(sc, x, f.y, c->ch, c->color, c->attr | RS_VIEW_A_UNDERLINE | RS_VIEW_A_BOLD);
        }
        char st[96];
        snprintf(st, sizeof st, " %s%s%s ", lv->paused ? "paused" : "",
                 lv->paused && lv->status[0] ? (lv->o.utf8 ? " \xc2\xb7 " : " | ") : "", lv->status);
        if (strlen(st) > 2 && l.header.h >= 2) put_status(sc, st, lv->o.color ? RS_VIEW_C_WARN : 0);
    }
    rs_view_screen_to_curses(sc, stdscr);
    doupdate();
}

int rs_live_tick(rs_live *lv)
{
    if (!lv) return 0;
    int out = 0;
    if (winched) {
        winched = 0;
        resize(lv);
    }
    pump_output(lv);
    int ch;
    while ((ch = getch()) != ERR) {
        if (ch != KEY_RESIZE) out |= RS_LIVE_KEY;
        switch (ch) {
        case ' ':
            lv->paused = !lv->paused;
            lv->dirty = true;
            break;
        case '+':
        case '=':
            lv->speed = lv->replay ? (lv->speed < 4096 ? lv->speed * 2 : lv->speed) : (lv->speed < 50 ? lv->speed * 2 : 50);
            lv->dirty = true;
            break;
        case '-':
        case '_':
            lv->speed = lv->replay ? (lv->speed > 1.0 / 4096 ? lv->speed / 2 : lv->speed)
                                   : (lv->speed > 1 ? lv->speed / 2 : 1);
            lv->dirty = true;
            break;
        case '\t': lv->focus = (lv->focus + 1) % PANE_COUNT, lv->dirty = true; break;
        case KEY_BTAB: lv->focus = (lv->focus + PANE_COUNT - 1) % PANE_COUNT, lv->dirty = true; break;
        case 'q':
        case 'Q': out |= RS_LIVE_QUIT; break;
        case 'n':
        case '\n':
        case '\r':
        case KEY_ENTER: out |= RS_LIVE_NEXT; break;
        case KEY_RIGHT:
            if (lv->focus == PANE_LOG && lv->log_scroll > 0) lv->log_scroll--, lv->dirty = true;
            else out |= RS_LIVE_NEXT | RS_LIVE_FWD;
            break;
        case KEY_LEFT: out |= RS_LIVE_BACK; break;
        case KEY_UP:
        case KEY_PPAGE:
            if (lv->focus == PANE_LOG) lv->log_scroll += ch == KEY_UP ? 1 : 10, lv->dirty = true;
            break;
        case KEY_DOWN:
        case KEY_NPAGE:
            if (lv->focus == PANE_LOG) {
                lv->log_scroll -= ch == KEY_DOWN ? 1 : 10;
                if (lv->log_scroll < 0) lv->log_scroll = 0;
                lv->dirty = true;
            }
            break;
        case KEY_RESIZE: winched = 1; break; /* handled on the next tick */
        default: break;
        }
    }
    if (lv->s->interrupt && *lv->s->interrupt) out |= RS_LIVE_STOP;
    double t = rs_pg_now(), every = lv->replay ? 1.0 / 30 : 1.0 / lv->speed;
    if (lv->dirty || (!lv->paused && t - lv->last_draw >= every)) {
        draw(lv);
        lv->last_draw = t;
        lv->dirty = false;
    }
    return out;
}

void rs_live_end(rs_live *lv)
{
    if (!lv) return;
    pump_output(lv);
    endwin();
    delscreen(lv->scr);
    sigaction(SIGWINCH, &lv->old_winch, NULL);
    restore_env(lv);
    setlocale(LC_CTYPE, lv->old_ctype);
    free(lv->old_ctype);
    lv->s->out = lv->real_out;
    fclose(lv->cap);
    if (lv->cap_len) fwrite(lv->cap_buf, 1, lv->cap_len, lv->real_out);
    fflush(lv->real_out);
    free(lv->cap_buf);
    rs_view_screen_free(lv->sc);
    rs_view_model_free(lv->vm);
    free(lv);
}

void rs_live_frame_size(const rs_session *s, int *w, int *h)
{
    int cols = rs_wrap_cols(s->out);
    *w = cols > RS_VIEW_MIN_W ? cols : RS_VIEW_MIN_W;
    *h = 30;
}

char *rs_live_frame_text(const rs_view_model *vm, int w, int h)
{
    rs_err e = {0};
    rs_view_screen *sc = rs_view_screen_new(w, h, &e);
    if (!sc) return NULL;
    rs_view_opts o = rs_view_opts_detect(getenv("TERM"), getenv("NO_COLOR"), rs_view_locale_utf8());
    rs_view_draw(sc, vm, vm->t_last, &o);
    const char *t = rs_view_screen_text(sc);
    char *copy = t ? strdup(t) : NULL;
    rs_view_screen_free(sc);
    return copy;
}
