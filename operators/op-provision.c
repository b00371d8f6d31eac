/* op-provision.c: create a sandbox, or find the one this holder made, and print its handle. */
#include "sandstep-operator.h"
#include "sandstep-image-operators.h"

#include <string.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-egress.h"
#include "sandstep-error.h"
#include "sandstep-image-pull.h"
#include "sandstep-image-ref.h"
#include "sandstep-image-store.h"
#include "sandstep-image-root.h"

static gboolean
add_env (GHashTable *into, const char *option, const char *given, gboolean allow_value, GError **error)
{
  const char *eq = strchr (given, '=');
  g_autofree char *name = eq != NULL ? g_strndup (given, eq - given) : g_strdup (given);
  const char *value;

  if (name[0] == '\0' || !(g_ascii_isalpha (name[0]) || name[0] == '_'))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--%s '%s' does not start with a variable name; write NAME or NAME=VALUE", option, given);
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '_')
      return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                             "--%s '%s': '%s' is not a variable name (letters, digits, '_')", option, given, name);
  if (eq != NULL && !allow_value)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--%s '%s' carries its value on the command line, where any process can read it; "
                           "export %s in the environment and pass --%s=%s",
                           option, name, name, option, name);
  value = eq != NULL ? eq + 1 : g_getenv (name);
  /* A secret's value belongs in the environment only: never suggest a command line for it. */
  if (value == NULL && !allow_value)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "--%s '%s' names a variable that is not set in this environment; export %s in the "
                           "environment sandstep runs in, never on a command line",
                           option, name, name);
  if (value == NULL)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "--%s '%s' names a variable that is not set in this environment; export it, or write "
                           "--%s=%s=VALUE", option, name, option, name);
  g_hash_table_insert (into, g_steal_pointer (&name), g_strdup (value));
  return TRUE;
}

/* The digest of @text if the store has it already, pulled under that reference; else NULL. */
static char *
pulled_already (const char *text, char **out_reference)
{
  g_autoptr(SandstepImageRef) ref = sandstep_image_ref_parse (text, NULL);
  g_autofree char *dir = NULL;
  g_autoptr(SandstepImageStore) store = NULL;
  char *digest;

  if (ref == NULL)
    return NULL;
  dir = sandstep_image_store_default_dir ();
  store = sandstep_image_store_open (dir, FALSE, NULL);
  digest = store != NULL ? sandstep_image_store_find_reference (store, ref->text) : NULL;
  if (digest != NULL && out_reference != NULL)
    *out_reference = g_strdup (ref->text);
  return digest;
}

/* An image that is here already is used by the lean helper; one to pull is pulled where the pull code runs
 * (sandstep-net), as `sandstep pull` does. */
gboolean
sandstep_op_provision_needs_net (SandstepInvocation *invocation)
{
  const char *text = sandstep_invocation_get (invocation, "image");
  g_autofree char *digest = NULL;

  if (text == NULL || sandstep_image_has_registry_client ())
    return FALSE;
  digest = pulled_already (text, NULL);
  return digest == NULL;
}

/* --image: pulled if it is not here yet (one line per layer fetched), and checked whole, so that the sandbox
 * records the digest its layers are found by.  A tag is not asked of the registry again once pulled: `sandstep
 * pull` does that. */
static gboolean
add_image (SandstepSpec *spec, const char *text, const char *max_text, GError **error)
{
  g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) env = g_ptr_array_new_with_free_func (g_free);

  spec->image_digest = pulled_already (text, &spec->image);
  if (spec->image_digest == NULL)
    spec->image_digest = sandstep_op_pull_image (text, max_text, TRUE, &spec->image, error);
  return spec->image_digest != NULL && sandstep_image_root_resolve (spec->image_digest, layers, env, error);
}

/* Limits that no cgroup holds are said once, where they were asked for (the defaults are the same either way):
 * each process of the sandbox gets --memory as its address space (RLIMIT_AS), not the sandbox as a whole, and a
 * command past it sees its own allocation fail, with no line of sandstep's; and for a caller that is not root,
 * whose sandbox runs as its own uid, --pids (RLIMIT_NPROC) counts every process of that uid on the host. */
