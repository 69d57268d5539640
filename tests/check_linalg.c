/* SPDX-License-Identifier: MIT */
/* check_linalg.c - the factorizations and solvers (clt_linalg_*, issue 27 part 2).
 *
 * Residuals rather than values alone: for random well-conditioned matrices of several sizes, on
 * every device and in f32 and f64, A X - B, L L^T - A, Q R - A, U S Vh - A, A V - V diag(w) and
 * the orthonormality of Q, U, V are computed here in double from the results and must be within
 * 50 n eps of A's norm; the results on each OpenCL device must equal the host's bit for bit (the
 * same LAPACK runs on the same numbers). Then fixed matrices against NumPy's values (written
 * here), edge cases (0 x 0, 1 x 1, batches of 0, the Hilbert matrix of order 12, rank-deficient
 * least squares, singular and indefinite matrices, NaN), batches that broadcast, views and lazy
 * operands, and the device rules (internal trips counted, the guard not involved, mismatches
 * refused), and cholesky's hybrid path against the whole-matrix one.
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

static const clt_dtype dts[2] = {CLT_F32, CLT_F64};

static double eps_of(clt_dtype dt) { return dt == CLT_F32 ? FLT_EPSILON : DBL_EPSILON; }

/* A tensor of dt on d holding the doubles v (rounded to dt). */
static clt_tensor *tens(const double *v, clt_dtype dt, int nd, const int64_t *shape,
                        clt_device *d) {
  int64_t n = cu_numel(nd, shape);
  void *buf = cu_malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    cu_set(buf, dt, i, v[i]);
  clt_tensor *t = cu_tensor(buf, dt, nd, shape, d);
  free(buf);
  return t;
}

/* p random m x n matrices: uniform in [-1, 1), plus n on the diagonal of square ones (diagonally
 * dominant: well conditioned) unless plain; SPD ones: M M^T / n + I. */
static double *gen(cu_rng *r, int64_t p, int64_t m, int64_t n, int kind) {
  double *v = cu_malloc(sizeof(double) * (size_t)(p * m * n + 1));
  if (kind == 2) { /* SPD, square */
    double *g = cu_malloc(sizeof(double) * (size_t)(n * n + 1));
    for (int64_t b = 0; b < p; b++) {
      for (int64_t i = 0; i < n * n; i++)
        g[i] = 2 * cu_rng_uniform(r) - 1;
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
          double s = i == j ? 1 : 0;
          for (int64_t k = 0; k < n; k++)
            s += g[i * n + k] * g[j * n + k] / (double)n;
          v[b * n * n + i * n + j] = s;
        }
    }
    free(g);
    return v;
  }
  for (int64_t b = 0; b < p; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        v[(b * m + i) * n + j] = 2 * cu_rng_uniform(r) - 1 + (kind == 1 && i == j ? (double)n : 0);
  return v;
}

static double norm(const double *a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++)
    s += a[i] * a[i];
  return sqrt(s);
}

/* || op(A) B - C ||_F for A m x k (or, transposed, stored k x m), B k x n, C m x n (NULL: 0). */
static double resid(const double *A, bool ta, const double *B, const double *C, int64_t m,
                    int64_t k, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double v = 0;
      for (int64_t q = 0; q < k; q++)
        v += (ta ? A[q * m + i] : A[i * k + q]) * B[q * n + j];
      v -= C ? C[i * n + j] : 0;
      s += v * v;
    }
  return sqrt(s);
}

/* || Q^T Q - I || for Q m x k (its columns orthonormal). */
static double orth(const double *Q, int64_t m, int64_t k) {
  double s = 0;
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = 0; j < k; j++) {
      double v = i == j ? -1 : 0;
      for (int64_t q = 0; q < m; q++)
        v += Q[q * k + i] * Q[q * k + j];
      s += v * v;
    }
  return sqrt(s);
}

/* The bytes of a and b (any devices) are the same. */
static void assert_same_bits(const clt_tensor *a, const clt_tensor *b, const char *what) {
  ck_assert_int_eq(clt_tensor_numel(a), clt_tensor_numel(b));
  size_t nb = (size_t)clt_tensor_numel(a) * clt_dtype_size(clt_tensor_dtype(a));
  void *x = cu_read(a), *y = cu_read(b);
  ck_assert_msg(memcmp(x, y, nb) == 0, "%s: not the host's bits", what);
  free(x);
  free(y);
}

/* 1 if clt was built with LAPACKE; otherwise prints a skip message and gives 0. */
static int lapack_ok(const char *test) {
  double one = 1;
  clt_tensor *a = cu_tensor(&one, CLT_F64, 2, (int64_t[]){1, 1}, clt_cpu()), *d = NULL;
  clt_status s = clt_linalg_det(a, &d);
  clt_tensor_release(a);
  clt_tensor_release(d);
  if (s == CLT_ERR_UNSUPPORTED && strstr(clt_last_error(), "without LAPACKE")) {
    cu_skip(test, "clt was built without LAPACKE (configure --without-lapacke)");
    return 0;
  }
  ck_assert_msg(s == CLT_OK, "det of [[1]]: %s", clt_last_error());
  return 1;
}

#define TOL(cond, ...) ck_assert_msg(cond, __VA_ARGS__)

/* ---- solve, lu, inv, det on general matrices ---------------------------------------------------
 */

START_TEST(test_solve_residuals) {
  if (!lapack_ok("test_solve_residuals"))
    return;
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const int64_t sizes[] = {1, 2, 17, 64};
  for (int t = 0; t < 2; t++)
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      clt_dtype dt = dts[t];
      int64_t n = sizes[si], k = 3;
      cu_rng r;
      cu_rng_seed(&r, 100 + (uint64_t)n);
      double *a = gen(&r, 1, n, n, 1), *b = gen(&r, 1, n, k, 0);
      clt_tensor *host[4] = {NULL};
      for (int di = 0; di < nd; di++) {
        clt_device *d = devs[di];
        if (!cu_dtype_ok("test_solve_residuals", d, dt))
          continue;
        if (cu_is_oclgrind(d) && n > 17)
          continue; /* the simulator: the small sizes take every branch */
        char what[96];
        snprintf(what, sizeof what, "%s %s n=%lld", cu_dev_name(d), cu_dt_name(dt), (long long)n);
        clt_tensor *A = tens(a, dt, 2, (int64_t[]){n, n}, d);
        clt_tensor *B = tens(b, dt, 2, (int64_t[]){n, k}, d);
        clt_tensor *X, *LU, *piv, *X2, *I, *D, *sg, *la;
        CU_OK(clt_linalg_solve(A, B, &X));
        ck_assert_ptr_eq(clt_tensor_device(X), d);
        CU_OK(clt_linalg_lu_factor(A, &LU, &piv));
        ck_assert_int_eq(clt_tensor_dtype(piv), CLT_I32);
        CU_OK(clt_linalg_lu_solve(LU, piv, B, &X2));
        CU_OK(clt_linalg_inv(A, &I));
        CU_OK(clt_linalg_det(A, &D));
        CU_OK(clt_linalg_slogdet(A, &sg, &la));
        double *ah = cu_read_double(A), *bh = cu_read_double(B), *xh = cu_read_double(X);
        double *x2 = cu_read_double(X2), *ih = cu_read_double(I);
        double tol = 50 * (double)n * eps_of(dt), na = norm(ah, n * n);
        double e1 = resid(ah, false, xh, bh, n, n, k) / (na * norm(xh, n * k));
        double e2 = resid(ah, false, x2, bh, n, n, k) / (na * norm(x2, n * k));
        double *eye = cu_malloc(sizeof(double) * (size_t)(n * n));
        for (int64_t i = 0; i < n * n; i++)
          eye[i] = i % (n + 1) == 0;
        double e3 = resid(ah, false, ih, eye, n, n, n) / (na * norm(ih, n * n));
        TOL(e1 <= tol, "%s: solve residual %g > %g", what, e1, tol);
        TOL(e2 <= tol, "%s: lu_solve residual %g > %g", what, e2, tol);
        TOL(e3 <= tol, "%s: inv residual %g > %g", what, e3, tol);
        double det = cu_item(D), s = cu_item(sg), l = cu_item(la);
        TOL(s == 1 || s == -1, "%s: slogdet sign %g", what, s);
        TOL(fabs(det - s * exp(l)) <= 1e3 * eps_of(dt) * fabs(det),
            "%s: det %.17g, slogdet gives %.17g", what, det, s * exp(l));
        if (di == 0) {
          host[0] = clt_tensor_retain(X);
          host[1] = clt_tensor_retain(I);
          host[2] = clt_tensor_retain(LU);
          host[3] = clt_tensor_retain(la);
        } else if (host[0]) {
          assert_same_bits(X, host[0], what);
          assert_same_bits(I, host[1], what);
          assert_same_bits(LU, host[2], what);
          assert_same_bits(la, host[3], what);
        }
        free(eye);
        free(ah), free(bh), free(xh), free(x2), free(ih);
        clt_tensor *ts[] = {A, B, X, LU, piv, X2, I, D, sg, la};
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
          clt_tensor_release(ts[i]);
      }
      for (int i = 0; i < 4; i++)
        clt_tensor_release(host[i]);
      free(a);
      free(b);
    }
  /* one larger system on the host: LAPACK's blocked code paths */
  cu_rng r;
  cu_rng_seed(&r, 257);
  int64_t n = 257;
  double *a = gen(&r, 1, n, n, 1), *b = gen(&r, 1, n, 1, 0);
  clt_tensor *A = tens(a, CLT_F64, 2, (int64_t[]){n, n}, clt_cpu());
  clt_tensor *B = tens(b, CLT_F64, 1, (int64_t[]){n}, clt_cpu()), *X;
  CU_OK(clt_linalg_solve(A, B, &X));
  ck_assert_int_eq(clt_tensor_ndim(X), 1);
  double *xh = cu_read_double(X);
  double e = resid(a, false, xh, b, n, n, 1) / (norm(a, n * n) * norm(xh, n));
  TOL(e <= 50 * (double)n * DBL_EPSILON, "n=257: solve residual %g", e);
  free(xh), free(a), free(b);
  clt_tensor_release(A), clt_tensor_release(B), clt_tensor_release(X);
}
END_TEST

