/* sandstep-front.c: the `sandstep` command.
 *
 * Linked statically and free of libraries, so that it starts in about a
 * millisecond.  For `sandstep run` on a local sandbox it hands the command
 * to the sandbox's supervisor (hooks/supervisor/sandstep-supervisor.h), starting
 * one with the plan the helper keeps when none runs (sandstep-front-start.h),
 * and exits with its status: no GLib, no JSON.  Everything else, and every
 * run the supervisor sends back unrun, it execs sandstep-core with the same
 * arguments, which does the work and says what goes wrong.
 *
 * It only takes the plain shapes of `run` it can read with certainty; any
 * other option, a value it would have to judge, a remote handle: the core.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandstep-exit.h"
#include "sandstep-front-start.h"
#include "sandstep-front-remote.h"
#include "sandstep-jail-init.h"
#include "sandstep-handle-libc.h"
#include "sandstep-owner-libc.h"
#include "sandstep-programs-libc.h"
#include "sandstep-run-client.h"
#include "sandstep-run-report.h"
#include "sandstep-step.h"
#include "sandstep-trust-libc.h"

static const char *const passthrough[] = { SANDSTEP_PASSTHROUGH_ENV };

typedef struct {
  const char *value[SANDSTEP_RUN_FIELDS];
  char handle[SANDSTEP_HANDLE_LOCAL_LEN + 1];
  char step[64];
  char *command;
  const char *backend;          /* --backend */
  char given_handle[SANDSTEP_HANDLE_FILE_MAX + 1];   /* --handle's text: a remote handle is the core's or a server's */
  int remote;                   /* the handle is not a local one */
  char owner[1024];             /* derived from SANDSTEP_RUN */
} Request;

/* The @i-th place a program of ours may be (sandstep-programs-libc.h), seen from this program's directory
 * (read once): 1 written, 0 not there, -1 past the last. */
static int
own_program (int i, const char *name, char *out, size_t size)
{
  static char self[PATH_MAX];
  static int read_self, have_self;

  if (!read_self)
    {
      ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
      char *slash = n > 0 ? (self[n] = '\0', strrchr (self, '/')) : NULL;

      if (slash != NULL)
        *slash = '\0';
      have_self = slash != NULL;
      read_self = 1;
    }
  return sandstep_program_candidate (i, have_self ? self : NULL, name, out, size);
}

/* A test hook's value (hooks/sandstep-test-hooks.h): only in a program of the build tree, or in a test copy
 * beside the mark. */
static const char *
test_hook (const char *name)
{
#ifdef SANDSTEP_BUILD_ROOT
  const char *value = getenv (name);
  char self[PATH_MAX], mark[PATH_MAX + 32];
  ssize_t n;
  char *slash;

  if (value == NULL || (n = readlink ("/proc/self/exe", self, sizeof self - 1)) <= 0)
    return NULL;
  self[n] = '\0';
  if (strncmp (self, SANDSTEP_BUILD_ROOT "/", strlen (SANDSTEP_BUILD_ROOT "/")) == 0)
    return value;
  if ((slash = strrchr (self, '/')) == NULL)
    return NULL;
  *slash = '\0';
  snprintf (mark, sizeof mark, "%s/sandstep-test-hooks", self);
  return access (mark, F_OK) == 0 ? value : NULL;
#else
  (void) name;
  return NULL;
#endif
}

static __attribute__ ((noreturn)) void
exec_core (char **argv)
{
  char core[PATH_MAX + 32];

  int found;

  for (int i = 0; (found = own_program (i, "sandstep-core", core, sizeof core)) >= 0; i++)
    if (found)
      execv (core, argv);
  fprintf (stderr, "sandstep: cannot run sandstep-core, beside this program or in '%s': %s; reinstall sandstep\n",
           sandstep_program_installed_dir ("sandstep-core"), strerror (errno));
  exit (SANDSTEP_EXIT_INTERNAL);
}

/* A live supervisor for the sandbox in @dir_fd, started with its kept plan if none runs: 1 with *@sock
 * connected to it, 0 when the helper is to start one (or say why it cannot). */
