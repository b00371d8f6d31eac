/* sandstep-hints.c: hints for mistakes models repeat in a sandbox.
 *
 * haiku.rag's recovery_hint idea: a mistake the output shows plainly, and
 * that models keep making, gets one line saying what works here instead.
 * A row matches when one of its texts is in the command's output and its
 * condition holds; the first row that matches gives the hint.  Each row has
 * a case in test-agent.c (/tools/hints) that makes the mistake in a real
 * sandbox.
 */
#include "sandstep-ending.h"

#include <string.h>

typedef enum {
  ANY_NETWORK,
  NO_NETWORK,
} Condition;

static const struct {
  Condition condition;
  const char *texts[6];     /* any of them, in stdout or stderr */
  const char *hint;
} hints[] = {
  /* dash says "python: not found", bash "python: command not found". */
  { ANY_NETWORK, { ": python: not found", ": python: command not found" },
    "there is no 'python' command here; run python3" },
  /* Where the host has sudo, the sandbox sees it in /usr, and it fails: sudo 1.9 reads no sudoers its
   * uid 0 owns and cannot switch to uids the sandbox does not map; others refuse the nosuid /usr or
   * no_new_privs. */
  { ANY_NETWORK, { ": sudo: not found", ": sudo: command not found", "sudo: no valid sudoers sources found",
                   "sudo: unable to initialize policy plugin", "sudo: effective uid is not 0",
                   "sudo: The \"no new privileges\" flag is set" },
    "there is no working sudo here, and none is needed: commands already run as root (uid 0) inside the sandbox; "
    "run the command without sudo" },
  { ANY_NETWORK, { "Read-only file system" },
    "only /workspace and /tmp are writable (the system and /data are read-only); write under /workspace instead" },
  { NO_NETWORK, { "Could not resolve host", "Temporary failure in name resolution", "Name or service not known",
                  "Network is unreachable" },
    "this sandbox has no network access, so nothing can be downloaded or installed; work with what is already "
    "here" },
};

static gboolean
shows (const char *out, const char *err, const char *text)
{
  return (out != NULL && strstr (out, text) != NULL) || (err != NULL && strstr (err, text) != NULL);
}

char *
sandstep_recovery_hint (const char *out, const char *err, int exit_status, SandstepNetwork network)
{
  /* A command that succeeded made no mistake worth a hint. */
  if (exit_status == 0)
    return NULL;
  for (gsize i = 0; i < G_N_ELEMENTS (hints); i++)
    {
      if (hints[i].condition == NO_NETWORK && network != SANDSTEP_NETWORK_NONE)
        continue;
      for (gsize t = 0; t < G_N_ELEMENTS (hints[i].texts) && hints[i].texts[t] != NULL; t++)
        if (shows (out, err, hints[i].texts[t]))
          return g_strdup_printf ("[hint: %s]", hints[i].hint);
    }
  return NULL;
}
