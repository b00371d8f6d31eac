/* sandstep-userns.c: which host restriction refused a user namespace; see sandstep-userns.h. */
#include "sandstep-userns.h"

#include <errno.h>
#include <string.h>

/* Where the AppArmor profile goes once installed (meson.build: sysconfdir). */
#ifndef SANDSTEP_APPARMOR_PROFILE
#define SANDSTEP_APPARMOR_PROFILE "/etc/apparmor.d/sandstep"
#endif

/* The number in @proc/@rel, or -1 when the file is absent or not a number. */
static gint64
read_number (const char *proc, const char *rel)
{
  g_autofree char *path = g_build_filename (proc, rel, NULL);
  g_autofree char *text = NULL;
  char *end = NULL;
  gint64 value;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return -1;
  g_strstrip (text);
  value = g_ascii_strtoll (text, &end, 10);
  return end != text && *end == '\0' ? value : -1;
}

/* The Seccomp: line of @proc/self/status: 0 none, 1 strict, 2 a filter. */
static gint64
seccomp_mode (const char *proc)
{
  g_autofree char *path = g_build_filename (proc, "self", "status", NULL);
  g_autofree char *text = NULL;
  const char *line;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (line = strstr (text, "\nSeccomp:")) == NULL)
    return -1;
  return g_ascii_strtoll (line + strlen ("\nSeccomp:"), NULL, 10);
}

char *
sandstep_userns_diagnose (const char *proc, SandstepUsernsStage stage, int errsv)
{
  gint64 max = read_number (proc, "sys/user/max_user_namespaces");
  gint64 clone_allowed = read_number (proc, "sys/kernel/unprivileged_userns_clone");
  gint64 apparmor = read_number (proc, "sys/kernel/apparmor_restrict_unprivileged_userns");

  if (stage == SANDSTEP_USERNS_CREATE && max == 0)
    return g_strdup ("user namespaces are switched off here: user.max_user_namespaces is 0 (on this host, or in "
                     "the user namespace of the container sandstep runs in); allow them with "
                     "'sysctl -w user.max_user_namespaces=15000' where that limit is set");
  if (stage == SANDSTEP_USERNS_CREATE && errsv == ENOSPC && max > 0)
    return g_strdup_printf ("every user namespace this host allows is in use (user.max_user_namespaces is %"
                            G_GINT64_FORMAT "); end some, or raise it with 'sysctl -w user.max_user_namespaces=N'",
                            max);
  if (stage == SANDSTEP_USERNS_CREATE && clone_allowed == 0 && errsv == EPERM)
    return g_strdup ("unprivileged user namespaces are switched off: kernel.unprivileged_userns_clone is 0; allow "
                     "them with 'sysctl -w kernel.unprivileged_userns_clone=1'");
  if (apparmor == 1 && (errsv == EPERM || errsv == EACCES))
    return g_strdup ("AppArmor restricts unprivileged user namespaces "
                     "(kernel.apparmor_restrict_unprivileged_userns=1) and sandstep-supervise runs without a "
                     "profile that allows them; load the profile sandstep installs with 'apparmor_parser -r "
                     SANDSTEP_APPARMOR_PROFILE "', or allow them all with "
                     "'sysctl -w kernel.apparmor_restrict_unprivileged_userns=0'");
  if (stage == SANDSTEP_USERNS_CREATE && seccomp_mode (proc) == 2 &&
      (errsv == EPERM || errsv == ENOSYS || errsv == EACCES))
    return g_strdup_printf ("a seccomp filter on sandstep (a container's default profile, as Docker's) denies "
                            "creating namespaces (%s); run the container with a profile that allows clone3 and "
                            "unshare, for example --security-opt seccomp=unconfined",
                            errsv == ENOSYS ? "clone3 answers ENOSYS" : "clone3 answers EPERM");
  return NULL;
}
