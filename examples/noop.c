/* SPDX-License-Identifier: MIT */
/* noop.c - asking for the device a tensor is already on is a no-op that returns the same tensor
 * (PyTorch's .to); clt_copy_to always allocates, so writing the copy leaves the original alone.
 *
 *   $ POCL_DEVICES="pthread pthread" ./examples/noop      # uses cl:0 when there is one
 */
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "noop: %s failed: %s\n  %s\n", what, clt_status_name(s), clt_last_error());
    exit(1);
  }
}

int main(void) {
  clt_device *dev = clt_device_count() > 0 ? clt_device_at(0) : clt_cpu();
  int64_t shape[1] = {3};
  clt_tensor *x, *same, *copy, *two;
  check(clt_ones(CLT_F32, 1, shape, dev, &x), "clt_ones");
  check(clt_to(x, dev, &same), "clt_to");
  printf("clt_to(x, %s):      same tensor: %s\n", clt_device_name(dev), same == x ? "yes" : "no");
  check(clt_copy_to(x, dev, &copy), "clt_copy_to");
  printf("clt_copy_to(x, %s): same tensor: %s\n", clt_device_name(dev), copy == x ? "yes" : "no");
  check(clt_full(CLT_F32, 1, shape, 2.0, dev, &two), "clt_full");
  check(clt_add_(copy, two), "clt_add_"); /* copy += 2 */
  printf("after copy += 2:\n  x    = ");
  check(clt_print(x), "clt_print");
  printf("  copy = ");
  check(clt_print(copy), "clt_print");
  clt_tensor_release(x);
  clt_tensor_release(same);
  clt_tensor_release(copy);
  clt_tensor_release(two);
  return 0;
}
