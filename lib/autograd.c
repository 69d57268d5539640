/* SPDX-License-Identifier: MIT */
/* autograd.c - reverse-mode automatic differentiation (docs/autograd.md): the public switches,
 * the derivative of every operation that records (the elementwise ones in a table parallel to
 * clt_ops.h, which fails to compile when a row lacks its entry), and the backward pass over the
 * graph that tensor.c records. Derivatives are computed by clt's public operations, on the
 * device of the forward pass, lazily where the forward would be. */
#include "backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the public switches ------------------------------------------------------------------ */

clt_status clt_requires_grad_(clt_tensor *t, int on) {
  static const char fn[] = "clt_requires_grad_";
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (on && !clt__dtype_is_float(t->dtype))
    return clt__error(CLT_ERR_DTYPE, fn,
                      "t is %s: only float tensors (f16, bf16, f32, f64) can require grad; cast "
                      "it first (clt_cast)",
                      clt_dtype_name(t->dtype));
  if (t->ag && t->ag->fn) {
    if (on)
      return CLT_OK;
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "t is not a leaf (it was computed from tensors that require grad, by %s): "
                      "only a leaf's flag can be turned off; use clt_detach(t, &d) for a tensor "
                      "without history",
                      t->ag->fn->fn);
  }
  if (!on && !t->ag)
    return CLT_OK;
  clt_grad_meta *m = clt__grad_meta(t);
  if (!m)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  m->requires_grad = on != 0;
  return CLT_OK;
}

int clt_tensor_requires_grad(const clt_tensor *t) { return t && t->ag && t->ag->requires_grad; }

int clt_set_grad_enabled(int on) { return clt__grad_mode_set(on != 0); }

clt_tensor *clt_tensor_grad(const clt_tensor *t) { return t && t->ag ? t->ag->grad : NULL; }

clt_status clt_zero_grad(clt_tensor *t) {
  clt_status s = clt__check_tensor(t, "clt_zero_grad", "t");
  if (s != CLT_OK)
    return s;
  if (t->ag) {
    clt_tensor_release(t->ag->grad);
    t->ag->grad = NULL;
  }
  return CLT_OK;
}

clt_status clt_detach(clt_tensor *t, clt_tensor **out) {
  static const char fn[] = "clt_detach";
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  return clt__tensor_view(t, t->ndim, t->shape, t->strides, clt__elem_offset(t), fn, out);
}

clt_status clt_retain_grad(clt_tensor *t) {
  static const char fn[] = "clt_retain_grad";
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!clt_tensor_requires_grad(t))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "t does not require grad, so no backward reaches it; mark a leaf it is "
                      "computed from with clt_requires_grad_ first");
  if (t->ag->fn) {
    t->ag->retain_grad = true;
    t->ag->fn->retained = t->ag;
  }
  return CLT_OK;
}

/* ---- the temporaries of a derivative -------------------------------------------------------- */

/* The tensors a derivative makes, released together at its end, and the first error: every
 * step below does nothing once one failed, so a rule is written as one expression. */
typedef struct ctx {
  clt_status s;
  int n, cap;
  clt_tensor **tmp; /* grows: clt_cat's derivative makes one per operand */
} ctx;

/* keep(c, f(..., &r), &r): r is read after f ran (an argument read in the same call might not
 * be). */
static clt_tensor *keep(ctx *c, clt_status s, clt_tensor **rp) {
  clt_tensor *t = *rp;
  if (s != CLT_OK) {
    c->s = s;
    return NULL;
  }
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 32;
    clt_tensor **v = realloc(c->tmp, sizeof *v * (size_t)cap);
    if (!v) {
      clt_tensor_release(t);
      c->s = clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_backward", "out of host memory");
      return NULL;
    }
    c->tmp = v;
    c->cap = cap;
  }
  return c->tmp[c->n++] = t;
}

typedef clt_status (*op1)(clt_tensor *, clt_tensor **);
typedef clt_status (*op2)(clt_tensor *, clt_tensor *, clt_tensor **);
typedef clt_status (*op2s)(clt_tensor *, double, clt_tensor **);

