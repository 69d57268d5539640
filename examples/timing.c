/* SPDX-License-Identifier: MIT */
/* timing.c - device work is asynchronous: clt_matmul enqueues and returns at once, so a wall
 * clock read right after it measures the enqueue, not the product. Synchronize before reading
 * the clock (clt_device_synchronize, or a clt_timer, which cannot forget), or use events.
 *
 *   $ POCL_DEVICES="pthread pthread" ./examples/timing    # the default device, else cl:0
 *   $ ./examples/timing 128                               # n x n matrices (default 1024)
 */
#define _POSIX_C_SOURCE 200809L
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "timing: %s failed: %s\n  %s\n", what, clt_status_name(s), clt_last_error());
    exit(1);
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1024;
  if (n < 1 || n > 16384) {
    fprintf(stderr, "timing: the size must be from 1 to 16384, not '%s'\n", argv[1]);
    return 2;
  }
  clt_device *dev = clt_device_default();
  if (clt_device_is_host(dev) && clt_device_count() > 0)
    dev = clt_device_at(0); /* the lesson needs an asynchronous device */
  int64_t shape[2] = {n, n};
  clt_tensor *a, *b, *c;
  check(clt_manual_seed(1), "clt_manual_seed");
  check(clt_rand(CLT_F32, 2, shape, dev, &a), "clt_rand(a)");
  check(clt_rand(CLT_F32, 2, shape, dev, &b), "clt_rand(b)");
  check(clt_matmul(a, b, &c), "warm-up clt_matmul"); /* builds kernels, fills caches */
  clt_tensor_release(c);
  check(clt_device_synchronize(dev), "clt_device_synchronize");

  double t0 = now_ms();
  check(clt_matmul(a, b, &c), "clt_matmul");
  double naive = now_ms() - t0; /* wrong: the product may still be running */
  check(clt_device_synchronize(dev), "clt_device_synchronize");
  double synced = now_ms() - t0; /* right: waited for the device */
  clt_tensor_release(c);

  clt_timer *timer;
  double timed;
  check(clt_timer_start(dev, &timer), "clt_timer_start");
  check(clt_matmul(a, b, &c), "clt_matmul");
  check(clt_timer_stop(timer, &timed), "clt_timer_stop");
  clt_timer_release(timer);
  clt_tensor_release(c);

  clt_event *start, *stop;
  double evms;
  check(clt_event_record(dev, &start), "clt_event_record");
  check(clt_matmul(a, b, &c), "clt_matmul");
  check(clt_event_record(dev, &stop), "clt_event_record");
  check(clt_event_elapsed_ms(start, stop, &evms), "clt_event_elapsed_ms");
  clt_event_release(start);
  clt_event_release(stop);
  clt_tensor_release(c);

  printf("matmul %ld x %ld f32 on %s\n", n, n, clt_device_name(dev));
  printf("  without synchronizing: %8.3f ms   (only the enqueue: wrong)\n", naive);
  printf("  with synchronize:      %8.3f ms\n", synced);
  printf("  with a clt_timer:      %8.3f ms\n", timed);
  printf("  between two events:    %8.3f ms   (device time)\n", evms);
  clt_tensor_release(a);
  clt_tensor_release(b);
  return 0;
}
