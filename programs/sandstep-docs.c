/* sandstep-docs.c: the man pages and the bash completion, written at build
 * time from the operator table, so that they say what `sandstep --help` and
 * the make plugin's checks say.
 *
 *   sandstep-docs sandstep             > sandstep.1
 *   sandstep-docs make                 > sandstep-make.7
 *   sandstep-docs sandstepd HELP.txt   > sandstepd.8   (HELP.txt: `sandstepd --help`)
 *   sandstep-docs completion           > sandstep      (bash-completion)
 *   sandstep-docs markdown             > docs/reference.md (test-docs checks it is current)
 */
#include <stdio.h>
#include <string.h>

#include "sandstep-exit.h"
#include "sandstep-operator.h"

/* @text for troff: backslashes and dashes escaped, a leading dot or quote defused. */
static void
put_text (GString *out, const char *text)
{
  if (text[0] == '.' || text[0] == '\'')
    g_string_append (out, "\\&");
  for (const char *p = text; *p != '\0'; p++)
    {
      if (*p == '\\')
        g_string_append (out, "\\e");
      else if (*p == '-')
        g_string_append (out, "\\-");
      else
        g_string_append_c (out, *p);
    }
}

static void
put_line (GString *out, const char *text)
{
  put_text (out, text);
  g_string_append_c (out, '\n');
}

static void
put_header (GString *out, const char *name, const char *section, const char *summary)
{
  g_string_append_printf (out, ".TH %s %s \"\" \"sandstep %s\" \"sandstep\"\n.SH NAME\n", name, section,
                          SANDSTEP_VERSION);
  put_text (out, name);
  g_string_append (out, " \\- ");
  put_line (out, summary);
}

/* "--NAME=METAVAR" (or "--NAME"), as the helper's usage writes it; "NAME=METAVAR" in make. */
static char *
option_form (const SandstepOption *option, gboolean in_make)
{
  const char *metavar = sandstep_option_metavar (option);

  return g_strdup_printf ("%s%s%s%s", in_make ? "" : "--", option->name, metavar != NULL ? "=" : "",
                          metavar != NULL ? metavar : "");
}

static void
put_option (GString *out, const SandstepOption *option, gboolean in_make)
{
  g_autofree char *form = option_form (option, in_make);

  g_string_append (out, ".TP\n.B ");
  put_line (out, form);
  put_text (out, option->help);
  put_line (out, option->repeatable ? " (repeatable)" : "");
}

/* The options every operator shares: shown once, not under each operator. */
static gboolean
is_common (const char *name)
{
  return strcmp (name, "owner") == 0 || strcmp (name, "holder") == 0 || strcmp (name, "backend") == 0 ||
         strcmp (name, "handle") == 0 || strcmp (name, "wait") == 0 || strcmp (name, "step") == 0;
}

static const struct {
  int status;
  const char *meaning;
} exit_statuses[] = {
  { SANDSTEP_EXIT_OK, "done" },
  { SANDSTEP_EXIT_USAGE, "usage: an unknown option, a bad value, a missing argument, a destination that is not a "
                         "URL, a provision by a holder that provisioned a sandbox with another spec" },
  { SANDSTEP_EXIT_BAD_HANDLE, "an empty, None or malformed handle, or a handle file that is missing or empty" },
  { SANDSTEP_EXIT_NO_SANDBOX, "no such sandbox: destroyed, or never provisioned here" },
  { SANDSTEP_EXIT_NOT_OWNER, "the sandbox carries another owner" },
  { SANDSTEP_EXIT_EXPIRED, "the sandbox's lifetime is over" },
  { SANDSTEP_EXIT_PATH, "a path refused: outside /workspace and /tmp, escaping, missing, of the wrong type, too large" },
  { SANDSTEP_EXIT_EXPORT, "an export destination could not be written" },
  { SANDSTEP_EXIT_BUSY, "held by another holder, and the wait ran out" },
  { SANDSTEP_EXIT_IMAGE, "an image could not be pulled or used: unknown, refused by the registry, tampered with, for "
                         "another platform, too large, or a layer refused as hostile" },
  { SANDSTEP_EXIT_TIMEOUT, "the command ran out of its budget and was killed" },
  { SANDSTEP_EXIT_INTERNAL, "sandstep itself failed: the jail could not be built (the message says which host "
                            "restriction it met and how to lift it), the state directory is unusable" },
};

