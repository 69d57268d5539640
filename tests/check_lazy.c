/* SPDX-License-Identifier: MIT */
/* check_lazy.c - lazy fusion (lib/lazy.c, lib/opencl/fuse.c): deferred elementwise chains give
 * the eager results bit for bit, on every OpenCL device; they are computed when something needs
 * them (reads, reductions, writes into their operands, synchronize, events) and only then;
 * errors of shape, dtype and device come at the call, evaluation errors at the call that forced
 * it; clt_set_lazy and clt_eval. The counts of lib/lazy.c (clt__lazy_stats) show what was fused.
 */
#define _XOPEN_SOURCE 700 /* setenv */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "check_util.h"

/* Releases every tensor listed (NULL entries too). */
static void release_all(clt_tensor *const *ts, size_t n) {
  for (size_t i = 0; i < n; i++)
    clt_tensor_release(ts[i]);
}
#define RELEASE(...)                                                                               \
  release_all((clt_tensor *[]){__VA_ARGS__},                                                       \
              sizeof((clt_tensor *[]){__VA_ARGS__}) / sizeof(clt_tensor *))

static clt_lazy_stats stats(void) {
  clt_lazy_stats s;
  clt__lazy_stats(&s);
  return s;
}

/* A chain of the kinds fusion meets: binary, unary, scalar operands (0-d leaves), a broadcast
 * row, a transposed view, a comparison into bool and a where on it, a clamp, a cast to f64 and
 * back, an integer operand. Every intermediate but `keep` is released at once. */
static clt_tensor *chain(clt_tensor *a, clt_tensor *b, clt_tensor *row, clt_tensor *n,
                         clt_tensor **keep) {
  clt_tensor *t1, *t2, *t3, *t4, *t5, *t6, *t7, *t8, *t9, *t10, *bt, *t11, *t12, *t13, *t14;
  CU_OK(clt_mul(a, b, &t1));
  CU_OK(clt_add_scalar(t1, 0.25, &t2));
  CU_OK(clt_sub(t2, row, &t3)); /* row broadcast over the rows */
  CU_OK(clt_exp(t3, &t4));
  CU_OK(clt_gt(t4, a, &t5)); /* bool */
  CU_OK(clt_where(t5, t4, b, &t6));
  CU_OK(clt_clamp_scalar(t6, -2.0, 3.0, &t7));
  CU_OK(clt_transpose(b, 0, 1, &bt));
  CU_OK(clt_div(t7, bt, &t8)); /* square: b transposed, a strided leaf */
  CU_OK(clt_cast(t8, CLT_F64, &t9));
  CU_OK(clt_mul(t9, n, &t10)); /* an i32 operand, computed in f64 */
  CU_OK(clt_sqrt(t10, &t11));
  CU_OK(clt_cast(t11, CLT_F32, &t12));
  CU_OK(clt_maximum(t12, t3, &t13));
  CU_OK(clt_atan2(t13, t2, &t14));
  RELEASE(t1, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13, bt);
  *keep = t2;
  return t14;
}

/* The side of the square inputs, so that b and its transpose combine. */
static const int N = 48;

static void make_inputs(clt_device *d, clt_tensor **a, clt_tensor **b, clt_tensor **row,
                        clt_tensor **n) {
  float *av = cu_malloc(sizeof(float) * (size_t)(N * N)),
        *bv = cu_malloc(sizeof(float) * (size_t)(N * N)),
        *rv = cu_malloc(sizeof(float) * (size_t)N);
  int32_t *nv = cu_malloc(sizeof(int32_t) * (size_t)(N * N));
  cu_rng r;
  cu_rng_seed(&r, 77);
  cu_fill(av, CLT_F32, N * N, &r, -2, 2, 0);
  cu_fill(bv, CLT_F32, N * N, &r, 0.5, 3, 0);
  cu_fill(rv, CLT_F32, N, &r, -1, 1, 0);
  cu_fill(nv, CLT_I32, N * N, &r, -3, 9, 0);
  int64_t sh[2] = {N, N}, rs[1] = {N};
  *a = cu_tensor(av, CLT_F32, 2, sh, d);
  *b = cu_tensor(bv, CLT_F32, 2, sh, d);
  *row = cu_tensor(rv, CLT_F32, 1, rs, d);
  *n = cu_tensor(nv, CLT_I32, 2, sh, d);
  free(av);
  free(bv);
  free(rv);
  free(nv);
}

/* The chain deferred and eager give the same bits, on every device, the host (host/fuse.c)
 * included. The values agree with a double-precision evaluation of the same formula. */
START_TEST(test_lazy_bit_identical) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  float *first = NULL;                      /* the first OpenCL device's result */
  int64_t host_min = clt__lazy_host_min(1); /* the host defers these small tensors too */
  for (int i = 0; i < nd; i++) {
    clt_device *d = devs[i];
    if (!cu_dtype_ok("test_lazy_bit_identical", d, CLT_F64))
      continue;
    clt_tensor *a, *b, *row, *n, *keep_l, *keep_e;
    make_inputs(d, &a, &b, &row, &n);
    clt_lazy_stats before = stats();
    clt_set_lazy(1);
    clt_tensor *lazy = chain(a, b, row, n, &keep_l);
    clt_lazy_stats mid = stats();
    /* only a backend with a fused member defers: OpenCL's and the host's (not ref:0's) */
    bool fuses = d->backend->compute.fused != NULL;
    if (fuses)
      ck_assert_msg(mid.deferred - before.deferred == 14 && mid.evaluations == before.evaluations,
                    "%s: %ld deferred, %ld evaluations before any read", cu_dev_name(d),
                    mid.deferred - before.deferred, mid.evaluations - before.evaluations);
    float *lv = cu_read(lazy);
    float *kl = cu_read(keep_l);
    clt_lazy_stats after = stats();
    if (fuses) {
      /* one kernel (one pass on the host) for the fourteen ops, which wrote the held
       * intermediate too */
      ck_assert_msg(after.evaluations - mid.evaluations == 1 && after.ops - mid.ops == 14,
                    "%s: %ld kernels computing %ld ops", cu_dev_name(d),
                    after.evaluations - mid.evaluations, after.ops - mid.ops);
    }
    clt_set_lazy(0);
    clt_tensor *eager = chain(a, b, row, n, &keep_e);
    clt_set_lazy(1);
    ck_assert_msg(stats().deferred == after.deferred, "deferred with clt_set_lazy(0)");
    float *ev = cu_read(eager);
    float *ke = cu_read(keep_e);
    ck_assert_msg(memcmp(lv, ev, sizeof(float) * N * N) == 0, "%s: deferred and eager differ",
                  cu_dev_name(d));
    ck_assert_msg(memcmp(kl, ke, sizeof(float) * N * N) == 0, "%s: the held intermediate differs",
                  cu_dev_name(d));
    if (d != clt_cpu() && !first) {
      first = lv;
      lv = NULL;
    } else if (d != clt_cpu()) {
      for (int k = 0; k < N * N; k++)
        ck_assert_msg(cu_close(lv[k], first[k], 1e-5, 1e-6), "%s [%d]: %g, first device %g",
                      cu_dev_name(d), k, lv[k], first[k]);
    }
    /* independently: the formula in double precision */
    float *av = cu_read(a), *bv = cu_read(b), *rv = cu_read(row);
    int32_t *nv = cu_read(n);
    for (int r = 0; r < N; r++)
      for (int c = 0; c < N; c++) {
        int k = r * N + c;
        double t2 = (double)av[k] * bv[k] + 0.25, t3 = t2 - rv[c], t4 = exp(t3);
        double t6 = t4 > av[k] ? t4 : bv[k];
        double t7 = fmin(fmax(t6, -2.0), 3.0), t8 = t7 / bv[c * N + r];
        double t12 = sqrt(t8 * nv[k]), t13 = isnan(t12) ? t12 : fmax(t12, t3);
        double want = atan2(t13, t2);
        float got = ev[k];
        ck_assert_msg(cu_close(got, want, 1e-4, 1e-5) || (isnan(got) && isnan(want)),
                      "%s [%d]: %g, expected %g", cu_dev_name(d), k, got, want);
      }
    free(av);
    free(bv);
    free(rv);
    free(nv);
    free(lv);
    free(ev);
    free(kl);
    free(ke);
    RELEASE(a, b, row, n, lazy, eager, keep_l, keep_e);
  }
  free(first);
  clt__lazy_host_min(host_min);
}
END_TEST

