/* sandstep-handle-libc.c: the local handle grammar with libc alone (see the header). */
#include "sandstep-handle-libc.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What g_strstrip() strips (g_ascii_isspace()): not '\v'. */
static int
is_space (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

int
sandstep_handle_libc_is_local (const char *text)
{
  if (text == NULL || strncmp (text, SANDSTEP_HANDLE_PREFIX, strlen (SANDSTEP_HANDLE_PREFIX)) != 0)
    return 0;
  text += strlen (SANDSTEP_HANDLE_PREFIX);
  for (int i = 0; i < SANDSTEP_HANDLE_HEX_DIGITS; i++)
    if (!((text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'f')))
      return 0;
  return text[SANDSTEP_HANDLE_HEX_DIGITS] == '\0';
}

int
sandstep_handle_libc_read (const char *given, char *out, size_t size)
{
  char buf[SANDSTEP_HANDLE_FILE_MAX + 1];
  const char *start = given;
  size_t len;

  if (given[0] == '@')
    {
      /* Never waits: a FIFO or a device is no handle file (the helper says so). */
      int fd = open (given + 1, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
      struct stat st;
      ssize_t n;
      if (fd < 0)
        return 0;
      if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_size > SANDSTEP_HANDLE_FILE_MAX)
        {
          close (fd);
          return 0;
        }
      n = read (fd, buf, sizeof buf);
      close (fd);
      if (n <= 0 || n > SANDSTEP_HANDLE_FILE_MAX || memchr (buf, '\0', n) != NULL)
        return 0;
      buf[n] = '\0';
      start = buf;
    }
  while (is_space (*start))
    start++;
  len = strlen (start);
  while (len > 0 && is_space (start[len - 1]))
    len--;
  if (len >= size)
    return 0;
  memcpy (out, start, len);
  out[len] = '\0';
  return 1;
}

int
sandstep_handle_libc_resolve (const char *given, char out[SANDSTEP_HANDLE_LOCAL_LEN + 1])
{
  char text[SANDSTEP_HANDLE_LOCAL_LEN + 1];

  if (!sandstep_handle_libc_read (given, text, sizeof text))
    return 0;
  memcpy (out, text, sizeof text);
  return sandstep_handle_libc_is_local (out);
}

int
sandstep_backend_name_is_local (const char *name)
{
  return name == NULL || name[0] == '\0' || strcmp (name, "local") == 0;
}
