/* sandstepd-envd.h: what the files of E2B's envd share.  Their calls go one way: sandstepd-envd.c ->
 * sandstepd-envd-jail.c, sandstepd-envd-commands.c -> sandstepd-envd-job.c -> sandstepd-envd-connect.c
 * (and sandstepd-e2b-answer.c and sandstepd-envd-body.c below them all), sandstepd-envd-watch.c beside
 * sandstepd-envd-commands.c; none calls a file above it. */
#pragma once

#include "sandstepd-private.h"

G_BEGIN_DECLS

/* ---- sandstepd-envd-job.c: a call that claims its sandbox, a command or a file operation ---- */

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
  ENVD_CONNECT,             /* process.Process/Connect */
  ENVD_INPUT,               /* process.Process/SendInput */
  ENVD_CLOSE_STDIN,         /* process.Process/CloseStdin */
  ENVD_FORK,                /* a fork of the sandbox, for E2B's snapshots (sandstepd-e2b.c) */
  ENVD_WATCH,               /* filesystem.Filesystem/WatchDir: the claim only opens the directory */
} EnvdOp;

/* What a fork gives back instead of an answer: the fork's handle, or @error. */
typedef void (*EnvdForked) (Request *req, const char *handle, const GError *error, gpointer data);

typedef struct {
  int refs;
  Request *req;             /* ref */
  EnvdOp op;
  Lease *lease;             /* ref, once a worker is taken */
  char *command;            /* start */
  JsonObject *process;      /* start: StartRequest.process, for commands.list */
  char *tag;
  JsonObject *selector;     /* signal, connect, input, close-stdin: ProcessSelector */
  gboolean stdin;           /* start: the command reads a pipe that SendInput writes */
  GBytes *input;            /* input: the bytes for the command's stdin */
  char *fork_holder;        /* fork: the holder of the fork */
  char *fork_handle;        /* fork: the fork made */
  EnvdForked forked;        /* fork: called once (the claim gone), instead of an answer */
  gpointer forked_data;
  GDestroyNotify forked_destroy;
  double timeout_s;
  char *path;               /* the files' */
  char *dest;               /* move: where to */
  int fd;                   /* write: the bytes to write; -1 */
  GPtrArray *more;          /* write: the body's other files (EnvdFile), written after it in order; NULL */
  JsonArray *written;       /* write: the files written so far, as the answer lists them; NULL */
  gboolean recursive;       /* watch: its subdirectories too */
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

/* A new job of @op for @req, one ref. */
Envd *sandstepd_envd_new (Request *req, EnvdOp op);
Envd *sandstepd_envd_ref (Envd *job);
void sandstepd_envd_unref (Envd *job);
/* @job's error before it streamed anything, as a streaming call (Start) or a unary call answers it. */
void sandstepd_envd_fail (Envd *job, const char *code, const char *message);
/* The file operation is done (@error, or its answer set): the claim goes, then the answer. */
void sandstepd_envd_files_finish (Envd *job, const GError *error);
/* @job's answer, given once its claim is gone: @node as JSON, HTTP 200. */
void sandstepd_envd_answer_json (Envd *job, JsonNode *node);
/* EntryInfo of filesystem.proto, as protobuf's JSON writes it. */
JsonObject *sandstepd_envd_entry_info (const char *dir, const char *name, gboolean is_dir);

/* Forks sandbox @handle for @holder (of the sandbox's owner) under a claim of its own, as a step's fork does, once
 * the key of @req covers the sandbox; then calls @forked (its claim gone), which answers @req. */
void sandstepd_envd_fork (Request *req, const char *handle, const char *holder, EnvdForked forked, gpointer data,
                          GDestroyNotify destroy);

/* ---- sandstepd-envd-body.c: the files of a POST /files body ---- */

/* One file to write: its path as the client named it, and its bytes (a part of the body, or what it unpacked to). */
typedef struct {
  char *path;
  GBytes *data;
} EnvdFile;

void sandstepd_envd_file_free (EnvdFile *file);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (EnvdFile, sandstepd_envd_file_free)

/* The files of @req's POST /files body (of EnvdFile, in order; one at least), @query_path (or NULL) naming a
 * single one; or NULL, with the HTTP status to answer in @out_status. */
GPtrArray *sandstepd_envd_body_files (Request *req, const char *query_path, guint *out_status, GError **error);
/* A memfd (close-on-exec, at offset 0) holding @file's bytes, for a worker's write; or -1. */
int sandstepd_envd_file_memfd (const EnvdFile *file, GError **error);

/* ---- sandstepd-envd-jail.c: Stat, Remove, Move, MakeDir as commands in the jail ---- */

/* Runs @job (its lease attached) as a command in its sandbox, then answers it. */
void sandstepd_envd_fs_start (Envd *job);

/* ---- sandstepd-envd-watch.c: WatchDir, on the daemon's one inotify instance ---- */

/* Streams to @req (WatchDir of sandbox @handle, the directory @path given by the client) a start event, then the
 * events of the directory @dir->dir (watched, not kept), of its subdirectories too when @recursive, until the
 * client goes, the directory goes, the root of the sandbox's files (@dir->root) moves or goes, the jail they live
 * in (@dir->jail, for a layered sandbox's) ends, or sandstepd_envd_watch_end_sandbox(); or answers the error that
 * kept it from watching.  Takes @dir's root; its keep and jail too once it watches (sandstep-backend.h); never
 * its dir. */
void sandstepd_envd_watch_start (Request *req, const char *handle, const char *path, SandstepWatchedDir *dir,
                                 gboolean recursive);
/* Ends the watches of sandbox @handle (it was killed), each stream with an error that says so. */
void sandstepd_envd_watch_end_sandbox (const char *handle);

/* ---- sandstepd-envd-commands.c: the commands that run, by pid ---- */

/* Registers the command that @lease runs in @req's sandbox, its output streamed to @req (both kept, as
 * @process, StartRequest.process) with @tag (NULL: none), until @lease ends; returns its pid, which the SDK
 * names it by. */
guint32 sandstepd_envd_command_add (Request *req, JsonObject *process, const char *tag, Lease *lease);
/* The command's stdin: @fd (taken; -1: none), the write end of the pipe it reads, for SendInput and CloseStdin. */
void sandstepd_envd_command_set_stdin (guint32 pid, int fd);
/* Streams to @req (a Connect of the command @selector names) a start event, then what the command's own stream
 * gets from now on, and its end; FALSE (nothing answered) when no such command runs. */
gboolean sandstepd_envd_command_connect (const char *handle, JsonObject *selector, Request *req);
/* Writes @data to the stdin of the command @selector names (@data NULL: closes its stdin); NULL when done, else
 * Connect's code of the failure, with @message (newly allocated) saying why and what to do. */
const char *sandstepd_envd_command_input (const char *handle, JsonObject *selector, GBytes *data, char **message);
/* ListResponse of process.proto: the commands of @handle that still run. */
JsonObject *sandstepd_envd_command_list (const char *handle);
/* Kills the command of @handle that @selector ({"pid": N} or {"tag": T}) names; FALSE when none runs. */
gboolean sandstepd_envd_command_kill (const char *handle, JsonObject *selector);

/* ---- sandstepd-envd-connect.c: Connect's envelopes, events and errors ---- */

#define CONNECT_STREAM_TYPE "application/connect+json"

/* The one message of a streaming request's @body (uncompressed, its length what the envelope says). */
JsonObject *sandstepd_envd_read_envelope (const guint8 *body, gsize len, GError **error);
/* Connect's code for a sandbox's or a request's error. */
const char *sandstepd_envd_connect_code (const GError *error);
/* The enveloped end of a stream: {} (@code NULL), or {"error": {@code, @message}}. */
char *sandstepd_envd_end_stream (const char *code, const char *message, gsize *out_len);
/* @message, enveloped (not the end of the stream). */
char *sandstepd_envd_message (JsonObject *message, gsize *out_len);
/* A process event, {"event": {@kind: @value}} (@value taken), enveloped. */
char *sandstepd_envd_event (const char *kind, JsonObject *value, gsize *out_len);
/* The end event of a command, {exitCode, exited, status}, then the end of the stream. */
char *sandstepd_envd_end_event (int exit_code, gboolean exited, const char *status, gsize *out_len);
/* A streaming call's error before anything streamed: HTTP 200 and the error in the end of the stream. */
void sandstepd_envd_answer_stream_error (Request *req, const char *code, const char *message);
/* A unary call's error: Connect's HTTP status for @code and {"code", "message"}. */
void sandstepd_envd_answer_unary_error (Request *req, const char *code, const char *message);
/* Ends @req, the stream of a command that was killed, as envd ends a killed command's (an end event that says
 * so); what the stream would have written after is dropped. */
void sandstepd_envd_end_killed (Request *req);

G_END_DECLS
