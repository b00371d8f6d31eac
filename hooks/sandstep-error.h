/* sandstep-error.h: error domains, one per concept, and what each code means.
 *
 * Library code returns these through GError; executables decide what to
 * print.  One table (sandstep-error.c) gives every domain and code its exit
 * status (docs/reference.md, "Exit statuses"), its HTTP status and short code on
 * sandstepd's wire, and the hint a person reads there.  Codes are stable:
 * tests, scripts and the wire match on them, so a new code goes at the end
 * of its enum.  Each domain has a _FAILED code: what an unknown code of that
 * domain (a newer server's) becomes.
 *
 * Two kinds of error carry facts as data, not only in their message:
 * SANDSTEP_SANDBOX_ERROR_BUSY names the current holder, and
 * SANDSTEP_PATH_ERROR_TOO_LARGE the size and the limit
 * (sandstep_error_get_holder(), sandstep_error_get_size()).
 */
#pragma once

#include <glib.h>

#include "sandstep-exit.h"

G_BEGIN_DECLS

/* Bad input on the command line or in a make function call. */
#define SANDSTEP_USAGE_ERROR (sandstep_usage_error_quark ())
typedef enum {
  SANDSTEP_USAGE_ERROR_UNKNOWN_OPTION,
  SANDSTEP_USAGE_ERROR_BAD_VALUE,
  SANDSTEP_USAGE_ERROR_MISSING,
  SANDSTEP_USAGE_ERROR_FAILED,
} SandstepUsageError;

/* What a handle names, who may use it, and for how long. */
#define SANDSTEP_SANDBOX_ERROR (sandstep_sandbox_error_quark ())
typedef enum {
  SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
  SANDSTEP_SANDBOX_ERROR_NOT_FOUND,
  SANDSTEP_SANDBOX_ERROR_NOT_OWNER,
  SANDSTEP_SANDBOX_ERROR_EXPIRED,
  SANDSTEP_SANDBOX_ERROR_BUSY,
  SANDSTEP_SANDBOX_ERROR_STATE,     /* state directory unreadable */
  SANDSTEP_SANDBOX_ERROR_BROKEN,    /* this sandbox's record or claim is damaged */
  SANDSTEP_SANDBOX_ERROR_NO_SPACE,  /* the host's disk under the state directory is full */
  SANDSTEP_SANDBOX_ERROR_FAILED,
  SANDSTEP_SANDBOX_ERROR_CONFLICT,  /* the holder already provisioned a sandbox with another spec */
} SandstepSandboxError;

/* Building or running the jail. */
#define SANDSTEP_JAIL_ERROR (sandstep_jail_error_quark ())
typedef enum {
  SANDSTEP_JAIL_ERROR_SETUP,        /* a namespace, mount or filter step failed */
  SANDSTEP_JAIL_ERROR_UNSUPPORTED,  /* the kernel lacks a feature the spec needs */
  SANDSTEP_JAIL_ERROR_TIMEOUT,
  SANDSTEP_JAIL_ERROR_KILLED,       /* the sandbox's first process was killed while it started */
  SANDSTEP_JAIL_ERROR_FAILED,
  SANDSTEP_JAIL_ERROR_STALE_PLAN,   /* a kept plan no longer holds: the helper compiles a new one */
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
  SANDSTEP_PATH_ERROR_FAILED,
} SandstepPathError;

/* Export destinations. */
#define SANDSTEP_EXPORT_ERROR (sandstep_export_error_quark ())
typedef enum {
  SANDSTEP_EXPORT_ERROR_BAD_URL,
  SANDSTEP_EXPORT_ERROR_WRITE,
  SANDSTEP_EXPORT_ERROR_FAILED,
} SandstepExportError;

/* Images (hooks/image/): references, registries, blobs, layers. */
#define SANDSTEP_IMAGE_ERROR (sandstep_image_error_quark ())
typedef enum {
  SANDSTEP_IMAGE_ERROR_BAD_REFERENCE, /* the REF text does not parse */
  SANDSTEP_IMAGE_ERROR_NOT_FOUND,     /* no such image, tag or blob */
  SANDSTEP_IMAGE_ERROR_AUTH,          /* the registry refused our credentials (or their absence) */
  SANDSTEP_IMAGE_ERROR_DIGEST,        /* content does not match its digest */
  SANDSTEP_IMAGE_ERROR_PLATFORM,      /* the image has no manifest for this host's platform */
  SANDSTEP_IMAGE_ERROR_TOO_LARGE,     /* over --max-image-size (bytes or entries), or longer than declared */
  SANDSTEP_IMAGE_ERROR_HOSTILE,       /* a layer tries to write outside itself, or is not a well-formed tar */
  SANDSTEP_IMAGE_ERROR_INSECURE,      /* plain HTTP to a registry that is neither loopback nor listed */
  SANDSTEP_IMAGE_ERROR_UNSUPPORTED,   /* a media type or manifest schema we do not read */
  SANDSTEP_IMAGE_ERROR_STORE,         /* the layer store on disk */
  SANDSTEP_IMAGE_ERROR_NETWORK,       /* the registry could not be reached or answered oddly */
  SANDSTEP_IMAGE_ERROR_FAILED,
} SandstepImageError;

GQuark sandstep_usage_error_quark (void);
GQuark sandstep_image_error_quark (void);
GQuark sandstep_sandbox_error_quark (void);
GQuark sandstep_jail_error_quark (void);
GQuark sandstep_path_error_quark (void);
GQuark sandstep_export_error_quark (void);

