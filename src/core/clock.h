/* Clocks in milliseconds (and µs): one helper instead of a copy per file. */
#ifndef CAPSULE_CORE_CLOCK_H
#define CAPSULE_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* The time on `clock` (CLOCK_MONOTONIC for deadlines, CLOCK_REALTIME for
 * timestamps) in ms. */
static inline uint64_t cap_now_ms(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The same in µs. */
static inline uint64_t cap_now_us(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

#endif
