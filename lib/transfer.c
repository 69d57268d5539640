/* transfer.c - to / copy_to / move / copy between the host and devices, and the events that
 * order work on a tensor's memory across queues (DESIGN.md rules 2 and 5). */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- events on storage -------------------------------------------------------------------- */

static void bridge_done(cl_event ev, cl_int status, void *data) {
  (void)ev;
  cl_event user = data;
  clSetUserEventStatus(user, status < 0 ? status : CL_COMPLETE);
  clReleaseEvent(user);
}

/* An event of context ctx that completes when ev (of another context) does; or *out = NULL when
 * ev has completed already, and there is nothing to wait for. */
static cl_int bridge(cl_event ev, cl_context ctx, cl_event *out) {
  cl_int err;
  /* The command behind ev must be submitted to its device, or its completion (and the callback
   * below) may never come: OpenCL 1.2 section 5.13 asks for a clFlush of its queue before a
   * queue of another context waits for it, and drivers that batch commands need it. An event
   * complete by then needs no bridge, and must not get one on Oclgrind, which runs the commands
   * inside clFlush and never calls a callback set on a completed event
   * (tests/oclgrind/late_callback.c): the waiting queue would wait for ever. */
  cl_command_queue q = NULL;
  if (clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, NULL) == CL_SUCCESS && q)
    clFlush(q);
  cl_int status = CL_QUEUED;
  if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) ==
          CL_SUCCESS &&
      status == CL_COMPLETE) {
    *out = NULL;
    return CL_SUCCESS;
  }
  cl_event user = clCreateUserEvent(ctx, &err);
  if (err != CL_SUCCESS)
    return err;
  clRetainEvent(user); /* one reference for the callback */
  err = clSetEventCallback(ev, CL_COMPLETE, bridge_done, user);
  if (err != CL_SUCCESS) {
    clReleaseEvent(user);
    clReleaseEvent(user);
    return err;
  }
  *out = user;
  return CL_SUCCESS;
}

static cl_context event_context(cl_event ev) {
  cl_context c = NULL;
  clGetEventInfo(ev, CL_EVENT_CONTEXT, sizeof c, &c, NULL);
  return c;
}

void clt__waitlist_clear(clt_waitlist *wl) {
  for (cl_uint i = 0; i < wl->n; i++)
    clReleaseEvent(wl->ev[i]);
  wl->n = 0;
}

/* Takes retained references to the events a reader (or writer) of s must wait for, leaving out
 * those of the in-order queue q (NULL: none left out), which precede a command on q anyway. */
static int collect(clt_storage *s, bool writing, cl_command_queue q, cl_event *evs) {
  int n = 0;
  pthread_mutex_lock(&s->lock);
  if (s->write_ev && (!q || s->write_q != q)) {
    clRetainEvent(s->write_ev);
    evs[n++] = s->write_ev;
  }
  if (writing)
    for (int i = 0; i < s->nreads; i++)
      if (!q || s->read_q[i] != q) {
        clRetainEvent(s->read_ev[i]);
        evs[n++] = s->read_ev[i];
      }
  pthread_mutex_unlock(&s->lock);
  return n;
}

/* clt__waitlist_add for a command on queue q (NULL: unknown, wait for every event). */
static clt_status waitlist_add_q(clt_waitlist *wl, clt_storage *s, bool writing, cl_command_queue q,
                                 cl_context ctx, const char *fn) {
  cl_event evs[CLT__MAX_READERS + 1];
  int n = collect(s, writing, q, evs);
  if (n == 0)
    return CLT_OK;
  clt_status st = CLT_OK;
  for (int i = 0; i < n; i++) {
    if (st != CLT_OK || wl->n >= sizeof wl->ev / sizeof wl->ev[0]) {
      /* Cannot happen with the bounds above; wait rather than lose the ordering. */
      if (st == CLT_OK)
        clWaitForEvents(1, &evs[i]);
      clReleaseEvent(evs[i]);
      continue;
    }
    if (event_context(evs[i]) == ctx) {
      wl->ev[wl->n++] = evs[i];
      continue;
    }
    cl_event b = NULL;
    cl_int err = bridge(evs[i], ctx, &b);
    clReleaseEvent(evs[i]);
    if (err != CL_SUCCESS)
      st = clt__cl_error(err, fn, "bridging an event across contexts", s->dev);
    else if (b)
      wl->ev[wl->n++] = b;
  }
  return st;
}

