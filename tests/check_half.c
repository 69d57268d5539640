/* SPDX-License-Identifier: MIT */
/* check_half.c - f16 and bf16, the storage dtypes: conversions by bit pattern against values
 * worked out by hand (and against the tests' own arithmetic rounding in check_util.c, not the
 * library's bit manipulation), every bit pattern both ways, promotion and the f32 compute,
 * reductions, matmul, filling and printing, and the file and DLPack round trips; on every
 * device. The elementwise ops over f16 and bf16 are in check_backend_ops.c, the casts to and
 * from every dtype in check_ops.c (test_cast). */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"
#include "clt_dlpack.h"

static const clt_dtype halves[2] = {CLT_F16, CLT_BF16};

/* Values and their bits, worked out by hand: f16 has 10 fraction bits and bias 15, bf16 is the
 * top half of the f32, rounded to nearest even. */
static const struct {
  float v;
  uint16_t f16, bf16;
  const char *what;
} known_bits[] = {
    {1.0f, 0x3C00, 0x3F80, "1"},
    {-2.0f, 0xC000, 0xC000, "-2"},
    {-0.0f, 0x8000, 0x8000, "-0"},
    {0.1f, 0x2E66, 0x3DCD, "0.1"},
    {65504.0f, 0x7BFF, 0x4780, "65504, the largest f16 (bf16 rounds it up to 65536)"},
    {65519.99f, 0x7BFF, 0x4780, "just below halfway to 2^16: 65504 in f16"},
    {65520.0f, 0x7C00, 0x4780, "halfway to 2^16: inf in f16 (ties to even)"},
    {1e5f, 0x7C00, 0x47C3, "1e5: past f16's range"},
    {FLT_MAX, 0x7C00, 0x7F80, "FLT_MAX: inf in both"},
    {INFINITY, 0x7C00, 0x7F80, "inf"},
    {0x1p-14f, 0x0400, 0x3880, "2^-14, the smallest normal f16"},
    {0x1p-24f, 0x0001, 0x3380, "2^-24, the smallest subnormal f16"},
    {0x1p-25f, 0x0000, 0x3300, "2^-25: halfway to 2^-24, to even: 0 in f16"},
    {0x1.8p-25f, 0x0001, 0x3340, "1.5 * 2^-25: past halfway, 2^-24 in f16"},
    {1.0f + 0x1p-11f, 0x3C00, 0x3F80, "1 + 2^-11: an f16 tie, to even 1"},
    {1.0f + 0x3p-11f, 0x3C02, 0x3F80, "1 + 3 * 2^-11: an f16 tie, to even 1 + 2^-9"},
    {1.0f + 0x1p-8f, 0x3C04, 0x3F80, "1 + 2^-8: a bf16 tie, to even 1"},
    {1.0f + 0x3p-8f, 0x3C0C, 0x3F82, "1 + 3 * 2^-8: a bf16 tie, to even 1 + 2^-6"},
};
#define NKNOWN ((int64_t)(sizeof known_bits / sizeof known_bits[0]))

static bool is_nan_bits(uint16_t h, clt_dtype dt) {
  return dt == CLT_F16 ? (h & 0x7C00) == 0x7C00 && (h & 0x03FF)
                       : (h & 0x7F80) == 0x7F80 && (h & 0x7F);
}

