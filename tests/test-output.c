/* test-output.c: the text rules of the agent tools (operators/sandstep-output.h).
 *
 * Pure functions, no sandbox: truncation (head and tail, markers, the wide
 * last line, already_truncated, our "\n"-only line splitting), masking
 * (chunked streams, a secret at the cut), the bounded capture against the
 * plain truncation, file windows, sizes, the notes and the timeout rules,
 * with the examples of the Airflow contract they follow.
 */
#include <math.h>
#include <string.h>

#include "sandstep-agent.h"
#include "sandstep-output.h"

#define assert_str_free(expr, expected) \
  G_STMT_START { char *_s = (expr); g_assert_cmpstr (_s, ==, (expected)); g_free (_s); } G_STMT_END

/* ---- numbers ---- */

static void
test_format_size (void)
{
  g_test_summary ("format_size: binary units labelled KB/MB, one decimal (as the contract does)");
  assert_str_free (sandstep_format_size (0), "0B");
  assert_str_free (sandstep_format_size (512), "512B");
  assert_str_free (sandstep_format_size (1023), "1023B");
  assert_str_free (sandstep_format_size (1024), "1.0KB");
  assert_str_free (sandstep_format_size (1536), "1.5KB");
  assert_str_free (sandstep_format_size (5 * 1024 * 1024), "5.0MB");
  assert_str_free (sandstep_format_size (6 * 1024 * 1024), "6.0MB");
}

static void
test_format_seconds (void)
{
  g_test_summary ("Timeouts print without %g's exponent or a trailing .0 (quirk 6)");
  assert_str_free (sandstep_format_seconds (60), "60");
  assert_str_free (sandstep_format_seconds (60.0), "60");
  assert_str_free (sandstep_format_seconds (2.5), "2.5");
  assert_str_free (sandstep_format_seconds (1e6), "1000000");
  assert_str_free (sandstep_format_seconds (59.97), "60");
  assert_str_free (sandstep_format_seconds (0.5), "0.5");
  assert_str_free (sandstep_format_seconds (0.04), "0");
}

static void
test_format_number (void)
{
  assert_str_free (sandstep_format_number (-1), "-1");
  assert_str_free (sandstep_format_number (0), "0");
  assert_str_free (sandstep_format_number (-0.0), "0");
  assert_str_free (sandstep_format_number (-2.5), "-2.5");
  assert_str_free (sandstep_format_number (0.1), "0.1");
  assert_str_free (sandstep_format_number (NAN), "nan");
  assert_str_free (sandstep_format_number (INFINITY), "inf");
  assert_str_free (sandstep_format_number (-INFINITY), "-inf");
}

static void
test_quote (void)
{
  g_test_summary ("Paths are quoted as Python's repr() quotes a str");
  assert_str_free (sandstep_quote ("a.txt"), "'a.txt'");
  assert_str_free (sandstep_quote ("it's"), "\"it's\"");
  assert_str_free (sandstep_quote ("a'b\"c"), "'a\\'b\"c'");
  assert_str_free (sandstep_quote ("a\nb\\c"), "'a\\nb\\\\c'");
  assert_str_free (sandstep_quote ("\x01"), "'\\x01'");
  assert_str_free (sandstep_quote ("caf\xc3\xa9"), "'caf\xc3\xa9'");
}

static void
test_round_half_even (void)
{
  g_assert_cmpint (sandstep_round_half_even (0.5), ==, 0);
  g_assert_cmpint (sandstep_round_half_even (1.5), ==, 2);
  g_assert_cmpint (sandstep_round_half_even (2.5), ==, 2);
  g_assert_cmpint (sandstep_round_half_even (3.5), ==, 4);
  g_assert_cmpint (sandstep_round_half_even (4.5), ==, 4);
  g_assert_cmpint (sandstep_round_half_even (2.4), ==, 2);
  g_assert_cmpint (sandstep_round_half_even (2.6), ==, 3);
}

/* ---- truncation ---- */

static char *
cut_text (const char *text, gsize max_lines, gsize max_bytes)
{
  return sandstep_truncate_output (text, -1, max_lines, max_bytes, FALSE);
}

/* "1\n2\n...\nn\n" */
static char *
numbered_lines (guint from, guint to)
{
  GString *out = g_string_new (NULL);

  for (guint i = from; i <= to; i++)
    g_string_append_printf (out, "%u\n", i);
  return g_string_free (out, FALSE);
}

static void
test_truncate_fits (void)
{
  g_test_summary ("A text that fits comes back whole, less one final newline");
  assert_str_free (cut_text ("", 10, 100), "");
  assert_str_free (cut_text ("a\nb\n", 10, 100), "a\nb");
  assert_str_free (cut_text ("a\nb", 10, 100), "a\nb");
  assert_str_free (cut_text ("\n", 10, 100), "");
  assert_str_free (cut_text ("a\n\n", 10, 100), "a\n");
  /* Exactly at both budgets: 3 lines, "aa\nbb\ncc" is 8 bytes. */
  assert_str_free (cut_text ("aa\nbb\ncc\n", 3, 8), "aa\nbb\ncc");
}

