/* SPDX-License-Identifier: MIT */
/* solve.c - factorizations and solvers, as torch.linalg: solve, solve_triangular, cholesky,
 * lu_factor, lu_solve, qr, eigh, svd, inv, det, slogdet, lstsq (docs/linalg.md).
 *
 * Each routine checks its operands (float dtype f32 or f64, shapes, one device), gathers them
 * into private contiguous host copies (their leading batch dimensions broadcast where torch
 * broadcasts them), runs LAPACK on the copies (lib/host/lapack.c) and gives its results on the
 * operands' device. On an OpenCL device the copies to the host and back are clt's own trips,
 * counted in clt_transfer_stats::internal_count, never refused by the transfer guard: the
 * tensors do not change device. The routine waits for LAPACK, whose verdict (singular, not
 * positive-definite, no convergence) is its status, as PyTorch's checks of `info` do.
 * solve, solve_triangular, cholesky, inv, det and slogdet (its logabsdet) record for autograd
 * (their derivatives are at the end); the others refuse an operand that would record. */
#include "backend.h" /* lib/host/lapack.c's routines */

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void release_all(clt_tensor **ts, int n) {
  for (int i = 0; i < n; i++)
    clt_tensor_release(ts[i]);
}

static clt_status no_grad(const char *fn, clt_tensor *const *ts, int n) {
  if (clt__grad_wanted(ts, n))
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "an operand requires grad, and clt has no derivative of this routine yet; "
                      "pass clt_detach'ed operands or turn grad mode off "
                      "(clt_set_grad_enabled(0))");
  return CLT_OK;
}

/* t: a tensor of f32 or f64 with at least 2 dimensions (square ones where square is set),
 * named arg in messages. */
static clt_status check_matrix(const char *fn, const clt_tensor *t, const char *arg, bool square) {
  clt_status s = clt__check_tensor(t, fn, arg);
  if (s != CLT_OK)
    return s;
  char shape[160];
  clt__format_shape(shape, sizeof shape, t->ndim, t->shape);
  if (t->dtype != CLT_F32 && t->dtype != CLT_F64)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "%s is %s; the linalg routines take f32 and f64 (cast first: "
                      "clt_cast(%s, CLT_F32, &c)%s)",
                      arg, clt_dtype_name(t->dtype), arg,
                      t->dtype == CLT_F16 || t->dtype == CLT_BF16
                          ? "; f16 and bf16 are too narrow for LAPACK, as in PyTorch"
                          : "");
  if (t->ndim < 2)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "%s has shape %s; a matrix (or a batch of them) needs at least 2 "
                      "dimensions",
                      arg, shape);
  int64_t r = t->shape[t->ndim - 2], c = t->shape[t->ndim - 1], rc;
  if (square && r != c)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "%s has shape %s; its matrices must be square (the last two dimensions "
                      "equal)",
                      arg, shape);
  if (r > CLT__LAPACK_MAX || c > CLT__LAPACK_MAX || __builtin_mul_overflow(r, c, &rc) ||
      rc > CLT__LAPACK_MAX)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "%s has shape %s; LAPACK takes matrices of up to 2^31-1 elements", arg,
                      shape);
  return CLT_OK;
}

/* The checks of a routine of one matrix operand A: a matrix (square where asked) and out (named
 * out_name) given. */
static clt_status one_matrix(const char *fn, clt_tensor *A, bool square, const void *out,
                             const char *out_name) {
  clt_status s = check_matrix(fn, A, "A", square);
  if (s != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", out_name);
  return CLT_OK;
}

static clt_status same_device(const char *fn, const clt_tensor *a, const char *wa,
                              const clt_tensor *b, const char *wb) {
  if (a->storage->dev != b->storage->dev)
    return clt__device_mismatch(fn, a->storage->dev, wa, b->storage->dev, wb);
  return CLT_OK;
}

/* The broadcast of the leading (batch) dimensions of a (its first na) and b (its first nb):
 * *nout dimensions into out, *p matrices. */
static clt_status batch_of(const char *fn, const clt_tensor *a, int na, const char *wa,
                           const clt_tensor *b, int nb, const char *wb, int *nout, int64_t *out,
                           int64_t *p) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = i - (n - na), ib = i - (n - nb);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char sa[160], sb[160];
      clt__format_shape(sa, sizeof sa, a->ndim, a->shape);
      clt__format_shape(sb, sizeof sb, b->ndim, b->shape);
      return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                        "the batch dimensions of %s %s and %s %s do not broadcast (%lld and %lld "
                        "in batch dimension %d)",
                        wa, sa, wb, sb, (long long)da, (long long)db, i);
    }
    out[i] = da == 1 ? db : da;
  }
  *nout = n;
  int64_t q = 1;
  for (int i = 0; i < n; i++)
    if (out[i] == 0) { /* an empty batch, however large its other dimensions */
      *p = 0;
      return CLT_OK;
    }
  for (int i = 0; i < n; i++)
    if (__builtin_mul_overflow(q, out[i], &q))
      return clt__error(CLT_ERR_UNSUPPORTED, fn, "the batch has more than 2^63 matrices");
  *p = q;
  return CLT_OK;
}

/* The number of matrices in t's batch (its dimensions but the last two). */
static int64_t matrices(const clt_tensor *t) {
  /* 0 where a batch dimension is 0, however large the others (tensor.c takes such shapes);
   * otherwise the product fits, as the tensor's elements do */
  for (int i = 0; i < t->ndim - 2; i++)
    if (t->shape[i] == 0)
      return 0;
  int64_t p = 1;
  for (int i = 0; i < t->ndim - 2; i++)
    p *= t->shape[i];
  return p;
}

/* Waits until the host tensor *h can be written and gives its data in *ptr; on failure releases
 * *h (NULL). */
static clt_status host_access(clt_tensor **h, const char *fn, void **ptr) {
  clt_status s = clt__storage_host_wait((*h)->storage, true, fn);
  if (s != CLT_OK) {
    clt_tensor_release(*h);
    *h = NULL;
    return s;
  }
  *ptr = clt__host_ptr(*h);
  return CLT_OK;
}

/* A private contiguous copy on the host of t, or of t expanded to the batch (nb dimensions)
 * followed by its last `keep` dimensions; *ptr its data. */
static clt_status stage(clt_tensor *t, int nb, const int64_t *batch, int keep, const char *fn,
                        clt_tensor **h, void **ptr) {
  clt_tensor *e = NULL;
  clt_status s = CLT_OK;
  if (batch) {
    int64_t full[CLT_MAX_DIMS];
    if (nb + keep > CLT_MAX_DIMS)
      return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "the batch has too many dimensions");
    memcpy(full, batch, sizeof(int64_t) * (size_t)nb);
    memcpy(full + nb, t->shape + t->ndim - keep, sizeof(int64_t) * (size_t)keep);
    s = clt_expand(t, nb + keep, full, &e);
  }
  if (s == CLT_OK)
    s = clt__copy_internal(e ? e : t, clt_cpu(), fn, h);
  clt_tensor_release(e);
  return s != CLT_OK ? s : host_access(h, fn, ptr);
}

/* A new host tensor to write results into. */
static clt_status host_new(clt_dtype dt, int ndim, const int64_t *shape, const char *fn,
                           clt_tensor **h, void **ptr) {
  clt_status s = clt__tensor_new(dt, ndim, shape, clt_cpu(), fn, h);
  return s != CLT_OK ? s : host_access(h, fn, ptr);
}

/* *t (on the host) onto dev, as clt's own trip; *t replaced. */
static clt_status to_device(clt_tensor **t, clt_device *dev, const char *fn) {
  if (dev->kind == CLT_DEVICE_HOST)
    return CLT_OK;
  clt_tensor *d;
  clt_status s = clt__copy_internal(*t, dev, fn, &d);
  if (s != CLT_OK)
    return s;
  clt_tensor_release(*t);
  *t = d;
  return CLT_OK;
}

/* " (batch element k)" where the operand has a batch, else "". */
static const char *element(char *buf, size_t size, const clt_tensor *t, int64_t which) {
  if (t->ndim <= 2)
    return "";
  snprintf(buf, size, " (batch element %lld)", (long long)which);
  return buf;
}

/* A status for LAPACK's code (< 0: ours or an argument); > 0 codes are the callers'. */
static clt_status lapack_error(const char *fn, int code, const char *routine) {
  if (code == CLT__LAPACK_NOMEM)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory in LAPACK's %s", routine);
  if (code == CLT__LAPACK_MISSING)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "clt was built without LAPACKE (apt-get install liblapacke-dev, then run "
                      "configure again)");
  return clt__error(CLT_ERR_INTERNAL, fn, "LAPACK's %s refused its argument %d", routine, -code);
}

static clt_status singular(const char *fn, const clt_tensor *a, int64_t which, int info,
                           const char *what) {
  char b[48];
  return clt__error(CLT_ERR_LINALG, fn,
                    "the matrix is singular%s: U[%d,%d] of its LU factorization is exactly zero%s",
                    element(b, sizeof b, a, which), info - 1, info - 1, what);
}

/* Whether the n values of dt at p are all finite. */
static bool finite(clt_dtype dt, int64_t n, const void *p) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(dt == CLT_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i]))
      return false;
  return true;
}

/* Whether the lower triangles (the diagonal included) of the p n x n matrices at a are finite:
 * what eigh reads. */
static bool lower_finite(clt_dtype dt, int64_t p, int64_t n, const void *a) {
  size_t es = clt_dtype_size(dt);
  for (int64_t b = 0; b < p; b++)
    for (int64_t i = 0; i < n; i++)
      if (!finite(dt, i + 1, (const char *)a + (size_t)(b * n * n + i * n) * es))
        return false;
  return true;
}

