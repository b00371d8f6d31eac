/* sandstep-image-root.h: what the local backend (hooks/local/) needs of the image store, for a sandbox whose
 * root is an image.
 *
 * The image store links only where pulls can run (the helper and sandstep-net); the local backend references
 * these weakly, and a program without them refuses an image sandbox instead of starting it without its root.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The digest of the image @reference (skopeo's transport names), pulled into the default store unless it is
 * there already under that reference; @out_reference: the reference as the store names it.  For a provision
 * that names only the reference (one that came through sandstepd): a registry's only, as oci:, oci-archive:
 * and docker-archive: name files of the client's machine, and this host's are not the client's to read. */
char *sandstep_image_root_pull (const char *reference, char **out_reference, GError **error);

/* A shared hold on the default store (its store.lock, LOCK_SH; close the fd to let go): `gc --images`, which
 * takes it exclusive, waits until a provision that pulled or found its image has named its sandbox among the
 * image's users, so it never removes an image between the two.  -1 with @error set when the store cannot be
 * opened. */
int sandstep_image_root_hold (GError **error);

/* The image @digest of the default store: its unpacked layers' directories (absolute, lowest first) into
 * @out_layers, and its config's Env ("NAME=VALUE") into @out_env. */
gboolean sandstep_image_root_resolve (const char *digest, GPtrArray *out_layers, GPtrArray *out_env, GError **error);

/* Names sandbox @handle in images/HEX.users/ of the image @digest (so that `gc --images` keeps it), or, with
 * !@in_use, takes the name out: of every image's users when @digest is NULL (a sandbox whose record cannot be
 * read, destroyed). */
gboolean sandstep_image_root_set_user (const char *digest, const char *handle, gboolean in_use, GError **error);

G_END_DECLS
