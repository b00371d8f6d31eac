/* sandstep-invocation.c: parsing one helper command line against the operator table. */
#include "sandstep-operator.h"
#include "sandstep-tools.h"

#include <stdio.h>
#include <string.h>

#include "sandstep-error.h"
#include "sandstep-who.h"
#include "sandstep-owner-libc.h"
#include "sandstep-step.h"

/* How much of a bad handle a message quotes. */
#define SHOWN_HANDLE_MAX 96

gboolean
sandstep_option_check (const SandstepOption *option, const char *value, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  gint64 duration;
  double seconds;
  guint64 size;
  gboolean ok = TRUE;

  switch (option->kind)
    {
    case SANDSTEP_OPTION_FLAG:
      if (value != NULL)
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "option '%s' takes no value, got '%s'; write it alone", option->name, value);
      return TRUE;
    case SANDSTEP_OPTION_STRING:
      if (value == NULL || value[0] == '\0')
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                               "option '%s' needs a value: %s", option->name, option->help);
      return TRUE;
    case SANDSTEP_OPTION_CHOICE:
      {
        g_auto(GStrv) choices = g_strsplit (option->choices, "|", -1);
        if (value != NULL && g_strv_contains ((const char *const *) choices, value))
          return TRUE;
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "option '%s' does not accept '%s'; accepted values: %s", option->name,
                               value ? value : "", option->choices);
      }
    case SANDSTEP_OPTION_DURATION:
    case SANDSTEP_OPTION_KEEP:
      ok = sandstep_parse_duration (value, option->kind == SANDSTEP_OPTION_KEEP, &duration, &local_error);
      break;
    case SANDSTEP_OPTION_SECONDS:
    case SANDSTEP_OPTION_WAIT:
      ok = sandstep_parse_seconds (option->name, value, option->kind == SANDSTEP_OPTION_WAIT, &seconds, &local_error);
      break;
    case SANDSTEP_OPTION_SIZE:
      ok = sandstep_parse_size (value, &size, &local_error);
      break;
    case SANDSTEP_OPTION_IDENTIFIER:
      if (!sandstep_tool_prefix_is_valid (value))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "option '%s' must be an identifier (a letter or '_', then letters, digits and '_', "
                               "at most %d in all), got '%s'; write for example %s=box", option->name,
                               SANDSTEP_TOOL_PREFIX_MAX, value ? value : "", option->name);
      return TRUE;
    case SANDSTEP_OPTION_COUNT:
      {
        guint64 n;
        if (!sandstep_parse_count (value, G_MAXINT, &n))
          return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                                 "option '%s' must be a whole number of 1 or more, got '%s'", option->name,
                                 value ? value : "");
        return TRUE;
      }
    }
  if (!ok)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "option '%s': %s",
                           option->name, local_error->message);
  return TRUE;
}

static char *
accepted_options (const SandstepOperator *op)
{
  static const char *const common[] = { "handle", "wait", "owner", "holder", "backend" };
  GString *out = g_string_new (NULL);

  for (const SandstepOption *o = op->options; o->name != NULL; o++)
    g_string_append_printf (out, "%s--%s", out->len ? ", " : "", o->name);
  for (gsize i = 0; i < G_N_ELEMENTS (common); i++)
    if (sandstep_option_lookup (op, common[i]) != NULL)
      g_string_append_printf (out, "%s--%s", out->len ? ", " : "", common[i]);
  return g_string_free (out, FALSE);
}

void
sandstep_invocation_free (SandstepInvocation *invocation)
{
  if (invocation == NULL)
    return;
  g_hash_table_unref (invocation->values);
  g_ptr_array_unref (invocation->operands);
  g_free ((char *) invocation->who.owner);
  g_free ((char *) invocation->who.holder);
  g_free ((char *) invocation->who.step);
  g_free (invocation->handle);
  sandstep_backend_free (invocation->backend);
  g_clear_error (&invocation->unreachable);
  g_free (invocation);
}

