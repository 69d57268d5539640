/* SPDX-License-Identifier: MIT */
/* check_elementwise.c - add, sub, mul, div on every device and dtype against a host oracle. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

typedef clt_status (*binop_fn)(clt_tensor *, clt_tensor *, clt_tensor **);
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, NOPS };
static const char *op_names[NOPS] = {"clt_add", "clt_sub", "clt_mul", "clt_div"};
static const binop_fn op_fns[NOPS] = {clt_add, clt_sub, clt_mul, clt_div};

/* The oracle in double (floats and division) ... */
static double oracle_f(int op, double a, double b) {
  switch (op) {
  case OP_ADD:
    return a + b;
  case OP_SUB:
    return a - b;
  case OP_MUL:
    return a * b;
  default:
    return a / b;
  }
}

/* ... and in int64, wrapped to the dtype afterwards (integers and bool). */
static int64_t oracle_i(int op, clt_dtype dt, int64_t a, int64_t b) {
  if (dt == CLT_BOOL)
    return op == OP_ADD ? (a || b) : (a && b);
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b, r;
  switch (op) {
  case OP_ADD:
    r = ua + ub;
    break;
  case OP_SUB:
    r = ua - ub;
    break;
  default:
    r = ua * ub;
    break;
  }
  int64_t wrapped;
  unsigned char buf[8];
  cu_set_i64(buf, dt, 0, (int64_t)r);
  wrapped = cu_get_i64(buf, dt, 0);
  return wrapped;
}

/* The result of op on buffers a, b (dtypes da, db; broadcast shapes) checked against the
 * oracle: element i of the result uses a[ia(i)] and b[ib(i)]. */
static void check_result(int op, const clt_tensor *out, const void *a, clt_dtype da, int na,
                         const int64_t *sa, const void *b, clt_dtype db, int nb, const int64_t *sb,
                         const char *what) {
  int64_t oshape[CLT_MAX_DIMS];
  int nout = cu_broadcast(na, sa, nb, sb, oshape);
  ck_assert_int_ge(nout, 0);
  clt_dtype want_dt;
  CU_OK(clt_result_dtype(op_names[op] + 4, da, db, &want_dt));
  cu_assert_meta(out, want_dt, clt_tensor_device(out), nout, oshape, what);
  int64_t n = cu_numel(nout, oshape);
  void *got = cu_read(out);
  for (int64_t i = 0; i < n; i++) {
    int64_t ia = cu_bindex(i, nout, oshape, na, sa), ib = cu_bindex(i, nout, oshape, nb, sb);
    if (cu_is_float(want_dt)) {
      double want = oracle_f(op, cu_get(a, da, ia), cu_get(b, db, ib));
      double g = cu_get(got, want_dt, i);
      double rtol = cu_rtol(want_dt), atol = want_dt == CLT_F32 ? 1e-30 : 1e-300;
      if (!cu_close(g, want, rtol, atol))
        ck_abort_msg("%s: element %lld: %s(%.17g, %.17g) gave %.17g, expected %.17g", what,
                     (long long)i, op_names[op], cu_get(a, da, ia), cu_get(b, db, ib), g, want);
    } else {
      int64_t want = oracle_i(op, want_dt, cu_get_i64(a, da, ia), cu_get_i64(b, db, ib));
      int64_t g = cu_get_i64(got, want_dt, i);
      if (g != want)
        ck_abort_msg("%s: element %lld: %s(%lld, %lld) gave %lld, expected %lld", what,
                     (long long)i, op_names[op], (long long)cu_get_i64(a, da, ia),
                     (long long)cu_get_i64(b, db, ib), (long long)g, (long long)want);
    }
  }
  free(got);
}

/* Random operands for op on dtype dt: small ranges, no zero divisors. */
static void fill_operands(int op, clt_dtype dt, void *a, void *b, int64_t n, cu_rng *r,
                          int a_nonzero) {
  double lo = -10, hi = 10;
  if (!cu_is_float(dt)) {
    lo = dt == CLT_U8 ? 0 : -1000;
    hi = dt == CLT_U8 ? 255 : 1000;
    if (op >= OP_MUL && dt == CLT_U8)
      hi = 15;
  }
  cu_fill(a, dt, n, r, lo, hi, a_nonzero ? CU_NONZERO : 0);
  cu_fill(b, dt, n, r, lo, hi, op == OP_DIV ? CU_NONZERO : 0);
}

