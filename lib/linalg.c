/* SPDX-License-Identifier: MIT */
/* linalg.c - products with torch.matmul's semantics (1-D operands, batches of any rank that
 * broadcast), and dot, mv, outer and addmm: views of the operands around dispatch.c's product of
 * 2-D and 3-D tensors (clt__matmul). Every step is a public operation or that product, so
 * autograd records each one and lazy mode sees ordinary views; a matrix-vector product reaches
 * the backend as an (m, k) x (k, 1) product, which the host and CLBlast paths run as gemv. */
#include "clt-internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Releases every tensor of ts[0..n-1] (NULL ones skipped). */
static void release_all(clt_tensor **ts, int n) {
  for (int i = 0; i < n; i++)
    clt_tensor_release(ts[i]);
}

/* t (2-D or more, its last two dimensions a matrix) as a 3-D (p, rows, cols) tensor whose batch
 * is batch (nb dimensions, p elements in all), expanded where t's own batch broadcasts to it; a
 * view where the strides allow, else a contiguous copy (clt_reshape). 2-D t with no batch stays
 * itself (a new reference). */
static clt_status as_batch(clt_tensor *t, int nb, const int64_t *batch, int64_t p,
                           clt_tensor **out) {
  int own = t->ndim - 2;
  int64_t rows = t->shape[t->ndim - 2], cols = t->shape[t->ndim - 1];
  if (own == 0)
    return clt_reshape(t, 2, (int64_t[]){rows, cols}, out);
  int64_t full[CLT_MAX_DIMS + 2];
  memcpy(full, batch, sizeof(int64_t) * (size_t)nb);
  full[nb] = rows;
  full[nb + 1] = cols;
  bool same = own == nb;
  for (int i = 0; same && i < nb; i++)
    same = t->shape[i] == batch[i];
  clt_tensor *e = NULL;
  clt_status s = same ? CLT_OK : clt_expand(t, nb + 2, full, &e);
  if (s == CLT_OK)
    s = clt_reshape(same ? t : e, 3, (int64_t[]){p, rows, cols}, out);
  clt_tensor_release(e);
  return s;
}

/* torch.matmul for operands of which at least one is 1-D or has more than one batch dimension,
 * or whose batches broadcast; fn names the caller in messages. */
