/* sandstep-spec.c: the sandbox spec and its JSON form. */
#include "sandstep-spec.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "sandstep-error.h"
#include "sandstep-members.h"
#include "sandstep-units.h"

static void
sandstep_mount_free (SandstepMount *mount)
{
  g_free (mount->host_path);
  g_free (mount->name);
  g_free (mount);
}

SandstepSpec *
sandstep_spec_new (void)
{
  SandstepSpec *spec = g_new0 (SandstepSpec, 1);

  spec->network = SANDSTEP_NETWORK_NONE;
  spec->lifetime_s = SANDSTEP_DEFAULT_LIFETIME_S;
  spec->env = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  spec->secrets = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  spec->mounts = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstep_mount_free);
  spec->allow_hosts = g_ptr_array_new_with_free_func (g_free);
  spec->allow_cidrs = g_ptr_array_new_with_free_func (g_free);
  return spec;
}

void
sandstep_spec_free (SandstepSpec *spec)
{
  if (spec == NULL)
    return;
  g_hash_table_unref (spec->env);
  g_hash_table_unref (spec->secrets);
  g_ptr_array_unref (spec->mounts);
  g_ptr_array_unref (spec->allow_hosts);
  g_ptr_array_unref (spec->allow_cidrs);
  g_free (spec->image);
  g_free (spec->image_digest);
  g_free (spec);
}

const char *
sandstep_network_to_string (SandstepNetwork network)
{
  switch (network)
    {
    case SANDSTEP_NETWORK_NONE: return "none";
    case SANDSTEP_NETWORK_OPEN: return "open";
    case SANDSTEP_NETWORK_ALLOW: return "allow";
    }
  g_return_val_if_reached ("none");
}

gboolean
sandstep_network_from_string (const char *text, SandstepNetwork *out, GError **error)
{
  if (g_strcmp0 (text, "none") == 0)
    *out = SANDSTEP_NETWORK_NONE;
  else if (g_strcmp0 (text, "open") == 0)
    *out = SANDSTEP_NETWORK_OPEN;
  else if (g_strcmp0 (text, "allow") == 0)
    *out = SANDSTEP_NETWORK_ALLOW;
  else
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "network '%s' is not a network mode; use none, open or allow", text);
  return TRUE;
}

static gboolean
mount_name_is_valid (const char *name)
{
  /* One path component under /data. */
  if (name[0] == '\0' || strcmp (name, ".") == 0 || strcmp (name, "..") == 0 || strlen (name) > NAME_MAX)
    return FALSE;
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_' && *p != '.')
      return FALSE;
  return TRUE;
}

gboolean
sandstep_spec_add_mount (SandstepSpec *spec, const char *text, GError **error)
{
  const char *colon = strrchr (text, ':');
  g_autofree char *host = NULL;
  g_autofree char *canonical = NULL;
  const char *target;
  SandstepMount *mount;
  struct stat st;

  if (colon == NULL || !g_str_has_prefix (colon + 1, "/data/"))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "mount '%s' is not HOSTPATH:/data/NAME; for example mount=$(CURDIR)/docs:/data/docs",
                           text);
  host = g_strndup (text, colon - text);
  target = colon + 1 + strlen ("/data/");
  if (!mount_name_is_valid (target))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "mount '%s': '%s' is not a plain name under /data (letters, digits, '.', '-', '_', "
                           "at most %d of them)", text, target, NAME_MAX);
  if (!g_path_is_absolute (host))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "mount '%s': host path '%s' is not absolute; write $(abspath %s) in make",
                           text, host, host);
  canonical = realpath (host, NULL);
  if (canonical == NULL || stat (canonical, &st) < 0)
    return sandstep_throw_errno (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, errno,
                                 "mount '%s': host path '%s' cannot be used", text, host);
  for (guint i = 0; i < spec->mounts->len; i++)
    if (strcmp (((SandstepMount *) spec->mounts->pdata[i])->name, target) == 0)
      return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                             "mount '%s': /data/%s is mounted twice; give each mount its own name", text, target);

  mount = g_new0 (SandstepMount, 1);
  mount->host_path = g_steal_pointer (&canonical);
  mount->name = g_strdup (target);
  g_ptr_array_add (spec->mounts, mount);
  return TRUE;
}