static char *
default_identity (const char *variable, const char *suffix)
{
  const char *value = g_getenv (variable);

  if (value != NULL && value[0] != '\0')
    return g_strdup (value);
  return sandstep_identity_fallback (suffix);
}

char *
sandstep_identity_fallback (const char *suffix)
{
  return g_strdup_printf ("%s@%s%s", g_get_user_name (), g_get_host_name (), suffix);
}

char *
sandstep_owner_derive (const char *owner, const char *run, const char *dag, const char *top, const char *fallback,
                       GError **error)
{
  char out[SANDSTEP_IDENTITY_MAX + 1];

  switch (sandstep_step_owner (owner, run, dag, top, out, sizeof out))
    {
    case SANDSTEP_RUN_OWNER_NONE:
      return g_strdup (fallback);
    case SANDSTEP_RUN_OWNER_OK:
      return g_strdup (out);
    case SANDSTEP_RUN_OWNER_NO_DAG:
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                      "SANDSTEP_RUN is '%s' but neither SANDSTEP_DAG nor SANDSTEP_TOP says whose DAG it is, so the "
                      "owner (DAG/RUN) is unknown; set SANDSTEP_DAG as the host that provisioned had it (make's "
                      "DAG is SANDSTEP_DAG, else its top directory's name), or set SANDSTEP_OWNER", run);
      return NULL;
    case SANDSTEP_RUN_OWNER_BAD_RUN:
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "SANDSTEP_RUN '%s' is not a run id: it must be 1 to 128 letters, digits or ._:@+- and not start "
                      "with '.' or '-'", run);
      return NULL;
    case SANDSTEP_RUN_OWNER_BAD_DAG:
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "the DAG name (SANDSTEP_DAG, else the last part of SANDSTEP_TOP) contains '/' or a control "
                      "character; set SANDSTEP_DAG to a plain name, or set SANDSTEP_OWNER");
      return NULL;
    case SANDSTEP_RUN_OWNER_TOO_LONG:
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "SANDSTEP_OWNER is longer than %d bytes; set a shorter one", SANDSTEP_IDENTITY_MAX);
      return NULL;
    }
  return g_strdup (fallback);
}

