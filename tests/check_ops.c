/* SPDX-License-Identifier: MIT */
/* check_ops.c - pow, maximum, minimum, the comparisons, the unary functions, cast and where, and
 * the _out, in-place and _scalar forms, on every device against oracles computed here from the
 * rules in clt.h ("Operations"), and each device's result against the cpu's.
 *
 * Every OpenCL kernel configuration (op, operand dtypes) costs a program build of ~50 ms even
 * from PoCL's cache, so the checks repeated over many configurations (comparisons of mixed
 * dtypes, math functions of integer input) run on cpu and on one OpenCL device in turn
 * (dev_share); everything else runs on every device.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check_util.h"

/* ---- the operations under test ------------------------------------------------------------ */

typedef clt_status (*bin_fn)(clt_tensor *, clt_tensor *, clt_tensor **);
typedef clt_status (*bin_out_fn)(clt_tensor *, clt_tensor *, clt_tensor *);
typedef clt_status (*bin_scalar_fn)(clt_tensor *, double, clt_tensor **);
typedef clt_status (*un_fn)(clt_tensor *, clt_tensor **);

enum { B_POW, B_MAX, B_MIN, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE, B_ADD, B_SUB, B_MUL, B_DIV, NBIN };
static const struct {
  const char *name;
  bin_fn f;
  bin_out_fn out;
  bin_scalar_fn scalar;
} bops[NBIN] = {
    {"clt_pow", clt_pow, clt_pow_out, clt_pow_scalar},
    {"clt_maximum", clt_maximum, clt_maximum_out, clt_maximum_scalar},
    {"clt_minimum", clt_minimum, clt_minimum_out, clt_minimum_scalar},
    {"clt_eq", clt_eq, clt_eq_out, clt_eq_scalar},
    {"clt_ne", clt_ne, clt_ne_out, clt_ne_scalar},
    {"clt_lt", clt_lt, clt_lt_out, clt_lt_scalar},
    {"clt_le", clt_le, clt_le_out, clt_le_scalar},
    {"clt_gt", clt_gt, clt_gt_out, clt_gt_scalar},
    {"clt_ge", clt_ge, clt_ge_out, clt_ge_scalar},
    {"clt_add", clt_add, clt_add_out, clt_add_scalar},
    {"clt_sub", clt_sub, clt_sub_out, clt_sub_scalar},
    {"clt_mul", clt_mul, clt_mul_out, clt_mul_scalar},
    {"clt_div", clt_div, clt_div_out, clt_div_scalar},
};
static int is_cmp(int op) { return op >= B_EQ && op <= B_GE; }

enum { U_NEG, U_ABS, U_RELU, U_EXP, U_LOG, U_SQRT, U_SIN, U_COS, U_TANH, U_SIGMOID, NUN };
static const struct {
  const char *name;
  un_fn f;
} uops[NUN] = {{"clt_neg", clt_neg},        {"clt_abs", clt_abs}, {"clt_relu", clt_relu},
               {"clt_exp", clt_exp},        {"clt_log", clt_log}, {"clt_sqrt", clt_sqrt},
               {"clt_sin", clt_sin},        {"clt_cos", clt_cos}, {"clt_tanh", clt_tanh},
               {"clt_sigmoid", clt_sigmoid}};

/* Tolerances of transcendental results (pow and the math functions), relative plus a small
 * absolute part for results near 0; everything else must match exactly. */
#define RTOL_F32 2e-6
#define RTOL_F64 1e-12
#define ATOL_F32 1e-7
#define ATOL_F64 1e-15
static double trtol(clt_dtype dt) { return dt == CLT_F32 ? RTOL_F32 : RTOL_F64; }
static double tatol(clt_dtype dt) { return dt == CLT_F32 ? ATOL_F32 : ATOL_F64; }

#define ALL_DEVS (~0u)

/* cpu and one OpenCL device, round robin over k. */
static unsigned dev_share(int k) {
  int ncl = clt_device_count();
  if (ncl <= 0)
    return 1u;
  if (ncl > CU_MAX_DEVICES - 1)
    ncl = CU_MAX_DEVICES - 1;
  return 1u | (1u << (1 + (k % ncl)));
}

static const clt_dtype all_dt[CLT_DTYPE_COUNT] = {CLT_F32, CLT_F64,  CLT_I32, CLT_I64,
                                                  CLT_U8,  CLT_BOOL, CLT_F16, CLT_BF16};

/* ---- the oracle: clt.h's rules, written out independently --------------------------------- */

/* Promotion as clt.h states it: float beats integer and bool, f64 beats f32 beats f16 and
 * bf16, f16 with bf16 is f32 (as in PyTorch), the wider integer wins, u8 with i32 is i32, bool
 * gives way to anything. Rows and columns in enum order. */
static clt_dtype promote_dt(clt_dtype a, clt_dtype b) {
#define F32 CLT_F32
#define F64 CLT_F64
#define I32 CLT_I32
#define I64 CLT_I64
#define U8 CLT_U8
#define BL CLT_BOOL
#define F16 CLT_F16
#define BF CLT_BF16
  static const clt_dtype t[8][8] = {
      /*          f32  f64  i32  i64  u8   bool f16  bf16 */
      /* f32 */ {F32, F64, F32, F32, F32, F32, F32, F32},
      /* f64 */ {F64, F64, F64, F64, F64, F64, F64, F64},
      /* i32 */ {F32, F64, I32, I64, I32, I32, F16, BF},
      /* i64 */ {F32, F64, I64, I64, I64, I64, F16, BF},
      /* u8  */ {F32, F64, I32, I64, U8, U8, F16, BF},
      /* bool*/ {F32, F64, I32, I64, U8, BL, F16, BF},
      /* f16 */ {F32, F64, F16, F16, F16, F16, F16, F32},
      /* bf16*/ {F32, F64, BF, BF, BF, BF, F32, BF},
  };
#undef F32
#undef F64
#undef I32
#undef I64
#undef U8
#undef BL
#undef F16
#undef BF
  return t[a][b];
}

/* The result dtype of binary op on a and b; *ct receives the dtype it computes in. */
static clt_dtype bin_result_dt(int op, clt_dtype a, clt_dtype b, clt_dtype *ct) {
  clt_dtype p = promote_dt(a, b);
  *ct = p;
  if (is_cmp(op))
    return CLT_BOOL;
  if (op == B_DIV && !cu_is_float(p))
    *ct = CLT_F32;
  return *ct;
}

/* v wrapped around to the integer dtype dt (two's complement), 0/1 for bool. */
static int64_t wrap_int(clt_dtype dt, uint64_t v) {
  switch (dt) {
  case CLT_I32:
    return (int32_t)(uint32_t)v;
  case CLT_U8:
    return (uint8_t)v;
  case CLT_BOOL:
    return v != 0;
  default:
    return (int64_t)v;
  }
}

/* An element in the compute dtype: f for floats (already rounded to f32 for f32), i otherwise. */
typedef struct num {
  double f;
  int64_t i;
} num;

static num get_as(const void *buf, clt_dtype dt, int64_t i, clt_dtype ct) {
  num r = {0.0, 0};
  if (cu_is_float(ct)) {
    if (cu_is_float(dt)) {
      r.f = cu_get(buf, dt, i);
    } else {
      int64_t v = cu_get_i64(buf, dt, i);
      r.f = ct == CLT_F32 ? (double)(float)v : (double)v; /* int64 to float in one rounding */
    }
    if (ct == CLT_F32)
      r.f = (double)(float)r.f;
  } else {
    r.i = cu_get_i64(buf, dt, i);
  }
  return r;
}

/* Integer power in wrapping arithmetic, by repeated multiplication; a negative exponent gives
 * 0 unless the base is 1 or -1. */
static int64_t oracle_ipow(clt_dtype dt, int64_t a, int64_t b) {
  if (b < 0)
    return a == 1 ? 1 : a == -1 ? ((b % 2) ? -1 : 1) : 0;
  uint64_t r = 1;
  for (int64_t k = 0; k < b; k++)
    r *= (uint64_t)a;
  return wrap_int(dt, r);
}

/* Element i of the result of op over a[ia] and b[ib], stored into want (dtype rt). */
static void bin_oracle(int op, clt_dtype ct, clt_dtype rt, const void *a, clt_dtype da, int64_t ia,
                       const void *b, clt_dtype db, int64_t ib, void *want, int64_t i) {
  num x = get_as(a, da, ia, ct), y = get_as(b, db, ib, ct);
  if (cu_is_float(ct)) {
    double p = x.f, q = y.f, r = 0;
    int c = 0;
    switch (op) {
    case B_POW:
      r = pow(p, q);
      break;
    case B_MAX:
      r = (isnan(p) || isnan(q)) ? NAN : p > q ? p : q;
      break;
    case B_MIN:
      r = (isnan(p) || isnan(q)) ? NAN : p < q ? p : q;
      break;
    case B_EQ:
      c = p == q;
      break;
    case B_NE:
      c = p != q;
      break;
    case B_LT:
      c = p < q;
      break;
    case B_LE:
      c = p <= q;
      break;
    case B_GT:
      c = p > q;
      break;
    case B_GE:
      c = p >= q;
      break;
    case B_ADD:
      r = p + q;
      break;
    case B_SUB:
      r = p - q;
      break;
    case B_MUL:
      r = p * q;
      break;
    case B_DIV:
      r = p / q;
      break;
    }
    if (is_cmp(op))
      cu_set_i64(want, CLT_BOOL, i, c);
    else
      cu_set(want, rt, i, r); /* one rounding from double: the IEEE f32 result of + - * / */
    return;
  }
  int64_t p = x.i, q = y.i, r = 0;
  uint64_t up = (uint64_t)p, uq = (uint64_t)q;
  switch (op) {
  case B_POW:
    r = oracle_ipow(ct, p, q);
    break;
  case B_MAX:
    r = ct == CLT_BOOL ? (p || q) : p > q ? p : q;
    break;
  case B_MIN:
    r = ct == CLT_BOOL ? (p && q) : p < q ? p : q;
    break;
  case B_EQ:
    r = p == q;
    break;
  case B_NE:
    r = p != q;
    break;
  case B_LT:
    r = p < q;
    break;
  case B_LE:
    r = p <= q;
    break;
  case B_GT:
    r = p > q;
    break;
  case B_GE:
    r = p >= q;
    break;
  case B_ADD:
    r = ct == CLT_BOOL ? (p || q) : wrap_int(ct, up + uq);
    break;
  case B_SUB:
    r = wrap_int(ct, up - uq);
    break;
  case B_MUL:
    r = ct == CLT_BOOL ? (p && q) : wrap_int(ct, up * uq);
    break;
  default:
    ck_abort_msg("bin_oracle: op %d in integer dtype %s", op, cu_dt_name(ct));
  }
  cu_set_i64(want, rt, i, r);
}

/* The whole result of op over a (na, sa) and b (nb, sb), broadcast: malloc'ed, with its dtype
 * and shape. */
static void *bin_want(int op, clt_dtype da, const void *a, int na, const int64_t *sa, clt_dtype db,
                      const void *b, int nb, const int64_t *sb, clt_dtype *rt, int *no,
                      int64_t *os) {
  clt_dtype ct;
  *rt = bin_result_dt(op, da, db, &ct);
  *no = cu_broadcast(na, sa, nb, sb, os);
  ck_assert_int_ge(*no, 0);
  int64_t n = cu_numel(*no, os);
  void *want = cu_malloc((size_t)n * clt_dtype_size(*rt));
  for (int64_t i = 0; i < n; i++)
    bin_oracle(op, ct, *rt, a, da, cu_bindex(i, *no, os, na, sa), b, db,
               cu_bindex(i, *no, os, nb, sb), want, i);
  return want;
}

/* ---- comparing results -------------------------------------------------------------------- */

/* Element i of g matches element i of w (dtype dt): integers and bool exactly; floats exactly
 * (sign of zero included, NaN matching NaN) when rtol and atol are 0, else within tolerance. */
static int elem_match(const void *g, const void *w, clt_dtype dt, int64_t i, double rtol,
                      double atol) {
  if (!cu_is_float(dt))
    return cu_get_i64(g, dt, i) == cu_get_i64(w, dt, i);
  double x = cu_get(g, dt, i), y = cu_get(w, dt, i);
  if (isnan(x) || isnan(y))
    return isnan(x) && isnan(y);
  if (rtol == 0 && atol == 0)
    return x == y && !signbit(x) == !signbit(y);
  return cu_close(x, y, rtol, atol);
}

static int64_t first_mismatch(const void *g, const void *w, clt_dtype dt, int64_t n, double rtol,
                              double atol) {
  for (int64_t i = 0; i < n; i++)
    if (!elem_match(g, w, dt, i, rtol, atol))
      return i;
  return -1;
}

/* Element i as text. */
static const char *fmt_elem(char *buf, size_t size, const void *p, clt_dtype dt, int64_t i) {
  if (cu_is_float(dt))
    snprintf(buf, size, dt == CLT_F64 ? "%.17g" : "%.9g", cu_get(p, dt, i));
  else
    snprintf(buf, size, "%lld", (long long)cu_get_i64(p, dt, i));
  return buf;
}

/* Asserts t has this dtype, device and shape and holds want (within rtol, atol). */
static void expect_tensor(const clt_tensor *t, clt_dtype dt, clt_device *dev, int nd,
                          const int64_t *shape, const void *want, double rtol, double atol,
                          const char *what) {
  cu_assert_meta(t, dt, dev, nd, shape, what);
  int64_t n = cu_numel(nd, shape);
  void *got = cu_read(t);
  int64_t bad = first_mismatch(got, want, dt, n, rtol, atol);
  char g[48], w[48];
  if (bad >= 0)
    ck_abort_msg("%s: element %lld is %s, expected %s", what, (long long)bad,
                 fmt_elem(g, sizeof g, got, dt, bad), fmt_elem(w, sizeof w, want, dt, bad));
  free(got);
}

