/* SPDX-License-Identifier: MIT */
/* check_matmul.c - clt_matmul and clt_transpose on every device and path against oracles
 * computed here: a naive triple loop in double for products, index arithmetic for transposes.
 *
 * Tolerances: an f32 product element may differ from the exact one by 1e-4 times
 * sum_p |a_ip * b_pj| (k up to 256: BLAS and tiled kernels accumulate in f32 in any order);
 * f64 by 1e-12 times the same sum. Paths forced with CLT_MATMUL run in forked tests, the
 * variable set before the first clt call of the child. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

/* Products of random (batch_a or none, m, k) x (batch_b or none, k, n) on dev, checked against
 * the triple loop. na/nb: 2 or 3 dimensions. */
static void check_product(clt_device *dev, clt_dtype dt, int na, int nb, int64_t batch, int64_t m,
                          int64_t k, int64_t n, uint64_t seed) {
  int64_t sa[3] = {batch, m, k}, sb[3] = {batch, k, n};
  const int64_t *sha = na == 3 ? sa : sa + 1, *shb = nb == 3 ? sb : sb + 1;
  int64_t la = cu_numel(na, sha), lb = cu_numel(nb, shb);
  size_t es = clt_dtype_size(dt);
  void *ha = cu_malloc((size_t)la * es), *hb = cu_malloc((size_t)lb * es);
  cu_rng r;
  cu_rng_seed(&r, seed);
  cu_fill(ha, dt, la, &r, -1, 1, 0);
  cu_fill(hb, dt, lb, &r, -1, 1, 0);
  clt_tensor *a = cu_tensor(ha, dt, na, sha, dev), *b = cu_tensor(hb, dt, nb, shb, dev);
  clt_tensor *c = CU_SENTINEL;
  char what[160];
  snprintf(what, sizeof what, "%s matmul %s (%dD, batch %lld) m=%lld k=%lld n=%lld (%dD) on %s",
           cu_dt_name(dt), clt_matmul_path(dev), na, (long long)batch, (long long)m, (long long)k,
           (long long)n, nb, cu_dev_name(dev));
  clt_status st = clt_matmul(a, b, &c);
  ck_assert_msg(st == CLT_OK, "%s: %s: %s", what, clt_status_name(st), clt_last_error());
  int nd = na == 3 || nb == 3 ? 3 : 2;
  int64_t shc[3] = {batch, m, n};
  cu_assert_meta(c, dt, dev, nd, nd == 3 ? shc : shc + 1, what);
  double *got = cu_read_double(c);
  double rtol = dt == CLT_F32 ? 1e-4 : 1e-12;
  int64_t nbatch = nd == 3 ? batch : 1;
  for (int64_t q = 0; q < nbatch; q++) {
    int64_t oa = na == 3 ? q * m * k : 0, ob = nb == 3 ? q * k * n : 0;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double want = 0, mag = 0;
        for (int64_t p = 0; p < k; p++) {
          double t = cu_get(ha, dt, oa + i * k + p) * cu_get(hb, dt, ob + p * n + j);
          want += t;
          mag += fabs(t);
        }
        double g = got[(q * m + i) * n + j];
        ck_assert_msg(fabs(g - want) <= rtol * mag || (k == 0 && g == 0),
                      "%s: element [%lld, %lld, %lld] is %.17g, expected %.17g (bound %.3g)", what,
                      (long long)q, (long long)i, (long long)j, g, want, rtol * mag);
      }
  }
  free(got);
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(c);
  free(ha);
  free(hb);
}

/* ---- torch.matmul's shapes: an oracle for any ranks -------------------------------------- */

static void fmt_shape(char *buf, size_t size, int nd, const int64_t *sh) {
  int w = snprintf(buf, size, "[");
  for (int i = 0; i < nd && w > 0 && (size_t)w < size; i++)
    w += snprintf(buf + w, size - (size_t)w, "%s%lld", i ? ", " : "", (long long)sh[i]);
  if (w > 0 && (size_t)w < size)
    snprintf(buf + w, size - (size_t)w, "]");
}

/* The product of a (na dims, shape sa, contiguous values va) and b as torch.matmul defines it,
 * in double, into want (the result's elements in C order) and mag (sum of |terms| each; both
 * skipped where want is NULL); the result's shape into rs, its rank returned. */
static int oracle_matmul(const double *va, int na, const int64_t *sa, const double *vb, int nb,
                         const int64_t *sb, double *want, double *mag, int64_t *rs) {
  int64_t m = na == 1 ? 1 : sa[na - 2], k = sa[na - 1], n = nb == 1 ? 1 : sb[nb - 1];
  int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, bn = ba > bb ? ba : bb;
  int64_t bs[8], p = 1;
  for (int i = 0; i < bn; i++) {
    int64_t da = i - (bn - ba) >= 0 ? sa[i - (bn - ba)] : 1;
    int64_t db = i - (bn - bb) >= 0 ? sb[i - (bn - bb)] : 1;
    bs[i] = da == 1 ? db : da;
    p *= bs[i];
  }
  int r = 0;
  for (int i = 0; i < bn; i++)
    rs[r++] = bs[i];
  if (na > 1)
    rs[r++] = m;
  if (nb > 1)
    rs[r++] = n;
  for (int64_t q = 0; want && q < p; q++) {
    /* q's batch index, then the offsets of a's and b's matrices (a size-1 dimension repeats) */
    int64_t idx[8], rem = q, oa = 0, ob = 0, sta = m * k, stb = k * n;
    for (int i = bn - 1; i >= 0; i--) {
      idx[i] = rem % bs[i];
      rem /= bs[i];
    }
    for (int i = bn - 1; i >= 0; i--) {
      int ia = i - (bn - ba), ib = i - (bn - bb);
      if (ia >= 0) {
        oa += (sa[ia] == 1 ? 0 : idx[i]) * sta;
        sta *= sa[ia];
      }
      if (ib >= 0) {
        ob += (sb[ib] == 1 ? 0 : idx[i]) * stb;
        stb *= sb[ib];
      }
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double w = 0, g = 0;
        for (int64_t t = 0; t < k; t++) {
          double term = va[oa + i * k + t] * vb[ob + t * n + j];
          w += term;
          g += fabs(term);
        }
        want[(q * m + i) * n + j] = w;
        mag[(q * m + i) * n + j] = g;
      }
  }
  return r;
}

