/* SPDX-License-Identifier: MIT */
/* check_random.c - Philox4x32-10 random tensors: the generator's known answers, bit identity of
 * every device with the host, the offset rules, statistics and the error paths. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <xmmintrin.h> /* _mm_getcsr: flushing subnormals on the host */
#endif

#include "check_util.h"
#include "clt-internal.h" /* clt__philox4x32_10 */

typedef clt_status (*gen_fn)(clt_generator *, clt_dtype, int, const int64_t *, clt_device *,
                             clt_tensor **);

/* Random123's kat_vectors, "philox4x32 10" lines: counter, key, expected output. */
static const uint32_t kat[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
     0xa20bc7c6, 0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
     0x5001e420, 0x24126ea1},
};

START_TEST(test_kat) {
  for (int i = 0; i < 3; i++) {
    uint32_t out[4];
    clt__philox4x32_10(kat[i], kat[i] + 4, out);
    for (int j = 0; j < 4; j++)
      ck_assert_msg(out[j] == kat[i][6 + j], "vector %d word %d: got 0x%08x, expected 0x%08x", i, j,
                    out[j], kat[i][6 + j]);
  }
}
END_TEST

/* The documented mapping: seed 0, counter 0 is the first vector; f32 element j is
 * (word j >> 8) 2^-24, f64 element 0 is ((w0 << 32 | w1) >> 11) 2^-53. */
START_TEST(test_kat_mapping) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    clt_generator *g;
    CU_OK(clt_generator_create(0, &g));
    int64_t shape[1] = {4};
    clt_tensor *t;
    CU_OK(clt_generator_rand(g, CLT_F32, 1, shape, devs[d], &t));
    float *v = cu_read(t);
    for (int j = 0; j < 4; j++)
      ck_assert_msg(v[j] == ldexpf((float)(kat[0][6 + j] >> 8), -24),
                    "%s: element %d is %.9g, expected (0x%08x >> 8) * 2^-24", cu_dev_name(devs[d]),
                    j, v[j], kat[0][6 + j]);
    free(v);
    clt_tensor_release(t);
    clt_generator_release(g);
    if (!cu_dtype_ok("kat_mapping f64", devs[d], CLT_F64))
      continue;
    CU_OK(clt_generator_create(0, &g));
    shape[0] = 1;
    CU_OK(clt_generator_rand(g, CLT_F64, 1, shape, devs[d], &t));
    double x;
    CU_OK(clt_item(t, &x));
    uint64_t bits = ((uint64_t)kat[0][6] << 32 | kat[0][7]) >> 11;
    ck_assert_msg(x == ldexp((double)bits, -53), "%s: f64 element 0 is %.17g", cu_dev_name(devs[d]),
                  x);
    clt_tensor_release(t);
    clt_generator_release(g);
  }
}
END_TEST

/* Box-Muller in long double from the raw generator: element i of randn(dtype) with seed, first
 * counter 0; *radius gets r. */
