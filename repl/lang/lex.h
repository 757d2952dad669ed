/* Lexer of the command language: splits a line into commands (`;` or a newline between them, `#` to
 * the end of the line is a comment) and a command into tokens, each with its byte offset in the line,
 * so that an error can put a caret under the word it could not use.
 *
 * Token rules (outside strings):
 *   - blanks (space, tab, CR, VT, FF) separate tokens;
 *   - "..." is a STRING; escapes \" \\ \n \t; any other escape or a missing closing quote is an error;
 *   - '=' is EQUALS where it is not inside ( ) or [ ]: `epochs=2` is WORD EQUALS WORD, `conv(16,3,pad=1)`
 *     is one WORD; only the first '=' of a run splits, so `a=b=c` is WORD(a) EQUALS WORD(b=c);
 *   - "->" is ARROW where it is not inside ( ) or [ ] (`784-256-10` is one WORD, `a->b` is three tokens);
 *   - everything else is a WORD, which runs to the next blank; inside ( ) or [ ] blanks do not end it, so
 *     `conv(16, 3)` and `[ conv(8,3) relu ]` are one WORD each, quotes inside them are kept as written.
 * A command handler that wants the raw text (a model spec after `=`) takes it with rs_lex_rest. */
#ifndef RS_LEX_H
#define RS_LEX_H

#include <stddef.h>

#include "engine/core/status.h"

typedef enum rs_tok_kind {
    RS_TOK_WORD,   /* names, numbers with units, 784-256-10, paths, a.b, globs, conv(16,3,pad=1) */
    RS_TOK_STRING, /* "...": text is the decoded content, off/len cover the quotes */
    RS_TOK_EQUALS, /* = */
    RS_TOK_ARROW,  /* -> */
} rs_tok_kind;

typedef struct rs_token {
    rs_tok_kind kind;
    size_t off;       /* byte offset in the line of the token's first byte (a string's opening quote) */
    size_t len;       /* bytes of the line the token spans: the caret goes under line[off, off+len) */
    const char *text; /* NUL-terminated: the word as written, the decoded string, "=" or "->";
                       * owned by the rs_tokens, valid until its next lex or rs_lex_clear */
} rs_token;

/* Tokens of one command. Start from `rs_tokens t = {0};`, lex into it as often as needed (storage is
 * reused), and release with rs_lex_clear. */
typedef struct rs_tokens {
    rs_token *tok; /* tok[0 .. n-1], in line order, never overlapping */
    int n;
    const char *line; /* borrowed: the line last lexed (rs_lex_rest reads it; keep it alive) */
    size_t end;       /* where the command's text ends in line: before ';', '#', a newline, trailing blanks */
    /* private storage */
    int cap;
    char *buf;
    size_t buf_cap;
} rs_tokens;

/* A byte range [off, off+len) of a line. */
typedef struct rs_span {
    size_t off, len;
} rs_span;

/* Byte ranges of the commands in line, separated by ';' or newlines outside strings, each trimmed of
 * blanks and of its comment; blank and comment-only commands are left out. Writes at most cap spans
 * and returns how many there are (call again with more room if that is more than cap). Never fails:
 * an unterminated string runs to the end of the line, and lexing that command reports it. */
int rs_lex_split_commands(const char *line, rs_span *out, int cap);

/* Lexes the command in line[cmd.off, cmd.off+cmd.len) (as given by rs_lex_split_commands) into *out;
 * offsets are into line. A comment ends the command. A ';' or newline between two commands is an error
 * (split the line first). On error *err_pos (may be NULL) is the offset in line of
 * what could not be lexed (an unterminated string's opening quote) and out->n is 0. Empty and
 * comment-only commands give n = 0 and RS_OK. */
rs_status rs_lex_command(const char *line, rs_span cmd, rs_tokens *out, size_t *err_pos, rs_err *err);

/* rs_lex_command over the whole line: for a line that holds one command (separators and comments
 * around it are fine). */
rs_status rs_lex_line(const char *line, rs_tokens *out, size_t *err_pos, rs_err *err);

/* The raw text of the command from token i to its end (before any comment, trailing blanks removed),
 * borrowed from the line: *len bytes, not NUL-terminated (strndup it for a parser that wants a string,
 * and add tok[i].off to the offsets it reports). i == n gives an empty rest at the command's end. */
const char *rs_lex_rest(const rs_tokens *t, int i, size_t *len);

/* "word", "string", "'='", "'->'": for messages such as "expected a name, got '='". */
const char *rs_lex_kind_name(rs_tok_kind k);

/* Frees the tokens' storage and zeroes *t; a zeroed or NULL t is fine. */
void rs_lex_clear(rs_tokens *t);

#endif
