/* sandstep-image-pull.h: an image reference to a verified, unpacked set of layers in the store.
 *
 * The manifest is fetched (an index picks this host's platform), then the
 * config and each layer blob: each under its digest's lock, fetched only when
 * the store lacks it, verified before it is named, and each layer unpacked
 * once into the store.  The layers go four at a time, each in a thread of its
 * own (they share the --max-image-size budget); the progress callback is
 * called from those threads, one call at a time.  The image's record is written last: a pull killed at
 * any moment leaves no record, no named blob that failed its digest, and no
 * named layer half unpacked.
 */
#pragma once

#include <glib.h>

#include "sandstep-image-ref.h"
#include "sandstep-image-source.h"
#include "sandstep-image-store.h"

G_BEGIN_DECLS

/* --max-image-size: compressed blobs together, and unpacked layers together (sandstep-image-unpack.h). */
#define SANDSTEP_IMAGE_DEFAULT_MAX_SIZE (G_GUINT64_CONSTANT (16) << 30)

typedef enum {
  SANDSTEP_PULL_LAYER_PRESENT,  /* the store had it: nothing fetched */
  SANDSTEP_PULL_LAYER_BYTES,    /* bytes of it arrived */
  SANDSTEP_PULL_LAYER_DONE,     /* fetched, verified and unpacked */
} SandstepPullEventKind;

typedef struct {
  SandstepPullEventKind kind;
  const char *digest;
  guint index;                  /* 0-based, of n_layers */
  guint n_layers;
  guint64 done;                 /* bytes fetched so far */
  guint64 total;                /* the layer blob's size */
} SandstepPullEvent;

typedef void (*SandstepPullProgress) (const SandstepPullEvent *event, gpointer data);

typedef struct {
  guint64 max_size;             /* 0: SANDSTEP_IMAGE_DEFAULT_MAX_SIZE */
  SandstepPullProgress progress;
  gpointer data;
} SandstepPullOptions;

/* The source for @ref: a layout, or a registry when sandstep-net's libsoup
 * part is linked (else SANDSTEP_IMAGE_ERROR_UNSUPPORTED). */
SandstepImageSource *sandstep_image_source_new (const SandstepImageRef *ref, GError **error);

/* TRUE in a program that links the registry client (sandstep-net). */
gboolean sandstep_image_has_registry_client (void);

/* Pulls @ref into @store; returns the manifest's digest. */
char *sandstep_image_pull (SandstepImageStore *store, const SandstepImageRef *ref, const SandstepPullOptions *options,
                           GError **error);

/* This host's platform as an index names it: "linux/amd64", "linux/arm/v7". */
const char *sandstep_image_host_platform (void);

G_END_DECLS
