/* SPDX-License-Identifier: MIT */
/* check_tensor.c - tensor creation, accessors, host access, refcounting, pinned memory. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

START_TEST(test_dtype_table) {
  static const char *names[] = {"f32", "f64", "i32", "i64", "u8", "bool", "f16", "bf16"};
  static const size_t sizes[] = {4, 8, 4, 8, 1, 1, 2, 2};
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    ck_assert_str_eq(clt_dtype_name((clt_dtype)dt), names[dt]);
    ck_assert_uint_eq(clt_dtype_size((clt_dtype)dt), sizes[dt]);
  }
  ck_assert_ptr_null(clt_dtype_name((clt_dtype)42));
  ck_assert_uint_eq(clt_dtype_size((clt_dtype)42), 0);
  ck_assert_ptr_null(clt_dtype_name((clt_dtype)-1));
}
END_TEST

/* ---- creation errors ---------------------------------------------------------------------- */

enum { MK_EMPTY, MK_ZEROS, MK_ONES, MK_FULL, MK_FROM_HOST, MK_PINNED, MK_COUNT };
static const char *mk_names[MK_COUNT] = {"clt_empty", "clt_zeros",     "clt_ones",
                                         "clt_full",  "clt_from_host", "clt_empty_pinned"};
static double mk_src[64];

static clt_status mk(int fn, clt_dtype dt, int ndim, const int64_t *shape, clt_device *dev,
                     clt_tensor **out) {
  switch (fn) {
  case MK_EMPTY:
    return clt_empty(dt, ndim, shape, dev, out);
  case MK_ZEROS:
    return clt_zeros(dt, ndim, shape, dev, out);
  case MK_ONES:
    return clt_ones(dt, ndim, shape, dev, out);
  case MK_FULL:
    return clt_full(dt, ndim, shape, 1.0, dev, out);
  case MK_FROM_HOST:
    return clt_from_host(mk_src, dt, ndim, shape, dev, out);
  default:
    return clt_empty_pinned(dt, ndim, shape, dev, out);
  }
}

START_TEST(test_create_errors) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t ok_shape[CLT_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  int64_t neg[2] = {3, -1};
  int64_t huge[2] = {INT64_MAX / 2, 4};
  int64_t huge2[3] = {INT64_C(1) << 31, INT64_C(1) << 31, INT64_C(1) << 31};
  struct {
    const char *what;
    clt_dtype dt;
    int ndim;
    const int64_t *shape;
    int null_dev, null_out;
  } cases[] = {
      {"ndim 9", CLT_F32, CLT_MAX_DIMS + 1, ok_shape, 0, 0},
      {"ndim -1", CLT_F32, -1, ok_shape, 0, 0},
      {"negative dimension", CLT_F32, 2, neg, 0, 0},
      {"size overflow {INT64_MAX/2, 4}", CLT_F32, 2, huge, 0, 0},
      {"size overflow {2^31, 2^31, 2^31}", CLT_U8, 3, huge2, 0, 0},
      {"dtype 42", (clt_dtype)42, 1, ok_shape, 0, 0},
      {"dtype -1", (clt_dtype)-1, 1, ok_shape, 0, 0},
      {"NULL shape with ndim 1", CLT_F32, 1, NULL, 0, 0},
      {"NULL device", CLT_F32, 1, ok_shape, 1, 0},
      {"NULL out", CLT_F32, 1, ok_shape, 0, 1},
  };
  for (int fn = 0; fn < MK_COUNT; fn++) {
    for (int d = 0; d < ndev; d++) {
      clt_device *dev = devs[d];
      if (fn == MK_PINNED && clt_device_is_host(dev))
        continue; /* pinned memory is near an OpenCL device */
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        clt_tensor *out = CU_SENTINEL;
        clt_clear_error();
        clt_status s = mk(fn, cases[c].dt, cases[c].ndim, cases[c].shape,
                          cases[c].null_dev ? NULL : dev, cases[c].null_out ? NULL : &out);
        ck_assert_msg(s == CLT_ERR_INVALID_ARGUMENT,
                      "%s on %s with %s gave %s, expected ERR_INVALID_ARGUMENT (%s)", mk_names[fn],
                      cu_dev_name(dev), cases[c].what, clt_status_name(s), clt_last_error());
        ck_assert_msg(out == CU_SENTINEL, "%s on %s with %s: out was changed", mk_names[fn],
                      cu_dev_name(dev), cases[c].what);
        ck_assert_int_eq(clt_last_status(), CLT_ERR_INVALID_ARGUMENT);
        char what[160];
        snprintf(what, sizeof what, "%s on %s with %s", mk_names[fn], cu_dev_name(dev),
                 cases[c].what);
        cu_assert_prefix(clt_last_error(), mk_names[fn], what);
      }
      /* The largest ndim and ndim 0 (shape NULL) are fine. */
      clt_tensor *t = NULL;
      clt_status s = mk(fn, CLT_F32, CLT_MAX_DIMS, ok_shape, dev, &t);
      ck_assert_msg(s == CLT_OK, "%s on %s with ndim 8: %s", mk_names[fn], cu_dev_name(dev),
                    clt_last_error());
      ck_assert_int_eq(clt_tensor_ndim(t), CLT_MAX_DIMS);
      ck_assert_int_eq(clt_tensor_numel(t), 1);
      clt_tensor_release(t);
      t = NULL;
      s = mk(fn, CLT_F32, 0, NULL, dev, &t);
      ck_assert_msg(s == CLT_OK, "%s on %s with ndim 0: %s", mk_names[fn], cu_dev_name(dev),
                    clt_last_error());
      ck_assert_int_eq(clt_tensor_ndim(t), 0);
      ck_assert_int_eq(clt_tensor_numel(t), 1);
      clt_tensor_release(t);
    }
  }
  /* from_host with no source data. */
  clt_tensor *out = CU_SENTINEL;
  CU_FAILS(clt_from_host(NULL, CLT_F32, 1, ok_shape, clt_cpu(), &out), CLT_ERR_INVALID_ARGUMENT,
           "clt_from_host");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  /* Pinned memory near the host is refused. */
  CU_FAILS(clt_empty_pinned(CLT_F32, 1, ok_shape, clt_cpu(), &out), CLT_ERR_INVALID_ARGUMENT,
           "clt_empty_pinned");
  ck_assert_ptr_eq(out, CU_SENTINEL);
}
END_TEST