static clt_status matmul_any(clt_tensor *a, clt_tensor *b, const char *fn, clt_tensor **out) {
  if (a->ndim == 0 || b->ndim == 0)
    return clt__matmul_shape_error(fn, a, b,
                                   "both operands must have at least one dimension (multiply "
                                   "by a 0-d tensor with clt_mul)");
  /* a 1-D a is a (1, k) row, a 1-D b a (k, 1) column; their dimension is dropped at the end */
  int64_t m = a->ndim == 1 ? 1 : a->shape[a->ndim - 2], k = a->shape[a->ndim - 1];
  int64_t kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
  int64_t n = b->ndim == 1 ? 1 : b->shape[b->ndim - 1];
  if (k != kb) {
    char why[128];
    snprintf(why, sizeof why, "the inner dimensions differ (%lld and %lld)", (long long)k,
             (long long)kb);
    return clt__matmul_shape_error(fn, a, b, why);
  }
  /* the batch: the leading dimensions of both, broadcast (right-aligned) */
  int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
  int nb = na > nbb ? na : nbb;
  int64_t batch[CLT_MAX_DIMS], p = 1;
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - na), ib = i - (nb - nbb);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char why[160];
      snprintf(why, sizeof why,
               "the batch sizes differ (%lld and %lld in batch dimension %d) and neither is 1",
               (long long)da, (long long)db, i);
      return clt__matmul_shape_error(fn, a, b, why);
    }
    batch[i] = da == 1 ? db : da;
  }
  /* p: the batch's matrices (0 where a batch dimension is 0, however large the others) */
  bool empty = false, over = false;
  for (int i = 0; i < nb; i++)
    empty = empty || batch[i] == 0;
  for (int i = 0; i < nb && !empty; i++)
    over = over || __builtin_mul_overflow(p, batch[i], &p);
  if (empty)
    p = 0;
  int64_t rows;
  if (over || __builtin_mul_overflow(p, m, &rows) || rows > INT32_MAX || n > INT32_MAX ||
      k > INT32_MAX) /* before any copy of a broadcast operand is made */
    return clt__matmul_shape_error(fn, a, b,
                                   "BLAS takes dimensions up to 2^31-1 (batch * m counts as one)");
  int rank = nb + (a->ndim > 1) + (b->ndim > 1);
  int64_t shape[CLT_MAX_DIMS + 2];
  memcpy(shape, batch, sizeof(int64_t) * (size_t)nb);
  int r = nb;
  if (a->ndim > 1)
    shape[r++] = m;
  if (b->ndim > 1)
    shape[r++] = n;
  if (rank > CLT_MAX_DIMS)
    return clt__matmul_shape_error(fn, a, b, "the result would have more than 8 dimensions");
  int64_t mk, kn, ea, eb;
  bool huge = __builtin_mul_overflow(m, k, &mk) || __builtin_mul_overflow(k, n, &kn) ||
              __builtin_mul_overflow(p, mk, &ea) || __builtin_mul_overflow(p, kn, &eb);
  if ((rows == 0 || n == 0) && (huge || !clt__grad_wanted((clt_tensor *[]){a, b}, 2)))
    /* an empty result: nothing to compute, and broadcast operands need not be copied (a batch
     * of 2^40 matrices of 0 rows against a small one would copy the small one 2^40 times):
     * its shape, made directly; where autograd must record it, through the views below
     * unless even their shapes cannot be made */
    return clt_zeros(a->dtype, rank, shape, a->storage->dev, out);

  clt_tensor *t[6] = {NULL}; /* a as a matrix, b as one, their batched forms, the product */
  clt_status s = CLT_OK;
  if (a->ndim == 1)
    s = clt_unsqueeze(a, 0, &t[0]);
  else
    s = clt_reshape(a, a->ndim, a->shape, &t[0]);
  if (s == CLT_OK)
    s = b->ndim == 1 ? clt_unsqueeze(b, 1, &t[1]) : clt_reshape(b, b->ndim, b->shape, &t[1]);
  /* (p, m, k) x (p, k, n), or with a 2-D operand for every batch entry (then dispatch folds the
   * batch into the rows where the strides allow) */
  if (s == CLT_OK && (s = as_batch(t[0], nb, batch, p, &t[2])) == CLT_OK &&
      (s = as_batch(t[1], nb, batch, p, &t[3])) == CLT_OK)
    s = clt__matmul(t[2], t[3], &t[4]);
  if (s == CLT_OK)
    s = clt_reshape(t[4], rank, shape, &t[5]);
  if (s == CLT_OK) {
    *out = t[5];
    t[5] = NULL;
  }
  release_all(t, 6);
  return s;
}

clt_status clt_matmul(clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  static const char fn[] = "clt_matmul";
  clt_status s;
  if ((s = clt__matmul_check(a, b, out, fn)) != CLT_OK)
    return s;
  bool batch_ok = a->ndim < 3 || b->ndim < 3 || a->shape[0] == b->shape[0];
  if (a->ndim >= 2 && a->ndim <= 3 && b->ndim >= 2 && b->ndim <= 3 && batch_ok)
    return clt__matmul(a, b, out);
  return matmul_any(a, b, fn, out);
}

/* The device rule (rule 3) for two operands named na and nb, in dispatch's words. */
static clt_status same_device(const char *fn, const clt_tensor *a, const char *na,
                              const clt_tensor *b, const char *nb) {
  if (a->storage->dev == b->storage->dev)
    return CLT_OK;
  return clt__error(CLT_ERR_DEVICE_MISMATCH, fn,
                    "expected all tensors on the same device, but found %s (%s) and %s (%s); "
                    "copy one with clt_to()",
                    clt_device_name(a->storage->dev), na, clt_device_name(b->storage->dev), nb);
}

/* The shape message of the level-1/2 products: fn takes what, got a and b. */
static clt_status want_shapes(const char *fn, const clt_tensor *a, const clt_tensor *b,
                              const char *what) {
  char sa[256], sb[256];
  clt__format_shape(sa, sizeof sa, a->ndim, a->shape);
  clt__format_shape(sb, sizeof sb, b->ndim, b->shape);
  return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "%s; got %s (argument 1) and %s (argument 2)",
                    what, sa, sb);
}

