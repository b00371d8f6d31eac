/* sandstep-operators.c: THE operator table and the options of each operator. */
#include "sandstep-operator.h"
#include "sandstep-options-private.h"
#include "sandstep-image-operators.h"
#include "sandstep-tool-options.h"

#include <string.h>

static const SandstepOption provision_options[] = {
  /* name        kind                       repeat choices       help */
  { "network",   SANDSTEP_OPTION_CHOICE,    FALSE, "none|open|allow", "none (default: loopback only, DNS fails), open (outside addresses, through a user-mode network stack of its own; never the host's loopback; needs /dev/net/tun as this user, or root), or allow (only --allow and --allow-cidr)" },
  { "allow",     SANDSTEP_OPTION_STRING,    TRUE,  NULL,         "a host reached over HTTPS on port 443 (*.example.com for all under it); implies network=allow", "HOST" },
  { "allow-cidr", SANDSTEP_OPTION_STRING,   TRUE,  NULL,         "an address range reached on any port, e.g. 10.1.2.0/24; implies network=allow", "CIDR" },
  { "lifetime",  SANDSTEP_OPTION_DURATION,  FALSE, NULL,         "how long the sandbox lives (default 1h); commands never outlive it" },
  { "env",       SANDSTEP_OPTION_STRING,    TRUE,  NULL,         "NAME=VALUE, or NAME to pass this environment's value, into every command", "NAME[=VALUE]" },
  { "secret",    SANDSTEP_OPTION_STRING,    TRUE,  NULL,         "NAME of an environment variable passed in and masked in agent tool output", "NAME" },
  { "mount",     SANDSTEP_OPTION_STRING,    TRUE,  NULL,         "HOSTPATH:/data/NAME, bound read-only", "HOSTPATH:/data/NAME" },
  { "memory",    SANDSTEP_OPTION_SIZE,      FALSE, NULL,         "memory of a command's processes together (default 2G)" },
  { "pids",      SANDSTEP_OPTION_COUNT,     FALSE, NULL,         "processes and threads of a command together (default 1024)" },
  { "cpu-time",  SANDSTEP_OPTION_DURATION,  FALSE, NULL,         "CPU time of each process (default 1h)" },
  { "disk",      SANDSTEP_OPTION_SIZE,      FALSE, NULL,         "the largest file a command may write (default 8G)" },
  { "cpus",      SANDSTEP_OPTION_STRING,    FALSE, NULL,         "CPUs the sandbox may use at most, together, as docker's --cpus (0.5: half of one; default: no cap); needs a cgroup cpu controller", "N" },
  { "io-weight", SANDSTEP_OPTION_COUNT,     FALSE, NULL,         "the sandbox's share of disk I/O among sandboxes, 1 to 10000 as io.weight (default 100); all sandboxes together weigh half the host's default", "W" },
  { "image",     SANDSTEP_OPTION_STRING,    FALSE, NULL,         "the root from an image (docker://REPO[:TAG], oci:DIR[:TAG], ...), pulled if it is not here, with a writable layer of the sandbox's own on top", "REF" },
  { "root",      SANDSTEP_OPTION_CHOICE,    FALSE, "writable|readonly", "with --image: writable (default: changes stay in this sandbox) or readonly" },
  { "max-image-size", SANDSTEP_OPTION_SIZE, FALSE, NULL,         "with --image: as pull's --max-image-size (default 16G)" },
  { "retry",     SANDSTEP_OPTION_CHOICE,    FALSE, "clean",      "clean: a make target run again after it failed starts from the files it started from (a checkpoint at its first sandbox line, rolled back on the retry)" },
  { NULL }
};

static const SandstepOption run_options[] = {
  { "timeout",   SANDSTEP_OPTION_SECONDS,   FALSE, NULL,         "seconds the command may run (default: the sandbox's remaining lifetime)" },
  { NULL }
};

static const SandstepOption get_options[] = {
  { "to",        SANDSTEP_OPTION_STRING,    FALSE, NULL,         "write to this host file (replaced whole) instead of standard output", "FILE" },
  { "max-bytes", SANDSTEP_OPTION_SIZE,      FALSE, NULL,         "refuse files larger than this (default 5M)" },
  { NULL }
};

static const SandstepOption export_options[] = {
  { "max-bytes", SANDSTEP_OPTION_SIZE,      FALSE, NULL,         "refuse files larger than this (default 1G)" },
  { "no-clobber", SANDSTEP_OPTION_FLAG,     FALSE, NULL,         "refuse the whole export if a destination exists, and never replace one (s3://, https://: If-None-Match: *)" },
  { "read-timeout", SANDSTEP_OPTION_SECONDS, FALSE, NULL,        "seconds an object store may leave a request unanswered before the export gives up (default 60)" },
  { NULL }
};

