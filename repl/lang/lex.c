/* Lexer of the command language (see lex.h for the token rules). One pass over the bytes of a command,
 * no allocation per token: the texts of all tokens go into one buffer sized from the command's length
 * (texts never exceed the bytes they span), so a lexed command costs at most two allocations. */
#include "repl/lang/lex.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Blanks separate tokens; a newline is not one: it ends a command, as ';' does. */
static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_sep(char c)
{
    return c == ';' || c == '\n';
}

/* Scans the string whose opening quote is at line[q], writing the decoded text to dst when dst is not
 * NULL. On success *next is the offset after the closing quote. A raw newline ends the line for a
 * string too (it separates commands), so it leaves the string unterminated. */
static rs_status scan_string(const char *line, size_t q, size_t end, char *dst, size_t *dst_len,
                             size_t *next, size_t *err_pos, rs_err *err)
{
    size_t j = q + 1, k = 0;
    while (j < end && line[j] != '\n') {
        char c = line[j];
        if (c == '"') {
            if (dst) dst[k] = '\0';
            if (dst_len) *dst_len = k;
            *next = j + 1;
            return RS_OK;
        }
        if (c == '\\') {
            if (j + 1 >= end || line[j + 1] == '\n') break;
            char e = line[j + 1], d;
            switch (e) {
            case '"': d = '"'; break;
            case '\\': d = '\\'; break;
            case 'n': d = '\n'; break;
            case 't': d = '\t'; break;
            default:
                if (err_pos) *err_pos = j;
                if ((unsigned char)e < 0x20 || (unsigned char)e >= 0x7f)
                    return rs_err_set(err, RS_ERR_ARG,
                                      "unknown escape in string: strings know \\\" \\\\ \\n \\t");
                return rs_err_set(err, RS_ERR_ARG,
                                  "unknown escape '\\%c' in string: strings know \\\" \\\\ \\n \\t", e);
            }
            if (dst) dst[k++] = d;
            j += 2;
            continue;
        }
        if (dst) dst[k++] = c;
        j++;
    }
    if (err_pos) *err_pos = q;
    return rs_err_set(err, RS_ERR_ARG, "unterminated string: add a closing '\"'");
}

/* True when line[i, end) holds nothing but blanks, separators and comments. */
static bool rest_is_empty(const char *line, size_t i, size_t end)
{
    while (i < end) {
        char c = line[i];
        if (c == '#') {
            while (i < end && line[i] != '\n') i++;
            continue;
        }
        if (!is_blank(c) && !is_sep(c)) return false;
        i++;
    }
    return true;
}

static rs_status push(rs_tokens *t, rs_tok_kind kind, size_t off, size_t len, size_t *used,
                      const char *text, size_t text_len, rs_err *err)
{
    if (t->n == t->cap) {
        if (t->cap > INT_MAX / 2) return rs_err_set(err, RS_ERR_NOMEM, "too many tokens on one line");
        int cap = t->cap ? 2 * t->cap : 16;
        rs_token *tok = realloc(t->tok, (size_t)cap * sizeof *tok);
        if (!tok) return rs_err_set(err, RS_ERR_NOMEM, "out of memory lexing a line");
        t->tok = tok;
        t->cap = cap;
    }
    /* A string's text is already decoded in place at buf + *used (text == NULL). */
    char *dst = t->buf + *used;
    if (text) memcpy(dst, text, text_len);
    dst[text_len] = '\0';
    t->tok[t->n++] = (rs_token){.kind = kind, .off = off, .len = len, .text = dst};
    *used += text_len + 1;
    return RS_OK;
}

/* End of the word starting at line[i]. In value mode (right after '=') a '=' does not end it. Inside
 * ( ) or [ ] blanks, '=' and "->" are part of the word, and strings are kept as written. */
static rs_status scan_word(const char *line, size_t i, size_t end, bool value_mode, size_t *word_end,
                           size_t *err_pos, rs_err *err)
{
    size_t j = i, depth = 0;
    while (j < end) {
        char c = line[j];
        if (c == '#' || is_sep(c)) break;
        if (depth == 0) {
            if (is_blank(c) || c == '"') break;
            if (c == '-' && j + 1 < end && line[j + 1] == '>') break;
            if (c == '=' && !value_mode) break;
        } else if (c == '"') {
            rs_status st = scan_string(line, j, end, NULL, NULL, &j, err_pos, err);
            if (st != RS_OK) return st;
            continue;
        }
        if (c == '(' || c == '[') depth++;
        else if ((c == ')' || c == ']') && depth > 0) depth--;
        j++;
    }
    /* An unclosed '(' took the blanks up to the end along. */
    while (depth > 0 && j > i && is_blank(line[j - 1])) j--;
    *word_end = j;
    return RS_OK;
}

static rs_status separator_error(const char *line, size_t at, size_t *err_pos, rs_err *err)
{
    if (err_pos) *err_pos = at;
    return rs_err_set(err, RS_ERR_ARG, "only one command is allowed here: %s starts another",
                      line[at] == ';' ? "';'" : "a new line");
}