/* ---- cholesky, eigh, solve_triangular on SPD matrices ------------------------------------------
 */

START_TEST(test_spd_residuals) {
  if (!lapack_ok("test_spd_residuals"))
    return;
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const int64_t sizes[] = {1, 2, 17, 64};
  for (int t = 0; t < 2; t++)
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      clt_dtype dt = dts[t];
      int64_t n = sizes[si], k = 2;
      cu_rng r;
      cu_rng_seed(&r, 200 + (uint64_t)n);
      double *a = gen(&r, 1, n, n, 2), *b = gen(&r, 1, n, k, 0), *bt = gen(&r, 1, k, n, 0);
      clt_tensor *host[3] = {NULL};
      for (int di = 0; di < nd; di++) {
        clt_device *d = devs[di];
        if (!cu_dtype_ok("test_spd_residuals", d, dt) || (cu_is_oclgrind(d) && n > 17))
          continue;
        char what[96];
        snprintf(what, sizeof what, "%s %s n=%lld", cu_dev_name(d), cu_dt_name(dt), (long long)n);
        double tol = 50 * (double)n * eps_of(dt);
        clt_tensor *A = tens(a, dt, 2, (int64_t[]){n, n}, d);
        clt_tensor *B = tens(b, dt, 2, (int64_t[]){n, k}, d);
        clt_tensor *Bt = tens(bt, dt, 2, (int64_t[]){k, n}, d);
        clt_tensor *L, *U, *w, *V, *w2, *X, *Y, *Z;
        CU_OK(clt_linalg_cholesky(A, 0, &L));
        CU_OK(clt_linalg_cholesky(A, 1, &U));
        CU_OK(clt_linalg_eigh(A, &w, &V));
        CU_OK(clt_linalg_eigh(A, &w2, NULL));
        CU_OK(clt_linalg_solve_triangular(L, B, 0, 1, 0, &X));  /* L X = B */
        CU_OK(clt_linalg_solve_triangular(U, Bt, 1, 0, 0, &Y)); /* Y U = Bt */
        CU_OK(clt_linalg_solve_triangular(L, B, 0, 1, 1, &Z));  /* unit diagonal */
        double *ah = cu_read_double(A), *lh = cu_read_double(L), *uh = cu_read_double(U);
        double *wh = cu_read_double(w), *vh = cu_read_double(V), *w2h = cu_read_double(w2);
        double *bh = cu_read_double(B), *bth = cu_read_double(Bt), *xh = cu_read_double(X);
        double *yh = cu_read_double(Y), *zh = cu_read_double(Z);
        double na = norm(ah, n * n);
        /* L L^T = A, U^T U = A, zeros off the triangle */
        double *lt = cu_malloc(sizeof(double) * (size_t)(n * n));
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < n; j++) {
            lt[j * n + i] = lh[i * n + j];
            if (j > i)
              TOL(lh[i * n + j] == 0 && uh[j * n + i] == 0, "%s: nonzero off the triangle", what);
          }
        double e = resid(lh, false, lt, ah, n, n, n) / na;
        TOL(e <= tol, "%s: L L^T - A: %g > %g", what, e, tol);
        e = resid(uh, true, uh, ah, n, n, n) / na;
        TOL(e <= tol, "%s: U^T U - A: %g > %g", what, e, tol);
        /* A V = V diag(w), V orthonormal, w ascending and equal without vectors */
        double s = 0;
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < n; j++) {
            double v = -vh[i * n + j] * wh[j];
            for (int64_t q = 0; q < n; q++)
              v += ah[i * n + q] * vh[q * n + j];
            s += v * v;
          }
        TOL(sqrt(s) / na <= tol, "%s: A V - V diag(w): %g", what, sqrt(s) / na);
        e = orth(vh, n, n);
        TOL(e <= tol, "%s: V^T V - I: %g", what, e);
        for (int64_t i = 0; i < n; i++) {
          TOL(i == 0 || wh[i] >= wh[i - 1], "%s: eigenvalues not ascending at %lld", what,
              (long long)i);
          TOL(fabs(wh[i] - w2h[i]) <= tol * fabs(wh[n - 1]), "%s: values without vectors differ",
              what);
        }
        /* L X = B, Y U = Bt; with a unit diagonal, the strictly lower part only */
        e = resid(lh, false, xh, bh, n, n, k) / (norm(lh, n * n) * norm(xh, n * k));
        TOL(e <= tol, "%s: L X - B: %g", what, e);
        e = resid(yh, false, uh, bth, k, n, n) / (norm(uh, n * n) * norm(yh, n * k));
        TOL(e <= tol, "%s: Y U - Bt: %g", what, e);
        for (int64_t i = 0; i < n; i++)
          lt[i * n + i] = 1, memcpy(lt + i * n, lh + i * n, sizeof(double) * (size_t)i),
                     memset(lt + i * n + i + 1, 0, sizeof(double) * (size_t)(n - i - 1));
        e = resid(lt, false, zh, bh, n, n, k) / (norm(lt, n * n) * norm(zh, n * k));
        TOL(e <= tol, "%s: unitriangular L X - B: %g", what, e);
        if (di == 0) {
          host[0] = clt_tensor_retain(L);
          host[1] = clt_tensor_retain(V);
          host[2] = clt_tensor_retain(Y);
        } else {
          assert_same_bits(L, host[0], what);
          assert_same_bits(V, host[1], what);
          assert_same_bits(Y, host[2], what);
        }
        free(lt);
        double *fr[] = {ah, lh, uh, wh, vh, w2h, bh, bth, xh, yh, zh};
        for (size_t i = 0; i < sizeof fr / sizeof *fr; i++)
          free(fr[i]);
        clt_tensor *ts[] = {A, B, Bt, L, U, w, V, w2, X, Y, Z};
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
          clt_tensor_release(ts[i]);
      }
      for (int i = 0; i < 3; i++)
        clt_tensor_release(host[i]);
      free(a), free(b), free(bt);
    }
}
END_TEST