static JsonNode *
string_map_to_json (GHashTable *map, gboolean with_values)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(GList) keys = g_list_sort (g_hash_table_get_keys (map), (GCompareFunc) strcmp);

  if (with_values)
    {
      json_builder_begin_object (builder);
      for (GList *l = keys; l; l = l->next)
        {
          json_builder_set_member_name (builder, l->data);
          json_builder_add_string_value (builder, g_hash_table_lookup (map, l->data));
        }
      json_builder_end_object (builder);
    }
  else
    {
      json_builder_begin_array (builder);
      for (GList *l = keys; l; l = l->next)
        json_builder_add_string_value (builder, l->data);
      json_builder_end_array (builder);
    }
  return json_builder_get_root (builder);
}

JsonNode *
sandstep_spec_to_json (const SandstepSpec *spec, gboolean with_secrets)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "network");
  json_builder_add_string_value (builder, sandstep_network_to_string (spec->network));
  json_builder_set_member_name (builder, "lifetime");
  json_builder_add_int_value (builder, spec->lifetime_s);
  json_builder_set_member_name (builder, "limits");
  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "memory");
  json_builder_add_int_value (builder, (gint64) spec->limits.memory);
  json_builder_set_member_name (builder, "pids");
  json_builder_add_int_value (builder, spec->limits.pids);
  json_builder_set_member_name (builder, "cpu_time");
  json_builder_add_int_value (builder, spec->limits.cpu_time_s);
  json_builder_set_member_name (builder, "disk");
  json_builder_add_int_value (builder, (gint64) spec->limits.disk);
  /* Written only when set, so that a record says "cpus" only where a cap was asked. */
  if (spec->limits.millicpus != 0)
    {
      json_builder_set_member_name (builder, "cpus");
      json_builder_add_double_value (builder, spec->limits.millicpus / 1000.0);
    }
  if (spec->limits.io_weight != 0)
    {
      json_builder_set_member_name (builder, "io_weight");
      json_builder_add_int_value (builder, spec->limits.io_weight);
    }
  json_builder_end_object (builder);
  json_builder_set_member_name (builder, "env");
  json_builder_add_value (builder, string_map_to_json (spec->env, TRUE));
  json_builder_set_member_name (builder, "secrets");
  json_builder_add_value (builder, string_map_to_json (spec->secrets, with_secrets));
  json_builder_set_member_name (builder, "allow");
  json_builder_begin_array (builder);
  for (guint i = 0; i < spec->allow_hosts->len; i++)
    json_builder_add_string_value (builder, spec->allow_hosts->pdata[i]);
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "allow_cidr");
  json_builder_begin_array (builder);
  for (guint i = 0; i < spec->allow_cidrs->len; i++)
    json_builder_add_string_value (builder, spec->allow_cidrs->pdata[i]);
  json_builder_end_array (builder);
  json_builder_set_member_name (builder, "mounts");
  json_builder_begin_array (builder);
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const SandstepMount *mount = spec->mounts->pdata[i];
      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "host");
      json_builder_add_string_value (builder, mount->host_path);
      json_builder_set_member_name (builder, "target");
      json_builder_add_string_value (builder, mount->name);
      json_builder_end_object (builder);
    }
  json_builder_end_array (builder);
  if (spec->image != NULL)
    {
      json_builder_set_member_name (builder, "image");
      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "reference");
      json_builder_add_string_value (builder, spec->image);
      if (spec->image_digest != NULL)
        {
          json_builder_set_member_name (builder, "digest");
          json_builder_add_string_value (builder, spec->image_digest);
        }
      json_builder_end_object (builder);
      json_builder_set_member_name (builder, "root");
      json_builder_add_string_value (builder, spec->root_readonly ? "readonly" : "writable");
    }
  if (spec->retry_clean)
    {
      json_builder_set_member_name (builder, "retry");
      json_builder_add_string_value (builder, "clean");
    }
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