/* f32 to f16 and bf16 by clt_cast, on every device: the bits above, NaN stays NaN. */
START_TEST(test_known_bits) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  float src[NKNOWN + 2];
  for (int64_t i = 0; i < NKNOWN; i++)
    src[i] = known_bits[i].v;
  src[NKNOWN] = NAN;
  src[NKNOWN + 1] = -NAN;
  int64_t n = NKNOWN + 2;
  clt_dtype dt = halves[_i]; /* a loop test: f16, then bf16 */
  for (int d = 0; d < ndev; d++) {
    clt_tensor *t = cu_tensor(src, CLT_F32, 1, &n, devs[d]), *o = NULL, *back = NULL;
    CU_OK(clt_cast(t, dt, &o));
    cu_assert_meta(o, dt, devs[d], 1, &n, "cast");
    uint16_t *got = cu_read(o);
    for (int64_t i = 0; i < NKNOWN; i++) {
      uint16_t want = dt == CLT_F16 ? known_bits[i].f16 : known_bits[i].bf16;
      ck_assert_msg(got[i] == want, "%s to %s on %s: got 0x%04X, expected 0x%04X",
                    known_bits[i].what, cu_dt_name(dt), cu_dev_name(devs[d]), got[i], want);
      /* the tests' own rounding agrees (a check of check_util.c) */
      ck_assert_uint_eq(cu_narrow_bits(known_bits[i].v, dt), want);
    }
    for (int64_t i = NKNOWN; i < n; i++) /* NaN and -NaN: the one quiet NaN */
      ck_assert_msg(got[i] == (dt == CLT_F16 ? 0x7E00 : 0x7FC0), "NaN to %s on %s: got 0x%04X",
                    cu_dt_name(dt), cu_dev_name(devs[d]), got[i]);
    /* and back: exact */
    CU_OK(clt_cast(o, CLT_F32, &back));
    float *f = cu_read(back);
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg((isnan(f[i]) && i >= NKNOWN) || f[i] == (float)cu_narrow_value(got[i], dt),
                    "0x%04X from %s on %s: %.9g", got[i], cu_dt_name(dt), cu_dev_name(devs[d]),
                    f[i]);
    free(f);
    free(got);
    clt_tensor_release(back);
    clt_tensor_release(o);
    clt_tensor_release(t);
  }
}
END_TEST

/* Every one of the 65536 bit patterns to f32 and f64, against the value the tests compute. */
START_TEST(test_every_pattern) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t n = 65536;
  uint16_t *bits = cu_malloc((size_t)n * 2);
  for (int64_t i = 0; i < n; i++)
    bits[i] = (uint16_t)i;
  for (int d = 0; d < ndev; d++)
    for (int h = 0; h < 2; h++)
      for (int w = 0; w < 2; w++) {
        clt_dtype to = w ? CLT_F64 : CLT_F32;
        if (!cu_dtype_ok("test_every_pattern", devs[d], to))
          continue;
        clt_tensor *t = cu_tensor(bits, halves[h], 1, &n, devs[d]), *o = NULL;
        CU_OK(clt_cast(t, to, &o));
        double *got = cu_read_double(o);
        for (int64_t i = 0; i < n; i++) {
          double want = cu_narrow_value((uint16_t)i, halves[h]);
          ck_assert_msg(isnan(want) ? isnan(got[i])
                                    : got[i] == want && !signbit(got[i]) == !signbit(want),
                        "%s 0x%04X to %s on %s: %.17g, expected %.17g", cu_dt_name(halves[h]),
                        (unsigned)i, cu_dt_name(to), cu_dev_name(devs[d]), got[i], want);
        }
        free(got);
        clt_tensor_release(o);
        clt_tensor_release(t);
      }
  free(bits);
}
END_TEST

/* f32 values spread over the whole range (random bit patterns) to f16 and bf16: the tests'
 * arithmetic rounding, on every device. */
START_TEST(test_random_f32) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t n = 20000;
  float *src = cu_malloc((size_t)n * 4);
  cu_rng r;
  cu_rng_seed(&r, 1616);
  for (int64_t i = 0; i < n; i++) {
    uint32_t x = (uint32_t)(cu_rng_next(&r) >> 32);
    if (i % 2) /* half of them near f16's range, where its rounding and subnormals are */
      x = (x & 0x80000000u) | (0x33000000u + x % (0x47800000u - 0x33000000u));
    memcpy(&src[i], &x, 4);
  }
  for (int h = 0; h < 2; h++) {
    uint16_t *want = cu_malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++)
      want[i] = cu_narrow_bits(src[i], halves[h]);
    for (int d = 0; d < ndev; d++) {
      clt_tensor *t = cu_tensor(src, CLT_F32, 1, &n, devs[d]), *o = NULL;
      CU_OK(clt_cast(t, halves[h], &o));
      uint16_t *got = cu_read(o);
      for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i] || (isnan(src[i]) && is_nan_bits(got[i], halves[h])),
                      "%.9g (0x%08X) to %s on %s: 0x%04X, expected 0x%04X", src[i],
                      *(uint32_t *)&src[i], cu_dt_name(halves[h]), cu_dev_name(devs[d]), got[i],
                      want[i]);
      free(got);
      clt_tensor_release(o);
      clt_tensor_release(t);
    }
    free(want);
  }
  free(src);
}
END_TEST

