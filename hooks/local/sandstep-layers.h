/* sandstep-layers.h: forks and checkpoints, over a store of frozen layers.
 *
 * A sandbox's files become layers the first time it is forked or checkpointed: its writable files are frozen
 * into a layer (renamed, never copied), and it goes on over that layer with new, empty writable layers of its
 * own, as overlayfs (sandstep-jail-plan.c).  A fork is a new sandbox over the same frozen layers; a checkpoint
 * is the list of layers at that moment, which a rollback makes the sandbox's again.  So both cost a few
 * renames whatever the sandbox holds, and a layer takes on disk only what changed before it was frozen.
 *
 *   STATE/layers/<id>/          tree/ (workspace/, tmp/) and root/ (an image root's changes), read-only from
 *                               the moment they are frozen
 *   STATE/layers/<id>.users/    an empty file per sandbox that names the layer (in its stack or a checkpoint):
 *                               the layer goes with its last user
 *   STATE/layers/.tmp-<id>      a layer being made
 *   sandboxes/<handle>/freezing the id while the sandbox's files move into that layer: a freeze killed part way
 *                               is finished or undone by sandstep_layers_recover()
 *
 * Every function here is called by the holder of the sandbox's claim, with its supervisor stopped (a live
 * overlay's layers are never renamed under it).
 */
#pragma once

#include <glib.h>

#include "sandstep-store.h"

G_BEGIN_DECLS

/* The host directory of layer @id. */
char *sandstep_layers_path (SandstepStore *store, const char *id);

/* Finishes or undoes a freeze of @record's sandbox that was killed part way; TRUE when there was none. */
gboolean sandstep_layers_recover (SandstepStore *store, SandstepRecord *record, GError **error);

/* Whether a layered sandbox's writable layers hold nothing: nothing changed since its top layer was frozen, and a
 * fork or checkpoint can share that one (without this, each would stack an empty layer). */
gboolean sandstep_layers_unchanged (SandstepStore *store, const SandstepRecord *record);

/* Freezes @record's writable files into a new layer, which goes on top of record->layers, and gives the sandbox
 * new, empty writable layers; saves the record. */
gboolean sandstep_layers_freeze (SandstepStore *store, SandstepRecord *record, GError **error);

/* Makes @layers (top first) @record's whole stack again, with empty writable layers: its writable files and
 * every layer above go (a rollback); saves the record. */
gboolean sandstep_layers_reset (SandstepStore *store, SandstepRecord *record, char **layers, GError **error);

/* Names @handle among the users of each of @layers. */
gboolean sandstep_layers_add_user (SandstepStore *store, char **layers, const char *handle, GError **error);

/* Every layer @record names (its stack and its checkpoints), once each. */
GPtrArray *sandstep_layers_of (const SandstepRecord *record);

/* Drops @handle from the users of each of @layers, removing the layers it was the last user of. */
void sandstep_layers_drop_user (SandstepStore *store, GPtrArray *layers, const char *handle);

/* Removes the layers no sandbox uses any more (users gone without a word: a state directory's damage, a kill
 * between a destroy and its drop), and what a killed freeze left in layers/.tmp-*.  For gc. */
void sandstep_layers_sweep (SandstepStore *store);

G_END_DECLS
