/* opencl/random.c - launches kernels/random.cl. */
#include "backend.h"

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

  clt_storage *writes[1] = {out->storage};
  clt_waitlist wl = {.n = 0};
  if ((st = clt__waitlist_for(&wl, d, NULL, 0, writes, 1, fn)) != CLT_OK)
    return st;
  /* One work-item per counter (or chunk of counters); each counter fills 4 f32 or 2 f64. */
  clt_launch l = clt__cl_launch_1d(d, (int64_t)clt__random_counters(out->dtype, out->numel));
  cl_ulong n = (cl_ulong)out->numel, step = l.chunk, s = seed, o = offset;
  cl_event ev = NULL;
  pthread_mutex_lock(&d->lock);
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &out->storage->mem);
  err |= clSetKernelArg(k, 1, sizeof n, &n);
  err |= clSetKernelArg(k, 2, sizeof step, &step);
  err |= clSetKernelArg(k, 3, sizeof s, &s);
  err |= clSetKernelArg(k, 4, sizeof o, &o);
  if (err != CL_SUCCESS) {
    pthread_mutex_unlock(&d->lock);
    clt__waitlist_clear(&wl);
    return clt__error(CLT_ERR_OPENCL, fn, "setting the arguments of kernel %s on %s failed", kname,
                      d->name);
  }
  st = clt__cl_enqueue(d, k, &l, &wl, fn, &ev);
  if (st == CLT_OK)
    clt__note_command(ev, d, NULL, 0, writes, 1);
  pthread_mutex_unlock(&d->lock);
  clt__waitlist_clear(&wl);
  if (st != CLT_OK)
    return st;
  return clt__command_done(ev, d, fn);
}