/* Promotion as PyTorch's, and one rounding after an f32 computation. */
START_TEST(test_promotion) {
  static const struct {
    clt_dtype a, b, want;
  } rules[] = {
      {CLT_F16, CLT_F16, CLT_F16},    {CLT_BF16, CLT_BF16, CLT_BF16}, {CLT_F16, CLT_BF16, CLT_F32},
      {CLT_F16, CLT_F32, CLT_F32},    {CLT_BF16, CLT_F64, CLT_F64},   {CLT_I64, CLT_F16, CLT_F16},
      {CLT_BOOL, CLT_BF16, CLT_BF16}, {CLT_U8, CLT_BF16, CLT_BF16},
  };
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    clt_dtype got;
    CU_OK(clt_result_dtype("add", rules[i].a, rules[i].b, &got));
    ck_assert_msg(got == rules[i].want, "%s + %s gave %s", cu_dt_name(rules[i].a),
                  cu_dt_name(rules[i].b), cu_dt_name(got));
  }
  clt_dtype got;
  CU_OK(clt_result_dtype("div", CLT_I32, CLT_I32, &got));
  ck_assert_int_eq(got, CLT_F32); /* FLOAT ops on integers still give f32 */
  CU_OK(clt_result_dtype("lt", CLT_F16, CLT_F16, &got));
  ck_assert_int_eq(got, CLT_BOOL);

  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    for (int h = 0; h < 2; h++) {
      clt_dtype dt = halves[h];
      clt_tensor *one, *r, *i32, *r2;
      CU_OK(clt_ones(dt, 0, NULL, devs[d], &one));
      /* a scalar does not widen: f16 + 2.5 stays f16 */
      CU_OK(clt_add_scalar(one, 2.5, &r));
      ck_assert_int_eq(clt_tensor_dtype(r), dt);
      ck_assert(cu_item(r) == 3.5);
      clt_tensor_release(r);
      /* 1 + ulp/2 is a tie: it rounds to even 1, once, after an exact f32 sum */
      double half_ulp = dt == CLT_F16 ? 0x1p-11 : 0x1p-8;
      CU_OK(clt_add_scalar(one, half_ulp, &r));
      ck_assert_msg(cu_item(r) == 1.0, "1 + ulp/2 in %s on %s: %.9g", cu_dt_name(dt),
                    cu_dev_name(devs[d]), cu_item(r));
      clt_tensor_release(r);
      CU_OK(clt_add_scalar(one, 3 * half_ulp, &r));
      ck_assert(cu_item(r) == 1.0 + 4 * half_ulp);
      clt_tensor_release(r);
      /* an integer operand joins the narrow dtype */
      CU_OK(clt_full(CLT_I32, 0, NULL, 2049, devs[d], &i32));
      CU_OK(clt_mul(i32, one, &r2));
      ck_assert_int_eq(clt_tensor_dtype(r2), dt);
      ck_assert_msg(cu_item(r2) == (dt == CLT_F16 ? 2048.0 : 2048.0), "2049 * 1 in %s: %g",
                    cu_dt_name(dt), cu_item(r2));
      clt_tensor_release(r2);
      /* f16 overflow: 300 * 300 is inf in f16, 90112 in bf16 (8 significant bits) */
      CU_OK(clt_full(dt, 0, NULL, 300, devs[d], &r));
      CU_OK(clt_mul(r, r, &r2));
      ck_assert_msg(cu_item(r2) == (dt == CLT_F16 ? INFINITY : 90112.0), "300 * 300 in %s: %g",
                    cu_dt_name(dt), cu_item(r2));
      clt_tensor_release(r2);
      clt_tensor_release(r);
      clt_tensor_release(i32);
      clt_tensor_release(one);
    }
    /* f16 with bf16 computes and gives f32 */
    clt_tensor *a, *b, *r;
    CU_OK(clt_full(CLT_F16, 0, NULL, 1.0 + 0x1p-10, devs[d], &a));
    CU_OK(clt_full(CLT_BF16, 0, NULL, 0x1p-20, devs[d], &b));
    CU_OK(clt_add(a, b, &r));
    ck_assert_int_eq(clt_tensor_dtype(r), CLT_F32);
    ck_assert(cu_item(r) == 1.0 + 0x1p-10 + 0x1p-20);
    clt_tensor_release(r);
    clt_tensor_release(b);
    clt_tensor_release(a);
  }
}
END_TEST