/* a (na, sa) x b (nb, sb) through clt_matmul on dev against the oracle. */
static void check_any(clt_device *dev, clt_dtype dt, int na, const int64_t *sa, int nb,
                      const int64_t *sb, uint64_t seed) {
  int64_t la = cu_numel(na, sa), lb = cu_numel(nb, sb);
  double *va = cu_malloc(sizeof(double) * (size_t)(la ? la : 1));
  double *vb = cu_malloc(sizeof(double) * (size_t)(lb ? lb : 1));
  cu_rng r;
  cu_rng_seed(&r, seed);
  for (int64_t i = 0; i < la; i++) /* values exact in f32 */
    va[i] = (double)(float)(cu_rng_uniform(&r) * 2 - 1);
  for (int64_t i = 0; i < lb; i++)
    vb[i] = (double)(float)(cu_rng_uniform(&r) * 2 - 1);
  clt_tensor *a64 = cu_tensor(va, CLT_F64, na, sa, dev), *b64 = cu_tensor(vb, CLT_F64, nb, sb, dev);
  clt_tensor *a, *b, *c = CU_SENTINEL;
  CU_OK(clt_cast(a64, dt, &a));
  CU_OK(clt_cast(b64, dt, &b));
  char sha[64], shb[64], what[256];
  fmt_shape(sha, sizeof sha, na, sa);
  fmt_shape(shb, sizeof shb, nb, sb);
  snprintf(what, sizeof what, "%s matmul %s x %s on %s (%s)", cu_dt_name(dt), sha, shb,
           cu_dev_name(dev), clt_matmul_path(dev));
  clt_status st = clt_matmul(a, b, &c);
  ck_assert_msg(st == CLT_OK, "%s: %s: %s", what, clt_status_name(st), clt_last_error());
  int64_t rs[8];
  int rank = oracle_matmul(va, na, sa, vb, nb, sb, NULL, NULL, rs);
  cu_assert_meta(c, dt, dev, rank, rs, what);
  int64_t lc = clt_tensor_numel(c);
  double *want = cu_malloc(sizeof(double) * (size_t)(lc ? lc : 1));
  double *mag = cu_malloc(sizeof(double) * (size_t)(lc ? lc : 1));
  oracle_matmul(va, na, sa, vb, nb, sb, want, mag, rs);
  double *got = cu_read_double(c);
  double rtol = dt == CLT_F32 ? 1e-5 : 1e-13;
  for (int64_t i = 0; i < lc; i++)
    ck_assert_msg(fabs(got[i] - want[i]) <= rtol * mag[i],
                  "%s: element %lld is %.17g, expected %.17g (bound %.3g)", what, (long long)i,
                  got[i], want[i], rtol * mag[i]);
  free(got);
  free(want);
  free(mag);
  free(va);
  free(vb);
  clt_tensor_release(a64);
  clt_tensor_release(b64);
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(c);
}

/* torch.matmul's cases beyond 2-D/3-D pairs of one batch, and the matrix-vector shapes (gemv on
 * the blas, native and clblast paths), on dev in dt. */
static void check_any_shapes(clt_device *dev, clt_dtype dt) {
  static const struct {
    int na;
    int64_t sa[4];
    int nb;
    int64_t sb[4];
  } cases[] = {
      {1, {7}, 1, {7}},                /* dot: a 0-d result */
      {2, {5, 7}, 1, {7}},             /* matrix-vector */
      {1, {7}, 2, {7, 4}},             /* vector-matrix */
      {1, {7}, 3, {3, 7, 4}},          /* a vector against a batch */
      {3, {3, 5, 7}, 1, {7}},          /* a batch against a vector */
      {4, {2, 1, 3, 4}, 3, {5, 4, 2}}, /* batches broadcast: [2, 5, 3, 2] */
      {4, {2, 3, 5, 4}, 2, {4, 6}},    /* a 4-D batch by one matrix */
      {2, {5, 4}, 4, {2, 3, 4, 6}},    /* one matrix by a 4-D batch */
      {3, {1, 3, 4}, 3, {2, 4, 5}},    /* a batch of 1 broadcast */
      {4, {2, 0, 3, 4}, 2, {4, 2}},    /* no batch entries */
      {1, {0}, 1, {0}},                /* an empty dot: 0 */
      {2, {9, 13}, 2, {13, 1}},        /* gemv: one column */
      {2, {1, 13}, 2, {13, 6}},        /* gemv: one row */
      {2, {1, 13}, 2, {13, 1}},        /* one element */
      {3, {4, 9, 13}, 2, {13, 1}},     /* gemv over a batch folded into rows */
      {2, {300, 257}, 1, {257}},       /* gemv large enough for blocking */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_any(dev, dt, cases[i].na, cases[i].sa, cases[i].nb, cases[i].sb, 300 + i);
}

/* Matrix-vector products of views, whose layout reaches gemv through transpose flags and
 * leading dimensions: a transposed matrix, a transposed row, a column slice. */
static void check_gemv_views(clt_device *dev, clt_dtype dt) {
  cu_rng r;
  cu_rng_seed(&r, 41);
  double v[13 * 9], w[6 * 13], x[13 * 5];
  for (int i = 0; i < 13 * 9; i++)
    v[i] = (double)(float)(cu_rng_uniform(&r) - 0.5);
  for (int i = 0; i < 6 * 13; i++)
    w[i] = (double)(float)(cu_rng_uniform(&r) - 0.5);
  for (int i = 0; i < 13 * 5; i++)
    x[i] = (double)(float)(cu_rng_uniform(&r) - 0.5);
  clt_tensor *v64 = cu_tensor(v, CLT_F64, 2, (int64_t[]){13, 9}, dev);
  clt_tensor *w64 = cu_tensor(w, CLT_F64, 2, (int64_t[]){6, 13}, dev);
  clt_tensor *x64 = cu_tensor(x, CLT_F64, 2, (int64_t[]){13, 5}, dev);
  clt_tensor *vt, *wt, *xt, *at, *col, *row, *p1, *p2, *p3, *p4;
  CU_OK(clt_cast(v64, dt, &vt));
  CU_OK(clt_cast(w64, dt, &wt));
  CU_OK(clt_cast(x64, dt, &xt));
  CU_OK(clt_transpose(vt, 0, 1, &at));  /* [9, 13], stored transposed */
  CU_OK(clt_narrow(xt, 1, 2, 1, &col)); /* [13, 1], leading dimension 5 */
  CU_OK(clt_narrow(wt, 0, 4, 1, &row)); /* [1, 13], a row of w */
  clt_tensor *wtt;
  CU_OK(clt_transpose(wt, 0, 1, &wtt)); /* [13, 6], stored transposed */
  CU_OK(clt_matmul(at, col, &p1));      /* [9, 1]: A^T x a strided column */
  CU_OK(clt_matmul(row, wtt, &p2));     /* [1, 6]: a row x B^T */
  clt_tensor *colt, *rowt;
  CU_OK(clt_transpose(col, 0, 1, &colt)); /* [1, 13] with stride 5 */
  CU_OK(clt_matmul(colt, xt, &p3));       /* [1, 5]: a strided row x X */
  CU_OK(clt_transpose(row, 0, 1, &rowt)); /* [13, 1] */
  CU_OK(clt_matmul(wt, rowt, &p4));       /* [6, 1] */
  double *g1 = cu_read_double(p1), *g2 = cu_read_double(p2), *g3 = cu_read_double(p3),
         *g4 = cu_read_double(p4);
  double tol = dt == CLT_F32 ? 1e-5 : 1e-13;
  for (int i = 0; i < 9; i++) {
    double want = 0, mag = 0;
    for (int p = 0; p < 13; p++) {
      want += v[p * 9 + i] * x[p * 5 + 2];
      mag += fabs(v[p * 9 + i] * x[p * 5 + 2]);
    }
    ck_assert_msg(fabs(g1[i] - want) <= tol * mag, "%s: A^T x column on %s: [%d] %.17g, want %.17g",
                  cu_dt_name(dt), cu_dev_name(dev), i, g1[i], want);
  }
  for (int j = 0; j < 6; j++) {
    double want = 0, mag = 0;
    for (int p = 0; p < 13; p++) {
      want += w[4 * 13 + p] * w[j * 13 + p];
      mag += fabs(w[4 * 13 + p] * w[j * 13 + p]);
    }
    ck_assert_msg(fabs(g2[j] - want) <= tol * mag, "%s: row x B^T on %s: [%d] %.17g, want %.17g",
                  cu_dt_name(dt), cu_dev_name(dev), j, g2[j], want);
    ck_assert_msg(fabs(g4[j] - want) <= tol * mag, "%s: W x row^T on %s: [%d] %.17g, want %.17g",
                  cu_dt_name(dt), cu_dev_name(dev), j, g4[j], want);
  }
  for (int j = 0; j < 5; j++) {
    double want = 0, mag = 0;
    for (int p = 0; p < 13; p++) {
      want += x[p * 5 + 2] * x[p * 5 + j];
      mag += fabs(x[p * 5 + 2] * x[p * 5 + j]);
    }
    ck_assert_msg(fabs(g3[j] - want) <= tol * mag,
                  "%s: strided row x X on %s: [%d] %.17g, "
                  "want %.17g",
                  cu_dt_name(dt), cu_dev_name(dev), j, g3[j], want);
  }
  free(g1);
  free(g2);
  free(g3);
  free(g4);
  clt_tensor *all[] = {v64, w64, x64, vt, wt, xt, at, col, row, wtt, p1, p2, colt, rowt, p3, p4};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    clt_tensor_release(all[i]);
}

/* Every shape this suite cares about on dev, in dtype dt. */
static void check_all_shapes(clt_device *dev, clt_dtype dt) {
  check_any_shapes(dev, dt);
  check_gemv_views(dev, dt);
  static const int64_t sizes[][3] = {{1, 1, 1}, {7, 13, 5}, {65, 33, 129}, {16, 256, 8}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    check_product(dev, dt, 2, 2, 1, sizes[s][0], sizes[s][1], sizes[s][2], 100 + s);
  check_product(dev, dt, 3, 3, 3, 7, 13, 5, 7); /* batched */
  check_product(dev, dt, 3, 2, 3, 7, 13, 5, 8); /* one matrix for every batch entry */
  check_product(dev, dt, 2, 3, 2, 9, 4, 17, 9); /* the same on the left */
  check_product(dev, dt, 3, 3, 1, 33, 40, 31, 10);
}

START_TEST(test_matmul_devices) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++)
    for (int dt = CLT_F32; dt <= CLT_F64; dt++)
      if (cu_dtype_ok("test_matmul_devices", devs[d], (clt_dtype)dt))
        check_all_shapes(devs[d], (clt_dtype)dt);
}
END_TEST

