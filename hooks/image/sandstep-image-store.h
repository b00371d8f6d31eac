/* sandstep-image-store.h: the content-addressed blob and layer store.
 *
 * $SANDSTEP_IMAGE_DIR, else images/ in the state directory, shared by every
 * sandbox of that state directory:
 *
 *   store.lock              shared by every pull while it works, and by a provision until its sandbox is
 *                           among its image's users (sandstep_image_root_hold()); exclusive for gc
 *   locks/HEX.lock          flock()ed while one process fetches or unpacks the blob HEX: parallel pulls of
 *                           one image download it once, the others wait and find it there
 *   blobs/sha256/HEX        a blob, verified: written unnamed (O_TMPFILE) and linked here only once its
 *                           bytes match HEX, so a killed pull leaves nothing under this name
 *   layers/sha256/HEX/      the layer blob HEX unpacked, renamed here whole from layers/.tmp-HEX-*;
 *                           HEX.size beside it: its bytes on disk
 *   images/HEX.json         a pulled image: its manifest HEX, references, config, layers, size, last use
 *   images/HEX.users/       one file per sandbox using the image (the next piece): gc keeps those
 *
 * Leftovers of a killed unpack (layers/.tmp-*) are removed by the next pull
 * of that layer, under its lock, and by gc.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  char *dir;
  int dir_fd;
  int lock_fd;        /* store.lock: LOCK_SH, or LOCK_EX when opened for gc */
} SandstepImageStore;

/* $SANDSTEP_IMAGE_DIR, else images/ under the state directory. */
char *sandstep_image_store_default_dir (void);

/* Opens (creating) the store at @dir; @exclusive: wait until no pull works in it (gc). */
SandstepImageStore *sandstep_image_store_open (const char *dir, gboolean exclusive, GError **error);
void sandstep_image_store_free (SandstepImageStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepImageStore, sandstep_image_store_free)

/* Waits for the lock of @digest; returns its fd (close it to unlock) or -1. */
int sandstep_image_store_lock_digest (SandstepImageStore *store, const char *digest, GError **error);

gboolean sandstep_image_store_has_blob (SandstepImageStore *store, const char *digest);
/* With @digest's lock held: forgets the blob (a layer that cannot be unpacked is of no use to anyone). */
void sandstep_image_store_remove_blob (SandstepImageStore *store, const char *digest);
/* The verified blob @digest, open for reading, or -1 with SANDSTEP_IMAGE_ERROR_NOT_FOUND. */
int sandstep_image_store_open_blob (SandstepImageStore *store, const char *digest, GError **error);
/* The blob @digest read whole, at most @max bytes. */
GBytes *sandstep_image_store_read_blob (SandstepImageStore *store, const char *digest, gsize max, GError **error);

/* Writes one blob: bytes in, then commit checks the count and the digest and
 * only then gives the blob its name.  Freed uncommitted, nothing is left. */
typedef struct _SandstepImageBlobWriter SandstepImageBlobWriter;
/* @size: the size the manifest declares; more bytes than that are refused as they come. */
SandstepImageBlobWriter *sandstep_image_blob_writer_new (SandstepImageStore *store, const char *digest, guint64 size,
                                                         GError **error);
gboolean sandstep_image_blob_writer_write (SandstepImageBlobWriter *writer, const void *data, gsize len,
                                           GError **error);
guint64 sandstep_image_blob_writer_get_written (SandstepImageBlobWriter *writer);
/* Called as a blob's bytes arrive. */
typedef void (*SandstepImageBytesFunc) (guint64 done, gpointer data);
/* Streams the local file @fd (closed here) into @writer, for the sources that read files (a layout, an archive);
 * a read error names @what of the image @text. */
gboolean sandstep_image_blob_writer_write_fd (SandstepImageBlobWriter *writer, int fd, SandstepImageBytesFunc on_bytes,
                                              gpointer data, const char *text, const char *what, GError **error);
gboolean sandstep_image_blob_writer_commit (SandstepImageBlobWriter *writer, GError **error);
void sandstep_image_blob_writer_free (SandstepImageBlobWriter *writer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepImageBlobWriter, sandstep_image_blob_writer_free)

gboolean sandstep_image_store_has_layer (SandstepImageStore *store, const char *digest);
char *sandstep_image_store_layer_path (SandstepImageStore *store, const char *digest);
/* The bytes the unpacked layer @digest takes (0: not known). */
guint64 sandstep_image_store_layer_size (SandstepImageStore *store, const char *digest);
/* With @digest's lock held: removes what an earlier unpack of it left and
 * makes an empty directory to unpack into; returns its fd and name. */
int sandstep_image_store_begin_layer (SandstepImageStore *store, const char *digest, char **out_tmp_name,
                                      GError **error);
/* Gives the unpacked directory @tmp_name its name, and records its @size. */
gboolean sandstep_image_store_commit_layer (SandstepImageStore *store, const char *digest, const char *tmp_name,
                                            guint64 size, GError **error);
void sandstep_image_store_abort_layer (SandstepImageStore *store, const char *tmp_name);

typedef struct {
  char *digest;           /* the manifest's */
  GPtrArray *references;  /* char *, as `sandstep images` shows them */
  char *config;           /* the config blob's digest */
  GPtrArray *layers;      /* char *: layer blob digests, lowest first */
  guint64 size;           /* blobs and unpacked layers, bytes on disk */
  gint64 pulled;          /* seconds since the epoch */
  gint64 last_used;
} SandstepImageRecord;

SandstepImageRecord *sandstep_image_record_new (void);
void sandstep_image_record_free (SandstepImageRecord *record);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepImageRecord, sandstep_image_record_free)

/* Saves @record, adding the references an earlier record of the digest had. */
gboolean sandstep_image_store_save_record (SandstepImageStore *store, const SandstepImageRecord *record,
                                           GError **error);
/* Every image of the store (SandstepImageRecord *), oldest use first. */
GPtrArray *sandstep_image_store_list (SandstepImageStore *store, GError **error);

/* The handles of the sandboxes that use the image @digest (images/HEX.users/), sorted; never NULL. */
GPtrArray *sandstep_image_store_users (SandstepImageStore *store, const char *digest);

/* The digest of the image pulled as @reference (a SandstepImageRef's text), the last one pulled under it if
 * several were; NULL if none. */
char *sandstep_image_store_find_reference (SandstepImageStore *store, const char *reference);

/* Removes every image no sandbox uses, then every blob and layer no image
 * left names, and what killed pulls left.  Needs a store opened exclusive. */
gboolean sandstep_image_store_gc (SandstepImageStore *store, guint *out_images, guint64 *out_bytes, GError **error);

G_END_DECLS
