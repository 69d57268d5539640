/* opencl/reduce.c - launches kernels/reduce.cl: whole-tensor reductions in two passes (partials
 * per work-group, then one work-group combines them), reductions along a dimension with one
 * work-item per result element. */
#include "backend.h"

#include <stdio.h>

static size_t pow2_at_most(size_t n) {
  size_t p = 1;
  while (p * 2 <= n)
    p *= 2;
  return p;
}

/* The identity of the reduction, as an OpenCL C literal of the accumulator type. */
static const char *identity(clt_reduce_kind kind, clt_dtype dt) {
  if (kind == CLT__RED_SUM || kind == CLT__RED_MEAN)
    return "0";
  bool low = kind != CLT__RED_MIN; /* max and argmax start from the lowest value */
  switch (dt) {
  case CLT_F32:
  case CLT_F64:
    return low ? "(-INFINITY)" : "INFINITY";
  case CLT_I32:
    return low ? "(-2147483647-1)" : "2147483647";
  case CLT_I64:
    return low ? "(-9223372036854775807L-1)" : "9223372036854775807L";
  default:
    return low ? "0" : "255";
  }
}

clt_status clt__cl_reduce(const clt_reduce *red, clt_tensor *out, const clt_tensor *in) {
  const char *fn = red->fn;
  clt_device *d = out->storage->dev;
  bool is_float = clt__dtype_is_float(in->dtype);
  bool int_sum = !is_float && red->kind == CLT__RED_SUM;
  const char *acc = int_sum ? "ulong" : clt__dtype_cl_type(in->dtype);
  size_t acc_size = int_sum ? 8 : clt_dtype_size(in->dtype);
  char name[64], defines[768];
  snprintf(name, sizeof name, "%s_%s", red->name, clt_dtype_name(in->dtype));
  snprintf(defines, sizeof defines,
           "%s#define NAME %s\n#define T %s\n#define ACC %s\n#define TO %s\n#define RED_KIND %d\n"
           "#define CLT_FLOAT %d\n#define RED_INIT ((ACC)%s)\n",
           clt__cl_base_options(d, in->dtype == CLT_F64), name, clt__dtype_cl_type(in->dtype), acc,
           clt__dtype_cl_type(out->dtype), (int)red->kind, is_float ? 1 : 0,
           identity(red->kind, in->dtype));
  bool whole = red->outer * red->inner == 1;
  char kp[80], kf[80];
  snprintf(kp, sizeof kp, whole ? "%s_partial" : "%s_axis", name);
  snprintf(kf, sizeof kf, "%s_final", name);
  cl_kernel kpartial, kfinal = NULL;
  clt_status st;
  if ((st = clt__get_kernel(d, "reduce", defines, kp, fn, &kpartial)) != CLT_OK ||
      (whole && (st = clt__get_kernel(d, "reduce", defines, kf, fn, &kfinal)) != CLT_OK))
    return st;

  clt_storage *reads[1] = {in->storage}, *writes[1] = {out->storage};
  clt_waitlist wl = {.n = 0};
  if ((st = clt__waitlist_for(&wl, d, reads, 1, writes, 1, fn)) != CLT_OK)
    return st;
  cl_event ev1 = NULL, ev2 = NULL;
  cl_mem in_mem = in->storage->mem;
  clt_storage *partial = NULL;
  cl_int err;

  if (!whole) {
    cl_ulong outer = (cl_ulong)red->outer, r = (cl_ulong)red->r, inner = (cl_ulong)red->inner;
    size_t local = d->chunked ? 1 : 64;
    if (local > d->max_work_group)
      local = 1;
    clt_launch l = {.global = (size_t)((outer * inner + local - 1) / local * local),
                    .local = local,
                    .chunk = 0};
    if (!in_mem) /* nothing to read (r = 0): the output stands in */
      in_mem = out->storage->mem;
    pthread_mutex_lock(&d->lock);
    err = clSetKernelArg(kpartial, 0, sizeof(cl_mem), &in_mem);
    err |= clSetKernelArg(kpartial, 1, sizeof(cl_mem), &out->storage->mem);
    err |= clSetKernelArg(kpartial, 2, sizeof outer, &outer);
    err |= clSetKernelArg(kpartial, 3, sizeof r, &r);
    err |= clSetKernelArg(kpartial, 4, sizeof inner, &inner);
    if (err != CL_SUCCESS)
      st = clt__error(CLT_ERR_OPENCL, fn, "setting the arguments of %s on %s failed", kp, d->name);
    else if ((st = clt__cl_enqueue(d, kpartial, &l, &wl, fn, &ev2)) == CLT_OK)
      clt__note_command(ev2, d, reads, 1, writes, 1);
    pthread_mutex_unlock(&d->lock);
    clt__waitlist_clear(&wl);
    return st == CLT_OK ? clt__command_done(ev2, d, fn) : st;
  }

  clt_launch l = clt__cl_launch_1d(d, in->numel > 0 ? in->numel : 1);
  if (l.local == 0)
    l.local = 1;
  l.local = pow2_at_most(l.local);
  cl_uint groups = (cl_uint)(l.global / l.local);
  if ((st = clt__storage_alloc(d, (size_t)groups * acc_size, fn, &partial)) != CLT_OK) {
    clt__waitlist_clear(&wl);
    return st;
  }
  cl_mem pidx = NULL;
  cl_ulong n = (cl_ulong)in->numel, step = l.chunk, count = (cl_ulong)red->r;
  size_t final_local = pow2_at_most(d->max_work_group < 64 ? d->max_work_group : 64);
  if (d->chunked)
    final_local = 1; /* a handful of partials: one work-item combines them in order */
  clt_launch lf = {.global = final_local, .local = final_local, .chunk = 0};
  if (!in_mem) /* an empty tensor has no buffer: the partial buffer stands in, unread */
    in_mem = partial->mem;
  clt_storage *partial_idx = NULL; /* the partials' indices (argmax) */
  if ((st = clt__storage_alloc(d, (size_t)groups * 8, fn, &partial_idx)) != CLT_OK) {
    clt__storage_release(partial);
    clt__waitlist_clear(&wl);
    return st;
  }
  pidx = partial_idx->mem;
  pthread_mutex_lock(&d->lock);
  err = clSetKernelArg(kpartial, 0, sizeof(cl_mem), &in_mem);
  err |= clSetKernelArg(kpartial, 1, sizeof n, &n);
  err |= clSetKernelArg(kpartial, 2, sizeof step, &step);
  err |= clSetKernelArg(kpartial, 3, sizeof(cl_mem), &partial->mem);
  err |= clSetKernelArg(kpartial, 4, sizeof(cl_mem), &pidx);
  err |= clSetKernelArg(kpartial, 5, l.local * acc_size, NULL);
  err |= clSetKernelArg(kpartial, 6, l.local * 8, NULL);
  err |= clSetKernelArg(kfinal, 0, sizeof(cl_mem), &partial->mem);
  err |= clSetKernelArg(kfinal, 1, sizeof(cl_mem), &pidx);
  err |= clSetKernelArg(kfinal, 2, sizeof groups, &groups);
  err |= clSetKernelArg(kfinal, 3, sizeof count, &count);
  err |= clSetKernelArg(kfinal, 4, sizeof(cl_mem), &out->storage->mem);
  err |= clSetKernelArg(kfinal, 5, final_local * acc_size, NULL);
  err |= clSetKernelArg(kfinal, 6, final_local * 8, NULL);
  if (err != CL_SUCCESS)
    st = clt__error(CLT_ERR_OPENCL, fn, "setting the arguments of %s on %s failed", name, d->name);
  if (st == CLT_OK)
    st = clt__cl_enqueue(d, kpartial, &l, &wl, fn, &ev1);
  if (st == CLT_OK) {
    clt_waitlist none = {.n = 0}; /* in-order queue: the final pass follows the partial one */
    st = clt__cl_enqueue(d, kfinal, &lf, &none, fn, &ev2);
  }
  /* The scratch buffers go back to the cache carrying the final pass's event, so their reuse
   * waits for it. If the final pass could not be enqueued, the partial pass (if any) still
   * wrote them. */
  cl_event last = ev2 ? ev2 : ev1;
  if (last) {
    clt_storage *scratch[2] = {partial, partial_idx};
    clt__note_command(last, d, NULL, 0, scratch, 2);
  }
  if (ev1)
    clt__storage_note(in->storage, ev1, d->queue, false);
  if (ev2)
    clt__storage_note(out->storage, ev2, d->queue, true);
  pthread_mutex_unlock(&d->lock);
  clt__waitlist_clear(&wl);
  clt__storage_release(partial);
  clt__storage_release(partial_idx);
  if (ev2)
    st = clt__maybe_sync(ev2, d, fn);
  if (ev1)
    clReleaseEvent(ev1);
  if (ev2)
    clReleaseEvent(ev2);
  return st;
}