/* Reductions accumulate in f32 and give the narrow dtype (argmax i64). */
START_TEST(test_reduce) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  clt_dtype dt = halves[_i]; /* a loop test: f16, then bf16 */
  for (int d = 0; d < ndev; d++) {
    /* 3000 ones: f16 accumulation would stop at 2048 (and bf16 at 256); 3000 is exact in f16,
     * a tie in bf16 (8 significant bits: spacing 16 at 2048..4096), which rounds to even 3008 */
    int64_t n = 3000;
    clt_tensor *t, *r;
    CU_OK(clt_ones(dt, 1, &n, devs[d], &t));
    CU_OK(clt_sum(t, &r));
    ck_assert_int_eq(clt_tensor_dtype(r), dt);
    ck_assert_msg(cu_item(r) == (dt == CLT_F16 ? 3000.0 : 3008.0), "sum of 3000 %s ones on %s: %g",
                  cu_dt_name(dt), cu_dev_name(devs[d]), cu_item(r));
    clt_tensor_release(r);
    CU_OK(clt_mean(t, &r));
    ck_assert_int_eq(clt_tensor_dtype(r), dt);
    ck_assert(cu_item(r) == 1.0);
    clt_tensor_release(r);
    clt_tensor_release(t);
    /* along a dimension, with max, min, argmax and NaN */
    double vals[6] = {1.5, -2.0, 7.0, 0.25, NAN, -3.0};
    uint16_t raw[6];
    for (int i = 0; i < 6; i++)
      raw[i] = cu_narrow_bits(vals[i], dt);
    int64_t shape[2] = {2, 3};
    t = cu_tensor(raw, dt, 2, shape, devs[d]);
    CU_OK(clt_sum_dim(t, 1, 0, &r));
    ck_assert_int_eq(clt_tensor_dtype(r), dt);
    double *g = cu_read_double(r);
    ck_assert(g[0] == 6.5 && isnan(g[1]));
    free(g);
    clt_tensor_release(r);
    CU_OK(clt_max_dim(t, 0, 1, &r));
    ck_assert_int_eq(clt_tensor_dtype(r), dt);
    ck_assert_int_eq(clt_tensor_ndim(r), 2);
    g = cu_read_double(r);
    ck_assert(g[0] == 1.5 && isnan(g[1]) && g[2] == 7.0);
    free(g);
    clt_tensor_release(r);
    CU_OK(clt_min(t, &r));
    ck_assert(isnan(cu_item(r)));
    clt_tensor_release(r);
    CU_OK(clt_argmax_dim(t, 1, 0, &r));
    ck_assert_int_eq(clt_tensor_dtype(r), CLT_I64);
    int64_t *ai = cu_read(r);
    ck_assert(ai[0] == 2 && ai[1] == 1);
    free(ai);
    clt_tensor_release(r);
    /* an empty max is refused as for every dtype, named by the public function */
    int64_t zero = 0;
    clt_tensor *e;
    CU_OK(clt_zeros(dt, 1, &zero, devs[d], &e));
    r = CU_SENTINEL;
    CU_FAILS(clt_max(e, &r), CLT_ERR_INVALID_ARGUMENT, "clt_max");
    ck_assert_ptr_eq(r, CU_SENTINEL);
    CU_OK(clt_sum(e, &r));
    ck_assert(cu_item(r) == 0.0 && clt_tensor_dtype(r) == dt);
    clt_tensor_release(r);
    clt_tensor_release(e);
    clt_tensor_release(t);
  }
}
END_TEST

