/* sandstep-units.h: the units a user writes and reads: durations, seconds,
 * sizes, counts and ADDR:PORT, parsed one way everywhere (the helper's
 * options, the make plugin's checks, sandstepd's flags) and printed one way
 * in messages and in what a model reads.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Ten years: far beyond any sandbox, and it keeps the arithmetic (microseconds, unix times) in range. */
#define SANDSTEP_MAX_DURATION_S ((gint64) 10 * 365 * 86400)

/* Seconds, or a whole number with s, m, h or d ("90", "30m", "2h"), at most
 * ten years; 0 only with @allow_zero.  The message names the accepted forms. */
gboolean sandstep_parse_duration (const char *text, gboolean allow_zero, gint64 *out_seconds, GError **error);

/* A finite decimal number of seconds (no unit), > 0, or >= 0 with
 * @allow_zero, at most ten years; @name (the option) heads the message. */
gboolean sandstep_parse_seconds (const char *name, const char *text, gboolean allow_zero, double *out, GError **error);

/* Bytes, or a whole number with K, M or G (binary), optionally followed by
 * B or iB ("5M", "5MB", "5MiB"); above 0. */
gboolean sandstep_parse_size (const char *text, guint64 *out, GError **error);

/* A whole number from 1 to @max, digits only, no leading zero; FALSE for
 * anything else (the caller words the message: it knows the option).
 * Every number here is decimal only: a zero before another digit ("010") is
 * refused, as are hex, signs and blanks. */
gboolean sandstep_parse_count (const char *text, guint64 max, guint64 *out);

/* Splits "ADDR:PORT" or "[ADDR]:PORT" (and "PORT" alone with @port_alone,
 * giving an empty ADDR); the port is digits, at most 65535.  FALSE for
 * anything else: the caller words the message.  ADDR is not checked. */
gboolean sandstep_parse_host_port (const char *text, gboolean port_alone, char **out_host, guint16 *out_port);

/* The host of an HTTP Host header: "name", "name:port", "[v6]" or "[v6]:port",
 * lowercase and without a trailing dot; NULL for anything else. */
char *sandstep_host_header_host (const char *value);

/* A size for a message: n >= 1 MiB "%.1fMB", n >= 1024 "%.1fKB", else "<n>B"
 * (binary units labelled KB/MB, as the tool contract does). */
char *sandstep_format_size (guint64 n);

/* A size as an option value reads it back: "2G", "512M", "4K", else bytes. */
char *sandstep_format_size_option (guint64 n);

/* Seconds for a "[timed out after Ns]" note: rounded to 0.1 s, no trailing
 * ".0", never an exponent (60 -> "60", 2.5 -> "2.5", 1e6 -> "1000000"). */
char *sandstep_format_seconds (double seconds);

/* A number the model gave, echoed in an error: integers without a decimal
 * point, others in their shortest round-trip form; "nan", "inf", "-inf". */
char *sandstep_format_number (double value);

G_END_DECLS
