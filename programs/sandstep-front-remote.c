/* sandstep-front-remote.c: the static front's `run` on a sandstepd (see the header).
 *
 * Loading GLib, json-glib and libsoup costs a step several milliseconds
 * before it sends a byte (docs/performance.md), more than the request
 * itself on loopback.  So the plainest remote run, the one make renders
 * (http://, an address, the server it was told to use, an owner and a
 * holder given, no stdin to send), is sent from here: one request, its
 * answer's JSON lines read with the few rules they follow.  The token rules
 * are the core's, narrowed: the token goes only to the server --backend (or
 * $SANDSTEP_BACKEND) names, plain http:// only to loopback unless
 * SANDSTEP_ALLOW_HTTP=1; a handle naming any other server (one listed in a
 * servers file included) goes to the core, which judges it.  A refusal
 * before the command starts goes to the core as well, so its messages,
 * waits and exit statuses are the core's, word for word.
 */
#include "sandstep-front-remote.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>

#include "sandstep-exit.h"
#include "sandstep-json-libc.h"
#include "sandstep-handle-libc.h"
#include "sandstep-token-libc.h"
#include "sandstep-limit-defaults.h"
#include "sandstep-run-report.h"
#include "sandstep-write-libc.h"

/* As the core's client: a quiet server sends a keepalive every 10 s. */
#define IO_TIMEOUT_S 60
#define MAX_HEADERS 16384
#define MAX_LINE (64 * 1024 * 1024)
#define MAX_TOKEN 4096

/* ---- what the core would judge ---- */

/* A value --timeout or --wait takes in plain seconds ("120", "1.5"). */
static int
plain_seconds (const char *text, int zero_ok, double *out)
{
  char *end;
  int dots = 0;

  for (const char *p = text; *p != '\0'; p++)
    if (*p == '.')
      dots++;
    else if (*p < '0' || *p > '9')
      return 0;
  if (text[0] == '\0' || text[0] == '.' || dots > 1)
    return 0;
  *out = strtod (text, &end);
  /* Well below the core's ten years, so both accept it. */
  return *end == '\0' && (*out > 0 || (zero_ok && *out == 0)) && *out < 1e8;
}

typedef struct {
  char host[64];            /* an IPv4 or IPv6 address, as written */
  int port;
  struct sockaddr_storage address;
  socklen_t address_len;
  int loopback;
} Server;

/* "http://ADDRESS:PORT" (ADDRESS numeric, IPv6 in brackets), with @rest after it. */
static int
parse_server (const char *url, Server *out, const char **rest)
{
  const char *p = url, *host_end, *port_end;
  char port[8];
  size_t host_len;
  long n;

  memset (out, 0, sizeof *out);
  if (strncmp (p, "http://", 7) != 0)
    return 0;
  p += 7;
  if (*p == '[')
    {
      host_end = strchr (p, ']');
      if (host_end == NULL || host_end[1] != ':')
        return 0;
      p++;
      host_len = (size_t) (host_end - p);
      port_end = host_end + 2;
    }
  else
    {
      host_end = strchr (p, ':');
      if (host_end == NULL)
        return 0;
      host_len = (size_t) (host_end - p);
      port_end = host_end + 1;
    }
  if (host_len == 0 || host_len >= sizeof out->host)
    return 0;
  memcpy (out->host, p, host_len);
  out->host[host_len] = '\0';
  p = port_end;
  host_len = strspn (p, "0123456789");
  if (host_len == 0 || host_len >= sizeof port)
    return 0;
  memcpy (port, p, host_len);
  port[host_len] = '\0';
  n = strtol (port, NULL, 10);
  if (n <= 0 || n > 65535)
    return 0;
  out->port = (int) n;
  *rest = p + host_len;
  if (strchr (out->host, ':') != NULL)
    {
      struct sockaddr_in6 *a = (struct sockaddr_in6 *) &out->address;
      a->sin6_family = AF_INET6;
      a->sin6_port = htons ((uint16_t) n);
      if (inet_pton (AF_INET6, out->host, &a->sin6_addr) != 1)
        return 0;
      out->address_len = sizeof *a;
      out->loopback = IN6_IS_ADDR_LOOPBACK (&a->sin6_addr);
    }
  else
    {
      struct sockaddr_in *a = (struct sockaddr_in *) &out->address;
      a->sin_family = AF_INET;
      a->sin_port = htons ((uint16_t) n);
      if (inet_pton (AF_INET, out->host, &a->sin_addr) != 1)
        return 0;
      out->address_len = sizeof *a;
      out->loopback = (ntohl (a->sin_addr.s_addr) >> 24) == 127;
    }
  return 1;
}

