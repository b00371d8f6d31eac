/* sandstep-front-start.h: a sandbox's first command starting its supervisor, without the helper.
 *
 * The helper keeps each sandbox's compiled plan beside its record
 * (sandstep-supervision.h).  When a `sandstep run` finds no supervisor, the
 * front starts one with that plan (sandstep-supervisor-start.h) and then
 * runs the command as on a live sandbox; the helper's GLib, JSON and plan
 * compiler are not loaded.  Anything else (no kept plan, another caller
 * starting one, a plan out of date, a sandbox that cannot be built) is
 * the helper's to do or to explain.
 *
 * Plain C, for the static front.
 */
#pragma once

/* Starts @handle's supervisor with @program; 1 once it serves, 0 when nothing was started or it said it
 * cannot serve (the helper then does it, or says why).  @state_dir is absolute; @sandbox_dir_fd is the
 * sandbox's directory. */
int sandstep_front_start_supervisor (const char *program, const char *state_dir, int sandbox_dir_fd,
                                     const char *handle);
