/* Probes foreign-ABI syscalls inside the sandbox: x32 getpid and i386
 * int 0x80 getpid. Prints what happened; the process being killed is the
 * expected (blocked) outcome. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "x32") == 0) {
    long r = syscall(0x40000000 | 39);
    printf("x32 getpid -> %ld\n", r);
  } else if (argc > 1 && strcmp(argv[1], "i386") == 0) {
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory");
    printf("i386 getpid -> %ld\n", r);
  }
  return 0;
}
