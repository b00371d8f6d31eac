/* sandstep-write-libc.h: all of a buffer to a descriptor, in plain C.
 *
 * For the static front, which links no GLib, and for everything else that
 * writes a whole buffer to a blocking descriptor (relays, spooled parts,
 * the remote client's streams).
 */
#pragma once

#include <stddef.h>

/* Writes @len bytes of @data to @fd, again after EINTR; 1 when all went,
 * 0 otherwise with errno set (EIO when write() wrote nothing). */
int sandstep_write_all (int fd, const void *data, size_t len);
