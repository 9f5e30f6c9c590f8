/* The listeners' pending and trusted connections (serve_conn.h). */
#include "front/serve_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/clock.h"
#include "core/subid.h"

/* Who holds a connection, for the shares: on loopback the local user
 * owning the client's socket (sock_diag), else the client's address. */
struct conn_owner {
  bool by_uid;
  uint32_t uid;
  unsigned char addr[16]; /* IPv4 as v4-mapped IPv6 */
};

struct serve_conn {
  struct serve_conn *prev, *next; /* in the pending list, or the trusted one */
  int fd;
  enum { CONN_PENDING, CONN_TRUSTED, CONN_EVICTED } state;
  struct conn_owner owner;
  char *who; /* trusted: the user its last request authenticated as */
};

void serve_conns_init(struct serve_conns *cs, size_t max_pending, size_t max_trusted,
                      unsigned trusted_timeout_s)
{
  *cs = (struct serve_conns){.max_pending = max_pending,
                             .max_trusted = max_trusted,
                             .trusted_timeout_s = trusted_timeout_s};
  pthread_mutex_init(&cs->mu, NULL);
}

void serve_conns_destroy(struct serve_conns *cs) { pthread_mutex_destroy(&cs->mu); }

/* The uid owning the client's end of a loopback TCP connection: the
 * kernel's socket table asked for that exact socket (sock_diag, no
 * privilege needed), its local end being our peer. */
static int diag_uid(const struct sockaddr_storage *peer, const struct sockaddr_storage *local,
                    uint32_t *uid)
{
  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 r;
  } req = {.nlh = {.nlmsg_len = sizeof req,
                   .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                   .nlmsg_flags = NLM_F_REQUEST},
           .r = {.sdiag_family = (uint8_t)peer->ss_family,
                 .sdiag_protocol = IPPROTO_TCP,
                 .idiag_states = ~0u,
                 .id.idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}}};
  if (peer->ss_family == AF_INET) {
    const struct sockaddr_in *p = (const void *)peer, *l = (const void *)local;
    req.r.id.idiag_sport = p->sin_port;
    req.r.id.idiag_dport = l->sin_port;
    memcpy(req.r.id.idiag_src, &p->sin_addr, 4);
    memcpy(req.r.id.idiag_dst, &l->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *p = (const void *)peer, *l = (const void *)local;
    req.r.id.idiag_sport = p->sin6_port;
    req.r.id.idiag_dport = l->sin6_port;
    memcpy(req.r.id.idiag_src, &p->sin6_addr, 16);
    memcpy(req.r.id.idiag_dst, &l->sin6_addr, 16);
  }
  _cleanup_close_ int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0 || send(nl, &req, sizeof req, 0) != (ssize_t)sizeof req)
    return -errno;
  union {
    struct nlmsghdr h;
    char bytes[8192];
  } answer;
  ssize_t n = recv(nl, &answer, sizeof answer, 0);
  if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) ||
      answer.h.nlmsg_type != SOCK_DIAG_BY_FAMILY)
    return -ENOENT;
  const struct inet_diag_msg *m = NLMSG_DATA(&answer.h);
  if (m->id.idiag_sport != req.r.id.idiag_sport || m->id.idiag_dport != req.r.id.idiag_dport)
    return -ENOENT;
  *uid = m->idiag_uid;
  return 0;
}

/* ---- a local user's subordinate uids: one owner ----
 * A user given a range in /etc/subuid (rootless containers are) can make
 * sockets as any uid of it (newuidmap): each would be an owner of its own,
 * holding one pending connection, and a flood of them would evict another
 * user's by age. So a uid in a user's range counts as that user. The file
 * is read again when one stat (at most a second apart) says it changed. */
struct subid_range {
  uint32_t owner;
  uint64_t start, end; /* [start, end) */
};
static pthread_mutex_t subid_mu = PTHREAD_MUTEX_INITIALIZER;
static struct subid_range *subids;
static size_t n_subids;
static struct stat subid_sb; /* of the file read (st_ino 0: none) */
static uint64_t subid_checked_ms;

