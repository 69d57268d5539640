/* SPDX-License-Identifier: MIT */
/* host/lapack.c - factorizations and solvers on host memory through LAPACKE (over OpenBLAS's
 * LAPACK on Debian): the work of lib/solve.c's clt_linalg_* routines, one batch of row-major
 * matrices stored one after another, f32 or f64. LAPACKE's row-major interface transposes into
 * column-major copies of its own (O(n^2), next to the O(n^3) of the factorizations).
 *
 * Each routine runs every matrix of the batch and returns 0, or the info of the first matrix
 * LAPACK failed on (> 0: singular, not positive-definite, no convergence; its index in *which),
 * or CLT__LAPACK_NOMEM. Callers checked the sizes against CLT__LAPACK_MAX. Built without
 * LAPACKE, each returns CLT__LAPACK_MISSING. getrf, getrs, getri, potrf and trtrs go through
 * LAPACKE's _work forms, which skip its scan for NaN: a NaN propagates, as in PyTorch (OpenBLAS's
 * potrf lets it through into the factor; reference LAPACK's reports a minor that is not
 * positive). The routines whose workspace LAPACKE manages
 * refuse NaN (its scan): lib/solve.c keeps non-finite matrices from them. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#ifdef HAVE_LAPACKE
#include <lapacke.h>

_Static_assert(sizeof(lapack_int) == sizeof(int32_t), "clt's pivots are LAPACK's 32-bit ints");

#define F32(p) ((float *)(p))
#define F64(p) ((double *)(p))
#define CF32(p) ((const float *)(p))
#define CF64(p) ((const double *)(p))

static size_t esize(clt_dtype dt) { return dt == CLT_F32 ? 4 : 8; }

/* LAPACKE's out-of-memory code, and the codes LAPACK returns for an argument it refuses (which
 * the callers' checks rule out), become CLT__LAPACK_NOMEM and -1. */
static int fail(int info) {
  if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR)
    return CLT__LAPACK_NOMEM;
  return info;
}

int clt__lapack_lu(clt_dtype dt, int64_t batch, int64_t m, int64_t n, void *a, int32_t *piv,
                   int64_t *which) {
  size_t es = esize(dt);
  int64_t k = m < n ? m : n;
  int first = 0;
  for (int64_t b = 0; b < batch; b++) {
    char *ab = (char *)a + (size_t)(b * m * n) * es;
    lapack_int *pb = (lapack_int *)(piv + b * k);
    int info = dt == CLT_F32 ? LAPACKE_sgetrf_work(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)n,
                                                   F32(ab), (lapack_int)(n ? n : 1), pb)
                             : LAPACKE_dgetrf_work(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)n,
                                                   F64(ab), (lapack_int)(n ? n : 1), pb);
    if (info < 0)
      return fail(info);
    if (info > 0 && first == 0) {
      first = info;
      *which = b;
    }
  }
  return first;
}

int clt__lapack_lu_solve(clt_dtype dt, int64_t batch, int64_t n, int64_t nrhs, const void *lu,
                         const int32_t *piv, void *x) {
  size_t es = esize(dt);
  for (int64_t b = 0; b < batch; b++) {
    const char *lb = (const char *)lu + (size_t)(b * n * n) * es;
    char *xb = (char *)x + (size_t)(b * n * nrhs) * es;
    const lapack_int *pb = (const lapack_int *)(piv + b * n);
    int info = dt == CLT_F32
                   ? LAPACKE_sgetrs_work(LAPACK_ROW_MAJOR, 'N', (lapack_int)n, (lapack_int)nrhs,
                                         CF32(lb), (lapack_int)n, pb, F32(xb), (lapack_int)nrhs)
                   : LAPACKE_dgetrs_work(LAPACK_ROW_MAJOR, 'N', (lapack_int)n, (lapack_int)nrhs,
                                         CF64(lb), (lapack_int)n, pb, F64(xb), (lapack_int)nrhs);
    if (info != 0)
      return fail(info);
  }
  return 0;
}

/* getri (column-major) through its _work form (no scan for NaN: it propagates), with its
 * workspace */
