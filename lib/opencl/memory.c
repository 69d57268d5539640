/* SPDX-License-Identifier: MIT */
/* opencl/memory.c - OpenCL buffers behind storages: device buffers, pinned host memory (a
 * buffer mapped into the host's address space) and references to foreign buffers. The caching
 * allocator and its accounting are lib/memory.c's. Also the queries that DLPack import makes of a
 * foreign buffer, and the context of a device, for the same. */
#include "cl-internal.h"

int clt__cl_buffer_alloc(clt_storage *s) {
  cl_int err;
  s->buf = clCreateBuffer(clt__cl(s->dev)->context, CL_MEM_READ_WRITE, s->bytes, NULL, &err);
  return err;
}

int clt__cl_pinned_alloc(clt_device *near, clt_storage *s, size_t alloc) {
  cl_int err;
  s->buf = clCreateBuffer(clt__cl(near)->context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, alloc,
                          NULL, &err);
  if (err != CL_SUCCESS)
    return err;
  s->host = clEnqueueMapBuffer(clt__cl(near)->queue, s->buf, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                               alloc, 0, NULL, NULL, &err);
  if (err != CL_SUCCESS) {
    clReleaseMemObject(s->buf);
    s->buf = NULL;
    s->host = NULL;
  }
  return err;
}

bool clt__cl_error_is_oom(int err) {
  return err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
         err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE;
}

clt_status clt__cl_buffer_retain(clt_device *dev, void *buf, const char *fn) {
  cl_int err = clRetainMemObject(buf);
  return err == CL_SUCCESS ? CLT_OK : clt__cl_error(err, fn, "clRetainMemObject", dev);
}

void clt__cl_buffer_free(clt_storage *s) {
  if (s->pin_dev && !s->release) {
    /* A mapped buffer is not freed: if the unmap cannot be enqueued, let the queue drain and
     * try once more (nobody is left to report a failure to). */
    if (clEnqueueUnmapMemObject(clt__cl(s->pin_dev)->queue, s->buf, s->host, 0, NULL, NULL) !=
        CL_SUCCESS) {
      clFinish(clt__cl(s->pin_dev)->queue);
      clEnqueueUnmapMemObject(clt__cl(s->pin_dev)->queue, s->buf, s->host, 0, NULL, NULL);
    }
    /* Submitted now: nothing else may come to this queue, and an unmap never submitted holds
     * the buffer (and a reference to the context) for ever. Oclgrind runs a queue only when it
     * is flushed or waited for: the 60-gpu lane's fault suite found the buffer of pinned memory
     * freed after the last synchronize of its device still alive at the end. */
    clFlush(clt__cl(s->pin_dev)->queue);
  }
  clReleaseMemObject(s->buf); /* OpenCL keeps it until its commands finish */
}

cl_context clt__cl_device_context(const clt_device *dev) {
  return dev->backend == &clt__opencl_backend ? clt__cl(dev)->context : NULL;
}

cl_int clt__cl_buffer_context(cl_mem mem, cl_context *ctx) {
  return clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof *ctx, ctx, NULL);
}

clt_status clt__cl_buffer_size(cl_mem mem, const clt_device *dev, const char *fn, size_t *size) {
  cl_int err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof *size, size, NULL);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clGetMemObjectInfo(CL_MEM_SIZE)", dev);
  return CLT_OK;
}