static const char *subid_path(void)
{
#ifdef CAPSULE_TEST_HOOKS /* tests/review15/pending_subuid.sh: a subordinate-id file of its own */
  const char *test = getenv("CAPSULE_TEST_SUBUID");
  if (test && *test)
    return test;
#endif
  return "/etc/subuid";
}

/* The uid a line's name stands for: a number, or a user's name. */
static bool subid_owner_uid(const char *name, size_t len, uint32_t *uid)
{
  char buf[256];
  if (len >= sizeof buf)
    return false;
  memcpy(buf, name, len);
  buf[len] = '\0';
  char *end;
  unsigned long v = strtoul(buf, &end, 10);
  if (buf[0] >= '0' && buf[0] <= '9' && !*end && v <= UINT32_MAX) {
    *uid = (uint32_t)v;
    return true;
  }
  struct passwd pw, *found = NULL;
  char pwbuf[4096];
  if (getpwnam_r(buf, &pw, pwbuf, sizeof pwbuf, &found) != 0 || !found)
    return false;
  *uid = found->pw_uid;
  return true;
}

/* With subid_mu held. */
static void subid_load(void)
{
  uint64_t now = cap_now_ms(CLOCK_MONOTONIC);
  if (subid_checked_ms && now - subid_checked_ms < 1000)
    return;
  subid_checked_ms = now;
  struct stat sb = {0};
  _cleanup_fclose_ FILE *f = fopen(subid_path(), "re");
  if (f && fstat(fileno(f), &sb) < 0)
    sb = (struct stat){0};
  if (sb.st_ino == subid_sb.st_ino && sb.st_dev == subid_sb.st_dev &&
      sb.st_size == subid_sb.st_size &&
      !memcmp(&sb.st_mtim, &subid_sb.st_mtim, sizeof sb.st_mtim) &&
      !memcmp(&sb.st_ctim, &subid_sb.st_ctim, sizeof sb.st_ctim))
    return;
  subid_sb = sb;
  n_subids = 0;
  char line[512];
  size_t name_len;
  uint64_t start, count;
  uint32_t owner;
  while (f && fgets(line, sizeof line, f))
    if (cap_subid_line(line, strlen(line), &name_len, &start, &count) == 0 &&
        subid_owner_uid(line, name_len, &owner) && n_subids < 4096) {
      if ((n_subids & (n_subids - 1)) == 0) /* 0, 1, 2, 4...: room doubled */
        subids = cap_xrealloc(subids, (n_subids ? 2 * n_subids : 1) * sizeof *subids);
      subids[n_subids++] = (struct subid_range){owner, start, start + count};
    }
}

/* The user whose subordinate range holds uid, or uid. */
static uint32_t subid_owner(uint32_t uid)
{
  pthread_mutex_lock(&subid_mu);
  subid_load();
  uint32_t owner = uid;
  for (size_t i = 0; i < n_subids; i++)
    if (uid >= subids[i].start && uid < subids[i].end) {
      owner = subids[i].owner;
      break;
    }
  pthread_mutex_unlock(&subid_mu);
  return owner;
}

static void conn_owner(int fd, struct conn_owner *o)
{
  *o = (struct conn_owner){0};
  struct sockaddr_storage peer, local;
  socklen_t pl = sizeof peer, ll = sizeof local;
  if (fd < 0 || getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 ||
      getsockname(fd, (struct sockaddr *)&local, &ll) < 0)
    return; /* all unknown owners are one */
  bool loopback;
  if (peer.ss_family == AF_INET) {
    const struct sockaddr_in *p = (const void *)&peer;
    o->addr[10] = o->addr[11] = 0xff;
    memcpy(o->addr + 12, &p->sin_addr, 4);
    loopback = (ntohl(p->sin_addr.s_addr) >> 24) == 127;
  } else if (peer.ss_family == AF_INET6) {
    const struct sockaddr_in6 *p = (const void *)&peer;
    memcpy(o->addr, &p->sin6_addr, 16);
    loopback = IN6_IS_ADDR_LOOPBACK(&p->sin6_addr); /* the listeners are IPv6-only */
  } else {
    return;
  }
  o->by_uid = loopback && diag_uid(&peer, &local, &o->uid) == 0;
  if (o->by_uid)
    o->uid = subid_owner(o->uid);
}

