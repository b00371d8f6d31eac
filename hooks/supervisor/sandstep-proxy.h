/* sandstep-proxy.h: the host-side egress proxy of a network=allow sandbox.
 *
 * A process of its own (`sandstep-core --egress HANDLE`, started by the
 * sandbox's supervisor): the sandbox's init listens on 127.0.0.1:3128 in
 * the sandbox's otherwise empty network namespace and hands every
 * connection over (SCM_RIGHTS); HTTPS_PROXY and friends point there.  It
 * answers CONNECT only, asks the egress policy about every target, and
 * refuses with a plain 403 and one line saying why.  A program that
 * ignores the proxy has no route at all.
 */
#pragma once

#include <glib.h>

#include "sandstep-egress.h"

G_BEGIN_DECLS

/* Serves the connections arriving on @connections until init goes away.
 * Every refusal is appended to @log_path and written as one line
 * ("egress refused: TARGET: REASON") to @notices. */
gboolean sandstep_proxy_serve (int connections, SandstepEgress *egress, const char *sandbox, const char *log_path,
                               int notices, GError **error);

G_END_DECLS