static clt_tensor *E1(ctx *c, op1 f, clt_tensor *a) {
  clt_tensor *r = NULL;
  return c->s != CLT_OK ? NULL : keep(c, f(a, &r), &r);
}
static clt_tensor *E2(ctx *c, op2 f, clt_tensor *a, clt_tensor *b) {
  clt_tensor *r = NULL;
  return c->s != CLT_OK ? NULL : keep(c, f(a, b, &r), &r);
}
static clt_tensor *ES(ctx *c, op2s f, clt_tensor *a, double x) {
  clt_tensor *r = NULL;
  return c->s != CLT_OK ? NULL : keep(c, f(a, x, &r), &r);
}
/* where(cond, a, b) */
static clt_tensor *W(ctx *c, clt_tensor *cond, clt_tensor *a, clt_tensor *b) {
  clt_tensor *r = NULL;
  return c->s != CLT_OK ? NULL : keep(c, clt_where(cond, a, b, &r), &r);
}
/* A 0-d zero of like's dtype, on its device. */
static clt_tensor *Z(ctx *c, clt_tensor *like) {
  clt_tensor *r = NULL;
  if (c->s != CLT_OK)
    return NULL;
  return keep(c, clt_zeros(like->dtype, 0, NULL, like->storage->dev, &r), &r);
}
/* Zeros of like's shape and dtype, on its device. */
static clt_tensor *ZL(ctx *c, clt_tensor *like) {
  clt_tensor *r = NULL;
  if (c->s != CLT_OK)
    return NULL;
  return keep(c, clt_zeros(like->dtype, like->ndim, like->shape, like->storage->dev, &r), &r);
}
/* g where mask, else 0 */
static clt_tensor *masked(ctx *c, clt_tensor *mask, clt_tensor *g) {
  return W(c, mask, g, Z(c, g));
}
/* 1 - x */
static clt_tensor *one_minus(ctx *c, clt_tensor *x) {
  return E1(c, clt_neg, ES(c, clt_sub_scalar, x, 1));
}

/* ---- the derivatives of the elementwise operations ---------------------------------------- */

/* A rule gets the result's gradient g and the operands x, and sets gx[k] for each k with
 * need[k] (as a tensor of the temporaries; the caller sums it back to x[k]'s shape and casts
 * it to x[k]'s dtype). */
typedef void (*rule_fn)(ctx *c, clt_tensor *g, clt_tensor *const *x, const bool *need,
                        clt_tensor **gx);
#define RULE(name)                                                                                 \
  static void name(ctx *c, clt_tensor *g, clt_tensor *const *x, const bool *need, clt_tensor **gx)
#define A x[0]
#define B x[1]

RULE(d_same) { /* add, cast: the gradient passes through */
  (void)c, (void)x;
  gx[0] = gx[1] = need[0] || need[1] ? g : NULL;
}
RULE(d_sub) {
  gx[0] = g;
  if (need[1])
    gx[1] = E1(c, clt_neg, g);
  (void)x;
}
RULE(d_mul) {
  if (need[0])
    gx[0] = E2(c, clt_mul, g, B);
  if (need[1])
    gx[1] = E2(c, clt_mul, g, A);
}
RULE(d_div) {
  if (need[0])
    gx[0] = E2(c, clt_div, g, B);
  if (need[1])
    gx[1] = E1(c, clt_neg, E2(c, clt_div, E2(c, clt_mul, g, A), E2(c, clt_mul, B, B)));
}
RULE(d_pow) { /* as PyTorch: 0 where the exponent is 0 (for a), where a is 0 and b >= 0 (for b) */
  if (need[0]) {
    clt_tensor *t = E2(c, clt_mul, B, E2(c, clt_pow, A, ES(c, clt_sub_scalar, B, 1)));
    gx[0] = E2(c, clt_mul, g, W(c, ES(c, clt_eq_scalar, B, 0), Z(c, t), t));
  }
  if (need[1]) {
    clt_tensor *t = E2(c, clt_mul, E2(c, clt_pow, A, B), E1(c, clt_log, A));
    clt_tensor *m = E2(c, clt_logical_and, ES(c, clt_eq_scalar, A, 0), ES(c, clt_ge_scalar, B, 0));
    gx[1] = E2(c, clt_mul, g, W(c, m, Z(c, t), t));
  }
}
/* maximum and minimum, as PyTorch: the gradient goes to the chosen operand, half to each on a
 * tie. */
