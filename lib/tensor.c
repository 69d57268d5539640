/* SPDX-License-Identifier: MIT */
/* tensor.c - the tensor object: dtype, shape, storage; creation and host access. */
#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

clt_status clt__check_tensor(const clt_tensor *t, const char *fn, const char *arg) {
  if (!t)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", arg);
  return CLT_OK;
}

clt_status clt__tensor_wrap(clt_dtype dtype, int ndim, const int64_t *shape, clt_storage *s,
                            const char *fn, clt_tensor **out) {
  clt_tensor *t = calloc(1, sizeof *t);
  if (!t)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  atomic_init(&t->refs, 1);
  t->dtype = dtype;
  t->ndim = ndim;
  /* The shape was validated: its product fits, unless a 0 makes it 0 (then the other dimensions
   * may be anything, and their product must not be taken). */
  bool empty = false;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    empty |= shape[i] == 0;
  }
  t->numel = 1;
  for (int i = 0; i < ndim && !empty; i++)
    t->numel *= shape[i];
  if (empty)
    t->numel = 0;
  t->nbytes = (size_t)t->numel * clt_dtype_size(dtype);
  for (int64_t i = ndim - 1, stride = 1; i >= 0; i--) {
    t->strides[i] = stride;
    if (shape[i] > 1 && __builtin_mul_overflow(stride, shape[i], &stride))
      stride = 0; /* only where a 0 elsewhere leaves the tensor empty: strides are unused */
  }
  t->contiguous = true;
  t->storage = clt__storage_retain(s);
  *out = t;
  return CLT_OK;
}

clt_status clt__tensor_view(clt_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                            int64_t offset, const char *fn, clt_tensor **out) {
  clt_tensor *v;
  clt_status s = clt__tensor_wrap(t->dtype, ndim, shape, t->storage, fn, &v);
  if (s != CLT_OK)
    return s;
  for (int i = 0; i < ndim; i++)
    v->strides[i] = strides[i];
  v->offset = (size_t)offset * clt_dtype_size(t->dtype);
  v->contiguous = clt__strides_contiguous(ndim, shape, strides);
  *out = v;
  return CLT_OK;
}

static clt_status check_new(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                            const char *fn, void *out, size_t *bytes) {
  clt_status s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((s = clt__check_dtype(dtype, fn, "dtype")) != CLT_OK)
    return s;
  int64_t numel;
  if ((s = clt__check_shape(ndim, shape, dtype, fn, &numel, bytes)) != CLT_OK)
    return s;
  if ((s = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return s;
  if (dtype == CLT_F64 && !dev->fp64)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "%s (%s) does not support f64 (no cl_khr_fp64); use f32 there", dev->name,
                      dev->model);
  return CLT_OK;
}

clt_status clt__tensor_new(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                           const char *fn, clt_tensor **out) {
  size_t bytes;
  clt_status s = check_new(dtype, ndim, shape, dev, fn, out, &bytes);
  if (s != CLT_OK)
    return s;
  clt_storage *st;
  if ((s = clt__storage_alloc(dev, bytes, fn, &st)) != CLT_OK)
    return s;
  s = clt__tensor_wrap(dtype, ndim, shape, st, fn, out);
  clt__storage_release(st);
  return s;
}

clt_status clt_empty(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                     clt_tensor **out) {
  return clt__tensor_new(dtype, ndim, shape, dev, "clt_empty", out);
}

clt_status clt_empty_pinned(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *near,
                            clt_tensor **out) {
  static const char fn[] = "clt_empty_pinned";
  size_t bytes;
  clt_status s = check_new(dtype, ndim, shape, near, fn, out, &bytes);
  if (s != CLT_OK)
    return s;
  if (near->kind == CLT_DEVICE_HOST)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "near is cpu; pinned memory belongs to an OpenCL device's context: pass "
                      "the device you will copy to or from");
  clt_storage *st;
  if ((s = clt__storage_alloc_pinned(near, bytes, fn, &st)) != CLT_OK)
    return s;
  s = clt__tensor_wrap(dtype, ndim, shape, st, fn, out);
  clt__storage_release(st);
  return s;
}

static clt_status create_filled(clt_dtype dtype, int ndim, const int64_t *shape, double value,
                                clt_device *dev, const char *fn, clt_tensor **out) {
  uint64_t pattern = 0;
  clt_status s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((s = clt__check_dtype(dtype, fn, "dtype")) != CLT_OK)
    return s;
  if ((s = clt__scalar_bytes(dtype, value, &pattern, fn)) != CLT_OK)
    return s;
  clt_tensor *t;
  if ((s = clt__tensor_new(dtype, ndim, shape, dev, fn, &t)) != CLT_OK)
    return s;
  if (t->numel > 0 && (s = dev->backend->compute.fill(t, &pattern, fn)) != CLT_OK) {
    clt_tensor_release(t);
    return s;
  }
  *out = t;
  return CLT_OK;
}

