#include "runtime/talos_ts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/cleanup.h"
#include "core/text.h"

extern char **environ;

#define TS_MAX_FILES 512
#define TS_MAX_BYTES (8u << 20)
#define TS_MAX_DEPTH 16
/* the transform: types stripped, one ES module per file, for Node 20 */
static const char *const esbuild_args[] = {"--loader=ts",       "--format=esm",
                                           "--platform=node",   "--target=node20",
                                           "--log-level=error", "--color=false"};

static bool is_exec(const char *path)
{
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

static char *exe_relative(const char *rel)
{
  char dir[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
  if (n <= 0)
    return NULL;
  dir[n] = '\0';
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  return cap_xasprintf("%s/%s", dir, rel);
}

char *talos_loader_modules(void)
{
  char *candidates[] = {
      cap_xstrdup(CAPSULE_SOURCE_ROOT "/src/runtime/talos-loader/node_modules"),
      exe_relative("../lib/capsule/talos-loader/node_modules"),
  };
  char *found = NULL;
  for (size_t i = 0; i < 2; i++) {
    struct stat sb;
    if (!found && candidates[i] && stat(candidates[i], &sb) == 0 && S_ISDIR(sb.st_mode))
      found = steal_pointer(&candidates[i]);
    free(candidates[i]);
  }
  return found;
}

char *talos_ts_esbuild(struct cap_error *err)
{
  const char *env = getenv("CAPSULE_ESBUILD");
  if (env && *env) {
    if (is_exec(env))
      return cap_xstrdup(env);
    cap_error_set(err, ENOENT, "CAPSULE_ESBUILD=%s is not an executable file", env);
    return NULL;
  }
  _cleanup_free_ char *modules = talos_loader_modules();
  _cleanup_free_ char *bundled = modules ? cap_xasprintf("%s/esbuild/bin/esbuild", modules) : NULL;
  char *found = bundled && is_exec(bundled) ? steal_pointer(&bundled) : NULL;
  const char *path = getenv("PATH");
  _cleanup_free_ char *copy = cap_xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (char *save = NULL, *d = strtok_r(copy, ":", &save); !found && d;
       d = strtok_r(NULL, ":", &save)) {
    _cleanup_free_ char *p = cap_xasprintf("%s/esbuild", d);
    if (*d == '/' && is_exec(p))
      found = steal_pointer(&p);
  }
  if (!found)
    cap_error_set(err, ENOENT,
                  "no esbuild to load TypeScript with: run scripts/deps.sh build (it installs "
                  "src/runtime/talos-loader), or set CAPSULE_ESBUILD to an esbuild program");
  return found;
}

/* The cache key: the transformer (its path, size and time) and the source. */
static void cache_key(const char *esbuild, const char *src, size_t len, char out[65])
{
  crypto_hash_sha256_state h;
  crypto_hash_sha256_init(&h);
  struct stat sb = {0};
  stat(esbuild, &sb);
  char head[PATH_MAX + 128];
  int n = snprintf(head, sizeof head, "capsule-talos-ts-v1\n%s\n%lld\n%lld\n", esbuild,
                   (long long)sb.st_size, (long long)sb.st_mtim.tv_sec);
  crypto_hash_sha256_update(&h, (const unsigned char *)head, (size_t)n);
  for (size_t i = 0; i < ARRAY_SIZE(esbuild_args); i++)
    crypto_hash_sha256_update(&h, (const unsigned char *)esbuild_args[i],
                              strlen(esbuild_args[i]) + 1);
  crypto_hash_sha256_update(&h, (const unsigned char *)src, len);
  unsigned char d[32];
  crypto_hash_sha256_final(&h, d);
  sodium_bin2hex(out, 65, d, sizeof d);
}

static int memfd_with(const char *name, const char *data, size_t len)
{
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd >= 0 && len && (write(fd, data, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

static void read_all(int fd, struct cap_buf *b)
{
  char chunk[8192];
  lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) > 0;)
    cap_buf_append(b, chunk, (size_t)n);
}

/* esbuild's first error, as FILE:LINE:COL: MESSAGE: its report is
 * "X [ERROR] MESSAGE", a blank line, then "    FILE:LINE:COL:". */
static void esbuild_error(const char *path, char *text, struct cap_error *err)
{
  char *msg = strstr(text, "[ERROR] ");
  msg = msg ? msg + 8 : text;
  char *end = strchr(msg, '\n');
  char *where = NULL;
  if (end) {
    *end = '\0';
    for (char *line = end + 1; *line && !where;) {
      char *next = strchr(line, '\n');
      if (next)
        *next = '\0';
      while (*line == ' ')
        line++;
      size_t n = strlen(line);
      if (strncmp(line, path, strlen(path)) == 0 && n && line[n - 1] == ':')
        where = line;
      line = next ? next + 1 : line + n;
    }
  }
  if (where)
    cap_error_set(err, EINVAL, "%s %s (it does not compile)", where, msg);
  else
    cap_error_set(err, EINVAL, "%s does not compile: %s", path, *msg ? msg : "esbuild failed");
}

/* esbuild reads the source on stdin and writes the module on stdout; its
 * first error line names the file (--sourcefile) and the place. */
static int transform(const char *esbuild, const char *path, const char *src, size_t len,
                     struct cap_buf *js, struct cap_error *err)
{
  _cleanup_close_ int in = memfd_with("capsule-ts-in", src, len);
  _cleanup_close_ int out = memfd_create("capsule-ts-out", MFD_CLOEXEC);
  _cleanup_close_ int errfd = memfd_create("capsule-ts-err", MFD_CLOEXEC);
  if (in < 0 || out < 0 || errfd < 0)
    return cap_error_errno(err, errno, "cannot set up the TypeScript transform");
  _cleanup_free_ char *sourcefile = cap_xasprintf("--sourcefile=%s", path);
  const char *argv[ARRAY_SIZE(esbuild_args) + 3] = {esbuild};
  size_t k = 1;
  for (size_t i = 0; i < ARRAY_SIZE(esbuild_args); i++)
    argv[k++] = esbuild_args[i];
  argv[k++] = sourcefile;
  argv[k] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in, 0);
  posix_spawn_file_actions_adddup2(&fa, out, 1);
  posix_spawn_file_actions_adddup2(&fa, errfd, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, esbuild, &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return cap_error_errno(err, rc, "cannot run %s", esbuild);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    struct cap_buf e = {0};
    read_all(errfd, &e);
    cap_buf_putc(&e, '\0');
    esbuild_error(path, e.data, err);
    cap_buf_free(&e);
    return -EINVAL;
  }
  read_all(out, js);
  return 0;
}

/* Stores text under dir/name, whole or not at all. */
static void cache_store(const char *dir, const char *name, const struct cap_buf *js)
{
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return;
  _cleanup_free_ char *tmp = cap_xasprintf("%s/.%s.%d", dir, name, (int)getpid());
  _cleanup_free_ char *final = cap_xasprintf("%s/%s", dir, name);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return;
  bool ok = write(fd, js->data ? js->data : "", js->len) == (ssize_t)js->len && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(tmp, final) < 0)
    unlink(tmp);
}

/* One file: from the cache, else transformed (and cached). */
static int compile_one(const char *esbuild, const char *cache, const char *path, struct cap_jw *w,
                       struct cap_error *err)
{
  char *src = NULL;
  size_t len = 0;
  int r = cap_read_file(path, TS_MAX_BYTES, &src, &len, err);
  if (r < 0)
    return r;
  char key[65];
  cache_key(esbuild, src, len, key);
  _cleanup_free_ char *name = cap_xasprintf("%s.mjs", key);
  _cleanup_free_ char *cached = cache ? cap_xasprintf("%s/%s", cache, name) : NULL;
  char *js = NULL;
  size_t js_len = 0;
  struct cap_error ignored = {0};
  if (cached && cap_read_file(cached, 4 * TS_MAX_BYTES, &js, &js_len, &ignored) == 0) {
    cap_jw_key(w, path);
    cap_jw_string_n(w, js, js_len);
    free(js);
    free(src);
    return 0;
  }
  cap_error_clear(&ignored);
  struct cap_buf out = {0};
  r = transform(esbuild, path, src, len, &out, err);
  free(src);
  if (r == 0) {
    if (cache)
      cache_store(cache, name, &out);
    cap_jw_key(w, path);
    cap_jw_string_n(w, out.data ? out.data : "", out.len);
  }
  cap_buf_free(&out);
  return r;
}

static bool is_ts(const char *name)
{
  size_t n = strlen(name);
  if (n > 5 && strcmp(name + n - 5, ".d.ts") == 0)
    return false;
  return (n > 3 && strcmp(name + n - 3, ".ts") == 0) ||
         (n > 4 && strcmp(name + n - 4, ".mts") == 0);
}

/* The package's TypeScript files, in name order, depth first. */
static void find_ts(const char *dir, int depth, struct cap_strv *files)
{
  struct dirent **names = NULL;
  int n = depth > TS_MAX_DEPTH ? -1 : scandir(dir, &names, NULL, alphasort);
  for (int i = 0; i < n; i++) {
    const char *name = names[i]->d_name;
    _cleanup_free_ char *p = cap_xasprintf("%s/%s", dir, name);
    struct stat sb;
    if (name[0] != '.' && strcmp(name, "node_modules") != 0 && files->len < TS_MAX_FILES &&
        lstat(p, &sb) == 0) {
      if (S_ISDIR(sb.st_mode))
        find_ts(p, depth + 1, files);
      else if (S_ISREG(sb.st_mode) && is_ts(name))
        cap_strv_push(files, p);
    }
    free(names[i]);
  }
  free(names);
}

int talos_ts_sources(const struct cap_spec *spec, const char *cache_dir, struct cap_jw *w,
                     struct cap_error *err)
{
  struct cap_strv files = {0};
  find_ts(spec->package_dir, 0, &files);
  cap_jw_begin_object(w);
  int r = 0;
  _cleanup_free_ char *esbuild = NULL;
  if (files.len && !(esbuild = talos_ts_esbuild(err)))
    r = -ENOENT;
  _cleanup_free_ char *cache = cache_dir ? cap_xasprintf("%s/talos", cache_dir) : NULL;
  if (cache_dir)
    mkdir(cache_dir, 0700);
  for (size_t i = 0; r == 0 && i < files.len; i++)
    r = compile_one(esbuild, cache, files.v[i], w, err);
  cap_jw_end_object(w);
  cap_strv_free(&files);
  return r;
}
