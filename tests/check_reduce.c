/* SPDX-License-Identifier: MIT */
/* check_reduce.c - clt_sum on every device and dtype against an independent sum. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"
#include "clt-internal.h" /* clt__deferred_launches, clt__background_builds */

static void release_all(clt_tensor **t, size_t n) {
  for (size_t i = 0; i < n; i++)
    clt_tensor_release(t[i]);
}
#define RELEASE(...)                                                                               \
  release_all((clt_tensor *[]){__VA_ARGS__}, sizeof((clt_tensor *[]){__VA_ARGS__}) / sizeof(clt_tensor *))

static clt_dtype sum_dtype(clt_dtype dt) { return cu_is_float(dt) ? dt : CLT_I64; }

/* Sums t (on any device), checks the 0-d result's metadata, returns it as double and int64. */
static void sum_of(clt_tensor *t, double *v, int64_t *iv, const char *what) {
  clt_tensor *s = CU_SENTINEL;
  clt_status st = clt_sum(t, &s);
  ck_assert_msg(st == CLT_OK, "%s: clt_sum: %s: %s", what, clt_status_name(st), clt_last_error());
  cu_assert_meta(s, sum_dtype(clt_tensor_dtype(t)), clt_tensor_device(t), 0, NULL, what);
  CU_OK(clt_item(s, v));
  CU_OK(clt_item_i64(s, iv));
  clt_tensor_release(s);
}

START_TEST(test_sum_dtypes) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  static const int64_t sizes[] = {1, 7, 64, 1000, 4099};
  cu_rng r;
  cu_rng_seed(&r, 4242);
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      int64_t n = sizes[k];
      void *buf = cu_malloc((size_t)n * clt_dtype_size((clt_dtype)dt));
      switch (dt) {
      case CLT_F32:
      case CLT_F64:
      case CLT_F16:
      case CLT_BF16:
        cu_fill(buf, (clt_dtype)dt, n, &r, 0, 1, 0);
        break;
      case CLT_I32:
        cu_fill(buf, (clt_dtype)dt, n, &r, -(1 << 30), 1 << 30, 0);
        break;
      case CLT_I64:
        cu_fill(buf, (clt_dtype)dt, n, &r, -1e15, 1e15, 0);
        break;
      default:
        cu_fill(buf, (clt_dtype)dt, n, &r, 0, 255, 0);
        break;
      }
      double want = 0;
      int64_t iwant = 0;
      for (int64_t i = 0; i < n; i++) {
        want += cu_get(buf, (clt_dtype)dt, i);
        iwant += cu_get_i64(buf, (clt_dtype)dt, i);
      }
      if (dt == CLT_U8 || dt == CLT_BOOL)
        ck_assert_msg(iwant > 0, "test data of all zeros");
      int64_t shape[2] = {n, 1};
      for (int d = 0; d < ndev; d++) {
        if (!cu_dtype_ok("test_sum_dtypes", devs[d], (clt_dtype)dt))
          continue;
        char what[96];
        snprintf(what, sizeof what, "sum of %lld %s on %s", (long long)n, cu_dt_name((clt_dtype)dt),
                 cu_dev_name(devs[d]));
        clt_tensor *t = cu_tensor(buf, (clt_dtype)dt, k % 2 ? 2 : 1, shape, devs[d]);
        double v;
        int64_t iv;
        sum_of(t, &v, &iv, what);
        if (dt == CLT_F16 || dt == CLT_BF16) {
          /* accumulated in f32 (error far below the narrow dtype's), rounded once: within one
           * unit of the narrow dtype of the exact sum, from which f16/bf16 accumulation of
           * 4099 terms would be far off */
          double u = ldexp(fabs(want) > 0 ? fabs(want) : 1, dt == CLT_F16 ? -10 : -7);
          ck_assert_msg(fabs(v - want) <= u, "%s: %.17g, expected %.17g", what, v, want);
        } else if (cu_is_float((clt_dtype)dt)) {
          double rtol = dt == CLT_F32 ? 1e-5 : 1e-12;
          ck_assert_msg(cu_close(v, want, rtol, 0), "%s: %.17g, expected %.17g", what, v, want);
        } else {
          ck_assert_msg(iv == iwant, "%s: %lld, expected %lld", what, (long long)iv,
                        (long long)iwant);
        }
        clt_tensor_release(t);
      }
      free(buf);
    }
  }
}
END_TEST

