/* sandstep-run-wire.h: what a `sandstep run` and a sandbox's supervisor say.
 *
 * A live sandbox has one supervisor (sandstep-supervisor.h), listening on
 * STATE/sandboxes/<handle>/supervisor.sock (SOCK_SEQPACKET, same uid and
 * user namespace only).  A caller sends one request: SANDSTEP_RUN_FIELDS
 * NUL-terminated strings, then the command's environment additions (the
 * caller's terminal and locale) as NAME=VALUE strings, with the command's
 * stdin, stdout and stderr and the write end of a pipe, its start mark,
 * attached (SCM_RIGHTS), and, when the caller already holds the sandbox's
 * claim, the claim's fd after them.
 *
 * Just before the command may start, the supervisor writes one byte into
 * the start mark: from then on the command may have run, and the caller
 * never runs it again, whatever comes next.  The caller does not wait on
 * the mark (a message would wake it for nothing); it reads the mark when
 * the socket closes without DONE, and asks again only when it is empty.
 *
 * The supervisor answers with SandstepRunReply messages:
 *   FALLBACK  nothing ran: take the ordinary path, which says why (another
 *             owner, expired, a value to judge, --wait=0 on a held
 *             sandbox);
 *   RETRY     nothing ran: this supervisor is ending, ask a new one;
 *   NOTICE    a line for the caller's stderr (an egress refusal), the text
 *             after the reply;
 *   DONE      the command ended and every process it started is gone (but,
 *             with OTHERS_RUN, one that left its process group while
 *             commands ran beside it);
 *   ERROR     nothing ran: the sandbox could not be built, the text after
 *             the reply says why;
 *   BUSY      nothing ran: the sandbox stayed held until the caller's wait
 *             was over, the text after the reply says by whom.
 *
 * A caller that asks to run beside (BESIDE "1") while a command of its own
 * holder runs begins at once, beside it, under that command's claim: E2B's
 * calls, which share one holder, each start a command while another runs.
 *
 * A caller without the claim that finds the sandbox held (by a command the
 * supervisor runs, another make recipe, or another process's claim) waits
 * in the supervisor's queue, told so with a NOTICE, for as long as its
 * --wait allows: its command is begun there, in the order callers came,
 * and never sent the ordinary way only to come back.
 *
 * Plain C: the front is linked statically without GLib.
 */
#pragma once

#include <stdint.h>

#define SANDSTEP_RUN_MAGIC "sandstep-run-5"
#define SANDSTEP_RUN_SOCKET "supervisor.sock"
/* flock held by a sandbox's supervisor; its content is "PID START-TIME", each right-aligned in a fixed width. */
#define SANDSTEP_RUN_LOCK "supervisor"

enum {
  SANDSTEP_RUN_FIELD_MAGIC,
  SANDSTEP_RUN_FIELD_HANDLE,
  SANDSTEP_RUN_FIELD_OWNER,     /* empty: the default identity */
  SANDSTEP_RUN_FIELD_HOLDER,    /* empty: the default identity */
  SANDSTEP_RUN_FIELD_WAIT,      /* empty: not given */
  SANDSTEP_RUN_FIELD_TIMEOUT,   /* empty: not given; else seconds as the caller wrote them */
  SANDSTEP_RUN_FIELD_CLAIMED,   /* "1": the claim's fd follows the start mark */
  SANDSTEP_RUN_FIELD_COMMAND,
  SANDSTEP_RUN_FIELD_STEP,      /* a make recipe's line: "PID START ENDS" (sandstep-step.h); empty: none */
  SANDSTEP_RUN_FIELD_BESIDE,    /* "1": may run beside the commands of the same holder (E2B's calls); else "" */
  SANDSTEP_RUN_FIELDS
};

/* The options of `sandstep run` that the front reads itself, and the field each fills; anything else sends
 * the run the ordinary way (the core).  Each is an option of the operator table's `run` that takes a value
 * (test-operators checks that they agree). */
typedef struct {
  const char *name;
  int field;
} SandstepRunOption;

#define SANDSTEP_RUN_OPTIONS                                                                                     \
  { "handle", SANDSTEP_RUN_FIELD_HANDLE }, { "owner", SANDSTEP_RUN_FIELD_OWNER },                             \
  { "holder", SANDSTEP_RUN_FIELD_HOLDER }, { "wait", SANDSTEP_RUN_FIELD_WAIT },                               \
  { "timeout", SANDSTEP_RUN_FIELD_TIMEOUT }, { "step", SANDSTEP_RUN_FIELD_STEP }

/* The largest request: a longer command goes the ordinary way. */
#define SANDSTEP_RUN_MAX (128 * 1024)

typedef enum {
  SANDSTEP_RUN_FALLBACK = 1,
  SANDSTEP_RUN_RETRY = 2,
  SANDSTEP_RUN_NOTICE = 4,
  SANDSTEP_RUN_DONE = 5,
  SANDSTEP_RUN_ERROR = 6,
  SANDSTEP_RUN_BUSY = 7,
} SandstepRunKind;

/* DONE flags. */
enum {
  SANDSTEP_RUN_TIMED_OUT = 1 << 0,    /* killed at the end of its budget */
  SANDSTEP_RUN_CLAMPED = 1 << 1,      /* the budget was the sandbox's remaining lifetime */
  SANDSTEP_RUN_MEMORY_HIT = 1 << 2,
  SANDSTEP_RUN_PIDS_HIT = 1 << 3,
  SANDSTEP_RUN_INTERRUPTED = 1 << 4,  /* the sandbox went down under it (destroyed, or its init killed) */
  SANDSTEP_RUN_EXEC_FAILED = 1 << 5,  /* nothing could be executed; .exit_status is the errno */
  SANDSTEP_RUN_OTHERS_RUN = 1 << 6,   /* commands beside it run on: a process of its may still hold its output */
};

typedef struct {
  int32_t kind;
  int32_t exit_status;        /* DONE: as a shell reports it, 128+N for signal N */
  uint32_t flags;
  uint32_t reserved;
  double applied_timeout_s;   /* DONE: the budget that applied */
  /* DONE: the sandbox's limits, for the lines that name them. */
  uint64_t memory;
  int64_t pids;
  int64_t cpu_time_s;
  uint64_t disk;
} SandstepRunReply;

