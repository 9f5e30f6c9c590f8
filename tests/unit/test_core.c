/* Unit tests for src/core: the JSON parser's positions and errors, the
 * writer, UTF-8 and position helpers, diagnostics, mkdir -p. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/diag.h"
#include "core/filememo.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/node.h"
#include "core/sha256.h"
#include "core/text.h"
#include "unit.h"

/* Parses text; returns the first diagnostic formatted, or NULL when valid. */
static char *json_first_error(const char *text, size_t len, unsigned depth)
{
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  int r = cap_json_parse(doc, text, len, "t.json", depth, &d);
  char *out = NULL;
  if (r < 0 && d.len) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cap_diag_format(&d.items[0], f);
    fclose(f);
    out = buf;
    out[strcspn(out, "\n")] = '\0';
  }
  cap_diags_free(&d);
  cap_doc_free(doc);
  return out;
}

static void check_json_error(const char *text, const char *want)
{
  char *got = json_first_error(text, strlen(text), 0);
  CHECK_STR(got, want);
  free(got);
}

static void test_json_positions(void)
{
  const char *text = "{\n  \"a\": [1, 2.5, \"x\"],\n  \"b\": {\"c\": null}\n}";
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  CHECK(cap_json_parse(doc, text, strlen(text), "t.json", 0, &d) == 0);
  CHECK(d.len == 0);
  struct cap_node *a = cap_node_get(doc->root, "a");
  CHECK(a && a->kind == CAP_NODE_ARRAY && a->u.arr.len == 3);
  CHECK(a && a->line == 2 && a->col == 8);
  CHECK(a && a->u.arr.items[1]->kind == CAP_NODE_FLOAT && a->u.arr.items[1]->u.num.f == 2.5);
  CHECK(a && a->u.arr.items[0]->kind == CAP_NODE_INT && a->u.arr.items[0]->u.num.i == 1);
  struct cap_member *m = cap_node_get_member(doc->root, "b", 1);
  CHECK(m && m->line == 3 && m->col == 3);
  CHECK(m && m->value->line == 3 && m->value->col == 8);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

/* nono profiles' JSONC: comments and trailing commas blanked, strings
 * (even holding // or a comma before a brace) kept, positions unchanged */
static void test_jsonc_blank(void)
{
  char text[] = "{\n  // a comment\n  \"a\": \"x // y, }\", /* b */ \"b\": [1, 2,],\n}\n";
  size_t len = strlen(text);
  size_t first = cap_jsonc_blank(text, len);
  CHECK(first == 4);
  CHECK(strlen(text) == len);
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  CHECK(cap_json_parse(doc, text, len, "t.jsonc", 0, &d) == 0);
  const struct cap_node *a = doc->root ? cap_node_get(doc->root, "a") : NULL;
  CHECK(a && a->kind == CAP_NODE_STRING && strcmp(a->u.str.ptr, "x // y, }") == 0);
  CHECK(a && a->line == 3 && a->col == 8);
  const struct cap_node *b = doc->root ? cap_node_get(doc->root, "b") : NULL;
  CHECK(b && b->kind == CAP_NODE_ARRAY && b->u.arr.len == 2);
  cap_doc_free(doc);
  cap_diags_free(&d);
  char plain[] = "{\"a\": 1}";
  CHECK(cap_jsonc_blank(plain, strlen(plain)) == strlen(plain));
  char open_comment[] = "{\"a\": 1} /* never closed";
  CHECK(cap_jsonc_blank(open_comment, strlen(open_comment)) == strlen(open_comment));
}

static void test_json_columns_count_characters(void)
{
  /* "é" is two bytes but one column */
  check_json_error("{\"é\": x}", "t.json:1:7: error: expected a JSON value, found 'x'");
}

static void test_json_errors(void)
{
  check_json_error("", "t.json:1:1: error: the file is empty; a JSON document was expected");
  check_json_error("{\"a\": 1, \"a\": 2}",
                   "t.json:1:10: error: duplicate key \"a\"; each key may appear once");
  check_json_error("[1, 2,]", "t.json:1:7: error: trailing comma before ']'; remove it");
  check_json_error("{\"a\" 1}", "t.json:1:6: error: expected ':' after the member name, found '1'");
  check_json_error("[01]",
                   "t.json:1:2: error: invalid number: leading zeros are not allowed in JSON");
  check_json_error(
      "\"\\ud800\"",
      "t.json:1:2: error: lone UTF-16 surrogate \\uD800; pair it with a low surrogate");
  check_json_error(
      "\"a\nb\"",
      "t.json:1:3: error: control character 0x0a in a string; escape it (\\n, \\t, \\u00XX)");
  check_json_error("{} x", "t.json:1:4: error: unexpected data after the JSON document; remove it");
  check_json_error("\"abc", "t.json:1:1: error: unterminated string; add the closing '\"'");
  check_json_error("[\"\xff\"]",
                   "t.json:1:3: error: invalid UTF-8 (byte 0xff); save the file as UTF-8");
  check_json_error("tru", "t.json:1:1: error: expected a JSON value, found 't'");
}

static void test_json_depth_limit(void)
{
  size_t n = 10000;
  char *deep = malloc(2 * n + 1);
  memset(deep, '[', n);
  memset(deep + n, ']', n);
  deep[2 * n] = '\0';
  char *got = json_first_error(deep, 2 * n, 0);
  CHECK_STR(got, "t.json:1:257: error: nesting deeper than 256 levels; flatten the document");
  free(got);
  got = json_first_error(deep + n - 100, 200, 0);
  CHECK(got == NULL);
  free(got);
  free(deep);
}

static void test_json_nul_and_escapes(void)
{
  const char *text = "[\"a\\u0000b\", \"\\ud83d\\ude00\", \"\\/\\t\"]";
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  CHECK(cap_json_parse(doc, text, strlen(text), "t.json", 0, &d) == 0);
  struct cap_node *s0 = doc->root->u.arr.items[0];
  CHECK(s0->u.str.len == 3 && memcmp(s0->u.str.ptr, "a\0b", 3) == 0);
  CHECK_STR(doc->root->u.arr.items[1]->u.str.ptr, "\xF0\x9F\x98\x80");
  /* round trip through the writer */
  struct cap_buf out = {0};
  struct cap_jw w;
  cap_jw_init(&w, &out, false);
  cap_jw_node(&w, doc->root);
  CHECK_STR(out.data, "[\"a\\u0000b\",\"\xF0\x9F\x98\x80\",\"/\\t\"]");
  cap_buf_free(&out);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

/* enum/const equality is exact across integer and float spellings */
static void test_node_equal_numbers(void)
{
  const char *text = "[9007199254740993, 9007199254740992.0, 1, 1.0, 1.5, 9223372036854775807, "
                     "9223372036854775808.0, -0.0, 0]";
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  CHECK(cap_json_parse(doc, text, strlen(text), "t.json", 0, &d) == 0);
  struct cap_node **n = doc->root->u.arr.items;
  CHECK(!cap_node_equal(n[0], n[1])); /* 2^53 + 1 is not 2^53 */
  CHECK(cap_node_equal(n[2], n[3]));
  CHECK(!cap_node_equal(n[2], n[4]));
  CHECK(!cap_node_equal(n[5], n[6])); /* INT64_MAX is not 2^63 */
  CHECK(cap_node_equal(n[7], n[8]));
  cap_diags_free(&d);
  cap_doc_free(doc);
}

static void test_json_big_numbers_keep_text(void)
{
  const char *text = "[12345678901234567890123, -0, 1e400, 9223372036854775807]";
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  CHECK(cap_json_parse(doc, text, strlen(text), "t.json", 0, &d) == 0);
  struct cap_node **it = doc->root->u.arr.items;
  CHECK(it[0]->kind == CAP_NODE_FLOAT);
  CHECK_STR(it[0]->u.num.raw, "12345678901234567890123");
  CHECK(it[1]->kind == CAP_NODE_INT && it[1]->u.num.i == 0);
  CHECK(it[3]->kind == CAP_NODE_INT && it[3]->u.num.i == INT64_MAX);
  struct cap_buf out = {0};
  struct cap_jw w;
  cap_jw_init(&w, &out, false);
  cap_jw_node(&w, doc->root);
  CHECK_STR(out.data, "[12345678901234567890123,0,1e400,9223372036854775807]");
  cap_buf_free(&out);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

static void test_pretty_writer(void)
{
  struct cap_buf out = {0};
  struct cap_jw w;
  cap_jw_init(&w, &out, true);
  cap_jw_begin_object(&w);
  cap_jw_key(&w, "a");
  cap_jw_begin_array(&w);
  cap_jw_end_array(&w);
  cap_jw_key(&w, "b");
  cap_jw_begin_array(&w);
  cap_jw_int(&w, 1);
  cap_jw_string(&w, "x\"y");
  cap_jw_end_array(&w);
  cap_jw_key(&w, "c");
  cap_jw_double(&w, 0.5);
  cap_jw_end_object(&w);
  CHECK_STR(out.data, "{\n  \"a\": [],\n  \"b\": [\n    1,\n    \"x\\\"y\"\n  ],\n  \"c\": 0.5\n}");
  cap_buf_free(&out);
}

static void test_utf8(void)
{
  size_t bad = 0;
  CHECK(cap_utf8_valid("h\xC3\xA9llo", 6, &bad));
  CHECK(!cap_utf8_valid("\xC0\x80", 2, &bad) && bad == 0);       /* overlong */
  CHECK(!cap_utf8_valid("ab\xED\xA0\x80", 5, &bad) && bad == 2); /* surrogate */
  CHECK(!cap_utf8_valid("\xF4\x90\x80\x80", 4, &bad));           /* > U+10FFFF */
  CHECK(!cap_utf8_valid("\xE2\x82", 2, &bad) && bad == 0);       /* truncated */
  CHECK(cap_utf8_length("h\xC3\xA9\xF0\x9F\x98\x80", 7) == 3);
  char enc[4];
  CHECK(cap_utf8_encode(0x1F600, enc) == 4 && memcmp(enc, "\xF0\x9F\x98\x80", 4) == 0);
}

static void test_textpos(void)
{
  const char *t = "ab\ncd\xC3\xA9x\n";
  struct cap_textpos tp;
  cap_textpos_init(&tp, t, strlen(t));
  uint32_t line, col;
  cap_textpos_at(&tp, 1, &line, &col);
  CHECK(line == 1 && col == 2);
  cap_textpos_at(&tp, 7, &line, &col); /* the x after é */
  CHECK(line == 2 && col == 4);
  cap_textpos_at(&tp, 0, &line, &col); /* going back rescans */
  CHECK(line == 1 && col == 1);
}

static void test_diags_sorted_and_capped(void)
{
  struct cap_diags d = {.limit = 2};
  cap_diags_add(&d, CAP_SEV_ERROR, "f", 3, 1, "b", "second");
  cap_diags_add(&d, CAP_SEV_WARNING, "f", 1, 5, "", "first");
  cap_diags_add(&d, CAP_SEV_ERROR, "f", 9, 9, "c", "dropped");
  cap_diags_sort(&d);
  CHECK(d.len == 2 && d.errors == 2 && d.warnings == 1);
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  cap_diags_print(&d, f);
  fclose(f);
  CHECK_STR(buf,
            "f:1:5: warning: first\nf:3:1: error: b: second\ncapsule: 1 more problems not shown\n");
  free(buf);
  cap_diags_free(&d);
}

static bool is_dir(const char *path, mode_t mode)
{
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && (sb.st_mode & 07777) == mode;
}

static void test_mkdir_p(void)
{
  char base[] = "/tmp/capsule-unit-fs.XXXXXX";
  CHECK(mkdtemp(base) != NULL);
  char path[256], file[256];
  umask(0);
  snprintf(path, sizeof path, "%s/a//b/c/", base); /* doubled and trailing slashes */
  CHECK(cap_mkdir_p(path, 0750) == 0);
  snprintf(path, sizeof path, "%s/a/b/c", base);
  CHECK(is_dir(path, 0750));
  snprintf(path, sizeof path, "%s/a", base);
  CHECK(is_dir(path, 0750));
  CHECK(cap_mkdir_p(path, 0700) == 0); /* there already: fine, left as it is */
  CHECK(is_dir(path, 0750));
  snprintf(file, sizeof file, "%s/f", base);
  FILE *f = fopen(file, "w");
  CHECK(f != NULL);
  if (f)
    fclose(f);
  snprintf(path, sizeof path, "%s/f/x/y", base); /* a file in the way */
  CHECK(cap_mkdir_p(path, 0700) == -ENOTDIR);
  CHECK(cap_mkdir_p("", 0700) == -ENAMETOOLONG);
  CHECK(cap_mkdir_p("/", 0700) == 0);
  snprintf(path, sizeof path, "rm -rf '%s'", base);
  CHECK(system(path) == 0);
  umask(022);
}

/* cap_fd_nlink: an open file's link count, 0 once it is removed, an
 * error for a descriptor that is not open */
/* A member at a path replaced, the rest as it was; no path, or NULL */
static void test_json_rewritten(void)
{
  const char *text = "{\"id\":1,\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"a__b\"},"
                     "\"x\":[1]}}";
  struct cap_doc *doc = cap_doc_new();
  struct cap_diags d = {0};
  CHECK(cap_json_parse(doc, text, strlen(text), "t", 0, &d) == 0);
  static const char *const path[] = {"params", "ref", "name"};
  char *out = cap_json_rewritten(doc->root, path, 3, "\"b\"");
  CHECK_STR(out,
            "{\"id\":1,\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"b\"},\"x\":[1]}}");
  free(out);
  static const char *const none[] = {"params", "nowhere", "name"};
  out = cap_json_rewritten(doc->root, none, 3, "\"b\"");
  CHECK_STR(
      out, "{\"id\":1,\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"a__b\"},\"x\":[1]}}");
  free(out);
  static const char *const id[] = {"id"};
  out = cap_json_rewritten(doc->root, id, 1, "not json");
  CHECK(out && strncmp(out, "{\"id\":null,", 11) == 0);
  free(out);
  out = cap_json_text(NULL);
  CHECK_STR(out, "null");
  free(out);
  cap_diags_free(&d);
  cap_doc_free(doc);
}

static void test_fd_nlink(void)
{
  char path[] = "/tmp/capsule-unit-nlink.XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  nlink_t n = 99;
  CHECK(cap_fd_nlink(fd, &n) == 0 && n == 1);
  char two[64];
  snprintf(two, sizeof two, "%s.2", path);
  CHECK(link(path, two) == 0);
  CHECK(cap_fd_nlink(fd, &n) == 0 && n == 2);
  CHECK(unlink(two) == 0 && unlink(path) == 0);
  CHECK(cap_fd_nlink(fd, &n) == 0 && n == 0);
  close(fd);
  CHECK(cap_fd_nlink(fd, &n) == -EBADF);
}

/* cap_realpath_cached gives what realpath gives (the path, or the same
 * errno) for plain paths, links on the way or at the end, dangling and
 * looping links, a file in the way, ".", ".." and doubled slashes, with
 * one cache shared by all of them; and a fresh cache sees a directory
 * that became a link. */
static void test_realpath_cached(void)
{
  char base[] = "/tmp/capsule-unit-rp.XXXXXX";
  CHECK(mkdtemp(base) != NULL);
  char p[512];
  char cmd[1200];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && mkdir -p d/e/f x && ln -s d l && ln -s e d/le && ln -s missing dangle && "
           "ln -s loop loop && touch d/file",
           base);
  CHECK(system(cmd) == 0);
  const char *rel[] = {"",          "/d",           "/d/e/f",  "/l/e/f",  "/d/le/f",  "/l",
                       "/dangle",   "/dangle/x",    "/loop",   "/loop/x", "/missing", "/d/file",
                       "/d/file/x", "/d/./e",       "/d/../x", "//d//e",  "/d/e/",    "/d/e/f/.",
                       "/d/e/f/..", "/x/../d/le/f", "/d/.e",   "/d/..e"};
  struct cap_path_cache cache = {0};
  for (int round = 0; round < 2; round++) /* the second with everything cached */
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
      snprintf(p, sizeof p, "%s%s", base, rel[i]);
      char want[PATH_MAX], got[PATH_MAX];
      errno = 0;
      int want_r = realpath(p, want) ? 0 : -errno;
      int got_r = cap_realpath_cached(&cache, p, got);
      if (got_r != want_r || (got_r == 0 && strcmp(want, got) != 0))
        fprintf(stderr, "realpath_cached(%s): %d %s, realpath: %d %s\n", p, got_r, got_r ? "" : got,
                want_r, want_r ? "" : want);
      CHECK(got_r == want_r && (got_r != 0 || strcmp(want, got) == 0));
    }
  /* d/e replaced by a link to x: a new batch resolves it again */
  snprintf(cmd, sizeof cmd, "cd '%s' && mv d/e e2 && ln -s ../x d/e", base);
  CHECK(system(cmd) == 0);
  struct cap_path_cache fresh = {0};
  char got[PATH_MAX], want[PATH_MAX];
  snprintf(p, sizeof p, "%s/d/e", base);
  CHECK(cap_realpath_cached(&fresh, p, got) == 0);
  snprintf(want, sizeof want, "%s/x", base);
  CHECK(strcmp(got, want) == 0);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  CHECK(system(cmd) == 0);
}

static void write_text(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* Reads a file memo'd by cap_filememo_read, expecting text. */
static void memo_expect(const char *path, bool nofollow, const char *want, int want_r)
{
  char *data = NULL;
  size_t len = 0;
  int r = cap_filememo_read(path, nofollow, 1 << 20, &data, &len);
  if (r != want_r || (r == 0 && (len != strlen(want) || strcmp(data, want) != 0)))
    fprintf(stderr, "filememo(%s): %d \"%s\", want %d \"%s\"\n", path, r, r ? "" : data, want_r,
            want);
  CHECK(r == want_r && (r != 0 || (len == strlen(want) && strcmp(data, want) == 0)));
  free(data);
}

/* cap_filememo_read never serves a changed file: rewritten in place with
 * the same size (the times moved by hand too, as a quick second write
 * within one tick would leave them), replaced by a rename, removed, a
 * link refused without following; a file past the memo's size read
 * every time. */
static void test_filememo(void)
{
  char base[] = "/tmp/capsule-unit-memo.XXXXXX";
  CHECK(mkdtemp(base) != NULL);
  char f[600], g[600], l[600], big[600];
  snprintf(f, sizeof f, "%s/f", base);
  snprintf(g, sizeof g, "%s/g", base);
  snprintf(l, sizeof l, "%s/l", base);
  snprintf(big, sizeof big, "%s/big", base);
  write_text(f, "one");
  memo_expect(f, true, "one", 0);
  memo_expect(f, true, "one", 0); /* from the memo */
  write_text(f, "two");           /* same size, same inode */
  struct timespec old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
  CHECK(utimensat(AT_FDCWD, f, old, 0) == 0); /* mtime moved, ctime moves with it */
  memo_expect(f, true, "two", 0);
  write_text(g, "new");
  CHECK(rename(g, f) == 0);
  memo_expect(f, true, "new", 0);
  memo_expect(f, false, "new", 0);
  CHECK(symlink(f, l) == 0);
  memo_expect(l, true, "", -ELOOP);
  memo_expect(l, false, "new", 0);
  CHECK(unlink(f) == 0);
  memo_expect(f, true, "", -ENOENT);
  memo_expect(l, false, "", -ENOENT);
  char *text = malloc(CAP_FILEMEMO_MAX + 2);
  memset(text, 'a', CAP_FILEMEMO_MAX + 1);
  text[CAP_FILEMEMO_MAX + 1] = '\0';
  write_text(big, text);
  memo_expect(big, true, text, 0);
  free(text);
  cap_filememo_clear();
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  CHECK(system(cmd) == 0);
}

static void hex32(const unsigned char d[32], char out[65])
{
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* cap_sha256 (SHA-NI where the CPU has it) against FIPS 180-4's examples
 * and libsodium's digest, over every length to 1 KiB and pieces split at
 * every offset (the block buffer's edges). */
static void test_sha256(void)
{
  CHECK(sodium_init() >= 0);
  printf("sha256: %s\n", cap_sha256_accelerated() ? "SHA extensions" : "libsodium");
  static const struct {
    const char *in, *want;
  } known[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
  };
  unsigned char d[32], want[32];
  char hex[65];
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    struct cap_sha256 s;
    cap_sha256_init(&s);
    cap_sha256_update(&s, known[i].in, strlen(known[i].in));
    cap_sha256_final(&s, d);
    hex32(d, hex);
    CHECK_STR(hex, known[i].want);
  }
  static unsigned char data[1024 + 64];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (unsigned char)(i * 131 + (i >> 3));
  int bad = 0;
  for (size_t len = 0; len <= 1024; len++) {
    crypto_hash_sha256(want, data, len);
    for (size_t cut = 0; cut <= len; cut += len < 200 ? 1 : 61) {
      struct cap_sha256 s;
      cap_sha256_init(&s);
      cap_sha256_update(&s, data, cut);
      cap_sha256_update(&s, data + cut, len - cut);
      cap_sha256_final(&s, d);
      bad += memcmp(d, want, 32) != 0;
    }
  }
  CHECK(bad == 0);
}

/* HMAC-SHA-256 on capsule's SHA-256 is libsodium's, for keys of every
 * length class and messages across block boundaries. */
static void test_hmac_sha256(void)
{
  static unsigned char key[100], msg[300];
  for (size_t i = 0; i < sizeof key; i++)
    key[i] = (unsigned char)(i * 7 + 1);
  for (size_t i = 0; i < sizeof msg; i++)
    msg[i] = (unsigned char)(i * 13 + 5);
  static const size_t klens[] = {0, 1, 32, 64, 65, 100};
  int bad = 0;
  for (size_t k = 0; k < sizeof klens / sizeof klens[0]; k++) {
    struct cap_hmac_sha256 h;
    cap_hmac_sha256_init(&h, key, klens[k]);
    for (size_t len = 0; len <= sizeof msg; len += len < 130 ? 1 : 17) {
      unsigned char want[32], got[32];
      crypto_auth_hmacsha256_state s;
      crypto_auth_hmacsha256_init(&s, key, klens[k]);
      crypto_auth_hmacsha256_update(&s, msg, len);
      crypto_auth_hmacsha256_final(&s, want);
      cap_hmac_sha256(&h, msg, len, got);
      bad += memcmp(want, got, 32) != 0;
    }
  }
  CHECK(bad == 0);
}

static void test_buf_text(void)
{
  struct cap_buf b = {0};
  cap_buf_put_text(&b, "one");
  cap_buf_put_text(&b, NULL);
  cap_buf_put_text(&b, "");
  const char *p = b.data, *end = b.data + b.len;
  char *a = NULL, *n = (char *)"x", *e = NULL;
  CHECK(cap_buf_get_text(&p, end, &a) && cap_buf_get_text(&p, end, &n) &&
        cap_buf_get_text(&p, end, &e));
  CHECK_STR(a, "one");
  CHECK(n == NULL);
  CHECK_STR(e, "");
  CHECK(p == end);
  char *cut = (char *)"x";
  CHECK(!cap_buf_get_text(&p, end, &cut) && cut == NULL); /* nothing left */
  free(a);
  free(e);
  /* a length past the end, and a text holding a NUL, are refused */
  p = b.data;
  CHECK(!cap_buf_get_text(&p, b.data + 5, &a) && a == NULL);
  cap_buf_free(&b);
  uint32_t len = 3;
  cap_buf_append(&b, (const char *)&len, sizeof len);
  cap_buf_append(&b, "a\0b", 3);
  p = b.data;
  CHECK(!cap_buf_get_text(&p, b.data + b.len, &a) && a == NULL);
  cap_buf_free(&b);
}

UNIT_MAIN(test_sha256, test_buf_text, test_hmac_sha256, test_json_positions, test_jsonc_blank,
          test_json_columns_count_characters, test_json_errors, test_json_depth_limit,
          test_json_nul_and_escapes, test_node_equal_numbers, test_json_big_numbers_keep_text,
          test_pretty_writer, test_utf8, test_textpos, test_diags_sorted_and_capped, test_mkdir_p,
          test_realpath_cached, test_fd_nlink, test_filememo, test_json_rewritten)