START_TEST(test_sum_ones_2p24) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[1] = {INT64_C(1) << 24};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *t = NULL;
    CU_OK(clt_ones(CLT_F32, 1, shape, devs[d], &t));
    char what[64];
    snprintf(what, sizeof what, "sum of 2^24 f32 ones on %s", cu_dev_name(devs[d]));
    double v;
    int64_t iv;
    sum_of(t, &v, &iv, what);
    ck_assert_msg(v == 16777216.0, "%s: %.17g, expected 16777216 exactly", what, v);
    clt_tensor_release(t);
  }
}
END_TEST

START_TEST(test_sum_empty) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[2] = {4, 0};
  for (int d = 0; d < ndev; d++) {
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      if (!cu_dtype_ok("test_sum_empty", devs[d], (clt_dtype)dt))
        continue;
      clt_tensor *t = NULL;
      CU_OK(clt_empty((clt_dtype)dt, 2, shape, devs[d], &t));
      char what[64];
      snprintf(what, sizeof what, "sum of empty %s on %s", cu_dt_name((clt_dtype)dt),
               cu_dev_name(devs[d]));
      double v = -1;
      int64_t iv = -1;
      sum_of(t, &v, &iv, what);
      ck_assert_msg(v == 0.0 && iv == 0, "%s: %g", what, v);
      clt_tensor_release(t);
    }
  }
}
END_TEST

START_TEST(test_sum_odd_sizes) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  static const int64_t sizes[] = {1, 7, 1000003};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    int64_t n = sizes[k];
    for (int d = 0; d < ndev; d++) {
      /* arange: every element counts, in its place. */
      clt_tensor *t = NULL;
      CU_OK(clt_arange(1, (double)n + 1, 1, CLT_I32, devs[d], &t));
      char what[96];
      snprintf(what, sizeof what, "sum of arange(1, %lld + 1) i32 on %s", (long long)n,
               cu_dev_name(devs[d]));
      double v;
      int64_t iv;
      sum_of(t, &v, &iv, what);
      ck_assert_msg(iv == n * (n + 1) / 2, "%s: %lld, expected %lld", what, (long long)iv,
                    (long long)(n * (n + 1) / 2));
      clt_tensor_release(t);

      CU_OK(clt_full(CLT_F32, 1, &n, 0.5, devs[d], &t));
      snprintf(what, sizeof what, "sum of %lld f32 halves on %s", (long long)n,
               cu_dev_name(devs[d]));
      sum_of(t, &v, &iv, what);
      ck_assert_msg(v == 0.5 * (double)n, "%s: %.17g, expected %.17g", what, v, 0.5 * (double)n);
      clt_tensor_release(t);

      if (clt_device_has_fp64(devs[d])) {
        CU_OK(clt_arange(0, (double)n, 1, CLT_F64, devs[d], &t));
        snprintf(what, sizeof what, "sum of arange(%lld) f64 on %s", (long long)n,
                 cu_dev_name(devs[d]));
        sum_of(t, &v, &iv, what);
        double want = (double)n * (double)(n - 1) / 2;
        ck_assert_msg(v == want, "%s: %.17g, expected %.17g", what, v, want);
        clt_tensor_release(t);
      }
    }
  }
}
END_TEST

