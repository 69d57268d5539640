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
  /* launches of clt's own, their arguments fixed at compile time */
  if (k->nargs >= CLT__DEFERRED_MAX_ARGS || size > CLT__DEFERRED_BLOB - k->used)
    abort();
  k->args[k->nargs].size = size;
  k->args[k->nargs].at = k->used;
  k->args[k->nargs].local = k->args[k->nargs].mem = false;
  memcpy(k->blob + k->used, value, size);
  k->used += (size + 7) & ~(size_t)7;
  if (k->used > CLT__DEFERRED_BLOB)
    k->used = CLT__DEFERRED_BLOB;
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
  k->args[k->nargs].at = 0;
  k->args[k->nargs].local = true;
  k->args[k->nargs].mem = false;
  k->nargs++;
}

bool clt__deferred_wanted(clt_device *d, const char *family, const char *defines) {
  return clt__background_builds(d) && !clt__program_built(d, family, defines) &&
         !clt__program_on_disk(d, family, defines);
}

/* One launch: its kernels, the buffers they take (retained), the marker it runs after and the
 * user event that opens the barrier after it. */
typedef struct launch {
  const char *fn; /* the public function that made it (a string literal) */
  int nk;
  clt_cl_deferred_kernel k[CLT__DEFERRED_MAX_KERNELS];
  cl_mem mems[MEMS_MAX];
  int nmems;
  cl_event after; /* the marker: every command before the launch */
  cl_event gate;  /* the user event the barrier waits for */
  struct launch *next;
} launch;

/* The launches behind one program's build on one device, run in order by one thread: the first
 * launch of a program not built starts a job; later ones, while it runs, join its list. */
typedef struct job {
  clt_device *dev;
  cl_context context; /* retained */
  cl_device_id id;
  cl_command_queue queue; /* the device's, retained: flushed so that the markers run */
  char *family, *defines;
  launch *head, *tail; /* under jobs_lock */
  struct job *next;    /* in `jobs` */
} job;

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static job *jobs; /* the jobs whose thread takes launches still */

static void launch_free(launch *l) {
  for (int i = 0; i < l->nmems; i++)
    clReleaseMemObject(l->mems[i]);
  if (l->after)
    clReleaseEvent(l->after);
  if (l->gate)
    clReleaseEvent(l->gate);
  free(l);
}

static void job_free(job *j) {
  if (j->queue)
    clReleaseCommandQueue(j->queue);
  if (j->context)
    clReleaseContext(j->context);
  free(j->family);
  free(j->defines);
  free(j);
}

/* Runs l's kernels from program p on the side queue q after l's marker and waits for them; the
 * status its gate is completed with (CL_SUCCESS or an error). */
static cl_int run_launch(job *j, cl_program p, cl_command_queue q, launch *l) {
  cl_int err = CL_SUCCESS;
  cl_kernel ks[CLT__DEFERRED_MAX_KERNELS] = {NULL};
  cl_event last = NULL;
  for (int i = 0; i < l->nk && err == CL_SUCCESS; i++) {
    const clt_cl_deferred_kernel *k = &l->k[i];
    ks[i] = clCreateKernel(p, k->name, &err);
    for (int a = 0; a < k->nargs && err == CL_SUCCESS; a++)
      err = clSetKernelArg(ks[i], (cl_uint)a, k->args[a].size,
                           k->args[a].local ? NULL : k->blob + k->args[a].at);
    cl_event ev = NULL;
    if (err == CL_SUCCESS) /* the side queue is in order: the first kernel waits for `after` */
      err = clEnqueueNDRangeKernel(q, ks[i], 1, NULL, &k->launch.global,
                                   k->launch.local ? &k->launch.local : NULL, i == 0 ? 1 : 0,
                                   i == 0 ? &l->after : NULL, &ev);
    if (ev) {
      if (last)
        clReleaseEvent(last);
      last = ev;
    }
  }
  clFlush(q);
  clFlush(j->queue); /* a batching runtime runs the marker only once its queue is flushed */
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
  for (int i = 0; i < l->nk; i++)
    if (ks[i])
      clReleaseKernel(ks[i]);
  return err;
}

