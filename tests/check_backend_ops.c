/* SPDX-License-Identifier: MIT */
/* check_backend_ops.c - every elementwise operation of the table (include/clt_ops.h) x every
 * dtype x every device x shapes from 0-d and empty to broadcast and large, generated from the
 * table itself, in the manner of ggml's test-backend-ops:
 * - float results against a reference computed here in long double from the same operands,
 *   within the ulps the table allows the op;
 * - integer and bool results exactly against the host's (cpu) result, and where no integer
 *   overflow can occur, against the long double reference too;
 * - dtypes the op refuses fail with CLT_ERR_DTYPE, on every device alike.
 * Each op is a TCase named after it: CK_RUN_SUITE=backend_ops CK_RUN_CASE=erf runs erf's.
 * The same TCase holds the op's own values, computed independently (Python's math module, or
 * by hand), in `known` below: the reference shares the table's expression, so it alone could
 * not catch a wrong expression.
 */
#define _POSIX_C_SOURCE 200809L

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "backend.h" /* clt__program_count */
#include "check_util.h"

/* ---- the table, as the test sees it ------------------------------------------------------- */

#define CLT_NA 0
typedef long double ld;
typedef clt_status (*fn1)(clt_tensor *, clt_tensor **);
typedef clt_status (*fn2)(clt_tensor *, clt_tensor *, clt_tensor **);
typedef clt_status (*fn3)(clt_tensor *, clt_tensor *, clt_tensor *, clt_tensor **);

typedef struct op_row {
  const char *name;
  int arity;
  int rule; /* 0 promote, 1 float, 2 bool */
  int cond; /* where: the first operand is bool */
  int ulps;
  int has[3]; /* float, integer, bool expression */
  void (*fn)(void);
  ld (*ref)(ld a, ld b, ld c);
  double (*ref_d)(double a, double b, double c);
} op_row;

#define RULE_PROMOTE 0
#define RULE_FLOAT 1
#define RULE_BOOL 2
#define ISCOND_COND 1
#define ISCOND_PLAIN 0
#define ISCOND_WRAP 0
#define ISCOND_WRAP_INPLACE 0
#define ISCOND_INPLACE 0
#define HAS(s) (strcmp(s, "CLT_NA") != 0) /* s: the column, stringified unexpanded */

/* The float expression in long double: the reference; and in double, for f64 results that must
 * be exact (add, mul, ...), where a long double result rounded again to double could be off by
 * one (double rounding). */
#define REF_(name_, arity_, rule_, form_, fe, ie, be, ulps_, doc_)                                \
  static ld ref_##name_(ld a, ld b, ld c) {                                                        \
    typedef ld TC;                                                                                 \
    (void)a, (void)b, (void)c;                                                                     \
    return (ld)(fe);                                                                               \
  }                                                                                                \
  static double ref_d_##name_(double a, double b, double c) {                                      \
    typedef double TC;                                                                             \
    (void)a, (void)b, (void)c;                                                                     \
    return (double)(fe);                                                                           \
  }
/* The table's float helpers, as kernels/common.cl defines them: -0 below +0. */
#define CLT_FMAX(a, b) ((a) > (b) || ((a) == (b) && signbit(b)) ? (a) : (b))
#define CLT_FMIN(a, b) ((a) < (b) || ((a) == (b) && signbit(a)) ? (a) : (b))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-local-typedefs"
CLT_ELEMENTWISE_OPS(REF_)
#pragma GCC diagnostic pop

