/* SPDX-License-Identifier: MIT */
/* opencl/fault.c - the wrappers that count OpenCL calls and fail the armed one, and the delayed
 * device (see lib/fault.h and lib/opencl/cl-fault.h); the switch itself and the allocation
 * wrappers are lib/fault.c's. Compiled to nothing unless configure ran with
 * --enable-fault-injection. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "config.h"

#ifdef CLT_FAULT_INJECTION

#define CLT_FAULT_NO_REDIRECT /* this file calls the real functions */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl-fault.h"

/* ---- delay: a device that runs behind -------------------------------------------------------
 * CLT_FAULT_DELAY_US=N (read once) holds every command clt enqueues for N microseconds after its
 * enqueue: the command also waits for a user event that a timer thread completes then. A real GPU
 * runs far behind the host, PoCL's CPU devices hardly at all, so ordering bugs (a read that does
 * not wait for a write, a buffer reused while a command still uses it) show on PoCL only this way.
 * The queues are in order, so the device falls further behind with every command; the host
 * blocks only where clt waits. */
typedef struct gate {
  cl_event ev;
  struct timespec due;
  struct gate *next;
} gate;

static pthread_once_t delay_once = PTHREAD_ONCE_INIT;
static long delay_us;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static gate *gate_head, *gate_tail;

static bool due_before(const struct timespec *a, const struct timespec *b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec <= b->tv_nsec);
}

/* Opens each gate at its time, in order (every gate waits the same delay). */
static void *gate_keeper(void *unused) {
  (void)unused;
  pthread_mutex_lock(&gate_lock);
  for (;;) {
    while (!gate_head)
      pthread_cond_wait(&gate_cond, &gate_lock);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    gate *g = gate_head;
    if (!due_before(&g->due, &now)) {
      pthread_cond_timedwait(&gate_cond, &gate_lock, &g->due);
      continue;
    }
    gate_head = g->next;
    if (!gate_head)
      gate_tail = NULL;
    pthread_mutex_unlock(&gate_lock);
    clSetUserEventStatus(g->ev, CL_COMPLETE);
    clReleaseEvent(g->ev);
    free(g);
    pthread_mutex_lock(&gate_lock);
  }
  return NULL;
}

static void delay_init(void) {
  const char *e = getenv("CLT_FAULT_DELAY_US");
  char *end = NULL;
  long v = e && *e ? strtol(e, &end, 10) : 0;
  if (e && *e && (*end != '\0' || v < 0 || v > 10000000)) {
    fprintf(stderr,
            "clt: warning: CLT_FAULT_DELAY_US='%s' is not a number of microseconds "
            "from 0 to 10000000; no delay\n",
            e);
    return;
  }
  pthread_t t;
  if (v > 0 && pthread_create(&t, NULL, gate_keeper, NULL) == 0) {
    pthread_detach(t);
    delay_us = v;
  }
}

/* A command's wait list with its gate added (or the list as given, with no delay). */
typedef struct gated {
  cl_uint n;
  const cl_event *list;
  cl_event buf[16];
  cl_event *heap;
  cl_event gate; /* our reference to the gate, held until the enqueue has returned */
} gated;

/* Hands a gate to the keeper, to open delay_us from now. Done before the enqueue: a blocking
 * command (a blocking map or read) returns only after its gate has opened. */
static void gate_schedule(cl_event ev) {
  gate *k = malloc(sizeof *k);
  if (!k) {
    clSetUserEventStatus(ev, CL_COMPLETE);
    clReleaseEvent(ev);
    return;
  }
  k->ev = ev;
  k->next = NULL;
  clock_gettime(CLOCK_REALTIME, &k->due);
  k->due.tv_nsec += (delay_us % 1000000) * 1000;
  k->due.tv_sec += delay_us / 1000000 + k->due.tv_nsec / 1000000000;
  k->due.tv_nsec %= 1000000000;
  pthread_mutex_lock(&gate_lock);
  if (gate_tail)
    gate_tail->next = k;
  else
    gate_head = k;
  gate_tail = k;
  pthread_cond_signal(&gate_cond);
  pthread_mutex_unlock(&gate_lock);
}

static void gate_begin(gated *g, cl_command_queue q, cl_uint nwait, const cl_event *wait) {
  pthread_once(&delay_once, delay_init);
  g->n = nwait;
  g->list = wait;
  g->heap = NULL;
  g->gate = NULL;
  cl_context ctx = NULL;
  if (delay_us == 0 ||
      clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL) != CL_SUCCESS)
    return;
  cl_event *list = nwait + 1 <= 16 ? g->buf : (g->heap = malloc((nwait + 1) * sizeof *list));
  if (!list)
    return;
  cl_int err;
  cl_event gate_ev = clCreateUserEvent(ctx, &err);
  if (err != CL_SUCCESS) {
    free(g->heap);
    g->heap = NULL;
    return;
  }
  if (nwait)
    memcpy(list, wait, nwait * sizeof *list);
  list[nwait] = gate_ev;
  g->n = nwait + 1;
  g->list = list;
  /* The keeper takes one reference and opens the gate at its time (unwaited if the enqueue
   * fails); this one keeps the event alive until the enqueue has returned. */
  clRetainEvent(gate_ev);
  g->gate = gate_ev;
  gate_schedule(gate_ev);
}

