/* Which state directories no sandbox may see: the one in use, the default
 * one, $CAPSULE_STATE, and every state directory this user's capsule has
 * opened before, listed one real path a line in DEFAULT/state-dirs (0600,
 * appended by gw_state_open). A tool granted a directory that holds an
 * older state directory (another --state, a project's own) finds it masked
 * too. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/fs.h"
#include "gateway/state.h"

static char *list_path(void)
{
  _cleanup_free_ char *dflt = gw_state_default_dir();
  return cap_xasprintf("%s/state-dirs", dflt);
}

struct dir_list {
  char **v;
  size_t n;
};

static bool listed(char *const *out, size_t n, const char *real)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(out[i], real) == 0)
      return true;
  return false;
}

/* Adds dir's real path; false when dir does not exist (ENOENT). The
 * listed directories share a few parents (/tmp, /var/tmp): the cache
 * spares resolving them again for each. */
static bool add_dir(struct dir_list *l, struct cap_path_cache *cache, const char *dir)
{
  if (!dir || !*dir)
    return true;
  char buf[PATH_MAX];
  int r = cap_realpath_cached(cache, dir, buf);
  char *real = r == 0 ? cap_xstrdup(buf) : NULL;
  errno = -r;
  if (r == -ENOENT)
    return false;
  if (!real && errno != ENOTDIR && dir[0] == '/')
    real = cap_xstrdup(dir); /* unresolvable now (a parent made unsearchable, say): the sandbox's
                                mask plan resolves it again and refuses to run without it */
  if (!real || listed(l->v, l->n, real)) {
    free(real);
    return true;
  }
  l->v = cap_xrealloc(l->v, (l->n + 1) * sizeof *l->v);
  l->v[l->n++] = real;
  return true;
}

/* Makes dir (and its missing parents) 0700 when it does not exist. */
static void make_dir(const char *dir)
{
  if (dir && dir[0] == '/')
    cap_mkdir_p(dir, 0700);
}

/* The list, opened and locked (flock) as the file now at its path: a
 * compaction (prune_list) replaces the file, so a lock taken on the one it
 * replaced is let go and taken again on the new one. -1 when it cannot. */
static int open_list_locked(const char *path, int flags)
{
  for (int tries = 0; tries < 8; tries++) {
    int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
      return -1;
    struct stat a, b;
    if (flock(fd, LOCK_EX) == 0 && fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
        a.st_ino == b.st_ino && a.st_dev == b.st_dev)
      return fd;
    close(fd);
  }
  return -1;
}

/* Drops the lines naming directories that no longer exist (state
 * directories of finished test runs, say), so the list read on every run
 * stays short; under the list's lock, by write and rename. */
static void prune_list(const char *path)
{
  _cleanup_close_ int fd = open_list_locked(path, O_RDONLY);
  if (fd < 0)
    return;
  _cleanup_fclose_ FILE *in = fdopen(dup(fd), "re");
  _cleanup_free_ char *tmp = cap_xasprintf("%s.new", path);
  _cleanup_close_ int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (!in || out < 0)
    return;
  char line[PATH_MAX + 2];
  struct cap_buf kept = {0};
  while (fgets(line, sizeof line, in)) {
    struct stat st;
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '/' && stat(line, &st) == 0 && S_ISDIR(st.st_mode))
      cap_buf_printf(&kept, "%s\n", line);
  }
  bool written = write(out, kept.data ? kept.data : "", kept.len) == (ssize_t)kept.len;
  cap_buf_free(&kept);
  if (written && fsync(out) == 0)
    rename(tmp, path); /* the lock holders of the old file retry on the new one */
  else
    unlink(tmp);
}

void gw_state_remember_dir(const char *dir)
{
  _cleanup_free_ char *real = realpath(dir, NULL);
  _cleanup_free_ char *dflt_raw = gw_state_default_dir();
  make_dir(dflt_raw); /* the list lives there */
  _cleanup_free_ char *dflt = realpath(dflt_raw, NULL);
  if (!real || (dflt && strcmp(real, dflt) == 0) || strchr(real, '\n'))
    return;
  char **known = NULL;
  size_t n = gw_state_private_paths(NULL, &known);
  bool found = listed(known, n, real);
  gw_state_private_paths_free(known, n);
  if (found || !dflt)
    return;
  _cleanup_free_ char *path = list_path();
  _cleanup_close_ int fd = open_list_locked(path, O_WRONLY | O_APPEND | O_CREAT);
  if (fd < 0)
    return; /* best effort: the directory in use is masked anyway */
  _cleanup_free_ char *line = cap_xasprintf("%s\n", real);
  if (write(fd, line, strlen(line)) < 0) {
    /* the same */
  }
}

size_t gw_state_private_paths(const char *state_dir, char ***ret)
{
  struct cap_path_cache *cache = cap_xcalloc(1, sizeof *cache);
  size_t n = gw_state_private_paths_cached(state_dir, cache, ret);
  free(cache);
  return n;
}

size_t gw_state_private_paths_cached(const char *state_dir, struct cap_path_cache *cache,
                                     char ***ret)
{
  struct dir_list l = {0};
  _cleanup_free_ char *dflt = gw_state_default_dir();
  /* a state directory that does not exist yet is made now, 0700, so that
   * it is masked: a tool must not be the one to create it (it would know
   * the key of every credential stored there later) */
  make_dir(state_dir);
  make_dir(dflt);
  make_dir(getenv("CAPSULE_STATE"));
  /* both places a config file may be read from: the next command may run
   * with or without XDG_CONFIG_HOME */
  _cleanup_free_ char *config = gw_config_dir();
  const char *home = getenv("HOME");
  _cleanup_free_ char *home_config =
      home && *home == '/' ? cap_xasprintf("%s/.config/capsule", home) : NULL;
  make_dir(config);
  make_dir(home_config);
  add_dir(&l, cache, state_dir);
  add_dir(&l, cache, dflt);
  add_dir(&l, cache, getenv("CAPSULE_STATE"));
  add_dir(&l, cache, config);
  add_dir(&l, cache, home_config);
  _cleanup_free_ char *path = list_path();
  _cleanup_fclose_ FILE *f = fopen(path, "re");
  char line[PATH_MAX + 2];
  size_t gone = 0;
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '/' && !add_dir(&l, cache, line))
      gone++; /* no longer there (a dangling link too, as stat says) */
  }
  if (gone)
    prune_list(path);
  *ret = l.v;
  return l.n;
}

void gw_state_private_paths_free(char **paths, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(paths[i]);
  free(paths);
}
