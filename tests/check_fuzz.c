/* SPDX-License-Identifier: MIT */
/* check_fuzz.c - regression tests for the bugs the fuzz targets (tests/fuzz) found, one test per
 * bug, each failing before its fix (those about integer overflow under UBSan, which the sanitizer
 * build runs; the others in any build).
 *
 * Most are about tensors without elements: a shape with a 0 is valid whatever its other
 * dimensions (clt_empty accepts [2^62, 2^62, 0]), so no code may take the product of the other
 * dimensions of such a tensor without checking for overflow. The seed corpus in
 * tests/fuzz/corpus holds the inputs that found them (replayed by tests/fuzz/replay.sh).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_util.h"

#define BIG ((int64_t)1 << 62)

/* clt__tensor_wrap multiplied the dimensions in order: 2^62 * 2^62 overflowed (undefined
 * behaviour) before the 0 came. */
START_TEST(test_empty_huge_dims) {
  int64_t shape[3] = {BIG, BIG, 0};
  clt_tensor *t;
  CU_OK(clt_empty(CLT_F32, 3, shape, clt_cpu(), &t));
  ck_assert_int_eq(clt_tensor_numel(t), 0);
  ck_assert_uint_eq(clt_tensor_nbytes(t), 0);
  ck_assert_int_eq(clt_tensor_shape(t)[1], BIG);
  clt_tensor_release(t);
}
END_TEST

/* clt_reshape refused a shape clt_empty accepts ([2^62, 2^62, 0] for 0 elements: the product
 * overflowed before the 0), and stopped at that overflow before checking the remaining
 * dimensions, so a negative one gave CLT_ERR_SHAPE_MISMATCH instead of INVALID_ARGUMENT. */
START_TEST(test_reshape_huge_dims) {
  int64_t zero[1] = {0}, six[2] = {2, 3};
  clt_tensor *e, *t, *v = CU_SENTINEL;
  CU_OK(clt_empty(CLT_F32, 1, zero, clt_cpu(), &e));
  int64_t huge_empty[3] = {BIG, BIG, 0};
  CU_OK(clt_reshape(e, 3, huge_empty, &v));
  ck_assert_int_eq(clt_tensor_numel(v), 0);
  ck_assert_int_eq(clt_tensor_shape(v)[0], BIG);
  clt_tensor_release(v);
  CU_OK(clt_empty(CLT_F32, 2, six, clt_cpu(), &t));
  int64_t neg_after[3] = {BIG, BIG, -2};
  v = CU_SENTINEL;
  CU_FAILS(clt_reshape(t, 3, neg_after, &v), CLT_ERR_INVALID_ARGUMENT, "clt_reshape");
  ck_assert_ptr_eq(v, CU_SENTINEL);
  ck_assert_ptr_nonnull(strstr(clt_last_error(), "shape[2] = -2 is negative"));
  int64_t overflow[2] = {BIG, BIG};
  CU_FAILS(clt_reshape(t, 2, overflow, &v), CLT_ERR_SHAPE_MISMATCH, "clt_reshape");
  clt_tensor_release(t);
  clt_tensor_release(e);
}
END_TEST

/* The dispatcher's broadcast computed element strides over every dimension of every operand;
 * for [0, 2^62, 2^62] they overflowed. */
START_TEST(test_broadcast_huge_dims) {
  int64_t a_shape[3] = {0, BIG, BIG}, one[1] = {1};
  clt_tensor *a, *b, *c;
  CU_OK(clt_empty(CLT_F32, 3, a_shape, clt_cpu(), &a));
  CU_OK(clt_ones(CLT_F32, 1, one, clt_cpu(), &b));
  CU_OK(clt_add(a, b, &c));
  ck_assert_int_eq(clt_tensor_ndim(c), 3);
  ck_assert_int_eq(clt_tensor_shape(c)[2], BIG);
  ck_assert_int_eq(clt_tensor_numel(c), 0);
  clt_tensor_release(c);
  clt_tensor_release(b);
  clt_tensor_release(a);
}
END_TEST

/* Reductions multiplied the dimensions before and after the one reduced, and transpose those
 * around the two swapped: both overflowed for [2^62, 2^62, 0, 1]. */
START_TEST(test_reduce_transpose_huge_dims) {
  int64_t shape[4] = {BIG, BIG, 0, 1};
  clt_tensor *t, *r = CU_SENTINEL;
  CU_OK(clt_empty(CLT_F32, 4, shape, clt_cpu(), &t));
  /* The sum over dim 2 would be zeros of shape [2^62, 2^62, 1]: too many elements. */
  CU_FAILS(clt_sum_dim(t, 2, 0, &r), CLT_ERR_INVALID_ARGUMENT, "clt_sum_dim");
  ck_assert_ptr_eq(r, CU_SENTINEL);
  CU_FAILS(clt_max_dim(t, 2, 1, &r), CLT_ERR_INVALID_ARGUMENT, "clt_max_dim");
  /* Over dim 0 the result keeps the 0, so it exists. */
  CU_OK(clt_sum_dim(t, 0, 0, &r));
  ck_assert_int_eq(clt_tensor_numel(r), 0);
  ck_assert_int_eq(clt_tensor_shape(r)[0], BIG);
  clt_tensor_release(r);
  CU_OK(clt_transpose(t, 2, 3, &r));
  ck_assert_int_eq(clt_tensor_shape(r)[2], 1);
  ck_assert_int_eq(clt_tensor_shape(r)[3], 0);
  ck_assert_int_eq(clt_tensor_numel(r), 0);
  clt_tensor_release(r);
  clt_tensor_release(t);
}
END_TEST

