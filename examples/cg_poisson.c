/* SPDX-License-Identifier: MIT */
/* cg_poisson.c - a 2-D Poisson problem as a scientist would write it with clt: -laplace(u) = f
 * on the unit square, u = 0 on its edge, the 5-point stencil on an N x N grid of interior points
 * (h = 1 / (N + 1)) as a dense n x n matrix (n = N^2), solved by conjugate gradients on the
 * device chosen at run time, checked against a direct clt_linalg_solve of the same system and
 * against the exact solution u = x (1 - x) y (1 - y) (f = 2 (x (1 - x) + y (1 - y)); the stencil's
 * differences are exact for it, so the grid values are u's but for rounding), with the time of
 * each.
 *
 *   $ ./examples/cg_poisson                     # N = 24, on the default device (first GPU, else
 * cpu) $ CLT_DEVICE=cl:1 ./examples/cg_poisson 32  # any device by name, any N $
 * ./examples/cg_poisson --no-times 16       # what tests/cxx_examples.sh compares
 *
 * f64 where the device has it, else f32. CG reads its residual back each step to decide when to
 * stop (one small explicit trip per step, in the transfer counters); the matrix-vector products
 * run as gemv on the device. examples/cg_poisson.cpp is the same program with clt.hpp.
 */
#define _POSIX_C_SOURCE 200809L
#include <clt.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "cg_poisson: %s failed: %s\n  %s\n", what, clt_status_name(s),
            clt_last_error());
    exit(1);
  }
}
#define CHECK(call) check((call), #call)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* out = a + k b (k a 0-d tensor; minus: a - k b) */
static clt_tensor *axpy(clt_tensor *a, clt_tensor *k, clt_tensor *b, bool minus) {
  clt_tensor *kb, *r;
  CHECK(clt_mul(b, k, &kb));
  CHECK(minus ? clt_sub(a, kb, &r) : clt_add(a, kb, &r));
  clt_tensor_release(kb);
  return r;
}