/* Sets the n values of dt at p to NaN. */
static void fill_nan(clt_dtype dt, int64_t n, void *p) {
  for (int64_t i = 0; i < n; i++)
    if (dt == CLT_F32)
      ((float *)p)[i] = NAN;
    else
      ((double *)p)[i] = NAN;
}

enum { NOT_FINITE = -2000 }; /* no code of LAPACK's or lib/host/lapack.c's */

static clt_status not_finite(const char *fn, const char *what) {
  return clt__error(CLT_ERR_LINALG, fn,
                    "the matrix holds NaN or inf: %s has no meaning for it (the method would "
                    "not converge)",
                    what);
}

/* Whether b is the right-hand side vector of torch.linalg.solve: 1-D, or a's shape without its
 * last dimension. */
static bool vector_rhs(const clt_tensor *a, const clt_tensor *b) {
  if (b->ndim == 1)
    return true;
  return b->ndim == a->ndim - 1 && memcmp(a->shape, b->shape, sizeof(int64_t) * b->ndim) == 0;
}

/* ---- solve, lu_solve, solve_triangular, lstsq ----------------------------------------------- */

static clt_status solve_impl(clt_tensor *A, clt_tensor *B, clt_tensor **X) {
  static const char fn[] = "clt_linalg_solve";
  clt_status s;
  if ((s = check_matrix(fn, A, "A", true)) != CLT_OK ||
      (s = clt__check_tensor(B, fn, "B")) != CLT_OK)
    return s;
  if (!X)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "X is NULL");
  if ((s = same_device(fn, A, "A", B, "B")) != CLT_OK ||
      (s = no_grad(fn, (clt_tensor *[]){A, B}, 2)) != CLT_OK)
    return s;
  if (B->dtype != A->dtype)
    return clt__error(CLT_ERR_DTYPE, fn, "A is %s and B %s; cast one (clt_cast)",
                      clt_dtype_name(A->dtype), clt_dtype_name(B->dtype));
  int64_t n = A->shape[A->ndim - 1];
  bool vec = vector_rhs(A, B);
  int bk = vec ? 1 : 2; /* B's own (not batch) dimensions */
  if (B->ndim < bk || B->shape[B->ndim - bk] != n) {
    char sa[160], sb[160];
    clt__format_shape(sa, sizeof sa, A->ndim, A->shape);
    clt__format_shape(sb, sizeof sb, B->ndim, B->shape);
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "A %s and B %s do not match: B needs %lld rows (or, as a vector, %lld "
                      "elements)",
                      sa, sb, (long long)n, (long long)n);
  }
  int64_t k = vec ? 1 : B->shape[B->ndim - 1], batch[CLT_MAX_DIMS], p, nk;
  if (k > CLT__LAPACK_MAX || __builtin_mul_overflow(n, k, &nk) || nk > CLT__LAPACK_MAX)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "B has %lld columns of %lld; LAPACK takes matrices of up to 2^31-1 "
                      "elements",
                      (long long)k, (long long)n);
  int nb;
  if ((s = batch_of(fn, A, A->ndim - 2, "A", B, B->ndim - bk, "B", &nb, batch, &p)) != CLT_OK)
    return s;
  int64_t shape[CLT_MAX_DIMS + 2];
  memcpy(shape, batch, sizeof(int64_t) * (size_t)nb);
  shape[nb] = n;
  if (!vec)
    shape[nb + 1] = k;
  int rank = nb + bk;
  if (rank > CLT_MAX_DIMS)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "the result would have more than 8 dimensions");
  clt_device *dev = A->storage->dev;
  if (p == 0 || n == 0 || k == 0)
    return clt_zeros(A->dtype, rank, shape, dev, X);
  clt_tensor *t[2] = {NULL};
  void *pa, *px;
  int32_t *piv = malloc(sizeof(int32_t) * (size_t)n);
  void *work = k > 1 ? malloc(clt_dtype_size(A->dtype) * (size_t)(n * k)) : NULL;
  if (!piv || (k > 1 && !work)) {
    free(piv);
    free(work);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  if ((s = stage(A, nb, batch, 2, fn, &t[0], &pa)) == CLT_OK &&
      (s = stage(B, nb, batch, bk, fn, &t[1], &px)) == CLT_OK) {
    int64_t which = 0;
    int info = clt__lapack_solve(A->dtype, p, n, k, pa, piv, px, work, &which);
    if (info > 0)
      s = singular(fn, A, which, info, " (LAPACK factors the transpose, as it lies in memory)");
    else if (info < 0)
      s = lapack_error(fn, info, "getrf/getrs");
  }
  free(piv);
  free(work);
  if (s == CLT_OK && (s = to_device(&t[1], dev, fn)) == CLT_OK) {
    *X = t[1];
    t[1] = NULL;
  }
  release_all(t, 2);
  return s;
}

clt_status clt_linalg_lu_factor(clt_tensor *A, clt_tensor **LU, clt_tensor **pivots) {
  static const char fn[] = "clt_linalg_lu_factor";
  clt_status s;
  if ((s = check_matrix(fn, A, "A", false)) != CLT_OK)
    return s;
  if (!LU || !pivots)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", !LU ? "LU" : "pivots");
  if ((s = no_grad(fn, &A, 1)) != CLT_OK)
    return s;
  int64_t m = A->shape[A->ndim - 2], n = A->shape[A->ndim - 1], k = m < n ? m : n;
  int64_t p = matrices(A), pshape[CLT_MAX_DIMS];
  memcpy(pshape, A->shape, sizeof(int64_t) * (size_t)(A->ndim - 1));
  pshape[A->ndim - 2] = k;
  clt_device *dev = A->storage->dev;
  clt_tensor *t[2] = {NULL};
  void *pa, *pp;
  if (p == 0 || k == 0) {
    if ((s = clt_zeros(A->dtype, A->ndim, A->shape, dev, &t[0])) == CLT_OK &&
        (s = clt_zeros(CLT_I32, A->ndim - 1, pshape, dev, &t[1])) == CLT_OK) {
      *LU = t[0];
      *pivots = t[1];
      return CLT_OK;
    }
    release_all(t, 2);
    return s;
  }
  if ((s = stage(A, 0, NULL, 2, fn, &t[0], &pa)) == CLT_OK &&
      (s = host_new(CLT_I32, A->ndim - 1, pshape, fn, &t[1], &pp)) == CLT_OK) {
    int64_t which = 0;
    int info = clt__lapack_lu(A->dtype, p, m, n, pa, pp, &which);
    if (info > 0)
      s = singular(fn, A, which, info,
                   "; lu_solve would divide by it (clt_linalg_det and slogdet take such "
                   "matrices)");
    else if (info < 0)
      s = lapack_error(fn, info, "getrf");
  }
  if (s == CLT_OK && (s = to_device(&t[0], dev, fn)) == CLT_OK &&
      (s = to_device(&t[1], dev, fn)) == CLT_OK) {
    *LU = t[0];
    *pivots = t[1];
    return CLT_OK;
  }
  release_all(t, 2);
  return s;
}

clt_status clt_linalg_lu_solve(clt_tensor *LU, clt_tensor *pivots, clt_tensor *B, clt_tensor **X) {
  static const char fn[] = "clt_linalg_lu_solve";
  clt_status s;
  if ((s = check_matrix(fn, LU, "LU", true)) != CLT_OK ||
      (s = clt__check_tensor(pivots, fn, "pivots")) != CLT_OK ||
      (s = check_matrix(fn, B, "B", false)) != CLT_OK)
    return s;
  if (!X)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "X is NULL");
  if ((s = same_device(fn, LU, "LU", pivots, "pivots")) != CLT_OK ||
      (s = same_device(fn, LU, "LU", B, "B")) != CLT_OK ||
      (s = no_grad(fn, (clt_tensor *[]){LU, B}, 2)) != CLT_OK)
    return s;
  if (B->dtype != LU->dtype)
    return clt__error(CLT_ERR_DTYPE, fn, "LU is %s and B %s; cast one (clt_cast)",
                      clt_dtype_name(LU->dtype), clt_dtype_name(B->dtype));
  if (pivots->dtype != CLT_I32)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "pivots is %s; it must be i32, as clt_linalg_lu_factor gives it",
                      clt_dtype_name(pivots->dtype));
  int64_t n = LU->shape[LU->ndim - 1];
  char sl[160], sp[160], sb[160];
  clt__format_shape(sl, sizeof sl, LU->ndim, LU->shape);
  clt__format_shape(sp, sizeof sp, pivots->ndim, pivots->shape);
  clt__format_shape(sb, sizeof sb, B->ndim, B->shape);
  if (pivots->ndim != LU->ndim - 1 ||
      memcmp(pivots->shape, LU->shape, sizeof(int64_t) * (size_t)(LU->ndim - 2)) != 0 ||
      pivots->shape[pivots->ndim - 1] != n)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "LU %s and pivots %s do not match: pivots must have LU's batch and %lld "
                      "entries, as clt_linalg_lu_factor gives them",
                      sl, sp, (long long)n);
  if (B->shape[B->ndim - 2] != n)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "LU %s and B %s do not match: B needs %lld rows",
                      sl, sb, (long long)n);
  int64_t k = B->shape[B->ndim - 1], batch[CLT_MAX_DIMS], p;
  int nb;
  if ((s = batch_of(fn, LU, LU->ndim - 2, "LU", B, B->ndim - 2, "B", &nb, batch, &p)) != CLT_OK)
    return s;
  int64_t shape[CLT_MAX_DIMS + 2];
  memcpy(shape, batch, sizeof(int64_t) * (size_t)nb);
  shape[nb] = n;
  shape[nb + 1] = k;
  if (nb + 2 > CLT_MAX_DIMS)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "the result would have more than 8 dimensions");
  clt_device *dev = LU->storage->dev;
  if (p == 0 || n == 0 || k == 0)
    return clt_zeros(LU->dtype, nb + 2, shape, dev, X);
  clt_tensor *t[3] = {NULL};
  void *pl, *pp, *px;
  if ((s = stage(LU, nb, batch, 2, fn, &t[0], &pl)) == CLT_OK &&
      (s = stage(pivots, nb, batch, 1, fn, &t[1], &pp)) == CLT_OK) {
    /* LAPACK swaps rows by the pivots as they are: each must be a row, 1..n */
    const int32_t *pv = pp;
    for (int64_t i = 0; i < p * n && s == CLT_OK; i++)
      if (pv[i] < 1 || pv[i] > n)
        s = clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                       "pivots holds %d (at flat index %lld of the broadcast batch); pivots are "
                       "rows 1..%lld, as clt_linalg_lu_factor gives them",
                       (int)pv[i], (long long)i, (long long)n);
  }
  if (s == CLT_OK && (s = stage(B, nb, batch, 2, fn, &t[2], &px)) == CLT_OK) {
    int info = clt__lapack_lu_solve(LU->dtype, p, n, k, pl, pp, px);
    if (info != 0)
      s = lapack_error(fn, info, "getrs");
  }
  if (s == CLT_OK && (s = to_device(&t[2], dev, fn)) == CLT_OK) {
    *X = t[2];
    t[2] = NULL;
  }
  release_all(t, 3);
  return s;
}