static const struct {
  const char *name;
  const char *meaning;
} environment[] = {
  { "SANDSTEP_STATE_DIR", "where local sandboxes live (default /var/lib/sandstep for root, else "
                          "$XDG_STATE_HOME/sandstep)" },
  { "SANDSTEP_HANDLE", "the default of --handle (the Slurm front-end sets it in a job that provisions a sandbox)" },
  { "SANDSTEP_OWNER", "the default of --owner" },
  { "SANDSTEP_HOLDER", "the default of --holder" },
  { "SANDSTEP_BACKEND", "the default of --backend: local, or a sandstepd URL" },
  { "SANDSTEP_TOKEN", "the bearer token for a sandstepd" },
  { "SANDSTEP_TOKEN_FILE", "a file whose first line is that token" },
  { "SANDSTEP_CA_FILE", "PEM certificates to trust for an https:// sandstepd" },
  { "SANDSTEP_STEP_ENDS", "set by the make plugin in a recipe's environment: the lines that end the recipe's hold "
                          "on each sandbox (see sandstep-make(7))" },
};

static void
page_sandstep (GString *out)
{
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);

  put_header (out, "sandstep", "1", "isolated sandboxes as steps of a workflow DAG");
  g_string_append (out, ".SH SYNOPSIS\n");
  for (gsize i = 0; i < n; i++)
    {
      g_string_append_printf (out, ".B sandstep %s\n", ops[i].name);
      if (ops[i].flags & SANDSTEP_OP_HANDLE)
        g_string_append (out, "\\-\\-handle=HANDLE\n");
      g_string_append (out, "[OPTIONS]");
      if (ops[i].operands[0] != '\0')
        {
          g_string_append_c (out, ' ');
          put_text (out, ops[i].operands);
        }
      g_string_append (out, "\n.br\n");
    }
  g_string_append (out, ".B sandstep help\n[OPERATOR]\n.SH DESCRIPTION\n");
  put_line (out, "sandstep provisions Linux sandboxes (user, mount, pid, ipc, uts, cgroup and network namespaces, a "
                 "seccomp filter, no capabilities), runs commands and agent tools in them, copies files in and out, "
                 "and releases or destroys them. Every sandbox belongs to an owner (a DAG's run); the holder using it "
                 "claims it for as long as it works in it. A handle names a sandbox: a literal handle, or @FILE, a "
                 "file holding the line that provision printed. GNU make drives it through the plugin described in "
                 "sandstep-make(7); sandstepd(8) serves sandboxes to other machines.");
  g_string_append (out, ".SH OPERATORS\n");
  for (gsize i = 0; i < n; i++)
    {
      g_string_append_printf (out, ".SS %s\n", ops[i].name);
      put_text (out, ops[i].summary);
      g_string_append (out, ".\n");
      for (const SandstepOption *o = ops[i].options; o->name != NULL; o++)
        put_option (out, o, FALSE);
    }
  g_string_append (out, ".SH COMMON OPTIONS\n");
  for (gsize i = 0; i < n; i++)
    {
      gsize n_groups = 0;
      const SandstepOption *const *groups = sandstep_operator_option_groups (&ops[i], &n_groups);
      /* Every group but the operator's own, once: the first operator that claims has them all. */
      if (!((ops[i].flags & SANDSTEP_OP_HANDLE) && (ops[i].flags & SANDSTEP_OP_CLAIMS)))
        continue;
      for (gsize g = 0; g < n_groups; g++)
        if (groups[g] != ops[i].options)
          for (const SandstepOption *o = groups[g]; o->name != NULL; o++)
            put_option (out, o, FALSE);
      break;
    }
  put_line (out, "A DURATION is seconds, or a number with s, m, h or d (90, 30m, 2h). A SIZE is bytes, or a number "
                 "with K, M or G. Paths in a sandbox are under /workspace or /tmp; a relative one is under /workspace.");
  g_string_append (out, ".SH EXIT STATUS\n");
  put_line (out, "run passes its command's status through; otherwise:");
  for (gsize i = 0; i < G_N_ELEMENTS (exit_statuses); i++)
    {
      g_string_append_printf (out, ".TP\n.B %d\n", exit_statuses[i].status);
      put_line (out, exit_statuses[i].meaning);
    }
  g_string_append (out, ".SH ENVIRONMENT\n");
  for (gsize i = 0; i < G_N_ELEMENTS (environment); i++)
    {
      g_string_append_printf (out, ".TP\n.B %s\n", environment[i].name);
      put_line (out, environment[i].meaning);
    }
  g_string_append (out, ".SH EXAMPLES\n");
  put_line (out, "A sandbox with no network for 30 minutes, a project copied in and tested, a report copied out, "
                 "and the sandbox released:");
  g_string_append (out, ".PP\n.nf\n");
  put_line (out, "sandstep provision --network=none --lifetime=30m > box.sbx");
  put_line (out, "sandstep put --handle=@box.sbx -- src /workspace/");
  put_line (out, "sandstep run --handle=@box.sbx --timeout=120 -- 'cd src && make check'");
  put_line (out, "sandstep export --handle=@box.sbx -- /workspace/src/report.txt=file://$PWD/report.txt");
  put_line (out, "sandstep release --handle=@box.sbx");
  g_string_append (out, ".fi\n.PP\n");
  put_line (out, "Every sandbox of one run reclaimed, whatever state the DAG left:");
  g_string_append (out, ".PP\n.nf\n");
  put_line (out, "sandstep gc --run=$SANDSTEP_RUN");
  g_string_append (out, ".fi\n");
  g_string_append (out, ".SH SEE ALSO\nsandstep\\-make(7), sandstepd(8)\n");
}

