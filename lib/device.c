/* SPDX-License-Identifier: MIT */
/* device.c - the device registry: the host plus the devices each backend of its table discovers
 * (the OpenCL backend: every device of every platform, lib/opencl/device.c), their names,
 * settings and descriptions, and clt_device_synchronize. */
#define _GNU_SOURCE
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The device backends whose devices follow the host's, in this order (clt_device_at's indices).
 * A new backend adds its table here, after the OpenCL one, so that cl:N stays clt_device_at(N).
 * The reference backend (lib/ref/) lists devices only when CLT_REF_DEVICES asks for them. */
static const struct clt_backend *const device_backends[] = {&clt__opencl_backend,
                                                            &clt__ref_backend};

static clt_device host_device;
static clt_device **devices; /* every backend's devices, in device_backends order */
static int ndevices;
static clt_device *default_device;
static bool env_sync;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;

static void copy_str(char *dst, size_t size, const char *src) {
  snprintf(dst, size, "%s", src ? src : "");
}

void clt__trim(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t'))
    s[--n] = '\0';
  size_t i = 0;
  while (s[i] == ' ')
    i++;
  if (i)
    memmove(s, s + i, n - i + 1);
}

static void describe(clt_device *d) {
  double gib = (double)d->global_mem / (1024.0 * 1024.0 * 1024.0);
  if (d->kind == CLT_DEVICE_HOST)
    snprintf(d->description, sizeof d->description, "host: %.127s (%.1f GiB, %d CPUs, fp64)",
             d->model, gib, d->compute_units);
  else
    snprintf(d->description, sizeof d->description,
             "%.100s %.100s (%.100s, driver %.60s, %.100s, %.1f GiB, %d CUs, %s)", d->vendor,
             d->model, d->platform_name, d->driver, d->cl_version, gib, d->compute_units,
             d->fp64 ? "fp64" : "no fp64");
}

static void init_locks(clt_device *d) {
  pthread_mutex_init(&d->lock, NULL);
  pthread_mutex_init(&d->cache_lock, NULL);
}

static void init_host(void) {
  clt_device *d = &host_device;
  d->index = -1;
  copy_str(d->name, sizeof d->name, "cpu");
  d->kind = CLT_DEVICE_HOST;
  d->backend = &clt__host_backend;
  d->fp64 = true;
  d->unified_memory = true;
  d->platform_index = -1;
  d->context_index = -1;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  d->global_mem = (pages > 0 && page > 0) ? (uint64_t)pages * (uint64_t)page : 0;
  d->max_alloc = d->global_mem;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  d->compute_units = cpus > 0 ? (int)cpus : 1;
  copy_str(d->vendor, sizeof d->vendor, "host");
  copy_str(d->model, sizeof d->model, "CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "model name", 10) == 0) {
        char *colon = strchr(line, ':');
        if (colon) {
          copy_str(d->model, sizeof d->model, colon + 1);
          clt__trim(d->model);
        }
        break;
      }
    }
    fclose(f);
  }
  copy_str(d->driver, sizeof d->driver, clt_version());
  init_locks(d);
  describe(d);
}

/* The item of a comma-separated list that names device name: "name" alone, or with with_value
 * "name=value". Returns what follows the name ("" or "=value..."), or NULL. */
static const char *list_item(const char *list, const char *name, bool with_value) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",");
    if (strncmp(p, name, n) == 0 && (with_value ? len > n && p[n] == '=' : len == n))
      return p + n;
    p += len + (p[len] ? 1 : 0);
  }
  return NULL;
}

/* CLT_NO_FP64 ("1" for every OpenCL device, or a list such as "cl:0,cl:2") makes clt treat
 * devices as lacking fp64, to test on a workstation that code also runs on GPUs without it. */
static bool hide_fp64(const char *name) {
  const char *env = getenv("CLT_NO_FP64");
  if (!env || !*env || strcmp(env, "0") == 0)
    return false;
  return strcmp(env, "1") == 0 || list_item(env, name, false);
}

const char *clt__device_setting(const char *var, const char *name, char *buf, size_t size) {
  const char *env = getenv(var);
  if (!env || !*env || size == 0)
    return NULL;
  if (!strchr(env, '=')) { /* one value for every device */
    snprintf(buf, size, "%s", env);
    return buf;
  }
  const char *v = list_item(env, name, true);
  if (!v)
    return NULL;
  snprintf(buf, size, "%.*s", (int)strcspn(v + 1, ","), v + 1);
  return buf;
}

