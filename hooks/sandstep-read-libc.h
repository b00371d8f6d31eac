/* sandstep-read-libc.h: a small file read whole in one read(), in plain C.
 *
 * For the /proc and /sys files the static front, the supervisor and the
 * jail's starter read: one read() returns such a file whole when it fits.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads @path into @buf (@size bytes, NUL-terminated); its length, or -1 (or 0 for an empty file) with errno
 * set on failure. */
ssize_t sandstep_read_small (const char *path, char *buf, size_t size);

/* The start time of @pid (clock ticks since boot; 0: no such process), so that a recycled pid is never taken
 * for the process that wrote it down.  The one reading of it for every program. */
uint64_t sandstep_process_start_time (pid_t pid);