static const SandstepOption release_options[] = {
  { "keep",      SANDSTEP_OPTION_KEEP,      FALSE, NULL,         "keep the sandbox this long for inspection (default 0: destroy when idle)" },
  { NULL }
};

static const SandstepOption gc_options[] = {
  { "run",       SANDSTEP_OPTION_STRING,    FALSE, NULL,         "reclaim every sandbox of this run, expired or not", "RUN" },
  { "expired",   SANDSTEP_OPTION_FLAG,      FALSE, NULL,         "reclaim only sandboxes whose lifetime is over (the default without --run)" },
  { "broken",    SANDSTEP_OPTION_FLAG,      FALSE, NULL,         "also reclaim every damaged sandbox (one whose record cannot be read), whatever its age" },
  { "images",    SANDSTEP_OPTION_FLAG,      FALSE, NULL,         "instead: remove every pulled image no sandbox uses, its blobs and layers, and what killed pulls left" },
  { NULL }
};

static const SandstepOption pull_options[] = {
  { "max-image-size", SANDSTEP_OPTION_SIZE, FALSE, NULL,         "refuse an image whose layers take more than this, compressed or unpacked (each file counts at least 4K; default 16G)" },
  { NULL }
};

static const SandstepOption images_options[] = {
  { "json",      SANDSTEP_OPTION_FLAG,      FALSE, NULL,         "print a JSON array: reference, digest, size_bytes, last_used, layers, sandboxes (the handles using it)" },
  { NULL }
};

static const SandstepOption list_options[] = {
  { "run",       SANDSTEP_OPTION_STRING,    FALSE, NULL,         "only the sandboxes of this run (--owner=OWNER: only that owner's)", "RUN" },
  { "json",      SANDSTEP_OPTION_FLAG,      FALSE, NULL,         "print a JSON array: handle, owner, provisioned_by, held_by, state, created, expires, age_seconds, remaining_seconds, size_bytes, problem, image, image_digest, parent (a fork's)" },
  { NULL }
};

static const SandstepOption mcp_options[] = {
  { "http",      SANDSTEP_OPTION_STRING,    FALSE, NULL,         "serve Streamable HTTP at http://ADDR:PORT/mcp instead of stdin/stdout: loopback only, port 0 picks a free one, the URL goes to stderr; needs --token-file or --print-token", "ADDR:PORT" },
  { "token-file", SANDSTEP_OPTION_STRING,   FALSE, NULL,         "with --http: write the bearer token every request must carry to FILE (mode 0600)", "FILE" },
  { "print-token", SANDSTEP_OPTION_FLAG,    FALSE, NULL,         "with --http: print the bearer token once on stderr" },
  { "python",    SANDSTEP_OPTION_FLAG,      FALSE, NULL,         "also offer run_python: one Python interpreter kept alive in the sandbox for the whole session (needs python3 there)" },
  { "state-dir", SANDSTEP_OPTION_STRING,    FALSE, NULL,         "where local sandboxes live, as SANDSTEP_STATE_DIR (for MCP clients that start servers with a minimal environment)", "DIR" },
  { "python-budget", SANDSTEP_OPTION_SECONDS, FALSE, NULL,       "with --python: seconds all run_python calls of the session may take together (default 900)" },
  SANDSTEP_TOOL_OPTION_ROWS,
  { NULL }
};

static const SandstepOption agent_options[] = {
  { "model",     SANDSTEP_OPTION_STRING,    FALSE, NULL,         "the model to ask (default $OPENAI_MODEL); the endpoint is $OPENAI_BASE_URL, the key $OPENAI_API_KEY", "MODEL" },
  { "max-turns", SANDSTEP_OPTION_COUNT,     FALSE, NULL,         "stop (exit 2) after this many model requests without a final answer (default 50)" },
  { "time-budget", SANDSTEP_OPTION_SECONDS, FALSE, NULL,         "stop (exit 124) when the run has taken this long; commands are cut to fit (default: none)" },
  { "system",    SANDSTEP_OPTION_STRING,    FALSE, NULL,         "FILE holding the system prompt (default: a short built-in one)", "FILE" },
  { "transcript", SANDSTEP_OPTION_STRING,   FALSE, NULL,         "write the run to FILE as JSON lines: requests, responses, tool results (never the API key)", "FILE" },
  { "python",    SANDSTEP_OPTION_CHOICE,    FALSE, "yes|no",     "yes: also offer run_python, one Python interpreter kept alive in the sandbox for the whole run (needs python3 there; default no)" },
  { "python-budget", SANDSTEP_OPTION_SECONDS, FALSE, NULL,       "with python=yes: seconds all run_python calls of the run may take together (default 900)" },
  { "export",    SANDSTEP_OPTION_STRING,    TRUE,  NULL,         "PATH=URL: when the agent answers, copy PATH out to URL as 'sandstep export' does, all or none; nothing when it fails", "PATH=URL" },
  SANDSTEP_TOOL_OPTION_ROWS,
  { NULL }
};

