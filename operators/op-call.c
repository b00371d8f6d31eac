/* op-call.c: call one agent tool from the command line, as a model would.
 *
 *   sandstep call --handle=H [TOOL OPTIONS] run_command '{"command": "make check"}'
 *   sandstep call --handle=H run_python '{"code": "import sys; sys.version"}'   (a fresh session)
 *
 * The tool options (sandstep-tool-options.h) are those of agent and mcp, so
 * a call shows what a model served with the same options reads; with
 * --prefix=P the tool is named P_run_command.
 *
 * Prints exactly the text the model would read.  Exit 0 when the tool
 * succeeded, 1 when it answered with a recoverable error (the text says
 * which), and the usual statuses when the sandbox itself is unusable.
 */
#include "sandstep-operator.h"

#include <stdio.h>

#include "sandstep-error.h"
#include "sandstep-tool-options.h"
#include "sandstep-tools.h"

gboolean
sandstep_op_call (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autoptr(SandstepToolbox) toolbox = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *arguments_text = NULL;
  g_autofree char *text = NULL;
  JsonObject *arguments = NULL;
  SandstepToolLimits limits;
  gboolean is_error = FALSE;

  if (invocation->operands->len < 1)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "no tool given; write: sandstep call --handle=H run_command '{\"command\": \"ls\"}'");
  if (invocation->operands->len > 1)
    {
      /* make splits its text at whitespace; joining the words back restores the JSON. */
      g_ptr_array_add (invocation->operands, NULL);
      arguments_text = g_strjoinv (" ", (char **) invocation->operands->pdata + 1);
      g_ptr_array_remove_index (invocation->operands, invocation->operands->len - 1);
      if (!json_parser_load_from_data (parser, arguments_text, -1, NULL) ||
          !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "the arguments '%s' are not a JSON object; write them as in "
                               "'{\"path\": \"report.md\"}'", arguments_text);
      arguments = json_node_get_object (json_parser_get_root (parser));
    }

  if (!sandstep_tool_options_parse (invocation, &limits, error))
    return FALSE;
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL)
    return FALSE;
  toolbox = sandstep_toolbox_new (attachment, &limits);
  /* run_python: a session of its own, ended (with everything it started) when the call is done. */
  {
    g_autofree char *python_name = limits.prefix != NULL && limits.prefix[0] != '\0'
                                     ? g_strconcat (limits.prefix, "_run_python", NULL) : g_strdup ("run_python");

    if (g_strcmp0 (invocation->operands->pdata[0], python_name) == 0 &&
        !sandstep_offer_python (toolbox, attachment, NULL, "call", error))
      return FALSE;
  }
  text = sandstep_toolbox_call (toolbox, invocation->operands->pdata[0], arguments, &is_error, error);
  if (text == NULL)
    return FALSE;
  g_print ("%s\n", text);
  *out_exit = is_error ? 1 : 0;
  return TRUE;
}