/* A chain on the host large enough that its pass streams from memory (host/fuse.c: more than
 * STREAM_MIN bytes read and written, in small blocks with the leaves prefetched ahead), with
 * rows that do not divide into blocks, a broadcast row, an f32 leaf widened to f64 and two
 * outputs of different widths: the same bits as the eager ops. */
START_TEST(test_lazy_host_streaming) {
  enum { R = 1200, C = 1001 }; /* 1.2 M elements, 29 MB streamed: 4 + 8 read, 4 + 8 written */
  clt_device *d = clt_cpu();
  float *xv = cu_malloc(sizeof(float) * R * C), *rv = cu_malloc(sizeof(float) * C);
  double *yv = cu_malloc(sizeof(double) * R * C);
  cu_rng r;
  cu_rng_seed(&r, 5);
  cu_fill(xv, CLT_F32, R * C, &r, -3, 3, 0);
  cu_fill(yv, CLT_F64, R * C, &r, -1, 1, 0);
  cu_fill(rv, CLT_F32, C, &r, 0.5, 2, 0);
  int64_t sh[2] = {R, C}, rs[1] = {C};
  clt_tensor *x = cu_tensor(xv, CLT_F32, 2, sh, d), *y = cu_tensor(yv, CLT_F64, 2, sh, d),
             *row = cu_tensor(rv, CLT_F32, 1, rs, d);
  clt_tensor *t[2][2]; /* [eager, deferred][x * row, x * row + y] */
  clt_lazy_stats before = stats();
  for (int lazy = 0; lazy < 2; lazy++) {
    clt_set_lazy(lazy);
    CU_OK(clt_mul(x, row, &t[lazy][0]));
    CU_OK(clt_add(t[lazy][0], y, &t[lazy][1]));
  }
  clt_set_lazy(1);
  ck_assert_int_eq(stats().deferred - before.deferred, 2);
  CU_OK(clt_eval(t[1][1])); /* one pass, which writes the held x * row too */
  ck_assert_int_eq(stats().evaluations - before.evaluations, 1);
  for (int o = 0; o < 2; o++) {
    void *ev = cu_read(t[0][o]), *lv = cu_read(t[1][o]);
    ck_assert_msg(memcmp(ev, lv, (size_t)clt_tensor_nbytes(t[0][o])) == 0,
                  "output %d: deferred and eager differ", o);
    free(ev);
    free(lv);
  }
  free(xv);
  free(yv);
  free(rv);
  RELEASE(x, y, row, t[0][0], t[0][1], t[1][0], t[1][1]);
}
END_TEST

/* ---- integer and bool chains ---------------------------------------------------------------
 * Every way an integer or bool computation differs from a float one, in one deferred chain
 * compared byte for byte with the eager ops: i32, i64 and u8 arithmetic that wraps around
 * (multiplies, negation, u8 sums past 255), integer pow with negative exponents, abs of the
 * smallest integer, true division of integers (f32, by zero too) and back, comparisons into
 * bool, logical ops and bool arithmetic (| and &), where on them, casts from float to every
 * integer dtype and bool (saturating, NaN giving 0), integer to float, bool to integer, integer
 * scalars and a broadcast row: 41 ops. */
/* 640 elements: no u8 or bool result takes the 512-byte slot of a released scalar, which
 * Oclgrind's uninitialized-value checker would then report (tests/oclgrind/known-reports) */
#define IR 8
#define IC 80
#define IN (IR * IC)
#define INT_OUTS 18

typedef struct int_inputs {
  clt_tensor *x, *y, *s, *row, *z, *u, *f;
} int_inputs;

static void make_int_inputs(clt_device *d, int_inputs *in) {
  static int32_t x[IN], y[IN], s[IN], row[IC];
  static int64_t z[IN];
  static uint8_t u[IN];
  static float f[IN];
  cu_rng r;
  cu_rng_seed(&r, 1234);
  for (int k = 0; k < IN; k++) {
    x[k] = (int32_t)(uint32_t)cu_rng_next(&r);
    y[k] = (int32_t)(cu_rng_next(&r) % 36) - 4; /* [-4, 31]: pow's exponents */
    s[k] = (int32_t)(cu_rng_next(&r) % 7) - 3;  /* [-3, 3]: pow's bases */
    z[k] = (int64_t)cu_rng_next(&r);
    u[k] = (uint8_t)cu_rng_next(&r);
    f[k] = (float)((cu_rng_uniform(&r) - 0.5) * 2e10);
  }
  for (int c = 0; c < IC; c++)
    row[c] = (int32_t)(uint32_t)cu_rng_next(&r);
  /* the edges, at known places (checked after the run) */
  const int32_t xe[] = {INT32_MIN, INT32_MAX, -1, 0, 1, 46341, -46341};
  memcpy(x, xe, sizeof xe);
  const int32_t sb[] = {-1, 2, 1, -1, 3, -3, 0, 0}, ye[] = {-3, -1, -7, -4, 31, 21, 0, -2};
  memcpy(s, sb, sizeof sb);
  memcpy(y, ye, sizeof ye);
  z[0] = INT64_MIN;
  z[1] = INT64_MAX;
  u[0] = 100;
  u[1] = 255;
  u[2] = 0;
  const float fe[] = {NAN,           INFINITY, -INFINITY,     1e20f,         -3e9f, -0.5f,
                      2147483648.0f, 2.7f,     -2.7f,         300.0f,        -1.5f, 255.9f,
                      0.0f,          -0.0f,    2147483520.0f, -2147483648.0f};
  memcpy(f, fe, sizeof fe);
  int64_t sh[2] = {IR, IC}, rs[1] = {IC};
  in->x = cu_tensor(x, CLT_I32, 2, sh, d);
  in->y = cu_tensor(y, CLT_I32, 2, sh, d);
  in->s = cu_tensor(s, CLT_I32, 2, sh, d);
  in->row = cu_tensor(row, CLT_I32, 1, rs, d);
  in->z = cu_tensor(z, CLT_I64, 2, sh, d);
  in->u = cu_tensor(u, CLT_U8, 2, sh, d);
  in->f = cu_tensor(f, CLT_F32, 2, sh, d);
}

