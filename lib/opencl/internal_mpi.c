/* SPDX-License-Identifier: MIT */
/* opencl/internal_mpi.c - libclt's side of the interface with libclt_mpi
 * (lib/clt-internal-mpi.h): thin wrappers over the OpenCL backend's event bookkeeping
 * (opencl/order.c) that take public and OpenCL types only. */
#include "cl-internal.h"

#include "clt-internal-mpi.h"

_Static_assert(sizeof(((clt_waitlist *)0)->ev) / sizeof(cl_event) <= CLT_INTERNAL_MAX_WAIT,
               "clt_waitlist must fit the wait list of clt-internal-mpi.h");

int clt_internal_mpi_version(void) { return CLT_INTERNAL_MPI_VERSION; }

clt_status clt_internal_tensor_cl(const clt_tensor *t, cl_command_queue *queue, cl_mem *mem,
                                  size_t *offset, const char *fn) {
  clt_device *d = t->storage->dev;
  if (d->backend != &clt__opencl_backend || !t->storage->buf)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the tensor is on %s, not in OpenCL device memory; copy it to cpu or an "
                      "OpenCL device with clt_to() first",
                      d->name);
  *queue = clt__cl(d)->queue;
  *mem = t->storage->buf;
  *offset = t->offset;
  return CLT_OK;
}

void *clt_internal_host_ptr(const clt_tensor *t) { return clt__host_ptr(t); }

/* The storages a command reading src and writing dst reads and writes (clt_internal_wait_list). */
static void accesses(const clt_tensor *src, const clt_tensor *dst, clt_storage **reads,
                     clt_storage **writes) {
  *reads = src && (!dst || src->storage != dst->storage) ? src->storage : NULL;
  *writes = dst ? dst->storage : NULL;
}

clt_status clt_internal_wait_list(const clt_tensor *src, const clt_tensor *dst, cl_event *ev,
                                  cl_uint *n, const char *fn) {
  const clt_tensor *t = dst ? dst : src;
  clt_storage *reads[1], *writes[1];
  accesses(src, dst, reads, writes);
  clt_waitlist wl = {.n = 0};
  *n = 0;
  if (!t)
    return CLT_OK;
  clt_status st = clt__waitlist_for(&wl, t->storage->dev, reads, 1, writes, 1, fn);
  if (st != CLT_OK)
    return st;
  for (cl_uint i = 0; i < wl.n; i++)
    ev[i] = wl.ev[i]; /* the references move to the caller */
  *n = wl.n;
  return CLT_OK;
}

void clt_internal_events_release(cl_event *ev, cl_uint n) {
  for (cl_uint i = 0; i < n; i++)
    clReleaseEvent(ev[i]);
}

clt_status clt_internal_finish(const clt_tensor *src, const clt_tensor *dst, const char *fn) {
  const clt_tensor *t = dst ? dst : src;
  if (!t)
    return CLT_OK; /* nothing to record */
  clt_device *d = t->storage->dev;
  clt_storage *reads[1], *writes[1];
  accesses(src, dst, reads, writes);
  /* Noted under the queue's lock, in enqueue order (the protocol of clt_device.lock); the queue
   * is in order, so the marker completes after every earlier command of the sequence. */
  cl_event mark = NULL;
  pthread_mutex_lock(&d->lock);
  cl_int err = clEnqueueMarkerWithWaitList(clt__cl(d)->queue, 0, NULL, &mark);
  if (err == CL_SUCCESS)
    clt__note_command(mark, d, reads, 1, writes, 1);
  pthread_mutex_unlock(&d->lock);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clEnqueueMarkerWithWaitList (end of staging)", d);
  return clt__command_done(mark, d, fn);
}

void clt_internal_keep_alive(cl_event ev, const clt_tensor *t, const char *fn) {
  clt__keep_alive(ev, t->storage, fn);
}

clt_status clt_internal_cl_error(cl_int err, const char *fn, const char *what,
                                 const clt_device *dev) {
  return clt__cl_error(err, fn, what, dev);
}

void clt_internal_count_transfer(clt_device *dev, size_t d2h, size_t h2d) {
  clt__count_d2h(dev, d2h);
  clt__count_h2d(dev, h2d);
}