/* Reads t (any device) and asserts its elements equal the n elements at want (dtype dt). */
static void expect_unchanged(const clt_tensor *t, const void *want, size_t bytes,
                             const char *what) {
  void *got = cu_read(t);
  ck_assert_msg(memcmp(got, want, bytes) == 0, "%s: the tensor changed", what);
  free(got);
}

/* ---- a binary op on every device ----------------------------------------------------------- */

/* Runs op(a, b) on the devices in devmask (bit d: device d of cu_devices; cpu always), checks
 * the result's dtype, device and shape, its values against the oracle and against the cpu's
 * result (within rtol, atol; exactly when both are 0). */
static void run_binary(int op, clt_dtype da, const void *a, int na, const int64_t *sa, clt_dtype db,
                       const void *b, int nb, const int64_t *sb, double rtol, double atol,
                       unsigned devmask) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  clt_dtype rt;
  int no;
  int64_t os[CLT_MAX_DIMS];
  void *want = bin_want(op, da, a, na, sa, db, b, nb, sb, &rt, &no, os);
  int64_t n = cu_numel(no, os);
  void *ref = NULL;
  for (int d = 0; d < ndev; d++) {
    if (d > 0 && !((devmask >> d) & 1u))
      continue;
    if (!cu_dtype_ok(bops[op].name, devs[d], da) || !cu_dtype_ok(bops[op].name, devs[d], db))
      continue;
    char what[128];
    snprintf(what, sizeof what, "%s(%s %d-d, %s %d-d) on %s", bops[op].name, cu_dt_name(da), na,
             cu_dt_name(db), nb, cu_dev_name(devs[d]));
    clt_tensor *ta = cu_tensor(a, da, na, sa, devs[d]);
    clt_tensor *tb = cu_tensor(b, db, nb, sb, devs[d]);
    clt_tensor *out = CU_SENTINEL;
    clt_status s = bops[op].f(ta, tb, &out);
    ck_assert_msg(s == CLT_OK, "%s: %s: %s", what, clt_status_name(s), clt_last_error());
    cu_assert_meta(out, rt, devs[d], no, os, what);
    void *got = cu_read(out);
    int64_t bad = first_mismatch(got, want, rt, n, rtol, atol);
    char x[48], y[48], g[48], w[48];
    if (bad >= 0) {
      int64_t ia = cu_bindex(bad, no, os, na, sa), ib = cu_bindex(bad, no, os, nb, sb);
      ck_abort_msg("%s: element %lld: (%s, %s) gave %s, expected %s", what, (long long)bad,
                   fmt_elem(x, sizeof x, a, da, ia), fmt_elem(y, sizeof y, b, db, ib),
                   fmt_elem(g, sizeof g, got, rt, bad), fmt_elem(w, sizeof w, want, rt, bad));
    }
    if (d == 0) {
      ref = got;
    } else {
      bad = ref ? first_mismatch(got, ref, rt, n, rtol, atol) : -1;
      if (bad >= 0)
        ck_abort_msg("%s: element %lld is %s, cpu gave %s", what, (long long)bad,
                     fmt_elem(g, sizeof g, got, rt, bad), fmt_elem(w, sizeof w, ref, rt, bad));
      free(got);
    }
    clt_tensor_release(out);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
  }
  free(ref);
  free(want);
}

/* ---- pow ------------------------------------------------------------------------------------ */

START_TEST(test_pow) {
  enum { N = 64 };
  static const double fa[] = {2, 4, 1.5, 10, 0.5, 7.25, 3, 9},
                      fb[] = {0.5, -0.5, 0, 3, -2, 1, 2, -1};
  static const int64_t ia[] = {1, -1, -1, 2, -2, 0, 0, 3, 2, 2, -3, 5, -1, 7, -7, 3, -2, 1},
                       ib[] = {-5, -3, -4, -1, -2, -1, 0, 40, 31, 32, 3, 0, 0, -1, 1, 19, 63, 64};
  static const int64_t ua[] = {3, 2, 3, 0, 255, 1, 2, 0, 9, 16},
                       ub[] = {5, 8, 7, 0, 2, 200, 7, 3, 0, 2};
  int64_t shape[1] = {N};
  cu_rng r;
  cu_rng_seed(&r, 501);
  for (int k = 0; k < CLT_DTYPE_COUNT; k++) {
    clt_dtype dt = all_dt[k];
    size_t es = clt_dtype_size(dt);
    void *a = cu_malloc(N * es), *b = cu_malloc(N * es);
    size_t ns = 0;
    if (cu_is_float(dt)) { /* positive bases */
      cu_fill(a, dt, N, &r, 0.05, 8, 0);
      cu_fill(b, dt, N, &r, -3.5, 3.5, 0);
      for (ns = 0; ns < sizeof fa / sizeof fa[0]; ns++) {
        cu_set(a, dt, (int64_t)ns, fa[ns]);
        cu_set(b, dt, (int64_t)ns, fb[ns]);
      }
    } else if (dt == CLT_U8) {
      cu_fill(a, dt, N, &r, 0, 9, 0);
      cu_fill(b, dt, N, &r, 0, 9, 0);
      for (ns = 0; ns < sizeof ua / sizeof ua[0]; ns++) {
        cu_set_i64(a, dt, (int64_t)ns, ua[ns]);
        cu_set_i64(b, dt, (int64_t)ns, ub[ns]);
      }
    } else if (dt != CLT_BOOL) { /* small bases, exponents from -3 up; some wrap around */
      cu_fill(a, dt, N, &r, -7, 7, 0);
      cu_fill(b, dt, N, &r, -3, dt == CLT_I32 ? 12 : 25, 0);
      for (ns = 0; ns < sizeof ia / sizeof ia[0]; ns++) {
        cu_set_i64(a, dt, (int64_t)ns, ia[ns]);
        cu_set_i64(b, dt, (int64_t)ns, ib[ns]);
      }
    }
    if (dt == CLT_BOOL) {
      clt_device *devs[CU_MAX_DEVICES];
      int ndev = cu_devices(devs);
      cu_fill(a, dt, N, &r, 0, 1, 0);
      for (int d = 0; d < ndev; d++) {
        clt_tensor *t = cu_tensor(a, dt, 1, shape, devs[d]), *out = CU_SENTINEL;
        CU_FAILS(clt_pow(t, t, &out), CLT_ERR_DTYPE, "clt_pow");
        ck_assert_ptr_eq(out, CU_SENTINEL);
        clt_tensor_release(t);
      }
    } else {
      int tr = cu_is_float(dt);
      run_binary(B_POW, dt, a, 1, shape, dt, b, 1, shape, tr ? trtol(dt) : 0, tr ? tatol(dt) : 0,
                 ALL_DEVS);
    }
    free(a);
    free(b);
  }
  /* Mixed: i32 ** f32 is f32; u8 ** i32 computes in i32 (2 ** -1 is 0, 1 ** -3 is 1). */
  int32_t ia32[N], ib32[N];
  float fb32[N];
  uint8_t ua8[N];
  cu_fill(ia32, CLT_I32, N, &r, 1, 9, 0);
  cu_fill(fb32, CLT_F32, N, &r, -2, 2, 0);
  run_binary(B_POW, CLT_I32, ia32, 1, shape, CLT_F32, fb32, 1, shape, RTOL_F32, ATOL_F32, ALL_DEVS);
  cu_fill(ua8, CLT_U8, N, &r, 0, 6, 0);
  cu_fill(ib32, CLT_I32, N, &r, -2, 5, 0);
  ua8[0] = 2, ib32[0] = -1, ua8[1] = 1, ib32[1] = -3;
  run_binary(B_POW, CLT_U8, ua8, 1, shape, CLT_I32, ib32, 1, shape, 0, 0, ALL_DEVS);
}
END_TEST

/* ---- maximum, minimum ----------------------------------------------------------------------- */

START_TEST(test_minmax) {
  int op = _i ? B_MIN : B_MAX;
  enum { N = 50 };
  int64_t shape[1] = {N};
  cu_rng r;
  cu_rng_seed(&r, 600 + (uint64_t)_i);
  for (int k = 0; k < CLT_DTYPE_COUNT; k++) {
    clt_dtype dt = all_dt[k];
    size_t es = clt_dtype_size(dt);
    void *a = cu_malloc(N * es), *b = cu_malloc(N * es);
    double lo = dt == CLT_I32 ? -2e9 : dt == CLT_I64 ? -4.6e18 : dt == CLT_U8 ? 0 : -100;
    double hi = dt == CLT_I32 ? 2e9 : dt == CLT_I64 ? 4.6e18 : dt == CLT_U8 ? 255 : 100;
    cu_fill(a, dt, N, &r, lo, hi, 0);
    cu_fill(b, dt, N, &r, lo, hi, 0);
    if (cu_is_float(dt)) { /* NaN on either side or both; infinities; a tie */
      cu_set(a, dt, 0, NAN), cu_set(b, dt, 0, 1.0);
      cu_set(a, dt, 1, 1.0), cu_set(b, dt, 1, NAN);
      cu_set(a, dt, 2, NAN), cu_set(b, dt, 2, NAN);
      cu_set(a, dt, 3, INFINITY), cu_set(b, dt, 4, -INFINITY);
      cu_set(a, dt, 5, 3.5), cu_set(b, dt, 5, 3.5);
    }
    run_binary(op, dt, a, 1, shape, dt, b, 1, shape, 0, 0, ALL_DEVS);
    free(a);
    free(b);
  }
  /* The NaN rule by value: maximum(NaN, 1) and maximum(1, NaN) are NaN on every device. */
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  float x[2] = {NAN, 1.0f}, y[2] = {1.0f, NAN};
  int64_t two[1] = {2};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *tx = cu_tensor(x, CLT_F32, 1, two, devs[d]);
    clt_tensor *ty = cu_tensor(y, CLT_F32, 1, two, devs[d]);
    clt_tensor *out = NULL;
    CU_OK(bops[op].f(tx, ty, &out));
    float g[2];
    CU_OK(clt_tensor_read(out, g, sizeof g));
    ck_assert_msg(isnan(g[0]) && isnan(g[1]), "%s(NaN, 1), %s(1, NaN) on %s gave %g, %g",
                  bops[op].name, bops[op].name, cu_dev_name(devs[d]), (double)g[0], (double)g[1]);
    clt_tensor_release(out);
    clt_tensor_release(tx);
    clt_tensor_release(ty);
  }
  /* Mixed dtypes promote. */
  static const struct {
    clt_dtype a, b;
    double alo, ahi, blo, bhi;
  } mixed[] = {{CLT_I32, CLT_F32, -1000, 1000, -1000, 1000},
               {CLT_U8, CLT_I64, 0, 255, -300, 300},
               {CLT_BOOL, CLT_U8, 0, 1, 0, 3},
               {CLT_F32, CLT_F64, -10, 10, -10, 10}};
  for (int m = 0; m < 4; m++) {
    void *a = cu_malloc(N * 8), *b = cu_malloc(N * 8);
    cu_fill(a, mixed[m].a, N, &r, mixed[m].alo, mixed[m].ahi, 0);
    cu_fill(b, mixed[m].b, N, &r, mixed[m].blo, mixed[m].bhi, 0);
    run_binary(op, mixed[m].a, a, 1, shape, mixed[m].b, b, 1, shape, 0, 0, dev_share(m));
    free(a);
    free(b);
  }
}
END_TEST

/* ---- comparisons ---------------------------------------------------------------------------- */

/* Values in a small common range so that every comparison is sometimes true and sometimes
 * false: integers -4..4 (u8 0..8), floats also halves (and NaN first, if with_nan). */
static void fill_small(void *buf, clt_dtype dt, int64_t n, cu_rng *r, int with_nan) {
  for (int64_t i = 0; i < n; i++) {
    int64_t k = (int64_t)(cu_rng_next(r) % 9) - 4;
    if (dt == CLT_U8)
      k += 4;
    if (dt == CLT_BOOL)
      k = (int64_t)(cu_rng_next(r) & 1);
    if (cu_is_float(dt))
      cu_set(buf, dt, i,
             i == 0 && with_nan ? NAN : (double)k + ((cu_rng_next(r) % 3) == 0 ? 0.5 : 0.0));
    else
      cu_set_i64(buf, dt, i, k);
  }
}

/* One comparison (the loop index), every pair of dtypes. Same-dtype pairs run on every device;
 * each mixed pair runs this op on cpu and, for one op in six, on an OpenCL device. */
START_TEST(test_compare) {
  int op = B_EQ + _i;
  enum { N = 40 };
  int64_t shape[1] = {N};
  cu_rng r;
  cu_rng_seed(&r, 700); /* the same data for every op */
  int p = 0;
  for (int i = 0; i < CLT_DTYPE_COUNT; i++) {
    for (int j = 0; j < CLT_DTYPE_COUNT; j++) {
      clt_dtype da = all_dt[i], db = all_dt[j];
      void *a = cu_malloc(N * 8), *b = cu_malloc(N * 8);
      fill_small(a, da, N, &r, 1);
      fill_small(b, db, N, &r, 1);
      unsigned mask = 1u;
      if (i == j)
        mask = ALL_DEVS;
      else if (p++ % 6 == _i)
        mask = dev_share(p / 6);
      run_binary(op, da, a, 1, shape, db, b, 1, shape, 0, 0, mask);
      free(a);
      free(b);
    }
  }
}
END_TEST

