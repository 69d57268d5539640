/* SPDX-License-Identifier: MIT */
/* opencl/interop.c - raw OpenCL handles for users' own OpenCL work (include/clt.h, "Your own
 * kernels and raw OpenCL handles"; docs/interop.md): a device's platform, device, context and
 * queue; a tensor's buffer; the acquire / release_to pair that orders work on a user's queue
 * against clt's through the storage's events (order.c); and clt_from_cl_mem, which wraps a
 * foreign buffer as DLPack's kDLOpenCL import does, through the same check of the buffer
 * (clt__cl_foreign_device, shared with lib/io/dlpack.c). */
#include "cl-internal.h"

#include <stdio.h>
#include <string.h>

/* ---- foreign buffers (also DLPack's import) ------------------------------------------------- */

clt_status clt__cl_foreign_device(cl_mem mem, clt_device *dev, int device_id, size_t need,
                                  const char *what, const char *fn, clt_device **out) {
  cl_context ctx = NULL;
  cl_int err = clt__cl_buffer_context(mem, &ctx);
  cl_mem_object_type type = CL_MEM_OBJECT_BUFFER;
  if (err == CL_SUCCESS)
    err = clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, NULL);
  if (err != CL_SUCCESS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "%s is not a valid cl_mem (clGetMemObjectInfo: %s)", what,
                      clt__cl_error_name(err));
  if (type != CL_MEM_OBJECT_BUFFER)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "%s is an OpenCL image, not a buffer; a tensor lives in a buffer", what);
  int n;
  clt_device *const *list = clt__device_list(&n);
  char sharing[256] = "";
  size_t used = 0;
  for (int i = 0; i < n; i++)
    if (clt__cl_device_context(list[i]) == ctx && used < sizeof sharing)
      used += (size_t)snprintf(sharing + used, sizeof sharing - used, "%s%s", used ? ", " : "",
                               list[i]->name);
  bool by_id = !dev; /* DLPack names the device by its number */
  if (by_id && device_id >= 0 && device_id < n)
    dev = list[device_id];
  if (!dev || clt__cl_device_context(dev) != ctx) {
    if (!used)
      return clt__error(CLT_ERR_DEVICE_NOT_FOUND, fn,
                        "the cl_mem belongs to an OpenCL context none of clt's devices uses; "
                        "only buffers of clt's own contexts can be imported (create it in the "
                        "context clt_device_cl gives)");
    if (by_id)
      return clt__error(CLT_ERR_DEVICE_NOT_FOUND, fn,
                        "device_id %d does not name a clt device of the cl_mem's context "
                        "(devices of that context: %s)",
                        device_id, sharing);
    return clt__error(CLT_ERR_DEVICE_NOT_FOUND, fn,
                      "%s belongs to the OpenCL context of %s, not to %s's; pass one of those "
                      "devices",
                      what, sharing, dev->name);
  }
  size_t size = 0;
  clt_status st = clt__cl_buffer_size(mem, dev, fn, &size);
  if (st != CLT_OK)
    return st;
  if (size < need)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the cl_mem holds %zu bytes but the tensor needs %zu", size, need);
  *out = dev;
  return CLT_OK;
}

static void release_nothing(void *ctx) { (void)ctx; }

clt_status clt_from_cl_mem(struct _cl_mem *mem, clt_dtype dtype, int ndim, const int64_t *shape,
                           clt_device *dev, clt_tensor **out) {
  static const char fn[] = "clt_from_cl_mem";
  clt_status st;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((st = clt__check_dtype(dtype, fn, "dtype")) != CLT_OK ||
      (st = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return st;
  if (dev->backend != &clt__opencl_backend)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "dev is %s, which has no OpenCL buffers; wrap host memory with "
                      "clt_from_host, or give the OpenCL device the buffer belongs to",
                      dev->name);
  int64_t numel;
  size_t bytes;
  if ((st = clt__check_shape(ndim, shape, dtype, fn, &numel, &bytes)) != CLT_OK)
    return st;
  if (dtype == CLT_F64 && !dev->fp64)
    return clt__error(CLT_ERR_UNSUPPORTED, fn, "%s (%s) does not support f64 (no cl_khr_fp64)",
                      dev->name, dev->model);
  if (!mem && bytes > 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "mem is NULL but the tensor has %lld elements",
                      (long long)numel);
  if (mem && (st = clt__cl_foreign_device(mem, dev, -1, bytes, "mem", fn, &dev)) != CLT_OK)
    return st;
  clt_storage *s;
  if ((st = clt__storage_wrap_foreign(dev, NULL, mem, bytes, release_nothing, NULL, fn, &s)) !=
      CLT_OK)
    return st;
  clt_tensor *t;
  st = clt__tensor_wrap(dtype, ndim, shape, s, fn, &t);
  clt__storage_release(s); /* the tensor holds it, or nothing does and it is freed */
  if (st != CLT_OK)
    return st;
  *out = t;
  return CLT_OK;
}

/* ---- handles -------------------------------------------------------------------------------- */

clt_status clt_device_cl(clt_device *dev, struct _cl_platform_id **platform,
                         struct _cl_device_id **device, struct _cl_context **context,
                         struct _cl_command_queue **queue) {
  static const char fn[] = "clt_device_cl";
  clt_status st;
  if ((st = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return st;
  if (dev->backend != &clt__opencl_backend)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "dev is %s, which has no OpenCL objects; give an OpenCL device (cl:0, ...)",
                      dev->name);
  struct clt_cl_device *c = clt__cl(dev);
  if (platform)
    *platform = c->platform;
  if (device)
    *device = c->id;
  if (context)
    *context = c->context;
  if (queue)
    *queue = c->queue;
  return CLT_OK;
}

/* The checks every function of a tensor's buffer makes. */
static clt_status check_device_tensor(const clt_tensor *t, const char *fn) {
  clt_status st = clt__check_tensor(t, fn, "t");
  if (st != CLT_OK)
    return st;
  if (t->storage->dev->backend != &clt__opencl_backend)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "t is on %s, which has no OpenCL buffers; move it to an OpenCL device "
                      "with clt_to(t, dev, &t_dev) first%s",
                      t->storage->dev->name,
                      t->storage->dev->kind == CLT_DEVICE_HOST ? " (or use clt_tensor_data)" : "");
  return CLT_OK;
}

static clt_status check_access(int access, const char *fn) {
  if ((access & ~(CLT_READ | CLT_WRITE)) || !access)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "access = %d: give CLT_READ, CLT_WRITE or CLT_READ | CLT_WRITE", access);
  return CLT_OK;
}

