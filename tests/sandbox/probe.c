/* Probes for the sandbox's lifetime, terminal, log and CPU tests
 * (the tests/sandbox scripts). Each mode prints ESCAPED: ... for what it should
 * not have managed, BLOCKED when nothing got through.
 *   tty              the caller's terminal: isatty on 0-2, /dev/tty, TIOCSTI
 *                    (then writes escape sequences, for the caller to check)
 *   truncate-stderr  writes a line to stderr, then truncates and rewrites it
 *   spin-children N FILE  forks N children that spin on the CPU, writing the
 *                    CPU they used so far to FILE every 50 ms */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static int probe_tty(void)
{
  int escaped = 0;
  for (int fd = 0; fd < 3; fd++) {
    if (isatty(fd)) {
      printf("ESCAPED: fd %d is the caller's terminal\n", fd);
      escaped = 1;
    }
    char c = 'x';
    if (ioctl(fd, TIOCSTI, &c) == 0) {
      printf("ESCAPED: TIOCSTI on fd %d\n", fd);
      escaped = 1;
    }
  }
  int t = open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (t >= 0) {
    printf("ESCAPED: /dev/tty opened\n");
    escaped = 1;
  }
  char buf[16];
  if (read(0, buf, sizeof buf) > 0) {
    printf("ESCAPED: read the caller's keystrokes from stdin\n");
    escaped = 1;
  }
  /* a window title and a screen clear, in 7-bit and 8-bit (C1 CSI) forms,
   * and a direction override */
  printf("title:\033]0;capsule-probe\007 clear:\033[2J csi:\xc2\x9b"
         "2J bidi:\xe2\x80\xae"
         "x\n");
  if (!escaped)
    printf("BLOCKED\n");
  fflush(stdout);
  return escaped;
}

static int probe_truncate_stderr(void)
{
  dprintf(2, "tool line\n");
  int escaped = 0;
  if (ftruncate(2, 0) == 0) {
    printf("ESCAPED: truncated the stderr log\n");
    escaped = 1;
  }
  if (pwrite(2, "OVERWRITTEN", 11, 0) == 11) {
    printf("ESCAPED: rewrote the stderr log\n");
    escaped = 1;
  }
  if (!escaped)
    printf("BLOCKED\n");
  return escaped;
}

/* The CPU (ms) a process has used, from this sandbox's own /proc. */
static unsigned long long cpu_ms_of(pid_t pid)
{
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f)
    fclose(f);
  buf[n] = '\0';
  const char *after = strrchr(buf, ')');
  unsigned long long ut = 0, st = 0;
  if (!after ||
      sscanf(after + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return 0;
  return (ut + st) * 1000 / (unsigned long long)sysconf(_SC_CLK_TCK);
}

/* n children spinning; every 50 ms the CPU they have used so far goes to
 * `report` (so the caller knows how much ran before a limit stopped it). */
static int spin_children(int n, const char *report)
{
  pid_t kids[64];
  if (n > 64)
    n = 64;
  for (int i = 0; i < n; i++) {
    kids[i] = fork();
    if (kids[i] == 0)
      for (volatile unsigned long x = 0;; x++) {
      }
  }
  unsigned long long dead = 0; /* what reaped children used, from their last report */
  unsigned long long last[64] = {0};
  for (int alive = n; alive > 0;) {
    unsigned long long sum = dead;
    for (int i = 0; i < n; i++) {
      if (kids[i] <= 0)
        continue;
      unsigned long long ms = cpu_ms_of(kids[i]);
      last[i] = ms > last[i] ? ms : last[i];
      sum += last[i];
      if (waitpid(kids[i], NULL, WNOHANG) == kids[i]) {
        dead += last[i];
        kids[i] = 0;
        alive--;
      }
    }
    FILE *f = fopen(report, "we");
    if (f) {
      fprintf(f, "%llu\n", sum);
      fclose(f);
    }
    usleep(50000);
  }
  printf("ESCAPED: every child ran to its own end\n");
  return 1;
}

int main(int argc, char **argv)
{
  if (argc >= 2 && strcmp(argv[1], "tty") == 0)
    return probe_tty();
  if (argc >= 2 && strcmp(argv[1], "truncate-stderr") == 0)
    return probe_truncate_stderr();
  if (argc >= 4 && strcmp(argv[1], "spin-children") == 0)
    return spin_children(atoi(argv[2]), argv[3]);
  fprintf(stderr, "usage: probe tty|truncate-stderr|spin-children N REPORT-FILE\n");
  return 2;
}
