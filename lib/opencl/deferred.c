/* SPDX-License-Identifier: MIT */
/* opencl/deferred.c - kernels launched before their program is built. A kernel that clt uses
 * for the first time in a process needs its program built (about a second on PoCL) or loaded
 * from the disk cache; waiting for that inside the call that enqueues the kernel would block an
 * asynchronous API on the host. Instead the call enqueues, on the device's in-order queue, a
 * marker (everything before) and a barrier that waits for a user event (everything after waits
 * for it), and returns. A thread of its own builds the program, launches the kernels on a queue
 * of its own after the marker, waits for them and completes the user event: the device runs
 * the same kernels in the same order, so the bits are those of a launch after a build in the
 * caller's thread. */
#include "cl-internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deferred launches in flight at most; past it, a launch builds in the caller's thread. */
#define JOBS_MAX 16
#define MEMS_MAX (CLT__DEFERRED_MAX_KERNELS * CLT__DEFERRED_MAX_ARGS)

static atomic_long launches;

long clt__deferred_launches(void) { return atomic_load(&launches); }

/* The last failure, for the messages of the waits that see it (error.c: clt__cl_error). */
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static char fail_msg[1400];

bool clt__deferred_failure(char *buf, size_t size) {
  pthread_mutex_lock(&fail_lock);
  bool failed = fail_msg[0] != 0;
  if (failed)
    snprintf(buf, size, "%s", fail_msg);
  pthread_mutex_unlock(&fail_lock);
  return failed;
}

void clt__deferred_value(clt_cl_deferred_kernel *k, size_t size, const void *value) {
  if (k->nargs >= CLT__DEFERRED_MAX_ARGS || size > sizeof k->args[0].value)
    abort(); /* a launch of clt's own, fixed at compile time */
  k->args[k->nargs].size = size;
  k->args[k->nargs].local = k->args[k->nargs].mem = false;
  memcpy(k->args[k->nargs].value, value, size);
  k->nargs++;
}

void clt__deferred_mem(clt_cl_deferred_kernel *k, cl_mem m) {
  clt__deferred_value(k, sizeof m, &m);
  k->args[k->nargs - 1].mem = true;
}

void clt__deferred_local(clt_cl_deferred_kernel *k, size_t size) {
  if (k->nargs >= CLT__DEFERRED_MAX_ARGS)
    abort();
  k->args[k->nargs].size = size;
  k->args[k->nargs].local = true;
  k->args[k->nargs].mem = false;
  k->nargs++;
}

bool clt__deferred_wanted(clt_device *d, const char *family, const char *defines) {
  return clt__background_builds(d) && !clt__program_built(d, family, defines);
}

typedef struct job {
  clt_device *dev;
  cl_context context;     /* retained */
  cl_device_id id;
  cl_command_queue queue; /* the device's, retained: flushed so that `after` runs */
  char *family, *defines;
  const char *fn; /* the public function that launched it (a string literal) */
  int nk;
  clt_cl_deferred_kernel k[CLT__DEFERRED_MAX_KERNELS];
  cl_mem mems[MEMS_MAX]; /* the buffer arguments, retained */
  int nmems;
  cl_event after; /* the marker: every command before the launch */
  cl_event gate;  /* the user event the barrier waits for */
} job;

static void job_free(job *j) {
  for (int i = 0; i < j->nmems; i++)
    clReleaseMemObject(j->mems[i]);
  if (j->after)
    clReleaseEvent(j->after);
  if (j->gate)
    clReleaseEvent(j->gate);
  if (j->queue)
    clReleaseCommandQueue(j->queue);
  if (j->context)
    clReleaseContext(j->context);
  free(j->family);
  free(j->defines);
  free(j);
}

