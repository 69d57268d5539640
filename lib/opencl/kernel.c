/* SPDX-License-Identifier: MIT */
/* opencl/kernel.c - users' own kernels (clt_kernel_*, include/clt.h): the kernel object with its
 * argument list, the per-device cl_kernel made from the program cache (program.c:
 * clt__get_user_program), and the launch, which checks the arguments and the same-device rule
 * and then goes through clt__cl_submit like every clt command, so it is ordered by the tensors'
 * events, seen by CLT_SYNC and by fault injection. docs/interop.md says how to use it. */
#include "cl-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum arg_kind { ARG_UNSET, ARG_TENSOR, ARG_OFFSET, ARG_SCALAR, ARG_LOCAL } arg_kind;

/* One argument as set by the user. ARG_OFFSET is the slot after a tensor set with CLT_OFFSET:
 * its value (the element offset) is taken from that tensor at launch. */
typedef struct kernel_arg {
  arg_kind kind;
  int access;           /* ARG_TENSOR: CLT_READ | CLT_WRITE | CLT_OFFSET */
  clt_tensor *t;        /* ARG_TENSOR: retained */
  size_t size;          /* ARG_SCALAR: bytes at value; ARG_LOCAL: bytes of local memory */
  unsigned char *value; /* ARG_SCALAR: a copy */
} kernel_arg;

/* The kernel built for one device: a cl_kernel of k's own (cl_kernels are not thread-safe, so
 * none is shared with another clt_kernel), used under k's lock. */
typedef struct dev_kernel {
  clt_device *dev;
  cl_kernel kernel;
  cl_uint nargs;
  struct dev_kernel *next;
} dev_kernel;

struct clt_kernel {
  atomic_int refs;
  char *source, *name, *options;
  char *what; /* "kernel heat (from heat.cl)": for build errors */
  /* Guards everything below; held by a launch from its checks to the end of its enqueue (its
   * argument values are set then), never while a program builds. */
  pthread_mutex_t lock;
  kernel_arg *args;
  int nargs, cap; /* slots in use (the highest set index + 1), slots allocated */
  dev_kernel *kernels;
};

static void arg_clear(kernel_arg *a) {
  if (a->kind == ARG_TENSOR)
    clt_tensor_release(a->t);
  free(a->value);
  memset(a, 0, sizeof *a);
}

static clt_status kernel_new(const char *source, const char *name, const char *options,
                             const char *from, const char *fn, clt_kernel **out) {
  if (!source)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "source is NULL");
  if (!*source)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "source is empty%s%s", from ? ": " : "",
                      from ? from : "");
  if (!name || !*name)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "name is %s; give the name of a __kernel function of the source",
                      name ? "empty" : "NULL");
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_kernel *k = calloc(1, sizeof *k);
  size_t wlen = strlen(name) + (from ? strlen(from) : 0) + 32;
  if (!k || !(k->source = clt__strdup(source)) || !(k->name = clt__strdup(name)) ||
      !(k->options = clt__strdup(options ? options : "")) || !(k->what = malloc(wlen))) {
    if (k) {
      free(k->source);
      free(k->name);
      free(k->options);
    }
    free(k);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  snprintf(k->what, wlen, "kernel %s (%s%s)", name, from ? "from " : "user source",
           from ? from : "");
  atomic_init(&k->refs, 1);
  pthread_mutex_init(&k->lock, NULL);
  *out = k;
  return CLT_OK;
}

clt_status clt_kernel_create(const char *source, const char *name, const char *options,
                             clt_kernel **out) {
  return kernel_new(source, name, options, NULL, "clt_kernel_create", out);
}