static long double oracle_normal(uint64_t seed, clt_dtype dt, int64_t i, long double *radius) {
  const long double two_pi = 6.283185307179586476925286766559L;
  int per = dt == CLT_F32 ? 4 : 2;
  uint32_t ctr[4] = {(uint32_t)(i / per), (uint32_t)((uint64_t)(i / per) >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, w[4];
  clt__philox4x32_10(ctr, key, w);
  long double u1, u2;
  int odd;
  if (dt == CLT_F32) {
    int p = (int)(i % 4) / 2 * 2;
    u1 = ((w[p] >> 8) + 1.0L) * 0x1p-24L;
    u2 = (w[p + 1] >> 8) * 0x1p-24L;
    odd = (int)(i % 2);
  } else {
    u1 = ((long double)(((uint64_t)w[0] << 32 | w[1]) >> 11) + 1.0L) * 0x1p-53L;
    u2 = (long double)(((uint64_t)w[2] << 32 | w[3]) >> 11) * 0x1p-53L;
    odd = (int)(i % 2);
  }
  long double r = sqrtl(-2.0L * logl(u1));
  *radius = r;
  return odd ? r * sinl(two_pi * u2) : r * cosl(two_pi * u2);
}

static const gen_fn gens[2] = {clt_generator_rand, clt_generator_randn};
static const char *gen_names[2] = {"rand", "randn"};

/* Every device gives the host's bits, for two consecutive calls (offset 0, then not 0). */
START_TEST(test_bit_identity) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  if (!cu_need_cl("random bit_identity", 1))
    return;
  const int64_t sizes[3] = {1, 7, 1000003};
  const clt_dtype dts[2] = {CLT_F32, CLT_F64};
  const uint64_t seed = 0x0123456789abcdefULL;
  for (int normal = 0; normal < 2; normal++)
    for (int k = 0; k < 2; k++)
      for (int si = 0; si < 3; si++) {
        clt_dtype dt = dts[k];
        int64_t shape[1] = {sizes[si]};
        void *want[2] = {NULL, NULL};
        size_t nbytes = (size_t)sizes[si] * clt_dtype_size(dt);
        for (int d = 0; d < nd; d++) {
          if (!cu_dtype_ok("random bit_identity", devs[d], dt))
            continue;
          clt_generator *g;
          CU_OK(clt_generator_create(seed, &g));
          for (int call = 0; call < 2; call++) {
            clt_tensor *t;
            CU_OK(gens[normal](g, dt, 1, shape, devs[d], &t));
            void *got = cu_read(t);
            clt_tensor_release(t);
            if (d == 0) {
              want[call] = got;
              continue;
            }
            if (memcmp(got, want[call], nbytes) != 0) {
              int64_t i = 0;
              size_t es = clt_dtype_size(dt);
              while (memcmp((char *)got + i * es, (char *)want[call] + i * es, es) == 0)
                i++;
              ck_abort_msg("%s %s n=%lld call %d: %s differs from cpu at element %lld: %.17g vs "
                           "%.17g",
                           gen_names[normal], cu_dt_name(dt), (long long)sizes[si], call,
                           cu_dev_name(devs[d]), (long long)i, cu_get(got, dt, i),
                           cu_get(want[call], dt, i));
            }
            free(got);
          }
          clt_generator_release(g);
        }
        free(want[0]);
        free(want[1]);
      }
}
END_TEST

/* Reads a fresh generator's first call. */
static void *draw(uint64_t seed, int normal, clt_dtype dt, int64_t n, clt_device *dev) {
  clt_generator *g;
  CU_OK(clt_generator_create(seed, &g));
  int64_t shape[1] = {n};
  clt_tensor *t;
  CU_OK(gens[normal](g, dt, 1, shape, dev, &t));
  void *v = cu_read(t);
  clt_tensor_release(t);
  clt_generator_release(g);
  return v;
}

/* The quarter turn k = round(4 u2) of each Box-Muller angle (0 .. 4, 4 being the turn past 7/8)
 * for element 2 j of randn(dt) with seed: the angle's quadrant that rotates sincos. */
static int quarter_turn(uint64_t seed, clt_dtype dt, int64_t j) {
  int per = dt == CLT_F32 ? 4 : 2;
  int64_t i = 2 * j;
  uint32_t ctr[4] = {(uint32_t)(i / per), (uint32_t)((uint64_t)(i / per) >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, w[4];
  clt__philox4x32_10(ctr, key, w);
  if (dt == CLT_F32)
    return (int)(((w[(int)(i % 4) + 1] >> 8) + 0x200000u) >> 22);
  uint64_t n = ((uint64_t)w[2] << 21) | (w[3] >> 11);
  return (int)((n + ((uint64_t)1 << 50)) >> 51);
}

/* Asserts that got, the first n randn(dt) draws of seed on dev, are within the documented
 * accuracy of Box-Muller in long double: 4e-7 r (f32) and 1e-15 r (f64), docs/operations.md. */
static void assert_randn_accurate(const void *got, uint64_t seed, clt_dtype dt, int64_t n,
                                  clt_device *dev) {
  const double tol = dt == CLT_F32 ? 4e-7 : 1e-15;
  for (int64_t i = 0; i < n; i++) {
    long double r, want = oracle_normal(seed, dt, i, &r);
    double v = cu_get(got, dt, i);
    if (fabsl((long double)v - want) > tol * r)
      ck_abort_msg("%s randn %s element %lld (quarter turn %d): %.17g, expected %.20Lg (r = %Lg)",
                   cu_dev_name(dev), cu_dt_name(dt), (long long)i, quarter_turn(seed, dt, i / 2), v,
                   want, r);
  }
}

/* randn against Box-Muller in long double, within the documented accuracy. */
START_TEST(test_randn_accuracy) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const uint64_t seed = 99;
  const clt_dtype dts[2] = {CLT_F32, CLT_F64};
  for (int d = 0; d < nd; d++)
    for (int k = 0; k < 2; k++) {
      if (!cu_dtype_ok("randn_accuracy", devs[d], dts[k]))
        continue;
      int64_t n = 100003;
      void *v = draw(seed, 1, dts[k], n, devs[d]);
      assert_randn_accurate(v, seed, dts[k], n, devs[d]);
      free(v);
    }
}
END_TEST

/* Turns flushing of f32 subnormals (inputs and results) on or off on the host, as OpenCL 1.2
 * lets a device do; false where the host cannot. */
static bool set_flush(bool on) {
#if defined(__SSE2__)
  unsigned csr = _mm_getcsr() & ~0x8040u; /* FTZ (bit 15) and DAZ (bit 6) */
  _mm_setcsr(on ? csr | 0x8040u : csr);
  return true;
#else
  (void)on;
  return false;
#endif
}

/* Every input of randn f32's two steps, exhaustively: the radius within 2.1e-7 relative and
 * cos, sin within 1e-7 absolute of long double, so that r cos and r sin, rounded, are within
 * 4e-7 r (docs/operations.md); and flushing subnormals changes no result, so a device that
 * flushes f32 subnormals (OpenCL 1.2 allows it) still gives the host's bits. */
START_TEST(test_randn_f32_exhaustive) {
  enum { BLOCK = 4096 };
  static float r[BLOCK], c[BLOCK], sn[BLOCK];
  const long double two_pi = 6.283185307179586476925286766559L;
  bool flush = set_flush(false);
  if (!flush)
    cu_skip("randn_f32_exhaustive flushing", "no way to flush subnormals on this host");
  long double worst_r = 0, worst_cs = 0;
  for (uint32_t base = 0; base < (1u << 24); base += BLOCK) {
    for (uint32_t i = 0; i < BLOCK; i++) {
      uint32_t m = base + i + 1, n = base + i;
      r[i] = clt__randn_radius_f32(m);
      clt__randn_sincos_f32(n, &c[i], &sn[i]);
      long double want_r = sqrtl(-2.0L * logl(ldexpl(m, -24)));
      long double er = m == (1u << 24) ? fabsl((long double)r[i]) : fabsl(r[i] - want_r) / want_r;
      long double a = two_pi * ldexpl(n, -24);
      long double ec = fabsl(c[i] - cosl(a)), es = fabsl(sn[i] - sinl(a));
      worst_r = er > worst_r ? er : worst_r;
      worst_cs = ec > worst_cs ? ec : worst_cs;
      worst_cs = es > worst_cs ? es : worst_cs;
      if (er > 2.1e-7L || ec > 1e-7L || es > 1e-7L)
        ck_abort_msg("m = n = %u: r %.9g (want %.12Lg), cos %.9g, sin %.9g (want %.12Lg, %.12Lg)",
                     m, r[i], want_r, c[i], sn[i], cosl(a), sinl(a));
    }
    if (!flush)
      continue;
    set_flush(true);
    for (uint32_t i = 0; i < BLOCK; i++) {
      float r2 = clt__randn_radius_f32(base + i + 1), c2, s2;
      clt__randn_sincos_f32(base + i, &c2, &s2);
      if (memcmp(&r2, &r[i], sizeof r2) != 0 || memcmp(&c2, &c[i], sizeof c2) != 0 ||
          memcmp(&s2, &sn[i], sizeof s2) != 0) {
        set_flush(false);
        ck_abort_msg("flushing subnormals changes randn f32 for m = n = %u", base + i);
      }
    }
    set_flush(false);
  }
  ck_assert_msg(worst_r > 0 && worst_cs > 0, "the comparison with long double compared nothing");
}
END_TEST

/* Every quarter turn of the angle, the wrapped one (k = 4) included, on every device: the host's
 * bits and the long double value. Small, so that it stays cheap on simulators. Oclgrind 21.10
 * turned k = 4 as if it were 3 while kernels/random.cl rotated with a switch on k & 3
 * (tests/oclgrind/switch_trunc.c). */
START_TEST(test_randn_quadrants) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const uint64_t seed = 1;
  const clt_dtype dts[2] = {CLT_F32, CLT_F64};
  int64_t shape[1] = {64};
  for (int k = 0; k < 2; k++) {
    int seen[5] = {0, 0, 0, 0, 0};
    for (int64_t j = 0; j < shape[0] / 2; j++)
      seen[quarter_turn(seed, dts[k], j)]++;
    for (int q = 0; q < 5; q++)
      ck_assert_msg(seen[q] > 0, "%s: seed %llu covers no angle in quarter turn %d; pick another",
                    cu_dt_name(dts[k]), (unsigned long long)seed, q);
    void *want = NULL;
    for (int d = 0; d < nd; d++) {
      if (!cu_dtype_ok("randn_quadrants", devs[d], dts[k]))
        continue;
      void *got = draw(seed, 1, dts[k], shape[0], devs[d]);
      assert_randn_accurate(got, seed, dts[k], shape[0], devs[d]);
      for (int64_t i = 0; i < shape[0] && want; i++) {
        double v = cu_get(got, dts[k], i);
        ck_assert_msg(
            memcmp((char *)got + i * clt_dtype_size(dts[k]),
                   (char *)want + i * clt_dtype_size(dts[k]), clt_dtype_size(dts[k])) == 0,
            "%s randn %s element %lld (quarter turn %d): %.17g, not %s's %.17g",
            cu_dev_name(devs[d]), cu_dt_name(dts[k]), (long long)i,
            quarter_turn(seed, dts[k], i / 2), v, cu_dev_name(devs[0]), cu_get(want, dts[k], i));
      }
      if (want)
        free(got);
      else
        want = got;
    }
    free(want);
  }
}
END_TEST

START_TEST(test_seeds) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++)
    for (int normal = 0; normal < 2; normal++) {
      float *a = draw(5, normal, CLT_F32, 1000, devs[d]);
      float *b = draw(5, normal, CLT_F32, 1000, devs[d]);
      float *c = draw(6, normal, CLT_F32, 1000, devs[d]);
      float *e = draw(5ULL << 32, normal, CLT_F32, 1000, devs[d]); /* the key's high word */
      ck_assert_msg(memcmp(a, b, 1000 * sizeof(float)) == 0, "%s %s: same seed, other numbers",
                    cu_dev_name(devs[d]), gen_names[normal]);
      int same_c = 0, same_e = 0;
      for (int i = 0; i < 1000; i++) {
        same_c += a[i] == c[i];
        same_e += a[i] == e[i];
      }
      ck_assert_msg(same_c < 5 && same_e < 5, "%s %s: seeds 5, 6, 5<<32 share %d, %d of 1000",
                    cu_dev_name(devs[d]), gen_names[normal], same_c, same_e);
      free(a);
      free(b);
      free(c);
      free(e);
    }
}
END_TEST

