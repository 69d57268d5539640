/* SPDX-License-Identifier: MIT */
/* cg.c - a conjugate-gradient solver written as a user would (issue 27, "Speed": CG, dense SPD
 * n = 2048, 20 iterations, against the same loop in NumPy: bench/peers.py numpy).
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/cg [--reps N] [--kv]
 *
 * A = M^T M / n + I (n = 2048, f32, M uniform in [-0.5, 0.5), made on the host), b = A 1. From
 * x = 0: r = b, p = r, rr = r.r; 20 times: Ap = A p; alpha = rr / p.Ap; x += alpha p;
 * r -= alpha Ap; rr' = r.r; p = r + (rr' / rr) p. The scalars stay 0-d tensors on the device
 * (nothing is read back inside the loop, as a GPU user would write it); the time ends when x is
 * on the host. Medians of N runs (default 9) after one warm-up, on cpu and on cl:0; the residual
 * |b - A x| / |b| is printed, and must fall below 1e-3 (the solver works). --kv adds
 * "kv cg2048_<dev>_clt_ms value" lines for bench/run.
 */
#define _POSIX_C_SOURCE 200809L
#include <clt.h>

#include <math.h>
#include <stdbool.h>

#define BENCH_NAME "cg"
#include "bench.h"

enum { N = 2048, ITERS = 20, MAX_RUNS = 101 };

static clt_tensor *T(clt_status s, clt_tensor *t) {
  if (s != CLT_OK)
    die("%s", clt_last_error());
  return t;
}

/* out = a + k b, k a 0-d tensor (sign: +1 or -1 applied to k), then a and the temporaries
 * released where asked. */
static clt_tensor *axpy(clt_tensor *a, clt_tensor *k, clt_tensor *b, bool minus) {
  clt_tensor *kb = NULL, *r = NULL;
  T(clt_mul(b, k, &kb), kb);
  T(minus ? clt_sub(a, kb, &r) : clt_add(a, kb, &r), r);
  clt_tensor_release(kb);
  return r;
}

/* Solves A x = b by ITERS steps of CG on A's device; returns x (on the device). */
static clt_tensor *cg(clt_tensor *a, clt_tensor *b) {
  clt_tensor *x = NULL, *r = NULL, *p = NULL, *rr = NULL;
  T(clt_zeros(CLT_F32, 1, (int64_t[]){N}, clt_tensor_device(b), &x), x);
  T(clt_clone(b, &r), r);
  T(clt_clone(b, &p), p);
  T(clt_dot(r, r, &rr), rr);
  for (int it = 0; it < ITERS; it++) {
    clt_tensor *ap = NULL, *pap = NULL, *alpha = NULL, *rr2 = NULL, *beta = NULL, *t;
    T(clt_mv(a, p, &ap), ap);
    T(clt_dot(p, ap, &pap), pap);
    T(clt_div(rr, pap, &alpha), alpha);
    t = axpy(x, alpha, p, false);
    clt_tensor_release(x);
    x = t;
    t = axpy(r, alpha, ap, true);
    clt_tensor_release(r);
    r = t;
    T(clt_dot(r, r, &rr2), rr2);
    T(clt_div(rr2, rr, &beta), beta);
    t = axpy(r, beta, p, false);
    clt_tensor_release(p);
    p = t;
    clt_tensor_release(rr);
    rr = rr2;
    clt_tensor_release(ap);
    clt_tensor_release(pap);
    clt_tensor_release(alpha);
    clt_tensor_release(beta);
  }
  clt_tensor_release(r);
  clt_tensor_release(p);
  clt_tensor_release(rr);
  return x;
}