static void maxmin(ctx *c, clt_tensor *g, clt_tensor *const *x, const bool *need, clt_tensor **gx,
                   bool max) {
  clt_tensor *w = W(c, E2(c, clt_eq, A, B), ES(c, clt_mul_scalar, g, 0.5), g);
  if (need[0])
    gx[0] = W(c, E2(c, max ? clt_lt : clt_gt, A, B), Z(c, w), w);
  if (need[1])
    gx[1] = W(c, E2(c, max ? clt_gt : clt_lt, A, B), Z(c, w), w);
}
RULE(d_maximum) { maxmin(c, g, x, need, gx, true); }
RULE(d_minimum) { maxmin(c, g, x, need, gx, false); }
RULE(d_atan2) {
  clt_tensor *den = E2(c, clt_add, E2(c, clt_mul, A, A), E2(c, clt_mul, B, B));
  if (need[0])
    gx[0] = E2(c, clt_div, E2(c, clt_mul, g, B), den);
  if (need[1])
    gx[1] = E1(c, clt_neg, E2(c, clt_div, E2(c, clt_mul, g, A), den));
}
RULE(d_neg) {
  (void)need, (void)x;
  gx[0] = E1(c, clt_neg, g);
}
RULE(d_abs) {
  (void)need;
  gx[0] = E2(c, clt_mul, g, E1(c, clt_sign, A));
}
RULE(d_zero) { /* piecewise constant (floor, sign, ...): a zero gradient, as PyTorch */
  (void)need, (void)g;
  gx[0] = ZL(c, A);
}
RULE(d_relu) {
  (void)need;
  gx[0] = masked(c, ES(c, clt_gt_scalar, A, 0), g);
}
/* x[1]: the saved result (exp, tanh, sigmoid: clt_grad_node.out), or NULL */
RULE(d_exp) { /* exp and expm1 (whose result is not exp's: computed again) */
  (void)need;
  gx[0] = E2(c, clt_mul, g, x[1] ? x[1] : E1(c, clt_exp, A));
}
RULE(d_log) {
  (void)need;
  gx[0] = E2(c, clt_div, g, A);
}
RULE(d_log1p) {
  (void)need;
  gx[0] = E2(c, clt_div, g, ES(c, clt_add_scalar, A, 1));
}
RULE(d_sqrt) {
  (void)need;
  gx[0] = E2(c, clt_div, g, ES(c, clt_mul_scalar, E1(c, clt_sqrt, A), 2));
}
RULE(d_rsqrt) { /* -r^3 / 2 */
  (void)need;
  clt_tensor *r = E1(c, clt_rsqrt, A);
  gx[0] = E2(c, clt_mul, ES(c, clt_mul_scalar, g, -0.5), E2(c, clt_mul, r, E2(c, clt_mul, r, r)));
}
RULE(d_sin) {
  (void)need;
  gx[0] = E2(c, clt_mul, g, E1(c, clt_cos, A));
}
RULE(d_cos) {
  (void)need;
  gx[0] = E1(c, clt_neg, E2(c, clt_mul, g, E1(c, clt_sin, A)));
}
RULE(d_tan) { /* 1 + tan^2 */
  (void)need;
  clt_tensor *t = E1(c, clt_tan, A);
  gx[0] = E2(c, clt_mul, g, ES(c, clt_add_scalar, E2(c, clt_mul, t, t), 1));
}
RULE(d_atan) {
  (void)need;
  gx[0] = E2(c, clt_div, g, ES(c, clt_add_scalar, E2(c, clt_mul, A, A), 1));
}
RULE(d_tanh) { /* 1 - tanh^2 */
  (void)need;
  clt_tensor *t = x[1] ? x[1] : E1(c, clt_tanh, A);
  gx[0] = E2(c, clt_mul, g, one_minus(c, E2(c, clt_mul, t, t)));
}
RULE(d_sigmoid) { /* s (1 - s) */
  (void)need;
  clt_tensor *s = x[1] ? x[1] : E1(c, clt_sigmoid, A);
  gx[0] = E2(c, clt_mul, g, E2(c, clt_mul, s, one_minus(c, s)));
}
RULE(d_erf) { /* 2 / sqrt(pi) e^(-a^2) */
  (void)need;
  clt_tensor *e = E1(c, clt_exp, E1(c, clt_neg, E2(c, clt_mul, A, A)));
  gx[0] = E2(c, clt_mul, g, ES(c, clt_mul_scalar, e, 1.1283791670955126));
}
RULE(d_where) { /* x = cond, a, b */
  if (need[1])
    gx[1] = masked(c, x[0], g);
  if (need[2])
    gx[2] = W(c, x[0], Z(c, g), g);
}
RULE(d_clamp) { /* min(max(a, lo), hi): m = max(a, lo) */
  clt_tensor *m = E2(c, clt_maximum, A, B), *in = ES(c, clt_eq_scalar, E2(c, clt_gt, m, x[2]), 0);
  if (need[0])
    gx[0] = masked(c, E2(c, clt_logical_and, E2(c, clt_ge, A, B), in), g);
  if (need[1])
    gx[1] = masked(c, E2(c, clt_logical_and, E2(c, clt_lt, A, B), in), g);
  if (need[2])
    gx[2] = masked(c, E2(c, clt_gt, m, x[2]), g);
}

/* The derivative of each row of clt_ops.h: GRAD_<name> must exist for every row, or this file
 * does not compile. saved: the operands whose values the rule reads (bit k for operand k),
 * checked against in-place writes since the call. */
typedef struct grad_rule {
  rule_fn f; /* NULL: the result is bool and never records */
  unsigned saved;
} grad_rule;
#define DIFF(f, saved)                                                                             \
  { f, saved }
#define NONDIFF                                                                                    \
  { NULL, 0 } /* comparisons and logic: bool results, no gradient */
