/* sandstep-render.h: from the arguments of one make call to one shell command line.
 *
 * Pure text work: no make API, no I/O.  The make boundary (sandstep-plugin.c)
 * gathers the identity and the helper's path, calls sandstep_render(), and
 * turns a GError into a make error.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "sandstep-operator.h"

G_BEGIN_DECLS

#define SANDSTEP_PLUGIN_ERROR (sandstep_plugin_error_quark ())
GQuark sandstep_plugin_error_quark (void);

typedef enum {
  SANDSTEP_PLUGIN_ERROR_FAILED,
  SANDSTEP_PLUGIN_ERROR_UNKNOWN_OPTION,   /* a word names no option of the operator */
  SANDSTEP_PLUGIN_ERROR_BAD_VALUE,        /* sandstep_option_check() refused the value */
  SANDSTEP_PLUGIN_ERROR_NO_HANDLE,        /* the operator needs a handle and got none */
  SANDSTEP_PLUGIN_ERROR_UNWANTED_HANDLE,  /* a handle given to an operator that takes none */
  SANDSTEP_PLUGIN_ERROR_UNWANTED_TEXT,    /* text after the comma for an operator that takes none */
  SANDSTEP_PLUGIN_ERROR_NO_TEXT,          /* a command operator without its command */
  SANDSTEP_PLUGIN_ERROR_RESERVED,         /* owner=, holder= or handle= written as an option */
  SANDSTEP_PLUGIN_ERROR_IDENTITY,         /* a bad run id, top directory or dag name */
  SANDSTEP_PLUGIN_ERROR_NEWLINE,          /* a rendered word would span two recipe lines */
} SandstepPluginError;

/* What every rendered command carries besides the call's own arguments. */
typedef struct {
  const char *helper;   /* path (or bare name) of the sandstep helper */
  const char *owner;    /* DAG/RUN */
  const char *holder;   /* DAG/RUN/PATH-OF-TARGET */
  const char *step;     /* PID:LINE of a recipe's sandbox line, for operators that claim; NULL: none */
} SandstepRenderContext;

/* Renders `$(sandbox-OP ARGS,TEXT)` (@text is NULL when the call has no comma)
 * as a /bin/sh command line:
 *
 *   'HELPER' OP ['--handle=HANDLE'] ['--KEY=VALUE' | '--FLAG']... '--owner=OWNER' '--holder=HOLDER'
 *     ['--step=PID:LINE'] [-- 'TEXT'...]
 *
 * Options keep the order in which they were written.  Every word but the
 * operator's name and "--" is single-quoted.  Messages start with the
 * function's name (sandbox-OP) and name the option and the accepted values. */
char *sandstep_render (const SandstepOperator *op, const char *args, const char *text,
                       const SandstepRenderContext *context, GError **error);

/* "network=none|open, lifetime=DURATION, env=ENV..., expired": what @op takes in make. */
char *sandstep_render_accepted (const SandstepOperator *op);

/* Appends @word single-quoted for /bin/sh ('\'' for each embedded quote). */
void sandstep_render_quote (GString *out, const char *word);

G_END_DECLS