static void
page_make (GString *out)
{
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);

  put_header (out, "sandstep-make", "7", "sandboxes as GNU make steps: the sandstep.so plugin");
  g_string_append (out, ".SH SYNOPSIS\n.nf\n");
  put_line (out, "load $(shell pkg-config --variable=plugin sandstep)");
  put_line (out, ".PRECIOUS: box.sbx");
  put_line (out, "box.sbx: ; $(sandbox-provision network=none lifetime=30m) > $@");
  put_line (out, "test.log: box.sbx ; $(sandbox-run @box.sbx timeout=120,cd src && make check) > $@");
  g_string_append (out, ".fi\n.SH DESCRIPTION\n");
  put_line (out, "Each function renders one command line of the sandstep(1) helper into the recipe, after checking "
                 "its options against the helper's own table: make \\-n prints the exact commands and changes "
                 "nothing, and \\-j, \\-k and .DELETE_ON_ERROR behave as usual. The first word is the handle, or "
                 "@FILE; options are the helper's, written KEY=VALUE or a flag alone; the text after the first "
                 "comma is the command, or the paths. Identity: the run id is SANDSTEP_RUN, else the one stored in "
                 ".sandstep/run at the top of the tree, else a new one stored there; the owner is DAG/RUN (DAG: "
                 "SANDSTEP_DAG, else the top directory's name); the holder is OWNER/TARGET. Every function also takes "
                 "backend=URL, a sandstepd to use instead of this machine.");
  g_string_append (out, ".SH FUNCTIONS\n");
  for (gsize i = 0; i < n; i++)
    {
      g_autoptr(GString) form = g_string_new (NULL);
      gsize n_groups = 0;
      const SandstepOption *const *groups = sandstep_operator_option_groups (&ops[i], &n_groups);

      g_string_append_printf (form, "$(sandbox-%s%s [OPTIONS]", ops[i].name,
                              (ops[i].flags & SANDSTEP_OP_HANDLE) ? " HANDLE" : "");
      if (ops[i].text != SANDSTEP_TEXT_NONE)
        g_string_append_printf (form, ",%s", g_str_has_prefix (ops[i].operands, "-- ") ? ops[i].operands + 3
                                                                                      : ops[i].operands);
      g_string_append_c (form, ')');
      g_string_append (out, ".SS ");
      put_line (out, form->str);
      put_text (out, ops[i].summary);
      g_string_append (out, ".\n");
      for (gsize g = 0; g < n_groups; g++)
        for (const SandstepOption *o = groups[g]; o->name != NULL; o++)
          if (!is_common (o->name) || strcmp (o->name, "wait") == 0)
            put_option (out, o, TRUE);
    }
  g_string_append (out, ".SS $(sandbox\\-run\\-id )\nThe run id.\n"
                        ".SS $(sandbox\\-holder )\nThe holder of the current target. Write the space: "
                        "make reads $(sandbox\\-holder) as a variable, and the plugin stops make there naming the fix; "
                        "so for every function without arguments.\n");
  g_string_append (out, ".SH A STEP HOLDS ITS SANDBOX\n");
  put_line (out, "A target's recipe holds each sandbox it uses from its first sandbox line to its last: its own "
                 "lines go straight in, another target waits (wait=SECONDS) or is refused (exit 75) naming the "
                 "holder; so does the same target in another make. A recipe that fails half-way gives the sandbox "
                 "up at once, and the next make continues. $(shell ...) calls and the targets of a recursive make are other holders.");
  g_string_append (out, ".SH EXAMPLES\n");
  put_line (out, "A sandbox provisioned once, a test run and an agent in it, and its release at the end:");
  g_string_append (out, ".PP\n.nf\n");
  put_line (out, "load $(shell pkg-config --variable=plugin sandstep)");
  put_line (out, ".PRECIOUS: box.sbx");
  put_line (out, "box.sbx:");
  put_line (out, "\t$(sandbox-provision network=none lifetime=30m env=LANG) > $@");
  put_line (out, "test.log: box.sbx");
  put_line (out, "\t$(sandbox-put @box.sbx,src/ /workspace/src/)");
  put_line (out, "\t$(sandbox-run @box.sbx timeout=120,cd src && make check) > $@");
  put_line (out, "report.md: test.log box.sbx");
  put_line (out, "\t$(sandbox-agent @box.sbx max-turns=30,Fix the failing tests; write report.md) > agent.log");
  put_line (out, "\t$(sandbox-export @box.sbx,report.md=file://$(abspath $@))");
  put_line (out, "release: report.md");
  put_line (out, "\t$(sandbox-release @box.sbx)");
  g_string_append (out, ".fi\n");
  g_string_append (out, ".SH SEE ALSO\nsandstep(1), sandstepd(8); plugin/README.md in the sources\n");
}