static void
test_truncate_line_splitting (void)
{
  g_test_summary ("Lines split at \\n only; \\r and splitlines' other breaks are ordinary bytes (quirk 5)");
  /* CRLF: the \r stays, byte for byte; only the final \n goes. */
  assert_str_free (cut_text ("a\r\nb\r\n", 10, 100), "a\r\nb\r");
  /* \r, \v, \f, \x1c-\x1e, U+0085, U+2028 and U+2029 do not break lines:
   * this is one line, so one line of budget keeps it whole. */
  assert_str_free (cut_text ("a\rb\vc\fd\x1c" "e\xc2\x85" "f\xe2\x80\xa8g\xe2\x80\xa9h", 1, 100),
                   "a\rb\vc\fd\x1c" "e\xc2\x85" "f\xe2\x80\xa8g\xe2\x80\xa9h");
  /* A progress bar's frames are one line: its last bytes are what is kept. */
  assert_str_free (cut_text ("10%\r20%\r30%\r100%\n", 10, 8), "[... the start of the next line (8B) omitted ...]\n30%\r100%");
}

static void
test_truncate_head_and_tail (void)
{
  g_autofree char *text = numbered_lines (1, 100);
  g_autofree char *tail = numbered_lines (86, 100);
  g_autofree char *expected = NULL;

  g_test_summary ("A long text keeps a quarter of the budget from its start and the rest from its end, with "
                  "an exact count of what was left out between them");
  tail[strlen (tail) - 1] = '\0';
  /* Lines 6..85 are 4 × 2 + 76 × 3 = 236 bytes, newlines included. */
  expected = g_strdup_printf ("1\n2\n3\n4\n5\n[... 80 lines (236B) omitted ...]\n%s", tail);
  assert_str_free (cut_text (text, 20, 1000), expected);
}

static void
test_truncate_bytes_budget (void)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(GString) expected = g_string_new (NULL);
  g_autofree char *result = NULL;

  g_test_summary ("The byte budget counts the joining newlines, never the marker, and keeps whole lines only");
  for (int i = 0; i < 100; i++)
    g_string_append_printf (text, "line-%05d\n", i);   /* 10 bytes + newline */
  result = cut_text (text->str, 1000, 100);
  /* Head: a quarter of 100 bytes holds 2 lines (10 + 1 + 10).  Tail: 100 - 22
   * = 78 bytes hold 7 lines (7 × 10 + 6).  Left out: lines 2..92, 91 × 11. */
  g_string_append (expected, "line-00000\nline-00001\n[... 91 lines (1001B) omitted ...]\n");
  for (int i = 93; i < 100; i++)
    g_string_append_printf (expected, "line-%05d%s", i, i < 99 ? "\n" : "");
  g_assert_cmpstr (result, ==, expected->str);
}

static void
test_truncate_max_lines (void)
{
  g_autofree char *text = numbered_lines (1, 10);

  assert_str_free (cut_text (text, 4, 1000), "1\n[... 6 lines (12B) omitted ...]\n8\n9\n10");
  /* Under 4 lines of budget the head gets none. */
  assert_str_free (cut_text (text, 2, 1000), "[... 8 lines (16B) omitted ...]\n9\n10");
  /* One line left out: singular. */
  assert_str_free (cut_text ("a\nb\nc\nd\ne\nf\n", 5, 1000), "a\n[... 1 line (2B) omitted ...]\nc\nd\ne\nf");
}

static void
test_truncate_wide_last_line (void)
{
  g_autofree char *wide = g_strnfill (200, 'x');
  g_autofree char *kept94 = g_strnfill (94, 'x');
  g_autofree char *kept76 = g_strnfill (76, 'x');
  g_autofree char *kept100 = g_strnfill (100, 'x');
  g_autofree char *text = g_strconcat ("short\n", wide, NULL);
  g_autofree char *expected = g_strconcat ("short\n[... the start of the next line (106B) omitted ...]\n", kept94, NULL);
  g_autoptr(GString) lines = g_string_new (NULL);
  g_autoptr(GString) accents = g_string_new (NULL);
  g_autofree char *result = NULL;

  g_test_summary ("A last line wider than the budget left keeps only its last bytes, never half a UTF-8 "
                  "sequence, and the marker says so");
  assert_str_free (cut_text (text, 100, 100), expected);

  g_free (expected);
  expected = g_strconcat ("[... the start of the next line (100B) omitted ...]\n", kept100, NULL);
  assert_str_free (cut_text (wide, 100, 100), expected);
  /* With its trailing newline too. */
  g_free (text);
  text = g_strconcat (wide, "\n", NULL);
  assert_str_free (cut_text (text, 100, 100), expected);

  /* Whole lines left out as well: l9 and l10. */
  for (int i = 1; i <= 10; i++)
    g_string_append_printf (lines, "l%d\n", i);
  g_string_append (lines, wide);
  g_free (expected);
  expected = g_strconcat ("l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\n[... 2 lines and the start of the next (131B) omitted ...]\n",
                          kept76, NULL);
  assert_str_free (cut_text (lines->str, 1000, 100), expected);

  /* 100 × "é" (2 bytes each): the cut at byte 149 would split one. */
  for (int i = 0; i < 100; i++)
    g_string_append (accents, "\xc3\xa9");
  result = cut_text (accents->str, 100, 51);
  g_assert_true (g_str_has_prefix (result, "[... the start of the next line (150B) omitted ...]\n"));
  g_assert_cmpuint (strlen (strchr (result, '\n') + 1), ==, 50);
  g_assert_true (g_utf8_validate (result, -1, NULL));
}

