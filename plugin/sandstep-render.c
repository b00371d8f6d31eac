/* sandstep-render.c: validate one make call against the operator table and render it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "sandstep-render.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-tool-options.h"

G_DEFINE_QUARK (sandstep-plugin-error-quark, sandstep_plugin_error)

/* The options the plugin sets itself from the run's identity and the first word. */
static const char *const reserved[] = { "owner", "holder", "handle", "step" };

/* Whitespace as make's word functions see it, plus the rest of C's. */
static gboolean
is_space (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static GPtrArray *
split_words (const char *text)
{
  GPtrArray *words = g_ptr_array_new_with_free_func (g_free);

  if (text == NULL)
    return words;
  while (*text != '\0')
    {
      const char *start;

      while (is_space (*text))
        text++;
      if (*text == '\0')
        break;
      start = text;
      while (*text != '\0' && !is_space (*text))
        text++;
      g_ptr_array_add (words, g_strndup (start, text - start));
    }
  return words;
}

static char *
strip_copy (const char *text)
{
  const char *end;

  if (text == NULL)
    return NULL;
  while (is_space (*text))
    text++;
  end = text + strlen (text);
  while (end > text && is_space (end[-1]))
    end--;
  return g_strndup (text, end - text);
}

void
sandstep_render_quote (GString *out, const char *word)
{
  g_string_append_c (out, '\'');
  for (const char *p = word; *p != '\0'; p++)
    {
      if (*p == '\'')
        g_string_append (out, "'\\''");
      else
        g_string_append_c (out, *p);
    }
  g_string_append_c (out, '\'');
}

static void
append_quoted_word (GString *out, const char *word)
{
  g_string_append_c (out, ' ');
  sandstep_render_quote (out, word);
}

static void append_form (GString *out, const SandstepOption *option);

static void
append_accepted (GString *out, const SandstepOption *option)
{
  if (out->len > 0)
    g_string_append (out, ", ");
  append_form (out, option);
  if (option->repeatable)
    g_string_append (out, " (repeatable)");
}

/* How @option is written in make: "timeout=SECONDS", "network=none|open", "expired";
 * the placeholders are the operator table's, as in the helper's usage. */
static void
append_form (GString *out, const SandstepOption *option)
{
  const char *metavar = sandstep_option_metavar (option);

  if (metavar == NULL)
    g_string_append (out, option->name);
  else
    g_string_append_printf (out, "%s=%s", option->name, metavar);
}

char *
sandstep_render_accepted (const SandstepOperator *op)
{
  GString *out = g_string_new (NULL);

  for (const SandstepOption *o = op->options; o->name != NULL; o++)
    append_accepted (out, o);
  /* The options every handle or claiming operator shares, less those the plugin sets. */
  if (op->flags & SANDSTEP_OP_CLAIMS)
    {
      const SandstepOption *wait = sandstep_option_lookup (op, "wait");
      if (wait != NULL)
        append_accepted (out, wait);
    }
  return g_string_free (out, FALSE);
}

/* The accepted options as the tail of a message: "; accepted: a=X, b" or "; it takes no options". */
static char *
accepted_tail (const SandstepOperator *op)
{
  g_autofree char *accepted = sandstep_render_accepted (op);

  if (accepted[0] == '\0')
    return g_strdup ("; it takes no options");
  return g_strdup_printf ("; accepted: %s", accepted);
}

static gboolean
is_reserved (const char *key)
{
  for (gsize i = 0; i < G_N_ELEMENTS (reserved); i++)
    if (strcmp (key, reserved[i]) == 0)
      return TRUE;
  return FALSE;
}

/* Does @word read as one of @op's options (so that it cannot be the handle)? */
static gboolean
looks_like_option (const SandstepOperator *op, const char *word)
{
  const char *eq = strchr (word, '=');
  g_autofree char *key = eq != NULL ? g_strndup (word, eq - word) : g_strdup (word);
  const SandstepOption *option = sandstep_option_lookup (op, key);

  if (option == NULL)
    return FALSE;
  /* A bare word is an option only if it is a flag; key=value always is. */
  return eq != NULL || option->kind == SANDSTEP_OPTION_FLAG;
}

/* make runs each line of an expanded recipe line as a command of its own, so
 * a newline inside a quoted word would end the word, and what follows it
 * would run on the host (with -i or a '-' prefix, even after the error).  A
 * NUL cannot come from make; a carriage return is a shell's plain byte. */
static gboolean
check_one_line (const char *function, const char *what, const char *word, GError **error)
{
  const char *nl = strchr (word, '\n');
  g_autofree char *before = NULL;

  if (nl == NULL)
    return TRUE;
  before = sandstep_escape (word, nl - word, 60, SANDSTEP_ESCAPE_VALUE);
  g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_NEWLINE,
               "%s: the %s holds a newline (after '%s'): make would run what follows it as a recipe line of its own, "
               "on the host; put a script of several lines in a file and run that file, or join the lines with ';'",
               function, what, before);
  return FALSE;
}