clt_status clt_kernel_create_file(const char *path, const char *name, const char *options,
                                  clt_kernel **out) {
  static const char fn[] = "clt_kernel_create_file";
  if (!path)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "path is NULL");
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  FILE *f = fopen(path, "rb");
  if (!f)
    return clt__error(CLT_ERR_IO, fn, "cannot open %s: %s", path, strerror(errno));
  char *text = NULL;
  size_t len = 0, cap = 0;
  bool oom = false;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      size_t ncap = cap ? 2 * cap : 8192;
      char *n = realloc(text, ncap);
      if (!n) {
        oom = true;
        break;
      }
      text = n;
      cap = ncap;
    }
    size_t got = fread(text + len, 1, 4096, f);
    len += got;
    if (got < 4096)
      break;
  }
  bool bad = !oom && ferror(f);
  int err = errno;
  fclose(f);
  if (oom || bad) {
    free(text);
    return oom ? clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory reading %s", path)
               : clt__error(CLT_ERR_IO, fn, "cannot read %s: %s", path, strerror(err));
  }
  text[len] = '\0';
  if (strlen(text) != len) {
    free(text);
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "%s holds a NUL byte: it is not OpenCL C source text", path);
  }
  clt_status st = kernel_new(text, name, options, path, fn, out);
  free(text);
  return st;
}

clt_kernel *clt_kernel_retain(clt_kernel *k) {
  if (k)
    atomic_fetch_add(&k->refs, 1);
  return k;
}

void clt_kernel_release(clt_kernel *k) {
  if (!k || atomic_fetch_sub(&k->refs, 1) != 1)
    return;
  for (int i = 0; i < k->nargs; i++)
    arg_clear(&k->args[i]);
  free(k->args);
  dev_kernel *d = k->kernels;
  while (d) {
    dev_kernel *next = d->next;
    clReleaseKernel(d->kernel); /* OpenCL keeps it while enqueued launches use it */
    free(d);
    d = next;
  }
  pthread_mutex_destroy(&k->lock);
  free(k->source);
  free(k->name);
  free(k->options);
  free(k->what);
  free(k);
}

const char *clt_kernel_name(const clt_kernel *k) { return k ? k->name : NULL; }

/* ---- arguments ------------------------------------------------------------------------------ */

/* Makes room for slots up to index + extra; with k->lock held. */
static clt_status grow(clt_kernel *k, int upto, const char *fn) {
  if (upto < k->cap)
    return CLT_OK;
  int ncap = k->cap ? k->cap : 8;
  while (ncap <= upto)
    ncap *= 2;
  kernel_arg *n = realloc(k->args, (size_t)ncap * sizeof *n);
  if (!n)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  memset(n + k->cap, 0, (size_t)(ncap - k->cap) * sizeof *n);
  k->args = n;
  k->cap = ncap;
  return CLT_OK;
}

static clt_status check_index(const clt_kernel *k, int index, const char *fn) {
  if (!k)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "k is NULL");
  if (index < 0 || index > 65535)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "index = %d is not an argument index of kernel %s (0, 1, ...)", index,
                      k->name);
  return CLT_OK;
}

/* Refuses to overwrite the offset slot of a tensor set with CLT_OFFSET; with k->lock held. */
static clt_status check_not_offset(const clt_kernel *k, int index, const char *fn) {
  if (index < k->nargs && k->args[index].kind == ARG_OFFSET)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "argument %d of kernel %s holds the element offset of the tensor set at "
                      "argument %d with CLT_OFFSET; set argument %d again without CLT_OFFSET "
                      "first",
                      index, k->name, index - 1, index - 1);
  return CLT_OK;
}

/* Puts a into slot index (taking over its references), clearing what was there and the offset
 * slot that followed a tensor set with CLT_OFFSET; with k->lock held and room made. */
static void put_arg(clt_kernel *k, int index, kernel_arg *a) {
  if (k->args[index].kind == ARG_TENSOR && (k->args[index].access & CLT_OFFSET) &&
      index + 1 < k->nargs && k->args[index + 1].kind == ARG_OFFSET)
    k->args[index + 1].kind = ARG_UNSET;
  arg_clear(&k->args[index]);
  k->args[index] = *a;
  if (index >= k->nargs)
    k->nargs = index + 1;
  while (k->nargs > 0 && k->args[k->nargs - 1].kind == ARG_UNSET)
    k->nargs--;
}

/* The end of the message for a tensor on a device that k cannot run on: where k runs and how to
 * copy the tensor there. That is the device of k's first tensor argument, else the device k was
 * last built for (clt_kernel_build), else, when k is bound to none yet, the OpenCL devices there
 * are. A device cl:N is clt_device_at(N) (OpenCL devices come first). With k->lock held. */
