/* sandstep-wire.h: what sandstepd, its workers and its clients say, encoded and read in one place.
 *
 * The backend interface over HTTP (bodies are JSON objects unless said
 * otherwise; H is the handle the server knows, "sandstep-<16 hex>"):
 *
 *   GET  /v1/health                                         {"sandstepd": VERSION}
 *   POST /v1/sandboxes              {owner, holder, spec}    {"handle", "existing"}
 *   POST /v1/gc                     {run, expired_only, broken}      {"destroyed": [...], "error"}
 *   POST /v1/list                   {run, owner}             {"sandboxes": [an entry of `sandstep list --json`]}
 *   POST /v1/sandboxes/H/describe   {owner, holder}          the record
 *   POST /v1/sandboxes/H/release    {owner, holder, keep_s}  {"destroyed"}
 *   POST /v1/sandboxes/H/destroy    {owner, holder}          {}
 *   POST /v1/sandboxes/H/claim      {owner, holder}          JSON lines: {"claim", "remaining_seconds", "spec"}, then
 *                                                            keepalives; {"ended": why} if the server ends it
 *   POST /v1/sandboxes/H/release-claim {claim}               {} once the claim is gone
 *   POST /v1/sandboxes/H/run        {claim, command, timeout_s}  JSON lines: {"stream": 1|2, "data": base64} ...,
 *                                                            then {"exit", "timed_out", ...[, "notices": [...]]}
 *                                                            or {"error": {...}}; notices: the egress refusals
 *   POST /v1/sandboxes/H/claim-run  one JSON line {owner, holder, command, timeout_s}, then the command's
 *                                   stdin, raw (SANDSTEP_RUN_STEP_TYPE): claim, run and release in one
 *                                   exchange, the claim held by it.  JSON lines: the claim's first line,
 *                                   {"stream": 1|2, "data"} ..., then the result (as run's) or {"error"}, sent once the
 *                                   claim is gone; a refusal before the command starts is a plain error
 *   POST /v1/sandboxes/H/read       {claim, path, max_bytes} the file's bytes
 *   POST /v1/sandboxes/H/write?path=P   (X-Sandstep-Claim)  the bytes to write; answers {}
 *   POST /v1/sandboxes/H/list       {claim, path}            {"entries": [{"name", "is_dir"[, "name_b64"]}]}
 *                                                            (name_b64: the bytes of a name that is not UTF-8)
 *   POST /v1/sandboxes/H/put?dest=D&name=N&contents=0|1 (X-Sandstep-Claim)  entries (daemon/sandstepd.h); {}
 *   POST /v1/sandboxes/H/export     {claim, path, max_bytes} JSON lines: {"data": base64} ..., {"done": true} or {"error"}
 *
 * A streamed answer's empty lines are keepalives.  sandstepd hands each
 * claimed call to the claim's worker as the same object without "claim",
 * with "op" (attach, run, read, write, put, list, export, detach) and "id";
 * the worker answers with the reply object below, or an error line.
 *
 * An error crosses the wire as one JSON object:
 *   {"code": "not-owner", "message": "...", "hint": "...",
 *    "domain": "sandstep-sandbox-error-quark", "error_code": 2, "exit_status": 67}
 * with the HTTP status of its kind (sandstep-error.c); "code" and "hint" are
 * for people and scripts, "domain" and "error_code" rebuild the very GError
 * the server's backend raised, so the client exits with the same status.  A
 * busy sandbox's error adds "holder", a file too large "size" and "limit".
 * Readers ignore members they do not know.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "sandstep-backend.h"

G_BEGIN_DECLS

#define SANDSTEP_API_PREFIX "/v1"
/* Header naming the claim on raw-body requests (write, put); JSON requests carry "claim". */
#define SANDSTEP_CLAIM_HEADER "X-Sandstep-Claim"
/* The body of a claim-run: a JSON line, then the bytes of the command's stdin. */
#define SANDSTEP_RUN_STEP_TYPE "application/x-sandstep-run"
/* Seconds between keepalive lines on long responses (claims, commands, exports). */
#define SANDSTEP_KEEPALIVE_S 10

/* ---- errors ---- */

/* The error object for @error, its facts included. */
JsonNode *sandstep_wire_error_to_json (const GError *error);
/* The same with another code and hint: a refusal of the protocol (no claim,
 * a bad body) rather than of a backend. */
JsonNode *sandstep_wire_refusal_to_json (const GError *error, const char *code, const char *hint);
/* The HTTP status for @error's kind. */
guint sandstep_wire_error_status (const GError *error);

/* The GError an error object stands for (never NULL); an object without a
 * message says that the server answered @http_status without saying why. */
GError *sandstep_wire_error_from_json (JsonNode *node, guint http_status);