rs_status rs_lex_command(const char *line, rs_span cmd, rs_tokens *out, size_t *err_pos, rs_err *err)
{
    if (!line || !out) return rs_err_set(err, RS_ERR_INTERNAL, "rs_lex_command: no line or no tokens");
    out->n = 0;
    out->line = line;
    out->end = cmd.off;
    size_t end = cmd.off + strnlen(line + cmd.off, cmd.len);
    size_t len = end - cmd.off;
    if (len > (SIZE_MAX - 2) / 2) return rs_err_set(err, RS_ERR_NOMEM, "line too long to lex");
    if (out->buf_cap < 2 * len + 2) {
        char *buf = realloc(out->buf, 2 * len + 2);
        if (!buf) return rs_err_set(err, RS_ERR_NOMEM, "out of memory lexing a line");
        out->buf = buf;
        out->buf_cap = 2 * len + 2;
    }
    size_t used = 0, i = cmd.off;
    bool value_mode = false; /* the previous token was '=' with no blank after it */
    rs_status st = RS_OK;
    while (st == RS_OK && i < end) {
        char c = line[i];
        if (is_blank(c)) {
            value_mode = false;
            i++;
            continue;
        }
        /* Separators and comments before the command are skipped; after it, only more of them may
         * follow. */
        if (c == '#') {
            while (i < end && line[i] != '\n') i++;
            if (out->n == 0) continue;
            if (i < end && !rest_is_empty(line, i + 1, end)) st = separator_error(line, i, err_pos, err);
            break;
        }
        if (is_sep(c)) {
            if (out->n == 0) {
                value_mode = false;
                i++;
                continue;
            }
            if (!rest_is_empty(line, i + 1, end)) st = separator_error(line, i, err_pos, err);
            break;
        }
        if (c == '"') {
            size_t next = end, text_len = 0;
            st = scan_string(line, i, end, out->buf + used, &text_len, &next, err_pos, err);
            if (st == RS_OK) st = push(out, RS_TOK_STRING, i, next - i, &used, NULL, text_len, err);
            i = next;
            value_mode = false;
        } else if (c == '-' && i + 1 < end && line[i + 1] == '>') {
            st = push(out, RS_TOK_ARROW, i, 2, &used, "->", 2, err);
            i += 2;
            value_mode = false;
        } else if (c == '=' && !value_mode) {
            st = push(out, RS_TOK_EQUALS, i, 1, &used, "=", 1, err);
            i++;
            value_mode = true;
        } else {
            size_t j = end;
            st = scan_word(line, i, end, value_mode, &j, err_pos, err);
            if (st == RS_OK) st = push(out, RS_TOK_WORD, i, j - i, &used, line + i, j - i, err);
            i = j;
            value_mode = false;
        }
    }
    if (st != RS_OK) {
        out->n = 0;
        return st;
    }
    if (out->n > 0) out->end = out->tok[out->n - 1].off + out->tok[out->n - 1].len;
    return RS_OK;
}

rs_status rs_lex_line(const char *line, rs_tokens *out, size_t *err_pos, rs_err *err)
{
    if (!line) return rs_err_set(err, RS_ERR_INTERNAL, "rs_lex_line: no line");
    return rs_lex_command(line, (rs_span){0, strlen(line)}, out, err_pos, err);
}

static void emit(const char *line, size_t a, size_t b, rs_span *out, int cap, int *count)
{
    while (a < b && is_blank(line[a])) a++;
    while (b > a && is_blank(line[b - 1])) b--;
    if (a == b || *count == INT_MAX) return;
    if (*count < cap) out[*count] = (rs_span){a, b - a};
    (*count)++;
}

int rs_lex_split_commands(const char *line, rs_span *out, int cap)
{
    int count = 0;
    if (!line) return 0;
    size_t i = 0, start = 0, stop = SIZE_MAX; /* stop: where a comment cut the current command */
    for (;;) {
        char c = line[i];
        if (c == '\0' || is_sep(c)) {
            emit(line, start, stop < i ? stop : i, out, cap, &count);
            if (c == '\0') break;
            start = ++i;
            stop = SIZE_MAX;
        } else if (c == '#') {
            stop = i;
            while (line[i] && line[i] != '\n') i++;
        } else if (c == '"') {
            /* Same boundaries as scan_string: escapes skip a byte, a newline ends the line. */
            i++;
            while (line[i] && line[i] != '"' && line[i] != '\n')
                i += (line[i] == '\\' && line[i + 1] && line[i + 1] != '\n') ? 2 : 1;
            if (line[i] == '"') i++;
        } else {
            i++;
        }
    }
    return count;
}

const char *rs_lex_rest(const rs_tokens *t, int i, size_t *len)
{
    size_t from = i < t->n ? t->tok[i].off : t->end;
    *len = t->end > from ? t->end - from : 0;
    return t->line + from;
}

const char *rs_lex_kind_name(rs_tok_kind k)
{
    switch (k) {
    case RS_TOK_WORD: return "word";
    case RS_TOK_STRING: return "string";
    case RS_TOK_EQUALS: return "'='";
    case RS_TOK_ARROW: return "'->'";
    }
    return "token";
}

void rs_lex_clear(rs_tokens *t)
{
    if (!t) return;
    free(t->tok);
    free(t->buf);
    *t = (rs_tokens){0};
}