/* ---- values of the creation functions ----------------------------------------------------- */

static double full_value(clt_dtype dt) {
  switch (dt) {
  case CLT_F32:
    return -2.5;
  case CLT_F64:
    return -2.0 / 3.0;
  case CLT_I32:
    return -123456.0;
  case CLT_I64:
    return 1099511627779.0; /* 2^40 + 3 */
  case CLT_U8:
    return 200.0;
  default:
    return 7.0; /* bool: true */
  }
}

START_TEST(test_create_values) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[2] = {3, 5};
  for (int d = 0; d < ndev; d++) {
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      if (!cu_dtype_ok("test_create_values", devs[d], (clt_dtype)dt))
        continue;
      for (int fn = MK_ZEROS; fn <= MK_FULL; fn++) {
        clt_tensor *t = NULL;
        clt_status s = fn == MK_FULL ? clt_full((clt_dtype)dt, 2, shape, full_value((clt_dtype)dt),
                                                devs[d], &t)
                                     : mk(fn, (clt_dtype)dt, 2, shape, devs[d], &t);
        ck_assert_msg(s == CLT_OK, "%s %s on %s: %s", mk_names[fn], cu_dt_name((clt_dtype)dt),
                      cu_dev_name(devs[d]), clt_last_error());
        char what[96];
        snprintf(what, sizeof what, "%s %s on %s", mk_names[fn], cu_dt_name((clt_dtype)dt),
                 cu_dev_name(devs[d]));
        cu_assert_meta(t, (clt_dtype)dt, devs[d], 2, shape, what);
        ck_assert_int_eq(clt_tensor_is_pinned(t), 0);
        void *raw = cu_read(t);
        double want = fn == MK_ZEROS ? 0.0 : fn == MK_ONES ? 1.0 : full_value((clt_dtype)dt);
        if (dt == CLT_BOOL)
          want = want != 0.0;
        if (dt == CLT_F32)
          want = (float)want;
        for (int i = 0; i < 15; i++) {
          if (dt == CLT_I64 && fn == MK_FULL)
            ck_assert_msg(cu_get_i64(raw, CLT_I64, i) == INT64_C(1099511627779),
                          "%s: element %d is %lld", what, i,
                          (long long)cu_get_i64(raw, CLT_I64, i));
          ck_assert_msg(cu_get(raw, (clt_dtype)dt, i) == want,
                        "%s: element %d is %.17g, expected %.17g", what, i,
                        cu_get(raw, (clt_dtype)dt, i), want);
        }
        free(raw);
        clt_tensor_release(t);
      }
    }
  }
}
END_TEST

START_TEST(test_full_range) {
  /* For integer dtypes the value must be an integer within the dtype's range. */
  int64_t shape[1] = {2};
  struct {
    clt_dtype dt;
    double v;
  } bad[] = {{CLT_U8, 256.0}, {CLT_U8, -1.0},  {CLT_I32, 2147483648.0},
             {CLT_I32, 0.5},  {CLT_I64, 1e30}, {CLT_I32, NAN}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    clt_tensor *t = CU_SENTINEL;
    clt_status s = clt_full(bad[i].dt, 1, shape, bad[i].v, clt_cpu(), &t);
    ck_assert_msg(s == CLT_ERR_INVALID_ARGUMENT,
                  "clt_full(%s, %g) gave %s, expected ERR_INVALID_ARGUMENT", cu_dt_name(bad[i].dt),
                  bad[i].v, clt_status_name(s));
    ck_assert_ptr_eq(t, CU_SENTINEL);
    cu_assert_prefix(clt_last_error(), "clt_full", "clt_full out of range");
  }
  /* The ends of the ranges are fine. */
  clt_tensor *t;
  CU_OK(clt_full(CLT_U8, 1, shape, 255.0, clt_cpu(), &t));
  ck_assert_int_eq(((uint8_t *)clt_tensor_data(t))[1], 255);
  clt_tensor_release(t);
  CU_OK(clt_full(CLT_I32, 1, shape, -2147483648.0, clt_cpu(), &t));
  ck_assert_int_eq(((int32_t *)clt_tensor_data(t))[1], INT32_MIN);
  clt_tensor_release(t);
}
END_TEST

