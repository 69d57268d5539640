/* SPDX-License-Identifier: MIT */
/* check_params.c - parameter sets (create, add, get, iterate, move in place, device) and the
 * linear layer, on cpu and every OpenCL device. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "check_util.h"

static clt_tensor *filled(double v, int ndim, const int64_t *shape, clt_device *dev) {
  clt_tensor *t;
  CU_OK(clt_full(CLT_F32, ndim, shape, v, dev, &t));
  return t;
}

START_TEST(test_basics) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    clt_params *p = CU_SENTINEL;
    CU_OK(clt_params_create(&p));
    ck_assert_uint_eq(clt_params_count(p), 0);
    int64_t sw[2] = {3, 2}, sb[1] = {3};
    clt_tensor *w = filled(1.5, 2, sw, devs[d]), *b = filled(-2, 1, sb, devs[d]);
    CU_OK(clt_params_add(p, "weight", w));
    CU_OK(clt_params_add(p, "bias", b));
    clt_tensor_release(w); /* the set holds its own references */
    clt_tensor_release(b);
    ck_assert_uint_eq(clt_params_count(p), 2);
    ck_assert_str_eq(clt_params_name_at(p, 0), "weight");
    ck_assert_str_eq(clt_params_name_at(p, 1), "bias");
    ck_assert_ptr_eq(clt_params_get(p, "weight"), clt_params_tensor_at(p, 0));
    ck_assert_ptr_eq(clt_params_get(p, "bias"), clt_params_tensor_at(p, 1));
    cu_assert_meta(clt_params_get(p, "weight"), CLT_F32, devs[d], 2, sw, "weight");
    double v;
    CU_OK(clt_sum(clt_params_get(p, "bias"), &b));
    CU_OK(clt_item(b, &v));
    clt_tensor_release(b);
    ck_assert(v == -6);
    clt_device *where = NULL;
    CU_OK(clt_params_device(p, &where));
    ck_assert_ptr_eq(where, devs[d]);

    /* Errors: a missing name, a duplicate, an index out of range, bad arguments. */
    ck_assert_ptr_null(clt_params_get(p, "nope"));
    ck_assert_int_eq(clt_last_status(), CLT_ERR_INVALID_ARGUMENT);
    cu_assert_prefix(clt_last_error(), "clt_params_get", "get missing");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "'nope'"));
    CU_FAILS(clt_params_add(p, "weight", clt_params_get(p, "bias")), CLT_ERR_INVALID_ARGUMENT,
             "clt_params_add");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "already"));
    ck_assert_uint_eq(clt_params_count(p), 2);
    CU_FAILS(clt_params_add(p, "__metadata__", clt_params_get(p, "bias")), CLT_ERR_INVALID_ARGUMENT,
             "clt_params_add");
    CU_FAILS(clt_params_add(p, "bad\xff", clt_params_get(p, "bias")), CLT_ERR_INVALID_ARGUMENT,
             "clt_params_add");
    CU_FAILS(clt_params_add(p, "", clt_params_get(p, "bias")), CLT_ERR_INVALID_ARGUMENT,
             "clt_params_add");
    CU_FAILS(clt_params_add(p, "x", NULL), CLT_ERR_INVALID_ARGUMENT, "clt_params_add");
    CU_FAILS(clt_params_add(NULL, "x", clt_params_get(p, "bias")), CLT_ERR_INVALID_ARGUMENT,
             "clt_params_add");
    ck_assert_ptr_null(clt_params_name_at(p, 2));
    ck_assert_ptr_null(clt_params_tensor_at(p, 2));
    CU_FAILS(clt_params_create(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_params_create");
    CU_FAILS(clt_params_to(p, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_params_to");
    clt_params_release(p);
  }
  clt_params_release(NULL);
  clt_params *e;
  CU_OK(clt_params_create(&e));
  clt_device *dd = CU_SENTINEL;
  CU_FAILS(clt_params_device(e, &dd), CLT_ERR_INVALID_ARGUMENT, "clt_params_device");
  ck_assert_ptr_eq(dd, CU_SENTINEL);
  CU_OK(clt_params_to(e, clt_cpu())); /* an empty set moves trivially */
  clt_params_release(e);
}
END_TEST

/* clt_params_to moves every tensor in place between every pair of devices: same handle p, new
 * tensors on dev with the same contents; an entry already there is kept as is. */
START_TEST(test_move_in_place) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  cu_rng r;
  cu_rng_seed(&r, 7);
  int64_t shape[2] = {4, 5};
  float want[20];
  cu_fill(want, CLT_F32, 20, &r, -10, 10, 0);
  for (int a = 0; a < ndev; a++)
    for (int b = 0; b < ndev; b++) {
      clt_params *p;
      CU_OK(clt_params_create(&p));
      clt_tensor *t = cu_tensor(want, CLT_F32, 2, shape, devs[a]);
      clt_tensor *u = cu_tensor(want, CLT_F32, 2, shape, devs[b]); /* already on the target */
      CU_OK(clt_params_add(p, "t", t));
      CU_OK(clt_params_add(p, "u", u));
      clt_params *same = p;
      CU_OK(clt_params_to(p, devs[b]));
      ck_assert_ptr_eq(p, same);
      clt_tensor *t2 = clt_params_get(p, "t");
      ck_assert_ptr_eq(clt_tensor_device(t2), devs[b]);
      if (a == b)
        ck_assert_ptr_eq(t2, t);
      else
        ck_assert_ptr_ne(t2, t);
      ck_assert_ptr_eq(clt_params_get(p, "u"), u);
      ck_assert_ptr_eq(clt_tensor_device(t), devs[a]); /* the caller's handle is untouched */
      float *got = cu_read(t2);
      ck_assert(memcmp(got, want, sizeof want) == 0);
      free(got);
      clt_device *where;
      CU_OK(clt_params_device(p, &where));
      ck_assert_ptr_eq(where, devs[b]);
      clt_tensor_release(t);
      clt_tensor_release(u);
      clt_params_release(p);
    }
}
END_TEST

START_TEST(test_move_atomic) {
  /* A failing move leaves the set as it was. A bad device fails before any copy; a copy that
   * fails half-way needs a device without fp64 (f64 cannot go there), which PoCL never is, so
   * that part runs only where such a device exists. */
  clt_params *p;
  CU_OK(clt_params_create(&p));
  int64_t s1[1] = {3};
  clt_tensor *t = filled(1, 1, s1, clt_cpu());
  CU_OK(clt_params_add(p, "t", t));
  char junk[64] = {0};
  CU_FAILS(clt_params_to(p, (clt_device *)junk), CLT_ERR_INVALID_ARGUMENT, "clt_params_to");
  ck_assert_ptr_eq(clt_params_get(p, "t"), t);
  for (int i = 0; i < clt_device_count(); i++) {
    clt_device *d = clt_device_at(i);
    if (clt_device_has_fp64(d))
      continue;
    clt_tensor *f;
    CU_OK(clt_zeros(CLT_F64, 1, s1, clt_cpu(), &f));
    CU_OK(clt_params_add(p, "f64", f));
    clt_tensor_release(f);
    CU_FAILS(clt_params_to(p, d), CLT_ERR_UNSUPPORTED, "clt_params_to");
    ck_assert_ptr_eq(clt_params_get(p, "t"), t);
    ck_assert_ptr_eq(clt_tensor_device(clt_params_get(p, "f64")), clt_cpu());
    break;
  }
  clt_tensor_release(t);
  clt_params_release(p);
}
END_TEST

START_TEST(test_device_spread) {
  if (!cu_need_cl("test_device_spread", 2))
    return;
  clt_params *p;
  CU_OK(clt_params_create(&p));
  int64_t s1[1] = {2};
  clt_tensor *a = filled(1, 1, s1, clt_cpu()), *b = filled(1, 1, s1, clt_device_at(0)),
             *c = filled(1, 1, s1, clt_device_at(1)), *d = filled(1, 1, s1, clt_device_at(1));
  CU_OK(clt_params_add(p, "a", a));
  CU_OK(clt_params_add(p, "b", b));
  CU_OK(clt_params_add(p, "c", c));
  CU_OK(clt_params_add(p, "d", d));
  clt_device *where = CU_SENTINEL;
  CU_FAILS(clt_params_device(p, &where), CLT_ERR_DEVICE_MISMATCH, "clt_params_device");
  ck_assert_ptr_eq(where, CU_SENTINEL);
  ck_assert_msg(strstr(clt_last_error(), "cpu ('a'), cl:0 ('b'), cl:1 ('c')") != NULL, "%s",
                clt_last_error());
  ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_params_to"));
  CU_OK(clt_params_to(p, clt_device_at(1)));
  CU_OK(clt_params_device(p, &where));
  ck_assert_ptr_eq(where, clt_device_at(1));
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(c);
  clt_tensor_release(d);
  clt_params_release(p);
}
END_TEST

/* y = x W^T + b against a host oracle, f32 and f64, with and without bias, 2-D and 3-D x. */
START_TEST(test_linear) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  cu_rng r;
  cu_rng_seed(&r, 11);
  enum { N = 7, IN = 5, OUT = 3, B = 2 };
  for (int d = 0; d < ndev; d++)
    for (int dti = 0; dti < 2; dti++)
      for (int nd = 2; nd <= 3; nd++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
          clt_dtype dt = dti ? CLT_F64 : CLT_F32;
          if (!cu_dtype_ok("test_linear", devs[d], dt))
            continue;
          int batch = nd == 3 ? B : 1;
          int64_t sx[3] = {B, N, IN}, sw[2] = {OUT, IN}, sb[1] = {OUT};
          double x[B * N * IN], w[OUT * IN], bias[OUT];
          cu_fill(x, CLT_F64, batch * N * IN, &r, -1, 1, 0);
          cu_fill(w, CLT_F64, OUT * IN, &r, -1, 1, 0);
          cu_fill(bias, CLT_F64, OUT, &r, -1, 1, 0);
          clt_tensor *tx64 = cu_tensor(x, CLT_F64, nd, nd == 3 ? sx : sx + 1, clt_cpu());
          clt_tensor *tw64 = cu_tensor(w, CLT_F64, 2, sw, clt_cpu());
          clt_tensor *tb64 = cu_tensor(bias, CLT_F64, 1, sb, clt_cpu());
          clt_tensor *tx, *tw, *tb, *hx, *hw, *hb;
          CU_OK(clt_cast(tx64, dt, &hx));
          CU_OK(clt_cast(tw64, dt, &hw));
          CU_OK(clt_cast(tb64, dt, &hb));
          CU_OK(clt_to(hx, devs[d], &tx));
          CU_OK(clt_to(hw, devs[d], &tw));
          CU_OK(clt_to(hb, devs[d], &tb));
          clt_tensor *y = NULL;
          CU_OK(clt_linear(tx, tw, with_bias ? tb : NULL, &y));
          int64_t sy[3] = {B, N, OUT};
          cu_assert_meta(y, dt, devs[d], nd, nd == 3 ? sy : sy + 1, "linear");
          double *got = cu_read_double(y);
          for (int bi = 0; bi < batch; bi++)
            for (int i = 0; i < N; i++)
              for (int o = 0; o < OUT; o++) {
                double want = with_bias ? bias[o] : 0;
                for (int k = 0; k < IN; k++)
                  want += x[(bi * N + i) * IN + k] * w[o * IN + k];
                double g = got[(bi * N + i) * OUT + o];
                ck_assert_msg(cu_close(g, want, dt == CLT_F32 ? 1e-5 : 1e-12, 1e-6),
                              "%s %s: y[%d,%d,%d] = %g, expected %g", cu_dev_name(devs[d]),
                              cu_dt_name(dt), bi, i, o, g, want);
              }
          free(got);
          clt_tensor *objs[] = {tx64, tw64, tb64, tx, tw, tb, hx, hw, hb, y};
          for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
            clt_tensor_release(objs[i]);
        }
}
END_TEST

