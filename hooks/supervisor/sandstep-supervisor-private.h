/* sandstep-supervisor-private.h: what the supervisor's files share.
 *
 * sandstep-supervisor.c runs the loop and the supervisor's life,
 * sandstep-supervisor-sandbox.c builds and checks the live sandbox (the jail,
 * its network helpers), sandstep-supervisor-command.c serves one command.
 */
#pragma once

#include <glib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "sandstep-run-wire.h"
#include "sandstep-step.h"
#include "sandstep-supervisor-sandbox.h"

/* How long a caller has to send its request once connected. */
#define REQUEST_TIMEOUT_MS 2000
/* After KILL, how long init may take to report before it is killed itself. */
#define KILL_GRACE_US (5 * G_USEC_PER_SEC)
/* How often a supervisor looks whether its sandbox's directory changed under it (destroyed by hand, released,
 * its record or claim replaced); a command always looks first. */
#define CHECK_INTERVAL_US (1 * G_USEC_PER_SEC)

typedef struct {
  int conn;
  gboolean own_claim;      /* the supervisor holds the claim for the caller */
  int caller_claim;        /* the caller's claim fd, held while its command runs */
  SandstepStep step;       /* the make recipe line it serves, when the claim is ours */
  char *holder;
  gint64 deadline;         /* monotonic µs */
  gint64 kill_deadline;    /* after KILL: when init is given up on */
  gboolean timed_out;
  gboolean caller_gone;
  gboolean killed;
  gboolean interrupted;
  double applied_timeout_s;
  gboolean clamped;
  guint64 oom_kills, pids_max;
} Command;

typedef struct {
  char *handle;
  SupervisorTerms terms;

  int store_fd;
  int dir_fd;              /* the sandbox's directory */
  int claim_fd;
  guint64 start_time;      /* ours, for the claim: a pid is named with it */
  gboolean jail_is_peer;   /* the sandbox's uid is ours: its processes could reach us but for the namespace */
  char *own_userns;        /* then: our user namespace, as /proc/self/ns/user names it */
  int listener;
  ino_t listener_ino;  /* the socket it bound: anything else under its name is damage */
  /* What the directory held when we started, checked every CHECK_INTERVAL_US and before each command (no inotify
   * instance: those are counted per user, host-wide, and 128 by default). */
  struct stat dir_stat, record_stat, lifetime_stat;
  gint64 next_check;       /* monotonic µs */
  int signals;
  gint64 expires;
  gboolean released;
  gint64 idle_deadline;
  gboolean done;
  gboolean reclaim;        /* a release came while a command ran under our claim: destroying is ours */
  int stop_signal;

  SandstepJailStart adopt;  /* the jail the front started for us, until the sandbox takes it */
  SupervisorSandbox *sandbox;
  Command *current;
} Supervisor;

gboolean sandstep_supervisor_alive (Supervisor *s);

void sandstep_supervisor_begin (Supervisor *s, int conn);
void sandstep_supervisor_refuse (int conn, SandstepRunKind kind);
void sandstep_supervisor_kill_command (Supervisor *s, Command *command);
void sandstep_supervisor_finish (Supervisor *s, int status, int exec_error);
void sandstep_supervisor_on_init_message (Supervisor *s);
void sandstep_supervisor_on_notice (const char *line, gpointer user_data);
