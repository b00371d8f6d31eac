/* sandstep-handle-libc.h: the grammar of a local handle, in plain C.
 *
 * The static `sandstep` front (programs/sandstep-front.c) links no GLib, yet
 * must read a handle exactly as the helper does, or it would serve a handle
 * the helper refuses.  So the grammar lives here once, with no library but
 * libc; sandstep-handle.c builds the remote grammar on it, and
 * tests/test-handle.c checks that the front's reading of --handle and the
 * helper's accept and refuse the same texts and files.
 */
#pragma once

#include <stddef.h>

#define SANDSTEP_HANDLE_PREFIX "sandstep-"
#define SANDSTEP_HANDLE_HEX_DIGITS 16
/* A local handle's length, without its NUL. */
#define SANDSTEP_HANDLE_LOCAL_LEN (sizeof SANDSTEP_HANDLE_PREFIX - 1 + SANDSTEP_HANDLE_HEX_DIGITS)
/* A handle file holds one line; anything longer is not a handle file, and
 * only a regular file is one (a FIFO or a device is refused at once). */
#define SANDSTEP_HANDLE_FILE_MAX 4096

/* The backend a step names ($SANDSTEP_BACKEND, --backend) when it names none. */
#define SANDSTEP_BACKEND_ENV "SANDSTEP_BACKEND"

/* 1 if @text is "sandstep-" and 16 lowercase hex digits, else 0. */
int sandstep_handle_libc_is_local (const char *text);

/* --handle=VALUE or --handle=@FILE, with the white space around it removed
 * that the helper removes (space, tab, newline, form feed, carriage return):
 * 1 with the handle in @out when it is a local handle, 0 otherwise (a remote
 * handle, a bad one, a file that cannot be read: the helper says which). */
int sandstep_handle_libc_resolve (const char *given, char out[SANDSTEP_HANDLE_LOCAL_LEN + 1]);
/* The text --handle=VALUE or --handle=@FILE names, stripped the same way,
 * into @out: 1, or 0 when the file is no handle file or the text does not
 * fit in @size bytes. */
int sandstep_handle_libc_read (const char *given, char *out, size_t size);

/* 1 if a backend named @name ($SANDSTEP_BACKEND, --backend) is the local one:
 * unset, empty or "local". */
int sandstep_backend_name_is_local (const char *name);