/* The token as the core reads it: $SANDSTEP_TOKEN stripped, else the token
 * of the first line of $SANDSTEP_TOKEN_FILE that holds one.  0 when there is none, or anything unusual (the core says). */
static int
read_token (char *out, size_t size)
{
  const char *env = getenv ("SANDSTEP_TOKEN");
  const char *path = getenv ("SANDSTEP_TOKEN_FILE");
  char buf[MAX_TOKEN * 2];
  const char *p, *end;
  ssize_t n = 0;

  if (env != NULL && env[0] != '\0')
    {
      p = env;
      end = env + strlen (env);
    }
  else if (path != NULL && path[0] != '\0')
    {
      int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      struct stat st;
      if (fd < 0)
        return 0;
      if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || st.st_size >= (off_t) sizeof buf)
        {
          close (fd);
          return 0;
        }
      n = read (fd, buf, sizeof buf - 1);
      close (fd);
      if (n <= 0 || memchr (buf, '\0', (size_t) n) != NULL)
        return 0;
      buf[n] = '\0';
      /* The first line that holds a token, by the core's grammar (hooks/sandstep-token-libc.h); a bad
       * line before it is the core's to report. */
      for (p = buf;; p = end + 1)
        {
          SandstepTokenLine line;
          const char *nl = strchr (p, '\n');

          end = nl != NULL ? nl : p + strlen (p);
          switch (sandstep_token_line_parse (p, (size_t) (end - p), &line))
            {
            case SANDSTEP_TOKEN_LINE_ENTRY:
              p = line.token;
              end = line.token + line.token_len;
              goto found;
            case SANDSTEP_TOKEN_LINE_EMPTY:
              if (nl == NULL)
                return 0;
              continue;
            case SANDSTEP_TOKEN_LINE_BAD:
            default:
              explicit_bzero (buf, sizeof buf);
              return 0;
            }
        }
    found:;
    }
  else
    return 0;
  while (p < end && strchr (" \t\r\n\f\v", *p) != NULL)
    p++;
  while (end > p && strchr (" \t\r\n\f\v", end[-1]) != NULL)
    end--;
  if (end == p || (size_t) (end - p) >= size)
    return 0;
  for (const char *c = p; c < end; c++)
    if ((unsigned char) *c < 0x21 || (unsigned char) *c >= 0x7f)
      return 0;
  memcpy (out, p, (size_t) (end - p));
  out[end - p] = '\0';
  explicit_bzero (buf, sizeof buf);
  return 1;
}

/* Nothing to send: a terminal, /dev/null, or none.  Any other stdin is the core's to forward. */
static int
stdin_is_empty (void)
{
  struct stat st;

  if (fstat (0, &st) < 0)
    return errno == EBADF;
  return S_ISCHR (st.st_mode) && (isatty (0) || st.st_rdev == makedev (1, 3));
}

/* ---- the exchange ---- */

typedef struct {
  int fd;
  char buf[65536];
  size_t start, end;
  int chunked;
  long long chunk_left;     /* chunked: bytes left in this chunk; -1: read its size next */
  int eof;
} Body;

/* Through the buffer: a chunk's size line and its CRLF are read byte by byte, never a syscall each. */
static ssize_t
read_some (Body *b, char *out, size_t size)
{
  ssize_t n;

  if (b->start == b->end)
    {
      do
        n = read (b->fd, b->buf, sizeof b->buf);
      while (n < 0 && errno == EINTR);
      if (n <= 0)
        return n;
      b->start = 0;
      b->end = (size_t) n;
    }
  n = (ssize_t) (b->end - b->start < size ? b->end - b->start : size);
  memcpy (out, b->buf + b->start, (size_t) n);
  b->start += (size_t) n;
  return n;
}

