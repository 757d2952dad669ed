/* Fuzz target for the CSV reader: any text, under one of four option sets picked by the input's
 * length (defaults, label last, forced header with ';', no header with scale), must give a valid data
 * set (finite features, labels in range) or an error naming the file; never a crash or a leak. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/data/data.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const rs_csv_opts opts[4] = {
        {0},
        {.label_col = -1},
        {.label_col = 1, .delimiter = ';', .header = RS_CSV_HEADER_YES},
        {.label_col = -2, .header = RS_CSV_HEADER_NO, .scale = 255},
    };
    rs_dataset *d = (rs_dataset *)&d; /* the reader must reset it on failure */
    rs_err e = {0};
    rs_status s = rs_data_csv_parse((const char *)data, size, "fuzz.csv", &opts[size % 4], &d, &e);
    if (s != RS_OK) {
        if (d || strncmp(e.msg, "fuzz.csv: ", 10)) __builtin_trap();
        return 0;
    }
    if (!d || d->n == 0 || d->c != 1 || d->h != 1 || d->w < 1 || d->n_classes < 1 || d->n_classes > 65536)
        __builtin_trap();
    size_t numel = (size_t)d->n * (size_t)d->w;
    if (numel > size) __builtin_trap(); /* every feature took at least a byte of input */
    for (size_t i = 0; i < numel; i++)
        if (!isfinite(d->x[i])) __builtin_trap();
    for (uint32_t i = 0; i < d->n; i++)
        if (d->y[i] < 0 || d->y[i] >= d->n_classes) __builtin_trap();
    rs_dataset_free(d);
    return 0;
}

#define SEED(s) {(const uint8_t *)(s), sizeof(s) - 1}
static const rs_fuzz_seed seed_list[] = {
    SEED("1,2,3\n4,5.5,-6e-1\n"),
    SEED("label,a,b\r\n1, 0.5 ,2\r\n\r\n0,1,3\r\n\r\n"),
    SEED("\xEF\xBB\xBF\"y\",\"a,b\"\n\"1\", \"2.5\"\n"),
    SEED("x;y;z\n1;2;3\n4;5;6\n"),
    SEED("0.1,25.5,2\n255,0,0\n3.0,1e3,1\n"),
    SEED("1\t2\n0\t4\n"),
    SEED("1,2\n3\n"),
    SEED("1,1e38\n2,3.4e38\n"),
    SEED("2,6e122"), /* libFuzzer found it: finite as a double, infinite as a float */
};

size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds)
{
    *seeds = seed_list;
    return sizeof seed_list / sizeof seed_list[0];
}