/* The chain; out[] gets the INT_OUTS results it holds, the rest is released at once. */
static void int_chain(const int_inputs *in, clt_tensor **out) {
  clt_tensor *t1, *t2, *t3, *t4, *t5, *t6, *t7, *t8, *t9, *t10, *t11, *t12, *t13, *t14, *t15, *t16,
      *t17, *c1, *c2, *c3, *c4, *c5, *c6, *c7, *w1, *w2, *fi, *fu, *fl, *fb, *r1, *r2, *r3, *r4,
      *r5, *q, *qi, *r6, *sg, *r7, *r8;
  CU_OK(clt_mul(in->x, in->x, &t1)); /* i32, wraps */
  CU_OK(clt_add(t1, in->y, &t2));
  CU_OK(clt_pow(in->s, in->y, &t3)); /* negative exponents */
  CU_OK(clt_abs(in->x, &t4));        /* |INT32_MIN| */
  CU_OK(clt_neg(t4, &t5));
  CU_OK(clt_sub(t5, in->row, &t6));  /* a broadcast row */
  CU_OK(clt_mul_scalar(t6, 3, &t7)); /* an i32 scalar */
  CU_OK(clt_cast(t6, CLT_I64, &t8));
  CU_OK(clt_mul(t8, in->z, &t9));     /* i64, wraps */
  CU_OK(clt_pow(t9, in->y, &t10));    /* i64 pow of i64 and i32 */
  CU_OK(clt_abs(in->z, &t11));        /* |INT64_MIN| */
  CU_OK(clt_mul(in->u, in->u, &t12)); /* u8, wraps */
  CU_OK(clt_cast(in->x, CLT_U8, &t13));
  CU_OK(clt_add(t12, t13, &t14));
  CU_OK(clt_neg(t14, &t15));
  CU_OK(clt_add_scalar(in->u, 200, &t16)); /* a u8 scalar, past 255 */
  CU_OK(clt_pow(t16, in->u, &t17));
  CU_OK(clt_gt(t2, t7, &c1));           /* bool of i32 */
  CU_OK(clt_lt(t9, in->z, &c2));        /* bool of i64 */
  CU_OK(clt_logical_and(c1, c2, &c3));  /* bool computing in bool */
  CU_OK(clt_logical_xor(c3, t15, &c4)); /* bool and u8, in u8 */
  CU_OK(clt_logical_not(c4, &c5));
  CU_OK(clt_add(c5, c1, &c6)); /* bool + bool: or */
  CU_OK(clt_mul(c6, c2, &c7)); /* bool * bool: and */
  CU_OK(clt_where(c3, t2, t7, &w1));
  CU_OK(clt_where(c7, t10, w1, &w2));   /* i64 and i32 */
  CU_OK(clt_cast(in->f, CLT_I32, &fi)); /* saturating, NaN to 0 */
  CU_OK(clt_cast(in->f, CLT_U8, &fu));
  CU_OK(clt_cast(in->f, CLT_I64, &fl));
  CU_OK(clt_cast(in->f, CLT_BOOL, &fb)); /* nonzero, NaN included */
  CU_OK(clt_add(w2, fl, &r1));
  CU_OK(clt_cast(w2, CLT_F32, &r2)); /* i64 to f32, rounded */
  CU_OK(clt_cast(c7, CLT_I32, &r3));
  CU_OK(clt_add(r3, fu, &r4)); /* i32 and u8 */
  CU_OK(clt_maximum(r4, fi, &r5));
  CU_OK(clt_div(t2, in->y, &q)); /* true division, in f32: by 0 too */
  CU_OK(clt_cast(q, CLT_I32, &qi));
  CU_OK(clt_clamp_scalar(t3, -5, 5, &r6));
  CU_OK(clt_sign(t5, &sg));
  CU_OK(clt_where(fb, t17, t15, &r7));
  CU_OK(clt_minimum(c1, fb, &r8)); /* bool: and */
  clt_tensor *keep[INT_OUTS] = {t2, t3, t4, t10, t11, t15, t16, t17, c7,
                                fi, fu, fb, r1,  r2,  r5,  qi,  r7,  r8};
  memcpy(out, keep, sizeof keep);
  RELEASE(t1, t5, t6, t7, t8, t9, t12, t13, t14, c1, c2, c3, c4, c5, c6, w1, w2, fl, r3, r4, q, r6,
          sg);
}

/* x^e wrapping in 32 or 64 bits, by repeated multiplication (not by squaring, as the kernels) */
static uint64_t wrap_pow(uint64_t x, int e, int bits) {
  uint64_t r = 1;
  for (int i = 0; i < e; i++)
    r *= x;
  return bits == 64 ? r : r & 0xffffffffu;
}

/* Result o of a chain, deferred (lv) and eager (ev), n elements read back: the same dtype and
 * the same bytes. */
static void assert_same_bytes(clt_device *d, int o, const clt_tensor *lz, const clt_tensor *eg,
                              const void *lv, const void *ev, int64_t n) {
  ck_assert_int_eq(lz->dtype, eg->dtype);
  size_t es = clt_dtype_size(eg->dtype);
  for (size_t b = 0; b < es * (size_t)n; b++)
    ck_assert_msg(((const uint8_t *)lv)[b] == ((const uint8_t *)ev)[b],
                  "%s: result %d (%s) differs at element %zu: deferred and eager", cu_dev_name(d),
                  o, cu_dt_name(eg->dtype), b / es);
}

START_TEST(test_lazy_integer_bit_identical) {
  if (!cu_need_cl("test_lazy_integer_bit_identical", 1))
    return;
  int64_t host_min = clt__lazy_host_min(1); /* the host defers these small tensors too */
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int i = 0; i < nd; i++) {
    clt_device *d = devs[i];
    if (!d->backend->compute.fused)
      continue; /* a backend that defers nothing (ref:N) */
    int_inputs in;
    make_int_inputs(d, &in);
    clt_tensor *lz[INT_OUTS], *eg[INT_OUTS];
    clt_set_lazy(1);
    clt_lazy_stats before = stats();
    int_chain(&in, lz);
    clt_lazy_stats mid = stats();
    ck_assert_msg(mid.deferred - before.deferred == 41 && mid.evaluations == before.evaluations,
                  "%s: %ld of the 41 integer ops deferred, %ld evaluations before any read",
                  cu_dev_name(d), mid.deferred - before.deferred,
                  mid.evaluations - before.evaluations);
    /* Every chain, each in one kernel: the results (18 tensors, some also read by later ops)
     * end eight chains, and a released op that two chains read is computed in both (8 kernels
     * computing 61 ops today) */
    CU_OK(clt_device_synchronize(d));
    clt_lazy_stats after = stats();
    long kernels = after.evaluations - mid.evaluations, ops = after.ops - mid.ops;
    ck_assert_msg(ops >= 41 && kernels <= 8, "%s: %ld kernels computing %ld ops", cu_dev_name(d),
                  kernels, ops);
    void *lv[INT_OUTS], *ev[INT_OUTS];
    for (int o = 0; o < INT_OUTS; o++)
      lv[o] = cu_read(lz[o]);
    ck_assert_msg(stats().evaluations == after.evaluations, "%s: evaluated again", cu_dev_name(d));
    clt_set_lazy(0);
    int_chain(&in, eg);
    clt_set_lazy(1);
    ck_assert_msg(stats().deferred == after.deferred, "deferred with clt_set_lazy(0)");
    for (int o = 0; o < INT_OUTS; o++) {
      ev[o] = cu_read(eg[o]);
      assert_same_bytes(d, o, lz[o], eg[o], lv[o], ev[o], IN);
    }
    /* independently: the edges (deferred and eager are the same bytes now) */
    const int32_t *x = cu_read(in.x), *y = cu_read(in.y), *t2 = ev[0], *t3 = ev[1], *t4 = ev[2];
    for (int k = 0; k < IN; k++)
      ck_assert_msg(t2[k] == (int32_t)((uint32_t)x[k] * (uint32_t)x[k] + (uint32_t)y[k]),
                    "%s: x*x+y [%d] = %d", cu_dev_name(d), k, t2[k]);
    const int32_t t3e[] = {
        -1, 0, 1, 1, (int32_t)wrap_pow(3, 31, 32), (int32_t)wrap_pow((uint64_t)(int64_t)-3, 21, 32),
        1,  0};
    for (int k = 0; k < 8; k++)
      ck_assert_msg(t3[k] == t3e[k], "%s: pow [%d] = %d, expected %d", cu_dev_name(d), k, t3[k],
                    t3e[k]);
    ck_assert_int_eq(t4[0], INT32_MIN);
    ck_assert_int_eq(t4[2], 1);
    ck_assert_msg(((int64_t *)ev[4])[0] == INT64_MIN, "%s: |INT64_MIN|", cu_dev_name(d));
    ck_assert_int_eq(((uint8_t *)ev[6])[0], 44); /* 100 + 200 - 256 */
    const int32_t fie[] = {0,         INT32_MAX, INT32_MIN,  INT32_MAX, INT32_MIN, 0,
                           INT32_MAX, 2,         -2,         300,       -1,        255,
                           0,         0,         2147483520, INT32_MIN};
    const uint8_t fue[] = {0, 255, 0, 255, 0, 0, 255, 2, 0, 255, 0, 255, 0, 0, 255, 0};
    const uint8_t fbe[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1};
    for (int k = 0; k < 16; k++) {
      ck_assert_msg(((int32_t *)ev[9])[k] == fie[k], "%s: cast to i32 [%d] = %d, expected %d",
                    cu_dev_name(d), k, ((int32_t *)ev[9])[k], fie[k]);
      ck_assert_msg(((uint8_t *)ev[10])[k] == fue[k], "%s: cast to u8 [%d] = %d, expected %d",
                    cu_dev_name(d), k, ((uint8_t *)ev[10])[k], fue[k]);
      ck_assert_msg(((uint8_t *)ev[11])[k] == fbe[k], "%s: cast to bool [%d] = %d", cu_dev_name(d),
                    k, ((uint8_t *)ev[11])[k]);
    }
    free((void *)x);
    free((void *)y);
    for (int o = 0; o < INT_OUTS; o++) {
      free(lv[o]);
      free(ev[o]);
      RELEASE(lz[o], eg[o]);
    }
    RELEASE(in.x, in.y, in.s, in.row, in.z, in.u, in.f);
  }
  clt__lazy_host_min(host_min);
}
END_TEST