static int getri(clt_dtype dt, int64_t n, void *a, const lapack_int *piv) {
  double q = 0;
  float qf = 0;
  int info =
      dt == CLT_F32
          ? LAPACKE_sgetri_work(LAPACK_COL_MAJOR, (lapack_int)n, NULL, (lapack_int)n, piv, &qf, -1)
          : LAPACKE_dgetri_work(LAPACK_COL_MAJOR, (lapack_int)n, NULL, (lapack_int)n, piv, &q, -1);
  if (info != 0)
    return info;
  lapack_int lwork = (lapack_int)(dt == CLT_F32 ? qf : q);
  if (lwork < n)
    lwork = (lapack_int)(n ? n : 1);
  void *work = malloc(esize(dt) * (size_t)lwork);
  if (!work)
    return CLT__LAPACK_NOMEM;
  info = dt == CLT_F32 ? LAPACKE_sgetri_work(LAPACK_COL_MAJOR, (lapack_int)n, F32(a), (lapack_int)n,
                                             piv, F32(work), lwork)
                       : LAPACKE_dgetri_work(LAPACK_COL_MAJOR, (lapack_int)n, F64(a), (lapack_int)n,
                                             piv, F64(work), lwork);
  free(work);
  return info;
}

/* A X = B for row-major A and X: a row-major A is its transpose in column-major order, so LAPACK
 * factors A^T where it lies (getrf, no copy) and solves with the transposed factors (getrs 'T');
 * LAPACKE's row-major forms would transpose A into a copy and back (two passes over n^2 elements
 * that cost a 2048 x 2048 solve a third of its time). X (n x nrhs) is transposed into work when
 * nrhs > 1. */
int clt__lapack_solve(clt_dtype dt, int64_t batch, int64_t n, int64_t nrhs, void *a, int32_t *piv,
                      void *x, void *work, int64_t *which) {
  size_t es = esize(dt);
  for (int64_t b = 0; b < batch; b++) {
    char *ab = (char *)a + (size_t)(b * n * n) * es, *xb = (char *)x + (size_t)(b * n * nrhs) * es;
    lapack_int *pb = (lapack_int *)piv, ln = (lapack_int)n; /* n entries, reused */
    int info = dt == CLT_F32 ? LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, ln, ln, F32(ab), ln, pb)
                             : LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, ln, ln, F64(ab), ln, pb);
    if (info != 0) {
      if (info > 0)
        *which = b;
      return fail(info);
    }
    char *cb = nrhs == 1 ? xb : work; /* X in column-major order */
    for (int64_t i = 0; nrhs > 1 && i < n; i++)
      for (int64_t j = 0; j < nrhs; j++)
        memcpy(cb + (size_t)(j * n + i) * es, xb + (size_t)(i * nrhs + j) * es, es);
    info = dt == CLT_F32 ? LAPACKE_sgetrs_work(LAPACK_COL_MAJOR, 'T', ln, (lapack_int)nrhs,
                                               CF32(ab), ln, pb, F32(cb), ln)
                         : LAPACKE_dgetrs_work(LAPACK_COL_MAJOR, 'T', ln, (lapack_int)nrhs,
                                               CF64(ab), ln, pb, F64(cb), ln);
    if (info != 0)
      return fail(info);
    for (int64_t i = 0; nrhs > 1 && i < n; i++)
      for (int64_t j = 0; j < nrhs; j++)
        memcpy(xb + (size_t)(i * nrhs + j) * es, cb + (size_t)(j * n + i) * es, es);
  }
  return 0;
}

int clt__lapack_inv(clt_dtype dt, int64_t batch, int64_t n, void *a, int64_t *which) {
  /* in column-major order the buffer is A^T, whose inverse (A^-1)^T read back in row-major
   * order is A^-1: LAPACK inverts it where it lies */
  size_t es = esize(dt);
  lapack_int *piv = malloc(sizeof(lapack_int) * (size_t)(n ? n : 1));
  if (!piv)
    return CLT__LAPACK_NOMEM;
  int ret = 0;
  for (int64_t b = 0; b < batch && ret == 0; b++) {
    char *ab = (char *)a + (size_t)(b * n * n) * es;
    int info = dt == CLT_F32 ? LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n,
                                                   F32(ab), (lapack_int)n, piv)
                             : LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n,
                                                   F64(ab), (lapack_int)n, piv);
    if (info == 0)
      info = getri(dt, n, ab, piv);
    if (info > 0)
      *which = b;
    ret = info < 0 ? fail(info) : info;
  }
  free(piv);
  return ret;
}