/* ---- qr, svd, lstsq on rectangular matrices
 * ------------------------------------------------------ */

START_TEST(test_rect_residuals) {
  if (!lapack_ok("test_rect_residuals"))
    return;
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const int64_t shapes[][2] = {{1, 1}, {5, 3}, {3, 5}, {17, 17}, {64, 20}};
  for (int t = 0; t < 2; t++)
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
      clt_dtype dt = dts[t];
      int64_t m = shapes[si][0], n = shapes[si][1], kk = m < n ? m : n, nr = 2;
      cu_rng r;
      cu_rng_seed(&r, 300 + (uint64_t)(m * 100 + n));
      double *a = gen(&r, 1, m, n, 0), *b = gen(&r, 1, m, nr, 0);
      for (int64_t i = 0; i < kk; i++)
        a[i * n + i] += (double)kk; /* full rank, well conditioned */
      for (int di = 0; di < nd; di++) {
        clt_device *d = devs[di];
        if (!cu_dtype_ok("test_rect_residuals", d, dt) || (cu_is_oclgrind(d) && m > 17))
          continue;
        char what[96];
        snprintf(what, sizeof what, "%s %s %lldx%lld", cu_dev_name(d), cu_dt_name(dt), (long long)m,
                 (long long)n);
        int64_t big = m > n ? m : n;
        double tol = 50 * (double)big * eps_of(dt);
        clt_tensor *A = tens(a, dt, 2, (int64_t[]){m, n}, d);
        clt_tensor *B = tens(b, dt, 2, (int64_t[]){m, nr}, d);
        clt_tensor *Q, *R, *U, *S, *Vh, *Uf, *Sf, *Vf, *S2, *X;
        CU_OK(clt_linalg_qr(A, &Q, &R));
        CU_OK(clt_linalg_svd(A, 0, &U, &S, &Vh));
        CU_OK(clt_linalg_svd(A, 1, &Uf, &Sf, &Vf));
        CU_OK(clt_linalg_svd(A, 0, NULL, &S2, NULL));
        const int64_t *qs = clt_tensor_shape(Q), *rs = clt_tensor_shape(R);
        ck_assert(qs[0] == m && qs[1] == kk && rs[0] == kk && rs[1] == n);
        ck_assert(clt_tensor_shape(U)[1] == kk && clt_tensor_shape(Vh)[0] == kk);
        ck_assert(clt_tensor_shape(Uf)[1] == m && clt_tensor_shape(Vf)[0] == n);
        double *ah = cu_read_double(A), *qh = cu_read_double(Q), *rh = cu_read_double(R);
        double *uh = cu_read_double(U), *sh = cu_read_double(S), *vh = cu_read_double(Vh);
        double *ufh = cu_read_double(Uf), *vfh = cu_read_double(Vf), *s2 = cu_read_double(S2);
        double na = norm(ah, m * n), e;
        e = resid(qh, false, rh, ah, m, kk, n) / na;
        TOL(e <= tol, "%s: Q R - A: %g", what, e);
        e = orth(qh, m, kk);
        TOL(e <= tol, "%s: Q^T Q - I: %g", what, e);
        for (int64_t i = 0; i < kk; i++)
          for (int64_t j = 0; j < i && j < n; j++)
            TOL(rh[i * n + j] == 0, "%s: R not upper triangular", what);
        /* U diag(S) Vh = A */
        double *us = cu_malloc(sizeof(double) * (size_t)(m * kk));
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < kk; j++)
            us[i * kk + j] = uh[i * kk + j] * sh[j];
        e = resid(us, false, vh, ah, m, kk, n) / na;
        TOL(e <= tol, "%s: U S Vh - A: %g", what, e);
        TOL(orth(uh, m, kk) <= tol && orth(ufh, m, m) <= tol, "%s: U not orthonormal", what);
        double *vt = cu_malloc(sizeof(double) * (size_t)(n * n));
        for (int64_t i = 0; i < n; i++)
          for (int64_t j = 0; j < n; j++)
            vt[j * n + i] = vfh[i * n + j];
        TOL(orth(vt, n, n) <= tol, "%s: Vh (full) not orthonormal", what);
        for (int64_t i = 0; i < kk; i++) {
          TOL(sh[i] >= 0 && (i == 0 || sh[i] <= sh[i - 1]), "%s: S not descending", what);
          TOL(fabs(sh[i] - s2[i]) <= tol * sh[0], "%s: svdvals differ", what);
        }
        if (m >= n) { /* least squares: A^T (A X - B) = 0 */
          CU_OK(clt_linalg_lstsq(A, B, &X));
          double *xh = cu_read_double(X), *bh = cu_read_double(B);
          double *rr = cu_malloc(sizeof(double) * (size_t)(m * nr));
          for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < nr; j++) {
              double v = -bh[i * nr + j];
              for (int64_t q = 0; q < n; q++)
                v += ah[i * n + q] * xh[q * nr + j];
              rr[i * nr + j] = v;
            }
          e = resid(ah, true, rr, NULL, n, m, nr) / (na * na * norm(xh, n * nr));
          TOL(e <= tol, "%s: lstsq normal equations: %g", what, e);
          free(xh), free(bh), free(rr);
          clt_tensor_release(X);
        }
        free(us), free(vt);
        double *fr[] = {ah, qh, rh, uh, sh, vh, ufh, vfh, s2};
        for (size_t i = 0; i < sizeof fr / sizeof *fr; i++)
          free(fr[i]);
        clt_tensor *ts[] = {A, B, Q, R, U, S, Vh, Uf, Sf, Vf, S2};
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
          clt_tensor_release(ts[i]);
      }
      free(a), free(b);
    }
}
END_TEST

/* ---- fixed matrices: NumPy's values ------------------------------------------------------------
 */