/* The usage text of the operator's free text: "-- COMMAND" -> "COMMAND". */
static const char *
text_usage (const SandstepOperator *op)
{
  const char *operands = op->operands != NULL ? op->operands : "";

  if (g_str_has_prefix (operands, "-- "))
    operands += 3;
  return operands[0] != '\0' ? operands : "TEXT";
}

char *
sandstep_render (const SandstepOperator *op, const char *args, const char *text,
                 const SandstepRenderContext *context, GError **error)
{
  g_autofree char *function = g_strconcat ("sandbox-", op->name, NULL);
  g_autoptr(GPtrArray) words = split_words (args);
  g_autoptr(GPtrArray) operands = NULL;
  g_autoptr(GHashTable) given = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  g_autoptr(GError) pair_error = NULL;
  g_autoptr(GString) out = g_string_new (NULL);
  g_autofree char *stripped_text = strip_copy (text);
  gboolean takes_handle = (op->flags & SANDSTEP_OP_HANDLE) != 0;
  guint first_option = 0;

  g_return_val_if_fail (context != NULL && context->helper != NULL, NULL);
  g_return_val_if_fail (context->owner != NULL && context->holder != NULL, NULL);
  if (!check_one_line (function, "helper's path ($(SANDSTEP))", context->helper, error) ||
      !check_one_line (function, "holder (the target's name)", context->holder, error) ||
      !check_one_line (function, "owner", context->owner, error))
    return NULL;

  sandstep_render_quote (out, context->helper);
  g_string_append_printf (out, " %s", op->name);

  if (takes_handle)
    {
      const char *handle = words->len > 0 ? words->pdata[0] : NULL;
      g_autofree char *word = NULL;

      if (handle == NULL || looks_like_option (op, handle))
        {
          g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_NO_HANDLE,
                       "%s: missing handle: the first word must be the sandbox's handle or @FILE, the file its "
                       "provisioning step wrote, as in $(%s @box.sbx%s)%s%s%s",
                       function, function, op->text == SANDSTEP_TEXT_NONE ? "" : ",...",
                       handle != NULL ? " (got the option '" : "", handle != NULL ? handle : "",
                       handle != NULL ? "')" : "");
          return NULL;
        }
      if (strcmp (handle, "@") == 0)
        {
          g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_NO_HANDLE,
                       "%s: missing handle: '@' needs the name of the file that holds the handle, as in @box.sbx",
                       function);
          return NULL;
        }
      word = g_strconcat ("--handle=", handle, NULL);
      append_quoted_word (out, word);
      first_option = 1;
    }

  for (guint i = first_option; i < words->len; i++)
    {
      const char *word = words->pdata[i];
      const char *eq = strchr (word, '=');
      g_autofree char *key = eq != NULL ? g_strndup (word, eq - word) : g_strdup (word);
      const char *value = eq != NULL ? eq + 1 : NULL;
      const SandstepOption *option;
      g_autoptr(GError) local_error = NULL;
      g_autofree char *rendered = NULL;

      if (is_reserved (key))
        {
          if (strcmp (key, "handle") == 0 && takes_handle)
            g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_RESERVED,
                         "%s: option 'handle' is not written as an option: give the handle as the first word, "
                         "as in $(%s @box.sbx ...)", function, function);
          else if (strcmp (key, "handle") == 0)
            g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_UNWANTED_HANDLE,
                         "%s takes no handle (got '%s')", function, word);
          else
            g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_RESERVED,
                         "%s: option '%s' is set by the plugin from the run's identity (SANDSTEP_RUN, "
                         "SANDSTEP_DAG, the target and its recipe); it cannot be given here",
                         function, key);
          return NULL;
        }

      option = sandstep_option_lookup (op, key);
      if (option == NULL)
        {
          g_autofree char *tail = accepted_tail (op);

          if (!takes_handle && eq == NULL && word[0] == '@')
            g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_UNWANTED_HANDLE,
                         "%s takes no handle (got '%s'): its words are options%s", function, word, tail);
          else if (!takes_handle && eq == NULL && i == 0)
            g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_UNWANTED_HANDLE,
                         "%s takes no handle and has no option '%s'%s", function, word, tail);
          else
            g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_UNKNOWN_OPTION,
                         "%s: unknown option '%s'%s", function, key, tail);
          return NULL;
        }

      if (option->kind != SANDSTEP_OPTION_FLAG && value == NULL)
        {
          g_autoptr(GString) form = g_string_new (NULL);
          append_form (form, option);
          g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_BAD_VALUE,
                       "%s: option '%s' needs a value: %s, %s", function, key, form->str, option->help);
          return NULL;
        }
      if (!sandstep_option_check (option, value, &local_error))
        {
          g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_BAD_VALUE, "%s: %s", function,
                       local_error->message);
          return NULL;
        }
      if (!option->repeatable && g_hash_table_contains (given, option->name))
        {
          g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_BAD_VALUE,
                       "%s: option '%s' is given twice; give it once", function, option->name);
          return NULL;
        }
      g_hash_table_insert (given, (gpointer) option->name, g_strdup (value));

      rendered = value != NULL ? g_strdup_printf ("--%s=%s", option->name, value)
                               : g_strdup_printf ("--%s", option->name);
      append_quoted_word (out, rendered);
    }

  /* Options checked together, as the helper checks them: a tool server's default budget against its longest. */
  if (sandstep_option_lookup (op, "command-timeout") != NULL &&
      !sandstep_tool_timeouts_check (g_hash_table_lookup (given, "command-timeout"),
                                     g_hash_table_lookup (given, "max-command-timeout"), &pair_error))
    {
      g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_BAD_VALUE, "%s: %s", function,
                   pair_error->message);
      return NULL;
    }

  {
    g_autofree char *owner = g_strconcat ("--owner=", context->owner, NULL);
    g_autofree char *holder = g_strconcat ("--holder=", context->holder, NULL);
    append_quoted_word (out, owner);
    append_quoted_word (out, holder);
  }
  if (context->step != NULL && (op->flags & SANDSTEP_OP_CLAIMS))
    {
      g_autofree char *step = g_strconcat ("--step=", context->step, NULL);
      append_quoted_word (out, step);
    }

  switch (op->text)
    {
    case SANDSTEP_TEXT_NONE:
      if (stripped_text != NULL && stripped_text[0] != '\0')
        {
          g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_UNWANTED_TEXT,
                       "%s takes no text after the comma, but got '%s'; write $(%s%s%s)", function,
                       stripped_text, function, takes_handle ? " HANDLE" : "",
                       op->options[0].name != NULL || (op->flags & SANDSTEP_OP_CLAIMS) ? " [OPTIONS]" : "");
          return NULL;
        }
      break;
    case SANDSTEP_TEXT_COMMAND:
      if (stripped_text == NULL || stripped_text[0] == '\0')
        {
          g_set_error (error, SANDSTEP_PLUGIN_ERROR, SANDSTEP_PLUGIN_ERROR_NO_TEXT,
                       "%s needs its %s after a comma: $(%s%s [OPTIONS],%s)", function, text_usage (op), function,
                       takes_handle ? " HANDLE" : "", text_usage (op));
          return NULL;
        }
      {
        g_autofree char *what = g_ascii_strdown (text_usage (op), -1);

        if (!check_one_line (function, what, stripped_text, error))
          return NULL;
      }
      g_string_append (out, " --");
      append_quoted_word (out, stripped_text);
      break;
    case SANDSTEP_TEXT_WORDS:
      operands = split_words (text);
      if (operands->len > 0)
        g_string_append (out, " --");
      for (guint i = 0; i < operands->len; i++)
        append_quoted_word (out, operands->pdata[i]);
      break;
    }

  /* Every word was checked above; this holds whatever a later change renders. */
  if (!check_one_line (function, "command line", out->str, error))
    return NULL;
  return g_string_free (g_steal_pointer (&out), FALSE);
}
