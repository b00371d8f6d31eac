/* sandstep-output.c: the text rules of the agent tools (see sandstep-output.h).
 *
 * We follow the Airflow sandbox toolset's model-facing behaviour (shared/
 * reference/airflow-sandbox-contract.md §4, §6): per-stream masking then
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
 * Decisions on the contract's §10 quirks:
 *
 *  1. Fractional limits: our limits are integers (gsize) in C, and the agent's
 *     --max-turns is a whole number (SANDSTEP_OPTION_COUNT).  Tool arguments
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
#include "sandstep-output.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MASK "***"

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

/* ---- masking ---- */

struct _SandstepMasker {
  GPtrArray *secrets;     /* char *, longest first, no duplicates, none empty */
  gsize max_len;
  gboolean first[256];    /* bytes a secret starts with */
  int only_first;         /* the one byte every secret starts with, or -1 */
};

typedef void (*EmitFunc) (gpointer sink, const char *data, gsize len);

static int
compare_longest_first (gconstpointer a, gconstpointer b)
{
  gsize la = strlen (*(const char *const *) a), lb = strlen (*(const char *const *) b);

  if (la != lb)
    return la > lb ? -1 : 1;
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

SandstepMasker *
sandstep_masker_new (const char *const *secrets)
{
  SandstepMasker *masker = g_new0 (SandstepMasker, 1);

  masker->secrets = g_ptr_array_new_with_free_func (g_free);
  masker->only_first = -1;
  for (; secrets != NULL && *secrets != NULL; secrets++)
    {
      gboolean seen = FALSE;

      if ((*secrets)[0] == '\0')
        continue;
      for (guint i = 0; i < masker->secrets->len && !seen; i++)
        seen = strcmp (masker->secrets->pdata[i], *secrets) == 0;
      if (!seen)
        g_ptr_array_add (masker->secrets, g_strdup (*secrets));
    }
  g_ptr_array_sort (masker->secrets, compare_longest_first);
  for (guint i = 0; i < masker->secrets->len; i++)
    {
      const guchar first = *(const guchar *) masker->secrets->pdata[i];

      masker->max_len = MAX (masker->max_len, strlen (masker->secrets->pdata[i]));
      masker->first[first] = TRUE;
      masker->only_first = (i == 0 || masker->only_first == first) ? first : -2;
    }
  if (masker->only_first == -2)
    masker->only_first = -1;
  return masker;
}

SandstepMasker *
sandstep_masker_new_from_table (GHashTable *secrets)
{
  g_autoptr(GPtrArray) values = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer value;

  if (secrets != NULL)
    {
      g_hash_table_iter_init (&iter, secrets);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        if (value != NULL)
          g_ptr_array_add (values, value);
    }
  g_ptr_array_add (values, NULL);
  return sandstep_masker_new ((const char *const *) values->pdata);
}

void
sandstep_masker_free (SandstepMasker *masker)
{
  if (masker == NULL)
    return;
  g_ptr_array_unref (masker->secrets);
  g_free (masker);
}

gboolean
sandstep_masker_is_empty (const SandstepMasker *masker)
{
  return masker == NULL || masker->secrets->len == 0;
}

/* Masks @data into @emit and returns how many bytes it consumed: all of them
 * when @final, else those before the first position where a secret could
 * still start and end past @len (they wait for more bytes).  At each position
 * the longest matching secret wins, so streaming in any chunks masks exactly
 * as one pass over the whole text does. */
static gsize
mask_scan (const SandstepMasker *masker, const char *data, gsize len, gboolean final, EmitFunc emit, gpointer sink)
{
  gsize limit, i = 0, run = 0;

  if (sandstep_masker_is_empty (masker))
    {
      emit (sink, data, len);
      return len;
    }
  limit = final ? len : (len >= masker->max_len - 1 ? len - (masker->max_len - 1) : 0);
  while (i < limit)
    {
      gsize matched = 0;

      if (masker->only_first >= 0)
        {
          const char *next = memchr (data + i, masker->only_first, limit - i);
          if (next == NULL)
            {
              i = limit;
              break;
            }
          i = next - data;
        }
      else if (!masker->first[(guchar) data[i]])
        {
          i++;
          continue;
        }
      for (guint s = 0; s < masker->secrets->len; s++)
        {
          const char *secret = masker->secrets->pdata[s];
          gsize slen = strlen (secret);

          if (i + slen <= len && memcmp (data + i, secret, slen) == 0)
            {
              matched = slen;
              break;
            }
        }
      if (matched == 0)
        {
          i++;
          continue;
        }
      if (i > run)
        emit (sink, data + run, i - run);
      emit (sink, MASK, strlen (MASK));
      i += matched;
      run = i;
    }
  if (i > run)
    emit (sink, data + run, i - run);
  return i;
}

static void
emit_to_gstring (gpointer sink, const char *data, gsize len)
{
  g_string_append_len (sink, data, len);
}

char *
sandstep_masker_mask (const SandstepMasker *masker, const char *data, gssize len, gsize *out_len)
{
  GString *out;

  if (len < 0)
    len = strlen (data);
  out = g_string_sized_new (len + 1);
  mask_scan (masker, data, len, TRUE, emit_to_gstring, out);
  if (out_len != NULL)
    *out_len = out->len;
  return g_string_free (out, FALSE);
}

void
sandstep_masker_mask_error (const SandstepMasker *masker, GError *error)
{
  char *masked;

  if (error == NULL || sandstep_masker_is_empty (masker))
    return;
  masked = sandstep_masker_mask (masker, error->message, -1, NULL);
  g_free (error->message);
  error->message = masked;
}

/* ---- the cut: which lines of a text to keep ---- */

/* A text of which we may hold only the first and the last bytes. */
typedef struct {
  const char *head;
  gsize head_len;
  const char *tail;       /* the text's last tail_len bytes */
  gsize tail_len;
  guint64 total;
  guint64 newlines;
  gboolean complete;      /* head == tail == the whole text */
} TextView;

typedef struct {
  gboolean cut;
  gsize head_keep;        /* bytes of view.head shown (the whole text when !cut) */
  guint64 head_lines;
  gsize tail_from;        /* the shown tail is view.tail[tail_from, tail_from + tail_keep) */
  gsize tail_keep;
  guint64 tail_lines;
  gboolean partial;       /* the shown tail starts inside a line */
  guint64 omitted_lines;  /* whole lines left out */
  guint64 omitted_bytes;  /* bytes left out, the partial line's start included */
} TextCut;

static void
cut_text (const TextView *v, gsize max_lines, gsize max_bytes, TextCut *c)
{
  gboolean ends_nl;
  guint64 total_lines, shown;
  gsize head_lines_cap = max_lines / 4, head_bytes_cap = max_bytes / 4;
  gsize pos = 0, bytes = 0, tail_bytes_cap, end, from, tail_end, tail_bytes = 0;
  guint64 lines = 0, tail_lines_cap, tail_lines = 0, base, head_end;

  memset (c, 0, sizeof *c);
  if (v->total == 0)
    return;
  ends_nl = v->tail[v->tail_len - 1] == '\n';
  total_lines = v->newlines + (ends_nl ? 0 : 1);
  shown = v->total - (ends_nl ? 1 : 0);
  if (v->complete && total_lines <= max_lines && shown <= max_bytes)
    {
      c->head_keep = shown;
      c->head_lines = total_lines;
      return;
    }
  c->cut = TRUE;

  /* Whole lines from the start, under a quarter of each budget.  A line
   * whose end we do not hold cannot be taken (nor fit: we hold more than
   * the budget). */
  while (lines < head_lines_cap)
    {
      const char *nl = memchr (v->head + pos, '\n', v->head_len - pos);
      gsize cost;

      if (nl == NULL)
        break;
      cost = (lines > 0 ? 1 : 0) + (gsize) (nl - (v->head + pos));
      if (bytes + cost > head_bytes_cap)
        break;
      bytes += cost;
      lines++;
      pos = nl - v->head + 1;
    }
  c->head_lines = lines;
  c->head_keep = lines > 0 ? pos - 1 : 0;
  head_end = pos;

  /* Whole lines from the end, under what the head left. */
  tail_bytes_cap = max_bytes - (lines > 0 ? bytes + 1 : 0);
  tail_lines_cap = max_lines - lines;
  base = v->total - v->tail_len;
  tail_end = end = v->tail_len - (ends_nl ? 1 : 0);
  from = tail_end;
  while (tail_lines < tail_lines_cap)
    {
      const char *nl = end > 0 ? memrchr (v->tail, '\n', end) : NULL;
      gsize start = nl != NULL ? (gsize) (nl - v->tail) + 1 : 0;
      gboolean whole = nl != NULL || base == 0;
      gsize cost = (tail_lines > 0 ? 1 : 0) + (end - start);

      if (base + start < head_end)
        break;
      if (!whole || tail_bytes + cost > tail_bytes_cap)
        {
          if (tail_lines == 0)
            {
              /* The last line alone is too wide: keep its last bytes,
               * never starting inside a UTF-8 sequence. */
              from = end - MIN (tail_bytes_cap, end);
              while (from < end && ((guchar) v->tail[from] & 0xC0) == 0x80)
                from++;
              c->partial = TRUE;
              tail_lines = 1;
            }
          break;
        }
      tail_bytes += cost;
      tail_lines++;
      from = start;
      if (start == 0)
        break;
      end = start - 1;
    }
  c->tail_from = from;
  c->tail_keep = tail_end - from;
  c->tail_lines = tail_lines;
  c->omitted_lines = total_lines - lines - tail_lines;
  c->omitted_bytes = base + from - head_end;
}

typedef enum {
  MARK_LINES,
  MARK_ENTRIES,
} MarkKind;

static void
append_marker (GString *out, const TextCut *c, MarkKind kind, const char *dir)
{
  g_autofree char *size = sandstep_format_size (c->omitted_bytes);
  guint64 n = c->omitted_lines;

  if (kind == MARK_ENTRIES && !c->partial)
    {
      g_autofree char *quoted = g_shell_quote (dir);
      g_string_append_printf (out,
                              "[... %" G_GUINT64_FORMAT " %s omitted; see them with run_command: "
                              "LC_ALL=C ls -Ap %s | sed -n '%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT "p' ...]",
                              n, n == 1 ? "entry" : "entries", quoted, c->head_lines + 1, c->head_lines + n);
      return;
    }
  if (!c->partial)
    g_string_append_printf (out, "[... %" G_GUINT64_FORMAT " %s (%s) omitted ...]", n, n == 1 ? "line" : "lines",
                            size);
  else if (n > 0)
    g_string_append_printf (out, "[... %" G_GUINT64_FORMAT " %s and the start of the next (%s) omitted ...]", n,
                            n == 1 ? "line" : "lines", size);
  else
    g_string_append_printf (out, "[... the start of the next line (%s) omitted ...]", size);
}

static char *
render_view (const TextView *v, gsize max_lines, gsize max_bytes, gboolean already_truncated, MarkKind kind,
             const char *dir)
{
  g_autoptr(GString) out = g_string_new (NULL);
  TextCut c;

  if (v->total == 0)
    return g_strdup (already_truncated ? SANDSTEP_EARLIER_TRUNCATED_MARKER : "");
  cut_text (v, max_lines, max_bytes, &c);
  if (already_truncated)
    g_string_append (out, SANDSTEP_EARLIER_TRUNCATED_MARKER "\n");
  if (!c.cut)
    g_string_append_len (out, v->head, c.head_keep);
  else
    {
      if (c.head_lines > 0)
        {
          g_string_append_len (out, v->head, c.head_keep);
          g_string_append_c (out, '\n');
        }
      append_marker (out, &c, kind, dir);
      if (c.tail_lines > 0)
        {
          g_string_append_c (out, '\n');
          g_string_append_len (out, v->tail + c.tail_from, c.tail_keep);
        }
    }
  return g_utf8_make_valid (out->str, out->len);
}

static guint64
count_newlines (const char *data, gsize len)
{
  guint64 n = 0;
  const char *end = data + len;

  while ((data = memchr (data, '\n', end - data)) != NULL)
    {
      n++;
      data++;
    }
  return n;
}

char *
sandstep_truncate_output (const char *text, gssize len, gsize max_lines, gsize max_bytes, gboolean already_truncated)
{
  TextView v;

  if (len < 0)
    len = strlen (text);
  v = (TextView) { text, len, text, len, len, count_newlines (text, len), TRUE };
  return render_view (&v, max_lines, max_bytes, already_truncated, MARK_LINES, NULL);
}

/* ---- the capture ---- */

struct _SandstepCapture {
  const SandstepMasker *masker;
  GByteArray *pending;    /* bytes that may still start a secret */
  gsize max_lines;
  gsize max_bytes;
  GByteArray *head;       /* the first head_cap bytes */
  gsize head_cap;
  char *ring;             /* the last tail_cap bytes, circular */
  gsize ring_start;
  gsize ring_len;
  gsize tail_cap;
  guint64 total;          /* bytes after masking */
  guint64 newlines;
  guint64 dropped;
  guint64 input;          /* bytes before masking */
  gsize peak;
  gboolean rendered;
};

SandstepCapture *
sandstep_capture_new (const SandstepMasker *masker, gsize max_lines, gsize max_bytes)
{
  SandstepCapture *capture = g_new0 (SandstepCapture, 1);

  capture->masker = masker;
  capture->pending = g_byte_array_new ();
  capture->max_lines = max_lines;
  capture->max_bytes = max_bytes;
  capture->head_cap = max_bytes / 4 + 2;
  capture->tail_cap = max_bytes + 2;
  capture->head = g_byte_array_new ();
  return capture;
}

void
sandstep_capture_free (SandstepCapture *capture)
{
  if (capture == NULL)
    return;
  g_byte_array_unref (capture->pending);
  g_byte_array_unref (capture->head);
  g_free (capture->ring);
  g_free (capture);
}

static void
capture_update_peak (SandstepCapture *capture)
{
  gsize held = capture->pending->len + capture->head->len + capture->ring_len;

  capture->peak = MAX (capture->peak, held);
}

/* Masked bytes arrive here. */
static void
capture_sink (gpointer user_data, const char *data, gsize len)
{
  SandstepCapture *capture = user_data;
  gsize take;

  if (len == 0)
    return;
  capture->total += len;
  capture->newlines += count_newlines (data, len);

  take = MIN (len, capture->head_cap - capture->head->len);
  g_byte_array_append (capture->head, (const guint8 *) data, take);
  data += take;
  len -= take;
  if (len == 0)
    return;

  if (capture->ring == NULL)
    capture->ring = g_malloc (capture->tail_cap);
  if (len >= capture->tail_cap)
    {
      capture->dropped += capture->ring_len + (len - capture->tail_cap);
      memcpy (capture->ring, data + len - capture->tail_cap, capture->tail_cap);
      capture->ring_start = 0;
      capture->ring_len = capture->tail_cap;
      return;
    }
  if (capture->ring_len + len > capture->tail_cap)
    {
      gsize evict = capture->ring_len + len - capture->tail_cap;
      capture->ring_start = (capture->ring_start + evict) % capture->tail_cap;
      capture->ring_len -= evict;
      capture->dropped += evict;
    }
  while (len > 0)
    {
      gsize at = (capture->ring_start + capture->ring_len) % capture->tail_cap;
      gsize n = MIN (len, capture->tail_cap - at);

      memcpy (capture->ring + at, data, n);
      capture->ring_len += n;
      data += n;
      len -= n;
    }
}

void
sandstep_capture_append (SandstepCapture *capture, const char *data, gsize len)
{
  GByteArray *pending = capture->pending;
  gsize used;

  g_return_if_fail (!capture->rendered);
  capture->input += len;
  if (sandstep_masker_is_empty (capture->masker))
    {
      capture_sink (capture, data, len);
      return;
    }
  if (pending->len > 0)
    {
      /* Finish what waits with enough new bytes to decide it, then go on
       * without copying the rest of the chunk. */
      gsize old = pending->len;
      gsize join = MIN (len, 2 * capture->masker->max_len);

      g_byte_array_append (pending, (const guint8 *) data, join);
      used = mask_scan (capture->masker, (const char *) pending->data, pending->len, FALSE, capture_sink, capture);
      capture_update_peak (capture);
      if (join < len)
        {
          /* Enough new bytes were joined that the scan got past the old ones. */
          gsize off = used - old;

          g_byte_array_set_size (pending, 0);
          data += off;
          len -= off;
        }
      else
        {
          g_byte_array_remove_range (pending, 0, used);
          capture_update_peak (capture);
          return;
        }
    }
  used = mask_scan (capture->masker, data, len, FALSE, capture_sink, capture);
  g_byte_array_append (pending, (const guint8 *) data + used, len - used);
  capture_update_peak (capture);
}

char *
sandstep_capture_render (SandstepCapture *capture)
{
  g_autofree char *tail = NULL;
  TextView v;

  g_return_val_if_fail (!capture->rendered, NULL);
  capture->rendered = TRUE;
  mask_scan (capture->masker, (const char *) capture->pending->data, capture->pending->len, TRUE, capture_sink,
             capture);
  g_byte_array_set_size (capture->pending, 0);

  /* The ring, in order. */
  tail = g_malloc (capture->ring_len + 1);
  for (gsize i = 0; i < capture->ring_len; i++)
    tail[i] = capture->ring[(capture->ring_start + i) % capture->tail_cap];

  if (capture->dropped == 0)
    {
      g_autoptr(GByteArray) whole = g_byte_array_sized_new (capture->head->len + capture->ring_len);

      g_byte_array_append (whole, capture->head->data, capture->head->len);
      g_byte_array_append (whole, (const guint8 *) tail, capture->ring_len);
      v = (TextView) { (const char *) whole->data, whole->len, (const char *) whole->data, whole->len,
                       capture->total, capture->newlines, TRUE };
      return render_view (&v, capture->max_lines, capture->max_bytes, FALSE, MARK_LINES, NULL);
    }
  v = (TextView) { (const char *) capture->head->data, capture->head->len, tail, capture->ring_len,
                   capture->total, capture->newlines, FALSE };
  return render_view (&v, capture->max_lines, capture->max_bytes, FALSE, MARK_LINES, NULL);
}

guint64
sandstep_capture_total_bytes (const SandstepCapture *capture)
{
  return capture->input;
}

gsize
sandstep_capture_peak_bytes (const SandstepCapture *capture)
{
  return capture->peak;
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

char *
sandstep_render_listing (const char *const *names, gsize n_names, const char *dir, gsize max_lines,
                         gsize max_bytes)
{
  g_autoptr(GString) joined = g_string_new (NULL);
  TextView v;

  if (n_names == 0)
    return g_strdup ("(empty)");
  for (gsize i = 0; i < n_names; i++)
    {
      if (i > 0)
        g_string_append_c (joined, '\n');
      g_string_append (joined, names[i]);
    }
  v = (TextView) { joined->str, joined->len, joined->str, joined->len, joined->len,
                   count_newlines (joined->str, joined->len), TRUE };
  return render_view (&v, max_lines, max_bytes, FALSE, MARK_ENTRIES, dir);
}

/* ---- read_file ---- */

char *
sandstep_render_file_window (const char *data, gsize len, gint64 offset, gint64 limit, gsize max_lines,
                             gsize max_bytes)
{
  g_autofree char *text = g_utf8_make_valid (data, len);
  gsize text_len = strlen (text);
  guint64 total = count_newlines (text, text_len) + (text_len > 0 && text[text_len - 1] != '\n' ? 1 : 0);
  guint64 start = offset < 1 ? 1 : (guint64) offset;
  guint64 want, kept = 0, next;
  const char *first, *p, *end = NULL;
  gsize bytes = 0;
  GString *out;

  if (start > total)
    return g_strdup_printf ("(no lines at offset %" G_GUINT64_FORMAT "; file has %" G_GUINT64_FORMAT " line%s)",
                            start, total, total == 1 ? "" : "s");
  first = text;
  for (guint64 i = 1; i < start; i++)
    first = strchr (first, '\n') + 1;
  want = total - start + 1;
  if (limit > 0 && (guint64) limit < want)
    want = limit;

  for (p = first; kept < want && kept < max_lines;)
    {
      const char *nl = strchr (p, '\n');
      const char *line_end = nl != NULL ? nl : text + text_len;
      gsize cost = (kept > 0 ? 1 : 0) + (gsize) (line_end - p);

      if (bytes + cost > max_bytes)
        {
          if (kept == 0)
            {
              g_autofree char *size = sandstep_format_size (max_bytes);
              return g_strdup_printf ("Line %" G_GUINT64_FORMAT " is longer than the %s output limit. Read part of "
                                      "it with a shell command instead (e.g. cut, head -c, or sed).",
                                      start, size);
            }
          break;
        }
      bytes += cost;
      kept++;
      end = line_end;
      p = nl != NULL ? nl + 1 : line_end;
    }

  out = g_string_new_len (first, end != NULL ? end - first : 0);
  next = start + kept;
  if (next <= total)
    {
      guint64 rest = total - next + 1;
      g_string_append_printf (out, "\n[... %" G_GUINT64_FORMAT " more line%s; read on with offset=%" G_GUINT64_FORMAT
                              "]", rest, rest == 1 ? "" : "s", next);
    }
  return g_string_free (out, FALSE);
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

static int
parse_u_escape (const char *p)
{
  int value = 0;

  if (p[0] != '\\' || p[1] != 'u')
    return -1;
  for (int i = 2; i < 6; i++)
    {
      int digit = g_ascii_xdigit_value (p[i]);
      if (digit < 0)
        return -1;
      value = value * 16 + digit;
    }
  return value;
}

gboolean
sandstep_json_has_lone_surrogate_escape (const char *json)
{
  for (const char *p = json; *p != '\0'; p++)
    {
      int unit;

      if (*p != '\\')
        continue;
      if (p[1] == '\0')
        break;
      unit = parse_u_escape (p);
      if (unit < 0)
        {
          p++;  /* some other escape: skip its letter, "\\\\" included */
          continue;
        }
      if (unit >= 0xDC00 && unit <= 0xDFFF)
        return TRUE;
      if (unit >= 0xD800 && unit <= 0xDBFF)
        {
          int low = parse_u_escape (p + 6);
          if (low < 0xDC00 || low > 0xDFFF)
            return TRUE;
          p += 11;
          continue;
        }
      p += 5;
    }
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
sandstep_run_command_description (double default_timeout_s, double max_timeout_s, const char *network_note,
                                  double remaining_s, const char *const *mounts)
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
  if (mounts != NULL && mounts[0] != NULL)
    {
      g_autofree char *list = g_strjoinv (", ", (char **) mounts);
      g_string_append_printf (out, " Read-only data is mounted at %s (read it with run_command).", list);
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
