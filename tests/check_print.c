/* SPDX-License-Identifier: MIT */
/* check_print.c - clt_format / clt_fprint: PyTorch's text, exactly. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

/* Formats t and compares with want; also checks the reported length. */
static void assert_format(const clt_tensor *t, const char *want, const char *what) {
  char buf[4096];
  size_t len = 0;
  memset(buf, 'X', sizeof buf);
  clt_status s = clt_format(t, buf, sizeof buf, &len);
  ck_assert_msg(s == CLT_OK, "%s: clt_format: %s: %s", what, clt_status_name(s), clt_last_error());
  ck_assert_msg(strcmp(buf, want) == 0, "%s:\n  got      \"%s\"\n  expected \"%s\"", what, buf,
                want);
  ck_assert_msg(len == strlen(want), "%s: len %zu, expected %zu", what, len, strlen(want));
}

static clt_tensor *make(const void *data, clt_dtype dt, int ndim, const int64_t *shape,
                        clt_device *dev) {
  return cu_tensor(data, dt, ndim, shape, dev);
}

START_TEST(test_format_host) {
  clt_device *cpu = clt_cpu();
  int64_t s3[1] = {3}, s2[1] = {2}, s22[2] = {2, 2}, s0[1] = {0};
  clt_tensor *t = NULL;

  CU_OK(clt_ones(CLT_F32, 1, s3, cpu, &t));
  assert_format(t, "tensor([1., 1., 1.])", "ones(3) f32");
  clt_tensor_release(t);

  float f[3] = {1.5f, 2.0f, -3.0f};
  t = make(f, CLT_F32, 1, s3, cpu);
  assert_format(t, "tensor([ 1.5000,  2.0000, -3.0000])", "f32 {1.5, 2, -3}");
  clt_tensor_release(t);

  CU_OK(clt_arange(0, 3, 1, CLT_I64, cpu, &t));
  assert_format(t, "tensor([0, 1, 2], dtype=i64)", "i64 arange(0, 3)");
  clt_tensor_release(t);

  double d[2] = {1, 2};
  t = make(d, CLT_F64, 1, s2, cpu);
  assert_format(t, "tensor([1., 2.], dtype=f64)", "f64 {1, 2}");
  clt_tensor_release(t);

  uint8_t b[2] = {1, 0};
  t = make(b, CLT_BOOL, 1, s2, cpu);
  assert_format(t, "tensor([ True, False], dtype=bool)", "bool {1, 0}");
  clt_tensor_release(t);

  float three = 3.0f;
  t = make(&three, CLT_F32, 0, NULL, cpu);
  assert_format(t, "tensor(3.)", "0-d f32 3");
  clt_tensor_release(t);

  float m[4] = {1, 2, 3, 4};
  t = make(m, CLT_F32, 2, s22, cpu);
  assert_format(t, "tensor([[1., 2.],\n        [3., 4.]])", "2x2 f32");
  clt_tensor_release(t);

  CU_OK(clt_zeros(CLT_F32, 1, s0, cpu, &t));
  assert_format(t, "tensor([])", "empty f32");
  clt_tensor_release(t);

  /* More than 1000 elements: summarized, formatted from the edge items only. PyTorch switches
   * whole numbers to scientific notation when max / min (nonzero) > 1000, as for 1999 / 1, and
   * wraps lines at 80 columns (six 10-character items per line). */
  CU_OK(clt_arange(0, 2000, 1, CLT_F32, cpu, &t));
  assert_format(t,
                "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
                "        1.9990e+03])",
                "f32 arange(0, 2000)");
  clt_tensor_release(t);
  CU_OK(clt_arange(0, 1001, 1, CLT_F32, cpu, &t)); /* 1000 / 1: still fixed point */
  assert_format(t, "tensor([   0.,    1.,    2.,  ...,  998.,  999., 1000.])",
                "f32 arange(0, 1001)");
  clt_tensor_release(t);

  float sci[2] = {1e-5f, 1.0f};
  t = make(sci, CLT_F32, 1, s2, cpu);
  assert_format(t, "tensor([1.0000e-05, 1.0000e+00])", "f32 {1e-5, 1}");
  clt_tensor_release(t);

  int32_t i[3] = {-5, 10, 7};
  t = make(i, CLT_I32, 1, s3, cpu);
  assert_format(t, "tensor([-5, 10,  7], dtype=i32)", "i32 {-5, 10, 7}");
  clt_tensor_release(t);

  uint8_t u[2] = {255, 3};
  t = make(u, CLT_U8, 1, s2, cpu);
  assert_format(t, "tensor([255,   3], dtype=u8)", "u8 {255, 3}");
  clt_tensor_release(t);
}
END_TEST