/* Opens l's gate with err (a negative status fails the barrier and, through it, whatever waits
 * for it) and frees l, all but the gate released first: once the gate opens, the program may
 * count the OpenCL objects it holds (the context's references). */
static void open_gate(launch *l, cl_int err) {
  cl_event gate = l->gate;
  l->gate = NULL;
  launch_free(l);
  clSetUserEventStatus(gate, err == CL_SUCCESS ? CL_COMPLETE : err < 0 ? err : -1);
  clReleaseEvent(gate);
}

/* The next launch of j, or NULL, having then taken j off `jobs` (no launch joins it after). */
static launch *next_launch(job *j) {
  pthread_mutex_lock(&jobs_lock);
  launch *l = j->head;
  if (l) {
    j->head = l->next;
    if (!j->head)
      j->tail = NULL;
  } else {
    for (job **pp = &jobs; *pp; pp = &(*pp)->next)
      if (*pp == j) {
        *pp = j->next;
        break;
      }
  }
  pthread_mutex_unlock(&jobs_lock);
  return l;
}

/* Builds j's program, then runs its launches in order until none is left; frees j. */
static void run_job(job *j) {
  cl_program p = NULL;
  cl_int err = CL_SUCCESS;
  launch *l = next_launch(j);
  clt_status built = clt__get_program(j->dev, j->family, j->defines, l->fn, &p);
  clt__cl_builds_end(); /* hand() began it: the entry is stored, the launches are not builds */
  if (built != CLT_OK) {
    pthread_mutex_lock(&fail_lock);
    snprintf(fail_msg, sizeof fail_msg,
             "a kernel launched before its program was built (%s of %s on %s) could not run: %s",
             l->k[0].name, l->fn, j->dev->name, clt_last_error());
    pthread_mutex_unlock(&fail_lock);
    err = CL_BUILD_PROGRAM_FAILURE;
  }
  cl_command_queue q = NULL;
  if (err == CL_SUCCESS)
    q = clCreateCommandQueue(j->context, j->id, 0, &err);
  for (; l; l = next_launch(j))
    open_gate(l, err == CL_SUCCESS ? run_launch(j, p, q, l) : err);
  if (q)
    clReleaseCommandQueue(q);
  job_free(j);
}

static void *job_main(void *arg) {
  run_job(arg);
  clt__cl_thread_end();
  return NULL;
}

typedef struct handoff {
  const char *family, *defines;
  launch *l;
  bool handed; /* l belongs to a job */
} handoff;

/* Hands l to the job of its program on d, starting one where none takes launches; false where
 * none could start (out of memory): then l is the caller's still. */
static bool hand(clt_device *d, const char *family, const char *defines, launch *l) {
  pthread_mutex_lock(&jobs_lock);
  job *j = jobs;
  while (j && !(j->dev == d && strcmp(j->family, family) == 0 && strcmp(j->defines, defines) == 0))
    j = j->next;
  if (j) {
    if (j->tail)
      j->tail->next = l;
    else
      j->head = l;
    j->tail = l;
    pthread_mutex_unlock(&jobs_lock);
    return true;
  }
  j = calloc(1, sizeof *j);
  if (!j || !(j->family = clt__strdup(family)) || !(j->defines = clt__strdup(defines))) {
    if (j)
      free(j->family);
    free(j);
    pthread_mutex_unlock(&jobs_lock);
    return false;
  }
  struct clt_cl_device *c = clt__cl(d);
  j->dev = d;
  j->id = c->id;
  j->context = c->context;
  clRetainContext(j->context);
  j->queue = c->queue;
  clRetainCommandQueue(j->queue);
  j->head = j->tail = l;
  j->next = jobs;
  jobs = j;
  pthread_mutex_unlock(&jobs_lock);
  clt__cl_builds_begin(); /* run_job ends it after the build */
  if (!clt__cl_thread_start(d, job_main, j, JOBS_MAX))
    run_job(j); /* no thread: the build and the launches here, as without deferral */
  return true;
}

