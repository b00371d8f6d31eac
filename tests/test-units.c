/* test-units.c: the units parsers and printers (sandstep-units.h), as tables.
 *
 * A row is one text and what it must give; add a row for every shape a user
 * may write.  Every parser is checked against the same rows the helper, the
 * make plugin and sandstepd rely on.
 */
#include <glib.h>
#include <string.h>

#include "sandstep-error.h"
#include "sandstep-spec.h"
#include "sandstep-units.h"

typedef struct {
  const char *text;
  gboolean allow_zero;
  gboolean ok;
  gint64 seconds;
} DurationRow;

static const DurationRow duration_rows[] = {
  /* text      zero   ok     seconds */
  { "90",      FALSE, TRUE,  90 },
  { "30m",     FALSE, TRUE,  1800 },
  { "2h",      FALSE, TRUE,  7200 },
  { "1d",      FALSE, TRUE,  86400 },
  { "45s",     FALSE, TRUE,  45 },
  { "0",       TRUE,  TRUE,  0 },
  { "0",       FALSE, FALSE, 0 },
  { "0m",      FALSE, FALSE, 0 },
  { "",        TRUE,  FALSE, 0 },
  { "-5",      TRUE,  FALSE, 0 },
  { "1.5h",    FALSE, FALSE, 0 },
  { "10x",     FALSE, FALSE, 0 },
  { "10mm",    FALSE, FALSE, 0 },
  { " 10",     FALSE, FALSE, 0 },
  { "3651d",   FALSE, FALSE, 0 },
  { "3650d",   FALSE, TRUE,  3650LL * 86400 },
  { "99999999999999999999", FALSE, FALSE, 0 },
  /* Decimal only, read one way: a leading zero (octal to some readers) and hex are refused. */
  { "010",     FALSE, FALSE, 0 },
  { "010m",    FALSE, FALSE, 0 },
  { "0x10",    FALSE, FALSE, 0 },
};

static void
test_duration (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (duration_rows); i++)
    {
      const DurationRow *row = &duration_rows[i];
      g_autoptr(GError) error = NULL;
      gint64 seconds = -1;
      gboolean ok = sandstep_parse_duration (row->text, row->allow_zero, &seconds, &error);

      g_test_message ("duration '%s' (zero %d)", row->text, row->allow_zero);
      g_assert_cmpint (ok, ==, row->ok);
      if (ok)
        g_assert_cmpint (seconds, ==, row->seconds);
      else
        {
          g_assert_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE);
          g_assert_nonnull (strstr (error->message, "a duration"));
        }
    }
}

typedef struct {
  const char *text;
  gboolean allow_zero;
  gboolean ok;
  double seconds;
} SecondsRow;

static const SecondsRow seconds_rows[] = {
  { "120",   FALSE, TRUE,  120 },
  { "0.5",   FALSE, TRUE,  0.5 },
  { "0",     TRUE,  TRUE,  0 },
  { "0",     FALSE, FALSE, 0 },
  { "",      TRUE,  FALSE, 0 },
  { "-1",    TRUE,  FALSE, 0 },
  { "inf",   FALSE, FALSE, 0 },
  { "nan",   FALSE, FALSE, 0 },
  { "1e400", FALSE, FALSE, 0 },
  { "10s",   FALSE, FALSE, 0 },
  { " 10",   FALSE, FALSE, 0 },
  /* Decimal only: strtod alone takes hex (0x10 is 16) and a sign; a leading zero is refused too. */
  { "0x10",  FALSE, FALSE, 0 },
  { "0x1p4", FALSE, FALSE, 0 },
  { "010",   FALSE, FALSE, 0 },
  { "00.5",  FALSE, FALSE, 0 },
  { "+10",   FALSE, FALSE, 0 },
  { "10.",   FALSE, FALSE, 0 },
  { ".5",    FALSE, FALSE, 0 },
  { "1e3",   FALSE, TRUE,  1000 },
  { "2.5",   FALSE, TRUE,  2.5 },
};

