/* sandstep-jail-image.c: checking a jail's image before it is used; see the header. */
#include "sandstep-jail-image.h"

#include <linux/filter.h>
#include <string.h>

/* @count records of @size at @offset, 8-aligned, inside the image and past its header. */
static int
array_inside (const SandstepJailImage *image, uint32_t offset, uint32_t count, size_t size)
{
  if (count == 0)
    return 1;
  return offset >= sizeof *image && offset % 8 == 0 && offset <= image->size &&
         count <= (image->size - offset) / size;
}

/* A NUL-terminated string inside the image (@optional: or none). */
static int
string_inside (const SandstepJailImage *image, uint32_t offset, int optional)
{
  if (offset == 0)
    return optional;
  return offset >= sizeof *image && offset < image->size &&
         memchr ((const char *) image + offset, '\0', image->size - offset) != NULL;
}

static int
bytes_inside (const SandstepJailImage *image, uint32_t offset, uint32_t len)
{
  if (len == 0)
    return 1;
  return offset >= sizeof *image && offset <= image->size && len <= image->size - offset;
}

const SandstepJailImage *
sandstep_jail_image_check (const void *data, size_t size, uint32_t format)
{
  const SandstepJailImage *image = data;
  char filled[SANDSTEP_JAIL_MAX_SLOTS] = { 0 };

  if (size < sizeof *image || ((uintptr_t) data) % 8 != 0 || image->magic != SANDSTEP_JAIL_IMAGE_MAGIC ||
      image->format != format || image->size < sizeof *image || image->size > size ||
      image->n_slots > SANDSTEP_JAIL_MAX_SLOTS || image->n_trees > image->n_slots ||
      image->n_rlimits > SANDSTEP_JAIL_MAX_RLIMITS ||
      image->n_filters == 0 || image->n_filters > BPF_MAXINSNS ||
      !array_inside (image, image->ops, image->n_ops, sizeof (SandstepJailImageOp)) ||
      !array_inside (image, image->trees, image->n_trees, sizeof (SandstepJailImageTree)) ||
      !array_inside (image, image->rlimits, image->n_rlimits, sizeof (SandstepJailImageRlimit)) ||
      !array_inside (image, image->filters, image->n_filters, sizeof (struct sock_filter)))
    return NULL;
  /* Each slot filled once, before a step uses it: by a tree (at the go message) or by an earlier open. */
  for (uint32_t i = 0; i < image->n_trees; i++)
    {
      const SandstepJailImageTree *tree = sandstep_jail_image_tree (image, i);

      if (tree->slot < 0 || tree->slot >= (int32_t) image->n_slots || filled[tree->slot] ||
          !string_inside (image, tree->host_path, 0))
        return NULL;
      filled[tree->slot] = 1;
    }
  for (uint32_t i = 0; i < image->n_ops; i++)
    {
      const SandstepJailImageOp *op = sandstep_jail_image_op (image, i);
      int needs_slot = op->kind == JAIL_OP_OPEN || op->kind == JAIL_OP_ATTACH;

      if (op->kind >= JAIL_OP_N_KINDS || op->slot < -1 || op->slot >= (int32_t) image->n_slots ||
          (needs_slot && op->slot < 0) || !string_inside (image, op->path, 0) ||
          !string_inside (image, op->source, 1) || !string_inside (image, op->what, 0) ||
          !bytes_inside (image, op->data, op->data_len) ||
          ((op->kind == JAIL_OP_SYMLINK || (op->kind == JAIL_OP_BIND && op->slot < 0)) && op->source == 0) ||
          ((op->kind == JAIL_OP_TMPFS || op->kind == JAIL_OP_OVERLAY) &&
           (op->data_len == 0 || ((const char *) image)[op->data + op->data_len - 1])))
        return NULL;
      if (op->kind == JAIL_OP_OPEN)
        {
          if (filled[op->slot])
            return NULL;
          filled[op->slot] = 1;
        }
      else if (op->slot >= 0 && !filled[op->slot])
        return NULL;
    }
  if (image->cwd_slot > image->n_slots || (image->cwd_slot > 0 && !filled[image->cwd_slot - 1]))
    return NULL;
  return image;
}
