/* SPDX-License-Identifier: MIT */
/* dlpack.c - DLPack export and import (include/clt_dlpack.h). Built only when configure found
 * <dlpack/dlpack.h>. Exports keep a tensor reference in the manager; imports wrap the foreign
 * memory in a storage whose release callback calls the producer's deleter, and which the caching
 * allocator never takes (lib/memory.c). */
#include "clt-internal.h"
#include "opencl/foreign.h" /* kDLOpenCL: the cl_mem behind a tensor, its context */

#include "clt_dlpack.h"

#include <stdlib.h>
#include <string.h>

#define DL_BOOL_CODE 6 /* kDLBool from DLPack 0.8 on; 0.6 (Debian 12) lacks the name */

static const DLDataType dl_types[CLT_DTYPE_COUNT] = {
    [CLT_F32] = {kDLFloat, 32, 1}, [CLT_F64] = {kDLFloat, 64, 1},
    [CLT_I32] = {kDLInt, 32, 1},   [CLT_I64] = {kDLInt, 64, 1},
    [CLT_U8] = {kDLUInt, 8, 1},    [CLT_BOOL] = {DL_BOOL_CODE, 8, 1},
    [CLT_F16] = {kDLFloat, 16, 1}, [CLT_BF16] = {kDLBfloat, 16, 1},
};

/* ---- export ------------------------------------------------------------------------------- */

typedef struct export_ctx {
  DLManagedTensor m; /* first: the manager is the context */
  clt_tensor *t;
  int64_t shape[CLT_MAX_DIMS];
  int64_t strides[CLT_MAX_DIMS];
} export_ctx;

static void export_deleter(DLManagedTensor *self) {
  if (!self)
    return;
  export_ctx *c = self->manager_ctx;
  clt_tensor_release(c->t);
  free(c);
}