clt_status clt__waitlist_add(clt_waitlist *wl, clt_storage *s, bool writing, cl_context ctx,
                             const char *fn) {
  return waitlist_add_q(wl, s, writing, NULL, ctx, fn);
}

clt_status clt__waitlist_for(clt_waitlist *wl, clt_device *d, clt_storage *const *reads, int nreads,
                             clt_storage *const *writes, int nwrites, const char *fn) {
  clt_status st = CLT_OK;
  for (int i = 0; i < nreads && st == CLT_OK; i++)
    if (reads[i])
      st = waitlist_add_q(wl, reads[i], false, d->queue, d->context, fn);
  for (int i = 0; i < nwrites && st == CLT_OK; i++)
    if (writes[i])
      st = waitlist_add_q(wl, writes[i], true, d->queue, d->context, fn);
  if (st != CLT_OK)
    clt__waitlist_clear(wl);
  return st;
}

void clt__note_command(cl_event ev, clt_device *d, clt_storage *const *reads, int nreads,
                       clt_storage *const *writes, int nwrites) {
  for (int i = 0; i < nreads; i++)
    if (reads[i])
      clt__storage_note(reads[i], ev, d->queue, false);
  for (int i = 0; i < nwrites; i++)
    if (writes[i])
      clt__storage_note(writes[i], ev, d->queue, true);
}

clt_status clt__command_done(cl_event ev, clt_device *d, const char *fn) {
  clt_status st = clt__maybe_sync(ev, d, fn);
  clReleaseEvent(ev);
  return st;
}

/* One event per reading queue suffices because the queue is in order and the caller holds the
 * queue's lock from the enqueue to here: the event replaced is always an earlier command of the
 * same queue. (Without the lock, two threads reading s on one queue could note their events in
 * the opposite order of their enqueues, and a later write would wait for the earlier read only.) */
void clt__storage_note(clt_storage *s, cl_event ev, cl_command_queue q, bool writing) {
  cl_event stale = NULL;
  pthread_mutex_lock(&s->lock);
  clRetainEvent(ev);
  if (writing) {
    /* The write waited for every earlier access, so it alone now orders what follows. */
    if (s->write_ev)
      clReleaseEvent(s->write_ev);
    for (int i = 0; i < s->nreads; i++)
      clReleaseEvent(s->read_ev[i]);
    s->nreads = 0;
    s->write_ev = ev;
    s->write_q = q;
  } else {
    int i = 0;
    while (i < s->nreads && s->read_q[i] != q)
      i++;
    if (i == CLT__MAX_READERS) {
      /* More reading queues than slots: retire the oldest after it finishes. */
      stale = s->read_ev[0];
      memmove(&s->read_ev[0], &s->read_ev[1], (CLT__MAX_READERS - 1) * sizeof(cl_event));
      memmove(&s->read_q[0], &s->read_q[1], (CLT__MAX_READERS - 1) * sizeof(cl_command_queue));
      i = CLT__MAX_READERS - 1;
      s->nreads--;
    }
    if (i < s->nreads)
      clReleaseEvent(s->read_ev[i]);
    else
      s->nreads++;
    s->read_ev[i] = ev;
    s->read_q[i] = q;
  }
  pthread_mutex_unlock(&s->lock);
  if (stale) {
    clWaitForEvents(1, &stale);
    clReleaseEvent(stale);
  }
}

static void release_storage_cb(cl_event ev, cl_int status, void *data) {
  (void)ev;
  (void)status;
  clt__storage_release(data);
}

clt_status clt__keep_alive(cl_event ev, clt_storage *s, const char *fn) {
  clt__storage_retain(s);
  cl_int err = clSetEventCallback(ev, CL_COMPLETE, release_storage_cb, s);
  if (err != CL_SUCCESS) {
    /* Without a callback, keep the memory valid by waiting here. */
    clWaitForEvents(1, &ev);
    clt__storage_release(s);
    (void)fn;
  }
  return CLT_OK;
}

