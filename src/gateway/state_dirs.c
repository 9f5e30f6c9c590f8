/* Which state directories no sandbox may see: the one in use, the default
 * one, $CAPSULE_STATE, and every state directory this user's capsule has
 * opened before, listed one real path a line in DEFAULT/state-dirs (0600,
 * appended by gw_state_open). A tool granted a directory that holds an
 * older state directory (another --state, a project's own) finds it masked
 * too. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
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

static void add_dir(struct dir_list *l, const char *dir)
{
  if (!dir || !*dir)
    return;
  char *real = realpath(dir, NULL);
  if (!real || listed(l->v, l->n, real)) {
    free(real);
    return;
  }
  l->v = cap_xrealloc(l->v, (l->n + 1) * sizeof *l->v);
  l->v[l->n++] = real;
}

/* Makes dir (and its missing parents) 0700 when it does not exist. */
static void make_dir(const char *dir)
{
  if (!dir || dir[0] != '/')
    return;
  _cleanup_free_ char *p = cap_xstrdup(dir);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      mkdir(p, 0700);
      *s = '/';
    }
  mkdir(p, 0700);
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
  _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return; /* best effort: the directory in use is masked anyway */
  _cleanup_free_ char *line = cap_xasprintf("%s\n", real);
  if (write(fd, line, strlen(line)) < 0) {
    /* the same */
  }
}

size_t gw_state_private_paths(const char *state_dir, char ***ret)
{
  struct dir_list l = {0};
  _cleanup_free_ char *dflt = gw_state_default_dir();
  /* a state directory that does not exist yet is made now, 0700, so that
   * it is masked: a tool must not be the one to create it (it would know
   * the key of every credential stored there later) */
  make_dir(state_dir);
  make_dir(dflt);
  make_dir(getenv("CAPSULE_STATE"));
  add_dir(&l, state_dir);
  add_dir(&l, dflt);
  add_dir(&l, getenv("CAPSULE_STATE"));
  _cleanup_free_ char *path = list_path();
  _cleanup_fclose_ FILE *f = fopen(path, "re");
  char line[PATH_MAX + 2];
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '/')
      add_dir(&l, line);
  }
  *ret = l.v;
  return l.n;
}

void gw_state_private_paths_free(char **paths, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(paths[i]);
  free(paths);
}
