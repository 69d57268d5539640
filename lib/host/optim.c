/* SPDX-License-Identifier: MIT */
/* host/optim.c - one optimizer step on one parameter as one loop over its elements (the host
 * backend's optim_step; lib/optim.c prepares the numbers). f64 parameters compute in double,
 * the others in float (f16 and bf16 loaded to f32 and rounded back to nearest even when stored),
 * as kernels/optim.cl does. */
#include "backend.h"

/* The loops, for a compute type C and element access LD(ptr, i) / ST(ptr, i, x). The SGD loop
 * is written once per case (weight decay or not; no buffer, the buffer's first step, a later
 * one), so that no loop branches: each is one straight body the compiler vectorizes. Every
 * pointer is restrict: a parameter, its gradient and its state are distinct tensors. */
#define SGD_LOOP(C, LD, ST, WD, BUF, FIRST)                                                        \
  CLT__SIMD for (int64_t i = lo; i < hi; i++) {                                                    \
    C pv = LD(p, i), d = LD(g, i);                                                                 \
    if (WD)                                                                                        \
      d = d + wd * pv;                                                                             \
    if (BUF) {                                                                                     \
      if (!(FIRST))                                                                                \
        d = mom * (C)LD(buf, i) + d;                                                               \
      ST(buf, i, d);                                                                               \
    }                                                                                              \
    ST(p, i, pv - lr * d);                                                                         \
  }
#define SGD_CASES(C, LD, ST, WD)                                                                   \
  if (!buf)                                                                                        \
    SGD_LOOP(C, LD, ST, WD, 0, 0)                                                                  \
  else if (o->first)                                                                               \
    SGD_LOOP(C, LD, ST, WD, 1, 1)                                                                  \
  else                                                                                             \
    SGD_LOOP(C, LD, ST, WD, 1, 0)
#define OPTIM_LOOPS(sfx, T, C, LD, ST)                                                             \
  static void sgd_##sfx(const clt_optim_desc *o, T *restrict p, const T *restrict g,               \
                        T *restrict buf, int64_t lo, int64_t hi) {                                 \
    const C lr = (C)o->lr, wd = (C)o->weight_decay, mom = (C)o->momentum;                          \
    if (wd != 0) {                                                                                 \
      SGD_CASES(C, LD, ST, 1)                                                                      \
    } else {                                                                                       \
      SGD_CASES(C, LD, ST, 0)                                                                      \
    }                                                                                              \
  }                                                                                                \
  static void adamw_##sfx(const clt_optim_desc *o, T *restrict p, const T *restrict g,             \
                          T *restrict m, T *restrict v, int64_t lo, int64_t hi) {                  \
    const C decay = (C)o->decay, b1 = (C)o->beta1, b2 = (C)o->beta2, ob1 = (C)(1 - o->beta1),      \
            ob2 = (C)(1 - o->beta2), eps = (C)o->eps, ss = (C)o->step_size, bc2 = (C)o->bc2_sqrt;  \
    CLT__SIMD for (int64_t i = lo; i < hi; i++) {                                                  \
      C pv = LD(p, i), gv = LD(g, i);                                                              \
      C mv = b1 * (C)LD(m, i) + ob1 * gv;                                                          \
      C vv = b2 * (C)LD(v, i) + ob2 * gv * gv;                                                     \
      ST(m, i, mv);                                                                                \
      ST(v, i, vv);                                                                                \
      pv = pv * decay;                                                                             \
      ST(p, i, pv - ss * mv / (SQRT_##sfx(vv) / bc2 + eps));                                       \
    }                                                                                              \
  }

#include <math.h>

#define PLAIN_LD(p, i) ((p)[i])
#define PLAIN_ST(p, i, x) ((p)[i] = (x))
#define F16_LD(p, i) clt__f16_to_f32((p)[i])
#define F16_ST(p, i, x) ((p)[i] = clt__f32_to_f16(x))
#define BF16_LD(p, i) clt__bf16_to_f32((p)[i])
#define BF16_ST(p, i, x) ((p)[i] = clt__f32_to_bf16(x))
#define SQRT_f32 sqrtf
#define SQRT_f64 sqrt
#define SQRT_f16 sqrtf
#define SQRT_bf16 sqrtf

OPTIM_LOOPS(f32, float, float, PLAIN_LD, PLAIN_ST)
OPTIM_LOOPS(f64, double, double, PLAIN_LD, PLAIN_ST)
OPTIM_LOOPS(f16, uint16_t, float, F16_LD, F16_ST)
OPTIM_LOOPS(bf16, uint16_t, float, BF16_LD, BF16_ST)

clt_status clt__host_optim_step(const clt_optim_desc *o, clt_tensor *param, const clt_tensor *grad,
                                clt_tensor *s1, clt_tensor *s2, const char *fn) {
  clt_status st;
  if ((st = clt__storage_host_wait(grad->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(param->storage, true, fn)) != CLT_OK ||
      (s1 && (st = clt__storage_host_wait(s1->storage, true, fn)) != CLT_OK) ||
      (s2 && (st = clt__storage_host_wait(s2->storage, true, fn)) != CLT_OK))
    return st;
  void *p = clt__host_ptr(param), *a = s1 ? clt__host_ptr(s1) : NULL,
       *b = s2 ? clt__host_ptr(s2) : NULL;
  const void *g = clt__host_ptr(grad);
  bool sgd = o->kind == CLT__OPTIM_SGD;
  switch (param->dtype) {
#define CASE(dt, sfx, T)                                                                           \
  case dt:                                                                                         \
    CLT__FOR_PARTS(param->numel, lo, hi,                                                           \
                   sgd ? sgd_##sfx(o, p, g, a, lo, hi) : adamw_##sfx(o, p, g, a, b, lo, hi));      \
    break;
    CASE(CLT_F32, f32, float)
    CASE(CLT_F64, f64, double)
    CASE(CLT_F16, f16, uint16_t)
    CASE(CLT_BF16, bf16, uint16_t)
#undef CASE
  default:
    return clt__error(CLT_ERR_DTYPE, fn, "an optimizer step on a %s parameter",
                      clt_dtype_name(param->dtype));
  }
  return CLT_OK;
}