/* Transposes each of p row-major r x c matrices of src into dst (c x r). */
static void transpose(clt_dtype dt, int64_t p, int64_t r, int64_t c, const void *src, void *dst) {
  for (int64_t b = 0; b < p; b++)
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++) {
        int64_t from = b * r * c + i * c + j, to = b * r * c + j * r + i;
        if (dt == CLT_F32)
          ((float *)dst)[to] = ((const float *)src)[from];
        else
          ((double *)dst)[to] = ((const double *)src)[from];
      }
}

static clt_status trsolve_impl(clt_tensor *A, clt_tensor *B, int upper, int left, int unitriangular,
                               clt_tensor **X) {
  static const char fn[] = "clt_linalg_solve_triangular";
  clt_status s;
  if ((s = check_matrix(fn, A, "A", true)) != CLT_OK ||
      (s = check_matrix(fn, B, "B", false)) != CLT_OK)
    return s;
  if (!X)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "X is NULL");
  if ((s = same_device(fn, A, "A", B, "B")) != CLT_OK ||
      (s = no_grad(fn, (clt_tensor *[]){A, B}, 2)) != CLT_OK)
    return s;
  if (B->dtype != A->dtype)
    return clt__error(CLT_ERR_DTYPE, fn, "A is %s and B %s; cast one (clt_cast)",
                      clt_dtype_name(A->dtype), clt_dtype_name(B->dtype));
  int64_t n = A->shape[A->ndim - 1];
  int64_t br = B->shape[B->ndim - 2], bc = B->shape[B->ndim - 1];
  if ((left ? br : bc) != n) {
    char sa[160], sb[160];
    clt__format_shape(sa, sizeof sa, A->ndim, A->shape);
    clt__format_shape(sb, sizeof sb, B->ndim, B->shape);
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "A %s and B %s do not match: with left = %d, B needs %lld %s", sa, sb,
                      left ? 1 : 0, (long long)n, left ? "rows (A X = B)" : "columns (X A = B)");
  }
  int64_t batch[CLT_MAX_DIMS], p;
  int nb;
  if ((s = batch_of(fn, A, A->ndim - 2, "A", B, B->ndim - 2, "B", &nb, batch, &p)) != CLT_OK)
    return s;
  int64_t shape[CLT_MAX_DIMS + 2];
  memcpy(shape, batch, sizeof(int64_t) * (size_t)nb);
  shape[nb] = br;
  shape[nb + 1] = bc;
  if (nb + 2 > CLT_MAX_DIMS)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "the result would have more than 8 dimensions");
  clt_device *dev = A->storage->dev;
  if (p == 0 || br == 0 || bc == 0)
    return clt_zeros(A->dtype, nb + 2, shape, dev, X);
  clt_tensor *t[3] = {NULL};
  void *pa, *pb, *pt = NULL;
  int64_t k = left ? bc : br; /* right-hand sides */
  if ((s = stage(A, nb, batch, 2, fn, &t[0], &pa)) == CLT_OK &&
      (s = stage(B, nb, batch, 2, fn, &t[1], &pb)) == CLT_OK && !left)
    s = host_new(A->dtype, 1, (int64_t[]){p * n * k}, fn, &t[2], &pt); /* B^T */
  if (s == CLT_OK) {
    /* X A = B is A^T X^T = B^T: the right side solves the transposes */
    void *x = left ? pb : pt;
    if (!left)
      transpose(A->dtype, p, br, bc, pb, pt);
    int64_t which = 0;
    int info = clt__lapack_trsolve(A->dtype, p, n, k, upper != 0, !left, unitriangular != 0, pa, x,
                                   &which);
    if (info > 0) {
      char b[48];
      s = clt__error(CLT_ERR_LINALG, fn, "the matrix is singular%s: A[%d,%d] is exactly zero",
                     element(b, sizeof b, A, which), info - 1, info - 1);
    } else if (info < 0) {
      s = lapack_error(fn, info, "trtrs");
    } else if (!left) {
      transpose(A->dtype, p, n, k, pt, pb);
    }
  }
  if (s == CLT_OK && (s = to_device(&t[1], dev, fn)) == CLT_OK) {
    *X = t[1];
    t[1] = NULL;
  }
  release_all(t, 3);
  return s;
}

clt_status clt_linalg_lstsq(clt_tensor *A, clt_tensor *B, clt_tensor **X) {
  static const char fn[] = "clt_linalg_lstsq";
  clt_status s;
  if ((s = check_matrix(fn, A, "A", false)) != CLT_OK ||
      (s = check_matrix(fn, B, "B", false)) != CLT_OK)
    return s;
  if (!X)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "X is NULL");
  if ((s = same_device(fn, A, "A", B, "B")) != CLT_OK ||
      (s = no_grad(fn, (clt_tensor *[]){A, B}, 2)) != CLT_OK)
    return s;
  if (B->dtype != A->dtype)
    return clt__error(CLT_ERR_DTYPE, fn, "A is %s and B %s; cast one (clt_cast)",
                      clt_dtype_name(A->dtype), clt_dtype_name(B->dtype));
  int64_t m = A->shape[A->ndim - 2], n = A->shape[A->ndim - 1], k = B->shape[B->ndim - 1];
  if (B->shape[B->ndim - 2] != m) {
    char sa[160], sb[160];
    clt__format_shape(sa, sizeof sa, A->ndim, A->shape);
    clt__format_shape(sb, sizeof sb, B->ndim, B->shape);
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "A %s and B %s do not match: B needs %lld rows",
                      sa, sb, (long long)m);
  }
  int64_t batch[CLT_MAX_DIMS], p;
  int nb;
  if ((s = batch_of(fn, A, A->ndim - 2, "A", B, B->ndim - 2, "B", &nb, batch, &p)) != CLT_OK)
    return s;
  int64_t shape[CLT_MAX_DIMS + 2];
  memcpy(shape, batch, sizeof(int64_t) * (size_t)nb);
  shape[nb] = n;
  shape[nb + 1] = k;
  if (nb + 2 > CLT_MAX_DIMS)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "the result would have more than 8 dimensions");
  clt_device *dev = A->storage->dev;
  if (p == 0 || n == 0 || k == 0 || m == 0)
    return clt_zeros(A->dtype, nb + 2, shape, dev, X); /* m = 0: no equations, the 0 solution */
  int64_t ld = m > n ? m : n;
  if (ld * k > CLT__LAPACK_MAX)
    return clt__error(CLT_ERR_UNSUPPORTED, fn, "LAPACK takes matrices of up to 2^31-1 elements");
  clt_tensor *t[4] = {NULL};
  void *pa, *pb, *pw, *px;
  if ((s = stage(A, nb, batch, 2, fn, &t[0], &pa)) == CLT_OK &&
      (s = stage(B, nb, batch, 2, fn, &t[1], &pb)) == CLT_OK &&
      (s = host_new(A->dtype, 1, (int64_t[]){p * ld * k}, fn, &t[2], &pw)) == CLT_OK &&
      (s = host_new(A->dtype, nb + 2, shape, fn, &t[3], &px)) == CLT_OK) {
    size_t es = clt_dtype_size(A->dtype);
    memset(pw, 0, (size_t)(p * ld * k) * es);
    for (int64_t b = 0; b < p; b++)
      memcpy((char *)pw + (size_t)(b * ld * k) * es, (char *)pb + (size_t)(b * m * k) * es,
             (size_t)(m * k) * es);
    /* torch.linalg.lstsq's default: singular values below eps * max(m, n) * the largest count
     * as zero */
    double rcond = (A->dtype == CLT_F32 ? FLT_EPSILON : DBL_EPSILON) * (double)ld;
    if (!finite(A->dtype, p * m * n, pa) || !finite(A->dtype, p * ld * k, pw)) {
      fill_nan(A->dtype, p * ld * k, pw); /* NaN in, NaN out (LAPACKE refuses NaN here) */
    } else {
      int info = clt__lapack_lstsq(A->dtype, p, m, n, k, pa, pw, rcond);
      if (info != 0)
        s = lapack_error(fn, info, "gelsy");
    }
    for (int64_t b = 0; b < p && s == CLT_OK; b++)
      memcpy((char *)px + (size_t)(b * n * k) * es, (char *)pw + (size_t)(b * ld * k) * es,
             (size_t)(n * k) * es);
  }
  if (s == CLT_OK && (s = to_device(&t[3], dev, fn)) == CLT_OK) {
    *X = t[3];
    t[3] = NULL;
  }
  release_all(t, 4);
  return s;
}