/* Every dtype on every device, for one op (the loop index); device results also against cpu. */
START_TEST(test_binary) {
  int op = _i;
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[2] = {5, 37};
  int64_t n = 5 * 37;
  cu_rng r;
  cu_rng_seed(&r, 1000 + (uint64_t)op);
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    size_t es = clt_dtype_size((clt_dtype)dt);
    void *a = cu_malloc((size_t)n * es), *b = cu_malloc((size_t)n * es);
    fill_operands(op, (clt_dtype)dt, a, b, n, &r, 0);
    void *host_result = NULL;
    clt_dtype rdt = CLT_F32;
    for (int d = 0; d < ndev; d++) {
      if (!cu_dtype_ok("test_binary", devs[d], (clt_dtype)dt))
        continue;
      char what[96];
      snprintf(what, sizeof what, "%s %s on %s", op_names[op], cu_dt_name((clt_dtype)dt),
               cu_dev_name(devs[d]));
      clt_tensor *ta = cu_tensor(a, (clt_dtype)dt, 2, shape, devs[d]);
      clt_tensor *tb = cu_tensor(b, (clt_dtype)dt, 2, shape, devs[d]);
      clt_tensor *out = CU_SENTINEL;
      clt_status s = op_fns[op](ta, tb, &out);
      if (dt == CLT_BOOL && op == OP_SUB) {
        ck_assert_msg(s == CLT_ERR_DTYPE, "%s gave %s, expected ERR_DTYPE", what,
                      clt_status_name(s));
        cu_assert_prefix(clt_last_error(), op_names[op], what);
        ck_assert_ptr_eq(out, CU_SENTINEL);
      } else {
        ck_assert_msg(s == CLT_OK, "%s: %s: %s", what, clt_status_name(s), clt_last_error());
        ck_assert_msg(clt_tensor_device(out) == devs[d], "%s: result on %s", what,
                      cu_dev_name(clt_tensor_device(out)));
        check_result(op, out, a, (clt_dtype)dt, 2, shape, b, (clt_dtype)dt, 2, shape, what);
        /* The same as the host backend's result. */
        void *got = cu_read(out);
        rdt = clt_tensor_dtype(out);
        if (!host_result) {
          host_result = got;
        } else {
          for (int64_t i = 0; i < n; i++) {
            double g = cu_get(got, rdt, i), h = cu_get(host_result, rdt, i);
            if (cu_is_float(rdt) ? !cu_close(g, h, cu_rtol(rdt), 1e-30) : g != h)
              ck_abort_msg("%s: element %lld is %.17g, cpu gave %.17g", what, (long long)i, g, h);
          }
          free(got);
        }
        clt_tensor_release(out);
      }
      /* The operands are unchanged. */
      void *ra = cu_read(ta);
      ck_assert_msg(memcmp(ra, a, (size_t)n * es) == 0, "%s: operand a changed", what);
      free(ra);
      clt_tensor_release(ta);
      clt_tensor_release(tb);
    }
    free(host_result);
    free(a);
    free(b);
  }
}
END_TEST

