/* The host side's resolver with a TTL cache (dns_client.h). A miss sends
 * the A and the AAAA query together on one connected UDP socket to each
 * nameserver in turn (random ids, the answer's question checked), asks
 * again over TCP when an answer is truncated, and moves to the next
 * server on an error code, a broken answer, a refusal or silence. */
#include "net/dns_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/io.h"
#include "net/dns_answer.h"

struct cache_entry {
  char name[DNS_NAME_MAX]; /* "" when free */
  uint64_t expires_ms, used;
  size_t n;
  struct sockaddr_storage addrs[DNS_CACHE_ADDRS];
};

struct dns_cache {
  struct dns_client_config cfg;
  pthread_mutex_t lock;
  /* the hosts file as last read (under lock), and what it was then */
  char *hosts;
  size_t hosts_len;
  struct stat hosts_st;
  bool hosts_read;
  uint64_t clock; /* use counter, for eviction */
  struct cache_entry entries[DNS_CACHE_NAMES];
};

/* ---- resolv.conf ---- */

static void config_line(const char *line, size_t len, struct dns_client_config *cfg)
{
  char buf[256];
  if (len >= sizeof buf)
    return;
  memcpy(buf, line, len);
  buf[len] = '\0';
  char *save = NULL, *key = strtok_r(buf, " \t\r", &save);
  if (!key || key[0] == '#' || key[0] == ';')
    return;
  if (strcmp(key, "nameserver") == 0) {
    const char *addr = strtok_r(NULL, " \t\r", &save);
    if (!addr || cfg->n_ns == DNS_NS_MAX)
      return;
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons(53)};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons(53)};
    struct sockaddr_storage *ns = &cfg->ns[cfg->n_ns];
    if (inet_pton(AF_INET, addr, &v4.sin_addr) == 1)
      memcpy(ns, &v4, sizeof v4);
    else if (inet_pton(AF_INET6, addr, &v6.sin6_addr) == 1) /* "fe80::1%eth0" fails: skipped */
      memcpy(ns, &v6, sizeof v6);
    else
      return;
    cfg->n_ns++;
    return;
  }
  if (strcmp(key, "options") != 0)
    return;
  for (char *o; (o = strtok_r(NULL, " \t\r", &save));) {
    if (strncmp(o, "timeout:", 8) == 0) {
      int v = atoi(o + 8);
      cfg->timeout_ms = (v < 1 ? 1 : v > 30 ? 30 : v) * 1000; /* glibc's bounds */
    } else if (strncmp(o, "attempts:", 9) == 0) {
      int v = atoi(o + 9);
      cfg->attempts = v < 1 ? 1 : v > 5 ? 5 : v;
    }
  }
}

void dns_config_parse(const char *text, size_t len, struct dns_client_config *cfg)
{
  *cfg = (struct dns_client_config){.timeout_ms = 5000, .attempts = 2};
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
    config_line(text + at, n, cfg);
    at += n + 1;
  }
}

void dns_config_read(const char *path, struct dns_client_config *cfg)
{
  char text[16384];
  size_t len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    cap_read_upto(fd, text, sizeof text, &len); /* a failed read: what came before it */
    close(fd);
  }
  dns_config_parse(text, len, cfg);
}

/* ---- the hosts file ---- */

static bool same_name(const char *a, size_t alen, const char *b)
{
  if (alen && a[alen - 1] == '.')
    alen--;
  return strlen(b) == alen && strncasecmp(a, b, alen) == 0;
}

/* One line's address and names: its address into out[*n] when name is
 * among its names. */
static void hosts_line(const char *line, size_t len, const char *name, struct sockaddr_storage *out,
                       size_t *n, size_t max)
{
  const char *hash = memchr(line, '#', len);
  if (hash)
    len = (size_t)(hash - line);
  char addr[INET6_ADDRSTRLEN];
  size_t at = 0, field = 0;
  bool match = false;
  while (at < len) {
    while (at < len && (line[at] == ' ' || line[at] == '\t' || line[at] == '\r'))
      at++;
    size_t start = at;
    while (at < len && line[at] != ' ' && line[at] != '\t' && line[at] != '\r')
      at++;
    if (at == start)
      break;
    if (field++ == 0) {
      if (at - start >= sizeof addr)
        return;
      memcpy(addr, line + start, at - start);
      addr[at - start] = '\0';
    } else if (same_name(line + start, at - start, name)) {
      match = true;
    }
  }
  if (!match || *n == max)
    return;
  memset(&out[*n], 0, sizeof out[*n]);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&out[*n];
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&out[*n];
  if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1)
    v4->sin_family = AF_INET;
  else if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) /* "fe80::1%lo": skipped */
    v6->sin6_family = AF_INET6;
  else
    return;
  (*n)++;
}

