/* An image's entrypoint for tests/image/run.sh: reports on stderr (the
 * capability's log) what the sandbox gives it, one "probe NAME VALUE" line
 * each, then execs the Selu server named by its arguments. Built static
 * so the image needs nothing else for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static void probe(const char *name, const char *value)
{
  fprintf(stderr, "probe %s %s\n", name, value);
}

static const char *errno_of(int ok) { return ok ? "ok" : strerror(errno); }

int main(int argc, char **argv)
{
  char buf[256];
  snprintf(buf, sizeof buf, "%u:%u", (unsigned)getuid(), (unsigned)getgid());
  probe("ids", buf);
  probe("cwd", getcwd(buf, sizeof buf) ? buf : "?");
  probe("image_var", getenv("IMAGE_VAR") ? getenv("IMAGE_VAR") : "unset");
  probe("capability_id", getenv("SELU_CAPABILITY_ID") ? getenv("SELU_CAPABILITY_ID") : "unset");
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)rl.rlim_cur);
  probe("nofile", buf);
  snprintf(buf, sizeof buf, "%d", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
  probe("no_new_privs", buf);
  int fd = open("/written-to-root", O_WRONLY | O_CREAT, 0644);
  probe("write_root", errno_of(fd >= 0));
  fd = open("/etc/written", O_WRONLY | O_CREAT, 0644);
  probe("write_etc", errno_of(fd >= 0));
  /* a copy of this program in /tmp: writable, never executable */
  int in = open("/proc/self/exe", O_RDONLY), out = open("/tmp/copy", O_WRONLY | O_CREAT, 0755);
  ssize_t n;
  while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n)
      break;
  if (out >= 0)
    close(out);
  probe("write_tmp", errno_of(out >= 0));
  char *const none[] = {"/tmp/copy", NULL};
  execv("/tmp/copy", none);
  probe("exec_tmp", strerror(errno));
  struct stat st;
  probe("host_home", stat("/home", &st) == 0 ? "visible" : "absent");
  probe("host_usr", stat("/usr/bin", &st) == 0 ? "visible" : "absent");
  FILE *f = fopen("/etc/image-name", "r");
  if (f && fgets(buf, sizeof buf, f)) {
    buf[strcspn(buf, "\n")] = '\0';
    probe("image_file", buf);
  }
  f = fopen("/proc/self/status", "r");
  while (f && fgets(buf, sizeof buf, f))
    if (strncmp(buf, "CapEff:", 7) == 0) {
      buf[strcspn(buf, "\n")] = '\0';
      probe("capeff", buf + 8);
    }
  fflush(stderr);
  if (argc > 1)
    execv(argv[1], argv + 1);
  probe("exec_server", strerror(errno));
  return 1;
}