static void gate_end(gated *g) {
  free(g->heap);
  if (g->gate)
    clReleaseEvent(g->gate);
}

/* Enqueues `call` (which uses g.n and g.list as its wait list) behind a gate. */
#define GATED(q, nwait, wait, type, call)                                                          \
  do {                                                                                             \
    gated g;                                                                                       \
    gate_begin(&g, q, nwait, wait);                                                                \
    type r_ = (call);                                                                              \
    gate_end(&g);                                                                                  \
    return r_;                                                                                     \
  } while (0)

/* ---- alloc ---------------------------------------------------------------------------------- */

#define FAIL_OBJECT(kind, site, code)                                                              \
  do {                                                                                             \
    if (clt__fault_hit(kind, site, #code)) {                                                                  \
      if (err)                                                                                     \
        *err = code;                                                                               \
      return NULL;                                                                                 \
    }                                                                                              \
  } while (0)

#define FAIL_STATUS(kind, site, code)                                                              \
  do {                                                                                             \
    if (clt__fault_hit(kind, site, #code))                                                                    \
      return code;                                                                                 \
  } while (0)

cl_context clt__fault_clCreateContext(const cl_context_properties *props, cl_uint ndev,
                                      const cl_device_id *devs,
                                      void(CL_CALLBACK *notify)(const char *, const void *, size_t,
                                                                void *),
                                      void *user, cl_int *err) {
  FAIL_OBJECT(CLT__FAULT_ALLOC, "clCreateContext", CL_OUT_OF_HOST_MEMORY);
  return clCreateContext(props, ndev, devs, notify, user, err);
}

cl_command_queue clt__fault_clCreateCommandQueue(cl_context ctx, cl_device_id dev,
                                                 cl_command_queue_properties props, cl_int *err) {
  FAIL_OBJECT(CLT__FAULT_ALLOC, "clCreateCommandQueue", CL_OUT_OF_RESOURCES);
  return clCreateCommandQueue(ctx, dev, props, err);
}

cl_mem clt__fault_clCreateBuffer(cl_context ctx, cl_mem_flags flags, size_t size, void *host,
                                 cl_int *err) {
  FAIL_OBJECT(CLT__FAULT_ALLOC, "clCreateBuffer", CL_MEM_OBJECT_ALLOCATION_FAILURE);
  return clCreateBuffer(ctx, flags, size, host, err);
}

cl_event clt__fault_clCreateUserEvent(cl_context ctx, cl_int *err) {
  FAIL_OBJECT(CLT__FAULT_ALLOC, "clCreateUserEvent", CL_OUT_OF_RESOURCES);
  return clCreateUserEvent(ctx, err);
}

/* ---- enqueue -------------------------------------------------------------------------------- */

cl_int clt__fault_clEnqueueReadBuffer(cl_command_queue q, cl_mem buf, cl_bool blocking,
                                      size_t offset, size_t size, void *ptr, cl_uint nwait,
                                      const cl_event *wait, cl_event *ev) {
  FAIL_STATUS(CLT__FAULT_ENQUEUE, "clEnqueueReadBuffer", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, cl_int,
        clEnqueueReadBuffer(q, buf, blocking, offset, size, ptr, g.n, g.list, ev));
}

cl_int clt__fault_clEnqueueWriteBuffer(cl_command_queue q, cl_mem buf, cl_bool blocking,
                                       size_t offset, size_t size, const void *ptr, cl_uint nwait,
                                       const cl_event *wait, cl_event *ev) {
  FAIL_STATUS(CLT__FAULT_ENQUEUE, "clEnqueueWriteBuffer", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, cl_int,
        clEnqueueWriteBuffer(q, buf, blocking, offset, size, ptr, g.n, g.list, ev));
}

cl_int clt__fault_clEnqueueCopyBuffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t src_off,
                                      size_t dst_off, size_t size, cl_uint nwait,
                                      const cl_event *wait, cl_event *ev) {
  FAIL_STATUS(CLT__FAULT_ENQUEUE, "clEnqueueCopyBuffer", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, cl_int,
        clEnqueueCopyBuffer(q, src, dst, src_off, dst_off, size, g.n, g.list, ev));
}

cl_int clt__fault_clEnqueueFillBuffer(cl_command_queue q, cl_mem buf, const void *pattern,
                                      size_t pattern_size, size_t offset, size_t size,
                                      cl_uint nwait, const cl_event *wait, cl_event *ev) {
  FAIL_STATUS(CLT__FAULT_ENQUEUE, "clEnqueueFillBuffer", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, cl_int,
        clEnqueueFillBuffer(q, buf, pattern, pattern_size, offset, size, g.n, g.list, ev));
}

void *clt__fault_clEnqueueMapBuffer(cl_command_queue q, cl_mem buf, cl_bool blocking,
                                    cl_map_flags flags, size_t offset, size_t size, cl_uint nwait,
                                    const cl_event *wait, cl_event *ev, cl_int *err) {
  FAIL_OBJECT(CLT__FAULT_ENQUEUE, "clEnqueueMapBuffer", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, void *,
        clEnqueueMapBuffer(q, buf, blocking, flags, offset, size, g.n, g.list, ev, err));
}

cl_int clt__fault_clEnqueueUnmapMemObject(cl_command_queue q, cl_mem mem, void *ptr, cl_uint nwait,
                                          const cl_event *wait, cl_event *ev) {
  FAIL_STATUS(CLT__FAULT_ENQUEUE, "clEnqueueUnmapMemObject", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, cl_int, clEnqueueUnmapMemObject(q, mem, ptr, g.n, g.list, ev));
}

cl_int clt__fault_clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim,
                                         const size_t *offset, const size_t *global,
                                         const size_t *local, cl_uint nwait, const cl_event *wait,
                                         cl_event *ev) {
  FAIL_STATUS(CLT__FAULT_ENQUEUE, "clEnqueueNDRangeKernel", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, cl_int,
        clEnqueueNDRangeKernel(q, k, dim, offset, global, local, g.n, g.list, ev));
}

cl_int clt__fault_clEnqueueNativeKernel(cl_command_queue q, void(CL_CALLBACK *fn)(void *),
                                        void *args, size_t cb_args, cl_uint nmem,
                                        const cl_mem *mems, const void **locs, cl_uint nwait,
                                        const cl_event *wait, cl_event *ev) {
  FAIL_STATUS(CLT__FAULT_ENQUEUE, "clEnqueueNativeKernel", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, cl_int,
        clEnqueueNativeKernel(q, fn, args, cb_args, nmem, mems, locs, g.n, g.list, ev));
}

cl_int clt__fault_clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint nwait,
                                              const cl_event *wait, cl_event *ev) {
  FAIL_STATUS(CLT__FAULT_ENQUEUE, "clEnqueueMarkerWithWaitList", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, cl_int, clEnqueueMarkerWithWaitList(q, g.n, g.list, ev));
}