static void
test_truncate_already_truncated (void)
{
  g_autofree char *text = numbered_lines (1, 10);

  g_test_summary ("already_truncated puts the contract's marker first, even when nothing more is cut");
  assert_str_free (sandstep_truncate_output ("abc\n", -1, 10, 100, TRUE), "[... earlier output truncated]\nabc");
  assert_str_free (sandstep_truncate_output (text, -1, 4, 1000, TRUE),
                   "[... earlier output truncated]\n1\n[... 6 lines (12B) omitted ...]\n8\n9\n10");
  assert_str_free (sandstep_truncate_output ("", -1, 4, 1000, TRUE), "[... earlier output truncated]");
}

static void
test_truncate_invalid_utf8 (void)
{
  g_test_summary ("Invalid UTF-8 and NUL bytes become U+FFFD in what the model reads");
  assert_str_free (sandstep_truncate_output ("a\xff" "b", 3, 10, 100, FALSE), "a\xef\xbf\xbd" "b");
  assert_str_free (sandstep_truncate_output ("a\0b", 3, 10, 100, FALSE), "a\xef\xbf\xbd" "b");
}

/* ---- masking ---- */

static void
test_mask_basic (void)
{
  const char *secrets[] = { "hunter2", "", "abc", "abcdef", NULL };
  g_autoptr(SandstepMasker) masker = sandstep_masker_new (secrets);
  g_autoptr(SandstepMasker) none = sandstep_masker_new (NULL);
  const char *aa[] = { "aa", NULL };
  g_autoptr(SandstepMasker) overlap = sandstep_masker_new (aa);
  g_autoptr(GError) error = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_FAILED, "login hunter2 refused");

  g_test_summary ("Every non-empty secret becomes ***; the longest match wins; errors are masked too");
  assert_str_free (sandstep_masker_mask (masker, "pw=hunter2 and hunter2!", -1, NULL), "pw=*** and ***!");
  assert_str_free (sandstep_masker_mask (masker, "abcdefg abcx", -1, NULL), "***g ***x");
  assert_str_free (sandstep_masker_mask (masker, "", -1, NULL), "");
  assert_str_free (sandstep_masker_mask (none, "hunter2", -1, NULL), "hunter2");
  assert_str_free (sandstep_masker_mask (overlap, "aaa", -1, NULL), "***a");
  g_assert_true (sandstep_masker_is_empty (none));
  g_assert_false (sandstep_masker_is_empty (masker));
  sandstep_masker_mask_error (masker, error);
  g_assert_cmpstr (error->message, ==, "login *** refused");
}

static char *
capture_in_chunks (const SandstepMasker *masker, const char *text, gsize len, gsize max_lines, gsize max_bytes,
                   const gsize *chunks, gsize n_chunks)
{
  g_autoptr(SandstepCapture) capture = sandstep_capture_new (masker, max_lines, max_bytes);
  gsize at = 0;

  for (gsize i = 0; at < len; i++)
    {
      gsize n = n_chunks > 0 ? MIN (chunks[i % n_chunks], len - at) : len - at;
      sandstep_capture_append (capture, text + at, n);
      at += n;
    }
  return sandstep_capture_render (capture);
}

static void
test_mask_split_across_chunks (void)
{
  const char *secrets[] = { "hunter2-secret", NULL };
  g_autoptr(SandstepMasker) masker = sandstep_masker_new (secrets);
  const char *text = "before hunter2-secret after\nhunter2-secret\n";
  const gsize one[] = { 1 };
  const gsize odd[] = { 9, 3, 5 };
  const gsize halves[] = { 10 };

  g_test_summary ("A secret split across output chunks is still masked");
  assert_str_free (capture_in_chunks (masker, text, strlen (text), 100, 1000, one, 1), "before *** after\n***");
  assert_str_free (capture_in_chunks (masker, text, strlen (text), 100, 1000, odd, 3), "before *** after\n***");
  assert_str_free (capture_in_chunks (masker, text, strlen (text), 100, 1000, halves, 1), "before *** after\n***");
  /* A prefix of the secret at the very end is not a secret. */
  assert_str_free (capture_in_chunks (masker, "x hunter2-sec", 13, 100, 1000, one, 1), "x hunter2-sec");
}