/* ---- inv, cholesky, det, slogdet ---------------------------------------------------------------
 */

static clt_status inv_impl(clt_tensor *A, clt_tensor **out) {
  static const char fn[] = "clt_linalg_inv";
  clt_status s;
  if ((s = one_matrix(fn, A, true, out, "out")) != CLT_OK)
    return s;
  clt_device *dev = A->storage->dev;
  int64_t n = A->shape[A->ndim - 1], p = matrices(A);
  if (p == 0 || n == 0)
    return clt_zeros(A->dtype, A->ndim, A->shape, dev, out);
  clt_tensor *h = NULL;
  void *pa;
  if ((s = stage(A, 0, NULL, 2, fn, &h, &pa)) == CLT_OK) {
    int64_t which = 0;
    int info = clt__lapack_inv(A->dtype, p, n, pa, &which);
    if (info > 0)
      s = singular(fn, A, which, info, " (LAPACK factors the transpose, as it lies in memory)");
    else if (info < 0)
      s = lapack_error(fn, info, "getri");
  }
  if (s == CLT_OK && (s = to_device(&h, dev, fn)) == CLT_OK) {
    *out = h;
    return CLT_OK;
  }
  clt_tensor_release(h);
  return s;
}

static clt_status not_positive_definite(const char *fn, const clt_tensor *A, int64_t which,
                                        int64_t order) {
  char b[48];
  return clt__error(CLT_ERR_LINALG, fn,
                    "the matrix is not positive-definite%s: its leading minor of order %lld is "
                    "not positive-definite",
                    element(b, sizeof b, A, which), (long long)order);
}

/* ---- the hybrid path of GPUs: panels on the host, updates on the device ------------------ */

/* The block size of the hybrid path: CLT_LINALG_BLOCK, else 256. */
static int64_t hybrid_block(void) {
  const char *env = getenv("CLT_LINALG_BLOCK");
  char *end;
  long long v = env && *env ? strtoll(env, &end, 10) : 0;
  return env && *env && *end == '\0' && v > 0 && v <= 65536 ? (int64_t)v : 256;
}

/* Whether a factorization of order n on dev takes the hybrid path: CLT_LINALG=hybrid forces it
 * on every device but the host, CLT_LINALG=host refuses it, and auto (or unset) takes it on
 * GPUs from n = 4 blocks, where the whole matrix's trips outweigh the panels'. */
static clt_status hybrid_wanted(const char *fn, const clt_device *dev, int64_t n, int64_t nb,
                                bool *hybrid) {
  const char *env = getenv("CLT_LINALG");
  if (!env || !*env || strcmp(env, "auto") == 0)
    *hybrid = dev->kind == CLT_DEVICE_CL_GPU && n >= 4 * nb;
  else if (strcmp(env, "hybrid") == 0)
    *hybrid = dev->kind != CLT_DEVICE_HOST;
  else if (strcmp(env, "host") == 0)
    *hybrid = false;
  else
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "CLT_LINALG is '%s'; expected auto, host or hybrid", env);
  return CLT_OK;
}

/* The rows [r0, r0 + nr) and columns [c0, c0 + nc) of W's matrices: a view. */
static clt_status block_of(clt_tensor *W, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                           clt_tensor **out) {
  clt_tensor *rows;
  clt_status s = clt_narrow(W, W->ndim - 2, r0, nr, &rows);
  if (s != CLT_OK)
    return s;
  s = clt_narrow(rows, W->ndim - 1, c0, nc, out);
  clt_tensor_release(rows);
  return s;
}

/* A22 -= L21 L21^T on A22's lower block triangle only (half a gemm's work, as syrk does): for
 * each block column j of A22 (of width w <= nb), its rows from j on, less L21's rows from j times
 * the transpose of its rows j..j+w. The blocks above are left stale: no later step reads them,
 * and each step zeroes the row of blocks right of its diagonal block. A22 starts at (k0, k0). */
static clt_status lower_update(clt_tensor *W, clt_tensor *L21, int64_t k0, int64_t r, int64_t nb) {
  int nd = W->ndim;
  clt_status s = CLT_OK;
  for (int64_t j = 0; j < r && s == CLT_OK; j += nb) {
    int64_t w = r - j < nb ? r - j : nb;
    clt_tensor *below = NULL, *panel = NULL, *panel_t = NULL, *S = NULL, *blk = NULL;
    if ((s = clt_narrow(L21, nd - 2, j, r - j, &below)) == CLT_OK &&
        (s = clt_narrow(L21, nd - 2, j, w, &panel)) == CLT_OK &&
        (s = clt_transpose(panel, nd - 2, nd - 1, &panel_t)) == CLT_OK &&
        (s = clt_matmul(below, panel_t, &S)) == CLT_OK &&
        (s = block_of(W, k0 + j, r - j, k0 + j, w, &blk)) == CLT_OK)
      s = clt_sub_(blk, S);
    clt_tensor *all[] = {below, panel, panel_t, S, blk};
    release_all(all, 5);
  }
  return s;
}

/* One step of the right-looking blocked Cholesky factorization (lower) of W in place, at
 * column k with blocks of b, r rows below: the diagonal block A11 comes to the host, where
 * LAPACK's potrf factors it (L11) and trtrs gives T = L11^-T; both go back (clt's own trips,
 * 2 b^2 elements each way per matrix); the device computes the panel L21 = A21 T and the
 * trailing update A22 -= L21 L21^T (lower_update) with clt_matmul (CLBlast's gemm on GPUs),
 * blocks of nb. The step's device work is enqueued, not waited for: the next step's read of its
 * diagonal block waits for exactly what it needs. */
static clt_status cholesky_step(const char *fn, clt_tensor *A, clt_tensor *W, int64_t k, int64_t b,
                                int64_t r, int64_t nb) {
  clt_device *dev = W->storage->dev;
  int nd = W->ndim;
  int64_t p = matrices(W);
  clt_tensor *A11 = NULL, *h = NULL, *t = NULL, *A21 = NULL, *L21 = NULL, *A12 = NULL;
  void *pa, *pt;
  clt_status s = block_of(W, k, b, k, b, &A11);
  if (s == CLT_OK)
    s = stage(A11, 0, NULL, 2, fn, &h, &pa);
  if (s == CLT_OK) {
    int64_t which = 0;
    int info = clt__lapack_cholesky(W->dtype, p, b, false, pa, &which);
    if (info > 0)
      s = not_positive_definite(fn, A, which, k + info);
    else if (info < 0)
      s = lapack_error(fn, info, "potrf");
  }
  if (s == CLT_OK && r > 0) {
    int64_t shape[CLT_MAX_DIMS];
    memcpy(shape, W->shape, sizeof(int64_t) * (size_t)nd);
    shape[nd - 2] = shape[nd - 1] = b;
    if ((s = host_new(W->dtype, nd, shape, fn, &t, &pt)) == CLT_OK) {
      size_t es = clt_dtype_size(W->dtype);
      memset(pt, 0, (size_t)(p * b * b) * es);
      for (int64_t m = 0; m < p; m++)
        for (int64_t i = 0; i < b; i++) {
          char *e = (char *)pt + (size_t)((m * b + i) * b + i) * es;
          if (W->dtype == CLT_F32)
            *(float *)e = 1.0f;
          else
            *(double *)e = 1.0;
        }
      int64_t which = 0;
      int info = clt__lapack_trsolve(W->dtype, p, b, b, false, true, false, pa, pt, &which);
      if (info < 0)
        s = lapack_error(fn, info, "trtrs");
      else if (info > 0) /* L11's diagonal is positive: not expected */
        s = clt__error(CLT_ERR_INTERNAL, fn, "trtrs found the factor of the block at %lld singular",
                       (long long)k);
    }
    if (s == CLT_OK)
      s = to_device(&t, dev, fn);
  }
  if (s == CLT_OK && (s = to_device(&h, dev, fn)) == CLT_OK)
    s = clt_copy(A11, h);
  if (s == CLT_OK && r > 0) {
    if ((s = block_of(W, k + b, r, k, b, &A21)) == CLT_OK &&
        (s = clt_matmul(A21, t, &L21)) == CLT_OK && (s = clt_copy(A21, L21)) == CLT_OK &&
        (s = lower_update(W, L21, k + b, r, nb)) == CLT_OK &&
        (s = block_of(W, k, b, k + b, r, &A12)) == CLT_OK)
      s = clt_fill_(A12, 0.0); /* the factor is lower: zeros where A's upper triangle was */
  }
  clt_tensor *all[] = {A11, h, t, A21, L21, A12};
  release_all(all, 6);
  return s;
}

/* cholesky by blocks of nb on A's device (n > 0, at least one matrix). The upper factor reads
 * A's upper triangle, which is the lower one of A^T: it is the lower factor of A^T, transposed. */
static clt_status cholesky_hybrid(const char *fn, clt_tensor *A, int64_t nb, int upper,
                                  clt_tensor **L) {
  int64_t n = A->shape[A->ndim - 1];
  clt_tensor *low = NULL, *at = NULL;
  clt_status s = CLT_OK;
  if (upper)
    s = clt_transpose(A, A->ndim - 2, A->ndim - 1, &at);
  if (s == CLT_OK)
    s = clt_clone(at ? at : A, &low); /* contiguous, W of the steps */
  clt_tensor_release(at);
  for (int64_t k = 0; s == CLT_OK && k < n; k += nb) {
    int64_t b = n - k < nb ? n - k : nb;
    s = cholesky_step(fn, A, low, k, b, n - k - b, nb);
  }
  if (s == CLT_OK && upper) {
    clt_tensor *tr = NULL;
    if ((s = clt_transpose(low, A->ndim - 2, A->ndim - 1, &tr)) == CLT_OK) {
      clt_tensor_release(low);
      low = NULL;
      s = clt_contiguous(tr, &low);
      clt_tensor_release(tr);
    }
  }
  if (s == CLT_OK) {
    *L = low;
    return CLT_OK;
  }
  clt_tensor_release(low);
  return s;
}

