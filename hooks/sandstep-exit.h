/* sandstep-exit.h: the exit statuses of the sandstep helper, in plain C.
 *
 * Plain C so that the static front (programs/sandstep-front.c), which links
 * no GLib, exits with the same numbers as the helper; sandstep-error.h maps
 * every error to one of them.  docs/reference.md, "Exit statuses", says what each means.
 */
#pragma once

/* sysexits.h where one fits. */
typedef enum {
  SANDSTEP_EXIT_OK = 0,
  SANDSTEP_EXIT_USAGE = 64,        /* unknown option, bad value, missing argument */
  SANDSTEP_EXIT_BAD_HANDLE = 65,   /* empty, None or malformed handle */
  SANDSTEP_EXIT_NO_SANDBOX = 66,   /* the handle names no sandbox (destroyed or never made) */
  SANDSTEP_EXIT_NOT_OWNER = 67,    /* the sandbox carries another owner */
  SANDSTEP_EXIT_EXPIRED = 68,      /* the sandbox's lifetime is over */
  SANDSTEP_EXIT_PATH = 69,         /* a path refused: escapes, wrong type, missing, too large */
  SANDSTEP_EXIT_EXPORT = 73,       /* an export destination could not be written */
  SANDSTEP_EXIT_IMAGE = 76,        /* an image could not be pulled or used (unknown, refused, tampered, hostile) */
  SANDSTEP_EXIT_BUSY = 75,         /* held by another holder and the wait ran out */
  SANDSTEP_EXIT_TIMEOUT = 124,     /* the command ran out of its budget */
  SANDSTEP_EXIT_INTERNAL = 125,    /* sandstep itself failed: jail, state directory */
} SandstepExit;
