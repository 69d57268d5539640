/* SPDX-License-Identifier: MIT */
/* transfer.c - to / copy_to / move / copy between the host and devices, reads into host memory
 * (clt_tensor_read, clt_item), and the transfer counters and guard. The events that order work
 * on a tensor's memory are opencl/order.c's. */
#include "backend.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the counters and the guard (the counting itself is device.c's) ---------------------------- */

clt_status clt_transfer_stats_get(clt_device *dev, clt_transfer_stats *out) {
  static const char fn[] = "clt_transfer_stats_get";
  clt_status s = clt__check_device(dev, fn, "dev");
  if (s != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  pthread_mutex_lock(&dev->cache_lock);
  *out = dev->xfer;
  pthread_mutex_unlock(&dev->cache_lock);
  return CLT_OK;
}

static void reset_one(clt_device *d) {
  pthread_mutex_lock(&d->cache_lock);
  memset(&d->xfer, 0, sizeof d->xfer);
  pthread_mutex_unlock(&d->cache_lock);
}

clt_status clt_transfer_stats_reset(clt_device *dev) {
  if (dev) {
    clt_status s = clt__check_device(dev, "clt_transfer_stats_reset", "dev");
    if (s != CLT_OK)
      return s;
    reset_one(dev);
    return CLT_OK;
  }
  int n;
  clt_device *const *list = clt__device_list(&n);
  for (int i = 0; i < n; i++)
    reset_one(list[i]);
  return CLT_OK;
}

clt_status clt_transfer_stats_print(FILE *f) {
  if (!f)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_transfer_stats_print", "f is NULL");
  int n, shown = 0;
  clt_device *const *list = clt__device_list(&n);
  for (int i = 0; i < n; i++) {
    clt_transfer_stats x;
    clt_transfer_stats_get(list[i], &x);
    if (!(x.h2d_count | x.d2h_count | x.d2d_in_count | x.d2d_out_count | x.implicit_count |
          x.internal_count))
      continue;
    fprintf(f,
            "%s: host->device %llu (%llu B), device->host %llu (%llu B), from other devices "
            "%llu (%llu B), to other devices %llu (%llu B), implicit device->host %llu (%llu B)\n",
            list[i]->name, (unsigned long long)x.h2d_count, (unsigned long long)x.h2d_bytes,
            (unsigned long long)x.d2h_count, (unsigned long long)x.d2h_bytes,
            (unsigned long long)x.d2d_in_count, (unsigned long long)x.d2d_in_bytes,
            (unsigned long long)x.d2d_out_count, (unsigned long long)x.d2d_out_bytes,
            (unsigned long long)x.implicit_count, (unsigned long long)x.implicit_bytes);
    if (x.internal_count)
      fprintf(f, "%s: internal (clt's own trips for an operation) %llu (%llu B)\n", list[i]->name,
              (unsigned long long)x.internal_count, (unsigned long long)x.internal_bytes);
    shown++;
  }
  if (!shown)
    fprintf(f, "no transfers\n");
  return CLT_OK;
}

static atomic_int guard_mode;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static void guard_init(void) {
  const char *e = getenv("CLT_TRANSFER_GUARD");
  int m = CLT_GUARD_ALLOW;
  if (e && strcmp(e, "log") == 0)
    m = CLT_GUARD_LOG;
  else if (e && strcmp(e, "disallow") == 0)
    m = CLT_GUARD_DISALLOW;
  else if (e && *e && strcmp(e, "allow") != 0)
    fprintf(stderr,
            "clt: warning: CLT_TRANSFER_GUARD='%s' is not allow, log or disallow; using "
            "allow\n",
            e);
  atomic_store(&guard_mode, m);
}

int clt_transfer_guard_set(clt_transfer_guard mode) {
  pthread_once(&guard_once, guard_init);
  if ((int)mode < CLT_GUARD_ALLOW || (int)mode > CLT_GUARD_DISALLOW) {
    clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_transfer_guard_set",
               "mode = %d is not CLT_GUARD_ALLOW, CLT_GUARD_LOG or CLT_GUARD_DISALLOW", (int)mode);
    return -1;
  }
  return atomic_exchange(&guard_mode, (int)mode);
}

