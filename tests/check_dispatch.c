/* SPDX-License-Identifier: MIT */
/* check_dispatch.c - the dispatcher's rules: one device, broadcastable shapes, dtype promotion. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

typedef clt_status (*binop_fn)(clt_tensor *, clt_tensor *, clt_tensor **);
static const struct {
  const char *name, *op;
  binop_fn fn;
} ops[] = {{"clt_add", "add", clt_add},
           {"clt_sub", "sub", clt_sub},
           {"clt_mul", "mul", clt_mul},
           {"clt_div", "div", clt_div}};
#define NOPS 4

START_TEST(test_device_mismatch) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  if (ndev < 3)
    cu_skip("test_device_mismatch", "fewer than 2 OpenCL devices: testing the pairs there are");
  int64_t shape[1] = {3};
  clt_tensor *t[CU_MAX_DEVICES];
  for (int d = 0; d < ndev; d++)
    CU_OK(clt_ones(CLT_F32, 1, shape, devs[d], &t[d]));
  for (int k = 0; k < NOPS; k++) {
    for (int a = 0; a < ndev; a++) {
      for (int b = 0; b < ndev; b++) {
        if (a == b)
          continue;
        clt_tensor *out = CU_SENTINEL;
        clt_clear_error();
        clt_status s = ops[k].fn(t[a], t[b], &out);
        ck_assert_msg(s == CLT_ERR_DEVICE_MISMATCH, "%s(%s, %s) gave %s: %s", ops[k].name,
                      cu_dev_name(devs[a]), cu_dev_name(devs[b]), clt_status_name(s),
                      clt_last_error());
        ck_assert_int_eq(clt_last_status(), CLT_ERR_DEVICE_MISMATCH);
        ck_assert_msg(out == CU_SENTINEL, "%s(%s, %s) changed out", ops[k].name,
                      cu_dev_name(devs[a]), cu_dev_name(devs[b]));
        char want[256];
        snprintf(want, sizeof want,
                 "%s: expected all tensors on the same device, but found %s (argument 1) and "
                 "%s (argument 2); copy one with clt_to()",
                 ops[k].name, cu_dev_name(devs[a]), cu_dev_name(devs[b]));
        ck_assert_str_eq(clt_last_error(), want);
      }
    }
  }
  /* Same-device operands are fine everywhere. */
  for (int k = 0; k < NOPS; k++) {
    for (int d = 0; d < ndev; d++) {
      clt_tensor *out = NULL;
      clt_status s = ops[k].fn(t[d], t[d], &out);
      ck_assert_msg(s == CLT_OK, "%s on %s: %s", ops[k].name, cu_dev_name(devs[d]),
                    clt_last_error());
      ck_assert_ptr_eq(clt_tensor_device(out), devs[d]);
      double *v = cu_read_double(out);
      double want = k == 1 ? 0.0 : k == 0 ? 2.0 : 1.0;
      ck_assert_msg(v[0] == want && v[2] == want, "%s(ones, ones) on %s gave %g", ops[k].name,
                    cu_dev_name(devs[d]), v[0]);
      free(v);
      clt_tensor_release(out);
    }
  }
  for (int d = 0; d < ndev; d++)
    clt_tensor_release(t[d]);
}
END_TEST

