/* sandstep-run-client.h: handing one command to a sandbox's supervisor.
 *
 * Plain C, no GLib: the static front (`sandstep run`) and the helper's
 * local backend both call it.  It sends the request of sandstep-run-wire.h
 * and waits for the command's end, while it
 *   - passes the command's stdin, stdout and stderr on as they are when
 *     they are terminals, /dev/null, connected stream sockets or (stdin
 *     only) a pipe, and relays anything else (a regular file, a directory,
 *     another device, a pipe as stdout or stderr, a datagram socket) through
 *     a pipe, so that no command receives a descriptor it could reopen with
 *     more rights than it was given, read back what the caller's other
 *     writers write, or send anywhere but where the caller's writes go;
 *   - or, with an output callback, hands it what the command writes;
 *   - gives the caller's stdio back as it was (file status flags, a
 *     terminal's modes and flow), whatever way the command ended.
 */
#pragma once

#include <stddef.h>

#include "sandstep-run-wire.h"

typedef struct {
  const char *field[SANDSTEP_RUN_FIELDS];   /* MAGIC, CLAIMED and BESIDE are filled in */
  char *const *env;                         /* NAME=VALUE the command may see; NULL: none */
  int stdio[3];                             /* -1: /dev/null */
  int claim_fd;                             /* the caller's claim, or -1 */
  int beside;                               /* may run beside the commands of its holder (SANDSTEP_RUN_FIELD_BESIDE) */
  int cancel_fd;                            /* readable: give the command up (it is killed); -1: none */
  /* With it, stdout and stderr are pipes whose contents go here (stream 1 or 2). */
  void (*on_output) (int stream, const char *data, size_t len, void *user_data);
  void (*on_notice) (const char *text, void *user_data);
  void *user_data;
} SandstepRunCall;

typedef enum {
  SANDSTEP_RUN_CALL_FALLBACK,   /* nothing ran: the ordinary path decides */
  SANDSTEP_RUN_CALL_RETRY,      /* nothing ran: this supervisor is ending, ask a new one */
  SANDSTEP_RUN_CALL_ERROR,      /* nothing ran: .text says why (the sandbox could not be built) */
  SANDSTEP_RUN_CALL_DONE,       /* .reply */
  SANDSTEP_RUN_CALL_LOST,       /* the supervisor went away after it marked the command started: it may or may not have run */
  SANDSTEP_RUN_CALL_CANCELLED,  /* given up through cancel_fd: the supervisor kills what it started */
  SANDSTEP_RUN_CALL_BUSY,       /* nothing ran: the sandbox stayed held past the caller's wait; .text says by whom */
} SandstepRunCallOutcome;

typedef struct {
  SandstepRunCallOutcome outcome;
  SandstepRunReply reply;
  char text[2048];
} SandstepRunCallResult;

/* What sandstep_run_connect() returns when the one that listens is not this user's
 * (sandstep_socket_peer_trusted()): nothing was sent to it. */
#define SANDSTEP_RUN_CONNECT_NOT_OURS (-2)

/* The supervisor of the sandbox whose directory is @sandbox_dir_fd; -1 if none listens, or
 * SANDSTEP_RUN_CONNECT_NOT_OURS. */
int sandstep_run_connect (int sandbox_dir_fd);

void sandstep_run_call (int sock, const SandstepRunCall *call, SandstepRunCallResult *result);

/* The line for a command whose supervisor went away after it started. */
#define SANDSTEP_RUN_LOST_TEXT \
  "the sandbox went away while the command ran (destroyed, or its supervisor killed); it may or may not " \
  "have run, in part; it was not run again; check the sandbox's files and run the step again if it must"