/* t and h (any devices) have the same elements, bit for bit. */
static void assert_same_bits(const clt_tensor *t, const clt_tensor *h, const char *what) {
  ck_assert_int_eq(clt_tensor_numel(t), clt_tensor_numel(h));
  size_t es = clt_dtype_size(clt_tensor_dtype(t));
  char *a = cu_read(t), *b = cu_read(h);
  /* one comparison; element by element only to name the first difference (an assertion per
   * element costs Check a write to its pipe each) */
  if (memcmp(a, b, es * (size_t)clt_tensor_numel(t)) != 0)
    for (int64_t i = 0; i < clt_tensor_numel(t); i++)
      if (memcmp(a + (size_t)i * es, b + (size_t)i * es, es) != 0)
        ck_abort_msg("%s: element %lld is %.17g, the host's %.17g", what, (long long)i,
                     cu_get(a, clt_tensor_dtype(t), i), cu_get(b, clt_tensor_dtype(h), i));
  free(a);
  free(b);
}

START_TEST(test_arange) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    clt_device *dev = devs[d];
    const char *dn = cu_dev_name(dev);
    clt_tensor *t = NULL;
    CU_OK(clt_arange(0, 10, 3, CLT_I32, dev, &t));
    int64_t four[1] = {4};
    cu_assert_meta(t, CLT_I32, dev, 1, four, "arange(0, 10, 3, i32)");
    int32_t got[4];
    CU_OK(clt_tensor_read(t, got, sizeof got));
    ck_assert_msg(got[0] == 0 && got[1] == 3 && got[2] == 6 && got[3] == 9,
                  "arange(0,10,3) on %s gave %d %d %d %d", dn, got[0], got[1], got[2], got[3]);
    clt_tensor_release(t);

    struct {
      double start, end, step;
      int64_t n;
    } cases[] = {{0, 5, 1, 5},  {5, 0, -2, 3},   {2, 2, 1, 0},   {5, 0, 1, 0},
                 {-3, 3, 2, 3}, {0, 1, 0.25, 4}, {0, 1, 0.3, 4}, {250, 256, 1, 6}};
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      if (dt == CLT_BOOL || !cu_dtype_ok("test_arange", dev, (clt_dtype)dt))
        continue;
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int frac = cases[c].step != floor(cases[c].step);
        if (frac && !cu_is_float((clt_dtype)dt))
          continue;
        if (dt == CLT_U8 && cases[c].start < 0)
          continue;
        char what[128];
        snprintf(what, sizeof what, "arange(%g, %g, %g, %s) on %s", cases[c].start, cases[c].end,
                 cases[c].step, cu_dt_name((clt_dtype)dt), dn);
        clt_transfer_stats before, after;
        if (dev != clt_cpu())
          CU_OK(clt_transfer_stats_get(dev, &before));
        CU_OK(clt_arange(cases[c].start, cases[c].end, cases[c].step, (clt_dtype)dt, dev, &t));
        cu_assert_meta(t, (clt_dtype)dt, dev, 1, &cases[c].n, what);
        if (dev != clt_cpu()) {
          /* integers made on the device (no trip), floats on the host and uploaded; the host's
           * bits either way */
          bool made_there = dt == CLT_I64 || dt == CLT_I32 || dt == CLT_U8;
          CU_OK(clt_transfer_stats_get(dev, &after));
          ck_assert_msg(!made_there || cases[c].n == 0 || after.h2d_count == before.h2d_count,
                        "%s: made on the host and uploaded", what);
          clt_tensor *h;
          CU_OK(clt_arange(cases[c].start, cases[c].end, cases[c].step, (clt_dtype)dt, clt_cpu(),
                           &h));
          assert_same_bits(t, h, what);
          clt_tensor_release(h);
        }
        double *v = cu_read_double(t);
        for (int64_t i = 0; i < cases[c].n; i++) {
          double want = cases[c].start + (double)i * cases[c].step;
          if (dt == CLT_F16 || dt == CLT_BF16) /* each value rounded to the dtype */
            want = cu_round_narrow((double)(float)want, (clt_dtype)dt);
          ck_assert_msg(cu_close(v[i], want, 1e-6, 1e-7), "%s: element %lld is %.9g, expected %.9g",
                        what, (long long)i, v[i], want);
        }
        free(v);
        clt_tensor_release(t);
      }
    }
    /* long ones, every work-item's chunk used (and floats with a step that is not a binary
     * fraction): the host's bits */
    for (int k = 0; k < 4; k++) {
      clt_dtype dt = k == 0 ? CLT_F32 : k == 1 ? CLT_F64 : k == 2 ? CLT_I64 : CLT_I32;
      if (dev == clt_cpu() || !cu_dtype_ok("test_arange", dev, dt) || cu_is_oclgrind(dev))
        continue;
      bool integer = dt == CLT_I64 || dt == CLT_I32;
      double start = integer ? -700001 : -1000.5, step = integer ? 3 : 0.7, end = 1e5;
      clt_tensor *h;
      CU_OK(clt_arange(start, end, step, dt, dev, &t));
      CU_OK(clt_arange(start, end, step, dt, clt_cpu(), &h));
      assert_same_bits(t, h, "a long arange");
      clt_tensor_release(h);
      clt_tensor_release(t);
    }
    t = CU_SENTINEL;
    CU_FAILS(clt_arange(0, 10, 0, CLT_F32, dev, &t), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
    ck_assert_ptr_eq(t, CU_SENTINEL);
    CU_FAILS(clt_arange(0, 10, 1, CLT_BOOL, dev, &t), CLT_ERR_DTYPE, "clt_arange");
    ck_assert_ptr_eq(t, CU_SENTINEL);
    CU_FAILS(clt_arange(0, 10, 1, (clt_dtype)42, dev, &t), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
    CU_FAILS(clt_arange(0, 10, 1, CLT_F32, dev, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
    ck_assert_ptr_eq(t, CU_SENTINEL);
  }
  clt_tensor *t = CU_SENTINEL;
  CU_FAILS(clt_arange(0, 10, 1, CLT_F32, NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
  ck_assert_ptr_eq(t, CU_SENTINEL);
}
END_TEST

START_TEST(test_from_host) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[3] = {4, 3, 7};
  cu_rng r;
  cu_rng_seed(&r, 11);
  for (int d = 0; d < ndev; d++) {
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      if (!cu_dtype_ok("test_from_host", devs[d], (clt_dtype)dt))
        continue;
      size_t nb = 84 * clt_dtype_size((clt_dtype)dt);
      void *src = cu_malloc(nb), *keep = cu_malloc(nb);
      cu_fill(src, (clt_dtype)dt, 84, &r, -100, 100, 0);
      memcpy(keep, src, nb);
      clt_tensor *t = cu_tensor(src, (clt_dtype)dt, 3, shape, devs[d]);
      memset(src, 0x5A, nb); /* src may be reused as soon as the call returns */
      char what[64];
      snprintf(what, sizeof what, "from_host %s on %s", cu_dt_name((clt_dtype)dt),
               cu_dev_name(devs[d]));
      cu_assert_meta(t, (clt_dtype)dt, devs[d], 3, shape, what);
      void *got = cu_read(t);
      ck_assert_msg(memcmp(got, keep, nb) == 0, "%s: read back differs", what);
      /* A larger destination is fine too. */
      void *big = cu_malloc(nb + 16);
      CU_OK(clt_tensor_read(t, big, nb + 16));
      ck_assert_msg(memcmp(big, keep, nb) == 0, "%s: read into a larger buffer differs", what);
      free(big);
      free(got);
      free(src);
      free(keep);
      clt_tensor_release(t);
    }
  }
}
END_TEST

START_TEST(test_zero_size) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[3] = {3, 0, 2};
  char dummy[8] = "unused";
  for (int d = 0; d < ndev; d++) {
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      if (!cu_dtype_ok("test_zero_size", devs[d], (clt_dtype)dt))
        continue;
      char what[64];
      snprintf(what, sizeof what, "zero-size %s on %s", cu_dt_name((clt_dtype)dt),
               cu_dev_name(devs[d]));
      for (int fn = MK_EMPTY; fn <= MK_FROM_HOST; fn++) {
        clt_tensor *t = NULL;
        clt_status s = mk(fn, (clt_dtype)dt, 3, shape, devs[d], &t);
        ck_assert_msg(s == CLT_OK, "%s: %s: %s", what, mk_names[fn], clt_last_error());
        cu_assert_meta(t, (clt_dtype)dt, devs[d], 3, shape, what);
        CU_OK(clt_tensor_read(t, dummy, 0));
        ck_assert_str_eq(dummy, "unused");
        clt_tensor_release(t);
      }
    }
  }
}
END_TEST