/* ---- f16 and bf16 chains ------------------------------------------------------------------
 * f16 and bf16 round at every store: a fused kernel keeps each such result rounded as stored
 * (NaN as the one quiet NaN) and loads them as the eager kernels do. Compared byte for byte with
 * the eager ops: f16 and bf16 arithmetic past their range and precision, integers rounded into
 * them, casts between them and to f32, i32 (saturating, NaN giving 0) and from f32, f16 with
 * bf16 (in f32), f16 with f32, an f16 scalar, comparisons and where. */
#define HN 640
#define HALF_OUTS 10

typedef struct half_inputs {
  clt_tensor *a, *b, *x, *f;
} half_inputs;

static void make_half_inputs(clt_device *d, half_inputs *in) {
  static uint16_t a[HN], b[HN];
  static int32_t x[HN];
  static float f[HN];
  cu_rng r;
  cu_rng_seed(&r, 4321);
  for (int k = 0; k < HN; k++) {
    a[k] = cu_narrow_bits((cu_rng_uniform(&r) - 0.5) * 600, CLT_F16);
    b[k] = cu_narrow_bits((cu_rng_uniform(&r) - 0.5) * 1e5, CLT_BF16);
    x[k] = (int32_t)(cu_rng_next(&r) % 200001) - 100000;
    f[k] = (float)((cu_rng_uniform(&r) - 0.5) * 1e6);
  }
  const double ae[] = {NAN, INFINITY, -INFINITY, 65504, -65504, 6e-8, 0.0, -0.0, 1.0, 2049};
  for (int k = 0; k < 10; k++)
    a[k] = cu_narrow_bits(ae[k], CLT_F16);
  const float fe[] = {NAN, 1e6f, -70000.0f, 65520.0f, 1e-9f, 3.14159f};
  memcpy(f, fe, sizeof fe);
  x[0] = 2049; /* rounds to 2048 in f16 */
  x[1] = 16777217;
  int64_t sh[2] = {8, HN / 8};
  in->a = cu_tensor(a, CLT_F16, 2, sh, d);
  in->b = cu_tensor(b, CLT_BF16, 2, sh, d);
  in->x = cu_tensor(x, CLT_I32, 2, sh, d);
  in->f = cu_tensor(f, CLT_F32, 2, sh, d);
}

static void half_chain(const half_inputs *in, clt_tensor **out) {
  clt_tensor *h1, *h2, *h3, *h4, *h5, *h6, *g1, *g2, *g3, *m, *mix, *c1, *w, *ci, *cf, *dd, *hs;
  CU_OK(clt_add(in->a, in->a, &h1)); /* past 65504: inf */
  CU_OK(clt_mul(h1, in->a, &h2));
  CU_OK(clt_add(h2, in->x, &h3)); /* the i32 rounded to f16 first */
  CU_OK(clt_sqrt(h3, &h4));       /* f16, NaN below 0 */
  CU_OK(clt_cast(in->f, CLT_F16, &h5));
  CU_OK(clt_sub(h5, h1, &h6));
  CU_OK(clt_mul(in->b, in->b, &g1)); /* bf16 */
  CU_OK(clt_add(g1, in->x, &g2));
  CU_OK(clt_cast(g2, CLT_F16, &g3)); /* bf16 to f16 */
  CU_OK(clt_add(g3, h6, &m));
  CU_OK(clt_add(in->a, in->b, &mix)); /* f16 and bf16: f32 */
  CU_OK(clt_gt(h6, in->a, &c1));
  CU_OK(clt_where(c1, h6, g3, &w));
  CU_OK(clt_cast(h2, CLT_I32, &ci)); /* saturating, NaN to 0 */
  CU_OK(clt_cast(w, CLT_F32, &cf));
  CU_OK(clt_mul(h5, in->f, &dd));      /* f16 and f32: f32 */
  CU_OK(clt_add_scalar(h4, 0.1, &hs)); /* an f16 scalar */
  clt_tensor *keep[HALF_OUTS] = {h2, h3, h4, g2, m, mix, ci, cf, dd, hs};
  memcpy(out, keep, sizeof keep);
  RELEASE(h1, h5, h6, g1, g3, c1, w);
}

START_TEST(test_lazy_half_bit_identical) {
  if (!cu_need_cl("test_lazy_half_bit_identical", 1))
    return;
  int64_t host_min = clt__lazy_host_min(1); /* the host defers these small tensors too */
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int i = 0; i < nd; i++) {
    clt_device *d = devs[i];
    if (!d->backend->compute.fused)
      continue; /* a backend that defers nothing (ref:N) */
    half_inputs in;
    make_half_inputs(d, &in);
    clt_tensor *lz[HALF_OUTS], *eg[HALF_OUTS];
    clt_set_lazy(1);
    clt_lazy_stats before = stats();
    half_chain(&in, lz);
    clt_lazy_stats mid = stats();
    ck_assert_msg(mid.deferred - before.deferred == 17, "%s: %ld of the 17 ops deferred",
                  cu_dev_name(d), mid.deferred - before.deferred);
    CU_OK(clt_device_synchronize(d));
    clt_lazy_stats after = stats();
    long kernels = after.evaluations - mid.evaluations, ops = after.ops - mid.ops;
    ck_assert_msg(ops >= 17 && kernels <= 6, "%s: %ld kernels computing %ld ops", cu_dev_name(d),
                  kernels, ops);
    clt_set_lazy(0);
    half_chain(&in, eg);
    clt_set_lazy(1);
    for (int o = 0; o < HALF_OUTS; o++) {
      uint8_t *lv = cu_read(lz[o]), *ev = cu_read(eg[o]);
      assert_same_bytes(d, o, lz[o], eg[o], lv, ev, HN);
      free(lv);
      free(ev);
      RELEASE(lz[o], eg[o]);
    }
    RELEASE(in.a, in.b, in.x, in.f);
  }
  clt__lazy_host_min(host_min);
}
END_TEST

