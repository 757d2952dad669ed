/* The built-in text corpus (see story.h): a grammar of tales, drawn from a seeded generator. */
#include "engine/data/gen/story.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const names[] = {"Ada", "Ben", "Cleo", "Dan", "Eva", "Finn", "Gail", "Hugo",
                                    "Iris", "Jack", "Kira", "Leo", "Mia", "Ned", "Olga", "Pip"};
static const char *const animals[] = {"cat", "dog", "fox", "owl", "hen", "goat", "frog", "duck"};
static const char *const things[] = {"lamp", "key", "cup", "book", "hat", "ball", "coat", "bell",
                                     "map", "pen", "box", "ring", "kite", "drum", "apple", "egg"};
static const char *const places[] = {"garden", "kitchen", "barn", "market", "river", "forest",
                                     "attic", "school", "shop", "park", "yard", "mill"};
static const char *const looks[] = {"red", "blue", "green", "small", "big", "old", "new", "round", "odd", "yellow"};
static const char *const moods[] = {"sleepy", "hungry", "happy", "tired", "quiet", "busy", "cross", "glad"};
static const char *const weather[] = {"sunny", "windy", "rainy", "cold", "warm", "grey", "bright"};
static const char *const deeds[] = {"found", "lost", "took", "painted", "washed", "carried",
                                    "opened", "dropped", "hid", "fixed", "sold", "bought"};
static const char *const numbers[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"};
static const char *const times[] = {"In the morning", "At noon", "After lunch", "In the evening", "Later", "Soon"};

/* A growing string; on out of memory ok goes false and writes stop. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool ok;
} sbuf;

static void put(sbuf *b, const char *fmt, ...)
{
    if (!b->ok) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->ok = false;
            return;
        }
        if ((size_t)w < b->cap - b->n) {
            b->n += (size_t)w;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)w;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->ok = false;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* Dialogue starts on a line of its own. */
static void newline(sbuf *b)
{
    if (b->ok && b->n && b->s[b->n - 1] != '\n') put(b, "\n");
}

static const char *pick(rs_rng *r, const char *const *list, size_t n) { return list[rs_rng_below(r, n)]; }
#define PICK(r, list) pick((r), (list), COUNT(list))

static const char *article(const char *word) { return strchr("aeiou", word[0]) ? "an" : "a"; }

/* "box" -> "boxes", "key" -> "keys": what the word lists need. */
static void plural(char *out, size_t n, const char *w)
{
    size_t l = strlen(w);
    bool es = l && (w[l - 1] == 'x' || w[l - 1] == 's');
    snprintf(out, n, "%s%s", w, es ? "es" : "s");
}

/* One tale: two characters, a place and a thing it keeps coming back to. */
static void tale(sbuf *b, rs_rng *r)
{
    const char *a = PICK(r, names), *c = PICK(r, names);
    while (c == a) c = PICK(r, names);
    const char *place = PICK(r, places), *thing = PICK(r, things), *look = PICK(r, looks);
    const char *pet = PICK(r, animals);
    put(b, "It was a %s day. %s and %s went to the %s.", PICK(r, weather), a, c, place);
    int lines = 3 + (int)rs_rng_below(r, 4);
    for (int i = 0; i < lines; i++) {
        const char *who = rs_rng_below(r, 2) ? a : c, *other = who == a ? c : a;
        switch (rs_rng_below(r, 10)) {
        case 0:
            put(b, " %s %s %s %s %s in the %s.", who, PICK(r, deeds), article(look), look, thing, place);
            break;
        case 1:
            put(b, " The %s was %s, so %s gave it %s %s.", pet, PICK(r, moods), who, article(thing), thing);
            break;
        case 2:
            newline(b);
            put(b, "\"Where is my %s?\" asked %s.\n\"Your %s is in the %s,\" said %s.\n", thing, who, thing,
                PICK(r, places), other);
            break;
        case 3: {
            const char *t = PICK(r, things);
            bool yes = rs_rng_below(r, 3) != 0;
            newline(b);
            put(b, "\"Do you like the %s %s?\" asked %s.\n\"%s,\" said %s.\n", look, t, who,
                yes ? "Yes, I like it very much" : "No, I do not", other);
            break;
        }
        case 4: {
            int k = (int)rs_rng_below(r, 9);
            char pl[32];
            plural(pl, sizeof pl, thing);
            put(b, " %s had %s %s. %s gave %s one more, so now %s had %s %s.", who, numbers[k], k == 0 ? thing : pl,
                other, who, who, numbers[k + 1], pl);
            break;
        }
        case 5:
            put(b, " %s, %s and %s sat by the %s.", PICK(r, times), who, other, PICK(r, places));
            break;
        case 6:
            put(b, " The %s saw the %s and ran to the %s.", pet, thing, PICK(r, places));
            break;
        case 7: {
            const char *p2 = PICK(r, places);
            newline(b);
            put(b, "\"Shall we go to the %s?\" asked %s.\n\"Yes, let us go to the %s,\" said %s.\n", p2, who, p2,
                other);
            place = p2;
            break;
        }
        case 8:
            put(b, " %s was %s, but %s was %s.", who, PICK(r, moods), other, PICK(r, moods));
            break;
        default:
            put(b, " %s %s the %s %s and put it in the %s.", who, PICK(r, deeds), look, thing, place);
            break;
        }
    }
    put(b, " Then %s and %s went home.\n\n", a, c);
}

char *rs_data_story(uint64_t seed, size_t min_bytes, size_t *len)
{
    sbuf b = {.cap = min_bytes + 4096, .ok = true};
    b.s = malloc(b.cap); /* returned to the caller */
    if (!b.s) return NULL;
    b.s[0] = '\0';
    rs_rng r;
    rs_rng_seed(&r, seed);
    while (b.ok && b.n < min_bytes) tale(&b, &r);
    if (!b.ok) {
        free(b.s);
        return NULL;
    }
    /* Dialogue that ends a line leaves "\n " before the next sentence: no line starts with a space. */
    size_t w = 0;
    for (size_t i = 0; i < b.n; i++)
        if (!(b.s[i] == ' ' && w > 0 && b.s[w - 1] == '\n')) b.s[w++] = b.s[i];
    b.s[w] = '\0';
    if (len) *len = w;
    return b.s;
}