/* matmul and linear compute in f32 and round once; random draws refuse, naming the cast. */
START_TEST(test_matmul_random) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  clt_dtype dt = halves[_i]; /* a loop test: f16, then bf16 */
  for (int d = 0; d < ndev; d++) {
    /* a 1 x 300 by 300 x 1 product of ones: 300 in f32, exact in both (f16 accumulation
     * would be exact too; bf16 accumulation would stop at 256) */
    int64_t sa[2] = {1, 300}, sb[2] = {300, 1};
    clt_tensor *a, *b, *r;
    CU_OK(clt_ones(dt, 2, sa, devs[d], &a));
    CU_OK(clt_ones(dt, 2, sb, devs[d], &b));
    CU_OK(clt_matmul(a, b, &r));
    ck_assert_int_eq(clt_tensor_dtype(r), dt);
    ck_assert_msg(cu_item(r) == 300.0, "matmul in %s on %s: %g", cu_dt_name(dt),
                  cu_dev_name(devs[d]), cu_item(r));
    clt_tensor_release(r);
    clt_tensor_release(b);
    CU_OK(clt_ones(CLT_F32, 2, sb, devs[d], &b));
    r = CU_SENTINEL;
    CU_FAILS(clt_matmul(a, b, &r), CLT_ERR_DTYPE, "clt_matmul");
    ck_assert_ptr_eq(r, CU_SENTINEL);
    clt_tensor_release(b);
    /* linear: x (1, 300) by weight (2, 300) plus bias (2) */
    int64_t sw[2] = {2, 300}, sbias[1] = {2};
    clt_tensor *w, *bias;
    CU_OK(clt_full(dt, 2, sw, 0.5, devs[d], &w));
    CU_OK(clt_full(dt, 1, sbias, -1.0, devs[d], &bias));
    CU_OK(clt_linear(a, w, bias, &r));
    ck_assert_int_eq(clt_tensor_dtype(r), dt);
    double *g = cu_read_double(r);
    ck_assert(g[0] == 149.0 && g[1] == 149.0);
    free(g);
    clt_tensor_release(r);
    clt_tensor_release(w);
    clt_tensor_release(bias);
    clt_tensor_release(a);
    r = CU_SENTINEL;
    CU_FAILS(clt_rand(dt, 1, sbias, devs[d], &r), CLT_ERR_DTYPE, "clt_rand");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_cast"));
    CU_FAILS(clt_randn(dt, 1, sbias, devs[d], &r), CLT_ERR_DTYPE, "clt_randn");
    ck_assert_ptr_eq(r, CU_SENTINEL);
  }
}
END_TEST

