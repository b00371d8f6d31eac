/* sandstep-output.h: the text rules of the agent tools, pure and unit-testable.
 *
 * Everything here works on bytes and numbers only: no sandbox, no I/O.
 * sandstep-tools.c composes these into the four tools' results.  Masking is
 * sandstep-mask.c's, the cutting of long texts and streams sandstep-cut.c's,
 * the texts the model reads sandstep-texts.c's.
 *
 * Lines are split at "\n" only; a text's one final "\n" ends its last line
 * instead of starting an empty one.  Every result that keeps part of a text
 * keeps whole lines, byte for byte, except the one documented case of a last
 * line wider than the whole budget.
 *
 * We follow the model-facing behaviour of Apache Airflow's sandbox toolset
 * (its output, file and timeout rules): per-stream masking then
 * bounding, [stdout]/[stderr] labels, "(no output)", "[timed out after Ns]",
 * "[exit code: n]", file windows with a next-offset hint, the read-limit and
 * long-line messages, "Wrote N bytes to 'path'.", "(empty)", the network and
 * lifetime notes, and timeouts refused when not > 0 and finite.
 *
 * Where we differ on purpose:
 *
 *  - Head AND tail.  The contract keeps only the tail of a long stream, behind
 *    "[... earlier output truncated]".  The start of a build or test log often
 *    holds the first (real) error and the end holds the summary, so we keep
 *    both: up to a quarter of the line and byte budgets goes to whole lines
 *    from the start, the rest to whole lines from the end, and a marker in the
 *    middle says exactly what was left out: "[... 1234 lines (56.7KB)
 *    omitted ...]".  The count is exact even for a 1 GiB stream, since the
 *    capture counts the bytes and newlines it drops.  The contract's marker is
 *    still used when a caller says bytes were dropped before the text reached
 *    us (already_truncated).
 *
 * Decisions on the contract's quirks:
 *
 *  1. Fractional limits: our limits are integers (gsize) in C, and the agent's
 *     --max-turns is a whole number (SANDSTEP_OPTION_COUNT), and so are the
 *     tool options --max-output-lines (sandstep-tool-options.h), whose
 *     sizes are whole bytes.  Tool arguments
 *     offset and limit must be whole numbers too: 1.5 is refused with a
 *     message, not truncated to 1 (10.0 is accepted as 10).
 *  2. Yes: run_command's description states the default and the ceiling of
 *     timeout_seconds ("Commands time out after 60s unless you pass
 *     timeout_seconds (at most 300s)"), and so does the schema.
 *  3. Claims: not here; the local backend's claim is a lock (atomic).
 *  4. Multi-file publish: not here (exports are op-export.c's).
 *  5. Line splitting: NOT Python's splitlines.  Lines split at "\n" only, and
 *     "\r" is an ordinary byte: CRLF files show their "\r"s (which matters
 *     when the model edits them), and a progress bar's "\r" frames stay one
 *     line, whose last bytes are kept when it is too wide.  What is kept is a
 *     byte-exact slice of the text (no normalising of line endings); only one
 *     final "\n" is dropped, as the contract drops it.
 *  6. Minutes in the lifetime note keep Python's ties-to-even rounding (150 s
 *     -> 2, 90 s -> 2, 270 s -> 4), as pinned by the contract's tests.
 *     Timeouts print rounded to 0.1 s without an exponent or a trailing ".0"
 *     (60, 2.5, 1000000), not with %g (1e+06).
 *  7. Truncation flags: our capture never drops bytes silently: it counts them,
 *     so every cut is reported with exact counts; read_file is all or nothing
 *     (the backend refuses over the read cap).
 *  8. The empty file keeps the contract's "(no lines at offset 1; file has 0
 *     lines)".  Binary files are detected (a NUL byte among the first 8000
 *     bytes, as git and grep do) and refused with a hint to inspect them with
 *     run_command (file, xxd | head, strings) instead of being shown garbled;
 *     other invalid UTF-8 still becomes U+FFFD.
 *  9. No 1 s grace after the lifetime: a command's budget is clamped to what
 *     is left of the sandbox (and of the agent's time budget), and once the
 *     lifetime is over the backend refuses the call, which is terminal.
 * 10. Listings keep their first and last entries (not only the alphabetical
 *     tail) and the marker gives the shell command that lists the omitted
 *     ones: "LC_ALL=C ls -Ap 'DIR' | sed -n 'A,Bp'" through run_command.
 *
 * Also: the timeout note and the file tools' descriptions say that relative
 * paths start in /workspace and the file tools reach only /workspace and
 * /tmp; masking skips empty secret values (an empty value would match
 * everywhere) and masks every other value, however short.
 */
#pragma once

#include <glib.h>

#include "sandstep-error.h"
#include "sandstep-units.h"

#include "sandstep-spec.h"

G_BEGIN_DECLS

