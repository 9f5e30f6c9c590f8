/* What a listing verb prints (list, policy list, cred list, approvals,
 * audit): the text form, one line a row with each column escaped through
 * the one terminal escaper (core/escape.h) and padded, or with --json one
 * array of objects whose keys are the columns' snake_case names. */
#ifndef CAPSULE_CLI_LISTING_H
#define CAPSULE_CLI_LISTING_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/json.h"

struct cli_column {
  const char *key;    /* the JSON key, snake_case */
  int width;          /* text: padded to this many bytes (0: the last column) */
  const char *absent; /* text for a NULL value (JSON: null) */
};

struct cli_listing {
  bool json;
  struct cap_buf out; /* the JSON array until cli_listing_end */
  struct cap_jw w;    /* writes into out; a verb may add its own objects */
  size_t n;           /* rows so far */
};

void cli_listing_begin(struct cli_listing *l, bool json);
/* One row: values[i] for cols[i] (NULL: absent). Text rows are printed
 * on stdout at once; JSON rows wait for cli_listing_end. */
void cli_listing_row(struct cli_listing *l, const struct cli_column *cols,
                     const char *const *values, size_t n);
/* Prints the JSON array when ok (text was printed already) and frees. */
void cli_listing_end(struct cli_listing *l, bool ok);

#endif
