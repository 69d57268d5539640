/* SPDX-License-Identifier: MIT */
/* event.c - events: points in a device's stream of work, and the time between two of them. */
#define _POSIX_C_SOURCE 200809L
#include "backend.h"

#include <stdlib.h>
#include <time.h>

struct clt_event {
  clt_device *dev;
  void *mark;     /* the backend's marker on the device's queue; NULL on the host */
  double host_ms; /* the host: when it was recorded */
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

clt_status clt_event_record(clt_device *dev, clt_event **out) {
  static const char fn[] = "clt_event_record";
  clt_status s = clt__check_device(dev, fn, "dev");
  if (s != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((s = clt__lazy_flush(dev, fn)) != CLT_OK) /* the event follows the deferred ops too */
    return s;
  clt_event *e = calloc(1, sizeof *e);
  if (!e)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  e->dev = dev;
  if (!dev->backend->device.event_record) {
    e->host_ms = now_ms();
  } else if ((s = dev->backend->device.event_record(dev, fn, &e->mark)) != CLT_OK) {
    free(e);
    return s;
  }
  *out = e;
  return CLT_OK;
}

clt_status clt_event_wait(clt_event *ev) {
  static const char fn[] = "clt_event_wait";
  if (!ev)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "ev is NULL");
  if (!ev->mark)
    return CLT_OK;
  return ev->dev->backend->device.event_wait(ev->dev, ev->mark, fn);
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
  double d;
  if (!start->mark)
    d = end->host_ms - start->host_ms;
  else if ((s = start->dev->backend->device.event_elapsed(start->dev, start->mark, end->mark, fn, &d)) !=
           CLT_OK)
    return s;
  *ms = !start->mark || d >= 0 ? d : 0;
  return CLT_OK;
}

void clt_event_release(clt_event *ev) {
  if (!ev)
    return;
  if (ev->mark)
    ev->dev->backend->device.event_release(ev->mark);
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

/* Lives here, above lazy evaluation, because it runs the deferred ops first: the registry
 * (device.c) sits below the storages and knows nothing of them. */
static clt_status sync_one(clt_device *d) {
  clt_status s = clt__lazy_flush(d, "clt_device_synchronize"); /* deferred ops run now */
  if (s != CLT_OK)
    return s;
  if (!d->backend->device.synchronize)
    return CLT_OK; /* the host: its work is done when its calls return */
  return d->backend->device.synchronize(d, "clt_device_synchronize");
}

clt_status clt_device_synchronize(clt_device *d) {
  int n;
  clt_device *const *devices = clt__device_list(&n);
  if (d) {
    clt_status s = clt__check_device(d, "clt_device_synchronize", "d");
    return s != CLT_OK ? s : sync_one(d);
  }
  for (int i = 0; i < n; i++) {
    clt_status s = sync_one(devices[i]);
    if (s != CLT_OK)
      return s;
  }
  return CLT_OK;
}
