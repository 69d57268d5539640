/* SPDX-License-Identifier: MIT */
/* host/matmul.c - matrix products on the host: CBLAS (OpenBLAS) when configure found one, else
 * cache-blocked loops of ours. clt__host_gemm is also what the OpenCL native-kernel path runs
 * (lib/opencl/matmul.c). */
#include "backend.h"

#include <string.h>

#ifdef HAVE_CBLAS
#include <cblas.h>
#endif

#ifndef HAVE_CBLAS
/* C = A x B in blocks of BM x BK x BN, the innermost loop running along rows of B and C so that
 * it vectorizes (CLT__SIMD); a row of C accumulates in place (C is zeroed first). A stored
 * transposed is read at p * lda + i; B stored transposed at j * ldb + p (its inner loop then
 * strides). */
enum { BM = 64, BK = 128, BN = 256 };
#define BLOCKED_GEMM(name, T)                                                                      \
  static void name(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,     \
                   const T *b, int64_t ldb, T *c, int64_t ldc) {                                   \
    int64_t ar = ta ? 1 : lda, ac = ta ? lda : 1, br = tb ? 1 : ldb, bc = tb ? ldb : 1;            \
    for (int64_t i = 0; i < m; i++)                                                                \
      memset(c + i * ldc, 0, (size_t)n * sizeof(T));                                               \
    for (int64_t i0 = 0; i0 < m; i0 += BM)                                                         \
      for (int64_t p0 = 0; p0 < k; p0 += BK)                                                       \
        for (int64_t j0 = 0; j0 < n; j0 += BN) {                                                   \
          int64_t i1 = i0 + BM < m ? i0 + BM : m, p1 = p0 + BK < k ? p0 + BK : k;                  \
          int64_t j1 = j0 + BN < n ? j0 + BN : n;                                                  \
          for (int64_t i = i0; i < i1; i++) {                                                      \
            T *restrict crow = c + i * ldc;                                                        \
            for (int64_t p = p0; p < p1; p++) {                                                    \
              T av = a[i * ar + p * ac];                                                           \
              const T *restrict brow = b + p * br;                                                 \
              if (bc == 1)                                                                         \
                CLT__SIMD for (int64_t j = j0; j < j1; j++)                                        \
                  crow[j] += av * brow[j];                                                         \
              else                                                                                 \
                for (int64_t j = j0; j < j1; j++)                                                  \
                  crow[j] += av * brow[j * bc];                                                    \
            }                                                                                      \
          }                                                                                        \
        }                                                                                          \
  }
BLOCKED_GEMM(gemm_f32, float)
BLOCKED_GEMM(gemm_f64, double)
#endif

static void gemm(clt_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                 int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc) {
#ifdef HAVE_CBLAS
  /* One column or one row of C: a matrix-vector product (gemv), which OpenBLAS's gemm does not
   * turn into one (a gemm with n = 1 ran 3x slower than NumPy's gemv at 2048). */
  if (n == 1 || m == 1) {
    bool col = n == 1;
    /* C's column = op(A) x (B's column), or C's row = op(B)^T x (A's row); the matrix as it is
     * stored, row-major, with its transpose flag */
    const void *mat = col ? a : b, *vec = col ? b : a;
    bool mt = col ? ta : !tb;
    int64_t rows = col ? (ta ? k : m) : (tb ? n : k), cols = col ? (ta ? m : k) : (tb ? k : n);
    int64_t ld = col ? lda : ldb;
    int64_t inc = col ? (tb ? 1 : ldb) : (ta ? lda : 1), incy = col ? ldc : 1;
    enum CBLAS_TRANSPOSE x = mt ? CblasTrans : CblasNoTrans;
    if (dt == CLT_F32)
      cblas_sgemv(CblasRowMajor, x, (int)rows, (int)cols, 1.0f, mat, (int)ld, vec, (int)inc, 0.0f,
                  c, (int)incy);
    else
      cblas_dgemv(CblasRowMajor, x, (int)rows, (int)cols, 1.0, mat, (int)ld, vec, (int)inc, 0.0,
                  c, (int)incy);
    return;
  }
  enum CBLAS_TRANSPOSE xa = ta ? CblasTrans : CblasNoTrans, xb = tb ? CblasTrans : CblasNoTrans;
  if (dt == CLT_F32)
    cblas_sgemm(CblasRowMajor, xa, xb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, 0.0f,
                c, (int)ldc);
  else
    cblas_dgemm(CblasRowMajor, xa, xb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, 0.0,
                c, (int)ldc);
#else
  if (dt == CLT_F32)
    gemm_f32(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
  else
    gemm_f64(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
#endif
}

void clt__host_matmul_run(clt_dtype dt, const clt_matmul_desc *g, const void *a, const void *b,
                          void *c) {
  size_t es = clt_dtype_size(dt);
  const char *pa = a, *pb = b;
  char *pc = c;
  /* one B for every batch entry, and A's matrices one below the other: a single (batch*m, k) x
   * (k, n) product */
  if (g->sb == 0 && !g->ta && (g->batch == 1 || g->sa == g->m * g->lda)) {
    gemm(dt, false, g->tb, g->batch * g->m, g->n, g->k, pa, g->lda, pb, g->ldb, pc, g->n);
    return;
  }
  for (int64_t i = 0; i < g->batch; i++)
    gemm(dt, g->ta, g->tb, g->m, g->n, g->k, pa + (size_t)(i * g->sa) * es, g->lda,
         pb + (size_t)(i * g->sb) * es, g->ldb, pc + (size_t)(i * g->m * g->n) * es, g->n);
}

clt_status clt__host_matmul_path(clt_device *dev, const char *fn, clt_matmul_kind *out) {
  (void)dev;
  (void)fn;
#ifdef HAVE_CBLAS
  *out = CLT__MM_BLAS;
#else
  *out = CLT__MM_LOOP;
#endif
  return CLT_OK;
}

clt_status clt__host_matmul(clt_tensor *out, const clt_tensor *a, const clt_tensor *b,
                            const clt_matmul_desc *g, const char *fn) {
  clt_status st;
  if ((st = clt__storage_host_wait(a->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(b->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(out->storage, true, fn)) != CLT_OK)
    return st;
  clt__host_matmul_run(out->dtype, g, clt__host_ptr(a), clt__host_ptr(b), clt__host_ptr(out));
  return CLT_OK;
}