static void
test_mask_straddles_the_cut (void)
{
  g_autofree char *secret = g_strnfill (60, 's');
  const char *secrets[] = { secret, NULL };
  g_autoptr(SandstepMasker) masker = sandstep_masker_new (secrets);
  g_autofree char *text = NULL;
  g_autofree char *masked = NULL;
  g_autofree char *result = NULL;
  g_autofree char *streamed = NULL;
  const gsize chunks[] = { 7 };

  g_test_summary ("Masking comes before the cut, so a secret the cut would split never shows half of itself");
  /* Filler lines, then "tail:" + the secret: 65 bytes, wider than the 40-byte
   * budget.  Cut first, its last bytes would be the secret's 's's. */
  {
    g_autoptr(GString) filler = g_string_new (NULL);
    g_autofree char *unmasked_cut = NULL;

    for (int i = 0; i < 20; i++)
      g_string_append_printf (filler, "filler-%02d\n", i);
    text = g_strconcat (filler->str, "tail:", secret, "\n", NULL);
    unmasked_cut = sandstep_truncate_output (text, -1, 100, 40, FALSE);
    g_assert_nonnull (strstr (unmasked_cut, "ssssssssss"));
  }
  masked = sandstep_masker_mask (masker, text, -1, NULL);
  result = sandstep_truncate_output (masked, -1, 100, 40, FALSE);
  g_assert_null (strstr (result, "ss"));
  g_assert_nonnull (strstr (result, " omitted ...]"));
  g_assert_true (g_str_has_suffix (result, "\ntail:***"));
  streamed = capture_in_chunks (masker, text, strlen (text), 100, 40, chunks, 1);
  g_assert_cmpstr (streamed, ==, result);
}

/* ---- the capture ---- */

static void
test_capture_equals_truncate (void)
{
  const char *secrets[] = { "s3cr3t", "s3", "\xc3\xa9\xc3\xa9", NULL };
  g_autoptr(SandstepMasker) masker = sandstep_masker_new (secrets);
  const char *pieces[] = { "\n", "\n", "\n", "x", "yy", "s3cr3t", "s3", "\r", "\xc3\xa9", "line of text ",
                           "\xe2\x80\xa8", "s3cr", "3t", "\xff" };
  GRand *rand = g_rand_new_with_seed (20261129);

  g_test_summary ("Streaming through the bounded capture gives exactly the plain truncation of the whole "
                  "masked text, for any chunking and budget");
  for (int round = 0; round < 400; round++)
    {
      g_autoptr(GString) text = g_string_new (NULL);
      g_autofree char *masked = NULL;
      g_autofree char *expected = NULL;
      g_autofree char *got = NULL;
      gsize n_pieces = g_rand_int_range (rand, 0, round % 10 == 0 ? 4000 : 300);
      gsize max_lines = g_rand_int_range (rand, 1, 60);
      gsize max_bytes = g_rand_int_range (rand, 1, 400);
      gsize chunks[3];
      gsize masked_len;

      for (gsize i = 0; i < n_pieces; i++)
        g_string_append (text, pieces[g_rand_int_range (rand, 0, G_N_ELEMENTS (pieces))]);
      for (int i = 0; i < 3; i++)
        chunks[i] = g_rand_int_range (rand, 1, 80);
      masked = sandstep_masker_mask (masker, text->str, text->len, &masked_len);
      expected = sandstep_truncate_output (masked, masked_len, max_lines, max_bytes, FALSE);
      got = capture_in_chunks (masker, text->str, text->len, max_lines, max_bytes, chunks, 3);
      if (g_strcmp0 (got, expected) != 0)
        g_test_message ("round %d: %" G_GSIZE_FORMAT " bytes, max_lines %" G_GSIZE_FORMAT ", max_bytes %"
                        G_GSIZE_FORMAT, round, text->len, max_lines, max_bytes);
      g_assert_cmpstr (got, ==, expected);
    }
  g_rand_free (rand);
}

static void
test_capture_bounded (void)
{
  const char *secrets[] = { "needle-secret", NULL };
  g_autoptr(SandstepMasker) masker = sandstep_masker_new (secrets);
  g_autoptr(SandstepCapture) capture = sandstep_capture_new (masker, 2000, 50 * 1024);
  g_autofree char *result = NULL;
  g_autofree char *marker = NULL;
  char chunk[65536];
  guint64 total = 0;

  g_test_summary ("The capture holds about 1.25 x max_bytes whatever comes in, and still counts exactly");
  for (gsize i = 0; i < sizeof chunk; i++)
    chunk[i] = (i % 64 == 63) ? '\n' : 'a' + i % 26;   /* 64-byte lines */
  memcpy (chunk + 100, "needle-secret", 13);
  for (int i = 0; i < 1600; i++)   /* 100 MiB */
    {
      sandstep_capture_append (capture, chunk, sizeof chunk);
      total += sizeof chunk;
    }
  g_assert_cmpuint (sandstep_capture_total_bytes (capture), ==, total);
  g_assert_cmpuint (sandstep_capture_peak_bytes (capture), <=, 50 * 1024 / 4 + 2 + 50 * 1024 + 2 + 3 * 13);
  result = sandstep_capture_render (capture);
  /* 1600 × 1024 lines; the head keeps 500 (under 12.5 KB: 200 lines of
   * 64 bytes), the tail what fits 37.5 KB and 1800 lines: 600 lines. */
  g_assert_null (strstr (result, "needle-secret"));
  marker = g_strdup_printf ("[... %u lines (", 1600 * 1024 - 200 - 600);
  g_assert_nonnull (strstr (result, marker));
  g_assert_cmpuint (strlen (result), <=, 50 * 1024 + 100);
}

