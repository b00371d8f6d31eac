/* sandstep-image-zstd.c: zstd decompression as a GConverter (sandstep-image-zstd.h). */
#include "sandstep-image-zstd.h"

#if SANDSTEP_HAVE_ZSTD

#include <zstd.h>

#define SANDSTEP_TYPE_ZSTD_DECOMPRESSOR (sandstep_zstd_decompressor_get_type ())
G_DECLARE_FINAL_TYPE (SandstepZstdDecompressor, sandstep_zstd_decompressor, SANDSTEP, ZSTD_DECOMPRESSOR, GObject)

struct _SandstepZstdDecompressor {
  GObject parent;
  ZSTD_DStream *stream;
  gboolean in_frame;    /* a frame has begun and not ended: input ending now is a truncated layer */
};

static void sandstep_zstd_converter_init (GConverterIface *iface);

G_DEFINE_TYPE_WITH_CODE (SandstepZstdDecompressor, sandstep_zstd_decompressor, G_TYPE_OBJECT,
                         G_IMPLEMENT_INTERFACE (G_TYPE_CONVERTER, sandstep_zstd_converter_init))

static void
sandstep_zstd_decompressor_finalize (GObject *object)
{
  SandstepZstdDecompressor *self = SANDSTEP_ZSTD_DECOMPRESSOR (object);

  ZSTD_freeDStream (self->stream);
  G_OBJECT_CLASS (sandstep_zstd_decompressor_parent_class)->finalize (object);
}

static void
sandstep_zstd_decompressor_class_init (SandstepZstdDecompressorClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = sandstep_zstd_decompressor_finalize;
}

static void
sandstep_zstd_decompressor_init (SandstepZstdDecompressor *self)
{
  self->stream = ZSTD_createDStream ();
  ZSTD_initDStream (self->stream);
}

static GConverterResult
sandstep_zstd_convert (GConverter *converter, const void *inbuf, gsize inbuf_size, void *outbuf, gsize outbuf_size,
                       GConverterFlags flags, gsize *bytes_read, gsize *bytes_written, GError **error)
{
  SandstepZstdDecompressor *self = SANDSTEP_ZSTD_DECOMPRESSOR (converter);
  ZSTD_inBuffer in = { inbuf, inbuf_size, 0 };
  ZSTD_outBuffer out = { outbuf, outbuf_size, 0 };
  size_t ret;

  if (inbuf_size == 0 && (flags & G_CONVERTER_INPUT_AT_END))
    {
      if (self->in_frame)
        {
          g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT, "the zstd data ends in a frame");
          return G_CONVERTER_ERROR;
        }
      *bytes_read = *bytes_written = 0;
      return G_CONVERTER_FINISHED;
    }
  ret = ZSTD_decompressStream (self->stream, &out, &in);
  if (ZSTD_isError (ret))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "not valid zstd: %s", ZSTD_getErrorName (ret));
      return G_CONVERTER_ERROR;
    }
  self->in_frame = ret != 0;
  *bytes_read = in.pos;
  *bytes_written = out.pos;
  if (in.pos == 0 && out.pos == 0)
    {
      /* Neither consumed nor produced: more room or more input is needed. */
      if (outbuf_size < ZSTD_DStreamOutSize ())
        g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NO_SPACE, "zstd needs a larger output buffer");
      else
        g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT, "zstd needs more input");
      return G_CONVERTER_ERROR;
    }
  if (!self->in_frame && in.pos == inbuf_size && (flags & G_CONVERTER_INPUT_AT_END))
    return G_CONVERTER_FINISHED;
  return G_CONVERTER_CONVERTED;
}

static void
sandstep_zstd_reset (GConverter *converter)
{
  SandstepZstdDecompressor *self = SANDSTEP_ZSTD_DECOMPRESSOR (converter);

  ZSTD_initDStream (self->stream);
  self->in_frame = FALSE;
}

static void
sandstep_zstd_converter_init (GConverterIface *iface)
{
  iface->convert = sandstep_zstd_convert;
  iface->reset = sandstep_zstd_reset;
}

GConverter *
sandstep_image_zstd_decompressor_new (void)
{
  return G_CONVERTER (g_object_new (SANDSTEP_TYPE_ZSTD_DECOMPRESSOR, NULL));
}

#else

GConverter *
sandstep_image_zstd_decompressor_new (void)
{
  return NULL;
}

#endif
