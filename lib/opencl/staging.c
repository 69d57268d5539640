/* SPDX-License-Identifier: MIT */
/* opencl/staging.c - the OpenCL backend's staging members (struct clt_backend, lib/backend.h),
 * through which libclt_mpi copies device tensors to and from host memory (lib/staging.c,
 * lib/clt-internal-mpi.h): asynchronous reads and writes on the device's in-order queue, whose
 * events are the handles, ordered by the backend's event bookkeeping (opencl/order.c). */
#include "cl-internal.h"

_Static_assert(sizeof(((clt_waitlist *)0)->ev) / sizeof(cl_event) <= CLT__STAGE_MAX_WAIT,
               "clt_stage's wait list must hold a clt_waitlist");

/* The storages the session's copies read and write: src's, unless dst shares it (the write
 * covers the read), and dst's. */
static void accesses(const clt_stage *s, clt_storage **reads, clt_storage **writes) {
  *reads = s->src && (!s->dst || s->src->storage != s->dst->storage) ? s->src->storage : NULL;
  *writes = s->dst ? s->dst->storage : NULL;
}

clt_status clt__cl_stage_begin(clt_stage *s) {
  const clt_tensor *t = s->dst ? s->dst : s->src;
  if (!t->storage->buf)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, s->fn, "the tensor on %s has no OpenCL buffer",
                      s->dev->name);
  clt_storage *reads[1], *writes[1];
  accesses(s, reads, writes);
  clt_waitlist wl = {.n = 0};
  clt_status st = clt__waitlist_for(&wl, s->dev, reads, 1, writes, 1, s->fn);
  if (st != CLT_OK)
    return st;
  for (cl_uint i = 0; i < wl.n; i++)
    s->wait[i] = wl.ev[i]; /* the references move to the session */
  s->nwait = (int)wl.n;
  return CLT_OK;
}

/* Enqueues one copy of the session: src's bytes into host, or host into dst's. Its wait list:
 * after, and for the session's first copy s->wait, which it then no longer needs. */
static clt_status enqueue_copy(clt_stage *s, bool writing, size_t off, size_t len, void *host,
                               void *after, void **done) {
  cl_event wl[CLT__STAGE_MAX_WAIT + 1], ev = NULL;
  cl_uint n = 0;
  for (int i = 0; i < s->nwait; i++)
    wl[n++] = s->wait[i];
  if (after)
    wl[n++] = after;
  cl_command_queue q = clt__cl(s->dev)->queue;
  cl_int err = writing
                   ? clEnqueueWriteBuffer(q, s->dst->storage->buf, CL_FALSE, s->dst->offset + off,
                                          len, host, n, n ? wl : NULL, &ev)
                   : clEnqueueReadBuffer(q, s->src->storage->buf, CL_FALSE, s->src->offset + off,
                                         len, host, n, n ? wl : NULL, &ev);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, s->fn,
                         writing ? "clEnqueueWriteBuffer (host staging to device)"
                                 : "clEnqueueReadBuffer (device to host staging)",
                         s->dev);
  for (int i = 0; i < s->nwait; i++)
    clReleaseEvent(s->wait[i]);
  s->nwait = 0;
  *done = ev;
  return CLT_OK;
}

clt_status clt__cl_stage_read(clt_stage *s, size_t off, size_t len, void *host, void *after,
                              void **done) {
  return enqueue_copy(s, false, off, len, host, after, done);
}

clt_status clt__cl_stage_write(clt_stage *s, size_t off, size_t len, const void *host, void *after,
                               void **done) {
  return enqueue_copy(s, true, off, len, (void *)host, after, done);
}

clt_status clt__cl_stage_finish(clt_stage *s, bool wrote) {
  clt_device *d = s->dev;
  clt_storage *reads[1], *writes[1];
  accesses(s, reads, writes);
  if (!wrote) {
    reads[0] = s->src ? s->src->storage : NULL;
    writes[0] = NULL;
  }
  /* Noted under the queue's lock, in enqueue order (the protocol of clt_device.lock); the queue
   * is in order, so the marker completes after every earlier copy of the session. */
  cl_event mark = NULL;
  pthread_mutex_lock(&d->lock);
  cl_int err = clEnqueueMarkerWithWaitList(clt__cl(d)->queue, 0, NULL, &mark);
  if (err == CL_SUCCESS)
    clt__note_command(mark, d, reads, 1, writes, 1);
  pthread_mutex_unlock(&d->lock);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, s->fn, "clEnqueueMarkerWithWaitList (end of staging)", d);
  return clt__command_done(mark, d, s->fn);
}