START_TEST(test_scalar_and_ndim8) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape8[8] = {1, 2, 1, 2, 1, 2, 1, 2};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *t = NULL;
    CU_OK(clt_full(CLT_F32, 0, NULL, 3.5, devs[d], &t));
    cu_assert_meta(t, CLT_F32, devs[d], 0, NULL, "0-d full");
    double v = 0;
    CU_OK(clt_item(t, &v));
    ck_assert_msg(v == 3.5, "0-d full on %s: item %g", cu_dev_name(devs[d]), v);
    clt_tensor_release(t);

    int32_t x = -42;
    t = cu_tensor(&x, CLT_I32, 0, NULL, devs[d]);
    int64_t iv = 0;
    CU_OK(clt_item_i64(t, &iv));
    ck_assert_msg(iv == -42, "0-d from_host on %s: item %lld", cu_dev_name(devs[d]), (long long)iv);
    clt_tensor_release(t);

    CU_OK(clt_arange(0, 16, 1, CLT_I64, devs[d], &t));
    int64_t *a = cu_read(t);
    clt_tensor *t8 = cu_tensor(a, CLT_I64, 8, shape8, devs[d]);
    cu_assert_meta(t8, CLT_I64, devs[d], 8, shape8, "8-d tensor");
    int64_t *b = cu_read(t8);
    for (int i = 0; i < 16; i++)
      ck_assert_msg(b[i] == i, "8-d tensor on %s: element %d is %lld", cu_dev_name(devs[d]), i,
                    (long long)b[i]);
    free(a);
    free(b);
    clt_tensor_release(t);
    clt_tensor_release(t8);
  }
}
END_TEST