static clt_status cholesky_impl(clt_tensor *A, int upper, clt_tensor **L) {
  static const char fn[] = "clt_linalg_cholesky";
  clt_status s;
  if ((s = one_matrix(fn, A, true, L, "L")) != CLT_OK)
    return s;
  clt_device *dev = A->storage->dev;
  int64_t n = A->shape[A->ndim - 1], p = matrices(A), nb = hybrid_block();
  if (p == 0 || n == 0)
    return clt_zeros(A->dtype, A->ndim, A->shape, dev, L);
  bool hybrid = false;
  if ((s = hybrid_wanted(fn, dev, n, nb, &hybrid)) != CLT_OK)
    return s;
  if (hybrid) {
    s = cholesky_hybrid(fn, A, nb, upper, L);
    if (s != CLT_ERR_LINALG)
      return s;
    /* Not positive-definite: the whole matrix through LAPACK names the failure as it does
     * elsewhere (the first batch element's first minor; the blocks go across the batch) */
  }
  clt_tensor *h = NULL;
  void *pa;
  if ((s = stage(A, 0, NULL, 2, fn, &h, &pa)) == CLT_OK) {
    int64_t which = 0;
    int info = clt__lapack_cholesky(A->dtype, p, n, upper != 0, pa, &which);
    if (info > 0)
      s = not_positive_definite(fn, A, which, info);
    else if (info < 0)
      s = lapack_error(fn, info, "potrf");
  }
  if (s == CLT_OK && (s = to_device(&h, dev, fn)) == CLT_OK) {
    *L = h;
    return CLT_OK;
  }
  clt_tensor_release(h);
  return s;
}

/* The LU factorization of A's matrices (square), then for each: the sign (+1, -1, or 0 when
 * singular) and log |det| (-inf when singular), in f64. */
static clt_status lu_det(const char *fn, clt_tensor *A, int64_t p, int64_t n, double *sign,
                         double *logabs, double *det) {
  clt_tensor *h = NULL;
  void *pa;
  clt_status s = stage(A, 0, NULL, 2, fn, &h, &pa);
  int32_t *piv = s == CLT_OK ? malloc(sizeof(int32_t) * (size_t)(p * n)) : NULL;
  if (s == CLT_OK && !piv)
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  if (s == CLT_OK) {
    int64_t which = 0;
    int info = clt__lapack_lu(A->dtype, p, n, n, pa, piv, &which);
    if (info < 0)
      s = lapack_error(fn, info, "getrf");
    for (int64_t b = 0; b < p && s == CLT_OK; b++) {
      double sg = 1, la = 0, d = 1;
      for (int64_t i = 0; i < n; i++) {
        int64_t at = b * n * n + i * n + i;
        double u = A->dtype == CLT_F32 ? ((float *)pa)[at] : ((double *)pa)[at];
        if (isnan(u) || isnan(sg))
          sg = NAN; /* NaN wins, then 0: once there, no sign flips them (no -0) */
        else if (u == 0 || sg == 0)
          sg = 0;
        else if ((piv[b * n + i] != i + 1) != (u < 0))
          sg = -sg;
        la += log(fabs(u));
        d *= piv[b * n + i] != i + 1 ? -u : u;
      }
      sign[b] = sg;
      logabs[b] = la;
      det[b] = d;
    }
  }
  free(piv);
  clt_tensor_release(h);
  return s;
}

/* A new tensor of A's batch shape, of dtype dt, with values v[0..p-1], on A's device. */
static clt_status batch_values(const char *fn, clt_tensor *A, clt_dtype dt, const double *v,
                               clt_tensor **out) {
  clt_tensor *h;
  void *ph;
  clt_status s = host_new(dt, A->ndim - 2, A->shape, fn, &h, &ph);
  if (s != CLT_OK)
    return s;
  int64_t p = matrices(A);
  for (int64_t b = 0; b < p; b++)
    if (dt == CLT_F32)
      ((float *)ph)[b] = (float)v[b];
    else
      ((double *)ph)[b] = v[b];
  if ((s = to_device(&h, A->storage->dev, fn)) != CLT_OK) {
    clt_tensor_release(h);
    return s;
  }
  *out = h;
  return CLT_OK;
}

static clt_status det_common(const char *fn, clt_tensor *A, clt_tensor **o1, clt_tensor **o2) {
  clt_status s;
  if ((s = check_matrix(fn, A, "A", true)) != CLT_OK)
    return s;
  if ((s = no_grad(fn, &A, 1)) != CLT_OK)
    return s;
  int64_t n = A->shape[A->ndim - 1], p = matrices(A);
  size_t q = (size_t)(p ? p : 1);
  double *v = malloc(sizeof(double) * 3 * q);
  if (!v)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  double *sign = v, *logabs = v + q, *det = v + 2 * q;
  for (int64_t b = 0; b < p; b++)
    sign[b] = 1, logabs[b] = 0, det[b] = 1; /* 0 x 0: det 1 */
  if (n > 0 && p > 0)
    s = lu_det(fn, A, p, n, sign, logabs, det);
  clt_tensor *t[2] = {NULL};
  if (s == CLT_OK && !o2) { /* det: the product of U's diagonal, its sign by the pivots */
    s = batch_values(fn, A, A->dtype, det, &t[0]);
  } else if (s == CLT_OK) {
    if ((s = batch_values(fn, A, A->dtype, sign, &t[0])) == CLT_OK)
      s = batch_values(fn, A, A->dtype, logabs, &t[1]);
  }
  free(v);
  if (s != CLT_OK) {
    release_all(t, 2);
    return s;
  }
  *o1 = t[0];
  if (o2)
    *o2 = t[1];
  return CLT_OK;
}

static clt_status det_impl(clt_tensor *A, clt_tensor **out) {
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_linalg_det", "out is NULL");
  return det_common("clt_linalg_det", A, out, NULL);
}

static clt_status slogdet_impl(clt_tensor *A, clt_tensor **sign, clt_tensor **logabsdet) {
  if (!sign || !logabsdet)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_linalg_slogdet", "%s is NULL",
                      !sign ? "sign" : "logabsdet");
  return det_common("clt_linalg_slogdet", A, sign, logabsdet);
}

/* ---- qr, eigh, svd ------------------------------------------------------------------------------
 */

clt_status clt_linalg_qr(clt_tensor *A, clt_tensor **Q, clt_tensor **R) {
  static const char fn[] = "clt_linalg_qr";
  clt_status s;
  if ((s = check_matrix(fn, A, "A", false)) != CLT_OK)
    return s;
  if (!Q || !R)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", !Q ? "Q" : "R");
  if ((s = no_grad(fn, &A, 1)) != CLT_OK)
    return s;
  int nd = A->ndim;
  int64_t m = A->shape[nd - 2], n = A->shape[nd - 1], k = m < n ? m : n, p = matrices(A);
  int64_t qs[CLT_MAX_DIMS], rs[CLT_MAX_DIMS];
  memcpy(qs, A->shape, sizeof(int64_t) * (size_t)nd);
  memcpy(rs, A->shape, sizeof(int64_t) * (size_t)nd);
  qs[nd - 1] = k;
  rs[nd - 2] = k;
  clt_device *dev = A->storage->dev;
  clt_tensor *t[3] = {NULL};
  void *pa, *pq, *pr;
  if (p == 0 || k == 0) {
    if ((s = clt_zeros(A->dtype, nd, qs, dev, &t[0])) == CLT_OK &&
        (s = clt_zeros(A->dtype, nd, rs, dev, &t[1])) == CLT_OK) {
      *Q = t[0];
      *R = t[1];
      return CLT_OK;
    }
    release_all(t, 3);
    return s;
  }
  if ((s = stage(A, 0, NULL, 2, fn, &t[2], &pa)) == CLT_OK &&
      (s = host_new(A->dtype, nd, qs, fn, &t[0], &pq)) == CLT_OK &&
      (s = host_new(A->dtype, nd, rs, fn, &t[1], &pr)) == CLT_OK) {
    if (!finite(A->dtype, p * m * n, pa)) { /* NaN in, NaN out (LAPACKE refuses NaN here) */
      fill_nan(A->dtype, p * m * k, pq);
      fill_nan(A->dtype, p * k * n, pr);
    } else {
      int info = clt__lapack_qr(A->dtype, p, m, n, pa, pq, pr);
      if (info != 0)
        s = lapack_error(fn, info, "geqrf/orgqr");
    }
  }
  if (s == CLT_OK && (s = to_device(&t[0], dev, fn)) == CLT_OK &&
      (s = to_device(&t[1], dev, fn)) == CLT_OK) {
    *Q = t[0];
    *R = t[1];
    t[0] = t[1] = NULL;
  }
  release_all(t, 3);
  return s;
}