START_TEST(test_numpy_values) {
  if (!lapack_ok("test_numpy_values"))
    return;
  /* numpy 1.24 (Debian 12), float64 */
  const double a[9] = {4, 1, 2, 1, 5, 3, 2, 3, 6}, b[3] = {1, 2, 3};
  const double chol[9] = {
      2, 0, 0, 0.5, 2.179449471770337, 0, 1, 1.1470786693528088, 1.9194297398747862};
  const double w[3] = {2.194397167422409, 3.3867701566075485, 9.418832675970037};
  const double inv[9] = {0.3,
                         0,
                         -0.1,
                         0,
                         0.2857142857142857,
                         -0.14285714285714282,
                         -0.1,
                         -0.14285714285714285,
                         0.2714285714285714};
  const double x[3] = {0, 1.0 / 7, 3.0 / 7}; /* exact: numpy gives -6.9e-18, 1/7, 3/7 */
  const double r32[6] = {1, 2, 3, 4, 5, 6}, sv[2] = {9.525518091565107, 0.5143005806586443};
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int di = 0; di < nd; di++) {
    clt_device *d = devs[di];
    if (!cu_dtype_ok("test_numpy_values", d, CLT_F64))
      continue;
    clt_tensor *A = tens(a, CLT_F64, 2, (int64_t[]){3, 3}, d);
    clt_tensor *B = tens(b, CLT_F64, 1, (int64_t[]){3}, d);
    clt_tensor *M = tens(r32, CLT_F64, 2, (int64_t[]){3, 2}, d);
    clt_tensor *X, *L, *W, *I, *D, *S;
    CU_OK(clt_linalg_solve(A, B, &X));
    CU_OK(clt_linalg_cholesky(A, 0, &L));
    CU_OK(clt_linalg_eigh(A, &W, NULL));
    CU_OK(clt_linalg_inv(A, &I));
    CU_OK(clt_linalg_det(A, &D));
    CU_OK(clt_linalg_svd(M, 0, NULL, &S, NULL));
    double *xh = cu_read_double(X), *lh = cu_read_double(L), *wh = cu_read_double(W);
    double *ih = cu_read_double(I), *sh = cu_read_double(S);
    for (int i = 0; i < 9; i++) {
      TOL(fabs(lh[i] - chol[i]) <= 1e-15 * 4, "%s: cholesky[%d] %.17g, NumPy %.17g", cu_dev_name(d),
          i, lh[i], chol[i]);
      TOL(fabs(ih[i] - inv[i]) <= 1e-15, "%s: inv[%d] %.17g, NumPy %.17g", cu_dev_name(d), i, ih[i],
          inv[i]);
    }
    for (int i = 0; i < 3; i++) {
      TOL(fabs(xh[i] - x[i]) <= 1e-15, "%s: solve[%d] %.17g", cu_dev_name(d), i, xh[i]);
      TOL(fabs(wh[i] - w[i]) <= 1e-14, "%s: eigh[%d] %.17g, NumPy %.17g", cu_dev_name(d), i, wh[i],
          w[i]);
    }
    for (int i = 0; i < 2; i++)
      TOL(fabs(sh[i] - sv[i]) <= 1e-14, "%s: svd[%d] %.17g, NumPy %.17g", cu_dev_name(d), i, sh[i],
          sv[i]);
    TOL(fabs(cu_item(D) - 70) <= 1e-12, "%s: det %.17g, NumPy 69.99999999999996", cu_dev_name(d),
        cu_item(D));
    free(xh), free(lh), free(wh), free(ih), free(sh);
    clt_tensor *ts[] = {A, B, M, X, L, W, I, D, S};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
      clt_tensor_release(ts[i]);
  }
}
END_TEST

/* ---- edges ------------------------------------------------------------------------------------
 */

static void assert_shape(const clt_tensor *t, int nd, const int64_t *shape, const char *what) {
  ck_assert_msg(clt_tensor_ndim(t) == nd, "%s: %d dimensions, expected %d", what,
                clt_tensor_ndim(t), nd);
  for (int i = 0; i < nd; i++)
    ck_assert_msg(clt_tensor_shape(t)[i] == shape[i], "%s: dimension %d is %lld, expected %lld",
                  what, i, (long long)clt_tensor_shape(t)[i], (long long)shape[i]);
}

