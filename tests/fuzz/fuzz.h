/* fuzz.h: what every fuzz target of tests/fuzz shares.
 *
 * A target is one file, fuzz-NAME.c, defining LLVMFuzzerTestOneInput(): built
 * with libFuzzer where -Dfuzzing=true (a clang build directory), and always
 * with replay.c, which feeds it the corpus and mutations of it in the
 * ordinary suite (README.md).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv);

/* Criticals and warnings abort: on hostile bytes either is a finding. */
void fuzz_init_glib (void);

/* @data as a file: a path (/proc/self/fd/N of a memfd made once per
 * target) whose content is exactly @size bytes of @data.  For parsers
 * that take a path; the fd is the caller's to keep. */
const char *fuzz_bytes_as_file (const uint8_t *data, size_t size);
/* The same memfd with the bytes written and its offset at 0, for parsers that read an fd. */
int fuzz_bytes_as_fd (const uint8_t *data, size_t size);

/* Runs @func with fds 1 and 2 on /dev/null: parsers that print what they read (the front) must not write
 * hostile bytes into the TAP stream or the fuzzer's log. */
void fuzz_quietly (void (*func) (void *data), void *data);