static clt_tensor *filled(clt_device *d, int64_t n, float first, float step) {
  float *v = cu_malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    v[i] = first + step * (float)i;
  int64_t sh[1] = {n};
  clt_tensor *t = cu_tensor(v, CLT_F32, 1, sh, d);
  free(v);
  return t;
}

/* A chain reads its leaves as they were at the call: writing into a leaf (in place, clt_copy,
 * clt_fill_, a copy from the host) first computes the chains that read it. */
START_TEST(test_lazy_leaf_written_later) {
  if (!cu_need_cl("test_lazy_leaf_written_later", 1))
    return;
  clt_device *d = clt_device_at(0);
  for (int how = 0; how < 4; how++) {
    clt_tensor *a = filled(d, 100, 1, 1), *b = filled(d, 100, 0.5f, 0), *c;
    CU_OK(clt_mul(a, b, &c)); /* deferred: c = a / 2 */
    switch (how) {
    case 0:
      CU_OK(clt_add_(a, b));
      break;
    case 1:
      CU_OK(clt_copy(a, b));
      break;
    case 2:
      CU_OK(clt_fill_(a, -7));
      break;
    default: { /* from the host */
      clt_tensor *h = filled(clt_cpu(), 100, 0, 0);
      CU_OK(clt_copy(a, h));
      clt_tensor_release(h);
    }
    }
    float *v = cu_read(c);
    for (int i = 0; i < 100; i++)
      ck_assert_msg(v[i] == (float)(i + 1) * 0.5f, "write %d: c[%d] = %g, expected %g", how, i,
                    v[i], (i + 1) * 0.5);
    free(v);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
  }
}
END_TEST

/* A deferred result that another deferred chain reads, written before that chain is computed
 * (in place, clt_copy, clt_fill_, after a clt_eval of it alone): the chain sees the value the
 * result had at its call, on every device. */
START_TEST(test_lazy_result_written_later) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  int64_t n = 100, host_min = clt__lazy_host_min(1); /* the host defers these small tensors too */
  for (int i = 0; i < nd; i++) {
    clt_device *d = devs[i];
    for (int how = 0; how < 4; how++) {
      clt_tensor *a = filled(d, n, 1, 1), *b = filled(d, n, 0.5f, 0), *c, *e;
      clt_lazy_stats s0 = stats();
      CU_OK(clt_mul(a, b, &c)); /* c = a / 2 */
      CU_OK(clt_add(c, b, &e)); /* e = a / 2 + 0.5, a chain continuing c's */
      ck_assert_msg(!d->backend->compute.fused || stats().deferred == s0.deferred + 2, "%s: not deferred",
                    cu_dev_name(d));
      switch (how) {
      case 0:
        CU_OK(clt_add_(c, b));
        break;
      case 1:
        CU_OK(clt_copy(c, a));
        break;
      case 2:
        CU_OK(clt_fill_(c, -7));
        break;
      default:
        CU_OK(clt_eval(c)); /* computed alone; e still refers to it */
        CU_OK(clt_fill_(c, -7));
      }
      float *v = cu_read(e);
      for (int64_t k = 0; k < n; k++)
        ck_assert_msg(v[k] == (float)(k + 1) * 0.5f + 0.5f, "%s, write %d: e[%lld] = %g",
                      cu_dev_name(d), how, (long long)k, v[k]);
      free(v);
      RELEASE(a, b, c, e);
    }
  }
  clt__lazy_host_min(host_min);
}
END_TEST

/* Host memory the program can write behind clt's back (clt_tensor_data's pointer) is never read
 * by a deferred chain: an op reading it runs at the call, fused with the deferred chains of its
 * other operands; taking the pointer computes the chains that read the memory. */
START_TEST(test_lazy_host_pointer) {
  clt_device *h = clt_cpu();
  int64_t n = 1000, host_min = clt__lazy_host_min(1); /* deferred though small */
  clt_tensor *a = filled(h, n, 1, 1), *b = filled(h, n, 2, 0), *x = filled(h, n, 3, 0), *t, *y, *z;
  float *p = clt_tensor_data(x);
  ck_assert_ptr_nonnull(p);
  clt_lazy_stats s0 = stats();
  CU_OK(clt_mul(a, b, &t)); /* deferred */
  ck_assert_msg(stats().deferred == s0.deferred + 1 && stats().evaluations == s0.evaluations,
                "a * b was not deferred");
  CU_OK(clt_add(t, x, &y)); /* reads x: computed now, with t's op */
  clt_lazy_stats s1 = stats();
  ck_assert_msg(s1.evaluations == s0.evaluations + 1 && s1.ops == s0.ops + 2,
                "%ld passes computing %ld ops at the call reading x",
                s1.evaluations - s0.evaluations, s1.ops - s0.ops);
  p[0] = 1000; /* after the call: y does not see it */
  p[n - 1] = 1000;
  float *yv = cu_read(y);
  for (int64_t k = 0; k < n; k++)
    ck_assert_msg(yv[k] == (float)(k + 1) * 2 + 3, "y[%lld] = %g", (long long)k, yv[k]);
  free(yv);
  /* a pointer taken after the call */
  CU_OK(clt_mul_scalar(a, 3.0, &z));
  ck_assert_msg(stats().evaluations == s1.evaluations, "a * 3 was not deferred");
  float *q = clt_tensor_data(a);
  ck_assert_ptr_nonnull(q);
  ck_assert_msg(stats().evaluations == s1.evaluations + 1, "taking a's pointer left z deferred");
  q[0] = -1;
  q[n - 1] = -1;
  float *zv = cu_read(z);
  for (int64_t k = 0; k < n; k++)
    ck_assert_msg(zv[k] == (float)(k + 1) * 3, "z[%lld] = %g", (long long)k, zv[k]);
  free(zv);
  RELEASE(a, b, x, t, y, z);
  clt__lazy_host_min(host_min);
}
END_TEST

/* Views of a deferred result, reads of it in pieces, writes into it. */
START_TEST(test_lazy_views_of_deferred) {
  if (!cu_need_cl("test_lazy_views_of_deferred", 1))
    return;
  clt_device *d = clt_device_at(0);
  clt_tensor *a = filled(d, 64, -3, 0.5f), *t, *v, *w;
  CU_OK(clt_mul_scalar(a, 3.0, &t));
  CU_OK(clt_narrow(t, 0, 10, 20, &v)); /* a view of a deferred result */
  CU_OK(clt_add_scalar(v, 1.0, &w));   /* reads the view: t is computed first */
  float *wv = cu_read(w);
  for (int i = 0; i < 20; i++)
    ck_assert_msg(wv[i] == (-3 + 0.5f * (float)(i + 10)) * 3 + 1, "w[%d] = %g", i, wv[i]);
  free(wv);
  clt_tensor *u, *uv;
  CU_OK(clt_neg(a, &u));
  CU_OK(clt_narrow(u, 0, 0, 8, &uv));
  CU_OK(clt_fill_(uv, 100)); /* a write into part of a deferred result */
  float *x = cu_read(u);
  for (int i = 0; i < 64; i++)
    ck_assert_msg(x[i] == (i < 8 ? 100.0f : -(-3 + 0.5f * (float)i)), "u[%d] = %g", i, x[i]);
  free(x);
  RELEASE(a, t, v, w, u, uv);
}
END_TEST

/* What forces a chain: a reduction, synchronize, an event, clt_eval, a transfer; a chain that
 * nobody reads and everybody released is never computed. */