static gboolean
bad_member (GError **error, const char *member, const char *expected)
{
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                         "the spec's member '%s' is not %s", member, expected);
}

/* An optional member: absent is fine, present must have its type. */
#define OPTIONAL(object, name) (json_object_get_member ((object), (name)) != NULL)

static gboolean
string_map_from_json (JsonObject *object, const char *member, GHashTable *into, GError **error)
{
  JsonArray *names;
  JsonObject *map;

  if (!OPTIONAL (object, member))
    return TRUE;
  if (sandstep_member_array (object, member, &names))
    {
      /* A record without secret values (names only) keeps the names with empty values. */
      g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func (g_free);
      if (!sandstep_member_strings (names, list))
        return bad_member (error, member, "an array of names");
      for (guint i = 0; i < list->len; i++)
        g_hash_table_insert (into, g_strdup (list->pdata[i]), g_strdup (""));
      return TRUE;
    }
  if (!sandstep_member_object (object, member, &map))
    return bad_member (error, member, "an object");
  g_autoptr(GList) names_list = json_object_get_members (map);
  for (GList *l = names_list; l; l = l->next)
    {
      const char *value;
      if (!sandstep_member_string (map, l->data, &value))
        {
          g_autofree char *shown = g_strdup_printf ("%s.%s", member, (char *) l->data);
          return bad_member (error, shown, "a string");
        }
      g_hash_table_insert (into, g_strdup (l->data), g_strdup (value));
    }
  return TRUE;
}

static gboolean
limits_from_json (JsonObject *object, SandstepLimits *limits, GError **error)
{
  static const struct { const char *name; const char *shown; gsize offset; } members[] = {
    { "memory", "limits.memory", G_STRUCT_OFFSET (SandstepLimits, memory) },
    { "pids", "limits.pids", G_STRUCT_OFFSET (SandstepLimits, pids) },
    { "cpu_time", "limits.cpu_time", G_STRUCT_OFFSET (SandstepLimits, cpu_time_s) },
    { "disk", "limits.disk", G_STRUCT_OFFSET (SandstepLimits, disk) },
    { "io_weight", "limits.io_weight", G_STRUCT_OFFSET (SandstepLimits, io_weight) },
  };
  JsonObject *o;
  double cpus = 0;

  if (!OPTIONAL (object, "limits"))
    return TRUE;
  if (!sandstep_member_object (object, "limits", &o))
    return bad_member (error, "limits", "an object");
  for (gsize i = 0; i < G_N_ELEMENTS (members); i++)
    {
      gint64 value = 0;
      if (OPTIONAL (o, members[i].name) && (!sandstep_member_int (o, members[i].name, &value) || value < 0))
        return bad_member (error, members[i].shown, "a number, 0 or more");
      /* Every limit is 64 bits wide, signed or not, and at most G_MAXINT64. */
      *(gint64 *) G_STRUCT_MEMBER_P (limits, members[i].offset) = value;
    }
  /* A fraction of CPUs, kept in thousandths; sandstep_spec_check() judges its range. */
  if (OPTIONAL (o, "cpus") && (!sandstep_member_number (o, "cpus", &cpus) || !(cpus >= 0 && cpus <= G_MAXINT32)))
    return bad_member (error, "limits.cpus", "a number, 0 or more");
  limits->millicpus = (gint64) (cpus * 1000 + 0.5);
  return TRUE;
}