/* Mixed comparisons compute in the promoted dtype: written-out answers. */
START_TEST(test_compare_promotion) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  /* i32 vs f32 compares in f32: 16777217 rounds to 16777216 (in f64 they would differ). */
  static const int32_t i32a[4] = {16777217, 16777216, -16777217, 3};
  static const float f32b[4] = {16777216.0f, 16777216.0f, -16777216.0f, 3.5f};
  static const uint8_t eq1[4] = {1, 1, 1, 0}, gt1[4] = {0, 0, 0, 0};
  /* u8 vs i32 compares in i32: 200 is not -56 (it would be in u8). */
  static const uint8_t u8a[4] = {200, 0, 255, 7};
  static const int32_t i32b[4] = {-56, 256, -1, 7};
  static const uint8_t eq2[4] = {0, 0, 0, 1}, gt2[4] = {1, 0, 1, 0};
  /* i64 vs f64 compares in f64: 2^53 + 1 rounds to 2^53. */
  static const int64_t i64a[4] = {9007199254740993LL, 9007199254740992LL, -5, 1};
  static const double f64b[4] = {9007199254740992.0, 9007199254740993.0, -4.5, 0.5};
  static const uint8_t eq3[4] = {1, 1, 0, 0}, gt3[4] = {0, 0, 0, 1};
  /* bool vs f32: true is 1. */
  static const uint8_t ba[4] = {1, 1, 0, 0};
  static const float f32c[4] = {0.5f, 1.0f, -0.5f, 0.0f};
  static const uint8_t eq4[4] = {0, 1, 0, 1}, gt4[4] = {1, 0, 1, 0};
  /* bool vs u8: true is 1. */
  static const uint8_t u8c[4] = {1, 2, 0, 1};
  static const uint8_t eq5[4] = {1, 0, 1, 0}, gt5[4] = {0, 0, 0, 0};
  static const struct {
    clt_dtype da, db;
    const void *a, *b;
    const uint8_t *eq, *gt;
  } cases[] = {{CLT_I32, CLT_F32, i32a, f32b, eq1, gt1},
               {CLT_U8, CLT_I32, u8a, i32b, eq2, gt2},
               {CLT_I64, CLT_F64, i64a, f64b, eq3, gt3},
               {CLT_BOOL, CLT_F32, ba, f32c, eq4, gt4},
               {CLT_BOOL, CLT_U8, ba, u8c, eq5, gt5}};
  int64_t four[1] = {4};
  for (int c = 0; c < 5; c++) {
    for (int d = 0; d < ndev; d++) {
      if (!cu_dtype_ok("test_compare_promotion", devs[d], cases[c].db))
        continue;
      clt_tensor *ta = cu_tensor(cases[c].a, cases[c].da, 1, four, devs[d]);
      clt_tensor *tb = cu_tensor(cases[c].b, cases[c].db, 1, four, devs[d]);
      for (int k = 0; k < 2; k++) {
        int op = k ? B_GT : B_EQ;
        const uint8_t *want = k ? cases[c].gt : cases[c].eq;
        char what[96];
        snprintf(what, sizeof what, "%s(%s, %s) on %s", bops[op].name, cu_dt_name(cases[c].da),
                 cu_dt_name(cases[c].db), cu_dev_name(devs[d]));
        clt_tensor *out = NULL;
        CU_OK(bops[op].f(ta, tb, &out));
        expect_tensor(out, CLT_BOOL, devs[d], 1, four, want, 0, 0, what);
        clt_tensor_release(out);
      }
      clt_tensor_release(ta);
      clt_tensor_release(tb);
    }
  }
}
END_TEST

/* Comparisons broadcast: {2, 3} with {3}, {3} with {2, 3}, {2, 3} with 0-d and 0-d with {2, 3},
 * {2, 1} with {1, 3}; same and mixed dtypes, every device. */
START_TEST(test_compare_broadcast) {
  static const int64_t s23[2] = {2, 3}, s3[1] = {3}, s21[2] = {2, 1}, s13[2] = {1, 3};
  static const struct {
    int na;
    const int64_t *sa;
    int nb;
    const int64_t *sb;
  } shapes[] = {
      {2, s23, 1, s3}, {1, s3, 2, s23}, {2, s23, 0, NULL}, {0, NULL, 2, s23}, {2, s21, 2, s13}};
  static const struct {
    clt_dtype a, b;
  } pairs[] = {{CLT_F32, CLT_F32}, {CLT_I32, CLT_F32}, {CLT_U8, CLT_I32}};
  cu_rng r;
  cu_rng_seed(&r, 800);
  for (int s = 0; s < 5; s++) {
    for (int p = 0; p < 3; p++) {
      void *a = cu_malloc(6 * 8), *b = cu_malloc(6 * 8);
      fill_small(a, pairs[p].a, 6, &r, 0);
      fill_small(b, pairs[p].b, 6, &r, 0);
      int op = B_EQ + (s * 3 + p) % 6;
      run_binary(op, pairs[p].a, a, shapes[s].na, shapes[s].sa, pairs[p].b, b, shapes[s].nb,
                 shapes[s].sb, 0, 0, ALL_DEVS);
      free(a);
      free(b);
    }
  }
}
END_TEST

/* ---- unary: neg, abs, relu (exact) ----------------------------------------------------------- */

/* The oracle of neg, abs and relu for element i of a (dtype dt), into want. */
static void exact_unary_oracle(int op, clt_dtype dt, const void *a, int64_t i, void *want) {
  if (cu_is_float(dt)) {
    double x = cu_get(a, dt, i);
    /* relu is maximum(x, 0): -0 gives +0 (docs/operations.md, "Values C leaves undefined") */
    double y = op == U_NEG ? -x : op == U_ABS ? fabs(x) : isnan(x) ? x : x > 0 ? x : 0.0;
    cu_set(want, dt, i, y);
    return;
  }
  int64_t x = cu_get_i64(a, dt, i);
  uint64_t ux = (uint64_t)x;
  int64_t y;
  if (op == U_NEG)
    y = wrap_int(dt, 0 - ux);
  else if (op == U_ABS)
    y = x < 0 ? wrap_int(dt, 0 - ux) : x;
  else
    y = x < 0 ? 0 : x;
  cu_set_i64(want, dt, i, y);
}

START_TEST(test_unary_exact) {
  int op = U_NEG + _i; /* neg, abs, relu */
  enum { N = 48 };
  static const double fsp[] = {NAN, INFINITY, -INFINITY, 1.5, -2.25, 1e30, -1e-30, 7};
  static const int64_t isp[] = {INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, -1,
                                0,         1,         255,       128,       -128};
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[2] = {6, 8};
  cu_rng r;
  cu_rng_seed(&r, 900 + (uint64_t)_i);
  for (int k = 0; k < CLT_DTYPE_COUNT; k++) {
    clt_dtype dt = all_dt[k];
    size_t es = clt_dtype_size(dt);
    void *a = cu_malloc(N * es), *want = cu_malloc(N * es);
    if (cu_is_float(dt)) {
      cu_fill(a, dt, N, &r, -100, 100, CU_NONZERO);
      for (int s = 0; s < 8; s++)
        cu_set(a, dt, s, fsp[s]);
    } else if (dt == CLT_BOOL) {
      cu_fill(a, dt, N, &r, 0, 1, 0);
    } else {
      double lo = dt == CLT_U8 ? 0 : dt == CLT_I32 ? -2.1e9 : -4.6e18;
      double hi = dt == CLT_U8 ? 255 : dt == CLT_I32 ? 2.1e9 : 4.6e18;
      cu_fill(a, dt, N, &r, lo, hi, CU_NONZERO);
      for (int s = 0; s < 10; s++) /* wraps to the dtype: INT64_MIN gives 0 in i32 and u8 */
        cu_set_i64(a, dt, s, isp[s]);
    }
    void *ref = NULL;
    for (int d = 0; d < ndev; d++) {
      if (!cu_dtype_ok(uops[op].name, devs[d], dt))
        continue;
      char what[96];
      snprintf(what, sizeof what, "%s(%s) on %s", uops[op].name, cu_dt_name(dt),
               cu_dev_name(devs[d]));
      clt_tensor *t = cu_tensor(a, dt, 2, shape, devs[d]), *out = CU_SENTINEL;
      if (dt == CLT_BOOL) { /* neg, abs and relu refuse bool */
        CU_FAILS(uops[op].f(t, &out), CLT_ERR_DTYPE, uops[op].name);
        ck_assert_msg(out == CU_SENTINEL, "%s changed out", what);
        ck_assert_msg(strstr(clt_last_error(), "bool") != NULL, "%s: message: %s", what,
                      clt_last_error());
        clt_tensor_release(t);
        continue;
      }
      CU_OK(uops[op].f(t, &out));
      for (int64_t i = 0; i < N; i++)
        exact_unary_oracle(op, dt, a, i, want);
      expect_tensor(out, dt, devs[d], 2, shape, want, 0, 0, what);
      void *got = cu_read(out);
      if (!ref)
        ref = got;
      else {
        ck_assert_msg(memcmp(got, ref, N * es) == 0, "%s: differs from cpu", what);
        free(got);
      }
      expect_unchanged(t, a, N * es, what);
      clt_tensor_release(out);
      clt_tensor_release(t);
    }
    free(ref);
    free(a);
    free(want);
  }
  /* Named cases, every device. */
  int64_t three[1] = {3};
  for (int d = 0; d < ndev; d++) {
    const char *dn = cu_dev_name(devs[d]);
    int32_t i3[3] = {INT32_MIN, -7, 7}, g3[3];
    clt_tensor *t = cu_tensor(i3, CLT_I32, 1, three, devs[d]), *out = NULL;
    CU_OK(uops[op].f(t, &out));
    CU_OK(clt_tensor_read(out, g3, sizeof g3));
    if (op == U_ABS)
      ck_assert_msg(g3[0] == INT32_MIN && g3[1] == 7 && g3[2] == 7,
                    "abs(INT32_MIN, -7, 7) on %s gave %d, %d, %d (INT32_MIN wraps to itself)", dn,
                    g3[0], g3[1], g3[2]);
    if (op == U_NEG)
      ck_assert_msg(g3[0] == INT32_MIN && g3[1] == 7 && g3[2] == -7,
                    "neg(INT32_MIN, -7, 7) on %s gave %d, %d, %d", dn, g3[0], g3[1], g3[2]);
    if (op == U_RELU)
      ck_assert_msg(g3[0] == 0 && g3[1] == 0 && g3[2] == 7,
                    "relu(INT32_MIN, -7, 7) on %s: %d %d %d", dn, g3[0], g3[1], g3[2]);
    clt_tensor_release(out);
    clt_tensor_release(t);
    float f3[3] = {NAN, -2.5f, 2.5f}, h3[3];
    t = cu_tensor(f3, CLT_F32, 1, three, devs[d]);
    CU_OK(uops[op].f(t, &out));
    CU_OK(clt_tensor_read(out, h3, sizeof h3));
    float w1 = op == U_NEG ? 2.5f : op == U_ABS ? 2.5f : 0.0f;
    float w2 = op == U_NEG ? -2.5f : 2.5f;
    ck_assert_msg(isnan(h3[0]) && h3[1] == w1 && h3[2] == w2, "%s(NaN, -2.5, 2.5) on %s: %g %g %g",
                  uops[op].name, dn, (double)h3[0], (double)h3[1], (double)h3[2]);
    clt_tensor_release(out);
    clt_tensor_release(t);
    uint8_t u3[3] = {1, 200, 0}, v3[3];
    t = cu_tensor(u3, CLT_U8, 1, three, devs[d]);
    CU_OK(uops[op].f(t, &out));
    CU_OK(clt_tensor_read(out, v3, sizeof v3));
    if (op == U_NEG)
      ck_assert_msg(v3[0] == 255 && v3[1] == 56 && v3[2] == 0, "neg(u8 1, 200, 0) on %s: %d %d %d",
                    dn, v3[0], v3[1], v3[2]);
    else
      ck_assert_msg(v3[0] == 1 && v3[1] == 200 && v3[2] == 0, "%s(u8 1, 200, 0) on %s: %d %d %d",
                    uops[op].name, dn, v3[0], v3[1], v3[2]);
    clt_tensor_release(out);
    clt_tensor_release(t);
  }
}
END_TEST

/* ---- unary math: exp, log, sqrt, sin, cos, tanh, sigmoid ------------------------------------- */

static double math_oracle(int op, double x) {
  switch (op) {
  case U_EXP:
    return exp(x);
  case U_LOG:
    return log(x);
  case U_SQRT:
    return sqrt(x);
  case U_SIN:
    return sin(x);
  case U_COS:
    return cos(x);
  case U_TANH:
    return tanh(x);
  default:
    return 1.0 / (1.0 + exp(-x));
  }
}

/* One function (the loop index) on every input dtype: floats keep their dtype (every device),
 * integers and bool give f32 (cpu and, in turn, one OpenCL device). */
