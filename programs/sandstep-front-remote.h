/* sandstep-front-remote.h: the static front's `run` on a sandstepd.
 *
 * Plain C, no library but libc: a `sandstep run` whose every value this
 * program reads with certainty is sent as one HTTP/1.1 request over a plain
 * socket (POST .../claim-run, hooks/sandstep-wire.h), without loading GLib,
 * json-glib or libsoup; anything else goes to sandstep-core.
 */
#pragma once

typedef struct {
  const char *handle;       /* --handle's text (a file's, for @FILE), stripped */
  const char *backend;      /* --backend, else $SANDSTEP_BACKEND; NULL: none */
  const char *owner;        /* NULL: not given (the core derives it) */
  const char *holder;
  const char *timeout;      /* --timeout's text, NULL: none */
  const char *wait;         /* --wait's text, NULL: none */
  const char *command;
} SandstepFrontRemote;

/* 0 when this run is not one the front can send with certainty (nothing was
 * sent: exec the core); else 1, the command ran or was lost, with the status
 * to exit with in @out_status and what to say already said.  A refusal that
 * comes before anything ran (busy, another owner, a bad token) is also 0:
 * the core asks again and says it in its words. */
int sandstep_front_remote_run (const SandstepFrontRemote *run, int *out_status);

/* Reads the answer to a claim-run sent on @fd (left open) as sandstep_front_remote_run() does: 0 when the server
 * refused it before anything ran; else 1, with the status to exit with in @out_status and what to say already
 * said (the command's output on fds 1 and 2, then its report on stderr).  @url names the server in messages,
 * @local is the handle it knows and @shown the caller's, @timeout_text --timeout's text (NULL: none). */
int sandstep_front_remote_read_reply (int fd, const char *url, const char *local, const char *shown,
                                      const char *timeout_text, int *out_status);