static gboolean
mounts_from_json (JsonObject *object, GPtrArray *into, GError **error)
{
  JsonArray *mounts;

  if (!OPTIONAL (object, "mounts"))
    return TRUE;
  if (!sandstep_member_array (object, "mounts", &mounts))
    return bad_member (error, "mounts", "an array");
  for (guint i = 0; i < json_array_get_length (mounts); i++)
    {
      JsonNode *node = json_array_get_element (mounts, i);
      const char *host, *target;
      SandstepMount *mount;
      if (!JSON_NODE_HOLDS_OBJECT (node) || !sandstep_member_string (json_node_get_object (node), "host", &host) ||
          !sandstep_member_string (json_node_get_object (node), "target", &target))
        return bad_member (error, "mounts", "an array of {\"host\", \"target\"} objects");
      mount = g_new0 (SandstepMount, 1);
      mount->host_path = g_strdup (host);
      mount->name = g_strdup (target);
      g_ptr_array_add (into, mount);
    }
  return TRUE;
}

SandstepSpec *
sandstep_spec_from_json (JsonNode *node, GError **error)
{
  g_autoptr(SandstepSpec) spec = sandstep_spec_new ();
  JsonObject *object;
  const char *network = "none";

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, "the spec is not a JSON object");
      return NULL;
    }
  object = json_node_get_object (node);
  if (OPTIONAL (object, "network") && !sandstep_member_string (object, "network", &network))
    return bad_member (error, "network", "a string"), NULL;
  if (!sandstep_network_from_string (network, &spec->network, error))
    return NULL;
  if (OPTIONAL (object, "lifetime") && (!sandstep_member_int (object, "lifetime", &spec->lifetime_s) ||
                                        spec->lifetime_s <= 0 || spec->lifetime_s > SANDSTEP_MAX_DURATION_S))
    return bad_member (error, "lifetime", "a number of seconds above 0, at most ten years"), NULL;
  if (!limits_from_json (object, &spec->limits, error) ||
      !string_map_from_json (object, "env", spec->env, error) ||
      !string_map_from_json (object, "secrets", spec->secrets, error) ||
      !mounts_from_json (object, spec->mounts, error))
    return NULL;
  for (int k = 0; k < 2; k++)
    {
      const char *member = k == 0 ? "allow" : "allow_cidr";
      JsonArray *array;
      if (!OPTIONAL (object, member))
        continue;
      if (!sandstep_member_array (object, member, &array) ||
          !sandstep_member_strings (array, k == 0 ? spec->allow_hosts : spec->allow_cidrs))
        return bad_member (error, member, "an array of strings"), NULL;
    }
  if (OPTIONAL (object, "image"))
    {
      JsonObject *image;
      const char *reference, *digest = NULL, *root = "writable";
      /* Without a digest from a client that leaves the pull to the server (sandstepd). */
      if (!sandstep_member_object (object, "image", &image) || !sandstep_member_string (image, "reference", &reference) ||
          (OPTIONAL (image, "digest") && !sandstep_member_string (image, "digest", &digest)))
        return bad_member (error, "image", "a {\"reference\", \"digest\"} object"), NULL;
      if (OPTIONAL (object, "root") && (!sandstep_member_string (object, "root", &root) ||
                                        (strcmp (root, "writable") != 0 && strcmp (root, "readonly") != 0)))
        return bad_member (error, "root", "'writable' or 'readonly'"), NULL;
      spec->image = g_strdup (reference);
      spec->image_digest = g_strdup (digest);
      spec->root_readonly = strcmp (root, "readonly") == 0;
    }
  if (OPTIONAL (object, "retry"))
    {
      const char *retry = NULL;
      if (!sandstep_member_string (object, "retry", &retry) || strcmp (retry, "clean") != 0)
        return bad_member (error, "retry", "'clean'"), NULL;
      spec->retry_clean = TRUE;
    }
  return g_steal_pointer (&spec);
}

/* A value a record stores must read back: JSON carries UTF-8 only. */
static gboolean
check_utf8 (GError **error, const char *what, const char *name, const char *value)
{
  g_autofree char *shown = NULL;

  if (g_utf8_validate (value, -1, NULL))
    return TRUE;
  shown = g_utf8_make_valid (value, -1);
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                         "%s '%s' is not valid UTF-8 (shown with U+FFFD where it is not); give it in UTF-8",
                         what, name != NULL ? name : shown);
}

