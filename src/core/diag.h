/* Diagnostics: the list of problems found in one input, each at
 * file:line:col with the field path it concerns. Parsers and validators add
 * to a list instead of stopping at the first problem, so `capsule check`
 * reports every problem at once. The list owns its strings. */
#ifndef CAPSULE_CORE_DIAG_H
#define CAPSULE_CORE_DIAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cap_severity { CAP_SEV_ERROR, CAP_SEV_WARNING };

struct cap_diag {
  enum cap_severity severity;
  char *file;    /* as the user named it */
  uint32_t line; /* 1-based; 0 when the problem has no position */
  uint32_t col;  /* 1-based, in characters */
  char *path;    /* field path such as "tools[2].input_schema", or "" */
  char *message; /* what is wrong and how to fix it */
};

struct cap_diags {
  struct cap_diag *items;
  size_t len, cap;
  size_t errors, warnings;
  size_t limit; /* stop recording after this many (0: default 200) */
};

void cap_diags_add(struct cap_diags *d, enum cap_severity sev, const char *file, uint32_t line,
                   uint32_t col, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
void cap_diags_vadd(struct cap_diags *d, enum cap_severity sev, const char *file, uint32_t line,
                    uint32_t col, const char *path, const char *fmt, va_list ap)
    __attribute__((format(printf, 7, 0)));
/* Orders by file, line, column (stable), so output follows the input. */
void cap_diags_sort(struct cap_diags *d);
/* One line per diagnostic: FILE:LINE:COL: error: PATH: MESSAGE */
void cap_diags_print(const struct cap_diags *d, FILE *out);
void cap_diag_format(const struct cap_diag *diag, FILE *out);
void cap_diags_free(struct cap_diags *d);

#endif