START_TEST(test_unary_math) {
  int op = U_EXP + _i;
  enum { N = 64 };
  /* input ranges per function: floats, then integers (u8 clipped to 0..255) */
  static const double flo[] = {-10, 0.01, 0, -10, -10, -5, -12},
                      fhi[] = {10, 100, 100, 10, 10, 5, 12};
  static const double ilo[] = {-20, 1, 0, -100, -100, -6, -20},
                      ihi[] = {20, 1000, 10000, 100, 100, 6, 20};
  /* specials (floats): values where the function is exact or special */
  static const double sp[][4] = {{0, 100, -100, 1},
                                 {0, -1, 1, INFINITY},
                                 {-1, 0, 4, INFINITY},
                                 {0, 3.14159265358979, -1e-3, 1e-5},
                                 {0, 3.14159265358979, 1.5707963267949, -1e-3},
                                 {0, 20, -20, 1e-4},
                                 {0, -100, 100, 1e-3}};
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[1] = {N};
  cu_rng r;
  cu_rng_seed(&r, 1000 + (uint64_t)_i);
  for (int k = 0; k < CLT_DTYPE_COUNT; k++) {
    clt_dtype dt = all_dt[k];
    clt_dtype rt = cu_is_float(dt) ? dt : CLT_F32;
    size_t es = clt_dtype_size(dt);
    void *a = cu_malloc(N * es), *want = cu_malloc(N * clt_dtype_size(rt));
    int f = op - U_EXP;
    if (cu_is_float(dt)) {
      cu_fill(a, dt, N, &r, flo[f], fhi[f], CU_NONZERO);
      for (int s = 0; s < 4; s++)
        cu_set(a, dt, s, sp[f][s]);
      if (op == U_LOG || op == U_SQRT)
        cu_set(a, dt, 4, NAN);
    } else if (dt == CLT_BOOL) {
      cu_fill(a, dt, N, &r, 0, 1, 0);
      cu_set_i64(a, dt, 0, 0), cu_set_i64(a, dt, 1, 1);
    } else {
      double lo = ilo[f], hi = ihi[f];
      if (dt == CLT_U8) {
        lo = lo < 0 ? 0 : lo;
        hi = hi > 255 ? 255 : hi;
        if (op == U_EXP)
          hi = 80;
      }
      cu_fill(a, dt, N, &r, lo, hi, 0);
    }
    for (int64_t i = 0; i < N; i++) {
      double x = cu_is_float(dt) ? cu_get(a, dt, i) : (double)(float)cu_get_i64(a, dt, i);
      cu_set(want, rt, i, math_oracle(op, x));
    }
    double rtol = trtol(rt), atol = tatol(rt);
    unsigned mask = cu_is_float(dt) ? ALL_DEVS : dev_share(k + _i);
    void *ref = NULL;
    for (int d = 0; d < ndev; d++) {
      if (d > 0 && !((mask >> d) & 1u))
        continue;
      if (!cu_dtype_ok(uops[op].name, devs[d], dt))
        continue;
      char what[96];
      snprintf(what, sizeof what, "%s(%s) on %s", uops[op].name, cu_dt_name(dt),
               cu_dev_name(devs[d]));
      clt_tensor *t = cu_tensor(a, dt, 1, shape, devs[d]), *out = CU_SENTINEL;
      CU_OK(uops[op].f(t, &out));
      cu_assert_meta(out, rt, devs[d], 1, shape, what);
      void *got = cu_read(out);
      char x[48], g[48], w[48];
      int64_t bad = first_mismatch(got, want, rt, N, rtol, atol);
      if (bad >= 0)
        ck_abort_msg("%s: element %lld: f(%s) gave %s, expected %s", what, (long long)bad,
                     fmt_elem(x, sizeof x, a, dt, bad), fmt_elem(g, sizeof g, got, rt, bad),
                     fmt_elem(w, sizeof w, want, rt, bad));
      if (!ref) {
        ref = got;
      } else {
        bad = first_mismatch(got, ref, rt, N, rtol, atol);
        if (bad >= 0)
          ck_abort_msg("%s: element %lld: f(%s) gave %s, cpu gave %s", what, (long long)bad,
                       fmt_elem(x, sizeof x, a, dt, bad), fmt_elem(g, sizeof g, got, rt, bad),
                       fmt_elem(w, sizeof w, ref, rt, bad));
        free(got);
      }
      clt_tensor_release(out);
      clt_tensor_release(t);
    }
    free(ref);
    free(a);
    free(want);
  }
}
END_TEST

/* bool is refused by neg, abs, relu, sub and pow (also in the _out and in-place forms), with a
 * message naming the function; the out-parameter and the operands are untouched. */
START_TEST(test_bool_refused) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  uint8_t v[4] = {1, 0, 1, 1};
  int64_t four[1] = {4};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *t = cu_tensor(v, CLT_BOOL, 1, four, devs[d]), *o = NULL, *out;
    CU_OK(clt_zeros(CLT_BOOL, 1, four, devs[d], &o));
    for (int op = U_NEG; op <= U_RELU; op++) {
      out = CU_SENTINEL;
      CU_FAILS(uops[op].f(t, &out), CLT_ERR_DTYPE, uops[op].name);
      ck_assert_ptr_eq(out, CU_SENTINEL);
    }
    out = CU_SENTINEL;
    CU_FAILS(clt_sub(t, t, &out), CLT_ERR_DTYPE, "clt_sub");
    ck_assert_ptr_eq(out, CU_SENTINEL);
    CU_FAILS(clt_pow(t, t, &out), CLT_ERR_DTYPE, "clt_pow");
    ck_assert_ptr_eq(out, CU_SENTINEL);
    CU_FAILS(clt_sub_out(t, t, o), CLT_ERR_DTYPE, "clt_sub_out");
    CU_FAILS(clt_pow_out(t, t, o), CLT_ERR_DTYPE, "clt_pow_out");
    CU_FAILS(clt_sub_(t, t), CLT_ERR_DTYPE, "clt_sub_");
    uint8_t zero[4] = {0, 0, 0, 0};
    expect_unchanged(o, zero, 4, "bool out after refused sub_out/pow_out");
    expect_unchanged(t, v, 4, "bool a after refused sub_");
    /* The math functions take bool (as 0 and 1) and give f32; bool with an integer is fine. */
    CU_OK(clt_exp(t, &out));
    const float E = 2.718281828459045f;
    float e[4] = {E, 1.0f, E, E};
    expect_tensor(out, CLT_F32, devs[d], 1, four, e, RTOL_F32, ATOL_F32, "clt_exp(bool)");
    clt_tensor_release(out);
    int32_t seven[4] = {7, 7, 7, 7};
    clt_tensor *s = cu_tensor(seven, CLT_I32, 1, four, devs[d]);
    CU_OK(clt_sub(t, s, &out));
    int32_t diff[4] = {-6, -7, -6, -6};
    expect_tensor(out, CLT_I32, devs[d], 1, four, diff, 0, 0, "clt_sub(bool, i32)");
    clt_tensor_release(out);
    clt_tensor_release(s);
    clt_tensor_release(o);
    clt_tensor_release(t);
  }
}
END_TEST

/* ---- cast ----------------------------------------------------------------------------------- */

/* Element i of src (dtype from) cast to `to`, into want: floats truncate toward zero and
 * saturate (NaN gives 0), integers wrap, anything is != 0 as bool, bool is 0 or 1. */
static void cast_oracle(const void *src, clt_dtype from, int64_t i, clt_dtype to, void *want) {
  if (cu_is_float(from)) {
    double v = cu_get(src, from, i);
    switch (to) {
    case CLT_F32:
      ((float *)want)[i] = (float)v;
      return;
    case CLT_F64:
      ((double *)want)[i] = v;
      return;
    case CLT_BOOL:
      ((uint8_t *)want)[i] = v != 0;
      return;
    case CLT_I32:
      ((int32_t *)want)[i] = isnan(v)                   ? 0
                             : trunc(v) < -2147483648.0 ? INT32_MIN
                             : trunc(v) > 2147483647.0  ? INT32_MAX
                                                        : (int32_t)trunc(v);
      return;
    case CLT_I64:
      ((int64_t *)want)[i] = isnan(v)                            ? 0
                             : trunc(v) < -9223372036854775808.0 ? INT64_MIN
                             : trunc(v) >= 9223372036854775808.0 ? INT64_MAX
                                                                 : (int64_t)trunc(v);
      return;
    case CLT_U8:
      ((uint8_t *)want)[i] = isnan(v)         ? 0
                             : trunc(v) < 0   ? 0
                             : trunc(v) > 255 ? 255
                                              : (uint8_t)trunc(v);
      return;
    case CLT_F16:
    case CLT_BF16: /* through f32, as PyTorch */
      ((uint16_t *)want)[i] = cu_narrow_bits((double)(float)v, to);
      return;
    }
  }
  int64_t v = cu_get_i64(src, from, i);
  switch (to) {
  case CLT_F32:
    ((float *)want)[i] = (float)v;
    return;
  case CLT_F64:
    ((double *)want)[i] = (double)v;
    return;
  case CLT_I32:
    ((int32_t *)want)[i] = (int32_t)wrap_int(CLT_I32, (uint64_t)v);
    return;
  case CLT_I64:
    ((int64_t *)want)[i] = v;
    return;
  case CLT_U8:
    ((uint8_t *)want)[i] = (uint8_t)wrap_int(CLT_U8, (uint64_t)v);
    return;
  case CLT_BOOL:
    ((uint8_t *)want)[i] = v != 0;
    return;
  case CLT_F16:
  case CLT_BF16:
    ((uint16_t *)want)[i] = cu_narrow_bits((double)(float)v, to);
    return;
  }
}

/* Cast from one dtype (the loop index) to every dtype, every device: against the oracle,
 * identical to the cpu's result, and the examples of clt.h by value. */
START_TEST(test_cast) {
  clt_dtype from = all_dt[_i];
  enum { N = 96 };
  static const double fsp[] = {3.7,
                               -3.7,
                               1e10,
                               -1e10,
                               -5.0,
                               300.0,
                               NAN,
                               0.0,
                               -0.0,
                               0.5,
                               -0.5,
                               0.9999,
                               -0.9999,
                               255.0,
                               255.9,
                               256.0,
                               -1.0,
                               127.0,
                               128.5,
                               2147483520.0,
                               2147483647.0,
                               2147483648.0,
                               -2147483648.0,
                               -2147483648.9,
                               -2147483649.0,
                               -2147483904.0,
                               3e9,
                               4294967296.0,
                               1e19,
                               -1e19,
                               9.2e18,
                               INFINITY,
                               -INFINITY,
                               16777217.0,
                               1e300,
                               0.1,
                               9223372036854775807.0,
                               -9223372036854775808.0,
                               9223372036854774784.0,
                               -0.999,
                               1e-3,
                               65535.5};
  static const int64_t isp[] = {0,
                                1,
                                -1,
                                5,
                                255,
                                256,
                                257,
                                -256,
                                127,
                                128,
                                -129,
                                300,
                                -5,
                                INT32_MAX,
                                INT32_MIN,
                                16777217,
                                -16777217,
                                65535,
                                (INT64_C(1) << 32) + 5,
                                -(INT64_C(1) << 32) + 7,
                                4294967295LL,
                                2147483648LL,
                                -2147483649LL,
                                INT64_MAX,
                                INT64_MIN,
                                (INT64_C(1) << 53) + 1,
                                -(INT64_C(1) << 53) - 1,
                                (INT64_C(1) << 24) + 1};
  const size_t nfs = sizeof fsp / sizeof fsp[0], nis = sizeof isp / sizeof isp[0];
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[2] = {8, 12};
  cu_rng r;
  cu_rng_seed(&r, 1100 + (uint64_t)_i);
  void *src = cu_malloc(N * 8);
  if (cu_is_float(from)) {
    cu_fill(src, from, N, &r, -400, 400, CU_NONZERO);
    cu_fill((char *)src + 64 * clt_dtype_size(from), from, N - 64, &r, -5e9, 5e9, 0);
    for (size_t s = 0; s < nfs; s++)
      cu_set(src, from, (int64_t)s, fsp[s]);
  } else if (from == CLT_BOOL) {
    cu_fill(src, from, N, &r, 0, 1, 0);
    cu_set_i64(src, from, 0, 0), cu_set_i64(src, from, 1, 1);
  } else {
    double lo = from == CLT_U8 ? 0 : from == CLT_I32 ? -2147483648.0 : -4.6e18;
    double hi = from == CLT_U8 ? 255 : from == CLT_I32 ? 2147483647.0 : 4.6e18;
    cu_fill(src, from, N, &r, lo, hi, 0);
    for (size_t s = 0; s < nis; s++) /* wrapped into the dtype by cu_set_i64 */
      cu_set_i64(src, from, (int64_t)s, isp[s]);
  }
  for (int j = 0; j < CLT_DTYPE_COUNT; j++) {
    clt_dtype to = all_dt[j];
    size_t es = clt_dtype_size(to);
    void *want = cu_malloc(N * es), *ref = NULL;
    for (int64_t i = 0; i < N; i++)
      cast_oracle(src, from, i, to, want);
    for (int d = 0; d < ndev; d++) {
      if (!cu_dtype_ok("test_cast", devs[d], from) || !cu_dtype_ok("test_cast", devs[d], to))
        continue;
      char what[96];
      snprintf(what, sizeof what, "clt_cast(%s -> %s) on %s", cu_dt_name(from), cu_dt_name(to),
               cu_dev_name(devs[d]));
      clt_tensor *t = cu_tensor(src, from, 2, shape, devs[d]), *out = CU_SENTINEL;
      CU_OK(clt_cast(t, to, &out));
      ck_assert_msg(out != t, "%s: not a new tensor", what);
      cu_assert_meta(out, to, devs[d], 2, shape, what);
      void *got = cu_read(out);
      int64_t bad = first_mismatch(got, want, to, N, 0, 0);
      char x[48], g[48], w[48];
      if (bad >= 0)
        ck_abort_msg("%s: element %lld: %s gave %s, expected %s", what, (long long)bad,
                     fmt_elem(x, sizeof x, src, from, bad), fmt_elem(g, sizeof g, got, to, bad),
                     fmt_elem(w, sizeof w, want, to, bad));
      if (!ref) {
        ref = got;
      } else {
        bad = first_mismatch(got, ref, to, N, 0, 0);
        if (bad >= 0)
          ck_abort_msg("%s: element %lld: %s gave %s, cpu gave %s", what, (long long)bad,
                       fmt_elem(x, sizeof x, src, from, bad), fmt_elem(g, sizeof g, got, to, bad),
                       fmt_elem(w, sizeof w, ref, to, bad));
        free(got);
      }
      /* clt.h's examples by value (indices into fsp / isp above). */
      void *v = cu_read(out);
      bool wide = from == CLT_F32 || from == CLT_F64; /* f16 and bf16 cannot hold 1e10 */
      if (wide && to == CLT_I32) {
        const int32_t *o = v;
        ck_assert_msg(o[0] == 3 && o[1] == -3, "%s: 3.7, -3.7 gave %d, %d", what, o[0], o[1]);
        ck_assert_msg(o[2] == INT32_MAX && o[3] == INT32_MIN, "%s: 1e10, -1e10 gave %d, %d", what,
                      o[2], o[3]);
        ck_assert_msg(o[6] == 0, "%s: NaN gave %d", what, o[6]);
      }
      if (wide && to == CLT_U8) {
        const uint8_t *o = v;
        ck_assert_msg(o[4] == 0 && o[5] == 255 && o[14] == 255 && o[6] == 0,
                      "%s: -5, 300, 255.9, NaN gave %d, %d, %d, %d", what, o[4], o[5], o[14], o[6]);
      }
      if (wide && to == CLT_I64) {
        const int64_t *o = v;
        ck_assert_msg(o[2] == 10000000000LL && o[28] == INT64_MAX && o[29] == INT64_MIN &&
                          o[6] == 0,
                      "%s: 1e10, 1e19, -1e19, NaN gave %lld, %lld, %lld, %lld", what,
                      (long long)o[2], (long long)o[28], (long long)o[29], (long long)o[6]);
      }
      if (cu_is_float(from) && to == CLT_BOOL) {
        const uint8_t *o = v;
        ck_assert_msg(o[0] == 1 && o[7] == 0 && o[8] == 0 && o[9] == 1 && o[6] == 1,
                      "%s: 3.7, 0, -0, 0.5, NaN gave %d %d %d %d %d", what, o[0], o[7], o[8], o[9],
                      o[6]);
      }
      if (from == CLT_I64 && to == CLT_I32) {
        const int32_t *o = v;
        ck_assert_msg(o[18] == 5 && o[19] == 7, "%s: 2^32 + 5, -2^32 + 7 gave %d, %d", what, o[18],
                      o[19]);
      }
      if (!cu_is_float(from) && from != CLT_BOOL && to == CLT_BOOL) {
        const uint8_t *o = v;
        ck_assert_msg(o[0] == 0 && o[1] == 1 && o[2] == 1, "%s: 0, 1, -1 gave %d, %d, %d", what,
                      o[0], o[1], o[2]);
      }
      if (from == CLT_BOOL && to != CLT_BOOL) {
        ck_assert_msg(cu_get(v, to, 0) == 0.0 && cu_get(v, to, 1) == 1.0,
                      "%s: false, true gave %g, %g", what, cu_get(v, to, 0), cu_get(v, to, 1));
      }
      free(v);
      expect_unchanged(t, src, N * clt_dtype_size(from), what);
      clt_tensor_release(out);
      clt_tensor_release(t);
    }
    free(ref);
    free(want);
  }
  /* A dtype that is not one: refused, out untouched. */
  clt_tensor *t = cu_tensor(src, from, 2, shape, clt_cpu()), *out = CU_SENTINEL;
  CU_FAILS(clt_cast(t, (clt_dtype)42, &out), CLT_ERR_INVALID_ARGUMENT, "clt_cast");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  clt_tensor_release(t);
  free(src);
}
END_TEST