START_TEST(test_matmul_empty) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    /* k = 0: the sum over nothing is 0 (the result starts from reused, dirty memory). */
    check_product(devs[d], CLT_F32, 2, 2, 1, 4, 0, 3, 1);
    check_product(devs[d], CLT_F32, 3, 3, 2, 4, 0, 3, 1);
    check_product(devs[d], CLT_F32, 2, 2, 1, 0, 5, 3, 1); /* m = 0 */
    check_product(devs[d], CLT_F32, 2, 2, 1, 4, 5, 0, 1); /* n = 0 */
    check_product(devs[d], CLT_F32, 3, 3, 0, 4, 5, 3, 1); /* no batch entries */
  }
}
END_TEST

START_TEST(test_matmul_errors) {
  clt_device *cpu = clt_cpu();
  int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s34[2] = {3, 4}, s3[1] = {4}, s234[3] = {2, 3, 4};
  int64_t s345[3] = {3, 4, 5};
  clt_tensor *a, *b, *out = CU_SENTINEL;
  CU_OK(clt_zeros(CLT_F32, 2, s23, cpu, &a));
  CU_OK(clt_zeros(CLT_F32, 2, s45, cpu, &b));
  CU_FAILS(clt_matmul(a, b, &out), CLT_ERR_SHAPE_MISMATCH, "clt_matmul");
  ck_assert_msg(strstr(clt_last_error(), "[2, 3] (argument 1)") &&
                    strstr(clt_last_error(), "[4, 5] (argument 2)"),
                "message names both shapes: %s", clt_last_error());
  clt_tensor_release(b);
  CU_OK(clt_zeros(CLT_F32, 1, s3, cpu, &b));
  CU_FAILS(clt_matmul(a, b, &out), CLT_ERR_SHAPE_MISMATCH, "clt_matmul");
  ck_assert_msg(strstr(clt_last_error(), "[4] (argument 2)") &&
                    strstr(clt_last_error(), "inner dimensions differ (3 and 4)"),
                "%s", clt_last_error());
  clt_tensor *z0;
  CU_OK(clt_zeros(CLT_F32, 0, NULL, cpu, &z0)); /* 0-d: torch.matmul refuses it too */
  CU_FAILS(clt_matmul(a, z0, &out), CLT_ERR_SHAPE_MISMATCH, "clt_matmul");
  ck_assert_msg(strstr(clt_last_error(), "at least one dimension") &&
                    strstr(clt_last_error(), "[] (argument 2)"),
                "%s", clt_last_error());
  clt_tensor_release(z0);
  clt_tensor_release(b);
  clt_tensor *c, *e;
  CU_OK(clt_zeros(CLT_F32, 3, s234, cpu, &c));
  CU_OK(clt_zeros(CLT_F32, 3, s345, cpu, &e));
  CU_FAILS(clt_matmul(c, e, &out), CLT_ERR_SHAPE_MISMATCH, "clt_matmul");
  ck_assert_msg(strstr(clt_last_error(), "batch sizes differ (2 and 3 in batch dimension 0)"), "%s",
                clt_last_error());
  clt_tensor_release(c);
  clt_tensor_release(e);

  CU_OK(clt_zeros(CLT_I32, 2, s34, cpu, &b));
  CU_FAILS(clt_matmul(a, b, &out), CLT_ERR_DTYPE, "clt_matmul");
  ck_assert_msg(strstr(clt_last_error(), "argument 2 is i32"), "%s", clt_last_error());
  clt_tensor_release(b);
  CU_OK(clt_zeros(CLT_F64, 2, s34, cpu, &b));
  CU_FAILS(clt_matmul(a, b, &out), CLT_ERR_DTYPE, "clt_matmul");
  ck_assert_msg(strstr(clt_last_error(), "f32") && strstr(clt_last_error(), "f64") &&
                    strstr(clt_last_error(), "cast"),
                "%s", clt_last_error());
  CU_FAILS(clt_matmul(NULL, b, &out), CLT_ERR_INVALID_ARGUMENT, "clt_matmul");
  CU_FAILS(clt_matmul(a, a, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_matmul");
  clt_tensor_release(b);

  if (cu_need_cl("test_matmul_errors", 1)) {
    CU_OK(clt_zeros(CLT_F32, 2, s34, clt_device_at(0), &b));
    CU_FAILS(clt_matmul(a, b, &out), CLT_ERR_DEVICE_MISMATCH, "clt_matmul");
    ck_assert_str_eq(clt_last_error(),
                     "clt_matmul: expected all tensors on the same device, but found cpu "
                     "(argument 1) and cl:0 (argument 2); copy one with clt_to()");
    clt_tensor_release(b);
  }
  ck_assert_ptr_eq(out, CU_SENTINEL);
  clt_tensor_release(a);
}
END_TEST

START_TEST(test_matmul_path_names) {
  const char *p = clt_matmul_path(clt_cpu());
  ck_assert_msg(p && (strcmp(p, "blas") == 0 || strcmp(p, "loop") == 0), "cpu path %s",
                p ? p : "(null)");
  for (int i = 0; i < clt_device_count(); i++) {
    clt_device *d = clt_device_at(i);
    p = clt_matmul_path(d);
    if (cu_is_cl(d))
      ck_assert_msg(
          p && (strcmp(p, "clblast") == 0 || strcmp(p, "native") == 0 || strcmp(p, "kernel") == 0),
          "%s path %s: %s", cu_dev_name(d), p ? p : "(null)", clt_last_error());
    else /* the reference backend runs the host's matmul */
      ck_assert_msg(p && (strcmp(p, "blas") == 0 || strcmp(p, "loop") == 0), "%s path %s: %s",
                    cu_dev_name(d), p ? p : "(null)", clt_last_error());
    printf("matmul path on %s: %s\n", cu_dev_name(d), p);
  }
  ck_assert_ptr_null(clt_matmul_path(NULL));
}
END_TEST

/* Forces CLT_MATMUL=path in this (forked) process and checks every shape on every OpenCL
 * device; skips where the build or the device lacks the path. */
static void forced_path(const char *test, const char *path) {
  if (!cu_forked) {
    cu_skip(test, "needs CK_FORK (CLT_MATMUL is set for this test's process only)");
    return;
  }
  setenv("CLT_MATMUL", path, 1);
  if (!cu_need_cl(test, 1))
    return;
  for (int i = 0; i < cu_cl_count(); i++) { /* CLT_MATMUL chooses among OpenCL's paths */
    clt_device *d = clt_device_at(i);
    const char *p = clt_matmul_path(d);
    if (!p) {
      ck_assert_int_eq(clt_last_status(), CLT_ERR_UNSUPPORTED);
      char why[512];
      snprintf(why, sizeof why, "%s", clt_last_error());
      cu_skip(test, why);
      continue;
    }
    ck_assert_str_eq(p, path);
    for (int dt = CLT_F32; dt <= CLT_F64; dt++)
      if (cu_dtype_ok(test, d, (clt_dtype)dt))
        check_all_shapes(d, (clt_dtype)dt);
    check_product(d, CLT_F32, 2, 2, 1, 4, 0, 3, 1);
  }
}

START_TEST(test_matmul_forced_kernel) { forced_path("test_matmul_forced_kernel", "kernel"); }
END_TEST
START_TEST(test_matmul_forced_native) { forced_path("test_matmul_forced_native", "native"); }
END_TEST
START_TEST(test_matmul_forced_clblast) { forced_path("test_matmul_forced_clblast", "clblast"); }
END_TEST

START_TEST(test_matmul_forced_bad) {
  if (!cu_forked) {
    cu_skip("test_matmul_forced_bad", "needs CK_FORK");
    return;
  }
  setenv("CLT_MATMUL", "fastest", 1);
  if (!cu_need_cl("test_matmul_forced_bad", 1))
    return;
  ck_assert_ptr_null(clt_matmul_path(clt_device_at(0)));
  ck_assert_int_eq(clt_last_status(), CLT_ERR_INVALID_ARGUMENT);
  int64_t s[2] = {2, 2};
  clt_tensor *a, *out = CU_SENTINEL;
  CU_OK(clt_ones(CLT_F32, 2, s, clt_device_at(0), &a));
  CU_FAILS(clt_matmul(a, a, &out), CLT_ERR_INVALID_ARGUMENT, "clt_matmul");
  ck_assert_msg(strstr(clt_last_error(), "CLT_MATMUL is 'fastest'"), "%s", clt_last_error());
  ck_assert_ptr_eq(out, CU_SENTINEL);
  clt_tensor_release(a);
}
END_TEST

/* The results of one product agree across devices within rounding. */
START_TEST(test_matmul_async_chain) {
  /* (a x b) x c with no synchronization between: each product must wait for the previous. */
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t s[2] = {24, 24};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *a, *b, *c, *t;
    CU_OK(clt_full(CLT_F64, 2, s, 0.5, devs[d], &a));
    CU_OK(clt_full(CLT_F64, 2, s, 2.0, devs[d], &b));
    CU_OK(clt_matmul(a, b, &c)); /* every element 24 */
    CU_OK(clt_matmul(c, b, &t)); /* every element 24 * 2 * 24 = 1152 */
    clt_tensor_release(c);
    CU_OK(clt_matmul(t, a, &c)); /* 1152 * 0.5 * 24 = 13824 */
    double *v = cu_read_double(c);
    for (int i = 0; i < 24 * 24; i++)
      ck_assert_msg(v[i] == 13824.0, "%s: element %d is %g", cu_dev_name(devs[d]), i, v[i]);
    free(v);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    clt_tensor_release(t);
  }
}
END_TEST

/* Products in flight on every device at once (cl:0 and cl:1 run the host's BLAS in their
 * queues' threads while the host runs it in this one), then read back. */
START_TEST(test_matmul_concurrent) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t s[2] = {96, 96};
  clt_tensor *a[CU_MAX_DEVICES], *c[CU_MAX_DEVICES];
  for (int d = ndev - 1; d >= 0; d--) { /* OpenCL devices first: they run while cpu computes */
    CU_OK(clt_full(CLT_F32, 2, s, 0.25 * (d + 1), devs[d], &a[d]));
    CU_OK(clt_matmul(a[d], a[d], &c[d])); /* the same buffer twice */
  }
  for (int d = 0; d < ndev; d++) {
    double *v = cu_read_double(c[d]), want = 96 * 0.0625 * (d + 1) * (d + 1);
    for (int i = 0; i < 96 * 96; i++)
      ck_assert_msg(v[i] == want, "%s: element %d is %g, expected %g", cu_dev_name(devs[d]), i,
                    v[i], want);
    free(v);
    clt_tensor_release(a[d]);
    clt_tensor_release(c[d]);
  }
}
END_TEST