START_TEST(test_lazy_what_forces) {
  if (!cu_need_cl("test_lazy_what_forces", 2))
    return;
  clt_device *d = clt_device_at(0);
  clt_tensor *a = filled(d, 1000, 0, 0.001f);
  for (int how = 0; how < 6; how++) {
    clt_tensor *t, *u;
    CU_OK(clt_sin(a, &t));
    CU_OK(clt_mul(t, t, &u));
    clt_tensor_release(t);
    clt_lazy_stats s0 = stats();
    clt_tensor *x = NULL;
    clt_event *ev = NULL;
    switch (how) {
    case 0:
      CU_OK(clt_sum(u, &x));
      break;
    case 1:
      CU_OK(clt_device_synchronize(d));
      break;
    case 2:
      CU_OK(clt_event_record(d, &ev));
      CU_OK(clt_event_wait(ev));
      clt_event_release(ev);
      break;
    case 3:
      CU_OK(clt_eval(u));
      CU_OK(clt_eval(u)); /* nothing left to do */
      break;
    case 4:
      CU_OK(clt_to(u, clt_device_at(1), &x));
      break;
    default:
      break;
    }
    clt_lazy_stats s1 = stats();
    if (how < 5) {
      ck_assert_msg(s1.evaluations == s0.evaluations + 1 && s1.ops == s0.ops + 2,
                    "case %d: %ld kernels, %ld ops", how, s1.evaluations - s0.evaluations,
                    s1.ops - s0.ops);
      float *v = cu_read(u);
      for (int i = 0; i < 1000; i++) {
        float si = sinf(0.001f * (float)i);
        ck_assert_msg(fabsf(v[i] - si * si) <= 1e-6f, "case %d: u[%d] = %g", how, i, v[i]);
      }
      free(v);
    }
    clt_tensor_release(u);
    clt_tensor_release(x);
    if (how == 5)
      ck_assert_msg(stats().evaluations == s0.evaluations, "a released chain was computed");
  }
  clt_tensor_release(a);
}
END_TEST