clt_transfer_guard clt_transfer_guard_get(void) {
  pthread_once(&guard_once, guard_init);
  return (clt_transfer_guard)atomic_load(&guard_mode);
}

/* ---- copies --------------------------------------------------------------------------------- */

/* Enqueues a copy of src's bytes into dst (same byte size), ordered after earlier work on both.
 * Asynchronous except host-to-host. */
static clt_status copy_bytes(clt_tensor *dst, clt_tensor *src, const char *fn) {
  clt_storage *ds = dst->storage, *ss = src->storage;
  clt_device *dd = ds->dev, *sd = ss->dev;
  size_t n = src->nbytes;
  clt_status st;
  if (n == 0)
    return CLT_OK;
  if (dd->kind == CLT_DEVICE_HOST && sd->kind == CLT_DEVICE_HOST) {
    if ((st = clt__storage_host_wait(ss, false, fn)) != CLT_OK ||
        (st = clt__storage_host_wait(ds, true, fn)) != CLT_OK)
      return st;
    memmove(clt__host_ptr(dst), clt__host_ptr(src), n);
    return CLT_OK;
  }

  /* One command on one queue, the backend's copy: host to device and device to device (one
   * context) on the destination's, device to host on the source's. */
  clt_device *qd = NULL; /* whose queue; NULL for two contexts (below) */
  if (sd->kind == CLT_DEVICE_HOST)
    qd = dd;
  else if (dd->kind == CLT_DEVICE_HOST ||
           (dd->backend == sd->backend && dd->context_index == sd->context_index))
    qd = dd->kind == CLT_DEVICE_HOST ? sd : dd;
  clt_status ready = clt__lazy_ready((clt_tensor *[]){(clt_tensor *)src}, 1, dst, fn);
  if (ready != CLT_OK)
    return ready;
  if (qd)
    return qd->backend->memory.copy(qd, dst, src, fn);
  /* Two contexts: stage through host memory, the second leg waiting on the first through a
   * bridged event, so the whole copy stays asynchronous. */
  clt_tensor *stage;
  if ((st = clt__tensor_new(CLT_U8, 1, &(int64_t){(int64_t)n}, clt_cpu(), fn, &stage)) != CLT_OK)
    return st;
  st = copy_bytes(stage, src, fn);
  if (st == CLT_OK)
    st = copy_bytes(dst, stage, fn);
  clt_tensor_release(stage); /* kept alive by the pending copies */
  return st;
}