/* ---- where ---------------------------------------------------------------------------------- */

/* docs/operations.md, "Values C leaves undefined": one row per rule, with the results written
 * out by hand (not taken from the host), the same on every device. Oclgrind's
 * convert_int_sat_rtz gave INT_MIN for NaN on cl:0 before the rule was made explicit in the
 * kernels. */
typedef struct undefined_case {
  const char *what;
  clt_dtype in, out;
  int op; /* 0 cast, 1 div (a / b), 2 abs, 3 neg, 4 add, 5 mul, 6 pow, 7 maximum, 8 minimum,
           * 9 clamp(a, a, b), 10 relu */
  double a[4], b[4];
  double want[4]; /* compared bit for bit after conversion to out's dtype (NaN: any NaN) */
} undefined_case;

static const undefined_case undefined_cases[] = {
    {"f32 NaN, inf, out of range -> i32", CLT_F32, CLT_I32, 0, {NAN, INFINITY, -3e9, -2.75},
     {0}, {0, 2147483647.0, -2147483648.0, -2}},
    {"f64 NaN, -inf, 3e9 -> i32", CLT_F64, CLT_I32, 0, {NAN, -INFINITY, 3e9, 2.999},
     {0}, {0, -2147483648.0, 2147483647.0, 2}},
    {"f32 NaN, 1e19, -1e19 -> i64", CLT_F32, CLT_I64, 0, {NAN, 1e19, -1e19, -0.5},
     {0}, {0, 9223372036854775807.0, -9223372036854775808.0, 0}},
    {"f64 NaN, -1, 300, 255.9 -> u8", CLT_F64, CLT_U8, 0, {NAN, -1, 300, 255.9},
     {0}, {0, 0, 255, 255}},
    {"f32 NaN, -0, 0.25 -> bool", CLT_F32, CLT_BOOL, 0, {NAN, -0.0, 0.25, 0}, {0}, {1, 0, 1, 0}},
    {"i64 -> i32 wraps", CLT_I64, CLT_I32, 0, {4294967301.0, -2147483649.0, 2147483648.0, -1},
     {0}, {5, 2147483647.0, -2147483648.0, -1}},
    {"i32 -> u8 wraps", CLT_I32, CLT_U8, 0, {-1, 256, 511, -255}, {0}, {255, 0, 255, 1}},
    {"i32 division by zero is true division", CLT_I32, CLT_F32, 1, {1, -1, 0, 7}, {0, 0, 0, 2},
     {INFINITY, -INFINITY, NAN, 3.5}},
    {"abs wraps at INT32_MIN", CLT_I32, CLT_I32, 2, {-2147483648.0, -5, 5, 0}, {0},
     {-2147483648.0, 5, 5, 0}},
    {"neg wraps at INT32_MIN", CLT_I32, CLT_I32, 3, {-2147483648.0, -5, 5, 0}, {0},
     {-2147483648.0, 5, -5, 0}},
    {"i32 add wraps", CLT_I32, CLT_I32, 4, {2147483647.0, -2147483648.0, 1, 0}, {1, -1, 1, 0},
     {-2147483648.0, 2147483647.0, 2, 0}},
    {"i32 mul wraps", CLT_I32, CLT_I32, 5, {65536, 65537, -65536, 3}, {65536, 65537, 32768, 3},
     {0, 131073, -2147483648.0, 9}},
    {"i32 pow with negative exponents", CLT_I32, CLT_I32, 6, {2, -1, 1, -1}, {-1, -3, -7, -2},
     {0, -1, 1, 1}},
    {"f32 maximum of signed zeros", CLT_F32, CLT_F32, 7, {-0.0, 0.0, -0.0, 1}, {0.0, -0.0, -0.0, -1},
     {0.0, 0.0, -0.0, 1}},
    {"f64 minimum of signed zeros", CLT_F64, CLT_F64, 8, {-0.0, 0.0, 0.0, 1}, {0.0, -0.0, 0.0, -1},
     {-0.0, -0.0, 0.0, -1}},
    {"f64 clamp(a, a, b) of signed zeros", CLT_F64, CLT_F64, 9, {-0.0, 0.0, -0.0, 2},
     {0.0, -0.0, -0.0, 1}, {-0.0, -0.0, -0.0, 1}},
    {"f16 maximum of signed zeros", CLT_F16, CLT_F16, 7, {-0.0, 0.0, -0.0, 1}, {0.0, -0.0, -0.0, -1},
     {0.0, 0.0, -0.0, 1}},
    {"f32 relu of -0 is +0, NaN stays", CLT_F32, CLT_F32, 10, {-0.0, 0.0, -2, NAN}, {0},
     {0.0, 0.0, 0.0, NAN}},
};

START_TEST(test_undefined_values) {
  const undefined_case *c = &undefined_cases[_i];
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[1] = {4};
  size_t ie = clt_dtype_size(c->in), oe = clt_dtype_size(c->out);
  void *a = cu_malloc(4 * ie), *b = cu_malloc(4 * ie), *want = cu_malloc(4 * oe);
  for (int k = 0; k < 4; k++) {
    cu_set(a, c->in, k, c->a[k]);
    cu_set(b, c->in, k, c->b[k]);
    if (c->out == CLT_I64 && fabs(c->want[k]) >= 9.2e18) /* 2^63 does not convert to i64 */
      cu_set_i64(want, c->out, k, c->want[k] > 0 ? INT64_MAX : INT64_MIN);
    else
      cu_set(want, c->out, k, c->want[k]);
  }
  for (int d = 0; d < ndev; d++) {
    if (!cu_dtype_ok("test_undefined_values", devs[d], c->in))
      continue;
    clt_tensor *ta = cu_tensor(a, c->in, 1, shape, devs[d]);
    clt_tensor *tb = cu_tensor(b, c->in, 1, shape, devs[d]), *out = NULL;
    switch (c->op) {
    case 0: CU_OK(clt_cast(ta, c->out, &out)); break;
    case 1: CU_OK(clt_div(ta, tb, &out)); break;
    case 2: CU_OK(clt_abs(ta, &out)); break;
    case 3: CU_OK(clt_neg(ta, &out)); break;
    case 4: CU_OK(clt_add(ta, tb, &out)); break;
    case 5: CU_OK(clt_mul(ta, tb, &out)); break;
    case 6: CU_OK(clt_pow(ta, tb, &out)); break;
    case 7: CU_OK(clt_maximum(ta, tb, &out)); break;
    case 8: CU_OK(clt_minimum(ta, tb, &out)); break;
    case 10: CU_OK(clt_relu(ta, &out)); break;
    default: CU_OK(clt_clamp(ta, ta, tb, &out)); break;
    }
    ck_assert_int_eq(clt_tensor_dtype(out), c->out);
    unsigned char got[32];
    CU_OK(clt_tensor_read(out, got, 4 * oe));
    for (int k = 0; k < 4; k++) {
      int nan_ok = c->out == CLT_F32 && isnan(c->want[k]) && isnan(((float *)got)[k]);
      ck_assert_msg(nan_ok || memcmp(got + k * oe, (unsigned char *)want + k * oe, oe) == 0,
                    "%s on %s: element %d gave %.17g, expected %.17g", c->what,
                    cu_dev_name(devs[d]), k, cu_get(got, c->out, k), c->want[k]);
    }
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(out);
  }
  free(a);
  free(b);
  free(want);
}
END_TEST

START_TEST(test_where) {
  static const int64_t s23[2] = {2, 3}, s3[1] = {3}, s21[2] = {2, 1}, s415[3] = {4, 1, 5},
                       s131[3] = {1, 3, 1}, s5[1] = {5};
  static const struct {
    int nk, na, nb;
    const int64_t *sk, *sa, *sb;
  } shapes[] = {{2, 1, 0, s23, s3, NULL},
                {1, 2, 2, s3, s21, s23},
                {0, 2, 1, NULL, s23, s3},
                {3, 3, 1, s415, s131, s5}};
  static const struct {
    clt_dtype a, b, r;
  } dts[] = {{CLT_I32, CLT_F32, CLT_F32},    {CLT_F64, CLT_F64, CLT_F64},
             {CLT_I64, CLT_U8, CLT_I64},     {CLT_U8, CLT_I32, CLT_I32},
             {CLT_BOOL, CLT_BOOL, CLT_BOOL}, {CLT_BOOL, CLT_F32, CLT_F32},
             {CLT_F32, CLT_F64, CLT_F64},    {CLT_U8, CLT_U8, CLT_U8}};
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  cu_rng r;
  cu_rng_seed(&r, 1200);
  for (int c = 0; c < 8; c++) {
    clt_dtype da = dts[c].a, db = dts[c].b, rt = promote_dt(da, db);
    ck_assert_int_eq(rt, dts[c].r); /* the table above agrees with the oracle's promotion */
    for (int s = 0; s < 4; s++) {
      int nk = shapes[s].nk, na = shapes[s].na, nb = shapes[s].nb;
      const int64_t *sk = shapes[s].sk, *sa = shapes[s].sa, *sb = shapes[s].sb;
      int64_t ska[CLT_MAX_DIMS], os[CLT_MAX_DIMS];
      int nka = cu_broadcast(nk, sk, na, sa, ska);
      int no = cu_broadcast(nka, ska, nb, sb, os);
      ck_assert_int_ge(no, 0);
      int64_t n = cu_numel(no, os), nkn = cu_numel(nk, sk), nan_ = cu_numel(na, sa),
              nbn = cu_numel(nb, sb);
      uint8_t *k = cu_malloc((size_t)nkn);
      void *a = cu_malloc((size_t)nan_ * 8), *b = cu_malloc((size_t)nbn * 8);
      cu_fill(k, CLT_BOOL, nkn, &r, 0, 1, 0);
      if (nkn > 1)
        k[0] = 1, k[1] = 0; /* both branches taken */
      else
        k[0] = (uint8_t)(c & 1);
      /* a positive, b negative (u8: a 1..50, b 100..200), so that the branch shows */
      cu_fill(a, da, nan_, &r, 1, 50, 0);
      cu_fill(b, db, nbn, &r, db == CLT_U8 ? 100 : -50, db == CLT_U8 ? 200 : -1, 0);
      void *want = cu_malloc((size_t)n * clt_dtype_size(rt));
      for (int64_t i = 0; i < n; i++) {
        int64_t ik = cu_bindex(i, no, os, nk, sk), ia = cu_bindex(i, no, os, na, sa),
                ib = cu_bindex(i, no, os, nb, sb);
        num v = k[ik] ? get_as(a, da, ia, rt) : get_as(b, db, ib, rt);
        if (cu_is_float(rt))
          cu_set(want, rt, i, v.f);
        else
          cu_set_i64(want, rt, i, v.i);
      }
      void *ref = NULL;
      for (int d = 0; d < ndev; d++) {
        if (!cu_dtype_ok("test_where", devs[d], da) || !cu_dtype_ok("test_where", devs[d], db))
          continue;
        char what[128];
        snprintf(what, sizeof what, "clt_where(bool %d-d, %s %d-d, %s %d-d) on %s", nk,
                 cu_dt_name(da), na, cu_dt_name(db), nb, cu_dev_name(devs[d]));
        clt_tensor *tk = cu_tensor(k, CLT_BOOL, nk, sk, devs[d]);
        clt_tensor *ta = cu_tensor(a, da, na, sa, devs[d]);
        clt_tensor *tb = cu_tensor(b, db, nb, sb, devs[d]);
        clt_tensor *out = CU_SENTINEL;
        CU_OK(clt_where(tk, ta, tb, &out));
        expect_tensor(out, rt, devs[d], no, os, want, 0, 0, what);
        void *got = cu_read(out);
        if (!ref) {
          ref = got;
        } else {
          ck_assert_msg(memcmp(got, ref, (size_t)n * clt_dtype_size(rt)) == 0,
                        "%s: differs from cpu", what);
          free(got);
        }
        clt_tensor_release(out);
        clt_tensor_release(tk);
        clt_tensor_release(ta);
        clt_tensor_release(tb);
      }
      free(ref);
      free(want);
      free(k);
      free(a);
      free(b);
    }
  }
}
END_TEST

