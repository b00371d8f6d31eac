/* sandstep-claim-libc.h: who holds a sandbox's claim, as its claim file and the kernel say.
 *
 * A claim is an flock on STATE/sandboxes/HANDLE/claim (sandstep-claim.c),
 * and the file names its holder,
 *
 *   {"holder":"NAME","pid":PID,"start":START-TIME}
 *
 * written by whoever takes the lock, just after taking it: what the file
 * says may still be the previous holder's, so it is trusted only when its
 * pid is the one /proc/locks shows holding the lock.
 *
 * Plain C: the helper and the static supervisor read a claim alike.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandstep-owner-libc.h"

typedef struct {
  char holder[SANDSTEP_IDENTITY_MAX + 1];
  pid_t pid;
  uint64_t start;   /* the holder process's start time, so that a recycled pid is never taken for it */
} SandstepClaimText;

/* The claim file's text (@len bytes, NUL-terminated) into @out; 0 when it is no claim sandstep wrote (anyone who
 * can write the state directory may have changed it). */
int sandstep_claim_parse (const char *text, size_t len, SandstepClaimText *out);

/* The pid holding the flock on @fd's file, from /proc/locks; 0 if none or unknown. */
pid_t sandstep_claim_lock_holder (int fd);

/* Who holds the claim on @fd, read once: 1 with @out filled when the file names the lock's holder (or the lock's
 * holder is unknown); 0 when it does not (yet: ask again shortly), with only @out->pid set, to the lock's holder
 * (0: unknown). */
int sandstep_claim_read_once (int fd, SandstepClaimText *out);

/* How a holder that has not written its name (in time, or in a way this process can match: another pid
 * namespace's) is named, from the lock's holder @pid (0: unknown), into @out. */
void sandstep_claim_unnamed (pid_t pid, char *out, size_t size);

/* How long a claimer waits for a new holder to write its name before naming it so (µs). */
#define SANDSTEP_CLAIM_NAME_WAIT_US (200 * 1000)
