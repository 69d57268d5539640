/* SPDX-License-Identifier: MIT */
/* opencl/transfer.c - copies between host memory and OpenCL buffers, and between buffers of one
 * context, each one command through clt__cl_submit. */
#include "cl-internal.h"

typedef struct copy_args {
  clt_tensor *dst;
  const clt_tensor *src;
  enum { H2D, D2H, D2D } kind;
} copy_args;

static const char *const copy_what[] = {"clEnqueueWriteBuffer (host to device)",
                                        "clEnqueueReadBuffer (device to host)",
                                        "clEnqueueCopyBuffer (device to device)"};

static clt_status enqueue_copy(clt_device *q, clt_waitlist *wl, void *ctx, const char *fn,
                               cl_event *ev) {
  const copy_args *a = ctx;
  clt_storage *ds = a->dst->storage, *ss = a->src->storage;
  size_t n = a->src->nbytes;
  const cl_event *wait = wl->n ? wl->ev : NULL;
  cl_int err;
  if (a->kind == H2D)
    err = clEnqueueWriteBuffer(clt__cl(q)->queue, ds->buf, CL_FALSE, a->dst->offset, n,
                               clt__host_ptr(a->src), wl->n, wait, ev);
  else if (a->kind == D2H)
    err = clEnqueueReadBuffer(clt__cl(q)->queue, ss->buf, CL_FALSE, a->src->offset, n,
                              clt__host_ptr(a->dst), wl->n, wait, ev);
  else
    err = clEnqueueCopyBuffer(clt__cl(q)->queue, ss->buf, ds->buf, a->src->offset, a->dst->offset,
                              n, wl->n, wait, ev);
  return err == CL_SUCCESS ? CLT_OK : clt__cl_error(err, fn, copy_what[a->kind], q);
}

clt_status clt__cl_copy(clt_device *q, clt_tensor *dst, const clt_tensor *src, const char *fn) {
  clt_storage *ds = dst->storage, *ss = src->storage;
  copy_args a = {dst, src,
                 ss->dev->kind == CLT_DEVICE_HOST   ? H2D
                 : ds->dev->kind == CLT_DEVICE_HOST ? D2H
                                                    : D2D};
  clt_storage *reads[1] = {ss}, *writes[1] = {ds};
  cl_event ev;
  clt_status st = clt__cl_submit(q, reads, 1, writes, 1, enqueue_copy, &a, fn, &ev);
  if (st != CLT_OK)
    return st;
  if (a.kind != D2D) /* host memory must outlive the command */
    clt__keep_alive(ev, a.kind == H2D ? ss : ds, fn);
  return clt__command_done(ev, q, fn);
}

typedef struct read_args {
  const clt_tensor *t;
  void *dst;
} read_args;

static clt_status enqueue_read(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                               cl_event *ev) {
  const read_args *a = ctx;
  cl_int err = clEnqueueReadBuffer(clt__cl(d)->queue, a->t->storage->buf, CL_FALSE, a->t->offset,
                                   a->t->nbytes, a->dst, wl->n, wl->n ? wl->ev : NULL, ev);
  return err == CL_SUCCESS ? CLT_OK : clt__cl_error(err, fn, "clEnqueueReadBuffer", d);
}

clt_status clt__cl_read(const clt_tensor *t, void *dst, const char *fn) {
  clt_device *d = t->storage->dev;
  read_args a = {t, dst};
  /* Not a blocking read: the queue's lock is held from the enqueue to the note only, and the
   * wait comes after, so other threads keep enqueueing meanwhile. */
  cl_event ev;
  clt_status st = clt__cl_submit(d, &t->storage, 1, NULL, 0, enqueue_read, &a, fn, &ev);
  if (st != CLT_OK)
    return st;
  st = clt__wait_command(ev, d, fn, "clEnqueueReadBuffer");
  clReleaseEvent(ev);
  return st;
}