clt_status clt_dot(clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  static const char fn[] = "clt_dot";
  clt_status s;
  if ((s = clt__matmul_check(a, b, out, fn)) != CLT_OK)
    return s;
  if (a->ndim != 1 || b->ndim != 1 || a->shape[0] != b->shape[0])
    return want_shapes(fn, a, b, "dot takes two 1-D tensors of one length");
  return matmul_any(a, b, fn, out);
}

clt_status clt_mv(clt_tensor *a, clt_tensor *x, clt_tensor **out) {
  static const char fn[] = "clt_mv";
  clt_status s;
  if ((s = clt__matmul_check(a, x, out, fn)) != CLT_OK)
    return s;
  if (a->ndim != 2 || x->ndim != 1 || a->shape[1] != x->shape[0])
    return want_shapes(fn, a, x, "mv takes an (m, k) matrix and a vector of k elements");
  return matmul_any(a, x, fn, out);
}

clt_status clt_outer(clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  static const char fn[] = "clt_outer";
  clt_status s;
  if ((s = clt__check_tensor(a, fn, "a")) != CLT_OK ||
      (s = clt__check_tensor(b, fn, "b")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((s = same_device(fn, a, "argument 1", b, "argument 2")) != CLT_OK)
    return s;
  if (a->ndim != 1 || b->ndim != 1)
    return want_shapes(fn, a, b, "outer takes two 1-D tensors");
  /* (m, 1) * (1, n), broadcast: exact products, any dtypes (promoted as clt_mul promotes) */
  clt_tensor *col = NULL, *row = NULL;
  if ((s = clt_unsqueeze(a, 1, &col)) == CLT_OK && (s = clt_unsqueeze(b, 0, &row)) == CLT_OK)
    s = clt_mul(col, row, out);
  clt_tensor_release(col);
  clt_tensor_release(row);
  return s;
}

clt_status clt_addmm(clt_tensor *c, clt_tensor *a, clt_tensor *b, double beta, double alpha,
                     clt_tensor **out) {
  static const char fn[] = "clt_addmm";
  clt_status s;
  if ((s = clt__check_tensor(c, fn, "c")) != CLT_OK ||
      (s = clt__matmul_check(a, b, out, fn)) != CLT_OK)
    return s;
  if ((s = same_device(fn, c, "c", a, "a and b")) != CLT_OK)
    return s;
  if (c->dtype != a->dtype)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "c is %s and a, b are %s; addmm takes tensors of one dtype: cast c with "
                      "clt_cast first",
                      clt_dtype_name(c->dtype), clt_dtype_name(a->dtype));
  if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0])
    return want_shapes(fn, a, b, "addmm takes an (m, k) and a (k, n) matrix");
  int64_t mn[2] = {a->shape[0], b->shape[1]};
  bool fits = c->ndim <= 2;
  for (int i = 0; fits && i < c->ndim; i++) {
    int64_t want = mn[2 - c->ndim + i];
    fits = c->shape[i] == want || c->shape[i] == 1;
  }
  if (!fits) {
    char sc[256];
    clt__format_shape(sc, sizeof sc, c->ndim, c->shape);
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "c %s does not broadcast to the product's shape [%lld, %lld]", sc,
                      (long long)mn[0], (long long)mn[1]);
  }
  /* beta c + alpha (a b); beta 0 ignores c (its NaNs included), as torch.addmm */
  clt_tensor *t[4] = {NULL};
  s = clt__matmul(a, b, &t[0]);
  if (s == CLT_OK && alpha != 1.0)
    s = clt_mul_scalar(t[0], alpha, &t[1]);
  clt_tensor *prod = t[1] ? t[1] : t[0];
  if (s == CLT_OK && beta == 0.0) {
    *out = prod;
    if (prod == t[1])
      t[1] = NULL;
    else
      t[0] = NULL;
  } else if (s == CLT_OK) {
    clt_tensor *cs = c;
    if (beta != 1.0 && (s = clt_mul_scalar(c, beta, &t[2])) == CLT_OK)
      cs = t[2];
    if (s == CLT_OK && (s = clt_add(cs, prod, &t[3])) == CLT_OK) {
      *out = t[3];
      t[3] = NULL;
    }
  }
  release_all(t, 4);
  return s;
}

/* ---- structure: triangles, diagonals, eye, linspace ---------------------------------------- */

/* The (rows, cols) bool mask of the elements whose column minus row is <= k (lower), >= k
 * (upper) or == k (neither), on dev: arange comparisons, so every device computes it alike. */