START_TEST(test_broadcast) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t sa[3] = {2, 3, 4};
  static const int64_t s31[2] = {3, 1}, s4[1] = {4}, s114[3] = {1, 1, 4}, s211[3] = {2, 1, 1};
  static const struct {
    int n;
    const int64_t *shape;
  } others[] = {{2, s31}, {1, s4}, {0, NULL}, {3, s114}, {3, s211}};
  static const struct {
    int op;
    clt_dtype dt;
  } combos[] = {{OP_ADD, CLT_F32},
                {OP_SUB, CLT_F32},
                {OP_SUB, CLT_I32},
                {OP_DIV, CLT_F64},
                {OP_MUL, CLT_I64}};
  cu_rng r;
  cu_rng_seed(&r, 77);
  for (size_t c = 0; c < sizeof combos / sizeof combos[0]; c++) {
    clt_dtype dt = combos[c].dt;
    int op = combos[c].op;
    size_t es = clt_dtype_size(dt);
    void *a = cu_malloc(24 * es), *b = cu_malloc(24 * es);
    fill_operands(op, dt, a, b, 24, &r, op == OP_DIV); /* a is the divisor in b op a */
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
      for (int d = 0; d < ndev; d++) {
        if (!cu_dtype_ok("test_broadcast", devs[d], dt))
          continue;
        clt_tensor *ta = cu_tensor(a, dt, 3, sa, devs[d]);
        clt_tensor *tb = cu_tensor(b, dt, others[k].n, others[k].shape, devs[d]);
        for (int order = 0; order < 2; order++) {
          char what[128];
          snprintf(what, sizeof what, "%s %s on %s, [2, 3, 4] with a %d-d operand (%s)",
                   op_names[op], cu_dt_name(dt), cu_dev_name(devs[d]), others[k].n,
                   order ? "second" : "first");
          clt_tensor *out = NULL;
          clt_status s = order ? op_fns[op](tb, ta, &out) : op_fns[op](ta, tb, &out);
          ck_assert_msg(s == CLT_OK, "%s: %s", what, clt_last_error());
          if (order)
            check_result(op, out, b, dt, others[k].n, others[k].shape, a, dt, 3, sa, what);
          else
            check_result(op, out, a, dt, 3, sa, b, dt, others[k].n, others[k].shape, what);
          clt_tensor_release(out);
        }
        clt_tensor_release(ta);
        clt_tensor_release(tb);
      }
    }
    free(a);
    free(b);
  }
  /* {3, 1} with {1, 4} makes a {3, 4}; 0-d with 0-d stays 0-d; zero-size dimensions. */
  int64_t c31[2] = {3, 1}, c14[2] = {1, 4}, z3[2] = {0, 3}, s3[1] = {3}, z1[2] = {0, 1};
  float fa[3] = {1, 2, 3}, fb[4] = {10, 20, 30, 40}, fz[3] = {0};
  for (int d = 0; d < ndev; d++) {
    char what[64];
    snprintf(what, sizeof what, "outer broadcast on %s", cu_dev_name(devs[d]));
    clt_tensor *ta = cu_tensor(fa, CLT_F32, 2, c31, devs[d]);
    clt_tensor *tb = cu_tensor(fb, CLT_F32, 2, c14, devs[d]);
    clt_tensor *out = NULL;
    CU_OK(clt_mul(ta, tb, &out));
    check_result(OP_MUL, out, fa, CLT_F32, 2, c31, fb, CLT_F32, 2, c14, what);
    clt_tensor_release(out);
    clt_tensor_release(ta);
    clt_tensor_release(tb);

    snprintf(what, sizeof what, "0-d with 0-d on %s", cu_dev_name(devs[d]));
    ta = cu_tensor(&fa[1], CLT_F32, 0, NULL, devs[d]);
    tb = cu_tensor(&fb[2], CLT_F32, 0, NULL, devs[d]);
    CU_OK(clt_sub(ta, tb, &out));
    check_result(OP_SUB, out, &fa[1], CLT_F32, 0, NULL, &fb[2], CLT_F32, 0, NULL, what);
    clt_tensor_release(out);
    clt_tensor_release(ta);
    clt_tensor_release(tb);

    snprintf(what, sizeof what, "zero-size on %s", cu_dev_name(devs[d]));
    CU_OK(clt_zeros(CLT_F32, 2, z3, devs[d], &ta));
    tb = cu_tensor(fz, CLT_F32, 1, s3, devs[d]);
    CU_OK(clt_add(ta, tb, &out));
    cu_assert_meta(out, CLT_F32, devs[d], 2, z3, what);
    clt_tensor_release(out);
    clt_tensor_release(tb);
    CU_OK(clt_zeros(CLT_F32, 2, z1, devs[d], &tb));
    CU_OK(clt_mul(tb, ta, &out)); /* {0, 1} with {0, 3} */
    cu_assert_meta(out, CLT_F32, devs[d], 2, z3, what);
    clt_tensor_release(out);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
  }
}
END_TEST