static const SandstepOption tools_options[] = {
  { "python",    SANDSTEP_OPTION_FLAG,      FALSE, NULL,         "also offer run_python: one Python interpreter kept alive in the sandbox while the agent runs (needs python3 there)" },
  { "python-budget", SANDSTEP_OPTION_SECONDS, FALSE, NULL,       "with --python: seconds all run_python calls may take together (default 900)" },
  SANDSTEP_TOOL_OPTION_ROWS,
  { NULL }
};

static const SandstepOption tool_options[] = {
  SANDSTEP_TOOL_OPTION_ROWS,
  { NULL }
};

static const SandstepOption destroy_options[] = {
  { "with-forks", SANDSTEP_OPTION_FLAG,     FALSE, NULL,         "also destroy every sandbox forked from it, and their forks" },
  { NULL }
};

static const SandstepOption fork_options[] = {
  { "count",     SANDSTEP_OPTION_COUNT,     FALSE, NULL,         "how many forks (default 1); a fork target run again finds the forks it made (by --holder and the parent)" },
  { NULL }
};

static const SandstepOption checkpoint_options[] = {
  { "list",      SANDSTEP_OPTION_FLAG,      FALSE, NULL,         "print the sandbox's checkpoints' names instead" },
  { NULL }
};

/* The operators that speak HTTP (agent, mcp, tools) are weak references: the
 * lean `sandstep` helper and the make plugin link without them, and so
 * without libsoup, whose loading alone costs more than a jail; their rows
 * then have no run function, and the helper execs `sandstep-net`, the same
 * program linked whole. */
#pragma weak sandstep_op_agent
#pragma weak sandstep_op_mcp
#pragma weak sandstep_op_tools

#define H SANDSTEP_OP_HANDLE
#define C SANDSTEP_OP_CLAIMS
#define A SANDSTEP_OP_ANYONES

static const SandstepOperator operators[] = {
  /* name         flags  options           text                    operands            summary                                              run */
  { "agent",      H | C, agent_options,    SANDSTEP_TEXT_COMMAND,  "-- PROMPT",        "let an LLM agent work in the sandbox with the four tools; print its answer", sandstep_op_agent },
  { "call",       H | C, tool_options,       SANDSTEP_TEXT_WORDS,    "TOOL [JSON]",      "call one agent tool (run_command, read_file, write_file, list_directory, or run_python in a fresh session) and print what a model would read", sandstep_op_call },
  { "checkpoint", H | C, checkpoint_options, SANDSTEP_TEXT_WORDS,  "NAME",             "name the sandbox's files as they are now, for a later rollback (copy-on-write, as a fork); --list names them", sandstep_op_checkpoint },
  { "describe",   H,     sandstep_no_options,       SANDSTEP_TEXT_NONE,     "",                 "print a sandbox's record as JSON",                  sandstep_op_describe },
  { "destroy",    H,     destroy_options,  SANDSTEP_TEXT_NONE,     "",                 "destroy a sandbox at once, killing what runs",      sandstep_op_destroy },
  { "export",     H | C, export_options,   SANDSTEP_TEXT_WORDS,    "PATH=URL...",      "copy files out to file://, s3:// or https:// URLs, all or none", sandstep_op_export,
    sandstep_op_export_needs_net },
  { "fork",       H | C, fork_options,     SANDSTEP_TEXT_NONE,     "",                 "copy the sandbox copy-on-write into new sandboxes of the same owner, spec and lifetime left; print their handles", sandstep_op_fork },
  { "gc",         A,     gc_options,       SANDSTEP_TEXT_NONE,     "",                 "reclaim expired sandboxes, or all of one run, or (--images) unused images", sandstep_op_gc_images },
  { "get",        H | C, get_options,      SANDSTEP_TEXT_WORDS,    "PATH",             "print a file of the sandbox",                       sandstep_op_get },
  { "images",     A,     images_options,   SANDSTEP_TEXT_NONE,     "",                 "list pulled images: reference, digest, size on disk, last used, sandboxes using it", sandstep_op_images },
  { "list",       A,     list_options,     SANDSTEP_TEXT_NONE,     "",                 "list every sandbox: handle, owner, holder, state (idle, running, held, expired, broken), age, time left, size, image", sandstep_op_list },
  { "ls",         H | C, sandstep_no_options,       SANDSTEP_TEXT_WORDS,    "[PATH]",           "list a directory of the sandbox",                   sandstep_op_ls },
  { "mcp",        H | C | SANDSTEP_OP_SERVES, mcp_options,      SANDSTEP_TEXT_NONE,     "",                 "serve the sandbox's agent tools to one MCP client (stdio, or HTTP with --http)", sandstep_op_mcp },
  { "provision",  0,     provision_options, SANDSTEP_TEXT_NONE,    "",                 "create a sandbox (or find this holder's) and print its handle", sandstep_op_provision,
    sandstep_op_provision_needs_net },
  { "pull",       A,     pull_options,     SANDSTEP_TEXT_WORDS,    "REF",              "pull an image (docker://REPO[:TAG], oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE) into the layer store, verified and unpacked; print its digest", sandstep_op_pull,
    sandstep_op_pull_needs_net },
  { "put",        H | C, sandstep_no_options,       SANDSTEP_TEXT_WORDS,    "SRC DEST",         "copy a host file or directory into the sandbox",    sandstep_op_put },
  { "release",    H,     release_options,  SANDSTEP_TEXT_NONE,     "",                 "the DAG is done: destroy when idle, or keep a while", sandstep_op_release },
  { "rollback",   H | C, sandstep_no_options,       SANDSTEP_TEXT_WORDS,    "NAME",             "put the sandbox's files back as checkpoint NAME named them", sandstep_op_rollback },
  { "run",        H | C, run_options,      SANDSTEP_TEXT_COMMAND,  "-- COMMAND",       "run a shell command in the sandbox: a fresh process tree in its live namespaces", sandstep_op_run },
  { "tools",      H | C, tools_options,      SANDSTEP_TEXT_COMMAND,  "-- AGENT-COMMAND", "run an agent on the host, serving it the sandbox's tools over MCP at $SANDSTEP_MCP_URL", sandstep_op_tools },
};

