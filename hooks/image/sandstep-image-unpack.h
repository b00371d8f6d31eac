/* sandstep-image-unpack.h: a layer (a tar: plain, gzip or zstd) unpacked into a directory, as hostile input.
 *
 * Every entry is created by a walk from the layer's directory fd, one
 * component at a time with O_NOFOLLOW, so nothing is written outside it:
 * names with ".." or a leading "/" are refused, a symlink (or anything not a
 * directory) in the middle of a name is refused rather than followed, and a
 * hard link may only name a file this layer already holds.  Device nodes
 * are skipped; setuid and setgid bits are dropped.  Owners are kept only
 * when we run as root (the image's own ids, as umoci does); otherwise every
 * file is ours.  Directories keep u+rwx so the store can remove them.
 *
 * OCI whiteouts become what overlayfs reads in the sandbox's user namespace
 * (kernel 5.11+, mounted with "userxattr", the next piece):
 *   .wh.NAME      a character device 0/0 named NAME: the kernel lets anyone
 *                 make that one device (since 5.8), and overlayfs reads it as
 *                 a whiteout in every mode;
 *   .wh..wh..opq  the xattr user.overlay.opaque="y" on its directory: in a
 *                 user namespace overlayfs reads user.overlay.* instead of
 *                 trusted.overlay.*, which only the host's root can set.  A
 *                 file system without user xattrs (tmpfs before 6.6) refuses
 *                 the layer, saying so.
 *
 * Size: each entry is charged its data and at least 4 KiB (an inode and a
 * block), against @budget; the tar stream itself (after gzip) is bounded the
 * same, so a compression bomb stops at the limit too.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The charge of one entry of @size bytes (sandstep-image-unpack.h, "Size"). */
#define SANDSTEP_IMAGE_ENTRY_MIN_CHARGE 4096

/* Takes @cost from *@budget and returns TRUE, or returns FALSE (leaving it) when it has less left; atomic, so
 * that the layers of an image unpacked at once share one budget. */
gboolean sandstep_image_budget_take (guint64 *budget, guint64 cost);

/* Unpacks the tar read from @input (already decompressed) into @dir_fd.
 * *@budget is what the layer may still take and is lowered by what it took
 * (sandstep_image_budget_take(): other layers may take from it at once);
 * *@out_size (may be NULL) gets the bytes written. */
gboolean sandstep_image_unpack_tar (GInputStream *input, int dir_fd, guint64 *budget, guint64 *out_size,
                                    GError **error);

/* The same from the layer blob open on @blob_fd, of @media_type (plain, gzip or zstd tar). */
gboolean sandstep_image_unpack_layer (int blob_fd, const char *media_type, int dir_fd, guint64 *budget,
                                      guint64 *out_size, GError **error);

/* TRUE for a layer media type sandstep_image_unpack_layer() reads. */
gboolean sandstep_image_layer_type_is_known (const char *media_type);

/* One tar header block (512 bytes) read, ustar and GNU base-256 numbers
 * included: the pure part of the unpacker, fuzzed as it is (tests/fuzz). */
typedef struct {
  char type;
  char *name;           /* ustar's prefix/name, or the name field */
  char *link;
  guint64 size, mode, uid, gid, mtime;
} SandstepImageTarHeader;

void sandstep_image_tar_header_clear (SandstepImageTarHeader *header);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (SandstepImageTarHeader, sandstep_image_tar_header_clear)

/* @block (512 bytes) into @out, its checksum and numbers checked; @entry (1-based) names it in errors. */
gboolean sandstep_image_tar_header_parse (const guchar *block, guint64 entry, SandstepImageTarHeader *out,
                                          GError **error);

/* A pax extended header's records ("LEN key=value\n" each), @len bytes of @data (NUL after them): path and
 * linkpath replace *@path and *@linkpath; size, uid and gid are set only when well-formed. */
gboolean sandstep_image_tar_parse_pax (const char *data, gsize len, char **path, char **linkpath, guint64 *size,
                                       gboolean *has_size, guint64 *uid, guint64 *gid, GError **error);

G_END_DECLS
