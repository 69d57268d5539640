/* memory.c - storage: host memory, pinned host memory and device buffers, refcounted. */
#include "clt-internal.h"

#include <stdlib.h>
#include <string.h>

#define HOST_ALIGN 64

static clt_storage *storage_new(clt_device *dev, size_t bytes) {
  clt_storage *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  atomic_init(&s->refs, 1);
  s->dev = dev;
  s->bytes = bytes;
  pthread_mutex_init(&s->lock, NULL);
  return s;
}

clt_status clt__storage_alloc(clt_device *dev, size_t bytes, const char *fn, clt_storage **out) {
  clt_storage *s = storage_new(dev, bytes);
  if (!s)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  if (dev->kind == CLT_DEVICE_HOST) {
    size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
    s->host = aligned_alloc(HOST_ALIGN, rounded ? rounded : HOST_ALIGN);
    if (!s->host) {
      pthread_mutex_destroy(&s->lock);
      free(s);
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                        "cannot allocate %zu bytes of host memory", bytes);
    }
  } else if (bytes > 0) {
    if ((cl_ulong)bytes > dev->max_alloc) {
      pthread_mutex_destroy(&s->lock);
      free(s);
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                        "%zu bytes exceed the largest buffer %s allows (%llu bytes)", bytes,
                        dev->name, (unsigned long long)dev->max_alloc);
    }
    cl_int err;
    s->mem = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
      pthread_mutex_destroy(&s->lock);
      free(s);
      clt_status st = clt__cl_error(err, fn, "clCreateBuffer", dev);
      return st;
    }
  }
  *out = s;
  return CLT_OK;
}

clt_status clt__storage_alloc_pinned(clt_device *near, size_t bytes, const char *fn,
                                     clt_storage **out) {
  clt_storage *s = storage_new(clt_cpu(), bytes);
  if (!s)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  size_t alloc = bytes ? bytes : 1;
  cl_int err;
  s->mem = clCreateBuffer(near->context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, alloc, NULL,
                          &err);
  if (err == CL_SUCCESS)
    s->host = clEnqueueMapBuffer(near->queue, s->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                 alloc, 0, NULL, NULL, &err);
  if (err != CL_SUCCESS) {
    if (s->mem)
      clReleaseMemObject(s->mem);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return clt__cl_error(err, fn, "allocating pinned host memory", near);
  }
  s->pin_dev = near;
  *out = s;
  return CLT_OK;
}

clt_storage *clt__storage_retain(clt_storage *s) {
  if (s)
    atomic_fetch_add(&s->refs, 1);
  return s;
}

void clt__storage_release(clt_storage *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
    return;
  /* Commands still using host memory hold a reference (clt__keep_alive), so none is pending
   * here; device buffers are kept by OpenCL itself until their commands finish. */
  if (s->write_ev)
    clReleaseEvent(s->write_ev);
  for (int i = 0; i < s->nreads; i++)
    clReleaseEvent(s->read_ev[i]);
  if (s->pin_dev) {
    clEnqueueUnmapMemObject(s->pin_dev->queue, s->mem, s->host, 0, NULL, NULL);
    clReleaseMemObject(s->mem);
  } else if (s->mem) {
    clReleaseMemObject(s->mem);
  } else {
    free(s->host);
  }
  pthread_mutex_destroy(&s->lock);
  free(s);
}