/* ---- text ---- */

/* The largest JSON document any peer may send (bodies, lines, worker messages). */
#define SANDSTEP_WIRE_MAX_DOCUMENT (64 * 1024 * 1024)

/* Parses @data as one JSON object, its size and depth checked first (sandstep-json.h). */
JsonObject *sandstep_wire_parse_object (const char *data, gsize len, GError **error);
/* @object as compact JSON, and as one line of a streamed answer (ending in "\n"). */
char *sandstep_wire_to_text (JsonObject *object, gsize *out_len);
char *sandstep_wire_to_line (JsonObject *object, gsize *out_len);

/* ---- members, checked: the messages name the member ---- */

/* A string member that is not empty. */
gboolean sandstep_wire_get_string (JsonObject *object, const char *name, const char **out, GError **error);
/* A number member >= 0 and finite (absent or null: @fallback). */
gboolean sandstep_wire_get_number (JsonObject *object, const char *name, double fallback, double *out,
                                   GError **error);

/* ---- requests ---- */

/* {owner, holder}: describe, destroy, claim (and a worker's attach, with "handle"). */
JsonObject *sandstep_wire_identity_request (const SandstepIdentity *who);
/* The strings stay @object's. */
gboolean sandstep_wire_read_identity (JsonObject *object, SandstepIdentity *out, GError **error);
/* {handle, owner, holder}: sandstepd asks its worker to attach. */
JsonObject *sandstep_wire_attach_request (const char *handle, const SandstepIdentity *who);
/* {owner, holder, spec} */
JsonObject *sandstep_wire_provision_request (const SandstepIdentity *who, const SandstepSpec *spec);
/* {owner, holder, keep_s} */
JsonObject *sandstep_wire_release_request (const SandstepIdentity *who, gint64 keep_s);
/* {run, expired_only}: @run NULL for every run. */
JsonObject *sandstep_wire_gc_request (const char *run, gboolean expired_only, gboolean broken);
gboolean sandstep_wire_read_gc_request (JsonObject *object, const char **out_run, gboolean *out_expired_only,
                                        gboolean *out_broken,
                                        GError **error);
/* {claim} */
JsonObject *sandstep_wire_release_claim_request (const char *claim);
/* {claim, command, timeout_s}; @claim NULL for a worker. */
JsonObject *sandstep_wire_run_request (const char *claim, const char *command, double timeout_s);
gboolean sandstep_wire_read_run_request (JsonObject *object, const char **out_command, double *out_timeout_s,
                                         GError **error);
/* {owner, holder, command, timeout_s}: the first line of a claim-run (read with
 * sandstep_wire_read_identity() and sandstep_wire_read_run_request()). */
JsonObject *sandstep_wire_run_step_request (const SandstepIdentity *who, const char *command, double timeout_s);
/* {claim, path[, max_bytes]}: read, list, export; @max_bytes < 0 leaves it out; @claim NULL for a worker. */
JsonObject *sandstep_wire_path_request (const char *claim, const char *path, gint64 max_bytes);
/* Forks and checkpoints under a claim: {"claim", "holder", "count"} and {"claim", "name"}; the answers
 * {"handles": [...]} and {"names": [...]}. */
JsonObject *sandstep_wire_claimed_request (const char *claim);
JsonObject *sandstep_wire_fork_request (const char *claim, const char *holder, guint count);
gboolean sandstep_wire_read_fork_request (JsonObject *object, const char **out_holder, guint *out_count,
                                          GError **error);
JsonObject *sandstep_wire_name_request (const char *claim, const char *name);
JsonObject *sandstep_wire_strings (const char *member, GPtrArray *strings);
/* NULL when @member is not an array of strings. */
GPtrArray *sandstep_wire_read_strings (JsonObject *object, const char *member);
gboolean sandstep_wire_read_path_request (JsonObject *object, double default_max_bytes, const char **out_path,
                                          guint64 *out_max_bytes, GError **error);

/* {src, dest}: sandstepd asks its worker to put the tree it staged at @src. */
JsonObject *sandstep_wire_put_request (const char *src, const char *dest);

/* ---- replies ---- */

JsonObject *sandstep_wire_provision_reply (const char *handle, gboolean existing);
/* The handle, if the reply has one the server may give ("sandstep-..."). */
const char *sandstep_wire_read_provision_reply (JsonObject *object, gboolean *out_existing);
JsonObject *sandstep_wire_release_reply (gboolean destroyed);
gboolean sandstep_wire_read_release_reply (JsonObject *object);
/* {run, owner}, either null: what `sandstep list` asks. */
JsonObject *sandstep_wire_list_request (const char *run, const char *owner);
gboolean sandstep_wire_read_list_request (JsonObject *object, const char **out_run, const char **out_owner,
                                          GError **error);
