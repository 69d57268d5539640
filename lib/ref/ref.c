/* SPDX-License-Identifier: MIT */
/* ref/ref.c - the reference backend: devices "ref:0", "ref:1", ... whose memory is malloc'ed
 * buffers (the storage's backend handle, not host memory: clt_tensor_data refuses it as it does
 * an OpenCL buffer) and whose work is the host backend's loops, done when the call returns.
 *
 * It exists to check that the core reaches devices only through struct clt_backend, and as the
 * smallest complete device backend to copy when writing one (CONTRIBUTING.md, "Adding a
 * backend"). It is off unless asked for: CLT_REF_DEVICES=N lists N of them (at most
 * REF_MAX_DEVICES) after the OpenCL devices, so the cl:N names never change. */
#define _POSIX_C_SOURCE 200809L
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REF_MAX_DEVICES 8
#define REF_ALIGN 64
/* buffer_alloc's and pinned_alloc's one error code (0 is success). */
#define REF_ERR_NO_MEMORY 1

/* A reference device: the shared facts, then the backend's own state (none is needed: all its
 * work is synchronous). The struct clt_device comes first, so a clt_device * is one of these. */
struct clt_ref_device {
  clt_device base;
};

/* ---- memory ----------------------------------------------------------------------------------
 * A buffer is one aligned malloc'ed block; its handle (s->buf) is also set as s->host, so that
 * the host loops, which address every operand through clt__host_ptr, run on it unchanged. The
 * core never reads s->host of a device storage itself: device kind decides, not the pointer. */

static void *ref_block(size_t bytes) {
  size_t n = (bytes + REF_ALIGN - 1) / REF_ALIGN * REF_ALIGN;
  return aligned_alloc(REF_ALIGN, n ? n : REF_ALIGN);
}

static int ref_buffer_alloc(clt_storage *s) {
  void *p = ref_block(s->bytes);
  if (!p)
    return REF_ERR_NO_MEMORY;
  s->buf = p;
  s->host = p;
  return 0;
}

/* "Pinned" memory for a reference device is a plain block too: copies reach any host memory. */
static int ref_pinned_alloc(clt_device *near, clt_storage *s, size_t alloc) {
  (void)near;
  void *p = ref_block(alloc);
  if (!p)
    return REF_ERR_NO_MEMORY;
  s->buf = p;
  s->host = p;
  return 0;
}

static void ref_buffer_free(clt_storage *s) { free(s->buf); }

static const char *ref_error_name(int err) {
  return err == REF_ERR_NO_MEMORY ? "malloc failed" : "unknown error";
}

static bool ref_error_is_oom(int err) { return err == REF_ERR_NO_MEMORY; }

/* ---- events on storages ----------------------------------------------------------------------
 * Every command of this backend has finished when its call returns, so it notes no events and
 * never sets a storage's order to its table: lib/memory.c does not call these two. They are here
 * because a backend that queues work must have them (the OpenCL backend's are lib/opencl/order.c).
 */

static clt_status ref_storage_wait(clt_storage *s, bool writing, const char *fn) {
  (void)s;
  (void)writing;
  (void)fn;
  return CLT_OK;
}

static void ref_storage_drop(clt_storage *s, bool wait) {
  (void)s;
  (void)wait;
}

/* ---- transfers ---------------------------------------------------------------------------- */

/* dst = src's bytes: host to ref, ref to host, or ref to ref (all reference devices share one
 * context_index). Either side may have commands of another backend pending (a host staging
 * buffer an OpenCL read is filling): wait for them as any host access does. */