static clt_status wait_events(cl_event *evs, int n, const char *fn, const clt_device *dev) {
  clt_status st = CLT_OK;
  for (int i = 0; i < n; i++) {
    cl_int err = clWaitForEvents(1, &evs[i]);
    if (err != CL_SUCCESS && st == CLT_OK)
      st = clt__cl_error(err, fn, "waiting for an earlier command", dev);
    clReleaseEvent(evs[i]);
  }
  return st;
}

clt_status clt__storage_host_wait(clt_storage *s, bool writing, const char *fn) {
  cl_event evs[CLT__MAX_READERS + 1];
  int n = collect(s, writing, NULL, evs);
  return n ? wait_events(evs, n, fn, s->dev) : CLT_OK;
}

clt_status clt__wait_command(cl_event ev, clt_device *dev, const char *fn, const char *what) {
  cl_int err = clWaitForEvents(1, &ev);
  cl_int status = CL_COMPLETE;
  clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  if (err != CL_SUCCESS || status < 0)
    return clt__cl_error(err != CL_SUCCESS ? err : status, fn, what, dev);
  return CLT_OK;
}

clt_status clt__maybe_sync(cl_event ev, clt_device *dev, const char *fn) {
  if (!clt__env_sync())
    return CLT_OK;
  return clt__wait_command(ev, dev, fn, "the command (CLT_SYNC=1)");
}

/* ---- accounting and the guard ---------------------------------------------------------------- */

static void add(clt_device *d, uint64_t *count_field, uint64_t *bytes_field, size_t bytes) {
  pthread_mutex_lock(&d->cache_lock);
  (*count_field)++;
  *bytes_field += bytes;
  pthread_mutex_unlock(&d->cache_lock);
}

/* Counts a copy of bytes from src to dst on the device side(s). */
static void count(clt_device *src, clt_device *dst, size_t bytes, bool implicit) {
  if (bytes == 0 || src == dst)
    return;
  bool sh = src->kind == CLT_DEVICE_HOST, dh = dst->kind == CLT_DEVICE_HOST;
  if (sh && dh)
    return;
  if (sh) {
    add(dst, &dst->xfer.h2d_count, &dst->xfer.h2d_bytes, bytes);
  } else if (dh) {
    if (implicit)
      add(src, &src->xfer.implicit_count, &src->xfer.implicit_bytes, bytes);
    else
      add(src, &src->xfer.d2h_count, &src->xfer.d2h_bytes, bytes);
  } else {
    add(src, &src->xfer.d2d_out_count, &src->xfer.d2d_out_bytes, bytes);
    add(dst, &dst->xfer.d2d_in_count, &dst->xfer.d2d_in_bytes, bytes);
  }
}

void clt__count_h2d(clt_device *dev, size_t bytes) { count(clt_cpu(), dev, bytes, false); }
void clt__count_d2h(clt_device *dev, size_t bytes) { count(dev, clt_cpu(), bytes, false); }

