/* SPDX-License-Identifier: MIT */
/* loss.c - softmax, log_softmax, logsumexp and the losses (clt_mse_loss, clt_cross_entropy), made
 * of clt's public operations with grad mode as the caller has it: autograd records their parts,
 * and their gradients are the parts' derivatives (docs/autograd.md). The shift that keeps exp
 * from overflowing is the maximum along the dimension of a detached view of the input, so no
 * gradient flows through it (the result does not depend on it). */
#include "backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensors a function makes on its way, released together at its end, and the first error:
 * each step does nothing once one failed, so a formula is written as one expression. */
#define MAX_PARTS 24
typedef struct parts {
  clt_status s;
  int n;
  clt_tensor *t[MAX_PARTS];
} parts;

/* keep(p, f(..., &r), &r) */
static clt_tensor *keep(parts *p, clt_status s, clt_tensor **rp) {
  if (s != CLT_OK) {
    p->s = s;
    return NULL;
  }
  if (p->n == MAX_PARTS) {
    clt_tensor_release(*rp);
    p->s = clt__error(CLT_ERR_INTERNAL, "clt_loss", "too many temporaries");
    return NULL;
  }
  return p->t[p->n++] = *rp;
}

static void parts_release(parts *p) {
  for (int i = 0; i < p->n; i++)
    clt_tensor_release(p->t[i]);
}

/* Gives *out the part r (one more reference) and releases the parts; returns the status, an
 * error of a part named as fn's. */
static clt_status finish(parts *p, clt_tensor *r, const char *fn, clt_tensor **out) {
  if (p->s == CLT_OK)
    *out = clt_tensor_retain(r);
  parts_release(p);
  if (p->s != CLT_OK)
    return clt__error(p->s, fn, "%s", clt_last_error());
  return CLT_OK;
}

typedef clt_status (*op1)(clt_tensor *, clt_tensor **);
typedef clt_status (*op2)(clt_tensor *, clt_tensor *, clt_tensor **);
typedef clt_status (*op2s)(clt_tensor *, double, clt_tensor **);

static clt_tensor *E1(parts *p, op1 f, clt_tensor *a) {
  clt_tensor *r = NULL;
  return p->s != CLT_OK ? NULL : keep(p, f(a, &r), &r);
}
static clt_tensor *E2(parts *p, op2 f, clt_tensor *a, clt_tensor *b) {
  clt_tensor *r = NULL;
  return p->s != CLT_OK ? NULL : keep(p, f(a, b, &r), &r);
}
static clt_tensor *ES(parts *p, op2s f, clt_tensor *a, double x) {
  clt_tensor *r = NULL;
  return p->s != CLT_OK ? NULL : keep(p, f(a, x, &r), &r);
}
static clt_tensor *W(parts *p, clt_tensor *cond, clt_tensor *a, clt_tensor *b) {
  clt_tensor *r = NULL;
  return p->s != CLT_OK ? NULL : keep(p, clt_where(cond, a, b, &r), &r);
}
/* A 0-d zero of like's dtype on its device. */
static clt_tensor *Z(parts *p, clt_tensor *like) {
  clt_tensor *r = NULL;
  return p->s != CLT_OK ? NULL
                        : keep(p, clt_zeros(like->dtype, 0, NULL, like->storage->dev, &r), &r);
}
/* f(t, dim, keepdim) for the reductions along a dim */
typedef clt_status (*opd)(clt_tensor *, int, int, clt_tensor **);
static clt_tensor *ED(parts *p, opd f, clt_tensor *t, int dim, int keepdim) {
  clt_tensor *r = NULL;
  return p->s != CLT_OK ? NULL : keep(p, f(t, dim, keepdim, &r), &r);
}

/* ---- checks ---------------------------------------------------------------------------------- */

static clt_status check_float(const char *fn, const char *arg, const clt_tensor *t) {
  if (!clt__dtype_is_float(t->dtype))
    return clt__error(CLT_ERR_DTYPE, fn,
                      "%s is %s: only float tensors (f16, bf16, f32, f64) are accepted; cast it "
                      "first (clt_cast)",
                      arg, clt_dtype_name(t->dtype));
  return CLT_OK;
}

/* t a float tensor and dim within -n..n-1 (n = ndim, or 1 for a 0-d tensor); *d the dim as
 * 0..n-1. */
