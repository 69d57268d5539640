/* SPDX-License-Identifier: MIT */
/* opencl/native.c - host code as a command in a CPU device's queue (clEnqueueNativeKernel).
 *
 * A CPU device's buffers are host memory (PoCL), so work that the host's loops do better than a
 * kernel compiled for the device (the CBLAS product, transposed copies and ops in cache-sized
 * strips) can run on them directly, as a command: asynchronous, ordered by the same events as
 * any kernel, and with no kernel to build on first use.
 *
 * The OpenCL way to hand buffers to a native kernel is mem_list + args_mem_loc: the runtime
 * writes each buffer's host address into the argument block. PoCL 3.1 writes them in its own
 * order of the buffers, not the order of mem_list (a, b, c can arrive as c, a, b), and drops
 * duplicates (a x a). So each buffer's address is learned by a one-buffer native kernel (no
 * order to get wrong) that stores it into the context; the work, enqueued after them on the
 * in-order queue, lists all buffers (so the runtime migrates and orders them) but reads the
 * addresses from the context, which is freed when the work's event completes. */
#include "cl-internal.h"

#include <stdlib.h>

bool clt__cl_native_ok(const clt_device *d) { return clt__cl(d)->native; }

typedef struct probe_args {
  union {
    cl_mem mem;
    void *ptr;
  } buf;
  void **dst;
} probe_args;

typedef struct work_args {
  clt_cl_native *ctx;
  union {
    cl_mem mem;
    void *ptr;
  } buf[CLT__NATIVE_MAX]; /* replaced by the runtime, in its order: unused */
} work_args;

static void CL_CALLBACK run_probe(void *p) {
  probe_args *x = p;
  *x->dst = x->buf.ptr;
}

static void CL_CALLBACK run_work(void *p) {
  clt_cl_native *c = ((work_args *)p)->ctx;
  c->run(c);
}

static void CL_CALLBACK free_ctx(cl_event ev, cl_int status, void *p) {
  (void)ev;
  (void)status;
  free(p);
}

clt_status clt__cl_enqueue_native(clt_device *d, clt_cl_native *ctx, int n, const cl_mem *bufs,
                                  clt_waitlist *wl, const char *fn, cl_event *ev) {
  work_args wa = {.ctx = ctx};
  cl_mem mems[CLT__NATIVE_MAX];
  const void *locs[CLT__NATIVE_MAX];
  cl_uint nmem = 0;
  for (int i = 0; i < n; i++) {
    bool dup = false;
    for (cl_uint j = 0; j < nmem; j++)
      dup = dup || mems[j] == bufs[i];
    if (!dup) {
      mems[nmem] = wa.buf[nmem].mem = bufs[i];
      locs[nmem] = &wa.buf[nmem].mem;
      nmem++;
    }
  }
  cl_int err = CL_SUCCESS;
  const char *what = "clEnqueueNativeKernel";
  for (int i = 0; i < n && err == CL_SUCCESS; i++) {
    /* mem_list is an array of its own, never the slot in args: a runtime may write the host
     * address into the caller's args before it copies them (Oclgrind 21.10 does), and would then
     * read that address back as the buffer to retain (and crash releasing it):
     * tests/oclgrind/native_kernel_args.c. */
    cl_mem mem = bufs[i];
    probe_args pa = {.dst = &ctx->ptr[i]};
    pa.buf.mem = mem;
    const void *loc = &pa.buf.mem;
    err = clEnqueueNativeKernel(clt__cl(d)->queue, run_probe, &pa, sizeof pa, 1, &mem, &loc,
                                i == 0 ? wl->n : 0, i == 0 && wl->n ? wl->ev : NULL, NULL);
  }
  if (err == CL_SUCCESS)
    err = clEnqueueNativeKernel(clt__cl(d)->queue, run_work, &wa, sizeof wa, nmem, mems, locs, 0,
                                NULL, ev);
  if (err == CL_SUCCESS) {
    clt__cl_wait_at_exit(d); /* the exit waits for it (device.c: finish_at_exit) */
    what = "clSetEventCallback";
    if ((err = clSetEventCallback(*ev, CL_COMPLETE, free_ctx, ctx)) != CL_SUCCESS) {
      clWaitForEvents(1, ev);
      free(ctx);
    }
    return err == CL_SUCCESS ? CLT_OK : clt__cl_error(err, fn, what, d);
  }
  clFinish(clt__cl(d)->queue); /* probes may be pending: they write into ctx */
  free(ctx);
  return clt__cl_error(err, fn, what, d);
}