#define GRAD_add DIFF(d_same, 0)
#define GRAD_sub DIFF(d_sub, 0)
#define GRAD_mul DIFF(d_mul, 3)
#define GRAD_div DIFF(d_div, 3)
#define GRAD_pow DIFF(d_pow, 3)
#define GRAD_maximum DIFF(d_maximum, 3)
#define GRAD_minimum DIFF(d_minimum, 3)
#define GRAD_atan2 DIFF(d_atan2, 3)
#define GRAD_eq NONDIFF
#define GRAD_ne NONDIFF
#define GRAD_lt NONDIFF
#define GRAD_le NONDIFF
#define GRAD_gt NONDIFF
#define GRAD_ge NONDIFF
#define GRAD_logical_and NONDIFF
#define GRAD_logical_or NONDIFF
#define GRAD_logical_xor NONDIFF
#define GRAD_logical_not NONDIFF
#define GRAD_neg DIFF(d_neg, 0)
#define GRAD_abs DIFF(d_abs, 1)
#define GRAD_sign DIFF(d_zero, 0)
#define GRAD_relu DIFF(d_relu, 1)
#define GRAD_floor DIFF(d_zero, 0)
#define GRAD_ceil DIFF(d_zero, 0)
#define GRAD_round DIFF(d_zero, 0)
#define GRAD_trunc DIFF(d_zero, 0)
#define GRAD_exp DIFF(d_exp, 1)
#define GRAD_expm1 DIFF(d_exp, 1)
#define GRAD_log DIFF(d_log, 1)
#define GRAD_log1p DIFF(d_log1p, 1)
#define GRAD_sqrt DIFF(d_sqrt, 1)
#define GRAD_rsqrt DIFF(d_rsqrt, 1)
#define GRAD_sin DIFF(d_sin, 1)
#define GRAD_cos DIFF(d_cos, 1)
#define GRAD_tan DIFF(d_tan, 1)
#define GRAD_atan DIFF(d_atan, 1)
#define GRAD_tanh DIFF(d_tanh, 1)
#define GRAD_sigmoid DIFF(d_sigmoid, 1)
#define GRAD_erf DIFF(d_erf, 1)
#define GRAD_where DIFF(d_where, 1)
#define GRAD_clamp DIFF(d_clamp, 7)
#define GRAD_ROW(name, ...) [CLT__OP_##name] = GRAD_##name,
static const grad_rule rules[CLT__OP_COUNT] = {
    CLT_ELEMENTWISE_OPS(GRAD_ROW)[CLT__OP_cast] = DIFF(d_same, 0),
};
#undef GRAD_ROW

/* ---- the other recorded operations -------------------------------------------------------- */

/* dim as the call gave it, resolved for a tensor of nd dimensions (0-d tensors take 0 and -1) */
static int norm_dim(int64_t dim, int nd) { return (int)(dim < 0 ? dim + (nd ? nd : 1) : dim); }

/* g (a reduction's gradient) expanded back to x's shape, divided by the count for a mean */
static clt_tensor *unreduce(ctx *c, const clt_grad_node *node, clt_tensor *g, clt_tensor *x) {
  bool whole = node->kind == CLT__GRAD_SUM || node->kind == CLT__GRAD_MEAN;
  bool mean = node->kind == CLT__GRAD_MEAN || node->kind == CLT__GRAD_MEAN_DIM;
  int64_t count = x->numel;
  if (!whole && x->ndim > 0) {
    int d = norm_dim(node->p[0], x->ndim);
    count = x->shape[d];
    if (!node->p[1]) {
      clt_tensor *u = NULL;
      g = c->s != CLT_OK ? NULL : keep(c, clt_unsqueeze(g, d, &u), &u);
    }
  }
  if (mean)
    g = ES(c, clt_div_scalar, g, (double)count);
  clt_tensor *e = NULL;
  return c->s != CLT_OK ? NULL : keep(c, clt_expand(g, x->ndim, x->shape, &e), &e);
}

/* A view of z taken as node took its view of the operand. */
static clt_status same_view(const clt_grad_node *node, clt_tensor *z, clt_tensor **v) {
  const int64_t *p = node->p;
  switch (node->kind) {
  case CLT__GRAD_NARROW:
    return clt_narrow(z, (int)p[0], p[1], p[2], v);
  case CLT__GRAD_SELECT:
    return clt_select(z, (int)p[0], p[1], v);
  case CLT__GRAD_DIAGONAL:
    return clt_diagonal(z, p[0], (int)p[1], (int)p[2], v);
  default:
    return clt_slice(z, (int)p[0], p[1], p[2], p[3], v);
  }
}

static clt_tensor *transposed(ctx *c, clt_tensor *t) {
  clt_tensor *r = NULL;
  return c->s != CLT_OK ? NULL : keep(c, clt_transpose(t, -2, -1, &r), &r);
}

static clt_tensor *reshaped(ctx *c, clt_tensor *t, int ndim, const int64_t *shape) {
  clt_tensor *r = NULL;
  return c->s != CLT_OK ? NULL : keep(c, clt_reshape(t, ndim, shape, &r), &r);
}

/* max and min of the whole tensor: g split evenly among the elements equal to the result
 * (PyTorch's amax rule) */
static clt_tensor *extremum_grad(ctx *c, clt_tensor *g, clt_tensor *x, bool max) {
  clt_tensor *mask = E2(c, clt_eq, x, E1(c, max ? clt_max : clt_min, x)), *cf = NULL;
  clt_tensor *count = E1(c, clt_sum, mask);
  cf = c->s != CLT_OK ? NULL : keep(c, clt_cast(count, g->dtype, &cf), &cf);
  return W(c, mask, E2(c, clt_div, g, cf), Z(c, g));
}

