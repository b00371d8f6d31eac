/* sandstep-agent.h: an agent's turn loop against an OpenAI-compatible chat endpoint.
 *
 * Each turn sends the conversation so far with the tools; each reply's tool
 * calls are answered in order, one tool message per call id, and the loop
 * ends when a reply has no tool calls (whatever its finish_reason), after
 * @max_turns requests, or at the time budget.  A malformed argument string,
 * an unknown tool or a bad argument is answered to the model as a tool
 * error; a terminal tool failure ends the run.  The loop knows no sandbox:
 * the caller answers each call (SandstepAgentHooks), and words and prints
 * what the run did.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "sandstep-llm.h"

G_BEGIN_DECLS

typedef struct {
  /* Calls tool @name (one of the definitions) with @arguments (NULL: {}): the
   * text for the model, with *out_is_error for a failure it can act on, or
   * NULL with @error when the tools cannot be used any more. */
  char *(*call_tool) (const char *name, JsonObject *arguments, gboolean *out_is_error, GError **error,
                      gpointer user_data);
  /* A record of the run, for a transcript: "request" (the messages appended
   * since the previous request; the first also has the model and the tools),
   * "response" (the whole reply) and "tool_result".  Takes @event. */
  void (*event) (const char *type, JsonObject *event, gpointer user_data);
  /* A turn that called tools is done: their names, joined with ", ". */
  void (*turn_done) (guint turn, const char *tool_names, double seconds, gpointer user_data);
  gpointer user_data;
} SandstepAgentHooks;

typedef enum {
  SANDSTEP_AGENT_ANSWERED,        /* a reply without tool calls */
  SANDSTEP_AGENT_OUT_OF_TURNS,    /* max_turns requests, and no final answer */
  SANDSTEP_AGENT_OUT_OF_TIME,     /* the time budget ran out */
  SANDSTEP_AGENT_ENDPOINT_FAILED, /* the chat endpoint refused, kept failing, or answered something else */
  SANDSTEP_AGENT_TOOLS_FAILED,    /* a tool call found the tools unusable */
} SandstepAgentEnd;

typedef struct {
  /* What to run. */
  const char *model;
  const char *system_prompt;
  const char *prompt;
  JsonArray *tools;               /* MCP-style definitions (name, description, inputSchema) */
  guint64 max_turns;
  gint64 deadline_us;             /* g_get_monotonic_time() clock; 0: none */

  /* How it went: @turn as it runs (a retry callback may read it), the rest at the end. */
  guint turn;
  SandstepAgentEnd end;
  char *answer;                   /* ANSWERED: the text, NULL when the model gave none */
  char *finish_reason;            /* ANSWERED: of the last reply, NULL when it had none */
  double last_turn_s;             /* ANSWERED: how long the last turn took */
  const char *during;             /* OUT_OF_TIME: "before asking the model", "while waiting for the model",
                                   * "between tool calls" */
  GError *error;                  /* ENDPOINT_FAILED, TOOLS_FAILED */
} SandstepAgentRun;

void sandstep_agent_run_clear (SandstepAgentRun *run);

/* Runs the loop until it ends; the outcome is in @run. */
void sandstep_agent_run (SandstepLlm *llm, SandstepAgentRun *run, const SandstepAgentHooks *hooks);

/* TRUE when the JSON text @json holds a "\uD800"-"\uDFFF" escape that is not
 * part of a high-low pair (json-glib fails to parse some of those). */
gboolean sandstep_json_has_lone_surrogate_escape (const char *json);

G_END_DECLS