/* One sandbox as `sandstep list --json` prints it: handle, owner,
 * provisioned_by, held_by, state, created, expires (unix seconds),
 * age_seconds, remaining_seconds, size_bytes, problem (null unless broken). */
JsonNode *sandstep_wire_list_entry_to_json (const SandstepListEntry *entry, gint64 now);
/* {"sandboxes": [...]} of SandstepListEntry. */
JsonObject *sandstep_wire_list_reply (GPtrArray *entries);
/* The entries of a list reply, their handles prefixed with @server (when
 * not NULL) as a client names them; entries it cannot read are left out. */
GPtrArray *sandstep_wire_read_list_reply (JsonObject *object, const char *server);

/* {"destroyed": [...], "error": null or an error object}: gc goes on past a failure. */
JsonObject *sandstep_wire_gc_reply (GPtrArray *destroyed, const GError *error);
/* Appends each local handle destroyed to @destroyed, prefixed with @server and "/" when it is not NULL;
 * returns the reply's error, if any. */
GError *sandstep_wire_read_gc_reply (JsonObject *object, const char *server, GPtrArray *destroyed);

/* {claim, remaining_seconds, spec}: a claim's first line (a worker's reply to attach has no claim). */
JsonObject *sandstep_wire_claim (const char *claim, double remaining_s, const SandstepSpec *spec);
/* FALSE when @object confirms no claim.  @out_spec: a new spec (empty when the line has none). */
gboolean sandstep_wire_read_claim (JsonObject *object, const char **out_claim, double *out_remaining_s,
                                   SandstepSpec **out_spec);
/* The claim's first line from a worker's reply to attach, naming @claim. */
JsonObject *sandstep_wire_claim_line (JsonObject *attach_reply, const char *claim);
/* {"ended": why}: the server ended the claim. */
JsonObject *sandstep_wire_ended_line (const char *why);

/* {exit, timed_out, applied_timeout_s, clamped, memory_limit_hit, pids_limit_hit} */
JsonObject *sandstep_wire_run_result (const SandstepRunResult *result);
/* FALSE when @object is not a command's result. */
gboolean sandstep_wire_read_run_result (JsonObject *object, SandstepRunResult *out);
/* The host-side notices a command got while it ran (egress refusals,
 * SandstepRunRequest.on_notice), as the result's "notices" array: a
 * sandstepd sends them with the result, and an older peer ignores them. */
void sandstep_wire_set_notices (JsonObject *result, GPtrArray *notices);
/* Calls @func for each of @result's notices, in order. */
void sandstep_wire_read_notices (JsonObject *result, void (*func) (const char *notice, gpointer data), gpointer data);

/* {"entries": [{"name", "is_dir"}]} of SandstepDirEntry. */
JsonObject *sandstep_wire_entries (GPtrArray *entries);
/* Entries without a name are skipped. */
GPtrArray *sandstep_wire_read_entries (JsonObject *object);

/* ---- a put's body ---- */

/* One entry of the host tree a put sends: a JSON line each, a file's bytes
 * (exactly .size) after its line; the first has path "" (the top), and
 * {"end": true} closes the body (read by daemon/sandstepd-upload.c). */
typedef struct {
  const char *path;           /* relative to the top; "" for the top itself */
  const char *type;           /* "dir", "file" or "link" */
  guint mode;                 /* permission bits; absent: 0644 */
  gint64 size;                /* a file's bytes; < 0: not a file */
  const char *target;         /* a link's; NULL otherwise */
} SandstepWirePutEntry;

char *sandstep_wire_put_entry_line (const SandstepWirePutEntry *entry, gsize *out_len);
char *sandstep_wire_put_end_line (gsize *out_len);
/* FALSE for the end line; the strings stay @object's (NULL when absent). */
gboolean sandstep_wire_read_put_entry (JsonObject *object, SandstepWirePutEntry *out);

/* ---- the lines of a streamed answer ---- */

/* {"stream": 1|2, "data": base64} of a command's output, or {"data": base64} of an export (@stream 0). */
char *sandstep_wire_data_line (int stream, const void *data, gsize len, gsize *out_len);
/* The bytes of a data line (its stream in @out_stream, 1 when absent), or NULL for another line. */
GBytes *sandstep_wire_read_data_line (JsonObject *object, int *out_stream);
/* {"error": {...}} */
JsonObject *sandstep_wire_error_line (const GError *error);
/* The error of an error line, or NULL for another line. */
GError *sandstep_wire_read_error_line (JsonObject *object);
/* {"done": true}: an export ended. */
JsonObject *sandstep_wire_done_line (void);
gboolean sandstep_wire_is_done_line (JsonObject *object);

G_END_DECLS
