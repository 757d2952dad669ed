/* repl/wrap.c, the projector mode's stream and widths, on a memory stream at COLUMNS=20: lines break at
 * blanks with a hanging indent, words longer than a line break inside, escape sequences take no
 * columns, wide characters two, a character split between two writes stays whole, a carriage return
 * starts the line over, trailing blanks go, and no byte of a word is lost. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repl/wrap.h"
#include "rs_test.h"

/* What the wrapper wrote for text, written in pieces of `piece` bytes with a flush after each (0: at once). */
static char *wrapped(const char *text, size_t piece)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *under = open_memstream(&buf, &len);
    FILE *w = rs_wrap_open(under);
    RS_CHECK(w != NULL, "rs_wrap_open");
    if (!w) exit(1);
    size_t n = strlen(text);
    if (!piece) fputs(text, w);
    for (size_t i = 0; piece && i < n; i += piece) {
        fwrite(text + i, 1, i + piece <= n ? piece : n - i, w);
        fflush(w);
    }
    fclose(w);
    fclose(under);
    return buf;
}

/* Every line within cols display columns (and, unless flushed mid-line, without trailing blanks: a blank
 * written before a flush is out before the wrapper knows whether the next word fits). Returns the
 * number of lines. */
static int check_lines_(const char *what, const char *out, int cols, bool trailing_ok)
{
    int lines = 0;
    for (const char *p = out; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int w = rs_wrap_text_width(p, n);
        RS_CHECK(w <= cols, "%s: a line of %d columns: '%.*s'\n%s", what, w, (int)n, p, out);
        RS_CHECK(trailing_ok || n == 0 || p[n - 1] != ' ', "%s: trailing blank in '%.*s'", what, (int)n, p);
        lines++;
        p += n + (e ? 1 : 0);
    }
    return lines;
}

static int check_lines(const char *what, const char *out, int cols) { return check_lines_(what, out, cols, false); }

/* The text without blanks and line breaks: wrapping may move those, never anything else. */
static char *ink(const char *s)
{
    char *o = malloc(strlen(s) + 1), *q = o;
    for (; *s; s++)
        if (*s != ' ' && *s != '\n') *q++ = *s;
    *q = 0;
    return o;
}

static void same_ink(const char *what, const char *in, const char *out)
{
    char *a = ink(in), *b = ink(out);
    RS_CHECK(!strcmp(a, b), "%s: text changed:\n  in:  %s\n  out: %s", what, a, b);
    free(a);
    free(b);
}

int main(void)
{
    setenv("COLUMNS", "20", 1);

    /* display widths */
    RS_CHECK(rs_wrap_text_width("abc", 3) == 3, "ascii");
    RS_CHECK(rs_wrap_text_width("\033[1;31mab\033[0m", 13) == 2, "escapes take no columns");
    RS_CHECK(rs_wrap_text_width("\xe6\xbc\xa2\xe5\xad\x97", 6) == 4, "two wide characters take 4");
    RS_CHECK(rs_wrap_text_width("e\xcc\x81", 3) == 1, "a combining accent takes none");
    RS_CHECK(rs_wrap_text_width("\xe2\x94\x82\xe2\x80\xa6", 6) == 2, "box drawing and ellipsis take one each");
    RS_CHECK(rs_wrap_prefix("ab\xe6\xbc\xa2" "cd", 7, 3) == 2, "a prefix never cuts a wide character in two");
    RS_CHECK(rs_wrap_cols_fd(-1) == 20, "COLUMNS when there is no terminal");

    const char *prose = "the quick brown fox jumps over the lazy dog and keeps running far away\n";
    char *o = wrapped(prose, 0);
    RS_CHECK(!strncmp(o, "the quick brown fox\n  jumps over the\n", 37), "breaks at blanks, continuation two in:\n%s", o);
    RS_CHECK(check_lines("prose", o, 20) >= 4, "prose takes several lines:\n%s", o);
    same_ink("prose", prose, o);
    free(o);

    const char *indented = "    alpha beta gamma delta epsilon\n";
    o = wrapped(indented, 0);
    RS_CHECK(!strncmp(o, "    alpha beta gamma\n      delta", 32), "continues two past the line's indent:\n%s", o);
    check_lines("indented", o, 20);
    free(o);

    const char *longword = "x: 0123456789012345678901234567890123456789 end\n";
    o = wrapped(longword, 0);
    check_lines("a word longer than a line", o, 20);
    same_ink("a word longer than a line", longword, o);
    free(o);

    /* colours and UTF-8, written a byte at a time (a flush after each: characters split between writes) */
    const char *mixed = "\033[1mbold\033[0m caf\xc3\xa9 \xe6\xbc\xa2\xe5\xad\x97\xe6\xbc\xa2\xe5\xad\x97 "
                        "na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \033[32mgreen\033[0m \xe2\x94\x82 done\n";
    for (size_t piece = 0; piece <= 3; piece++) {
        o = wrapped(mixed, piece);
        check_lines_("colours and UTF-8", o, 20, piece > 0);
        same_ink("colours and UTF-8", mixed, o);
        free(o);
    }

    /* a progress line redrawn in place: the carriage return starts the count over */
    const char *redraw = "\r\033[K step 1 of 3 [#####]\r\033[K step 2 of 3 [#####]\r\033[K step 3 of 3 [#####]\n";
    o = wrapped(redraw, 0);
    RS_CHECK(!strchr(o, '\n') || strchr(o, '\n') == o + strlen(o) - 1, "redraws that fit stay one line:\n%s", o);
    free(o);

    /* trailing blanks go; a line of blanks prints empty; a prompt's last blank stays before the cursor */
    o = wrapped("abc   \n      \nnext: ", 0);
    RS_CHECK(!strcmp(o, "abc\n\nnext: "), "blanks: '%s'", o);
    free(o);

    /* paragraphs: prose lines join and fill, indented lines keep their place and spacing */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rs_wrap_print(f, "one two three\nfour five six seven\n  a  b   c\n\nlast", 20, 2);
    fclose(f);
    RS_CHECK(!strcmp(buf, "  one two three four\n  five six seven\n    a  b   c\n\n  last\n"), "rs_wrap_print:\n%s", buf);
    free(buf);

    /* a wrapper's descriptor is its stream's: isatty() asks the terminal behind it */
    FILE *w = rs_wrap_open(stderr);
    RS_CHECK(w && rs_wrap_fd(w) == fileno(stderr), "rs_wrap_fd");
    if (w) fclose(w);
    return rs_test_finish("wrap");
}