/* The offset rule: consecutive calls continue the stream at the next whole counter. */
START_TEST(test_offsets) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const clt_dtype dts[2] = {CLT_F32, CLT_F64};
  for (int d = 0; d < nd; d++)
    for (int k = 0; k < 2; k++)
      for (int normal = 0; normal < 2; normal++) {
        clt_dtype dt = dts[k];
        if (!cu_dtype_ok("random offsets", devs[d], dt))
          continue;
        int per = dt == CLT_F32 ? 4 : 2;
        size_t es = clt_dtype_size(dt);
        char *whole = draw(7, normal, dt, 8 * per, devs[d]);
        clt_generator *g;
        CU_OK(clt_generator_create(7, &g));
        /* n = 2 per (whole counters), an empty tensor (no counter), then n = per + 1 (two
         * counters, the rest of the second skipped), then per elements. */
        int64_t n[4] = {2 * per, 0, per + 1, per}, at[4] = {0, 0, 2 * per, 4 * per};
        for (int c = 0; c < 4; c++) {
          clt_tensor *t;
          CU_OK(gens[normal](g, dt, 1, n + c, devs[d], &t));
          ck_assert_int_eq(clt_tensor_numel(t), n[c]);
          char *v = cu_read(t);
          ck_assert_msg(memcmp(v, whole + at[c] * es, (size_t)n[c] * es) == 0,
                        "%s %s %s: call %d (n = %lld) is not elements %lld.. of one call",
                        cu_dev_name(devs[d]), gen_names[normal], cu_dt_name(dt), c, (long long)n[c],
                        (long long)at[c]);
          if (c == 0) /* and the two halves differ */
            ck_assert_msg(memcmp(v, v + per * es, (size_t)per * es) != 0, "repeated numbers");
          free(v);
          clt_tensor_release(t);
        }
        clt_generator_release(g);
        free(whole);
      }
}
END_TEST