START_TEST(test_item) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t one[1] = {1}, three[1] = {3}, zero[1] = {0};
  for (int d = 0; d < ndev; d++) {
    const char *dn = cu_dev_name(devs[d]);
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      if (!cu_dtype_ok("test_item", devs[d], (clt_dtype)dt))
        continue;
      double val = dt == CLT_BOOL ? 1.0 : dt == CLT_U8 ? 201.0 : -7.0;
      clt_tensor *t = NULL;
      CU_OK(clt_full((clt_dtype)dt, 1, one, val, devs[d], &t));
      double v = 0;
      int64_t iv = 0;
      CU_OK(clt_item(t, &v));
      CU_OK(clt_item_i64(t, &iv));
      ck_assert_msg(v == val && iv == (int64_t)val, "item of %s %g on %s: %g, %lld",
                    cu_dt_name((clt_dtype)dt), val, dn, v, (long long)iv);
      clt_tensor_release(t);

      CU_OK(clt_zeros((clt_dtype)dt, 1, three, devs[d], &t));
      v = -777.0;
      iv = -777;
      CU_FAILS(clt_item(t, &v), CLT_ERR_INVALID_ARGUMENT, "clt_item");
      CU_FAILS(clt_item_i64(t, &iv), CLT_ERR_INVALID_ARGUMENT, "clt_item_i64");
      ck_assert_msg(v == -777.0 && iv == -777, "failed clt_item changed its output");
      CU_FAILS(clt_item(t, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_item");
      clt_tensor_release(t);

      CU_OK(clt_zeros((clt_dtype)dt, 1, zero, devs[d], &t));
      CU_FAILS(clt_item(t, &v), CLT_ERR_INVALID_ARGUMENT, "clt_item");
      ck_assert_msg(v == -777.0, "failed clt_item changed its output");
      clt_tensor_release(t);
    }
    int64_t big = INT64_C(9007199254740993); /* 2^53 + 1: not a double */
    clt_tensor *t = cu_tensor(&big, CLT_I64, 1, one, devs[d]);
    int64_t iv = 0;
    CU_OK(clt_item_i64(t, &iv));
    ck_assert_msg(iv == big, "item_i64 on %s: %lld, expected 9007199254740993", dn, (long long)iv);
    clt_tensor_release(t);
    big = INT64_MIN + 1;
    t = cu_tensor(&big, CLT_I64, 0, NULL, devs[d]);
    CU_OK(clt_item_i64(t, &iv));
    ck_assert_msg(iv == INT64_MIN + 1, "item_i64 on %s: %lld", dn, (long long)iv);
    clt_tensor_release(t);
    float f = -2.75f;
    t = cu_tensor(&f, CLT_F32, 1, one, devs[d]);
    CU_OK(clt_item_i64(t, &iv));
    ck_assert_msg(iv == -2, "item_i64 of f32 -2.75 on %s: %lld (truncates toward zero)", dn,
                  (long long)iv);
    double v = 0;
    CU_OK(clt_item(t, &v));
    ck_assert_msg(v == -2.75, "item of f32 -2.75 on %s: %g", dn, v);
    clt_tensor_release(t);
  }
  double v = -777.0;
  CU_FAILS(clt_item(NULL, &v), CLT_ERR_INVALID_ARGUMENT, "clt_item");
  ck_assert(v == -777.0);
}
END_TEST

