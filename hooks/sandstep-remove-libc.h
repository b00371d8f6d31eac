/* sandstep-remove-libc.h: rm -rf without recursion, in plain C.
 *
 * A command may leave any tree in a sandbox: a chain of 50,000 nested
 * directories made through directory fds needs no long path.  A removal that
 * recursed (or held a descriptor) per level died of a stack overflow or ran
 * out of descriptors on it, and left it for ever.  This one never descends:
 * it moves the entries of each subdirectory up into the directory being
 * emptied and removes the subdirectory, so it uses one directory stream at a
 * time and memory that does not grow with depth, and never walks up through
 * "..".  For the core (destroy, gc, provision's sweep, sandstepd's staging)
 * and for the jail's init (/dev/shm), which links no library.
 */
#pragma once

/* Removes everything in the directory @dir_fd (not the directory itself), never following a link and making
 * directories writable on the way (a command may leave a read-only one).  Returns 0 when it is empty, or -1 with
 * errno set by the last thing that could not be removed (an entry may be left under a name of the form
 * ".sandstep-rm-N" in @dir_fd). */
int sandstep_empty_directory (int dir_fd);

/* Removes @name in @dir_fd whatever it is, as sandstep_empty_directory() and then the directory itself; 0 when
 * it is gone (or was not there), else -1 with errno set. */
int sandstep_remove_at (int dir_fd, const char *name);