/* Errors of devices, shapes and dtypes come at the call, with the output untouched. */
START_TEST(test_lazy_errors_at_the_call) {
  if (!cu_need_cl("test_lazy_errors_at_the_call", 2))
    return;
  clt_tensor *a = filled(clt_device_at(0), 10, 1, 1), *b = filled(clt_device_at(1), 10, 1, 1);
  clt_tensor *c = filled(clt_device_at(0), 7, 1, 1), *t, *out = CU_SENTINEL;
  CU_OK(clt_exp(a, &t)); /* deferred */
  CU_FAILS(clt_add(t, b, &out), CLT_ERR_DEVICE_MISMATCH, "clt_add");
  ck_assert_msg(strstr(clt_last_error(), "cl:0") && strstr(clt_last_error(), "cl:1"), "%s",
                clt_last_error());
  CU_FAILS(clt_add(t, c, &out), CLT_ERR_SHAPE_MISMATCH, "clt_add");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  CU_FAILS(clt_eval(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_eval");
  RELEASE(a, b, c, t);
}
END_TEST

/* A chain longer than one kernel takes is computed in parts, correctly: 100 ops with a scalar
 * operand each (a kernel argument; a kernel takes at most 24 of them) in 5 kernels of 24, 24,
 * 24, 24 and 4 ops. */
START_TEST(test_lazy_long_chain) {
  if (!cu_need_cl("test_lazy_long_chain", 1))
    return;
  clt_device *d = clt_device_at(0);
  clt_tensor *t = filled(d, 300, 0, 1);
  clt_lazy_stats s0 = stats();
  for (int i = 0; i < 100; i++) {
    clt_tensor *u;
    CU_OK(clt_add_scalar(t, 1.0, &u));
    clt_tensor_release(t);
    t = u;
  }
  float *v = cu_read(t);
  for (int i = 0; i < 300; i++)
    ck_assert_msg(v[i] == (float)(i + 100), "t[%d] = %g", i, v[i]);
  free(v);
  clt_lazy_stats s1 = stats();
  ck_assert_msg(s1.ops - s0.ops == 100 && s1.evaluations - s0.evaluations == 5,
                "100 ops in %ld kernels computing %ld", s1.evaluations - s0.evaluations,
                s1.ops - s0.ops);
  clt_tensor_release(t);
}
END_TEST

/* In-place ops are not deferred, integer ops are; clt_set_lazy(0) turns deferring off and says
 * what it was. */
START_TEST(test_lazy_what_is_deferred) {
  if (!cu_need_cl("test_lazy_what_is_deferred", 1))
    return;
  clt_device *d = clt_device_at(0);
  int64_t sh[1] = {5};
  int32_t iv[5] = {1, 2, 3, 4, 5};
  clt_tensor *i = cu_tensor(iv, CLT_I32, 1, sh, d), *f = filled(d, 5, 1, 1), *o;
  clt_lazy_stats s0 = stats();
  CU_OK(clt_add_(f, f)); /* in place */
  ck_assert_msg(stats().deferred == s0.deferred, "an in-place op was deferred");
  CU_OK(clt_add(i, i, &o)); /* integer: deferred */
  ck_assert_msg(stats().deferred == s0.deferred + 1, "an integer op was not deferred");
  clt_tensor_release(o);
  /* an integer scalar, deferred too (a kernel argument), refused at the call as clt_full
   * refuses it when the dtype cannot hold it */
  o = CU_SENTINEL;
  CU_FAILS(clt_add_scalar(i, 1e10, &o), CLT_ERR_INVALID_ARGUMENT, "clt_add_scalar");
  ck_assert_ptr_eq(o, CU_SENTINEL);
  CU_OK(clt_mul_scalar(i, -2147483647.0, &o)); /* wraps */
  ck_assert_msg(stats().deferred == s0.deferred + 2, "an integer _scalar op was not deferred");
  int32_t got[5];
  CU_OK(clt_tensor_read(o, got, sizeof got));
  for (int k = 0; k < 5; k++)
    ck_assert_int_eq(got[k], (int32_t)((uint32_t)iv[k] * (uint32_t)-2147483647));
  clt_tensor_release(o);
  s0.deferred += 2;
  ck_assert_int_eq(clt_set_lazy(0), 1);
  CU_OK(clt_exp(f, &o));
  ck_assert_msg(stats().deferred == s0.deferred, "deferred while off");
  clt_tensor_release(o);
  ck_assert_int_eq(clt_set_lazy(1), 0);
  CU_OK(clt_exp(f, &o));
  ck_assert_msg(stats().deferred == s0.deferred + 1, "not deferred while on");
  /* small host tensors are not (below CLT__HOST_LAZY_MIN elements, unless CLT_LAZY_HOST_MIN
   * says otherwise, as in .ci/run's run deferring every host op) */
  clt_tensor *h = filled(clt_cpu(), 5, 1, 1), *ho;
  CU_OK(clt_exp(h, &ho));
  if (!getenv("CLT_LAZY_HOST_MIN"))
    ck_assert_msg(stats().deferred == s0.deferred + 1, "a small host op was deferred");
  RELEASE(i, f, o, h, ho);
}
END_TEST

/* A chain whose fused kernel is not built yet, but whose ops' own kernels are (here: the chain
 * ran eagerly first), runs op by op while the fused kernel builds in the background
 * (lib/opencl/program.c), and gives the same bits as the fused kernel, once it is built, and as
 * the eager ops. A chain whose ops' kernels are not built either is fused at once (one build,
 * where running op by op would make one per op). Needs a process of its own (CK_FORK), so that
 * no earlier test has built the chain's kernels in this process's memory; on Oclgrind (serial)
 * builds stay in the caller's thread and the chain fuses at once. */
START_TEST(test_lazy_background_build) {
  if (!cu_forked) {
    cu_skip("test_lazy_background_build", "needs CK_FORK (a process that built nothing yet)");
    return;
  }
  unsetenv("CLT_BACKGROUND_BUILDS");
  for (int i = 0; i < cu_cl_count(); i++) {
    clt_device *d = clt_device_at(i);
    if (!cu_dtype_ok("test_lazy_background_build", d, CLT_F64))
      continue;
    bool background = d->backend->compute.fused && clt__background_builds(d);
    clt_tensor *a, *b, *row, *n, *keep, *r;
    make_inputs(d, &a, &b, &row, &n);
    /* ops whose kernels this process has not built: fused at once, not op by op */
    clt_lazy_stats c0 = stats();
    clt_tensor *c1, *c2;
    CU_OK(clt_atan2(a, b, &c1));
    CU_OK(clt_expm1(c1, &c2));
    float *cv = cu_read(c2);
    ck_assert_msg(stats().evaluations - c0.evaluations == 1 && stats().each == c0.each,
                  "%s: a chain of unbuilt ops ran op by op", cu_dev_name(d));
    free(cv);
    RELEASE(c1, c2);
    clt_set_lazy(0);
    clt_tensor *keep_e, *e = chain(a, b, row, n, &keep_e);
    /* the eager ops' programs are built once their kernels have run (a first use is launched
     * behind its build: lib/opencl/deferred.c) */
    CU_OK(clt_device_synchronize(d));
    clt_set_lazy(1);
    float *each = NULL, *each_keep = NULL, *fused = NULL, *fused_keep = NULL;
    clt_lazy_stats s0 = stats();
    r = chain(a, b, row, n, &keep);
    each = cu_read(r);
    each_keep = cu_read(keep);
    RELEASE(r, keep);
    clt_lazy_stats s1 = stats();
    ck_assert_msg(s1.evaluations - s0.evaluations == 1 && s1.ops - s0.ops == 14,
                  "%s: %ld evaluations of %ld ops", cu_dev_name(d), s1.evaluations - s0.evaluations,
                  s1.ops - s0.ops);
    ck_assert_msg(s1.each - s0.each == (background ? 1 : 0),
                  "%s: the first use ran op by op %ld times (background builds %s)",
                  cu_dev_name(d), s1.each - s0.each, background ? "on" : "off");
    /* again until the fused kernel is there: a deadline, not a hang */
    double waited = 0;
    for (;;) {
      clt_lazy_stats t0 = stats();
      r = chain(a, b, row, n, &keep);
      float *v = cu_read(r), *k = cu_read(keep);
      RELEASE(r, keep);
      if (stats().each == t0.each) {
        fused = v;
        fused_keep = k;
        break;
      }
      ck_assert_msg(memcmp(v, each, sizeof(float) * N * N) == 0,
                    "%s: two runs op by op differ", cu_dev_name(d));
      free(v);
      free(k);
      ck_assert_msg(waited < 300, "%s: the fused kernel was not built after %.0f s",
                    cu_dev_name(d), waited);
      struct timespec ts = {0, 50000000};
      nanosleep(&ts, NULL);
      waited += 0.05;
    }
    float *ev = cu_read(e), *ke = cu_read(keep_e);
    ck_assert_msg(memcmp(each, fused, sizeof(float) * N * N) == 0,
                  "%s: op by op and fused differ", cu_dev_name(d));
    ck_assert_msg(memcmp(each_keep, fused_keep, sizeof(float) * N * N) == 0,
                  "%s: the held intermediate differs (op by op, fused)", cu_dev_name(d));
    ck_assert_msg(memcmp(each, ev, sizeof(float) * N * N) == 0,
                  "%s: op by op and eager differ", cu_dev_name(d));
    ck_assert_msg(memcmp(each_keep, ke, sizeof(float) * N * N) == 0,
                  "%s: the held intermediate differs (op by op, eager)", cu_dev_name(d));
    RELEASE(a, b, row, n, e, keep_e);
    free(each);
    free(each_keep);
    free(fused);
    free(fused_keep);
    free(ev);
    free(ke);
  }
}
END_TEST

/* A fused kernel that fails to build: the op returns at once, the read that forces it gets
 * CLT_ERR_BUILD naming the deferred ops, the log and the device; the chain stays pending, so a
 * second read reports it again; releasing it leaks nothing. */
START_TEST(test_lazy_build_error_at_the_read) {
  if (!cu_forked) {
    cu_skip("test_lazy_build_error_at_the_read", "needs CK_FORK (sets CLT_KERNEL_PATH)");
    return;
  }
  char dir[256];
  cu_temp_dir(dir, sizeof dir, "lazy");
  /* an empty prelude and a fused.cl that does not compile (nothing else is built here) */
  char common[512], bad[512];
  snprintf(common, sizeof common, "%s/common.cl", dir);
  snprintf(bad, sizeof bad, "%s/fused.cl", dir);
  FILE *f = fopen(common, "wb");
  ck_assert_ptr_nonnull(f);
  fputs("/* empty */\n", f);
  fclose(f);
  f = fopen(bad, "wb");
  ck_assert_ptr_nonnull(f);
  fputs("__kernel void fused(CLT_FUSED_PARAMS) { this is not C }\n", f);
  fclose(f);
  setenv("CLT_KERNEL_PATH", dir, 1);
  setenv("CLT_CACHE", "0", 1);
  /* built in the caller's thread: a background build that fails leaves the chain to its ops
   * (test_lazy_background_build), which this kernel path cannot build either */
  setenv("CLT_BACKGROUND_BUILDS", "0", 1);
  if (!cu_need_cl("test_lazy_build_error_at_the_read", 1))
    return;
  clt_device *d = clt_device_at(0);
  clt_tensor *a = filled(d, 16, 1, 1), *t, *u;
  CU_OK(clt_mul(a, a, &t));
  CU_OK(clt_add(t, a, &u)); /* two ops: the fused kernel */
  float out[16] = {0};
  CU_FAILS(clt_tensor_read(u, out, sizeof out), CLT_ERR_BUILD, "clt_tensor_read");
  const char *msg = clt_last_error();
  ck_assert_msg(strstr(msg, "deferred ops (mul add)") && strstr(msg, "cl:0") &&
                    strstr(msg, "build log"),
                "the message lacks the ops, the device or the log: %s", msg);
  ck_assert_msg(out[0] == 0.0f, "the read wrote its destination");
  CU_FAILS(clt_tensor_read(u, out, sizeof out), CLT_ERR_BUILD, "clt_tensor_read");
  clt_tensor_release(a);
  clt_tensor_release(t);
  clt_tensor_release(u);
  remove(common);
  remove(bad);
  rmdir(dir);
}
END_TEST

/* Runs f with deferring on, then off, on copies of the same inputs; the results must have the
 * same bytes. */
typedef void (*step_fn)(clt_tensor *w, clt_tensor *g);

static void same_both_ways(step_fn f, clt_device *d, int64_t rows, int64_t cols, const char *what,
                           long want_evals, long want_ops) {
  int64_t sh[2] = {rows, cols};
  int64_t n = rows * cols;
  float *wv = cu_malloc(sizeof(float) * (size_t)n), *gv = cu_malloc(sizeof(float) * (size_t)n);
  cu_rng r;
  cu_rng_seed(&r, 5);
  cu_fill(wv, CLT_F32, n, &r, -1, 1, 0);
  cu_fill(gv, CLT_F32, n, &r, -1, 1, 0);
  float *res[2];
  for (int lazy = 1; lazy >= 0; lazy--) {
    clt_tensor *w = cu_tensor(wv, CLT_F32, 2, sh, d), *g = cu_tensor(gv, CLT_F32, 2, sh, d);
    clt_set_lazy(lazy);
    clt_lazy_stats s0 = stats();
    f(w, g);
    clt_lazy_stats s1 = stats();
    clt_set_lazy(1);
    if (lazy && want_evals >= 0)
      ck_assert_msg(s1.evaluations - s0.evaluations == want_evals && s1.ops - s0.ops == want_ops,
                    "%s: %ld kernels computing %ld ops, expected %ld and %ld", what,
                    s1.evaluations - s0.evaluations, s1.ops - s0.ops, want_evals, want_ops);
    res[lazy] = cu_read(w);
    clt_tensor_release(w);
    clt_tensor_release(g);
  }
  ck_assert_msg(memcmp(res[0], res[1], sizeof(float) * (size_t)n) == 0,
                "%s: deferred and eager differ", what);
  free(res[0]);
  free(res[1]);
  free(wv);
  free(gv);
}

static void sgd(clt_tensor *w, clt_tensor *g) { /* w -= 0.1 * g */
  clt_tensor *t;
  CU_OK(clt_mul_scalar(g, 0.1, &t));
  CU_OK(clt_sub_(w, t));
  clt_tensor_release(t);
}

static void decay(clt_tensor *w, clt_tensor *g) { /* w -= 0.1 * (g + 0.01 * w) */
  clt_tensor *t, *u, *v;
  CU_OK(clt_mul_scalar(w, 0.01, &t));
  CU_OK(clt_add(g, t, &u));
  CU_OK(clt_mul_scalar(u, 0.1, &v));
  CU_OK(clt_sub_(w, v));
  clt_tensor_release(t);
  clt_tensor_release(u);
  clt_tensor_release(v);
}

static void transposed(clt_tensor *w, clt_tensor *g) { /* w += 2 * w^T: not in place */
  clt_tensor *wt, *t;
  (void)g;
  CU_OK(clt_transpose(w, 0, 1, &wt));
  CU_OK(clt_mul_scalar(wt, 2.0, &t));
  CU_OK(clt_add_(w, t));
  clt_tensor_release(wt);
  clt_tensor_release(t);
}

static void held(clt_tensor *w, clt_tensor *g) { /* c = 3 w held; w += 2 g; then c is read */
  clt_tensor *c, *t;
  CU_OK(clt_mul_scalar(w, 3.0, &c));
  CU_OK(clt_mul_scalar(g, 2.0, &t));
  CU_OK(clt_add_(w, t));
  float *cv = cu_read(c), *gv = cu_read(g), *wv = cu_read(w);
  for (int i = 0; i < 16; i++) { /* w is now w0 + 2 g: c must be 3 w0 */
    float w0 = wv[i] - 2.0f * gv[i];
    ck_assert_msg(fabsf(cv[i] - 3.0f * w0) <= 1e-5f, "c[%d] = %g, expected %g", i, cv[i],
                  3.0f * w0);
  }
  free(cv);
  free(gv);
  free(wv);
  clt_tensor_release(c);
  clt_tensor_release(t);
}

/* In-place and _out forms continue a deferred chain in the same kernel (w -= lr * g is one
 * kernel), read what they overwrite only in place, and leave the rest of the memory alone. */
START_TEST(test_lazy_into) {
  /* the host, deferring these small tensors too */
  clt_device *h = clt_cpu();
  int64_t host_min = clt__lazy_host_min(1);
  same_both_ways(sgd, h, 33, 31, "cpu: w -= 0.1 g", 1, 2);
  same_both_ways(decay, h, 33, 31, "cpu: w -= 0.1 (g + 0.01 w)", 1, 4);
  same_both_ways(transposed, h, 17, 17, "cpu: w += 2 w^T", -1, 0);
  same_both_ways(held, h, 4, 4, "cpu: c = 3 w held while w changes", -1, 0);
  clt__lazy_host_min(host_min);
  if (!cu_need_cl("test_lazy_into", 1))
    return;
  clt_device *d = clt_device_at(0);
  same_both_ways(sgd, d, 33, 31, "w -= 0.1 g", 1, 2);
  same_both_ways(decay, d, 33, 31, "w -= 0.1 (g + 0.01 w)", 1, 4);
  same_both_ways(transposed, d, 17, 17, "w += 2 w^T", -1, 0);
  same_both_ways(held, d, 4, 4, "c = 3 w held while w changes", -1, 0);
  /* _out into a view at an offset: the rest of the tensor is untouched */
  clt_tensor *big = filled(d, 100, 0, 1), *part, *a = filled(d, 10, 1, 1), *t;
  CU_OK(clt_narrow(big, 0, 40, 10, &part));
  CU_OK(clt_exp(a, &t));
  CU_OK(clt_add_out(t, a, part));
  float *v = cu_read(big);
  for (int i = 0; i < 100; i++) {
    float want = i >= 40 && i < 50 ? expf((float)(i - 39)) + (float)(i - 39) : (float)i;
    ck_assert_msg(fabsf(v[i] - want) <= 1e-5f * fabsf(want) + 1e-6f, "big[%d] = %g, expected %g", i,
                  v[i], want);
  }
  free(v);
  RELEASE(big, part, a, t);
}
END_TEST

/* Threads building chains over shared leaves and reading them. */
typedef struct lazy_job {
  clt_tensor *a, *b;
  int id, bad;
} lazy_job;

static void *lazy_worker(void *arg) {
  lazy_job *j = arg;
  for (int it = 0; it < 40; it++) {
    clt_tensor *t, *u, *w;
    if (clt_mul_scalar(j->a, (double)j->id, &t) != CLT_OK || clt_add(t, j->b, &u) != CLT_OK ||
        clt_sub(u, j->a, &w) != CLT_OK) {
      j->bad++;
      return NULL;
    }
    clt_tensor_release(t);
    clt_tensor_release(u);
    float v[256];
    if (clt_tensor_read(w, v, sizeof v) != CLT_OK)
      j->bad++;
    for (int i = 0; i < 256; i++)
      if (v[i] != ((float)i * (float)j->id + 2.0f) - (float)i)
        j->bad++;
    clt_tensor_release(w);
  }
  return NULL;
}

START_TEST(test_lazy_threads) {
  if (!cu_need_cl("test_lazy_threads", 1))
    return;
  clt_device *d = clt_device_at(0);
  if (cu_is_oclgrind(d)) {
    cu_skip("test_lazy_threads", "Oclgrind is not thread-safe");
    return;
  }
  clt_tensor *a = filled(d, 256, 0, 1), *b = filled(d, 256, 2, 0);
  pthread_t th[4];
  lazy_job jobs[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (lazy_job){a, b, i + 1, 0};
    ck_assert_int_eq(pthread_create(&th[i], NULL, lazy_worker, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    ck_assert_msg(jobs[i].bad == 0, "thread %d: %d wrong", i, jobs[i].bad);
  }
  clt_tensor_release(a);
  clt_tensor_release(b);
}
END_TEST

Suite *lazy_suite(void);
Suite *lazy_suite(void) {
  Suite *s = suite_create("lazy");
  TCase *tc = cu_tcase("fusion");
  tcase_add_test(tc, test_lazy_bit_identical);
  tcase_add_test(tc, test_lazy_host_streaming);
  tcase_add_test(tc, test_lazy_integer_bit_identical);
  tcase_add_test(tc, test_lazy_half_bit_identical);
  tcase_add_test(tc, test_lazy_leaf_written_later);
  tcase_add_test(tc, test_lazy_result_written_later);
  tcase_add_test(tc, test_lazy_host_pointer);
  tcase_add_test(tc, test_lazy_views_of_deferred);
  tcase_add_test(tc, test_lazy_what_forces);
  tcase_add_test(tc, test_lazy_errors_at_the_call);
  tcase_add_test(tc, test_lazy_long_chain);
  tcase_add_test(tc, test_lazy_what_is_deferred);
  tcase_add_test(tc, test_lazy_build_error_at_the_read);
  tcase_add_test(tc, test_lazy_background_build);
  tcase_add_test(tc, test_lazy_into);
  tcase_add_test(tc, test_lazy_threads);
  suite_add_tcase(s, tc);
  return s;
}