/* ---- results ---- */

static void
test_command_result (void)
{
  g_test_summary ("run_command's text: labels, (no output), the timeout note without an exit code, exit codes");
  assert_str_free (sandstep_render_command_result ("hi", NULL, 0, FALSE, 60), "[stdout]\nhi");
  assert_str_free (sandstep_render_command_result (NULL, "oops", 2, FALSE, 60), "[stderr]\noops\n[exit code: 2]");
  assert_str_free (sandstep_render_command_result ("a", "b", 0, FALSE, 60), "[stdout]\na\n[stderr]\nb");
  assert_str_free (sandstep_render_command_result (NULL, NULL, 0, FALSE, 60), "(no output)");
  assert_str_free (sandstep_render_command_result (NULL, NULL, 1, FALSE, 60), "(no output)\n[exit code: 1]");
  assert_str_free (sandstep_render_command_result (NULL, NULL, -9, FALSE, 60), "(no output)\n[exit code: -9]");
  assert_str_free (sandstep_render_command_result ("x", NULL, 137, TRUE, 2.5), "[stdout]\nx\n[timed out after 2.5s]");
  assert_str_free (sandstep_render_command_result (NULL, NULL, 0, TRUE, 60.0), "(no output)\n[timed out after 60s]");
  /* A stream that was only "\n": labelled, with its one empty line. */
  assert_str_free (sandstep_render_command_result ("", NULL, 0, FALSE, 60), "[stdout]\n");
}

static void
test_listing (void)
{
  const char *names[] = { "a/", "b.txt", "c/" };
  g_autoptr(GPtrArray) many = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *result = NULL;

  g_test_summary ("Listings: (empty), one name a line, and a long one keeps its first and last entries with "
                  "the command that lists the rest (quirk 10)");
  assert_str_free (sandstep_render_listing (NULL, 0, ".", 100, 1000), "(empty)");
  assert_str_free (sandstep_render_listing (names, 3, ".", 100, 1000), "a/\nb.txt\nc/");
  for (int i = 0; i < 100; i++)
    g_ptr_array_add (many, g_strdup_printf ("f%03d", i));
  result = sandstep_render_listing ((const char *const *) many->pdata, many->len, "my dir", 20, 10000);
  g_assert_true (g_str_has_prefix (result, "f000\nf001\nf002\nf003\nf004\n[... 80 entries omitted; see them with "
                                           "run_command: LC_ALL=C ls -Ap 'my dir' | sed -n '6,85p' ...]\nf085\n"));
  g_assert_true (g_str_has_suffix (result, "\nf099"));
}

/* ---- read_file ---- */

static char *
window (const char *data, gint64 offset, gint64 limit, gsize max_lines, gsize max_bytes)
{
  return sandstep_render_file_window (data, strlen (data), offset, limit, max_lines, max_bytes);
}

static void
test_file_window (void)
{
  const char *three = "l1\nl2\nl3\n";

  g_test_summary ("read_file windows: offsets, limits, caps, the next-offset hint");
  /* offset null (1), 0 and negatives all mean 1. */
  assert_str_free (window (three, 1, 0, 100, 1000), "l1\nl2\nl3");
  assert_str_free (window (three, 0, 0, 100, 1000), "l1\nl2\nl3");
  assert_str_free (window (three, -5, 0, 100, 1000), "l1\nl2\nl3");
  assert_str_free (window (three, 2, 0, 100, 1000), "l2\nl3");
  assert_str_free (window (three, 3, 0, 100, 1000), "l3");
  /* Past the end; the empty file. */
  assert_str_free (window (three, 4, 0, 100, 1000), "(no lines at offset 4; file has 3 lines)");
  assert_str_free (window ("only\n", 2, 0, 100, 1000), "(no lines at offset 2; file has 1 line)");
  assert_str_free (window ("", 1, 0, 100, 1000), "(no lines at offset 1; file has 0 lines)");
  assert_str_free (window ("", 0, 0, 100, 1000), "(no lines at offset 1; file has 0 lines)");
  /* limit: > 0 cuts, null or <= 0 does not. */
  assert_str_free (window (three, 2, 1, 100, 1000), "l2\n[... 1 more line; read on with offset=3]");
  assert_str_free (window (three, 1, 1, 100, 1000), "l1\n[... 2 more lines; read on with offset=2]");
  assert_str_free (window (three, 1, -1, 100, 1000), "l1\nl2\nl3");
  assert_str_free (window (three, 1, 3, 100, 1000), "l1\nl2\nl3");
  /* The caps keep the head, whole lines only. */
  assert_str_free (window (three, 1, 0, 2, 1000), "l1\nl2\n[... 1 more line; read on with offset=3]");
  assert_str_free (window ("aaaa\nbbbb\ncccc", 1, 0, 100, 9), "aaaa\nbbbb\n[... 1 more line; read on with offset=3]");
  assert_str_free (window ("aaaa\nbbbb\ncccc", 1, 0, 100, 8), "aaaa\n[... 2 more lines; read on with offset=2]");
  /* A first line over the byte cap. */
  assert_str_free (window ("ok\n0123456789\n", 2, 0, 100, 8),
                   "Line 2 is longer than the 8B output limit. Read part of it with a shell command instead (e.g. "
                   "cut, head -c, or sed).");
  assert_str_free (window ("ok\n0123456789\n", 1, 0, 100, 8), "ok\n[... 1 more line; read on with offset=2]");
  /* Invalid UTF-8 is replaced, never an error; CRLF is kept. */
  assert_str_free (window ("a\xff\r\nb\n", 1, 0, 100, 1000), "a\xef\xbf\xbd\r\nb");
}

