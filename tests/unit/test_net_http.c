/* Unit tests for the proxy's request parsing (src/net/http.c). */
#include <string.h>

#include "net/http.h"
#include "unit.h"

static struct http_request req; /* 16 KiB: not on the stack */

static long parse(const char *text, const char **why)
{
  *why = NULL;
  return http_request_parse(&req, text, strlen(text), why);
}

static void test_heads(void)
{
  const char *why;
  const char *get =
      "GET http://example.com/a?b=1 HTTP/1.1\r\nHost: example.com\r\nX-A: one\r\n\r\nrest";
  CHECK(parse(get, &why) == (long)strlen(get) - 4);
  CHECK_STR(req.method, "GET");
  CHECK_STR(req.target, "http://example.com/a?b=1");
  CHECK(req.n_headers == 2);
  CHECK_STR(http_header(&req, "x-a"), "one");
  CHECK(req.body_done && !req.chunked && req.content_length == -1);

  CHECK(parse("CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", &why) > 0);
  CHECK_STR(req.method, "CONNECT");
  CHECK_STR(req.target, "api.example.com:443");

  CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\n", &why) == 0); /* not complete yet */
  CHECK(parse("GARBAGE\r\n\r\n", &why) < 0 && why);
  /* the framing must be unambiguous */
  CHECK(parse("POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", &why) <
        0);
  CHECK(parse("POST /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", &why) < 0);
  CHECK(parse("POST /x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &why) < 0);
  /* no CR or LF ever reaches a header value we forward */
  CHECK(parse("GET / HTTP/1.1\r\nX-A: a\rInjected: 1\r\n\r\n", &why) < 0);
  CHECK(parse("GET / HTTP/1.1\r\nX-A: a\nB: 1\r\n\r\n", &why) < 0); /* bare LF */
  CHECK(parse("GET / HTTP/1.1\r\nX-A: a\r\nB: 1\r\n\r\n", &why) > 0);
  for (size_t i = 0; i < req.n_headers; i++)
    CHECK(!strpbrk(req.headers[i].value, "\r\n") && !strpbrk(req.headers[i].name, "\r\n"));
  /* a second request hidden in the first one's head (bare LFs) */
  CHECK(parse("GET http://a/ HTTP/1.1\nHost: a\n\nGET http://evil/ HTTP/1.1\r\nX: y\r\n\r\n",
              &why) < 0);
  /* too many headers */
  char big[HTTP_HEAD_MAX];
  size_t n = (size_t)snprintf(big, sizeof big, "GET / HTTP/1.1\r\n");
  for (int i = 0; i < HTTP_MAX_HEADERS + 1; i++)
    n += (size_t)snprintf(big + n, sizeof big - n, "H%d: v\r\n", i);
  snprintf(big + n, sizeof big - n, "\r\n");
  CHECK(parse(big, &why) < 0 && why && strstr(why, "too many"));
}

static void test_bodies(void)
{
  const char *why;
  const char *post = "POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
  CHECK(parse(post, &why) > 0 && !req.body_done && req.content_length == 5);
  struct cap_buf out = {0};
  CHECK(http_body_feed(&req, "hel", 3, &out) == 3 && !req.body_done);
  CHECK(http_body_feed(&req, "loGET / HTTP/1.1\r\n\r\n", 20, &out) == 2 && req.body_done);
  CHECK(out.len == 5 && memcmp(out.data, "hello", 5) == 0);
  out.len = 0;

  const char *chunked = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  CHECK(parse(chunked, &why) > 0 && req.chunked && !req.body_done);
  const char *body = "5\r\nhello\r\n0\r\n\r\nNEXT";
  size_t used = 0;
  for (size_t i = 0; i < strlen(body) && !req.body_done; i++) { /* one byte at a time */
    long r = http_body_feed(&req, body + i, 1, &out);
    CHECK(r == 1);
    used += (size_t)r;
  }
  CHECK(req.body_done && used == strlen(body) - 4);
  CHECK(out.len == 5 && memcmp(out.data, "hello", 5) == 0); /* framing removed */
  cap_buf_free(&out);

  CHECK(parse(chunked, &why) > 0);
  CHECK(http_body_feed(&req, "zz\r\n", 4, NULL) < 0); /* not a chunk size */
  /* a bare LF anywhere in the head, even where the parser would accept it */
  CHECK(parse("POST http://a/ok HTTP/1.1\nContent-Length: 19\n\nAAAAAAAAAAAAAAA\r\n\r\nGET /admin "
              "HTTP/1.1\r\n\r\n",
              &why) < 0);
}

static void test_urls(void)
{
  struct http_url u;
  CHECK(http_parse_url("http://example.com", &u) && !u.tls && u.port == 80);
  CHECK_STR(u.host, "example.com");
  CHECK_STR(u.path, "/");
  CHECK(http_parse_url("https://[::1]:8443/a/b?c=d#frag", &u) && u.tls && u.port == 8443);
  CHECK_STR(u.host, "::1");
  CHECK_STR(u.path, "/a/b?c=d");
  CHECK(http_parse_url("http://h?q=1", &u));
  CHECK_STR(u.path, "/?q=1");
  CHECK(!http_parse_url("http://user:pw@example.com/", &u)); /* userinfo */
  CHECK(!http_parse_url("http://example.com:0/", &u));
  CHECK(!http_parse_url("http://example.com:99999/", &u));
  CHECK(!http_parse_url("ftp://example.com/", &u));
  CHECK(!http_parse_url("http:///x", &u));
  char a[] = "host.example:443", b[] = "[fd00::1]:80", c[] = "nocolon", d[] = ":80";
  char *host;
  uint16_t port;
  CHECK(http_split_authority(a, &host, &port) && port == 443 && strcmp(host, "host.example") == 0);
  CHECK(http_split_authority(b, &host, &port) && port == 80 && strcmp(host, "fd00::1") == 0);
  CHECK(!http_split_authority(c, &host, &port));
  CHECK(!http_split_authority(d, &host, &port));
}

UNIT_MAIN(test_heads, test_bodies, test_urls)
