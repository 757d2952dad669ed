/* The virtual screen (screen.h): a cell grid with clipping, and its text form for snapshot tests. */
#include "screen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rs_view_screen *rs_view_screen_new(int w, int h, rs_err *err)
{
    rs_view_screen *s = calloc(1, sizeof *s); /* owned by the caller */
    if (!s) {
        rs_err_set(err, RS_ERR_NOMEM, "dashboard: out of memory for a %dx%d screen", w, h);
        return NULL;
    }
    if (rs_view_screen_resize(s, w, h, err) != RS_OK) {
        rs_view_screen_free(s);
        return NULL;
    }
    return s;
}

void rs_view_screen_free(rs_view_screen *s)
{
    if (!s) return;
    free(s->cells);
    free(s->text);
    free(s);
}

rs_status rs_view_screen_resize(rs_view_screen *s, int w, int h, rs_err *err)
{
    if (w < 1 || h < 1 || w > 4096 || h > 4096)
        return rs_err_set(err, RS_ERR_ARG, "dashboard: a %dx%d screen cannot be drawn (1..4096 each)", w, h);
    rs_view_cell *c = calloc((size_t)w * (size_t)h, sizeof *c); /* owned by s */
    size_t cap = (size_t)w * (size_t)h * 4 + (size_t)h + 1;  /* a code point is at most 4 bytes */
    char *t = malloc(cap);                                     /* owned by s */
    if (!c || !t) {
        free(c);
        free(t);
        return rs_err_set(err, RS_ERR_NOMEM, "dashboard: out of memory for a %dx%d screen", w, h);
    }
    free(s->cells);
    free(s->text);
    s->cells = c;
    s->text = t;
    s->text_cap = cap;
    s->w = w;
    s->h = h;
    rs_view_screen_clip(s, NULL);
    rs_view_screen_clear(s);
    return RS_OK;
}

void rs_view_screen_clear(rs_view_screen *s)
{
    for (size_t i = 0; i < (size_t)s->w * (size_t)s->h; i++) s->cells[i] = (rs_view_cell){' ', 0, 0};
}

void rs_view_screen_clip(rs_view_screen *s, const rs_view_rect *r)
{
    rs_view_rect c = {0, 0, s->w, s->h};
    if (r) {
        int x0 = r->x > 0 ? r->x : 0, y0 = r->y > 0 ? r->y : 0;
        int x1 = r->x + r->w < s->w ? r->x + r->w : s->w, y1 = r->y + r->h < s->h ? r->y + r->h : s->h;
        c = (rs_view_rect){x0, y0, x1 > x0 ? x1 - x0 : 0, y1 > y0 ? y1 - y0 : 0};
    }
    s->clip = c;
}

static bool inside(const rs_view_screen *s, int x, int y)
{
    return x >= s->clip.x && y >= s->clip.y && x < s->clip.x + s->clip.w && y < s->clip.y + s->clip.h;
}

void rs_view_screen_set(rs_view_screen *s, int x, int y, uint32_t ch, int color, int attr)
{
    if (!inside(s, x, y)) return;
    s->cells[(size_t)y * (size_t)s->w + (size_t)x] = (rs_view_cell){ch, (uint8_t)color, (uint8_t)attr};
}

const rs_view_cell *rs_view_screen_at(const rs_view_screen *s, int x, int y)
{
    if (x < 0 || y < 0 || x >= s->w || y >= s->h) return NULL;
    return &s->cells[(size_t)y * (size_t)s->w + (size_t)x];
}

/* One code point from p (advancing it); an invalid sequence yields '?' and skips one byte. */
static uint32_t next_cp(const unsigned char **p)
{
    const unsigned char *q = *p;
    uint32_t c = q[0];
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0) {
        *p = q + 1;
        return '?';
    }
    uint32_t cp = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i <= n; i++) {
        if ((q[i] & 0xC0) != 0x80) {
            *p = q + 1;
            return '?';
        }
        cp = (cp << 6) | (q[i] & 0x3F);
    }
    *p = q + n + 1;
    return cp;
}

int rs_view_screen_put(rs_view_screen *s, int x, int y, const char *utf8, int max, int color, int attr)
{
    const unsigned char *p = (const unsigned char *)utf8;
    int n = 0;
    if (max < 0) max = s->clip.x + s->clip.w - x;
    while (*p && n < max) {
        uint32_t cp = next_cp(&p);
        if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) cp = ' ';
        rs_view_screen_set(s, x + n, y, cp, color, attr);
        n++;
    }
    return n;
}

int rs_view_screen_printf(rs_view_screen *s, int x, int y, int max, int color, int attr, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return rs_view_screen_put(s, x, y, buf, max, color, attr);
}

void rs_view_screen_fill(rs_view_screen *s, const rs_view_rect *r, uint32_t ch, int color, int attr)
{
    for (int y = r->y; y < r->y + r->h; y++)
        for (int x = r->x; x < r->x + r->w; x++) rs_view_screen_set(s, x, y, ch, color, attr);
}

void rs_view_screen_box(rs_view_screen *s, const rs_view_rect *r, const char *title, bool ascii, int color)
{
    if (r->w < 2 || r->h < 2) return;
    uint32_t hz = ascii ? '-' : 0x2500, vt = ascii ? '|' : 0x2502;
    uint32_t tl = ascii ? '+' : 0x250C, tr = ascii ? '+' : 0x2510, bl = ascii ? '+' : 0x2514,
             br = ascii ? '+' : 0x2518;
    int x1 = r->x + r->w - 1, y1 = r->y + r->h - 1;
    for (int x = r->x + 1; x < x1; x++) {
        rs_view_screen_set(s, x, r->y, hz, color, 0);
        rs_view_screen_set(s, x, y1, hz, color, 0);
    }
    for (int y = r->y + 1; y < y1; y++) {
        rs_view_screen_set(s, r->x, y, vt, color, 0);
        rs_view_screen_set(s, x1, y, vt, color, 0);
    }
    rs_view_screen_set(s, r->x, r->y, tl, color, 0);
    rs_view_screen_set(s, x1, r->y, tr, color, 0);
    rs_view_screen_set(s, r->x, y1, bl, color, 0);
    rs_view_screen_set(s, x1, y1, br, color, 0);
    if (title && *title && r->w > 4) {
        rs_view_screen_set(s, r->x + 1, r->y, ' ', color, 0);
        int n = rs_view_screen_put(s, r->x + 2, r->y, title, r->w - 5, color, RS_VIEW_A_BOLD);
        rs_view_screen_set(s, r->x + 2 + n, r->y, ' ', color, 0);
    }
}

int rs_view_utf8_encode(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | ((cp >> 18) & 0x07));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

const char *rs_view_screen_text(rs_view_screen *s)
{
    char *o = s->text;
    for (int y = 0; y < s->h; y++) {
        char *end = o; /* just past the last non-space of the row */
        for (int x = 0; x < s->w; x++) {
            uint32_t ch = s->cells[(size_t)y * (size_t)s->w + (size_t)x].ch;
            o += rs_view_utf8_encode(ch > 0x10FFFF ? '?' : ch, o);
            if (ch != ' ') end = o;
        }
        o = end;
        *o++ = '\n';
    }
    *o = 0;
    return s->text;
}