/* 1 along dim d of x's shape, x->shape[d] elements 0..n-1 along d: compares with an index */
static clt_tensor *positions(ctx *c, clt_tensor *x, int d) {
  clt_tensor *r = NULL;
  r = c->s != CLT_OK
          ? NULL
          : keep(c, clt_arange(0, (double)x->shape[d], 1, CLT_I64, x->storage->dev, &r), &r);
  int64_t shape[CLT_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++)
    shape[i] = i == d ? x->shape[d] : 1;
  return reshaped(c, r, x->ndim, shape);
}

/* max_dim and min_dim: g to the one index argmax_dim picks (of -x for min: the first minimum) */
static clt_tensor *extremum_dim_grad(ctx *c, const clt_grad_node *node, clt_tensor *g,
                                     clt_tensor *x, bool max) {
  if (x->ndim == 0)
    return g;
  int d = norm_dim(node->p[0], x->ndim);
  clt_tensor *src = max ? x : E1(c, clt_neg, x), *idx = NULL, *u = NULL;
  idx = c->s != CLT_OK ? NULL : keep(c, clt_argmax_dim(src, d, 1, &idx), &idx);
  if (!node->p[1])
    g = c->s != CLT_OK ? NULL : keep(c, clt_unsqueeze(g, d, &u), &u);
  return W(c, E2(c, clt_eq, positions(c, x, d), idx), g, Z(c, g));
}

/* index_select: g scatter-added back along dim, as g (moved to the last dim, [rest, k]) times
 * the one-hot matrix of index ([k, n]), so repeated indices add up */
static clt_tensor *index_select_grad(ctx *c, const clt_grad_node *node, clt_tensor *g,
                                     clt_tensor *x, clt_tensor *index) {
  int d = norm_dim(node->p[0], x->ndim);
  int64_t k = index->numel, n = x->shape[d];
  if (k == 0 || x->numel == 0)
    return ZL(c, x);
  clt_tensor *ar = NULL, *gt = NULL, *t = NULL, *iu = NULL;
  ar = c->s != CLT_OK ? NULL
                      : keep(c, clt_arange(0, (double)n, 1, CLT_I64, x->storage->dev, &ar), &ar);
  iu = reshaped(c, index, 2, (int64_t[]){k, 1});
  clt_tensor *oh = E2(c, clt_eq, iu, ar), *m = NULL;
  m = c->s != CLT_OK ? NULL : keep(c, clt_cast(oh, g->dtype, &m), &m);
  gt = c->s != CLT_OK ? NULL : keep(c, clt_transpose(g, d, -1, &gt), &gt);
  if (c->s != CLT_OK)
    return NULL;
  int64_t shape[CLT_MAX_DIMS];
  memcpy(shape, gt->shape, sizeof(int64_t) * (size_t)gt->ndim);
  shape[gt->ndim - 1] = n;
  clt_tensor *prod = E2(c, clt__matmul, reshaped(c, gt, 2, (int64_t[]){-1, k}), m);
  clt_tensor *back = reshaped(c, prod, gt->ndim, shape);
  return c->s != CLT_OK ? NULL : keep(c, clt_transpose(back, d, -1, &t), &t);
}

static _Atomic(clt__grad_linalg_fn) linalg_rule;

void clt__grad_linalg_set(clt__grad_linalg_fn f) { atomic_store(&linalg_rule, f); }

