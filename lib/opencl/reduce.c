/* opencl/reduce.c - launches kernels/reduce.cl: partial sums per work-group, then one
 * work-group combines them. */
#include "backend.h"

#include <stdio.h>

static size_t pow2_at_most(size_t n) {
  size_t p = 1;
  while (p * 2 <= n)
    p *= 2;
  return p;
}

clt_status clt__cl_sum(clt_tensor *out, const clt_tensor *in, const char *fn) {
  clt_device *d = out->storage->dev;
  bool is_float = clt__dtype_is_float(in->dtype);
  const char *acc = is_float ? clt__dtype_cl_type(in->dtype) : "ulong";
  size_t acc_size = is_float ? clt_dtype_size(in->dtype) : 8;
  char name[64], options[512];
  snprintf(name, sizeof name, "sum_%s", clt_dtype_name(in->dtype));
  snprintf(options, sizeof options,
           "%s#define NAME %s\n#define T %s\n#define ACC %s\n#define TO %s\n",
           clt__cl_base_options(d, in->dtype == CLT_F64), name, clt__dtype_cl_type(in->dtype), acc,
           clt__dtype_cl_type(out->dtype));
  char kp[80], kf[80];
  snprintf(kp, sizeof kp, "%s_partial", name);
  snprintf(kf, sizeof kf, "%s_final", name);
  cl_kernel kpartial, kfinal;
  clt_status st;
  if ((st = clt__get_kernel(d, "reduce", options, kp, fn, &kpartial)) != CLT_OK ||
      (st = clt__get_kernel(d, "reduce", options, kf, fn, &kfinal)) != CLT_OK)
    return st;

  clt_launch l = clt__cl_launch_1d(d, in->numel > 0 ? in->numel : 1);
  if (l.local == 0)
    l.local = 1;
  l.local = pow2_at_most(l.local);
  cl_uint groups = (cl_uint)(l.global / l.local);
  clt_storage *partial;
  if ((st = clt__storage_alloc(d, groups * acc_size, fn, &partial)) != CLT_OK)
    return st;

  clt_waitlist wl = {.n = 0};
  if ((st = clt__waitlist_add(&wl, in->storage, false, d->context, fn)) != CLT_OK ||
      (st = clt__waitlist_add(&wl, out->storage, true, d->context, fn)) != CLT_OK) {
    clt__waitlist_clear(&wl);
    clt__storage_release(partial);
    return st;
  }
  cl_ulong n = (cl_ulong)in->numel, step = l.chunk;
  size_t final_local = pow2_at_most(d->max_work_group < 64 ? d->max_work_group : 64);
  if (d->kind == CLT_DEVICE_CL_CPU)
    final_local = 1; /* a handful of partials: one work-item sums them in order */
  clt_launch lf = {.global = final_local, .local = final_local, .chunk = 0};
  cl_event ev1 = NULL, ev2 = NULL;
  cl_mem in_mem = in->storage->mem;
  cl_mem dummy = NULL;
  if (!in_mem) { /* an empty tensor has no buffer: the partial buffer stands in, unread */
    dummy = partial->mem;
    in_mem = dummy;
  }
  pthread_mutex_lock(&d->lock);
  cl_int err = clSetKernelArg(kpartial, 0, sizeof(cl_mem), &in_mem);
  err |= clSetKernelArg(kpartial, 1, sizeof n, &n);
  err |= clSetKernelArg(kpartial, 2, sizeof step, &step);
  err |= clSetKernelArg(kpartial, 3, sizeof(cl_mem), &partial->mem);
  err |= clSetKernelArg(kpartial, 4, l.local * acc_size, NULL);
  err |= clSetKernelArg(kfinal, 0, sizeof(cl_mem), &partial->mem);
  err |= clSetKernelArg(kfinal, 1, sizeof groups, &groups);
  err |= clSetKernelArg(kfinal, 2, sizeof(cl_mem), &out->storage->mem);
  err |= clSetKernelArg(kfinal, 3, final_local * acc_size, NULL);
  if (err != CL_SUCCESS)
    st = clt__error(CLT_ERR_OPENCL, fn, "setting the arguments of %s on %s failed", name, d->name);
  if (st == CLT_OK)
    st = clt__cl_enqueue(d, kpartial, &l, &wl, fn, &ev1);
  if (st == CLT_OK) {
    clt_waitlist none = {.n = 0}; /* in-order queue: the final pass follows the partial one */
    st = clt__cl_enqueue(d, kfinal, &lf, &none, fn, &ev2);
  }
  pthread_mutex_unlock(&d->lock);
  clt__waitlist_clear(&wl);
  clt__storage_release(partial); /* OpenCL keeps the buffer until the kernels finish */
  if (ev1)
    clt__storage_note(in->storage, ev1, d->queue, false);
  if (ev2) {
    clt__storage_note(out->storage, ev2, d->queue, true);
    st = clt__maybe_sync(ev2, d, fn);
  }
  if (ev1)
    clReleaseEvent(ev1);
  if (ev2)
    clReleaseEvent(ev2);
  return st;
}