START_TEST(test_sum_large_random) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  const int64_t n = 1000003;
  cu_rng r;
  cu_rng_seed(&r, 31337);
  float *buf = cu_malloc((size_t)n * sizeof *buf);
  cu_fill(buf, CLT_F32, n, &r, 0, 1, 0);
  double want = 0;
  for (int64_t i = 0; i < n; i++)
    want += buf[i];
  uint8_t *bits = cu_malloc((size_t)n);
  cu_fill(bits, CLT_BOOL, n, &r, 0, 1, 0);
  int64_t count = 0;
  for (int64_t i = 0; i < n; i++)
    count += bits[i];
  int64_t shape[1] = {n};
  for (int d = 0; d < ndev; d++) {
    char what[64];
    snprintf(what, sizeof what, "sum of 1000003 random f32 on %s", cu_dev_name(devs[d]));
    clt_tensor *t = cu_tensor(buf, CLT_F32, 1, shape, devs[d]);
    double v;
    int64_t iv;
    sum_of(t, &v, &iv, what);
    ck_assert_msg(cu_close(v, want, 1e-5, 0), "%s: %.17g, expected %.17g", what, v, want);
    clt_tensor_release(t);
    snprintf(what, sizeof what, "sum of 1000003 random bool on %s", cu_dev_name(devs[d]));
    t = cu_tensor(bits, CLT_BOOL, 1, shape, devs[d]);
    sum_of(t, &v, &iv, what);
    ck_assert_msg(iv == count, "%s: %lld, expected %lld", what, (long long)iv, (long long)count);
    clt_tensor_release(t);
  }
  free(buf);
  free(bits);
}
END_TEST

START_TEST(test_sum_scalar) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    uint8_t x = 250;
    clt_tensor *t = cu_tensor(&x, CLT_U8, 0, NULL, devs[d]);
    char what[64];
    snprintf(what, sizeof what, "sum of 0-d u8 on %s", cu_dev_name(devs[d]));
    double v;
    int64_t iv;
    sum_of(t, &v, &iv, what);
    ck_assert_msg(iv == 250, "%s: %lld", what, (long long)iv);
    clt_tensor_release(t);
  }
}
END_TEST

/* Sums and means of a constant are as accurate as NumPy's pairwise summation on every device:
 * 0.1 added 2^22 and 2^24 times, whole and along a dim (inner 1 and inner > 1), f32 and f64.
 * The exact result is n * x (n a power of two). NumPy's float32 sums of 0.1f over 2^22 and 2^24
 * elements are off by RTOL_PAIRWISE_F32 at most; a chain of additions (the chunked kernel
 * before issue 12) was off by 3.8e-5. Oclgrind simulates each work-item, so there the sizes are
 * 2^8 times smaller. */
#define RTOL_PAIRWISE_F32 1e-6
#define RTOL_PAIRWISE_F64 1e-15

static void check_all(clt_tensor *r, double want, double rtol, const char *what) {
  double *got = cu_read_double(r);
  int64_t n = clt_tensor_numel(r);
  for (int64_t k = 0; k < n; k++)
    ck_assert_msg(cu_close(got[k], want, rtol, 0),
                  "%s: [%lld] %.17g, exact %.17g (rel. error %.2g)", what, (long long)k, got[k],
                  want, fabs(got[k] - want) / want);
  free(got);
}

