/* The config file for defaults: $XDG_CONFIG_HOME/capsule/config, else
 * ~/.config/capsule/config; `key = value` lines, `#` comments. A default
 * comes from a flag, else its CAPSULE_* variable, else this file
 * (cli_default). Read once per process. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/buf.h"
#include "core/cleanup.h"
#include "gateway/db.h"
#include "gateway/state.h"

/* The keys the file may set: each the name of its CAPSULE_* variable
 * without the prefix, in lower case. */
static const char *const config_keys[] = {"caps", "state"};
#define N_KEYS (sizeof config_keys / sizeof config_keys[0])

static struct {
  bool loaded;
  char *values[N_KEYS];
} config;

static char *config_path(void)
{
  _cleanup_free_ char *dir = gw_config_dir();
  return dir ? cap_xasprintf("%s/config", dir) : NULL;
}

static char *trim(char *s)
{
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1]))
    s[--n] = '\0';
  return s;
}

/* A value as written: "quoted" or bare; a leading ~/ is $HOME. */
static char *config_value(char *v)
{
  size_t n = strlen(v);
  if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
    v[n - 1] = '\0';
    v++;
  }
  const char *home = getenv("HOME");
  if (strncmp(v, "~/", 2) == 0 && home && *home)
    return cap_xasprintf("%s/%s", home, v + 2);
  return cap_xstrdup(v);
}

/* One line: a key's value, or a warning naming the file and line. */
static void config_line(const char *path, unsigned lineno, char *line)
{
  char *s = trim(line);
  if (!*s || *s == '#')
    return;
  char *eq = strchr(s, '=');
  if (!eq) {
    fprintf(stderr, "capsule: %s:%u: not `key = value`; ignored\n", path, lineno);
    return;
  }
  *eq = '\0';
  char *key = trim(s), *value = trim(eq + 1);
  for (size_t k = 0; k < N_KEYS; k++)
    if (strcmp(key, config_keys[k]) == 0) {
      free(config.values[k]);
      config.values[k] = *value ? config_value(value) : NULL;
      return;
    }
  fprintf(stderr, "capsule: %s:%u: unknown key '%s' (known: caps, state); ignored\n", path, lineno,
          key);
}

static void config_load(void)
{
  config.loaded = true;
  _cleanup_free_ char *path = config_path();
  if (!path)
    return;
  /* no FIFO to hang on, no symlink to follow */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    /* no file, or a HOME that is not this user's (setpriv, su without -):
     * no defaults, and nothing to say on every command */
    if (errno != ENOENT && errno != ENOTDIR && errno != EACCES)
      fprintf(stderr, "capsule: cannot read %s: %s; ignored\n", path, strerror(errno));
    return;
  }
  /* only the caller's own file, that only the caller can change: another
   * user's (root with a kept HOME) or a shared one would choose what runs */
  struct stat st;
  const char *why = fstat(fd, &st) < 0       ? "cannot be examined"
                    : !S_ISREG(st.st_mode)   ? "is not a regular file"
                    : st.st_uid != geteuid() ? "is owned by another user"
                    : st.st_mode & 022       ? "is writable by group or others"
                    : st.st_nlink != 1       ? "has more than one link"
                                             : NULL;
  if (why) {
    fprintf(stderr,
            "capsule: %s %s; ignored (make it a regular file of your own, mode 0600, or "
            "remove it)\n",
            path, why);
    close(fd);
    return;
  }
  FILE *f = fdopen(fd, "re");
  if (!f) {
    close(fd);
    return;
  }
  char *line = NULL;
  size_t cap = 0;
  unsigned lineno = 0;
  while (getline(&line, &cap, f) >= 0)
    config_line(path, ++lineno, line);
  free(line);
  fclose(f);
}

const char *cli_config(const char *key)
{
  if (!config.loaded)
    config_load();
  for (size_t k = 0; k < N_KEYS; k++)
    if (strcmp(key, config_keys[k]) == 0)
      return config.values[k];
  return NULL;
}

static const char *config_default(const char *value, const char *env)
{
  if (value)
    return value;
  const char *v = getenv(env);
  if (v && *v)
    return v;
  /* CAPSULE_STATE's key is "state" */
  char key[32];
  size_t n = strlen("CAPSULE_");
  if (strncmp(env, "CAPSULE_", n) != 0 || strlen(env + n) >= sizeof key)
    return NULL;
  for (size_t i = 0; i <= strlen(env + n); i++)
    key[i] = (char)tolower((unsigned char)env[n + i]);
  return cli_config(key);
}

const char *cli_default(const char *value, const char *env)
{
  const char *v = config_default(value, env);
  /* a PostgreSQL state: the database for every open, and this host's
   * own directory (the default) for the rest */
  if (strcmp(env, "CAPSULE_STATE") == 0 && gw_db_is_url(v)) {
    gw_state_use_database(v);
    return NULL;
  }
  return v;
}