/* Prefixed by sandstep_truncate_output() when the caller says bytes were
 * already dropped before the text reached it (the contract's marker). */
#define SANDSTEP_EARLIER_TRUNCATED_MARKER "[... earlier output truncated]"

/* ---- numbers ---- */

/* Sizes, seconds and numbers are printed by sandstep-units.h. */

/* @text in quotes the way Python's repr() quotes a str: single quotes unless
 * the text holds a single quote and no double quote; backslash escapes for
 * the quote, backslash and control characters. */
char *sandstep_quote (const char *text);

/* Round half to even, as Python's round() does for the lifetime note. */
gint64 sandstep_round_half_even (double value);

/* ---- masking ---- */

typedef struct _SandstepMasker SandstepMasker;

/* Masks every occurrence of each non-empty value in @secrets (NULL-terminated;
 * NULL or empty: a masker that masks nothing) with "***".  At each position
 * the longest secret that matches wins; matching restarts after it. */
SandstepMasker *sandstep_masker_new (const char *const *secrets);
/* The same from the values of a NAME -> VALUE table (NULL: none). */
SandstepMasker *sandstep_masker_new_from_table (GHashTable *secrets);
void sandstep_masker_free (SandstepMasker *masker);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepMasker, sandstep_masker_free)

gboolean sandstep_masker_is_empty (const SandstepMasker *masker);

/* @len bytes of @data (-1: NUL-terminated) with every secret masked; the
 * result is NUL-terminated and its length goes to @out_len (may be NULL). */
char *sandstep_masker_mask (const SandstepMasker *masker, const char *data, gssize len, gsize *out_len);

/* Masks @error's message in place; @error may be NULL. */
void sandstep_masker_mask_error (const SandstepMasker *masker, GError *error);

/* ---- bounding command output and listings ---- */

/* Keeps a long text's first and last lines under @max_lines lines and
 * @max_bytes bytes (the joining newlines count, the markers do not):
 *
 *  - empty text: returned as is;
 *  - a text that fits: returned whole, less one final "\n";
 *  - else up to a quarter of each budget goes to whole lines from the start,
 *    the rest to whole lines from the end, and between them a marker counts
 *    what was left out: "[... 1234 lines (56.7KB) omitted ...]";
 *  - a last line wider than the whole budget left keeps only its last bytes
 *    (a broken UTF-8 sequence at the cut is dropped), and the marker says
 *    "... and the start of the next (S) omitted ...";
 *  - @already_truncated (bytes were dropped before the text got here) puts
 *    SANDSTEP_EARLIER_TRUNCATED_MARKER on the first line.
 */
char *sandstep_truncate_output (const char *text, gssize len, gsize max_lines, gsize max_bytes,
                                gboolean already_truncated);

/* A stream of command output kept in bounded memory: secrets are masked as
 * the bytes come (a secret split across chunks included, so the masking
 * happens before any cut), then the first max_bytes / 4 + 2 and the last
 * max_bytes + 2 bytes are kept, and only counts of the bytes and lines in
 * between.  Rendering gives exactly what sandstep_truncate_output() gives for
 * the whole masked stream (then made valid UTF-8), so a command writing 1 GiB
 * costs about 1.25 × max_bytes of memory per stream. */
typedef struct _SandstepCapture SandstepCapture;

/* @masker may be NULL and must outlive the capture. */
SandstepCapture *sandstep_capture_new (const SandstepMasker *masker, gsize max_lines, gsize max_bytes);
void sandstep_capture_free (SandstepCapture *capture);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepCapture, sandstep_capture_free)

void sandstep_capture_append (SandstepCapture *capture, const char *data, gsize len);
/* The bounded text (masking finished first); valid UTF-8 (invalid bytes
 * become U+FFFD); "" for an empty stream.  Call once, after the last append. */
char *sandstep_capture_render (SandstepCapture *capture);
/* Bytes that came in, and the most bytes the capture ever held (tests). */
guint64 sandstep_capture_total_bytes (const SandstepCapture *capture);
gsize sandstep_capture_peak_bytes (const SandstepCapture *capture);
/* After rendering: TRUE when part of the stream was left out. */
gboolean sandstep_capture_was_cut (const SandstepCapture *capture);

/* The text of a run_command result: each non-empty stream (already bounded)
 * labelled "[stdout]"/"[stderr]" on a line of its own, "(no output)" when
 * both are empty, then one line of notes: "[timed out after Ns]" (and no exit
 * code), else "[exit code: n]" for a non-zero @exit_code. */
char *sandstep_render_command_result (const char *out, const char *err, int exit_code, gboolean timed_out,
                                      double applied_timeout_s);

/* A directory listing: @names (sorted by the caller, directories already
 * suffixed with "/") one a line; "(empty)" when there are none.  A long one
 * keeps its first and last entries under the same budgets as command output,
 * and the marker says how many were left out and how to list them with a
 * shell command: "[... 1234 entries omitted; see them with run_command:
 * LC_ALL=C ls -Ap 'DIR' | sed -n '501,1734p' ...]". */
