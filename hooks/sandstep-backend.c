/* sandstep-backend.c: what every backend shares, and the choice of one for a helper run. */
#include "sandstep-backend.h"

#include <dlfcn.h>
#include <string.h>

#include "sandstep-error.h"

#define REMOTE_MODULE "sandstep-remote.so"

/* sandstep_remote_backend_new() (sandstep-remote.h), defined in the module only. */
typedef SandstepBackend *(*RemoteBackendNew) (const char *url, const char *token, GError **error);

static RemoteBackendNew
load_remote (GError **error)
{
  static RemoteBackendNew constructor;
  g_autofree char *self = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *beside = NULL;
  g_autofree char *build_tree = NULL;
  g_autofree char *reasons = NULL;
  const char *candidates[4];
  GString *why = g_string_new (NULL);

  if (constructor != NULL)
    {
      g_string_free (why, TRUE);
      return constructor;
    }
  self = g_file_read_link ("/proc/self/exe", NULL);
  dir = self != NULL ? g_path_get_dirname (self) : NULL;
  beside = dir != NULL ? g_build_filename (dir, REMOTE_MODULE, NULL) : NULL;
  build_tree = dir != NULL ? g_build_filename (dir, "..", "hooks", "remote", REMOTE_MODULE, NULL) : NULL;
  candidates[0] = g_getenv ("SANDSTEP_REMOTE_MODULE");
  candidates[1] = beside;
  candidates[2] = build_tree;
  candidates[3] = SANDSTEP_LIBEXECDIR "/" REMOTE_MODULE;

  for (gsize i = 0; i < G_N_ELEMENTS (candidates); i++)
    {
      void *module;

      if (candidates[i] == NULL || !g_file_test (candidates[i], G_FILE_TEST_EXISTS))
        continue;
      /* Never unloaded: the backends it makes point into it. */
      module = dlopen (candidates[i], RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
      if (module == NULL)
        {
          g_string_append_printf (why, "%s'%s': %s", why->len ? "; " : "", candidates[i], dlerror ());
          continue;
        }
      constructor = (RemoteBackendNew) dlsym (module, "sandstep_remote_backend_new");
      if (constructor != NULL)
        {
          g_string_free (why, TRUE);
          return constructor;
        }
      g_string_append_printf (why, "%s'%s' is not the remote backend", why->len ? "; " : "", candidates[i]);
    }
  reasons = g_string_free (why, FALSE);
  sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                  "The remote backend (" REMOTE_MODULE ") cannot be loaded%s%s; it belongs beside '%s' or in '%s': "
                  "reinstall sandstep",
                  reasons[0] ? ": " : "", reasons, self != NULL ? self : "sandstep", SANDSTEP_LIBEXECDIR);
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
