/* SPDX-License-Identifier: MIT */
/* outside.c - clt as an outside program sees it: only <clt.h>, built with
 *   cc outside.c $(pkg-config --cflags --libs clt)
 * (make installcheck does this against the installed library). Lists the devices, adds two
 * tensors on the default device (and on every OpenCL device, so that the installed library's
 * kernels are exercised too), checks the sum with clt_item and prints "outside: ok".
 */
#include <clt.h>

#include <stdio.h>

static int failed(clt_status s, const char *what, const clt_device *dev) {
  fprintf(stderr, "outside: %s on %s failed: %s: %s\n", what, clt_device_name(dev),
          clt_status_name(s), clt_last_error());
  return 1;
}

/* (3 + 4) summed over a 2x3 tensor on dev must give 42, on dev. Returns 0 if it does. */
static int check_add(clt_device *dev) {
  int64_t shape[2] = {2, 3};
  clt_tensor *a = NULL, *b = NULL, *c = NULL, *s = NULL;
  clt_status st;
  int rc = 1;
  double total = 0;
  if ((st = clt_full(CLT_F32, 2, shape, 3.0, dev, &a)) != CLT_OK)
    failed(st, "clt_full(3)", dev);
  else if ((st = clt_full(CLT_F32, 2, shape, 4.0, dev, &b)) != CLT_OK)
    failed(st, "clt_full(4)", dev);
  else if ((st = clt_add(a, b, &c)) != CLT_OK)
    failed(st, "clt_add", dev);
  else if ((st = clt_sum(c, &s)) != CLT_OK)
    failed(st, "clt_sum", dev);
  else if ((st = clt_item(s, &total)) != CLT_OK)
    failed(st, "clt_item", dev);
  else if (clt_tensor_device(c) != dev)
    fprintf(stderr, "outside: the sum lives on %s, not on %s\n",
            clt_device_name(clt_tensor_device(c)), clt_device_name(dev));
  else if (total != 42.0)
    fprintf(stderr, "outside: on %s, (3 + 4) summed over 6 elements is %g, not 42\n",
            clt_device_name(dev), total);
  else
    rc = 0;
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(c);
  clt_tensor_release(s);
  if (rc == 0)
    printf("add on %s: %g\n", clt_device_name(dev), total);
  return rc;
}

int main(void) {
  printf("clt %s\n", clt_version());
  printf("  %-6s %s\n", clt_device_name(clt_cpu()), clt_device_description(clt_cpu()));
  for (int i = 0; i < clt_device_count(); i++) {
    clt_device *d = clt_device_at(i);
    if (d == NULL)
      return failed(clt_last_status(), "clt_device_at", NULL);
    printf("  %-6s %s\n", clt_device_name(d), clt_device_description(d));
  }

  clt_device *dev = clt_device_default();
  printf("default: %s\n", clt_device_name(dev));
  int rc = check_add(dev);
  for (int i = 0; i < clt_device_count(); i++)
    if (clt_device_at(i) != dev)
      rc |= check_add(clt_device_at(i));

  if (rc == 0)
    printf("outside: ok\n");
  return rc;
}