static clt_status check_softmax_args(const char *fn, clt_tensor *t, int dim, int *d) {
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK || (s = check_float(fn, "t", t)) != CLT_OK)
    return s;
  int n = t->ndim ? t->ndim : 1;
  if (dim < -n || dim >= n) {
    char sh[256];
    clt__format_shape(sh, sizeof sh, t->ndim, t->shape);
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "dim %d is out of range for t of shape %s: expected a dim in %d..%d", dim, sh,
                      -n, n - 1);
  }
  *d = dim < 0 ? dim + n : dim;
  return CLT_OK;
}

/* ---- the stable core ------------------------------------------------------------------------- */

/* For t along d (checked): *shifted = t - m and *lse_shift = log(sum(exp(t - m), d)), with m the
 * maximum along d of a detached view of t (0 where that maximum is infinite, so that a row of
 * -inf gives -inf rather than NaN), keepdim; *m the shift itself and *e = exp(t - m). All are
 * parts of p. */
static void stable_core(parts *p, const char *fn, clt_tensor *t, int d, clt_tensor **m,
                        clt_tensor **shifted, clt_tensor **e, clt_tensor **sum_e,
                        clt_tensor **lse_shift) {
  clt_tensor *det = NULL;
  clt_tensor *dt = keep(
      p, clt__tensor_view(t, t->ndim, t->shape, t->strides, clt__elem_offset(t), fn, &det), &det);
  if (t->ndim > 0 && t->shape[d] == 0) { /* no maximum: sums of nothing, logsumexp -inf */
    *m = Z(p, t);
  } else {
    clt_tensor *mx = ED(p, clt_max_dim, dt, d, 1);
    clt_tensor *inf = ES(p, clt_eq_scalar, E1(p, clt_abs, mx), INFINITY);
    *m = W(p, inf, Z(p, mx), mx);
  }
  *shifted = E2(p, clt_sub, t, *m);
  *e = E1(p, clt_exp, *shifted);
  *sum_e = ED(p, clt_sum_dim, *e, d, 1);
  *lse_shift = E1(p, clt_log, *sum_e);
}