/* clt_matmul checked batch * m <= 2^31 - 1 with a product that overflowed (2^62 * 2^62 wrapped
 * to 0 and passed), then failed creating the result with INVALID_ARGUMENT instead of refusing
 * the shapes; it also took m * k and k * n before checking their size. */
START_TEST(test_matmul_huge_dims) {
  int64_t a_shape[3] = {BIG, BIG, 0}, b_shape[2] = {0, 2};
  int64_t c_shape[3] = {0, BIG, 4}, d_shape[3] = {0, 4, 3};
  clt_tensor *a, *b, *c, *d, *r = CU_SENTINEL;
  CU_OK(clt_empty(CLT_F32, 3, a_shape, clt_cpu(), &a));
  CU_OK(clt_empty(CLT_F32, 2, b_shape, clt_cpu(), &b));
  CU_FAILS(clt_matmul(a, b, &r), CLT_ERR_SHAPE_MISMATCH, "clt_matmul");
  ck_assert_ptr_eq(r, CU_SENTINEL);
  ck_assert_ptr_nonnull(strstr(clt_last_error(), "2^31-1"));
  /* An empty batch of huge matrices: a result without elements. */
  CU_OK(clt_empty(CLT_F32, 3, c_shape, clt_cpu(), &c));
  CU_OK(clt_empty(CLT_F32, 3, d_shape, clt_cpu(), &d));
  CU_OK(clt_matmul(c, d, &r));
  ck_assert_int_eq(clt_tensor_numel(r), 0);
  ck_assert_int_eq(clt_tensor_shape(r)[1], BIG);
  clt_tensor_release(r);
  clt_tensor_release(d);
  clt_tensor_release(c);
  clt_tensor_release(b);
  clt_tensor_release(a);
}
END_TEST

/* The safetensors loader checked __metadata__ for duplicate keys only when the file listed a
 * tensor: a file of metadata alone loaded with a key twice. */
START_TEST(test_safetensors_metadata_twice) {
  static const char header[] = "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}";
  char path[] = "/tmp/clt-fuzz-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  unsigned char len[8] = {0};
  len[0] = (unsigned char)strlen(header);
  ck_assert_int_eq(write(fd, len, 8), 8);
  ck_assert_int_eq(write(fd, header, strlen(header)), (ssize_t)strlen(header));
  close(fd);
  clt_params *p = CU_SENTINEL;
  CU_FAILS(clt_load(path, NULL, &p), CLT_ERR_FORMAT, "clt_load");
  ck_assert_ptr_eq(p, CU_SENTINEL);
  ck_assert_ptr_nonnull(strstr(clt_last_error(), "\"k\" twice"));
  unlink(path);
}
END_TEST

/* clt_load added each tensor with clt_params_add, which looks for the name among those already
 * added: time in n^2 for n tensors, so that a hostile 5 MB header of 80000 empty tensors took six
 * minutes (and the 100 MiB the header may have, days). Now about a second for 60000, even under
 * sanitizers; the bound is generous for slow machines. */
START_TEST(test_safetensors_many_tensors) {
  enum { N = 60000 };
  char path[] = "/tmp/clt-fuzz-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "wb");
  ck_assert_ptr_nonnull(f);
  static const char entry[] = "\"t%06d\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}";
  uint64_t hlen = 2 + (uint64_t)N * (sizeof entry - 1 - 4 + 6) + (N - 1);
  unsigned char len[8];
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)(hlen >> (8 * i));
  ck_assert_uint_eq(fwrite(len, 1, 8, f), 8);
  fputc('{', f);
  for (int i = 0; i < N; i++) {
    if (i)
      fputc(',', f);
    fprintf(f, entry, i);
  }
  fputc('}', f);
  ck_assert_int_eq(fclose(f), 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  clt_params *p;
  CU_OK(clt_load(path, clt_cpu(), &p));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  ck_assert_uint_eq(clt_params_count(p), N);
  ck_assert_str_eq(clt_params_name_at(p, N - 1), "t059999");
  ck_assert_msg(s < 45, "loading %d empty tensors took %.1f s", N, s);
  clt_params_release(p);
  unlink(path);
}
END_TEST

Suite *fuzz_suite(void) {
  Suite *s = suite_create("fuzz");
  TCase *tc = cu_tcase("fuzz");
  tcase_add_test(tc, test_empty_huge_dims);
  tcase_add_test(tc, test_reshape_huge_dims);
  tcase_add_test(tc, test_broadcast_huge_dims);
  tcase_add_test(tc, test_reduce_transpose_huge_dims);
  tcase_add_test(tc, test_matmul_huge_dims);
  tcase_add_test(tc, test_safetensors_metadata_twice);
  tcase_add_test(tc, test_safetensors_many_tensors);
  suite_add_tcase(s, tc);
  return s;
}
