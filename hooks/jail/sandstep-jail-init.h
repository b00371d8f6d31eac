/* sandstep-jail-init.h: what the supervisor and a sandbox's init say.
 *
 * The jail's child execs `sandstep-init CONTROL-FD [EGRESS-FD]` as the last
 * step of building a sandbox: init is pid 1 of the sandbox's pid namespace,
 * inside every namespace, with every restriction of a command already on it
 * (no capability, no_new_privs, seccomp).  It runs the commands of
 * CONTROL-FD's word (SOCK_SEQPACKET), each named by the .id its RUN gave:
 *
 *   supervisor -> init   RUN: a SandstepInitMessage, argc, the arguments and
 *                        the environment as NUL-terminated strings, with the
 *                        command's stdin, stdout and stderr (SCM_RIGHTS).
 *                        Refused (EBUSY) while another command runs, unless
 *                        .flags has SANDSTEP_INIT_BESIDE: then it runs beside
 *                        them, in a process group of its own;
 *                        KILL: end command .id now.
 *   init -> supervisor   EXITED: command .id's main process ended, with its
 *                        status; .error is set when nothing could be
 *                        executed.  When it was the last command, every
 *                        process of the sandbox is gone too (killed and
 *                        reaped); a command that ends beside others takes
 *                        its process group with it.
 *
 * When CONTROL-FD closes, init exits and the kernel ends the sandbox.  With
 * EGRESS-FD (network=allow), init listens on 127.0.0.1:SANDSTEP_PROXY_PORT
 * in the sandbox's empty network namespace and hands every connection to
 * the host-side egress proxy through EGRESS-FD (SCM_RIGHTS): the one way out.
 *
 * A failure of the jail's child before init runs is written to its report
 * pipe as one SandstepJailFailure.
 */
#pragma once

#include <stdint.h>

/* The caller's variables a command sees: terminal and locale only. */
#define SANDSTEP_PASSTHROUGH_ENV \
  "TERM", "LANG", "LANGUAGE", "TZ", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_COLLATE", "LC_NUMERIC", "LC_TIME"

typedef struct {
  int step;    /* the setup step that failed */
  int errsv;
} SandstepJailFailure;

/* Failure steps the child reports besides its image's ops (which are 0..n-1). */
enum {
  SANDSTEP_JAIL_STEP_PARENT_GONE = -100,
  SANDSTEP_JAIL_STEP_NETNS,
  SANDSTEP_JAIL_STEP_SETUID,
  SANDSTEP_JAIL_STEP_CGROUP_NS,
  SANDSTEP_JAIL_STEP_PRIVATE,
  SANDSTEP_JAIL_STEP_PIVOT,
  SANDSTEP_JAIL_STEP_ROOT_RDONLY,
  SANDSTEP_JAIL_STEP_LOOPBACK,
  SANDSTEP_JAIL_STEP_HOSTNAME,
  SANDSTEP_JAIL_STEP_SETSID,
  SANDSTEP_JAIL_STEP_RLIMIT,
  SANDSTEP_JAIL_STEP_STDIO,
  SANDSTEP_JAIL_STEP_CHDIR,
  SANDSTEP_JAIL_STEP_SECUREBITS,
  SANDSTEP_JAIL_STEP_CAPS,
  SANDSTEP_JAIL_STEP_NNP,
  SANDSTEP_JAIL_STEP_SECCOMP,
  SANDSTEP_JAIL_STEP_INIT_FD,
  SANDSTEP_JAIL_STEP_HOST_ROUTES,
  SANDSTEP_JAIL_STEP_CGROUP_MOVE,
};

typedef enum {
  SANDSTEP_INIT_RUN = 1,
  SANDSTEP_INIT_KILL = 2,
  SANDSTEP_INIT_EXITED = 3,
} SandstepInitKind;

/* RUN's .flags */
#define SANDSTEP_INIT_BESIDE 1

/* Commands that run at once, at most: a RUN beyond them is refused (EBUSY). */
#define SANDSTEP_INIT_MAX_COMMANDS 32

typedef struct {
  int32_t kind;
  union {
    int32_t status; /* EXITED: 128+N for signal N */
    int32_t flags;  /* RUN: SANDSTEP_INIT_BESIDE or 0 */
  };
  int32_t error;    /* EXITED: the errno of a command that could not be executed, else 0 */
  int32_t id;       /* the command's, chosen by RUN's sender */
} SandstepInitMessage;

/* Inside a network=allow sandbox: where programs find the egress proxy. */
#define SANDSTEP_PROXY_PORT 3128
#define SANDSTEP_PROXY_URL "http://127.0.0.1:3128"