START_TEST(test_data) {
  int64_t shape[2] = {2, 3};
  clt_tensor *h = NULL;
  CU_OK(clt_zeros(CLT_I32, 2, shape, clt_cpu(), &h));
  int32_t *p = clt_tensor_data(h);
  ck_assert_ptr_nonnull(p);
  for (int i = 0; i < 6; i++)
    p[i] = 10 * i - 7;
  int32_t back[6];
  CU_OK(clt_tensor_read(h, back, sizeof back));
  for (int i = 0; i < 6; i++)
    ck_assert_int_eq(back[i], 10 * i - 7);
  ck_assert_ptr_eq(clt_tensor_data(h), p);

  for (int i = 0; i < clt_device_count(); i++) {
    clt_device *dev = clt_device_at(i);
    clt_tensor *t = NULL;
    CU_OK(clt_to(h, dev, &t));
    clt_clear_error();
    ck_assert_ptr_null(clt_tensor_data(t));
    ck_assert_int_eq(clt_last_status(), CLT_ERR_NOT_ON_HOST);
    const char *msg = clt_last_error();
    cu_assert_prefix(msg, "clt_tensor_data", "clt_tensor_data of a device tensor");
    char want[32];
    snprintf(want, sizeof want, "tensor is on %s", clt_device_name(dev));
    ck_assert_msg(strstr(msg, want) != NULL, "message lacks \"%s\": %s", want, msg);
    ck_assert_msg(strstr(msg, "clt_to(t, clt_cpu()") != NULL,
                  "message lacks \"clt_to(t, clt_cpu()\": %s", msg);
    clt_tensor_release(t);
  }
  clt_clear_error();
  ck_assert_ptr_null(clt_tensor_data(NULL));
  ck_assert_int_eq(clt_last_status(), CLT_ERR_INVALID_ARGUMENT);
  clt_tensor_release(h);
}
END_TEST

START_TEST(test_read_errors) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[1] = {5};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *t = NULL;
    CU_OK(clt_full(CLT_F32, 1, shape, 4.0, devs[d], &t));
    float dst[5] = {-1, -1, -1, -1, -1};
    CU_FAILS(clt_tensor_read(t, dst, sizeof dst - 1), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_read");
    for (int i = 0; i < 5; i++)
      ck_assert_msg(dst[i] == -1.0f, "failed clt_tensor_read on %s wrote into dst",
                    cu_dev_name(devs[d]));
    CU_FAILS(clt_tensor_read(t, NULL, sizeof dst), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_read");
    CU_OK(clt_tensor_read(t, dst, sizeof dst));
    ck_assert_msg(dst[0] == 4.0f && dst[4] == 4.0f, "read on %s gave %g", cu_dev_name(devs[d]),
                  dst[0]);
    clt_tensor_release(t);
  }
  float dst[1];
  CU_FAILS(clt_tensor_read(NULL, dst, sizeof dst), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_read");
}
END_TEST

START_TEST(test_refcount) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  clt_tensor_release(NULL);
  ck_assert_ptr_null(clt_tensor_retain(NULL));
  int64_t shape[1] = {1000};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *t = NULL;
    CU_OK(clt_full(CLT_I32, 1, shape, 9, devs[d], &t));
    ck_assert_ptr_eq(clt_tensor_retain(t), t);
    ck_assert_ptr_eq(clt_tensor_retain(t), t);
    clt_tensor_release(t);
    clt_tensor_release(t);
    int32_t *v = cu_read(t); /* one reference left: still valid */
    ck_assert_msg(v[0] == 9 && v[999] == 9, "after retain/release on %s: %d", cu_dev_name(devs[d]),
                  v[0]);
    free(v);
    clt_tensor_release(t);

    /* Many create/release cycles: freed buffers come back through the caching allocator with
     * the contents the new tensor asks for. */
    int64_t big[1] = {1 << 18};
    for (int k = 0; k < 40; k++) {
      clt_tensor *a = NULL;
      CU_OK((k % 2 ? clt_zeros : clt_ones)(CLT_F32, 1, big, devs[d], &a));
      float x[2];
      float *all = cu_read(a);
      x[0] = all[0];
      x[1] = all[(1 << 18) - 1];
      free(all);
      float want = k % 2 ? 0.0f : 1.0f;
      ck_assert_msg(x[0] == want && x[1] == want, "cycle %d on %s: got %g %g, expected %g", k,
                    cu_dev_name(devs[d]), x[0], x[1], want);
      clt_tensor_release(a);
    }
  }
}
END_TEST

