/* sandstep-cut.c: which lines of a long text to keep, and a stream captured in bounded memory.
 *
 * A long text keeps its head and its tail with an exact count of what was
 * left out between them; a command's output is masked and cut as it comes,
 * holding only the first and last bytes and counts of the rest, so a 1 GiB
 * stream costs about 1.25 times its byte budget (sandstep-output.h).
 */
#include "sandstep-output-private.h"

#include <string.h>

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
append_marker (GString *out, const TextCut *c, MarkKind kind, const char *dir, const char *run_tool)
{
  g_autofree char *size = sandstep_format_size (c->omitted_bytes);
  guint64 n = c->omitted_lines;

  if (kind == MARK_ENTRIES && !c->partial)
    {
      g_autofree char *quoted = g_shell_quote (dir);
      g_string_append_printf (out,
                              "[... %" G_GUINT64_FORMAT " %s omitted; see them with %s: "
                              "LC_ALL=C ls -Ap %s | sed -n '%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT "p' ...]",
                              n, n == 1 ? "entry" : "entries", run_tool, quoted, c->head_lines + 1, c->head_lines + n);
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
             const char *dir, const char *run_tool, gboolean *out_cut)
{
  g_autoptr(GString) out = g_string_new (NULL);
  TextCut c;

  if (v->total == 0)
    return g_strdup (already_truncated ? SANDSTEP_EARLIER_TRUNCATED_MARKER : "");
  cut_text (v, max_lines, max_bytes, &c);
  if (out_cut != NULL)
    *out_cut = c.cut;
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
      append_marker (out, &c, kind, dir, run_tool);
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
  return render_view (&v, max_lines, max_bytes, already_truncated, MARK_LINES, NULL, NULL, NULL);
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
  gboolean cut;           /* rendering left part of the stream out */
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
      used = sandstep_mask_scan (capture->masker, (const char *) pending->data, pending->len, FALSE, capture_sink, capture);
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
  used = sandstep_mask_scan (capture->masker, data, len, FALSE, capture_sink, capture);
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
  sandstep_mask_scan (capture->masker, (const char *) capture->pending->data, capture->pending->len, TRUE, capture_sink,
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
      return render_view (&v, capture->max_lines, capture->max_bytes, FALSE, MARK_LINES, NULL, NULL, &capture->cut);
    }
  v = (TextView) { (const char *) capture->head->data, capture->head->len, tail, capture->ring_len,
                   capture->total, capture->newlines, FALSE };
  return render_view (&v, capture->max_lines, capture->max_bytes, FALSE, MARK_LINES, NULL, NULL, &capture->cut);
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

gboolean
sandstep_capture_was_cut (const SandstepCapture *capture)
{
  return capture->cut;
}

char *
sandstep_render_listing (const char *const *names, gsize n_names, const char *dir, gsize max_lines,
                         gsize max_bytes)
{
  return sandstep_render_listing_for (names, n_names, dir, "run_command", max_lines, max_bytes);
}

char *
sandstep_render_listing_for (const char *const *names, gsize n_names, const char *dir, const char *run_tool,
                             gsize max_lines, gsize max_bytes)
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
  return render_view (&v, max_lines, max_bytes, FALSE, MARK_ENTRIES, dir, run_tool, NULL);
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
