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

/* Every shape this suite cares about on dev, in dtype dt. */
static void check_all_shapes(clt_device *dev, clt_dtype dt) {
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
  int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s34[2] = {3, 4}, s3[1] = {3}, s234[3] = {2, 3, 4};
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
  ck_assert_msg(strstr(clt_last_error(), "[3] (argument 2)"), "%s", clt_last_error());
  clt_tensor_release(b);
  clt_tensor *c, *e;
  CU_OK(clt_zeros(CLT_F32, 3, s234, cpu, &c));
  CU_OK(clt_zeros(CLT_F32, 3, s345, cpu, &e));
  CU_FAILS(clt_matmul(c, e, &out), CLT_ERR_SHAPE_MISMATCH, "clt_matmul");
  ck_assert_msg(strstr(clt_last_error(), "batch sizes differ (2 and 3)"), "%s", clt_last_error());
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

Suite *matmul_suite(void) {
  Suite *s = suite_create("matmul");
  TCase *tc = cu_tcase("matmul");
  tcase_add_test(tc, test_matmul_devices);
  tcase_add_test(tc, test_matmul_empty);
  tcase_add_test(tc, test_matmul_errors);
  tcase_add_test(tc, test_matmul_path_names);
  tcase_add_test(tc, test_matmul_async_chain);
  tcase_add_test(tc, test_matmul_concurrent);
  tcase_add_test(tc, test_matmul_forced_kernel);
  tcase_add_test(tc, test_matmul_forced_native);
  tcase_add_test(tc, test_matmul_forced_clblast);
  tcase_add_test(tc, test_matmul_forced_bad);
  suite_add_tcase(s, tc);
  TCase *tt = cu_tcase("transpose");
  tcase_add_test(tt, test_transpose_dtypes);
  tcase_add_test(tt, test_transpose_errors);
  suite_add_tcase(s, tt);
  return s;
}