static void
test_looks_binary (void)
{
  g_assert_true (sandstep_looks_binary ("ab\0cd", 5));
  g_assert_false (sandstep_looks_binary ("abcd\xff", 5));
  g_assert_false (sandstep_looks_binary ("", 0));
}

static void
test_read_limit_message (void)
{
  g_test_summary ("The read cap message carries the sizes and the shell hint");
  assert_str_free (sandstep_read_limit_message ("big.log", "6.0MB", 5 * 1024 * 1024),
                   "'big.log' is 6.0MB, over the 5.0MB read limit. Read just the part you need with a shell "
                   "command instead (e.g. head, tail, sed -n, or grep).");
  assert_str_free (sandstep_read_limit_message ("big.log", NULL, 5 * 1024 * 1024),
                   "'big.log' is over the 5.0MB read limit. Read just the part you need with a shell command "
                   "instead (e.g. head, tail, sed -n, or grep).");
}

/* ---- arguments ---- */

static void
test_surrogates (void)
{
  g_test_summary ("Lone surrogates: as json-glib decodes them (ED A0..BF xx), and as JSON escapes");
  g_assert_true (sandstep_has_surrogates ("a\xed\xa0\x80" "b", -1));
  g_assert_true (sandstep_has_surrogates ("\xed\xbf\xbf", -1));
  g_assert_false (sandstep_has_surrogates ("\xf0\x9f\x98\x80 \xed\x9f\xbf", -1));  /* emoji, U+D7FF */
  g_assert_true (sandstep_json_has_lone_surrogate_escape ("{\"c\": \"x\\ud800\"}"));
  g_assert_true (sandstep_json_has_lone_surrogate_escape ("{\"c\": \"\\udc00x\"}"));
  g_assert_true (sandstep_json_has_lone_surrogate_escape ("{\"c\": \"\\uD800\\u0041\"}"));
  g_assert_false (sandstep_json_has_lone_surrogate_escape ("{\"c\": \"\\ud83d\\ude00\"}"));
  g_assert_false (sandstep_json_has_lone_surrogate_escape ("{\"c\": \"\\\\ud800\"}"));
  g_assert_false (sandstep_json_has_lone_surrogate_escape ("{\"c\": \"\\u00e9\\n\"}"));
}

/* ---- notes and timeouts ---- */

static void
test_network_note (void)
{
  const char *hosts[] = { "pypi.org", "files.pythonhosted.org", NULL };
  const char *cidrs[] = { "10.0.0.0/8", NULL };

  g_test_summary ("The network note of run_command's description");
  assert_str_free (sandstep_network_note (SANDSTEP_NETWORK_OPEN, NULL, NULL),
                   "This sandbox has outbound network access.");
  assert_str_free (sandstep_network_note (SANDSTEP_NETWORK_NONE, NULL, NULL),
                   "This sandbox has NO network access, including DNS, so installing packages or downloading "
                   "anything will fail. Work with what the image already has.");
  assert_str_free (sandstep_network_note (SANDSTEP_NETWORK_ALLOW, NULL, NULL),
                   "This sandbox has NO network access, including DNS, so installing packages or downloading "
                   "anything will fail. Work with what the image already has.");
  assert_str_free (sandstep_network_note (SANDSTEP_NETWORK_ALLOW, hosts, NULL),
                   "This sandbox reaches only these hosts, over HTTPS on port 443 only: pypi.org, "
                   "files.pythonhosted.org. Everything goes through the proxy in HTTPS_PROXY (curl, pip, git and npm "
                   "use it by themselves); names do not resolve inside the sandbox. Anything else, and plain HTTP to "
                   "any host, will fail.");
  assert_str_free (sandstep_network_note (SANDSTEP_NETWORK_ALLOW, NULL, cidrs),
                   "This sandbox reaches only these address ranges, on any port: 10.0.0.0/8, through the proxy in "
                   "HTTPS_PROXY (an HTTP CONNECT to ADDRESS:PORT); names do not resolve inside the sandbox. Anything "
                   "else will fail.");
  assert_str_free (sandstep_network_note (SANDSTEP_NETWORK_ALLOW, hosts, cidrs),
                   "This sandbox reaches only these hosts, over HTTPS on port 443 only: pypi.org, "
                   "files.pythonhosted.org; and these address ranges, on any port: 10.0.0.0/8. Everything goes "
                   "through the proxy in HTTPS_PROXY (curl, pip, git and npm use it by themselves); names do not "
                   "resolve inside the sandbox, and a listed host whose address is private or loopback is refused. "
                   "Anything else, and plain HTTP to any host, will fail.");
}

