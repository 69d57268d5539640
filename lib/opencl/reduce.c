/* SPDX-License-Identifier: MIT */
/* opencl/reduce.c - launches kernels/reduce.cl: whole-tensor reductions in two passes (partials
 * per work-group, then one work-group combines them), reductions along a dimension with one
 * work-item per result element. */
#include "cl-internal.h"

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

/* The whole-tensor reduction's two passes, enqueued as one command of clt__cl_submit. */
typedef struct whole_run {
  cl_kernel kpartial, kfinal;
  const clt_launch *l, *lf;
  const char *name;
  clt_storage *in, *out, *partial, *partial_idx;
  cl_mem in_mem, pidx;
  cl_ulong n, step, count;
  cl_uint groups;
  size_t acc_size, final_local;
  cl_event ev1, ev2; /* the passes' events, for the caller to release */
} whole_run;

/* Leaves *ev NULL: the two passes note their storages here, each against its own event. */
static clt_status enqueue_whole(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                cl_event *ev) {
  whole_run *w = ctx;
  (void)ev;
  clt_status st = CLT_OK;
  cl_int err = clSetKernelArg(w->kpartial, 0, sizeof(cl_mem), &w->in_mem);
  err |= clSetKernelArg(w->kpartial, 1, sizeof w->n, &w->n);
  err |= clSetKernelArg(w->kpartial, 2, sizeof w->step, &w->step);
  err |= clSetKernelArg(w->kpartial, 3, sizeof(cl_mem), &w->partial->buf);
  err |= clSetKernelArg(w->kpartial, 4, sizeof(cl_mem), &w->pidx);
  err |= clSetKernelArg(w->kpartial, 5, w->l->local * w->acc_size, NULL);
  err |= clSetKernelArg(w->kpartial, 6, w->l->local * 8, NULL);
  err |= clSetKernelArg(w->kfinal, 0, sizeof(cl_mem), &w->partial->buf);
  err |= clSetKernelArg(w->kfinal, 1, sizeof(cl_mem), &w->pidx);
  err |= clSetKernelArg(w->kfinal, 2, sizeof w->groups, &w->groups);
  err |= clSetKernelArg(w->kfinal, 3, sizeof w->count, &w->count);
  err |= clSetKernelArg(w->kfinal, 4, sizeof(cl_mem), &w->out->buf);
  err |= clSetKernelArg(w->kfinal, 5, w->final_local * w->acc_size, NULL);
  err |= clSetKernelArg(w->kfinal, 6, w->final_local * 8, NULL);
  if (err != CL_SUCCESS)
    st = clt__error(CLT_ERR_OPENCL, fn, "setting the arguments of %s on %s failed", w->name,
                    d->name);
  if (st == CLT_OK)
    st = clt__cl_enqueue(d, w->kpartial, w->l, wl, fn, &w->ev1);
  if (st == CLT_OK) {
    clt_waitlist none = {.n = 0}; /* in-order queue: the final pass follows the partial one */
    st = clt__cl_enqueue(d, w->kfinal, w->lf, &none, fn, &w->ev2);
  }
  /* The scratch buffers go back to the cache carrying the final pass's event, so their reuse
   * waits for it. If the final pass could not be enqueued, the partial pass (if any) still
   * wrote them. */
  cl_event last = w->ev2 ? w->ev2 : w->ev1;
  if (last) {
    clt_storage *scratch[2] = {w->partial, w->partial_idx};
    clt__note_command(last, d, NULL, 0, scratch, 2);
  }
  if (w->ev1)
    clt__storage_note(w->in, w->ev1, clt__cl(d)->queue, false);
  if (w->ev2)
    clt__storage_note(w->out, w->ev2, clt__cl(d)->queue, true);
  return st;
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
  /* A program not yet built: launched behind its build (deferred.c), the caller not waiting. */
  bool defer = clt__deferred_wanted(d, "reduce", defines);
  cl_kernel kpartial = NULL, kfinal = NULL;
  clt_status st;
  if (!defer && ((st = clt__get_kernel(d, "reduce", defines, kp, fn, &kpartial)) != CLT_OK ||
                 (whole && (st = clt__get_kernel(d, "reduce", defines, kf, fn, &kfinal)) != CLT_OK)))
    return st;

  clt_storage *reads[1] = {in->storage}, *writes[3] = {out->storage, NULL, NULL};
  cl_mem in_mem = in->storage->buf;

  if (!whole) {
    cl_ulong outer = (cl_ulong)red->outer, r = (cl_ulong)red->r, inner = (cl_ulong)red->inner;
    size_t local = d->chunked ? 1 : 64;
    if (local > d->max_work_group)
      local = 1;
    clt_launch l = {.global = (size_t)((outer * inner + local - 1) / local * local),
                    .local = local,
                    .chunk = 0};
    if (!in_mem) /* nothing to read (r = 0): the output stands in */
      in_mem = out->storage->buf;
    if (defer) {
      clt_cl_deferred_kernel k = {.launch = l};
      snprintf(k.name, sizeof k.name, "%s", kp);
      clt__deferred_mem(&k, in_mem);
      clt__deferred_mem(&k, out->storage->buf);
      clt__deferred_value(&k, sizeof outer, &outer);
      clt__deferred_value(&k, sizeof r, &r);
      clt__deferred_value(&k, sizeof inner, &inner);
      return clt__cl_run_deferred(d, "reduce", defines, &k, 1, reads, 1, writes, 1, fn, NULL);
    }
    clt_cl_arg args[] = {{sizeof(cl_mem), &in_mem},
                         {sizeof(cl_mem), &out->storage->buf},
                         {sizeof outer, &outer},
                         {sizeof r, &r},
                         {sizeof inner, &inner}};
    return clt__cl_run(d, kpartial, &l, args, 5, reads, 1, writes, 1, fn);
  }

  clt_launch l = clt__cl_launch_1d(d, in->numel > 0 ? in->numel : 1);
  if (l.local == 0)
    l.local = 1;
  l.local = pow2_at_most(l.local);
  cl_uint groups = (cl_uint)(l.global / l.local);
  clt_storage *partial = NULL;
  if ((st = clt__storage_alloc(d, (size_t)groups * acc_size, fn, &partial)) != CLT_OK)
    return st;
  size_t final_local = pow2_at_most(d->max_work_group < 64 ? d->max_work_group : 64);
  if (d->chunked)
    final_local = 1; /* a handful of partials: one work-item combines them in order */
  clt_launch lf = {.global = final_local, .local = final_local, .chunk = 0};
  if (!in_mem) /* an empty tensor has no buffer: the partial buffer stands in, unread */
    in_mem = partial->buf;
  clt_storage *partial_idx = NULL; /* the partials' indices (argmax) */
  if ((st = clt__storage_alloc(d, (size_t)groups * 8, fn, &partial_idx)) != CLT_OK) {
    clt__storage_release(partial);
    return st;
  }
  if (defer) {
    cl_ulong n = (cl_ulong)in->numel, step = l.chunk, count = (cl_ulong)red->r;
    clt_cl_deferred_kernel k[2] = {{.launch = l}, {.launch = lf}};
    snprintf(k[0].name, sizeof k[0].name, "%s", kp);
    clt__deferred_mem(&k[0], in_mem);
    clt__deferred_value(&k[0], sizeof n, &n);
    clt__deferred_value(&k[0], sizeof step, &step);
    clt__deferred_mem(&k[0], partial->buf);
    clt__deferred_mem(&k[0], partial_idx->buf);
    clt__deferred_local(&k[0], l.local * acc_size);
    clt__deferred_local(&k[0], l.local * 8);
    snprintf(k[1].name, sizeof k[1].name, "%s", kf);
    clt__deferred_mem(&k[1], partial->buf);
    clt__deferred_mem(&k[1], partial_idx->buf);
    clt__deferred_value(&k[1], sizeof groups, &groups);
    clt__deferred_value(&k[1], sizeof count, &count);
    clt__deferred_mem(&k[1], out->storage->buf);
    clt__deferred_local(&k[1], final_local * acc_size);
    clt__deferred_local(&k[1], final_local * 8);
    /* the scratch buffers are written too: their reuse waits for the barrier */
    writes[1] = partial;
    writes[2] = partial_idx;
    st = clt__cl_run_deferred(d, "reduce", defines, k, 2, reads, 1, writes, 3, fn, NULL);
    clt__storage_release(partial);
    clt__storage_release(partial_idx);
    return st;
  }
  whole_run w = {.kpartial = kpartial,
                 .kfinal = kfinal,
                 .l = &l,
                 .lf = &lf,
                 .name = name,
                 .in = in->storage,
                 .out = out->storage,
                 .partial = partial,
                 .partial_idx = partial_idx,
                 .in_mem = in_mem,
                 .pidx = partial_idx->buf,
                 .n = (cl_ulong)in->numel,
                 .step = l.chunk,
                 .count = (cl_ulong)red->r,
                 .groups = groups,
                 .acc_size = acc_size,
                 .final_local = final_local};
  st = clt__cl_submit(d, reads, 1, writes, 1, enqueue_whole, &w, fn, NULL);
  clt__storage_release(partial);
  clt__storage_release(partial_idx);
  if (w.ev2)
    st = clt__maybe_sync(w.ev2, d, fn);
  if (w.ev1)
    clReleaseEvent(w.ev1);
  if (w.ev2)
    clReleaseEvent(w.ev2);
  return st;
}
