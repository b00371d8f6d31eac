/* sandstep-proxy.h: the host-side egress proxy of a network=allow sandbox.
 *
 * It listens on a unix socket that is bound into the jail, where the jail's
 * init relays 127.0.0.1:3128 to it; HTTPS_PROXY and friends point there.
 * It answers CONNECT only, asks the egress policy about every target, and
 * refuses with a plain 403 and one line saying why.  A program that ignores
 * the proxy has no route at all: the jail's network namespace is empty.
 */
#pragma once

#include <glib.h>

#include "sandstep-egress.h"

G_BEGIN_DECLS

typedef struct _SandstepProxy SandstepProxy;

/* Called from a proxy thread for every refusal. */
typedef void (*SandstepRefusalFunc) (const char *target, const char *reason, gpointer user_data);

/* Serves @egress (taken) on @socket_path, in threads of its own, until stopped.
 * Refusals are appended to @log_path and handed to @on_refusal. */
SandstepProxy *sandstep_proxy_start (const char *socket_path, SandstepEgress *egress, const char *sandbox,
                                     const char *log_path, SandstepRefusalFunc on_refusal, gpointer user_data,
                                     GError **error);
void sandstep_proxy_stop (SandstepProxy *proxy);

G_END_DECLS