/* sandstepd's own --help, as GOption prints it, turned into a page. */
static gboolean
page_sandstepd (GString *out, const char *help_path)
{
  g_autofree char *help = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents (help_path, &help, NULL, NULL))
    return FALSE;
  put_header (out, "sandstepd", "8", "serve sandstep sandboxes over HTTP");
  g_string_append (out, ".SH SYNOPSIS\n.B sandstepd\n[OPTIONS]\n.SH DESCRIPTION\n");
  put_line (out, "sandstepd serves the sandboxes of its state directory over HTTP (HTTPS with a certificate), "
                 "always behind a bearer token, so that steps on other machines provision, run in, copy to and "
                 "from, and release sandboxes by handle. Clients are sandstep(1) with --backend=URL or "
                 "SANDSTEP_BACKEND, and the token in SANDSTEP_TOKEN or SANDSTEP_TOKEN_FILE; they send it only to "
                 "the server they were configured for.");
  g_string_append (out, ".SH OPTIONS\n");
  lines = g_strsplit (help, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    {
      const char *p = *l;
      const char *gap;
      g_autofree char *form = NULL;

      while (*p == ' ')
        p++;
      /* "--NAME=VALUE   text": GOption's help lines; -h and --help are GOption's own. */
      if (!g_str_has_prefix (p, "--") || g_str_has_prefix (p, "--help") || (gap = strstr (p, "  ")) == NULL)
        continue;
      form = g_strndup (p, gap - p);
      while (*gap == ' ')
        gap++;
      g_string_append (out, ".TP\n.B ");
      put_line (out, form);
      put_line (out, gap);
    }
  g_string_append (out, ".SH SEE ALSO\nsandstep(1), sandstep\\-make(7)\n");
  return TRUE;
}

/* The completion of one option's value, as a case arm "OP/--NAME) ... ;;"; FALSE when its values are not known. */
static gboolean
complete_value (GString *out, const SandstepOperator *op, const SandstepOption *o)
{
  if (o->kind == SANDSTEP_OPTION_CHOICE && o->choices != NULL)
    {
      g_autofree char *words = g_strdelimit (g_strdup (o->choices), "|", ' ');
      g_string_append_printf (out, "      %s/--%s) cand=$(compgen -W '%s' -- \"$val\") ;;\n", op->name, o->name, words);
    }
  else if (strcmp (o->name, "handle") == 0)
    /* A handle file: @FILE, for the files named *.sbx (a plain handle is not completed). */
    g_string_append_printf (out, "      %s/--handle) case $val in ''|@*) cand=$(compgen -f -X '!*.sbx' -- \"${val#@}\" "
                                 "| sed 's/^/@/') ;; esac ;;\n", op->name);
  else if (strcmp (o->name, "backend") == 0)
    g_string_append_printf (out, "      %s/--backend) cand=$(compgen -W 'local http:// https://' -- \"$val\") ;;\n",
                            op->name);
  else if (o->metavar != NULL && strcmp (o->metavar, "FILE") == 0)
    g_string_append_printf (out, "      %s/--%s) cand=$(compgen -f -- \"$val\") ;;\n", op->name, o->name);
  else
    return FALSE;
  return TRUE;
}