static void
test_seconds (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (seconds_rows); i++)
    {
      const SecondsRow *row = &seconds_rows[i];
      g_autoptr(GError) error = NULL;
      double seconds = -1;
      gboolean ok = sandstep_parse_seconds ("timeout", row->text, row->allow_zero, &seconds, &error);

      g_test_message ("seconds '%s' (zero %d)", row->text, row->allow_zero);
      g_assert_cmpint (ok, ==, row->ok);
      if (ok)
        g_assert_cmpfloat (seconds, ==, row->seconds);
      else
        {
          g_assert_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE);
          g_assert_nonnull (strstr (error->message, "timeout"));
        }
    }
}

typedef struct {
  const char *text;
  gboolean ok;
  guint64 bytes;
} SizeRow;

static const SizeRow size_rows[] = {
  { "512",   TRUE,  512 },
  { "5K",    TRUE,  5 << 10 },
  { "5k",    TRUE,  5 << 10 },
  { "5M",    TRUE,  5 << 20 },
  { "5MB",   TRUE,  5 << 20 },
  { "5Mb",   TRUE,  5 << 20 },
  { "5MiB",  TRUE,  5 << 20 },
  { "2G",    TRUE,  2ULL << 30 },
  { "2GB",   TRUE,  2ULL << 30 },
  { "0",     FALSE, 0 },
  { "0M",    FALSE, 0 },
  { "",      FALSE, 0 },
  { "M",     FALSE, 0 },
  { "5T",    FALSE, 0 },
  { "5MiBs", FALSE, 0 },
  { "5 M",   FALSE, 0 },
  { "-5M",   FALSE, 0 },
  { "1.5M",  FALSE, 0 },
  { "99999999999999999999", FALSE, 0 },
  { "9999999999999G", FALSE, 0 },
  { "010M",  FALSE, 0 },
  { "0x10",  FALSE, 0 },
};

static void
test_size (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (size_rows); i++)
    {
      const SizeRow *row = &size_rows[i];
      g_autoptr(GError) error = NULL;
      guint64 bytes = 0;
      gboolean ok = sandstep_parse_size (row->text, &bytes, &error);

      g_test_message ("size '%s'", row->text);
      g_assert_cmpint (ok, ==, row->ok);
      if (ok)
        g_assert_cmpuint (bytes, ==, row->bytes);
      else
        g_assert_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE);
    }
}

typedef struct {
  const char *text;
  guint64 max;
  gboolean ok;
  guint64 value;
} CountRow;

static const CountRow count_rows[] = {
  { "1",          10,         TRUE,  1 },
  { "10",         10,         TRUE,  10 },
  { "11",         10,         FALSE, 0 },
  { "0",          10,         FALSE, 0 },
  { "",           10,         FALSE, 0 },
  { "+3",         10,         FALSE, 0 },
  { "3 ",         10,         FALSE, 0 },
  { "2147483647", G_MAXINT,   TRUE,  G_MAXINT },
  { "2147483648", G_MAXINT,   FALSE, 0 },
  { "010",        100,        FALSE, 0 },
  { "0x10",       100,        FALSE, 0 },
  { "99999999999999999999", G_MAXUINT64, FALSE, 0 },
};

static void
test_count (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (count_rows); i++)
    {
      const CountRow *row = &count_rows[i];
      guint64 value = 0;

      g_test_message ("count '%s' (max %" G_GUINT64_FORMAT ")", row->text, row->max);
      g_assert_cmpint (sandstep_parse_count (row->text, row->max, &value), ==, row->ok);
      if (row->ok)
        g_assert_cmpuint (value, ==, row->value);
    }
}

typedef struct {
  const char *text;
  gboolean port_alone;
  gboolean ok;
  const char *host;
  guint16 port;
} HostPortRow;