clt_status clt_linalg_eigh(clt_tensor *A, clt_tensor **w, clt_tensor **V) {
  static const char fn[] = "clt_linalg_eigh";
  clt_status s;
  if ((s = check_matrix(fn, A, "A", true)) != CLT_OK)
    return s;
  if (!w)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "w is NULL");
  if ((s = no_grad(fn, &A, 1)) != CLT_OK)
    return s;
  int nd = A->ndim;
  int64_t n = A->shape[nd - 1], p = matrices(A);
  clt_device *dev = A->storage->dev;
  clt_tensor *t[2] = {NULL};
  void *pa, *pw;
  if (p == 0 || n == 0) {
    if ((s = clt_zeros(A->dtype, nd - 1, A->shape, dev, &t[0])) == CLT_OK &&
        (!V || (s = clt_zeros(A->dtype, nd, A->shape, dev, &t[1])) == CLT_OK)) {
      *w = t[0];
      if (V)
        *V = t[1];
      return CLT_OK;
    }
    release_all(t, 2);
    return s;
  }
  if ((s = stage(A, 0, NULL, 2, fn, &t[1], &pa)) == CLT_OK &&
      (s = host_new(A->dtype, nd - 1, A->shape, fn, &t[0], &pw)) == CLT_OK) {
    int64_t which = 0;
    int info = lower_finite(A->dtype, p, n, pa)
                   ? clt__lapack_eigh(A->dtype, p, n, V != NULL, pa, pw, &which)
                   : NOT_FINITE;
    if (info == NOT_FINITE) {
      s = not_finite(fn, "an eigendecomposition");
    } else if (info > 0) {
      char b[48];
      s = clt__error(CLT_ERR_LINALG, fn,
                     "the eigenvalue algorithm did not converge%s (LAPACK's syevd: info %d)",
                     element(b, sizeof b, A, which), info);
    } else if (info < 0) {
      s = lapack_error(fn, info, "syevd");
    }
  }
  if (s == CLT_OK && (s = to_device(&t[0], dev, fn)) == CLT_OK &&
      (!V || (s = to_device(&t[1], dev, fn)) == CLT_OK)) {
    *w = t[0];
    t[0] = NULL;
    if (V) {
      *V = t[1];
      t[1] = NULL;
    }
  }
  release_all(t, 2);
  return s;
}

clt_status clt_linalg_svd(clt_tensor *A, int full_matrices, clt_tensor **U, clt_tensor **S,
                          clt_tensor **Vh) {
  static const char fn[] = "clt_linalg_svd";
  clt_status s;
  if ((s = check_matrix(fn, A, "A", false)) != CLT_OK)
    return s;
  if (!S)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "S is NULL");
  if ((U == NULL) != (Vh == NULL))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "U and Vh must both be given (the vectors) or both be NULL (the values "
                      "only)");
  if ((s = no_grad(fn, &A, 1)) != CLT_OK)
    return s;
  int nd = A->ndim;
  int64_t m = A->shape[nd - 2], n = A->shape[nd - 1], k = m < n ? m : n, p = matrices(A);
  bool full = full_matrices != 0, vec = U != NULL;
  int64_t us[CLT_MAX_DIMS], ss[CLT_MAX_DIMS], vs[CLT_MAX_DIMS];
  memcpy(us, A->shape, sizeof(int64_t) * (size_t)nd);
  memcpy(vs, A->shape, sizeof(int64_t) * (size_t)nd);
  memcpy(ss, A->shape, sizeof(int64_t) * (size_t)(nd - 1));
  us[nd - 1] = full ? m : k;
  vs[nd - 2] = full ? n : k;
  ss[nd - 2] = k;
  if (vec &&
      (us[nd - 2] * us[nd - 1] > CLT__LAPACK_MAX || vs[nd - 2] * vs[nd - 1] > CLT__LAPACK_MAX))
    return clt__error(CLT_ERR_UNSUPPORTED, fn, "LAPACK takes matrices of up to 2^31-1 elements");
  clt_device *dev = A->storage->dev;
  clt_tensor *t[4] = {NULL}; /* U, S, Vh, A's copy */
  void *pa, *pu = NULL, *ps, *pv = NULL;
  if (p == 0 || k == 0) {
    /* no values; the vectors: with full_matrices, identities of order m (U) and n (Vh) over
     * the batch, as torch gives them; reduced, empty */
    s = clt_zeros(A->dtype, nd - 1, ss, dev, &t[1]);
    for (int i = 0; i < 2 && vec && s == CLT_OK; i++) {
      int64_t *shape = i == 0 ? us : vs, o = shape[nd - 1];
      clt_tensor **dst = &t[i == 0 ? 0 : 2];
      if (!full || o == 0 || p == 0) {
        s = clt_zeros(A->dtype, nd, shape, dev, dst);
        continue;
      }
      clt_tensor *e = NULL, *x = NULL;
      if ((s = clt_eye(o, o, A->dtype, dev, &e)) == CLT_OK &&
          (s = clt_expand(e, nd, shape, &x)) == CLT_OK)
        s = clt_contiguous(x, dst);
      clt_tensor_release(x);
      clt_tensor_release(e);
    }
    if (s == CLT_OK) {
      *S = t[1];
      if (vec) {
        *U = t[0];
        *Vh = t[2];
      }
      return CLT_OK;
    }
    release_all(t, 4);
    return s;
  }
  if ((s = stage(A, 0, NULL, 2, fn, &t[3], &pa)) == CLT_OK &&
      (s = host_new(A->dtype, nd - 1, ss, fn, &t[1], &ps)) == CLT_OK && vec &&
      (s = host_new(A->dtype, nd, us, fn, &t[0], &pu)) == CLT_OK)
    s = host_new(A->dtype, nd, vs, fn, &t[2], &pv);
  if (s == CLT_OK) {
    int64_t which = 0;
    int info = finite(A->dtype, p * m * n, pa)
                   ? clt__lapack_svd(A->dtype, p, m, n, full, pa, pu, ps, pv, &which)
                   : NOT_FINITE;
    if (info == NOT_FINITE) {
      s = not_finite(fn, "a singular value decomposition");
    } else if (info > 0) {
      char b[48];
      s = clt__error(CLT_ERR_LINALG, fn, "the SVD did not converge%s (NaN or inf in the matrix?)",
                     element(b, sizeof b, A, which));
    } else if (info < 0) {
      s = lapack_error(fn, info, "gesdd");
    }
  }
  for (int i = 0; i < 3 && s == CLT_OK; i++)
    if (t[i])
      s = to_device(&t[i], dev, fn);
  if (s == CLT_OK) {
    *S = t[1];
    t[1] = NULL;
    if (vec) {
      *U = t[0];
      *Vh = t[2];
      t[0] = t[2] = NULL;
    }
  }
  release_all(t, 4);
  return s;
}

/* ---- norm, cond, matrix_rank, pinv: composed of the operations above and the public ones ------
 */

/* The singular values S (*, k) of A (f32 or f64, checked by clt_linalg_svd), the message
 * naming fn. */
static clt_status svd_for(const char *fn, clt_tensor *A, clt_tensor **U, clt_tensor **S,
                          clt_tensor **Vh) {
  clt_status s = clt_linalg_svd(A, 0, U, S, Vh);
  if (s != CLT_OK) /* the message names clt_linalg_svd: say who called it */
    return clt__error(clt_last_status(), fn, "%s", clt_last_error());
  return CLT_OK;
}

clt_status clt_linalg_norm(clt_tensor *A, const char *ord, clt_tensor **out) {
  static const char fn[] = "clt_linalg_norm";
  clt_status s = clt__check_tensor(A, fn, "A");
  if (s != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (A->dtype != CLT_F32 && A->dtype != CLT_F64 && A->dtype != CLT_F16 && A->dtype != CLT_BF16)
    return clt__error(CLT_ERR_DTYPE, fn, "A is %s; norms take float dtypes (cast first: clt_cast)",
                      clt_dtype_name(A->dtype));
  enum { FRO, NUC, ONE, TWO, INF, DEFAULT } o;
  if (!ord)
    o = DEFAULT;
  else if (strcmp(ord, "fro") == 0)
    o = FRO;
  else if (strcmp(ord, "nuc") == 0)
    o = NUC;
  else if (strcmp(ord, "1") == 0)
    o = ONE;
  else if (strcmp(ord, "2") == 0)
    o = TWO;
  else if (strcmp(ord, "inf") == 0)
    o = INF;
  else
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "ord is '%s'; expected \"fro\", \"nuc\", \"1\", \"2\", \"inf\" or NULL (the "
                      "2-norm of all elements)",
                      ord);
  bool vector = A->ndim == 1 || o == DEFAULT;
  if (!vector && A->ndim < 2)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "A is %d-D; a matrix norm (ord \"%s\") needs a matrix (or a batch of them), "
                      "a vector norm a 1-D tensor",
                      A->ndim, ord);
  if (vector && (o == FRO || o == NUC))
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "ord \"%s\" is a matrix norm, and A is 1-D (the vector norms: \"1\", \"2\", "
                      "\"inf\")",
                      ord);
  clt_tensor *t[6] = {NULL};
  int last = A->ndim - 1;
  if (vector) { /* over all elements (1-D A, or ord NULL: torch's flattened 2-norm) */
    if ((s = clt_reshape(A, 1, (int64_t[]){A->numel}, &t[0])) != CLT_OK)
      return s;
    if (o == ONE)
      s = clt_abs(t[0], &t[1]) == CLT_OK ? clt_sum(t[1], out) : clt_last_status();
    else if (o == INF)
      s = A->numel == 0                    ? clt_zeros(A->dtype, 0, NULL, A->storage->dev, out)
          : clt_abs(t[0], &t[1]) == CLT_OK ? clt_max(t[1], out)
                                           : clt_last_status();
    else if ((s = clt_mul(t[0], t[0], &t[1])) == CLT_OK && (s = clt_sum(t[1], &t[2])) == CLT_OK)
      s = clt_sqrt(t[2], out);
    release_all(t, 6);
    return s;
  }
  int64_t m = A->shape[last - 1], n = A->shape[last];
  switch (o) {
  case FRO:
    if ((s = clt_mul(A, A, &t[0])) == CLT_OK && (s = clt_sum_dim(t[0], last, 0, &t[1])) == CLT_OK &&
        (s = clt_sum_dim(t[1], last - 1, 0, &t[2])) == CLT_OK)
      s = clt_sqrt(t[2], out);
    break;
  case ONE: /* the largest column sum of |A| */
  case INF: /* the largest row sum */
    if ((o == ONE ? n : m) == 0 || (o == ONE ? m : n) == 0) {
      int64_t shape[CLT_MAX_DIMS];
      memcpy(shape, A->shape, sizeof(int64_t) * (size_t)(A->ndim - 2));
      s = clt_zeros(A->dtype, A->ndim - 2, shape, A->storage->dev, out);
      break;
    }
    if ((s = clt_abs(A, &t[0])) == CLT_OK &&
        (s = clt_sum_dim(t[0], o == ONE ? last - 1 : last, 0, &t[1])) == CLT_OK)
      s = clt_max_dim(t[1], last - 1, 0, out);
    break;
  default: /* "2": the largest singular value; "nuc": their sum */
    if (A->dtype != CLT_F32 && A->dtype != CLT_F64)
      return clt__error(CLT_ERR_DTYPE, fn,
                        "A is %s; the \"%s\" norm takes its singular values, which need f32 or "
                        "f64 (cast first: clt_cast)",
                        clt_dtype_name(A->dtype), ord);
    if ((s = svd_for(fn, A, NULL, &t[0], NULL)) != CLT_OK)
      break;
    if (m == 0 || n == 0) {
      int64_t shape[CLT_MAX_DIMS];
      memcpy(shape, A->shape, sizeof(int64_t) * (size_t)(A->ndim - 2));
      s = clt_zeros(A->dtype, A->ndim - 2, shape, A->storage->dev, out);
    } else if (o == TWO) {
      s = clt_select(t[0], last - 1, 0, &t[1]) == CLT_OK ? clt_contiguous(t[1], out)
                                                         : clt_last_status();
    } else {
      s = clt_sum_dim(t[0], last - 1, 0, out);
    }
  }
  release_all(t, 6);
  return s;
}

