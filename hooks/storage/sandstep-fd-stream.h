/* sandstep-fd-stream.h: the first LEN bytes of a file, as a seekable GInputStream.
 *
 * A request body that libsoup can send again from the start (it seeks back
 * when a kept-alive connection turns out closed and it resends the request
 * on a new one), read with pread() so that the fd's own offset is never
 * moved and several streams may read one fd.  The stream keeps its own dup
 * of the fd.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* A read of the file failed, or it ended before LEN bytes: what a request
 * that fails with this error failed on is the spool, not the network. */
#define SANDSTEP_FD_STREAM_ERROR (sandstep_fd_stream_error_quark ())
GQuark sandstep_fd_stream_error_quark (void);

#define SANDSTEP_TYPE_FD_STREAM (sandstep_fd_stream_get_type ())
G_DECLARE_FINAL_TYPE (SandstepFdStream, sandstep_fd_stream, SANDSTEP, FD_STREAM, GInputStream)

/* NULL with @error set when the fd cannot be duplicated. */
GInputStream *sandstep_fd_stream_new (int fd, goffset len, GError **error);

G_END_DECLS
