/* fuzz-token.c: token files (hooks/sandstep-token.c), as sandstepd loads its set and a client reads its token.
 *
 * Whatever a token file holds, loading it ends in a set or an error; a set
 * then answers headers made from the file's own words.
 */
#include "fuzz.h"

#include <string.h>

#include "sandstep-token.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_init_glib ();
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *path = fuzz_bytes_as_file (data, size);
  g_autofree char *token = sandstep_token_read_file (path, NULL);
  g_autoptr(SandstepTokenSet) set = sandstep_token_set_load (path, NULL);

  if (token != NULL)
    g_assert_true (token[0] != '\0' && strpbrk (token, " \t\n") == NULL);
  if (set != NULL)
    {
      g_assert_cmpuint (sandstep_token_set_size (set), >, 0);
      if (token != NULL)
        {
          g_autofree char *header = g_strconcat ("Bearer ", token, NULL);
          const SandstepTokenEntry *entry = sandstep_token_set_match (set, header);
          if (entry != NULL)
            sandstep_token_entry_covers (entry, "nightly/build");
        }
      g_assert_null (sandstep_token_set_match (set, "Basic x"));
    }
  return 0;
}
