/* sandstep-image-error.h: what can go wrong between an image reference and an unpacked layer store.
 *
 * One domain for images (hooks/image/): references, registries, blobs,
 * layers.  Codes are stable: tests and scripts match on them, so a new code
 * goes at the end.  Messages name what failed, the value in quotes, and what
 * to do next.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

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

GQuark sandstep_image_error_quark (void);

G_END_DECLS
