/* An inference request's JSON read without a jansson node per number. A request of millions of
 * numbers would cost jansson ~40 bytes each (a 63 MiB body of 33M numbers took +1.26 GB), so before
 * anything is parsed a scan finds the "data" arrays that hold only literals (numbers, true, false,
 * NaN, Infinity: no strings, objects or colons inside) and counts every value; the caller refuses a
 * request holding more values than the model's inputs can take, then jansson parses the rest with each
 * such array replaced by a short placeholder string (json_load_callback feeds it the text around
 * them, nothing is copied), and each array's values are converted straight into the tensor. What is
 * not such an array (BYTES strings, a malformed array) is left to jansson and counted as its values. */
#ifndef RS_SERVE_HTTP_DATA_H
#define RS_SERVE_HTTP_DATA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "dtype.h"

#define RS_SERVE_JSCAN_REGIONS 64

typedef struct rs_serve_jscan {
    const char *text;          /* borrowed: the JSON */
    size_t n;
    int nregions;
    struct {
        size_t start, end;     /* text[start] is '[', text[end] its ']' */
        size_t values;         /* literals inside */
    } region[RS_SERVE_JSCAN_REGIONS];
    size_t region_values;      /* all regions' literals */
    size_t other_values;       /* about how many values jansson will hold: strings, commas, brackets */
    size_t pos;                /* the callback's place */
    int next;
} rs_serve_jscan;

/* Scans text (n bytes). False, with msg, when it has more literal "data" arrays than the scanner keeps. */
bool rs_serve_jscan_run(rs_serve_jscan *s, const char *text, size_t n, char *msg, size_t cap);
/* Parses the scanned text with the regions as placeholders (flags: json_load_callback's). */
json_t *rs_serve_jscan_load(rs_serve_jscan *s, size_t flags, json_error_t *je);
/* The region a parsed "data" value stands for, or -1 when it is no placeholder. */
int rs_serve_jscan_region(const rs_serve_jscan *s, const json_t *v);
/* Region k's literals as count elements of type t into out (count * size bytes). False with msg
 * (naming input name) when one is not a t or the count differs (checked first: out may be NULL then). */
bool rs_serve_jscan_decode(const rs_serve_jscan *s, int k, rs_serve_dtype t, void *out, size_t count, const char *name,
                           char *msg, size_t cap);

#endif