/* Input on cpu, parameters on cl:0: the same-device rule fires with the standard message. */
START_TEST(test_linear_errors) {
  int64_t sx[2] = {4, 3}, sw[2] = {2, 3}, sb[1] = {2};
  clt_tensor *x = filled(1, 2, sx, clt_cpu()), *w = filled(1, 2, sw, clt_cpu()),
             *b = filled(1, 1, sb, clt_cpu()), *y = CU_SENTINEL;
  CU_FAILS(clt_linear(x, w, b, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linear");
  CU_FAILS(clt_linear(NULL, w, b, &y), CLT_ERR_INVALID_ARGUMENT, "clt_linear");
  int64_t sw4[2] = {2, 4};
  clt_tensor *w4 = filled(1, 2, sw4, clt_cpu());
  CU_FAILS(clt_linear(x, w4, b, &y), CLT_ERR_SHAPE_MISMATCH, "clt_linear"); /* in 3 vs 4 */
  clt_tensor_release(w4);
  CU_FAILS(clt_linear(x, w, w, &y), CLT_ERR_SHAPE_MISMATCH, "clt_linear");
  CU_FAILS(clt_linear(b, w, b, &y), CLT_ERR_SHAPE_MISMATCH, "clt_linear"); /* 1-D x */
  clt_tensor *xi;
  CU_OK(clt_cast(x, CLT_I32, &xi));
  CU_FAILS(clt_linear(xi, w, b, &y), CLT_ERR_DTYPE, "clt_linear");
  ck_assert_ptr_eq(y, CU_SENTINEL);
  clt_tensor_release(xi);
  if (cu_need_cl("test_linear_errors", 1)) {
    clt_params *model;
    CU_OK(clt_params_create(&model));
    CU_OK(clt_params_add(model, "weight", w));
    CU_OK(clt_params_add(model, "bias", b));
    CU_OK(clt_params_to(model, clt_device_at(0)));
    clt_tensor *pw = clt_params_get(model, "weight"), *pb = clt_params_get(model, "bias");
    CU_FAILS(clt_linear(x, pw, pb, &y), CLT_ERR_DEVICE_MISMATCH, "clt_linear");
    ck_assert_str_eq(clt_last_error(),
                     "clt_linear: expected all tensors on the same device, but found cpu "
                     "(argument 1) and cl:0 (argument 2); copy one with clt_to()");
    ck_assert_ptr_eq(y, CU_SENTINEL);
    /* bias alone elsewhere is caught too (argument 3) */
    CU_FAILS(clt_linear(x, w, pb, &y), CLT_ERR_DEVICE_MISMATCH, "clt_linear");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "cl:0 (argument 3)"));
    /* the fix: move the input */
    clt_tensor *xd;
    CU_OK(clt_to(x, clt_device_at(0), &xd));
    CU_OK(clt_linear(xd, pw, pb, &y));
    ck_assert_ptr_eq(clt_tensor_device(y), clt_device_at(0));
    double v;
    clt_tensor *s;
    CU_OK(clt_sum(y, &s));
    CU_OK(clt_item(s, &v));
    ck_assert(v == 4 * 2 * 4.0); /* each element 3 * 1 + 1 */
    clt_tensor_release(s);
    clt_tensor_release(y);
    clt_tensor_release(xd);
    clt_params_release(model);
  }
  clt_tensor_release(x);
  clt_tensor_release(w);
  clt_tensor_release(b);
}
END_TEST

Suite *params_suite(void) {
  Suite *s = suite_create("params");
  TCase *tc = cu_tcase("params");
  tcase_add_test(tc, test_basics);
  tcase_add_test(tc, test_move_in_place);
  tcase_add_test(tc, test_move_atomic);
  tcase_add_test(tc, test_device_spread);
  tcase_add_test(tc, test_linear);
  tcase_add_test(tc, test_linear_errors);
  suite_add_tcase(s, tc);
  return s;
}
