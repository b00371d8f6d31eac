/* fuzz-jail-image.c: a plan's jail image (hooks/jail/sandstep-jail-image.c), checked before anyone reads it.
 *
 * The supervisor and the static front map a kept plan and read its image in
 * place once sandstep_jail_image_check() accepts it: every record, string
 * and slot it accepts must lie inside the bytes, so this walks all of them as
 * the jail's builder would.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "sandstep-jail-image.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  return 0;
}

/* Reads every byte of the string at @offset, as the builder will. */
static size_t
touch_string (const SandstepJailImage *image, uint32_t offset)
{
  const char *s = sandstep_jail_image_at (image, offset);

  return s != NULL ? strlen (s) : 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* 8-aligned, as an mmap is, and exactly @size long, so a read past the end leaves the allocation. */
  void *copy = aligned_alloc (8, size > 0 ? (size + 7) & ~(size_t) 7 : 8);
  const SandstepJailImage *image;
  volatile size_t sum = 0;

  if (size > 0)
    memcpy (copy, data, size);
  image = sandstep_jail_image_check (copy, size, SANDSTEP_PLAN_FORMAT);
  if (image != NULL)
    {
      if (image->size > size || image->n_slots > SANDSTEP_JAIL_MAX_SLOTS || image->n_rlimits > SANDSTEP_JAIL_MAX_RLIMITS)
        abort ();
      for (uint32_t i = 0; i < image->n_ops; i++)
        {
          const SandstepJailImageOp *op = sandstep_jail_image_op (image, i);
          if (op->slot >= (int32_t) image->n_slots)
            abort ();
          sum += touch_string (image, op->path) + touch_string (image, op->source) + touch_string (image, op->what);
          if (op->data != 0 && op->data_len > 0)
            sum += ((const unsigned char *) sandstep_jail_image_at (image, op->data))[op->data_len - 1];
        }
      for (uint32_t i = 0; i < image->n_trees; i++)
        {
          const SandstepJailImageTree *tree = sandstep_jail_image_tree (image, i);
          if (tree->slot < 0 || tree->slot >= (int32_t) image->n_slots)
            abort ();
          sum += touch_string (image, tree->host_path);
        }
      for (uint32_t i = 0; i < image->n_rlimits; i++)
        sum += sandstep_jail_image_rlimit (image, i)->soft;
      if (image->n_filters > 0)
        sum += ((const unsigned char *) image + image->filters)[image->n_filters * 8 - 1];
    }
  free (copy);
  (void) sum;
  return 0;
}
