/* sandstepd-e2b-code.h: the code interpreter's runCode (npm @e2b/code-interpreter) on sandstepd's sandboxes
 * (sandstepd-e2b-code.c; the worker's end is sandstepd-e2b-code-worker.c). */
#pragma once

#include "sandstepd-private.h"

G_BEGIN_DECLS

/* TRUE when @path is the code interpreter's (/execute, /contexts...), on the sandbox's port 49999. */
gboolean sandstepd_e2b_code_is_path (const char *path);
/* Answers a request of the code interpreter's, its key already checked. */
void sandstepd_handle_e2b_code (Request *req);

G_END_DECLS