static clt_status ref_copy(clt_device *q, clt_tensor *dst, const clt_tensor *src, const char *fn) {
  (void)q;
  clt_status st;
  if ((st = clt__storage_host_wait(src->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(dst->storage, true, fn)) != CLT_OK)
    return st;
  memmove(clt__host_ptr(dst), clt__host_ptr(src), src->nbytes);
  return CLT_OK;
}

static clt_status ref_read(const clt_tensor *t, void *dst, const char *fn) {
  clt_status st = clt__storage_host_wait(t->storage, false, fn);
  if (st != CLT_OK)
    return st;
  memcpy(dst, clt__host_ptr(t), t->nbytes);
  return CLT_OK;
}

/* ---- staging for libclt_mpi -------------------------------------------------------------------
 * The buffer is host memory and a copy is done when its call returns: a read or a write is a
 * memcpy, and its handle is one shared mark, always complete, that needs no reference counting. */

static char ref_done;

/* The tensors may still be in use by another backend's commands (as in ref_copy). */
static clt_status ref_stage_begin(clt_stage *s) {
  clt_status st = CLT_OK;
  if (s->src)
    st = clt__storage_host_wait(s->src->storage, false, s->fn);
  if (st == CLT_OK && s->dst)
    st = clt__storage_host_wait(s->dst->storage, true, s->fn);
  return st;
}

static clt_status ref_stage_read(clt_stage *s, size_t off, size_t len, void *host, void *after,
                                 void **done) {
  (void)after;
  memcpy(host, (const char *)clt__host_ptr(s->src) + off, len);
  *done = &ref_done;
  return CLT_OK;
}

static clt_status ref_stage_write(clt_stage *s, size_t off, size_t len, const void *host,
                                  void *after, void **done) {
  (void)after;
  memcpy((char *)clt__host_ptr(s->dst) + off, host, len);
  *done = &ref_done;
  return CLT_OK;
}

static clt_status ref_stage_finish(clt_stage *s, bool wrote) {
  (void)s;
  (void)wrote;
  return CLT_OK; /* nothing is pending to record */
}

static void ref_stage_keep_alive(void *done, clt_storage *k, const char *fn) {
  (void)done;
  (void)k;
  (void)fn;
}

static clt_status ref_stage_wait(clt_device *dev, void *done, const char *fn, const char *what) {
  (void)dev;
  (void)done;
  (void)fn;
  (void)what;
  return CLT_OK;
}

static void ref_stage_mark(void *done) { (void)done; }

/* ---- compute: the host's loops --------------------------------------------------------------
 * fill and upload are the host table's; the others are the host functions themselves. */

static clt_status ref_fill(clt_tensor *out, const void *pattern, const char *fn) {
  return clt__host_fill(out, pattern, fn);
}

static clt_status ref_upload(clt_tensor *out, const void *src, const char *fn) {
  return clt__host_upload(out, src, fn);
}

/* ---- device ------------------------------------------------------------------------------- */

static clt_status ref_synchronize(clt_device *d, const char *fn) {
  (void)d;
  (void)fn;
  return CLT_OK; /* nothing is ever pending */
}

/* A timing event is the host time of its recording, malloc'ed (the work before it is done). */
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static clt_status ref_event_record(clt_device *dev, const char *fn, void **out) {
  (void)dev;
  double *m = malloc(sizeof *m);
  if (!m)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  *m = now_ms();
  *out = m;
  return CLT_OK;
}

static clt_status ref_event_wait(clt_device *dev, void *ev, const char *fn) {
  (void)dev;
  (void)ev;
  (void)fn;
  return CLT_OK;
}

static clt_status ref_event_elapsed(clt_device *dev, void *start, void *end, const char *fn,
                                    double *ms) {
  (void)dev;
  (void)fn;
  *ms = *(double *)end - *(double *)start;
  return CLT_OK;
}

static void ref_event_release(void *ev) { free(ev); }

/* How many reference devices CLT_REF_DEVICES asks for (0 when unset or invalid, with a
 * warning for the latter). */
static int wanted(void) {
  const char *env = getenv("CLT_REF_DEVICES");
  if (!env || !*env)
    return 0;
  char *end;
  long n = strtol(env, &end, 10);
  if (*end || n < 0 || n > REF_MAX_DEVICES) {
    fprintf(stderr,
            "clt: warning: CLT_REF_DEVICES='%s' is not a number of reference devices from 0 to "
            "%d; listing none (set it to 1 for ref:0)\n",
            env, REF_MAX_DEVICES);
    return 0;
  }
  return (int)n;
}

/* The devices and their list, kept until exit (the registry copies the list; a second discovery
 * gets the same one). */
static struct clt_ref_device *ref_devices;
static clt_device **ref_list;
static int ref_count;

static void ref_discover(clt_device ***out, int *count) {
  *out = ref_list;
  *count = ref_count;
  if (ref_list)
    return;
  int n = wanted();
  if (n == 0)
    return;
  struct clt_ref_device *devs = calloc((size_t)n, sizeof *devs);
  clt_device **list = calloc((size_t)n, sizeof *list);
  if (!devs || !list) {
    fprintf(stderr, "clt: warning: out of host memory while opening the reference devices; "
                    "listing none\n");
    free(devs);
    free(list);
    return;
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t ram = (pages > 0 && page > 0) ? (uint64_t)pages * (uint64_t)page : (uint64_t)1 << 30;
  for (int i = 0; i < n; i++) {
    clt_device *d = &devs[i].base;
    d->index = i;
    snprintf(d->name, sizeof d->name, "ref:%d", i);
    d->kind = CLT_DEVICE_CL_OTHER; /* not the host: its memory is reached through this table */
    d->backend = &clt__ref_backend;
    d->context_index = 0; /* one context: reference devices copy to each other directly */
    d->platform_index = -1;
    d->fp64 = true;
    d->global_mem = ram;
    d->max_alloc = ram / 4;
    d->max_work_group = 1;
    d->compute_units = 1;
    snprintf(d->vendor, sizeof d->vendor, "clt");
    snprintf(d->model, sizeof d->model, "reference device");
    snprintf(d->driver, sizeof d->driver, "%s", clt_version());
    snprintf(d->cl_version, sizeof d->cl_version, "no OpenCL");
    snprintf(d->platform_name, sizeof d->platform_name, "clt reference backend, host loops");
    clt__device_setup(d);
    list[i] = d;
  }
  ref_devices = devs;
  ref_list = list;
  ref_count = n;
  *out = list;
  *count = n;
}

const struct clt_backend clt__ref_backend = {
    .name = "ref",
    .compute.fill = ref_fill,
    .compute.upload = ref_upload,
    .compute.elementwise = clt__host_elementwise,
    .compute.reduce = clt__host_reduce,
    .compute.fill_random = clt__host_fill_random,
    .compute.matmul = clt__host_matmul,
    .compute.matmul_path = clt__host_matmul_path,
    .compute.index_select = clt__host_index_select,
    .memory.copy = ref_copy,
    .memory.read = ref_read,
    .device.event_record = ref_event_record,
    .device.event_wait = ref_event_wait,
    .device.event_elapsed = ref_event_elapsed,
    .device.event_release = ref_event_release,
    .memory.buffer_alloc = ref_buffer_alloc,
    .memory.pinned_alloc = ref_pinned_alloc,
    .memory.error_name = ref_error_name,
    .memory.error_is_oom = ref_error_is_oom,
    .memory.buffer_free = ref_buffer_free,
    .device.discover = ref_discover,
    .memory.storage_wait = ref_storage_wait,
    .memory.storage_drop = ref_storage_drop,
    .device.synchronize = ref_synchronize,
    .staging.stage_begin = ref_stage_begin,
    .staging.stage_read = ref_stage_read,
    .staging.stage_write = ref_stage_write,
    .staging.stage_finish = ref_stage_finish,
    .staging.stage_keep_alive = ref_stage_keep_alive,
    .staging.stage_wait = ref_stage_wait,
    .staging.stage_retain = ref_stage_mark,
    .staging.stage_release = ref_stage_mark,
};