static void runs_on(const clt_kernel *k, char *buf, size_t size) {
  for (int i = 0; i < k->nargs; i++)
    if (k->args[i].kind == ARG_TENSOR) {
      const clt_device *d = k->args[i].t->storage->dev;
      snprintf(buf, size,
               "kernel %.200s runs on %s, where its argument %d is; copy t there first with "
               "clt_to(t, clt_device_at(%d), &t_dev)",
               k->name, d->name, i, d->index);
      return;
    }
  if (k->kernels) {
    const clt_device *d = k->kernels->dev;
    snprintf(buf, size,
             "kernel %.200s was built for %s; copy t there first with clt_to(t, clt_device_at(%d), "
             "&t_dev)",
             k->name, d->name, d->index);
    return;
  }
  int n = 0, count;
  clt_device *const *all = clt__device_list(&count);
  size_t used = (size_t)snprintf(buf, size, "a kernel runs on an OpenCL device (");
  for (int i = 0; i < count && used < size; i++)
    if (all[i]->backend == &clt__opencl_backend)
      used += (size_t)snprintf(buf + used, size - used, "%s%s", n++ ? ", " : "", all[i]->name);
  if (used < size)
    snprintf(buf + used, size - used, "%s",
             n ? "); copy t to one first with clt_to(t, clt_device_at(0), &t_dev)"
               : "none on this machine)");
}

clt_status clt_kernel_set_tensor(clt_kernel *k, int index, clt_tensor *t, int access) {
  static const char fn[] = "clt_kernel_set_tensor";
  clt_status st;
  if ((st = check_index(k, index, fn)) != CLT_OK || (st = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return st;
  if ((access & ~(CLT_READ | CLT_WRITE | CLT_OFFSET)) || !(access & (CLT_READ | CLT_WRITE)))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "access = %d: give CLT_READ, CLT_WRITE or CLT_READ | CLT_WRITE, optionally "
                      "with CLT_OFFSET",
                      access);
  clt_device *dev = t->storage->dev;
  if (dev->backend != &clt__opencl_backend) {
    char where[512];
    pthread_mutex_lock(&k->lock);
    runs_on(k, where, sizeof where);
    pthread_mutex_unlock(&k->lock);
    return clt__error(CLT_ERR_UNSUPPORTED, fn, "t (argument %d of kernel %s) is on %s, but %s",
                      index, k->name, dev->name, where);
  }
  if (!t->contiguous)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "t (argument %d of kernel %s) is a view whose elements are not contiguous "
                      "(a transpose, a strided slice or an expand); a kernel gets a plain pointer: "
                      "pass clt_contiguous(t, &c)'s result instead",
                      index, k->name);
  if (t->offset != 0 && !(access & CLT_OFFSET))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "t (argument %d of kernel %s) is a view that starts %lld elements into its "
                      "buffer; add CLT_OFFSET to access to get that offset as a ulong argument %d "
                      "(and add it to the pointer in the kernel), or pass clt_contiguous(t, &c)'s "
                      "result",
                      index, k->name, (long long)clt__elem_offset(t), index + 1);
  bool offset = (access & CLT_OFFSET) != 0;
  pthread_mutex_lock(&k->lock);
  if ((st = check_not_offset(k, index, fn)) == CLT_OK && offset && index + 1 < k->nargs &&
      k->args[index + 1].kind == ARG_TENSOR && (k->args[index + 1].access & CLT_OFFSET))
    st = clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                    "CLT_OFFSET puts the offset at argument %d of kernel %s, which holds a tensor "
                    "set with CLT_OFFSET itself; set that one without CLT_OFFSET first",
                    index + 1, k->name);
  if (st == CLT_OK)
    st = grow(k, index + (offset ? 1 : 0), fn);
  if (st == CLT_OK) {
    kernel_arg a = {.kind = ARG_TENSOR, .access = access, .t = clt_tensor_retain(t)};
    put_arg(k, index, &a);
    if (offset) {
      kernel_arg o = {.kind = ARG_OFFSET};
      put_arg(k, index + 1, &o);
    }
  }
  pthread_mutex_unlock(&k->lock);
  return st;
}