#define ROW_(name_, arity_, rule_, form_, fe, ie, be, ulps_, doc_)                                \
  {.name = #name_,                                                                                 \
   .arity = arity_,                                                                                \
   .rule = RULE_##rule_,                                                                           \
   .cond = ISCOND_##form_,                                                                         \
   .ulps = ulps_,                                                                                  \
   .has = {HAS(#fe), HAS(#ie), HAS(#be)},                                                             \
   .fn = (void (*)(void))clt_##name_,                                                              \
   .ref = ref_##name_,                                                                             \
   .ref_d = ref_d_##name_},
static op_row rows[] = {CLT_ELEMENTWISE_OPS(ROW_)};
#define NROWS ((int)(sizeof rows / sizeof *rows))

static clt_status run_op(const op_row *op, clt_tensor *const *in, clt_tensor **out) {
  switch (op->arity) {
  case 1:
    return ((fn1)op->fn)(in[0], out);
  case 2:
    return ((fn2)op->fn)(in[0], in[1], out);
  default:
    return ((fn3)op->fn)(in[0], in[1], in[2], out);
  }
}

static int kind_of(clt_dtype dt) { return dt == CLT_BOOL ? 2 : cu_is_float(dt) ? 0 : 1; }

/* The result dtype the table's rule gives for operands of dtype dt (all alike), or -1 where the
 * op refuses it. */
static int result_dtype(const op_row *op, clt_dtype dt) {
  clt_dtype compute = dt;
  if (op->rule == RULE_FLOAT && !cu_is_float(dt))
    compute = CLT_F32;
  if (!op->has[kind_of(compute)])
    return -1;
  return op->rule == RULE_BOOL ? CLT_BOOL : (int)compute;
}

/* ---- shapes -------------------------------------------------------------------------------- */

typedef struct shape_case {
  const char *what;
  int nd[3];
  int64_t s[3][3];
  bool large;
} shape_case;

static const shape_case shapes[] = {
    {"0-d", {0, 0, 0}, {{0}}, false},
    {"empty", {1, 1, 1}, {{0}, {0}, {0}}, false},
    {"odd", {2, 2, 2}, {{7, 5}, {7, 5}, {7, 5}}, false},
    {"broadcast", {3, 2, 1}, {{4, 1, 3}, {5, 1}, {3}}, false},
    {"scalar operand", {1, 0, 0}, {{9}}, false},
    /* above CLT__PAR_MIN (2^16), so that the host splits it among threads */
    {"large", {1, 1, 1}, {{(1 << 16) + 3}, {(1 << 16) + 3}, {(1 << 16) + 3}}, true},
};
#define NSHAPES ((int)(sizeof shapes / sizeof *shapes))

/* Inputs: floats in [-3, 3) with some exact specials, integers small enough that add, sub and
 * mul cannot overflow, bool 0/1. Operand k of the where condition is bool. */
static void fill(void *buf, clt_dtype dt, int64_t n, cu_rng *r) {
  if (dt == CLT_U8)
    cu_fill(buf, dt, n, r, 0, 12, 0);
  else if (cu_is_float(dt))
    cu_fill(buf, dt, n, r, -3, 3, 0);
  else
    cu_fill(buf, dt, n, r, -11, 11, 0);
  if (cu_is_float(dt) && n > 8) {
    static const double special[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, NAN};
    for (int i = 0; i < 8; i++)
      cu_set(buf, dt, i * (n / 8), special[i]);
  }
}

/* One unit in the last place of v's magnitude in dt (the smallest normal's near 0). */
static ld ulp_of(ld v, clt_dtype dt) {
  int bits = dt == CLT_F32 ? 24 : dt == CLT_F64 ? 53 : dt == CLT_F16 ? 11 : 8;
  ld tiny = dt == CLT_F32 || dt == CLT_BF16 ? (ld)FLT_MIN
            : dt == CLT_F64                 ? (ld)DBL_MIN
                                            : ldexpl(1.0L, -14);
  ld m = fabsl(v) > tiny ? fabsl(v) : tiny;
  int e;
  frexpl(m, &e);
  return ldexpl(1.0L, e - bits);
}

/* v rounded to dt, as the device stores it. */
static ld round_to(ld v, clt_dtype dt) {
  if (dt == CLT_F32)
    return (ld)(float)v;
  if (dt == CLT_F64)
    return (ld)(double)v;
  if (dt == CLT_F16 || dt == CLT_BF16)
    return (ld)cu_round_narrow((double)v, dt);
  return v;
}

/* The error allowed in a result of dtype dt near ref, for an op the table allows `ulps` in:
 * those ulps, and for f16 and bf16 (computed in f32, rounded once to the narrow dtype) the op's
 * ulps of f32 plus one ulp of the narrow dtype: an f32 result within its ulps of the exact value
 * may round to the narrow neighbour of the exactly rounded one, never further. */
static ld allowed(ld ref, clt_dtype dt, int ulps) {
  if (dt == CLT_F16 || dt == CLT_BF16)
    return (ld)ulps * ulp_of(ref, CLT_F32) + ulp_of(ref, dt);
  return (ld)ulps * ulp_of(ref, dt);
}

/* ---- the generated test -------------------------------------------------------------------
 * Per element, a check calls Check only when it fails: in fork mode every passing ck_assert
 * writes a message to the parent, which for 10^7 elements cost most of the suite's time. */

/* One op x dtype x shape on every device; returns the number of elements checked. */
static int64_t check_case(const op_row *op, clt_dtype dt, const shape_case *sc, clt_device **devs,
                          int ndev, cu_rng *r) {
  int n = op->arity;
  int nd[3] = {0, 0, 0};
  const int64_t *shp[3] = {NULL, NULL, NULL};
  clt_dtype dts[3];
  void *host[3] = {NULL, NULL, NULL};
  for (int k = 0; k < n; k++) {
    /* with arity 1 the unary op takes the first shape; with 2 the first two */
    nd[k] = sc->nd[k];
    shp[k] = sc->s[k];
    dts[k] = (op->cond && k == 0) ? CLT_BOOL : dt;
    int64_t cnt = cu_numel(nd[k], shp[k]);
    host[k] = cu_malloc((size_t)cnt * clt_dtype_size(dts[k]) + 1);
    fill(host[k], dts[k], cnt, r);
  }
  /* the result's shape */
  int64_t oshape[CLT_MAX_DIMS];
  int ond = nd[0];
  memcpy(oshape, shp[0], sizeof(int64_t) * (size_t)nd[0]);
  for (int k = 1; k < n; k++) {
    int64_t tmp[CLT_MAX_DIMS];
    ond = cu_broadcast(ond, oshape, nd[k], shp[k], tmp);
    ck_assert_int_ge(ond, 0);
    memcpy(oshape, tmp, sizeof(int64_t) * (size_t)ond);
  }
  int64_t on = cu_numel(ond, oshape);
  int want_dt = result_dtype(op, dt);
  void *host_result = NULL; /* the cpu's, which the other devices must match (integers) */
  int64_t checked = 0;
  for (int d = 0; d < ndev; d++) {
    if (!clt_device_is_host(devs[d]) && dt == CLT_F64 && !clt_device_has_fp64(devs[d]))
      continue;
    if (sc->large && cu_is_oclgrind(devs[d]))
      continue; /* Oclgrind interprets: the small shapes cover its kernels */
    clt_tensor *in[3] = {NULL, NULL, NULL}, *out = NULL;
    for (int k = 0; k < n; k++)
      in[k] = cu_tensor(host[k], dts[k], nd[k], shp[k], devs[d]);
    clt_status st = run_op(op, in, &out);
    if (want_dt < 0) {
      ck_assert_msg(st == CLT_ERR_DTYPE, "clt_%s on %s %s gave %s, expected CLT_ERR_DTYPE",
                    op->name, cu_dt_name(dt), cu_dev_name(devs[d]), clt_status_name(st));
      char fn[64];
      snprintf(fn, sizeof fn, "clt_%s", op->name);
      cu_assert_prefix(clt_last_error(), fn, op->name);
    } else {
      ck_assert_msg(st == CLT_OK, "clt_%s on %s %s %s: %s", op->name, cu_dt_name(dt), sc->what,
                    cu_dev_name(devs[d]), clt_last_error());
      cu_assert_meta(out, (clt_dtype)want_dt, devs[d], ond, oshape, op->name);
      void *got = cu_read(out);
      for (int64_t i = 0; i < on; i++) {
        ld v[3] = {0, 0, 0};
        bool exact_ref = true; /* no integer overflow possible in the reference */
        for (int k = 0; k < n; k++) {
          int64_t j = cu_bindex(i, ond, oshape, nd[k], shp[k]);
          clt_dtype kd = dts[k];
          if (op->rule == RULE_FLOAT && !cu_is_float(kd) && !(op->cond && k == 0))
            v[k] = (ld)(float)cu_get(host[k], kd, j); /* integers compute in f32 */
          else
            v[k] = cu_is_float(kd) ? (ld)cu_get(host[k], kd, j) : (ld)cu_get_i64(host[k], kd, j);
        }
        ld g = cu_is_float((clt_dtype)want_dt) ? (ld)cu_get(got, (clt_dtype)want_dt, i)
                                               : (ld)cu_get_i64(got, (clt_dtype)want_dt, i);
        if (cu_is_float((clt_dtype)want_dt)) {
          ld ref = want_dt == CLT_F64 && op->ulps == 0
                       ? (ld)op->ref_d((double)v[0], (double)v[1], (double)v[2])
                       : round_to(op->ref(v[0], v[1], v[2]), (clt_dtype)want_dt);
          /* NaN and infinities are told apart in double: valgrind runs long double at 64 bits
           * and does not keep its infinities */
          double rd = (double)ref, gd = (double)g;
          bool ok;
          if (isnan(rd))
            ok = isnan(gd);
          else if (isinf(rd) || isinf(gd))
            ok = gd == rd;
          else
            ok = fabsl(g - ref) <= allowed(ref, (clt_dtype)want_dt, op->ulps) ||
                 (op->ulps == 0 && g == ref);
          if (!ok)
            ck_abort_msg(
                        "clt_%s(%Lg, %Lg, %Lg) on %s %s (%s) [%lld]: got %.17Lg, reference "
                        "%.17Lg (%d ulps allowed)",
                        op->name, v[0], v[1], v[2], cu_dev_name(devs[d]), cu_dt_name(dt), sc->what,
                        (long long)i, g, ref, op->ulps);
        } else {
          if (!host_result) {
            if (!clt_device_is_host(devs[d]))
              ck_abort_msg("the cpu comes first");
          } else {
            ld h = (ld)cu_get_i64(host_result, (clt_dtype)want_dt, i);
            if (g != h)
              ck_abort_msg("clt_%s on %s (%s) [%lld]: %s gives %.0Lf, cpu %.0Lf", op->name,
                          cu_dt_name(dt), sc->what, (long long)i, cu_dev_name(devs[d]), g, h);
          }
          /* pow of integers wraps and truncates: the host is its oracle (check_ops.c has its
           * independent cases); everything else here is small enough to be exact */
          exact_ref = strcmp(op->name, "pow") != 0 && strcmp(op->name, "neg") != 0;
          if (exact_ref && dt != CLT_U8) {
            ld ref = op->has[0] ? op->ref(v[0], v[1], v[2]) : g;
            if (want_dt == CLT_BOOL)
              ref = ref != 0;
            if (g != ref)
              ck_abort_msg("clt_%s(%Lg, %Lg, %Lg) on %s %s [%lld]: got %Lg, expected %Lg",
                          op->name, v[0], v[1], v[2], cu_dev_name(devs[d]), cu_dt_name(dt),
                          (long long)i, g, ref);
          }
        }
        checked++;
      }
      if (!host_result && clt_device_is_host(devs[d]))
        host_result = got;
      else
        free(got);
    }
    clt_tensor_release(out);
    for (int k = 0; k < n; k++)
      clt_tensor_release(in[k]);
  }
  free(host_result);
  for (int k = 0; k < n; k++)
    free(host[k]);
  return checked;
}


/* ---- each op's own values ------------------------------------------------------------------ */

/* Values computed independently of clt: Python's math module in double, or by hand. The ops
 * older than the table have theirs in tests/check_ops.c. */
typedef struct known_case {
  const char *op;
  clt_dtype dt; /* of every operand (the condition of where excepted) */
  double a[6], b[6], c[6];
  double want[6];
} known_case;

static const known_case known[] = {
    {"erf", CLT_F32, {-2.5, -0.75, 0.3, 1.5, 2.5, 3.0}, {0}, {0},
     {-0.999593047982555, -0.7111556336535151, 0.3286267594591274, 0.9661051464753108,
      0.999593047982555, 0.9999779095030014}},
    {"tan", CLT_F64, {-2.5, -0.75, 0.3, 1.5, 2.5, 3.0}, {0}, {0},
     {0.7470222972386603, -0.9315964599440725, 0.30933624960962325, 14.101419947171719,
      -0.7470222972386603, -0.1425465430742778}},
    {"atan", CLT_F32, {-2.5, -0.75, 0.3, 1.5, 2.5, 3.0}, {0}, {0},
     {-1.1902899496825317, -0.6435011087932844, 0.2914567944778671, 0.982793723247329,
      1.1902899496825317, 1.2490457723982544}},
    {"log1p", CLT_F64, {-2.5, -0.75, 0.3, 1.5, 2.5, 3.0}, {0}, {0},
     {NAN, -1.3862943611198906, 0.26236426446749106, 0.9162907318741551, 1.252762968495368,
      1.3862943611198906}},
    {"expm1", CLT_F32, {-2.5, -0.75, 0.3, 1.5, 2.5, 3.0}, {0}, {0},
     {-0.9179150013761013, -0.5276334472589853, 0.3498588075760031, 3.481689070338065,
      11.182493960703473, 19.085536923187668}},
    {"rsqrt", CLT_F32, {-2.5, -0.75, 0.3, 1.5, 2.5, 0.0}, {0}, {0},
     {NAN, NAN, 1.8257418583505538, 0.8164965809277261, 0.6324555320336759, INFINITY}},
    {"atan2", CLT_F64, {-2.5, -0.75, 0.3, 1.5, 2.5, 3.0}, {-1.25, -1.25, -1.25, -1.25, -1.25, -1.25},
     {0},
     {-2.0344439357957027, -2.601173153319209, 2.90604767286893, 2.2655346029916,
      2.0344439357957027, 1.965587446494658}},
    {"floor", CLT_F32, {-2.5, -0.5, 0.5, 1.5, 2.7, -0.0}, {0}, {0}, {-3, -1, 0, 1, 2, -0.0}},
    {"floor", CLT_I32, {-7, 0, 5, 9, -1, 3}, {0}, {0}, {-7, 0, 5, 9, -1, 3}},
    {"ceil", CLT_F64, {-2.5, -0.5, 0.5, 1.5, 2.7, -0.0}, {0}, {0}, {-2, -0.0, 1, 2, 3, -0.0}},
    {"round", CLT_F32, {-2.5, -0.5, 0.5, 1.5, 2.5, 3.7}, {0}, {0}, {-2, -0.0, 0, 2, 2, 4}},
    {"trunc", CLT_F64, {-2.5, -0.5, 0.5, 1.5, 2.7, -3.9}, {0}, {0}, {-2, -0.0, 0, 1, 2, -3}},
    {"sign", CLT_F32, {-2.5, -0.0, 0.0, 1e-30, NAN, 7}, {0}, {0}, {-1, 0, 0, 1, NAN, 1}},
    {"sign", CLT_I64, {-9, 0, 4, -1, 1, 100}, {0}, {0}, {-1, 0, 1, -1, 1, 1}},
    {"clamp", CLT_F32, {-3, 0.5, 9, NAN, 2, 1}, {-1, -1, -1, -1, NAN, 5}, {1, 1, 1, 1, 1, 2},
     {-1, 0.5, 1, NAN, NAN, 2}},
    {"clamp", CLT_I32, {-3, 0, 9, 4, 2, 1}, {-1, -1, -1, -1, 3, 5}, {1, 1, 1, 1, 3, 2},
     {-1, 0, 1, 1, 3, 2}},
    {"logical_and", CLT_F32, {0, 1, NAN, -2, 0, 3}, {0, 0, 1, 0.5, 7, 2}, {0}, {0, 0, 1, 1, 0, 1}},
    {"logical_or", CLT_I32, {0, 1, 0, -2, 0, 3}, {0, 0, 5, 1, 0, 2}, {0}, {0, 1, 1, 1, 0, 1}},
    {"logical_xor", CLT_U8, {0, 1, 0, 2, 0, 3}, {0, 0, 5, 1, 0, 0}, {0}, {0, 1, 1, 0, 0, 1}},
    {"logical_not", CLT_F64, {0, 1, NAN, -0.0, -2, 0.25}, {0}, {0}, {1, 0, 0, 1, 0, 0}},
};

static void known_values(const op_row *op) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (size_t k = 0; k < sizeof known / sizeof *known; k++) {
    const known_case *kc = &known[k];
    if (strcmp(kc->op, op->name) != 0)
      continue;
    int64_t six[1] = {6};
    for (int d = 0; d < ndev; d++) {
      if (!cu_dtype_ok(op->name, devs[d], kc->dt))
        continue;
      clt_tensor *in[3] = {NULL, NULL, NULL}, *out;
      const double *vals[3] = {kc->a, kc->b, kc->c};
      for (int j = 0; j < op->arity; j++) {
        clt_dtype jd = (op->cond && j == 0) ? CLT_BOOL : kc->dt;
        void *buf = cu_malloc(6 * clt_dtype_size(jd));
        for (int e = 0; e < 6; e++)
          cu_set(buf, jd, e, vals[j][e]);
        in[j] = cu_tensor(buf, jd, 1, six, devs[d]);
        free(buf);
      }
      CU_OK(run_op(op, in, &out));
      double *got = cu_read_double(out);
      double rtol = kc->dt == CLT_F32 ? 1e-6 : kc->dt == CLT_F64 ? 1e-14 : 0;
      for (int e = 0; e < 6; e++) {
        ck_assert_msg(cu_close(got[e], kc->want[e], rtol, 0),
                      "clt_%s(%g, %g, %g) on %s (%s): got %.17g, expected %.17g", op->name,
                      kc->a[e], kc->b[e], kc->c[e], cu_dev_name(devs[d]), cu_dt_name(kc->dt),
                      got[e], kc->want[e]);
        if (kc->want[e] == 0 && cu_is_float(clt_tensor_dtype(out)))
          ck_assert_msg(signbit(got[e]) == signbit(kc->want[e]),
                        "clt_%s(%g) on %s: the sign of zero is wrong", op->name, kc->a[e],
                        cu_dev_name(devs[d]));
      }
      free(got);
      clt_tensor_release(out);
      for (int j = 0; j < op->arity; j++)
        clt_tensor_release(in[j]);
    }
  }
}

/* One fork per op (Check forks per test): the generated cases, then the known values. */
START_TEST(test_op) {
  const op_row *op = &rows[_i];
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  cu_rng r;
  cu_rng_seed(&r, 1234 + (uint64_t)_i);
  int64_t checked = 0;
  static const clt_dtype dts[] = {CLT_F32, CLT_F64,  CLT_I32, CLT_I64,
                                  CLT_U8,  CLT_BOOL, CLT_F16, CLT_BF16};
  for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
    for (int s = 0; s < NSHAPES; s++) {
      /* the large shape tests the loops' split into parts, which does not depend on the dtype:
       * one dtype of each kind of expression (float, narrow float, integer) is enough */
      bool one_per_kind = dts[t] == CLT_F32 || dts[t] == CLT_F16 || dts[t] == CLT_I32;
      if (!shapes[s].large || one_per_kind)
        checked += check_case(op, dts[t], &shapes[s], devs, ndev, &r);
    }
  ck_assert_int_gt(checked, 0);
  known_values(op);
}
END_TEST

/* Every op of the table builds in clt_kernel_cache_warm: after warming a device, running each
 * op on each dtype adds no program to the device's. */
START_TEST(test_warm_covers_table) {
  if (!cu_need_cl("test_warm_covers_table", 1))
    return;
  clt_device *dev;
  CU_OK(clt_device_get("cl:0", &dev));
  CU_OK(clt_kernel_cache_warm(dev, NULL, NULL));
  int before = clt__program_count(dev);
  int64_t shape[2] = {2, 2};
  static const clt_dtype dts[] = {CLT_F32, CLT_F64,  CLT_I32, CLT_I64,
                                  CLT_U8,  CLT_BOOL, CLT_F16, CLT_BF16};
  clt_tensor *cond;
  CU_OK(clt_ones(CLT_BOOL, 2, shape, dev, &cond));
  for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
    if (dts[t] == CLT_F64 && !clt_device_has_fp64(dev))
      continue;
    clt_tensor *a;
    CU_OK(clt_ones(dts[t], 2, shape, dev, &a));
    for (int k = 0; k < NROWS; k++) {
      clt_tensor *in[3] = {rows[k].cond ? cond : a, a, a}, *out = NULL;
      if (run_op(&rows[k], in, &out) == CLT_OK)
        clt_tensor_release(out);
      ck_assert_msg(clt__program_count(dev) == before,
                    "clt_%s on %s built a program after clt_kernel_cache_warm: the warm list "
                    "misses it",
                    rows[k].name, cu_dt_name(dts[t]));
    }
    clt_tensor_release(a);
  }
  clt_tensor_release(cond);
}
END_TEST

Suite *backend_ops_suite(void) {
  Suite *s = suite_create("backend_ops");
  for (int k = 0; k < NROWS; k++) {
    TCase *tc = cu_tcase(rows[k].name);
    tcase_add_loop_test(tc, test_op, k, k + 1);
    suite_add_tcase(s, tc);
  }
  TCase *tc = cu_tcase("warm");
  tcase_add_test(tc, test_warm_covers_table);
  suite_add_tcase(s, tc);
  return s;
}
