/* fuzz.h - what the harnesses share. Each harness defines
 * LLVMFuzzerTestOneInput: under clang -fsanitize=fuzzer (scripts/fuzz)
 * libFuzzer drives it; in the ordinary build replay_main.c feeds it every
 * file of its seed corpus and its regression inputs (ctest fuzz_replay_*),
 * so a crash once found stays fixed in every CI run, ASan build included. */
#ifndef TESTS_FUZZ_H
#define TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant the code under test promised and broke: abort, so libFuzzer
 * saves the input and the replay test fails. */
#define FUZZ_CHECK(cond)                                                               \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                   \
        }                                                                              \
    } while (0)

#endif /* TESTS_FUZZ_H */
