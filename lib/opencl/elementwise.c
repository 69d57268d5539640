/* opencl/elementwise.c - launches kernels/elementwise.cl. */
#include "backend.h"

#include <stdio.h>
#include <string.h>

/* Mirrors clt_bcast_t in kernels/common.cl. */
typedef struct clt_cl_bcast {
  cl_long shape[CLT_MAX_DIMS];
  cl_long sa[CLT_MAX_DIMS];
  cl_long sb[CLT_MAX_DIMS];
} clt_cl_bcast;

/* The type an integer expression is computed in, so that overflow wraps. */
static const char *compute_type(clt_dtype dt) {
  switch (dt) {
  case CLT_I32:
    return "uint";
  case CLT_I64:
    return "ulong";
  case CLT_U8:
  case CLT_BOOL:
    return "uint";
  default:
    return clt__dtype_cl_type(dt);
  }
}

clt_status clt__cl_binary(const clt_binop *op, clt_tensor *out, const clt_tensor *a,
                          const clt_tensor *b, const clt_bcast *bc) {
  const char *fn = op->fn;
  clt_device *d = out->storage->dev;
  bool fp64 = a->dtype == CLT_F64 || b->dtype == CLT_F64 || out->dtype == CLT_F64;
  char name[64], options[512];
  snprintf(name, sizeof name, "%s_%s", op->name, clt_dtype_name(out->dtype));
  snprintf(options, sizeof options,
           "%s#define NAME %s\n#define TA %s\n#define TB %s\n#define TO %s\n#define TC %s\n"
           "#define OP(a,b) %s\n",
           clt__cl_base_options(d, fp64), name, clt__dtype_cl_type(a->dtype),
           clt__dtype_cl_type(b->dtype), clt__dtype_cl_type(out->dtype), compute_type(out->dtype),
           out->dtype == CLT_BOOL ? op->bool_expr : op->expr);
  char kname[80];
  snprintf(kname, sizeof kname, bc->same ? "%s" : "%s_bcast", name);
  cl_kernel k;
  clt_status st = clt__get_kernel(d, "elementwise", options, kname, fn, &k);
  if (st != CLT_OK)
    return st;

  clt_waitlist wl = {.n = 0};
  if ((st = clt__waitlist_add(&wl, a->storage, false, d->context, fn)) != CLT_OK ||
      (st = clt__waitlist_add(&wl, b->storage, false, d->context, fn)) != CLT_OK ||
      (st = clt__waitlist_add(&wl, out->storage, true, d->context, fn)) != CLT_OK) {
    clt__waitlist_clear(&wl);
    return st;
  }
  clt_launch l = clt__cl_launch_1d(d, out->numel);
  cl_ulong n = (cl_ulong)out->numel, step = l.chunk;
  cl_event ev = NULL;
  pthread_mutex_lock(&d->lock);
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &out->storage->mem);
  err |= clSetKernelArg(k, 1, sizeof(cl_mem), &a->storage->mem);
  err |= clSetKernelArg(k, 2, sizeof(cl_mem), &b->storage->mem);
  err |= clSetKernelArg(k, 3, sizeof n, &n);
  err |= clSetKernelArg(k, 4, sizeof step, &step);
  if (!bc->same) {
    clt_cl_bcast g;
    memset(&g, 0, sizeof g);
    for (int i = 0; i < bc->ndim; i++) {
      g.shape[i] = bc->shape[i];
      g.sa[i] = bc->sa[i];
      g.sb[i] = bc->sb[i];
    }
    cl_int nd = bc->ndim;
    err |= clSetKernelArg(k, 5, sizeof nd, &nd);
    err |= clSetKernelArg(k, 6, sizeof g, &g);
  }
  if (err != CL_SUCCESS) {
    pthread_mutex_unlock(&d->lock);
    clt__waitlist_clear(&wl);
    return clt__error(CLT_ERR_OPENCL, fn, "setting the arguments of kernel %s on %s failed", kname,
                      d->name);
  }
  st = clt__cl_enqueue(d, k, &l, &wl, fn, &ev);
  pthread_mutex_unlock(&d->lock);
  clt__waitlist_clear(&wl);
  if (st != CLT_OK)
    return st;
  clt__storage_note(a->storage, ev, d->queue, false);
  clt__storage_note(b->storage, ev, d->queue, false);
  clt__storage_note(out->storage, ev, d->queue, true);
  st = clt__maybe_sync(ev, d, fn);
  clReleaseEvent(ev);
  return st;
}
