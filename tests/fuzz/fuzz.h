/* SPDX-License-Identifier: MIT */
/* fuzz.h - shared by the libFuzzer targets in tests/fuzz and their corpus replay.
 *
 * Each target (fuzz_<name>.c) defines LLVMFuzzerInitialize and LLVMFuzzerTestOneInput. Built with
 * -fsanitize=fuzzer it is a libFuzzer program (./configure CC=clang --enable-fuzzing); built with
 * replay.c it is a plain program that runs the seed corpus (make check). A target checks
 * invariants, not only "no crash": FUZZ_CHECK aborts with a message when one does not hold, which
 * libFuzzer reports as a crash with the input that caused it.
 */
#ifndef CLT_FUZZ_H
#define CLT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "clt.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the last input gave: 1 if the call under test succeeded, 0 if it failed cleanly, -1 if
 * the target did not say (replay.c checks it against the corpus file's name: ok-* and bad-*). */
extern int fuzz_outcome;

/* Prints "fuzz invariant violated at FILE:LINE: <message>" and clt's last error, then aborts. */
void fuzz_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#define FUZZ_CHECK(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      fuzz_fail(__FILE__, __LINE__, __VA_ARGS__);                                                  \
  } while (0)

/* Sets up the process for fuzzing clt, once: no caching allocator (a freed tensor's memory goes
 * back to the system, so libFuzzer's per-input leak check sees every leak), no kernel disk cache,
 * two PoCL devices unless POCL_DEVICES is set; then opens the device registry, so that its
 * one-time allocations are not charged to the first input. */
void fuzz_init(void);

/* Checks a failed call: st is not CLT_OK and is one of the allowed statuses (a list ended by
 * CLT_OK), clt_last_status() is st, and clt_last_error() is "<fn>: <something>" and NUL-terminated
 * within its 4096 bytes. */
void fuzz_check_failure(clt_status st, const char *fn, const clt_status *allowed);

/* An address no clt object has: out-parameters are set to it before a call, and a failed call
 * must leave them so. */
extern char fuzz_sentinel_storage[16];
#define FUZZ_SENTINEL ((void *)fuzz_sentinel_storage)

/* The number of elements of a shape: 0 if a dimension is 0 (the others may then be anything),
 * -1 if a dimension is negative or the product does not fit in int64_t. */
int64_t fuzz_numel(int ndim, const int64_t *shape);

/* Reads the fuzz input as a stream: bytes past the end read as zero. */
typedef struct fuzz_reader {
  const uint8_t *p;
  size_t n, pos;
} fuzz_reader;

uint8_t fuzz_u8(fuzz_reader *r);
uint64_t fuzz_u64(fuzz_reader *r); /* 8 bytes, little-endian */

#endif /* CLT_FUZZ_H */
