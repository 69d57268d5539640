/* SPDX-License-Identifier: MIT */
/* opencl/device.c - OpenCL device discovery (every device of every platform, one context per
 * platform or per device, one in-order queue each, in a struct clt_cl_device) and synchronize.
 * The registry that lists the devices of every backend is lib/device.c's. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "cl-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void dev_str(cl_device_id id, cl_device_info what, char *buf, size_t size) {
  buf[0] = '\0';
  if (clGetDeviceInfo(id, what, size, buf, NULL) != CL_SUCCESS)
    buf[0] = '\0';
  buf[size - 1] = '\0';
  clt__trim(buf);
}

/* Fills one OpenCL device entry; the context is set by the caller. */
static void init_cl_device(struct clt_cl_device *c, int index, int platform_index, cl_platform_id p,
                           cl_device_id id) {
  memset(c, 0, sizeof *c);
  clt_device *d = &c->base;
  d->index = index;
  snprintf(d->name, sizeof d->name, "cl:%d", index);
  d->backend = &clt__opencl_backend;
  c->platform = p;
  c->id = id;
  d->platform_index = platform_index;
  cl_device_type type = 0;
  clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  d->kind = (type & CL_DEVICE_TYPE_GPU)           ? CLT_DEVICE_CL_GPU
            : (type & CL_DEVICE_TYPE_CPU)         ? CLT_DEVICE_CL_CPU
            : (type & CL_DEVICE_TYPE_ACCELERATOR) ? CLT_DEVICE_CL_ACCELERATOR
                                                  : CLT_DEVICE_CL_OTHER;
  dev_str(id, CL_DEVICE_VENDOR, d->vendor, sizeof d->vendor);
  dev_str(id, CL_DEVICE_NAME, d->model, sizeof d->model);
  dev_str(id, CL_DRIVER_VERSION, d->driver, sizeof d->driver);
  dev_str(id, CL_DEVICE_VERSION, d->cl_version, sizeof d->cl_version);
  clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof d->platform_name, d->platform_name, NULL);
  d->platform_name[sizeof d->platform_name - 1] = '\0';
  c->serial = strstr(d->platform_name, "Oclgrind") != NULL;
  cl_device_exec_capabilities caps = 0;
  c->native = clGetDeviceInfo(id, CL_DEVICE_EXECUTION_CAPABILITIES, sizeof caps, &caps, NULL) ==
                  CL_SUCCESS &&
              (caps & CL_EXEC_NATIVE_KERNEL) != 0;
  cl_ulong global_mem = 0, max_alloc = 0;
  clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_mem, &global_mem, NULL);
  clGetDeviceInfo(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
  d->global_mem = global_mem;
  d->max_alloc = max_alloc;
  cl_uint cu = 1;
  clGetDeviceInfo(id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  d->compute_units = cu > 0 ? (int)cu : 1;
  size_t wg = 1;
  clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
  d->max_work_group = wg > 0 ? wg : 1;
  cl_bool unified = CL_FALSE;
  clGetDeviceInfo(id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
  d->unified_memory = unified == CL_TRUE;
  size_t ext_size = 0;
  if (clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_size) == CL_SUCCESS && ext_size > 0) {
    char *ext = malloc(ext_size + 1);
    if (ext && clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, ext_size, ext, NULL) == CL_SUCCESS) {
      ext[ext_size] = '\0';
      d->fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    }
    free(ext);
  }
  clt__device_setup(d);
  pthread_mutex_init(&c->programs_lock, NULL);
  pthread_cond_init(&c->programs_built, NULL);
}

/* Undoes init_cl_device for a device that could not be opened. */
static void forget_cl_device(struct clt_cl_device *c) {
  pthread_mutex_destroy(&c->programs_lock);
  pthread_cond_destroy(&c->programs_built);
  clt__device_forget(&c->base);
  memset(c, 0, sizeof *c);
}

/* Discovery has no caller to return an error to: say why devices are missing. */
static void no_memory(const char *what) {
  fprintf(stderr, "clt: warning: out of host memory while listing %s; skipping them\n", what);
}

/* The devices discovered, kept until exit (the registry's list points into this array). */
static struct clt_cl_device *opened;