static void
completion (GString *out)
{
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);

  g_string_append (out, "# bash completion for sandstep, written from its operator table.\n"
                        "_sandstep ()\n{\n  local cur=${COMP_WORDS[COMP_CWORD]} op=${COMP_WORDS[1]} words\n"
                        "  local tok=${COMP_LINE:0:COMP_POINT} opt val cand brk= b tail IFS\n"
                        "  tok=${tok##*[[:space:]]}\n"
                        "  # An option's value: readline completes only what follows the last word-break\n"
                        "  # character of the word (=, @ and : by default), so the replies are cut to match.\n"
                        "  if [ \"$COMP_CWORD\" -ge 2 ] && [[ $tok == --*=* ]]; then\n"
                        "    opt=${tok%%=*} val=${tok#*=} cand=\n"
                        "    case $op/$opt in\n");
  for (gsize i = 0; i < n; i++)
    {
      gsize n_groups = 0;
      const SandstepOption *const *groups = sandstep_operator_option_groups (&ops[i], &n_groups);

      for (gsize g = 0; g < n_groups; g++)
        for (const SandstepOption *o = groups[g]; o->name != NULL; o++)
          if (strcmp (o->name, "step") != 0)
            complete_value (out, &ops[i], o);
    }
  g_string_append (out, "    esac\n"
                        "    for b in = @ :; do [[ $COMP_WORDBREAKS == *\"$b\"* ]] && brk+=$b; done\n"
                        "    tail=$tok\n"
                        "    [ -n \"$brk\" ] && tail=${tok##*[$brk]}\n"
                        "    COMPREPLY=() IFS=$'\\n'\n"
                        "    for b in $cand; do b=$opt=$b; COMPREPLY+=(\"${b:${#tok}-${#tail}}\"); done\n"
                        "    return\n"
                        "  fi\n"
                        "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n    words='help");
  for (gsize i = 0; i < n; i++)
    g_string_append_printf (out, " %s", ops[i].name);
  g_string_append (out, "'\n  else\n    case $op in\n      help) words='");
  for (gsize i = 0; i < n; i++)
    g_string_append_printf (out, "%s%s", i > 0 ? " " : "", ops[i].name);
  g_string_append (out, "' ;;\n");
  for (gsize i = 0; i < n; i++)
    {
      gsize n_groups = 0;
      const SandstepOption *const *groups = sandstep_operator_option_groups (&ops[i], &n_groups);

      g_string_append_printf (out, "      %s) words='--help", ops[i].name);
      for (gsize g = 0; g < n_groups; g++)
        for (const SandstepOption *o = groups[g]; o->name != NULL; o++)
          if (strcmp (o->name, "step") != 0)
            g_string_append_printf (out, " --%s%s", o->name, o->kind == SANDSTEP_OPTION_FLAG ? "" : "=");
      g_string_append (out, "' ;;\n");
    }
  g_string_append (out, "      *) words='' ;;\n    esac\n  fi\n"
                        "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
                        "  case ${COMPREPLY[0]-} in *=) compopt -o nospace 2>/dev/null ;; esac\n}\n"
                        "complete -o default -F _sandstep sandstep\n");
}

/* @text in a Markdown table cell: pipes escaped. */
static void
put_cell (GString *out, const char *text)
{
  for (const char *p = text; *p != '\0'; p++)
    {
      if (*p == '|')
        g_string_append_c (out, '\\');
      g_string_append_c (out, *p);
    }
}

static void
md_option_row (GString *out, const SandstepOption *option)
{
  g_autofree char *cli = option_form (option, FALSE);
  g_autofree char *make = option_form (option, TRUE);

  g_string_append (out, "| `");
  put_cell (out, cli);
  g_string_append (out, "` | `");
  put_cell (out, make);
  g_string_append (out, "` | ");
  put_cell (out, option->help);
  g_string_append (out, option->repeatable ? " (repeatable) |\n" : " |\n");
}

/* The reference of docs/reference.md: every operator with every option, the exit statuses and the environment,
 * from the same tables as the man pages. */