/* ---- transpose ---------------------------------------------------------------------------- */

static void check_transpose(clt_device *dev, clt_dtype dt, int nd, const int64_t *shape, int d0,
                            int d1, uint64_t seed) {
  int64_t n = cu_numel(nd, shape);
  size_t es = clt_dtype_size(dt);
  void *h = cu_malloc((size_t)n * es);
  cu_rng r;
  cu_rng_seed(&r, seed);
  cu_fill(h, dt, n, &r, 0, 100, 0);
  clt_tensor *t = cu_tensor(h, dt, nd, shape, dev), *o = CU_SENTINEL;
  char what[128];
  snprintf(what, sizeof what, "transpose(%d, %d) of %d-D %s on %s", d0, d1, nd, cu_dt_name(dt),
           cu_dev_name(dev));
  clt_status st = clt_transpose(t, d0, d1, &o);
  ck_assert_msg(st == CLT_OK, "%s: %s", what, clt_last_error());
  int p0 = nd ? (d0 + nd) % nd : 0, p1 = nd ? (d1 + nd) % nd : 0;
  int64_t oshape[CLT_MAX_DIMS];
  for (int i = 0; i < nd; i++)
    oshape[i] = shape[i];
  if (nd) {
    oshape[p0] = shape[p1];
    oshape[p1] = shape[p0];
  }
  cu_assert_meta(o, dt, dev, nd, oshape, what);
  unsigned char *got = cu_read(o);
  for (int64_t i = 0; i < n; i++) {
    /* the output index i as coordinates, swapped back, as an input index */
    int64_t rem = i, coord[CLT_MAX_DIMS];
    for (int d = nd - 1; d >= 0; d--) {
      coord[d] = rem % oshape[d];
      rem /= oshape[d];
    }
    if (nd) {
      int64_t tmp = coord[p0];
      coord[p0] = coord[p1];
      coord[p1] = tmp;
    }
    int64_t src = 0;
    for (int d = 0; d < nd; d++)
      src = src * shape[d] + coord[d];
    ck_assert_msg(memcmp(got + i * es, (unsigned char *)h + src * es, es) == 0,
                  "%s: element %lld differs", what, (long long)i);
  }
  free(got);
  free(h);
  clt_tensor_release(t);
  clt_tensor_release(o);
}

