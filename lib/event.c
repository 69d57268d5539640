/* event.c - events: points in a device's stream of work, and the time between two of them. */
#define _POSIX_C_SOURCE 200809L
#include "clt-internal.h"

#include <stdlib.h>
#include <time.h>

struct clt_event {
  clt_device *dev;
  cl_event ev;            /* a marker on the device's queue; NULL on the host */
  double host_ms;         /* the host: when it was recorded */
  _Atomic double done_ms; /* when the marker was seen complete (fallback without profiling) */
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void on_complete(cl_event ev, cl_int status, void *data) {
  (void)ev;
  (void)status;
  struct clt_event *e = data;
  atomic_store(&e->done_ms, now_ms());
}

clt_status clt_event_record(clt_device *dev, clt_event **out) {
  static const char fn[] = "clt_event_record";
  clt_status s = clt__check_device(dev, fn, "dev");
  if (s != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_event *e = calloc(1, sizeof *e);
  if (!e)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  e->dev = dev;
  atomic_init(&e->done_ms, 0.0);
  if (dev->kind == CLT_DEVICE_HOST) {
    e->host_ms = now_ms();
  } else {
    cl_int err = clEnqueueMarkerWithWaitList(dev->queue, 0, NULL, &e->ev);
    if (err != CL_SUCCESS) {
      free(e);
      return clt__cl_error(err, fn, "clEnqueueMarkerWithWaitList", dev);
    }
    if (clSetEventCallback(e->ev, CL_COMPLETE, on_complete, e) != CL_SUCCESS)
      atomic_store(&e->done_ms, -1.0);
  }
  *out = e;
  return CLT_OK;
}

clt_status clt_event_wait(clt_event *ev) {
  static const char fn[] = "clt_event_wait";
  if (!ev)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "ev is NULL");
  if (!ev->ev)
    return CLT_OK;
  cl_int err = clWaitForEvents(1, &ev->ev);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clWaitForEvents", ev->dev);
  return CLT_OK;
}

/* The device timestamp of a completed marker in ms, or a negative value if unavailable. */
static double device_ms(cl_event ev) {
  cl_ulong t = 0;
  if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL) != CL_SUCCESS)
    return -1.0;
  return (double)t / 1e6;
}

clt_status clt_event_elapsed_ms(clt_event *start, clt_event *end, double *ms) {
  static const char fn[] = "clt_event_elapsed_ms";
  if (!start || !end || !ms)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL",
                      !start ? "start"
                      : !end ? "end"
                             : "ms");
  if (start->dev != end->dev)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "start was recorded on %s but end on %s; time events of one device",
                      start->dev->name, end->dev->name);
  clt_status s;
  if ((s = clt_event_wait(start)) != CLT_OK || (s = clt_event_wait(end)) != CLT_OK)
    return s;
  if (!start->ev) {
    *ms = end->host_ms - start->host_ms;
    return CLT_OK;
  }
  double a = device_ms(start->ev), b = device_ms(end->ev);
  if (a < 0 || b < 0) {
    /* No device timestamps: use the host times at which completion was seen. The callback may
     * still be on its way right after the wait, so give it a moment. */
    for (int i = 0;
         i < 1000 && (atomic_load(&start->done_ms) == 0.0 || atomic_load(&end->done_ms) == 0.0);
         i++) {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
    a = atomic_load(&start->done_ms);
    b = atomic_load(&end->done_ms);
    if (a <= 0 || b <= 0)
      return clt__error(CLT_ERR_UNSUPPORTED, fn, "%s gives no timestamps for its events",
                        start->dev->name);
  }
  *ms = b - a;
  if (*ms < 0)
    *ms = 0;
  return CLT_OK;
}

void clt_event_release(clt_event *ev) {
  if (!ev)
    return;
  if (ev->ev) {
    /* The completion callback writes into *ev: let it run before freeing. */
    clWaitForEvents(1, &ev->ev);
    for (int i = 0; i < 1000 && atomic_load(&ev->done_ms) == 0.0; i++) {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
    clReleaseEvent(ev->ev);
  }
  free(ev);
}

struct clt_timer {
  clt_device *dev; /* NULL: every device */
  double start_ms;
};

clt_status clt_timer_start(clt_device *dev, clt_timer **out) {
  static const char fn[] = "clt_timer_start";
  clt_status s;
  if (dev && (s = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_timer *t = calloc(1, sizeof *t);
  if (!t)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  if ((s = clt_device_synchronize(dev)) != CLT_OK) {
    free(t);
    return s;
  }
  t->dev = dev;
  t->start_ms = now_ms();
  *out = t;
  return CLT_OK;
}

clt_status clt_timer_stop(clt_timer *t, double *ms) {
  static const char fn[] = "clt_timer_stop";
  if (!t || !ms)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", !t ? "t" : "ms");
  clt_status s = clt_device_synchronize(t->dev);
  if (s != CLT_OK)
    return s;
  *ms = now_ms() - t->start_ms;
  return CLT_OK;
}

void clt_timer_release(clt_timer *t) { free(t); }