START_TEST(test_pinned) {
  if (!cu_need_cl("test_pinned", 1))
    return;
  int ncl = cu_cl_count() < 2 ? 1 : 2;
  int64_t shape[2] = {37, 29};
  cu_rng r;
  cu_rng_seed(&r, 5);
  for (int near = 0; near < ncl; near++) {
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      clt_tensor *p = NULL;
      CU_OK(clt_empty_pinned((clt_dtype)dt, 2, shape, clt_device_at(near), &p));
      char what[64];
      snprintf(what, sizeof what, "pinned %s near cl:%d", cu_dt_name((clt_dtype)dt), near);
      cu_assert_meta(p, (clt_dtype)dt, clt_cpu(), 2, shape, what);
      ck_assert_int_eq(clt_tensor_is_pinned(p), 1);
      void *data = clt_tensor_data(p);
      ck_assert_msg(data != NULL, "%s: no data pointer: %s", what, clt_last_error());
      cu_fill(data, (clt_dtype)dt, 37 * 29, &r, -50, 50, 0);
      size_t nb = clt_tensor_nbytes(p);
      void *want = cu_malloc(nb);
      memcpy(want, data, nb);
      for (int k = 0; k < ncl; k++) {
        clt_device *dev = clt_device_at(k);
        if (!cu_dtype_ok("test_pinned", dev, (clt_dtype)dt))
          continue;
        clt_tensor *t = NULL, *back = NULL;
        CU_OK(clt_to(p, dev, &t));
        void *got = cu_read(t);
        ck_assert_msg(memcmp(got, want, nb) == 0, "%s: copy to cl:%d differs", what, k);
        free(got);
        /* Back into another pinned tensor; its data pointer waits for the copy. */
        CU_OK(clt_empty_pinned((clt_dtype)dt, 2, shape, dev, &back));
        CU_OK(clt_copy(back, t));
        void *bd = clt_tensor_data(back);
        ck_assert_ptr_nonnull(bd);
        ck_assert_msg(memcmp(bd, want, nb) == 0, "%s: copy back from cl:%d differs", what, k);
        clt_tensor_release(back);
        clt_tensor_release(t);
      }
      /* Writable: change it, copy again. */
      memset(data, 1, nb);
      clt_tensor *t = NULL;
      CU_OK(clt_to(p, clt_device_at(0), &t));
      void *got = cu_read(t);
      ck_assert_msg(memcmp(got, data, nb) == 0, "%s: copy after writing differs", what);
      free(got);
      clt_tensor_release(t);
      free(want);
      clt_tensor_release(p);
    }
  }
  clt_tensor *p = CU_SENTINEL;
  CU_FAILS(clt_empty_pinned(CLT_F32, 2, shape, clt_cpu(), &p), CLT_ERR_INVALID_ARGUMENT,
           "clt_empty_pinned");
  ck_assert_ptr_eq(p, CU_SENTINEL);
  CU_FAILS(clt_empty_pinned(CLT_F32, 2, shape, NULL, &p), CLT_ERR_INVALID_ARGUMENT,
           "clt_empty_pinned");
  ck_assert_ptr_eq(p, CU_SENTINEL);
}
END_TEST

START_TEST(test_no_fp64) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[1] = {4};
  int tested = 0;
  for (int d = 0; d < ndev; d++) {
    if (clt_device_has_fp64(devs[d]))
      continue;
    clt_tensor *t = CU_SENTINEL;
    CU_FAILS(clt_zeros(CLT_F64, 1, shape, devs[d], &t), CLT_ERR_UNSUPPORTED, "clt_zeros");
    ck_assert_ptr_eq(t, CU_SENTINEL);
    tested++;
  }
  if (!tested)
    cu_skip("test_no_fp64", "every device supports f64: nothing to refuse");
}
END_TEST

/* CLT_NO_FP64 hides fp64 on the named devices: the refusal is testable without such hardware. */
START_TEST(test_no_fp64_env) {
  if (!cu_forked) {
    cu_skip("test_no_fp64_env", "needs CK_FORK (sets CLT_NO_FP64)");
    return;
  }
  setenv("CLT_NO_FP64", "cl:1", 1);
  if (!cu_need_cl("test_no_fp64_env", 2))
    return;
  clt_device *d0 = clt_device_at(0), *d1 = clt_device_at(1);
  ck_assert(clt_device_has_fp64(d0) && !clt_device_has_fp64(d1));
  ck_assert_msg(strstr(clt_device_description(d1), "no fp64") != NULL, "%s",
                clt_device_description(d1));
  int64_t shape[1] = {4};
  clt_tensor *t = CU_SENTINEL, *h, *ok;
  CU_FAILS(clt_zeros(CLT_F64, 1, shape, d1, &t), CLT_ERR_UNSUPPORTED, "clt_zeros");
  ck_assert_msg(strstr(clt_last_error(), "cl:1") && strstr(clt_last_error(), "f64"), "%s",
                clt_last_error());
  ck_assert_ptr_eq(t, CU_SENTINEL);
  CU_OK(clt_ones(CLT_F64, 1, shape, clt_cpu(), &h));
  CU_FAILS(clt_to(h, d1, &t), CLT_ERR_UNSUPPORTED, "clt_to");
  ck_assert_ptr_eq(t, CU_SENTINEL);
  CU_OK(clt_to(h, d0, &ok)); /* cl:0 keeps it */
  double v;
  clt_tensor *s;
  CU_OK(clt_sum(ok, &s));
  CU_OK(clt_item(s, &v));
  ck_assert(v == 4.0);
  clt_tensor_release(s);
  clt_tensor_release(ok);
  clt_tensor_release(h);
}
END_TEST

/* clt_item_i64 of a float saturates and maps NaN to 0 on every device (no undefined cast). */
START_TEST(test_item_i64_saturates) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const double in[] = {NAN, 1e30, -1e30, -3.7, 2.9};
  const int64_t want[] = {0, INT64_MAX, INT64_MIN, -3, 2};
  for (int v = 0; v < nd; v++)
    for (int k = 0; k < 5; k++) {
      clt_tensor *t;
      int64_t got = 12345;
      CU_OK(clt_full(CLT_F32, 0, NULL, in[k], devs[v], &t));
      CU_OK(clt_item_i64(t, &got));
      ck_assert_msg(got == want[k], "%s: item_i64(%g) = %lld", cu_dev_name(devs[v]), in[k],
                    (long long)got);
      clt_tensor_release(t);
    }
}
END_TEST

