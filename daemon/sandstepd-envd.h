/* sandstepd-envd.h: what sandstepd-envd.c, sandstepd-envd-jail.c and sandstepd-envd-commands.c share
 * (E2B's envd). */
#pragma once

#include "sandstepd-private.h"

G_BEGIN_DECLS

/* ---- sandstepd-envd.c: a call that claims its sandbox, a command or a file operation ---- */

typedef enum {
  ENVD_START,               /* process.Process/Start */
  ENVD_READ,                /* GET /files */
  ENVD_WRITE,               /* POST /files */
  ENVD_LIST,                /* filesystem.Filesystem/ListDir */
  ENVD_STAT,                /* filesystem.Filesystem/Stat (a command, as the three below) */
  ENVD_REMOVE,              /* filesystem.Filesystem/Remove */
  ENVD_MOVE,                /* filesystem.Filesystem/Move */
  ENVD_MKDIR,               /* filesystem.Filesystem/MakeDir */
  ENVD_PS,                  /* process.Process/List */
  ENVD_SIGNAL,              /* process.Process/SendSignal */
} EnvdOp;

typedef struct {
  int refs;
  Request *req;             /* ref */
  EnvdOp op;
  Lease *lease;             /* ref, once a worker is taken */
  char *command;            /* start */
  JsonObject *process;      /* start: StartRequest.process, for commands.list */
  char *tag;
  JsonObject *selector;     /* signal: ProcessSelector */
  double timeout_s;
  char *path;               /* the files' */
  char *dest;               /* move: where to */
  int fd;                   /* write: the bytes to write; -1 */
  char *owner;
  char *holder;
  GError *error;
  /* A file operation's answer, given once its claim is gone (the next call must find the sandbox free). */
  guint status;
  const char *content_type;
  GBytes *answer;
  /* Stat, Remove, Move, MakeDir: a command in the jail, its stdout and stderr (memfds, read once it ended); the
   * Connect code of its refusal when no GError domain has it (already_exists). */
  int out_fd;
  int err_fd;
  const char *fail_code;
} Envd;

Envd *sandstepd_envd_ref (Envd *job);
void sandstepd_envd_unref (Envd *job);
/* The file operation is done (@error, or its answer set): the claim goes, then the answer. */
void sandstepd_envd_files_finish (Envd *job, const GError *error);
/* @job's answer, given once its claim is gone: @node as JSON, HTTP 200. */
void sandstepd_envd_answer_json (Envd *job, JsonNode *node);
/* EntryInfo of filesystem.proto, as protobuf's JSON writes it. */
JsonObject *sandstepd_envd_entry_info (const char *dir, const char *name, gboolean is_dir);

/* ---- sandstepd-envd-jail.c: Stat, Remove, Move, MakeDir as commands in the jail ---- */

/* Runs @job (its lease attached) as a command in its sandbox, then answers it. */
void sandstepd_envd_fs_start (Envd *job);
/* Ends @req, the stream of a command that was killed, as envd ends a killed command's (an end event that says
 * so); what the stream would have written after is dropped. */
void sandstepd_envd_end_killed (Request *req);

/* ---- sandstepd-envd-commands.c: the commands that run, by pid ---- */

/* Registers the command that @lease runs in @req's sandbox, its output streamed to @req (both kept, as
 * @process, StartRequest.process) with @tag (NULL: none), until @lease ends; returns its pid, which the SDK
 * names it by. */
guint32 sandstepd_envd_command_add (Request *req, JsonObject *process, const char *tag, Lease *lease);
/* ListResponse of process.proto: the commands of @handle that still run. */
JsonObject *sandstepd_envd_command_list (const char *handle);
/* Kills the command of @handle that @selector ({"pid": N} or {"tag": T}) names; FALSE when none runs. */
gboolean sandstepd_envd_command_kill (const char *handle, JsonObject *selector);

G_END_DECLS