clt_status clt_to_dlpack(clt_tensor *t, DLManagedTensor **out) {
  static const char fn[] = "clt_to_dlpack";
  clt_status st;
  if ((st = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return st;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_storage *s = t->storage;
  if (s->dev->kind != CLT_DEVICE_HOST && !clt__cl_device_context(s->dev))
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "t is on %s, whose memory DLPack cannot describe (clt exports host memory "
                      "as kDLCPU and OpenCL buffers as kDLOpenCL); copy it with clt_to(t, "
                      "clt_cpu(), &h) and export the copy",
                      s->dev->name);
  /* The consumer knows nothing of clt's queues: finish what is pending on the memory. */
  if ((st = clt__storage_host_wait(s, true, fn)) != CLT_OK)
    return st;
  export_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  DLTensor *d = &c->m.dl_tensor;
  /* the consumer may write the memory behind clt's back: no deferred op reads it from now on
   * (lazy.c), on the host and on OpenCL devices alike */
  atomic_store(&s->exposed, true);
  if (s->dev->kind == CLT_DEVICE_HOST) {
    d->data = clt__host_ptr(t);
    d->device.device_type = kDLCPU;
    d->device.device_id = 0;
    d->byte_offset = 0;
  } else {
    d->data = s->buf; /* DLPack's convention for OpenCL: the cl_mem handle */
    d->device.device_type = kDLOpenCL;
    d->device.device_id = s->dev->index;
    d->byte_offset = t->offset;
  }
  d->ndim = t->ndim;
  d->dtype = dl_types[t->dtype];
  memcpy(c->shape, t->shape, sizeof c->shape);
  d->shape = c->shape;
  memcpy(c->strides, t->strides, sizeof c->strides);
  d->strides = c->strides; /* in elements, as clt's: a view is exported as the view it is */
  c->t = clt_tensor_retain(t);
  c->m.manager_ctx = c;
  c->m.deleter = export_deleter;
  *out = &c->m;
  return CLT_OK;
}

/* ---- import ------------------------------------------------------------------------------- */

static void import_release(void *ctx) {
  DLManagedTensor *m = ctx;
  if (m->deleter)
    m->deleter(m);
}

static void release_nothing(void *ctx) { (void)ctx; }

static const char *device_type_name(int type) {
  switch (type) {
  case kDLCPU:
    return "kDLCPU";
  case kDLCUDA:
    return "kDLCUDA";
  case kDLCUDAHost:
    return "kDLCUDAHost";
  case kDLOpenCL:
    return "kDLOpenCL";
  case kDLVulkan:
    return "kDLVulkan";
  case kDLMetal:
    return "kDLMetal";
  case kDLROCM:
    return "kDLROCM";
  default:
    return "an unknown device type";
  }
}

clt_status clt_from_dlpack(DLManagedTensor *m, clt_tensor **out) {
  static const char fn[] = "clt_from_dlpack";
  clt_status st;
  if (!m)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "m is NULL");
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  const DLTensor *d = &m->dl_tensor;
  if (d->ndim < 0 || d->ndim > CLT_MAX_DIMS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "ndim = %d is outside 0..%d", d->ndim,
                      CLT_MAX_DIMS);
  if (d->ndim > 0 && !d->shape)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "shape is NULL but ndim = %d", d->ndim);

  int dt = -1;
  for (int i = 0; i < CLT_DTYPE_COUNT; i++)
    if (d->dtype.code == dl_types[i].code && d->dtype.bits == dl_types[i].bits &&
        d->dtype.lanes == 1)
      dt = i;
  if (dt < 0)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "DLPack dtype (code %u, %u bits, %u lanes) has no clt dtype; clt takes "
                      "float16/32/64, bfloat16, int32/64, uint8 and bool, one lane",
                      (unsigned)d->dtype.code, (unsigned)d->dtype.bits, (unsigned)d->dtype.lanes);

  int64_t numel = 1;
  bool overflow = false, zero = false;
  for (int i = 0; i < d->ndim; i++) {
    if (d->shape[i] < 0)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "shape[%d] = %lld is negative", i,
                        (long long)d->shape[i]);
    zero |= d->shape[i] == 0;
    if (!overflow && __builtin_mul_overflow(numel, d->shape[i], &numel))
      overflow = true;
  }
  if (zero) {
    numel = 0;
    overflow = false;
  }
  size_t size = clt_dtype_size((clt_dtype)dt), bytes;
  if (overflow || __builtin_mul_overflow((size_t)numel, size, &bytes) || bytes > (size_t)INT64_MAX)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "the shape's size in bytes overflows");

  /* Strides (in elements) make a view (docs/views.md): the memory wrapped is the span its
   * elements occupy. clt has no negative strides. */
  size_t span = bytes;
  if (d->strides && numel > 0) {
    uint64_t last = 0;
    for (int i = 0; i < d->ndim; i++) {
      if (d->strides[i] < 0) {
        char str[256];
        clt__format_shape(str, sizeof str, d->ndim, d->strides);
        return clt__error(CLT_ERR_UNSUPPORTED, fn,
                          "strides %s (in elements) include a negative one; clt's views step "
                          "forward only: make it contiguous first (PyTorch: .contiguous(), "
                          "NumPy: np.ascontiguousarray)",
                          str);
      }
      uint64_t step;
      if (__builtin_mul_overflow((uint64_t)(d->shape[i] - 1), (uint64_t)d->strides[i], &step) ||
          __builtin_add_overflow(last, step, &last))
        return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "the strides' span overflows");
    }
    if (__builtin_mul_overflow((size_t)last + 1, size, &span) || span > (size_t)INT64_MAX)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "the strides' span in bytes overflows");
  }
  if (!d->data && bytes > 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "data is NULL but the tensor has %lld elements",
                      (long long)numel);

  clt_device *dev;
  void *host = NULL;
  cl_mem mem = NULL;
  size_t cl_bytes = 0; /* the buffer's bytes up to the end of the tensor's span */
  if (d->device.device_type == kDLCPU) {
    dev = clt_cpu();
    host = (char *)d->data + d->byte_offset;
    if ((uintptr_t)host % size != 0)
      return clt__error(CLT_ERR_UNSUPPORTED, fn,
                        "the data address %p is not aligned to the %zu-byte elements", host, size);
  } else if (d->device.device_type == kDLOpenCL) {
    if (d->byte_offset % size != 0)
      return clt__error(CLT_ERR_UNSUPPORTED, fn,
                        "byte_offset = %llu is not a multiple of the %zu-byte elements",
                        (unsigned long long)d->byte_offset, size);
    if (__builtin_add_overflow(span, (size_t)d->byte_offset, &cl_bytes))
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "byte_offset + the tensor's span overflows");
    mem = (cl_mem)d->data;
    dev = NULL;
    if (mem && (st = clt__cl_foreign_device(mem, NULL, d->device.device_id, cl_bytes,
                                                  "m->dl_tensor.data", fn, &dev)) != CLT_OK)
      return st;
    if (!mem) { /* an empty tensor without a buffer */
      dev = clt_device_at(d->device.device_id);
      if (!dev)
        return clt__error(CLT_ERR_DEVICE_NOT_FOUND, fn, "there is no device cl:%d",
                          d->device.device_id);
    }
  } else {
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "device type %s (%d) is not supported; clt imports kDLCPU and kDLOpenCL "
                      "tensors",
                      device_type_name(d->device.device_type), (int)d->device.device_type);
  }
  if (dt == CLT_F64 && !dev->fp64)
    return clt__error(CLT_ERR_UNSUPPORTED, fn, "%s (%s) does not support f64 (no cl_khr_fp64)",
                      dev->name, dev->model);

  clt_storage *s;
  if ((st = clt__storage_wrap_foreign(dev, host, mem, mem ? cl_bytes : span, import_release, m, fn,
                                      &s)) != CLT_OK)
    return st;
  clt_tensor *t;
  if ((st = clt__tensor_wrap((clt_dtype)dt, d->ndim, d->shape, s, fn, &t)) != CLT_OK) {
    s->release = release_nothing; /* m stays the caller's: do not call its deleter */
    clt__storage_release(s);
    return st;
  }
  clt__storage_release(s);
  if (mem)
    t->offset = (size_t)d->byte_offset;
  if (d->strides && numel > 0) {
    for (int i = 0; i < d->ndim; i++)
      t->strides[i] = d->strides[i];
    t->contiguous = clt__strides_contiguous(d->ndim, d->shape, d->strides);
  }
  *out = t;
  return CLT_OK;
}