/* full, arange, transpose, item and printing. */
START_TEST(test_create_print) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  ck_assert_str_eq(clt_dtype_name(CLT_F16), "f16");
  ck_assert_str_eq(clt_dtype_name(CLT_BF16), "bf16");
  ck_assert_uint_eq(clt_dtype_size(CLT_F16), 2);
  ck_assert_uint_eq(clt_dtype_size(CLT_BF16), 2);
  clt_dtype dt = halves[_i]; /* a loop test: f16, then bf16 */
  for (int d = 0; d < ndev; d++) {
    int64_t shape[2] = {2, 3};
    clt_tensor *t, *tt;
    CU_OK(clt_full(dt, 2, shape, 65504, devs[d], &t));
    uint16_t *b = cu_read(t);
    for (int i = 0; i < 6; i++)
      ck_assert_uint_eq(b[i], dt == CLT_F16 ? 0x7BFF : 0x4780);
    free(b);
    clt_tensor_release(t);
    CU_OK(clt_arange(0, 6, 1, dt, devs[d], &t));
    uint16_t *raw = cu_read(t);
    clt_tensor_release(t);
    t = cu_tensor(raw, dt, 2, shape, devs[d]);
    free(raw);
    CU_OK(clt_transpose(t, 0, 1, &tt));
    double *g = cu_read_double(tt);
    static const double want[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++)
      ck_assert_msg(g[i] == want[i], "transpose in %s on %s: [%d] = %g", cu_dt_name(dt),
                    cu_dev_name(devs[d]), i, g[i]);
    free(g);
    if (clt_device_is_host(devs[d])) {
      char buf[256];
      CU_OK(clt_format(tt, buf, sizeof buf, NULL));
      char want_dt[32];
      snprintf(want_dt, sizeof want_dt, "dtype=%s", cu_dt_name(dt));
      ck_assert_msg(strstr(buf, want_dt) && strstr(buf, "5."), "format: %s", buf);
    }
    clt_tensor_release(tt);
    clt_tensor_release(t);
  }
}
END_TEST

static uint16_t *pattern(clt_dtype dt, int64_t n) {
  uint16_t *p = cu_malloc((size_t)n * 2);
  for (int64_t i = 0; i < n; i++) /* spread over the patterns, NaN and inf included */
    p[i] = (uint16_t)(i * 4099 + (dt == CLT_F16 ? 7 : 3));
  return p;
}

/* safetensors F16 and BF16, .npy '<f2', bit for bit, from and to every device. */
START_TEST(test_files) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  char dir[256], path[320], npy[320];
  cu_temp_dir(dir, sizeof dir, "half");
  snprintf(path, sizeof path, "%s/half.safetensors", dir);
  snprintf(npy, sizeof npy, "%s/half.npy", dir);
  int64_t shape[2] = {7, 9}, n = 63;
  uint16_t *pf = pattern(CLT_F16, n), *pb = pattern(CLT_BF16, n);
  for (int d = 0; d < ndev; d++) {
    clt_params *p, *q;
    CU_OK(clt_params_create(&p));
    clt_tensor *f = cu_tensor(pf, CLT_F16, 2, shape, devs[d]);
    clt_tensor *b = cu_tensor(pb, CLT_BF16, 2, shape, devs[d]);
    CU_OK(clt_params_add(p, "f", f));
    CU_OK(clt_params_add(p, "b", b));
    CU_OK(clt_save(path, p));
    CU_OK(clt_load(path, devs[d], &q));
    clt_tensor *f2 = clt_params_get(q, "f"), *b2 = clt_params_get(q, "b");
    ck_assert_int_eq(clt_tensor_dtype(f2), CLT_F16);
    ck_assert_int_eq(clt_tensor_dtype(b2), CLT_BF16);
    uint16_t *gf = cu_read(f2), *gb = cu_read(b2);
    ck_assert_msg(!memcmp(gf, pf, (size_t)n * 2) && !memcmp(gb, pb, (size_t)n * 2),
                  "safetensors round trip on %s", cu_dev_name(devs[d]));
    free(gf);
    free(gb);
    clt_params_release(q);
    clt_params_release(p);
    /* the header names the dtypes as safetensors does */
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    char head[512] = {0};
    size_t got = fread(head, 1, sizeof head - 1, fp);
    fclose(fp);
    for (size_t i = 0; i < got; i++)
      if (!head[i])
        head[i] = ' ';
    ck_assert_ptr_nonnull(strstr(head + 8, "\"F16\""));
    ck_assert_ptr_nonnull(strstr(head + 8, "\"BF16\""));

    CU_OK(clt_save_npy(npy, f));
    fp = fopen(npy, "rb");
    ck_assert_ptr_nonnull(fp);
    got = fread(head, 1, 128, fp);
    fclose(fp);
    head[got] = 0;
    ck_assert_ptr_nonnull(strstr(head + 10, "'descr': '<f2'"));
    clt_tensor *l;
    CU_OK(clt_load_npy(npy, devs[d], &l));
    ck_assert_int_eq(clt_tensor_dtype(l), CLT_F16);
    gf = cu_read(l);
    ck_assert(!memcmp(gf, pf, (size_t)n * 2));
    free(gf);
    clt_tensor_release(l);
    CU_FAILS(clt_save_npy(npy, b), CLT_ERR_DTYPE, "clt_save_npy");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "bf16"));
    clt_tensor_release(f);
    clt_tensor_release(b);
  }
  /* a big-endian '>f2' written by hand: 1.0 and -2.0 */
  {
    static const char hdr[] = "{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }";
    char line[128];
    size_t hl = sizeof hdr - 1, total = 10 + hl + 1;
    size_t pad = (64 - total % 64) % 64;
    memset(line, ' ', sizeof line);
    memcpy(line, hdr, hl);
    line[hl + pad] = '\n';
    FILE *fp = fopen(npy, "wb");
    ck_assert_ptr_nonnull(fp);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl + pad + 1), 0};
    fwrite(pre, 1, 10, fp);
    fwrite(line, 1, hl + pad + 1, fp);
    static const unsigned char data[4] = {0x3C, 0x00, 0xC0, 0x00};
    fwrite(data, 1, 4, fp);
    fclose(fp);
    clt_tensor *l;
    CU_OK(clt_load_npy(npy, clt_cpu(), &l));
    double *g = cu_read_double(l);
    ck_assert(g[0] == 1.0 && g[1] == -2.0);
    free(g);
    clt_tensor_release(l);
  }
  unlink(path);
  unlink(npy);
  rmdir(dir);
  free(pf);
  free(pb);
}
END_TEST