static clt_status band_mask(int64_t rows, int64_t cols, int64_t k, int which, clt_device *dev,
                            clt_tensor **out) {
  clt_tensor *t[4] = {NULL};
  clt_status s;
  if ((s = clt_arange(0, (double)rows, 1, CLT_I64, dev, &t[0])) == CLT_OK &&
      (s = clt_unsqueeze(t[0], 1, &t[1])) == CLT_OK &&
      (s = clt_arange(0, (double)cols, 1, CLT_I64, dev, &t[2])) == CLT_OK &&
      (s = clt_sub(t[2], t[1], &t[3])) == CLT_OK)
    s = which < 0 ? clt_le_scalar(t[3], (double)k, out)
                  : which > 0 ? clt_ge_scalar(t[3], (double)k, out) : clt_eq_scalar(t[3], (double)k, out);
  release_all(t, 4);
  return s;
}

/* t where mask is true, else 0 of t's dtype (mask broadcasts to t). */
static clt_status keep_where(clt_tensor *t, clt_tensor *mask, clt_tensor **out) {
  clt_tensor *zero = NULL;
  clt_status s = clt_zeros(t->dtype, 0, NULL, t->storage->dev, &zero);
  if (s == CLT_OK)
    s = clt_where(mask, t, zero, out);
  clt_tensor_release(zero);
  return s;
}

static clt_status triangle(clt_tensor *t, int64_t k, int which, const char *fn,
                           clt_tensor **out) {
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (t->ndim < 2)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "t has %d dimension%s; %s takes a matrix or a batch of them (2 or more)",
                      t->ndim, t->ndim == 1 ? "" : "s", which < 0 ? "tril" : "triu");
  clt_tensor *mask = NULL;
  s = band_mask(t->shape[t->ndim - 2], t->shape[t->ndim - 1], k, which, t->storage->dev, &mask);
  if (s == CLT_OK)
    s = keep_where(t, mask, out);
  clt_tensor_release(mask);
  return s;
}

clt_status clt_tril(clt_tensor *t, int64_t k, clt_tensor **out) {
  return triangle(t, k, -1, "clt_tril", out);
}

clt_status clt_triu(clt_tensor *t, int64_t k, clt_tensor **out) {
  return triangle(t, k, 1, "clt_triu", out);
}

clt_status clt_diag(clt_tensor *t, int64_t k, clt_tensor **out) {
  static const char fn[] = "clt_diag";
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (t->ndim == 2) { /* the k-th diagonal, a copy (torch.diag) */
    clt_tensor *d = NULL;
    if ((s = clt_diagonal(t, k, 0, 1, &d)) == CLT_OK)
      s = clt_clone(d, out);
    clt_tensor_release(d);
    return s;
  }
  if (t->ndim != 1)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "t has %d dimensions; diag takes a vector (to a matrix) or a matrix (to "
                      "its diagonal)",
                      t->ndim);
  int64_t n = t->shape[0], ak = k < 0 ? -k : k, size;
  if (__builtin_add_overflow(n, ak, &size) || size > ((int64_t)1 << 31))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "k = %lld makes a matrix too large",
                      (long long)k);
  /* row[j] = t[j - k] for k >= 0 (t after k zeros), t[j] for k < 0 (t then -k zeros): element
   * (i, i + k) or (i - k, i) of the mask picks t[i] from it */
  clt_tensor *u[4] = {NULL};
  if ((s = clt_zeros(t->dtype, 1, (int64_t[]){ak}, t->storage->dev, &u[0])) == CLT_OK &&
      (s = clt_cat(2, k >= 0 ? (clt_tensor *[]){u[0], t} : (clt_tensor *[]){t, u[0]}, 0, &u[1])) ==
          CLT_OK &&
      (s = band_mask(size, size, k, 0, t->storage->dev, &u[2])) == CLT_OK)
    s = keep_where(u[1], u[2], out);
  release_all(u, 4);
  return s;
}

clt_status clt_trace(clt_tensor *t, clt_tensor **out) {
  static const char fn[] = "clt_trace";
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (t->ndim != 2)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "t has %d dimension%s; trace takes a matrix",
                      t->ndim, t->ndim == 1 ? "" : "s");
  clt_tensor *d = NULL;
  if ((s = clt_diagonal(t, 0, 0, 1, &d)) == CLT_OK)
    s = clt_sum(d, out);
  clt_tensor_release(d);
  return s;
}