SandstepInvocation *
sandstep_invocation_parse (const SandstepOperator *op, int argc, char **argv, GError **error)
{
  g_autoptr(SandstepInvocation) invocation = g_new0 (SandstepInvocation, 1);
  gboolean options_done = FALSE;

  invocation->op = op;
  invocation->values = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) g_ptr_array_unref);
  invocation->operands = g_ptr_array_new_with_free_func (g_free);

  for (int i = 0; i < argc; i++)
    {
      const char *arg = argv[i];
      g_autofree char *name = NULL;
      const char *value = NULL;
      const SandstepOption *option;
      GPtrArray *values;

      if (options_done || arg[0] != '-' || arg[1] == '\0')
        {
          g_ptr_array_add (invocation->operands, g_strdup (arg));
          continue;
        }
      if (strcmp (arg, "--") == 0)
        {
          options_done = TRUE;
          continue;
        }
      if (arg[1] != '-')
        {
          g_autofree char *accepted = accepted_options (op);
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_UNKNOWN_OPTION,
                          "unknown option '%s'; accepted: %s (see 'sandstep %s --help')", arg, accepted,
                          op->name);
          return NULL;
        }
      name = g_strdup (arg + 2);
      if (strchr (name, '=') != NULL)
        {
          char *eq = strchr (name, '=');
          *eq = '\0';
          value = arg + 2 + (eq - name) + 1;
        }
      option = sandstep_option_lookup (op, name);
      if (option == NULL)
        {
          g_autofree char *accepted = accepted_options (op);
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_UNKNOWN_OPTION,
                          "unknown option '--%s'; accepted: %s (see 'sandstep %s --help')", name,
                          accepted, op->name);
          return NULL;
        }
      if (value == NULL && option->kind != SANDSTEP_OPTION_FLAG)
        {
          if (i + 1 >= argc)
            {
              sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                              "option '--%s' needs a value: %s", name, option->help);
              return NULL;
            }
          value = argv[++i];
        }
      if (!sandstep_option_check (option, value, error))
        return NULL;
      values = g_hash_table_lookup (invocation->values, option->name);
      if (values == NULL)
        {
          values = g_ptr_array_new_with_free_func (g_free);
          g_hash_table_insert (invocation->values, (gpointer) option->name, values);
        }
      else if (!option->repeatable)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "option '--%s' is given twice; give it once", name);
          return NULL;
        }
      g_ptr_array_add (values, g_strdup (value));
    }

  if (sandstep_invocation_has (invocation, "owner"))
    invocation->who.owner = g_strdup (sandstep_invocation_get (invocation, "owner"));
  else if (op->flags & SANDSTEP_OP_ANYONES)
    invocation->who.owner = sandstep_identity_fallback ("");
  else
    {
      g_autofree char *fallback = sandstep_identity_fallback ("");

      invocation->who.owner = sandstep_owner_derive (g_getenv ("SANDSTEP_OWNER"), g_getenv ("SANDSTEP_RUN"),
                                                     g_getenv ("SANDSTEP_DAG"), g_getenv ("SANDSTEP_TOP"), fallback,
                                                     error);
      if (invocation->who.owner == NULL)
        return NULL;
    }
  invocation->who.holder = sandstep_invocation_has (invocation, "holder")
                             ? g_strdup (sandstep_invocation_get (invocation, "holder"))
                             : default_identity ("SANDSTEP_HOLDER", "/cli");
  if (!sandstep_identity_check ("owner", invocation->who.owner, error) ||
      !sandstep_identity_check ("holder", invocation->who.holder, error))
    return NULL;

  if (sandstep_invocation_has (invocation, "step"))
    {
      SandstepStep step;
      char text[64];

      if (!sandstep_step_parse (sandstep_invocation_get (invocation, "step"), &step))
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "option '--step' takes PID:LINE, got '%s'; the make plugin sets it, leave it out by hand",
                          sandstep_invocation_get (invocation, "step"));
          return NULL;
        }
      sandstep_step_format (&step, text, sizeof text);
      if (text[0] != '\0')
        invocation->who.step = g_strdup (text);
    }

  if (op->flags & SANDSTEP_OP_HANDLE)
    {
      const char *given = sandstep_invocation_get (invocation, "handle");
      /* A task of a Slurm job that provisioned a sandbox finds it here. */
      if (given == NULL && g_getenv ("SANDSTEP_HANDLE") != NULL && g_getenv ("SANDSTEP_HANDLE")[0] != '\0')
        given = g_getenv ("SANDSTEP_HANDLE");
      if (given == NULL)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                          "no --handle given; pass --handle=HANDLE or --handle=@FILE with the file the "
                          "provisioning step wrote (or set SANDSTEP_HANDLE)");
          return NULL;
        }
      invocation->handle = sandstep_resolve_handle (given, error);
      if (invocation->handle == NULL)
        return NULL;
    }
  return g_steal_pointer (&invocation);
}

const char *
sandstep_invocation_get (SandstepInvocation *invocation, const char *name)
{
  GPtrArray *values = g_hash_table_lookup (invocation->values, name);

  return values != NULL && values->len > 0 ? values->pdata[values->len - 1] : NULL;
}

GPtrArray *
sandstep_invocation_get_all (SandstepInvocation *invocation, const char *name)
{
  return g_hash_table_lookup (invocation->values, name);
}

gboolean
sandstep_invocation_has (SandstepInvocation *invocation, const char *name)
{
  return g_hash_table_contains (invocation->values, name);
}

