/* SPDX-License-Identifier: MIT */
/* mismatch.c - operands on different devices are an error, never a silent copy.
 *
 *   $ POCL_DEVICES="pthread pthread" ./examples/mismatch
 *
 * X lives on the host, Y on cl:1 (cl:0 if there is only one OpenCL device). Adding them fails
 * with CLT_ERR_DEVICE_MISMATCH and a message that names both devices and the fix; copying X to
 * Y's device first makes the add legal. Reading a device tensor's memory from the host fails
 * the same way: clt_tensor_data() needs a host tensor.
 */
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "mismatch: %s failed: %s\n  %s\n", what, clt_status_name(s), clt_last_error());
    exit(1);
  }
}

int main(void) {
  clt_device *dev = NULL;
  if (clt_device_count() >= 2)
    check(clt_device_get("cl:1", &dev), "clt_device_get(\"cl:1\")");
  else if (clt_device_count() == 1)
    check(clt_device_get("cl:0", &dev), "clt_device_get(\"cl:0\")");
  else {
    printf("mismatch: no OpenCL device was found, so every tensor lives on cpu and there is\n"
           "nothing to mismatch. Install an OpenCL driver (apt-get install pocl-opencl-icd)\n"
           "and run with POCL_DEVICES=\"pthread pthread\" to see the error.\n");
    return 0;
  }

  int64_t shape[1] = {3};
  clt_tensor *x, *y, *z = NULL;
  check(clt_ones(CLT_F32, 1, shape, clt_cpu(), &x), "clt_ones(X) on cpu");
  check(clt_full(CLT_F32, 1, shape, 2.0, dev, &y), "clt_full(Y) on device");
  printf("X on %s, Y on %s\n", clt_device_name(clt_tensor_device(x)),
         clt_device_name(clt_tensor_device(y)));

  /* 1. The mistake: no copy happens behind your back, the call fails and z is untouched. */
  clt_status s = clt_add(x, y, &z);
  printf("\nclt_add(X, Y, &Z) -> CLT_%s\n", clt_status_name(s));
  printf("  clt_last_error(): %s\n", clt_last_error());
  printf("  Z is %s\n", z == NULL ? "untouched (still NULL)" : "SET: this is a bug");
  if (s != CLT_ERR_DEVICE_MISMATCH || z != NULL)
    return 1;

  /* 2. The fix: copy X to where Y lives, then add there. */
  clt_tensor *x_dev;
  check(clt_to(x, clt_tensor_device(y), &x_dev), "clt_to(X, device of Y)");
  check(clt_add(x_dev, y, &z), "clt_add(X_dev, Y)");
  printf("\nclt_to(X, clt_tensor_device(Y), &X_dev); clt_add(X_dev, Y, &Z):\n");
  check(clt_print(z), "clt_print(Z)");

  /* 3. Host access needs host data: Z's memory is on the device. */
  clt_clear_error();
  float *p = clt_tensor_data(z);
  printf("\nclt_tensor_data(Z) -> %s, CLT_%s\n", p == NULL ? "NULL" : "a pointer (a bug)",
         clt_status_name(clt_last_status()));
  printf("  clt_last_error(): %s\n", clt_last_error());
  if (p != NULL || clt_last_status() != CLT_ERR_NOT_ON_HOST)
    return 1;

  clt_tensor *home;
  check(clt_to(z, clt_cpu(), &home), "clt_to(Z, cpu)");
  p = clt_tensor_data(home);
  if (p == NULL) {
    fprintf(stderr, "mismatch: clt_tensor_data(home) failed: %s\n", clt_last_error());
    return 1;
  }
  printf("clt_to(Z, clt_cpu(), &home); clt_tensor_data(home) -> {%g, %g, %g}\n", p[0], p[1], p[2]);

  clt_tensor_release(x);
  clt_tensor_release(y);
  clt_tensor_release(x_dev);
  clt_tensor_release(z);
  clt_tensor_release(home);
  return 0;
}