/* CLT_KERNEL_SHAPE (grid or chunked, for every OpenCL device or per device as
 * "cl:1=grid,cl:0=chunked") overrides the kernel shape the device kind chooses, so that the GPU
 * branches (grid-stride loops, work-group reductions) run on PoCL's CPU devices too. */
static void choose_shape(clt_device *d) {
  d->chunked = d->kind == CLT_DEVICE_CL_CPU;
  char buf[32];
  const char *v = clt__device_setting("CLT_KERNEL_SHAPE", d->name, buf, sizeof buf);
  if (!v)
    return;
  if (strcmp(v, "grid") == 0)
    d->chunked = false;
  else if (strcmp(v, "chunked") == 0)
    d->chunked = true;
  else if (strcmp(v, "auto") != 0)
    fprintf(stderr,
            "clt: warning: CLT_KERNEL_SHAPE gives '%s' for %s; expected grid, chunked or auto "
            "(one for every device, or a list such as cl:1=grid,cl:0=chunked); using %s\n",
            v, d->name, d->chunked ? "chunked" : "grid");
}

void clt__device_setup(clt_device *d) {
  if (d->fp64 && hide_fp64(d->name))
    d->fp64 = false;
  choose_shape(d);
  init_locks(d);
  describe(d);
}

static bool env_flag(const char *name, bool dflt) {
  const char *s = getenv(name);
  if (!s || !*s)
    return dflt;
  return strcmp(s, "0") != 0;
}

static bool env_alloc_cache;

void clt__device_forget(clt_device *d) {
  pthread_mutex_destroy(&d->lock);
  pthread_mutex_destroy(&d->cache_lock);
  memset(d, 0, sizeof *d);
}

/* Lists the devices of every backend of the table, one backend after the other, in an array of
 * the registry's own: a backend's array stays the backend's (the OpenCL backend keeps its own to
 * finish its queues at exit), so it is copied, never adopted, grown or freed here. Each backend
 * numbers its contexts from 0; the registry moves each backend's numbers past those of the
 * backends before it, so that equal context_index means one backend and one context (what
 * clt_device_info promises, and what lib/transfer.c copies directly between). */
static void discover_all(void) {
  const size_t nb = sizeof device_backends / sizeof device_backends[0];
  int context_base = 0;
  for (size_t b = 0; b < nb; b++) {
    if (!device_backends[b]->device.discover)
      continue;
    clt_device **found = NULL;
    int n = 0;
    device_backends[b]->device.discover(&found, &n);
    if (n == 0)
      continue;
    int next_base = context_base;
    for (int i = 0; i < n; i++) {
      found[i]->context_index += context_base;
      if (found[i]->context_index + 1 > next_base)
        next_base = found[i]->context_index + 1;
    }
    context_base = next_base;
    clt_device **all = realloc(devices, (size_t)(ndevices + n) * sizeof *all);
    if (!all) {
      fprintf(stderr,
              "clt: warning: out of host memory while listing the devices of the %s "
              "backend; skipping them\n",
              device_backends[b]->name);
      continue; /* the devices themselves stay allocated, unused, until exit */
    }
    memcpy(all + ndevices, found, (size_t)n * sizeof *all);
    devices = all;
    ndevices += n;
  }
}

static void registry_init(void) {
  init_host();
  env_sync = env_flag("CLT_SYNC", false);
  env_alloc_cache = env_flag("CLT_ALLOC_CACHE", true);
  discover_all();
}

static void ensure_registry(void) { pthread_once(&registry_once, registry_init); }

bool clt__env_sync(void) {
  ensure_registry();
  return env_sync;
}

bool clt__env_alloc_cache(void) {
  ensure_registry();
  return env_alloc_cache;
}

clt_device *const *clt__device_list(int *count) {
  ensure_registry();
  *count = ndevices;
  return devices;
}

clt_device *clt_cpu(void) {
  ensure_registry();
  return &host_device;
}

int clt_device_count(void) {
  ensure_registry();
  return ndevices;
}

clt_device *clt_device_at(int index) {
  ensure_registry();
  if (index < 0 || index >= ndevices) {
    clt__error(CLT_ERR_DEVICE_NOT_FOUND, "clt_device_at",
               "index %d is out of range: clt_device_count() is %d (the devices besides cpu, "
               "numbered from 0)",
               index, ndevices);
    return NULL;
  }
  return devices[index];
}

static void list_devices(char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "cpu");
  for (int i = 0; i < ndevices && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, ", %s", devices[i]->name);
}

