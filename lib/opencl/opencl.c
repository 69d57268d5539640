/* SPDX-License-Identifier: MIT */
/* opencl/opencl.c - the OpenCL backend's table, fill, upload and the launch sequence
 * (clt__cl_submit), which every command on a device's queue goes through. */
#include "cl-internal.h"

#include <stdio.h>
#include <string.h>

clt_launch clt__cl_launch_1d(const clt_device *dev, int64_t n) {
  clt_launch l;
  if (dev->chunked) {
    /* A few contiguous chunks per compute unit, each a multiple of 64 elements so vector loops
     * stay aligned; one work-item per work-group so every core takes whole chunks. */
    uint64_t items = (uint64_t)dev->compute_units * 4;
    uint64_t chunk = ((uint64_t)n + items - 1) / items;
    chunk = (chunk + 63) / 64 * 64;
    if (chunk == 0)
      chunk = 64;
    l.global = (size_t)(((uint64_t)n + chunk - 1) / chunk);
    if (l.global == 0)
      l.global = 1;
    l.local = 1;
    l.chunk = chunk;
  } else {
    /* Grid-stride: enough work-groups of 256 to fill the device, neighbours coalesced. */
    size_t local = dev->max_work_group >= 256 ? 256 : dev->max_work_group;
    uint64_t groups = ((uint64_t)n + local - 1) / local;
    uint64_t cap = (uint64_t)dev->compute_units * 16;
    if (groups > cap)
      groups = cap;
    if (groups == 0)
      groups = 1;
    l.global = (size_t)(groups * local);
    l.local = local;
    l.chunk = l.global;
  }
  return l;
}

const char *clt__cl_base_options(const clt_device *dev, bool need_fp64) {
  bool chunked = dev->chunked;
  if (need_fp64)
    return chunked ? "#define CLT_CHUNKED 1\n#define CLT_FP64\n"
                   : "#define CLT_CHUNKED 0\n#define CLT_FP64\n";
  return chunked ? "#define CLT_CHUNKED 1\n" : "#define CLT_CHUNKED 0\n";
}

bool clt__cl_can_prefetch(const clt_device *dev) {
  return dev->kind == CLT_DEVICE_CL_CPU &&
         strcmp(dev->platform_name, "Portable Computing Language") == 0;
}

clt_status clt__cl_enqueue(clt_device *dev, cl_kernel k, const clt_launch *l, clt_waitlist *wl,
                           const char *fn, cl_event *ev) {
  cl_int err =
      clEnqueueNDRangeKernel(clt__cl(dev)->queue, k, 1, NULL, &l->global,
                             l->local ? &l->local : NULL, wl->n, wl->n ? wl->ev : NULL, ev);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clEnqueueNDRangeKernel", dev);
  return CLT_OK;
}

clt_status clt__cl_submit(clt_device *d, clt_storage *const *reads, int nreads,
                          clt_storage *const *writes, int nwrites, clt_cl_enqueue_fn enqueue,
                          void *ctx, const char *fn, cl_event *keep) {
  clt_waitlist wl = {.n = 0};
  clt_status st = clt__waitlist_for(&wl, d, reads, nreads, writes, nwrites, fn);
  if (st != CLT_OK)
    return st;
  cl_event ev = NULL;
  pthread_mutex_lock(&d->lock);
  st = enqueue(d, &wl, ctx, fn, &ev);
  if (st == CLT_OK && ev)
    clt__note_command(ev, d, reads, nreads, writes, nwrites);
  pthread_mutex_unlock(&d->lock);
  clt__waitlist_clear(&wl);
  if (st != CLT_OK) {
    if (ev) /* enqueued, but a later step failed (the native matmul's clean-up hook) */
      clReleaseEvent(ev);
    return st;
  }
  if (keep) {
    *keep = ev;
    return CLT_OK;
  }
  return ev ? clt__command_done(ev, d, fn) : CLT_OK;
}

typedef struct kernel_run {
  cl_kernel k;
  const clt_launch *l;
  const clt_cl_arg *args;
  int nargs;
} kernel_run;

static clt_status enqueue_kernel(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                 cl_event *ev) {
  const kernel_run *r = ctx;
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < r->nargs; i++)
    err |= clSetKernelArg(r->k, (cl_uint)i, r->args[i].size, r->args[i].value);
  if (err != CL_SUCCESS) {
    char name[128] = "?";
    clGetKernelInfo(r->k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
    return clt__error(CLT_ERR_OPENCL, fn, "setting the arguments of kernel %s on %s failed", name,
                      d->name);
  }
  return clt__cl_enqueue(d, r->k, r->l, wl, fn, ev);
}