int main(int argc, char **argv) {
  int runs = 9;
  bool kv = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0 &&
        atoi(argv[i + 1]) <= MAX_RUNS)
      runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--kv") == 0)
      kv = true;
    else
      die("usage: %s [--reps 1..%d] [--kv]", argv[0], MAX_RUNS);
  }
  /* A = M^T M / n + I and b = A 1, on the host */
  float *m = malloc(sizeof(float) * N * N), *ones = malloc(sizeof(float) * N);
  if (!m || !ones)
    die("out of memory");
  uint64_t st = 88172645463325252ull;
  for (int i = 0; i < N * N; i++) {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    m[i] = (float)((double)(st >> 11) / 9007199254740992.0) - 0.5f;
  }
  for (int i = 0; i < N; i++)
    ones[i] = 1;
  clt_tensor *mt = NULL, *mm = NULL, *mtm = NULL, *a0 = NULL, *eye = NULL, *a = NULL;
  clt_tensor *one = NULL, *b = NULL;
  T(clt_from_host(m, CLT_F32, 2, (int64_t[]){N, N}, clt_cpu(), &mm), mm);
  T(clt_transpose(mm, 0, 1, &mt), mt);
  T(clt_matmul(mt, mm, &mtm), mtm);
  T(clt_mul_scalar(mtm, 1.0 / N, &a0), a0);
  T(clt_eye(N, N, CLT_F32, clt_cpu(), &eye), eye);
  T(clt_add(a0, eye, &a), a);
  T(clt_from_host(ones, CLT_F32, 1, (int64_t[]){N}, clt_cpu(), &one), one);
  T(clt_mv(a, one, &b), b);
  clt_device *devs[2] = {clt_cpu(), clt_device_count() > 0 ? clt_device_at(0) : NULL};
  printf("clt %s bench/cg: dense SPD n = %d f32, %d CG iterations, median of %d after 1 warm-up\n",
         clt_version(), N, ITERS, runs);
  for (int d = 0; d < 2 && devs[d]; d++) {
    clt_tensor *ad = NULL, *bd = NULL;
    T(clt_to(a, devs[d], &ad), ad);
    T(clt_to(b, devs[d], &bd), bd);
    double t[MAX_RUNS];
    float *xh = malloc(sizeof(float) * N);
    if (!xh)
      die("out of memory");
    for (int r = -1; r < runs; r++) {
      CLT_CHECK(clt_device_synchronize(devs[d]));
      double t0 = now_s();
      clt_tensor *x = cg(ad, bd);
      CLT_CHECK(clt_tensor_read(x, xh, sizeof(float) * N)); /* waits for the solve */
      double t1 = now_s();
      if (r >= 0)
        t[r] = t1 - t0;
      clt_tensor_release(x);
    }
    /* the residual on the host, in double */
    const float *ah = NULL;
    clt_tensor *ac = NULL;
    T(clt_contiguous(a, &ac), ac);
    if (!(ah = clt_tensor_data(ac)))
      die("clt_tensor_data: %s", clt_last_error());
    double num = 0, den = 0;
    for (int i = 0; i < N; i++) {
      double s = 0, bi = 0;
      for (int j = 0; j < N; j++) {
        s += (double)ah[(size_t)i * N + j] * xh[j];
        bi += (double)ah[(size_t)i * N + j];
      }
      num += (bi - s) * (bi - s);
      den += bi * bi;
    }
    double res = sqrt(num / den), ms = 1e3 * median(t, runs);
    printf("  %-5s  clt CG  %9.3f ms  (%.1f us per iteration), residual %.2e\n",
           clt_device_name(devs[d]), ms, 1e3 * ms / ITERS, res);
    if (!(res < 1e-3))
      die("the residual %.3g on %s: the solver did not converge", res, clt_device_name(devs[d]));
    if (kv)
      printf("kv cg2048_%s_clt_ms %.4f\n", d == 0 ? "cpu" : "cl", ms);
    clt_tensor_release(ac);
    free(xh);
    clt_tensor_release(ad);
    clt_tensor_release(bd);
  }
  clt_tensor *all[] = {mt, mm, mtm, a0, eye, a, one, b};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    clt_tensor_release(all[i]);
  free(m);
  free(ones);
  return 0;
}
