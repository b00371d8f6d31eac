/* sandstep-image-operators.h: the operators of images (op-pull.c, op-images.c), for the table. */
#pragma once

#include "sandstep-operator.h"

G_BEGIN_DECLS

gboolean sandstep_op_pull (SandstepInvocation *invocation, int *out_exit, GError **error);
/* TRUE in the lean helper: pulls run in sandstep-net, with the registry client and zstd. */
gboolean sandstep_op_pull_needs_net (SandstepInvocation *invocation);
gboolean sandstep_op_images (SandstepInvocation *invocation, int *out_exit, GError **error);
/* `sandstep gc`: --images reclaims images no sandbox uses, else sandstep_op_gc(). */
gboolean sandstep_op_gc_images (SandstepInvocation *invocation, int *out_exit, GError **error);

G_END_DECLS