START_TEST(test_shape_mismatch) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t s3[1] = {3}, s4[1] = {4}, s23[2] = {2, 3}, s32[2] = {3, 2};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *a = NULL, *b = NULL, *c = NULL, *e = NULL;
    CU_OK(clt_ones(CLT_F32, 1, s3, devs[d], &a));
    CU_OK(clt_ones(CLT_F32, 1, s4, devs[d], &b));
    CU_OK(clt_ones(CLT_F32, 2, s23, devs[d], &c));
    CU_OK(clt_ones(CLT_F32, 2, s32, devs[d], &e));
    for (int k = 0; k < NOPS; k++) {
      clt_tensor *out = CU_SENTINEL;
      char what[96];
      snprintf(what, sizeof what, "%s([3], [4]) on %s", ops[k].name, cu_dev_name(devs[d]));
      clt_status s = ops[k].fn(a, b, &out);
      ck_assert_msg(s == CLT_ERR_SHAPE_MISMATCH, "%s gave %s: %s", what, clt_status_name(s),
                    clt_last_error());
      ck_assert_int_eq(clt_last_status(), CLT_ERR_SHAPE_MISMATCH);
      ck_assert_msg(out == CU_SENTINEL, "%s changed out", what);
      const char *msg = clt_last_error();
      cu_assert_prefix(msg, ops[k].name, what);
      const char *p3 = strstr(msg, "[3]"), *p4 = strstr(msg, "[4]");
      ck_assert_msg(p3 && p4 && p3 < p4, "%s: message should name [3] then [4]: %s", what, msg);

      snprintf(what, sizeof what, "%s([2, 3], [3, 2]) on %s", ops[k].name, cu_dev_name(devs[d]));
      s = ops[k].fn(c, e, &out);
      ck_assert_msg(s == CLT_ERR_SHAPE_MISMATCH, "%s gave %s: %s", what, clt_status_name(s),
                    clt_last_error());
      cu_assert_prefix(clt_last_error(), ops[k].name, what);
      ck_assert_msg(out == CU_SENTINEL, "%s changed out", what);
      s = ops[k].fn(c, b, &out);
      ck_assert_msg(s == CLT_ERR_SHAPE_MISMATCH, "%s([2, 3], [4]) on %s gave %s", ops[k].name,
                    cu_dev_name(devs[d]), clt_status_name(s));
    }
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    clt_tensor_release(e);
  }
}
END_TEST