START_TEST(test_sum_accurate) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  static const clt_dtype dts[] = {CLT_F32, CLT_F64};
  for (int d = 0; d < ndev; d++) {
    int shrink = cu_is_oclgrind(devs[d]) ? 8 : 0;
    int64_t n22 = INT64_C(1) << (22 - shrink), n24 = INT64_C(1) << (24 - shrink);
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
      clt_dtype dt = dts[t];
      if (!cu_dtype_ok("test_sum_accurate", devs[d], dt))
        continue;
      double x = dt == CLT_F32 ? (double)0.1f : 0.1;
      double rtol = dt == CLT_F32 ? RTOL_PAIRWISE_F32 : RTOL_PAIRWISE_F64;
      clt_tensor *a = NULL, *b = NULL, *r = NULL;
      CU_OK(clt_full(dt, 1, &n22, x, devs[d], &a));
      CU_OK(clt_full(dt, 1, &n24, x, devs[d], &b));
      char what[128];
      snprintf(what, sizeof what, "sum of %lld x %s 0.1 on %s", (long long)n22, cu_dt_name(dt),
               cu_dev_name(devs[d]));
      CU_OK(clt_sum(a, &r));
      check_all(r, (double)n22 * x, rtol, what);
      clt_tensor_release(r);
      snprintf(what, sizeof what, "sum of %lld x %s 0.1 on %s", (long long)n24, cu_dt_name(dt),
               cu_dev_name(devs[d]));
      CU_OK(clt_sum(b, &r));
      check_all(r, (double)n24 * x, rtol, what);
      clt_tensor_release(r);
      snprintf(what, sizeof what, "mean of %lld x %s 0.1 on %s", (long long)n24, cu_dt_name(dt),
               cu_dev_name(devs[d]));
      CU_OK(clt_mean(b, &r));
      check_all(r, x, rtol, what);
      clt_tensor_release(r);
      /* b as (4, n22) reduced over dim 1 (inner 1), and as (n22, 4) over dim 0 (inner 4). */
      for (int dim = 0; dim < 2; dim++) {
        int64_t shape[2] = {dim ? 4 : n22, dim ? n22 : 4};
        clt_tensor *v = NULL;
        CU_OK(clt_reshape(b, 2, shape, &v));
        snprintf(what, sizeof what, "sum_dim %d of (%lld, %lld) %s 0.1 on %s", dim,
                 (long long)shape[0], (long long)shape[1], cu_dt_name(dt), cu_dev_name(devs[d]));
        CU_OK(clt_sum_dim(v, dim, 0, &r));
        check_all(r, (double)n22 * x, rtol, what);
        clt_tensor_release(r);
        snprintf(what, sizeof what, "mean_dim %d of (%lld, %lld) %s 0.1 on %s", dim,
                 (long long)shape[0], (long long)shape[1], cu_dt_name(dt), cu_dev_name(devs[d]));
        CU_OK(clt_mean_dim(v, dim, 1, &r));
        check_all(r, x, rtol, what);
        clt_tensor_release(r);
        clt_tensor_release(v);
      }
      clt_tensor_release(a);
      clt_tensor_release(b);
    }
  }
}
END_TEST

/* Integer sums along a long dim stay exact: i32 3s as (n, 4) over dim 0 and (4, n) over dim 1,
 * summed as int64. */
START_TEST(test_sum_int_long_dim) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    int64_t n = INT64_C(1) << (cu_is_oclgrind(devs[d]) ? 12 : 20);
    for (int dim = 0; dim < 2; dim++) {
      int64_t shape[2] = {dim ? 4 : n, dim ? n : 4};
      clt_tensor *t = NULL, *r = NULL;
      CU_OK(clt_full(CLT_I32, 2, shape, 3, devs[d], &t));
      CU_OK(clt_sum_dim(t, dim, 0, &r));
      ck_assert_int_eq(clt_tensor_dtype(r), CLT_I64);
      int64_t *got = cu_read(r);
      for (int k = 0; k < 4; k++)
        ck_assert_msg(got[k] == 3 * n, "sum_dim %d of i32 3s on %s: [%d] %lld, expected %lld", dim,
                      cu_dev_name(devs[d]), k, (long long)got[k], (long long)(3 * n));
      free(got);
      clt_tensor_release(r);
      clt_tensor_release(t);
    }
  }
}
END_TEST

/* An independent oracle for every reduction along every dim of a 3-D tensor: plain loops in
 * double / int64 over the flat data. */
typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_ARGMAX } rkind;

static double oracle(const void *buf, clt_dtype dt, const int64_t *shape, int dim, int64_t o,
                     int64_t j, rkind k) {
  int64_t inner = 1, r = shape[dim];
  for (int d = dim + 1; d < 3; d++)
    inner *= shape[d];
  double acc = (k == R_SUM || k == R_MEAN) ? 0 : NAN;
  int64_t at = 0;
  for (int64_t q = 0; q < r; q++) {
    double x = cu_get(buf, dt, (o * r + q) * inner + j);
    if (k == R_SUM || k == R_MEAN) {
      acc += x;
    } else if (q == 0 || (isnan(x) && !isnan(acc)) ||
               (!isnan(acc) && (k == R_MIN ? x < acc : x > acc))) {
      acc = x;
      at = q;
    }
  }
  if (k == R_MEAN)
    return acc / (double)r;
  return k == R_ARGMAX ? (double)at : acc;
}