START_TEST(test_manual_seed) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  int64_t shape[2] = {3, 5};
  for (int d = 0; d < nd; d++) {
    clt_tensor *a, *b, *c;
    CU_OK(clt_manual_seed(42));
    CU_OK(clt_rand(CLT_F32, 2, shape, devs[d], &a));
    CU_OK(clt_randn(CLT_F32, 2, shape, devs[d], &b));
    CU_OK(clt_manual_seed(42));
    CU_OK(clt_rand(CLT_F32, 2, shape, devs[d], &c));
    cu_assert_meta(a, CLT_F32, devs[d], 2, shape, "clt_rand");
    cu_assert_meta(b, CLT_F32, devs[d], 2, shape, "clt_randn");
    float *va = cu_read(a), *vb = cu_read(b), *vc = cu_read(c);
    ck_assert_msg(memcmp(va, vc, 15 * sizeof(float)) == 0, "reseeding did not repeat");
    /* The default generator is a generator: seed 42, and randn continues after rand's 4
     * counters. */
    float *w = draw(42, 0, CLT_F32, 15, devs[d]);
    ck_assert_msg(memcmp(va, w, 15 * sizeof(float)) == 0, "clt_rand differs from a generator");
    clt_generator *g;
    CU_OK(clt_generator_create(42, &g));
    clt_tensor *skip, *n2;
    CU_OK(clt_generator_rand(g, CLT_F32, 2, shape, devs[d], &skip));
    CU_OK(clt_generator_randn(g, CLT_F32, 2, shape, devs[d], &n2));
    float *vn = cu_read(n2);
    ck_assert_msg(memcmp(vb, vn, 15 * sizeof(float)) == 0, "clt_randn differs from a generator");
    free(va);
    free(vb);
    free(vc);
    free(w);
    free(vn);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    clt_tensor_release(skip);
    clt_tensor_release(n2);
    clt_generator_release(g);
  }
}
END_TEST

