/* sandstep-image-error.c: the images error domain. */
#include "sandstep-image-error.h"

G_DEFINE_QUARK (sandstep-image-error-quark, sandstep_image_error)