clt_status clt_linalg_cond(clt_tensor *A, clt_tensor **out) {
  static const char fn[] = "clt_linalg_cond";
  clt_status s;
  if ((s = one_matrix(fn, A, false, out, "out")) != CLT_OK)
    return s;
  int64_t m = A->shape[A->ndim - 2], n = A->shape[A->ndim - 1], k = m < n ? m : n;
  if (k == 0)
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "A's matrices are %lld x %lld: an empty matrix has no condition number",
                      (long long)m, (long long)n);
  clt_tensor *t[3] = {NULL};
  if ((s = svd_for(fn, A, NULL, &t[0], NULL)) == CLT_OK &&
      (s = clt_select(t[0], -1, 0, &t[1])) == CLT_OK &&
      (s = clt_select(t[0], -1, k - 1, &t[2])) == CLT_OK)
    s = clt_div(t[1], t[2], out); /* the 2-norm condition: S max / S min (inf where singular) */
  release_all(t, 3);
  return s;
}

clt_status clt_linalg_matrix_rank(clt_tensor *A, clt_tensor **out) {
  static const char fn[] = "clt_linalg_matrix_rank";
  clt_status s;
  if ((s = one_matrix(fn, A, false, out, "out")) != CLT_OK)
    return s;
  int64_t m = A->shape[A->ndim - 2], n = A->shape[A->ndim - 1], k = m < n ? m : n;
  if (k == 0) {
    int64_t shape[CLT_MAX_DIMS];
    memcpy(shape, A->shape, sizeof(int64_t) * (size_t)(A->ndim - 2));
    return clt_zeros(CLT_I64, A->ndim - 2, shape, A->storage->dev, out);
  }
  /* singular values above max(m, n) * eps * the largest count (torch's default tolerance) */
  double rtol = (double)(m > n ? m : n) * (A->dtype == CLT_F32 ? FLT_EPSILON : DBL_EPSILON);
  clt_tensor *t[5] = {NULL};
  if ((s = svd_for(fn, A, NULL, &t[0], NULL)) == CLT_OK &&
      (s = clt_narrow(t[0], -1, 0, 1, &t[1])) == CLT_OK &&
      (s = clt_mul_scalar(t[1], rtol, &t[2])) == CLT_OK &&
      (s = clt_gt(t[0], t[2], &t[3])) == CLT_OK)
    s = clt_sum_dim(t[3], -1, 0, out);
  release_all(t, 5);
  return s;
}

clt_status clt_linalg_pinv(clt_tensor *A, clt_tensor **out) {
  static const char fn[] = "clt_linalg_pinv";
  clt_status s;
  if ((s = one_matrix(fn, A, false, out, "out")) != CLT_OK)
    return s;
  int nd = A->ndim;
  int64_t m = A->shape[nd - 2], n = A->shape[nd - 1], k = m < n ? m : n;
  if (k == 0) { /* the n x m zeros */
    int64_t shape[CLT_MAX_DIMS];
    memcpy(shape, A->shape, sizeof(int64_t) * (size_t)nd);
    shape[nd - 2] = n;
    shape[nd - 1] = m;
    return clt_zeros(A->dtype, nd, shape, A->storage->dev, out);
  }
  /* V diag(1/s) U^T over the singular values above max(m, n) * eps * the largest */
  double rtol = (double)(m > n ? m : n) * (A->dtype == CLT_F32 ? FLT_EPSILON : DBL_EPSILON);
  clt_tensor *t[12] = {NULL}; /* U, S, Vh, cut, keep, ones, 1/S, sinv, V, V sinv, U^T, sinv row */
  if ((s = svd_for(fn, A, &t[0], &t[1], &t[2])) != CLT_OK)
    return s;
  if ((s = clt_narrow(t[1], -1, 0, 1, &t[3])) == CLT_OK &&
      (s = clt_mul_scalar(t[3], rtol, &t[4])) == CLT_OK) {
    clt_tensor *keep = NULL;
    if ((s = clt_gt(t[1], t[4], &keep)) == CLT_OK) {
      clt_tensor_release(t[4]);
      t[4] = keep;
    }
  }
  if (s == CLT_OK &&
      (s = clt_full(A->dtype, t[1]->ndim, t[1]->shape, 1.0, A->storage->dev, &t[5])) == CLT_OK &&
      (s = clt_div(t[5], t[1], &t[6])) == CLT_OK) {
    clt_tensor *zero = NULL;
    if ((s = clt_zeros(A->dtype, 0, NULL, A->storage->dev, &zero)) == CLT_OK)
      s = clt_where(t[4], t[6], zero, &t[7]);
    clt_tensor_release(zero);
  }
  if (s == CLT_OK && (s = clt_transpose(t[2], -2, -1, &t[8])) == CLT_OK &&
      (s = clt_unsqueeze(t[7], -2, &t[11])) == CLT_OK &&
      (s = clt_mul(t[8], t[11], &t[9])) == CLT_OK &&
      (s = clt_transpose(t[0], -2, -1, &t[10])) == CLT_OK)
    s = clt_matmul(t[9], t[10], out);
  release_all(t, 12);
  return s;
}

/* ---- autograd: the derivatives of solve, solve_triangular, cholesky, inv, det, slogdet -----
 *
 * Each routine records one node (its own operations record nothing) and keeps its result;
 * autograd (a layer below) calls linalg_grad through the pointer installed here. The rules are
 * PyTorch's, made of clt's own operations on the result's device (batches broadcast back by
 * autograd's sum to each operand's shape):
 *   solve:            X = A^-1 B: gB = A^-T g, gA = -gB X^T (a vector B as a column)
 *   solve_triangular: left: gB = A^-T g, gA = -gB X^T; right (X A = B): gB = g A^-T,
 *                     gA = -X^T gB; gA kept to A's triangle (off the diagonal if unitriangular)
 *   inv:              Y = A^-1: gA = -Y^T g Y^T
 *   det:              gA = g det(A) A^-T (a singular A is an error: its inverse does not exist)
 *   slogdet:          logabsdet's: gA = g A^-T (sign has none)
 *   cholesky:         A = L L^T: gA = sym(L^-T Phi(L^T gL) L^-1), Phi the lower triangle with
 *                     its diagonal halved, sym(S) = (S + S^T) / 2 (an upper factor's gradient
 *                     is the lower's transposed) */

typedef struct gtmp {
  clt_status s;
  int n;
  clt_tensor *t[32];
} gtmp;

/* keep(c, f(..., &r), &r): r, owned by c, read after f ran; NULL once anything failed. */
static clt_tensor *keep(gtmp *c, clt_status s, clt_tensor **rp) {
  if (c->s != CLT_OK)
    return NULL;
  if (s != CLT_OK) {
    c->s = s;
    return NULL;
  }
  if (c->n == (int)(sizeof c->t / sizeof *c->t)) {
    clt_tensor_release(*rp);
    c->s = clt__error(CLT_ERR_INTERNAL, "clt_backward", "too many temporaries");
    return NULL;
  }
  return c->t[c->n++] = *rp;
}

/* S(var, call): var = the result of call (an expression writing r_), kept by c; each step is a
 * statement of its own and runs only while nothing has failed, so that the first failure's
 * message is the one the backward reports (no later call is given a NULL operand). */
#define S(var, call)                                                                               \
  do {                                                                                             \
    if (c.s == CLT_OK) {                                                                           \
      clt_tensor *r_ = NULL;                                                                       \
      (var) = keep(&c, (call), &r_);                                                               \
    }                                                                                              \
  } while (0)

