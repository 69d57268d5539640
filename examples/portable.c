/* SPDX-License-Identifier: MIT */
/* portable.c - the portable pattern: pick a device once, create on the host or on the device,
 * move explicitly, compute where the operands live, and bring the result home explicitly.
 *
 *   $ ./examples/portable                         # the first GPU, else cpu
 *   $ CLT_DEVICE=cl:0 ./examples/portable         # any device by name
 *
 * The same source runs unchanged on a GPU, on PoCL's CPU devices and on the host alone.
 */
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>

/* Every call is checked: on failure, print what clt says and stop. */
static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "portable: %s failed: %s\n  %s\n", what, clt_status_name(s), clt_last_error());
    exit(1);
  }
}

int main(void) {
  clt_device *dev = clt_device_default(); /* first GPU, else cpu; $CLT_DEVICE wins */
  printf("device: %s (%s)\n", clt_device_name(dev), clt_device_description(dev));

  int64_t shape[1] = {3};
  clt_tensor *x, *y, *z, *back;
  check(clt_ones(CLT_F32, 1, shape, clt_cpu(), &x), "clt_ones(x) on cpu"); /* born on the host */
  check(clt_move(&x, dev), "clt_move(&x, dev)");                           /* x = x.to(dev) */
  check(clt_ones(CLT_F32, 1, shape, dev, &y), "clt_ones(y) on dev");       /* or created there */
  check(clt_add(x, y, &z), "clt_add(x, y)");                               /* both on dev */
  check(clt_print(z), "clt_print(z)"); /* the only implicit trip home */

  check(clt_to(z, clt_cpu(), &back), "clt_to(z, cpu)"); /* the explicit return trip */
  const float *p = clt_tensor_data(back);               /* waits for the copy; host only */
  if (p == NULL) {
    fprintf(stderr, "portable: clt_tensor_data(back) failed: %s\n  %s\n",
            clt_status_name(clt_last_status()), clt_last_error());
    return 1;
  }
  printf("back on %s:", clt_device_name(clt_tensor_device(back)));
  for (int64_t i = 0; i < clt_tensor_numel(back); i++)
    printf(" %g", p[i]);
  printf("\n");

  clt_tensor_release(x);
  clt_tensor_release(y);
  clt_tensor_release(z);
  clt_tensor_release(back);
  return 0;
}
