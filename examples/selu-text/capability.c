/* text-tools: a Selu capability in C with two tools, word_count and reverse.
 * The gRPC side is selu_server.c; this file is only the tools.
 * Usage: capability [ADDRESS]   (default 0.0.0.0:50051, Selu's port) */
#include "selu_server.h"

#include <jansson.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The manifest's maxLength for "text", enforced here too: the orchestrator
 * validates against the schema, but a capability should not rely on it. */
#define MAX_TEXT 100000

/* Unicode's White_Space property: a word is a run of anything else. */
static bool is_space(uint32_t cp)
{
  return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

/* The length of the UTF-8 sequence a lead byte starts. jansson has already
 * rejected invalid UTF-8, so the lead byte is all there is to look at. */
static size_t seq_len(unsigned char lead)
{
  return lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
}

static uint32_t decode(const unsigned char *s, size_t n)
{
  static const unsigned char mask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  uint32_t cp = s[0] & mask[n];
  for (size_t i = 1; i < n; i++)
    cp = (cp << 6) | (s[i] & 0x3f);
  return cp;
}

static size_t count_code_points(const char *s, size_t len)
{
  size_t n = 0;
  for (size_t i = 0; i < len; i += seq_len((unsigned char)s[i]))
    n++;
  return n;
}

static const char *kind_name(const json_t *v)
{
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER:
  case JSON_REAL: return "a number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

/* Parse the parameters, which must be exactly {"text": STRING}. On success
 * *root owns the parsed document and *text, *len point into it. */
static bool text_param(const char *tool, const struct selu_call *call, struct selu_reply *reply,
                       json_t **root, const char **text, size_t *len)
{
  json_error_t jerr;
  /* no parameters at all reads as {} so the message below names "text" */
  const char *src = call->parameters[0] ? call->parameters : "{}";
  json_t *doc = json_loads(src, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
  if (!doc) {
    selu_reply_error(reply, "%s: the parameters are not valid JSON (line %d, column %d: %s)", tool,
                     jerr.line, jerr.column, jerr.text);
    return false;
  }
  if (!json_is_object(doc)) {
    selu_reply_error(reply,
                     "%s: the parameters must be a JSON object such as {\"text\": \"...\"}, "
                     "not %s",
                     tool, kind_name(doc));
    goto fail;
  }
  const char *key;
  json_t *v;
  json_object_foreach(doc, key, v)
  {
    if (strcmp(key, "text") != 0) {
      selu_reply_error(reply, "%s: unknown parameter \"%s\"; the only parameter is \"text\"", tool,
                       key);
      goto fail;
    }
  }
  v = json_object_get(doc, "text");
  if (!v) {
    selu_reply_error(reply, "%s: the required parameter \"text\" is missing", tool);
    goto fail;
  }
  if (!json_is_string(v)) {
    selu_reply_error(reply, "%s: \"text\" must be a string, not %s", tool, kind_name(v));
    goto fail;
  }
  *text = json_string_value(v);
  *len = json_string_length(v);
  size_t chars = count_code_points(*text, *len);
  if (chars > MAX_TEXT) {
    selu_reply_error(reply, "%s: \"text\" is %zu characters long; the limit is %d", tool, chars,
                     MAX_TEXT);
    goto fail;
  }
  *root = doc;
  return true;
fail:
  json_decref(doc);
  return false;
}

/* Reply with obj (consumed) as compact JSON. */
static void reply_json(struct selu_reply *reply, json_t *obj)
{
  char *out = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
  json_decref(obj);
  if (!out) {
    selu_reply_error(reply, "the capability ran out of memory building its result");
    return;
  }
  selu_reply_ok_owned(reply, out);
}

static void word_count(const struct selu_call *call, struct selu_reply *reply)
{
  json_t *root;
  const char *text;
  size_t len;
  if (!text_param("word_count", call, reply, &root, &text, &len))
    return;
  size_t words = 0, lines = 0, chars = 0;
  bool in_word = false;
  for (size_t i = 0; i < len;) {
    size_t n = seq_len((unsigned char)text[i]);
    uint32_t cp = decode((const unsigned char *)text + i, n);
    chars++;
    if (cp == '\n')
      lines++;
    if (is_space(cp))
      in_word = false;
    else if (!in_word) {
      in_word = true;
      words++;
    }
    i += n;
  }
  /* a last line without its newline still counts: "a\nb" is two lines */
  if (len > 0 && text[len - 1] != '\n')
    lines++;
  json_decref(root);
  reply_json(reply, json_pack("{s:I,s:I,s:I}", "words", (json_int_t)words, "lines",
                              (json_int_t)lines, "chars", (json_int_t)chars));
}

static void reverse(const struct selu_call *call, struct selu_reply *reply)
{
  json_t *root;
  const char *text;
  size_t len;
  if (!text_param("reverse", call, reply, &root, &text, &len))
    return;
  char *out = malloc(len ? len : 1);
  if (!out) {
    json_decref(root);
    selu_reply_error(reply, "reverse: out of memory");
    return;
  }
  /* each code point's bytes keep their order; the code points swap ends */
  for (size_t i = 0; i < len;) {
    size_t n = seq_len((unsigned char)text[i]);
    memcpy(out + len - i - n, text + i, n);
    i += n;
  }
  json_decref(root);
  json_t *str = json_stringn_nocheck(out, len);
  free(out);
  reply_json(reply, str ? json_pack("{s:o}", "text", str) : NULL);
}

static void handle(void *ctx, const struct selu_call *call, struct selu_reply *reply)
{
  (void)ctx;
  if (strcmp(call->tool_name, "word_count") == 0)
    word_count(call, reply);
  else if (strcmp(call->tool_name, "reverse") == 0)
    reverse(call, reply);
  else
    selu_reply_error(reply, "unknown tool \"%s\"; text-tools has word_count and reverse",
                     call->tool_name);
}

int main(int argc, char **argv)
{
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
    fprintf(stderr, "usage: %s [ADDRESS]   (default %s)\n", argv[0], SELU_DEFAULT_ADDR);
    return 2;
  }
  const char *addr = argc == 2 ? argv[1] : SELU_DEFAULT_ADDR;
  fprintf(stderr, "text-tools: serving selu.capability.v1.CapabilityService on %s\n", addr);
  return selu_serve(addr, handle, NULL) == 0 ? 0 : 1;
}
