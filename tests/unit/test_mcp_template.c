/* Unit tests for the resource template matcher (front/mcp_template.c):
 * which URIs an RFC 6570 template of resources/templates/list stands
 * for, so that resources/read of a URI no list named reaches the right
 * capability when every capability is served. */
#include <stdlib.h>
#include <string.h>

#include "front/mcp_internal.h"
#include "unit.h"

static void simple(void)
{
  CHECK(mcp_template_match("test://template/{id}/data", "test://template/7/data"));
  CHECK(mcp_template_match("test://template/{id}/data", "test://template//data"));
  CHECK(!mcp_template_match("test://template/{id}/data", "test://template/7/8/data"));
  CHECK(!mcp_template_match("test://template/{id}/data", "test://template/7/data/x"));
  CHECK(!mcp_template_match("test://template/{id}/data", "xtest://template/7/data"));
  CHECK(mcp_template_match("file:///{name}.txt", "file:///notes.txt"));
  CHECK(!mcp_template_match("file:///{name}.txt", "file:///notesXtxt")); /* '.' is literal */
  CHECK(mcp_template_match("a{x,y}b", "a1,2b"));
  CHECK(mcp_template_match("static://no-expression", "static://no-expression"));
  CHECK(!mcp_template_match("static://no-expression", "static://no-expressio"));
}

static void operators(void)
{
  CHECK(mcp_template_match("file://{+path}", "file://a/b/c.txt"));
  CHECK(!mcp_template_match("file://{path}", "file://a/b/c.txt"));
  CHECK(mcp_template_match("repo://x{/owner,name}", "repo://x/me/it"));
  CHECK(mcp_template_match("repo://x{/owner,name}", "repo://x"));
  CHECK(mcp_template_match("search://q{?term,page}", "search://q?term=a&page=2"));
  CHECK(!mcp_template_match("search://q{?term}", "search://qterm=a"));
  CHECK(mcp_template_match("doc://d{#frag}", "doc://d#part"));
  CHECK(mcp_template_match("m://x{;a}", "m://x;a=1"));
  CHECK(mcp_template_match("m://x{.ext}", "m://x.json"));
}

static void refused(void)
{
  CHECK(!mcp_template_match("a{x", "a{x"));      /* unclosed */
  CHECK(!mcp_template_match("a}x", "a}x"));      /* a stray brace */
  CHECK(!mcp_template_match("a{}x", "ax"));      /* empty */
  CHECK(!mcp_template_match("a{{x}}", "a1"));    /* nested */
  CHECK(!mcp_template_match("a{=x}", "a1"));     /* a reserved operator */
  CHECK(!mcp_template_match("(a)|.*{x}", "b1")); /* regex characters are literals */
  CHECK(mcp_template_match("(a)|.*{x}", "(a)|.*1"));
  char *big = malloc(2000);
  memset(big, 'a', 1999);
  big[1999] = 0;
  CHECK(!mcp_template_match(big, big)); /* too long */
  big[256] = 0;
  CHECK(mcp_template_match(big, big)); /* 256 bytes: read */
  big[257] = 0;
  big[256] = 'a';
  CHECK(!mcp_template_match(big, big)); /* 257: too long */
  free(big);
  /* 16 expressions read, 17 too many (a regex's memory grows with their square) */
  CHECK(mcp_template_match("{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}{m}{n}{o}{p}", "x"));
  CHECK(!mcp_template_match("{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}{m}{n}{o}{p}{q}", "x"));
  char *uri = malloc(9000); /* a URI past 8 KiB fits no template */
  memcpy(uri, "file://", 7);
  memset(uri + 7, 'a', 8992);
  uri[8999] = 0;
  regex_t *rx = mcp_template_compile("file://{+path}");
  CHECK(rx != NULL);
  CHECK(!mcp_template_fits(rx, uri));
  uri[8000] = 0;
  CHECK(mcp_template_fits(rx, uri));
  mcp_template_free(rx);
  CHECK(mcp_template_compile("a{x") == NULL);
  CHECK(!mcp_template_fits(NULL, "a"));
  free(uri);
}

UNIT_MAIN(simple, operators, refused)