clt_status clt_zeros(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                     clt_tensor **out) {
  return create_filled(dtype, ndim, shape, 0.0, dev, "clt_zeros", out);
}
clt_status clt_ones(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                    clt_tensor **out) {
  return create_filled(dtype, ndim, shape, 1.0, dev, "clt_ones", out);
}
clt_status clt_full(clt_dtype dtype, int ndim, const int64_t *shape, double value, clt_device *dev,
                    clt_tensor **out) {
  return create_filled(dtype, ndim, shape, value, dev, "clt_full", out);
}

clt_status clt_arange(double start, double end, double step, clt_dtype dtype, clt_device *dev,
                      clt_tensor **out) {
  static const char fn[] = "clt_arange";
  clt_status s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((s = clt__check_dtype(dtype, fn, "dtype")) != CLT_OK)
    return s;
  if (dtype == CLT_BOOL)
    return clt__error(CLT_ERR_DTYPE, fn, "arange does not make bool tensors");
  if (!isfinite(start) || !isfinite(end) || !isfinite(step) || step == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "start, end and step must be finite and step non-zero (got %g, %g, %g)",
                      start, end, step);
  double len = ceil((end - start) / step);
  if (len < 0)
    len = 0;
  if (len > 9e18)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "arange(%g, %g, %g) is too long", start, end,
                      step);
  int64_t n = (int64_t)len;
  if (n > 0 && clt__dtype_is_int(dtype)) {
    uint64_t probe = 0;
    /* Every value must be one the dtype holds: the first, the last and (where there is one) the
     * second, which is not an integer when the step is not. A one-element range is its start,
     * whatever the step (as NumPy and PyTorch). The message names the dtype asked for (it named
     * i64, where the step was checked as one). */
    if ((s = clt__scalar_bytes(dtype, start, &probe, fn)) != CLT_OK ||
        (s = clt__scalar_bytes(dtype, start + (double)(n - 1) * step, &probe, fn)) != CLT_OK ||
        (n > 1 && (s = clt__scalar_bytes(dtype, start + step, &probe, fn)) != CLT_OK))
      return s;
  }
  clt_tensor *t;
  if ((s = clt__tensor_new(dtype, 1, &n, dev, fn, &t)) != CLT_OK)
    return s;
  /* integers on the device, where its backend makes them (no trip, no wait); floats on the
   * host, whose rounding of start + i step a device compiler may not keep (an fma) */
  if (dev->kind != CLT_DEVICE_HOST && dev->backend->compute.arange && clt__dtype_is_int(dtype)) {
    if (n > 0 && (s = dev->backend->compute.arange(t, start, step, fn)) != CLT_OK) {
      clt_tensor_release(t);
      return s;
    }
    *out = t;
    return CLT_OK;
  }
  void *buf = dev->kind == CLT_DEVICE_HOST ? clt__host_ptr(t) : malloc(t->nbytes ? t->nbytes : 1);
  if (!buf) {
    clt_tensor_release(t);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  for (int64_t i = 0; i < n; i++) {
    double v = start + (double)i * step;
    switch (dtype) {
    case CLT_F32:
      ((float *)buf)[i] = (float)v;
      break;
    case CLT_F64:
      ((double *)buf)[i] = v;
      break;
    case CLT_I32:
      ((int32_t *)buf)[i] = (int32_t)v;
      break;
    case CLT_I64:
      ((int64_t *)buf)[i] = (int64_t)start + i * (n > 1 ? (int64_t)step : 0);
      break;
    case CLT_U8:
      ((uint8_t *)buf)[i] = (uint8_t)v;
      break;
    case CLT_BOOL:
      break;
    case CLT_F16:
      ((uint16_t *)buf)[i] = clt__f32_to_f16((float)v);
      break;
    case CLT_BF16:
      ((uint16_t *)buf)[i] = clt__f32_to_bf16((float)v);
      break;
    }
  }
  if (dev->kind != CLT_DEVICE_HOST) {
    s = n > 0 ? dev->backend->compute.upload(t, buf, fn) : CLT_OK;
    free(buf);
    if (s != CLT_OK) {
      clt_tensor_release(t);
      return s;
    }
  }
  *out = t;
  return CLT_OK;
}