/* Sets @error and returns FALSE, so a failing path reads `return sandstep_throw (...)`. */
gboolean sandstep_throw (GError **error, GQuark domain, int code, const char *format, ...) G_GNUC_PRINTF (4, 5);

/* Like sandstep_throw() with ": <strerror(errsv)>" appended. */
gboolean sandstep_throw_errno (GError **error, GQuark domain, int code, int errsv, const char *format, ...) G_GNUC_PRINTF (5, 6);

/* sandstep_throw_errno() for a write under the state directory: a full disk
 * (ENOSPC, EDQUOT) is SANDSTEP_SANDBOX_ERROR_NO_SPACE instead of @domain/@code. */
gboolean sandstep_throw_write_errno (GError **error, GQuark domain, int code, int errsv, const char *format, ...)
  G_GNUC_PRINTF (5, 6);

/* SANDSTEP_SANDBOX_ERROR_BUSY naming @holder, the one who has the sandbox now. */
gboolean sandstep_throw_busy (GError **error, const char *holder, const char *format, ...) G_GNUC_PRINTF (3, 4);

/* How long a caller waits for a sandbox that another holder has, unless --wait says, and how often it looks
 * again: soon at first, then ever less often. */
#define SANDSTEP_WAIT_DEFAULT_S 600.0
#define SANDSTEP_CLAIM_PAUSE_FIRST_US 5000
#define SANDSTEP_CLAIM_PAUSE_MAX_US (100 * 1000)

/* The line a caller hears when it starts to wait for @handle, which @holder has (after "sandstep OP: "), and the
 * error when @wait_s is over: the one wording, whoever keeps the caller waiting (the helper, or the supervisor
 * that queues a front's command). */
char *sandstep_busy_waiting_text (const char *handle, const char *holder, double wait_s);
gboolean sandstep_throw_busy_waited (GError **error, const char *handle, const char *holder, double wait_s);

/* SANDSTEP_SANDBOX_ERROR_BROKEN: "Sandbox 'HANDLE' is damaged: WHAT; destroy it ...", the one wording of a
 * damaged sandbox, whoever finds the damage (the store, the claim, the supervisor). */
gboolean sandstep_throw_broken (GError **error, const char *handle, const char *format, ...) G_GNUC_PRINTF (3, 4);

/* SANDSTEP_PATH_ERROR_TOO_LARGE for a file of @size bytes (0: not known) over @limit. */
gboolean sandstep_throw_too_large (GError **error, guint64 size, guint64 limit, const char *format, ...)
  G_GNUC_PRINTF (4, 5);

/* The holder a SANDSTEP_SANDBOX_ERROR carries, or NULL. */
const char *sandstep_error_get_holder (const GError *error);
void sandstep_error_set_holder (GError *error, const char *holder);

/* The size (0: not known) and limit a SANDSTEP_PATH_ERROR carries; FALSE when it carries none. */
gboolean sandstep_error_get_size (const GError *error, guint64 *out_size, guint64 *out_limit);
void sandstep_error_set_size (GError *error, guint64 size, guint64 limit);

/* One row of the table: what a code of a domain means outside the process. */
typedef struct {
  GQuark (*domain) (void);
  int code;
  SandstepExit exit_status;
  guint http_status;          /* on sandstepd's wire */
  const char *wire_code;      /* "not-owner", for people and scripts */
  const char *hint;           /* what to do next, sent with the message */
} SandstepErrorKind;

/* The row of @error; errors of other domains (GIO's, a plugin's) share one
 * row: exit 125, HTTP 500, "internal". */
const SandstepErrorKind *sandstep_error_kind (const GError *error);

/* Every row, for tests and documentation. */
const SandstepErrorKind *sandstep_error_kinds (gsize *n_kinds);

/* The helper's exit status for @error (0 for NULL). */
SandstepExit sandstep_error_exit_status (const GError *error);

/* The name a domain travels under ("sandstep-sandbox-error-quark"), or NULL
 * for a domain that is not ours. */
const char *sandstep_error_domain_name (GQuark domain);

/* The error that @domain_name and @code stand for, with @message: an
 * unknown code of a known domain becomes its _FAILED code; another domain
 * (or NULL) becomes SANDSTEP_SANDBOX_ERROR_STATE: what the server could not do. */
GError *sandstep_error_new_from_name (const char *domain_name, gint64 code, const char *message);

/* ---- values in messages and on terminals ---- */

typedef enum {
  /* A whole line: control characters and invalid UTF-8 only. */
  SANDSTEP_ESCAPE_LINE = 0,
  /* A value quoted whole (a name, a path, a handle file's text): a backslash
   * is doubled too, so no escape inside it can be faked. */
  SANDSTEP_ESCAPE_VALUE = 1 << 0,
} SandstepEscapeFlags;

/* @text (@len bytes, -1: up to its NUL) as it may be shown in a message, a
 * log line or a terminal: "\n", "\r", "\t" and "\xNN" for every other
 * control character (C0, DEL, C1) and for each byte that is not UTF-8,
 * "\u{XXXX}" for the characters that reorder text (bidi controls); the rest
 * as it is.  @max > 0: at most @max bytes of @text, then "...".  A value
 * escaped so never starts a new line nor sends an escape sequence. */
char *sandstep_escape (const char *text, gssize len, gsize max, SandstepEscapeFlags flags);

G_END_DECLS