typedef clt_status (*dimfn)(clt_tensor *, int, int, clt_tensor **);

START_TEST(test_reduce_dims) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const int64_t shape[3] = {3, 17, 5};
  const int64_t n = 3 * 17 * 5;
  static const dimfn fns[5] = {clt_sum_dim, clt_mean_dim, clt_max_dim, clt_min_dim, clt_argmax_dim};
  static const char *names[5] = {"sum", "mean", "max", "min", "argmax"};
  const clt_dtype dts[] = {CLT_F32, CLT_F64, CLT_I32, CLT_I64, CLT_U8, CLT_BOOL};
  cu_rng rng;
  cu_rng_seed(&rng, 99);
  for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
    clt_dtype dt = dts[t];
    void *buf = cu_malloc((size_t)n * clt_dtype_size(dt));
    cu_fill(buf, dt, n, &rng, -50, 50, 0);
    if (dt == CLT_U8)
      cu_fill(buf, dt, n, &rng, 0, 200, 0);
    if (cu_is_float(dt)) /* ties, to check that argmax picks the first */
      cu_set(buf, dt, 7, cu_get(buf, dt, 2));
    for (int k = 0; k < 5; k++) {
      if (k == R_MEAN && !cu_is_float(dt))
        continue;
      for (int dim = -3; dim < 3; dim++) {
        int pd = dim < 0 ? dim + 3 : dim;
        for (int keep = 0; keep < 2; keep++) {
          double *first = NULL;
          for (int v = 0; v < nd; v++) {
            if (!cu_dtype_ok("test_reduce_dims", devs[v], dt))
              continue;
            clt_tensor *x = cu_tensor(buf, dt, 3, shape, devs[v]), *r;
            CU_OK(fns[k](x, dim, keep, &r));
            ck_assert_int_eq(clt_tensor_ndim(r), keep ? 3 : 2);
            if (keep)
              ck_assert_int_eq(clt_tensor_shape(r)[pd], 1);
            double *got = cu_read_double(r);
            int64_t outer = 1, inner = 1;
            for (int d = 0; d < pd; d++)
              outer *= shape[d];
            for (int d = pd + 1; d < 3; d++)
              inner *= shape[d];
            for (int64_t o = 0; o < outer; o++)
              for (int64_t j = 0; j < inner; j++) {
                double want = oracle(buf, dt, shape, pd, o, j, (rkind)k);
                double g = got[o * inner + j];
                double tol = dt == CLT_F32 ? 1e-5 : 1e-12;
                ck_assert_msg(cu_close(g, want, tol, tol),
                              "%s_dim %s dim %d on %s: [%lld][%lld] %g, want %g", names[k],
                              cu_dt_name(dt), dim, cu_dev_name(devs[v]), (long long)o, (long long)j,
                              g, want);
                if (first && (k >= R_MAX || !cu_is_float(dt)))
                  ck_assert_msg(
                      g == first[o * inner + j] || (isnan(g) && isnan(first[o * inner + j])),
                      "%s %s: %s differs from cpu", names[k], cu_dt_name(dt), cu_dev_name(devs[v]));
              }
            if (!first)
              first = got;
            else
              free(got);
            clt_tensor_release(r);
            clt_tensor_release(x);
          }
          free(first);
        }
      }
    }
    free(buf);
  }
}
END_TEST

