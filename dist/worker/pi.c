/* The terms of the pi example (see pi.h): pure arithmetic, shared by the ranks and the REPL's serial check. */
#include "pi.h"

#include <string.h>

const char *const rs_pi_method_names[] = {[RS_PI_SERIES] = "series", [RS_PI_MIDPOINT] = "midpoint", NULL};

bool rs_pi_method_parse(const char *s, rs_pi_method *out)
{
    for (int i = 0; rs_pi_method_names[i]; i++)
        if (!strcmp(s, rs_pi_method_names[i])) {
            *out = (rs_pi_method)i;
            return true;
        }
    return false;
}

const char *rs_pi_method_name(rs_pi_method m)
{
    return rs_pi_method_names[m == RS_PI_SERIES ? RS_PI_SERIES : RS_PI_MIDPOINT];
}

double rs_pi_partial(rs_pi_method m, uint64_t n, int rank, int world, uint64_t *terms)
{
    double sum = 0, h = n ? 1.0 / (double)n : 0;
    uint64_t k = 0;
    for (uint64_t i = (uint64_t)rank; i < n; i += (uint64_t)world, k++) {
        if (m == RS_PI_SERIES) sum += (i % 2 ? -1.0 : 1.0) / (double)(2 * i + 1);
        else {
            double x = h * ((double)i + 0.5);
            sum += 4.0 / (1.0 + x * x);
        }
    }
    if (terms) *terms = k;
    return m == RS_PI_SERIES ? 4 * sum : h * sum;
}
