/* sandstep-members.h: typed members of a JSON object read from outside.
 *
 * json-glib's accessors log a critical and guess when a member has another
 * type than asked; what a file or a peer sent may have any type.  Each of
 * these returns FALSE, leaving *out alone, when @name is absent or is not of
 * its type, so the caller says which member was wrong.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

gboolean sandstep_member_string (JsonObject *object, const char *name, const char **out);
gboolean sandstep_member_int (JsonObject *object, const char *name, gint64 *out);
/* An integer or a floating-point number, as a double. */
gboolean sandstep_member_number (JsonObject *object, const char *name, double *out);
gboolean sandstep_member_bool (JsonObject *object, const char *name, gboolean *out);
gboolean sandstep_member_object (JsonObject *object, const char *name, JsonObject **out);
gboolean sandstep_member_array (JsonObject *object, const char *name, JsonArray **out);

/* Each element of @array a string: TRUE and the strings in @into (copied), or FALSE. */
gboolean sandstep_member_strings (JsonArray *array, GPtrArray *into);

G_END_DECLS
