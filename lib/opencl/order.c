/* SPDX-License-Identifier: MIT */
/* opencl/order.c - the events that order work on a storage across queues and contexts: what a
 * command must wait for before it reads or writes a storage, what it leaves behind for the next
 * one (clt_storage's write_ev and read_ev, which hold a cl_event each, and write_q and read_q,
 * which hold its cl_command_queue), and waiting for them on the host. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "cl-internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void bridge_done(cl_event ev, cl_int status, void *data) {
  (void)ev;
  cl_event user = data;
  clSetUserEventStatus(user, status < 0 ? status : CL_COMPLETE);
  clReleaseEvent(user);
}

/* An event of context ctx that completes when ev (of another context) does; or *out = NULL when
 * ev has completed already (or was waited for here, for a serial ctx), and there is nothing to
 * wait for. */
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
  if (clt__cl_context_serial(ctx)) {
    /* The callback would set the user event, and so run the commands queued behind it, from
     * ev's runtime's thread while this thread may be inside ctx's runtime too: Oclgrind's queue
     * lists were corrupted that way (a crash in its Queue::execute, under load, in the test
     * suite's copies from PoCL to Oclgrind). Waited for here instead. */
    *out = NULL;
    return clWaitForEvents(1, &ev);
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

/* Adds what a command on queue q (in context ctx; q NULL: unknown, wait for every event) must
 * wait for before it reads s (its last write) or writes s (its last write and all reads). Events
 * of other contexts are bridged with user events. Only clt__waitlist_for calls it, after
 * clt__storage_touch (the lazy hook): no command reaches a storage without that. */
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

clt_status clt__waitlist_for(clt_waitlist *wl, clt_device *d, clt_storage *const *reads, int nreads,
                             clt_storage *const *writes, int nwrites, const char *fn) {
  clt_status st = CLT_OK;
  /* deferred results the command reads or writes are computed first (lib/lazy.c) */
  for (int i = 0; i < nreads && st == CLT_OK; i++)
    if (reads[i])
      st = clt__storage_touch(reads[i], false, fn);
  for (int i = 0; i < nwrites && st == CLT_OK; i++)
    if (writes[i])
      st = clt__storage_touch(writes[i], true, fn);
  if (st != CLT_OK)
    return st;
  for (int i = 0; i < nreads && st == CLT_OK; i++)
    if (reads[i])
      st = waitlist_add_q(wl, reads[i], false, clt__cl(d)->queue, clt__cl(d)->context, fn);
  for (int i = 0; i < nwrites && st == CLT_OK; i++)
    if (writes[i])
      st = waitlist_add_q(wl, writes[i], true, clt__cl(d)->queue, clt__cl(d)->context, fn);
  if (st != CLT_OK)
    clt__waitlist_clear(wl);
  return st;
}

void clt__note_command(cl_event ev, clt_device *d, clt_storage *const *reads, int nreads,
                       clt_storage *const *writes, int nwrites) {
  for (int i = 0; i < nreads; i++)
    if (reads[i])
      clt__storage_note(reads[i], ev, clt__cl(d)->queue, false);
  for (int i = 0; i < nwrites; i++)
    if (writes[i])
      clt__storage_note(writes[i], ev, clt__cl(d)->queue, true);
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
  if (!atomic_load_explicit(&s->order, memory_order_relaxed))
    atomic_store_explicit(&s->order, &clt__opencl_backend, memory_order_release);
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
      memmove(&s->read_ev[0], &s->read_ev[1], (CLT__MAX_READERS - 1) * sizeof s->read_ev[0]);
      memmove(&s->read_q[0], &s->read_q[1], (CLT__MAX_READERS - 1) * sizeof s->read_q[0]);
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

/* Host storages whose command, of another runtime than a serial one present, has finished: the
 * callback of that runtime's thread parks them here, and a thread of the program releases them
 * (clt__cl_release_parked), since the last release frees what they hold (a pinned buffer of the
 * device they were allocated near, the events of every command that touched them, of any
 * context), which must not enter the serial runtime from the callback's thread. Oclgrind: a PoCL
 * callback freeing Oclgrind's pinned memory while the program enqueued on Oclgrind crashed the
 * 60-gpu lane's fault suite, hung it, or lost a reference count. */
typedef struct parked {
  clt_storage *s;
  struct clt_cl_device *dev; /* whose queue ran the command */
  struct parked *next;
} parked;
static pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;
static parked *parked_list;
static atomic_int parked_count; /* on parked_list */

static void park_storage_cb(cl_event ev, cl_int status, void *data) {
  (void)ev;
  (void)status;
  parked *p = data;
  struct clt_cl_device *d = p->dev; /* p may be released as soon as it is on the list */
  pthread_mutex_lock(&parked_lock);
  p->next = parked_list;
  parked_list = p;
  atomic_fetch_add(&parked_count, 1);
  pthread_mutex_unlock(&parked_lock);
  atomic_fetch_sub(&d->parked_pending, 1); /* after: who sees 0 finds p on the list */
}

void clt__cl_release_parked(clt_device *d) {
  if (d) {
    /* the callbacks of finished commands come a little after clFinish on some runtimes */
    struct timespec step = {0, 100000};
    for (int i = 0; i < 50000 && atomic_load(&clt__cl(d)->parked_pending) > 0; i++)
      nanosleep(&step, NULL);
  }
  if (atomic_load(&parked_count) == 0)
    return;
  pthread_mutex_lock(&parked_lock);
  parked *p = parked_list;
  parked_list = NULL;
  atomic_store(&parked_count, 0);
  pthread_mutex_unlock(&parked_lock);
  while (p) {
    parked *next = p->next;
    clt__storage_release(p->s);
    free(p);
    p = next;
  }
}

clt_status clt__keep_alive(cl_event ev, clt_storage *s, const char *fn) {
  (void)fn;
  clt__storage_retain(s);
  cl_int err;
  if (clt__cl_any_serial() && !clt__cl_context_serial(event_context(ev))) {
    /* The callback parks s (above); a serial runtime runs its callbacks on the thread that runs
     * its queue, a thread of the program, and is not parked. */
    clt__cl_release_parked(NULL); /* those parked earlier, here where no lock is held */
    cl_command_queue q = NULL;
    clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, NULL);
    struct clt_cl_device *d = q ? clt__cl_queue_device(q) : NULL;
    parked *p = d ? malloc(sizeof *p) : NULL;
    err = CL_OUT_OF_HOST_MEMORY;
    if (p) {
      *p = (parked){.s = s, .dev = d};
      atomic_fetch_add(&d->parked_pending, 1);
      if ((err = clSetEventCallback(ev, CL_COMPLETE, park_storage_cb, p)) != CL_SUCCESS) {
        atomic_fetch_sub(&d->parked_pending, 1);
        free(p);
      }
    }
  } else {
    err = clSetEventCallback(ev, CL_COMPLETE, release_storage_cb, s);
  }
  if (err != CL_SUCCESS) {
    /* Without a callback, keep the memory valid by waiting here. */
    clWaitForEvents(1, &ev);
    clt__storage_release(s);
  }
  return CLT_OK;
}

/* ---- the program's own commands that clt's work waits for, on a batching runtime ------------
 * clt_tensor_cl_release_to makes clt's later commands wait for an event of the program's own
 * queue, and flushes that queue. A runtime that runs a queue only inside clFlush or clFinish
 * (Oclgrind; `serial` in device.c) does not run the program's command later by itself when
 * what held it back completes afterwards (a user event the program completes after the call):
 * a blocking wait of clt's behind it then waited for ever (kernel:test_acquire_release on
 * Oclgrind alone, issue 25). Such events are kept here until they complete (a callback drops
 * them), and every blocking wait of clt's flushes their queues first. On other runtimes a
 * flushed command runs when its events complete, and nothing is kept. */
enum { FOREIGN_MAX = 64 };
static pthread_mutex_t foreign_lock = PTHREAD_MUTEX_INITIALIZER;
static cl_event foreign[FOREIGN_MAX];
static atomic_int nforeign;

static void CL_CALLBACK foreign_done(cl_event ev, cl_int status, void *data) {
  (void)status;
  (void)data;
  bool found = false;
  pthread_mutex_lock(&foreign_lock);
  int n = atomic_load(&nforeign);
  for (int i = 0; i < n && !found; i++)
    if (foreign[i] == ev) {
      foreign[i] = foreign[n - 1];
      atomic_store(&nforeign, n - 1);
      found = true;
    }
  pthread_mutex_unlock(&foreign_lock);
  if (found)
    clReleaseEvent(ev);
}

bool clt__cl_note_foreign(cl_event ev, cl_command_queue q) {
  cl_context ctx = NULL;
  cl_int status = CL_COMPLETE;
  if (!q || clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL) != CL_SUCCESS ||
      !clt__cl_context_serial(ctx) ||
      clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) !=
          CL_SUCCESS ||
      status == CL_COMPLETE || status < 0)
    return false;
  pthread_mutex_lock(&foreign_lock);
  int n = atomic_load(&nforeign);
  bool kept = n < FOREIGN_MAX;
  if (kept) {
    clRetainEvent(ev);
    foreign[n] = ev;
    atomic_store(&nforeign, n + 1);
  }
  pthread_mutex_unlock(&foreign_lock);
  if (kept && clSetEventCallback(ev, CL_COMPLETE, foreign_done, NULL) != CL_SUCCESS)
    foreign_done(ev, CL_COMPLETE, NULL);
  return kept;
}