static int
connect_supervisor (const char *state, int dir_fd, const char *handle, int *sock)
{
  char program[PATH_MAX + 32], init[PATH_MAX + 32];
  int found;

  if ((*sock = sandstep_run_connect (dir_fd)) >= 0)
    return 1;
  /* Another user's socket: the core says so, and starts nothing. */
  if (*sock == SANDSTEP_RUN_CONNECT_NOT_OURS)
    return 0;
  for (int i = 0; (found = own_program (i, "sandstep-supervise", program, sizeof program)) >= 0; i++)
    if (found && access (program, X_OK) == 0)
      {
        /* Its init is where it would look for it: beside it. */
        const char *test_init = test_hook ("SANDSTEP_TEST_FRONT_INIT");
        int beside = own_program (i, "sandstep-init", init, sizeof init) > 0 && access (init, X_OK) == 0;
        if (test_init != NULL)
          snprintf (init, sizeof init, "%s", test_init);
        return (*sock = sandstep_front_start_supervisor (program, beside || test_init ? init : NULL, state, dir_fd,
                                                         handle)) >= 0;
      }
  return 0;
}

/* The arguments after "run", when they have a shape this program reads
 * exactly as the core would; 0 otherwise. */
static int
parse_run (int argc, char **argv, Request *request)
{
  static const SandstepRunOption options[] = { SANDSTEP_RUN_OPTIONS };
  const char *operands[256];
  int n_operands = 0, options_done = 0;
  size_t len = 0;

  for (int i = 0; i < argc; i++)
    {
      const char *arg = argv[i];
      int known = 0;

      if (options_done || arg[0] != '-' || arg[1] == '\0')
        {
          if (n_operands == (int) (sizeof operands / sizeof operands[0]))
            return 0;
          operands[n_operands++] = arg;
          continue;
        }
      if (strcmp (arg, "--") == 0)
        {
          options_done = 1;
          continue;
        }
      for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
        {
          size_t n = strlen (options[k].name);
          const char *value;
          if (strncmp (arg, "--", 2) != 0 || strncmp (arg + 2, options[k].name, n) != 0)
            continue;
          if (arg[2 + n] == '=')
            value = arg + 3 + n;
          else if (arg[2 + n] == '\0' && i + 1 < argc)
            value = argv[++i];
          else
            return 0;
          /* Given twice, or empty: the core's error, not ours. */
          if (request->value[options[k].field] != NULL || value[0] == '\0')
            return 0;
          request->value[options[k].field] = value;
          known = 1;
          break;
        }
      if (!known && strncmp (arg, "--backend=", 10) == 0 && request->backend == NULL && arg[10] != '\0')
        {
          request->backend = arg + 10;
          known = 1;
        }
      if (!known)
        return 0;
    }
  if (n_operands == 0 || request->value[SANDSTEP_RUN_FIELD_HANDLE] == NULL ||
      !sandstep_handle_libc_read (request->value[SANDSTEP_RUN_FIELD_HANDLE], request->given_handle,
                                  sizeof request->given_handle))
    return 0;
  if (sandstep_handle_libc_is_local (request->given_handle))
    {
      memcpy (request->handle, request->given_handle, sizeof request->handle);
      request->value[SANDSTEP_RUN_FIELD_HANDLE] = request->handle;
    }
  else
    request->remote = 1;
  if (request->value[SANDSTEP_RUN_FIELD_STEP] != NULL)
    {
      SandstepStep step;
      if (!sandstep_step_parse (request->value[SANDSTEP_RUN_FIELD_STEP], &step))
        return 0;
      sandstep_step_format (&step, request->step, sizeof request->step);
      request->value[SANDSTEP_RUN_FIELD_STEP] = request->step;
    }

  /* The command is the operands joined by spaces. */
  for (int i = 0; i < n_operands; i++)
    len += strlen (operands[i]) + 1;
  if (len > SANDSTEP_RUN_MAX / 2 || (request->command = malloc (len)) == NULL)
    return 0;
  request->command[0] = '\0';
  for (int i = 0; i < n_operands; i++)
    {
      if (i > 0)
        strcat (request->command, " ");
      strcat (request->command, operands[i]);
    }
  request->value[SANDSTEP_RUN_FIELD_COMMAND] = request->command;

  /* Identity: the option, else the environment, else the supervisor's USER@HOST (a server's: the core's). */
  if (request->value[SANDSTEP_RUN_FIELD_OWNER] == NULL || request->value[SANDSTEP_RUN_FIELD_OWNER][0] == '\0')
    {
      /* The rule of every front-end: SANDSTEP_OWNER, else the run's, on any machine. */
      switch (sandstep_step_owner (request->value[SANDSTEP_RUN_FIELD_OWNER] == NULL ? getenv ("SANDSTEP_OWNER") : NULL, getenv ("SANDSTEP_RUN"), getenv ("SANDSTEP_DAG"),
                                   getenv ("SANDSTEP_TOP"), request->owner, sizeof request->owner))
        {
        case SANDSTEP_RUN_OWNER_NONE:
          break;
        case SANDSTEP_RUN_OWNER_OK:
          request->value[SANDSTEP_RUN_FIELD_OWNER] = request->owner;
          break;
        case SANDSTEP_RUN_OWNER_NO_DAG:
        case SANDSTEP_RUN_OWNER_BAD_RUN:
        case SANDSTEP_RUN_OWNER_BAD_DAG:
        case SANDSTEP_RUN_OWNER_TOO_LONG:
          return 0;         /* the core says what is wrong */
        }
    }
  if (request->value[SANDSTEP_RUN_FIELD_HOLDER] == NULL)
    request->value[SANDSTEP_RUN_FIELD_HOLDER] = getenv ("SANDSTEP_HOLDER");
  /* Too long: the core says so (sandstep_identity_check). */
  if ((request->value[SANDSTEP_RUN_FIELD_OWNER] != NULL &&
       strlen (request->value[SANDSTEP_RUN_FIELD_OWNER]) > SANDSTEP_IDENTITY_MAX) ||
      (request->value[SANDSTEP_RUN_FIELD_HOLDER] != NULL &&
       strlen (request->value[SANDSTEP_RUN_FIELD_HOLDER]) > SANDSTEP_IDENTITY_MAX))
    return 0;
  for (int i = 0; i < SANDSTEP_RUN_FIELDS; i++)
    if (request->value[i] == NULL)
      request->value[i] = "";
  return 1;
}