START_TEST(test_mixed_dtypes) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  static const struct {
    int op;
    clt_dtype a, b;
    double alo, ahi, blo, bhi;
  } cases[] = {
      {OP_ADD, CLT_I32, CLT_F32, -1000, 1000, -10, 10},
      {OP_MUL, CLT_F32, CLT_I32, -10, 10, -1000, 1000},
      {OP_ADD, CLT_U8, CLT_I32, 128, 255, -300, 300},
      {OP_SUB, CLT_I32, CLT_U8, -300, 300, 128, 255},
      {OP_ADD, CLT_I32, CLT_I64, -1000, 1000, -1e12, 1e12},
      {OP_MUL, CLT_U8, CLT_I64, 0, 255, -1e9, 1e9},
      {OP_MUL, CLT_F32, CLT_F64, -10, 10, -10, 10},
      {OP_SUB, CLT_I64, CLT_F64, -1e6, 1e6, -10, 10},
      {OP_ADD, CLT_BOOL, CLT_I32, 0, 1, -1000, 1000},
      {OP_MUL, CLT_U8, CLT_BOOL, 0, 255, 0, 1},
      {OP_SUB, CLT_F32, CLT_BOOL, -10, 10, 0, 1},
      {OP_DIV, CLT_I32, CLT_I64, -1000, 1000, 1, 50},
      {OP_DIV, CLT_U8, CLT_F32, 0, 255, 1, 10},
      {OP_DIV, CLT_F64, CLT_I32, -10, 10, 1, 1000},
  };
  int64_t shape[1] = {301};
  cu_rng r;
  cu_rng_seed(&r, 88);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    clt_dtype da = cases[c].a, db = cases[c].b;
    void *a = cu_malloc(301 * clt_dtype_size(da)), *b = cu_malloc(301 * clt_dtype_size(db));
    cu_fill(a, da, 301, &r, cases[c].alo, cases[c].ahi, 0);
    cu_fill(b, db, 301, &r, cases[c].blo, cases[c].bhi, cases[c].op == OP_DIV ? CU_NONZERO : 0);
    for (int d = 0; d < ndev; d++) {
      if (!cu_dtype_ok("test_mixed_dtypes", devs[d], da) ||
          !cu_dtype_ok("test_mixed_dtypes", devs[d], db))
        continue;
      char what[96];
      snprintf(what, sizeof what, "%s(%s, %s) on %s", op_names[cases[c].op], cu_dt_name(da),
               cu_dt_name(db), cu_dev_name(devs[d]));
      clt_tensor *ta = cu_tensor(a, da, 1, shape, devs[d]);
      clt_tensor *tb = cu_tensor(b, db, 1, shape, devs[d]);
      clt_tensor *out = NULL;
      CU_OK(op_fns[cases[c].op](ta, tb, &out));
      check_result(cases[c].op, out, a, da, 1, shape, b, db, 1, shape, what);
      clt_tensor_release(out);
      clt_tensor_release(ta);
      clt_tensor_release(tb);
    }
    free(a);
    free(b);
  }
  /* The header's examples, by value. */
  for (int d = 0; d < ndev; d++) {
    int32_t ia[2] = {3, -4};
    float fb[2] = {0.5f, 0.25f};
    uint8_t ua[2] = {250, 7};
    int32_t ib[2] = {10, -8};
    int64_t two[1] = {2};
    clt_tensor *x = cu_tensor(ia, CLT_I32, 1, two, devs[d]);
    clt_tensor *y = cu_tensor(fb, CLT_F32, 1, two, devs[d]);
    clt_tensor *u = cu_tensor(ua, CLT_U8, 1, two, devs[d]);
    clt_tensor *v = cu_tensor(ib, CLT_I32, 1, two, devs[d]);
    clt_tensor *o = NULL;
    CU_OK(clt_add(x, y, &o));
    ck_assert_int_eq(clt_tensor_dtype(o), CLT_F32);
    float f[2];
    CU_OK(clt_tensor_read(o, f, sizeof f));
    ck_assert_msg(f[0] == 3.5f && f[1] == -3.75f, "i32 + f32 on %s: %g %g", cu_dev_name(devs[d]),
                  (double)f[0], (double)f[1]);
    clt_tensor_release(o);
    CU_OK(clt_add(u, v, &o));
    ck_assert_int_eq(clt_tensor_dtype(o), CLT_I32);
    int32_t i[2];
    CU_OK(clt_tensor_read(o, i, sizeof i));
    ck_assert_msg(i[0] == 260 && i[1] == -1, "u8 + i32 on %s: %d %d", cu_dev_name(devs[d]), i[0],
                  i[1]);
    clt_tensor_release(o);
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_tensor_release(u);
    clt_tensor_release(v);
  }
}
END_TEST

