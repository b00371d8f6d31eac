/* sandstep-error.h: error domains, one per concept, and their exit statuses.
 *
 * Library code returns these through GError; executables decide what to print
 * and map the error to the exit status listed beside each code (README, "Exit
 * statuses").  Codes are stable: tests and scripts match on them.
 */
#pragma once

#include <glib.h>

#include "sandstep-units.h"

G_BEGIN_DECLS

/* Exit statuses of the sandstep helper (sysexits.h where one fits). */
typedef enum {
  SANDSTEP_EXIT_OK = 0,
  SANDSTEP_EXIT_USAGE = 64,        /* unknown option, bad value, missing argument */
  SANDSTEP_EXIT_BAD_HANDLE = 65,   /* empty, None or malformed handle */
  SANDSTEP_EXIT_NO_SANDBOX = 66,   /* the handle names no sandbox (destroyed or never made) */
  SANDSTEP_EXIT_NOT_OWNER = 67,    /* the sandbox carries another owner */
  SANDSTEP_EXIT_EXPIRED = 68,      /* the sandbox's lifetime is over */
  SANDSTEP_EXIT_PATH = 69,         /* a path refused: escapes, wrong type, missing, too large */
  SANDSTEP_EXIT_EXPORT = 73,       /* an export destination could not be written */
  SANDSTEP_EXIT_BUSY = 75,         /* held by another holder and the wait ran out */
  SANDSTEP_EXIT_TIMEOUT = 124,     /* the command ran out of its budget */
  SANDSTEP_EXIT_INTERNAL = 125,    /* sandstep itself failed: jail, state directory */
} SandstepExit;

/* Bad input on the command line or in a make function call. */
#define SANDSTEP_USAGE_ERROR (sandstep_usage_error_quark ())
typedef enum {
  SANDSTEP_USAGE_ERROR_UNKNOWN_OPTION,
  SANDSTEP_USAGE_ERROR_BAD_VALUE,
  SANDSTEP_USAGE_ERROR_MISSING,
} SandstepUsageError;

/* What a handle names, who may use it, and for how long. */
#define SANDSTEP_SANDBOX_ERROR (sandstep_sandbox_error_quark ())
typedef enum {
  SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
  SANDSTEP_SANDBOX_ERROR_NOT_FOUND,
  SANDSTEP_SANDBOX_ERROR_NOT_OWNER,
  SANDSTEP_SANDBOX_ERROR_EXPIRED,
  SANDSTEP_SANDBOX_ERROR_BUSY,
  SANDSTEP_SANDBOX_ERROR_STATE,     /* state directory unreadable or corrupt */
} SandstepSandboxError;

/* Building or running the jail. */
#define SANDSTEP_JAIL_ERROR (sandstep_jail_error_quark ())
typedef enum {
  SANDSTEP_JAIL_ERROR_SETUP,        /* a namespace, mount or filter step failed */
  SANDSTEP_JAIL_ERROR_UNSUPPORTED,  /* the kernel lacks a feature the spec needs */
  SANDSTEP_JAIL_ERROR_TIMEOUT,
} SandstepJailError;

/* Host-side file tools working inside a sandbox's tree. */
#define SANDSTEP_PATH_ERROR (sandstep_path_error_quark ())
typedef enum {
  SANDSTEP_PATH_ERROR_ESCAPES,      /* the path leaves the tree */
  SANDSTEP_PATH_ERROR_NOT_FOUND,
  SANDSTEP_PATH_ERROR_IS_DIRECTORY,
  SANDSTEP_PATH_ERROR_NOT_REGULAR,  /* FIFO, device, socket or link where a file is expected */
  SANDSTEP_PATH_ERROR_TOO_LARGE,
  SANDSTEP_PATH_ERROR_CHANGED,      /* the file changed while it was copied */
  SANDSTEP_PATH_ERROR_IO,
} SandstepPathError;

/* Export destinations. */
#define SANDSTEP_EXPORT_ERROR (sandstep_export_error_quark ())
typedef enum {
  SANDSTEP_EXPORT_ERROR_BAD_URL,
  SANDSTEP_EXPORT_ERROR_WRITE,
} SandstepExportError;

GQuark sandstep_usage_error_quark (void);
GQuark sandstep_sandbox_error_quark (void);
GQuark sandstep_jail_error_quark (void);
GQuark sandstep_path_error_quark (void);
GQuark sandstep_export_error_quark (void);

/* Sets @error and returns FALSE, so a failing path reads `return sandstep_throw (...)`. */
gboolean sandstep_throw (GError **error, GQuark domain, int code, const char *format, ...) G_GNUC_PRINTF (4, 5);

/* Like sandstep_throw() with ": <strerror(errsv)>" appended. */
gboolean sandstep_throw_errno (GError **error, GQuark domain, int code, int errsv, const char *format, ...) G_GNUC_PRINTF (5, 6);

/* The helper's exit status for @error. */
SandstepExit sandstep_error_exit_status (const GError *error);

G_END_DECLS