/* One raw line of the transfer (a chunk size line), without CRLF. */
static int
raw_line (Body *b, char *out, size_t size)
{
  size_t n = 0;
  char c;

  for (;;)
    {
      if (read_some (b, &c, 1) != 1)
        return 0;
      if (c == '\n')
        break;
      if (n + 1 < size)
        out[n++] = c;
    }
  if (n > 0 && out[n - 1] == '\r')
    n--;
  out[n] = '\0';
  return 1;
}

/* Bytes of the body, chunked or not; 0 at its end, < 0 on an error. */
static ssize_t
body_read (Body *b, char *out, size_t size)
{
  ssize_t n;

  if (b->eof)
    return 0;
  if (!b->chunked)
    {
      n = read_some (b, out, size);
      if (n == 0)
        b->eof = 1;
      return n;
    }
  if (b->chunk_left <= 0)
    {
      char line[64];
      if (b->chunk_left == 0 && !raw_line (b, line, sizeof line))   /* the CRLF after a chunk */
        return -1;
      if (!raw_line (b, line, sizeof line))
        return -1;
      b->chunk_left = strtoll (line, NULL, 16);
      if (b->chunk_left < 0)
        return -1;
      if (b->chunk_left == 0)
        {
          b->eof = 1;
          return 0;
        }
    }
  n = read_some (b, out, size < (size_t) b->chunk_left ? size : (size_t) b->chunk_left);
  if (n > 0)
    b->chunk_left -= n;
  else if (n == 0)
    return -1;
  return n;
}

typedef struct {
  char *data;
  size_t len, cap;
} Line;

/* The next line of the body without its newline, in @l; 0 at the end or on an error. */
static int
next_line (Body *b, Line *l, char *pending, size_t *pending_start, size_t *pending_end)
{
  l->len = 0;
  for (;;)
    {
      while (*pending_start < *pending_end)
        {
          char c = pending[(*pending_start)++];
          if (c == '\n')
            {
              l->data[l->len] = '\0';
              return 1;
            }
          if (l->len + 2 > l->cap)
            {
              size_t cap = l->cap * 2;
              char *grown;
              if (cap > MAX_LINE || (grown = realloc (l->data, cap)) == NULL)
                return 0;
              l->data = grown;
              l->cap = cap;
            }
          l->data[l->len++] = c;
        }
      ssize_t n = body_read (b, pending, 65536);
      if (n <= 0)
        return 0;
      *pending_start = 0;
      *pending_end = (size_t) n;
    }
}

/* @message as the core prints it: its handle rewritten to the caller's, one line. */
static void
say_error (const char *message, const char *local, const char *shown)
{
  char from[64];
  size_t from_len;
  const char *p = message;

  snprintf (from, sizeof from, "'%s'", local);
  from_len = strlen (from);
  fputs ("sandstep run: ", stderr);
  while (*p != '\0')
    {
      if (strcmp (local, shown) != 0 && strncmp (p, from, from_len) == 0)
        {
          fprintf (stderr, "'%s'", shown);
          p += from_len;
          continue;
        }
      if (*p == '\n')
        fputs ("\\n", stderr);
      else if (*p == '\r')
        fputs ("\\r", stderr);
      else if (*p == '\t')
        fputs ("\\t", stderr);
      else if ((unsigned char) *p < 0x20 || *p == 0x7f)
        fprintf (stderr, "\\x%02x", (unsigned char) *p);
      else
        fputc (*p, stderr);
      p++;
    }
  fputc ('\n', stderr);
}

