/* attack-utils.h: running tests/security/attack.c inside sandboxes.
 *
 * Shared by test-security.c and test-network.c.  An AttackFixture is a
 * SandstepTestFixture (tests/sandstep-test-utils.h) plus a host directory
 * holding a copy of the attack program ($SANDSTEP_ATTACK), which every
 * sandbox provisioned here sees as /data/bin (--mount).  With AS_USER the
 * helper runs as a throwaway unprivileged user, and the case is skipped
 * (with the reason) when that user cannot create a user namespace.
 */
#pragma once

#include "sandstep-test-utils.h"

G_BEGIN_DECLS

/* How long one attack run may take before the harness calls it a hang. */
#define ATTACK_TIMEOUT_S 30.0

typedef enum {
  AS_CALLER,
  AS_USER,
} RunAs;

typedef struct {
  SandstepTestFixture base;  /* first: the shared teardown takes it */
  char *skip_reason;         /* set: this variant is skipped */
  char *bin_dir;             /* host directory seen as /data/bin */
  char *mount_arg;           /* --mount=BIN_DIR:/data/bin */
} AttackFixture;

void attack_fixture_setup (AttackFixture *af, RunAs as);
void attack_fixture_teardown (AttackFixture *af);

/* The fixture to use, or NULL after g_test_skip() when this variant is skipped. */
SandstepTestFixture *attack_begin (AttackFixture *af);

/* The uid the helper (and so the jail's uid 0) runs as on the host. */
uid_t attack_helper_uid (AttackFixture *af);

/* `sandstep provision --mount=BIN:/data/bin EXTRA...` (NULL-terminated), asserting success. */
char *attack_provision (AttackFixture *af, ...) G_GNUC_NULL_TERMINATED;

/* "--handle=HANDLE" */
char *attack_handle_arg (const char *handle);

/* `sandstep run --handle=H -- COMMAND` (a shell command line). */
SandstepTestResult *attack_run_command (AttackFixture *af, const char *handle, const char *command);
/* `/data/bin/attack ATTACK` in the sandbox. */
SandstepTestResult *attack_run (AttackFixture *af, const char *handle, const char *attack);

/* Asserts that the command exited 0 and printed exactly @line (plus a newline). */
#define attack_assert_line(r, line) attack_assert_line_impl (__FILE__, __LINE__, G_STRFUNC, (r), (line))
void attack_assert_line_impl (const char *file, int line, const char *func, const SandstepTestResult *r,
                              const char *expected);

/* The host path of @rel (e.g. "egress.log", "tree/workspace/x") in the sandbox's state directory. */
char *attack_sandbox_path (AttackFixture *af, const char *handle, const char *rel);

/* Copies @from to @to with @mode. */
void attack_copy_file (const char *from, const char *to, mode_t mode);

G_END_DECLS
