/* The lecture's annex program: pi from a sum split over ranks, each rank taking every W-th term
 * (rank r: terms r, r+W, r+2W, ...), the partial sums added by a reduce to rank 0.
 *   series:   pi = 4 arctan(1) = 4 sum_{i<n} (-1)^i / (2i+1)        (the annex; error ~ 1/n)
 *   midpoint: pi = integral_0^1 4/(1+x^2) dx ~ h sum_{i<n} 4/(1+x_i^2), x_i = h(i+1/2), h = 1/n
 *             (MPICH's cpi.c; error ~ 1/(12 n^2)) */
#ifndef RS_PI_H
#define RS_PI_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { RS_PI_SERIES, RS_PI_MIDPOINT } rs_pi_method;

/* The methods' names, indexed by rs_pi_method and NULL-terminated: what the parser below and the
 * prompt's method= take. */
extern const char *const rs_pi_method_names[];
/* "series" / "midpoint" -> *out; false for anything else. */
bool rs_pi_method_parse(const char *s, rs_pi_method *out);
const char *rs_pi_method_name(rs_pi_method m);

/* Rank `rank` of `world`'s share of the n-term sum, already scaled so that the shares add up to pi
 * (4x for the series, h for the midpoint rule). *terms (may be NULL): how many terms it took. */
double rs_pi_partial(rs_pi_method m, uint64_t n, int rank, int world, uint64_t *terms);

#endif