size_t dns_hosts_find(const char *text, size_t len, const char *name, struct sockaddr_storage *out,
                      size_t max)
{
  size_t n = 0;
  for (size_t at = 0; at < len && n < max;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t l = nl ? (size_t)(nl - (text + at)) : len - at;
    hosts_line(text + at, l, name, out, &n, max);
    at += l + 1;
  }
  return n;
}

/* The hosts file read again when it changed (locked): one stat a lookup.
 * Unreadable or gone: no entries. At most 1 MiB is read. */
static void hosts_refresh(struct dns_cache *c)
{
  const char *path = c->cfg.hosts_path ? c->cfg.hosts_path : "/etc/hosts";
  struct stat st;
  if (stat(path, &st) < 0) {
    c->hosts_len = 0;
    c->hosts_read = false;
    return;
  }
  if (c->hosts_read && st.st_ino == c->hosts_st.st_ino && st.st_dev == c->hosts_st.st_dev &&
      st.st_size == c->hosts_st.st_size && st.st_mtim.tv_sec == c->hosts_st.st_mtim.tv_sec &&
      st.st_mtim.tv_nsec == c->hosts_st.st_mtim.tv_nsec)
    return;
  c->hosts_len = 0;
  c->hosts_read = true;
  c->hosts_st = st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  size_t cap = (size_t)st.st_size < (1u << 20) ? (size_t)st.st_size + 1 : 1u << 20;
  c->hosts = cap_xrealloc(c->hosts, cap);
  cap_read_upto(fd, c->hosts, cap, &c->hosts_len); /* a failed read: what came before it */
  close(fd);
}

/* ---- one exchange ---- */

static socklen_t sa_len(const struct sockaddr_storage *sa)
{
  return sa->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static int ms_left(uint64_t deadline)
{
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  return now >= deadline ? 0 : (int)(deadline - now);
}

/* Waits for fd to be ready for events until deadline: true when it is. */
static bool wait_fd(int fd, short events, uint64_t deadline)
{
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, ms_left(deadline));
    if (r > 0)
      return true;
    if (r == 0 || errno != EINTR)
      return false;
  }
}

/* All of buf[0..n) through the stream fd, or all read into it, before deadline. */
static bool stream_io(int fd, uint8_t *buf, size_t n, bool send_it, uint64_t deadline)
{
  for (size_t done = 0; done < n;) {
    ssize_t r =
        send_it ? send(fd, buf + done, n - done, MSG_NOSIGNAL) : recv(fd, buf + done, n - done, 0);
    if (r > 0) {
      done += (size_t)r;
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EINTR) ||
        !wait_fd(fd, send_it ? POLLOUT : POLLIN, deadline))
      return false;
  }
  return true;
}

/* The query q[0..qlen) asked again over TCP (the UDP answer was
 * truncated): the answer read into *a; false when the server failed. */