/* The checks of a creation function: out, dtype, dev, f64 where the device has it. */
static clt_status check_new(clt_dtype dtype, clt_device *dev, void *out, const char *fn) {
  clt_status s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((s = clt__check_dtype(dtype, fn, "dtype")) != CLT_OK ||
      (s = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return s;
  if (dtype == CLT_F64 && !dev->fp64)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "%s (%s) does not support f64 (no cl_khr_fp64); use f32 there", dev->name,
                      dev->model);
  return CLT_OK;
}

clt_status clt_eye(int64_t n, int64_t m, clt_dtype dtype, clt_device *dev, clt_tensor **out) {
  static const char fn[] = "clt_eye";
  clt_status s;
  if ((s = check_new(dtype, dev, out, fn)) != CLT_OK)
    return s;
  if (m < 0)
    m = n;
  if (n < 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "n = %lld; expected n >= 0", (long long)n);
  if (n > ((int64_t)1 << 31) || m > ((int64_t)1 << 31))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "an eye of %lld x %lld is too large",
                      (long long)n, (long long)m);
  clt_tensor *mask = NULL;
  if ((s = band_mask(n, m, 0, 0, dev, &mask)) == CLT_OK)
    s = clt_cast(mask, dtype, out);
  clt_tensor_release(mask);
  return s;
}

clt_status clt_linspace(double start, double end, int64_t steps, clt_dtype dtype, clt_device *dev,
                        clt_tensor **out) {
  static const char fn[] = "clt_linspace";
  clt_status s;
  if ((s = check_new(dtype, dev, out, fn)) != CLT_OK)
    return s;
  if (steps < 0 || steps > ((int64_t)1 << 31))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "steps = %lld; expected 0..2^31",
                      (long long)steps);
  if (!isfinite(start) || !isfinite(end))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "start = %g and end = %g must be finite",
                      start, end);
  if (steps <= 1) /* [] or [start] */
    return steps == 0 ? clt_zeros(dtype, 1, (int64_t[]){0}, dev, out)
                      : clt_full(dtype, 1, (int64_t[]){1}, start, dev, out);
  /* torch.linspace: start + i * step for i < steps / 2, end - (steps - 1 - i) * step after,
   * step = (end - start) / (steps - 1). For f32, f16 and bf16, PyTorch takes start, end and
   * step in f32 and evaluates each element with one fused multiply-add: here the product of
   * two f32 values is exact in f64 and the sum rounds there, then once more to the dtype (the
   * same bits but for rare double roundings); on a device without f64, in f32 (two roundings).
   * f64 and the integers (which then truncate, as a cast does) compute in f64. */
  bool f32 = dtype == CLT_F32 || dtype == CLT_F16 || dtype == CLT_BF16;
  clt_dtype cd = dev->fp64 ? CLT_F64 : CLT_F32;
  double step = f32 ? (double)(((float)end - (float)start) / (float)(steps - 1))
                    : (end - start) / (double)(steps - 1);
  if (f32) {
    start = (float)start;
    end = (float)end;
  }
  clt_tensor *t[7] = {NULL};
  if ((s = clt_arange(0, (double)steps, 1, cd, dev, &t[0])) == CLT_OK &&
      (s = clt_mul_scalar(t[0], step, &t[1])) == CLT_OK &&
      (s = clt_add_scalar(t[1], start, &t[2])) == CLT_OK &&          /* start + i step */
      (s = clt_add_scalar(t[0], -(double)(steps - 1), &t[3])) == CLT_OK &&
      (s = clt_mul_scalar(t[3], step, &t[4])) == CLT_OK &&
      (s = clt_add_scalar(t[4], end, &t[5])) == CLT_OK &&            /* end - (steps-1-i) step */
      (s = clt_lt_scalar(t[0], (double)(steps / 2), &t[6])) == CLT_OK) {
    clt_tensor *r = NULL;
    if ((s = clt_where(t[6], t[2], t[5], &r)) == CLT_OK && dtype != cd) {
      s = clt_cast(r, dtype, out);
      clt_tensor_release(r);
    } else if (s == CLT_OK) {
      *out = r;
    }
  }
  release_all(t, 7);
  return s;
}