/* reshape is a view: same memory, new shape; -1 inferred; errors name both shapes. */
START_TEST(test_reshape_view) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int v = 0; v < nd; v++) {
    clt_tensor *t, *r, *r2, *one, *sum;
    CU_OK(clt_arange(0, 24, 1, CLT_I32, devs[v], &t));
    int64_t s1[3] = {2, -1, 4};
    CU_OK(clt_reshape(t, 3, s1, &r));
    ck_assert_int_eq(clt_tensor_ndim(r), 3);
    ck_assert_int_eq(clt_tensor_shape(r)[1], 3);
    ck_assert_ptr_eq(clt_tensor_device(r), devs[v]);
    int32_t got[24];
    CU_OK(clt_tensor_read(r, got, sizeof got));
    for (int i = 0; i < 24; i++)
      ck_assert_int_eq(got[i], i);
    /* A write through the view is seen through the original: they share memory. */
    CU_OK(clt_ones(CLT_I32, 0, NULL, devs[v], &one));
    CU_OK(clt_add_(r, one));
    CU_OK(clt_tensor_read(t, got, sizeof got));
    for (int i = 0; i < 24; i++)
      ck_assert_msg(got[i] == i + 1, "%s: t[%d] = %d after r += 1", cu_dev_name(devs[v]), i,
                    got[i]);
    int64_t s0[1] = {-1};
    CU_OK(clt_reshape(r, 1, s0, &r2));
    ck_assert_int_eq(clt_tensor_numel(r2), 24);
    CU_OK(clt_sum(r2, &sum));
    int64_t total;
    CU_OK(clt_item_i64(sum, &total));
    ck_assert_int_eq(total, 300); /* 1 + ... + 24 */
    clt_tensor *bad = CU_SENTINEL;
    int64_t s5[2] = {5, 5}, s2[2] = {-1, -1}, sneg[2] = {-2, 12};
    CU_FAILS(clt_reshape(t, 2, s5, &bad), CLT_ERR_SHAPE_MISMATCH, "clt_reshape");
    ck_assert_msg(strstr(clt_last_error(), "[24]") && strstr(clt_last_error(), "[5, 5]"), "%s",
                  clt_last_error());
    CU_FAILS(clt_reshape(t, 2, s2, &bad), CLT_ERR_INVALID_ARGUMENT, "clt_reshape");
    CU_FAILS(clt_reshape(t, 2, sneg, &bad), CLT_ERR_INVALID_ARGUMENT, "clt_reshape");
    CU_FAILS(clt_reshape(t, 9, s5, &bad), CLT_ERR_INVALID_ARGUMENT, "clt_reshape");
    CU_FAILS(clt_reshape(NULL, 1, s0, &bad), CLT_ERR_INVALID_ARGUMENT, "clt_reshape");
    ck_assert_ptr_eq(bad, CU_SENTINEL);
    /* The view keeps the memory alive after the original is released. */
    clt_tensor_release(t);
    CU_OK(clt_tensor_read(r2, got, sizeof got));
    ck_assert_int_eq(got[23], 24);
    clt_tensor *scalar;
    int64_t s1x1[2] = {1, 1};
    CU_OK(clt_reshape(one, 2, s1x1, &scalar));
    ck_assert_int_eq(clt_tensor_numel(scalar), 1);
    clt_tensor_release(scalar);
    clt_tensor_release(r);
    clt_tensor_release(r2);
    clt_tensor_release(one);
    clt_tensor_release(sum);
  }
}
END_TEST

Suite *tensor_suite(void) {
  Suite *s = suite_create("tensor");
  TCase *tc = cu_tcase("create");
  tcase_add_test(tc, test_dtype_table);
  tcase_add_test(tc, test_create_errors);
  tcase_add_test(tc, test_create_values);
  tcase_add_test(tc, test_full_range);
  tcase_add_test(tc, test_arange);
  tcase_add_test(tc, test_from_host);
  tcase_add_test(tc, test_zero_size);
  tcase_add_test(tc, test_scalar_and_ndim8);
  tcase_add_test(tc, test_no_fp64);
  tcase_add_test(tc, test_no_fp64_env);
  tcase_add_test(tc, test_reshape_view);
  tcase_add_test(tc, test_item_i64_saturates);
  suite_add_tcase(s, tc);
  tc = cu_tcase("access");
  tcase_add_test(tc, test_item);
  tcase_add_test(tc, test_data);
  tcase_add_test(tc, test_read_errors);
  tcase_add_test(tc, test_refcount);
  tcase_add_test(tc, test_pinned);
  suite_add_tcase(s, tc);
  return s;
}
