/* sandstep-supervisor-keep.h: keeping a sandbox's jail past its supervisor's idle time.
 *
 * A supervisor ends SANDSTEP_SUPERVISOR_IDLE_S after its last command, and its jail with it.  A layered
 * sandbox's files live in that jail's overlay, so whatever watches them there (E2B's watchDir, through the
 * daemon's inotify) needs the jail to stay: it keeps it by holding a shared lock on the sandbox's
 * SANDSTEP_SUPERVISOR_KEEP_FILE, and the supervisor, at its idle deadline, ends only when nobody does.  A lock
 * goes with the last fd of its holder, so a holder that dies keeps nothing.  Expiry, release, destroy and
 * a fork's stop end the jail all the same; the holder learns of it from init's end.
 *
 * Used by the supervisor (the probe) and the local backend (the keeper), nothing else.
 */
#pragma once

#define SANDSTEP_SUPERVISOR_KEEP_FILE "keep"

/* A shared lock on the keep file of the sandbox directory @dir_fd, made if missing (mode 0600): the fd
 * (close-on-exec) that holds it, or -1 with errno. */
int sandstep_supervisor_keep (int dir_fd);

/* Whether someone holds the keep lock of the sandbox directory @dir_fd (a file that cannot be opened keeps
 * nothing).  When nobody does, *@out_ending (where not NULL) is an fd that holds the lock exclusively, or -1: a
 * supervisor that ends idle holds it until its jail is gone, so that a keeper who comes meanwhile waits for that
 * and then finds the next supervisor, never a jail about to end. */
int sandstep_supervisor_kept (int dir_fd, int *out_ending);