START_TEST(test_where_errors) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t three[1] = {3}, four[1] = {4};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *a = NULL, *b = NULL, *k = NULL, *k4 = NULL, *out;
    CU_OK(clt_full(CLT_F32, 1, three, 1.0, devs[d], &a));
    CU_OK(clt_full(CLT_F32, 1, three, 2.0, devs[d], &b));
    CU_OK(clt_ones(CLT_BOOL, 1, three, devs[d], &k));
    CU_OK(clt_ones(CLT_BOOL, 1, four, devs[d], &k4));
    for (int j = 0; j < CLT_DTYPE_COUNT; j++) { /* a condition that is not bool */
      if (all_dt[j] == CLT_BOOL)
        continue;
      clt_tensor *nk = NULL;
      CU_OK(clt_ones(all_dt[j], 1, three, devs[d], &nk));
      out = CU_SENTINEL;
      CU_FAILS(clt_where(nk, a, b, &out), CLT_ERR_DTYPE, "clt_where");
      ck_assert_ptr_eq(out, CU_SENTINEL);
      clt_tensor_release(nk);
    }
    out = CU_SENTINEL;
    CU_FAILS(clt_where(k4, a, b, &out), CLT_ERR_SHAPE_MISMATCH, "clt_where");
    ck_assert_ptr_eq(out, CU_SENTINEL);
    CU_FAILS(clt_where(NULL, a, b, &out), CLT_ERR_INVALID_ARGUMENT, "clt_where");
    CU_FAILS(clt_where(k, a, b, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_where");
    ck_assert_ptr_eq(out, CU_SENTINEL);
    /* Each of the three on another device: the standard message names the positions. */
    for (int e = 0; e < ndev; e++) {
      if (e == d)
        continue;
      clt_tensor *x = NULL;
      CU_OK(clt_to(k, devs[e], &x));
      clt_tensor *y = NULL;
      CU_OK(clt_to(a, devs[e], &y));
      for (int pos = 1; pos <= 3; pos++) {
        clt_tensor *args[3] = {k, a, b};
        args[pos - 1] = pos == 1 ? x : y; /* the condition, or an f32 operand, elsewhere */
        out = CU_SENTINEL;
        clt_status s = clt_where(args[0], args[1], args[2], &out);
        ck_assert_msg(s == CLT_ERR_DEVICE_MISMATCH, "clt_where with argument %d on %s gave %s", pos,
                      cu_dev_name(devs[e]), clt_status_name(s));
        ck_assert_int_eq(clt_last_status(), CLT_ERR_DEVICE_MISMATCH);
        ck_assert_ptr_eq(out, CU_SENTINEL);
        char want[256];
        snprintf(want, sizeof want,
                 "clt_where: expected all tensors on the same device, but found %s (argument 1) "
                 "and %s (argument %d); copy one with clt_to()",
                 cu_dev_name(pos == 1 ? devs[e] : devs[d]),
                 cu_dev_name(pos == 1 ? devs[d] : devs[e]), pos == 1 ? 2 : pos);
        ck_assert_str_eq(clt_last_error(), want);
      }
      clt_tensor_release(x);
      clt_tensor_release(y);
    }
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(k);
    clt_tensor_release(k4);
  }
}
END_TEST

/* ---- _out forms ----------------------------------------------------------------------------- */

/* A tensor of dtype dt filled with a marker value that no result here has. */
static clt_tensor *marked(clt_dtype dt, int nd, const int64_t *shape, clt_device *dev) {
  clt_tensor *t = NULL;
  CU_OK(clt_full(dt, nd, shape, dt == CLT_BOOL ? 1.0 : dt == CLT_U8 ? 123.0 : -777.0, dev, &t));
  return t;
}

START_TEST(test_out) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t s23[2] = {2, 3}, s3[1] = {3}, s32[2] = {3, 2};
  float fa[6] = {1.5f, -2, 3, 0.25f, 5, -6}, fb[3] = {2, -1, 0.5f},
        fc[6] = {10, 20, 30, 40, 50, 60};
  int32_t ia[6] = {7, -8, 9, 10, -11, 12}, ib[3] = {2, -4, 3};
  uint8_t ua[6] = {200, 1, 7, 255, 0, 3};
  for (int d = 0; d < ndev; d++) {
    const char *dn = cu_dev_name(devs[d]);
    char what[96];
    clt_tensor *a = cu_tensor(fa, CLT_F32, 2, s23, devs[d]);
    clt_tensor *b = cu_tensor(fb, CLT_F32, 1, s3, devs[d]);
    clt_tensor *c = cu_tensor(fc, CLT_F32, 2, s23, devs[d]);
    clt_tensor *i = cu_tensor(ia, CLT_I32, 2, s23, devs[d]);
    clt_tensor *j = cu_tensor(ib, CLT_I32, 1, s3, devs[d]);
    clt_tensor *u = cu_tensor(ua, CLT_U8, 2, s23, devs[d]);
    /* Into a preallocated tensor of the result's shape and dtype. */
    static const struct {
      int op, x, y; /* operands: 0 a, 1 b, 2 c, 3 i, 4 j, 5 u */
      double rtol;
    } cases[] = {{B_ADD, 0, 1, 0}, {B_MAX, 0, 1, 0}, {B_MIN, 1, 0, 0}, {B_POW, 2, 1, RTOL_F32},
                 {B_LT, 0, 1, 0},  {B_GE, 3, 0, 0},  {B_DIV, 3, 4, 0}, {B_EQ, 5, 4, 0},
                 {B_SUB, 5, 4, 0}, {B_MUL, 3, 4, 0}, {B_POW, 3, 4, 0}};
    clt_tensor *ts[6] = {a, b, c, i, j, u};
    const void *bufs[6] = {fa, fb, fc, ia, ib, ua};
    const clt_dtype dts[6] = {CLT_F32, CLT_F32, CLT_F32, CLT_I32, CLT_I32, CLT_U8};
    const int nds[6] = {2, 1, 2, 2, 1, 2};
    const int64_t *shs[6] = {s23, s3, s23, s23, s3, s23};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      int op = cases[k].op, x = cases[k].x, y = cases[k].y;
      clt_dtype rt;
      int no;
      int64_t os[CLT_MAX_DIMS];
      void *want = bin_want(op, dts[x], bufs[x], nds[x], shs[x], dts[y], bufs[y], nds[y], shs[y],
                            &rt, &no, os);
      snprintf(what, sizeof what, "%s_out(%s, %s) on %s", bops[op].name, cu_dt_name(dts[x]),
               cu_dt_name(dts[y]), dn);
      clt_tensor *o = marked(rt, no, os, devs[d]);
      clt_tensor *keep = o;
      CU_OK(bops[op].out(ts[x], ts[y], o));
      ck_assert_ptr_eq(o, keep);
      expect_tensor(o, rt, devs[d], no, os, want, cases[k].rtol, cases[k].rtol ? ATOL_F32 : 0,
                    what);
      clt_tensor_release(o);
      free(want);
    }
    /* Wrong shape, wrong dtype, another device, NULL: refused, out untouched. */
    float mark6[6] = {-777, -777, -777, -777, -777, -777};
    clt_tensor *o32 = marked(CLT_F32, 2, s32, devs[d]);
    CU_FAILS(clt_add_out(a, b, o32), CLT_ERR_SHAPE_MISMATCH, "clt_add_out");
    expect_unchanged(o32, mark6, sizeof mark6, "out of the wrong shape");
    clt_tensor_release(o32);
    clt_tensor *o3 = marked(CLT_F32, 1, s3, devs[d]);
    CU_FAILS(clt_add_out(a, b, o3), CLT_ERR_SHAPE_MISMATCH,
             "clt_add_out"); /* b's shape, not the result's */
    expect_unchanged(o3, mark6, 3 * sizeof(float), "out of b's shape");
    clt_tensor_release(o3);
    double mark6d[6] = {-777, -777, -777, -777, -777, -777};
    clt_tensor *o64 = marked(CLT_F64, 2, s23, devs[d]);
    CU_FAILS(clt_add_out(a, b, o64), CLT_ERR_DTYPE, "clt_add_out");
    expect_unchanged(o64, mark6d, sizeof mark6d, "out of the wrong dtype (f64 for f32)");
    clt_tensor_release(o64);
    clt_tensor *of = marked(CLT_F32, 2, s23, devs[d]);
    CU_FAILS(clt_lt_out(a, b, of), CLT_ERR_DTYPE, "clt_lt_out"); /* comparisons give bool */
    int32_t mark6i[6] = {-777, -777, -777, -777, -777, -777};
    clt_tensor *oi = marked(CLT_I32, 2, s23, devs[d]);
    CU_FAILS(clt_div_out(i, j, oi), CLT_ERR_DTYPE, "clt_div_out"); /* i32 / i32 is f32 */
    CU_FAILS(clt_add_out(i, a, oi), CLT_ERR_DTYPE, "clt_add_out"); /* i32 + f32 is f32 */
    expect_unchanged(oi, mark6i, sizeof mark6i, "i32 out of f32 results");
    clt_tensor_release(oi);
    CU_FAILS(clt_add_out(a, b, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_add_out");
    for (int e = 0; e < ndev; e++) {
      if (e == d)
        continue;
      clt_tensor *oe = marked(CLT_F32, 2, s23, devs[e]);
      clt_status s = clt_add_out(a, b, oe);
      ck_assert_msg(s == CLT_ERR_DEVICE_MISMATCH, "clt_add_out with out on %s, a on %s gave %s",
                    cu_dev_name(devs[e]), dn, clt_status_name(s));
      char want[256];
      snprintf(want, sizeof want,
               "clt_add_out: expected all tensors on the same device, but found %s (argument 1) and "
               "%s (argument 3); copy one with clt_to()",
               dn, cu_dev_name(devs[e]));
      ck_assert_str_eq(clt_last_error(), want);
      expect_unchanged(oe, mark6, sizeof mark6, "out on another device");
      clt_tensor_release(oe);
    }
    /* out may be an operand of the result's shape when nothing broadcasts: a = a + c,
     * c = a - c, a = a * a. */
    float w[6];
    for (int k = 0; k < 6; k++)
      w[k] = fa[k] + fc[k];
    snprintf(what, sizeof what, "clt_add_out(a, c, a) on %s", dn);
    CU_OK(clt_add_out(a, c, a));
    expect_tensor(a, CLT_F32, devs[d], 2, s23, w, 0, 0, what);
    float w2[6];
    for (int k = 0; k < 6; k++)
      w2[k] = w[k] - fc[k];
    snprintf(what, sizeof what, "clt_sub_out(a, c, c) on %s", dn);
    CU_OK(clt_sub_out(a, c, c));
    expect_tensor(c, CLT_F32, devs[d], 2, s23, w2, 0, 0, what);
    for (int k = 0; k < 6; k++)
      w[k] = w[k] * w[k];
    snprintf(what, sizeof what, "clt_mul_out(a, a, a) on %s", dn);
    CU_OK(clt_mul_out(a, a, a));
    expect_tensor(a, CLT_F32, devs[d], 2, s23, w, 0, 0, what);
    clt_tensor_release(of);
    for (int k = 0; k < 6; k++)
      clt_tensor_release(ts[k]);
  }
}
END_TEST