static clt_status check_to(clt_tensor *t, clt_device *dev, clt_tensor **out, const char *fn) {
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK ||
      (s = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  return CLT_OK;
}

static clt_status copy_to(clt_tensor *t, clt_device *dev, clt_tensor **out, const char *fn,
                          bool internal) {
  clt_tensor *n;
  clt_status s = clt__tensor_new(t->dtype, t->ndim, t->shape, dev, fn, &n);
  if (s != CLT_OK)
    return s;
  /* a view that is not contiguous: just its elements, gathered on its own device first */
  clt_tensor *c = NULL;
  if (!t->contiguous && (s = clt__dense(t, fn, &c)) != CLT_OK) {
    clt_tensor_release(n);
    return s;
  }
  if ((s = copy_bytes(n, c ? c : t, fn)) != CLT_OK) {
    clt_tensor_release(c);
    clt_tensor_release(n);
    return s;
  }
  clt_tensor_release(c); /* kept alive by the pending copy */
  if (!internal)
    clt__count_transfer(t->storage->dev, dev, t->nbytes, false);
  else if (t->storage->dev != dev)
    clt__count_internal(dev->kind == CLT_DEVICE_HOST ? t->storage->dev : dev, t->nbytes);
  *out = n;
  return CLT_OK;
}

clt_status clt__copy_internal(clt_tensor *t, clt_device *dev, const char *fn, clt_tensor **out) {
  return copy_to(t, dev, out, fn, true);
}

clt_status clt_to(clt_tensor *t, clt_device *dev, clt_tensor **out) {
  static const char fn[] = "clt_to";
  clt_status s = check_to(t, dev, out, fn);
  if (s != CLT_OK)
    return s;
  if (t->storage->dev == dev) {
    *out = clt_tensor_retain(t);
    return CLT_OK;
  }
  return copy_to(t, dev, out, fn, false);
}

clt_status clt_copy_to(clt_tensor *t, clt_device *dev, clt_tensor **out) {
  static const char fn[] = "clt_copy_to";
  clt_status s = check_to(t, dev, out, fn);
  return s != CLT_OK ? s : copy_to(t, dev, out, fn, false);
}

clt_status clt_move(clt_tensor **t, clt_device *dev) {
  static const char fn[] = "clt_move";
  if (!t)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "t is NULL (pass the address of a handle)");
  clt_tensor *n;
  clt_status s = check_to(*t, dev, &n, fn);
  if (s != CLT_OK)
    return s;
  if ((*t)->storage->dev == dev)
    return CLT_OK;
  if ((s = copy_to(*t, dev, &n, fn, false)) != CLT_OK)
    return s;
  clt_tensor_release(*t);
  *t = n;
  return CLT_OK;
}

clt_status clt_copy(clt_tensor *dst, clt_tensor *src) {
  static const char fn[] = "clt_copy";
  clt_status s;
  if ((s = clt__check_tensor(dst, fn, "dst")) != CLT_OK ||
      (s = clt__check_tensor(src, fn, "src")) != CLT_OK ||
      (s = clt__write_check(dst, &src, 1, fn)) != CLT_OK)
    return s;
  bool same_shape =
      dst->ndim == src->ndim && memcmp(dst->shape, src->shape, sizeof(int64_t) * dst->ndim) == 0;
  if (same_shape && dst->dtype == src->dtype && dst->storage == src->storage &&
      dst->offset == src->offset &&
      memcmp(dst->strides, src->strides, sizeof(int64_t) * dst->ndim) == 0)
    return CLT_OK; /* a tensor into itself */
  clt_device *dd = dst->storage->dev, *sd = src->storage->dev;
  /* the same elements, in C order, in two memories: a plain copy of the bytes */
  bool plain = same_shape && dst->dtype == src->dtype && dst->contiguous && src->contiguous &&
               dst->storage != src->storage;
  if (dd == sd && !plain) /* views, broadcasting and conversion: the elementwise copy */
    return clt__copy_into(dst, src, fn);
  if (plain) {
    if ((s = copy_bytes(dst, src, fn)) != CLT_OK)
      return s;
    clt__count_transfer(sd, dd, src->nbytes, false);
    return CLT_OK;
  }
  /* Across devices into a view, or with broadcasting or conversion: src's elements go to dst's
   * device first (counted there), then into dst by the elementwise copy. */
  clt_tensor *t;
  if ((s = copy_to(src, dd, &t, fn, false)) != CLT_OK)
    return s;
  s = clt__copy_into(dst, t, fn);
  clt_tensor_release(t);
  return s;
}

static clt_status read_bytes(const clt_tensor *t, void *dst, const char *fn, bool implicit) {
  clt_storage *s = t->storage;
  clt_status st;
  if (t->nbytes == 0)
    return CLT_OK;
  if (!t->contiguous) { /* a view: its elements gathered on its device, then read */
    clt_tensor *c;
    if ((st = clt__dense(t, fn, &c)) != CLT_OK)
      return st;
    st = read_bytes(c, dst, fn, implicit);
    clt_tensor_release(c);
    return st;
  }
  if (s->dev->kind == CLT_DEVICE_HOST) {
    if ((st = clt__storage_host_wait(s, false, fn)) != CLT_OK)
      return st;
    memcpy(dst, clt__host_ptr(t), t->nbytes);
    return CLT_OK;
  }
  clt_device *d = s->dev;
  if ((st = clt__lazy_ready((clt_tensor *[]){(clt_tensor *)t}, 1, NULL, fn)) != CLT_OK ||
      (st = d->backend->memory.read(t, dst, fn)) != CLT_OK)
    return st;
  clt__count_transfer(d, clt_cpu(), t->nbytes, implicit);
  return CLT_OK;
}

