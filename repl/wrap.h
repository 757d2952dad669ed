/* Projector mode: everything the REPL prints fits the terminal's width. The session's output streams
 * are wrappers (rs_wrap_open) over stdout and stderr that break a line too long for the width at its
 * last blank, or inside a word longer than a line, and indent the continuation two columns past the
 * line's own indent; tables, help pages, progress lines and pictures format themselves for the width
 * (rs_wrap_cols) first, so the wrapper only ever catches free text. Widths are display columns of UTF-8
 * text (wcwidth, in a C.UTF-8 locale of our own so the process's LC_CTYPE stays "C"); escape sequences
 * (colours) take none. */
#ifndef RS_WRAP_H
#define RS_WRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The width output to fd must fit: the terminal's columns when fd is a terminal, else $COLUMNS (20 to
 * 1000), else 80 (scripts, pipes and files read like an 80-column terminal). */
int rs_wrap_cols_fd(int fd);
/* The same for a stream: a wrapper's underlying stream's fd, or the stream's own. */
int rs_wrap_cols(FILE *f);
/* The file descriptor behind f (a wrapper's underlying one): isatty() on a wrapper asks this. */
int rs_wrap_fd(FILE *f);

/* Display columns of n bytes of UTF-8 text: wide (CJK) characters take 2, combining marks and escape
 * sequences 0, an invalid byte 1. */
int rs_wrap_text_width(const char *s, size_t n);
/* Bytes of s that fill at most `cols` display columns (never cutting a character or an escape). */
size_t rs_wrap_prefix(const char *s, size_t n, int cols);

/* A line-buffered stream writing to `under`, every line kept within rs_wrap_cols(under) columns (the
 * width is read again at each new line, so a resized terminal is followed). Caller owns it: fclose
 * flushes it and frees the wrapper; `under` stays open. NULL when out of memory. */
FILE *rs_wrap_open(FILE *under);
/* The cursor is at the start of a line although the wrapper did not put it there (a person pressed
 * Enter at a prompt and the terminal echoed it). A no-op for streams that are not wrappers. */
void rs_wrap_line_start(FILE *f);

/* Writes n bytes as they are, never broken or indented (generated text goes out as sampled), and
 * tells the wrapper where they left the cursor. On a stream that is not a wrapper, fwrite. */
void rs_wrap_raw(FILE *f, const char *s, size_t n);
/* Prints one paragraph (no line breaks) as if the cursor stood at column `col`: words fill the line up
 * to `cols`, continuation lines start `hang` spaces in; ends the line. */
void rs_wrap_fill(FILE *f, const char *text, int cols, int col, int hang);
/* Prints text within `cols` columns, `indent` spaces in: lines that start in column 0 follow each
 * other as one paragraph, filled word by word; an indented line (an example, a list entry) keeps its
 * place and its inner spacing, and continues two columns under its own start; an empty line stays. */
void rs_wrap_print(FILE *f, const char *text, int cols, int indent);

#endif