START_TEST(test_transpose_dtypes) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  static const int64_t s3[3] = {3, 4, 5}, s2[2] = {33, 17}, s4[4] = {2, 3, 1, 4}, s1[1] = {6};
  static const int64_t s0[2] = {0, 3};
  for (int d = 0; d < ndev; d++)
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      if (!cu_dtype_ok("test_transpose_dtypes", devs[d], (clt_dtype)dt))
        continue;
      clt_dtype t = (clt_dtype)dt;
      check_transpose(devs[d], t, 3, s3, 0, 2, 1);
      check_transpose(devs[d], t, 3, s3, 1, -1, 2);
      check_transpose(devs[d], t, 3, s3, -3, 1, 3);
      check_transpose(devs[d], t, 3, s3, 1, 1, 4);
      check_transpose(devs[d], t, 2, s2, 0, 1, 5);
      check_transpose(devs[d], t, 4, s4, 3, 0, 6);
      check_transpose(devs[d], t, 1, s1, 0, -1, 7);
      check_transpose(devs[d], t, 0, NULL, 0, -1, 8);
      check_transpose(devs[d], t, 2, s0, 0, 1, 9);
    }
}
END_TEST

START_TEST(test_transpose_errors) {
  int64_t s[2] = {2, 3};
  clt_tensor *t, *o = CU_SENTINEL;
  CU_OK(clt_zeros(CLT_F32, 2, s, clt_cpu(), &t));
  CU_FAILS(clt_transpose(t, 0, 2, &o), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
  ck_assert_msg(strstr(clt_last_error(), "dim1 = 2 is out of range"), "%s", clt_last_error());
  CU_FAILS(clt_transpose(t, -3, 0, &o), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
  CU_FAILS(clt_transpose(NULL, 0, 1, &o), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
  CU_FAILS(clt_transpose(t, 0, 1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
  ck_assert_ptr_eq(o, CU_SENTINEL);
  clt_tensor_release(t);
}
END_TEST

/* clt_dot, clt_mv, clt_outer and clt_addmm on every device against values computed here, and
 * their errors. */
START_TEST(test_level12_products) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  const double av[3] = {1.5, -2, 0.25}, bv[3] = {4, 0.5, -8};
  const double mv[6] = {1, 2, 3, -1, 0.5, 4};                        /* [2, 3] */
  const double kv[12] = {1, -1, 2, 0, 0.5, 3, -2, 1, 4, 2, 0, -0.5}; /* [3, 4] */
  for (int d = 0; d < ndev; d++) {
    clt_device *dev = devs[d];
    clt_tensor *a = cu_tensor(av, CLT_F64, 1, (int64_t[]){3}, dev);
    clt_tensor *b = cu_tensor(bv, CLT_F64, 1, (int64_t[]){3}, dev);
    clt_tensor *m = cu_tensor(mv, CLT_F64, 2, (int64_t[]){2, 3}, dev);
    clt_tensor *k = cu_tensor(kv, CLT_F64, 2, (int64_t[]){3, 4}, dev);
    clt_tensor *dot, *y, *o, *c;
    CU_OK(clt_dot(a, b, &dot));
    cu_assert_meta(dot, CLT_F64, dev, 0, NULL, "clt_dot");
    ck_assert_double_eq(cu_item(dot), 1.5 * 4 - 2 * 0.5 + 0.25 * -8); /* exact: -3 */
    CU_OK(clt_mv(m, a, &y));
    cu_assert_meta(y, CLT_F64, dev, 1, (int64_t[]){2}, "clt_mv");
    double *gy = cu_read_double(y);
    ck_assert_double_eq(gy[0], 1.5 - 4 + 0.75);
    ck_assert_double_eq(gy[1], -1.5 - 1 + 1);
    free(gy);
    clt_tensor *ai, *bi, *oi;
    CU_OK(clt_cast(a, CLT_F32, &ai));
    CU_OK(clt_arange(1, 4, 1, CLT_I32, dev, &bi)); /* outer promotes, as clt_mul */
    CU_OK(clt_outer(ai, bi, &oi));
    cu_assert_meta(oi, CLT_F32, dev, 2, (int64_t[]){3, 3}, "clt_outer f32 x i32");
    CU_OK(clt_outer(a, b, &o));
    cu_assert_meta(o, CLT_F64, dev, 2, (int64_t[]){3, 3}, "clt_outer");
    double *go = cu_read_double(o), *goi = cu_read_double(oi);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) {
        ck_assert_double_eq(go[i * 3 + j], av[i] * bv[j]);
        ck_assert_double_eq(goi[i * 3 + j], av[i] * (j + 1));
      }
    free(go);
    free(goi);
    /* addmm: c broadcast as [2, 4], a row [4], a column [2, 1]; beta 0 ignores a NaN c */
    const double cv[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rv[4] = {10, 20, 30, 40}, colv[2] = {-1, 1};
    const double nanv[8] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    struct {
      const double *v;
      int nd;
      int64_t sh[2];
      double beta, alpha;
    } cs[] = {{cv, 2, {2, 4}, 0.5, 2},
              {rv, 1, {4}, 1, 1},
              {colv, 2, {2, 1}, -1, 0.25},
              {nanv, 2, {2, 4}, 0, 3}};
    for (int t = 0; t < 4; t++) {
      clt_tensor *ct = cu_tensor(cs[t].v, CLT_F64, cs[t].nd, cs[t].sh, dev);
      CU_OK(clt_addmm(ct, m, k, cs[t].beta, cs[t].alpha, &c));
      cu_assert_meta(c, CLT_F64, dev, 2, (int64_t[]){2, 4}, "clt_addmm");
      double *gc = cu_read_double(c);
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
          double p = 0;
          for (int q = 0; q < 3; q++)
            p += mv[i * 3 + q] * kv[q * 4 + j];
          double cij = cs[t].nd == 1      ? cs[t].v[j]
                       : cs[t].sh[1] == 1 ? cs[t].v[i]
                                          : cs[t].v[i * 4 + j];
          double want = cs[t].beta == 0 ? cs[t].alpha * p : cs[t].beta * cij + cs[t].alpha * p;
          ck_assert_msg(fabs(gc[i * 4 + j] - want) <= 1e-12 * (1 + fabs(want)),
                        "clt_addmm case %d on %s: [%d, %d] %.17g, want %.17g", t, cu_dev_name(dev),
                        i, j, gc[i * 4 + j], want);
        }
      free(gc);
      clt_tensor_release(ct);
      clt_tensor_release(c);
    }
    /* errors, each leaving out untouched */
    clt_tensor *out = CU_SENTINEL, *b4, *c33, *ci;
    CU_OK(clt_zeros(CLT_F64, 1, (int64_t[]){4}, dev, &b4));
    CU_FAILS(clt_dot(a, b4, &out), CLT_ERR_SHAPE_MISMATCH, "clt_dot");
    ck_assert_msg(strstr(clt_last_error(), "clt_dot: dot takes two 1-D tensors of one length; "
                                           "got [3] (argument 1) and [4] (argument 2)"),
                  "%s", clt_last_error());
    CU_FAILS(clt_dot(m, a, &out), CLT_ERR_SHAPE_MISMATCH, "clt_dot");
    CU_FAILS(clt_mv(m, b4, &out), CLT_ERR_SHAPE_MISMATCH, "clt_mv");
    ck_assert_msg(strstr(clt_last_error(), "[2, 3] (argument 1) and [4] (argument 2)"), "%s",
                  clt_last_error());
    CU_FAILS(clt_mv(a, a, &out), CLT_ERR_SHAPE_MISMATCH, "clt_mv");
    CU_FAILS(clt_outer(m, a, &out), CLT_ERR_SHAPE_MISMATCH, "clt_outer");
    CU_FAILS(clt_dot(ai, a, &out), CLT_ERR_DTYPE, "clt_dot");
    CU_FAILS(clt_dot(bi, bi, &out), CLT_ERR_DTYPE, "clt_dot");
    ck_assert_msg(strstr(clt_last_error(), "i32") && strstr(clt_last_error(), "clt_cast"), "%s",
                  clt_last_error());
    CU_OK(clt_zeros(CLT_F64, 2, (int64_t[]){3, 3}, dev, &c33));
    CU_FAILS(clt_addmm(c33, m, k, 1, 1, &out), CLT_ERR_SHAPE_MISMATCH, "clt_addmm");
    ck_assert_msg(strstr(clt_last_error(), "c [3, 3] does not broadcast to the product's shape "
                                           "[2, 4]"),
                  "%s", clt_last_error());
    CU_FAILS(clt_addmm(c33, m, m, 1, 1, &out), CLT_ERR_SHAPE_MISMATCH, "clt_addmm");
    CU_OK(clt_cast(c33, CLT_F32, &ci));
    CU_FAILS(clt_addmm(ci, m, k, 1, 1, &out), CLT_ERR_DTYPE, "clt_addmm");
    CU_FAILS(clt_addmm(NULL, m, k, 1, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_addmm");
    CU_FAILS(clt_addmm(c33, m, k, 1, 1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_addmm");
    CU_FAILS(clt_dot(a, b, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_dot");
    CU_FAILS(clt_mv(NULL, a, &out), CLT_ERR_INVALID_ARGUMENT, "clt_mv");
    CU_FAILS(clt_outer(a, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_outer");
    if (dev != clt_cpu()) {
      clt_tensor *h;
      CU_OK(clt_zeros(CLT_F64, 1, (int64_t[]){3}, clt_cpu(), &h));
      CU_FAILS(clt_outer(h, a, &out), CLT_ERR_DEVICE_MISMATCH, "clt_outer");
      char want[256];
      snprintf(want, sizeof want,
               "clt_outer: expected all tensors on the same device, but found cpu (argument 1) "
               "and %s (argument 2); copy one with clt_to()",
               cu_dev_name(dev));
      ck_assert_str_eq(clt_last_error(), want);
      CU_FAILS(clt_dot(h, a, &out), CLT_ERR_DEVICE_MISMATCH, "clt_dot");
      CU_FAILS(clt_addmm(h, m, k, 1, 1, &out), CLT_ERR_DEVICE_MISMATCH, "clt_addmm");
      snprintf(want, sizeof want, "but found cpu (c) and %s (a and b)", cu_dev_name(dev));
      ck_assert_msg(strstr(clt_last_error(), want), "%s", clt_last_error());
      clt_tensor_release(h);
    }
    ck_assert_ptr_eq(out, CU_SENTINEL);
    clt_tensor *all[] = {a, b, m, k, dot, y, ai, bi, oi, o, b4, c33, ci};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
      clt_tensor_release(all[i]);
  }
}
END_TEST

/* diagonal, tril, triu, diag, trace, eye, linspace on every device against index arithmetic
 * and torch's formulas computed here. */
START_TEST(test_structure) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  float v24[24];
  for (int i = 0; i < 24; i++)
    v24[i] = (float)i;
  for (int d = 0; d < ndev; d++) {
    clt_device *dev = devs[d];
    const char *dn = cu_dev_name(dev);
    clt_tensor *m = cu_tensor(v24, CLT_F32, 2, (int64_t[]){3, 4}, dev), *r = NULL;
    clt_tensor *t3 = cu_tensor(v24, CLT_F32, 3, (int64_t[]){2, 3, 4}, dev);
    /* diagonal views: offsets on a matrix, then two dimensions of a 3-D tensor */
    struct {
      int64_t off;
      int n;
      double want[3];
    } dg[] = {{0, 3, {0, 5, 10}}, {1, 3, {1, 6, 11}}, {-1, 2, {4, 9}},
              {3, 1, {3}},        {4, 0, {0}},        {-3, 0, {0}}};
    for (size_t k = 0; k < sizeof dg / sizeof dg[0]; k++) {
      CU_OK(clt_diagonal(m, dg[k].off, 0, 1, &r));
      cu_assert_meta(r, CLT_F32, dev, 1, (int64_t[]){dg[k].n}, "clt_diagonal");
      double *g = cu_read_double(r);
      for (int i = 0; i < dg[k].n; i++)
        ck_assert_msg(g[i] == dg[k].want[i], "diagonal(%lld) on %s: [%d] %g, want %g",
                      (long long)dg[k].off, dn, i, g[i], dg[k].want[i]);
      free(g);
      clt_tensor_release(r);
    }
    CU_OK(clt_diagonal(t3, 1, 0, 2, &r)); /* t3[i, j, i + 1]: shape [3, 2] */
    cu_assert_meta(r, CLT_F32, dev, 2, (int64_t[]){3, 2}, "clt_diagonal(1, 0, 2)");
    double *g = cu_read_double(r);
    for (int j = 0; j < 3; j++)
      for (int i = 0; i < 2; i++)
        ck_assert_msg(g[j * 2 + i] == i * 12 + j * 4 + i + 1, "diagonal(1, 0, 2) on %s", dn);
    free(g);
    clt_tensor_release(r);
    /* a write through the view reaches the matrix */
    clt_tensor *mc;
    CU_OK(clt_clone(m, &mc));
    CU_OK(clt_diagonal(mc, -1, 0, 1, &r));
    CU_OK(clt_fill_(r, -7));
    clt_tensor_release(r);
    g = cu_read_double(mc);
    for (int i = 0; i < 12; i++)
      ck_assert_msg(g[i] == (i == 4 || i == 9 ? -7 : i), "fill through diagonal on %s: [%d] %g", dn,
                    i, g[i]);
    free(g);
    clt_tensor_release(mc);
    /* tril / triu of a batch, with an infinity in the part they zero; an i32 matrix */
    float vi[24];
    for (int i = 0; i < 24; i++)
      vi[i] = i % 5 == 3 ? INFINITY : (float)i - 11.5f;
    clt_tensor *bi = cu_tensor(vi, CLT_F32, 3, (int64_t[]){2, 3, 4}, dev);
    clt_tensor *mi, *ti;
    CU_OK(clt_cast(m, CLT_I32, &mi));
    for (int64_t k = -2; k <= 3; k++)
      for (int up = 0; up < 2; up++) {
        /* made on the device: no copy from the host (their index vectors included) */
        clt_transfer_stats before, after;
        if (dev != clt_cpu())
          CU_OK(clt_transfer_stats_get(dev, &before));
        CU_OK(up ? clt_triu(bi, k, &r) : clt_tril(bi, k, &r));
        CU_OK(up ? clt_triu(mi, k, &ti) : clt_tril(mi, k, &ti));
        if (dev != clt_cpu()) {
          CU_OK(clt_transfer_stats_get(dev, &after));
          ck_assert_msg(after.h2d_count == before.h2d_count &&
                            after.internal_count == before.internal_count,
                        "%s on %s copied from the host", up ? "triu" : "tril", dn);
        }
        cu_assert_meta(r, CLT_F32, dev, 3, (int64_t[]){2, 3, 4}, up ? "clt_triu" : "clt_tril");
        cu_assert_meta(ti, CLT_I32, dev, 2, (int64_t[]){3, 4}, up ? "clt_triu" : "clt_tril");
        double *gr = cu_read_double(r), *gt = cu_read_double(ti);
        for (int i = 0; i < 24; i++) {
          int64_t row = (i / 4) % 3, col = i % 4;
          bool keep = up ? col - row >= k : col - row <= k;
          ck_assert_msg(gr[i] == (keep ? vi[i] : 0.0), "%s(%lld) on %s: [%d] %g",
                        up ? "triu" : "tril", (long long)k, dn, i, gr[i]);
          if (i < 12)
            ck_assert_msg(gt[i] == (keep ? i : 0), "i32 %s(%lld) on %s: [%d] %g",
                          up ? "triu" : "tril", (long long)k, dn, i, gt[i]);
        }
        free(gr);
        free(gt);
        clt_tensor_release(r);
        clt_tensor_release(ti);
      }
    /* diag: a vector to a matrix, a matrix to a copy of its diagonal; trace */
    clt_tensor *vec = cu_tensor((double[]){2, -3, 5}, CLT_F64, 1, (int64_t[]){3}, dev);
    for (int64_t k = -2; k <= 2; k++) {
      CU_OK(clt_diag(vec, k, &r));
      int64_t n = 3 + (k < 0 ? -k : k);
      cu_assert_meta(r, CLT_F64, dev, 2, (int64_t[]){n, n}, "clt_diag of a vector");
      double *gd = cu_read_double(r);
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
          int64_t at = k >= 0 ? i : j; /* the vector's index on the diagonal */
          double want = j - i == k ? ((const double[]){2, -3, 5})[at] : 0;
          ck_assert_msg(gd[i * n + j] == want, "diag(%lld) on %s: [%lld, %lld] %g, want %g",
                        (long long)k, dn, (long long)i, (long long)j, gd[i * n + j], want);
        }
      free(gd);
      clt_tensor_release(r);
    }
    CU_OK(clt_diag(m, 1, &r));
    CU_OK(clt_fill_(m, 0)); /* a copy: the fill does not reach it */
    cu_assert_meta(r, CLT_F32, dev, 1, (int64_t[]){3}, "clt_diag of a matrix");
    g = cu_read_double(r);
    ck_assert_msg(g[0] == 1 && g[1] == 6 && g[2] == 11, "diag(m, 1) on %s: %g %g %g", dn, g[0],
                  g[1], g[2]);
    free(g);
    clt_tensor_release(r);
    CU_OK(clt_trace(mi, &r));
    ck_assert_msg(cu_item(r) == 15, "trace on %s: %g", dn, cu_item(r));
    clt_tensor_release(r);
    /* eye and linspace */
    CU_OK(clt_eye(3, -1, CLT_F32, dev, &r));
    cu_assert_meta(r, CLT_F32, dev, 2, (int64_t[]){3, 3}, "clt_eye(3)");
    g = cu_read_double(r);
    for (int i = 0; i < 9; i++)
      ck_assert_msg(g[i] == (i % 4 == 0), "eye(3) on %s: [%d] %g", dn, i, g[i]);
    free(g);
    clt_tensor_release(r);
    CU_OK(clt_eye(2, 4, CLT_I64, dev, &r));
    cu_assert_meta(r, CLT_I64, dev, 2, (int64_t[]){2, 4}, "clt_eye(2, 4)");
    g = cu_read_double(r);
    for (int i = 0; i < 8; i++)
      ck_assert_msg(g[i] == (i == 0 || i == 5), "eye(2, 4) on %s: [%d] %g", dn, i, g[i]);
    free(g);
    clt_tensor_release(r);
    CU_OK(clt_eye(0, 3, CLT_BOOL, dev, &r));
    cu_assert_meta(r, CLT_BOOL, dev, 2, (int64_t[]){0, 3}, "clt_eye(0, 3)");
    clt_tensor_release(r);
    struct {
      double a, b;
      int64_t n;
    } ls[] = {{0, 1, 5},      {-1, 1, 4},       {0.1, 7.3, 11},  {3, -2.5, 7},
              {1e-3, 1e3, 2}, {0.3, 0.7, 1001}, {-5.1, 13.7, 77}};
    for (size_t k = 0; k < sizeof ls / sizeof ls[0]; k++) {
      CU_OK(clt_linspace(ls[k].a, ls[k].b, ls[k].n, CLT_F32, dev, &r));
      cu_assert_meta(r, CLT_F32, dev, 1, (int64_t[]){ls[k].n}, "clt_linspace");
      float *gf = cu_read(r);
      float a = (float)ls[k].a, b = (float)ls[k].b, st = (b - a) / (float)(ls[k].n - 1);
      bool fp64 = clt_device_has_fp64(dev);
      for (int64_t i = 0; i < ls[k].n; i++) {
        /* PyTorch's fused multiply-add (its values for these cases, checked with 2.5.1) as
         * an exact f64 product and sum rounded to f32; in f32 where the device lacks f64 */
        double up = (double)a + (double)st * (double)i;
        double down = (double)b - (double)st * (double)(ls[k].n - 1 - i);
        volatile float v32 =
            i < ls[k].n / 2 ? a + st * (float)i : b - st * (float)(ls[k].n - 1 - i);
        float w = fp64 ? (float)(i < ls[k].n / 2 ? up : down) : v32;
        ck_assert_msg(gf[i] == w, "linspace(%g, %g, %lld) f32 on %s: [%lld] %.9g, want %.9g",
                      ls[k].a, ls[k].b, (long long)ls[k].n, dn, (long long)i, gf[i], (double)w);
      }
      ck_assert_msg(gf[0] == a && gf[ls[k].n - 1] == b, "linspace's ends on %s", dn);
      free(gf);
      clt_tensor_release(r);
    }
    CU_OK(clt_linspace(0, 10, 5, CLT_I32, dev, &r)); /* 0, 2.5, 5, 7.5, 10 truncated */
    g = cu_read_double(r);
    ck_assert_msg(g[0] == 0 && g[1] == 2 && g[2] == 5 && g[3] == 7 && g[4] == 10,
                  "linspace i32 on %s: %g %g %g %g %g", dn, g[0], g[1], g[2], g[3], g[4]);
    free(g);
    clt_tensor_release(r);
    CU_OK(clt_linspace(4, 9, 1, CLT_F32, dev, &r));
    ck_assert_msg(clt_tensor_numel(r) == 1 && cu_item(r) == 4, "linspace of 1 on %s", dn);
    clt_tensor_release(r);
    CU_OK(clt_linspace(4, 9, 0, CLT_F32, dev, &r));
    ck_assert_int_eq(clt_tensor_numel(r), 0);
    clt_tensor_release(r);
    /* errors */
    clt_tensor *out = CU_SENTINEL;
    CU_FAILS(clt_diagonal(vec, 0, 0, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_diagonal");
    CU_FAILS(clt_diagonal(m, 0, 1, -1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_diagonal");
    ck_assert_msg(strstr(clt_last_error(), "both dimension 1"), "%s", clt_last_error());
    CU_FAILS(clt_diagonal(m, 0, 0, 2, &out), CLT_ERR_INVALID_ARGUMENT, "clt_diagonal");
    CU_FAILS(clt_tril(vec, 0, &out), CLT_ERR_SHAPE_MISMATCH, "clt_tril");
    CU_FAILS(clt_triu(NULL, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_triu");
    CU_FAILS(clt_diag(t3, 0, &out), CLT_ERR_SHAPE_MISMATCH, "clt_diag");
    CU_FAILS(clt_trace(vec, &out), CLT_ERR_SHAPE_MISMATCH, "clt_trace");
    CU_FAILS(clt_eye(-1, 2, CLT_F32, dev, &out), CLT_ERR_INVALID_ARGUMENT, "clt_eye");
    CU_FAILS(clt_eye(2, 2, (clt_dtype)99, dev, &out), CLT_ERR_INVALID_ARGUMENT, "clt_eye");
    CU_FAILS(clt_eye(2, 2, CLT_F32, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_eye");
    CU_FAILS(clt_linspace(0, 1, -1, CLT_F32, dev, &out), CLT_ERR_INVALID_ARGUMENT, "clt_linspace");
    CU_FAILS(clt_linspace(NAN, 1, 3, CLT_F32, dev, &out), CLT_ERR_INVALID_ARGUMENT, "clt_linspace");
    CU_FAILS(clt_linspace(0, 1, 3, CLT_F32, dev, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linspace");
    ck_assert_ptr_eq(out, CU_SENTINEL);
    clt_tensor *all[] = {m, t3, bi, mi, vec};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
      clt_tensor_release(all[i]);
  }
}
END_TEST

Suite *matmul_suite(void) {
  Suite *s = suite_create("matmul");
  TCase *tc = cu_tcase("matmul");
  tcase_add_test(tc, test_matmul_devices);
  tcase_add_test(tc, test_matmul_empty);
  tcase_add_test(tc, test_matmul_errors);
  tcase_add_test(tc, test_level12_products);
  tcase_add_test(tc, test_matmul_path_names);
  tcase_add_test(tc, test_matmul_async_chain);
  tcase_add_test(tc, test_matmul_concurrent);
  tcase_add_test(tc, test_matmul_forced_kernel);
  tcase_add_test(tc, test_matmul_forced_native);
  tcase_add_test(tc, test_matmul_forced_clblast);
  tcase_add_test(tc, test_matmul_forced_bad);
  suite_add_tcase(s, tc);
  TCase *ts = cu_tcase("structure");
  tcase_add_test(ts, test_structure);
  suite_add_tcase(s, ts);
  TCase *tt = cu_tcase("transpose");
  tcase_add_test(tt, test_transpose_dtypes);
  tcase_add_test(tt, test_transpose_errors);
  suite_add_tcase(s, tt);
  return s;
}