static void
tell_limits (const char *memory, const char *pids)
{
  g_autofree char *why = NULL;
  g_autoptr(GString) what = NULL;

  if (geteuid () == 0)
    pids = NULL;
  if ((memory == NULL && pids == NULL) || (why = sandstep_cgroup_unavailable ()) == NULL)
    return;
  what = g_string_new (NULL);
  if (memory != NULL)
    g_string_append_printf (what, "--memory=%s bounds each process of the sandbox, not all of them together", memory);
  if (pids != NULL)
    g_string_append_printf (what, "%s--pids=%s counts every process of uid %u on this host, the sandbox's and the "
                            "rest", memory != NULL ? ", and " : "", pids, (unsigned) geteuid ());
  g_printerr ("sandstep provision: %s: %s; run as root, or from a process of your systemd user manager "
              "(systemd-run --user --scope ...), which delegates cgroup v2's memory and pids controllers to you\n",
              what->str, why);
}

/* An I/O weight this host cannot set is said once, and the sandbox runs with the default share: never a silent
 * no-op, and no refusal either (a weight is a preference; most disks here have no weighing scheduler).  A CPU cap
 * that cannot be set the local backend refuses (check_cpu_cap()).  Through sandstepd the server's host decides. */
static void
tell_io_weight (const SandstepSpec *spec)
{
  g_autofree char *why = spec->limits.io_weight != 0 ? sandstep_cgroup_io_weight_unavailable () : NULL;

  if (why != NULL)
    g_printerr ("sandstep provision: --io-weight=%" G_GINT64_FORMAT " cannot apply: %s; the sandbox shares the "
                "default I/O weight\n", spec->limits.io_weight, why);
}