/* The devices whose queues finish_at_exit waits for (clt__cl_wait_at_exit marks them). */
static clt_device **exit_list;
static int exit_count;
static bool any_serial; /* a device of exit_list is serial */
static atomic_bool exit_wait[256];
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* A program may return from main with device work still queued (nothing obliges it to
 * synchronize). A native-kernel matmul (lib/opencl/matmul.c) still queued then runs while the
 * process tears down, and its host CBLAS call can find the library already finalized by its
 * destructor: a crash at exit, seen under load in the test suite. Commands queued behind a
 * deferred launch (deferred.c) are submitted when its job opens the barrier, and PoCL compiles
 * each kernel's work-group function at submission, in its own threads: a compile in flight at
 * exit is the likeliest source of the one leak report of LLVM's objects the ASan lane has shown
 * (not reproduced since). So at exit clt
 * waits for the queues of the devices that ran native kernels or deferred launches, up to 10 s
 * in all (a command waiting on an event
 * the program never completes must not hang the exit), polling a marker rather than calling
 * clFinish. The handler is registered at the first native kernel, after the OpenCL runtimes
 * and the CBLAS library set up their own exit work, so it runs before theirs (an earlier
 * registration, at discovery, ran after Oclgrind's clean-up and corrupted its heap). */
static void finish_at_exit(void) {
  cl_event marks[64];
  int n = 0;
  for (int i = 0; i < exit_count && i < 256 && n < 64; i++) {
    if (!atomic_load(&exit_wait[i]))
      continue;
    cl_command_queue q = clt__cl(exit_list[i])->queue;
    if (clEnqueueMarkerWithWaitList(q, 0, NULL, &marks[n]) == CL_SUCCESS) {
      clFlush(q);
      n++;
    }
  }
  struct timespec step = {0, 1000000};
  for (int waited_ms = 0; waited_ms < 10000; waited_ms++) {
    bool done = true;
    for (int i = 0; i < n && done; i++) {
      cl_int status = CL_COMPLETE;
      clGetEventInfo(marks[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
      done = status <= CL_COMPLETE; /* complete, or failed (negative) */
    }
    if (done)
      break;
    nanosleep(&step, NULL);
  }
  for (int i = 0; i < n; i++)
    clReleaseEvent(marks[i]);
}

static void register_exit(void) { atexit(finish_at_exit); }

bool clt__cl_context_serial(cl_context ctx) {
  for (int i = 0; i < exit_count; i++)
    if (clt__cl(exit_list[i])->context == ctx)
      return clt__cl(exit_list[i])->serial;
  return false;
}

bool clt__cl_any_serial(void) { return any_serial; }

struct clt_cl_device *clt__cl_queue_device(cl_command_queue q) {
  for (int i = 0; i < exit_count; i++)
    if (clt__cl(exit_list[i])->queue == q)
      return clt__cl(exit_list[i]);
  return NULL;
}

void clt__cl_wait_at_exit(clt_device *d) {
  for (int i = 0; i < exit_count && i < 256; i++)
    if (exit_list[i] == d && !atomic_load(&exit_wait[i])) {
      atomic_store(&exit_wait[i], true);
      pthread_once(&exit_once, register_exit);
    }
}

void clt__cl_discover(clt_device ***out, int *count) {
  *out = NULL;
  *count = 0;
  const char *per = getenv("CLT_CONTEXT_PER_DEVICE");
  bool context_per_device = per && *per && strcmp(per, "0") != 0;

  cl_uint np = 0;
  if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0)
    return; /* no OpenCL at all: the host alone */
  cl_platform_id *plats = calloc(np, sizeof *plats);
  if (!plats || clGetPlatformIDs(np, plats, NULL) != CL_SUCCESS) {
    if (!plats)
      no_memory("the OpenCL platforms");
    free(plats);
    return;
  }
  /* Count devices first so the array never moves (handles stay valid until exit). */
  cl_uint total = 0;
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) == CL_SUCCESS)
      total += nd;
  }
  struct clt_cl_device *devs = calloc(total ? total : 1, sizeof *devs);
  clt_device **list = calloc(total ? total : 1, sizeof *list);
  if (!devs || !list) {
    no_memory("the OpenCL devices");
    free(devs);
    free(list);
    free(plats);
    return;
  }
  *out = list;
  int n = 0, next_context = 0;
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0)
      continue;
    cl_device_id *ids = calloc(nd, sizeof *ids);
    if (!ids) {
      no_memory("the devices of an OpenCL platform");
      continue;
    }
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) != CL_SUCCESS) {
      free(ids);
      continue;
    }
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plats[p], 0};
    cl_context shared = NULL;
    cl_int err = CL_SUCCESS;
    if (!context_per_device) {
      /* Devices of one platform share a context, so they copy buffers directly. */
      shared = clCreateContext(props, nd, ids, NULL, NULL, &err);
      if (err != CL_SUCCESS) {
        fprintf(stderr, "clt: warning: cannot create a context on platform %u: %s; skipping it\n",
                p, clt__cl_error_name(err));
        free(ids);
        continue;
      }
    }
    int shared_index = shared ? next_context++ : -1;
    for (cl_uint i = 0; i < nd; i++) {
      struct clt_cl_device *c = &devs[n];
      clt_device *d = &c->base;
      init_cl_device(c, n, (int)p, plats[p], ids[i]);
      if (shared) {
        clRetainContext(shared);
        c->context = shared;
      } else {
        c->context = clCreateContext(props, 1, &ids[i], NULL, NULL, &err);
        if (err != CL_SUCCESS) {
          fprintf(stderr, "clt: warning: cannot create a context for %s: %s; skipping it\n",
                  d->model, clt__cl_error_name(err));
          forget_cl_device(c);
          continue;
        }
      }
      c->queue = clCreateCommandQueue(c->context, ids[i], CL_QUEUE_PROFILING_ENABLE, &err);
      if (err != CL_SUCCESS) {
        fprintf(stderr, "clt: warning: cannot create a queue for %s: %s; skipping it\n", d->model,
                clt__cl_error_name(err));
        clReleaseContext(c->context);
        forget_cl_device(c);
        continue;
      }
      d->context_index = shared ? shared_index : next_context++;
      list[n] = d;
      *count = ++n;
    }
    if (shared)
      clReleaseContext(shared); /* each device holds its own reference */
    free(ids);
  }
  free(plats);
  if (n == 0) { /* none could be opened (the warnings said why) */
    free(devs);
    free(list);
    *out = NULL;
    return;
  }
  opened = devs; /* the list may point past a first device that could not be opened */
  exit_list = list;
  exit_count = n;
  for (int i = 0; i < n; i++)
    any_serial = any_serial || clt__cl(list[i])->serial;
}

clt_status clt__cl_synchronize(clt_device *d, const char *fn) {
  clt__cl_flush_foreign(); /* the program's commands clt's may wait behind (order.c) */
  cl_int err = clFinish(clt__cl(d)->queue);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clFinish", d);
  clt__cl_release_parked(d); /* the host memory its finished commands used (order.c) */
  return CLT_OK;
}
