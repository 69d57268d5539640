/* program.c - run-time kernel builds: the embedded kernels/<family>.cl files (or those in
 * $CLT_KERNEL_PATH), built
 * lazily once per (device, family, defines) and cached in memory. */
#include "clt-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kernel_entry {
  char *name;
  cl_kernel kernel;
  struct kernel_entry *next;
} kernel_entry;

typedef struct program_entry {
  char *family;
  char *defines;
  cl_program program;
  kernel_entry *kernels;
  struct program_entry *next;
} program_entry;

struct clt_program_cache {
  program_entry *head;
};

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
      if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
      } else {
        buf[n] = '\0';
      }
    }
  }
  fclose(f);
  return buf;
}

/* The text of kernels/<name>.cl: from $CLT_KERNEL_PATH when set, else the embedded copy.
 * Returns malloc'ed text or NULL with the error set. */
static char *load_source(const char *name, const char *fn) {
  const char *dir = getenv("CLT_KERNEL_PATH");
  if (dir && *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.cl", dir, name);
    char *text = read_file(path);
    if (!text)
      clt__error(CLT_ERR_IO, fn, "cannot read %s (CLT_KERNEL_PATH is set)", path);
    return text;
  }
  for (size_t i = 0; i < clt__kernel_source_count; i++)
    if (strcmp(clt__kernel_sources[i].name, name) == 0)
      return dup_str(clt__kernel_sources[i].text);
  clt__error(CLT_ERR_INTERNAL, fn, "no kernel source named %s.cl", name);
  return NULL;
}

static clt_status build(clt_device *dev, const char *family, const char *defines, const char *fn,
                        cl_program *out) {
  char *common = load_source("common", fn);
  if (!common)
    return clt_last_status();
  char *body = load_source(family, fn);
  if (!body) {
    free(common);
    return clt_last_status();
  }
  const char *srcs[3] = {defines, common, body};
  cl_int err;
  cl_program p = clCreateProgramWithSource(dev->context, 3, srcs, NULL, &err);
  free(common);
  free(body);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clCreateProgramWithSource", dev);
  const char *extra = getenv("CLT_BUILD_OPTIONS");
  size_t olen = (extra ? strlen(extra) : 0) + 32;
  char *opts = malloc(olen);
  if (!opts) {
    clReleaseProgram(p);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  snprintf(opts, olen, "-cl-std=CL1.2 %s", extra ? extra : "");
  err = clBuildProgram(p, 1, &dev->id, opts, NULL, NULL);
  if (err != CL_SUCCESS) {
    size_t log_size = 0;
    clGetProgramBuildInfo(p, dev->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
    char *log = malloc(log_size + 1);
    if (log) {
      log[0] = '\0';
      clGetProgramBuildInfo(p, dev->id, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
      log[log_size] = '\0';
    }
    clt__error(
        CLT_ERR_BUILD, fn,
        "building kernels/%s.cl for %s (%s) failed: %s\noptions: %s\ndefines:\n%sbuild log:\n%s",
        family, dev->name, dev->model, clt__cl_error_name(err), opts, defines, log ? log : "");
    free(log);
    free(opts);
    clReleaseProgram(p);
    return CLT_ERR_BUILD;
  }
  free(opts);
  *out = p;
  return CLT_OK;
}

clt_status clt__get_kernel(clt_device *dev, const char *family, const char *defines,
                           const char *kernel, const char *fn, cl_kernel *out) {
  clt_status st = CLT_OK;
  pthread_mutex_lock(&dev->lock);
  if (!dev->programs && !(dev->programs = calloc(1, sizeof *dev->programs))) {
    pthread_mutex_unlock(&dev->lock);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  program_entry *e = dev->programs->head;
  while (e && (strcmp(e->family, family) != 0 || strcmp(e->defines, defines) != 0))
    e = e->next;
  if (!e) {
    cl_program p = NULL;
    if ((st = build(dev, family, defines, fn, &p)) != CLT_OK)
      goto done;
    e = calloc(1, sizeof *e);
    if (!e || !(e->family = dup_str(family)) || !(e->defines = dup_str(defines))) {
      if (e) {
        free(e->family);
        free(e);
      }
      clReleaseProgram(p);
      st = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
      goto done;
    }
    e->program = p;
    e->next = dev->programs->head;
    dev->programs->head = e;
  }
  kernel_entry *k = e->kernels;
  while (k && strcmp(k->name, kernel) != 0)
    k = k->next;
  if (!k) {
    cl_int err;
    cl_kernel kern = clCreateKernel(e->program, kernel, &err);
    if (err != CL_SUCCESS) {
      st = clt__cl_error(err, fn, "clCreateKernel", dev);
      goto done;
    }
    k = calloc(1, sizeof *k);
    if (!k || !(k->name = dup_str(kernel))) {
      free(k);
      clReleaseKernel(kern);
      st = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
      goto done;
    }
    k->kernel = kern;
    k->next = e->kernels;
    e->kernels = k;
  }
  *out = k->kernel;
done:
  pthread_mutex_unlock(&dev->lock);
  return st;
}

void clt__program_cache_free(struct clt_program_cache *c) {
  if (!c)
    return;
  program_entry *e = c->head;
  while (e) {
    program_entry *next = e->next;
    kernel_entry *k = e->kernels;
    while (k) {
      kernel_entry *kn = k->next;
      clReleaseKernel(k->kernel);
      free(k->name);
      free(k);
      k = kn;
    }
    clReleaseProgram(e->program);
    free(e->family);
    free(e->defines);
    free(e);
    e = next;
  }
  free(c);
}
