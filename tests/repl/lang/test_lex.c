/* Tests of the command-language lexer: every token kind with its offsets, strings and their escapes,
 * comments, `;` splitting, `key=value` against `conv(16,3,pad=1)`, and the errors with their positions.
 * Lines are taken from the DESIGN.md sketch where one fits. */
#include <string.h>

#include "repl/lang/lex.h"
#include "tests/rs_test.h"

typedef struct want {
    rs_tok_kind kind;
    const char *text;
    size_t off, len; /* len 0: strlen(text) */
} want;

#define W(t, o) {RS_TOK_WORD, (t), (o), 0}
#define S(t, o, l) {RS_TOK_STRING, (t), (o), (l)}
#define EQ(o) {RS_TOK_EQUALS, "=", (o), 0}
#define AR(o) {RS_TOK_ARROW, "->", (o), 0}

static void expect_tokens(int at, const char *line, const want *w, int n)
{
    rs_tokens t = {0};
    rs_err e = {0};
    size_t pos = 0;
    rs_status st = rs_lex_line(line, &t, &pos, &e);
    RS_CHECK(st == RS_OK, "line %d: lexing \"%s\" failed at %zu: %s", at, line, pos, e.msg);
    RS_CHECK(t.n == n, "line %d: \"%s\": %d tokens, want %d", at, line, t.n, n);
    for (int i = 0; i < n && i < t.n; i++) {
        size_t len = w[i].len ? w[i].len : strlen(w[i].text);
        RS_CHECK(t.tok[i].kind == w[i].kind && !strcmp(t.tok[i].text, w[i].text) && t.tok[i].off == w[i].off &&
                     t.tok[i].len == len,
                 "line %d: token %d of \"%s\": %s '%s' at %zu+%zu, want %s '%s' at %zu+%zu", at, i, line,
                 rs_lex_kind_name(t.tok[i].kind), t.tok[i].text, t.tok[i].off, t.tok[i].len,
                 rs_lex_kind_name(w[i].kind), w[i].text, w[i].off, len);
        /* A word's text is exactly the bytes it spans. */
        if (t.tok[i].kind == RS_TOK_WORD)
            RS_CHECK(!memcmp(line + t.tok[i].off, t.tok[i].text, t.tok[i].len), "line %d: word text", at);
    }
    rs_lex_clear(&t);
}

#define EXPECT(line, ...)                                                                          \
    do {                                                                                           \
        const want w_[] = {__VA_ARGS__};                                                           \
        expect_tokens(__LINE__, (line), w_, (int)(sizeof w_ / sizeof *w_));                        \
    } while (0)

static void expect_none(const char *line)
{
    rs_tokens t = {0};
    rs_err e = {0};
    RS_CHECK(rs_lex_line(line, &t, NULL, &e) == RS_OK && t.n == 0, "\"%s\": want no tokens, got %d (%s)", line,
             t.n, e.msg);
    size_t len = 99;
    rs_lex_rest(&t, 0, &len);
    RS_CHECK(len == 0, "\"%s\": empty rest, got %zu bytes", line, len);
    rs_lex_clear(&t);
}

static void expect_error(const char *line, size_t want_pos, const char *want_msg)
{
    rs_tokens t = {0};
    rs_err e = {0};
    size_t pos = 12345;
    rs_status st = rs_lex_line(line, &t, &pos, &e);
    RS_CHECK(st == RS_ERR_ARG, "\"%s\": want an error, got %s", line, rs_status_name(st));
    RS_CHECK(pos == want_pos, "\"%s\": error at %zu, want %zu (%s)", line, pos, want_pos, e.msg);
    RS_CHECK(strstr(e.msg, want_msg), "\"%s\": message '%s' lacks '%s'", line, e.msg, want_msg);
    RS_CHECK(t.n == 0, "\"%s\": no tokens after an error", line);
    printf("  %-22s -> at %zu: %s\n", line, pos, e.msg);
    rs_lex_clear(&t);
}

