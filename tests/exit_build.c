/* SPDX-License-Identifier: MIT */
/* exit_build.c - a program may end while a kernel builds in the background (lib/opencl/program.c,
 * "The exit").
 *
 * Each trial, with a kernel cache directory of its own:
 * 1. a child runs a chain of three operations eagerly on every OpenCL device and exits: the
 *    disk cache now holds each operation's program;
 * 2. a second child runs the same chain eagerly (every program from the disk cache: no compile),
 *    then lazily: its fused kernel is new, so it builds in the background while the chain runs op
 *    by op, and the child returns from main with that build, the process's first compile, still
 *    inside the driver's compiler. It must exit with status 0: PoCL's clang crashed here (SIGSEGV) in
 *    3 to 4 trials of 8 before clt's exit wait was made to outlive the compiler's statics.
 * The second child also checks the values, and that the chain did run op by op (else nothing
 * was built in the background and the test proves nothing: it fails).
 *
 * The parent never calls clt (OpenCL state does not survive fork). Usage: exit_build [TRIALS]
 * (default 8). Exit status: 0 pass, 1 fail, 77 skip (no OpenCL device with background builds),
 * 99 hard error (automake's conventions). */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "clt.h"
#include "clt-internal.h"

#define N 1000

static int chain(clt_device *dev, int lazy) {
  float h[N];
  for (int i = 0; i < N; i++)
    h[i] = (float)(i % 17) * 0.25f - 2.0f;
  int64_t shape[1] = {N};
  clt_tensor *x = NULL, *y = NULL, *z = NULL, *w = NULL;
  clt_set_lazy(lazy);
  int bad = clt_from_host(h, CLT_F32, 1, shape, dev, &x) != CLT_OK ||
            clt_mul_scalar(x, 3.0, &y) != CLT_OK || clt_add(y, x, &z) != CLT_OK ||
            clt_tanh(z, &w) != CLT_OK;
  float out[N];
  if (!bad)
    bad = clt_tensor_read(w, out, sizeof out) != CLT_OK;
  if (bad)
    fprintf(stderr, "exit_build: %s: %s\n", clt_device_name(dev), clt_last_error());
  for (int i = 0; i < N && !bad; i++) {
    double want = tanh(4.0 * (double)h[i]);
    if (fabs(out[i] - want) > 1e-5) {
      fprintf(stderr, "exit_build: %s, %s: element %d is %.9g, want %.9g\n", clt_device_name(dev),
              lazy ? "lazy" : "eager", i, out[i], want);
      bad = 1;
    }
  }
  clt_tensor_release(w);
  clt_tensor_release(z);
  clt_tensor_release(y);
  clt_tensor_release(x);
  return bad;
}

/* The child of step 1 (lazy = 0) or step 2 (lazy = 1): its exit status. */
static int child(int lazy) {
  int n = 0, bad = 0;
  for (int d = 0; d < clt_device_count(); d++) {
    clt_device *dev = clt_device_at(d);
    if (!dev || !clt__background_builds(dev))
      continue;
    n++;
    bad |= chain(dev, 0);
    if (lazy)
      bad |= chain(dev, 1);
  }
  if (n == 0)
    return 77;
  if (lazy && !bad) {
    clt_lazy_stats s;
    clt__lazy_stats(&s);
    if (s.each < n) {
      fprintf(stderr, "exit_build: %ld of %d lazy chains ran op by op: no build in the "
                      "background to exit under\n", s.each, n);
      bad = 1;
    }
  }
  return bad; /* returns from main with the builds in flight */
}

static int run_child(int lazy, const char *what) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("exit_build: fork");
    return 99;
  }
  if (pid == 0)
    exit(child(lazy));
  int status;
  if (waitpid(pid, &status, 0) != pid) {
    perror("exit_build: waitpid");
    return 99;
  }
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "exit_build: %s: killed by signal %d (%s)\n", what, WTERMSIG(status),
            strsignal(WTERMSIG(status)));
    return 1;
  }
  return WEXITSTATUS(status);
}

int main(int argc, char **argv) {
  int trials = argc > 1 ? atoi(argv[1]) : 8;
  if (trials < 1) {
    fprintf(stderr, "usage: exit_build [TRIALS]\n");
    return 99;
  }
  int failed = 0;
  for (int t = 0; t < trials; t++) {
    char dir[] = "/tmp/clt-exit-build.XXXXXX";
    if (!mkdtemp(dir)) {
      perror("exit_build: mkdtemp");
      return 99;
    }
    setenv("CLT_CACHE_DIR", dir, 1);
    int rc = run_child(0, "the child that fills the disk cache");
    if (rc == 0)
      rc = run_child(1, "the child that exits during a background build");
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
      fprintf(stderr, "exit_build: could not remove %s\n", dir);
    if (rc == 77) {
      printf("exit_build: SKIP: no OpenCL device builds in the background here\n");
      return 77;
    }
    if (rc != 0) {
      fprintf(stderr, "exit_build: trial %d failed (status %d)\n", t + 1, rc);
      failed++;
    }
  }
  printf("exit_build: %d of %d trials exited cleanly\n", trials - failed, trials);
  return failed ? 1 : 0;
}
