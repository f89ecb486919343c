/* stress.h - tiny check macro for the plain (non-Criterion) stress programs.
 * They exist because Criterion cannot start under ThreadSanitizer
 * (Snaipe/Criterion#274), so the TSan build runs these instead. */
#ifndef TESTS_STRESS_H
#define TESTS_STRESS_H

#include <stdio.h>

extern int stress_failures;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            stress_failures++;                                                  \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

#endif /* TESTS_STRESS_H */