START_TEST(test_format_devices) {
  if (!cu_need_cl("test_format_devices", 2))
    return;
  int64_t s3[1] = {3}, s2[1] = {2};
  clt_tensor *t = NULL;
  CU_OK(clt_ones(CLT_F32, 1, s3, clt_device_at(0), &t));
  assert_format(t, "tensor([1., 1., 1.], device='cl:0')", "ones(3) f32 on cl:0");
  clt_tensor_release(t);

  int32_t v[2] = {1, 2};
  t = make(v, CLT_I32, 1, s2, clt_device_at(1));
  assert_format(t, "tensor([1, 2], device='cl:1', dtype=i32)", "i32 {1, 2} on cl:1");
  clt_tensor_release(t);

  /* The result of an operation on the device, formatted without any explicit copy. */
  clt_tensor *a = NULL, *b = NULL;
  CU_OK(clt_ones(CLT_F32, 1, s3, clt_device_at(1), &a));
  CU_OK(clt_add(a, a, &b));
  assert_format(b, "tensor([2., 2., 2.], device='cl:1')", "ones + ones on cl:1");
  clt_tensor_release(a);
  clt_tensor_release(b);

  float three = 3.0f;
  t = make(&three, CLT_F32, 0, NULL, clt_device_at(0));
  assert_format(t, "tensor(3., device='cl:0')", "0-d f32 3 on cl:0");
  clt_tensor_release(t);
}
END_TEST

START_TEST(test_format_sizes) {
  int64_t s3[1] = {3};
  clt_tensor *t = NULL;
  CU_OK(clt_ones(CLT_F32, 1, s3, clt_cpu(), &t));
  const char *full = "tensor([1., 1., 1.])";
  size_t len = 0;
  CU_OK(clt_format(t, NULL, 0, &len));
  ck_assert_uint_eq(len, strlen(full));

  char small[8];
  memset(small, 'X', sizeof small);
  len = 0;
  CU_OK(clt_format(t, small, sizeof small, &len));
  ck_assert_str_eq(small, "tensor(");
  ck_assert_uint_eq(len, strlen(full));

  char one[1] = {'X'};
  CU_OK(clt_format(t, one, 1, &len));
  ck_assert_int_eq(one[0], '\0');

  char exact[21];
  CU_OK(clt_format(t, exact, sizeof exact, NULL)); /* len is optional */
  ck_assert_str_eq(exact, full);
  char shorter[20];
  CU_OK(clt_format(t, shorter, sizeof shorter, &len));
  ck_assert_str_eq(shorter, "tensor([1., 1., 1.]");
  ck_assert_uint_eq(len, strlen(full));

  char buf[64] = "unchanged";
  len = 12345;
  CU_FAILS(clt_format(NULL, buf, sizeof buf, &len), CLT_ERR_INVALID_ARGUMENT, "clt_format");
  ck_assert_uint_eq(len, 12345);
  CU_FAILS(clt_format(t, NULL, 10, &len), CLT_ERR_INVALID_ARGUMENT, "clt_format");

  /* clt_fprint writes the same text and a newline. */
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  CU_OK(clt_fprint(f, t));
  rewind(f);
  char got[64] = "";
  size_t n = fread(got, 1, sizeof got - 1, f);
  got[n] = '\0';
  fclose(f);
  ck_assert_str_eq(got, "tensor([1., 1., 1.])\n");
  CU_FAILS(clt_print(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_print");
  clt_tensor_release(t);
}
END_TEST

Suite *print_suite(void) {
  Suite *s = suite_create("print");
  TCase *tc = cu_tcase("format");
  tcase_add_test(tc, test_format_host);
  tcase_add_test(tc, test_format_devices);
  tcase_add_test(tc, test_format_sizes);
  suite_add_tcase(s, tc);
  return s;
}
