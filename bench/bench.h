/* SPDX-License-Identifier: MIT */
/* bench.h - the plumbing the OpenCL benchmarks share: failing loudly, the clock, medians,
 * sections of interleaved timed cases, and the raw-OpenCL reference.
 * Define BENCH_NAME (the program's name, for messages) and include <clt.h> before this file;
 * include <CL/cl.h> too for the raw-OpenCL reference (raw_open, raw_program, raw_kernel), and
 * define BENCH_SECTIONS, the most cases in one section, for time_section. */
#ifndef CLT_BENCH_H
#define CLT_BENCH_H

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench.h"
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Prints "<name>: <message>" on stderr and exits with status 1. */
_Noreturn static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", BENCH_NAME);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

#define CLT_CHECK(call)                                                                            \
  do {                                                                                             \
    clt_status s_ = (call);                                                                        \
    if (s_ != CLT_OK)                                                                              \
      die("%s failed: %s: %s", #call, clt_status_name(s_), clt_last_error());                      \
  } while (0)

#define CL_CHECK(call)                                                                             \
  do {                                                                                             \
    cl_int e_ = (call);                                                                            \
    if (e_ != CL_SUCCESS)                                                                          \
      die("%s failed: OpenCL error %d", #call, (int)e_);                                           \
  } while (0)

/* Seconds on the monotonic clock. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#ifdef BENCH_SECTIONS
/* ---- sections of interleaved cases (bench/ops, bench/views) ---------------------------------- */

enum { WARMUP = 2, MAX_REPS = 101 };
static int reps = 9; /* rounds per section after the WARMUP rounds (--reps) */

/* One timed case: run() does the work and waits for it; after() (optional) cleans up outside
 * the timed region (releases the result). */
typedef struct bench_case {
  void (*run)(void *ctx);
  void (*after)(void *ctx);
} bench_case;

/* The last section's times: times[i][r] is case i's run() in round r, in round order. */
static double times[BENCH_SECTIONS][MAX_REPS];

/* Times the n cases of a section interleaved, round after round, rotating which goes first;
 * writes the median seconds of one run() of case i to med[i]. */
static void time_section(const bench_case *c, int n, void *ctx, double *med) {
  for (int r = 0; r < WARMUP + reps; r++) {
    for (int k = 0; k < n; k++) {
      int i = (k + r) % n;
      double t0 = now_s();
      c[i].run(ctx);
      double t1 = now_s();
      if (c[i].after != NULL)
        c[i].after(ctx);
      if (r >= WARMUP)
        times[i][r - WARMUP] = t1 - t0;
    }
  }
  for (int i = 0; i < n; i++) {
    double v[MAX_REPS]; /* median() sorts: keep times in round order */
    memcpy(v, times[i], sizeof v);
    med[i] = median(v, reps);
  }
}
#endif /* BENCH_SECTIONS */

#ifdef CL_SUCCESS
/* The raw-OpenCL reference: the first device of the first platform, in a context and an
 * in-order queue of its own (clt is not involved). */
static void raw_open(cl_device_id *dev, cl_context *ctx, cl_command_queue *q) {
  cl_platform_id plat;
  cl_uint np = 0, nd = 0;
  CL_CHECK(clGetPlatformIDs(1, &plat, &np));
  if (np == 0)
    die("no OpenCL platform");
  CL_CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, dev, &nd));
  if (nd == 0)
    die("the first OpenCL platform has no device");
  cl_int err;
  *ctx = clCreateContext(NULL, 1, dev, NULL, NULL, &err);
  CL_CHECK(err);
  *q = clCreateCommandQueue(*ctx, *dev, 0, &err);
  CL_CHECK(err);
}

/* The program src built for dev in ctx; a failed build dies with its log ("building <what>
 * failed"). The caller releases it. */
static cl_program raw_program(cl_context ctx, cl_device_id dev, const char *src, const char *what) {
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  CL_CHECK(err);
  err = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
  if (err != CL_SUCCESS) {
    char log[4096] = "";
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    die("building %s failed (%d):\n%s", what, (int)err, log);
  }
  return prog;
}

/* The kernel name of prog (dies if there is none). */
static cl_kernel raw_kernel(cl_program prog, const char *name) {
  cl_int err;
  cl_kernel k = clCreateKernel(prog, name, &err);
  CL_CHECK(err);
  return k;
}
#endif /* CL_SUCCESS */

#endif /* CLT_BENCH_H */