/* clt.h: "clt_add_out(a, b, out) writes into an existing tensor of the result's shape and dtype
 * on the same device (it may be a or b when they already have the result's shape)" and
 * "clt_add_(a, b) is a += b" with "the result must have a's shape and dtype". So a {2, 3} += b
 * {3} works, through clt_add_ and through clt_add_out(a, b, a): a has the result's shape, only b
 * broadcasts, and each element of a is read once, before it is written. */
START_TEST(test_out_alias_broadcast) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t s23[2] = {2, 3}, s3[1] = {3};
  float fa[6] = {1, 2, 3, 4, 5, 6}, fb[3] = {10, 20, 30};
  float w1[6] = {11, 22, 33, 14, 25, 36}, w2[6] = {21, 42, 63, 24, 45, 66},
        w3[6] = {-11, -22, -33, -14, -25, -36};
  for (int d = 0; d < ndev; d++) {
    char what[96];
    clt_tensor *a = cu_tensor(fa, CLT_F32, 2, s23, devs[d]);
    clt_tensor *b = cu_tensor(fb, CLT_F32, 1, s3, devs[d]);
    snprintf(what, sizeof what, "clt_add_(a [2, 3], b [3]) on %s", cu_dev_name(devs[d]));
    clt_status s = clt_add_(a, b);
    ck_assert_msg(s == CLT_OK, "%s: %s: %s", what, clt_status_name(s), clt_last_error());
    expect_tensor(a, CLT_F32, devs[d], 2, s23, w1, 0, 0, what);
    snprintf(what, sizeof what, "clt_add_out(a [2, 3], b [3], a) on %s", cu_dev_name(devs[d]));
    s = clt_add_out(a, b, a);
    ck_assert_msg(s == CLT_OK, "%s: %s: %s", what, clt_status_name(s), clt_last_error());
    expect_tensor(a, CLT_F32, devs[d], 2, s23, w2, 0, 0, what);
    snprintf(what, sizeof what, "clt_sub_out(b [3], a [2, 3], a) on %s", cu_dev_name(devs[d]));
    s = clt_sub_out(b, a, a); /* a = b - a: out is the second operand */
    ck_assert_msg(s == CLT_OK, "%s: %s: %s", what, clt_status_name(s), clt_last_error());
    for (int k = 0; k < 6; k++)
      w3[k] = fb[k % 3] - w2[k];
    expect_tensor(a, CLT_F32, devs[d], 2, s23, w3, 0, 0, what);
    clt_tensor_release(a);
    clt_tensor_release(b);
  }
}
END_TEST

/* ---- in place ------------------------------------------------------------------------------- */

START_TEST(test_inplace) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t s23[2] = {2, 3}, s6[1] = {6};
  cu_rng r;
  cu_rng_seed(&r, 1300);
  static const struct {
    int op;
    clt_dtype a, b;
    double alo, ahi, blo, bhi;
  } cases[] = {{B_ADD, CLT_F32, CLT_F32, -10, 10, -10, 10},
               {B_SUB, CLT_I32, CLT_I32, -2e9, 2e9, -2e9, 2e9},
               {B_MUL, CLT_U8, CLT_U8, 0, 255, 0, 255},
               {B_DIV, CLT_F64, CLT_F32, -10, 10, 1, 5},
               {B_ADD, CLT_I64, CLT_BOOL, -1e18, 1e18, 0, 1},
               {B_ADD, CLT_I32, CLT_U8, -1000, 1000, 0, 255},
               {B_ADD, CLT_BOOL, CLT_BOOL, 0, 1, 0, 1},
               {B_MUL, CLT_BOOL, CLT_BOOL, 0, 1, 0, 1},
               {B_MUL, CLT_F32, CLT_I32, -10, 10, -100, 100},
               {B_SUB, CLT_U8, CLT_U8, 0, 255, 0, 255}};
  typedef clt_status (*inplace_fn)(clt_tensor *, clt_tensor *);
  const inplace_fn fns[4] = {clt_add_, clt_sub_, clt_mul_, clt_div_};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int op = cases[c].op;
    clt_dtype da = cases[c].a, db = cases[c].b;
    void *a = cu_malloc(6 * 8), *b = cu_malloc(6 * 8);
    cu_fill(a, da, 6, &r, cases[c].alo, cases[c].ahi, 0);
    cu_fill(b, db, 6, &r, cases[c].blo, cases[c].bhi, op == B_DIV ? CU_NONZERO : 0);
    if (da == CLT_BOOL)
      ((uint8_t *)a)[0] = 1, ((uint8_t *)a)[1] = 0, ((uint8_t *)b)[0] = 0, ((uint8_t *)b)[1] = 1;
    clt_dtype rt;
    int no;
    int64_t os[CLT_MAX_DIMS];
    void *want = bin_want(op, da, a, 2, s23, db, b, 2, s23, &rt, &no, os);
    ck_assert_int_eq(rt, da);
    for (int d = 0; d < ndev; d++) {
      if (!cu_dtype_ok("test_inplace", devs[d], da) || !cu_dtype_ok("test_inplace", devs[d], db))
        continue;
      char what[96];
      snprintf(what, sizeof what, "%s_(%s, %s) on %s", bops[op].name, cu_dt_name(da),
               cu_dt_name(db), cu_dev_name(devs[d]));
      clt_tensor *ta = cu_tensor(a, da, 2, s23, devs[d]);
      clt_tensor *tb = cu_tensor(b, db, 2, s23, devs[d]);
      clt_tensor *alias = NULL;
      CU_OK(clt_to(ta, devs[d], &alias)); /* the same tensor, one more reference */
      ck_assert_ptr_eq(alias, ta);
      CU_OK(fns[op - B_ADD](ta, tb));
      expect_tensor(ta, da, devs[d], 2, s23, want, 0, 0, what);
      expect_tensor(alias, da, devs[d], 2, s23, want, 0, 0, what);
      expect_unchanged(tb, b, 6 * clt_dtype_size(db), what);
      clt_tensor_release(alias);
      clt_tensor_release(ta);
      clt_tensor_release(tb);
    }
    free(want);
    free(a);
    free(b);
  }
  /* Repeated on the device, then read once: a + 5 b. */
  int32_t ia[6] = {1, -2, 3, INT32_MAX, INT32_MIN, 0}, ib[6] = {10, 20, 30, 1, -1, 7}, w[6];
  for (int k = 0; k < 6; k++)
    w[k] = (int32_t)((uint32_t)ia[k] + 5u * (uint32_t)ib[k]);
  for (int d = 0; d < ndev; d++) {
    clt_tensor *ta = cu_tensor(ia, CLT_I32, 1, s6, devs[d]),
               *tb = cu_tensor(ib, CLT_I32, 1, s6, devs[d]);
    for (int k = 0; k < 5; k++)
      CU_OK(clt_add_(ta, tb));
    expect_tensor(ta, CLT_I32, devs[d], 1, s6, w, 0, 0, "a += b five times");
    clt_tensor_release(ta);
    clt_tensor_release(tb);
  }
  /* Refused when the result is not a's dtype or shape, on another device, or NULL; a unchanged. */
  int64_t s3[1] = {3};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *ti = cu_tensor(ia, CLT_I32, 2, s23, devs[d]);
    float fb[6] = {0.5f, 1, 2, 3, 4, 5};
    clt_tensor *tf = cu_tensor(fb, CLT_F32, 2, s23, devs[d]);
    uint8_t ub[6] = {1, 2, 3, 4, 5, 6};
    clt_tensor *tu = cu_tensor(ub, CLT_U8, 2, s23, devs[d]);
    clt_tensor *t3 = cu_tensor(ia, CLT_I32, 1, s3, devs[d]);
    CU_FAILS(clt_add_(ti, tf), CLT_ERR_DTYPE, "clt_add_"); /* i32 + f32 is f32 */
    CU_FAILS(clt_sub_(ti, tf), CLT_ERR_DTYPE, "clt_sub_");
    CU_FAILS(clt_mul_(ti, tf), CLT_ERR_DTYPE, "clt_mul_");
    CU_FAILS(clt_div_(ti, ti), CLT_ERR_DTYPE, "clt_div_"); /* i32 / i32 is f32 */
    expect_unchanged(ti, ia, sizeof ia, "i32 a after refused in-place ops");
    CU_FAILS(clt_add_(tu, ti), CLT_ERR_DTYPE, "clt_add_"); /* u8 + i32 is i32 */
    expect_unchanged(tu, ub, sizeof ub, "u8 a after u8 += i32");
    CU_FAILS(clt_add_(t3, ti), CLT_ERR_SHAPE_MISMATCH, "clt_add_"); /* [3] += [2, 3] */
    expect_unchanged(t3, ia, 3 * sizeof(int32_t), "[3] a after += [2, 3]");
    CU_FAILS(clt_add_(NULL, ti), CLT_ERR_INVALID_ARGUMENT, "clt_add_");
    CU_FAILS(clt_add_(ti, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_add_");
    if (ndev > 1) {
      clt_tensor *other = cu_tensor(ia, CLT_I32, 2, s23, devs[(d + 1) % ndev]);
      CU_FAILS(clt_add_(ti, other), CLT_ERR_DEVICE_MISMATCH, "clt_add_");
      expect_unchanged(ti, ia, sizeof ia, "a after += b on another device");
      clt_tensor_release(other);
    }
    clt_tensor_release(ti);
    clt_tensor_release(tf);
    clt_tensor_release(tu);
    clt_tensor_release(t3);
  }
}
END_TEST

/* ---- _scalar forms -------------------------------------------------------------------------- */

/* The dtype a scalar v becomes next to a tensor of dtype dt (clt.h): it does not widen a float
 * tensor nor an integer one (if it is an integer); a fraction makes f32; an integer next to
 * bool is i64. */
static clt_dtype scalar_dt(clt_dtype dt, double v) {
  if (cu_is_float(dt))
    return dt;
  if (v != floor(v))
    return CLT_F32;
  return dt == CLT_BOOL ? CLT_I64 : dt;
}