/* Builds, launches and waits; the status the gate is completed with (CL_COMPLETE or an error). */
static cl_int run_job(job *j) {
  cl_program p = NULL;
  if (clt__get_program(j->dev, j->family, j->defines, j->fn, &p) != CLT_OK) {
    pthread_mutex_lock(&fail_lock);
    snprintf(fail_msg, sizeof fail_msg,
             "a kernel launched before its program was built (%s of %s on %s) could not run: %s",
             j->k[0].name, j->fn, j->dev->name, clt_last_error());
    pthread_mutex_unlock(&fail_lock);
    return CL_BUILD_PROGRAM_FAILURE;
  }
  cl_int err = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueue(j->context, j->id, 0, &err);
  if (err != CL_SUCCESS)
    return err;
  cl_kernel ks[CLT__DEFERRED_MAX_KERNELS] = {NULL};
  cl_event last = NULL;
  for (int i = 0; i < j->nk && err == CL_SUCCESS; i++) {
    const clt_cl_deferred_kernel *k = &j->k[i];
    ks[i] = clCreateKernel(p, k->name, &err);
    for (int a = 0; a < k->nargs && err == CL_SUCCESS; a++)
      err = clSetKernelArg(ks[i], (cl_uint)a, k->args[a].size,
                           k->args[a].local ? NULL : k->args[a].value);
    cl_event ev = NULL;
    if (err == CL_SUCCESS) /* the side queue is in order: the first kernel waits for `after` */
      err = clEnqueueNDRangeKernel(q, ks[i], 1, NULL, &k->launch.global,
                                   k->launch.local ? &k->launch.local : NULL, i == 0 ? 1 : 0,
                                   i == 0 ? &j->after : NULL, &ev);
    if (ev) {
      if (last)
        clReleaseEvent(last);
      last = ev;
    }
  }
  clFlush(q);
  clFlush(j->queue); /* a batching runtime runs `after` only once its queue is flushed */
  if (last) {
    cl_int w = clWaitForEvents(1, &last);
    cl_int status = CL_COMPLETE;
    clGetEventInfo(last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    if (err == CL_SUCCESS)
      err = w != CL_SUCCESS ? w : status < 0 ? status : CL_SUCCESS;
    clReleaseEvent(last);
  } else {
    clFinish(q);
  }
  for (int i = 0; i < j->nk; i++)
    if (ks[i])
      clReleaseKernel(ks[i]);
  clReleaseCommandQueue(q);
  return err;
}

static void finish(job *j) {
  cl_int err = run_job(j);
  /* A negative status fails the barrier and, through it, whatever waits for it. */
  clSetUserEventStatus(j->gate, err == CL_SUCCESS ? CL_COMPLETE : err < 0 ? err : -1);
  job_free(j);
}

static void *job_main(void *arg) {
  finish(arg);
  clt__cl_thread_end();
  return NULL;
}

typedef struct handoff {
  job *j;
  bool handed; /* j belongs to its thread (or was finished) */
} handoff;

static clt_status enqueue_deferred(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                   cl_event *ev) {
  handoff *h = ctx;
  job *j = h->j;
  struct clt_cl_device *c = clt__cl(d);
  cl_int err;
  j->gate = clCreateUserEvent(c->context, &err);
  if (err != CL_SUCCESS) {
    j->gate = NULL;
    return clt__cl_error(err, fn, "clCreateUserEvent", d);
  }
  err = clEnqueueMarkerWithWaitList(c->queue, wl->n, wl->n ? wl->ev : NULL, &j->after);
  if (err != CL_SUCCESS) {
    j->after = NULL;
    clSetUserEventStatus(j->gate, CL_COMPLETE);
    return clt__cl_error(err, fn, "clEnqueueMarkerWithWaitList", d);
  }
  err = clEnqueueBarrierWithWaitList(c->queue, 1, &j->gate, ev);
  if (err != CL_SUCCESS) { /* the marker stays: a no-op */
    clSetUserEventStatus(j->gate, CL_COMPLETE);
    return clt__cl_error(err, fn, "clEnqueueBarrierWithWaitList", d);
  }
  atomic_fetch_add(&launches, 1);
  h->handed = true;
  if (!clt__cl_thread_start(d, job_main, j, JOBS_MAX))
    finish(j); /* no thread: the build and launch here, as without deferral */
  return CLT_OK;
}

clt_status clt__cl_run_deferred(clt_device *d, const char *family, const char *defines,
                                const clt_cl_deferred_kernel *k, int nk,
                                clt_storage *const *reads, int nreads,
                                clt_storage *const *writes, int nwrites, const char *fn,
                                cl_event *keep) {
  if (nk < 1 || nk > CLT__DEFERRED_MAX_KERNELS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "a deferred launch of %d kernels", nk);
  job *j = calloc(1, sizeof *j);
  if (!j || !(j->family = clt__strdup(family)) || !(j->defines = clt__strdup(defines))) {
    if (j)
      free(j->family);
    free(j);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  struct clt_cl_device *c = clt__cl(d);
  j->dev = d;
  j->fn = fn;
  j->id = c->id;
  j->context = c->context;
  clRetainContext(j->context);
  j->queue = c->queue;
  clRetainCommandQueue(j->queue);
  j->nk = nk;
  memcpy(j->k, k, (size_t)nk * sizeof *k);
  for (int i = 0; i < nk; i++)
    for (int a = 0; a < k[i].nargs; a++)
      if (k[i].args[a].mem) {
        cl_mem m;
        memcpy(&m, k[i].args[a].value, sizeof m);
        if (m && clRetainMemObject(m) == CL_SUCCESS)
          j->mems[j->nmems++] = m;
      }
  handoff h = {j, false};
  clt_status st = clt__cl_submit(d, reads, nreads, writes, nwrites, enqueue_deferred, &h, fn, keep);
  if (!h.handed)
    job_free(j); /* nothing enqueued that it must complete */
  return st;
}