clt_status clt__read_bytes(const clt_tensor *t, void *dst, const char *fn) {
  return read_bytes(t, dst, fn, false);
}

clt_status clt__read_bytes_implicit(const clt_tensor *t, void *dst, const char *fn) {
  clt_device *d = t->storage->dev;
  if (d->kind != CLT_DEVICE_HOST && t->nbytes > 0) {
    clt_transfer_guard mode = clt_transfer_guard_get();
    if (mode == CLT_GUARD_DISALLOW)
      return clt__error(CLT_ERR_TRANSFER_GUARD, fn,
                        "implicit transfer of %zu bytes from %s to cpu refused by the transfer "
                        "guard (disallow); copy the tensor with clt_to(t, clt_cpu(), &h) and use "
                        "the copy",
                        t->nbytes, d->name);
    if (mode == CLT_GUARD_LOG)
      fprintf(stderr, "clt: implicit transfer: %s copies %zu bytes from %s to cpu\n", fn, t->nbytes,
              d->name);
  }
  return read_bytes(t, dst, fn, true);
}

/* ---- reads into host memory ------------------------------------------------------------- */

clt_status clt_tensor_read(const clt_tensor *t, void *dst, size_t dst_bytes) {
  static const char fn[] = "clt_tensor_read";
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!dst && t->nbytes > 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "dst is NULL");
  if (dst_bytes < t->nbytes)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "dst_bytes = %zu is smaller than the tensor's %zu bytes", dst_bytes,
                      t->nbytes);
  return clt__read_bytes(t, dst, fn);
}

/* A float as int64_t: truncated toward zero, saturated, NaN as 0 (a plain cast is undefined
 * outside the range). */
static int64_t float_to_i64(double v) {
  if (isnan(v))
    return 0;
  if (v >= 9223372036854775807.0)
    return INT64_MAX;
  if (v <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}

/* The one element of t as a double (*d) and as an int64_t (*i); the caller's out-parameter is
 * one of them, checked for NULL first. */
static clt_status read_one(const clt_tensor *t, const char *fn, double *d, int64_t *i) {
  if (!d || !i)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (t->numel != 1) {
    char sh[256];
    clt__format_shape(sh, sizeof sh, t->ndim, t->shape);
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the tensor has %lld elements (shape %s); only one-element tensors "
                      "convert to a number",
                      (long long)t->numel, sh);
  }
  union {
    float f;
    double d;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
  } v;
  if ((s = clt__read_bytes(t, &v, fn)) != CLT_OK)
    return s;
  switch (t->dtype) {
  case CLT_F32:
    *d = v.f;
    *i = float_to_i64(v.f);
    break;
  case CLT_F64:
    *d = v.d;
    *i = float_to_i64(v.d);
    break;
  case CLT_I32:
    *d = v.i32;
    *i = v.i32;
    break;
  case CLT_I64:
    *d = (double)v.i64;
    *i = v.i64;
    break;
  case CLT_U8:
  case CLT_BOOL:
    *d = v.u8;
    *i = v.u8;
    break;
  case CLT_F16:
  case CLT_BF16:
    *d = t->dtype == CLT_F16 ? clt__f16_to_f32(v.u16) : clt__bf16_to_f32(v.u16);
    *i = float_to_i64(*d);
    break;
  }
  return CLT_OK;
}

clt_status clt_item(const clt_tensor *t, double *out) {
  int64_t i;
  return read_one(t, "clt_item", out, &i);
}

clt_status clt_item_i64(const clt_tensor *t, int64_t *out) {
  double d;
  return read_one(t, "clt_item_i64", &d, out);
}