static const HostPortRow host_port_rows[] = {
  { "127.0.0.1:7700", FALSE, TRUE,  "127.0.0.1", 7700 },
  { "[::1]:0",        FALSE, TRUE,  "::1",       0 },
  { "::1:80",         FALSE, TRUE,  "::1",       80 },
  { "localhost:65535", FALSE, TRUE, "localhost", 65535 },
  { ":80",            FALSE, TRUE,  "",          80 },
  { "8080",           TRUE,  TRUE,  "",          8080 },
  { "8080",           FALSE, FALSE, NULL,        0 },
  { "127.0.0.1:",     FALSE, FALSE, NULL,        0 },
  { "127.0.0.1:65536", FALSE, FALSE, NULL,       0 },
  { "127.0.0.1:+80",  FALSE, FALSE, NULL,        0 },
  { "127.0.0.1:80x",  FALSE, FALSE, NULL,        0 },
  { "[::1]80",        FALSE, FALSE, NULL,        0 },
  { "[::1",           FALSE, FALSE, NULL,        0 },
};

static void
test_host_port (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (host_port_rows); i++)
    {
      const HostPortRow *row = &host_port_rows[i];
      g_autofree char *host = NULL;
      guint16 port = 1;

      g_test_message ("host:port '%s' (port alone %d)", row->text, row->port_alone);
      g_assert_cmpint (sandstep_parse_host_port (row->text, row->port_alone, &host, &port), ==, row->ok);
      if (row->ok)
        {
          g_assert_cmpstr (host, ==, row->host);
          g_assert_cmpuint (port, ==, row->port);
        }
    }
}

static void
test_host_header (void)
{
  static const struct { const char *value; const char *host; } rows[] = {
    { "127.0.0.1:7700", "127.0.0.1" }, { "LocalHost", "localhost" }, { "example.org.:80", "example.org" },
    { "[::1]:8080", "::1" }, { "[FE80::1]", "fe80::1" }, { "", NULL }, { "::1", NULL }, { "[::1", NULL },
    { "[::1]x", NULL }, { "a:1:2", NULL },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autofree char *host = sandstep_host_header_host (rows[i].value);
      g_test_message ("Host: '%s'", rows[i].value);
      g_assert_cmpstr (host, ==, rows[i].host);
    }
  g_assert_null (sandstep_host_header_host (NULL));
}

typedef struct {
  guint64 bytes;
  const char *size;
  const char *option;
} FormatRow;

static const FormatRow format_rows[] = {
  /* bytes                size      as an option */
  { 1023,                 "1023B",  "1023" },
  { 1024,                 "1.0KB",  "1K" },
  { 4096,                 "4.0KB",  "4K" },
  { 1536,                 "1.5KB",  "1536" },
  { 5 << 20,              "5.0MB",  "5M" },
  { 2ULL << 30,           "2048.0MB", "2G" },
  { (1ULL << 20) + 1,     "1.0MB",  "1048577" },
};

static void
test_format (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (format_rows); i++)
    {
      g_autofree char *size = sandstep_format_size (format_rows[i].bytes);
      g_autofree char *option = sandstep_format_size_option (format_rows[i].bytes);

      g_assert_cmpstr (size, ==, format_rows[i].size);
      g_assert_cmpstr (option, ==, format_rows[i].option);
    }
}

/* What the helper prints back must read back as the same value. */
static void
test_round_trip (void)
{
  static const guint64 sizes[] = { 1, 1023, 4096, 1 << 20, 3ULL << 30, 123456789 };

  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autofree char *text = sandstep_format_size_option (sizes[i]);
      guint64 back = 0;

      g_assert_true (sandstep_parse_size (text, &back, NULL));
      g_assert_cmpuint (back, ==, sizes[i]);
    }
}