/* MT: a's last two dimensions swapped (a view); COLUMN: a with a trailing dimension of 1 where
 * vec (a vector as a column), else a itself */
#define MT(var, a) S(var, clt_transpose((a), -2, -1, &r_))
#define COLUMN(var, a, vec)                                                                        \
  do {                                                                                             \
    if (vec)                                                                                       \
      S(var, clt_unsqueeze((a), (a)->ndim, &r_));                                                  \
    else                                                                                           \
      (var) = (a);                                                                                 \
  } while (0)

static clt_status linalg_grad(const clt_grad_node *node, clt_tensor *g, const bool *need,
                              clt_tensor **gx) {
  gtmp c = {CLT_OK, 0, {NULL}};
  clt_tensor *A = node->in[0], *B = node->n > 1 ? node->in[1] : NULL, *out = node->out;
  clt_tensor *ga = NULL, *gb = NULL;
  switch ((clt__grad_kind)node->kind) {
  case CLT__GRAD_LINALG_SOLVE: { /* gB = A^-T g, gA = -gB X^T */
    clt_tensor *X = out, *At = NULL, *gbc = NULL, *xc = NULL, *xt = NULL, *p = NULL;
    bool vec = vector_rhs(A, B);
    if (!X)
      S(X, solve_impl(A, B, &r_));
    MT(At, A);
    S(gb, solve_impl(At, g, &r_));
    if (need[0]) {
      COLUMN(gbc, gb, vec);
      COLUMN(xc, X, vec);
      MT(xt, xc);
      S(p, clt_matmul(gbc, xt, &r_));
      S(ga, clt_neg(p, &r_));
    }
    break;
  }
  case CLT__GRAD_LINALG_SOLVE_TRIANGULAR: {
    int upper = (int)node->p[0], left = (int)node->p[1], unit = (int)node->p[2];
    clt_tensor *X = out, *At = NULL, *xt = NULL, *full = NULL, *m = NULL;
    if (!X)
      S(X, trsolve_impl(A, B, upper, left, unit, &r_));
    MT(At, A);
    S(gb, trsolve_impl(At, g, !upper, left, unit, &r_)); /* left: A^-T g; right: g A^-T */
    if (need[0]) {
      MT(xt, X);
      if (left)
        S(full, clt_matmul(gb, xt, &r_));
      else
        S(full, clt_matmul(xt, gb, &r_));
      int64_t k = unit ? 1 : 0; /* A's triangle, less its diagonal where unitriangular */
      if (upper)
        S(m, clt_triu(full, k, &r_));
      else
        S(m, clt_tril(full, -k, &r_));
      S(ga, clt_neg(m, &r_));
    }
    break;
  }
  case CLT__GRAD_LINALG_INV: { /* -Y^T g Y^T */
    clt_tensor *Y = out, *Yt = NULL, *p = NULL, *q = NULL;
    if (!Y)
      S(Y, inv_impl(A, &r_));
    MT(Yt, Y);
    S(p, clt_matmul(Yt, g, &r_));
    S(q, clt_matmul(p, Yt, &r_));
    S(ga, clt_neg(q, &r_));
    break;
  }
  case CLT__GRAD_LINALG_DET:
  case CLT__GRAD_LINALG_SLOGDET: { /* g det(A) A^-T; for logabsdet, g A^-T */
    clt_tensor *gd = g, *d = out, *gd2 = NULL, *inv = NULL, *invt = NULL;
    if (node->kind == CLT__GRAD_LINALG_DET) {
      if (!d)
        S(d, det_impl(A, &r_));
      S(gd, clt_mul(g, d, &r_));
    }
    if (c.s == CLT_OK) {
      int64_t shape[CLT_MAX_DIMS + 2];
      memcpy(shape, gd->shape, sizeof(int64_t) * (size_t)gd->ndim);
      shape[gd->ndim] = shape[gd->ndim + 1] = 1;
      S(gd2, clt_reshape(gd, gd->ndim + 2, shape, &r_));
    }
    S(inv, inv_impl(A, &r_)); /* a singular A: its error, as the backward's */
    MT(invt, inv);
    S(ga, clt_mul(gd2, invt, &r_));
    break;
  }
  case CLT__GRAD_LINALG_CHOLESKY: {
    /* gA = sym(L^-T Phi(L^T gL) L^-1), Phi(Q) = (tril(Q) + tril(Q, -1)) / 2 */
    bool upper = node->p[0] != 0;
    clt_tensor *R = out, *L = NULL, *gL = NULL, *gl = NULL, *Lt = NULL, *Q = NULL, *lo = NULL,
               *st = NULL, *P = NULL, *P2 = NULL, *Y = NULL, *Z = NULL, *Zt = NULL, *sum = NULL;
    if (!R)
      S(R, cholesky_impl(A, upper, &r_));
    if (upper) {
      MT(L, R);
      MT(gL, g);
    } else {
      L = R;
      gL = g;
    }
    S(gl, clt_tril(gL, 0, &r_));
    MT(Lt, L);
    S(Q, clt_matmul(Lt, gl, &r_));
    S(lo, clt_tril(Q, 0, &r_));
    S(st, clt_tril(Q, -1, &r_));
    S(P, clt_add(lo, st, &r_));
    S(P2, clt_mul_scalar(P, 0.5, &r_));
    S(Y, trsolve_impl(Lt, P2, 1, 1, 0, &r_)); /* L^-T P */
    S(Z, trsolve_impl(L, Y, 0, 0, 0, &r_));   /* (L^-T P) L^-1 */
    MT(Zt, Z);
    S(sum, clt_add(Z, Zt, &r_));
    S(ga, clt_mul_scalar(sum, 0.5, &r_));
    break;
  }
  default:
    c.s = clt__error(CLT_ERR_INTERNAL, "clt_backward", "%s has no derivative here", node->fn);
  }
  if (c.s == CLT_OK) {
    gx[0] = need[0] && ga ? clt_tensor_retain(ga) : NULL;
    if (node->n > 1)
      gx[1] = need[1] && gb ? clt_tensor_retain(gb) : NULL;
  }
  release_all(c.t, c.n);
  return c.s;
}
#undef S
#undef MT
#undef COLUMN

/* The public routines that record: where an operand requires grad (and grad mode is on), the
 * routine runs with grad mode off and one node is recorded for its result. */
#define LINALG_RECORD(kind, fn, in, n, p, np, outp, call)                                          \
  do {                                                                                             \
    if ((outp) && clt__grad_wanted(in, n)) { /* a NULL out: the routine's own error */             \
      clt__grad_linalg_set(linalg_grad);                                                           \
      CLT__GRAD_RECORD(kind, fn, in, n, p, np, outp, call);                                        \
    }                                                                                              \
  } while (0)

clt_status clt_linalg_solve(clt_tensor *A, clt_tensor *B, clt_tensor **X) {
  clt_tensor *in[2] = {A, B};
  LINALG_RECORD(CLT__GRAD_LINALG_SOLVE, "clt_linalg_solve", in, 2, NULL, 0, X,
                solve_impl(A, B, &r_));
  return solve_impl(A, B, X);
}

clt_status clt_linalg_solve_triangular(clt_tensor *A, clt_tensor *B, int upper, int left,
                                       int unitriangular, clt_tensor **X) {
  clt_tensor *in[2] = {A, B};
  int64_t p[3] = {upper != 0, left != 0, unitriangular != 0};
  LINALG_RECORD(CLT__GRAD_LINALG_SOLVE_TRIANGULAR, "clt_linalg_solve_triangular", in, 2, p, 3, X,
                trsolve_impl(A, B, upper, left, unitriangular, &r_));
  return trsolve_impl(A, B, upper, left, unitriangular, X);
}

clt_status clt_linalg_cholesky(clt_tensor *A, int upper, clt_tensor **L) {
  clt_tensor *in[1] = {A};
  int64_t p[1] = {upper != 0};
  LINALG_RECORD(CLT__GRAD_LINALG_CHOLESKY, "clt_linalg_cholesky", in, 1, p, 1, L,
                cholesky_impl(A, upper, &r_));
  return cholesky_impl(A, upper, L);
}

clt_status clt_linalg_inv(clt_tensor *A, clt_tensor **out) {
  clt_tensor *in[1] = {A};
  LINALG_RECORD(CLT__GRAD_LINALG_INV, "clt_linalg_inv", in, 1, NULL, 0, out, inv_impl(A, &r_));
  return inv_impl(A, out);
}

clt_status clt_linalg_det(clt_tensor *A, clt_tensor **out) {
  clt_tensor *in[1] = {A};
  LINALG_RECORD(CLT__GRAD_LINALG_DET, "clt_linalg_det", in, 1, NULL, 0, out, det_impl(A, &r_));
  return det_impl(A, out);
}

clt_status clt_linalg_slogdet(clt_tensor *A, clt_tensor **sign, clt_tensor **logabsdet) {
  static const char fn[] = "clt_linalg_slogdet";
  clt_tensor *in[1] = {A};
  if (!clt__grad_wanted(in, 1) || !sign || !logabsdet)
    return slogdet_impl(A, sign, logabsdet);
  /* two results: the node is logabsdet's; sign, piecewise constant, has no history */
  clt__grad_linalg_set(linalg_grad);
  clt_tensor *sg = NULL, *la = NULL, *rec = NULL;
  bool on = clt__grad_mode_set(false);
  clt_status s = slogdet_impl(A, &sg, &la);
  clt__grad_mode_set(on);
  if (s == CLT_OK &&
      (s = clt__grad_record(CLT__GRAD_LINALG_SLOGDET, fn, in, 1, NULL, 0, la, &rec)) == CLT_OK) {
    *sign = sg;
    *logabsdet = rec;
    return CLT_OK;
  }
  clt_tensor_release(sg);
  return s;
}