clt_status clt_tensor_cl_mem(const clt_tensor *t, struct _cl_mem **mem, size_t *offset_bytes) {
  static const char fn[] = "clt_tensor_cl_mem";
  clt_status st = check_device_tensor(t, fn);
  if (st != CLT_OK)
    return st;
  if (!mem)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "mem is NULL");
  /* The caller may write the buffer on any queue from now on, behind clt's back: a deferred
   * result gets its values now, the deferred chains reading the buffer run now (a write), and
   * no later deferred op reads it lazily (exposed, as clt_tensor_data does; lib/lazy.c). */
  if ((st = clt__storage_touch(t->storage, true, fn)) != CLT_OK)
    return st;
  atomic_store(&t->storage->exposed, true);
  *mem = t->storage->buf;
  if (offset_bytes)
    *offset_bytes = t->offset;
  return CLT_OK;
}

/* clt__cl_submit's enqueue for acquire: a marker after what the wait list holds (and, the queue
 * being in order, after everything enqueued on it). The marker goes to the caller through ctx,
 * and *ev stays NULL, so clt__cl_submit notes nothing: the user's work, not the marker, is what
 * later commands must wait for, and clt_tensor_cl_release_to notes that. */
static clt_status enqueue_marker(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                 cl_event *ev) {
  (void)ev;
  cl_event *marker = ctx;
  cl_int err = clEnqueueMarkerWithWaitList(clt__cl(d)->queue, wl->n, wl->n ? wl->ev : NULL, marker);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clEnqueueMarkerWithWaitList", d);
  return CLT_OK;
}

clt_status clt_tensor_cl_acquire(clt_tensor *t, int access, struct _cl_event **event) {
  static const char fn[] = "clt_tensor_cl_acquire";
  clt_status st;
  if ((st = check_device_tensor(t, fn)) != CLT_OK || (st = check_access(access, fn)) != CLT_OK)
    return st;
  if (!event)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "event is NULL");
  clt_device *d = t->storage->dev;
  clt_storage *s = t->storage;
  cl_event marker = NULL;
  st = clt__cl_submit(d, (access & CLT_READ) ? &s : NULL, (access & CLT_READ) ? 1 : 0,
                      (access & CLT_WRITE) ? &s : NULL, (access & CLT_WRITE) ? 1 : 0,
                      enqueue_marker, &marker, fn, NULL);
  if (st != CLT_OK) {
    if (marker)
      clReleaseEvent(marker);
    return st;
  }
  /* The user's queue will wait for the marker: it must reach the device. */
  clFlush(clt__cl(d)->queue);
  *event = marker;
  return CLT_OK;
}

clt_status clt_tensor_cl_release_to(clt_tensor *t, int access, struct _cl_event *event) {
  static const char fn[] = "clt_tensor_cl_release_to";
  clt_status st;
  if ((st = check_device_tensor(t, fn)) != CLT_OK || (st = check_access(access, fn)) != CLT_OK)
    return st;
  if (!event)
    return CLT_OK; /* the user's work is complete: nothing to wait for */
  cl_command_queue q = NULL;
  cl_int err = clGetEventInfo(event, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, NULL);
  if (err != CL_SUCCESS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "event is not a valid cl_event (clGetEventInfo: %s)",
                      clt__cl_error_name(err));
  /* Other queues (of this context or another) wait for the event only once its command is
   * submitted: OpenCL 1.2 section 5.13 asks for a flush of its queue. Not on a runtime that
   * runs a queue only inside clFlush and clFinish (Oclgrind), whose flush runs the command
   * then and there: held back by a user event the program completes later, it would wait for
   * ever, here. Such a queue is flushed by clt's next blocking wait instead (order.c). */
  if (q && !clt__cl_note_foreign(event, q))
    clFlush(q);
  /* A user event has no queue: key its slot by the event itself, so that two of them never
   * replace each other's read (order.c keeps one read per queue). */
  void *key = q ? (void *)q : (void *)event;
  clt_device *d = t->storage->dev;
  /* Under the device's lock, as every note: the events kept per queue stay in order. */
  pthread_mutex_lock(&d->lock);
  if (access & CLT_READ)
    clt__storage_note(t->storage, event, (cl_command_queue)key, false);
  if (access & CLT_WRITE)
    clt__storage_note(t->storage, event, (cl_command_queue)key, true);
  pthread_mutex_unlock(&d->lock);
  return CLT_OK;
}
