/* fuzz-front-reply.c: the static front's reading of sandstepd's HTTP answer (programs/sandstep-front-remote.c).
 *
 * After it sends a claim-run, the front reads the status line, the headers,
 * a body plain or chunked, and its JSON lines (the claim, output, the result
 * or an error) with libc alone, into fixed buffers.  Here the answer is any
 * bytes, ending where the input ends; the command's output and the front's
 * messages go to /dev/null.
 */
#include "fuzz.h"

#include "sandstep-front-remote.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  return 0;
}

typedef struct {
  int fd;
  int status;
  int taken;
} Reply;

static void
read_reply (void *data)
{
  Reply *reply = data;

  reply->taken = sandstep_front_remote_read_reply (reply->fd, "http://127.0.0.1:7700", "sandstep-0123456789abcdef",
                                                   "http://127.0.0.1:7700/sandstep-0123456789abcdef", "120",
                                                   &reply->status);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  Reply reply = { fuzz_bytes_as_fd (data, size), -1, -1 };

  fuzz_quietly (read_reply, &reply);
  if (reply.taken != 0 && reply.taken != 1)
    __builtin_trap ();
  return 0;
}
