/* replay.c: a fuzz target's entry function in the ordinary suite, without clang.
 *
 * Built with one fuzz-NAME.c (FUZZ_NAME names it), this test feeds
 * LLVMFuzzerTestOneInput() every file of tests/fuzz/corpus/NAME (the seeds
 * and the regression inputs of crashes found) and then mutations of them made
 * from a fixed seed, the same in every run, so that each parser reads hostile
 * bytes in every CI run.  A crash or an abort (a GLib critical included)
 * fails the test; the input is named by the last message before it.
 */
#include <string.h>

#include <glib.h>

#include "fuzz.h"

#define MUTATIONS 400
/* The seeds are a handful of valid inputs; fewer than this is a corpus gone missing. */
#define MIN_CORPUS 3

int LLVMFuzzerInitialize (int *argc, char ***argv) __attribute__ ((weak));

static GPtrArray *corpus;      /* GBytes of each corpus file, in name order */

/* Each input in a buffer of its exact size, so that a read past its end leaves the allocation. */
static void
feed (const guint8 *data, gsize size)
{
  g_autofree guint8 *copy = g_memdup2 (data, size);

  LLVMFuzzerTestOneInput (size > 0 ? copy : (const guint8 *) "", size);
}

static void
test_corpus (void)
{
  g_test_summary ("The empty input and every file of corpus/" FUZZ_NAME " (seeds, and the inputs of crashes found) "
                  "pass through the target without a crash, a sanitizer's report or a GLib critical.");
  g_assert_cmpuint (corpus->len, >=, MIN_CORPUS);
  feed (NULL, 0);
  for (guint i = 0; i < corpus->len; i++)
    {
      gsize size;
      const guint8 *data = g_bytes_get_data (corpus->pdata[i], &size);

      g_test_message ("corpus file %u (%" G_GSIZE_FORMAT " bytes)", i, size);
      feed (data, size);
    }
}

static const guint8 interesting8[] = { 0x00, 0x01, 0x7f, 0x80, 0xff, '"', '\\', '{', '}', '[', ']', ':', ',',
                                       '\n', '\r', ' ', '@', '/', '0', '9', '-', '.', 'e', 'u' };
static const guint32 interesting32[] = { 0, 1, 7, 8, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0xffff, 0x10000,
                                         0x7fffffff, 0x80000000, 0xfffffff8, 0xffffffff };

/* One mutation of @in, as libFuzzer's own kinds: a bit, a byte, a word, a range gone, copied or inserted, a cut,
 * a splice with @other. */
static GByteArray *
mutate (GRand *rand, GBytes *in, GBytes *other)
{
  gsize size, other_size;
  const guint8 *data = g_bytes_get_data (in, &size);
  const guint8 *other_data = g_bytes_get_data (other, &other_size);
  GByteArray *out = g_byte_array_sized_new (size + 64);
  guint kinds = g_rand_int_range (rand, 1, 4);

  g_byte_array_append (out, data, size);
  for (guint k = 0; k < kinds; k++)
    {
      guint at = out->len > 0 ? g_rand_int_range (rand, 0, out->len) : 0;
      guint span = out->len > at ? g_rand_int_range (rand, 1, MIN (out->len - at, 64) + 1) : 0;

      switch (g_rand_int_range (rand, 0, 8))
        {
        case 0:
          if (out->len > 0)
            out->data[at] ^= 1u << g_rand_int_range (rand, 0, 8);
          break;
        case 1:
          if (out->len > 0)
            out->data[at] = interesting8[g_rand_int_range (rand, 0, G_N_ELEMENTS (interesting8))];
          break;
        case 2:
          if (out->len >= 4)
            {
              guint32 word = interesting32[g_rand_int_range (rand, 0, G_N_ELEMENTS (interesting32))];
              at = g_rand_int_range (rand, 0, out->len - 3);
              memcpy (out->data + at, &word, sizeof word);
            }
          break;
        case 3:
          if (span > 0)
            g_byte_array_remove_range (out, at, span);
          break;
        case 4:
          if (span > 0)
            {
              g_autofree guint8 *copy = g_memdup2 (out->data + at, span);
              guint to = g_rand_int_range (rand, 0, out->len + 1);
              for (guint r = g_rand_int_range (rand, 1, 5); r > 0; r--)
                g_array_insert_vals ((GArray *) out, to, copy, span);
            }
          break;
        case 5:
          {
            guint8 bytes[16];
            guint n = g_rand_int_range (rand, 1, sizeof bytes + 1);
            for (guint i = 0; i < n; i++)
              bytes[i] = g_rand_int_range (rand, 0, 256);
            g_array_insert_vals ((GArray *) out, g_rand_int_range (rand, 0, out->len + 1), bytes, n);
          }
          break;
        case 6:
          g_byte_array_set_size (out, out->len > 0 ? g_rand_int_range (rand, 0, out->len) : 0);
          break;
        default:
          if (other_size > 0)
            {
              guint from = g_rand_int_range (rand, 0, other_size);
              g_byte_array_set_size (out, at);
              g_byte_array_append (out, other_data + from, other_size - from);
            }
          break;
        }
    }
  return out;
}

static void
test_mutations (void)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (0x5a4d5e7e);

  g_test_summary ("The same for " G_STRINGIFY (MUTATIONS) " mutations of the corpus, the same in every run.");
  g_assert_cmpuint (corpus->len, >=, MIN_CORPUS);
  for (guint i = 0; i < MUTATIONS; i++)
    {
      guint from = g_rand_int_range (rand, 0, corpus->len);
      g_autoptr(GByteArray) input = mutate (rand, corpus->pdata[from],
                                            corpus->pdata[g_rand_int_range (rand, 0, corpus->len)]);

      g_test_message ("mutation %u of corpus file %u (%u bytes)", i, from, input->len);
      feed (input->data, input->len);
    }
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* Each of @dir's files, in name order. */
static GPtrArray *
load_corpus (const char *dir)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) d = g_dir_open (dir, 0, &error);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  GPtrArray *files = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  const char *name;

  g_assert_no_error (error);
  while ((name = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *path = g_build_filename (dir, names->pdata[i], NULL);
      char *contents = NULL;
      gsize len = 0;

      g_assert_true (g_file_get_contents (path, &contents, &len, &error));
      g_assert_no_error (error);
      g_ptr_array_add (files, g_bytes_new_take (contents, len));
    }
  return files;
}

int
main (int argc, char **argv)
{
  g_autoptr(GPtrArray) files = NULL;
  g_autofree char *dir = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  if (LLVMFuzzerInitialize != NULL)
    LLVMFuzzerInitialize (&argc, &argv);
  dir = g_test_build_filename (G_TEST_DIST, "corpus", FUZZ_NAME, NULL);
  files = load_corpus (dir);
  corpus = files;
  g_test_add_func ("/fuzz/" FUZZ_NAME "/corpus", test_corpus);
  g_test_add_func ("/fuzz/" FUZZ_NAME "/mutations", test_mutations);
  status = g_test_run ();
  corpus = NULL;
  return status;
}