static void other_rule(ctx *c, const clt_grad_node *node, clt_tensor *g, const bool *need,
                       clt_tensor **gx) {
  clt_tensor *const *x = node->in;
  switch ((clt__grad_kind)node->kind) {
  case CLT__GRAD_SUM:
  case CLT__GRAD_MEAN:
  case CLT__GRAD_SUM_DIM:
  case CLT__GRAD_MEAN_DIM:
    gx[0] = unreduce(c, node, g, A);
    break;
  case CLT__GRAD_MATMUL: /* summed back over a broadcast batch by the caller */
    if (need[0])
      gx[0] = E2(c, clt__matmul, g, transposed(c, B));
    if (need[1])
      gx[1] = E2(c, clt__matmul, transposed(c, A), g);
    break;
  case CLT__GRAD_LINEAR: { /* y = x W^T + b */
    int64_t out = B->shape[0], in = B->shape[1];
    if (need[0])
      gx[0] = E2(c, clt__matmul, g, B);
    if (need[1])
      gx[1] = E2(c, clt__matmul, transposed(c, reshaped(c, g, 2, (int64_t[]){-1, out})),
                 reshaped(c, A, 2, (int64_t[]){-1, in}));
    if (node->n > 2 && need[2])
      gx[2] = g; /* summed back to (out) by the caller */
    break;
  }
  case CLT__GRAD_NARROW:
  case CLT__GRAD_SELECT:
  case CLT__GRAD_SLICE:
  case CLT__GRAD_DIAGONAL: { /* zeros of the operand's shape, g written into the same view */
    clt_tensor *z = ZL(c, A), *v = NULL;
    if (c->s == CLT_OK && (c->s = same_view(node, z, &v)) == CLT_OK) {
      c->s = clt_copy(v, g);
      clt_tensor_release(v);
    }
    gx[0] = z;
    break;
  }
  case CLT__GRAD_PERMUTE: {
    int inv[CLT_MAX_DIMS];
    for (int i = 0; i < node->np; i++)
      inv[norm_dim(node->p[i], node->np)] = i;
    clt_tensor *r = NULL;
    gx[0] = keep(c, clt_permute(g, node->np, inv, &r), &r);
    break;
  }
  case CLT__GRAD_TRANSPOSE: {
    clt_tensor *r = NULL;
    gx[0] = keep(c, clt_transpose(g, (int)node->p[0], (int)node->p[1], &r), &r);
    break;
  }
  case CLT__GRAD_EXPAND: /* summed back by the caller */
  case CLT__GRAD_COPY:
    gx[0] = g;
    break;
  case CLT__GRAD_RESHAPE:
    gx[0] = reshaped(c, g, A->ndim, A->shape);
    break;
  case CLT__GRAD_MAX:
  case CLT__GRAD_MIN:
    gx[0] = extremum_grad(c, g, A, node->kind == CLT__GRAD_MAX);
    break;
  case CLT__GRAD_MAX_DIM:
  case CLT__GRAD_MIN_DIM:
    gx[0] = extremum_dim_grad(c, node, g, A, node->kind == CLT__GRAD_MAX_DIM);
    break;
  case CLT__GRAD_INDEX_SELECT:
    gx[0] = index_select_grad(c, node, g, A, B);
    break;
  case CLT__GRAD_CAT: { /* each operand's slice of g along dim */
    int d = norm_dim(node->p[0], A->ndim);
    int64_t at = 0;
    for (int k = 0; k < node->n && c->s == CLT_OK; k++) {
      clt_tensor *v = NULL;
      int64_t len = node->in[k]->shape[d];
      if (need[k])
        gx[k] = keep(c, clt_narrow(g, d, at, len, &v), &v);
      at += len;
    }
    break;
  }
  case CLT__GRAD_LINALG_SOLVE:
  case CLT__GRAD_LINALG_SOLVE_TRIANGULAR:
  case CLT__GRAD_LINALG_CHOLESKY:
  case CLT__GRAD_LINALG_INV:
  case CLT__GRAD_LINALG_DET:
  case CLT__GRAD_LINALG_SLOGDET: { /* lib/solve.c's rules, summed back by the caller */
    clt__grad_linalg_fn f = atomic_load(&linalg_rule);
    if (!f) {
      c->s = clt__error(CLT_ERR_INTERNAL, "clt_backward", "no derivative of %s is installed",
                        node->fn);
      break;
    }
    if ((c->s = f(node, g, need, gx)) == CLT_OK)
      for (int k = 0; k < node->n; k++)
        if (gx[k])
          gx[k] = keep(c, CLT_OK, &gx[k]); /* NULL where keep released it (out of memory) */
    break;
  }
  case CLT__GRAD_KIND_END:
    break;
  }
}

/* g summed back over the dimensions broadcasting added or grew (to x's shape) and cast to x's
 * dtype: the gradient of x. */
static clt_tensor *to_operand(ctx *c, clt_tensor *g, const clt_tensor *x) {
  if (!g)
    return NULL;
  int lead = g->ndim - x->ndim;
  for (int d = 0; d < lead && c->s == CLT_OK; d++) {
    clt_tensor *r = NULL;
    g = keep(c, clt_sum_dim(g, 0, 0, &r), &r);
  }
  for (int d = 0; d < x->ndim && c->s == CLT_OK; d++)
    if (x->shape[d] == 1 && g->shape[d] != 1) {
      clt_tensor *r = NULL;
      g = keep(c, clt_sum_dim(g, d, 1, &r), &r);
    }
  if (g && g->dtype != x->dtype) {
    clt_tensor *r = NULL;
    g = keep(c, clt_cast(g, x->dtype, &r), &r);
  }
  return g;
}

/* ---- the backward pass -------------------------------------------------------------------- */

static bool needs_grad(const clt_tensor *t) { return t && t->ag && t->ag->requires_grad; }

/* acc += g, where acc may be NULL (then a copy of g): a leaf's .grad, or a node's gradient so
 * far (never written in place there: it may be g itself, which another node reads). */
static clt_status accumulate(clt_tensor **acc, clt_tensor *g, bool in_place) {
  clt_tensor *r;
  clt_status s;
  if (!*acc) {
    if (!in_place) {
      *acc = clt_tensor_retain(g);
      return CLT_OK;
    }
    if ((s = clt_clone(g, &r)) != CLT_OK)
      return s;
    *acc = r;
    return CLT_OK;
  }
  if (in_place)
    return clt_add_(*acc, g);
  if ((s = clt_add(*acc, g, &r)) != CLT_OK)
    return s;
  clt_tensor_release(*acc);
  *acc = r;
  return CLT_OK;
}

static clt_status freed_error(const char *fn, const clt_grad_node *node) {
  return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                    "the graph through %s was freed by an earlier backward (clt_backward frees "
                    "the saved tensors as it goes); use clt_backward_retain for every backward "
                    "but the last to go through a graph more than once",
                    node->fn);
}