clt_status clt_softmax(clt_tensor *t, int dim, clt_tensor **out) {
  static const char fn[] = "clt_softmax";
  int d;
  clt_status s;
  if ((s = check_softmax_args(fn, t, dim, &d)) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  parts p = {CLT_OK, 0, {NULL}};
  clt_tensor *m, *sh, *e, *se, *ls;
  stable_core(&p, fn, t, d, &m, &sh, &e, &se, &ls);
  return finish(&p, E2(&p, clt_div, e, se), fn, out);
}

clt_status clt_log_softmax(clt_tensor *t, int dim, clt_tensor **out) {
  static const char fn[] = "clt_log_softmax";
  int d;
  clt_status s;
  if ((s = check_softmax_args(fn, t, dim, &d)) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  parts p = {CLT_OK, 0, {NULL}};
  clt_tensor *m, *sh, *e, *se, *ls;
  stable_core(&p, fn, t, d, &m, &sh, &e, &se, &ls);
  return finish(&p, E2(&p, clt_sub, sh, ls), fn, out);
}

clt_status clt_logsumexp(clt_tensor *t, int dim, int keepdim, clt_tensor **out) {
  static const char fn[] = "clt_logsumexp";
  int d;
  clt_status s;
  if ((s = check_softmax_args(fn, t, dim, &d)) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  parts p = {CLT_OK, 0, {NULL}};
  clt_tensor *m, *sh, *e, *se, *ls;
  stable_core(&p, fn, t, d, &m, &sh, &e, &se, &ls);
  clt_tensor *r = E2(&p, clt_add, ls, m);
  if (!keepdim && t->ndim > 0) {
    clt_tensor *q = NULL;
    r = p.s != CLT_OK ? NULL : keep(&p, clt_squeeze(r, d, &q), &q);
  }
  return finish(&p, r, fn, out);
}

/* ---- losses ---------------------------------------------------------------------------------- */

clt_status clt_mse_loss(clt_tensor *pred, clt_tensor *target, clt_tensor **out) {
  static const char fn[] = "clt_mse_loss";
  clt_status s;
  if ((s = clt__check_tensor(pred, fn, "pred")) != CLT_OK ||
      (s = clt__check_tensor(target, fn, "target")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (pred->storage->dev != target->storage->dev)
    return clt__device_mismatch(fn, pred->storage->dev, "pred", target->storage->dev, "target");
  if ((s = check_float(fn, "pred", pred)) != CLT_OK ||
      (s = check_float(fn, "target", target)) != CLT_OK)
    return s;
  if (pred->ndim != target->ndim ||
      memcmp(pred->shape, target->shape, sizeof(int64_t) * (size_t)pred->ndim) != 0) {
    char a[256], b[256];
    clt__format_shape(a, sizeof a, pred->ndim, pred->shape);
    clt__format_shape(b, sizeof b, target->ndim, target->shape);
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "pred has shape %s but target has shape %s: they must be equal (expand "
                      "one explicitly with clt_expand if broadcasting is meant)",
                      a, b);
  }
  parts p = {CLT_OK, 0, {NULL}};
  clt_tensor *diff = E2(&p, clt_sub, pred, target);
  return finish(&p, E1(&p, clt_mean, E2(&p, clt_mul, diff, diff)), fn, out);
}

/* The first element of target (i64, 1-D) outside 0..classes-1, read on the host: the message of
 * clt_cross_entropy's error. */
static clt_status target_error(const char *fn, clt_tensor *target, int64_t classes) {
  int64_t n = target->shape[0];
  int64_t *v = malloc(sizeof(int64_t) * (size_t)n);
  if (!v)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  clt_status s = clt_tensor_read(target, v, sizeof(int64_t) * (size_t)n);
  if (s != CLT_OK) {
    free(v);
    return s;
  }
  int64_t i = 0;
  while (i < n && v[i] >= 0 && v[i] < classes)
    i++;
  int64_t bad = i < n ? v[i] : 0;
  free(v);
  return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                    "target[%lld] is %lld, outside the classes 0..%lld of logits (its dim 1 has "
                    "size %lld)",
                    (long long)i, (long long)bad, (long long)(classes - 1), (long long)classes);
}

clt_status clt_cross_entropy(clt_tensor *logits, clt_tensor *target, clt_tensor **out) {
  static const char fn[] = "clt_cross_entropy";
  clt_status s;
  if ((s = clt__check_tensor(logits, fn, "logits")) != CLT_OK ||
      (s = clt__check_tensor(target, fn, "target")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (logits->storage->dev != target->storage->dev)
    return clt__device_mismatch(fn, logits->storage->dev, "logits", target->storage->dev, "target");
  if ((s = check_float(fn, "logits", logits)) != CLT_OK)
    return s;
  if (target->dtype != CLT_I64)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "target is %s: class indices must be i64 (clt_cast(target, CLT_I64, ...))",
                      clt_dtype_name(target->dtype));
  char a[256], b[256];
  clt__format_shape(a, sizeof a, logits->ndim, logits->shape);
  clt__format_shape(b, sizeof b, target->ndim, target->shape);
  if (logits->ndim != 2 || target->ndim != 1 || target->shape[0] != logits->shape[0])
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "logits has shape %s and target %s: expected logits [N, C] and target [N]", a,
                      b);
  int64_t n = logits->shape[0], classes = logits->shape[1];
  if (classes == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "logits of shape %s has no classes", a);
  parts p = {CLT_OK, 0, {NULL}};
  if (n > 0) { /* the targets' range: one reduction and one number read back (a sync) */
    clt_tensor *bad = E2(&p, clt_logical_or, ES(&p, clt_lt_scalar, target, 0),
                         ES(&p, clt_ge_scalar, target, (double)classes));
    clt_tensor *count = E1(&p, clt_sum, bad);
    int64_t c = 0;
    if (p.s == CLT_OK && (p.s = clt_item_i64(count, &c)) == CLT_OK && c > 0)
      p.s = target_error(fn, target, classes);
    if (p.s != CLT_OK) {
      parts_release(&p);
      return p.s;
    }
  }
  clt_tensor *m, *sh, *e, *se, *ls;
  stable_core(&p, fn, logits, 1, &m, &sh, &e, &se, &ls);
  clt_tensor *logp = E2(&p, clt_sub, sh, ls), *ar = NULL, *tu = NULL;
  ar = p.s != CLT_OK
           ? NULL
           : keep(&p, clt_arange(0, (double)classes, 1, CLT_I64, logits->storage->dev, &ar), &ar);
  tu = p.s != CLT_OK ? NULL : keep(&p, clt_unsqueeze(target, 1, &tu), &tu);
  clt_tensor *picked = W(&p, E2(&p, clt_eq, tu, ar), logp, Z(&p, logp));
  return finish(&p, ES(&p, clt_div_scalar, E1(&p, clt_sum, picked), -(double)n), fn, out);
}