int clt__lapack_cholesky(clt_dtype dt, int64_t batch, int64_t n, bool upper, void *a,
                         int64_t *which) {
  size_t es = esize(dt);
  for (int64_t b = 0; b < batch; b++) {
    char *ab = (char *)a + (size_t)(b * n * n) * es;
    /* A is symmetric: in column-major order the buffer is A itself, and the upper factor U
     * (U^T U = A) there reads back in row-major order as L = U^T: LAPACK works where the
     * data lie, on the other triangle (row-major lower is column-major upper) */
    char uplo = upper ? 'L' : 'U';
    int info =
        dt == CLT_F32
            ? LAPACKE_spotrf_work(LAPACK_COL_MAJOR, uplo, (lapack_int)n, F32(ab), (lapack_int)n)
            : LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, uplo, (lapack_int)n, F64(ab), (lapack_int)n);
    if (info != 0) {
      if (info > 0)
        *which = b;
      return fail(info);
    }
    /* LAPACK leaves the other triangle as it was: zeros there, as torch.linalg.cholesky */
    for (int64_t i = 0; i < n; i++) {
      int64_t lo = upper ? 0 : i + 1, hi = upper ? i : n;
      if (hi > lo)
        memset(ab + (size_t)(i * n + lo) * es, 0, (size_t)(hi - lo) * es);
    }
  }
  return 0;
}

int clt__lapack_trsolve(clt_dtype dt, int64_t batch, int64_t n, int64_t nrhs, bool upper,
                        bool trans, bool unit, const void *a, void *x, int64_t *which) {
  size_t es = esize(dt);
  for (int64_t b = 0; b < batch; b++) {
    const char *ab = (const char *)a + (size_t)(b * n * n) * es;
    char *xb = (char *)x + (size_t)(b * n * nrhs) * es;
    char uplo = upper ? 'U' : 'L', tr = trans ? 'T' : 'N', diag = unit ? 'U' : 'N';
    int info =
        dt == CLT_F32
            ? LAPACKE_strtrs_work(LAPACK_ROW_MAJOR, uplo, tr, diag, (lapack_int)n, (lapack_int)nrhs,
                                  CF32(ab), (lapack_int)n, F32(xb), (lapack_int)nrhs)
            : LAPACKE_dtrtrs_work(LAPACK_ROW_MAJOR, uplo, tr, diag, (lapack_int)n, (lapack_int)nrhs,
                                  CF64(ab), (lapack_int)n, F64(xb), (lapack_int)nrhs);
    if (info != 0) {
      if (info > 0)
        *which = b;
      return fail(info);
    }
  }
  return 0;
}

int clt__lapack_qr(clt_dtype dt, int64_t batch, int64_t m, int64_t n, void *a, void *q, void *r) {
  size_t es = esize(dt);
  int64_t k = m < n ? m : n;
  void *tau = malloc(es * (size_t)(k ? k : 1));
  if (!tau)
    return CLT__LAPACK_NOMEM;
  int ret = 0;
  for (int64_t b = 0; b < batch && ret == 0; b++) {
    char *ab = (char *)a + (size_t)(b * m * n) * es;
    char *qb = (char *)q + (size_t)(b * m * k) * es, *rb = (char *)r + (size_t)(b * k * n) * es;
    int info = dt == CLT_F32 ? LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)n,
                                              F32(ab), (lapack_int)n, F32(tau))
                             : LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)n,
                                              F64(ab), (lapack_int)n, F64(tau));
    if (info != 0) {
      ret = fail(info);
      break;
    }
    /* R: the upper triangle of the first k rows; Q: the first k columns, built by orgqr */
    for (int64_t i = 0; i < k; i++) {
      memset(rb + (size_t)(i * n) * es, 0, (size_t)(i < n ? i : n) * es);
      if (n > i)
        memcpy(rb + (size_t)(i * n + i) * es, ab + (size_t)(i * n + i) * es, (size_t)(n - i) * es);
    }
    for (int64_t i = 0; i < m; i++)
      memcpy(qb + (size_t)(i * k) * es, ab + (size_t)(i * n) * es, (size_t)k * es);
    info = dt == CLT_F32 ? LAPACKE_sorgqr(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)k,
                                          (lapack_int)k, F32(qb), (lapack_int)k, CF32(tau))
                         : LAPACKE_dorgqr(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)k,
                                          (lapack_int)k, F64(qb), (lapack_int)k, CF64(tau));
    ret = info != 0 ? fail(info) : 0;
  }
  free(tau);
  return ret;
}

