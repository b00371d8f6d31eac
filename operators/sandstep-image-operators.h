/* sandstep-image-operators.h: the operators of images (op-pull.c, op-images.c), for the table. */
#pragma once

#include "sandstep-operator.h"

G_BEGIN_DECLS

gboolean sandstep_op_pull (SandstepInvocation *invocation, int *out_exit, GError **error);
/* TRUE in the lean helper: pulls run in sandstep-net, with the registry client and zstd. */
gboolean sandstep_op_pull_needs_net (SandstepInvocation *invocation);
/* Pulls the image @text (a reference; @max_text: --max-image-size or NULL) into the default store, progress on
 * stderr; returns its digest, and in @out_reference the reference as the store names it. */
char *sandstep_op_pull_image (const char *text, const char *max_text, gboolean quiet_present, char **out_reference,
                              GError **error);
/* `sandstep provision`: with --image, it pulls, so it too runs in sandstep-net. */
gboolean sandstep_op_provision_needs_net (SandstepInvocation *invocation);
gboolean sandstep_op_images (SandstepInvocation *invocation, int *out_exit, GError **error);
/* `sandstep gc`: --images reclaims images no sandbox uses, else sandstep_op_gc(). */
gboolean sandstep_op_gc_images (SandstepInvocation *invocation, int *out_exit, GError **error);

G_END_DECLS