/* Moments of 2^20 samples (the bits are the same on every device, so the host suffices; the
 * first OpenCL device is used when there is one). */
START_TEST(test_statistics) {
  clt_device *dev = clt_device_count() > 0 ? clt_device_at(0) : clt_cpu();
  const int64_t n = 1 << 20;
  const clt_dtype dts[2] = {CLT_F32, CLT_F64};
  for (int k = 0; k < 2; k++)
    for (int normal = 0; normal < 2; normal++) {
      if (!cu_dtype_ok("random statistics", dev, dts[k]))
        continue;
      void *raw = draw(2024, normal, dts[k], n, dev);
      double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
      for (int64_t i = 0; i < n; i++) {
        double x = cu_get(raw, dts[k], i);
        sum += x;
        sq += x * x;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
      }
      double mean = sum / n, var = sq / n - mean * mean;
      const char *what = normal ? "randn" : "rand";
      if (normal) {
        ck_assert_msg(fabs(mean) < 5e-3 && fabs(var - 1) < 1e-2, "%s %s: mean %g, variance %g",
                      what, cu_dt_name(dts[k]), mean, var);
        ck_assert_msg(isfinite(lo) && isfinite(hi) && lo > -9 && hi < 9, "%s: range [%g, %g]", what,
                      lo, hi);
      } else {
        ck_assert_msg(fabs(mean - 0.5) < 2e-3 && fabs(var - 1.0 / 12) < 1e-3,
                      "%s %s: mean %g, variance %g", what, cu_dt_name(dts[k]), mean, var);
        ck_assert_msg(lo >= 0 && hi < 1 && lo < 1e-4 && hi > 1 - 1e-4, "%s %s: range [%g, %g]",
                      what, cu_dt_name(dts[k]), lo, hi);
      }
      free(raw);
    }
}
END_TEST