START_TEST(test_edges) {
  if (!lapack_ok("test_edges"))
    return;
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int di = 0; di < nd; di++) {
    clt_device *d = devs[di];
    if (!cu_dtype_ok("test_edges", d, CLT_F64))
      continue;
    const char *dn = cu_dev_name(d);
    clt_tensor *o1, *o2, *o3;
    /* 0 x 0 and batches of 0 */
    clt_tensor *Z, *ZB, *E, *EB;
    CU_OK(clt_zeros(CLT_F64, 2, (int64_t[]){0, 0}, d, &Z));
    CU_OK(clt_zeros(CLT_F64, 2, (int64_t[]){0, 4}, d, &ZB));
    CU_OK(clt_zeros(CLT_F64, 3, (int64_t[]){0, 3, 3}, d, &E));
    CU_OK(clt_zeros(CLT_F64, 3, (int64_t[]){0, 3, 2}, d, &EB));
    CU_OK(clt_linalg_solve(Z, ZB, &o1));
    assert_shape(o1, 2, (int64_t[]){0, 4}, "solve 0x0");
    clt_tensor_release(o1);
    CU_OK(clt_linalg_det(Z, &o1));
    TOL(cu_item(o1) == 1, "%s: det of 0x0 is %g", dn, cu_item(o1));
    clt_tensor_release(o1);
    CU_OK(clt_linalg_slogdet(Z, &o1, &o2));
    TOL(cu_item(o1) == 1 && cu_item(o2) == 0, "%s: slogdet of 0x0", dn);
    clt_tensor_release(o1), clt_tensor_release(o2);
    CU_OK(clt_linalg_inv(Z, &o1));
    assert_shape(o1, 2, (int64_t[]){0, 0}, "inv 0x0");
    clt_tensor_release(o1);
    CU_OK(clt_linalg_eigh(Z, &o1, &o2));
    assert_shape(o1, 1, (int64_t[]){0}, "eigh 0x0");
    clt_tensor_release(o1), clt_tensor_release(o2);
    CU_OK(clt_linalg_solve(E, EB, &o1));
    assert_shape(o1, 3, (int64_t[]){0, 3, 2}, "solve of a batch of 0");
    clt_tensor_release(o1);
    CU_OK(clt_linalg_det(E, &o1));
    assert_shape(o1, 1, (int64_t[]){0}, "det of a batch of 0");
    clt_tensor_release(o1);
    CU_OK(clt_linalg_cholesky(E, 0, &o1));
    assert_shape(o1, 3, (int64_t[]){0, 3, 3}, "cholesky of a batch of 0");
    clt_tensor_release(o1);
    CU_OK(clt_linalg_svd(ZB, 1, &o1, &o2, &o3)); /* 0 x 4, full: U 0x0, S (0), Vh the 4x4 I */
    assert_shape(o3, 2, (int64_t[]){4, 4}, "svd 0x4 Vh");
    double *vh = cu_read_double(o3);
    for (int i = 0; i < 16; i++)
      TOL(vh[i] == (i % 5 == 0), "%s: svd of 0x4: Vh is not the identity", dn);
    free(vh);
    clt_tensor_release(o1), clt_tensor_release(o2), clt_tensor_release(o3);
    clt_tensor_release(Z), clt_tensor_release(ZB), clt_tensor_release(E), clt_tensor_release(EB);

    /* 1 x 1 */
    clt_tensor *one = tens((double[]){2}, CLT_F64, 2, (int64_t[]){1, 1}, d);
    clt_tensor *four = tens((double[]){4}, CLT_F64, 1, (int64_t[]){1}, d);
    CU_OK(clt_linalg_solve(one, four, &o1));
    TOL(cu_item(o1) == 2, "%s: 2 x = 4 gives %g", dn, cu_item(o1));
    clt_tensor_release(o1);
    o1 = CU_SENTINEL;
    CU_FAILS(clt_linalg_cholesky(four, 0, &o1), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_cholesky");
    ck_assert_ptr_eq(o1, CU_SENTINEL);
    clt_tensor_release(one), clt_tensor_release(four);

    /* the Hilbert matrix of order 12: solve finishes, the residual is small even where the
     * error is not */
    if (!cu_is_oclgrind(d)) {
      double h[144], ones[12];
      for (int i = 0; i < 12; i++) {
        ones[i] = 1;
        for (int j = 0; j < 12; j++)
          h[i * 12 + j] = 1.0 / (i + j + 1);
      }
      clt_tensor *H = tens(h, CLT_F64, 2, (int64_t[]){12, 12}, d);
      clt_tensor *b1 = tens(ones, CLT_F64, 1, (int64_t[]){12}, d);
      CU_OK(clt_linalg_solve(H, b1, &o1));
      double *xh = cu_read_double(o1);
      double e = resid(h, false, xh, ones, 12, 12, 1) / (norm(h, 144) * norm(xh, 12));
      TOL(e <= 50 * 12 * DBL_EPSILON, "%s: Hilbert 12: residual %g", dn, e);
      free(xh);
      clt_tensor_release(o1), clt_tensor_release(H), clt_tensor_release(b1);
    }

    /* rank-deficient least squares: A x ~ b with A's columns equal: the least-norm best fit */
    const double rd[6] = {1, 1, 1, 1, 1, 1}, rb[3] = {1, 2, 3};
    clt_tensor *RA = tens(rd, CLT_F64, 2, (int64_t[]){3, 2}, d);
    clt_tensor *RB = tens(rb, CLT_F64, 2, (int64_t[]){3, 1}, d);
    CU_OK(clt_linalg_lstsq(RA, RB, &o1));
    double *xh = cu_read_double(o1);
    TOL(fabs(xh[0] - 1) <= 1e-12 && fabs(xh[1] - 1) <= 1e-12,
        "%s: rank-deficient lstsq gives [%.17g, %.17g], expected [1, 1]", dn, xh[0], xh[1]);
    free(xh);
    clt_tensor_release(o1), clt_tensor_release(RA), clt_tensor_release(RB);

    /* singular and indefinite: errors that say why, and where in the batch */
    const double sing[8] = {1, 0, 0, 1, 1, 2, 2, 4}, ind[4] = {1, 2, 2, 1};
    clt_tensor *S1 = tens(sing + 4, CLT_F64, 2, (int64_t[]){2, 2}, d);
    clt_tensor *S2 = tens(sing, CLT_F64, 3, (int64_t[]){2, 2, 2}, d);
    clt_tensor *IN = tens(ind, CLT_F64, 2, (int64_t[]){2, 2}, d);
    clt_tensor *bb = tens(rb, CLT_F64, 1, (int64_t[]){2}, d);
    o1 = CU_SENTINEL;
    CU_FAILS(clt_linalg_solve(S1, bb, &o1), CLT_ERR_LINALG, "clt_linalg_solve");
    ck_assert_ptr_eq(o1, CU_SENTINEL);
    ck_assert_msg(strstr(clt_last_error(), "singular") && strstr(clt_last_error(), "U[1,1]"), "%s",
                  clt_last_error());
    CU_FAILS(clt_linalg_inv(S2, &o1), CLT_ERR_LINALG, "clt_linalg_inv");
    ck_assert_msg(strstr(clt_last_error(), "batch element 1"), "%s", clt_last_error());
    CU_FAILS(clt_linalg_lu_factor(S1, &o1, &o2), CLT_ERR_LINALG, "clt_linalg_lu_factor");
    CU_FAILS(clt_linalg_cholesky(IN, 0, &o1), CLT_ERR_LINALG, "clt_linalg_cholesky");
    ck_assert_msg(strstr(clt_last_error(), "not positive-definite") &&
                      strstr(clt_last_error(), "order 2"),
                  "%s", clt_last_error());
    CU_OK(clt_linalg_det(S1, &o1));
    TOL(cu_item(o1) == 0, "%s: det of a singular matrix is %g", dn, cu_item(o1));
    clt_tensor_release(o1);
    CU_OK(clt_linalg_slogdet(S1, &o1, &o2));
    TOL(cu_item(o1) == 0 && isinf(cu_item(o2)) && cu_item(o2) < 0, "%s: slogdet of singular", dn);
    clt_tensor_release(o1), clt_tensor_release(o2);
    CU_OK(clt_linalg_det(IN, &o1));
    TOL(cu_item(o1) == -3, "%s: det of [[1,2],[2,1]] is %g", dn, cu_item(o1));
    clt_tensor_release(o1);
    /* slogdet's sign stays 0 once a pivot is 0 (not -0 after a later negative one) */
    const double z2[4] = {0, 1, 0, -1};
    clt_tensor *Z2 = tens(z2, CLT_F64, 2, (int64_t[]){2, 2}, d);
    CU_OK(clt_linalg_slogdet(Z2, &o1, &o2));
    TOL(cu_item(o1) == 0 && !signbit(cu_item(o1)), "%s: slogdet sign of [[0,1],[0,-1]] is %g", dn,
        cu_item(o1));
    clt_tensor_release(o1), clt_tensor_release(o2), clt_tensor_release(Z2);
    /* batches of 0 whose other dimensions multiply past 2^63; B wider than LAPACK takes */
    clt_tensor *HB, *b22, *wide, *one11;
    CU_OK(clt_zeros(CLT_F64, 5, (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 30, 0, 2, 2}, d, &HB));
    b22 = tens(z2, CLT_F64, 2, (int64_t[]){2, 2}, d);
    CU_OK(clt_linalg_solve(HB, b22, &o1));
    assert_shape(o1, 5, (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 30, 0, 2, 2}, "huge empty");
    clt_tensor_release(o1);
    CU_OK(clt_linalg_det(HB, &o1));
    assert_shape(o1, 3, (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 30, 0}, "det of huge empty");
    clt_tensor_release(o1);
    one11 = tens((double[]){1}, CLT_F64, 2, (int64_t[]){1, 1}, d);
    CU_OK(clt_expand(one11, 2, (int64_t[]){1, (int64_t)1 << 31}, &wide));
    o1 = CU_SENTINEL;
    CU_FAILS(clt_linalg_solve(one11, wide, &o1), CLT_ERR_UNSUPPORTED, "clt_linalg_solve");
    ck_assert_ptr_eq(o1, CU_SENTINEL);
    clt_tensor_release(HB), clt_tensor_release(b22), clt_tensor_release(wide),
        clt_tensor_release(one11);
    /* eigh reads the lower triangle only: NaN above it is not its business */
    const double up[4] = {2, NAN, 1, 3};
    clt_tensor *UP = tens(up, CLT_F64, 2, (int64_t[]){2, 2}, d);
    CU_OK(clt_linalg_eigh(UP, &o1, NULL));
    double *wv = cu_read_double(o1);
    TOL(fabs(wv[0] + wv[1] - 5) <= 1e-14 && fabs(wv[0] * wv[1] - 5) <= 1e-13,
        "%s: eigh of [[2,.],[1,3]] gives %g %g", dn, wv[0], wv[1]);
    free(wv);
    clt_tensor_release(o1), clt_tensor_release(UP);
    /* NaN: a result or an error, never a hang */
    const double nn[4] = {NAN, 1, 1, 2};
    clt_tensor *NA = tens(nn, CLT_F64, 2, (int64_t[]){2, 2}, d);
    clt_status st = clt_linalg_solve(NA, bb, &o1);
    ck_assert(st == CLT_OK || st == CLT_ERR_LINALG);
    if (st == CLT_OK) {
      double *v = cu_read_double(o1);
      TOL(isnan(v[0]) || isnan(v[1]), "%s: solve of NaN gives numbers", dn);
      free(v);
      clt_tensor_release(o1);
    }
    st = clt_linalg_cholesky(NA, 0, &o1);
    ck_assert(st == CLT_OK || st == CLT_ERR_LINALG);
    if (st == CLT_OK)
      clt_tensor_release(o1);
    st = clt_linalg_eigh(NA, &o1, NULL);
    ck_assert(st == CLT_OK || st == CLT_ERR_LINALG);
    if (st == CLT_OK)
      clt_tensor_release(o1);
    st = clt_linalg_svd(NA, 0, NULL, &o1, NULL);
    ck_assert(st == CLT_OK || st == CLT_ERR_LINALG);
    if (st == CLT_OK)
      clt_tensor_release(o1);
    clt_tensor *ts[] = {S1, S2, IN, bb, NA};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
      clt_tensor_release(ts[i]);
  }
}
END_TEST

/* ---- batches, views, lazy operands
 * --------------------------------------------------------------- */

