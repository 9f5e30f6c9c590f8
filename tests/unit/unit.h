/* A minimal unit-test harness: CHECK records a failure and goes on, so one
 * run shows every broken assertion. */
#ifndef CAPSULE_TESTS_UNIT_H
#define CAPSULE_TESTS_UNIT_H

#include <stdio.h>
#include <string.h>

extern int unit_failures;
extern int unit_checks;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    unit_checks++;                                                                                 \
    if (!(cond)) {                                                                                 \
      unit_failures++;                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                     \
    }                                                                                              \
  } while (0)

/* CHECK saying why (printf's format and arguments) when it fails */
#define CHECKF(cond, ...)                                                                          \
  do {                                                                                             \
    unit_checks++;                                                                                 \
    if (!(cond)) {                                                                                 \
      unit_failures++;                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: ", __FILE__, __LINE__);                                \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

#define CHECK_STR(a, b)                                                                            \
  do {                                                                                             \
    const char *_a = (a), *_b = (b);                                                               \
    unit_checks++;                                                                                 \
    if (!_a || !_b || strcmp(_a, _b) != 0) {                                                       \
      unit_failures++;                                                                             \
      fprintf(stderr, "%s:%d: CHECK_STR failed:\n  got:  %s\n  want: %s\n", __FILE__, __LINE__,    \
              _a ? _a : "(null)", _b ? _b : "(null)");                                             \
    }                                                                                              \
  } while (0)

#define UNIT_MAIN(...)                                                                             \
  int unit_failures, unit_checks;                                                                  \
  int main(void)                                                                                   \
  {                                                                                                \
    void (*tests[])(void) = {__VA_ARGS__};                                                         \
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)                                  \
      tests[i]();                                                                                  \
    printf("%d checks, %d failed\n", unit_checks, unit_failures);                                  \
    return unit_failures ? 1 : 0;                                                                  \
  }

#endif
