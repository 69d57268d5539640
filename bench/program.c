/* SPDX-License-Identifier: MIT */
/* program.c - what the first operation of a process costs, kernel builds included.
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/program [device]
 *
 * Opens the device (cl:0 unless named), then times, on the wall clock, the first clt_add of two
 * 1000-element f32 tensors up to its result being read back: the kernel builds (or the loads
 * from the disk cache) this needs happen inside. Prints the milliseconds and how many programs
 * came from clt's disk cache. Run it in fresh processes with CLT_CACHE=0, an empty or a filled
 * CLT_CACHE_DIR, and (on PoCL) POCL_KERNEL_CACHE=0 or 1 to compare the caches.
 */
#define _POSIX_C_SOURCE 200809L
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

long clt__cache_hits(void); /* lib/clt-internal.h */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  const char *name = argc > 1 ? argv[1] : "cl:0";
  clt_device *d;
  if (clt_device_get(name, &d) != CLT_OK) {
    fprintf(stderr, "program: %s\n", clt_last_error());
    return 1;
  }
  int64_t shape[1] = {1000};
  clt_tensor *a = NULL, *b = NULL, *c = NULL;
  float out[1000];
  double t0 = now_ms();
  if (clt_ones(CLT_F32, 1, shape, d, &a) != CLT_OK ||
      clt_ones(CLT_F32, 1, shape, d, &b) != CLT_OK || clt_add(a, b, &c) != CLT_OK ||
      clt_tensor_read(c, out, sizeof out) != CLT_OK) {
    fprintf(stderr, "program: %s\n", clt_last_error());
    return 1;
  }
  double t1 = now_ms();
  if (out[0] != 2.0f || out[999] != 2.0f) {
    fprintf(stderr, "program: wrong result %g\n", out[0]);
    return 1;
  }
  printf("first op on %s: %.1f ms (%ld programs from clt's disk cache)\n", name, t1 - t0,
         clt__cache_hits());
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(c);
  return 0;
}