static bool ask_tcp(const struct sockaddr_storage *ns, const uint8_t *q, size_t qlen,
                    const char *name, uint16_t qtype, int timeout_ms, struct dns_answer *a)
{
  uint64_t deadline = cap_now_ms(CLOCK_MONOTONIC) + (uint64_t)timeout_ms;
  _cleanup_close_ int fd = socket(ns->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return false;
  int soerr = 0;
  socklen_t sl = sizeof soerr;
  if (connect(fd, (const struct sockaddr *)ns, sa_len(ns)) < 0 &&
      (errno != EINPROGRESS || !wait_fd(fd, POLLOUT, deadline) ||
       getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0))
    return false;
  uint8_t framed[2 + DNS_QUERY_MAX];
  framed[0] = (uint8_t)(qlen >> 8);
  framed[1] = (uint8_t)qlen;
  memcpy(framed + 2, q, qlen);
  uint8_t len[2];
  if (!stream_io(fd, framed, qlen + 2, true, deadline) || !stream_io(fd, len, 2, false, deadline))
    return false;
  size_t n = (size_t)len[0] << 8 | len[1];
  _cleanup_free_ uint8_t *msg = cap_xmalloc(n ? n : 1);
  if (!stream_io(fd, msg, n, false, deadline))
    return false;
  uint16_t id = (uint16_t)(q[0] << 8 | q[1]);
  enum dns_answer_kind k = dns_parse_answer(msg, n, id, name, qtype, a);
  return k == DNS_ANS_ADDRS || k == DNS_ANS_NODATA || k == DNS_ANS_NXDOMAIN;
}

static const uint16_t qtypes[2] = {DNS_TYPE_A, DNS_TYPE_AAAA};

/* One datagram read from fd, matched to the query it answers (by id) and
 * read into ans[k]; false when the server failed (an error code, a broken
 * answer, a refusal). */
static bool take_datagram(int fd, const struct sockaddr_storage *ns, uint8_t q[2][DNS_QUERY_MAX],
                          const size_t qlen[2], const char *name, int timeout_ms,
                          struct dns_answer ans[2], bool done[2])
{
  uint8_t msg[4096];
  ssize_t n = recv(fd, msg, sizeof msg, MSG_DONTWAIT);
  if (n < 0)
    return errno == EAGAIN || errno == EINTR; /* ECONNREFUSED: nothing listens there */
  for (int k = 0; k < 2; k++) {
    if (done[k] || n < 2 || msg[0] != q[k][0] || msg[1] != q[k][1])
      continue;
    uint16_t id = (uint16_t)(q[k][0] << 8 | q[k][1]);
    enum dns_answer_kind kind = dns_parse_answer(msg, (size_t)n, id, name, qtypes[k], &ans[k]);
    if (kind == DNS_ANS_TRUNCATED &&
        !ask_tcp(ns, q[k], qlen[k], name, qtypes[k], timeout_ms, &ans[k]))
      return false;
    if (kind == DNS_ANS_FAILED || kind == DNS_ANS_MALFORMED)
      return false;
    done[k] = true;
    return true;
  }
  return true; /* not an answer to either: ignored */
}

/* Both queries for name to one server; done[k] set for each answered.
 * False when the server failed or stayed silent past the timeout. */
static bool ask_server(const struct dns_client_config *cfg, const struct sockaddr_storage *ns,
                       const char *name, struct dns_answer ans[2], bool done[2])
{
  uint8_t q[2][DNS_QUERY_MAX];
  size_t qlen[2];
  uint16_t ids[2];
  if (getrandom(ids, sizeof ids, 0) != sizeof ids)
    return false;
  ids[1] ^= ids[0] == ids[1] ? 1 : 0;
  for (int k = 0; k < 2; k++)
    if (!(qlen[k] = dns_build_query(ids[k], name, qtypes[k], q[k], sizeof q[k])))
      return false;
  _cleanup_close_ int fd = socket(ns->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (const struct sockaddr *)ns, sa_len(ns)) < 0)
    return false;
  for (int k = 0; k < 2; k++)
    if (!done[k] && send(fd, q[k], qlen[k], 0) != (ssize_t)qlen[k])
      return false;
  uint64_t deadline = cap_now_ms(CLOCK_MONOTONIC) + (uint64_t)cfg->timeout_ms;
  while (!(done[0] && done[1])) {
    if (!wait_fd(fd, POLLIN, deadline))
      return false;
    if (!take_datagram(fd, ns, q, qlen, name, cfg->timeout_ms, ans, done))
      return false;
  }
  return true;
}