static clt_device *lookup(const char *name) {
  if (strcmp(name, "cpu") == 0 || strcmp(name, "host") == 0)
    return &host_device;
  for (int i = 0; i < ndevices; i++)
    if (strcmp(name, devices[i]->name) == 0)
      return devices[i];
  return NULL;
}

clt_status clt_device_get(const char *name, clt_device **out) {
  static const char fn[] = "clt_device_get";
  if (!name)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "name is NULL");
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  ensure_registry();
  clt_device *d = lookup(name);
  if (!d) {
    char list[1024];
    list_devices(list, sizeof list);
    return clt__error(CLT_ERR_DEVICE_NOT_FOUND, fn, "no device named '%s'; available: %s", name,
                      list);
  }
  *out = d;
  return CLT_OK;
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static void choose_default(void) {
  const char *env = getenv("CLT_DEVICE");
  if (env && *env) {
    clt_device *d = lookup(env);
    if (d) {
      default_device = d;
      return;
    }
    char list[1024];
    list_devices(list, sizeof list);
    fprintf(stderr,
            "clt: warning: CLT_DEVICE='%s' names no device (available: %s); using the "
            "automatic choice\n",
            env, list);
  }
  default_device = clt_try_gpu(0);
}

clt_device *clt_device_default(void) {
  ensure_registry();
  pthread_once(&default_once, choose_default);
  return default_device;
}

clt_device *clt_try_gpu(int i) {
  ensure_registry();
  int seen = 0;
  for (int k = 0; k < ndevices; k++)
    if (devices[k]->kind == CLT_DEVICE_CL_GPU && seen++ == i)
      return devices[k];
  return &host_device;
}

clt_status clt__check_device(const clt_device *dev, const char *fn, const char *arg) {
  if (!dev)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL; pass clt_cpu() or a device", arg);
  ensure_registry();
  if (dev == &host_device)
    return CLT_OK;
  for (int i = 0; i < ndevices; i++)
    if (dev == devices[i])
      return CLT_OK;
  return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is not a clt device", arg);
}

const char *clt_device_name(const clt_device *d) { return d ? d->name : "(null)"; }
const char *clt_device_description(const clt_device *d) { return d ? d->description : ""; }
int clt_device_is_gpu(const clt_device *d) { return d && d->kind == CLT_DEVICE_CL_GPU; }
int clt_device_is_host(const clt_device *d) { return d && d->kind == CLT_DEVICE_HOST; }
int clt_device_has_fp64(const clt_device *d) { return d && d->fp64; }

clt_status clt_device_info_get(const clt_device *d, clt_device_info *out) {
  static const char fn[] = "clt_device_info_get";
  clt_status s = clt__check_device(d, fn, "d");
  if (s != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  static const char *kinds[] = {"host", "cpu", "gpu", "accelerator", "other"};
  clt_device_info i;
  i.name = d->name;
  i.kind = d->kind;
  i.kind_name = kinds[d->kind];
  i.vendor = d->vendor;
  i.model = d->model;
  i.driver_version = d->driver;
  i.cl_version = d->cl_version;
  i.platform = d->platform_name;
  i.memory_bytes = d->global_mem;
  i.max_alloc_bytes = d->max_alloc;
  i.compute_units = d->compute_units;
  i.fp64 = d->fp64;
  i.platform_index = d->platform_index;
  i.context_index = d->context_index;
  *out = i;
  return CLT_OK;
}

/* ---- transfer counters (clt_transfer_stats_get reads them) --------------------------------------
 */

static void add(clt_device *d, uint64_t *count_field, uint64_t *bytes_field, size_t bytes) {
  pthread_mutex_lock(&d->cache_lock);
  (*count_field)++;
  *bytes_field += bytes;
  pthread_mutex_unlock(&d->cache_lock);
}

void clt__count_transfer(clt_device *src, clt_device *dst, size_t bytes, bool implicit) {
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

void clt__count_internal(clt_device *dev, size_t bytes) {
  if (bytes > 0 && dev->kind != CLT_DEVICE_HOST)
    add(dev, &dev->xfer.internal_count, &dev->xfer.internal_bytes, bytes);
}

void clt__count_h2d(clt_device *dev, size_t bytes) {
  clt__count_transfer(clt_cpu(), dev, bytes, false);
}
void clt__count_d2h(clt_device *dev, size_t bytes) {
  clt__count_transfer(dev, clt_cpu(), bytes, false);
}

const char *clt_version(void) { return PACKAGE_VERSION; }