static void
markdown (GString *out)
{
  gsize n = 0;
  const SandstepOperator *ops = sandstep_operators (&n);
  gboolean common_done = FALSE;

  g_string_append (out, "# sandstep reference\n\n"
                        "Written by `sandstep-docs markdown` from the operator table (`operators/sandstep-operators.c`)"
                        " and the exit statuses of `programs/sandstep-docs.c`; `test-docs` fails when this file is not"
                        " current (regenerate it with `scripts/update-docs`). Each option is written `--NAME=VALUE` on"
                        " the command line and `NAME=VALUE` in a make call, `$(sandbox-OPERATOR HANDLE"
                        " OPTIONS,TEXT)`.\n\n## Operators\n\n| operator | what it does |\n|---|---|\n");
  for (gsize i = 0; i < n; i++)
    {
      g_string_append_printf (out, "| [`%s`](#%s) | ", ops[i].name, ops[i].name);
      put_cell (out, ops[i].summary);
      g_string_append (out, " |\n");
    }
  for (gsize i = 0; i < n; i++)
    {
      gboolean any = FALSE;

      g_string_append_printf (out, "\n### %s\n\n```\nsandstep %s%s [OPTIONS]%s%s\n```\n\n", ops[i].name,
                              ops[i].name, (ops[i].flags & SANDSTEP_OP_HANDLE) ? " --handle=HANDLE" : "",
                              ops[i].operands[0] != '\0' ? " " : "", ops[i].operands);
      g_string_append (out, ops[i].summary);
      g_string_append (out, ".\n");
      for (const SandstepOption *o = ops[i].options; o->name != NULL; o++)
        {
          if (!any)
            g_string_append (out, "\n| option | in make | |\n|---|---|---|\n");
          any = TRUE;
          md_option_row (out, o);
        }
    }
  g_string_append (out, "\n## Common options\n\nEvery operator that works on one sandbox and holds it while it "
                        "works takes these.\n\n| option | in make | |\n|---|---|---|\n");
  for (gsize i = 0; i < n && !common_done; i++)
    {
      gsize n_groups = 0;
      const SandstepOption *const *groups = sandstep_operator_option_groups (&ops[i], &n_groups);
      if (!((ops[i].flags & SANDSTEP_OP_HANDLE) && (ops[i].flags & SANDSTEP_OP_CLAIMS)))
        continue;
      for (gsize g = 0; g < n_groups; g++)
        if (groups[g] != ops[i].options)
          for (const SandstepOption *o = groups[g]; o->name != NULL; o++)
            md_option_row (out, o);
      common_done = TRUE;
    }
  g_string_append (out, "\nA DURATION is seconds, or a number with s, m, h or d (90, 30m, 2h). A SIZE is bytes, or a "
                        "number with K, M or G. Paths in a sandbox are under /workspace or /tmp; a relative one is "
                        "under /workspace.\n\n## Exit statuses\n\n`run` passes its command's status through; "
                        "otherwise:\n\n| status | meaning |\n|---|---|\n");
  for (gsize i = 0; i < G_N_ELEMENTS (exit_statuses); i++)
    {
      g_string_append_printf (out, "| %d | ", exit_statuses[i].status);
      put_cell (out, exit_statuses[i].meaning);
      g_string_append (out, " |\n");
    }
  g_string_append (out, "\n## Environment\n\n| variable | meaning |\n|---|---|\n");
  for (gsize i = 0; i < G_N_ELEMENTS (environment); i++)
    {
      g_string_append_printf (out, "| `%s` | ", environment[i].name);
      put_cell (out, environment[i].meaning);
      g_string_append (out, " |\n");
    }
}

int
main (int argc, char **argv)
{
  g_autoptr(GString) out = g_string_new (NULL);

  if (argc >= 2 && strcmp (argv[1], "sandstep") == 0)
    page_sandstep (out);
  else if (argc >= 2 && strcmp (argv[1], "make") == 0)
    page_make (out);
  else if (argc >= 3 && strcmp (argv[1], "sandstepd") == 0)
    {
      if (!page_sandstepd (out, argv[2]))
        {
          g_printerr ("sandstep-docs: cannot read '%s'\n", argv[2]);
          return 1;
        }
    }
  else if (argc >= 2 && strcmp (argv[1], "completion") == 0)
    completion (out);
  else if (argc >= 2 && strcmp (argv[1], "markdown") == 0)
    markdown (out);
  else
    {
      g_printerr ("usage: sandstep-docs sandstep|make|completion|markdown, or sandstep-docs sandstepd HELP.txt\n");
      return 64;
    }
  fwrite (out->str, 1, out->len, stdout);
  return 0;
}