START_TEST(test_scalar) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t s23[2] = {2, 3};
  cu_rng r;
  cu_rng_seed(&r, 1400);
  static const struct {
    int op;
    clt_dtype dt;
    double v, lo, hi;
    clt_dtype rt; /* written out, besides the oracle's rule */
    double rtol;
  } cases[] = {
      {B_ADD, CLT_F32, 2.5, -100, 100, CLT_F32, 0},
      {B_MUL, CLT_F64, 0.1, -100, 100, CLT_F64, 0},
      {B_ADD, CLT_I32, 7, -2147483648.0, 2147483647.0, CLT_I32, 0},
      {B_ADD, CLT_I32, 2.5, -100000, 100000, CLT_F32, 0},
      {B_ADD, CLT_I64, 2, 9007199254740990.0, 9007199254741000.0, CLT_I64, 0},
      {B_ADD, CLT_BOOL, 1, 0, 1, CLT_I64, 0},
      {B_MUL, CLT_BOOL, 3, 0, 1, CLT_I64, 0},
      {B_SUB, CLT_BOOL, 1, 0, 1, CLT_I64, 0},
      {B_ADD, CLT_BOOL, 0.5, 0, 1, CLT_F32, 0},
      {B_ADD, CLT_U8, 5, 0, 255, CLT_U8, 0},
      {B_SUB, CLT_U8, 200, 0, 255, CLT_U8, 0},
      {B_LT, CLT_I32, 2.5, -5, 5, CLT_BOOL, 0},
      {B_EQ, CLT_F32, 1.5, 0, 3, CLT_BOOL, 0},
      {B_GE, CLT_U8, 128, 0, 255, CLT_BOOL, 0},
      {B_POW, CLT_I32, 2, -40000, 40000, CLT_I32, 0},
      {B_POW, CLT_I32, -1, -3, 3, CLT_I32, 0},
      {B_POW, CLT_F32, 0.5, 0, 100, CLT_F32, RTOL_F32},
      {B_MAX, CLT_F32, 0, -10, 10, CLT_F32, 0},
      {B_MIN, CLT_I64, -3, -10, 10, CLT_I64, 0},
      {B_DIV, CLT_I32, 2, -1000, 1000, CLT_F32, 0},
      {B_MUL, CLT_I64, -1, -4.6e18, 4.6e18, CLT_I64, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int op = cases[c].op;
    clt_dtype dt = cases[c].dt, sdt = scalar_dt(dt, cases[c].v);
    void *a = cu_malloc(6 * 8), *sv = cu_malloc(8);
    if (dt == CLT_F32 && (op == B_EQ))
      for (int k = 0; k < 6; k++) /* halves, so that some equal 1.5 */
        ((float *)a)[k] = (float)(k % 4) * 0.5f;
    else
      cu_fill(a, dt, 6, &r, cases[c].lo, cases[c].hi, 0);
    if (dt == CLT_BOOL)
      ((uint8_t *)a)[0] = 1, ((uint8_t *)a)[1] = 0;
    if (dt == CLT_I32 && op == B_ADD && cases[c].v == 7)
      ((int32_t *)a)[0] = INT32_MAX; /* wraps to INT32_MIN + 6 */
    if (dt == CLT_F32 && op == B_MAX)
      ((float *)a)[0] = NAN;
    cu_set(sv, sdt, 0, cases[c].v);
    clt_dtype rt;
    int no;
    int64_t os[CLT_MAX_DIMS];
    void *want = bin_want(op, dt, a, 2, s23, sdt, sv, 0, NULL, &rt, &no, os);
    ck_assert_msg(rt == cases[c].rt, "case %zu: the oracle's rule gives %s, the table %s", c,
                  cu_dt_name(rt), cu_dt_name(cases[c].rt));
    void *ref = NULL;
    for (int d = 0; d < ndev; d++) {
      if (!cu_dtype_ok("test_scalar", devs[d], dt))
        continue;
      char what[96];
      snprintf(what, sizeof what, "%s_scalar(%s, %g) on %s", bops[op].name, cu_dt_name(dt),
               cases[c].v, cu_dev_name(devs[d]));
      clt_tensor *t = cu_tensor(a, dt, 2, s23, devs[d]), *out = CU_SENTINEL;
      clt_status s = bops[op].scalar(t, cases[c].v, &out);
      ck_assert_msg(s == CLT_OK, "%s: %s: %s", what, clt_status_name(s), clt_last_error());
      expect_tensor(out, rt, devs[d], 2, s23, want, cases[c].rtol, cases[c].rtol ? ATOL_F32 : 0,
                    what);
      void *got = cu_read(out);
      if (!ref) {
        ref = got;
      } else {
        int64_t bad = first_mismatch(got, ref, rt, 6, cases[c].rtol, cases[c].rtol ? ATOL_F32 : 0);
        ck_assert_msg(bad < 0, "%s: element %lld differs from cpu", what, (long long)bad);
        free(got);
      }
      expect_unchanged(t, a, 6 * clt_dtype_size(dt), what);
      clt_tensor_release(out);
      clt_tensor_release(t);
    }
    free(ref);
    free(want);
    free(a);
    free(sv);
  }
  /* Values of the header's examples, and scalars an integer dtype cannot hold. */
  for (int d = 0; d < ndev; d++) {
    const char *dn = cu_dev_name(devs[d]);
    int32_t iv[6] = {1, -2, 3, 100, -100, INT32_MAX};
    clt_tensor *ti = cu_tensor(iv, CLT_I32, 2, s23, devs[d]), *out = NULL;
    CU_OK(clt_add_scalar(ti, 7, &out));
    int32_t gi[6];
    CU_OK(clt_tensor_read(out, gi, sizeof gi));
    ck_assert_msg(
        clt_tensor_dtype(out) == CLT_I32 && gi[0] == 8 && gi[4] == -93 && gi[5] == INT32_MIN + 6,
        "i32 + 7 on %s: %s %d %d %d", dn, cu_dt_name(clt_tensor_dtype(out)), gi[0], gi[4], gi[5]);
    clt_tensor_release(out);
    CU_OK(clt_add_scalar(ti, 2.5, &out));
    float gf[6];
    CU_OK(clt_tensor_read(out, gf, sizeof gf));
    ck_assert_msg(clt_tensor_dtype(out) == CLT_F32 && gf[0] == 3.5f && gf[1] == 0.5f,
                  "i32 + 2.5 on %s: %s %g %g", dn, cu_dt_name(clt_tensor_dtype(out)), (double)gf[0],
                  (double)gf[1]);
    clt_tensor_release(out);
    uint8_t uv[6] = {0, 1, 2, 250, 255, 9};
    clt_tensor *tu = cu_tensor(uv, CLT_U8, 2, s23, devs[d]);
    static const double bad[] = {300, -1, 256, 1e10};
    for (int k = 0; k < 4; k++) {
      out = CU_SENTINEL;
      CU_FAILS(clt_add_scalar(tu, bad[k], &out), CLT_ERR_INVALID_ARGUMENT, "clt_add_scalar");
      ck_assert_msg(out == CU_SENTINEL, "u8 + %g on %s changed out", bad[k], dn);
    }
    out = CU_SENTINEL;
    CU_FAILS(clt_mul_scalar(ti, 3e9, &out), CLT_ERR_INVALID_ARGUMENT, "clt_mul_scalar");
    CU_FAILS(clt_lt_scalar(tu, -1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_lt_scalar");
    CU_FAILS(clt_add_scalar(NULL, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_add_scalar");
    CU_FAILS(clt_add_scalar(tu, 1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_add_scalar");
    ck_assert_ptr_eq(out, CU_SENTINEL);
    expect_unchanged(tu, uv, sizeof uv, "u8 a after refused scalars");
    clt_tensor_release(tu);
    clt_tensor_release(ti);
  }
}
END_TEST

/* One TCase per operation, named after it (as in check_backend_ops.c), so that
 * CK_RUN_CASE=eq tests/check_clt runs every test of eq; then the tests of rules that span ops. */
/* docs/operations.md restates each row of clt_ops.h in its table of the elementwise operations:
 * the two must not drift. Every op has exactly one row, with its arity and its ulps as the table
 * in the code has them, and the doc has no row for an op that does not exist. */
START_TEST(test_ops_doc_table) {
  char path[4096];
  snprintf(path, sizeof path, "%s/docs/operations.md", CLT_TOP_SRCDIR);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  int seen[CLT__OP_COUNT] = {0};
  int rows = 0;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    char name[64];
    int arity, ulps, len = 0;
    /* | `add` | 2 | promoted (wraps) | float, integer, bool | 0 | a + b | */
    if (sscanf(line, "| `%63[a-z0-9_]` | %d |%n", name, &arity, &len) != 2 || len == 0)
      continue;
    const char *c = line + len;
    for (int col = 0; col < 2 && c; col++) /* past "result" and "takes" */
      if ((c = strchr(c, '|')))
        c++;
    ck_assert_msg(c && sscanf(c, " %d |", &ulps) == 1, "%s: the row of %s has no ulps column",
                  path, name);
    rows++;
    int k = 0;
    while (k < CLT__OP_cast && strcmp(clt__ops[k].name, name) != 0)
      k++;
    ck_assert_msg(k < CLT__OP_cast, "%s has a row for `%s`, which clt_ops.h does not have", path,
                  name);
    seen[k]++;
    ck_assert_msg(arity == clt__ops[k].arity, "%s: `%s` has %d operands there, %d in clt_ops.h",
                  path, name, arity, clt__ops[k].arity);
    ck_assert_msg(ulps == clt__ops[k].ulps, "%s: `%s` allows %d ulps there, %d in clt_ops.h",
                  path, name, ulps, clt__ops[k].ulps);
  }
  fclose(f);
  for (int k = 0; k < CLT__OP_cast; k++)
    ck_assert_msg(seen[k] == 1, "%s: `%s` of clt_ops.h has %d rows (want 1)", path,
                  clt__ops[k].name, seen[k]);
  ck_assert_int_eq(rows, CLT__OP_cast);
}
END_TEST

static void add_op_case(Suite *s, const char *name, const TTest *t, int i) {
  TCase *tc = cu_tcase(name);
  tcase_add_loop_test(tc, t, i, i + 1);
  suite_add_tcase(s, tc);
}

/* The choices docs/operations.md lists under "Where clt differs from NumPy and PyTorch", on every
 * device, lazily and eagerly: each status, message and value as documented. */
START_TEST(test_ops_divergences) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int di = 0; di < nd; di++) {
    clt_device *d = devs[di];
    for (int lazy = 0; lazy < 2; lazy++) {
      int was = clt_set_lazy(lazy);
      clt_tensor *out = CU_SENTINEL, *t, *i, *b, *x, *r;
      /* arange values an integer dtype cannot hold: refused, not truncated or wrapped */
      CU_FAILS(clt_arange(0, 1, 0.25, CLT_I32, d, &out), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
      ck_assert_ptr_nonnull(strstr(clt_last_error(), "0.75 cannot be stored in i32"));
      CU_FAILS(clt_arange(-3, 4, 2, CLT_U8, d, &out), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
      ck_assert_ptr_nonnull(strstr(clt_last_error(), "-3 cannot be stored in u8"));
      ck_assert_ptr_eq(out, CU_SENTINEL);
      /* a one-element range is its start, whatever the step; the message names the dtype asked
       * for, and i64's range ends at INT64_MAX */
      CU_OK(clt_arange(2, 2.5, 0.75, CLT_I32, d, &t));
      ck_assert_int_eq(clt_tensor_numel(t), 1);
      ck_assert(cu_item(t) == 2);
      clt_tensor_release(t);
      CU_FAILS(clt_arange(0, 3, 1.5, CLT_U8, d, &out), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
      ck_assert_ptr_nonnull(strstr(clt_last_error(), "1.5 cannot be stored in u8"));
      CU_FAILS(clt_arange(0, 1, 0.5, CLT_I64, d, &out), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
      ck_assert_ptr_nonnull(strstr(clt_last_error(), "9223372036854775807]"));
      /* an integer step in the same dtypes is fine */
      CU_OK(clt_arange(-3, 4, 2, CLT_I32, d, &t));
      double *tv = cu_read_double(t);
      for (int k = 0; k < 4; k++)
        ck_assert_msg(tv[k] == -3 + 2 * k, "arange[%d] = %g", k, tv[k]);
      free(tv);
      clt_tensor_release(t);
      /* index_select of a 0-d tensor: no dimension to index */
      int64_t iv[1] = {0}, one = 1, two = 2;
      CU_OK(clt_full(CLT_F32, 0, NULL, 7, d, &t));
      i = cu_tensor(iv, CLT_I64, 1, &one, d);
      CU_FAILS(clt_index_select(t, 0, i, &out), CLT_ERR_INVALID_ARGUMENT, "clt_index_select");
      ck_assert_ptr_nonnull(strstr(clt_last_error(), "0-d"));
      ck_assert_ptr_eq(out, CU_SENTINEL);
      clt_tensor_release(t);
      clt_tensor_release(i);
      /* sub with one bool operand promotes it as 0/1; bool - bool is refused */
      uint8_t bv[2] = {1, 0};
      int32_t xv[2] = {5, -7};
      b = cu_tensor(bv, CLT_BOOL, 1, &two, d);
      x = cu_tensor(xv, CLT_I32, 1, &two, d);
      CU_OK(clt_sub(b, x, &r));
      ck_assert_int_eq(clt_tensor_dtype(r), CLT_I32);
      double *rv = cu_read_double(r);
      ck_assert_msg(rv[0] == -4 && rv[1] == 7, "bool - i32 = [%g, %g]", rv[0], rv[1]);
      free(rv);
      clt_tensor_release(r);
      CU_OK(clt_sub(x, b, &r));
      rv = cu_read_double(r);
      ck_assert_msg(rv[0] == 4 && rv[1] == -7, "i32 - bool = [%g, %g]", rv[0], rv[1]);
      free(rv);
      clt_tensor_release(r);
      CU_OK(clt_sub_scalar(b, 1, &r));
      ck_assert_int_eq(clt_tensor_dtype(r), CLT_I64);
      rv = cu_read_double(r);
      ck_assert_msg(rv[0] == 0 && rv[1] == -1, "bool - 1 = [%g, %g]", rv[0], rv[1]);
      free(rv);
      clt_tensor_release(r);
      CU_FAILS(clt_sub(b, b, &out), CLT_ERR_DTYPE, "clt_sub");
      ck_assert_ptr_eq(out, CU_SENTINEL);
      clt_tensor_release(b);
      clt_tensor_release(x);
      /* bf16 * i64: the integer rounded to bf16 first, then computed in f32, rounded once:
       * 5 * 5561470191465230947 -> 5 * 5548434740922023936 = 2.774e19 -> 2.767e19 in bf16
       * (PyTorch: 2.781e19) */
      int64_t big = 5561470191465230947LL;
      clt_tensor *h, *bi;
      CU_OK(clt_full(CLT_BF16, 1, &one, 5, d, &h));
      bi = cu_tensor(&big, CLT_I64, 1, &one, d);
      CU_OK(clt_mul(h, bi, &r));
      ck_assert_int_eq(clt_tensor_dtype(r), CLT_BF16);
      double want = cu_round_narrow(5.0 * cu_round_narrow((double)big, CLT_BF16), CLT_BF16);
      ck_assert_msg(cu_item(r) == want && want == 0x1.8p64, "bf16 * i64 = %.6g, want %.6g",
                    cu_item(r), want);
      clt_tensor_release(r);
      clt_tensor_release(h);
      clt_tensor_release(bi);
      clt_set_lazy(was);
    }
  }
}
END_TEST

Suite *ops_suite(void) {
  Suite *s = suite_create("ops");
  static const char *const minmax[] = {"maximum", "minimum"};
  static const char *const compare[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  static const char *const exact[] = {"neg", "abs", "relu"};
  static const char *const math[] = {"exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid"};
  add_op_case(s, "pow", test_pow, 0);
  for (int i = 0; i < 2; i++)
    add_op_case(s, minmax[i], test_minmax, i);
  for (int i = 0; i < 6; i++)
    add_op_case(s, compare[i], test_compare, i);
  for (int i = 0; i < 3; i++)
    add_op_case(s, exact[i], test_unary_exact, i);
  for (int i = 0; i < 7; i++)
    add_op_case(s, math[i], test_unary_math, i);
  TCase *tc = cu_tcase("cast");
  tcase_add_loop_test(tc, test_cast, 0, CLT_DTYPE_COUNT);
  tcase_add_loop_test(tc, test_undefined_values, 0,
                      (int)(sizeof undefined_cases / sizeof undefined_cases[0]));
  suite_add_tcase(s, tc);
  tc = cu_tcase("where");
  tcase_add_test(tc, test_where);
  tcase_add_test(tc, test_where_errors);
  suite_add_tcase(s, tc);
  tc = cu_tcase("rules");
  tcase_add_test(tc, test_compare_promotion);
  tcase_add_test(tc, test_compare_broadcast);
  tcase_add_test(tc, test_bool_refused);
  tcase_add_test(tc, test_ops_divergences);
  tcase_add_test(tc, test_ops_doc_table);
  suite_add_tcase(s, tc);
  tc = cu_tcase("forms");
  tcase_add_test(tc, test_out);
  tcase_add_test(tc, test_out_alias_broadcast);
  tcase_add_test(tc, test_inplace);
  tcase_add_test(tc, test_scalar);
  suite_add_tcase(s, tc);
  return s;
}