START_TEST(test_reduce_whole_extremes) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  int64_t n = 1000003;
  float *buf = cu_malloc((size_t)n * sizeof(float));
  cu_rng rng;
  cu_rng_seed(&rng, 5);
  cu_fill(buf, CLT_F32, n, &rng, -1000, 1000, 0);
  buf[777777] = 5000; /* the maximum, twice: argmax is the first */
  buf[999999] = 5000;
  buf[123] = -7000;
  for (int v = 0; v < nd; v++) {
    clt_tensor *x = cu_tensor(buf, CLT_F32, 1, &n, devs[v]), *mx, *mn, *am, *me;
    double a, b, m;
    int64_t i;
    CU_OK(clt_max(x, &mx));
    CU_OK(clt_min(x, &mn));
    CU_OK(clt_argmax(x, &am));
    CU_OK(clt_mean(x, &me));
    CU_OK(clt_item(mx, &a));
    CU_OK(clt_item(mn, &b));
    CU_OK(clt_item_i64(am, &i));
    CU_OK(clt_item(me, &m));
    ck_assert_msg(a == 5000 && b == -7000 && i == 777777, "%s: max %g min %g argmax %lld",
                  cu_dev_name(devs[v]), a, b, (long long)i);
    ck_assert_int_eq(clt_tensor_dtype(am), CLT_I64);
    double want = 0;
    for (int64_t k = 0; k < n; k++)
      want += buf[k];
    want /= (double)n;
    ck_assert_msg(fabs(m - want) < 1e-3, "%s: mean %g want %g", cu_dev_name(devs[v]), m, want);
    buf[4242] = NAN;
    clt_tensor *y = cu_tensor(buf, CLT_F32, 1, &n, devs[v]), *ymx, *yam;
    CU_OK(clt_max(y, &ymx));
    CU_OK(clt_argmax(y, &yam));
    CU_OK(clt_item(ymx, &a));
    CU_OK(clt_item_i64(yam, &i));
    ck_assert_msg(isnan(a) && i == 4242, "%s: NaN: max %g argmax %lld", cu_dev_name(devs[v]), a,
                  (long long)i);
    buf[4242] = 1;
    clt_tensor *outs[] = {x, mx, mn, am, me, y, ymx, yam};
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++)
      clt_tensor_release(outs[k]);
  }
  free(buf);
}
END_TEST

