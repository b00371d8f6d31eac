/* sandstep-launch-wire.h: what `sandstep run` and a sandbox's launcher say.
 *
 * A sandbox's launcher (sandstep-launcher.c) keeps the jail for its next
 * command built in advance and listens on STATE/sandboxes/<handle>/launcher.sock
 * (SOCK_SEQPACKET, same uid only).  `sandstep run` (sandstep-front.c) sends
 * one request: SANDSTEP_LAUNCH_FIELDS NUL-terminated strings, then the
 * caller's terminal and locale variables as NAME=VALUE strings, with its
 * stdin, stdout and stderr attached (SCM_RIGHTS).  The launcher answers
 * with SandstepLaunchReply messages: run it yourself (FALLBACK, nothing
 * ran), or STARTED and later the exit status (DONE).  A caller that sees
 * the socket close before STARTED may run the command the ordinary way.
 *
 * Plain C: the front is linked statically without GLib.
 */
#pragma once

#include <stdint.h>

#define SANDSTEP_LAUNCH_MAGIC "sandstep-launch-1"
#define SANDSTEP_LAUNCH_SOCKET "launcher.sock"
#define SANDSTEP_LAUNCH_LOCK "launcher"

/* magic, handle, owner, holder, wait, timeout, command; empty: not given. */
enum {
  SANDSTEP_LAUNCH_FIELD_MAGIC,
  SANDSTEP_LAUNCH_FIELD_HANDLE,
  SANDSTEP_LAUNCH_FIELD_OWNER,
  SANDSTEP_LAUNCH_FIELD_HOLDER,
  SANDSTEP_LAUNCH_FIELD_WAIT,
  SANDSTEP_LAUNCH_FIELD_TIMEOUT,
  SANDSTEP_LAUNCH_FIELD_COMMAND,
  SANDSTEP_LAUNCH_FIELDS
};

/* The largest request: a longer command goes the ordinary way. */
#define SANDSTEP_LAUNCH_MAX (128 * 1024)

typedef enum {
  SANDSTEP_LAUNCH_FALLBACK = 1,  /* nothing ran: do it without the launcher */
  SANDSTEP_LAUNCH_DONE = 2,      /* the command ended; exit with .exit_status */
  SANDSTEP_LAUNCH_STARTED = 3,   /* the command runs: never run it again, whatever comes */
} SandstepLaunchKind;

typedef struct {
  int32_t kind;
  int32_t exit_status;
} SandstepLaunchReply;

/* The caller's variables a jail's command sees: terminal and locale only. */
#define SANDSTEP_PASSTHROUGH_ENV \
  "TERM", "LANG", "LANGUAGE", "TZ", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_COLLATE", "LC_NUMERIC", "LC_TIME"