/* Runs node: its operands' gradients from its result's (node->grad), into the nodes that made
 * them and the leaves' .grad. */
static clt_status run_node(clt_grad_node *node, const char *fn) {
  ctx c = {CLT_OK, 0, 0, NULL};
  bool need_3[3] = {false, false, false}, *need = need_3;
  clt_tensor *gx_3[3] = {NULL, NULL, NULL}, **gx = gx_3;
  if (node->n > 3) { /* clt_cat of more than three */
    need = calloc((size_t)node->n, sizeof *need);
    gx = calloc((size_t)node->n, sizeof *gx);
    if (!need || !gx) {
      free(need);
      free(gx);
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
    }
  }
  for (int k = 0; k < node->n; k++)
    need[k] = needs_grad(node->in[k]);
  clt_tensor *with_out[3] = {node->in[0], node->out, NULL}; /* a unary op's saved result */
  if (node->kind < CLT__OP_COUNT)
    rules[node->kind].f(&c, node->grad, node->out ? with_out : node->in, need, gx);
  else
    other_rule(&c, node, node->grad, need, gx);
  clt_status s = c.s;
  for (int k = 0; k < node->n && s == CLT_OK; k++) {
    if (!need[k])
      continue;
    clt_tensor *x = node->in[k], *g = to_operand(&c, gx[k], x);
    if ((s = c.s) != CLT_OK)
      break;
    if (!g || g->ndim != x->ndim || memcmp(g->shape, x->shape, sizeof(int64_t) * x->ndim) != 0) {
      s = clt__error(CLT_ERR_INTERNAL, fn,
                     "the derivative of %s gave no gradient of argument %d's shape", node->fn,
                     k + 1);
      break;
    }
    clt_grad_node *up = x->ag->fn;
    if (up)
      s = accumulate(&up->grad, g, false);
    else
      s = accumulate(&x->ag->grad, g, true);
  }
  for (int i = 0; i < c.n; i++)
    clt_tensor_release(c.tmp[i]);
  free(c.tmp);
  if (need != need_3) {
    free(need);
    free(gx);
  }
  if (s != CLT_OK)
    return clt__error(s, fn, "computing the gradient of %s: %s", node->fn, clt_last_error());
  return CLT_OK;
}

/* The nodes root depends on, each once, retained, with deps counting its consumers among them;
 * an error where the graph was freed. */
typedef struct node_list {
  clt_grad_node **v;
  int n, cap;
} node_list;

static clt_status push(node_list *l, clt_grad_node *node, const char *fn) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    clt_grad_node **v = realloc(l->v, sizeof *v * (size_t)cap);
    if (!v)
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory for the graph");
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = node;
  return CLT_OK;
}

/* push, for the list of every node: retained, marked, deps counted from 0 */
static clt_status list(node_list *l, clt_grad_node *node, const char *fn) {
  clt_status s = push(l, node, fn);
  if (s == CLT_OK) {
    atomic_fetch_add(&node->refs, 1);
    node->deps = 0;
    node->listed = true;
  }
  return s;
}

static clt_status collect(clt_grad_node *root, node_list *l, const char *fn) {
  clt_status s;
  if (root->freed)
    return freed_error(fn, root);
  if ((s = list(l, root, fn)) != CLT_OK)
    return s;
  for (int i = 0; i < l->n; i++) { /* breadth first; l grows as it goes */
    clt_grad_node *node = l->v[i];
    for (int k = 0; k < node->n; k++) {
      clt_tensor *x = node->in[k];
      if (!needs_grad(x) || !x->ag->fn)
        continue;
      clt_grad_node *up = x->ag->fn;
      if (up->freed)
        return freed_error(fn, up);
      if (!up->listed && (s = list(l, up, fn)) != CLT_OK)
        return s;
      up->deps++;
    }
  }
  return CLT_OK;
}

