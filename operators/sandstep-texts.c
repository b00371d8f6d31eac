/* sandstep-texts.c: what the model reads: quoting, notes, descriptions, results and refusals.
 *
 * The decisions against the Airflow contract are listed in sandstep-output.h.
 */
#include "sandstep-output-private.h"

#include <math.h>
#include <string.h>

/* ---- numbers ---- */

char *
sandstep_quote (const char *text)
{
  GString *out = g_string_new (NULL);
  char quote = (strchr (text, '\'') != NULL && strchr (text, '"') == NULL) ? '"' : '\'';

  g_string_append_c (out, quote);
  for (const guchar *p = (const guchar *) text; *p != '\0'; p++)
    {
      switch (*p)
        {
        case '\\': g_string_append (out, "\\\\"); break;
        case '\n': g_string_append (out, "\\n"); break;
        case '\r': g_string_append (out, "\\r"); break;
        case '\t': g_string_append (out, "\\t"); break;
        default:
          if (*p == (guchar) quote)
            g_string_append_printf (out, "\\%c", quote);
          else if (*p < 0x20 || *p == 0x7f)
            g_string_append_printf (out, "\\x%02x", *p);
          else
            g_string_append_c (out, *p);
        }
    }
  g_string_append_c (out, quote);
  return g_string_free (out, FALSE);
}

gint64
sandstep_round_half_even (double value)
{
  double down = floor (value);
  double diff = value - down;

  if (diff < 0.5)
    return (gint64) down;
  if (diff > 0.5)
    return (gint64) down + 1;
  return fmod (down, 2.0) == 0 ? (gint64) down : (gint64) down + 1;
}

/* ---- results ---- */

char *
sandstep_render_command_result (const char *out, const char *err, int exit_code, gboolean timed_out,
                                double applied_timeout_s)
{
  GString *text = g_string_new (NULL);

  if (out != NULL)
    g_string_append_printf (text, "[stdout]\n%s", out);
  if (err != NULL)
    g_string_append_printf (text, "%s[stderr]\n%s", text->len > 0 ? "\n" : "", err);
  if (text->len == 0)
    g_string_append (text, "(no output)");
  if (timed_out)
    {
      g_autofree char *seconds = sandstep_format_seconds (applied_timeout_s);
      g_string_append_printf (text, "\n[timed out after %ss]", seconds);
    }
  else if (exit_code != 0)
    g_string_append_printf (text, "\n[exit code: %d]", exit_code);
  return g_string_free (text, FALSE);
}

gboolean
sandstep_looks_binary (const char *data, gsize len)
{
  return memchr (data, '\0', MIN (len, 8000)) != NULL;
}

char *
sandstep_read_limit_message (const char *path, const char *size_text, guint64 max_bytes)
{
  g_autofree char *quoted = sandstep_quote (path);
  g_autofree char *max = sandstep_format_size (max_bytes);

  if (size_text != NULL)
    return g_strdup_printf ("%s is %s, over the %s read limit. Read just the part you need with a shell command "
                            "instead (e.g. head, tail, sed -n, or grep).", quoted, size_text, max);
  return g_strdup_printf ("%s is over the %s read limit. Read just the part you need with a shell command instead "
                          "(e.g. head, tail, sed -n, or grep).", quoted, max);
}

/* ---- refusals ---- */

/* The file operations' messages are written for a person at the command
 * line ("list it with 'sandstep ls'"); the model has tools instead.  Each
 * row: the command-line words, and the tool (run_command, read_file,
 * write_file, list_directory: 0 to 3; -1 none) whose name replaces them. */
static const struct {
  const char *cli;
  int tool;
  const char *instead;
} cli_words[] = {
  { "'sandstep ls'", 3, NULL },
  { "'sandstep run'", 0, NULL },
  { "'sandstep get'", 1, NULL },
  { "'sandstep put'", 2, NULL },
  { " from the host", -1, " by the file tools" },
};

char *
sandstep_tool_words (const char *message, const char *const *names)
{
  g_autoptr(GString) text = g_string_new (message);

  for (gsize i = 0; i < G_N_ELEMENTS (cli_words); i++)
    g_string_replace (text, cli_words[i].cli, cli_words[i].tool >= 0 ? names[cli_words[i].tool] : cli_words[i].instead,
                      0);
  return g_strdup (text->str);
}

/* ---- arguments ---- */

gboolean
sandstep_has_surrogates (const char *text, gssize len)
{
  const guchar *p = (const guchar *) text;
  gsize n = len < 0 ? strlen (text) : (gsize) len;

  for (gsize i = 0; i + 1 < n; i++)
    if (p[i] == 0xED && p[i + 1] >= 0xA0 && p[i + 1] <= 0xBF)
      return TRUE;
  return FALSE;
}

/* ---- descriptions ---- */

#define NO_NETWORK_NOTE                                                                                         \
  "This sandbox has NO network access, including DNS, so installing packages or downloading anything will fail. " \
  "Work with what the image already has."