clt_status clt_transfer_stats_get(clt_device *dev, clt_transfer_stats *out) {
  static const char fn[] = "clt_transfer_stats_get";
  clt_status s = clt__check_device(dev, fn, "dev");
  if (s != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  pthread_mutex_lock(&dev->cache_lock);
  *out = dev->xfer;
  pthread_mutex_unlock(&dev->cache_lock);
  return CLT_OK;
}

static void reset_one(clt_device *d) {
  pthread_mutex_lock(&d->cache_lock);
  memset(&d->xfer, 0, sizeof d->xfer);
  pthread_mutex_unlock(&d->cache_lock);
}

clt_status clt_transfer_stats_reset(clt_device *dev) {
  if (dev) {
    clt_status s = clt__check_device(dev, "clt_transfer_stats_reset", "dev");
    if (s != CLT_OK)
      return s;
    reset_one(dev);
    return CLT_OK;
  }
  int n;
  clt_device *list = clt__device_list(&n);
  for (int i = 0; i < n; i++)
    reset_one(&list[i]);
  return CLT_OK;
}

clt_status clt_transfer_stats_print(FILE *f) {
  if (!f)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_transfer_stats_print", "f is NULL");
  int n, shown = 0;
  clt_device *list = clt__device_list(&n);
  for (int i = 0; i < n; i++) {
    clt_transfer_stats x;
    clt_transfer_stats_get(&list[i], &x);
    if (!(x.h2d_count | x.d2h_count | x.d2d_in_count | x.d2d_out_count | x.implicit_count))
      continue;
    fprintf(f,
            "%s: host->device %llu (%llu B), device->host %llu (%llu B), from other devices "
            "%llu (%llu B), to other devices %llu (%llu B), implicit device->host %llu (%llu B)\n",
            list[i].name, (unsigned long long)x.h2d_count, (unsigned long long)x.h2d_bytes,
            (unsigned long long)x.d2h_count, (unsigned long long)x.d2h_bytes,
            (unsigned long long)x.d2d_in_count, (unsigned long long)x.d2d_in_bytes,
            (unsigned long long)x.d2d_out_count, (unsigned long long)x.d2d_out_bytes,
            (unsigned long long)x.implicit_count, (unsigned long long)x.implicit_bytes);
    shown++;
  }
  if (!shown)
    fprintf(f, "no transfers\n");
  return CLT_OK;
}

static atomic_int guard_mode;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static void guard_init(void) {
  const char *e = getenv("CLT_TRANSFER_GUARD");
  int m = CLT_GUARD_ALLOW;
  if (e && strcmp(e, "log") == 0)
    m = CLT_GUARD_LOG;
  else if (e && strcmp(e, "disallow") == 0)
    m = CLT_GUARD_DISALLOW;
  else if (e && *e && strcmp(e, "allow") != 0)
    fprintf(stderr,
            "clt: warning: CLT_TRANSFER_GUARD='%s' is not allow, log or disallow; using "
            "allow\n",
            e);
  atomic_store(&guard_mode, m);
}

int clt_transfer_guard_set(clt_transfer_guard mode) {
  pthread_once(&guard_once, guard_init);
  if ((int)mode < CLT_GUARD_ALLOW || (int)mode > CLT_GUARD_DISALLOW) {
    clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_transfer_guard_set",
               "mode = %d is not CLT_GUARD_ALLOW, CLT_GUARD_LOG or CLT_GUARD_DISALLOW", (int)mode);
    return -1;
  }
  return atomic_exchange(&guard_mode, (int)mode);
}

clt_transfer_guard clt_transfer_guard_get(void) {
  pthread_once(&guard_once, guard_init);
  return (clt_transfer_guard)atomic_load(&guard_mode);
}

/* ---- copies --------------------------------------------------------------------------------- */

/* Enqueues a copy of src's bytes into dst (same byte size), ordered after earlier work on both.
 * Asynchronous except host-to-host. */
