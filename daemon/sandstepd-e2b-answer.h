/* sandstepd-e2b-answer.h: what E2B's platform API (sandstepd-e2b.c) and envd (sandstepd-envd*.c) answer with
 * (sandstepd-e2b-answer.c, below both). */
#pragma once

#include "sandstepd-private.h"

G_BEGIN_DECLS

/* The answer @data (taken; NULL: none) of type @content_type. */
void sandstepd_e2b_answer (Request *req, guint status, const char *content_type, char *data, gsize len);
/* An error in E2B's shape, {"code": STATUS, "message": ...}. */
void sandstepd_e2b_error (Request *req, guint status, const char *format, ...) G_GNUC_PRINTF (3, 4);
void sandstepd_e2b_backend_error (Request *req, const GError *error);
/* Why @id names no sandbox: @malformed, not a sandstep handle; else gone or another owner's (one text for both). */
char *sandstepd_e2b_not_found (const char *id, gboolean malformed);
/* The owner of sandbox @handle when @req's key covers it, else NOT_FOUND (another owner's is not found either);
 * reads the state directory: not on the main loop. */
char *sandstepd_e2b_owner_of (Request *req, const char *handle, GError **error);
/* The holder that E2B's envd calls and runCode claim a sandbox of @owner as: one for all, so that they run beside
 * each other (SandstepIdentity.beside). */
char *sandstepd_e2b_holder (const char *owner);
/* The sandboxes @req's key covers; with @handle, that one only. */
GPtrArray *sandstepd_e2b_covered (Request *req, const char *handle, GError **error);

G_END_DECLS
