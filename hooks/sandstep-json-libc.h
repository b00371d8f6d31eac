/* sandstep-json-libc.h: compact JSON that sandstep wrote, read with libc alone.
 *
 * Enough for the static front's remote run (sandstep-front-remote.c), whose
 * answer lines are compact objects written by json-glib
 * (hooks/sandstep-wire.c), and for a claim file's holder
 * (sandstep-claim-libc.h), which the static supervisor reads: members are
 * found by name, their values read in place.  Anything this does not read
 * is no answer it acts on.
 */
#pragma once

#include <stddef.h>

/* @p past white space. */
const char *sandstep_json_libc_space (const char *p);
/* The end of the string at @p ('"'), or of any value; NULL when malformed. */
const char *sandstep_json_libc_skip_string (const char *p);
const char *sandstep_json_libc_skip_value (const char *p);
/* The value of member @key of the object at @p (NULL: none, or no object). */
const char *sandstep_json_libc_member (const char *p, const char *key);
/* The number at @p, else @fallback; whether @p is true. */
double sandstep_json_libc_number (const char *p, double fallback);
int sandstep_json_libc_boolean (const char *p);
/* The string at @p, unescaped, into @out (cut to @size); 0 when it is no string. */
int sandstep_json_libc_string (const char *p, char *out, size_t size);
/* Appends @text as a JSON string at @out + *@len; 0 when it does not fit or
 * holds a byte over 0x7f (whose UTF-8 this program does not judge). */
int sandstep_json_libc_append_string (char *out, size_t size, size_t *len, const char *text);
/* Standard base64 @in (@len bytes) into @out (at least @len bytes); returns the bytes decoded. */
size_t sandstep_json_libc_base64_decode (const char *in, size_t len, unsigned char *out);