static clt_status copy_bytes(clt_tensor *dst, clt_tensor *src, const char *fn) {
  clt_storage *ds = dst->storage, *ss = src->storage;
  clt_device *dd = ds->dev, *sd = ss->dev;
  size_t n = src->nbytes;
  clt_status st;
  if (n == 0)
    return CLT_OK;
  if (dd->kind == CLT_DEVICE_HOST && sd->kind == CLT_DEVICE_HOST) {
    if ((st = clt__storage_host_wait(ss, false, fn)) != CLT_OK ||
        (st = clt__storage_host_wait(ds, true, fn)) != CLT_OK)
      return st;
    memmove(clt__host_ptr(dst), clt__host_ptr(src), n);
    return CLT_OK;
  }

  /* One command on one queue: host to device and device to device (one context) on the
   * destination's, device to host on the source's. */
  enum { H2D, D2H, D2D } kind = D2D;
  clt_device *qd = NULL; /* whose queue; NULL for two contexts (below) */
  if (sd->kind == CLT_DEVICE_HOST) {
    kind = H2D;
    qd = dd;
  } else if (dd->kind == CLT_DEVICE_HOST) {
    kind = D2H;
    qd = sd;
  } else if (dd->context == sd->context) {
    qd = dd;
  }
  if (qd) {
    clt_waitlist wl = {.n = 0};
    if ((st = waitlist_add_q(&wl, ss, false, qd->queue, qd->context, fn)) != CLT_OK ||
        (st = waitlist_add_q(&wl, ds, true, qd->queue, qd->context, fn)) != CLT_OK) {
      clt__waitlist_clear(&wl);
      return st;
    }
    static const char *const what[] = {"clEnqueueWriteBuffer (host to device)",
                                       "clEnqueueReadBuffer (device to host)",
                                       "clEnqueueCopyBuffer (device to device)"};
    const cl_event *wait = wl.n ? wl.ev : NULL;
    cl_event ev = NULL;
    cl_int err;
    pthread_mutex_lock(&qd->lock);
    if (kind == H2D)
      err = clEnqueueWriteBuffer(qd->queue, ds->mem, CL_FALSE, dst->offset, n, clt__host_ptr(src),
                                 wl.n, wait, &ev);
    else if (kind == D2H)
      err = clEnqueueReadBuffer(qd->queue, ss->mem, CL_FALSE, src->offset, n, clt__host_ptr(dst),
                                wl.n, wait, &ev);
    else
      err = clEnqueueCopyBuffer(qd->queue, ss->mem, ds->mem, src->offset, dst->offset, n, wl.n,
                                wait, &ev);
    if (err == CL_SUCCESS) {
      clt_storage *reads[1] = {ss}, *writes[1] = {ds};
      clt__note_command(ev, qd, reads, 1, writes, 1);
    }
    pthread_mutex_unlock(&qd->lock);
    clt__waitlist_clear(&wl);
    if (err != CL_SUCCESS)
      return clt__cl_error(err, fn, what[kind], qd);
    if (kind != D2D) /* host memory must outlive the command */
      clt__keep_alive(ev, kind == H2D ? ss : ds, fn);
    return clt__command_done(ev, qd, fn);
  }
  /* Two contexts: stage through host memory, the second leg waiting on the first through a
   * bridged event, so the whole copy stays asynchronous. */
  clt_tensor *stage;
  if ((st = clt__tensor_new(CLT_U8, 1, &(int64_t){(int64_t)n}, clt_cpu(), fn, &stage)) != CLT_OK)
    return st;
  st = copy_bytes(stage, src, fn);
  if (st == CLT_OK)
    st = copy_bytes(dst, stage, fn);
  clt_tensor_release(stage); /* kept alive by the pending copies */
  return st;
}

static clt_status check_to(clt_tensor *t, clt_device *dev, clt_tensor **out, const char *fn) {
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK ||
      (s = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  return CLT_OK;
}

static clt_status copy_to(clt_tensor *t, clt_device *dev, clt_tensor **out, const char *fn) {
  clt_tensor *n;
  clt_status s = clt__tensor_new(t->dtype, t->ndim, t->shape, dev, fn, &n);
  if (s != CLT_OK)
    return s;
  if ((s = copy_bytes(n, t, fn)) != CLT_OK) {
    clt_tensor_release(n);
    return s;
  }
  count(t->storage->dev, dev, t->nbytes, false);
  *out = n;
  return CLT_OK;
}

clt_status clt_to(clt_tensor *t, clt_device *dev, clt_tensor **out) {
  static const char fn[] = "clt_to";
  clt_status s = check_to(t, dev, out, fn);
  if (s != CLT_OK)
    return s;
  if (t->storage->dev == dev) {
    *out = clt_tensor_retain(t);
    return CLT_OK;
  }
  return copy_to(t, dev, out, fn);
}

clt_status clt_copy_to(clt_tensor *t, clt_device *dev, clt_tensor **out) {
  static const char fn[] = "clt_copy_to";
  clt_status s = check_to(t, dev, out, fn);
  return s != CLT_OK ? s : copy_to(t, dev, out, fn);
}

clt_status clt_move(clt_tensor **t, clt_device *dev) {
  static const char fn[] = "clt_move";
  if (!t)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "t is NULL (pass the address of a handle)");
  clt_tensor *n;
  clt_status s = check_to(*t, dev, &n, fn);
  if (s != CLT_OK)
    return s;
  if ((*t)->storage->dev == dev)
    return CLT_OK;
  if ((s = copy_to(*t, dev, &n, fn)) != CLT_OK)
    return s;
  clt_tensor_release(*t);
  *t = n;
  return CLT_OK;
}