static gboolean
check_map (GHashTable *map, const char *what, GError **error)
{
  GHashTableIter iter;
  gpointer name, value;

  g_hash_table_iter_init (&iter, map);
  while (g_hash_table_iter_next (&iter, &name, &value))
    if (!check_utf8 (error, what, NULL, name) || !check_utf8 (error, what, name, value))
      return FALSE;
  return TRUE;
}

gboolean
sandstep_parse_cpus (const char *text, gint64 *out_millicpus, GError **error)
{
  const char *p = text;
  gint64 whole = 0, milli = 0;
  int places = 0;

  /* Digits, then at most three after a '.': no sign, exponent, hex or locale's comma, so that what is capped
   * is exactly what was written. */
  for (; g_ascii_isdigit (*p); p++)
    whole = MIN (whole * 10 + (*p - '0'), G_MAXINT32);
  /* "010" could be read as octal elsewhere (issue 30, 27): a whole part starts with 0 only as "0". */
  if ((p == text && *p != '.') || (p - text > 1 && text[0] == '0'))
    goto bad;
  if (*p == '.')
    for (p++; g_ascii_isdigit (*p) && places < 3; p++, places++)
      milli = milli * 10 + (*p - '0');
  if (*p != '\0' || (p > text && p[-1] == '.' && p - 1 == text))
    goto bad;
  for (; places < 3; places++)
    milli *= 10;
  if (whole > SANDSTEP_MAX_MILLICPUS / 1000 || whole * 1000 + milli < SANDSTEP_MIN_MILLICPUS ||
      whole * 1000 + milli > SANDSTEP_MAX_MILLICPUS)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--cpus '%s' is outside what the kernel can cap; give 0.01 to %d", text,
                           SANDSTEP_MAX_MILLICPUS / 1000);
  *out_millicpus = whole * 1000 + milli;
  return TRUE;

bad:
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                         "--cpus '%s' is not a number of CPUs; write it as 0.5 or 2 (at most 3 decimal places)",
                         text);
}

gboolean
sandstep_spec_check (const SandstepSpec *spec, GError **error)
{
  if (spec->limits.pids > SANDSTEP_MAX_PIDS)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "pids '%" G_GINT64_FORMAT "' is more than the kernel can count (%d); give %d or fewer",
                           spec->limits.pids, SANDSTEP_MAX_PIDS, SANDSTEP_MAX_PIDS);
  if (spec->limits.memory != 0 && spec->limits.memory < SANDSTEP_MIN_MEMORY)
    {
      g_autofree char *given = sandstep_format_size_option (spec->limits.memory);
      return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                             "memory '%s' is too little for the sandbox's own init and a shell to start; "
                             "give 4M or more", given);
    }
  if (spec->limits.millicpus != 0 &&
      (spec->limits.millicpus < SANDSTEP_MIN_MILLICPUS || spec->limits.millicpus > SANDSTEP_MAX_MILLICPUS))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "cpus '%.3f' is outside what the kernel can cap; give 0.01 to %d",
                           spec->limits.millicpus / 1000.0, SANDSTEP_MAX_MILLICPUS / 1000);
  if (spec->limits.io_weight < 0 || spec->limits.io_weight > SANDSTEP_MAX_IO_WEIGHT)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "io-weight '%" G_GINT64_FORMAT "' is outside io.weight's range; give 1 to %d",
                           spec->limits.io_weight, SANDSTEP_MAX_IO_WEIGHT);
  if (spec->lifetime_s <= 0 || spec->lifetime_s > SANDSTEP_MAX_DURATION_S)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "lifetime '%" G_GINT64_FORMAT "' is not a number of seconds above 0, at most ten years",
                           spec->lifetime_s);
  if (!check_map (spec->env, "env", error) || !check_map (spec->secrets, "secret", error))
    return FALSE;
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const SandstepMount *mount = spec->mounts->pdata[i];
      if (!check_utf8 (error, "mount", NULL, mount->host_path))
        return FALSE;
      if (!mount_name_is_valid (mount->name))
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "mount '%s': '%s' is not a plain name under /data (letters, digits, '.', '-', "
                               "'_', at most %d of them)", mount->host_path, mount->name, NAME_MAX);
    }
  if (spec->image != NULL && (!check_utf8 (error, "image", NULL, spec->image) ||
                              (spec->image_digest != NULL &&
                               !check_utf8 (error, "image digest", NULL, spec->image_digest))))
    return FALSE;
  for (guint i = 0; i < spec->allow_hosts->len; i++)
    if (!check_utf8 (error, "allow", NULL, spec->allow_hosts->pdata[i]))
      return FALSE;
  for (guint i = 0; i < spec->allow_cidrs->len; i++)
    if (!check_utf8 (error, "allow-cidr", NULL, spec->allow_cidrs->pdata[i]))
      return FALSE;
  return TRUE;
}