START_TEST(test_null_operands) {
  int64_t shape[1] = {3};
  clt_tensor *a = NULL;
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_cpu(), &a));
  for (int k = 0; k < NOPS; k++) {
    clt_tensor *out = CU_SENTINEL;
    clt_status s = ops[k].fn(NULL, a, &out);
    ck_assert_msg(s == CLT_ERR_INVALID_ARGUMENT, "%s(NULL, a) gave %s", ops[k].name,
                  clt_status_name(s));
    cu_assert_prefix(clt_last_error(), ops[k].name, "NULL argument 1");
    s = ops[k].fn(a, NULL, &out);
    ck_assert_msg(s == CLT_ERR_INVALID_ARGUMENT, "%s(a, NULL) gave %s", ops[k].name,
                  clt_status_name(s));
    cu_assert_prefix(clt_last_error(), ops[k].name, "NULL argument 2");
    s = ops[k].fn(a, a, NULL);
    ck_assert_msg(s == CLT_ERR_INVALID_ARGUMENT, "%s(a, a, NULL) gave %s", ops[k].name,
                  clt_status_name(s));
    cu_assert_prefix(clt_last_error(), ops[k].name, "NULL out");
    ck_assert_ptr_eq(out, CU_SENTINEL);
  }
  clt_tensor *out = CU_SENTINEL;
  CU_FAILS(clt_sum(NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_sum");
  CU_FAILS(clt_sum(a, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_sum");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  clt_tensor_release(a);
}
END_TEST

START_TEST(test_result_dtype_examples) {
  static const struct {
    const char *op;
    clt_dtype a, b;
    clt_status status;
    clt_dtype want;
  } cases[] = {
      {"add", CLT_F32, CLT_I64, CLT_OK, CLT_F32},
      {"add", CLT_I64, CLT_F32, CLT_OK, CLT_F32},
      {"add", CLT_F32, CLT_F64, CLT_OK, CLT_F64},
      {"mul", CLT_F64, CLT_F32, CLT_OK, CLT_F64},
      {"add", CLT_U8, CLT_I32, CLT_OK, CLT_I32},
      {"sub", CLT_I32, CLT_U8, CLT_OK, CLT_I32},
      {"add", CLT_I32, CLT_I64, CLT_OK, CLT_I64},
      {"mul", CLT_I64, CLT_I32, CLT_OK, CLT_I64},
      {"add", CLT_BOOL, CLT_U8, CLT_OK, CLT_U8},
      {"add", CLT_BOOL, CLT_BOOL, CLT_OK, CLT_BOOL},
      {"mul", CLT_BOOL, CLT_BOOL, CLT_OK, CLT_BOOL},
      {"div", CLT_I32, CLT_I32, CLT_OK, CLT_F32},
      {"div", CLT_F64, CLT_I32, CLT_OK, CLT_F64},
      {"div", CLT_BOOL, CLT_BOOL, CLT_OK, CLT_F32},
      {"div", CLT_U8, CLT_I64, CLT_OK, CLT_F32},
      {"div", CLT_F32, CLT_F32, CLT_OK, CLT_F32},
      {"add", CLT_U8, CLT_U8, CLT_OK, CLT_U8},
      {"add", CLT_BOOL, CLT_F64, CLT_OK, CLT_F64},
      {"sub", CLT_BOOL, CLT_BOOL, CLT_ERR_DTYPE, CLT_F32},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    clt_dtype out = (clt_dtype)99;
    clt_status s = clt_result_dtype(cases[i].op, cases[i].a, cases[i].b, &out);
    ck_assert_msg(s == cases[i].status, "clt_result_dtype(%s, %s, %s) gave %s, expected %s (%s)",
                  cases[i].op, cu_dt_name(cases[i].a), cu_dt_name(cases[i].b), clt_status_name(s),
                  clt_status_name(cases[i].status), clt_last_error());
    if (s == CLT_OK)
      ck_assert_msg(out == cases[i].want, "clt_result_dtype(%s, %s, %s) gave %s, expected %s",
                    cases[i].op, cu_dt_name(cases[i].a), cu_dt_name(cases[i].b), cu_dt_name(out),
                    cu_dt_name(cases[i].want));
    else {
      ck_assert_msg(out == (clt_dtype)99, "failed clt_result_dtype changed out");
      cu_assert_prefix(clt_last_error(), "clt_result_dtype", "sub bool bool");
    }
  }
  clt_dtype out = (clt_dtype)99;
  ck_assert_int_ne(clt_result_dtype("frobnicate", CLT_F32, CLT_F32, &out), CLT_OK);
  ck_assert_int_ne(clt_result_dtype("exp", CLT_F32, CLT_F32, &out), CLT_OK); /* unary */
  ck_assert_int_ne(clt_result_dtype("add", (clt_dtype)42, CLT_F32, &out), CLT_OK);
  ck_assert_int_eq(out, 99);
  CU_FAILS(clt_result_dtype(NULL, CLT_F32, CLT_F32, &out), CLT_ERR_INVALID_ARGUMENT,
           "clt_result_dtype");
  CU_FAILS(clt_result_dtype("add", CLT_F32, CLT_F32, NULL), CLT_ERR_INVALID_ARGUMENT,
           "clt_result_dtype");
}
END_TEST

/* The promotion rules of clt.h, written independently: -1 for "refused". */
static int rank_int(clt_dtype d) { return d == CLT_U8 ? 1 : d == CLT_I32 ? 2 : 3; /* I64 */ }

static int promote(const char *op, clt_dtype a, clt_dtype b) {
  int fa = cu_is_float(a), fb = cu_is_float(b);
  if (a == CLT_BOOL && b == CLT_BOOL) {
    if (!strcmp(op, "sub"))
      return -1;
    return !strcmp(op, "div") ? CLT_F32 : CLT_BOOL;
  }
  clt_dtype r;
  if (fa && fb && a == b)
    r = a;
  else if (fa && fb) /* f64 beats f32 beats f16 and bf16; f16 with bf16 is f32 */
    r = (a == CLT_F64 || b == CLT_F64) ? CLT_F64 : CLT_F32;
  else if (fa)
    r = a;
  else if (fb)
    r = b;
  else if (a == CLT_BOOL)
    r = b;
  else if (b == CLT_BOOL)
    r = a;
  else
    r = rank_int(a) >= rank_int(b) ? a : b;
  if (!strcmp(op, "div") && !cu_is_float(r))
    r = CLT_F32;
  return (int)r;
}

START_TEST(test_result_dtype_table) {
  static const char *opnames[NOPS] = {"add", "sub", "mul", "div"};
  for (int k = 0; k < NOPS; k++) {
    for (int a = 0; a < CLT_DTYPE_COUNT; a++) {
      for (int b = 0; b < CLT_DTYPE_COUNT; b++) {
        int want = promote(opnames[k], (clt_dtype)a, (clt_dtype)b);
        clt_dtype out = (clt_dtype)99;
        clt_status s = clt_result_dtype(opnames[k], (clt_dtype)a, (clt_dtype)b, &out);
        if (want < 0)
          ck_assert_msg(s == CLT_ERR_DTYPE, "%s(%s, %s) gave %s, expected ERR_DTYPE", opnames[k],
                        cu_dt_name((clt_dtype)a), cu_dt_name((clt_dtype)b), clt_status_name(s));
        else
          ck_assert_msg(s == CLT_OK && out == (clt_dtype)want, "%s(%s, %s) gave %s %s, expected %s",
                        opnames[k], cu_dt_name((clt_dtype)a), cu_dt_name((clt_dtype)b),
                        clt_status_name(s), cu_dt_name(out), cu_dt_name((clt_dtype)want));
      }
    }
  }
}
END_TEST

/* The operations themselves follow clt_result_dtype, and refuse what it refuses. */
START_TEST(test_op_dtypes) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[1] = {2};
  for (int d = 0; d < ndev; d++) {
    clt_tensor *t[CLT_DTYPE_COUNT] = {NULL};
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++)
      if (clt_device_has_fp64(devs[d]) || dt != CLT_F64)
        CU_OK(clt_ones((clt_dtype)dt, 1, shape, devs[d], &t[dt]));
    for (int k = 0; k < NOPS; k++) {
      for (int a = 0; a < CLT_DTYPE_COUNT; a++) {
        for (int b = 0; b < CLT_DTYPE_COUNT; b++) {
          if (!t[a] || !t[b])
            continue;
          clt_dtype want = (clt_dtype)99;
          clt_status ws = clt_result_dtype(ops[k].op, (clt_dtype)a, (clt_dtype)b, &want);
          clt_tensor *out = CU_SENTINEL;
          clt_status s = ops[k].fn(t[a], t[b], &out);
          char what[96];
          snprintf(what, sizeof what, "%s(%s, %s) on %s", ops[k].name, cu_dt_name((clt_dtype)a),
                   cu_dt_name((clt_dtype)b), cu_dev_name(devs[d]));
          ck_assert_msg(s == ws, "%s gave %s, clt_result_dtype says %s (%s)", what,
                        clt_status_name(s), clt_status_name(ws), clt_last_error());
          if (s != CLT_OK) {
            ck_assert_msg(out == CU_SENTINEL, "%s changed out", what);
            cu_assert_prefix(clt_last_error(), ops[k].name, what);
            continue;
          }
          cu_assert_meta(out, want, devs[d], 1, shape, what);
          double *v = cu_read_double(out);
          double expect = k == 0 ? 2.0 : k == 1 ? 0.0 : 1.0;
          if (k == 0 && want == CLT_BOOL)
            expect = 1.0; /* true or true */
          ck_assert_msg(v[0] == expect && v[1] == expect, "%s gave %g, expected %g", what, v[0],
                        expect);
          free(v);
          clt_tensor_release(out);
        }
      }
    }
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++)
      clt_tensor_release(t[dt]);
  }
}
END_TEST

Suite *dispatch_suite(void) {
  Suite *s = suite_create("dispatch");
  TCase *tc = cu_tcase("rules");
  tcase_add_test(tc, test_device_mismatch);
  tcase_add_test(tc, test_shape_mismatch);
  tcase_add_test(tc, test_null_operands);
  tcase_add_test(tc, test_result_dtype_examples);
  tcase_add_test(tc, test_result_dtype_table);
  tcase_add_test(tc, test_op_dtypes);
  suite_add_tcase(s, tc);
  return s;
}