static void
test_cpus (void)
{
  static const struct { const char *text; gint64 millicpus; } good[] = {
    { "0.5", 500 }, { "2", 2000 }, { ".25", 250 }, { "1.", 1000 }, { "0.01", 10 }, { "1.234", 1234 },
    { "4096", 4096000 }, { "0.050", 50 },
  };
  static const char *const bad[] = {
    "", ".", "0", "0.0", "0.009", "0.0001", "1.2345", "-1", "+1", "1e3", "0x10", "1,5", " 1", "1 ", "inf", "nan",
    "4096.001", "99999999999999999999", "1.2.3", "abc", "007", "00.5", "010",
  };

  g_test_summary ("--cpus takes a decimal number of CPUs with at most 3 places, 0.01 to 4096, as thousandths; "
                  "anything else is a usage error naming --cpus and the value");
  g_test_bug ("30");
  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autoptr(GError) error = NULL;
      gint64 out = -1;
      g_assert_true (sandstep_parse_cpus (good[i].text, &out, &error));
      g_assert_no_error (error);
      g_assert_cmpint (out, ==, good[i].millicpus);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *quoted = g_strdup_printf ("--cpus '%s'", bad[i]);
      gint64 out = -1;
      g_assert_false (sandstep_parse_cpus (bad[i], &out, &error));
      g_assert_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE);
      g_assert_nonnull (strstr (error->message, quoted));
      g_assert_cmpint (out, ==, -1);
    }
}

static void
test_cpus_spec_round_trip (void)
{
  g_autoptr(SandstepSpec) spec = sandstep_spec_new ();
  g_autoptr(SandstepSpec) back = NULL;
  g_autoptr(JsonNode) node = NULL;
  g_autoptr(JsonNode) bad = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *differences = NULL;

  g_test_summary ("a spec's CPU cap and I/O weight travel as JSON (limits.cpus, limits.io_weight: a record, "
                  "sandstepd's wire) and back unchanged; a record with a negative cpus is refused, and "
                  "sandstep_spec_check refuses a cap or weight outside the kernel's range");
  g_test_bug ("30");
  spec->limits.millicpus = 1234;
  spec->limits.io_weight = 7;
  node = sandstep_spec_to_json (spec, TRUE);
  back = sandstep_spec_from_json (node, &error);
  g_assert_no_error (error);
  g_assert_cmpint (back->limits.millicpus, ==, 1234);
  g_assert_cmpint (back->limits.io_weight, ==, 7);
  g_assert_true (sandstep_spec_check (back, NULL));
  back->limits.millicpus = 500;
  differences = sandstep_spec_differences (spec, back);
  g_assert_nonnull (strstr (differences, "cpus is '1.234' there, '0.5' asked"));

  bad = json_from_string ("{\"limits\": {\"cpus\": -1}}", NULL);
  g_clear_pointer (&back, sandstep_spec_free);
  back = sandstep_spec_from_json (bad, &error);
  g_assert_null (back);
  g_assert_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE);
  g_assert_nonnull (strstr (error->message, "limits.cpus"));

  spec->limits.millicpus = 5;
  g_assert_false (sandstep_spec_check (spec, NULL));
  spec->limits.millicpus = 0;
  spec->limits.io_weight = SANDSTEP_MAX_IO_WEIGHT + 1;
  g_assert_false (sandstep_spec_check (spec, NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/units/duration", test_duration);
  g_test_add_func ("/units/seconds", test_seconds);
  g_test_add_func ("/units/size", test_size);
  g_test_add_func ("/units/count", test_count);
  g_test_add_func ("/units/host-port", test_host_port);
  g_test_add_func ("/units/host-header", test_host_header);
  g_test_add_func ("/units/format", test_format);
  g_test_add_func ("/units/round-trip", test_round_trip);
  g_test_add_func ("/units/cpus", test_cpus);
  g_test_add_func ("/units/cpus-spec-round-trip", test_cpus_spec_round_trip);
  return g_test_run ();
}
