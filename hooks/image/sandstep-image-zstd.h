/* sandstep-image-zstd.h: zstd layers (tar+zstd), read through a GConverter like gzip's GZlibDecompressor.
 *
 * Built where Debian's libzstd is (hooks/image/meson.build); elsewhere
 * sandstep_image_zstd_decompressor_new() returns NULL and zstd layers are
 * refused as an unsupported media type.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* A converter that decompresses zstd (one or more frames), or NULL without libzstd. */
GConverter *sandstep_image_zstd_decompressor_new (void);

G_END_DECLS