gboolean
sandstep_op_provision (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepSpec) spec = sandstep_spec_new ();
  g_autofree char *handle = NULL;
  const char *value;
  GPtrArray *values;
  gboolean existing = FALSE;
  int hold = -1;

  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; provision takes only options",
                           (char *) invocation->operands->pdata[0]);
  if ((value = sandstep_invocation_get (invocation, "network")) != NULL &&
      !sandstep_network_from_string (value, &spec->network, error))
    return FALSE;
  if ((values = sandstep_invocation_get_all (invocation, "allow")) != NULL)
    for (guint i = 0; i < values->len; i++)
      {
        if (!sandstep_egress_check_host_entry (values->pdata[i], error))
          return FALSE;
        g_ptr_array_add (spec->allow_hosts, g_strdup (values->pdata[i]));
      }
  if ((values = sandstep_invocation_get_all (invocation, "allow-cidr")) != NULL)
    for (guint i = 0; i < values->len; i++)
      {
        if (!sandstep_egress_check_cidr_entry (values->pdata[i], error))
          return FALSE;
        g_ptr_array_add (spec->allow_cidrs, g_strdup (values->pdata[i]));
      }
  if (spec->allow_hosts->len + spec->allow_cidrs->len > 0)
    {
      /* An allowlist means network=allow; with another mode it contradicts itself. */
      if (sandstep_invocation_has (invocation, "network") && spec->network != SANDSTEP_NETWORK_ALLOW)
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "--allow and --allow-cidr need --network=allow, but --network is '%s'; drop one of them",
                               sandstep_network_to_string (spec->network));
      spec->network = SANDSTEP_NETWORK_ALLOW;
    }
  else if (spec->network == SANDSTEP_NETWORK_ALLOW)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "--network=allow needs at least one --allow=HOST or --allow-cidr=CIDR; without any, "
                           "use --network=none");
  if ((value = sandstep_invocation_get (invocation, "lifetime")) != NULL &&
      !sandstep_parse_duration (value, FALSE, &spec->lifetime_s, error))
    return FALSE;
  if ((value = sandstep_invocation_get (invocation, "memory")) != NULL &&
      !sandstep_parse_size (value, &spec->limits.memory, error))
    return FALSE;
  if ((value = sandstep_invocation_get (invocation, "pids")) != NULL)
    {
      guint64 pids = 0;
      /* Checked already against the option's kind. */
      sandstep_parse_count (value, G_MAXINT, &pids);
      spec->limits.pids = (gint64) pids;
    }
  if ((value = sandstep_invocation_get (invocation, "cpu-time")) != NULL &&
      !sandstep_parse_duration (value, FALSE, &spec->limits.cpu_time_s, error))
    return FALSE;
  if ((value = sandstep_invocation_get (invocation, "disk")) != NULL &&
      !sandstep_parse_size (value, &spec->limits.disk, error))
    return FALSE;
  if ((value = sandstep_invocation_get (invocation, "cpus")) != NULL &&
      !sandstep_parse_cpus (value, &spec->limits.millicpus, error))
    return FALSE;
  if ((value = sandstep_invocation_get (invocation, "io-weight")) != NULL)
    {
      guint64 weight = 0;
      if (!sandstep_parse_count (value, SANDSTEP_MAX_IO_WEIGHT, &weight))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "--io-weight '%s' is not a weight from 1 to %d (io.weight's scale; 100 is the "
                               "default)", value, SANDSTEP_MAX_IO_WEIGHT);
      spec->limits.io_weight = (gint64) weight;
    }
  if ((values = sandstep_invocation_get_all (invocation, "env")) != NULL)
    for (guint i = 0; i < values->len; i++)
      if (!add_env (spec->env, "env", values->pdata[i], TRUE, error))
        return FALSE;
  if ((values = sandstep_invocation_get_all (invocation, "secret")) != NULL)
    for (guint i = 0; i < values->len; i++)
      if (!add_env (spec->secrets, "secret", values->pdata[i], FALSE, error))
        return FALSE;
  if ((values = sandstep_invocation_get_all (invocation, "mount")) != NULL)
    for (guint i = 0; i < values->len; i++)
      if (!sandstep_spec_add_mount (spec, values->pdata[i], error))
        return FALSE;
  if ((value = sandstep_invocation_get (invocation, "root")) != NULL)
    {
      if (!sandstep_invocation_has (invocation, "image"))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                               "--root=%s needs --image=REF: the host's /usr is always read-only", value);
      spec->root_readonly = strcmp (value, "readonly") == 0;
    }
  if ((value = sandstep_invocation_get (invocation, "retry")) != NULL)
    spec->retry_clean = strcmp (value, "clean") == 0;
  /* Through sandstepd the server pulls into its own store: the reference travels, checked here. */
  if ((value = sandstep_invocation_get (invocation, "image")) != NULL &&
      g_strcmp0 (invocation->backend->klass->name, "local") != 0)
    {
      g_autoptr(GError) local = NULL;
      g_autoptr(SandstepImageRef) ref = sandstep_image_ref_parse (value, &local);
      if (ref == NULL)
        {
          g_set_error_literal (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, local->message);
          return FALSE;
        }
      if (ref->transport != SANDSTEP_IMAGE_TRANSPORT_REGISTRY)
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                               "--image '%s' names a file on this machine, which the server cannot read; push the "
                               "image to a registry and give its docker:// reference", value);
      spec->image = g_strdup (ref->text);
    }
  else if ((value = sandstep_invocation_get (invocation, "image")) != NULL)
    {
      /* Held from the pull (or the look that finds the image here) until the sandbox is among the image's
       * users: `gc --images` waits, and never removes the image between the two. */
      hold = sandstep_image_root_hold (error);
      if (hold < 0)
        return FALSE;
      if (!add_image (spec, value, sandstep_invocation_get (invocation, "max-image-size"), error))
        {
          close (hold);
          return FALSE;
        }
    }

  handle = sandstep_backend_provision (invocation->backend, spec, &invocation->who, &existing, error);
  if (hold >= 0)
    close (hold);
  if (handle == NULL)
    return FALSE;
  if (g_strcmp0 (invocation->backend->klass->name, "local") == 0)
    {
      tell_limits (sandstep_invocation_get (invocation, "memory"), sandstep_invocation_get (invocation, "pids"));
      tell_io_weight (spec);
    }
  if (existing)
    {
      g_autofree char *holder = sandstep_escape (invocation->who.holder, -1, 0, SANDSTEP_ESCAPE_VALUE);

      g_printerr ("sandstep provision: '%s' already provisioned %s; using it again\n", holder, handle);
    }
  g_print ("%s\n", handle);
  *out_exit = 0;
  return TRUE;
}
