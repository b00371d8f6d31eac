/* sandstep-output-private.h: what the text rules' files share.
 *
 * sandstep-mask.c masks secrets; sandstep-cut.c keeps the head and tail of
 * a long text, and captures a stream in bounded memory, masking it as the
 * bytes come (with sandstep_mask_scan()); sandstep-texts.c words what the
 * model reads.
 */
#pragma once

#include "sandstep-output.h"

G_BEGIN_DECLS

#define SANDSTEP_MASK "***"

struct _SandstepMasker {
  GPtrArray *secrets;     /* char *, longest first, no duplicates, none empty */
  gsize max_len;
  gboolean first[256];    /* bytes a secret starts with */
  int only_first;         /* the one byte every secret starts with, or -1 */
};

/* Where masked bytes go. */
typedef void (*EmitFunc) (gpointer sink, const char *data, gsize len);

/* Masks @data into @emit and returns how many bytes it consumed: all of them
 * when @final, else those before the first position where a secret could
 * still start and end past @len (they wait for more bytes).  At each position
 * the longest matching secret wins, so streaming in any chunks masks exactly
 * as one pass over the whole text does. */
gsize sandstep_mask_scan (const SandstepMasker *masker, const char *data, gsize len, gboolean final, EmitFunc emit,
                          gpointer sink);

G_END_DECLS