clt_status clt_kernel_set_scalar(clt_kernel *k, int index, const void *value, size_t size) {
  static const char fn[] = "clt_kernel_set_scalar";
  clt_status st;
  if ((st = check_index(k, index, fn)) != CLT_OK)
    return st;
  if (!value)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "value is NULL (argument %d of kernel %s); for a NULL pointer argument, set "
                      "a tensor, and for __local memory use clt_kernel_set_local",
                      index, k->name);
  if (size == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "size is 0 (argument %d of kernel %s); give sizeof the value", index,
                      k->name);
  unsigned char *copy = malloc(size);
  if (!copy)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  memcpy(copy, value, size);
  pthread_mutex_lock(&k->lock);
  if ((st = check_not_offset(k, index, fn)) == CLT_OK && (st = grow(k, index, fn)) == CLT_OK) {
    kernel_arg a = {.kind = ARG_SCALAR, .size = size, .value = copy};
    put_arg(k, index, &a);
    copy = NULL;
  }
  pthread_mutex_unlock(&k->lock);
  free(copy);
  return st;
}

clt_status clt_kernel_set_local(clt_kernel *k, int index, size_t bytes) {
  static const char fn[] = "clt_kernel_set_local";
  clt_status st;
  if ((st = check_index(k, index, fn)) != CLT_OK)
    return st;
  if (bytes == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "bytes is 0 (argument %d of kernel %s); __local memory needs a size", index,
                      k->name);
  pthread_mutex_lock(&k->lock);
  if ((st = check_not_offset(k, index, fn)) == CLT_OK && (st = grow(k, index, fn)) == CLT_OK) {
    kernel_arg a = {.kind = ARG_LOCAL, .size = bytes};
    put_arg(k, index, &a);
  }
  pthread_mutex_unlock(&k->lock);
  return st;
}

/* ---- building ------------------------------------------------------------------------------- */

static dev_kernel *find_dev_kernel(clt_kernel *k, clt_device *dev) {
  for (dev_kernel *d = k->kernels; d; d = d->next)
    if (d->dev == dev)
      return d;
  return NULL;
}

/* k's kernel on dev, built (through the program cache) and created if needed. Called and returns
 * with k->lock held; the lock is dropped while the program builds. */
static clt_status dev_kernel_get(clt_kernel *k, clt_device *dev, const char *fn, dev_kernel **out) {
  dev_kernel *d = find_dev_kernel(k, dev);
  if (d) {
    *out = d;
    return CLT_OK;
  }
  pthread_mutex_unlock(&k->lock);
  cl_program p = NULL;
  cl_kernel kern = NULL;
  cl_uint nargs = 0;
  clt_status st = clt__get_user_program(dev, k->source, k->options, k->what, fn, &p);
  if (st == CLT_OK) {
    cl_int err;
    kern = clCreateKernel(p, k->name, &err);
    if (err == CL_INVALID_KERNEL_NAME)
      st = clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the source of %s, built for %s, has no __kernel function named %s", k->what,
                      dev->name, k->name);
    else if (err != CL_SUCCESS)
      st = clt__cl_error(err, fn, "clCreateKernel", dev);
    else if ((err = clGetKernelInfo(kern, CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, NULL)) !=
             CL_SUCCESS)
      st = clt__cl_error(err, fn, "clGetKernelInfo(CL_KERNEL_NUM_ARGS)", dev);
    if (st != CLT_OK && kern) {
      clReleaseKernel(kern);
      kern = NULL;
    }
  }
  pthread_mutex_lock(&k->lock);
  if (st != CLT_OK)
    return st;
  if ((d = find_dev_kernel(k, dev)) != NULL) { /* another thread got there first */
    clReleaseKernel(kern);
    *out = d;
    return CLT_OK;
  }
  d = calloc(1, sizeof *d);
  if (!d) {
    clReleaseKernel(kern);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  d->dev = dev;
  d->kernel = kern;
  d->nargs = nargs;
  d->next = k->kernels;
  k->kernels = d;
  *out = d;
  return CLT_OK;
}

