/* sandstep-options-private.h: the common options (sandstep-options.c), for the operator table. */
#pragma once

#include "sandstep-operator.h"

extern const SandstepOption sandstep_no_options[];
extern const SandstepOption sandstep_identity_options[];  /* every operator */
extern const SandstepOption sandstep_handle_options[];    /* SANDSTEP_OP_HANDLE */
extern const SandstepOption sandstep_claim_options[];     /* SANDSTEP_OP_CLAIMS */