void clt__cl_stage_keep_alive(void *done, clt_storage *k, const char *fn) {
  clt__keep_alive(done, k, fn);
}

clt_status clt__cl_stage_wait(clt_device *dev, void *done, const char *fn, const char *what) {
  return clt__wait_command(done, dev, fn, what);
}

void clt__cl_stage_retain(void *done) { clRetainEvent(done); }

void clt__cl_stage_release(void *done) { clReleaseEvent(done); }

/* Maps len bytes of buf from off with flags, blocking, after s->wait (the first command of the
 * session); records the mapping in s. */
static clt_status map_range(clt_stage *s, cl_mem buf, size_t off, size_t len, cl_map_flags flags,
                            void **ptr) {
  cl_event wl[CLT__STAGE_MAX_WAIT];
  cl_uint n = 0;
  for (int i = 0; i < s->nwait; i++)
    wl[n++] = s->wait[i];
  cl_int err = CL_SUCCESS;
  void *p = clEnqueueMapBuffer(clt__cl(s->dev)->queue, buf, CL_TRUE, flags, off, len, n,
                               n ? wl : NULL, NULL, &err);
  if (err != CL_SUCCESS || !p)
    return clt__cl_error(err != CL_SUCCESS ? err : CL_MAP_FAILURE, s->fn,
                         "clEnqueueMapBuffer (MPI on the tensor's memory)", s->dev);
  for (int i = 0; i < s->nwait; i++)
    clReleaseEvent(s->wait[i]);
  s->nwait = 0;
  s->map_buf[s->nmaps] = buf;
  s->map_ptr[s->nmaps++] = p;
  *ptr = p;
  return CLT_OK;
}

clt_status clt__cl_stage_map(clt_stage *s, size_t src_off, size_t dst_off, size_t len,
                             void **src_ptr, void **dst_ptr) {
  const clt_tensor *src = s->src, *dst = s->dst;
  if (src && dst && src->storage == dst->storage && src->offset + src_off != dst->offset + dst_off)
    return clt__error(CLT_ERR_UNSUPPORTED, s->fn, "overlapping ranges are not mapped");
  clt_status st = CLT_OK;
  if (src && dst && src->storage == dst->storage) { /* allreduce: in place */
    st = map_range(s, src->storage->buf, src->offset + src_off, len, CL_MAP_READ | CL_MAP_WRITE,
                   src_ptr);
    *dst_ptr = *src_ptr;
    return st;
  }
  if (src)
    st = map_range(s, src->storage->buf, src->offset + src_off, len, CL_MAP_READ, src_ptr);
  if (st == CLT_OK && dst)
    st = map_range(s, dst->storage->buf, dst->offset + dst_off, len, CL_MAP_WRITE, dst_ptr);
  if (st != CLT_OK && s->nmaps) { /* the first one mapped: undo it */
    void *ev = NULL;
    if (clt__cl_stage_unmap(s, &ev) == CLT_OK && ev) {
      clWaitForEvents(1, (cl_event *)&ev);
      clReleaseEvent(ev);
    }
  }
  return st;
}

clt_status clt__cl_stage_unmap(clt_stage *s, void **done) {
  clt_status st = CLT_OK;
  *done = NULL;
  for (int i = 0; i < s->nmaps; i++) {
    cl_event ev = NULL;
    cl_int err =
        clEnqueueUnmapMemObject(clt__cl(s->dev)->queue, s->map_buf[i], s->map_ptr[i], 0, NULL, &ev);
    if (err != CL_SUCCESS) {
      if (st == CLT_OK)
        st = clt__cl_error(err, s->fn, "clEnqueueUnmapMemObject (MPI on the tensor's memory)",
                           s->dev);
      continue;
    }
    if (*done)
      clReleaseEvent(*done);
    *done = ev;
  }
  s->nmaps = 0;
  return st;
}
