/* SPDX-License-Identifier: MIT */
/* opencl/event.c - timing events on an OpenCL device: a marker on the queue, its profiling
 * timestamp, or the host time its completion was seen where the device gives no timestamps. */
#define _POSIX_C_SOURCE 200809L
#include "cl-internal.h"

#include <stdlib.h>
#include <time.h>

typedef struct cl_mark {
  cl_event ev;
  _Atomic double done_ms; /* when the marker was seen complete (fallback without profiling) */
} cl_mark;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void on_complete(cl_event ev, cl_int status, void *data) {
  (void)ev;
  (void)status;
  cl_mark *m = data;
  atomic_store(&m->done_ms, now_ms());
}

clt_status clt__cl_event_record(clt_device *dev, const char *fn, void **out) {
  cl_mark *m = calloc(1, sizeof *m);
  if (!m)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  atomic_init(&m->done_ms, 0.0);
  cl_int err = clEnqueueMarkerWithWaitList(clt__cl(dev)->queue, 0, NULL, &m->ev);
  if (err != CL_SUCCESS) {
    free(m);
    return clt__cl_error(err, fn, "clEnqueueMarkerWithWaitList", dev);
  }
  if (clSetEventCallback(m->ev, CL_COMPLETE, on_complete, m) != CL_SUCCESS)
    atomic_store(&m->done_ms, -1.0);
  *out = m;
  return CLT_OK;
}

clt_status clt__cl_event_wait(clt_device *dev, void *ev, const char *fn) {
  cl_mark *m = ev;
  clt__cl_flush_foreign(); /* the program's commands it may wait behind (order.c) */
  cl_int err = clWaitForEvents(1, &m->ev);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clWaitForEvents", dev);
  return CLT_OK;
}

/* The device timestamp of a completed marker in ms, or a negative value if unavailable. */
static double device_ms(cl_event ev) {
  cl_ulong t = 0;
  if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL) != CL_SUCCESS)
    return -1.0;
  return (double)t / 1e6;
}

clt_status clt__cl_event_elapsed(clt_device *dev, void *start, void *end, const char *fn,
                                 double *ms) {
  cl_mark *s = start, *e = end;
  double a = device_ms(s->ev), b = device_ms(e->ev);
  if (a < 0 || b < 0) {
    /* No device timestamps: use the host times at which completion was seen. The callback may
     * still be on its way right after the wait, so give it a moment. */
    for (int i = 0;
         i < 1000 && (atomic_load(&s->done_ms) == 0.0 || atomic_load(&e->done_ms) == 0.0); i++) {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
    a = atomic_load(&s->done_ms);
    b = atomic_load(&e->done_ms);
    if (a <= 0 || b <= 0)
      return clt__error(CLT_ERR_UNSUPPORTED, fn, "%s gives no timestamps for its events",
                        dev->name);
  }
  *ms = b - a;
  return CLT_OK;
}

void clt__cl_event_release(void *ev) {
  cl_mark *m = ev;
  /* The completion callback writes into *m: let it run before freeing. */
  clWaitForEvents(1, &m->ev);
  for (int i = 0; i < 1000 && atomic_load(&m->done_ms) == 0.0; i++) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  clReleaseEvent(m->ev);
  free(m);
}
