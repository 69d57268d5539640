/* bench.h - the plumbing the OpenCL benchmarks share: failing loudly, the clock, medians.
 * Define BENCH_NAME (the program's name, for messages) and include <clt.h> before this file,
 * and <CL/cl.h> too for the raw-OpenCL reference (raw_open). */
#ifndef CLT_BENCH_H
#define CLT_BENCH_H

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench.h"
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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
#endif /* CL_SUCCESS */

#endif /* CLT_BENCH_H */