/* The state directory, absolute, as sandstep_state_dir() finds it. */
static int
state_dir (char *out, size_t size)
{
  char given[PATH_MAX];
  char why[1024];

  /* The supervisor lives in /: a relative path would name another directory there.  Another user's
   * directory (or one under a directory others can write) is the core's to refuse, with its reason. */
  return sandstep_state_dir_default (given, sizeof given) && size >= PATH_MAX && realpath (given, out) != NULL &&
         sandstep_state_dir_trusted (out, why, sizeof why);
}

static void
print_notice (const char *text, void *user_data)
{
  fprintf (stderr, "sandstep run: %s\n", text);
}

/* The caller's terminal and locale, which the command may see. */
static char **
passthrough_environment (void)
{
  static char *env[sizeof passthrough / sizeof passthrough[0] + 1];
  int n = 0;

  for (size_t i = 0; i < sizeof passthrough / sizeof passthrough[0]; i++)
    {
      const char *value = getenv (passthrough[i]);
      size_t len;
      if (value == NULL)
        continue;
      len = strlen (passthrough[i]) + strlen (value) + 2;
      if ((env[n] = malloc (len)) == NULL)
        continue;
      snprintf (env[n++], len, "%s=%s", passthrough[i], value);
    }
  env[n] = NULL;
  return env;
}

