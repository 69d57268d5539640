/* SPDX-License-Identifier: MIT */
/* multidevice.c - X on cpu, Y on cl:1: adding them fails loudly; copying X to cl:1 explicitly
 * makes it work. The transfer counters show the one copy that was made.
 *
 *   $ POCL_DEVICES="pthread pthread" ./examples/multidevice
 */
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "multidevice: %s failed: %s\n  %s\n", what, clt_status_name(s),
            clt_last_error());
    exit(1);
  }
}

int main(void) {
  clt_device *dev;
  if (clt_device_get("cl:1", &dev) != CLT_OK && clt_device_get("cl:0", &dev) != CLT_OK) {
    printf("multidevice: this machine has no OpenCL device (%s); nothing to show\n",
           clt_last_error());
    return 0;
  }
  int64_t shape[1] = {3};
  clt_tensor *x, *y, *z = NULL, *x_dev;
  check(clt_ones(CLT_F32, 1, shape, clt_cpu(), &x), "clt_ones(x)");
  check(clt_full(CLT_F32, 1, shape, 2.0, dev, &y), "clt_full(y)");
  check(clt_transfer_stats_reset(NULL), "clt_transfer_stats_reset");
  printf("X on %s, Y on %s\n", clt_device_name(clt_tensor_device(x)), clt_device_name(dev));
  clt_status s = clt_add(x, y, &z);
  printf("clt_add(X, Y): %s\n  %s\n", clt_status_name(s), clt_last_error());
  check(clt_to(x, dev, &x_dev), "clt_to"); /* the explicit copy */
  check(clt_add(x_dev, y, &z), "clt_add");
  printf("clt_to(X, %s) then clt_add: ", clt_device_name(dev));
  check(clt_print(z), "clt_print");
  printf("transfers: ");
  check(clt_transfer_stats_print(stdout), "clt_transfer_stats_print");
  clt_tensor_release(x);
  clt_tensor_release(y);
  clt_tensor_release(z);
  clt_tensor_release(x_dev);
  return 0;
}