START_TEST(test_batches_and_views) {
  if (!lapack_ok("test_batches_and_views"))
    return;
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  cu_rng r;
  cu_rng_seed(&r, 77);
  double *a = gen(&r, 2, 3, 3, 1), *b = gen(&r, 4, 3, 2, 0);
  for (int di = 0; di < nd; di++) {
    clt_device *d = devs[di];
    if (!cu_dtype_ok("test_batches_and_views", d, CLT_F64))
      continue;
    const char *dn = cu_dev_name(d);
    /* A (2,1,3,3) with B (4,3,2): X (2,4,3,2), each the solve of its own pair */
    clt_tensor *A = tens(a, CLT_F64, 4, (int64_t[]){2, 1, 3, 3}, d);
    clt_tensor *B = tens(b, CLT_F64, 3, (int64_t[]){4, 3, 2}, d), *X;
    CU_OK(clt_linalg_solve(A, B, &X));
    assert_shape(X, 4, (int64_t[]){2, 4, 3, 2}, "broadcast solve");
    double *xh = cu_read_double(X);
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 4; j++) {
        clt_tensor *Ai = tens(a + i * 9, CLT_F64, 2, (int64_t[]){3, 3}, d);
        clt_tensor *Bj = tens(b + j * 6, CLT_F64, 2, (int64_t[]){3, 2}, d), *Xij;
        CU_OK(clt_linalg_solve(Ai, Bj, &Xij));
        double *x1 = cu_read_double(Xij);
        TOL(memcmp(x1, xh + (i * 4 + j) * 6, sizeof(double) * 6) == 0,
            "%s: batch element (%d,%d) differs from its own solve", dn, i, j);
        free(x1);
        clt_tensor_release(Ai), clt_tensor_release(Bj), clt_tensor_release(Xij);
      }
    free(xh);
    clt_tensor_release(X);
    /* a vector right-hand side per batch element: B's shape is A's without the last */
    clt_tensor *A2, *Bv, *Xv;
    CU_OK(clt_reshape(A, 3, (int64_t[]){2, 3, 3}, &A2));
    Bv = tens(b, CLT_F64, 2, (int64_t[]){2, 3}, d);
    CU_OK(clt_linalg_solve(A2, Bv, &Xv));
    assert_shape(Xv, 2, (int64_t[]){2, 3}, "vector right-hand sides");
    clt_tensor_release(Xv), clt_tensor_release(Bv);
    /* views: a transposed (non-contiguous) operand gives what its copy gives */
    clt_tensor *T, *Tc, *Bm, *X1, *X2, *X3;
    CU_OK(clt_transpose(A2, 1, 2, &T));
    CU_OK(clt_contiguous(T, &Tc));
    Bm = tens(b, CLT_F64, 3, (int64_t[]){2, 3, 2}, d);
    CU_OK(clt_linalg_solve(T, Bm, &X1));
    CU_OK(clt_linalg_solve(Tc, Bm, &X2));
    assert_same_bits(X1, X2, "a transposed view");
    /* lazy operands: A * 2 deferred, then solved: X / 2 */
    clt_tensor *A3;
    CU_OK(clt_mul_scalar(A2, 2.0, &A3));
    CU_OK(clt_linalg_solve(A3, Bm, &X3));
    double *x3h = cu_read_double(X3);
    clt_tensor *X4; /* X3 solves 2 A2 X = B: A2's own solution halved */
    CU_OK(clt_linalg_solve(A2, Bm, &X4));
    double *x4h = cu_read_double(X4);
    for (int i = 0; i < 12; i++)
      TOL(fabs(x3h[i] - x4h[i] / 2) <= 1e-14 * fabs(x4h[i]) + 1e-300,
          "%s: solve of a deferred 2A: %.17g, expected %.17g", dn, x3h[i], x4h[i] / 2);
    free(x3h), free(x4h);
    clt_tensor *ts[] = {A, B, A2, T, Tc, Bm, X1, X2, X3, X4, A3};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
      clt_tensor_release(ts[i]);
  }
  free(a), free(b);
}
END_TEST

/* ---- device rules
 * --------------------------------------------------------------------------------- */