cl_int clt__fault_clEnqueueBarrierWithWaitList(cl_command_queue q, cl_uint nwait,
                                               const cl_event *wait, cl_event *ev) {
  FAIL_STATUS(CLT__FAULT_ENQUEUE, "clEnqueueBarrierWithWaitList", CL_OUT_OF_RESOURCES);
  GATED(q, nwait, wait, cl_int, clEnqueueBarrierWithWaitList(q, g.n, g.list, ev));
}

/* ---- build ---------------------------------------------------------------------------------- */

cl_program clt__fault_clCreateProgramWithSource(cl_context ctx, cl_uint count, const char **strings,
                                                const size_t *lengths, cl_int *err) {
  FAIL_OBJECT(CLT__FAULT_BUILD, "clCreateProgramWithSource", CL_OUT_OF_HOST_MEMORY);
  return clCreateProgramWithSource(ctx, count, strings, lengths, err);
}

cl_program clt__fault_clCreateProgramWithBinary(cl_context ctx, cl_uint ndev,
                                                const cl_device_id *devs, const size_t *lengths,
                                                const unsigned char **binaries, cl_int *status,
                                                cl_int *err) {
  FAIL_OBJECT(CLT__FAULT_BUILD, "clCreateProgramWithBinary", CL_OUT_OF_HOST_MEMORY);
  return clCreateProgramWithBinary(ctx, ndev, devs, lengths, binaries, status, err);
}

cl_int clt__fault_clBuildProgram(cl_program p, cl_uint ndev, const cl_device_id *devs,
                                 const char *options, void(CL_CALLBACK *notify)(cl_program, void *),
                                 void *user) {
  FAIL_STATUS(CLT__FAULT_BUILD, "clBuildProgram", CL_BUILD_PROGRAM_FAILURE);
  return clBuildProgram(p, ndev, devs, options, notify, user);
}

cl_kernel clt__fault_clCreateKernel(cl_program p, const char *name, cl_int *err) {
  FAIL_OBJECT(CLT__FAULT_BUILD, "clCreateKernel", CL_OUT_OF_RESOURCES);
  return clCreateKernel(p, name, err);
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int clt_fault_disabled;
#endif /* CLT_FAULT_INJECTION */