/* DLPack: kDLFloat 16 and kDLBfloat 16, out and back in, on every device. */
START_TEST(test_dlpack) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t n = 40;
  clt_dtype dt = halves[_i]; /* a loop test: f16, then bf16 */
  for (int d = 0; d < ndev; d++) {
    if (!clt_device_is_host(devs[d]) && !cu_is_cl(devs[d])) {
      cu_skip("test_dlpack", "DLPack describes host memory and OpenCL buffers only: ref:N is "
                             "refused (tests/check_ref.c)");
      continue;
    }
    uint16_t *p = pattern(dt, n);
    clt_tensor *t = cu_tensor(p, dt, 1, &n, devs[d]), *u;
    DLManagedTensor *m;
    CU_OK(clt_to_dlpack(t, &m));
    ck_assert_uint_eq(m->dl_tensor.dtype.code, dt == CLT_F16 ? kDLFloat : kDLBfloat);
    ck_assert_uint_eq(m->dl_tensor.dtype.bits, 16);
    ck_assert_uint_eq(m->dl_tensor.dtype.lanes, 1);
    CU_OK(clt_from_dlpack(m, &u));
    ck_assert_int_eq(clt_tensor_dtype(u), dt);
    uint16_t *g = cu_read(u);
    ck_assert_msg(!memcmp(g, p, (size_t)n * 2), "dlpack round trip of %s on %s", cu_dt_name(dt),
                  cu_dev_name(devs[d]));
    free(g);
    clt_tensor_release(u);
    clt_tensor_release(t);
    free(p);
  }
}
END_TEST

Suite *half_suite(void) {
  Suite *s = suite_create("half");
  TCase *tc = cu_tcase("bits");
  tcase_add_loop_test(tc, test_known_bits, 0, 2);
  tcase_add_test(tc, test_every_pattern);
  tcase_add_test(tc, test_random_f32);
  suite_add_tcase(s, tc);
  tc = cu_tcase("compute");
  tcase_add_test(tc, test_promotion);
  tcase_add_loop_test(tc, test_reduce, 0, 2);
  tcase_add_loop_test(tc, test_matmul_random, 0, 2);
  tcase_add_loop_test(tc, test_create_print, 0, 2);
  suite_add_tcase(s, tc);
  tc = cu_tcase("io");
  tcase_add_test(tc, test_files);
  tcase_add_loop_test(tc, test_dlpack, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}