/* ---- comparing two specs ---- */

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const char *const *) a, *(const char *const *) b);
}

static char *
size_or_default (guint64 n)
{
  g_autofree char *text = n == 0 ? NULL : sandstep_format_size_option (n);

  return n == 0 ? g_strdup ("the default") : g_strdup_printf ("'%s'", text);
}

static char *
count_or_default (gint64 n)
{
  return n == 0 ? g_strdup ("the default") : g_strdup_printf ("'%" G_GINT64_FORMAT "'", n);
}

static char *
cpus_or_none (gint64 millicpus)
{
  return millicpus == 0 ? g_strdup ("no cap") : g_strdup_printf ("'%g'", millicpus / 1000.0);
}

static void
add_difference (GString *out, const char *field, char *had, char *asked)
{
  g_string_append_printf (out, "%s%s is %s there, %s asked", out->len > 0 ? "; " : "", field, had, asked);
  g_free (had);
  g_free (asked);
}

/* "'A', 'B'" of sorted words, or "none". */
static char *
words_text (GPtrArray *words)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < words->len; i++)
    g_string_append_printf (out, "%s'%s'", i > 0 ? ", " : "", (const char *) words->pdata[i]);
  if (words->len == 0)
    g_string_append (out, "none");
  return g_string_free (out, FALSE);
}

static GPtrArray *
sorted_copy (GPtrArray *words)
{
  GPtrArray *copy = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < words->len; i++)
    g_ptr_array_add (copy, g_strdup (words->pdata[i]));
  g_ptr_array_sort (copy, compare_strings);
  return copy;
}

static gboolean
same_words (GPtrArray *a, GPtrArray *b)
{
  if (a->len != b->len)
    return FALSE;
  for (guint i = 0; i < a->len; i++)
    if (g_strcmp0 (a->pdata[i], b->pdata[i]) != 0)
      return FALSE;
  return TRUE;
}

static void
compare_words (GString *out, const char *field, GPtrArray *had, GPtrArray *asked)
{
  g_autoptr(GPtrArray) a = sorted_copy (had);
  g_autoptr(GPtrArray) b = sorted_copy (asked);

  if (!same_words (a, b))
    add_difference (out, field, words_text (a), words_text (b));
}

static GPtrArray *
map_entries (GHashTable *map, gboolean with_values)
{
  GPtrArray *entries = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  gpointer key, value;

  g_hash_table_iter_init (&iter, map);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_ptr_array_add (entries, with_values ? g_strconcat (key, "=", value, NULL) : g_strdup (key));
  return entries;
}

static GPtrArray *
mount_entries (GPtrArray *mounts)
{
  GPtrArray *entries = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < mounts->len; i++)
    {
      const SandstepMount *mount = mounts->pdata[i];
      g_ptr_array_add (entries, g_strconcat (mount->host_path, ":/data/", mount->name, NULL));
    }
  return entries;
}