clt_status clt_from_host(const void *src, clt_dtype dtype, int ndim, const int64_t *shape,
                         clt_device *dev, clt_tensor **out) {
  static const char fn[] = "clt_from_host";
  clt_status s;
  size_t bytes;
  if ((s = check_new(dtype, ndim, shape, dev, fn, out, &bytes)) != CLT_OK)
    return s;
  if (!src && bytes > 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "src is NULL");
  if (dtype == CLT_BOOL) {
    const uint8_t *b = src;
    for (size_t i = 0; i < bytes; i++)
      if (b[i] > 1)
        return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "src[%zu] = %u is not a bool (0 or 1)", i,
                          (unsigned)b[i]);
  }
  clt_tensor *t;
  if ((s = clt__tensor_new(dtype, ndim, shape, dev, fn, &t)) != CLT_OK)
    return s;
  if (bytes > 0 && (s = dev->backend->compute.upload(t, src, fn)) != CLT_OK) {
    clt_tensor_release(t);
    return s;
  }
  *out = t;
  return CLT_OK;
}

clt_tensor *clt_tensor_retain(clt_tensor *t) {
  if (t)
    atomic_fetch_add(&t->refs, 1);
  return t;
}

/* Tensors with autograd state whose last reference went while another such tensor was being
 * freed: freeing a graph frees its nodes' operands, whose nodes free theirs, and a chain of a
 * million operations would recurse a million calls deep; instead the outermost release frees
 * them one after another. */
static _Thread_local clt_tensor *dead;
static _Thread_local bool freeing;

void clt_tensor_release(clt_tensor *t) {
  if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
    return;
  if (t->ag) {
    t->dead_next = dead;
    dead = t;
    if (freeing)
      return;
    freeing = true;
    while (dead) {
      clt_tensor *d = dead;
      dead = d->dead_next;
      clt_grad_node *node = d->ag->fn;
      if (node && node->retained == d->ag)
        node->retained = NULL;
      clt_tensor_release(d->ag->grad);
      clt__grad_node_release(node);
      free(d->ag);
      clt__storage_release(d->storage);
      free(d);
    }
    freeing = false;
    return;
  }
  clt__storage_release(t->storage);
  free(t);
}

/* ---- autograd's records ------------------------------------------------------------------ */

static _Thread_local bool grad_off; /* grad mode, per thread: on unless turned off */

bool clt__grad_enabled(void) { return !grad_off; }

bool clt__grad_mode_set(bool on) {
  bool was = !grad_off;
  grad_off = !on;
  return was;
}

clt_grad_meta *clt__grad_meta(clt_tensor *t) {
  if (!t->ag)
    t->ag = calloc(1, sizeof *t->ag);
  return t->ag;
}

void clt__grad_node_free(clt_grad_node *node) {
  if (node->freed)
    return;
  node->freed = true;
  for (int k = 0; k < node->n; k++) {
    clt_tensor_release(node->in[k]);
    node->in[k] = NULL;
  }
  clt_tensor_release(node->out);
  node->out = NULL;
}

void clt__grad_node_release(clt_grad_node *node) {
  if (!node || atomic_fetch_sub(&node->refs, 1) != 1)
    return;
  clt_tensor_release(node->grad);
  clt__grad_node_free(node);
  if (node->in != node->in_3) {
    free(node->in);
    free(node->version);
  }
  free(node);
}

