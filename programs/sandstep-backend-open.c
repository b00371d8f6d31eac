/* sandstep-backend-open.c: which backend serves a helper run (sandstep-backend-open.h).  Here, in the helper's
 * program, and not in the core, which knows no backend. */
#include "sandstep-backend-open.h"

#include <dlfcn.h>
#include <string.h>

#include "sandstep-error.h"
#include "sandstep-handle.h"
#include "sandstep-programs-libc.h"
#include "sandstep-test-hooks.h"

#define REMOTE_MODULE "sandstep-remote.so"

/* sandstep_remote_backend_new() (sandstep-remote.h), defined in the module only. */
typedef SandstepBackend *(*RemoteBackendNew) (const char *url, const char *token, GError **error);

static RemoteBackendNew
load_remote (GError **error)
{
  static RemoteBackendNew constructor;
  g_autofree char *self = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *reasons = NULL;
  g_autoptr(GPtrArray) candidates = g_ptr_array_new_with_free_func (g_free);
  const char *test_module = sandstep_test_hook ("SANDSTEP_TEST_REMOTE_MODULE");
  char path[4096];
  int found;
  GString *why = g_string_new (NULL);

  if (constructor != NULL)
    {
      g_string_free (why, TRUE);
      return constructor;
    }
  self = g_file_read_link ("/proc/self/exe", NULL);
  dir = self != NULL ? g_path_get_dirname (self) : NULL;
  if (test_module != NULL)
    g_ptr_array_add (candidates, g_strdup (test_module));
  for (int i = 0; (found = sandstep_program_candidate (i, dir, REMOTE_MODULE, path, sizeof path)) >= 0; i++)
    if (found)
      g_ptr_array_add (candidates, g_strdup (path));

  for (guint i = 0; i < candidates->len; i++)
    {
      const char *candidate = candidates->pdata[i];
      void *module;

      if (!g_file_test (candidate, G_FILE_TEST_EXISTS))
        continue;
      /* Never unloaded: the backends it makes point into it. */
      module = dlopen (candidate, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
      if (module == NULL)
        {
          g_string_append_printf (why, "%s'%s': %s", why->len ? "; " : "", candidate, dlerror ());
          continue;
        }
      constructor = (RemoteBackendNew) dlsym (module, "sandstep_remote_backend_new");
      if (constructor != NULL)
        {
          g_string_free (why, TRUE);
          return constructor;
        }
      g_string_append_printf (why, "%s'%s' is not the remote backend", why->len ? "; " : "", candidate);
    }
  reasons = g_string_free (why, FALSE);
  sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                  "The remote backend (" REMOTE_MODULE ") cannot be loaded%s%s; it belongs beside '%s' or in '%s': "
                  "reinstall sandstep",
                  reasons[0] ? ": " : "", reasons, self != NULL ? self : "sandstep",
                  sandstep_program_installed_dir (REMOTE_MODULE));
  return NULL;
}

SandstepBackend *
sandstep_backend_open (const char *backend, const char *handle, GError **error)
{
  RemoteBackendNew remote_new;

  if (backend == NULL || backend[0] == '\0')
    backend = g_getenv (SANDSTEP_BACKEND_ENV);
  if (sandstep_backend_name_is_local (backend))
    backend = NULL;
  if (backend == NULL && !sandstep_handle_is_remote (handle))
    return sandstep_local_backend_new (NULL, error);
  remote_new = load_remote (error);
  return remote_new != NULL ? remote_new (backend, NULL, error) : NULL;
}
