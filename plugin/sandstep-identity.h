/* sandstep-identity.h: the run id, the owner and the holder of a make run.
 *
 * run    SANDSTEP_RUN (command line or environment), else TOP/.sandstep/run,
 *        else a new id stored there (not under -n or -q); a stored run ends
 *        when the top make exits 0, so the next make starts a new one.
 * owner  DAG/RUN, DAG = SANDSTEP_DAG, else the top directory's name.
 * holder OWNER/PATH, PATH = the target relative to the top directory.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Where the run id of a tree is kept, relative to its top directory. */
#define SANDSTEP_RUN_DIR ".sandstep"
#define SANDSTEP_RUN_FILE ".sandstep/run"
/* Prefix of the run id a dry run (-n, -q) shows when no run is stored yet. */
#define SANDSTEP_DRY_RUN_PREFIX "dry-"

/* A run id is 1-128 of [A-Za-z0-9._:@+-] and does not start with '.' or '-'. */
gboolean sandstep_run_id_check (const char *run, const char *origin, GError **error);

/* A new id: UTC time and 24 random bits, e.g. 20261129T214000-1a2b3c. */
char *sandstep_run_id_new (void);

/* The run id stored under @top, or a new one.  A new one is stored (atomically;
 * when another make stored one first, that one wins) unless @dry, in which case
 * it carries SANDSTEP_DRY_RUN_PREFIX and nothing is written. */
char *sandstep_run_id_load_or_create (const char *top, gboolean dry, GError **error);

/* Ends the run @run stored under @top (a make of it succeeded): removes
 * TOP/.sandstep/run if it still holds @run, so the next make starts a new
 * run.  Quiet: it runs as make exits. */
void sandstep_run_id_finish (const char *top, const char *run);

/* The DAG name: @dag if non-empty, else the base name of @top. */
char *sandstep_dag_name (const char *dag, const char *top, GError **error);

/* PATH of the holder: @target (may be empty: parse time) in directory @curdir,
 * relative to @top, without "." and ".." components; "." for the top itself.
 * Paths outside @top stay absolute. */
char *sandstep_holder_path (const char *top, const char *curdir, const char *target);

G_END_DECLS