int clt__lapack_eigh(clt_dtype dt, int64_t batch, int64_t n, bool vectors, void *a, void *w,
                     int64_t *which) {
  size_t es = esize(dt);
  char jobz = vectors ? 'V' : 'N';
  for (int64_t b = 0; b < batch; b++) {
    char *ab = (char *)a + (size_t)(b * n * n) * es, *wb = (char *)w + (size_t)(b * n) * es;
    int info = dt == CLT_F32 ? LAPACKE_ssyevd(LAPACK_ROW_MAJOR, jobz, 'L', (lapack_int)n, F32(ab),
                                              (lapack_int)n, F32(wb))
                             : LAPACKE_dsyevd(LAPACK_ROW_MAJOR, jobz, 'L', (lapack_int)n, F64(ab),
                                              (lapack_int)n, F64(wb));
    if (info != 0) {
      if (info > 0)
        *which = b;
      return fail(info);
    }
  }
  return 0;
}

int clt__lapack_svd(clt_dtype dt, int64_t batch, int64_t m, int64_t n, bool full, void *a, void *u,
                    void *s, void *vt, int64_t *which) {
  size_t es = esize(dt);
  int64_t k = m < n ? m : n;
  int64_t uc = full ? m : k, vr = full ? n : k; /* U is m x uc, Vh is vr x n */
  char job = u ? (full ? 'A' : 'S') : 'N';
  for (int64_t b = 0; b < batch; b++) {
    char *ab = (char *)a + (size_t)(b * m * n) * es, *sb = (char *)s + (size_t)(b * k) * es;
    char *ub = u ? (char *)u + (size_t)(b * m * uc) * es : NULL;
    char *vb = u ? (char *)vt + (size_t)(b * vr * n) * es : NULL;
    lapack_int ldu = (lapack_int)(uc ? uc : 1), ldvt = (lapack_int)(n ? n : 1);
    int info = dt == CLT_F32
                   ? LAPACKE_sgesdd(LAPACK_ROW_MAJOR, job, (lapack_int)m, (lapack_int)n, F32(ab),
                                    (lapack_int)(n ? n : 1), F32(sb), F32(ub), ldu, F32(vb), ldvt)
                   : LAPACKE_dgesdd(LAPACK_ROW_MAJOR, job, (lapack_int)m, (lapack_int)n, F64(ab),
                                    (lapack_int)(n ? n : 1), F64(sb), F64(ub), ldu, F64(vb), ldvt);
    if (info != 0) {
      if (info > 0)
        *which = b;
      return fail(info);
    }
  }
  return 0;
}