static clt_status enqueue_deferred(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                   cl_event *ev) {
  handoff *h = ctx;
  launch *l = h->l;
  struct clt_cl_device *c = clt__cl(d);
  cl_int err;
  l->gate = clCreateUserEvent(c->context, &err);
  if (err != CL_SUCCESS) {
    l->gate = NULL;
    return clt__cl_error(err, fn, "clCreateUserEvent", d);
  }
  err = clEnqueueMarkerWithWaitList(c->queue, wl->n, wl->n ? wl->ev : NULL, &l->after);
  if (err != CL_SUCCESS) {
    l->after = NULL;
    clSetUserEventStatus(l->gate, CL_COMPLETE);
    return clt__cl_error(err, fn, "clEnqueueMarkerWithWaitList", d);
  }
  err = clEnqueueBarrierWithWaitList(c->queue, 1, &l->gate, ev);
  if (err != CL_SUCCESS) { /* the marker stays: a no-op */
    clSetUserEventStatus(l->gate, CL_COMPLETE);
    return clt__cl_error(err, fn, "clEnqueueBarrierWithWaitList", d);
  }
  atomic_fetch_add(&launches, 1);
  /* A program that returns from main with this launch still queued: its exit waits for the
   * job (program.c: bg_wait_all) and then for the queue (device.c: finish_at_exit), so that
   * neither the job nor the driver's threads running what came after the barrier are still
   * inside the driver's compiler while exit() tears the process down. */
  clt__cl_wait_at_exit(d);
  if (hand(d, h->family, h->defines, l)) {
    h->handed = true;
  } else { /* no job: opened at once, failed */
    h->handed = true;
    open_gate(l, CL_OUT_OF_HOST_MEMORY);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  return CLT_OK;
}

clt_status clt__cl_run_deferred(clt_device *d, const char *family, const char *defines,
                                const clt_cl_deferred_kernel *k, int nk, clt_storage *const *reads,
                                int nreads, clt_storage *const *writes, int nwrites, const char *fn,
                                cl_event *keep) {
  if (nk < 1 || nk > CLT__DEFERRED_MAX_KERNELS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "a deferred launch of %d kernels", nk);
  launch *l = calloc(1, sizeof *l);
  if (!l)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  l->fn = fn;
  l->nk = nk;
  memcpy(l->k, k, (size_t)nk * sizeof *k);
  for (int i = 0; i < nk; i++)
    for (int a = 0; a < k[i].nargs; a++)
      if (k[i].args[a].mem) {
        cl_mem m;
        memcpy(&m, k[i].blob + k[i].args[a].at, sizeof m);
        if (m && clRetainMemObject(m) == CL_SUCCESS)
          l->mems[l->nmems++] = m;
      }
  handoff h = {family, defines, l, false};
  clt_status st = clt__cl_submit(d, reads, nreads, writes, nwrites, enqueue_deferred, &h, fn, keep);
  if (!h.handed)
    launch_free(l); /* nothing enqueued that it must complete */
  return st;
}

static bool is_buffer(const clt_cl_arg *a, clt_storage *const *s, int n) {
  if (a->size != sizeof(cl_mem) || !a->value)
    return false;
  cl_mem m;
  memcpy(&m, a->value, sizeof m);
  for (int i = 0; i < n; i++)
    if (s[i] && m && s[i]->buf == (void *)m)
      return true;
  return false;
}

clt_status clt__cl_run_deferred_args(clt_device *d, const char *family, const char *defines,
                                     const char *kname, const clt_launch *l, const clt_cl_arg *args,
                                     int nargs, clt_storage *const *reads, int nreads,
                                     clt_storage *const *writes, int nwrites, const char *fn) {
  clt_cl_deferred_kernel *k = calloc(1, sizeof *k);
  if (!k)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  snprintf(k->name, sizeof k->name, "%s", kname);
  k->launch = *l;
  for (int a = 0; a < nargs; a++) {
    if (!args[a].value)
      clt__deferred_local(k, args[a].size);
    else if (is_buffer(&args[a], reads, nreads) || is_buffer(&args[a], writes, nwrites))
      clt__deferred_mem(k, *(const cl_mem *)args[a].value);
    else
      clt__deferred_value(k, args[a].size, args[a].value);
  }
  clt_status st =
      clt__cl_run_deferred(d, family, defines, k, 1, reads, nreads, writes, nwrites, fn, NULL);
  free(k);
  return st;
}