START_TEST(test_reduce_errors) {
  int64_t shape[2] = {0, 3};
  clt_tensor *e, *i, *r = CU_SENTINEL;
  CU_OK(clt_zeros(CLT_F32, 2, shape, clt_cpu(), &e));
  CU_FAILS(clt_max(e, &r), CLT_ERR_INVALID_ARGUMENT, "clt_max");
  CU_FAILS(clt_argmax_dim(e, 0, 0, &r), CLT_ERR_INVALID_ARGUMENT, "clt_argmax_dim");
  ck_assert_ptr_eq(r, CU_SENTINEL);
  CU_OK(clt_max_dim(e, 1, 0, &r)); /* reducing a non-empty dim of an empty tensor is fine */
  ck_assert_int_eq(clt_tensor_numel(r), 0);
  clt_tensor_release(r);
  r = CU_SENTINEL;
  /* a reduced size of 0 is refused even where the result has no element either ([0, 0] along
   * dim 1), as PyTorch and NumPy refuse (the NumPy lane found it accepted) */
  clt_tensor *e00;
  CU_OK(clt_zeros(CLT_F32, 2, (int64_t[]){0, 0}, clt_cpu(), &e00));
  CU_FAILS(clt_max_dim(e00, 1, 0, &r), CLT_ERR_INVALID_ARGUMENT, "clt_max_dim");
  CU_FAILS(clt_min_dim(e00, 0, 0, &r), CLT_ERR_INVALID_ARGUMENT, "clt_min_dim");
  CU_FAILS(clt_argmax_dim(e00, 1, 1, &r), CLT_ERR_INVALID_ARGUMENT, "clt_argmax_dim");
  ck_assert_ptr_eq(r, CU_SENTINEL);
  CU_OK(clt_sum_dim(e00, 1, 0, &r)); /* a sum of nothing is 0: fine */
  clt_tensor_release(r);
  r = CU_SENTINEL;
  clt_tensor_release(e00);
  CU_FAILS(clt_sum_dim(e, 2, 0, &r), CLT_ERR_INVALID_ARGUMENT, "clt_sum_dim");
  CU_FAILS(clt_sum_dim(e, -3, 0, &r), CLT_ERR_INVALID_ARGUMENT, "clt_sum_dim");
  CU_OK(clt_ones(CLT_I32, 2, (int64_t[]){2, 2}, clt_cpu(), &i));
  CU_FAILS(clt_mean(i, &r), CLT_ERR_DTYPE, "clt_mean");
  CU_FAILS(clt_sum(NULL, &r), CLT_ERR_INVALID_ARGUMENT, "clt_sum");
  CU_FAILS(clt_sum(i, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_sum");
  ck_assert_ptr_eq(r, CU_SENTINEL);
  clt_tensor_release(e);
  clt_tensor_release(i);
}
END_TEST

/* The first reduction of a kind in a process does not wait for its program's build: it is
 * launched behind the build (lib/opencl/deferred.c), the device's queue held until the build is
 * done. The results are the bits of the same reductions once the program is built; a write to the
 * input enqueued right after waits for the deferred reduction; the host's values agree. Needs a
 * process that built nothing yet (CK_FORK); on devices that build in the caller's thread
 * (Oclgrind, CLT_BACKGROUND_BUILDS=0) nothing is deferred, and the rest still holds. */
START_TEST(test_reduce_deferred_first_use) {
  if (!cu_forked) {
    cu_skip("test_reduce_deferred_first_use", "needs CK_FORK (a process that built nothing yet)");
    return;
  }
  unsetenv("CLT_BACKGROUND_BUILDS");
  setenv("CLT_CACHE", "0", 1); /* no disk cache: a program on disk would load at the call */
  enum { R = 37, C = 301 };
  int64_t shape[2] = {R, C}, n = R * C;
  float *buf = cu_malloc(sizeof(float) * (size_t)n);
  cu_rng r;
  cu_rng_seed(&r, 977);
  cu_fill(buf, CLT_F32, n, &r, 0, 1, 0);
  clt_tensor *hx = cu_tensor(buf, CLT_F32, 2, shape, clt_cpu()), *hmax;
  CU_OK(clt_max_dim(hx, 1, 0, &hmax));
  float *want_max = cu_read(hmax);
  double want_sum = 0;
  for (int64_t k = 0; k < n; k++)
    want_sum += buf[k];
  for (int v = 0; v < cu_cl_count(); v++) {
    clt_device *d = clt_device_at(v);
    bool background = clt__background_builds(d);
    clt_tensor *x = cu_tensor(buf, CLT_F32, 2, shape, d), *out[4][2];
    for (int round = 0; round < 2; round++) {
      long before = clt__deferred_launches();
      CU_OK(clt_sum(x, &out[0][round]));
      CU_OK(clt_max_dim(x, 1, 0, &out[1][round]));
      CU_OK(clt_argmax_dim(x, 0, 1, &out[2][round]));
      CU_OK(clt_mean_dim(x, 0, 0, &out[3][round]));
      long deferred = clt__deferred_launches() - before;
      ck_assert_msg(deferred == (round == 0 && background ? 4 : 0),
                    "%s: round %d deferred %ld launches (background builds %s)", cu_dev_name(d),
                    round, deferred, background ? "on" : "off");
      CU_OK(clt_device_synchronize(d)); /* the builds are done: the next round launches */
    }
    /* a write enqueued after the deferred launches: they read the values before it */
    clt_tensor *y;
    CU_OK(clt_from_host(buf, CLT_F32, 2, shape, d, &y));
    clt_tensor *s2, *m2;
    CU_OK(clt_sum(y, &s2));
    CU_OK(clt_max(y, &m2));
    CU_OK(clt_fill_(y, -1000.0));
    for (int k = 0; k < 4; k++) {
      size_t bytes = (size_t)clt_tensor_numel(out[k][0]) * clt_dtype_size(clt_tensor_dtype(out[k][0]));
      void *a = cu_read(out[k][0]), *b = cu_read(out[k][1]);
      ck_assert_msg(memcmp(a, b, bytes) == 0, "%s: reduction %d: deferred and built bits differ",
                    cu_dev_name(d), k);
      free(a);
      free(b);
    }
    double got, got2, mx;
    CU_OK(clt_item(out[0][0], &got));
    CU_OK(clt_item(s2, &got2));
    CU_OK(clt_item(m2, &mx));
    ck_assert_msg(fabs(got - want_sum) <= 1e-4 * fabs(want_sum) && got2 == got,
                  "%s: sum %.9g, after a later write %.9g, want %.9g", cu_dev_name(d), got, got2,
                  want_sum);
    ck_assert_msg(mx > -1000.0, "%s: max %g: the later fill overtook the reduction",
                  cu_dev_name(d), mx);
    float *gm = cu_read(out[1][0]);
    ck_assert_msg(memcmp(gm, want_max, sizeof(float) * R) == 0, "%s: max_dim differs from cpu",
                  cu_dev_name(d));
    free(gm);
    for (int k = 0; k < 4; k++)
      RELEASE(out[k][0], out[k][1]);
    RELEASE(x, y, s2, m2);
  }
  RELEASE(hx, hmax);
  free(want_max);
  free(buf);
}
END_TEST

/* A deferred launch whose program fails to build: the call returns, the read that needs the
 * value fails with CLT_ERR_BUILD naming the launch, the function and the build log. */
START_TEST(test_reduce_deferred_build_error) {
  if (!cu_forked) {
    cu_skip("test_reduce_deferred_build_error", "needs CK_FORK (sets CLT_KERNEL_PATH)");
    return;
  }
  if (!cu_need_cl("test_reduce_deferred_build_error", 1))
    return;
  clt_device *d = clt_device_at(0);
  if (!clt__background_builds(d)) {
    cu_skip("test_reduce_deferred_build_error", "cl:0 builds in the caller's thread");
    return;
  }
  /* x is made and written before the broken kernels are in place: only the sum is deferred */
  clt_tensor *x, *s = CU_SENTINEL;
  CU_OK(clt_ones(CLT_F32, 1, (int64_t[]){1000}, d, &x));
  CU_OK(clt_device_synchronize(d));
  char dir[256], path[512];
  cu_temp_dir(dir, sizeof dir, "deferred");
  snprintf(path, sizeof path, "%s/reduce.cl", dir);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fputs("__kernel void sum_f32_partial(void) { this is not C }\n", f);
  fclose(f);
  snprintf(path, sizeof path, "%s/common.cl", dir);
  f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fputs("/* empty */\n", f);
  fclose(f);
  setenv("CLT_KERNEL_PATH", dir, 1);
  setenv("CLT_CACHE", "0", 1);
  long before = clt__deferred_launches();
  CU_OK(clt_sum(x, &s));
  ck_assert_msg(clt__deferred_launches() == before + 1, "the sum was not deferred");
  float v = 0;
  CU_FAILS(clt_tensor_read(s, &v, sizeof v), CLT_ERR_BUILD, "clt_tensor_read");
  const char *msg = clt_last_error();
  ck_assert_msg(strstr(msg, "sum_f32_partial of clt_sum on cl:0") && strstr(msg, "build log"),
                "the message lacks the launch or the log: %s", msg);
  RELEASE(x, s);
  /* nothing of the failed launch still in flight at the exit (its status is not the point) */
  (void)clt_device_synchronize(d);
  unsetenv("CLT_KERNEL_PATH");
  snprintf(path, sizeof path, "%s/reduce.cl", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/common.cl", dir);
  remove(path);
  ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

Suite *reduce_suite(void) {
  Suite *s = suite_create("reduce");
  TCase *tc = cu_tcase("sum");
  tcase_add_test(tc, test_sum_dtypes);
  tcase_add_test(tc, test_sum_ones_2p24);
  tcase_add_test(tc, test_sum_empty);
  tcase_add_test(tc, test_sum_odd_sizes);
  tcase_add_test(tc, test_sum_large_random);
  tcase_add_test(tc, test_sum_scalar);
  tcase_add_test(tc, test_sum_accurate);
  tcase_add_test(tc, test_sum_int_long_dim);
  tcase_add_test(tc, test_reduce_dims);
  tcase_add_test(tc, test_reduce_whole_extremes);
  tcase_add_test(tc, test_reduce_errors);
  tcase_add_test(tc, test_reduce_deferred_first_use);
  tcase_add_test(tc, test_reduce_deferred_build_error);
  suite_add_tcase(s, tc);
  return s;
}