clt_status clt_kernel_build(clt_kernel *k, clt_device *dev, int *nargs) {
  static const char fn[] = "clt_kernel_build";
  clt_status st;
  if (!k)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "k is NULL");
  if ((st = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return st;
  if (dev->backend != &clt__opencl_backend)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "dev is %s, but a kernel runs on an OpenCL device (cl:0, ...)", dev->name);
  dev_kernel *d = NULL;
  pthread_mutex_lock(&k->lock);
  st = dev_kernel_get(k, dev, fn, &d);
  int n = d ? (int)d->nargs : 0;
  pthread_mutex_unlock(&k->lock);
  if (st == CLT_OK && nargs)
    *nargs = n;
  return st;
}

/* ---- launching ------------------------------------------------------------------------------ */

typedef struct launch {
  clt_kernel *k;
  dev_kernel *dk;
  cl_uint work_dim;
  const size_t *global, *local;
} launch;

/* What clSetKernelArg's error means for an argument of this kind. */
static const char *arg_hint(arg_kind kind, cl_int err) {
  if (kind == ARG_TENSOR && (err == CL_INVALID_ARG_SIZE || err == CL_INVALID_ARG_VALUE))
    return "a tensor was set, but the parameter is not a __global or __constant pointer";
  if (kind == ARG_TENSOR && err == CL_INVALID_MEM_OBJECT)
    return "the parameter is not a buffer pointer (an image?)";
  if (kind == ARG_LOCAL)
    return "clt_kernel_set_local was used, but the parameter is not a __local pointer";
  if (kind == ARG_OFFSET)
    return "CLT_OFFSET passes a ulong (8 bytes) after the tensor: declare `ulong offset` there";
  if (err == CL_INVALID_ARG_SIZE)
    return "the size given to clt_kernel_set_scalar is not the parameter's (int and float: 4 "
           "bytes, long, ulong and double: 8)";
  return "the value does not fit the parameter (a pointer parameter needs a tensor)";
}

static const char *kind_name(arg_kind kind) {
  switch (kind) {
  case ARG_TENSOR:
    return "a tensor";
  case ARG_OFFSET:
    return "the offset of CLT_OFFSET";
  case ARG_SCALAR:
    return "a scalar";
  case ARG_LOCAL:
    return "local memory";
  default:
    return "nothing";
  }
}

/* The enqueue of clt__cl_submit: sets every argument on k's own cl_kernel for the device, then
 * enqueues it. */
static clt_status enqueue_launch(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                 cl_event *ev) {
  const launch *l = ctx;
  const clt_kernel *k = l->k;
  cl_kernel kern = l->dk->kernel;
  for (int i = 0; i < k->nargs; i++) {
    const kernel_arg *a = &k->args[i];
    cl_int err = CL_SUCCESS;
    switch (a->kind) {
    case ARG_TENSOR: {
      cl_mem m = a->t->storage->buf;
      err = clSetKernelArg(kern, (cl_uint)i, sizeof m, &m);
      break;
    }
    case ARG_OFFSET: {
      cl_ulong off = (cl_ulong)clt__elem_offset(k->args[i - 1].t);
      err = clSetKernelArg(kern, (cl_uint)i, sizeof off, &off);
      break;
    }
    case ARG_SCALAR:
      err = clSetKernelArg(kern, (cl_uint)i, a->size, a->value);
      break;
    case ARG_LOCAL:
      err = clSetKernelArg(kern, (cl_uint)i, a->size, NULL);
      break;
    default:
      break;
    }
    if (err != CL_SUCCESS)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "argument %d of kernel %s on %s (%s, %zu bytes) was refused: %s; %s", i,
                        k->name, d->name, kind_name(a->kind),
                        a->kind == ARG_TENSOR   ? sizeof(cl_mem)
                        : a->kind == ARG_OFFSET ? sizeof(cl_ulong)
                                                : a->size,
                        clt__cl_error_name(err), arg_hint(a->kind, err));
  }
  cl_int err = clEnqueueNDRangeKernel(clt__cl(d)->queue, kern, l->work_dim, NULL, l->global,
                                      l->local, wl->n, wl->n ? wl->ev : NULL, ev);
  if (err != CL_SUCCESS) {
    char what[160];
    snprintf(what, sizeof what, "clEnqueueNDRangeKernel of kernel %s", k->name);
    return clt__cl_error(err, fn, what, d);
  }
  return CLT_OK;
}