int clt__lapack_lstsq(clt_dtype dt, int64_t batch, int64_t m, int64_t n, int64_t nrhs, void *a,
                      void *bx, double rcond) {
  /* bx: each matrix max(m, n) x nrhs, B in its first m rows; X in its first n rows after */
  size_t es = esize(dt);
  int64_t ld = m > n ? m : n;
  lapack_int *jpvt = malloc(sizeof(lapack_int) * (size_t)(n ? n : 1));
  if (!jpvt)
    return CLT__LAPACK_NOMEM;
  int ret = 0;
  for (int64_t b = 0; b < batch && ret == 0; b++) {
    char *ab = (char *)a + (size_t)(b * m * n) * es,
         *xb = (char *)bx + (size_t)(b * ld * nrhs) * es;
    memset(jpvt, 0, sizeof(lapack_int) * (size_t)(n ? n : 1));
    lapack_int rank;
    int info = dt == CLT_F32
                   ? LAPACKE_sgelsy(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)n,
                                    (lapack_int)nrhs, F32(ab), (lapack_int)(n ? n : 1), F32(xb),
                                    (lapack_int)(nrhs ? nrhs : 1), jpvt, (float)rcond, &rank)
                   : LAPACKE_dgelsy(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)n,
                                    (lapack_int)nrhs, F64(ab), (lapack_int)(n ? n : 1), F64(xb),
                                    (lapack_int)(nrhs ? nrhs : 1), jpvt, rcond, &rank);
    ret = info != 0 ? fail(info) : 0;
  }
  free(jpvt);
  return ret;
}

#else /* !HAVE_LAPACKE */

int clt__lapack_lu(clt_dtype dt, int64_t batch, int64_t m, int64_t n, void *a, int32_t *piv,
                   int64_t *which) {
  (void)dt, (void)batch, (void)m, (void)n, (void)a, (void)piv, (void)which;
  return CLT__LAPACK_MISSING;
}
int clt__lapack_lu_solve(clt_dtype dt, int64_t batch, int64_t n, int64_t nrhs, const void *lu,
                         const int32_t *piv, void *x) {
  (void)dt, (void)batch, (void)n, (void)nrhs, (void)lu, (void)piv, (void)x;
  return CLT__LAPACK_MISSING;
}
int clt__lapack_solve(clt_dtype dt, int64_t batch, int64_t n, int64_t nrhs, void *a, int32_t *piv,
                      void *x, void *work, int64_t *which) {
  (void)dt, (void)batch, (void)n, (void)nrhs, (void)a, (void)piv, (void)x, (void)work, (void)which;
  return CLT__LAPACK_MISSING;
}
int clt__lapack_inv(clt_dtype dt, int64_t batch, int64_t n, void *a, int64_t *which) {
  (void)dt, (void)batch, (void)n, (void)a, (void)which;
  return CLT__LAPACK_MISSING;
}
int clt__lapack_cholesky(clt_dtype dt, int64_t batch, int64_t n, bool upper, void *a,
                         int64_t *which) {
  (void)dt, (void)batch, (void)n, (void)upper, (void)a, (void)which;
  return CLT__LAPACK_MISSING;
}
int clt__lapack_trsolve(clt_dtype dt, int64_t batch, int64_t n, int64_t nrhs, bool upper,
                        bool trans, bool unit, const void *a, void *x, int64_t *which) {
  (void)dt, (void)batch, (void)n, (void)nrhs, (void)upper, (void)trans, (void)unit, (void)a,
      (void)x, (void)which;
  return CLT__LAPACK_MISSING;
}
int clt__lapack_qr(clt_dtype dt, int64_t batch, int64_t m, int64_t n, void *a, void *q, void *r) {
  (void)dt, (void)batch, (void)m, (void)n, (void)a, (void)q, (void)r;
  return CLT__LAPACK_MISSING;
}
int clt__lapack_eigh(clt_dtype dt, int64_t batch, int64_t n, bool vectors, void *a, void *w,
                     int64_t *which) {
  (void)dt, (void)batch, (void)n, (void)vectors, (void)a, (void)w, (void)which;
  return CLT__LAPACK_MISSING;
}
int clt__lapack_svd(clt_dtype dt, int64_t batch, int64_t m, int64_t n, bool full, void *a, void *u,
                    void *s, void *vt, int64_t *which) {
  (void)dt, (void)batch, (void)m, (void)n, (void)full, (void)a, (void)u, (void)s, (void)vt,
      (void)which;
  return CLT__LAPACK_MISSING;
}
int clt__lapack_lstsq(clt_dtype dt, int64_t batch, int64_t m, int64_t n, int64_t nrhs, void *a,
                      void *bx, double rcond) {
  (void)dt, (void)batch, (void)m, (void)n, (void)nrhs, (void)a, (void)bx, (void)rcond;
  return CLT__LAPACK_MISSING;
}
#endif