/* To the server: a peer that closed is an error here, not SIGPIPE. */
static int
send_all (int fd, const char *data, size_t len)
{
  while (len > 0)
    {
      ssize_t n = send (fd, data, len, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return 0;
      data += n;
      len -= (size_t) n;
    }
  return 1;
}

static int
connect_to (const Server *server)
{
  struct timeval timeout = { IO_TIMEOUT_S, 0 };
  int one = 1;
  int fd = socket (server->address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0)
    return -1;
  /* The request and its answer are small: no Nagle delay against the peer's delayed ACK. */
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  while (connect (fd, (const struct sockaddr *) &server->address, server->address_len) < 0)
    if (errno != EINTR)
      {
        close (fd);
        return -1;
      }
  return fd;
}

/* The number at @p when it lies in [@min, @max], else @fallback: a server's number past a type's range is no
 * value this program acts on, and casting it would be undefined (1e300 as an exit status). */
static double
number_in (const char *p, double min, double max, double fallback)
{
  double n = sandstep_json_libc_number (p, fallback);

  return n >= min && n <= max ? n : fallback;
}

/* The answer after a 200: the claim's line, output, then the result or an error. */
static int
read_answer (Body *body, const char *url, const char *local, const char *shown, const char *timeout_text)
{
  Line line = { malloc (65536), 0, 65536 };
  char *pending = malloc (65536);
  unsigned char *bytes = NULL;
  size_t bytes_cap = 0, pending_start = 0, pending_end = 0;
  SandstepRunOutcome outcome = { 0 };
  int have_claim = 0, output_open[3] = { 0, 1, 1 };
  int status = SANDSTEP_EXIT_INTERNAL;

  if (line.data == NULL || pending == NULL)
    goto lost;
  while (next_line (body, &line, pending, &pending_start, &pending_end))
    {
      const char *p = line.data, *v;

      if (*sandstep_json_libc_space (p) == '\0')
        continue;                             /* a keepalive */
      if (!have_claim)
        {
          const char *limits = sandstep_json_libc_member (sandstep_json_libc_member (p, "spec"), "limits");
          if (sandstep_json_libc_member (p, "claim") == NULL)
            break;
          have_claim = 1;
          outcome.memory = (uint64_t) number_in (sandstep_json_libc_member (limits, "memory"), 0, 0x1p63, 0);
          outcome.pids = (int64_t) number_in (sandstep_json_libc_member (limits, "pids"), 0, 0x1p62, 0);
          outcome.cpu_time_s = (int64_t) number_in (sandstep_json_libc_member (limits, "cpu_time"), 0, 0x1p62, 0);
          outcome.disk = (uint64_t) number_in (sandstep_json_libc_member (limits, "disk"), 0, 0x1p63, 0);
          outcome.memory = outcome.memory ? outcome.memory : SANDSTEP_DEFAULT_MEMORY;
          outcome.pids = outcome.pids ? outcome.pids : SANDSTEP_DEFAULT_PIDS;
          outcome.cpu_time_s = outcome.cpu_time_s ? outcome.cpu_time_s : SANDSTEP_DEFAULT_CPU_TIME_S;
          outcome.disk = outcome.disk ? outcome.disk : SANDSTEP_DEFAULT_DISK;
          continue;
        }
      if ((v = sandstep_json_libc_member (p, "data")) != NULL && *v == '"')
        {
          const char *end = sandstep_json_libc_skip_string (v);
          int stream = sandstep_json_libc_number (sandstep_json_libc_member (p, "stream"), 1) == 2 ? 2 : 1;
          size_t len;
          if (end == NULL)
            break;
          len = (size_t) (end - v);
          if (len > bytes_cap)
            {
              unsigned char *grown = realloc (bytes, len);
              if (grown == NULL)
                break;
              bytes = grown;
              bytes_cap = len;
            }
          len = sandstep_json_libc_base64_decode (v + 1, (size_t) (end - v - 2), bytes);
          /* A reader that went away (| head) ends the output, not the command, as in the core. */
          if (output_open[stream])
            output_open[stream] = sandstep_write_all (stream, bytes, len);
          continue;
        }
      if ((v = sandstep_json_libc_member (p, "error")) != NULL)
        {
          char message[4096];
          if (!sandstep_json_libc_string (sandstep_json_libc_member (v, "message"), message, sizeof message))
            snprintf (message, sizeof message, "The sandbox server at '%s' failed without saying why; see its log",
                      url);
          say_error (message, local, shown);
          status = (int) number_in (sandstep_json_libc_member (v, "exit_status"), INT_MIN, INT_MAX,
                                    SANDSTEP_EXIT_INTERNAL);
          goto done;
        }
      if ((v = sandstep_json_libc_member (p, "exit")) != NULL)
        {
          char report[2048];
          const char *notice = sandstep_json_libc_member (p, "notices");

          /* The server's notices (egress refusals) come with the result, one line each, as the core says them. */
          if (notice != NULL && *notice == '[')
            for (notice = sandstep_json_libc_space (notice + 1); notice != NULL && *notice == '"';)
              {
                char text[4096];
                if (sandstep_json_libc_string (notice, text, sizeof text))
                  say_error (text, local, local);
                notice = sandstep_json_libc_skip_value (notice);
                notice = notice != NULL ? sandstep_json_libc_space (notice) : NULL;
                if (notice != NULL && *notice == ',')
                  notice = sandstep_json_libc_space (notice + 1);
              }
          outcome.exit_status = (int) number_in (v, INT_MIN, INT_MAX, 0);
          outcome.timed_out = sandstep_json_libc_boolean (sandstep_json_libc_member (p, "timed_out"));
          outcome.applied_timeout_s = sandstep_json_libc_number (sandstep_json_libc_member (p, "applied_timeout_s"), 0);
          outcome.clamped = sandstep_json_libc_boolean (sandstep_json_libc_member (p, "clamped"));
          outcome.memory_hit = sandstep_json_libc_boolean (sandstep_json_libc_member (p, "memory_limit_hit"));
          outcome.pids_hit = sandstep_json_libc_boolean (sandstep_json_libc_member (p, "pids_limit_hit"));
          status = sandstep_run_report_format (&outcome, timeout_text, report, sizeof report);
          fputs (report, stderr);
          goto done;
        }
      /* Anything else is a newer server's news: ignored. */
    }
lost:
  fprintf (stderr, "sandstep run: The sandbox server at '%s' went away while the command ran (the connection "
           "closed); its files are intact; run it again\n", url);
  status = SANDSTEP_EXIT_INTERNAL;
done:
  free (line.data);
  free (pending);
  free (bytes);
  return status;
}

int
sandstep_front_remote_read_reply (int fd, const char *url, const char *local, const char *shown,
                                  const char *timeout_text, int *out_status)
{
  char headers[MAX_HEADERS + 1] = "";
  size_t headers_len = 0;
  Body *body;
  int code, taken, status;
  char *sep;

  /* The status and headers. */
  body = calloc (1, sizeof *body);
  if (body == NULL)
    return 0;
  body->fd = fd;
  body->chunk_left = -1;
  while ((sep = strstr (headers, "\r\n\r\n")) == NULL || headers_len == 0)
    {
      ssize_t got;
      if (headers_len >= MAX_HEADERS)
        break;
      do
        got = read (fd, headers + headers_len, MAX_HEADERS - headers_len);
      while (got < 0 && errno == EINTR);
      if (got <= 0)
        break;
      headers_len += (size_t) got;
      headers[headers_len] = '\0';
    }
  if (headers_len == 0 || (sep = strstr (headers, "\r\n\r\n")) == NULL ||
      sscanf (headers, "HTTP/1.%*d %d", &code) != 1)
    {
      /* Sent, and no answer: the command may have started; never sent twice. */
      fprintf (stderr, "sandstep run: Cannot reach the sandbox server at '%s': %s; check that sandstepd runs "
               "there and that the URL (--backend, SANDSTEP_BACKEND or the handle) names it\n", url,
               headers_len == 0 ? "the connection closed before an answer" : "its answer was not HTTP");
      *out_status = SANDSTEP_EXIT_INTERNAL;
      free (body);
      return 1;
    }
  if (code != 200)
    {
      /* Refused before anything ran: the core asks again, waits if it may, and says why in its words. */
      free (body);
      return 0;
    }
  *sep = '\0';
  for (char *h = strstr (headers, "\r\n"); h != NULL; h = strstr (h + 2, "\r\n"))
    if (strncasecmp (h + 2, "Transfer-Encoding:", 18) == 0 && strstr (h + 20, "chunked") != NULL)
      body->chunked = 1;
  taken = (int) (sep + 4 - headers);
  memcpy (body->buf, headers + taken, headers_len - (size_t) taken);
  body->end = headers_len - (size_t) taken;
  status = read_answer (body, url, local, shown, timeout_text);
  free (body);
  *out_status = status;
  return 1;
}

int
sandstep_front_remote_run (const SandstepFrontRemote *run, int *out_status)
{
  Server server, backend;
  const char *rest = "";
  const char *local;
  char url[128], token[MAX_TOKEN], line_json[65536];
  char *request = NULL;
  double timeout_s = 0, wait_s = 0;
  size_t json_len = 0;
  const char *allow_http = getenv ("SANDSTEP_ALLOW_HTTP");
  int fd, n;

  /* Only what the core would read the same way. */
  if (run->owner == NULL || run->holder == NULL || run->backend == NULL || !stdin_is_empty () ||
      (run->timeout != NULL && !plain_seconds (run->timeout, 0, &timeout_s)) ||
      (run->wait != NULL && !plain_seconds (run->wait, 1, &wait_s)) ||
      !parse_server (run->backend, &backend, &rest) || (rest[0] != '\0' && strcmp (rest, "/") != 0))
    return 0;
  if (sandstep_handle_libc_is_local (run->handle))
    {
      server = backend;
      local = run->handle;
    }
  else
    {
      /* The handle names its server: the token goes only to the one this step was told to use. */
      if (!parse_server (run->handle, &server, &rest) || rest[0] != '/' || !sandstep_handle_libc_is_local (rest + 1) ||
          strcasecmp (server.host, backend.host) != 0 || server.port != backend.port)
        return 0;
      local = rest + 1;
    }
  if (!server.loopback && (allow_http == NULL || strcmp (allow_http, "1") != 0))
    return 0;
  if (!read_token (token, sizeof token))
    return 0;
  snprintf (url, sizeof url, strchr (server.host, ':') ? "http://[%s]:%d" : "http://%s:%d", server.host, server.port);

  /* The request line: who asks and the command (hooks/sandstep-wire.h). */
  memcpy (line_json, "{\"owner\":", 9);
  json_len = 9;
  if (!sandstep_json_libc_append_string (line_json, sizeof line_json, &json_len, run->owner))
    return 0;
  memcpy (line_json + json_len, ",\"holder\":", 10);
  json_len += 10;
  if (!sandstep_json_libc_append_string (line_json, sizeof line_json, &json_len, run->holder))
    return 0;
  memcpy (line_json + json_len, ",\"command\":", 11);
  json_len += 11;
  if (!sandstep_json_libc_append_string (line_json, sizeof line_json, &json_len, run->command))
    return 0;
  n = snprintf (line_json + json_len, sizeof line_json - json_len, ",\"timeout_s\":%.17g}\n", timeout_s);
  if (n <= 0 || (size_t) n >= sizeof line_json - json_len)
    return 0;
  json_len += (size_t) n;

  fd = connect_to (&server);
  if (fd < 0)
    return 0;                               /* nothing sent: the core says why */
  n = asprintf (&request,
                "POST /v1/sandboxes/%s/claim-run HTTP/1.1\r\nHost: %s%s%s:%d\r\nUser-Agent: sandstep\r\n"
                "Authorization: Bearer %s\r\nContent-Type: application/x-sandstep-run\r\nContent-Length: %zu\r\n"
                "Connection: close\r\n\r\n%s",
                local, strchr (server.host, ':') ? "[" : "", server.host, strchr (server.host, ':') ? "]" : "",
                server.port, token, json_len, line_json);
  explicit_bzero (token, sizeof token);
  if (n < 0)
    {
      close (fd);
      return 0;
    }
  if (!send_all (fd, request, (size_t) n))
    {
      explicit_bzero (request, (size_t) n);
      free (request);
      close (fd);
      *out_status = SANDSTEP_EXIT_INTERNAL;
      fprintf (stderr, "sandstep run: Cannot reach the sandbox server at '%s': %s; check that sandstepd runs "
               "there and that the URL (--backend, SANDSTEP_BACKEND or the handle) names it\n", url,
               strerror (errno));
      return 1;
    }
  explicit_bzero (request, (size_t) n);
  free (request);

  n = sandstep_front_remote_read_reply (fd, url, local, run->handle, run->timeout, out_status);
  close (fd);
  return n;
}