clt_status clt__grad_record(int kind, const char *fn, clt_tensor *const *in, int n,
                            const int64_t *p, int np, clt_tensor *r, clt_tensor **out) {
  if (!clt__dtype_is_float(r->dtype)) { /* comparisons, casts to integers: no gradient */
    *out = r;
    return CLT_OK;
  }
  if (r->ag) { /* r is an operand itself (clt_contiguous of a contiguous tensor): an alias */
    clt_tensor *v;
    clt_status s = clt__tensor_view(r, r->ndim, r->shape, r->strides, clt__elem_offset(r), fn, &v);
    clt_tensor_release(r);
    if (s != CLT_OK)
      return s;
    r = v;
  }
  clt_grad_node *node = calloc(1, sizeof *node);
  if (node) {
    node->in = node->in_3;
    node->version = node->version_3;
    if (n > 3) {
      node->in = calloc((size_t)n, sizeof *node->in);
      node->version = calloc((size_t)n, sizeof *node->version);
      if (!node->in || !node->version) {
        free(node->in);
        free(node->version);
        free(node);
        node = NULL;
      }
    }
  }
  clt_grad_meta *m = node ? clt__grad_meta(r) : NULL;
  if (!m) {
    if (node && node->in != node->in_3) {
      free(node->in);
      free(node->version);
    }
    free(node);
    clt_tensor_release(r);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory for autograd's record");
  }
  atomic_init(&node->refs, 1);
  node->kind = kind;
  node->fn = fn;
  node->n = n;
  for (int k = 0; k < n; k++)
    if (in[k]) {
      node->in[k] = clt_tensor_retain(in[k]);
      node->version[k] = atomic_load(&in[k]->storage->version);
    }
  node->np = np;
  for (int i = 0; i < np; i++)
    node->p[i] = p[i];
  /* the derivatives of these are made of the result (exp, tanh, sigmoid; the linalg routines':
   * X, inv(A), det(A), the Cholesky factor): keep it rather than compute it again (on failure
   * the backward computes it again, as it did before) */
  if ((kind == CLT__OP_exp || kind == CLT__OP_tanh || kind == CLT__OP_sigmoid ||
       (kind >= CLT__GRAD_LINALG_SOLVE && kind <= CLT__GRAD_LINALG_DET)) &&
      clt__tensor_view(r, r->ndim, r->shape, r->strides, clt__elem_offset(r), fn, &node->out) ==
          CLT_OK)
    node->out_version = atomic_load(&r->storage->version);
  else
    node->out = NULL;
  m->requires_grad = true;
  m->fn = node;
  *out = r;
  return CLT_OK;
}

clt_status clt__write_check(clt_tensor *dst, clt_tensor *const *in, int n, const char *fn) {
  bool any = dst->ag != NULL;
  for (int k = 0; k < n && !any; k++)
    any = in[k] && in[k]->ag;
  if (any && clt__grad_enabled()) {
    if (dst->ag && dst->ag->requires_grad && !dst->ag->fn)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "the tensor written is a leaf that requires grad, and grad mode is on: "
                        "writing it in place would change what the recorded operations saved; "
                        "turn grad mode off around the write (clt_set_grad_enabled(0), as "
                        "torch.no_grad()), or write into a clt_detach of it");
    if (dst->ag && dst->ag->requires_grad)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "the tensor written has autograd history (it was computed from tensors "
                        "that require grad), and in-place operations are not recorded yet: use "
                        "the out-of-place form, or turn grad mode off (clt_set_grad_enabled(0))");
    for (int k = 0; k < n; k++)
      if (in[k] && in[k] != dst && in[k]->ag && in[k]->ag->requires_grad)
        return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                          "argument %d requires grad, and a write into an existing tensor is "
                          "not recorded yet: use the out-of-place form, or turn grad mode off "
                          "(clt_set_grad_enabled(0))",
                          k + 1);
  }
  atomic_fetch_add(&dst->storage->version, 1);
  return CLT_OK;
}

int clt_tensor_ndim(const clt_tensor *t) { return t ? t->ndim : 0; }
const int64_t *clt_tensor_shape(const clt_tensor *t) { return t ? t->shape : NULL; }
int64_t clt_tensor_numel(const clt_tensor *t) { return t ? t->numel : 0; }
size_t clt_tensor_nbytes(const clt_tensor *t) { return t ? t->nbytes : 0; }
clt_dtype clt_tensor_dtype(const clt_tensor *t) { return t ? t->dtype : CLT_F32; }
clt_device *clt_tensor_device(const clt_tensor *t) { return t ? t->storage->dev : NULL; }
int clt_tensor_is_pinned(const clt_tensor *t) { return t && t->storage->pin_dev != NULL; }

void *clt_tensor_data(clt_tensor *t) {
  static const char fn[] = "clt_tensor_data";
  if (clt__check_tensor(t, fn, "t") != CLT_OK)
    return NULL;
  if (t->storage->dev->kind != CLT_DEVICE_HOST) {
    clt__error(CLT_ERR_NOT_ON_HOST, fn,
               "tensor is on %s; copy it to cpu first with clt_to(t, clt_cpu(), &host) and use "
               "the copy's data, or read it with clt_tensor_read()",
               t->storage->dev->name);
    return NULL;
  }
  if (!t->contiguous) {
    clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
               "t is a view whose elements are not contiguous (a transpose, a strided slice or an "
               "expansion); make a contiguous copy with clt_contiguous(t, &c) and use its data");
    return NULL;
  }
  /* The caller may read or write through the pointer: wait for every pending copy. */
  if (clt__storage_host_wait(t->storage, true, fn) != CLT_OK)
    return NULL;
  atomic_store(&t->storage->exposed, true); /* no deferred op reads it from now on (lazy.c) */
  return clt__host_ptr(t);
}
