/* Contract of a fuzz target: it defines LLVMFuzzerTestOneInput (libFuzzer's entry point) and a seed
 * corpus through rs_fuzz_seeds(). The same source builds two ways: with clang -fsanitize=fuzzer as
 * a coverage-guided fuzzer (tests/fuzz/run-libfuzzer.sh), and with any compiler linked to
 * standalone.c, which replays the seeds and a bounded number of seeded mutations as a unit test. */
#ifndef RS_FUZZ_H
#define RS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct rs_fuzz_seed {
    const uint8_t *data;
    size_t size;
} rs_fuzz_seed;

/* Fills *seeds with an array the target owns (valid until exit); returns the count. */
size_t rs_fuzz_seeds(const rs_fuzz_seed **seeds);

#endif