/* Every tensor a node saved, as it was at the call (its storage's version unchanged). */
static clt_status check_versions(const node_list *l, const char *fn) {
  for (int i = 0; i < l->n; i++) {
    const clt_grad_node *node = l->v[i];
    unsigned saved = 0u;
    if (node->kind < CLT__OP_COUNT)
      saved = rules[node->kind].saved;
    else if (node->kind == CLT__GRAD_MATMUL || node->kind == CLT__GRAD_LINEAR)
      saved = 3u;
    else if (node->kind >= CLT__GRAD_MAX && node->kind <= CLT__GRAD_MIN_DIM)
      saved = 1u; /* the values, to find the extremes */
    else if (node->kind == CLT__GRAD_INDEX_SELECT)
      saved = 2u; /* the index */
    else if (node->kind == CLT__GRAD_LINALG_SOLVE ||
             node->kind == CLT__GRAD_LINALG_SOLVE_TRIANGULAR)
      saved = node->out ? 1u : 3u; /* A, and B where X must be computed again */
    else if (node->kind == CLT__GRAD_LINALG_DET || node->kind == CLT__GRAD_LINALG_SLOGDET)
      saved = 1u; /* A, for its inverse */
    else if (node->kind == CLT__GRAD_LINALG_CHOLESKY || node->kind == CLT__GRAD_LINALG_INV)
      saved = node->out ? 0u : 1u;
    unsigned out_now = node->out ? atomic_load(&node->out->storage->version) : 0;
    if (node->out && out_now != node->out_version)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "the result of %s, which the backward needs, was modified in place "
                        "after the call (its memory's version is %u, it was %u): recompute "
                        "the forward pass after the write, or write into a copy",
                        node->fn, out_now, node->out_version);
    for (int k = 0; k < node->n; k++) {
      const clt_tensor *x = node->in[k];
      unsigned now = x ? atomic_load(&x->storage->version) : 0;
      if (x && (saved >> k & 1) && (!node->out || node->kind >= CLT__OP_COUNT) &&
          now != node->version[k])
        return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                          "argument %d of %s, which the backward needs, was modified in place "
                          "after the call (its memory's version is %u, it was %u): recompute "
                          "the forward pass after the write, or write into a copy",
                          k + 1, node->fn, now, node->version[k]);
    }
  }
  return CLT_OK;
}

static clt_status backward(clt_tensor *root, clt_tensor *grad, bool retain, const char *fn) {
  clt_status s;
  if ((s = clt__check_tensor(root, fn, "root")) != CLT_OK)
    return s;
  if (!needs_grad(root))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "root does not require grad: no tensor it was computed from requires grad "
                      "(clt_requires_grad_), or it was computed with grad mode off");
  char sr[256], sg[256];
  clt__format_shape(sr, sizeof sr, root->ndim, root->shape);
  if (!grad && root->numel != 1)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "grad can be NULL only for a root of one element, and root has shape %s: "
                      "pass the gradient with respect to root (a tensor of its shape)",
                      sr);
  if (grad) {
    if (grad->storage->dev != root->storage->dev)
      return clt__device_mismatch(fn, root->storage->dev, "root", grad->storage->dev, "grad");
    clt__format_shape(sg, sizeof sg, grad->ndim, grad->shape);
    if (grad->ndim != root->ndim ||
        memcmp(grad->shape, root->shape, sizeof(int64_t) * root->ndim) != 0)
      return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "grad has shape %s but root has shape %s", sg,
                        sr);
    if (grad->dtype != root->dtype)
      return clt__error(CLT_ERR_DTYPE, fn, "grad is %s but root is %s; cast it with clt_cast",
                        clt_dtype_name(grad->dtype), clt_dtype_name(root->dtype));
  }
  clt_tensor *g0 = grad ? clt_tensor_retain(grad) : NULL;
  if (!g0 &&
      (s = clt_ones(root->dtype, root->ndim, root->shape, root->storage->dev, &g0)) != CLT_OK)
    return s;
  bool on = clt__grad_mode_set(false); /* the backward's own operations record nothing */
  clt_grad_node *top = root->ag->fn;
  node_list l = {NULL, 0, 0};
  if (!top) { /* root is a leaf */
    s = accumulate(&root->ag->grad, g0, true);
  } else if ((s = collect(top, &l, fn)) == CLT_OK && (s = check_versions(&l, fn)) == CLT_OK) {
    top->grad = clt_tensor_retain(g0);
    /* Kahn's order: a node runs once every consumer has given it its gradient. */
    node_list ready = {NULL, 0, 0}; /* borrows l's references */
    s = push(&ready, top, fn);
    while (s == CLT_OK && ready.n > 0) {
      clt_grad_node *node = ready.v[--ready.n];
      if (node->retained && node->grad)
        s = accumulate(&node->retained->grad, node->grad, true);
      if (s == CLT_OK && node->grad)
        s = run_node(node, fn);
      clt_tensor_release(node->grad);
      node->grad = NULL;
      for (int k = 0; k < node->n && s == CLT_OK; k++) {
        clt_tensor *x = node->in[k];
        if (needs_grad(x) && x->ag->fn && --x->ag->fn->deps == 0)
          s = push(&ready, x->ag->fn, fn);
      }
    }
    free(ready.v);
  }
  for (int i = 0; i < l.n; i++) { /* scratch left by an error */
    clt_tensor_release(l.v[i]->grad);
    l.v[i]->grad = NULL;
    l.v[i]->listed = false;
  }
  if (s == CLT_OK && !retain)
    for (int i = 0; i < l.n; i++)
      clt__grad_node_free(l.v[i]);
  for (int i = 0; i < l.n; i++)
    clt__grad_node_release(l.v[i]);
  free(l.v);
  clt__grad_mode_set(on);
  clt_tensor_release(g0);
  return s;
}

clt_status clt_backward(clt_tensor *root, clt_tensor *grad) {
  return backward(root, grad, false, "clt_backward");
}

clt_status clt_backward_retain(clt_tensor *root, clt_tensor *grad) {
  return backward(root, grad, true, "clt_backward_retain");
}
