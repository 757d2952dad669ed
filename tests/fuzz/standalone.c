/* Replays a fuzz target without libFuzzer: every seed as given, then N deterministic mutations
 * (bit flips, byte sets, truncations, splices, inserted runs) of random seeds. Any crash, sanitizer
 * report or leak fails the test; files named on the command line are replayed too (reproducers).
 * Usage: fuzz-X [--iterations N] [--seed S] [FILE...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    long iterations = 2000;
    uint64_t rng = 1;
    int files = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rng = strtoull(argv[++i], NULL, 0);
        else {
            if (run_file(argv[i])) return 1;
            files++;
        }
    }
    const rs_fuzz_seed *seeds;
    size_t ns = rs_fuzz_seeds(&seeds);
    for (size_t i = 0; i < ns; i++) LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].size);
    if (ns == 0) {
        fprintf(stderr, "fuzz target has no seeds\n");
        return 1;
    }
    size_t cap = 1 << 16;
    uint8_t *buf = malloc(cap);
    for (long it = 0; it < iterations; it++) {
        const rs_fuzz_seed *s = &seeds[next(&rng) % ns];
        size_t n = s->size < cap ? s->size : cap;
        memcpy(buf, s->data, n);
        int edits = 1 + (int)(next(&rng) % 8);
        for (int e = 0; e < edits; e++) {
            uint64_t r = next(&rng);
            switch (r % 6) {
            case 0: if (n) buf[next(&rng) % n] ^= (uint8_t)(1u << (r >> 8) % 8); break;
            case 1: if (n) buf[next(&rng) % n] = (uint8_t)(r >> 16); break;
            case 2: if (n) n = next(&rng) % n; break; /* truncate */
            case 3: { /* interesting bytes */
                static const uint8_t vals[] = {0, 0xff, 0x7f, 0x80, ',', '\n', '"', '-', '9', '.'};
                if (n) buf[next(&rng) % n] = vals[(r >> 8) % sizeof vals];
                break;
            }
            case 4: { /* insert a run */
                size_t at = n ? next(&rng) % n : 0, len = 1 + next(&rng) % 16;
                if (n + len <= cap) {
                    memmove(buf + at + len, buf + at, n - at);
                    memset(buf + at, (int)(r >> 24), len);
                    n += len;
                }
                break;
            }
            case 5: { /* splice from another seed */
                const rs_fuzz_seed *o = &seeds[next(&rng) % ns];
                if (o->size && n) {
                    size_t at = next(&rng) % n, from = next(&rng) % o->size;
                    size_t len = o->size - from < n - at ? o->size - from : n - at;
                    memcpy(buf + at, o->data + from, len);
                }
                break;
            }
            }
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    free(buf);
    printf("fuzz: %zu seeds, %ld mutations, %d files: no crash\n", ns, iterations, files);
    return 0;
}