clt_status clt_copy(clt_tensor *dst, clt_tensor *src) {
  static const char fn[] = "clt_copy";
  clt_status s;
  if ((s = clt__check_tensor(dst, fn, "dst")) != CLT_OK ||
      (s = clt__check_tensor(src, fn, "src")) != CLT_OK)
    return s;
  if (dst->ndim != src->ndim || memcmp(dst->shape, src->shape, sizeof(int64_t) * dst->ndim)) {
    char a[256], b[256];
    clt__format_shape(a, sizeof a, dst->ndim, dst->shape);
    clt__format_shape(b, sizeof b, src->ndim, src->shape);
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "dst has shape %s but src has shape %s", a, b);
  }
  if (dst->dtype != src->dtype)
    return clt__error(CLT_ERR_DTYPE, fn, "dst is %s but src is %s; clt_copy does not convert",
                      clt_dtype_name(dst->dtype), clt_dtype_name(src->dtype));
  if (dst->storage == src->storage && dst->offset == src->offset)
    return CLT_OK;
  if ((s = copy_bytes(dst, src, fn)) != CLT_OK)
    return s;
  count(src->storage->dev, dst->storage->dev, src->nbytes, false);
  return CLT_OK;
}

static clt_status read_bytes(const clt_tensor *t, void *dst, const char *fn, bool implicit) {
  clt_storage *s = t->storage;
  clt_status st;
  if (t->nbytes == 0)
    return CLT_OK;
  if (s->dev->kind == CLT_DEVICE_HOST) {
    if ((st = clt__storage_host_wait(s, false, fn)) != CLT_OK)
      return st;
    memcpy(dst, clt__host_ptr(t), t->nbytes);
    return CLT_OK;
  }
  clt_device *d = s->dev;
  clt_waitlist wl = {.n = 0};
  if ((st = waitlist_add_q(&wl, s, false, d->queue, d->context, fn)) != CLT_OK) {
    clt__waitlist_clear(&wl);
    return st;
  }
  /* Not a blocking read: the queue's lock is held from the enqueue to the note only, and the
   * wait comes after, so other threads keep enqueueing meanwhile. */
  cl_event ev;
  pthread_mutex_lock(&d->lock);
  cl_int err = clEnqueueReadBuffer(d->queue, s->mem, CL_FALSE, t->offset, t->nbytes, dst, wl.n,
                                   wl.n ? wl.ev : NULL, &ev);
  if (err == CL_SUCCESS)
    clt__storage_note(s, ev, d->queue, false);
  pthread_mutex_unlock(&d->lock);
  clt__waitlist_clear(&wl);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clEnqueueReadBuffer", d);
  st = clt__wait_command(ev, d, fn, "clEnqueueReadBuffer");
  clReleaseEvent(ev);
  if (st != CLT_OK)
    return st;
  count(d, clt_cpu(), t->nbytes, implicit);
  return CLT_OK;
}

clt_status clt__read_bytes(const clt_tensor *t, void *dst, const char *fn) {
  return read_bytes(t, dst, fn, false);
}

clt_status clt__read_bytes_implicit(const clt_tensor *t, void *dst, const char *fn) {
  clt_device *d = t->storage->dev;
  if (d->kind != CLT_DEVICE_HOST && t->nbytes > 0) {
    clt_transfer_guard mode = clt_transfer_guard_get();
    if (mode == CLT_GUARD_DISALLOW)
      return clt__error(CLT_ERR_TRANSFER_GUARD, fn,
                        "implicit transfer of %zu bytes from %s to cpu refused by the transfer "
                        "guard (disallow); copy the tensor with clt_to(t, clt_cpu(), &h) and use "
                        "the copy",
                        t->nbytes, d->name);
    if (mode == CLT_GUARD_LOG)
      fprintf(stderr, "clt: implicit transfer: %s copies %zu bytes from %s to cpu\n", fn, t->nbytes,
              d->name);
  }
  return read_bytes(t, dst, fn, true);
}