static void test_kinds(void)
{
    EXPECT("model m = mlp 784-256-10 act=relu", W("model", 0), W("m", 6), EQ(8), W("mlp", 10),
           W("784-256-10", 14), W("act", 25), EQ(28), W("relu", 29));
    EXPECT("compile m.onnx precision=int8 calib=d -> m.plan", W("compile", 0), W("m.onnx", 8), W("precision", 15),
           EQ(24), W("int8", 25), W("calib", 30), EQ(35), W("d", 36), AR(38), W("m.plan", 41));
    EXPECT("serve m.plan name=digits delay=500us", W("serve", 0), W("m.plan", 6), W("name", 13), EQ(17),
           W("digits", 18), W("delay", 25), EQ(30), W("500us", 31));
    EXPECT("play tutorials/03-ddp.ring", W("play", 0), W("tutorials/03-ddp.ring", 5));
    EXPECT("ls *.ring a.b ~/x_y", W("ls", 0), W("*.ring", 3), W("a.b", 10), W("~/x_y", 14));
    EXPECT("\tshow\t m  ", W("show", 1), W("m", 7));
    EXPECT("a->b", W("a", 0), AR(1), W("b", 3));
    EXPECT("lr=-0.5 x=-1", W("lr", 0), EQ(2), W("-0.5", 3), W("x", 8), EQ(9), W("-1", 10));
    EXPECT("x -> y", W("x", 0), AR(2), W("y", 5));
    EXPECT("a-->b", W("a-", 0), AR(2), W("b", 4));
    EXPECT("say \"h\xc3\xa9llo\" x", W("say", 0), S("h\xc3\xa9llo", 4, 8), W("x", 13)); /* offsets in bytes */
}

static void test_key_value(void)
{
    /* '=' inside ( ) or [ ] stays in the word; the first '=' of a run splits; a blank resets that. */
    EXPECT("model c = seq conv(16,3,pad=1) relu", W("model", 0), W("c", 6), EQ(8), W("seq", 10),
           W("conv(16,3,pad=1)", 14), W("relu", 31));
    EXPECT("a=b=c", W("a", 0), EQ(1), W("b=c", 2));
    EXPECT("a==b", W("a", 0), EQ(1), W("=b", 2));
    EXPECT("a= b=c", W("a", 0), EQ(1), W("b", 3), EQ(4), W("c", 5));
    EXPECT("=x", EQ(0), W("x", 1));
    EXPECT("m=", W("m", 0), EQ(1));
    EXPECT("x=conv(16, 3, pad=1) y", W("x", 0), EQ(1), W("conv(16, 3, pad=1)", 2), W("y", 21));
    EXPECT("seq [ conv(8,3) relu ] flatten", W("seq", 0), W("[ conv(8,3) relu ]", 4), W("flatten", 23));
    EXPECT("f(a->b) g(\"x y) #;\")", W("f(a->b)", 0), W("g(\"x y) #;\")", 8));
    EXPECT("conv(16,3 relu   ", W("conv(16,3 relu", 0)); /* unclosed: runs to the end, blanks trimmed */
    EXPECT("a)=b", W("a)", 0), EQ(2), W("b", 3));            /* a stray ')' does not go below depth 0 */
    EXPECT("name=\"a b\"", W("name", 0), EQ(4), S("a b", 5, 5));
    EXPECT("abc\"d e\"f", W("abc", 0), S("d e", 3, 5), W("f", 8));
}

static void test_strings(void)
{
    EXPECT("say \"hello \\\"world\\\"\\n\\\\ end\\t\"", W("say", 0),
           S("hello \"world\"\n\\ end\t", 4, 27));
    EXPECT("sql \"select * from t; -- # not a comment\"", W("sql", 0),
           S("select * from t; -- # not a comment", 4, 37));
    EXPECT("say \"\"", W("say", 0), S("", 4, 2));
    expect_error("say \"hello", 4, "unterminated string");
    expect_error("say \"a\\\"", 4, "unterminated string");
    expect_error("say \"a\\", 4, "unterminated string");
    expect_error("say \"a\\q\" b", 6, "unknown escape '\\q'");
    expect_error("x f(\"open", 4, "unterminated string");
    expect_error("say \"two\nlines\"", 4, "unterminated string"); /* a newline ends the line */
}

static void test_comments(void)
{
    expect_none("");
    expect_none("   \t ");
    expect_none("# only a comment");
    expect_none("   # indented comment ; with a semicolon");
    expect_none(";");
    expect_none("\n");
    EXPECT("show m   # layers, shapes", W("show", 0), W("m", 5));
    EXPECT("show m#x", W("show", 0), W("m", 5));
    EXPECT("data d = digits n=20000 seed=1            # built-in generator", W("data", 0), W("d", 5), EQ(7),
           W("digits", 9), W("n", 16), EQ(17), W("20000", 18), W("seed", 24), EQ(28), W("1", 29));
    /* One command per rs_lex_line; trailing separators and comments are fine. */
    EXPECT("eval m on d ;", W("eval", 0), W("m", 5), W("on", 7), W("d", 10));
    EXPECT("eval m\n", W("eval", 0), W("m", 5));
    EXPECT("a ; ; # c ; d", W("a", 0));
    EXPECT("; a", W("a", 2)); /* separators and comments before the one command are fine too */
    EXPECT("# c\n a #d\n;", W("a", 5));
    expect_error("runs ; show m", 5, "only one command");
    expect_error("a # c\nb", 5, "only one command");
    expect_error("a\nb", 1, "a new line");
}

