#include "core/secret.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif

int cap_secret_hold(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ? -errno : 0; }

void *cap_secret_alloc(size_t size)
{
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fprintf(stderr, "capsule: out of memory\n");
    abort();
  }
  /* a fork's copy (the sandbox's pid 1 before exec) must not carry the
   * keys; the advice fails only on kernels older than 4.14, where the
   * pages are still private and dumped no more than the rest */
  madvise(p, size, MADV_WIPEONFORK);
  madvise(p, size, MADV_DONTDUMP);
  return p;
}

void cap_secret_free(void *p, size_t size)
{
  if (!p)
    return;
  explicit_bzero(p, size);
  munmap(p, size);
}