char *
sandstep_spec_differences (const SandstepSpec *had, const SandstepSpec *asked)
{
  GString *out = g_string_new (NULL);

  if (had->network != asked->network)
    add_difference (out, "network", g_strdup_printf ("'%s'", sandstep_network_to_string (had->network)),
                    g_strdup_printf ("'%s'", sandstep_network_to_string (asked->network)));
  compare_words (out, "allow", had->allow_hosts, asked->allow_hosts);
  compare_words (out, "allow-cidr", had->allow_cidrs, asked->allow_cidrs);
  if (had->lifetime_s != asked->lifetime_s)
    add_difference (out, "lifetime", g_strdup_printf ("'%" G_GINT64_FORMAT "s'", had->lifetime_s),
                    g_strdup_printf ("'%" G_GINT64_FORMAT "s'", asked->lifetime_s));
  if (had->limits.memory != asked->limits.memory)
    add_difference (out, "memory", size_or_default (had->limits.memory), size_or_default (asked->limits.memory));
  if (had->limits.pids != asked->limits.pids)
    add_difference (out, "pids", count_or_default (had->limits.pids), count_or_default (asked->limits.pids));
  if (had->limits.cpu_time_s != asked->limits.cpu_time_s)
    add_difference (out, "cpu-time", count_or_default (had->limits.cpu_time_s),
                    count_or_default (asked->limits.cpu_time_s));
  if (had->limits.disk != asked->limits.disk)
    add_difference (out, "disk", size_or_default (had->limits.disk), size_or_default (asked->limits.disk));
  if (had->limits.millicpus != asked->limits.millicpus)
    add_difference (out, "cpus", cpus_or_none (had->limits.millicpus), cpus_or_none (asked->limits.millicpus));
  if (had->limits.io_weight != asked->limits.io_weight)
    add_difference (out, "io-weight", count_or_default (had->limits.io_weight),
                    count_or_default (asked->limits.io_weight));
  {
    g_autoptr(GPtrArray) a = map_entries (had->env, TRUE);
    g_autoptr(GPtrArray) b = map_entries (asked->env, TRUE);
    compare_words (out, "env", a, b);
  }
  {
    g_autoptr(GPtrArray) a = map_entries (had->secrets, FALSE);
    g_autoptr(GPtrArray) b = map_entries (asked->secrets, FALSE);
    compare_words (out, "secret", a, b);
  }
  {
    g_autoptr(GPtrArray) a = mount_entries (had->mounts);
    g_autoptr(GPtrArray) b = mount_entries (asked->mounts);
    compare_words (out, "mount", a, b);
  }
  if (g_strcmp0 (had->image_digest, asked->image_digest) != 0 || (had->image == NULL) != (asked->image == NULL))
    add_difference (out, "image", g_strdup_printf ("'%s'", had->image != NULL ? had->image : "none (the host's /usr)"),
                    g_strdup_printf ("'%s'", asked->image != NULL ? asked->image : "none (the host's /usr)"));
  if (had->root_readonly != asked->root_readonly)
    add_difference (out, "root", g_strdup (had->root_readonly ? "'readonly'" : "'writable'"),
                    g_strdup (asked->root_readonly ? "'readonly'" : "'writable'"));
  if (had->retry_clean != asked->retry_clean)
    add_difference (out, "retry", g_strdup (had->retry_clean ? "'clean'" : "none"),
                    g_strdup (asked->retry_clean ? "'clean'" : "none"));
  if (out->len == 0)
    {
      g_string_free (out, TRUE);
      return NULL;
    }
  return g_string_free (out, FALSE);
}

SandstepSpec *
sandstep_spec_copy (const SandstepSpec *spec)
{
  g_autoptr(JsonNode) node = sandstep_spec_to_json (spec, TRUE);

  return sandstep_spec_from_json (node, NULL);
}
