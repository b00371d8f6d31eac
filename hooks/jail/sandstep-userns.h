/* sandstep-userns.h: which host restriction refused a user namespace.
 *
 * Every sandbox needs one, and hosts restrict them four ways: Ubuntu's
 * AppArmor (kernel.apparmor_restrict_unprivileged_userns=1: creation works,
 * but the namespace holds no capability, so the first mount fails),
 * Debian's kernel.unprivileged_userns_clone=0, user.max_user_namespaces=0
 * (ENOSPC), and a container's seccomp profile (clone3 ENOSYS, unshare
 * EPERM).  Read at the first failure, so that the one line a user reads
 * names the restriction and what lifts it.
 *
 * GLib's core only: the static supervisor links it.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SANDSTEP_USERNS_CREATE,   /* clone3/unshare of the namespaces failed */
  SANDSTEP_USERNS_USE,      /* they were made, and a step inside them (a mount, a map) failed */
} SandstepUsernsStage;

/* One sentence naming the restriction that explains @errsv at @stage, read
 * from @proc ("/proc", or a tree laid out like it), and its fix; NULL when
 * none does (the caller then says what failed).  The jail makes its
 * namespaces without privilege (as root too, under the sandbox's uid), so
 * the restrictions on unprivileged namespaces always apply. */
char *sandstep_userns_diagnose (const char *proc, SandstepUsernsStage stage, int errsv);

G_END_DECLS