int
main (int argc, char **argv)
{
  Request request = { { 0 } };
  const char *backend = getenv (SANDSTEP_BACKEND_ENV);
  SandstepRunCall call = { .stdio = { 0, 1, 2 }, .claim_fd = -1, .cancel_fd = -1, .on_notice = print_notice };
  SandstepRunCallResult result;
  char state[PATH_MAX], dir[PATH_MAX + 128];
  int dir_fd, sock;

  /* A closed standard stream would be the first fd this program opens, and so passed on as the command's
   * (its start mark, say, which the command could then empty): /dev/null in its place, as for the core. */
  for (int fd = 0; fd < 3; fd++)
    if (fcntl (fd, F_GETFD) < 0 && open ("/dev/null", O_RDWR) != fd)
      return SANDSTEP_EXIT_INTERNAL;
  if (argc < 3 || strcmp (argv[1], "run") != 0 || !parse_run (argc - 2, argv + 2, &request))
    exec_core (argv);
  /* --backend, else $SANDSTEP_BACKEND, names a sandstepd unless empty or "local", as in sandstep_backend_open(). */
  if (request.backend != NULL)
    backend = request.backend;
  if (request.remote || !sandstep_backend_name_is_local (backend))
    {
      const char *owner = request.value[SANDSTEP_RUN_FIELD_OWNER];
      const char *holder = request.value[SANDSTEP_RUN_FIELD_HOLDER];
      const char *timeout = request.value[SANDSTEP_RUN_FIELD_TIMEOUT];
      const char *wait = request.value[SANDSTEP_RUN_FIELD_WAIT];
      SandstepFrontRemote remote = {
        .handle = request.given_handle,
        .backend = sandstep_backend_name_is_local (backend) ? NULL : backend,
        .owner = owner[0] != '\0' ? owner : NULL,
        .holder = holder[0] != '\0' ? holder : NULL,
        .timeout = timeout[0] != '\0' ? timeout : NULL,
        .wait = wait[0] != '\0' ? wait : NULL,
        .command = request.command,
      };
      int status;

      /* A make step's plain run on the server it names: one request, without GLib or libsoup.  (--step,
       * a recipe's hold, is the local backend's only: a server's claim lasts the request, as in the core.) */
      if (sandstep_front_remote_run (&remote, &status))
        return status;
      exec_core (argv);
    }
  if (!state_dir (state, sizeof state) ||
      snprintf (dir, sizeof dir, "%s/sandboxes/%s", state, request.handle) >= (int) sizeof dir ||
      (dir_fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    exec_core (argv);
  /* A retry-safe sandbox's recipe line is the helper's (sandstep-step.h): straight there, not by way of the
   * supervisor, which would only send it back. */
  if (request.value[SANDSTEP_RUN_FIELD_STEP] != NULL &&
      faccessat (dir_fd, SANDSTEP_STEP_RETRY_CLEAN_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
    exec_core (argv);
  if (!connect_supervisor (state, dir_fd, request.handle, &sock))
    exec_core (argv);
  close (dir_fd);
  memcpy (call.field, request.value, sizeof call.field);
  call.env = passthrough_environment ();
  sandstep_run_call (sock, &call, &result);
  close (sock);
  switch (result.outcome)
    {
    case SANDSTEP_RUN_CALL_FALLBACK:
    case SANDSTEP_RUN_CALL_RETRY:
      /* Nothing ran: the core does it, or says why not. */
      exec_core (argv);
      break;
    case SANDSTEP_RUN_CALL_ERROR:
      fprintf (stderr, "sandstep run: %s\n", result.text);
      return SANDSTEP_EXIT_INTERNAL;
    case SANDSTEP_RUN_CALL_BUSY:
      fprintf (stderr, "sandstep run: %s\n", result.text);
      return SANDSTEP_EXIT_BUSY;
    case SANDSTEP_RUN_CALL_LOST:
    case SANDSTEP_RUN_CALL_CANCELLED:
      fprintf (stderr, "sandstep run: %s\n", SANDSTEP_RUN_LOST_TEXT);
      return SANDSTEP_EXIT_INTERNAL;
    case SANDSTEP_RUN_CALL_DONE:
      {
        char report[2048];
        int status;
        if (result.reply.flags & SANDSTEP_RUN_EXEC_FAILED)
          {
            fprintf (stderr, "sandstep run: The jail could not execute /bin/sh: %s\n", strerror (result.reply.exit_status));
            return SANDSTEP_EXIT_INTERNAL;
          }
        if ((result.reply.flags & SANDSTEP_RUN_INTERRUPTED) && !(result.reply.flags & SANDSTEP_RUN_MEMORY_HIT))
          {
            fprintf (stderr, "sandstep run: %s\n", SANDSTEP_RUN_LOST_TEXT);
            return SANDSTEP_EXIT_INTERNAL;
          }
        SandstepRunOutcome outcome = {
          .exit_status = result.reply.exit_status,
          .timed_out = (result.reply.flags & SANDSTEP_RUN_TIMED_OUT) != 0,
          .clamped = (result.reply.flags & SANDSTEP_RUN_CLAMPED) != 0,
          .memory_hit = (result.reply.flags & SANDSTEP_RUN_MEMORY_HIT) != 0,
          .pids_hit = (result.reply.flags & SANDSTEP_RUN_PIDS_HIT) != 0,
          .applied_timeout_s = result.reply.applied_timeout_s,
          .memory = result.reply.memory, .pids = result.reply.pids, .cpu_time_s = result.reply.cpu_time_s,
          .disk = result.reply.disk,
        };
        const char *timeout = request.value[SANDSTEP_RUN_FIELD_TIMEOUT];
        status = sandstep_run_report_format (&outcome, timeout[0] != '\0' ? timeout : NULL, report, sizeof report);
        fputs (report, stderr);
        return status;
      }
    }
  return SANDSTEP_EXIT_INTERNAL;
}