static void test_rest(void)
{
    const char *line = "model c = seq conv(16,3,pad=1) relu maxpool(2) flatten linear(10)   # a CNN";
    rs_tokens t = {0};
    rs_err e = {0};
    RS_CHECK(rs_lex_line(line, &t, NULL, &e) == RS_OK, "%s", e.msg);
    RS_CHECK(t.n == 9 && t.tok[2].kind == RS_TOK_EQUALS, "model line: %d tokens", t.n);
    size_t len;
    const char *rest = rs_lex_rest(&t, 3, &len);
    const char *want = "seq conv(16,3,pad=1) relu maxpool(2) flatten linear(10)";
    RS_CHECK(len == strlen(want) && !memcmp(rest, want, len), "rest: '%.*s'", (int)len, rest);
    RS_CHECK(rest == line + t.tok[3].off, "rest points into the line");
    rest = rs_lex_rest(&t, t.n, &len);
    RS_CHECK(len == 0 && rest == line + t.end, "rest past the last token is empty");
    /* Reusing the tokens for another line. */
    RS_CHECK(rs_lex_line("model m =   ", &t, NULL, &e) == RS_OK && t.n == 3, "second lex: %d", t.n);
    rs_lex_rest(&t, 3, &len);
    RS_CHECK(len == 0, "nothing after '=': %zu", len);
    rs_lex_clear(&t);
    rs_lex_clear(&t); /* a freed (zeroed) rs_tokens is fine */
    rs_lex_clear(NULL);
}

static void expect_split(const char *line, int n, const char *const *want)
{
    rs_span sp[8];
    int got = rs_lex_split_commands(line, sp, 8);
    RS_CHECK(got == n, "split \"%s\": %d commands, want %d", line, got, n);
    for (int i = 0; i < n && i < got; i++)
        RS_CHECK(sp[i].len == strlen(want[i]) && !memcmp(line + sp[i].off, want[i], sp[i].len),
                 "split \"%s\": command %d is '%.*s', want '%s'", line, i, (int)sp[i].len, line + sp[i].off,
                 want[i]);
}

static void test_split(void)
{
    const char *line = "runs ; sql \"select ';' # x\" ; play tutorials/03-ddp.ring # c ; not";
    expect_split(line, 3, (const char *const[]){"runs", "sql \"select ';' # x\"", "play tutorials/03-ddp.ring"});
    expect_split("a;;b;", 2, (const char *const[]){"a", "b"});
    expect_split("a # c ; d\nb", 2, (const char *const[]){"a", "b"});
    expect_split("  x f(\"a;b\") ; y", 2, (const char *const[]){"x f(\"a;b\")", "y"});
    expect_split("say \"esc \\\" ; still\" ; z", 2, (const char *const[]){"say \"esc \\\" ; still\"", "z"});
    expect_split("say \"open ; b", 1, (const char *const[]){"say \"open ; b"});
    expect_split("say \"open\nb", 2, (const char *const[]){"say \"open", "b"});
    expect_split("", 0, NULL);
    expect_split(" ; # nothing ; here", 0, NULL);
    /* Fewer slots than commands: the count says how many there are. */
    rs_span one;
    RS_CHECK(rs_lex_split_commands("a;b;c", &one, 1) == 3 && one.off == 0 && one.len == 1, "cap 1");
    RS_CHECK(rs_lex_split_commands("a;b;c", NULL, 0) == 3, "cap 0");

    /* Each command lexes with offsets into the whole line: the caret lines up with what was typed. */
    const char *two = "runs; show m  # x";
    rs_span sp[2];
    RS_CHECK(rs_lex_split_commands(two, sp, 2) == 2, "two commands");
    rs_tokens t = {0};
    rs_err e = {0};
    RS_CHECK(rs_lex_command(two, sp[1], &t, NULL, &e) == RS_OK && t.n == 2, "lex second: %s", e.msg);
    RS_CHECK(t.n == 2 && t.tok[0].off == 6 && t.tok[1].off == 11 && !strcmp(t.tok[1].text, "m"), "offsets");
    /* An error in the second command points into the line too. */
    const char *bad = "runs ; say \"oops";
    RS_CHECK(rs_lex_split_commands(bad, sp, 2) == 2, "bad: two commands");
    size_t pos = 0;
    RS_CHECK(rs_lex_command(bad, sp[1], &t, &pos, &e) == RS_ERR_ARG && pos == 11, "error at %zu", pos);
    rs_lex_clear(&t);
}

int main(void)
{
    test_kinds();
    test_key_value();
    test_strings();
    test_comments();
    test_rest();
    test_split();
    RS_CHECK(!strcmp(rs_lex_kind_name(RS_TOK_EQUALS), "'='"), "kind name");
    return rs_test_finish("lang-lex");
}
