/* SPDX-License-Identifier: MIT */
/* warm.c - clt_kernel_cache_warm: every program a device's backend builds, built ahead of use by
 * running each operation once on tiny tensors through the public API, plus what the backend's
 * warm hook builds that the public path may not run. */
#include "backend.h"

/* A list of steps, each one operation on tiny tensors of one dtype, run through the public API
 * so that every program is built by the code that will use it. The same walk counts the steps
 * (run = false) and runs them. */

typedef clt_status (*unary_fn)(clt_tensor *, clt_tensor **);
typedef clt_status (*reduce_dim_fn)(clt_tensor *, int, int, clt_tensor **);

typedef struct warm_state {
  clt_device *dev;
  bool run;
  int done, total;
  void (*progress)(int done, int total, void *ctx);
  void *ctx;
} warm_state;

/* Finishes a step with status s and the result r (released): an operation the dtype does not
 * have (CLT_ERR_DTYPE) is not an error. */
static clt_status warm_step(warm_state *w, clt_status s, clt_tensor *r) {
  clt_tensor_release(r);
  if (s == CLT_ERR_DTYPE) {
    clt_clear_error();
    s = CLT_OK;
  }
  if (s != CLT_OK)
    return s;
  w->done++;
  if (w->run && w->progress)
    w->progress(w->done, w->total, w->ctx);
  return CLT_OK;
}

#define WARM(expr)                                                                                 \
  do {                                                                                             \
    clt_tensor *r_ = NULL;                                                                         \
    clt_status s_ = w->run ? (expr) : CLT_OK;                                                      \
    if ((s_ = warm_step(w, s_, r_)) != CLT_OK)                                                     \
      return s_;                                                                                   \
  } while (0)

/* a times its first column: a matrix-vector product (gemv: CLBlast's own kernels on GPUs). */
static clt_status matvec(clt_tensor *a, clt_tensor **out) {
  clt_tensor *col;
  clt_status s = clt_narrow(a, 1, 0, 1, &col);
  if (s == CLT_OK) {
    s = clt_matmul(a, col, out);
    clt_tensor_release(col);
  }
  return s;
}

/* clt_index_select of a's first row, with an index of dtype idt. */
static clt_status gather(clt_tensor *a, clt_dtype idt, clt_tensor **out) {
  clt_tensor *i;
  clt_status s = clt_zeros(idt, 1, (int64_t[]){1}, clt_tensor_device(a), &i);
  if (s == CLT_OK) {
    s = clt_index_select(a, 0, i, out);
    clt_tensor_release(i);
  }
  return s;
}

/* The steps for one dtype; a is a (2, 2) tensor of ones, cond a bool one (NULL when counting).
 * Every elementwise operation of the table (include/clt_ops.h) is one step. */
static clt_status warm_dtype(warm_state *w, clt_dtype dt, clt_tensor *a, clt_tensor *cond) {
  static const unary_fn reduce[] = {clt_sum, clt_mean, clt_max, clt_min, clt_argmax};
  static const reduce_dim_fn reduce_dim[] = {clt_sum_dim, clt_mean_dim, clt_max_dim, clt_min_dim,
                                             clt_argmax_dim};
  bool fp64 = clt_device_has_fp64(w->dev);
  int64_t row[1] = {2};
  clt_tensor *b = NULL;
  for (int k = 0; k < CLT__OP_COUNT; k++) {
    if (k == CLT__OP_cast)
      continue; /* below, to every dtype */
    clt_tensor *in[3] = {clt__ops[k].cond ? cond : a, a, a};
    WARM(clt__op_run((clt_op_kind)k, in, &r_));
  }
  /* the broadcasting kernel, which lives in the same program as the plain one */
  WARM(clt_ones(dt, 1, row, w->dev, &b) != CLT_OK ? clt_last_status() : clt_add(a, b, &r_));
  clt_tensor_release(b);
  for (size_t i = 0; i < sizeof reduce / sizeof *reduce; i++)
    WARM(reduce[i](a, &r_));
  for (size_t i = 0; i < sizeof reduce_dim / sizeof *reduce_dim; i++)
    WARM(reduce_dim[i](a, 1, 0, &r_));
  for (int to = CLT_F32; to < CLT_DTYPE_COUNT; to++)
    if (to != CLT_F64 || fp64)
      WARM(clt_cast(a, (clt_dtype)to, &r_));
  WARM(gather(a, CLT_I64, &r_));
  WARM(gather(a, CLT_I32, &r_));
  if (clt__dtype_is_int(dt)) /* made on the device (tril, eye, ...) */
    WARM(clt_arange(0, 2, 1, dt, w->dev, &r_));
  if (dt == CLT_F32 || dt == CLT_F64) {
    WARM(clt_rand(dt, 2, clt_tensor_shape(a), w->dev, &r_));
    WARM(clt_randn(dt, 2, clt_tensor_shape(a), w->dev, &r_));
    WARM(clt_matmul(a, a, &r_));
    WARM(matvec(a, &r_));
    if (w->dev->backend->compute.warm)
      WARM(w->dev->backend->compute.warm(w->dev, dt, "clt_kernel_cache_warm"));
  }
  return CLT_OK;
}
#undef WARM

static clt_status warm_all(warm_state *w) {
  bool fp64 = clt_device_has_fp64(w->dev);
  int64_t shape[2] = {2, 2};
  clt_tensor *cond = NULL;
  clt_status st = CLT_OK;
  if (w->run && (st = clt_ones(CLT_BOOL, 2, shape, w->dev, &cond)) != CLT_OK)
    return st;
  for (int dt = CLT_F32; dt < CLT_DTYPE_COUNT && st == CLT_OK; dt++) {
    if (dt == CLT_F64 && !fp64)
      continue;
    clt_tensor *a = NULL;
    if (w->run && (st = clt_ones((clt_dtype)dt, 2, shape, w->dev, &a)) != CLT_OK)
      break;
    st = warm_dtype(w, (clt_dtype)dt, a, cond);
    clt_tensor_release(a);
  }
  clt_tensor_release(cond);
  if (st == CLT_OK && w->run)
    st = clt_device_synchronize(w->dev);
  return st;
}

clt_status clt_kernel_cache_warm(clt_device *dev, void (*progress)(int done, int total, void *ctx),
                                 void *ctx) {
  if (!dev)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_kernel_cache_warm", "dev is NULL");
  warm_state w = {dev, false, 0, 0, progress, ctx};
  if (!clt_device_is_host(dev)) {
    warm_all(&w); /* counts */
    w.total = w.done;
    w.done = 0;
    w.run = true;
  }
  if (progress)
    progress(0, w.total, ctx);
  return w.run ? warm_all(&w) : CLT_OK;
}