START_TEST(test_bool_logic) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  uint8_t a[4] = {0, 0, 1, 1}, b[4] = {0, 1, 0, 1};
  uint8_t want_or[4] = {0, 1, 1, 1}, want_and[4] = {0, 0, 0, 1};
  int64_t shape[1] = {4};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *ta = cu_tensor(a, CLT_BOOL, 1, shape, devs[d]);
    clt_tensor *tb = cu_tensor(b, CLT_BOOL, 1, shape, devs[d]);
    clt_tensor *out = NULL;
    uint8_t got[4];
    CU_OK(clt_add(ta, tb, &out));
    ck_assert_int_eq(clt_tensor_dtype(out), CLT_BOOL);
    CU_OK(clt_tensor_read(out, got, sizeof got));
    ck_assert_msg(!memcmp(got, want_or, 4), "bool add on %s: %d %d %d %d (expected or)",
                  cu_dev_name(devs[d]), got[0], got[1], got[2], got[3]);
    clt_tensor_release(out);
    /* true + true stays true (1), also when added again */
    clt_tensor *out2 = NULL;
    CU_OK(clt_add(ta, ta, &out));
    CU_OK(clt_add(out, ta, &out2));
    CU_OK(clt_tensor_read(out2, got, sizeof got));
    ck_assert_msg(got[2] == 1 && got[3] == 1 && got[0] == 0,
                  "bool add of true three times on %s: %d", cu_dev_name(devs[d]), got[3]);
    clt_tensor_release(out);
    clt_tensor_release(out2);
    CU_OK(clt_mul(ta, tb, &out));
    ck_assert_int_eq(clt_tensor_dtype(out), CLT_BOOL);
    CU_OK(clt_tensor_read(out, got, sizeof got));
    ck_assert_msg(!memcmp(got, want_and, 4), "bool mul on %s: %d %d %d %d (expected and)",
                  cu_dev_name(devs[d]), got[0], got[1], got[2], got[3]);
    clt_tensor_release(out);
    out = CU_SENTINEL;
    CU_FAILS(clt_sub(ta, tb, &out), CLT_ERR_DTYPE, "clt_sub");
    ck_assert_ptr_eq(out, CU_SENTINEL);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
  }
}
END_TEST

START_TEST(test_large) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  const int64_t n = (INT64_C(1) << 20) + 37; /* not a multiple of 64 */
  int64_t shape[1] = {n};
  cu_rng r;
  cu_rng_seed(&r, 99);
  float *a = cu_malloc((size_t)n * 4), *b = cu_malloc((size_t)n * 4);
  cu_fill(a, CLT_F32, n, &r, -10, 10, 0);
  cu_fill(b, CLT_F32, n, &r, -10, 10, 0);
  int32_t *ia = cu_malloc((size_t)n * 4), *ib = cu_malloc((size_t)n * 4);
  cu_fill(ia, CLT_I32, n, &r, -100000, 100000, 0);
  cu_fill(ib, CLT_I32, n, &r, -100000, 100000, 0);
  for (int d = 0; d < ndev; d++) {
    clt_tensor *ta = cu_tensor(a, CLT_F32, 1, shape, devs[d]);
    clt_tensor *tb = cu_tensor(b, CLT_F32, 1, shape, devs[d]);
    for (int op = OP_ADD; op <= OP_MUL; op += 2) {
      char what[64];
      snprintf(what, sizeof what, "large %s f32 on %s", op_names[op], cu_dev_name(devs[d]));
      clt_tensor *out = NULL;
      CU_OK(op_fns[op](ta, tb, &out));
      check_result(op, out, a, CLT_F32, 1, shape, b, CLT_F32, 1, shape, what);
      clt_tensor_release(out);
    }
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    ta = cu_tensor(ia, CLT_I32, 1, shape, devs[d]);
    tb = cu_tensor(ib, CLT_I32, 1, shape, devs[d]);
    char what[64];
    snprintf(what, sizeof what, "large sub i32 on %s", cu_dev_name(devs[d]));
    clt_tensor *out = NULL;
    CU_OK(clt_sub(ta, tb, &out));
    check_result(OP_SUB, out, ia, CLT_I32, 1, shape, ib, CLT_I32, 1, shape, what);
    clt_tensor_release(out);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
  }
  free(a);
  free(b);
  free(ia);
  free(ib);
}
END_TEST