int main(int argc, char **argv) {
  bool times = true;
  int N = 24;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--no-times") == 0)
      times = false;
    else if (atoi(argv[i]) >= 2 && atoi(argv[i]) <= 64)
      N = atoi(argv[i]);
    else {
      fprintf(stderr, "usage: %s [--no-times] [N, 2..64]\n", argv[0]);
      return 2;
    }
  }
  clt_device *dev = clt_device_default();
  clt_dtype dt = clt_device_has_fp64(dev) ? CLT_F64 : CLT_F32;
  double tol = dt == CLT_F64 ? 1e-10 : 1e-4;
  int n = N * N;
  double h = 1.0 / (N + 1);

  /* the matrix and the right-hand side, on the host, in double */
  double *a = calloc((size_t)n * (size_t)n, sizeof(double)), *f = malloc(sizeof(double) * n);
  double *exact = malloc(sizeof(double) * n);
  if (!a || !f || !exact) {
    fprintf(stderr, "cg_poisson: out of memory\n");
    return 1;
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      int k = i * N + j;
      a[(size_t)k * n + k] = 4 / (h * h);
      if (i > 0)
        a[(size_t)k * n + k - N] = -1 / (h * h);
      if (i < N - 1)
        a[(size_t)k * n + k + N] = -1 / (h * h);
      if (j > 0)
        a[(size_t)k * n + k - 1] = -1 / (h * h);
      if (j < N - 1)
        a[(size_t)k * n + k + 1] = -1 / (h * h);
      double xi = (i + 1) * h, yj = (j + 1) * h;
      exact[k] = xi * (1 - xi) * yj * (1 - yj);
      f[k] = 2 * (xi * (1 - xi) + yj * (1 - yj));
    }
  clt_tensor *A64, *f64, *A, *b;
  CHECK(clt_from_host(a, CLT_F64, 2, (int64_t[]){n, n}, clt_cpu(), &A64));
  CHECK(clt_from_host(f, CLT_F64, 1, (int64_t[]){n}, clt_cpu(), &f64));
  clt_tensor *Ac, *bc; /* in the device's dtype, then on the device */
  CHECK(clt_cast(A64, dt, &Ac));
  CHECK(clt_cast(f64, dt, &bc));
  CHECK(clt_to(Ac, dev, &A));
  CHECK(clt_to(bc, dev, &b));
  printf("cg_poisson: %d x %d grid, n = %d unknowns, %s on %s\n", N, N, n, clt_dtype_name(dt),
         clt_device_name(dev));

  /* conjugate gradients: x = 0, r = p = b */
  double t0 = now();
  clt_tensor *x, *r, *p, *rr;
  CHECK(clt_zeros(dt, 1, (int64_t[]){n}, dev, &x));
  CHECK(clt_clone(b, &r));
  CHECK(clt_clone(b, &p));
  CHECK(clt_dot(r, r, &rr));
  double bnorm, rnorm;
  CHECK(clt_item(rr, &bnorm));
  bnorm = sqrt(bnorm);
  rnorm = bnorm;
  int it = 0;
  while (rnorm / bnorm > tol && it < n) {
    clt_tensor *ap, *pap, *alpha, *rr2, *beta, *t;
    CHECK(clt_mv(A, p, &ap));
    CHECK(clt_dot(p, ap, &pap));
    CHECK(clt_div(rr, pap, &alpha));
    t = axpy(x, alpha, p, false);
    clt_tensor_release(x);
    x = t;
    t = axpy(r, alpha, ap, true);
    clt_tensor_release(r);
    r = t;
    CHECK(clt_dot(r, r, &rr2));
    CHECK(clt_div(rr2, rr, &beta));
    t = axpy(r, beta, p, false);
    clt_tensor_release(p);
    p = t;
    clt_tensor_release(rr);
    rr = rr2;
    CHECK(clt_item(rr, &rnorm)); /* the one trip home per step: when to stop */
    rnorm = sqrt(rnorm);
    it++;
    clt_tensor_release(ap), clt_tensor_release(pap), clt_tensor_release(alpha),
        clt_tensor_release(beta);
  }
  double t_cg = now() - t0;

  /* the direct solve of the same system, on the same device */
  t0 = now();
  clt_tensor *xd;
  CHECK(clt_linalg_solve(A, b, &xd));
  CHECK(clt_device_synchronize(dev));
  double t_direct = now() - t0;

  /* both on the host, in double: their difference, and each against the exact solution */
  clt_tensor *xh, *xdh, *x64, *xd64;
  CHECK(clt_to(x, clt_cpu(), &xh));
  CHECK(clt_to(xd, clt_cpu(), &xdh));
  CHECK(clt_cast(xh, CLT_F64, &x64));
  CHECK(clt_cast(xdh, CLT_F64, &xd64));
  const double *xc = clt_tensor_data(x64), *xs = clt_tensor_data(xd64);
  if (!xc || !xs)
    check(clt_last_status(), "clt_tensor_data");
  double diff = 0, norm = 0, err_cg = 0, err_direct = 0;
  for (int k = 0; k < n; k++) {
    diff += (xc[k] - xs[k]) * (xc[k] - xs[k]);
    norm += xs[k] * xs[k];
    err_cg = fmax(err_cg, fabs(xc[k] - exact[k]));
    err_direct = fmax(err_direct, fabs(xs[k] - exact[k]));
  }
  double rel = sqrt(diff / norm);
  printf("CG: %d iterations, residual |r| / |b| = %.3g\n", it, rnorm / bnorm);
  printf("CG against clt_linalg_solve: relative difference %.3g\n", rel);
  printf("largest error against the exact solution: CG %.2g, direct %.2g\n", err_cg, err_direct);
  if (times)
    printf("times: CG %.1f ms, clt_linalg_solve %.1f ms\n", 1e3 * t_cg, 1e3 * t_direct);
  bool ok =
      it < n && rel < (dt == CLT_F64 ? 1e-8 : 1e-3) && err_direct < (dt == CLT_F64 ? 1e-10 : 1e-4);
  printf("%s\n", ok ? "ok" : "FAILED: CG and the direct solve disagree");
  clt_tensor *all[] = {A64, f64, Ac, bc, A, b, x, r, p, rr, xd, xh, xdh, x64, xd64};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    clt_tensor_release(all[i]);
  free(a), free(f), free(exact);
  return ok ? 0 : 1;
}