static void
test_lifetime_note (void)
{
  g_test_summary ("The lifetime note: unknown, under a minute, and minutes rounded half to even");
  assert_str_free (sandstep_lifetime_note (-1), "How long it has left is not known.");
  assert_str_free (sandstep_lifetime_note (0), "Under a minute of its lifetime remained when this run began, so "
                                               "finish up.");
  assert_str_free (sandstep_lifetime_note (59.9), "Under a minute of its lifetime remained when this run began, "
                                                  "so finish up.");
  assert_str_free (sandstep_lifetime_note (60), "About 1 minute of its lifetime remained when this run began.");
  assert_str_free (sandstep_lifetime_note (89), "About 1 minute of its lifetime remained when this run began.");
  assert_str_free (sandstep_lifetime_note (90), "About 2 minutes of its lifetime remained when this run began.");
  assert_str_free (sandstep_lifetime_note (150), "About 2 minutes of its lifetime remained when this run began.");
  assert_str_free (sandstep_lifetime_note (270), "About 4 minutes of its lifetime remained when this run began.");
  assert_str_free (sandstep_lifetime_note (3600), "About 60 minutes of its lifetime remained when this run began.");
}

static void
test_description (void)
{
  const char *mounts[] = { "/data/docs", NULL };
  g_autofree char *note = sandstep_network_note (SANDSTEP_NETWORK_NONE, NULL, NULL);
  g_autofree char *text = sandstep_run_command_description (60, 300, note, 150, NULL, mounts);
  g_autofree char *image_note = sandstep_image_note ("oci:/srv/py:3.12", "sha256:ab", FALSE);
  g_autofree char *with_image = sandstep_run_command_description (60, 300, note, 150, image_note, mounts);

  g_test_summary ("run_command's description states the timeouts (quirk 2), the attached sandbox, the network, "
                  "the lifetime, and the image of an image sandbox");
  assert_str_free (sandstep_timeout_note (60, 300), "Commands time out after 60s unless you pass timeout_seconds "
                                                    "(at most 300s); a command that times out is killed with "
                                                    "everything it started.");
  g_assert_true (g_str_has_prefix (text, "Run a shell command inside an isolated sandbox"));
  g_assert_nonnull (strstr (text, " Commands time out after 60s unless you pass timeout_seconds (at most 300s)"));
  g_assert_nonnull (strstr (text, " This sandbox was set up by an earlier step, and your files stay in it after "
                                  "this run for a later step to collect. This sandbox has NO network access"));
  g_assert_nonnull (strstr (text, " About 2 minutes of its lifetime remained when this run began."));
  g_assert_true (g_str_has_suffix (text, " Read-only data is mounted at /data/docs (the file tools read it too)."));
  /* An image's sandbox says which image, and that installs stay; a read-only root says so instead. */
  g_assert_null (strstr (text, "Its system is"));
  g_assert_nonnull (strstr (with_image, " this run began. Its system is the image oci:/srv/py:3.12 (sha256:ab), not "
                                        "this machine's: use the programs it has, and what you install outside "
                                        "/workspace stays for later commands. Read-only data"));
  assert_str_free (sandstep_image_note ("docker://x", "sha256:cd", TRUE),
                   "Its system is the image docker://x (sha256:cd), not this machine's: use the programs it has; its "
                   "root is read-only, so only /workspace and /tmp take writes.");
  g_assert_null (sandstep_image_note (NULL, NULL, FALSE));
}