char *
sandstep_resolve_handle (const char *given, GError **error)
{
  g_autofree char *text = NULL;
  g_autofree char *shown = NULL;

  /* Messages quote what was given or read, escaped and cut short: it may be anything. */
  if (given[0] == '@')
    {
      const char *path = given + 1;
      g_autofree char *shown_path = sandstep_escape (path, -1, 0, SANDSTEP_ESCAPE_VALUE);

      text = sandstep_handle_read_file (path, error);
      if (text == NULL)
        return NULL;
      g_strstrip (text);
      if (text[0] == '\0' || strcmp (text, "None") == 0)
        {
          sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                          "The handle file '%s' is %s, which is not a sandbox handle: the step that provisions the "
                          "sandbox produced nothing (make -t leaves empty files), or this step ran before it; "
                          "remove '%s' and run make again",
                          shown_path, text[0] == '\0' ? "empty" : "'None'", shown_path);
          return NULL;
        }
      /* A file's text is quoted only when it is a handle: the path may be a link to any file the caller
       * can read (/etc/shadow), and the error goes to make's log. */
      if (!sandstep_handle_is_valid (text))
        {
          sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                          "The handle file '%s' does not hold a sandbox handle (%zu bytes%s; its content is not "
                          "shown); it should hold the one line that 'sandstep provision' printed (they look like "
                          "%s0123456789abcdef): remove '%s' and run the step that provisions the sandbox again",
                          shown_path, strlen (text), strchr (text, '\n') != NULL ? ", several lines" : "",
                          SANDSTEP_HANDLE_PREFIX, shown_path);
          return NULL;
        }
    }
  else
    {
      g_autofree char *shown_text = sandstep_escape (given, -1, SHOWN_HANDLE_MAX, SANDSTEP_ESCAPE_VALUE);

      text = g_strstrip (g_strdup (given));
      shown = g_strdup_printf ("'%s'", shown_text);
      if (text[0] == '\0' || strcmp (text, "None") == 0)
        {
          sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                          "--handle rendered to %s, which is not a sandbox handle: the step that provisions the "
                          "sandbox produced nothing, or this step ran before it; pass --handle=@FILE with the file "
                          "that step wrote",
                          shown);
          return NULL;
        }
    }
  if (!sandstep_handle_is_valid (text))
    {
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,
                      "%s is not a sandbox handle (they look like %s0123456789abcdef); pass the line "
                      "'sandstep provision' printed",
                      shown, SANDSTEP_HANDLE_PREFIX);
      return NULL;
    }
  return g_steal_pointer (&text);
}

static void
print_waiting (const char *handle, const char *current_holder, double wait_s, gpointer user_data)
{
  SandstepInvocation *invocation = user_data;
  g_autofree char *text = sandstep_busy_waiting_text (handle, current_holder, wait_s);

  g_printerr ("sandstep %s: %s\n", invocation->op->name, text);
}

SandstepAttachment *
sandstep_invocation_attach (SandstepInvocation *invocation, GError **error)
{
  /* A server's client is a person or an agent at a prompt: another holder is said at once, with its name,
   * rather than after the wait a make step gets (unless --wait asks for one). */
  double wait_s = (invocation->op->flags & SANDSTEP_OP_SERVES) != 0 ? 0 : SANDSTEP_WAIT_DEFAULT_S;
  const char *given = sandstep_invocation_get (invocation, "wait");

  if (given != NULL && !sandstep_parse_seconds ("wait", given, TRUE, &wait_s, error))
    return NULL;
  return sandstep_backend_attach (invocation->backend, invocation->handle, &invocation->who, wait_s,
                                             print_waiting, invocation, error);
}

gboolean
sandstep_invocation_run_step (SandstepInvocation *invocation, const SandstepRunRequest *request,
                              SandstepRanFunc on_ran, gpointer ran_data, GError **error)
{
  double wait_s = SANDSTEP_WAIT_DEFAULT_S;
  const char *given = sandstep_invocation_get (invocation, "wait");

  if (given != NULL && !sandstep_parse_seconds ("wait", given, TRUE, &wait_s, error))
    return FALSE;
  return sandstep_backend_run_step (invocation->backend, invocation->handle, &invocation->who, wait_s,
                                    print_waiting, invocation, request, on_ran, ran_data, error);
}
