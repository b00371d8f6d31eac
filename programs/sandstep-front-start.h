/* sandstep-front-start.h: a sandbox's first command starting its supervisor, without the helper.
 *
 * The helper keeps each sandbox's compiled plan beside its record
 * (sandstep-supervision.h).  When a `sandstep run` finds no supervisor, the
 * front starts one with that plan (sandstep-supervisor-start.h), its own
 * request queued on a connection that comes with it, which the supervisor
 * serves first and as it serves any: the helper's GLib, JSON and plan
 * compiler are not loaded, and nobody waits for the other to say it is
 * ready.  With @init (sandstep-init), it starts the sandbox's jail on the
 * plan's image too, for the supervisor to adopt once it has checked the
 * plan.  Anything else (no kept plan, another caller
 * starting one, a plan out of date, a sandbox that cannot be built) is
 * the helper's to do or to explain.
 *
 * Plain C, for the static front.
 */
#pragma once

/* Starts @handle's supervisor with @program (and its jail with @init, NULL: none); returns the connection on which the caller's request goes,
 * as on the supervisor's socket (a supervisor that cannot serve closes it unanswered: nothing ran), or -1
 * when nothing was started: the helper does it, or says why.  @state_dir is absolute; @sandbox_dir_fd is
 * the sandbox's directory. */
int sandstep_front_start_supervisor (const char *program, const char *init, const char *state_dir,
                                     int sandbox_dir_fd, const char *handle);