START_TEST(test_errors) {
  int64_t shape[1] = {4}, neg[1] = {-1};
  clt_tensor *out = CU_SENTINEL;
  clt_generator *g;
  CU_OK(clt_generator_create(1, &g));
  CU_FAILS(clt_rand(CLT_I32, 1, shape, clt_cpu(), &out), CLT_ERR_DTYPE, "clt_rand");
  CU_FAILS(clt_randn(CLT_BOOL, 1, shape, clt_cpu(), &out), CLT_ERR_DTYPE, "clt_randn");
  CU_FAILS(clt_generator_rand(g, CLT_U8, 1, shape, clt_cpu(), &out), CLT_ERR_DTYPE,
           "clt_generator_rand");
  CU_FAILS(clt_rand((clt_dtype)99, 1, shape, clt_cpu(), &out), CLT_ERR_INVALID_ARGUMENT,
           "clt_rand");
  CU_FAILS(clt_rand(CLT_F32, 1, neg, clt_cpu(), &out), CLT_ERR_INVALID_ARGUMENT, "clt_rand");
  CU_FAILS(clt_randn(CLT_F32, 9, shape, clt_cpu(), &out), CLT_ERR_INVALID_ARGUMENT, "clt_randn");
  CU_FAILS(clt_randn(CLT_F32, 1, NULL, clt_cpu(), &out), CLT_ERR_INVALID_ARGUMENT, "clt_randn");
  CU_FAILS(clt_rand(CLT_F32, 1, shape, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_rand");
  CU_FAILS(clt_generator_randn(NULL, CLT_F32, 1, shape, clt_cpu(), &out), CLT_ERR_INVALID_ARGUMENT,
           "clt_generator_randn");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  CU_FAILS(clt_rand(CLT_F32, 1, shape, clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_rand");
  CU_FAILS(clt_generator_create(1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_generator_create");
  clt_generator_release(NULL);
  /* A failed call consumes nothing: g still gives a fresh generator's numbers. */
  CU_OK(clt_generator_rand(g, CLT_F32, 1, shape, clt_cpu(), &out));
  float *v = cu_read(out), *w = draw(1, 0, CLT_F32, 4, clt_cpu());
  ck_assert_msg(memcmp(v, w, sizeof(float) * 4) == 0, "a failed call moved the offset");
  free(v);
  free(w);
  clt_tensor_release(out);
  clt_generator_release(g);
}
END_TEST

Suite *random_suite(void) {
  Suite *s = suite_create("random");
  TCase *tc = cu_tcase("random");
  tcase_add_test(tc, test_kat);
  tcase_add_test(tc, test_kat_mapping);
  tcase_add_test(tc, test_bit_identity);
  tcase_add_test(tc, test_randn_accuracy);
  tcase_add_test(tc, test_randn_quadrants);
  tcase_add_test(tc, test_randn_f32_exhaustive);
  tcase_add_test(tc, test_seeds);
  tcase_add_test(tc, test_offsets);
  tcase_add_test(tc, test_manual_seed);
  tcase_add_test(tc, test_statistics);
  tcase_add_test(tc, test_errors);
  suite_add_tcase(s, tc);
  return s;
}
