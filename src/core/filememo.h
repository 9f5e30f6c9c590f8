/* Small files a long-lived process reads again on every call (a Selu
 * manifest for the instance key, the state's salt), kept in memory and
 * served again only while the file is the same: same device, inode, size,
 * modification and change times, as one stat of its path says before each
 * use. A file replaced (a rename), rewritten or touched is read again; a
 * file past CAP_FILEMEMO_MAX bytes is never kept.
 *
 * Process-wide and thread-safe. A thread that finds the table busy reads
 * the file itself (so a child forked while another thread held the lock
 * never waits for it). What it returns is the caller's (a copy). */
#ifndef CAPSULE_CORE_FILEMEMO_H
#define CAPSULE_CORE_FILEMEMO_H

#include <stdbool.h>
#include <stddef.h>

#define CAP_FILEMEMO_MAX (64u << 10)

/* path's bytes (NUL-terminated) into *ret_data (caller frees), their count
 * in *ret_len. nofollow: a symbolic link at path is refused (ELOOP) rather
 * than followed. 0, or -errno (ENOENT, EISDIR, EFBIG past max_bytes, ...)
 * with nothing returned. */
int cap_filememo_read(const char *path, bool nofollow, size_t max_bytes, char **ret_data,
                      size_t *ret_len);

/* Forgets every kept file (tests). */
void cap_filememo_clear(void);

#endif