/* The device of k's tensor arguments (the same-device rule); with k->lock held. */
static clt_status launch_device(const clt_kernel *k, const char *fn, clt_device **out) {
  int first = -1;
  for (int i = 0; i < k->nargs; i++) {
    if (k->args[i].kind != ARG_TENSOR)
      continue;
    if (first < 0) {
      first = i;
      continue;
    }
    clt_device *a = k->args[first].t->storage->dev, *b = k->args[i].t->storage->dev;
    if (a != b) {
      char wa[48], wb[48];
      snprintf(wa, sizeof wa, "argument %d of kernel %s", first, k->name);
      snprintf(wb, sizeof wb, "argument %d", i);
      return clt__device_mismatch(fn, a, wa, b, wb);
    }
  }
  if (first < 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "kernel %s has no tensor argument; a launch runs on the device of its "
                      "tensors: set one with clt_kernel_set_tensor",
                      k->name);
  *out = k->args[first].t->storage->dev;
  return CLT_OK;
}

clt_status clt_kernel_launch(clt_kernel *k, int work_dim, const size_t *global,
                             const size_t *local) {
  static const char fn[] = "clt_kernel_launch";
  if (!k)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "k is NULL");
  if (work_dim < 1 || work_dim > 3)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "work_dim = %d (kernel %s); give 1, 2 or 3 dimensions", work_dim, k->name);
  if (!global)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "global is NULL (kernel %s)", k->name);
  bool empty = false;
  for (int i = 0; i < work_dim; i++) {
    empty |= global[i] == 0;
    if (local && (local[i] == 0 || (global[i] && global[i] % local[i] != 0)))
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "local[%d] = %zu does not divide global[%d] = %zu (kernel %s); OpenCL 1.2 "
                        "needs whole work-groups: round the global size up and test the index in "
                        "the kernel, or pass local = NULL",
                        i, local[i], i, global[i], k->name);
  }

  pthread_mutex_lock(&k->lock);
  clt_device *dev = NULL;
  dev_kernel *dk = NULL;
  clt_status st;
  for (;;) {
    if ((st = launch_device(k, fn, &dev)) != CLT_OK ||
        (st = dev_kernel_get(k, dev, fn, &dk)) != CLT_OK)
      break;
    /* The lock was down while a program built: another thread may have set other arguments. */
    clt_device *now = NULL;
    if ((st = launch_device(k, fn, &now)) != CLT_OK || now == dev)
      break;
  }
  if (st == CLT_OK && (cl_uint)k->nargs > dk->nargs)
    st =
        clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                   "argument %d of kernel %s is set, but the kernel takes %u argument%s "
                   "(0..%d)",
                   k->nargs - 1, k->name, dk->nargs, dk->nargs == 1 ? "" : "s", (int)dk->nargs - 1);
  for (cl_uint i = 0; st == CLT_OK && i < dk->nargs; i++)
    if ((int)i >= k->nargs || k->args[i].kind == ARG_UNSET)
      st = clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "argument %u of kernel %s (of %u) was never set; set it with "
                      "clt_kernel_set_tensor, _scalar or _local",
                      i, k->name, dk->nargs);
  clt_storage **reads = NULL, **writes = NULL;
  int nr = 0, nw = 0;
  if (st == CLT_OK && !empty) {
    reads = malloc((size_t)k->nargs * sizeof *reads);
    writes = malloc((size_t)k->nargs * sizeof *writes);
    if (!reads || !writes)
      st = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  if (st == CLT_OK && !empty) {
    for (int i = 0; i < k->nargs; i++) {
      if (k->args[i].kind != ARG_TENSOR)
        continue;
      if (k->args[i].access & CLT_READ)
        reads[nr++] = k->args[i].t->storage;
      if (k->args[i].access & CLT_WRITE)
        writes[nw++] = k->args[i].t->storage;
    }
    launch l = {k, dk, (cl_uint)work_dim, global, local};
    st = clt__cl_submit(dev, reads, nr, writes, nw, enqueue_launch, &l, fn, NULL);
  }
  pthread_mutex_unlock(&k->lock);
  free(reads);
  free(writes);
  return st;
}
