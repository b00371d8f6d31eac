/* sandstep-test-hooks.c: test-only variables, honoured in the build tree alone (see the header). */
#include "sandstep-test-hooks.h"

gboolean
sandstep_test_hooks_enabled (void)
{
#ifdef SANDSTEP_BUILD_ROOT
  static gsize once;
  static gboolean enabled;

  if (g_once_init_enter (&once))
    {
      g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
      g_autofree char *dir = self != NULL ? g_path_get_dirname (self) : NULL;
      g_autofree char *mark = dir != NULL ? g_build_filename (dir, SANDSTEP_TEST_HOOKS_MARK, NULL) : NULL;

      enabled = self != NULL && (g_str_has_prefix (self, SANDSTEP_BUILD_ROOT "/") ||
                                 g_file_test (mark, G_FILE_TEST_IS_REGULAR));
      g_once_init_leave (&once, 1);
    }
  return enabled;
#else
  return FALSE;
#endif
}

const char *
sandstep_test_hook (const char *name)
{
  const char *value = g_getenv (name);

  if (value == NULL)
    return NULL;
  if (!sandstep_test_hooks_enabled ())
    {
      g_debug ("%s is a test hook: an installed program ignores it", name);
      return NULL;
    }
  return value;
}