clt_status clt__cl_run(clt_device *d, cl_kernel k, const clt_launch *l, const clt_cl_arg *args,
                       int nargs, clt_storage *const *reads, int nreads, clt_storage *const *writes,
                       int nwrites, const char *fn) {
  kernel_run r = {k, l, args, nargs};
  return clt__cl_submit(d, reads, nreads, writes, nwrites, enqueue_kernel, &r, fn, NULL);
}

typedef struct fill_args {
  const clt_tensor *out;
  const void *pattern;
} fill_args;

static clt_status enqueue_fill(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                               cl_event *ev) {
  const fill_args *a = ctx;
  cl_int err = clEnqueueFillBuffer(clt__cl(d)->queue, a->out->storage->buf, a->pattern,
                                   clt_dtype_size(a->out->dtype), a->out->offset, a->out->nbytes,
                                   wl->n, wl->n ? wl->ev : NULL, ev);
  return err == CL_SUCCESS ? CLT_OK : clt__cl_error(err, fn, "clEnqueueFillBuffer", d);
}

static clt_status cl_fill(clt_tensor *out, const void *pattern, const char *fn) {
  fill_args a = {out, pattern};
  return clt__cl_submit(out->storage->dev, NULL, 0, &out->storage, 1, enqueue_fill, &a, fn, NULL);
}

typedef struct upload_args {
  const clt_tensor *out;
  const void *src;
} upload_args;

static clt_status enqueue_upload(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                 cl_event *ev) {
  const upload_args *a = ctx;
  cl_int err =
      clEnqueueWriteBuffer(clt__cl(d)->queue, a->out->storage->buf, CL_FALSE, a->out->offset,
                           a->out->nbytes, a->src, wl->n, wl->n ? wl->ev : NULL, ev);
  return err == CL_SUCCESS ? CLT_OK : clt__cl_error(err, fn, "clEnqueueWriteBuffer", d);
}

static clt_status cl_upload(clt_tensor *out, const void *src, const char *fn) {
  clt_device *d = out->storage->dev;
  upload_args a = {out, src};
  cl_event ev;
  clt_status st = clt__cl_submit(d, NULL, 0, &out->storage, 1, enqueue_upload, &a, fn, &ev);
  if (st != CLT_OK)
    return st;
  /* The caller may reuse src as soon as we return: wait (outside the queue's lock). */
  st = clt__wait_command(ev, d, fn, "clEnqueueWriteBuffer");
  clReleaseEvent(ev);
  if (st != CLT_OK)
    return st;
  clt__count_h2d(d, out->nbytes);
  return CLT_OK;
}

const struct clt_backend clt__opencl_backend = {
    .name = "opencl",
    .compute.fill = cl_fill,
    .compute.upload = cl_upload,
    .compute.elementwise = clt__cl_elementwise,
    .compute.reduce = clt__cl_reduce,
    .compute.fill_random = clt__cl_fill_random,
    .compute.matmul = clt__cl_matmul,
    .compute.matmul_path = clt__cl_matmul_path,
    .compute.index_select = clt__cl_index_select,
    .compute.arange = clt__cl_arange,
    .compute.optim_step = clt__cl_optim_step,
    .compute.warm = clt__cl_matmul_build,
    .memory.copy = clt__cl_copy,
    .memory.read = clt__cl_read,
    .device.event_record = clt__cl_event_record,
    .device.event_wait = clt__cl_event_wait,
    .device.event_elapsed = clt__cl_event_elapsed,
    .device.event_release = clt__cl_event_release,
    .memory.buffer_alloc = clt__cl_buffer_alloc,
    .memory.pinned_alloc = clt__cl_pinned_alloc,
    .memory.error_name = clt__cl_error_name,
    .memory.error_is_oom = clt__cl_error_is_oom,
    .memory.buffer_retain = clt__cl_buffer_retain,
    .memory.buffer_free = clt__cl_buffer_free,
    .memory.storage_wait = clt__cl_storage_wait,
    .compute.fused = clt__cl_fused,
    .memory.storage_drop = clt__cl_storage_drop,
    .device.discover = clt__cl_discover,
    .device.synchronize = clt__cl_synchronize,
    .staging.stage_begin = clt__cl_stage_begin,
    .staging.stage_read = clt__cl_stage_read,
    .staging.stage_write = clt__cl_stage_write,
    .staging.stage_finish = clt__cl_stage_finish,
    .staging.stage_keep_alive = clt__cl_stage_keep_alive,
    .staging.stage_wait = clt__cl_stage_wait,
    .staging.stage_retain = clt__cl_stage_retain,
    .staging.stage_release = clt__cl_stage_release,
    .staging.stage_map = clt__cl_stage_map,
    .staging.stage_unmap = clt__cl_stage_unmap,
};
