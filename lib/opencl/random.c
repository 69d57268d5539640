/* SPDX-License-Identifier: MIT */
/* opencl/random.c - launches kernels/random.cl. */
#include "cl-internal.h"

#include <stdio.h>

clt_status clt__cl_fill_random(clt_tensor *out, uint64_t seed, uint64_t offset, bool normal,
                               const char *fn) {
  clt_device *d = out->storage->dev;
  char kname[32];
  snprintf(kname, sizeof kname, "%s_%s", normal ? "randn" : "rand", clt_dtype_name(out->dtype));
  cl_kernel k;
  clt_status st =
      clt__get_kernel(d, "random", clt__cl_base_options(d, out->dtype == CLT_F64), kname, fn, &k);
  if (st != CLT_OK)
    return st;

  /* One work-item per counter (or chunk of counters); each counter fills 4 f32 or 2 f64. */
  clt_launch l = clt__cl_launch_1d(d, (int64_t)clt__random_counters(out->dtype, out->numel));
  cl_ulong n = (cl_ulong)out->numel, step = l.chunk, s = seed, o = offset;
  clt_cl_arg args[5] = {{sizeof(cl_mem), &out->storage->buf},
                        {sizeof n, &n},
                        {sizeof step, &step},
                        {sizeof s, &s},
                        {sizeof o, &o}};
  return clt__cl_run(d, k, &l, args, 5, NULL, 0, &out->storage, 1, fn);
}
