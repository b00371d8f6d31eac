/* test-jail-image.c: the check a jail's image passes before anything builds a jail from it.
 *
 * The front starts a sandbox's first jail on the image at the head of the
 * kept plan, as root where sandstep runs as root, before the supervisor has
 * looked at the plan: a damaged image must be refused whole, not half used.
 */
#include <glib.h>
#include <linux/filter.h>
#include <string.h>

#include "sandstep-jail-image.h"
#include "sandstep-supervisor-start.h"

/* A small image: a tmpfs root, an open into slot 0, a bind from it, one tree in slot 1 attached; its records
 * at fixed places, so that each case can damage one field. */
typedef struct {
  SandstepJailImage header;
  SandstepJailImageOp ops[4];
  SandstepJailImageTree trees[1];
  struct sock_filter filters[1];
  char strings[256];
} Image;

G_STATIC_ASSERT (sizeof (SandstepJailImage) % 8 == 0);

static guint32
put (Image *image, guint32 *used, const char *text, gsize len)
{
  guint32 offset = G_STRUCT_OFFSET (Image, strings) + *used;

  g_assert_cmpuint (*used + len, <=, sizeof image->strings);
  memcpy (image->strings + *used, text, len);
  *used += len;
  return offset;
}

static guint32
put_string (Image *image, guint32 *used, const char *text)
{
  return put (image, used, text, strlen (text) + 1);
}

static Image *
good_image (void)
{
  Image *image = g_new0 (Image, 1);
  guint32 used = 0;

  image->header = (SandstepJailImage) {
    .magic = SANDSTEP_JAIL_IMAGE_MAGIC, .format = SANDSTEP_PLAN_FORMAT, .size = sizeof *image,
    .outer_uid = 1000, .outer_gid = 1000, .n_slots = 2,
    .n_ops = 4, .ops = G_STRUCT_OFFSET (Image, ops),
    .n_trees = 1, .trees = G_STRUCT_OFFSET (Image, trees),
    .n_filters = 1, .filters = G_STRUCT_OFFSET (Image, filters),
  };
  image->ops[0] = (SandstepJailImageOp) { .kind = JAIL_OP_TMPFS, .slot = -1,
                                          .path = put_string (image, &used, "/tmp"),
                                          .what = put_string (image, &used, "mount the root") };
  image->ops[0].data = put (image, &used, "size=8m", 8);
  image->ops[0].data_len = 8;
  image->ops[1] = (SandstepJailImageOp) { .kind = JAIL_OP_OPEN, .slot = 0,
                                          .path = put_string (image, &used, "/usr"),
                                          .what = put_string (image, &used, "open /usr") };
  image->ops[2] = (SandstepJailImageOp) { .kind = JAIL_OP_BIND, .slot = 0,
                                          .path = put_string (image, &used, "/tmp/usr"),
                                          .what = put_string (image, &used, "bind /usr") };
  image->ops[3] = (SandstepJailImageOp) { .kind = JAIL_OP_ATTACH, .slot = 1,
                                          .path = put_string (image, &used, "/tmp/workspace"),
                                          .what = put_string (image, &used, "attach the tree") };
  image->trees[0] = (SandstepJailImageTree) { .host_path = put_string (image, &used, "/srv/tree"), .slot = 1 };
  image->filters[0] = (struct sock_filter) BPF_STMT (BPF_RET | BPF_K, 0x7fff0000);
  return image;
}

static gboolean
accepted (const Image *image)
{
  return sandstep_jail_image_check (image, sizeof *image, SANDSTEP_PLAN_FORMAT) == &image->header;
}

static void
test_good (void)
{
  g_autofree Image *image = good_image ();

  g_test_summary ("an image whose records and strings all lie inside it, with every slot filled before it is used, "
                  "is taken as it is, in place");
  g_assert_true (accepted (image));
  /* Shorter than the header says: refused. */
  g_assert_null (sandstep_jail_image_check (image, sizeof *image - 1, SANDSTEP_PLAN_FORMAT));
  /* An image's root: overlayfs with its options, as a tmpfs has them. */
  image->ops[0].kind = JAIL_OP_OVERLAY;
  g_assert_true (accepted (image));
  image->ops[0].kind = JAIL_OP_TMPFS;
  /* A layered tree's root as init's working directory: an opened slot. */
  image->header.cwd_slot = 1;
  g_assert_true (accepted (image));
  image->header.cwd_slot = 0;
  /* Of another build's format: refused. */
  g_assert_null (sandstep_jail_image_check (image, sizeof *image, SANDSTEP_PLAN_FORMAT + 1));
}

