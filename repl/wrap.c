/* Projector mode (see wrap.h): display widths, the width to fit, paragraph filling, and the wrapping
 * streams the session prints through. */
#define _GNU_SOURCE
#include "wrap.h"

#include <limits.h>
#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <wchar.h>

/* ---------------------------------------------------------------- widths */

/* A C.UTF-8 locale for wcwidth and mbrtowc, made once and only read after: the process's own LC_CTYPE
 * stays "C" (the live view switches it while curses runs). */
static pthread_once_t loc_once = PTHREAD_ONCE_INIT;
static locale_t loc_utf8;
static void loc_make(void) { loc_utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }

/* Bytes of the escape sequence at s (CSI: ESC [ parameters final; others ESC and one byte), 0 when s
 * is no escape; an unfinished one at the end of the n bytes takes them all and clears *done. */
static size_t esc_scan(const char *s, size_t n, bool *done)
{
    *done = true;
    if (!n || s[0] != '\033') return 0;
    if (n >= 2 && s[1] != '[') return 2;
    size_t i = 2;
    while (i < n && !((unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e)) i++;
    if (i < n) return i + 1;
    *done = false;
    return n;
}

static size_t esc_len(const char *s, size_t n)
{
    bool done;
    return esc_scan(s, n, &done);
}

/* The character at s (n > 0 bytes): its length in bytes and, in *cols, its display width. Call with the
 * UTF-8 locale in use. *cols = -1 and 0 returned: an unfinished sequence at the end of the bytes. */
static size_t char_at(const char *s, size_t n, int *cols)
{
    unsigned char c = (unsigned char)s[0];
    if (c < 0x80) {
        *cols = c >= 0x20 && c != 0x7f ? 1 : 0;
        return 1;
    }
    wchar_t wc;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t k = loc_utf8 ? mbrtowc(&wc, s, n, &st) : (size_t)-1;
    if (k == (size_t)-2) {
        *cols = -1;
        return 0;
    }
    if (k == (size_t)-1 || k == 0) {
        if (!loc_utf8 && c >= 0xC0) { /* no locale: count a well-formed sequence as one column */
            size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2, i = 1;
            while (i < len && i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
            if (i == len) {
                *cols = 1;
                return len;
            }
            if (i == n) {
                *cols = -1;
                return 0;
            }
        }
        *cols = 1; /* an invalid byte: terminals show one replacement glyph */
        return 1;
    }
    int w = wcwidth(wc);
    *cols = w < 0 ? 0 : w;
    return k;
}

/* Walks s[0..n) in the UTF-8 locale, skipping escape sequences, until the next character would pass
 * cols or an incomplete character ends the text. Returns the bytes walked;
 * *width gets their columns. */
static size_t walk(const char *s, size_t n, int cols, int *width)
{
    pthread_once(&loc_once, loc_make);
    locale_t old = loc_utf8 ? uselocale(loc_utf8) : (locale_t)0;
    size_t i = 0;
    int w = 0;
    while (i < n) {
        size_t e = esc_len(s + i, n - i);
        if (e) {
            i += e;
            continue;
        }
        int c;
        size_t k = char_at(s + i, n - i, &c);
        if (!k || c > cols - w) break; /* not w + c: cols may be INT_MAX */
        w += c;
        i += k;
    }
    if (loc_utf8) uselocale(old);
    *width = w;
    return i;
}

int rs_wrap_text_width(const char *s, size_t n)
{
    int w;
    walk(s, n, INT_MAX, &w);
    return w;
}

size_t rs_wrap_prefix(const char *s, size_t n, int cols)
{
    int w;
    return walk(s, n, cols, &w);
}

int rs_wrap_cols_fd(int fd)
{
    struct winsize ws;
    if (fd >= 0 && isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    char *end;
    long v = c ? strtol(c, &end, 10) : 0;
    if (c && *c && !*end && v >= 20 && v <= 1000) return (int)v;
    return 80;
}

/* ---------------------------------------------------------------- the wrapping stream */

typedef struct wrap {
    FILE *under;          /* borrowed */
    FILE *self;
    int cols;             /* the width of the current line, read when it starts (0: not yet) */
    int col;              /* display column after what went out on this line */
    int indent;           /* the line's own leading blanks: continuations go two further */
    bool content;         /* something other than blanks is on this line */
    bool mid_word;        /* the last write ended inside a word (a flush): it goes on without a break */
    int pend;             /* blank columns held back: written only before a word that fits after them */
    char carry[16];       /* an unfinished character or escape from the end of the last write */
    size_t ncarry;
    char *word;           /* the word being gathered (owned) */
    size_t wlen, wcap;
    int wcols;
} wrap;

/* The streams open now, so that rs_wrap_fd and rs_wrap_line_start find a stream's wrapper. The REPL
 * opens one or two; only its main thread prints through them, the lock is for the table alone. */
#define WRAP_MAX 8
static struct { FILE *f; wrap *w; } wraps[WRAP_MAX];
static pthread_mutex_t wraps_lock = PTHREAD_MUTEX_INITIALIZER;

static wrap *wrap_of(FILE *f)
{
    wrap *w = NULL;
    pthread_mutex_lock(&wraps_lock);
    for (int i = 0; i < WRAP_MAX && !w; i++)
        if (wraps[i].f == f) w = wraps[i].w;
    pthread_mutex_unlock(&wraps_lock);
    return w;
}

int rs_wrap_fd(FILE *f)
{
    wrap *w = wrap_of(f);
    return w ? fileno(w->under) : fileno(f);
}

int rs_wrap_cols(FILE *f) { return rs_wrap_cols_fd(rs_wrap_fd(f)); }

static int width_now(wrap *w)
{
    if (!w->cols) w->cols = rs_wrap_cols_fd(fileno(w->under));
    return w->cols;
}

/* Where a continuation starts: two past the line's indent, never past a third of the width. */
static int hang_of(wrap *w)
{
    int h = w->indent + 2, cap = width_now(w) / 3;
    return h < cap ? h : cap;
}

static void blanks(wrap *w, int n)
{
    for (int i = 0; i < n; i++) fputc(' ', w->under);
    w->col += n;
}

static void newline(wrap *w)
{
    fputc('\n', w->under);
    w->col = 0;
    w->cols = 0;
    w->indent = 0;
    w->content = false;
    w->pend = 0;
}

/* A continuation line: the break, then the hang. */
static void break_line(wrap *w)
{
    int hang = hang_of(w), indent = w->indent;
    fputc('\n', w->under);
    w->col = 0;
    blanks(w, hang);
    w->indent = indent; /* still the same logical line */
    w->pend = 0;
}

/* Writes s character by character, breaking where the next one would pass the width (a word longer
 * than a line, or one a flush cut in two). */
static void put_hard(wrap *w, const char *s, size_t n)
{
    int W = width_now(w);
    for (size_t i = 0; i < n;) {
        size_t e = esc_len(s + i, n - i);
        if (e) {
            fwrite(s + i, 1, e, w->under);
            i += e;
            continue;
        }
        int c;
        size_t k = char_at(s + i, n - i, &c);
        if (!k) k = n - i, c = 0;
        if (w->col + c > W && w->col > hang_of(w)) break_line(w);
        fwrite(s + i, 1, k, w->under);
        w->col += c;
        i += k;
    }
}

static void flush_word(wrap *w)
{
    if (!w->wlen) return;
    int W = width_now(w);
    if (w->mid_word) {
        put_hard(w, w->word, w->wlen);
    } else if (w->col + w->pend + w->wcols <= W) {
        blanks(w, w->pend);
        fwrite(w->word, 1, w->wlen, w->under);
        w->col += w->wcols;
    } else {
        if (w->content) break_line(w);
        else blanks(w, w->pend);
        put_hard(w, w->word, w->wlen);
    }
    w->pend = 0;
    w->wlen = 0;
    w->wcols = 0;
    w->content = true;
    w->mid_word = false;
}

static bool word_add(wrap *w, const char *s, size_t n, int cols)
{
    if (w->wlen + n > w->wcap) {
        size_t cap = w->wcap ? 2 * w->wcap : 256;
        while (cap < w->wlen + n) cap *= 2;
        char *p = realloc(w->word, cap);
        if (!p) return false;
        w->word = p;
        w->wcap = cap;
    }
    memcpy(w->word + w->wlen, s, n);
    w->wlen += n;
    w->wcols += cols;
    return true;
}

static void take(wrap *w, const char *s, size_t n, size_t *used, bool *stuck)
{
    size_t i = 0;
    *stuck = false;
    while (i < n) {
        char ch = s[i];
        if (ch == '\n' || ch == '\r') {
            flush_word(w);
            if (ch == '\n') newline(w);
            else {
                fputc('\r', w->under);
                w->col = 0, w->cols = 0, w->indent = 0, w->content = false, w->pend = 0;
            }
            w->mid_word = false;
            i++;
        } else if (ch == ' ' || ch == '\t') {
            flush_word(w);
            w->mid_word = false;
            /* held back until a word follows (a line of blanks prints empty); before the first word
             * they are the line's indent */
            w->pend += ch == '\t' ? 8 - (w->col + w->pend) % 8 : 1;
            if (!w->content) w->indent = w->col + w->pend;
            i++;
        } else {
            bool done;
            size_t e = esc_scan(s + i, n - i, &done);
            int c = 0;
            size_t k = e ? e : char_at(s + i, n - i, &c);
            if (!k || !done) {
                *stuck = true; /* unfinished: wait for the rest */
                break;
            }
            if (!word_add(w, s + i, k, c < 0 ? 0 : c)) fwrite(s + i, 1, k, w->under);
            i += k;
        }
    }
    *used = i;
}

static ssize_t wrap_write(void *cookie, const char *buf, size_t n)
{
    wrap *w = cookie;
    pthread_once(&loc_once, loc_make);
    locale_t old = loc_utf8 ? uselocale(loc_utf8) : (locale_t)0;
    size_t i = 0, used;
    bool stuck;
    /* the unfinished piece of the last write first, completed from this one */
    while (w->ncarry && i < n) {
        w->carry[w->ncarry++] = buf[i++];
        take(w, w->carry, w->ncarry, &used, &stuck);
        if (!stuck || w->ncarry == sizeof w->carry) {
            if (stuck) fwrite(w->carry, 1, w->ncarry, w->under);
            w->ncarry = 0;
        }
    }
    take(w, buf + i, n - i, &used, &stuck);
    if (stuck) {
        size_t rest = n - i - used;
        if (rest < sizeof w->carry) {
            memcpy(w->carry, buf + i + used, rest);
            w->ncarry = rest;
        } else {
            fwrite(buf + i + used, 1, rest, w->under);
        }
    }
    /* a write ends at a line's end or at a flush: what was gathered goes out now */
    if (w->wlen) {
        flush_word(w);
        w->mid_word = true;
    } else if (w->pend && w->col + w->pend <= width_now(w)) {
        blanks(w, w->pend); /* "[Enter: run, s: skip] ": the prompt's blank stays before the cursor */
        w->pend = 0;
    }
    if (loc_utf8) uselocale(old);
    fflush(w->under);
    return (ssize_t)n;
}

static int wrap_close(void *cookie)
{
    wrap *w = cookie;
    pthread_mutex_lock(&wraps_lock);
    for (int i = 0; i < WRAP_MAX; i++)
        if (wraps[i].w == w) wraps[i].f = NULL, wraps[i].w = NULL;
    pthread_mutex_unlock(&wraps_lock);
    if (w->ncarry) fwrite(w->carry, 1, w->ncarry, w->under);
    fflush(w->under);
    free(w->word);
    free(w);
    return 0;
}

FILE *rs_wrap_open(FILE *under)
{
    wrap *w = calloc(1, sizeof *w); /* owned by the stream: freed by fclose (wrap_close) */
    if (!w) return NULL;
    w->under = under;
    FILE *f = fopencookie(w, "w", (cookie_io_functions_t){.write = wrap_write, .close = wrap_close});
    if (!f) {
        free(w);
        return NULL;
    }
    setvbuf(f, NULL, _IOLBF, 4096);
    w->self = f;
    pthread_mutex_lock(&wraps_lock);
    int slot = -1;
    for (int i = 0; i < WRAP_MAX && slot < 0; i++)
        if (!wraps[i].f) slot = i;
    if (slot >= 0) wraps[slot].f = f, wraps[slot].w = w;
    pthread_mutex_unlock(&wraps_lock);
    return f;
}

void rs_wrap_line_start(FILE *f)
{
    wrap *w = wrap_of(f);
    if (!w) return;
    fflush(f);
    w->col = 0, w->cols = 0, w->indent = 0, w->content = false, w->pend = 0, w->mid_word = false;
}

void rs_wrap_raw(FILE *f, const char *s, size_t n)
{
    wrap *w = wrap_of(f);
    if (!w) {
        fwrite(s, 1, n, f);
        return;
    }
    fflush(f); /* what the wrapper holds goes out first, in order */
    if (w->pend) blanks(w, w->pend);
    w->pend = 0;
    fwrite(s, 1, n, w->under);
    fflush(w->under);
    /* the cursor is where the text left it: the wrapper's next line starts after the text's last break */
    const char *nl = NULL;
    for (size_t i = n; i > 0 && !nl; i--)
        if (s[i - 1] == '\n') nl = s + i - 1;
    if (nl) {
        w->col = 0, w->cols = 0, w->indent = 0, w->content = false;
        n -= (size_t)(nl + 1 - s);
        s = nl + 1;
    }
    if (n) {
        w->col += rs_wrap_text_width(s, n);
        w->content = true;
    }
    w->mid_word = n > 0;
}

/* ---------------------------------------------------------------- paragraphs */

/* One paragraph (n bytes, no line break) filled from column col (the cursor's), continuations `hang`
 * spaces in; runs of blanks inside a line that fits are kept (aligned columns), a run where the line
 * breaks is dropped. */
static void fill_n(FILE *f, const char *s, size_t n, int cols, int col, int hang)
{
    size_t i = 0;
    while (i < n) {
        size_t b = i;
        while (b < n && s[b] == ' ') b++;
        size_t e = b;
        while (e < n && s[e] != ' ') e++;
        if (e == b) break; /* trailing blanks */
        int gap = (int)(b - i), ww = rs_wrap_text_width(s + b, e - b);
        if (col + gap + ww > cols && col > hang) {
            fprintf(f, "\n%*s", hang, "");
            col = hang;
            gap = 0;
        }
        fprintf(f, "%*s%.*s", gap, "", (int)(e - b), s + b);
        col += gap + ww;
        i = e;
    }
    fputc('\n', f);
}

void rs_wrap_fill(FILE *f, const char *text, int cols, int col, int hang)
{
    fill_n(f, text, strlen(text), cols, col, hang);
}

void rs_wrap_print(FILE *f, const char *text, int cols, int indent)
{
    /* consecutive lines that start in column 0 are one paragraph (the source's breaks inside it do not
     * matter); an indented line stands alone, filled with the continuation under its own indent */
    char *para = malloc(strlen(text) + 1); /* owned here: the paragraph being gathered */
    size_t len = 0;
    const char *p = text;
    for (;;) {
        bool end = !*p;
        const char *nl = end ? NULL : strchr(p, '\n');
        size_t n = end ? 0 : nl ? (size_t)(nl - p) : strlen(p), lead = 0;
        while (lead < n && p[lead] == ' ') lead++;
        if (!end && para && n > 0 && lead == 0) {
            if (len) para[len++] = ' ';
            memcpy(para + len, p, n);
            len += n;
        } else {
            if (len) {
                fprintf(f, "%*s", indent, "");
                fill_n(f, para, len, cols, indent, indent);
                len = 0;
            }
            if (end) break;
            if (n > lead) {
                fprintf(f, "%*s", indent + (int)lead, "");
                fill_n(f, p + lead, n - lead, cols, indent + (int)lead, indent + (int)lead + 2);
            } else {
                fputc('\n', f);
            }
        }
        p = nl ? nl + 1 : p + n;
    }
    free(para);
}
