/* sandstep-spec.h: what a sandbox is asked to be (a plain value).
 *
 * A spec is fixed at provision time and recorded with the sandbox, so every
 * later step runs under the same network mode, environment and mounts.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef enum {
  SANDSTEP_NETWORK_NONE,   /* loopback only; DNS fails */
  SANDSTEP_NETWORK_OPEN,   /* the host's network */
  SANDSTEP_NETWORK_ALLOW,  /* only the allowlist, through the host-side proxy */
} SandstepNetwork;

typedef struct {
  char *host_path;         /* absolute, canonical */
  char *name;              /* mounted read-only at /data/NAME */
} SandstepMount;

/* Resource limits of every command; 0 means "the default" (see sandstep-limits.h). */
typedef struct {
  guint64 memory;          /* bytes, all processes of a command together */
  gint64 pids;             /* processes and threads of a command together */
  gint64 cpu_time_s;       /* CPU seconds of each process */
  guint64 disk;            /* bytes: the largest file a command may write */
  gint64 millicpus;        /* thousandths of a CPU the sandbox may use at most, together (--cpus); 0: no cap */
  gint64 io_weight;        /* the sandbox's I/O weight among sandboxes, 1 to 10000 as io.weight (--io-weight) */
} SandstepLimits;

typedef struct {
  SandstepNetwork network;
  SandstepLimits limits;
  gint64 lifetime_s;       /* > 0 */
  GHashTable *env;         /* NAME -> VALUE, given with --env */
  GHashTable *secrets;     /* NAME -> VALUE, given with --secret; masked in tool output */
  GPtrArray *mounts;       /* of SandstepMount */
  GPtrArray *allow_hosts;  /* network=allow: names reached over HTTPS on 443 */
  GPtrArray *allow_cidrs;  /* network=allow: address ranges reached on any port */
  char *image;             /* the root from an image: its reference as pulled (NULL: the host's /usr) */
  char *image_digest;      /* and its manifest's digest, which the layers are found by; NULL in a spec that
                            * leaves the pull to the backend (a client of sandstepd) */
  gboolean root_readonly;  /* --root=readonly: the image's layers with no writable layer on top */
  gboolean retry_clean;    /* --retry=clean: a make target run again after it failed starts from the files its
                            * failed attempt started from (a checkpoint at its first line: docs/forks.md) */
} SandstepSpec;

#define SANDSTEP_DEFAULT_LIFETIME_S (60 * 60)
/* A cgroup refuses a pids.max of PID_MAX_LIMIT (4M) or more, and the sandbox's init takes one more. */
#define SANDSTEP_MAX_PIDS (4 * 1024 * 1024 - 1)
/* Below this the sandbox's init and a shell cannot start within the limit. */
#define SANDSTEP_MIN_MEMORY (4ULL << 20)
/* --cpus: the kernel's smallest CFS quota is 1 ms of a period, which is 100 ms here; the largest a bound no host
 * reaches. */
#define SANDSTEP_MIN_MILLICPUS 10
#define SANDSTEP_MAX_MILLICPUS (4096 * 1000)
/* --io-weight: io.weight's range (cgroup v2); v1's weights are scaled from it (sandstep-cgroup.c). */
#define SANDSTEP_MAX_IO_WEIGHT 10000

/* "--cpus" text (a decimal number of CPUs, at most 3 places: "0.5", "2") as thousandths of a CPU, checked
 * against the range above; the error names the option. */
gboolean sandstep_parse_cpus (const char *text, gint64 *out_millicpus, GError **error);

SandstepSpec *sandstep_spec_new (void);
void sandstep_spec_free (SandstepSpec *spec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepSpec, sandstep_spec_free)

const char *sandstep_network_to_string (SandstepNetwork network);
gboolean sandstep_network_from_string (const char *text, SandstepNetwork *out, GError **error);

/* Adds a mount from "HOSTPATH:/data/NAME"; the host path must exist. */
gboolean sandstep_spec_add_mount (SandstepSpec *spec, const char *text, GError **error);

/* The spec as JSON, without secret values (names only) unless @with_secrets. */
JsonNode *sandstep_spec_to_json (const SandstepSpec *spec, gboolean with_secrets);
SandstepSpec *sandstep_spec_from_json (JsonNode *node, GError **error);
/* A copy whole, secrets included. */
SandstepSpec *sandstep_spec_copy (const SandstepSpec *spec);

/* Refuses (SANDSTEP_USAGE_ERROR) values that would make every command fail,
 * or that a record could not store: pids over the kernel's count, memory
 * too small to start in, text that is not UTF-8, a mount name over NAME_MAX. */
gboolean sandstep_spec_check (const SandstepSpec *spec, GError **error);

/* How @asked differs from @had, one phrase per differing field as an option
 * names it ("network is 'none' there, 'open' asked"), joined by "; ";
 * NULL when they are the same.  Secrets are compared by name only: their
 * values never appear, and a rotated value asks nothing new. */
char *sandstep_spec_differences (const SandstepSpec *had, const SandstepSpec *asked);

G_END_DECLS