static size_t fallback_getaddrinfo(const char *name, struct sockaddr_storage *out, size_t max,
                                   void *arg)
{
  (void)arg;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  if (getaddrinfo(name, NULL, &hints, &res) != 0)
    return 0;
  size_t n = 0;
  for (struct addrinfo *ai = res; ai && n < max; ai = ai->ai_next)
    if (ai->ai_addrlen <= sizeof out[0])
      memcpy(&out[n++], ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(res);
  return n;
}

/* ---- the cache ---- */

struct dns_cache *dns_cache_new(const struct dns_client_config *cfg)
{
  struct dns_cache *c = cap_xcalloc(1, sizeof *c);
  c->cfg = *cfg;
  if (!c->cfg.fallback)
    c->cfg.fallback = fallback_getaddrinfo;
  if (c->cfg.timeout_ms <= 0)
    c->cfg.timeout_ms = 5000;
  if (c->cfg.attempts <= 0)
    c->cfg.attempts = 2;
  pthread_mutex_init(&c->lock, NULL);
  return c;
}

void dns_cache_free(struct dns_cache *c)
{
  if (!c)
    return;
  pthread_mutex_destroy(&c->lock);
  free(c->hosts);
  free(c);
}

/* The entry for name that is fresh at now (locked), or NULL. */
static struct cache_entry *cache_find(struct dns_cache *c, const char *name, uint64_t now)
{
  for (size_t i = 0; i < DNS_CACHE_NAMES; i++) {
    struct cache_entry *e = &c->entries[i];
    if (e->name[0] && strcmp(e->name, name) == 0) {
      if (now < e->expires_ms)
        return e;
      e->name[0] = '\0'; /* expired: gone */
      return NULL;
    }
  }
  return NULL;
}

static void cache_store(struct dns_cache *c, const char *name, uint64_t expires,
                        const struct sockaddr_storage *addrs, size_t n)
{
  pthread_mutex_lock(&c->lock);
  struct cache_entry *slot = NULL;
  for (size_t i = 0; i < DNS_CACHE_NAMES; i++) {
    struct cache_entry *e = &c->entries[i];
    if (e->name[0] && strcmp(e->name, name) == 0) {
      slot = e; /* another thread's answer for the same name: replaced */
      break;
    }
    if (!slot || !e->name[0] || (slot->name[0] && e->used < slot->used))
      slot = e;
  }
  strcpy(slot->name, name);
  slot->expires_ms = expires;
  slot->used = ++c->clock;
  slot->n = n;
  memcpy(slot->addrs, addrs, n * sizeof addrs[0]);
  pthread_mutex_unlock(&c->lock);
}

/* ans[k]'s addresses appended to out (port 0). */
static size_t add_addrs(const struct dns_answer *a, int family, struct sockaddr_storage *out,
                        size_t n, size_t max)
{
  for (size_t i = 0; i < a->n && n < max; i++) {
    memset(&out[n], 0, sizeof out[n]);
    if (family == AF_INET) {
      struct sockaddr_in *s = (struct sockaddr_in *)&out[n];
      s->sin_family = AF_INET;
      memcpy(&s->sin_addr, a->addr[i], 4);
    } else {
      struct sockaddr_in6 *s = (struct sockaddr_in6 *)&out[n];
      s->sin6_family = AF_INET6;
      memcpy(&s->sin6_addr, a->addr[i], 16);
    }
    n++;
  }
  return n;
}

/* How long the pair of answers may be kept: the least TTL of those that
 * hold addresses and of the negative ones that carry an SOA (a negative
 * answer without one says nothing about time, RFC 2308 section 5). */
static uint32_t pair_ttl(const struct dns_answer ans[2])
{
  uint32_t ttl = DNS_TTL_CAP;
  for (int k = 0; k < 2; k++)
    if ((ans[k].kind == DNS_ANS_ADDRS || ans[k].has_soa) && ans[k].ttl < ttl)
      ttl = ans[k].ttl;
  return ttl;
}

int dns_cache_lookup(struct dns_cache *c, const char *name, uint64_t now_ms,
                     struct sockaddr_storage *out, size_t max, enum dns_source *from)
{
  char key[DNS_NAME_MAX];
  size_t len = strlen(name);
  if (len && name[len - 1] == '.')
    len--;
  if (len == 0 || len >= sizeof key)
    return -ENOENT;
  for (size_t i = 0; i < len; i++)
    key[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + ('a' - 'A') : name[i]);
  key[len] = '\0';
  pthread_mutex_lock(&c->lock);
  hosts_refresh(c);
  size_t pinned = dns_hosts_find(c->hosts, c->hosts_len, key, out, max);
  if (pinned) {
    pthread_mutex_unlock(&c->lock);
    *from = DNS_FROM_HOSTS;
    return (int)pinned;
  }
  struct cache_entry *e = cache_find(c, key, now_ms);
  if (e) {
    size_t n = e->n < max ? e->n : max;
    memcpy(out, e->addrs, n * sizeof out[0]);
    e->used = ++c->clock;
    pthread_mutex_unlock(&c->lock);
    *from = DNS_FROM_CACHE;
    return (int)n;
  }
  pthread_mutex_unlock(&c->lock);

  struct dns_answer ans[2];
  bool done[2] = {false, false};
  memset(ans, 0, sizeof ans);
  for (int round = 0; round < c->cfg.attempts && !(done[0] && done[1]); round++)
    for (size_t s = 0; s < c->cfg.n_ns && !(done[0] && done[1]); s++)
      ask_server(&c->cfg, &c->cfg.ns[s], key, ans, done);
  size_t n = 0;
  if (done[0] && ans[0].kind == DNS_ANS_ADDRS)
    n = add_addrs(&ans[0], AF_INET, out, n, max);
  if (done[1] && ans[1].kind == DNS_ANS_ADDRS)
    n = add_addrs(&ans[1], AF_INET6, out, n, max);
  if (n) {
    uint32_t ttl = pair_ttl(ans);
    if (done[0] && done[1] && ttl > 0) /* half an answer is used, not kept */
      cache_store(c, key, now_ms + (uint64_t)ttl * 1000, out,
                  n < DNS_CACHE_ADDRS ? n : DNS_CACHE_ADDRS);
    *from = DNS_FROM_SERVER;
    return (int)n;
  }
  /* no server answered, or none had an address: /etc/hosts, search
   * domains, or the system's own resolver for the rest */
  n = c->cfg.fallback(key, out, max, c->cfg.fallback_arg);
  *from = DNS_FROM_FALLBACK;
  return n ? (int)n : -ENOENT;
}