char *
sandstep_network_note (SandstepNetwork network, const char *const *hosts, const char *const *cidrs)
{
  gboolean any_host = hosts != NULL && hosts[0] != NULL;
  gboolean any_cidr = cidrs != NULL && cidrs[0] != NULL;
  g_autofree char *host_list = any_host ? g_strjoinv (", ", (char **) hosts) : NULL;
  g_autofree char *cidr_list = any_cidr ? g_strjoinv (", ", (char **) cidrs) : NULL;

  switch (network)
    {
    case SANDSTEP_NETWORK_OPEN:
      return g_strdup ("This sandbox has outbound network access.");
    case SANDSTEP_NETWORK_NONE:
      return g_strdup (NO_NETWORK_NOTE);
    case SANDSTEP_NETWORK_ALLOW:
      break;
    }
  /* Exactly what the egress proxy enforces (hooks/sandstep-egress.h): names
   * never resolve inside, so the note says to go through HTTPS_PROXY. */
  if (any_host && any_cidr)
    return g_strdup_printf ("This sandbox reaches only these hosts, over HTTPS on port 443 only: %s; and these "
                            "address ranges, on any port: %s. Everything goes through the proxy in HTTPS_PROXY "
                            "(curl, pip, git and npm use it by themselves); names do not resolve inside the sandbox, "
                            "and a listed host whose address is private or loopback is refused. Anything else, and "
                            "plain HTTP to any host, will fail.", host_list, cidr_list);
  if (any_host)
    return g_strdup_printf ("This sandbox reaches only these hosts, over HTTPS on port 443 only: %s. Everything goes "
                            "through the proxy in HTTPS_PROXY (curl, pip, git and npm use it by themselves); names do "
                            "not resolve inside the sandbox. Anything else, and plain HTTP to any host, will fail.",
                            host_list);
  if (any_cidr)
    return g_strdup_printf ("This sandbox reaches only these address ranges, on any port: %s, through the proxy in "
                            "HTTPS_PROXY (an HTTP CONNECT to ADDRESS:PORT); names do not resolve inside the sandbox. "
                            "Anything else will fail.", cidr_list);
  return g_strdup (NO_NETWORK_NOTE);
}

char *
sandstep_lifetime_note (double remaining_s)
{
  gint64 minutes;

  if (remaining_s < 0 || isnan (remaining_s))
    return g_strdup ("How long it has left is not known.");
  if (remaining_s < 60)
    return g_strdup ("Under a minute of its lifetime remained when this run began, so finish up.");
  minutes = sandstep_round_half_even (remaining_s / 60);
  return g_strdup_printf ("About %" G_GINT64_FORMAT " minute%s of its lifetime remained when this run began.",
                          minutes, minutes == 1 ? "" : "s");
}

char *
sandstep_timeout_note (double default_s, double max_s)
{
  g_autofree char *d = sandstep_format_seconds (default_s);
  g_autofree char *m = sandstep_format_seconds (max_s);

  return g_strdup_printf ("Commands time out after %ss unless you pass timeout_seconds (at most %ss); a command "
                          "that times out is killed with everything it started.", d, m);
}

char *
sandstep_image_note (const char *reference, const char *digest, gboolean readonly)
{
  if (reference == NULL)
    return NULL;
  return g_strdup_printf ("Its system is the image %s (%s), not this machine's: use the programs it has%s", reference,
                          digest,
                          readonly ? "; its root is read-only, so only /workspace and /tmp take writes."
                                   : ", and what you install outside /workspace stays for later commands.");
}

char *
sandstep_run_command_description (double default_timeout_s, double max_timeout_s, const char *network_note,
                                  double remaining_s, const char *image_note, const char *const *mounts)
{
  g_autofree char *timeouts = sandstep_timeout_note (default_timeout_s, max_timeout_s);
  g_autofree char *clock = sandstep_lifetime_note (remaining_s);
  GString *out = g_string_new (NULL);

  g_string_append (out,
                   "Run a shell command inside an isolated sandbox with /bin/sh -c and return its output. Pipes, "
                   "redirection, && and globs work; stdin is empty. A non-zero exit is reported, not raised, so "
                   "read stderr and fix your command. Each command starts a fresh shell in /workspace: files "
                   "persist between calls, processes and cd do not. The sandbox is separate from the machine that "
                   "runs this agent and has none of its credentials or environment. Long output is cut in the "
                   "middle: its first and last lines are kept, with a count of what was left out, so filter it "
                   "(grep, tail, head) when you can. ");
  g_string_append (out, timeouts);
  g_string_append (out, " This sandbox was set up by an earlier step, and your files stay in it after this run for "
                        "a later step to collect. ");
  g_string_append (out, network_note);
  g_string_append_c (out, ' ');
  g_string_append (out, clock);
  if (image_note != NULL)
    {
      g_string_append_c (out, ' ');
      g_string_append (out, image_note);
    }
  if (mounts != NULL && mounts[0] != NULL)
    {
      g_autofree char *list = g_strjoinv (", ", (char **) mounts);
      g_string_append_printf (out, " Read-only data is mounted at %s (the file tools read it too).", list);
    }
  return g_string_free (out, FALSE);
}

/* ---- timeouts ---- */

gboolean
sandstep_command_budget (gboolean requested_given, double requested, double default_s, double max_s,
                         double remaining_s, double *out_budget, char **out_message)
{
  double budget;

  if (!requested_given)
    budget = default_s;
  else if (!isfinite (requested) || requested <= 0)
    {
      g_autofree char *shown = sandstep_format_number (requested);
      *out_message = g_strdup_printf ("timeout_seconds must be greater than 0, got %s.", shown);
      return FALSE;
    }
  else
    budget = MIN (requested, max_s);
  if (remaining_s >= 0)
    budget = MIN (budget, remaining_s);
  /* Never 0: the backend reads 0 as "no budget but the lifetime". */
  *out_budget = MAX (budget, 0.001);
  return TRUE;
}