#undef H
#undef C
#undef A

const SandstepOperator *
sandstep_operators (gsize *n_operators)
{
  *n_operators = G_N_ELEMENTS (operators);
  return operators;
}

const SandstepOperator *
sandstep_operator_lookup (const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (operators); i++)
    if (g_strcmp0 (operators[i].name, name) == 0)
      return &operators[i];
  return NULL;
}

const SandstepOption *const *
sandstep_operator_option_groups (const SandstepOperator *op, gsize *n_groups)
{
  static const SandstepOption *groups[G_N_ELEMENTS (operators)][4];
  gsize i = op - operators;

  g_return_val_if_fail (i < G_N_ELEMENTS (operators), NULL);
  groups[i][0] = (op->flags & SANDSTEP_OP_HANDLE) ? sandstep_handle_options : sandstep_no_options;
  groups[i][1] = op->options;
  groups[i][2] = (op->flags & SANDSTEP_OP_CLAIMS) ? sandstep_claim_options : sandstep_no_options;
  groups[i][3] = sandstep_identity_options;
  *n_groups = 4;
  return groups[i];
}

static void
append_options (GString *out, const SandstepOption *options)
{
  for (; options->name != NULL; options++)
    {
      const char *metavar = sandstep_option_metavar (options);
      g_autofree char *left = metavar != NULL ? g_strdup_printf ("--%s=%s", options->name, metavar)
                                              : g_strdup_printf ("--%s", options->name);

      g_string_append_printf (out, "  %-26s %s%s\n", left, options->help, options->repeatable ? " (repeatable)" : "");
    }
}

char *
sandstep_operator_usage (const SandstepOperator *op)
{
  GString *out = g_string_new (NULL);

  if (op == NULL)
    {
      g_string_append (out, "Usage: sandstep OPERATOR [OPTIONS] [ARGUMENTS]\n\nOperators:\n");
      for (gsize i = 0; i < G_N_ELEMENTS (operators); i++)
        g_string_append_printf (out, "  %-10s %s\n", operators[i].name, operators[i].summary);
      g_string_append (out, "\nSee 'sandstep help OPERATOR' (or 'sandstep OPERATOR --help') for the options of one,\n"
                            "and man sandstep, sandstep-make(7) and sandstepd(8) once installed.\n");
      return g_string_free (out, FALSE);
    }
  g_string_append_printf (out, "Usage: sandstep %s [OPTIONS] %s\n\n%s.\n\nOptions:\n", op->name, op->operands,
                          op->summary);
  if (op->flags & SANDSTEP_OP_HANDLE)
    append_options (out, sandstep_handle_options);
  append_options (out, op->options);
  if (op->flags & SANDSTEP_OP_CLAIMS)
    append_options (out, sandstep_claim_options);
  append_options (out, sandstep_identity_options);
  return g_string_free (out, FALSE);
}
