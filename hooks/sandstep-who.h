/* sandstep-who.h: what an owner or a holder may be, wherever one comes in (the helper's options and
 * environment, sandstepd's requests).
 *
 * Both are recorded with the sandbox in JSON (so UTF-8 only), shown in messages and tables, hashed into the
 * holder entries, and a holder is written into the claim and the step files, which are read into fixed buffers:
 * so they are bounded, here once.
 */
#pragma once

#include <glib.h>

#include "sandstep-owner-libc.h"  /* SANDSTEP_IDENTITY_MAX, which the static front checks too */

G_BEGIN_DECLS

/* Checks the owner or holder @value (@what: "owner" or "holder"): valid UTF-8, 1 to SANDSTEP_IDENTITY_MAX
 * bytes.  The message names the value (shown with U+FFFD where it is not UTF-8, cut when long), the limit, and
 * the option and variable that set it. */
gboolean sandstep_identity_check (const char *what, const char *value, GError **error);

G_END_DECLS
