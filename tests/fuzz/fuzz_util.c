/* SPDX-License-Identifier: MIT */
/* fuzz_util.c - helpers shared by the fuzz targets (see fuzz.h). */
#define _POSIX_C_SOURCE 200809L
#include "fuzz.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fuzz_outcome = -1;
char fuzz_sentinel_storage[16];

void fuzz_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "fuzz invariant violated at %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n  clt_last_status() = %s, clt_last_error() = \"%s\"\n",
          clt_status_name(clt_last_status()), clt_last_error());
  fflush(stderr);
  abort();
}

/* PoCL's LLVM installs handlers for crash signals when the registry opens; on SIGABRT (a broken
 * invariant: FUZZ_CHECK calls abort) LLVM's handler puts back the previous action and raises the
 * signal again, and libFuzzer, which installs its own handler only where none is set, would never
 * see the crash: the process would die without a reproducer. So the registry is opened with
 * these signals' actions saved and put back afterwards (ASan's where it has some), before
 * libFuzzer sets its handlers. SIGFPE and SIGUSR1 stay PoCL's: it uses them itself. */
static const int crash_signals[] = {SIGABRT, SIGILL,  SIGBUS, SIGSEGV, SIGTRAP,
                                    SIGINT,  SIGTERM, SIGHUP, SIGQUIT};
#define NCRASH (sizeof crash_signals / sizeof crash_signals[0])

void fuzz_init(void) {
  static int done;
  if (done)
    return;
  done = 1;
  setenv("CLT_ALLOC_CACHE", "0", 1);
  setenv("CLT_CACHE", "0", 1);
  setenv("POCL_DEVICES", "pthread pthread", 0);
  unsetenv("CLT_DEVICE");
  unsetenv("CLT_SYNC");
  struct sigaction saved[NCRASH];
  for (size_t i = 0; i < NCRASH; i++)
    sigaction(crash_signals[i], NULL, &saved[i]);
  (void)clt_device_count();
  for (size_t i = 0; i < NCRASH; i++)
    sigaction(crash_signals[i], &saved[i], NULL);
}

void fuzz_check_failure(clt_status st, const char *fn, const clt_status *allowed) {
  FUZZ_CHECK(st != CLT_OK, "%s: expected a failure", fn);
  int ok = 0;
  for (const clt_status *a = allowed; *a != CLT_OK; a++)
    ok |= *a == st;
  FUZZ_CHECK(ok, "%s failed with %s, which it should never give here", fn, clt_status_name(st));
  FUZZ_CHECK(clt_last_status() == st, "%s gave %s but clt_last_status() is %s", fn,
             clt_status_name(st), clt_status_name(clt_last_status()));
  const char *msg = clt_last_error();
  FUZZ_CHECK(msg != NULL, "%s: clt_last_error() is NULL", fn);
  size_t len = strnlen(msg, 4096);
  FUZZ_CHECK(len < 4096, "%s: clt_last_error() is not NUL-terminated within 4096 bytes", fn);
  size_t fl = strlen(fn);
  FUZZ_CHECK(len > fl + 2 && strncmp(msg, fn, fl) == 0 && msg[fl] == ':' && msg[fl + 1] == ' ',
             "%s failed (%s) with a message that does not start with \"%s: \" and say more", fn,
             clt_status_name(st), fn);
}

int64_t fuzz_numel(int ndim, const int64_t *shape) {
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return -1;
    zero |= shape[i] == 0;
  }
  if (zero)
    return 0;
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (__builtin_mul_overflow(n, shape[i], &n))
      return -1;
  return n;
}

uint8_t fuzz_u8(fuzz_reader *r) { return r->pos < r->n ? r->p[r->pos++] : 0; }

uint64_t fuzz_u64(fuzz_reader *r) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)fuzz_u8(r) << (8 * i);
  return v;
}
