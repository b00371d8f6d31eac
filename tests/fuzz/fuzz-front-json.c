/* fuzz-front-json.c: the static front's JSON reader (hooks/sandstep-json-libc.c) on any line.
 *
 * The front reads sandstepd's answer lines in place with these few
 * functions: members found by name, strings unescaped into fixed buffers,
 * base64 decoded into a buffer the size of its text.  Each is run here on a
 * line of hostile bytes, as sandstep-front-remote.c runs them.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "sandstep-json-libc.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  return 0;
}

static const char *const keys[] = { "claim", "spec", "limits", "memory", "data", "stream", "error", "message",
                                    "exit", "notices", "timed_out", "exit_status" };

/* Unescapes the string at @p into buffers of a few sizes, each exactly as large as said. */
static void
read_string (const char *p)
{
  static const size_t sizes[] = { 1, 2, 7, 64, 4096 };

  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    {
      char *out = malloc (sizes[i]);
      if (sandstep_json_libc_string (p, out, sizes[i]) && strlen (out) >= sizes[i])
        abort ();
      free (out);
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* One line, as the front holds it: NUL-terminated, cut at a NUL. */
  char *line = malloc (size + 1);
  const char *v;

  memcpy (line, data, size);
  line[size] = '\0';
  sandstep_json_libc_skip_value (line);
  read_string (sandstep_json_libc_space (line));
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    {
      v = sandstep_json_libc_member (line, keys[i]);
      if (v == NULL)
        continue;
      sandstep_json_libc_number (v, 0);
      sandstep_json_libc_boolean (v);
      read_string (v);
      sandstep_json_libc_member (v, "message");
      sandstep_json_libc_member (sandstep_json_libc_member (v, "limits"), "pids");
      if (*v == '"')
        {
          const char *end = sandstep_json_libc_skip_string (v);
          if (end != NULL)
            {
              size_t len = (size_t) (end - v);
              unsigned char *bytes = malloc (len);
              if (sandstep_json_libc_base64_decode (v + 1, len - 2, bytes) > len)
                abort ();
              free (bytes);
            }
        }
      if (*v == '[')
        for (const char *n = sandstep_json_libc_space (v + 1); n != NULL && *n == '"';)
          {
            read_string (n);
            n = sandstep_json_libc_skip_value (n);
            n = n != NULL ? sandstep_json_libc_space (n) : NULL;
            if (n != NULL && *n == ',')
              n = sandstep_json_libc_space (n + 1);
          }
    }
  {
    /* The other way: the line as a string the front writes into its request. */
    size_t len = 0, cap = size * 6 + 3;
    char *out = malloc (cap);
    if (sandstep_json_libc_append_string (out, cap, &len, line) && len > cap)
      abort ();
    free (out);
  }
  free (line);
  return 0;
}