START_TEST(test_device_rules) {
  if (!lapack_ok("test_device_rules"))
    return;
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  double a[4] = {2, 1, 1, 3}, b[2] = {1, 2};
  for (int di = 0; di < nd; di++) {
    clt_device *d = devs[di];
    if (!cu_dtype_ok("test_device_rules", d, CLT_F64))
      continue;
    const char *dn = cu_dev_name(d);
    clt_tensor *A = tens(a, CLT_F64, 2, (int64_t[]){2, 2}, d);
    clt_tensor *B = tens(b, CLT_F64, 1, (int64_t[]){2}, d), *X;
    clt_transfer_stats before, after;
    if (d != clt_cpu())
      CU_OK(clt_transfer_stats_get(d, &before));
    int guard = clt_transfer_guard_set(CLT_GUARD_DISALLOW);
    CU_OK(clt_linalg_solve(A, B, &X)); /* the guard is for implicit trips; these are clt's */
    clt_transfer_guard_set((clt_transfer_guard)guard);
    ck_assert_ptr_eq(clt_tensor_device(X), d);
    if (d != clt_cpu()) {
      CU_OK(clt_transfer_stats_get(d, &after));
      TOL(after.internal_count >= before.internal_count + 3,
          "%s: %llu internal trips counted, expected 3 (A, B in, X out)", dn,
          (unsigned long long)(after.internal_count - before.internal_count));
      TOL(after.d2h_count == before.d2h_count && after.h2d_count == before.h2d_count &&
              after.implicit_count == before.implicit_count,
          "%s: the linalg trips were counted as the program's", dn);
    }
    /* operands on two devices: refused, naming both */
    clt_tensor *o = CU_SENTINEL;
    clt_device *other = devs[(di + 1) % nd];
    if (other != d && cu_dtype_ok("test_device_rules", other, CLT_F64)) {
      clt_tensor *B2 = tens(b, CLT_F64, 1, (int64_t[]){2}, other);
      CU_FAILS(clt_linalg_solve(A, B2, &o), CLT_ERR_DEVICE_MISMATCH, "clt_linalg_solve");
      ck_assert(strstr(clt_last_error(), dn) && strstr(clt_last_error(), cu_dev_name(other)));
      ck_assert_ptr_eq(o, CU_SENTINEL);
      clt_tensor_release(B2);
    }
    /* integer and narrow dtypes: refused, naming the cast */
    clt_tensor *Ai, *Ah;
    CU_OK(clt_cast(A, CLT_I32, &Ai));
    CU_FAILS(clt_linalg_inv(Ai, &o), CLT_ERR_DTYPE, "clt_linalg_inv");
    ck_assert(strstr(clt_last_error(), "clt_cast"));
    CU_OK(clt_cast(A, CLT_F16, &Ah));
    CU_FAILS(clt_linalg_det(Ah, &o), CLT_ERR_DTYPE, "clt_linalg_det");
    /* autograd: solve records (check_autograd.c checks its derivative); a routine without a
     * derivative refuses an operand that would record, and takes it with grad mode off */
    clt_tensor *G, *Xr, *Q, *R;
    CU_OK(clt_clone(A, &G));
    CU_OK(clt_requires_grad_(G, 1));
    CU_OK(clt_linalg_solve(G, B, &Xr));
    ck_assert(clt_tensor_requires_grad(Xr));
    CU_FAILS(clt_linalg_solve(G, B, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_solve");
    CU_FAILS(clt_linalg_inv(G, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_inv");
    CU_FAILS(clt_linalg_cholesky(G, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_cholesky");
    CU_FAILS(clt_linalg_det(G, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_det");
    CU_FAILS(clt_linalg_solve_triangular(G, G, 0, 1, 0, NULL), CLT_ERR_INVALID_ARGUMENT,
             "clt_linalg_solve_triangular");
    CU_FAILS(clt_linalg_qr(G, &Q, &R), CLT_ERR_UNSUPPORTED, "clt_linalg_qr");
    ck_assert(strstr(clt_last_error(), "no derivative"));
    int was = clt_set_grad_enabled(0);
    clt_tensor *Xg;
    CU_OK(clt_linalg_solve(G, B, &Xg));
    ck_assert(!clt_tensor_requires_grad(Xg));
    CU_OK(clt_linalg_qr(G, &Q, &R));
    clt_set_grad_enabled(was);
    clt_tensor *ts[] = {A, B, X, Ai, Ah, G, Xg, Xr, Q, R};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
      clt_tensor_release(ts[i]);
  }
}
END_TEST

/* ---- cholesky's hybrid path: panels on the host, updates on the device --------------------------
 */

static char *saved_env(const char *k) { return getenv(k) ? strdup(getenv(k)) : NULL; }

static void restore_env(const char *k, char *v) {
  if (v)
    setenv(k, v, 1);
  else
    unsetenv(k);
  free(v);
}

/* CLT_LINALG=hybrid with blocks of 8 against the whole-matrix path (CLT_LINALG=host), on every
 * OpenCL device, lazy and eager: one block, exactly one, and three ragged ones, in a batch and
 * through a transposed view; the factor's residual, its distance from the other path's, zeros
 * above the diagonal, the upper factor as the lower's transpose, the trips counted as clt's;
 * a matrix that is not positive-definite named at the same minor by both paths. */
START_TEST(test_cholesky_hybrid) {
  if (!lapack_ok("test_cholesky_hybrid"))
    return;
  char *old_path = saved_env("CLT_LINALG"), *old_block = saved_env("CLT_LINALG_BLOCK");
  setenv("CLT_LINALG_BLOCK", "8", 1);
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs), was_lazy = clt_set_lazy(1), tried = 0;
  const int64_t sizes[] = {5, 8, 21}, p = 2;
  for (int lazy = 1; lazy >= 0; lazy--) {
    clt_set_lazy(lazy);
    for (int t = 0; t < 2; t++)
      for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        clt_dtype dt = dts[t];
        int64_t n = sizes[si], shape[3] = {p, n, n};
        cu_rng r;
        cu_rng_seed(&r, 900 + (uint64_t)n);
        double *a = gen(&r, p, n, n, 2);
        for (int di = 0; di < nd; di++) {
          clt_device *d = devs[di];
          if (d == clt_cpu() || !cu_dtype_ok("test_cholesky_hybrid", d, dt))
            continue;
          char what[96];
          snprintf(what, sizeof what, "%s %s n=%lld %s", cu_dev_name(d), cu_dt_name(dt),
                   (long long)n, lazy ? "lazy" : "eager");
          double tol = 50 * (double)n * eps_of(dt);
          clt_tensor *A = tens(a, dt, 3, shape, d), *At, *Lh, *L, *U, *Lv;
          setenv("CLT_LINALG", "host", 1);
          CU_OK(clt_linalg_cholesky(A, 0, &Lh));
          setenv("CLT_LINALG", "hybrid", 1);
          clt_transfer_stats before, after;
          CU_OK(clt_transfer_stats_get(d, &before));
          CU_OK(clt_linalg_cholesky(A, 0, &L));
          CU_OK(clt_transfer_stats_get(d, &after));
          CU_OK(clt_linalg_cholesky(A, 1, &U));
          CU_OK(clt_transpose(A, 1, 2, &At)); /* A is symmetric: the same matrices, other strides */
          CU_OK(clt_linalg_cholesky(At, 0, &Lv));
          TOL(clt_tensor_device(L) == d && clt_tensor_dtype(L) == dt, "%s: device or dtype", what);
          /* per block, its diagonal block down and up, and L11^-T up below the last block */
          uint64_t blocks = (uint64_t)(n + 7) / 8;
          TOL(after.internal_count - before.internal_count == 3 * blocks - 1 &&
                  after.d2h_count == before.d2h_count && after.h2d_count == before.h2d_count &&
                  after.implicit_count == before.implicit_count,
              "%s: the hybrid path's trips were not clt's own, 3 per block but one (internal %llu, "
              "d2h %llu, h2d %llu, implicit %llu)",
              what, (unsigned long long)(after.internal_count - before.internal_count),
              (unsigned long long)(after.d2h_count - before.d2h_count),
              (unsigned long long)(after.h2d_count - before.h2d_count),
              (unsigned long long)(after.implicit_count - before.implicit_count));
          assert_same_bits(Lv, L, what);
          double *ah = cu_read_double(A), *lh = cu_read_double(L), *uh = cu_read_double(U);
          double *hh = cu_read_double(Lh);
          double *lt = cu_malloc(sizeof(double) * (size_t)(n * n));
          for (int64_t b = 0; b < p; b++) {
            const double *ab = ah + b * n * n, *lb = lh + b * n * n, *ub = uh + b * n * n,
                         *hb = hh + b * n * n;
            double diff = 0;
            for (int64_t i = 0; i < n; i++)
              for (int64_t j = 0; j < n; j++) {
                lt[j * n + i] = lb[i * n + j];
                TOL(ub[j * n + i] == lb[i * n + j], "%s: U is not L's transpose at %lld,%lld", what,
                    (long long)i, (long long)j);
                if (j > i)
                  TOL(lb[i * n + j] == 0, "%s: nonzero above the diagonal", what);
                diff += (lb[i * n + j] - hb[i * n + j]) * (lb[i * n + j] - hb[i * n + j]);
              }
            double e = resid(lb, false, lt, ab, n, n, n) / norm(ab, n * n);
            TOL(e <= tol, "%s: batch %lld: L L^T - A: %g > %g", what, (long long)b, e, tol);
            e = sqrt(diff) / norm(hb, n * n);
            TOL(e <= tol, "%s: batch %lld: hybrid and host factors differ by %g > %g", what,
                (long long)b, e, tol);
          }
          /* not positive-definite: batch element 0 from its minor of order 13 (the second
           * block), element 1 from order 3 (the first block, which the hybrid path factors
           * first): both paths name element 0's, as LAPACK over the whole batch does */
          if (n == 21) {
            double *bad = cu_malloc(sizeof(double) * (size_t)(p * n * n));
            memcpy(bad, a, sizeof(double) * (size_t)(p * n * n));
            bad[12 * n + 12] = -1;
            bad[n * n + 2 * n + 2] = -1;
            clt_tensor *B = tens(bad, dt, 3, shape, d), *o = CU_SENTINEL;
            for (int path = 0; path < 2; path++) {
              setenv("CLT_LINALG", path ? "hybrid" : "host", 1);
              CU_FAILS(clt_linalg_cholesky(B, 0, &o), CLT_ERR_LINALG, "clt_linalg_cholesky");
              TOL(strstr(clt_last_error(), "minor of order 13 ") &&
                      strstr(clt_last_error(), "(batch element 0)"),
                  "%s: %s", what, clt_last_error());
              ck_assert_ptr_eq(o, CU_SENTINEL);
            }
            clt_tensor_release(B);
            /* each path reads only its triangle: changes in the other one change nothing */
            for (int up = 0; up < 2; up++) {
              memcpy(bad, a, sizeof(double) * (size_t)(p * n * n));
              for (int64_t q = 0; q < p * n * n; q++) {
                int64_t i = q / n % n, j = q % n;
                if (up ? i > j : i < j)
                  bad[q] += 0.01 * (double)(q % 7 - 3); /* a change of norm < 1: still SPD */
              }
              clt_tensor *G = tens(bad, dt, 3, shape, d), *F[2];
              for (int path = 0; path < 2; path++) {
                setenv("CLT_LINALG", path ? "hybrid" : "host", 1);
                CU_OK(clt_linalg_cholesky(G, up, &F[path]));
              }
              double *f0 = cu_read_double(F[0]), *f1 = cu_read_double(F[1]), e = 0, m = 0;
              for (int64_t q = 0; q < p * n * n; q++) {
                e = fmax(e, fabs(f0[q] - f1[q]));
                m = fmax(m, fabs(f0[q]));
              }
              TOL(e <= tol * m,
                  "%s: %s factor of a matrix with garbage in the other triangle: "
                  "the paths differ by %g",
                  what, up ? "upper" : "lower", e / m);
              free(f0);
              free(f1);
              clt_tensor *ts[] = {G, F[0], F[1]};
              for (size_t i = 0; i < 3; i++)
                clt_tensor_release(ts[i]);
            }
            free(bad);
          }
          tried++;
          free(lt);
          double *fr[] = {ah, lh, uh, hh};
          for (size_t i = 0; i < sizeof fr / sizeof *fr; i++)
            free(fr[i]);
          clt_tensor *ts[] = {A, At, Lh, L, U, Lv};
          for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
            clt_tensor_release(ts[i]);
        }
        free(a);
      }
  }
  /* a value CLT_LINALG does not know is an error that names the choices */
  setenv("CLT_LINALG", "gpu", 1);
  double one = 1;
  clt_tensor *I = cu_tensor(&one, CLT_F64, 2, (int64_t[]){1, 1}, clt_cpu()), *o = CU_SENTINEL;
  CU_FAILS(clt_linalg_cholesky(I, 0, &o), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_cholesky");
  ck_assert(strstr(clt_last_error(), "auto, host or hybrid"));
  clt_tensor_release(I);
  clt_set_lazy(was_lazy);
  restore_env("CLT_LINALG", old_path);
  restore_env("CLT_LINALG_BLOCK", old_block);
  if (!tried)
    cu_skip("test_cholesky_hybrid", "no OpenCL device");
}
END_TEST

/* ---- norm, cond, matrix_rank, pinv ------------------------------------------------------------
 */

START_TEST(test_norms) {
  if (!lapack_ok("test_norms"))
    return;
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const double m4[4] = {1, -2, 3, 4}, v2[2] = {3, -4}, r1[4] = {1, 2, 2, 4};
  for (int t = 0; t < 2; t++)
    for (int di = 0; di < nd; di++) {
      clt_dtype dt = dts[t];
      clt_device *d = devs[di];
      if (!cu_dtype_ok("test_norms", d, dt))
        continue;
      char what[64];
      snprintf(what, sizeof what, "%s %s", cu_dev_name(d), cu_dt_name(dt));
      double tol = dt == CLT_F32 ? 1e-6 : 1e-14;
      clt_tensor *M = tens(m4, dt, 2, (int64_t[]){2, 2}, d);
      clt_tensor *V = tens(v2, dt, 1, (int64_t[]){2}, d);
      clt_tensor *R = tens(r1, dt, 2, (int64_t[]){2, 2}, d), *o;
      /* NumPy: norm(M, 2) 5.116672736016927, "nuc" 7.0710678118654755, cond 2.6180339887498936 */
      const struct {
        clt_tensor *a;
        const char *ord;
        double want;
      } cases[] = {{M, "fro", sqrt(30.0)},
                   {M, "1", 6},
                   {M, "inf", 7},
                   {M, "2", 5.116672736016927},
                   {M, "nuc", 7.0710678118654755},
                   {M, NULL, sqrt(30.0)},
                   {V, "1", 7},
                   {V, "2", 5},
                   {V, "inf", 4},
                   {V, NULL, 5}};
      for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CU_OK(clt_linalg_norm(cases[i].a, cases[i].ord, &o));
        ck_assert_int_eq(clt_tensor_ndim(o), 0);
        double got = cu_item(o);
        TOL(fabs(got - cases[i].want) <= tol * cases[i].want, "%s: norm %s gives %.17g, not %.17g",
            what, cases[i].ord ? cases[i].ord : "NULL", got, cases[i].want);
        clt_tensor_release(o);
      }
      CU_OK(clt_linalg_cond(M, &o));
      TOL(fabs(cu_item(o) - 2.6180339887498936) <= 10 * tol, "%s: cond %.17g", what, cu_item(o));
      clt_tensor_release(o);
      CU_OK(clt_linalg_matrix_rank(R, &o));
      ck_assert_int_eq(clt_tensor_dtype(o), CLT_I64);
      TOL(cu_item(o) == 1, "%s: rank of [[1,2],[2,4]] is %g", what, cu_item(o));
      clt_tensor_release(o);
      CU_OK(clt_linalg_matrix_rank(M, &o));
      TOL(cu_item(o) == 2, "%s: rank of M is %g", what, cu_item(o));
      clt_tensor_release(o);
      /* pinv: the inverse of an invertible M; (1/6) ones for the rank-1 ones(3, 2) */
      clt_tensor *P, *I;
      CU_OK(clt_linalg_pinv(M, &P));
      CU_OK(clt_linalg_inv(M, &I));
      double *ph = cu_read_double(P), *ih = cu_read_double(I);
      for (int i = 0; i < 4; i++)
        TOL(fabs(ph[i] - ih[i]) <= 10 * tol, "%s: pinv[%d] %.17g, inv %.17g", what, i, ph[i],
            ih[i]);
      free(ph), free(ih);
      clt_tensor_release(P), clt_tensor_release(I);
      const double ones[6] = {1, 1, 1, 1, 1, 1};
      clt_tensor *O = tens(ones, dt, 2, (int64_t[]){3, 2}, d);
      CU_OK(clt_linalg_pinv(O, &P));
      assert_shape(P, 2, (int64_t[]){2, 3}, "pinv of 3x2");
      ph = cu_read_double(P);
      for (int i = 0; i < 6; i++)
        TOL(fabs(ph[i] - 1.0 / 6) <= 10 * tol, "%s: pinv of ones[%d] %.17g", what, i, ph[i]);
      free(ph);
      clt_tensor_release(P), clt_tensor_release(O);
      /* a batch: one norm per matrix */
      clt_tensor *B2, *Bs;
      CU_OK(clt_stack(2, (clt_tensor *[]){M, R}, 0, &B2));
      CU_OK(clt_linalg_norm(B2, "inf", &Bs));
      assert_shape(Bs, 1, (int64_t[]){2}, "batched norm");
      double *bh = cu_read_double(Bs);
      TOL(bh[0] == 7 && bh[1] == 6, "%s: batched inf-norms %g %g", what, bh[0], bh[1]);
      free(bh);
      clt_tensor_release(Bs);
      CU_OK(clt_linalg_matrix_rank(B2, &Bs));
      bh = cu_read_double(Bs);
      TOL(bh[0] == 2 && bh[1] == 1, "%s: batched ranks %g %g", what, bh[0], bh[1]);
      free(bh);
      clt_tensor_release(Bs), clt_tensor_release(B2);
      /* bad ords and shapes */
      o = CU_SENTINEL;
      CU_FAILS(clt_linalg_norm(M, "3", &o), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_norm");
      CU_FAILS(clt_linalg_norm(V, "fro", &o), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_norm");
      ck_assert_ptr_eq(o, CU_SENTINEL);
      clt_tensor_release(M), clt_tensor_release(V), clt_tensor_release(R);
    }
}
END_TEST

Suite *linalg_suite(void) {
  Suite *s = suite_create("linalg");
  TCase *tc = cu_tcase("linalg");
  tcase_add_test(tc, test_solve_residuals);
  tcase_add_test(tc, test_spd_residuals);
  tcase_add_test(tc, test_rect_residuals);
  tcase_add_test(tc, test_numpy_values);
  tcase_add_test(tc, test_edges);
  tcase_add_test(tc, test_batches_and_views);
  tcase_add_test(tc, test_device_rules);
  tcase_add_test(tc, test_cholesky_hybrid);
  tcase_add_test(tc, test_norms);
  suite_add_tcase(s, tc);
  return s;
}
