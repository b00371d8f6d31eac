/* sandstep-test-hooks.h: variables that exist only so that tests can reach inside.
 *
 *   SANDSTEP_TEST_RESOLVE="name=address,..."  the egress proxy's names, instead of DNS
 *   SANDSTEP_TEST_HTTPS_PORT=PORT             the port the egress proxy dials for 443
 *   SANDSTEP_TEST_REMOTE_MODULE=PATH          the remote backend module to load
 *   SANDSTEP_TEST_FRONT_INIT=PATH             the init the front starts a first command's jail with
 *                                             (sandstep-front.c: a broken one makes the supervisor build)
 *   SANDSTEP_TEST_PYTHON_DRIVER=PATH          the Python source run_python's session runs instead of its
 *                                             driver (sandstep-python.c: one that sends bad frames)
 *   SANDSTEP_TEST_UIDS_DIR=PATH               the host-wide uid leases, instead of /var/lib/sandstep-uids
 *   SANDSTEP_TEST_UID_SLOT=N                  the slot a sandbox's uid probe starts at (sandstep-uids.h)
 *   SANDSTEP_TEST_E2B_CODE_IDLE_S=N           how long sandstepd's runCode session keeps its claim without a
 *                                             call, instead of 300 s (sandstepd-e2b-code.c)
 *   SANDSTEP_TEST_SUPERVISOR_IDLE_S=N         how long a supervisor (and its jail) stays without a command,
 *                                             instead of 30 s (sandstep-supervisor.c)
 *   SANDSTEP_TEST_JAIL_LOOKUP_PAUSE_MS=N      a pause between finding a layered sandbox's supervisor and its
 *                                             jail, for a file tool (sandstep-local-fork.c): long enough for
 *                                             the supervisor to end idle there, were the jail not kept
 *   SANDSTEP_TEST_IMAGE_BLOB_DELAY_MS=N       a pause in each layer of a pull, under that layer's lock
 *                                             (sandstep-image-pull.c): a test acts while a pull runs
 *   SANDSTEP_TEST_IMAGE_KILL_AFTER=N          a pull SIGKILLs itself once N bytes of a blob are written
 *                                             (sandstep-image-store.c): what a killed pull leaves
 *   SANDSTEP_TEST_IMAGE_KILL_UNPACK=N         a pull SIGKILLs itself after unpacking N entries of a layer
 *                                             (sandstep-image-unpack.c)
 *   SANDSTEP_TEST_PROGRESS_LOCKSTEP=1         each piece of a watched copy waits for the progress line's next
 *                                             look (sandstep-progress.h), so a fast copy still shows it move
 *
 * Each takes effect only in a program of the build tree, one whose path is
 * under the build directory, or in a copy the test harness made beside a
 * file named SANDSTEP_TEST_HOOKS_MARK (for a throwaway user who cannot reach
 * the build tree): an installed sandstep, in directories only root writes,
 * ignores them, so nobody's environment can point an installed program's
 * proxy at other addresses or make it load another module.  (SANDSTEP_TEST_* variables are handed to a
 * sandbox's supervisor and its egress proxy, which read them the same way.)
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define SANDSTEP_TEST_HOOKS_MARK "sandstep-test-hooks"

/* TRUE when the running program is one of the build tree's (or a test copy). */
gboolean sandstep_test_hooks_enabled (void);

/* The value of the test hook @name in the environment, or NULL: always NULL
 * outside the build tree. */
const char *sandstep_test_hook (const char *name);

G_END_DECLS