static bool same_owner(const struct conn_owner *a, const struct conn_owner *b)
{
  return a->by_uid == b->by_uid && (a->by_uid ? a->uid == b->uid : !memcmp(a->addr, b->addr, 16));
}

/* The groups an owner is in, widest first (OWNER_LEVELS of them, the last
 * the owner itself): an address's networks, as a client holds many
 * addresses of one (an IPv6 client a /64 at least, most often a /56 or a
 * /48; an IPv4 one may have a few of a /24 or a /16); a local user is its
 * uid at every level. How many leading bytes of addr a level compares. */
#define OWNER_LEVELS 4
static size_t owner_prefix(const struct conn_owner *o, int level)
{
  static const unsigned char v6[OWNER_LEVELS] = {6, 7, 8, 16};    /* /48, /56, /64, /128 */
  static const unsigned char v4[OWNER_LEVELS] = {14, 15, 16, 16}; /* /16, /24, /32 */
  return IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)o->addr) ? v4[level] : v6[level];
}

static bool same_group(const struct conn_owner *a, const struct conn_owner *b, int level)
{
  if (a->by_uid || b->by_uid || level == OWNER_LEVELS - 1)
    return same_owner(a, b);
  size_t n = owner_prefix(a, level);
  return n == owner_prefix(b, level) && !memcmp(a->addr, b->addr, n);
}

/* k at a list's newest end (the pending one, or the trusted one) */
static void link_newest(struct serve_conn **oldest, struct serve_conn **newest,
                        struct serve_conn *k)
{
  k->prev = *newest;
  if (*newest)
    (*newest)->next = k;
  else
    *oldest = k;
  *newest = k;
}

/* k off its list (the pending one, or the trusted one) */
static void unlink_conn(struct serve_conns *cs, struct serve_conn *k)
{
  bool pending = k->state == CONN_PENDING;
  struct serve_conn **oldest = pending ? &cs->oldest : &cs->t_oldest;
  struct serve_conn **newest = pending ? &cs->newest : &cs->t_newest;
  if (k->prev)
    k->prev->next = k->next;
  else
    *oldest = k->next;
  if (k->next)
    k->next->prev = k->prev;
  else
    *newest = k->prev;
  k->prev = k->next = NULL;
  if (pending)
    cs->n_pending--;
  else
    cs->n_trusted--;
}

/* Shut down (not closed: libmicrohttpd owns the descriptor and closes it
 * after its CLOSED notification, which takes it off this list under the
 * same mutex first, so the descriptor shut down is still that
 * connection's), so its thread ends. */
static void evict(struct serve_conns *cs, struct serve_conn *k)
{
  unlink_conn(cs, k);
  if (k->fd >= 0)
    shutdown(k->fd, SHUT_RDWR);
  k->state = CONN_EVICTED; /* off the list: nothing to unlink at its close */
}

/* The pending connection to evict: the oldest of the owner holding most,
 * chosen level by level (owner_prefix): of the widest groups the one
 * holding most, within it the next level's holding most, and so on to
 * the owner (ties: the group of the oldest connection). So many
 * addresses of one network are one owner against other networks' (a
 * flood of one /64's addresses, each an owner holding one, evicted an
 * authenticated client's pending connection by age), and an owner is
 * still told from its neighbours within its network. */