void clt__cl_flush_foreign(void) {
  if (atomic_load_explicit(&nforeign, memory_order_acquire) == 0)
    return;
  cl_event evs[FOREIGN_MAX];
  pthread_mutex_lock(&foreign_lock);
  int n = atomic_load(&nforeign);
  for (int i = 0; i < n; i++) {
    evs[i] = foreign[i];
    clRetainEvent(evs[i]);
  }
  pthread_mutex_unlock(&foreign_lock);
  for (int i = 0; i < n; i++) {
    /* a pending command's queue lives at least until the command completes */
    cl_command_queue q = NULL;
    if (clGetEventInfo(evs[i], CL_EVENT_COMMAND_QUEUE, sizeof q, &q, NULL) == CL_SUCCESS && q)
      clFlush(q);
    clReleaseEvent(evs[i]);
  }
}

static clt_status wait_events(cl_event *evs, int n, const char *fn, const clt_device *dev) {
  clt_status st = CLT_OK;
  clt__cl_flush_foreign();
  for (int i = 0; i < n; i++) {
    cl_int err = clWaitForEvents(1, &evs[i]);
    if (err != CL_SUCCESS && st == CLT_OK)
      st = clt__cl_error(err, fn, "waiting for an earlier command", dev);
    clReleaseEvent(evs[i]);
  }
  return st;
}

clt_status clt__cl_storage_wait(clt_storage *s, bool writing, const char *fn) {
  cl_event evs[CLT__MAX_READERS + 1];
  int n = collect(s, writing, NULL, evs);
  return n ? wait_events(evs, n, fn, s->dev) : CLT_OK;
}

clt_status clt__wait_command(cl_event ev, clt_device *dev, const char *fn, const char *what) {
  clt__cl_flush_foreign();
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

void clt__cl_storage_drop(clt_storage *s, bool wait) {
  if (wait) {
    clt__cl_flush_foreign();
    cl_event ev;
    if ((ev = s->write_ev) != NULL)
      clWaitForEvents(1, &ev);
    for (int i = 0; i < s->nreads; i++) {
      ev = s->read_ev[i];
      clWaitForEvents(1, &ev);
    }
  }
  if (s->write_ev)
    clReleaseEvent(s->write_ev);
  for (int i = 0; i < s->nreads; i++)
    clReleaseEvent(s->read_ev[i]);
}