char *sandstep_render_listing (const char *const *names, gsize n_names, const char *dir, gsize max_lines,
                               gsize max_bytes);
/* The same, naming @run_tool (the run_command tool's name, prefixed) in the marker. */
char *sandstep_render_listing_for (const char *const *names, gsize n_names, const char *dir, const char *run_tool,
                                   gsize max_lines, gsize max_bytes);

/* ---- read_file ---- */

/* The window of @data (masked already) that read_file returns: lines from
 * @offset (1-based; <= 0 means 1) up to @limit lines (<= 0: no limit), whole
 * lines from the head under @max_lines / @max_bytes, then
 * "\n[... R more lines; read on with offset=N]" when lines are left.
 * "(no lines at offset S; file has N lines)" past the end (an empty file is
 * "(no lines at offset 1; file has 0 lines)"); when the first line of the
 * window alone is over @max_bytes, "Line S is longer than the <size> output
 * limit. Read part of it with a shell command instead (e.g. cut, head -c, or
 * sed)."  Invalid UTF-8 becomes U+FFFD. */
char *sandstep_render_file_window (const char *data, gsize len, gint64 offset, gint64 limit, gsize max_lines,
                                   gsize max_bytes);

/* TRUE when @data looks binary: a NUL byte among its first 8000 bytes (the
 * test git and grep use). */
gboolean sandstep_looks_binary (const char *data, gsize len);

/* "'<path>' is <size>, over the <max> read limit. Read just the part you need
 * with a shell command instead (e.g. head, tail, sed -n, or grep)."
 * @size_text NULL (unknown) leaves out "is <size>, ". */
char *sandstep_read_limit_message (const char *path, const char *size_text, guint64 max_bytes);

/* ---- refusals ---- */

/* @message (a file operation's refusal, written for the command line) with
 * the sandstep commands it names ("list it with 'sandstep ls'") replaced by
 * the tools' names @names (run_command, read_file, write_file and
 * list_directory, in that order, prefixed or not), and "from the host" by
 * "by the file tools": the model has the tools, not the commands. */
char *sandstep_tool_words (const char *message, const char *const *names);

/* ---- arguments ---- */

/* TRUE when @text holds a UTF-16 surrogate encoded as UTF-8 (CESU-8 / WTF-8:
 * bytes ED A0..BF xx), which is what a lone "\ud800" in JSON turns into. */
gboolean sandstep_has_surrogates (const char *text, gssize len);


/* ---- what the model reads in run_command's description ---- */

/* What the sandbox's network reaches.  open: "This sandbox has outbound
 * network access."; none (and allow with empty lists): the NO network text;
 * allow: the hosts (HTTPS on 443) and address ranges (any port) in the
 * contract's words.  @hosts and @cidrs are NULL-terminated, may be NULL. */
char *sandstep_network_note (SandstepNetwork network, const char *const *hosts, const char *const *cidrs);

/* The clock: @remaining_s < 0 is unknown; < 60 "Under a minute ..."; else
 * "About <round-half-even(s/60)> minute[s] of its lifetime remained when this
 * run began." */
char *sandstep_lifetime_note (double remaining_s);

/* Default and ceiling of command budgets, stated to the model (quirk 2 above):
 * "Commands time out after 60s unless you pass timeout_seconds (at most 300s)." */
char *sandstep_timeout_note (double default_s, double max_s);

/* Which image the sandbox's root is (@reference, @digest; NULL: the host's, and no note), and whether what a
 * command installs outside /workspace stays (a writable root) or is refused (@readonly). */
char *sandstep_image_note (const char *reference, const char *digest, gboolean readonly);

/* The whole description of run_command: the base text, the timeout note, the
 * attached-sandbox note ("This sandbox was set up by an earlier step, ...")
 * with @network_note and the lifetime note, @image_note (may be NULL), and the read-only data mounts
 * (@mounts: NULL-terminated "/data/NAME" paths, may be NULL). */
char *sandstep_run_command_description (double default_timeout_s, double max_timeout_s, const char *network_note,
                                        double remaining_s, const char *image_note, const char *const *mounts);

/* ---- timeouts ---- */

/* The budget of one command.  @requested_given FALSE: @default_s.  A
 * requested value that is not finite or not > 0 is refused: returns FALSE
 * with *out_message "timeout_seconds must be greater than 0, got <v>."  Else
 * min(requested, @max_s), then min with @remaining_s when >= 0 (the
 * sandbox's lifetime or the agent's time budget, whichever is shorter). */
gboolean sandstep_command_budget (gboolean requested_given, double requested, double default_s, double max_s,
                                  double remaining_s, double *out_budget, char **out_message);

G_END_DECLS