typedef void (*Damage) (Image *image);

static void no_magic (Image *image) { image->header.magic ^= 1; }
static void too_big (Image *image) { image->header.size = sizeof *image + 8; }
static void ops_unaligned (Image *image) { image->header.ops += 4; }
static void ops_past_end (Image *image) { image->header.n_ops = 1000; }
static void too_many_trees (Image *image) { image->header.n_trees = 65; }
static void trees_beyond_slots (Image *image) { image->header.n_slots = 0; }
static void no_filter (Image *image) { image->header.n_filters = 0; }
static void path_outside (Image *image) { image->ops[2].path = sizeof *image + 100; }
static void path_unterminated (Image *image) { image->ops[3].path = sizeof *image - 1; image->strings[255] = 'x'; }
static void tmpfs_unterminated (Image *image) { image->ops[0].data_len = 7; }
static void data_past_end (Image *image) { image->ops[0].data_len = 100000; }
static void unknown_kind (Image *image) { image->ops[2].kind = JAIL_OP_N_KINDS; }
static void cwd_slot_out_of_range (Image *image) { image->header.cwd_slot = image->header.n_slots + 1; }
static void cwd_slot_never_filled (Image *image) { image->header.n_slots = 3; image->header.cwd_slot = 3; }
static void overlay_unterminated (Image *image) { image->ops[0].kind = JAIL_OP_OVERLAY; image->ops[0].data_len = 7; }
static void overlay_without_options (Image *image) { image->ops[0].kind = JAIL_OP_OVERLAY; image->ops[0].data_len = 0; }
static void slot_out_of_range (Image *image) { image->ops[2].slot = 2; }
static void bind_before_open (Image *image) { SandstepJailImageOp open = image->ops[1]; image->ops[1] = image->ops[2]; image->ops[2] = open; }
static void slot_opened_twice (Image *image) { image->ops[2] = image->ops[1]; }
static void tree_slot_opened (Image *image) { image->ops[1].slot = 1; }
static void attach_without_slot (Image *image) { image->ops[3].slot = -1; }
static void bind_of_nothing (Image *image) { image->ops[2].slot = -1; image->ops[2].source = 0; }

static void
test_damaged (void)
{
  static const struct { const char *what; Damage damage; } cases[] = {
    { "another magic", no_magic },
    { "a size past the data", too_big },
    { "its steps off their alignment", ops_unaligned },
    { "more steps than fit", ops_past_end },
    { "more trees than slots can hold", too_many_trees },
    { "trees beyond its slots", trees_beyond_slots },
    { "no seccomp program", no_filter },
    { "a path outside the image", path_outside },
    { "a path with no end", path_unterminated },
    { "tmpfs options with no end", tmpfs_unterminated },
    { "overlayfs options with no end", overlay_unterminated },
    { "an overlayfs with no options", overlay_without_options },
    { "content past the end", data_past_end },
    { "a step of no known kind", unknown_kind },
    { "a working directory's slot out of range", cwd_slot_out_of_range },
    { "a working directory's slot never filled", cwd_slot_never_filled },
    { "a slot out of range", slot_out_of_range },
    { "a bind from a slot not yet filled", bind_before_open },
    { "a slot opened twice", slot_opened_twice },
    { "a tree's slot opened as well", tree_slot_opened },
    { "an attach without a slot", attach_without_slot },
    { "a bind of nothing", bind_of_nothing },
  };

  g_test_summary ("an image with any record, string or slot out of order is refused whole: the front then starts "
                  "no jail, and the supervisor refuses the plan, which the helper compiles again");
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree Image *image = good_image ();
      cases[i].damage (image);
      if (accepted (image))
        g_error ("an image with %s was taken", cases[i].what);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/jail-image/good", test_good);
  g_test_add_func ("/jail-image/damaged", test_damaged);
  return g_test_run ();
}