static void
test_command_budget (void)
{
  double budget = -1;
  char *message = NULL;

  g_test_summary ("Timeouts: default when absent, refused when not > 0 and finite, clamped to the maximum and "
                  "to what is left");
  g_assert_true (sandstep_command_budget (FALSE, 0, 60, 300, -1, &budget, &message));
  g_assert_cmpfloat (budget, ==, 60);
  g_assert_true (sandstep_command_budget (TRUE, 1000, 60, 300, -1, &budget, &message));
  g_assert_cmpfloat (budget, ==, 300);
  g_assert_true (sandstep_command_budget (TRUE, 10, 60, 300, 5, &budget, &message));
  g_assert_cmpfloat (budget, ==, 5);
  g_assert_true (sandstep_command_budget (FALSE, 0, 60, 300, 42.5, &budget, &message));
  g_assert_cmpfloat (budget, ==, 42.5);
  g_assert_true (sandstep_command_budget (TRUE, 0.01, 60, 300, -1, &budget, &message));
  g_assert_cmpfloat (budget, ==, 0.01);
  /* Nothing left: the smallest budget, never 0 ("no budget" to the backend). */
  g_assert_true (sandstep_command_budget (TRUE, 10, 60, 300, 0, &budget, &message));
  g_assert_cmpfloat (budget, >, 0);
  g_assert_null (message);

  g_assert_false (sandstep_command_budget (TRUE, 0, 60, 300, -1, &budget, &message));
  g_assert_cmpstr (message, ==, "timeout_seconds must be greater than 0, got 0.");
  g_clear_pointer (&message, g_free);
  g_assert_false (sandstep_command_budget (TRUE, -1, 60, 300, -1, &budget, &message));
  g_assert_cmpstr (message, ==, "timeout_seconds must be greater than 0, got -1.");
  g_clear_pointer (&message, g_free);
  g_assert_false (sandstep_command_budget (TRUE, -2.5, 60, 300, -1, &budget, &message));
  g_assert_cmpstr (message, ==, "timeout_seconds must be greater than 0, got -2.5.");
  g_clear_pointer (&message, g_free);
  g_assert_false (sandstep_command_budget (TRUE, NAN, 60, 300, -1, &budget, &message));
  g_assert_cmpstr (message, ==, "timeout_seconds must be greater than 0, got nan.");
  g_clear_pointer (&message, g_free);
  g_assert_false (sandstep_command_budget (TRUE, INFINITY, 60, 300, -1, &budget, &message));
  g_assert_cmpstr (message, ==, "timeout_seconds must be greater than 0, got inf.");
  g_clear_pointer (&message, g_free);
}

static void
test_tool_words (void)
{
  const char *const plain[] = { "run_command", "read_file", "write_file", "list_directory" };
  const char *const boxed[] = { "box_run_command", "box_read_file", "box_write_file", "box_list_directory" };

  g_test_summary ("A file operation's refusal names the tools the model has, never a sandstep command");
  assert_str_free (sandstep_tool_words ("'/workspace/d' is a directory; give a file, or list it with 'sandstep ls'",
                                        plain),
                   "'/workspace/d' is a directory; give a file, or list it with list_directory");
  assert_str_free (sandstep_tool_words ("'/workspace/f' is a FIFO, not a regular file; copy what you need into a "
                                        "file with 'sandstep run' first", boxed),
                   "'/workspace/f' is a FIFO, not a regular file; copy what you need into a file with "
                   "box_run_command first");
  assert_str_free (sandstep_tool_words ("'/etc/x' is outside the sandbox's files: only /workspace and /tmp can be "
                                        "read or written from the host", plain),
                   "'/etc/x' is outside the sandbox's files: only /workspace and /tmp can be read or written by "
                   "the file tools");
  assert_str_free (sandstep_tool_words ("nothing to change", plain), "nothing to change");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/output/format-size", test_format_size);
  g_test_add_func ("/output/format-seconds", test_format_seconds);
  g_test_add_func ("/output/format-number", test_format_number);
  g_test_add_func ("/output/quote", test_quote);
  g_test_add_func ("/output/round-half-even", test_round_half_even);
  g_test_add_func ("/output/truncate/fits", test_truncate_fits);
  g_test_add_func ("/output/truncate/line-splitting", test_truncate_line_splitting);
  g_test_add_func ("/output/truncate/head-and-tail", test_truncate_head_and_tail);
  g_test_add_func ("/output/truncate/bytes-budget", test_truncate_bytes_budget);
  g_test_add_func ("/output/truncate/max-lines", test_truncate_max_lines);
  g_test_add_func ("/output/truncate/wide-last-line", test_truncate_wide_last_line);
  g_test_add_func ("/output/truncate/already-truncated", test_truncate_already_truncated);
  g_test_add_func ("/output/truncate/invalid-utf8", test_truncate_invalid_utf8);
  g_test_add_func ("/output/mask/basic", test_mask_basic);
  g_test_add_func ("/output/mask/split-across-chunks", test_mask_split_across_chunks);
  g_test_add_func ("/output/mask/straddles-the-cut", test_mask_straddles_the_cut);
  g_test_add_func ("/output/capture/equals-truncate", test_capture_equals_truncate);
  g_test_add_func ("/output/capture/bounded", test_capture_bounded);
  g_test_add_func ("/output/command-result", test_command_result);
  g_test_add_func ("/output/listing", test_listing);
  g_test_add_func ("/output/file-window", test_file_window);
  g_test_add_func ("/output/looks-binary", test_looks_binary);
  g_test_add_func ("/output/read-limit-message", test_read_limit_message);
  g_test_add_func ("/output/surrogates", test_surrogates);
  g_test_add_func ("/output/notes/network", test_network_note);
  g_test_add_func ("/output/notes/lifetime", test_lifetime_note);
  g_test_add_func ("/output/notes/description", test_description);
  g_test_add_func ("/output/timeout-budget", test_command_budget);
  g_test_add_func ("/output/tool-words", test_tool_words);

  return g_test_run ();
}