static struct serve_conn *eviction_victim(const struct serve_conns *cs)
{
  const struct serve_conn *rep = NULL; /* the group chosen at the level before */
  for (int level = 0; level < OWNER_LEVELS; level++) {
    const struct serve_conn *best = NULL;
    size_t most = 0;
    for (const struct serve_conn *j = cs->oldest; j; j = j->next) {
      if (rep && !same_group(&j->owner, &rep->owner, level - 1))
        continue;
      size_t n = 0;
      for (const struct serve_conn *k = cs->oldest; k; k = k->next)
        n += same_group(&k->owner, &j->owner, level);
      if (n > most) {
        most = n;
        best = j;
      }
    }
    rep = best;
  }
  for (struct serve_conn *k = cs->oldest; k; k = k->next)
    if (same_owner(&k->owner, &rep->owner))
      return k;
  return cs->oldest;
}

/* A new connection joins the pending list. Past the listener's share,
 * the oldest pending one of the owner holding most goes (an address's
 * networks counted first: eviction_victim): a flood evicts its own
 * connections, never another user's. No share of its own per
 * owner: one client's burst of connections at once (a pool opening, its
 * requests not read yet) is not cut while there is room. */
static void started(struct serve_conns *cs, struct MHD_Connection *c, void **ctx)
{
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  struct serve_conn *k = cap_xcalloc(1, sizeof *k);
  k->fd = info ? info->connect_fd : -1;
  conn_owner(k->fd, &k->owner);
  *ctx = k;
  pthread_mutex_lock(&cs->mu);
  link_newest(&cs->oldest, &cs->newest, k);
  cs->n_pending++;
  while (cs->n_pending > cs->max_pending)
    evict(cs, eviction_victim(cs));
  pthread_mutex_unlock(&cs->mu);
}

void serve_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
  struct serve_conns *cs = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    started(cs, c, socket_context);
    return;
  }
  struct serve_conn *k = *socket_context;
  if (!k)
    return;
  pthread_mutex_lock(&cs->mu);
  if (k->state != CONN_EVICTED)
    unlink_conn(cs, k);
  pthread_mutex_unlock(&cs->mu);
  free(k->who);
  free(k);
  *socket_context = NULL;
}

/* The trusted connection to evict: the least recently used one of the
 * user holding most (ties: the user of the least recently used). */
static struct serve_conn *trusted_victim(const struct serve_conns *cs)
{
  struct serve_conn *best = NULL;
  size_t most = 0;
  for (struct serve_conn *j = cs->t_oldest; j; j = j->next) {
    size_t n = 0;
    for (const struct serve_conn *k = cs->t_oldest; k; k = k->next)
      n += strcmp(k->who, j->who) == 0;
    if (n > most) {
      most = n;
      best = j; /* the first of its user's: its least recently used */
    }
  }
  return best;
}

void serve_conns_trust(struct serve_conns *cs, struct MHD_Connection *c, const char *who)
{
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  struct serve_conn *k = info ? info->socket_context : NULL;
  if (!k)
    return;
  pthread_mutex_lock(&cs->mu);
  bool was_pending = k->state == CONN_PENDING;
  bool newest = k == cs->t_newest && k->who && strcmp(k->who, who ? who : "") == 0;
  if (k->state != CONN_EVICTED && !newest) { /* to the trusted list's end: the most recently used */
    unlink_conn(cs, k);
    k->state = CONN_TRUSTED;
    if (!k->who || strcmp(k->who, who ? who : "") != 0) { /* the same user's: kept */
      free(k->who);
      k->who = cap_xstrdup(who ? who : "");
    }
    link_newest(&cs->t_oldest, &cs->t_newest, k);
    cs->n_trusted++;
    while (cs->n_trusted > cs->max_trusted)
      evict(cs, trusted_victim(cs));
  }
  pthread_mutex_unlock(&cs->mu);
  if (was_pending)
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, cs->trusted_timeout_s);
}