START_TEST(test_wraparound) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t two[1] = {2};
  for (int d = 0; d < ndev; d++) {
    const char *dn = cu_dev_name(devs[d]);
    int32_t a32[2] = {INT32_MAX, INT32_MIN}, b32[2] = {1, 1}, m32[2] = {65536, 65536};
    clt_tensor *ta = cu_tensor(a32, CLT_I32, 1, two, devs[d]);
    clt_tensor *tb = cu_tensor(b32, CLT_I32, 1, two, devs[d]);
    clt_tensor *tm = cu_tensor(m32, CLT_I32, 1, two, devs[d]);
    clt_tensor *out = NULL;
    int32_t g32[2];
    CU_OK(clt_add(ta, tb, &out));
    CU_OK(clt_tensor_read(out, g32, sizeof g32));
    ck_assert_msg(g32[0] == INT32_MIN, "i32 INT32_MAX + 1 on %s gave %d", dn, g32[0]);
    ck_assert_msg(g32[1] == INT32_MIN + 1, "i32 INT32_MIN + 1 on %s gave %d", dn, g32[1]);
    clt_tensor_release(out);
    CU_OK(clt_sub(tb, ta, &out)); /* 1 - INT32_MAX, 1 - INT32_MIN */
    CU_OK(clt_tensor_read(out, g32, sizeof g32));
    ck_assert_msg(g32[0] == -INT32_MAX + 1 && g32[1] == INT32_MIN + 1,
                  "i32 1 - INT32_MIN on %s gave %d", dn, g32[1]);
    clt_tensor_release(out);
    CU_OK(clt_mul(tm, tm, &out));
    CU_OK(clt_tensor_read(out, g32, sizeof g32));
    ck_assert_msg(g32[0] == 0, "i32 65536 * 65536 on %s gave %d", dn, g32[0]);
    clt_tensor_release(out);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(tm);

    int64_t a64[2] = {INT64_MAX, INT64_MIN}, b64[2] = {1, -1}, g64[2];
    ta = cu_tensor(a64, CLT_I64, 1, two, devs[d]);
    tb = cu_tensor(b64, CLT_I64, 1, two, devs[d]);
    CU_OK(clt_add(ta, tb, &out));
    CU_OK(clt_tensor_read(out, g64, sizeof g64));
    ck_assert_msg(g64[0] == INT64_MIN && g64[1] == INT64_MAX,
                  "i64 INT64_MAX + 1, INT64_MIN - 1 on %s gave %lld, %lld", dn, (long long)g64[0],
                  (long long)g64[1]);
    clt_tensor_release(out);
    clt_tensor_release(ta);
    clt_tensor_release(tb);

    uint8_t a8[2] = {255, 0}, b8[2] = {1, 1}, g8[2];
    ta = cu_tensor(a8, CLT_U8, 1, two, devs[d]);
    tb = cu_tensor(b8, CLT_U8, 1, two, devs[d]);
    CU_OK(clt_add(ta, tb, &out));
    CU_OK(clt_tensor_read(out, g8, sizeof g8));
    ck_assert_msg(g8[0] == 0 && g8[1] == 1, "u8 255 + 1 on %s gave %d", dn, g8[0]);
    clt_tensor_release(out);
    CU_OK(clt_sub(tb, ta, &out)); /* 1 - 255, 1 - 0 */
    CU_OK(clt_tensor_read(out, g8, sizeof g8));
    ck_assert_msg(g8[0] == 2 && g8[1] == 1, "u8 1 - 255 on %s gave %d", dn, g8[0]);
    clt_tensor_release(out);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
  }
}
END_TEST

Suite *elementwise_suite(void) {
  Suite *s = suite_create("elementwise");
  TCase *tc = cu_tcase("ops");
  tcase_add_loop_test(tc, test_binary, 0, NOPS);
  tcase_add_test(tc, test_broadcast);
  tcase_add_test(tc, test_mixed_dtypes);
  tcase_add_test(tc, test_bool_logic);
  tcase_add_test(tc, test_large);
  tcase_add_test(tc, test_wraparound);
  suite_add_tcase(s, tc);
  return s;
}
