/* SPDX-License-Identifier: MIT */
/* check_badinput.c - every public function, fed bad input, on every device.
 *
 * A sweep rather than a story: each case calls one public function with one bad argument (NULL
 * pointers, unknown dtypes, out-of-range ndim and dims, negative and overflowing shapes,
 * mismatched shapes, dtypes and devices, device tensors where host memory is needed, hostile
 * names and paths) and checks the status, clt_last_status(), a message that starts with the
 * function's name, and that out-parameters were left alone. The cases run on cpu, cl:0 and cl:1
 * where a tensor is involved. Afterwards every device must still work: the library is not left
 * in a broken state by bad input. Each test prints "figure: bad inputs tried (<test>): N" for
 * docs/reliability.md.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"

static long bad_count;

/* The call fails with want, names fn, and *outp still holds the sentinel. */
#define BAD(call, want, fn)                                                                        \
  do {                                                                                             \
    CU_FAILS(call, want, fn);                                                                      \
    bad_count++;                                                                                   \
  } while (0)

#define BAD_OUT(outp, call, want, fn)                                                              \
  do {                                                                                             \
    *(void **)(outp) = CU_SENTINEL;                                                                \
    BAD(call, want, fn);                                                                           \
    ck_assert_msg(*(void **)(outp) == CU_SENTINEL, "%s changed its out-parameter on failure",      \
                  #call);                                                                          \
  } while (0)

static void report(const char *test) {
  printf("figure: bad inputs tried (%s): %ld\n", test, bad_count);
  fflush(stdout);
}

/* After the bad calls: an add on every device gives the right answer. */
static void still_works(clt_device **devs, int n) {
  for (int i = 0; i < n; i++) {
    int64_t shape[1] = {5};
    float a[5] = {1, 2, 3, 4, 5}, b[5] = {10, 20, 30, 40, 50}, got[5];
    clt_tensor *ta = cu_tensor(a, CLT_F32, 1, shape, devs[i]);
    clt_tensor *tb = cu_tensor(b, CLT_F32, 1, shape, devs[i]);
    clt_tensor *tc = NULL, *th = NULL;
    CU_OK(clt_add(ta, tb, &tc));
    CU_OK(clt_to(tc, clt_cpu(), &th));
    CU_OK(clt_tensor_read(th, got, sizeof got));
    for (int k = 0; k < 5; k++)
      ck_assert_msg(got[k] == a[k] + b[k], "%s: after bad input, add gives %g at %d",
                    cu_dev_name(devs[i]), (double)got[k], k);
    clt_tensor_release(ta);
    clt_tensor_release(tb);
    clt_tensor_release(tc);
    clt_tensor_release(th);
  }
}

/* ---- creation ------------------------------------------------------------------------------ */

START_TEST(test_bad_creation) {
  clt_device *devs[CU_MAX_DEVICES];
  int n = cu_devices(devs);
  const int64_t ok[2] = {2, 3};
  const int64_t neg[2] = {2, -1};
  const int64_t huge[3] = {INT64_MAX / 2, 4, 3};
  const int64_t big[4] = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
  const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const clt_dtype bad_dt[3] = {(clt_dtype)-1, (clt_dtype)CLT_DTYPE_COUNT, (clt_dtype)1000};
  float host[6] = {1, 2, 3, 4, 5, 6};
  clt_tensor *t;

  for (int i = 0; i < n; i++) {
    clt_device *d = devs[i];
    for (int k = 0; k < 3; k++) {
      BAD_OUT(&t, clt_empty(bad_dt[k], 2, ok, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_empty");
      BAD_OUT(&t, clt_zeros(bad_dt[k], 2, ok, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_zeros");
      BAD_OUT(&t, clt_ones(bad_dt[k], 2, ok, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_ones");
      BAD_OUT(&t, clt_full(bad_dt[k], 2, ok, 1.0, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_full");
      BAD_OUT(&t, clt_rand(bad_dt[k], 2, ok, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_rand");
      BAD_OUT(&t, clt_from_host(host, bad_dt[k], 2, ok, d, &t), CLT_ERR_INVALID_ARGUMENT,
              "clt_from_host");
    }
    /* ndim out of range, NULL shape, negative and overflowing dimensions */
    BAD_OUT(&t, clt_empty(CLT_F32, -1, ok, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_empty");
    BAD_OUT(&t, clt_empty(CLT_F32, CLT_MAX_DIMS + 1, nine, d, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_empty");
    BAD_OUT(&t, clt_empty(CLT_F32, 2, NULL, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_empty");
    BAD_OUT(&t, clt_empty(CLT_F32, 2, neg, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_empty");
    BAD_OUT(&t, clt_empty(CLT_F32, 3, huge, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_empty");
    BAD_OUT(&t, clt_zeros(CLT_F64, 4, big, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_zeros");
    BAD_OUT(&t, clt_ones(CLT_I32, 2, neg, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_ones");
    BAD_OUT(&t, clt_full(CLT_U8, 3, huge, 7.0, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_full");
    BAD_OUT(&t, clt_randn(CLT_F32, 2, neg, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_randn");
    BAD_OUT(&t, clt_from_host(host, CLT_F32, 2, neg, d, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_from_host");
    BAD_OUT(&t, clt_from_host(NULL, CLT_F32, 2, ok, d, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_from_host");
    BAD_OUT(&t, clt_empty_pinned(CLT_F32, 2, neg, d, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_empty_pinned");
    /* NULL out */
    BAD(clt_empty(CLT_F32, 2, ok, d, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_empty");
    BAD(clt_zeros(CLT_F32, 2, ok, d, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_zeros");
    BAD(clt_from_host(host, CLT_F32, 2, ok, d, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_from_host");
    BAD(clt_arange(0, 5, 1, CLT_F32, d, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
    /* arange: zero, NaN and infinite steps and bounds; a step of the wrong sign */
    BAD_OUT(&t, clt_arange(0, 5, 0, CLT_F32, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
    BAD_OUT(&t, clt_arange(0, 5, NAN, CLT_F32, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
    BAD_OUT(&t, clt_arange(0, INFINITY, 1, CLT_F32, d, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_arange");
    BAD_OUT(&t, clt_arange(NAN, 5, 1, CLT_F32, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_arange");
    BAD_OUT(&t, clt_arange(0, 1e300, 1e-300, CLT_F64, d, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_arange");
    BAD_OUT(&t, clt_arange(0, 5, 1, (clt_dtype)77, d, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_arange");
  }
  /* no device */
  BAD_OUT(&t, clt_empty(CLT_F32, 2, ok, NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_empty");
  BAD_OUT(&t, clt_rand(CLT_F32, 2, ok, NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_rand");
  still_works(devs, n);
  report("creation");
}
END_TEST

/* ---- operations ---------------------------------------------------------------------------- */

typedef clt_status (*binary_fn)(clt_tensor *, clt_tensor *, clt_tensor **);
typedef clt_status (*binary_out_fn)(clt_tensor *, clt_tensor *, clt_tensor *);
typedef clt_status (*unary_fn)(clt_tensor *, clt_tensor **);
typedef clt_status (*reduce_dim_fn)(clt_tensor *, int, int, clt_tensor **);

static const struct {
  const char *name;
  binary_fn fn;
  binary_out_fn out_fn;
} binaries[] = {
    {"clt_add", clt_add, clt_add_out}, {"clt_sub", clt_sub, clt_sub_out},
    {"clt_mul", clt_mul, clt_mul_out}, {"clt_div", clt_div, clt_div_out},
    {"clt_pow", clt_pow, clt_pow_out}, {"clt_maximum", clt_maximum, clt_maximum_out},
    {"clt_minimum", clt_minimum, clt_minimum_out}, {"clt_eq", clt_eq, clt_eq_out},
    {"clt_lt", clt_lt, clt_lt_out},
};

static const struct {
  const char *name;
  unary_fn fn;
} unaries[] = {
    {"clt_neg", clt_neg},   {"clt_abs", clt_abs},   {"clt_exp", clt_exp},
    {"clt_log", clt_log},   {"clt_sqrt", clt_sqrt}, {"clt_tanh", clt_tanh},
    {"clt_relu", clt_relu}, {"clt_sum", clt_sum},   {"clt_mean", clt_mean},
    {"clt_max", clt_max},   {"clt_min", clt_min},   {"clt_argmax", clt_argmax},
};

static const struct {
  const char *name;
  reduce_dim_fn fn;
} reductions[] = {
    {"clt_sum_dim", clt_sum_dim}, {"clt_mean_dim", clt_mean_dim}, {"clt_max_dim", clt_max_dim},
    {"clt_min_dim", clt_min_dim}, {"clt_argmax_dim", clt_argmax_dim},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

START_TEST(test_bad_operations) {
  clt_device *devs[CU_MAX_DEVICES];
  int n = cu_devices(devs);
  cu_rng r;
  cu_rng_seed(&r, 17);
  float a23[6], a32[6], a4[4];
  cu_fill(a23, CLT_F32, 6, &r, -2, 2, CU_NONZERO);
  cu_fill(a32, CLT_F32, 6, &r, -2, 2, CU_NONZERO);
  cu_fill(a4, CLT_F32, 4, &r, -2, 2, CU_NONZERO);
  const int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s4[1] = {4}, s7[1] = {7};
  clt_tensor *t;

  for (int i = 0; i < n; i++) {
    clt_device *d = devs[i];
    clt_device *other = devs[(i + 1) % n];
    clt_tensor *x = cu_tensor(a23, CLT_F32, 2, s23, d);
    clt_tensor *y = cu_tensor(a32, CLT_F32, 2, s32, d);
    clt_tensor *v = cu_tensor(a4, CLT_F32, 1, s4, d);
    clt_tensor *elsewhere = n > 1 ? cu_tensor(a23, CLT_F32, 2, s23, other) : NULL;
    clt_tensor *wrong_out = NULL;
    CU_OK(clt_zeros(CLT_F32, 1, s7, d, &wrong_out));

    for (size_t k = 0; k < N_OF(binaries); k++) {
      const char *fn = binaries[k].name;
      BAD_OUT(&t, binaries[k].fn(NULL, x, &t), CLT_ERR_INVALID_ARGUMENT, fn);
      BAD_OUT(&t, binaries[k].fn(x, NULL, &t), CLT_ERR_INVALID_ARGUMENT, fn);
      BAD(binaries[k].fn(x, x, NULL), CLT_ERR_INVALID_ARGUMENT, fn);
      BAD_OUT(&t, binaries[k].fn(x, v, &t), CLT_ERR_SHAPE_MISMATCH, fn); /* (2,3) with (4) */
      if (elsewhere)
        BAD_OUT(&t, binaries[k].fn(x, elsewhere, &t), CLT_ERR_DEVICE_MISMATCH, fn);
      char out_fn[64];
      snprintf(out_fn, sizeof out_fn, "%s_out", fn);
      BAD(binaries[k].out_fn(x, x, wrong_out), CLT_ERR_SHAPE_MISMATCH, out_fn);
      BAD(binaries[k].out_fn(x, x, NULL), CLT_ERR_INVALID_ARGUMENT, out_fn);
      if (elsewhere)
        BAD(binaries[k].out_fn(x, x, elsewhere), CLT_ERR_DEVICE_MISMATCH, out_fn);
    }
    BAD(clt_add_(v, x), CLT_ERR_SHAPE_MISMATCH, "clt_add_");
    BAD(clt_mul_(NULL, x), CLT_ERR_INVALID_ARGUMENT, "clt_mul_");
    BAD_OUT(&t, clt_add_scalar(NULL, 1.0, &t), CLT_ERR_INVALID_ARGUMENT, "clt_add_scalar");
    for (size_t k = 0; k < N_OF(unaries); k++) {
      BAD_OUT(&t, unaries[k].fn(NULL, &t), CLT_ERR_INVALID_ARGUMENT, unaries[k].name);
      BAD(unaries[k].fn(x, NULL), CLT_ERR_INVALID_ARGUMENT, unaries[k].name);
    }
    const int bad_dims[4] = {2, -3, 100, -100};
    for (size_t k = 0; k < N_OF(reductions); k++) {
      for (int j = 0; j < 4; j++)
        BAD_OUT(&t, reductions[k].fn(x, bad_dims[j], 0, &t), CLT_ERR_INVALID_ARGUMENT,
                reductions[k].name);
      BAD_OUT(&t, reductions[k].fn(NULL, 0, 1, &t), CLT_ERR_INVALID_ARGUMENT,
              reductions[k].name);
    }
    /* matmul: inner sizes, ranks, devices */
    BAD_OUT(&t, clt_matmul(x, x, &t), CLT_ERR_SHAPE_MISMATCH, "clt_matmul");
    BAD_OUT(&t, clt_matmul(v, x, &t), CLT_ERR_SHAPE_MISMATCH, "clt_matmul");
    BAD_OUT(&t, clt_matmul(NULL, y, &t), CLT_ERR_INVALID_ARGUMENT, "clt_matmul");
    BAD(clt_matmul(x, y, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_matmul");
    if (elsewhere)
      BAD_OUT(&t, clt_matmul(elsewhere, y, &t), CLT_ERR_DEVICE_MISMATCH, "clt_matmul");
    /* structure: ranks, dimensions, NULLs */
    BAD_OUT(&t, clt_diagonal(v, 0, 0, 1, &t), CLT_ERR_INVALID_ARGUMENT, "clt_diagonal");
    BAD_OUT(&t, clt_diagonal(x, 0, 0, 0, &t), CLT_ERR_INVALID_ARGUMENT, "clt_diagonal");
    BAD_OUT(&t, clt_diagonal(x, 0, 0, 5, &t), CLT_ERR_INVALID_ARGUMENT, "clt_diagonal");
    BAD(clt_diagonal(x, 0, 0, 1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_diagonal");
    BAD_OUT(&t, clt_tril(v, 0, &t), CLT_ERR_SHAPE_MISMATCH, "clt_tril");
    BAD_OUT(&t, clt_triu(NULL, 0, &t), CLT_ERR_INVALID_ARGUMENT, "clt_triu");
    BAD(clt_tril(x, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_tril");
    BAD_OUT(&t, clt_diag(NULL, 0, &t), CLT_ERR_INVALID_ARGUMENT, "clt_diag");
    BAD_OUT(&t, clt_trace(v, &t), CLT_ERR_SHAPE_MISMATCH, "clt_trace");
    BAD_OUT(&t, clt_eye(-2, 3, CLT_F32, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_eye");
    BAD_OUT(&t, clt_eye(2, 3, (clt_dtype)-1, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_eye");
    BAD_OUT(&t, clt_linspace(0, 1, -5, CLT_F32, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_linspace");
    BAD_OUT(&t, clt_linspace(0, INFINITY, 5, CLT_F32, d, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_linspace");
    BAD_OUT(&t, clt_linspace(0, 1, 5, CLT_F32, NULL, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_linspace");
    /* dot, mv, outer, addmm: ranks, lengths, NULLs, devices */
    BAD_OUT(&t, clt_dot(v, x, &t), CLT_ERR_SHAPE_MISMATCH, "clt_dot");
    BAD_OUT(&t, clt_dot(NULL, v, &t), CLT_ERR_INVALID_ARGUMENT, "clt_dot");
    BAD(clt_dot(v, v, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_dot");
    BAD_OUT(&t, clt_mv(x, v, &t), CLT_ERR_SHAPE_MISMATCH, "clt_mv");
    BAD_OUT(&t, clt_mv(v, v, &t), CLT_ERR_SHAPE_MISMATCH, "clt_mv");
    BAD_OUT(&t, clt_mv(x, NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_mv");
    BAD_OUT(&t, clt_outer(x, v, &t), CLT_ERR_SHAPE_MISMATCH, "clt_outer");
    BAD(clt_outer(v, v, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_outer");
    BAD_OUT(&t, clt_addmm(v, x, y, 1, 1, &t), CLT_ERR_SHAPE_MISMATCH, "clt_addmm");
    BAD_OUT(&t, clt_addmm(x, x, x, 1, 1, &t), CLT_ERR_SHAPE_MISMATCH, "clt_addmm");
    BAD_OUT(&t, clt_addmm(NULL, x, y, 1, 1, &t), CLT_ERR_INVALID_ARGUMENT, "clt_addmm");
    if (elsewhere) {
      BAD_OUT(&t, clt_dot(v, elsewhere, &t), CLT_ERR_DEVICE_MISMATCH, "clt_dot");
      BAD_OUT(&t, clt_outer(elsewhere, v, &t), CLT_ERR_DEVICE_MISMATCH, "clt_outer");
      BAD_OUT(&t, clt_addmm(elsewhere, x, y, 1, 1, &t), CLT_ERR_DEVICE_MISMATCH, "clt_addmm");
    }
    /* linalg: NULLs, ranks, square, dtypes, devices, pivots */
    {
      clt_tensor *sq = cu_tensor(a4, CLT_F32, 2, (int64_t[]){2, 2}, d), *o2 = NULL, *o3 = NULL;
      clt_tensor *sqi = NULL, *piv = NULL;
      CU_OK(clt_cast(sq, CLT_I32, &sqi));
      CU_OK(clt_full(CLT_I32, 1, (int64_t[]){2}, 7, d, &piv)); /* pivots out of 1..2 */
      BAD_OUT(&t, clt_linalg_solve(NULL, v, &t), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_solve");
      BAD_OUT(&t, clt_linalg_solve(x, v, &t), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_solve");
      BAD_OUT(&t, clt_linalg_solve(sq, v, &t), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_solve");
      BAD_OUT(&t, clt_linalg_solve(sqi, sqi, &t), CLT_ERR_DTYPE, "clt_linalg_solve");
      BAD(clt_linalg_solve(sq, sq, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_solve");
      BAD_OUT(&t, clt_linalg_solve_triangular(sq, x, 1, 0, 0, &t), CLT_ERR_SHAPE_MISMATCH,
              "clt_linalg_solve_triangular");
      BAD_OUT(&t, clt_linalg_solve_triangular(sq, v, 1, 1, 0, &t), CLT_ERR_SHAPE_MISMATCH,
              "clt_linalg_solve_triangular");
      BAD_OUT(&t, clt_linalg_cholesky(x, 0, &t), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_cholesky");
      BAD_OUT(&t, clt_linalg_cholesky(v, 0, &t), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_cholesky");
      BAD(clt_linalg_cholesky(sq, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_cholesky");
      BAD_OUT(&t, clt_linalg_lu_factor(sqi, &t, &o2), CLT_ERR_DTYPE, "clt_linalg_lu_factor");
      BAD(clt_linalg_lu_factor(sq, NULL, &o2), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_lu_factor");
      BAD_OUT(&t, clt_linalg_lu_solve(sq, piv, sq, &t), CLT_ERR_INVALID_ARGUMENT,
              "clt_linalg_lu_solve");
      BAD_OUT(&t, clt_linalg_lu_solve(sq, sqi, sq, &t), CLT_ERR_SHAPE_MISMATCH,
              "clt_linalg_lu_solve");
      BAD_OUT(&t, clt_linalg_lu_solve(sq, v, sq, &t), CLT_ERR_DTYPE, "clt_linalg_lu_solve");
      BAD_OUT(&t, clt_linalg_qr(v, &t, &o2), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_qr");
      BAD(clt_linalg_qr(x, &o2, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_qr");
      BAD_OUT(&t, clt_linalg_lstsq(x, y, &t), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_lstsq");
      BAD_OUT(&t, clt_linalg_eigh(x, &t, &o2), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_eigh");
      BAD(clt_linalg_eigh(sq, NULL, &o2), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_eigh");
      BAD_OUT(&t, clt_linalg_svd(sqi, 0, &o2, &t, &o3), CLT_ERR_DTYPE, "clt_linalg_svd");
      BAD_OUT(&t, clt_linalg_svd(sq, 0, &o2, &t, NULL), CLT_ERR_INVALID_ARGUMENT,
              "clt_linalg_svd");
      BAD_OUT(&t, clt_linalg_inv(x, &t), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_inv");
      BAD_OUT(&t, clt_linalg_det(NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_det");
      BAD_OUT(&t, clt_linalg_slogdet(x, &t, &o2), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_slogdet");
      BAD(clt_linalg_slogdet(sq, &o2, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_slogdet");
      BAD_OUT(&t, clt_linalg_norm(x, "fro2", &t), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_norm");
      BAD_OUT(&t, clt_linalg_norm(v, "nuc", &t), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_norm");
      BAD_OUT(&t, clt_linalg_norm(sqi, "1", &t), CLT_ERR_DTYPE, "clt_linalg_norm");
      BAD(clt_linalg_norm(x, NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_norm");
      BAD_OUT(&t, clt_linalg_cond(v, &t), CLT_ERR_SHAPE_MISMATCH, "clt_linalg_cond");
      BAD_OUT(&t, clt_linalg_matrix_rank(sqi, &t), CLT_ERR_DTYPE, "clt_linalg_matrix_rank");
      BAD(clt_linalg_pinv(x, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_linalg_pinv");
      if (elsewhere) {
        clt_tensor *sq2 = cu_tensor(a4, CLT_F32, 2, (int64_t[]){2, 2}, other);
        BAD_OUT(&t, clt_linalg_solve(sq, sq2, &t), CLT_ERR_DEVICE_MISMATCH, "clt_linalg_solve");
        BAD_OUT(&t, clt_linalg_lstsq(sq2, sq, &t), CLT_ERR_DEVICE_MISMATCH, "clt_linalg_lstsq");
        clt_tensor_release(sq2);
      }
      clt_tensor_release(sq), clt_tensor_release(sqi), clt_tensor_release(piv);
    }
    /* transpose, reshape, cast, where */
    BAD_OUT(&t, clt_transpose(x, 0, 2, &t), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
    BAD_OUT(&t, clt_transpose(x, -3, 1, &t), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
    BAD_OUT(&t, clt_transpose(NULL, 0, 1, &t), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
    BAD_OUT(&t, clt_reshape(x, 1, s7, &t), CLT_ERR_SHAPE_MISMATCH, "clt_reshape");
    BAD_OUT(&t, clt_reshape(x, 2, NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_reshape");
    BAD_OUT(&t, clt_reshape(x, CLT_MAX_DIMS + 1, s23, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_reshape");
    const int64_t neg6[2] = {-2, -3};
    BAD_OUT(&t, clt_reshape(x, 2, neg6, &t), CLT_ERR_INVALID_ARGUMENT, "clt_reshape");
    BAD_OUT(&t, clt_cast(x, (clt_dtype)42, &t), CLT_ERR_INVALID_ARGUMENT, "clt_cast");
    BAD_OUT(&t, clt_cast(NULL, CLT_I32, &t), CLT_ERR_INVALID_ARGUMENT, "clt_cast");
    BAD_OUT(&t, clt_where(NULL, x, x, &t), CLT_ERR_INVALID_ARGUMENT, "clt_where");
    BAD_OUT(&t, clt_where(x, x, y, &t), CLT_ERR_DTYPE, "clt_where"); /* cond is not bool */
    clt_tensor *cond = NULL;
    CU_OK(clt_gt_scalar(x, 0.0, &cond));
    BAD_OUT(&t, clt_where(cond, x, v, &t), CLT_ERR_SHAPE_MISMATCH, "clt_where");
    BAD_OUT(&t, clt_where(cond, x, y, &t), CLT_ERR_SHAPE_MISMATCH, "clt_where");
    clt_tensor_release(cond);
    /* host access to device tensors, reads into short buffers, items of many elements */
    float small[2];
    double item;
    BAD(clt_tensor_read(x, small, sizeof small), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_read");
    BAD(clt_tensor_read(x, NULL, 24), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_read");
    BAD(clt_tensor_read(NULL, small, sizeof small), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_read");
    BAD(clt_item(x, &item), CLT_ERR_INVALID_ARGUMENT, "clt_item");
    BAD(clt_item(NULL, &item), CLT_ERR_INVALID_ARGUMENT, "clt_item");
    if (!clt_device_is_host(d)) {
      clt_clear_error();
      ck_assert_ptr_null(clt_tensor_data(x));
      ck_assert_int_eq(clt_last_status(), CLT_ERR_NOT_ON_HOST);
      ck_assert_msg(strstr(clt_last_error(), "cpu") != NULL,
                    "clt_tensor_data on a device tensor does not say to copy to cpu: %s",
                    clt_last_error());
      bad_count++;
    }
    /* moves and copies */
    BAD_OUT(&t, clt_to(NULL, d, &t), CLT_ERR_INVALID_ARGUMENT, "clt_to");
    BAD_OUT(&t, clt_to(x, NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_to");
    BAD(clt_to(x, d, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_to");
    BAD_OUT(&t, clt_copy_to(x, NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_copy_to");
    BAD(clt_move(NULL, d), CLT_ERR_INVALID_ARGUMENT, "clt_move");
    BAD(clt_copy(x, y), CLT_ERR_SHAPE_MISMATCH, "clt_copy");
    BAD(clt_copy(x, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_copy");
    BAD(clt_copy(wrong_out, v), CLT_ERR_SHAPE_MISMATCH, "clt_copy");
    /* printing */
    size_t len;
    char buf[8];
    BAD(clt_format(NULL, buf, sizeof buf, &len), CLT_ERR_INVALID_ARGUMENT, "clt_format");
    BAD(clt_format(x, NULL, 10, &len), CLT_ERR_INVALID_ARGUMENT, "clt_format");
    BAD(clt_fprint(NULL, x), CLT_ERR_INVALID_ARGUMENT, "clt_fprint");

    /* the inputs are intact after all that */
    float back[6];
    clt_tensor *hx = NULL;
    CU_OK(clt_to(x, clt_cpu(), &hx));
    CU_OK(clt_tensor_read(hx, back, sizeof back));
    ck_assert_msg(memcmp(back, a23, sizeof back) == 0, "%s: bad calls changed an input",
                  cu_dev_name(d));
    clt_tensor_release(hx);
    clt_tensor_release(x);
    clt_tensor_release(y);
    clt_tensor_release(v);
    clt_tensor_release(elsewhere);
    clt_tensor_release(wrong_out);
  }
  still_works(devs, n);
  report("operations");
}
END_TEST

/* ---- devices, names, models, files, events ------------------------------------------------- */

START_TEST(test_bad_misc) {
  clt_device *devs[CU_MAX_DEVICES];
  int n = cu_devices(devs);
  clt_device *d;
  static const char *const names[] = {
      "",      "gpu",    "cl:",    "cl:-1",  "cl:999", "cl:0x1",         "cl:1a",  "CPU ",
      " cpu",  "cl: 0",  "cl:+0",  "cl::0",  "cpu:0",  "cl:99999999999", "cl:1.5", "\xff\xfe",
      "cl:0 ", "cuda:0", "opencl", "cl:00x",
  };
  for (size_t k = 0; k < N_OF(names); k++) {
    d = CU_SENTINEL;
    clt_status s = clt_device_get(names[k], &d);
    ck_assert_msg(s == CLT_ERR_DEVICE_NOT_FOUND || s == CLT_ERR_INVALID_ARGUMENT,
                  "clt_device_get(\"%s\") gave %s", names[k], clt_status_name(s));
    ck_assert_msg(d == CU_SENTINEL, "clt_device_get(\"%s\") changed its out", names[k]);
    cu_assert_prefix(clt_last_error(), "clt_device_get", names[k]);
    bad_count++;
  }
  BAD_OUT(&d, clt_device_get(NULL, &d), CLT_ERR_INVALID_ARGUMENT, "clt_device_get");
  BAD(clt_device_get("cpu", NULL), CLT_ERR_INVALID_ARGUMENT, "clt_device_get");
  ck_assert_ptr_null(clt_device_at(-1));
  ck_assert_ptr_null(clt_device_at(n + 5));
  BAD(clt_device_info_get(NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_device_info_get");
  BAD(clt_device_memory_stats(clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT,
      "clt_device_memory_stats");
  BAD(clt_transfer_stats_get(clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_transfer_stats_get");
  ck_assert_ptr_null(clt_dtype_name((clt_dtype)99));
  ck_assert_uint_eq(clt_dtype_size((clt_dtype)-5), 0);
  ck_assert_ptr_nonnull(clt_status_name((clt_status)12345));
  clt_dtype rd;
  BAD(clt_result_dtype("no-such-op", CLT_F32, CLT_F32, &rd), CLT_ERR_INVALID_ARGUMENT,
      "clt_result_dtype");
  BAD(clt_result_dtype(NULL, CLT_F32, CLT_F32, &rd), CLT_ERR_INVALID_ARGUMENT,
      "clt_result_dtype");
  BAD(clt_result_dtype("add", (clt_dtype)9, CLT_F32, &rd), CLT_ERR_INVALID_ARGUMENT,
      "clt_result_dtype");

  /* parameter sets */
  clt_params *p = NULL, *pp;
  CU_OK(clt_params_create(&p));
  int64_t s2[1] = {2};
  clt_tensor *w = NULL;
  CU_OK(clt_ones(CLT_F32, 1, s2, clt_cpu(), &w));
  CU_OK(clt_params_add(p, "w", w));
  BAD(clt_params_add(p, "w", w), CLT_ERR_INVALID_ARGUMENT, "clt_params_add");
  BAD(clt_params_add(p, NULL, w), CLT_ERR_INVALID_ARGUMENT, "clt_params_add");
  BAD(clt_params_add(p, "", w), CLT_ERR_INVALID_ARGUMENT, "clt_params_add");
  BAD(clt_params_add(p, "x", NULL), CLT_ERR_INVALID_ARGUMENT, "clt_params_add");
  BAD(clt_params_add(NULL, "x", w), CLT_ERR_INVALID_ARGUMENT, "clt_params_add");
  BAD(clt_params_to(p, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_params_to");
  BAD(clt_params_to(NULL, clt_cpu()), CLT_ERR_INVALID_ARGUMENT, "clt_params_to");
  BAD(clt_params_create(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_params_create");
  ck_assert_ptr_null(clt_params_get(p, "nope"));
  ck_assert_ptr_null(clt_params_tensor_at(p, 99));
  ck_assert_ptr_null(clt_params_name_at(p, 99));

  /* optimizers */
  clt_optim *op;
  BAD_OUT(&op, clt_optim_sgd(NULL, 0.1, 0, 0, &op), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  BAD(clt_optim_sgd(p, 0.1, 0, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  BAD_OUT(&op, clt_optim_sgd(p, -0.1, 0, 0, &op), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  BAD_OUT(&op, clt_optim_sgd(p, 0.1, -1, 0, &op), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  BAD_OUT(&op, clt_optim_sgd(p, NAN, 0, 0, &op), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  BAD_OUT(&op, clt_optim_adamw(NULL, 1e-3, 0.9, 0.999, 1e-8, 0, &op), CLT_ERR_INVALID_ARGUMENT,
          "clt_optim_adamw");
  BAD_OUT(&op, clt_optim_adamw(p, 1e-3, 1.0, 0.999, 1e-8, 0, &op), CLT_ERR_INVALID_ARGUMENT,
          "clt_optim_adamw");
  BAD_OUT(&op, clt_optim_adamw(p, 1e-3, 0.9, 0.999, 0, 0, &op), CLT_ERR_INVALID_ARGUMENT,
          "clt_optim_adamw");
  BAD(clt_optim_step(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_step");
  BAD(clt_optim_zero_grad(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_zero_grad");
  BAD(clt_optim_save(NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_save");
  BAD(clt_optim_load(NULL, NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_load");
  clt_optim_release(NULL);

  /* files: missing, unwritable, directories, NULL */
  BAD(clt_save(NULL, p), CLT_ERR_INVALID_ARGUMENT, "clt_save");
  BAD(clt_save("/proc/clt-cannot-write-here.safetensors", p), CLT_ERR_IO, "clt_save");
  BAD(clt_save("/nonexistent-dir/x/y.safetensors", p), CLT_ERR_IO, "clt_save");
  BAD(clt_save("x.safetensors", NULL), CLT_ERR_INVALID_ARGUMENT, "clt_save");
  BAD_OUT(&pp, clt_load("/nonexistent-dir/y.safetensors", clt_cpu(), &pp), CLT_ERR_IO,
          "clt_load");
  BAD_OUT(&pp, clt_load("/", clt_cpu(), &pp), CLT_ERR_IO, "clt_load");
  BAD_OUT(&pp, clt_load(NULL, clt_cpu(), &pp), CLT_ERR_INVALID_ARGUMENT, "clt_load");
  clt_tensor *t;
  BAD_OUT(&pp, clt_load("/dev/null", clt_cpu(), &pp), CLT_ERR_IO, "clt_load"); /* not a file */
  char empty[] = "/tmp/clt-badinput-XXXXXX";
  int fd = mkstemp(empty);
  ck_assert_int_ge(fd, 0);
  close(fd);
  BAD_OUT(&pp, clt_load(empty, clt_cpu(), &pp), CLT_ERR_FORMAT, "clt_load");
  BAD_OUT(&t, clt_load_npy(empty, clt_cpu(), &t), CLT_ERR_FORMAT, "clt_load_npy");
  unlink(empty);
  BAD_OUT(&t, clt_load_npy("/dev/null", clt_cpu(), &t), CLT_ERR_IO, "clt_load_npy");
  BAD_OUT(&t, clt_load_npy("/nonexistent.npy", clt_cpu(), &t), CLT_ERR_IO, "clt_load_npy");
  BAD_OUT(&t, clt_load_npy(NULL, clt_cpu(), &t), CLT_ERR_INVALID_ARGUMENT, "clt_load_npy");
  BAD(clt_save_npy("/nonexistent-dir/a.npy", w), CLT_ERR_IO, "clt_save_npy");
  BAD(clt_save_npy("a.npy", NULL), CLT_ERR_INVALID_ARGUMENT, "clt_save_npy");

  /* events, timers, generators */
  clt_event *e;
  clt_timer *tm;
  clt_generator *g;
  double ms;
  BAD(clt_event_record(clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_event_record");
  BAD(clt_event_wait(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_event_wait");
  BAD(clt_event_elapsed_ms(NULL, NULL, &ms), CLT_ERR_INVALID_ARGUMENT, "clt_event_elapsed_ms");
  BAD(clt_timer_start(clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_timer_start");
  BAD(clt_timer_stop(NULL, &ms), CLT_ERR_INVALID_ARGUMENT, "clt_timer_stop");
  BAD(clt_generator_create(1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_generator_create");
  BAD_OUT(&t, clt_generator_rand(NULL, CLT_F32, 1, s2, clt_cpu(), &t), CLT_ERR_INVALID_ARGUMENT,
          "clt_generator_rand");
  (void)e;
  (void)tm;
  (void)g;
  /* linear: shapes that do not fit */
  clt_tensor *x = NULL, *wt = NULL;
  int64_t sx[2] = {4, 3}, sw[2] = {5, 2};
  CU_OK(clt_ones(CLT_F32, 2, sx, clt_cpu(), &x));
  CU_OK(clt_ones(CLT_F32, 2, sw, clt_cpu(), &wt));
  BAD_OUT(&t, clt_linear(x, wt, NULL, &t), CLT_ERR_SHAPE_MISMATCH, "clt_linear");
  BAD_OUT(&t, clt_linear(NULL, wt, NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_linear");
  /* losses and layers: NULLs, dims, dtypes, shapes */
  BAD_OUT(&t, clt_softmax(NULL, 0, &t), CLT_ERR_INVALID_ARGUMENT, "clt_softmax");
  BAD(clt_softmax(x, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_softmax");
  BAD_OUT(&t, clt_softmax(x, 2, &t), CLT_ERR_INVALID_ARGUMENT, "clt_softmax");
  BAD_OUT(&t, clt_log_softmax(NULL, 0, &t), CLT_ERR_INVALID_ARGUMENT, "clt_log_softmax");
  BAD_OUT(&t, clt_log_softmax(x, -3, &t), CLT_ERR_INVALID_ARGUMENT, "clt_log_softmax");
  BAD_OUT(&t, clt_logsumexp(NULL, 0, 0, &t), CLT_ERR_INVALID_ARGUMENT, "clt_logsumexp");
  BAD(clt_logsumexp(x, 0, 1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_logsumexp");
  BAD_OUT(&t, clt_mse_loss(NULL, x, &t), CLT_ERR_INVALID_ARGUMENT, "clt_mse_loss");
  BAD_OUT(&t, clt_mse_loss(x, wt, &t), CLT_ERR_SHAPE_MISMATCH, "clt_mse_loss");
  BAD(clt_mse_loss(x, x, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_mse_loss");
  BAD_OUT(&t, clt_cross_entropy(NULL, x, &t), CLT_ERR_INVALID_ARGUMENT, "clt_cross_entropy");
  BAD_OUT(&t, clt_cross_entropy(x, x, &t), CLT_ERR_DTYPE, "clt_cross_entropy");
  BAD(clt_cross_entropy(x, x, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_cross_entropy");
  clt_tensor_release(x);
  clt_tensor_release(wt);
  clt_tensor_release(w);
  clt_params_release(p);
  still_works(devs, n);
  report("misc");
}
END_TEST

/* Users' kernels and the raw OpenCL handles (issue 14): out-parameters are pointers to OpenCL
 * handles, declared here as the struct pointers clt.h takes. */
START_TEST(test_bad_interop) {
  clt_device *devs[CU_MAX_DEVICES];
  int n = cu_devices(devs);
  static const char src[] = "__kernel void f(__global float *y) { y[get_global_id(0)] = 1.0f; }";
  clt_kernel *k = NULL;
  BAD_OUT(&k, clt_kernel_create(NULL, "f", NULL, &k), CLT_ERR_INVALID_ARGUMENT,
          "clt_kernel_create");
  BAD_OUT(&k, clt_kernel_create(src, NULL, NULL, &k), CLT_ERR_INVALID_ARGUMENT,
          "clt_kernel_create");
  BAD(clt_kernel_create(src, "f", NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_create");
  BAD_OUT(&k, clt_kernel_create_file(NULL, "f", NULL, &k), CLT_ERR_INVALID_ARGUMENT,
          "clt_kernel_create_file");
  BAD_OUT(&k, clt_kernel_create_file("/no/such/file.cl", "f", NULL, &k), CLT_ERR_IO,
          "clt_kernel_create_file");
  BAD(clt_kernel_create_file("/no/such/file.cl", "f", NULL, NULL), CLT_ERR_INVALID_ARGUMENT,
      "clt_kernel_create_file");
  BAD(clt_kernel_set_tensor(NULL, 0, NULL, CLT_READ), CLT_ERR_INVALID_ARGUMENT,
      "clt_kernel_set_tensor");
  BAD(clt_kernel_set_scalar(NULL, 0, NULL, 0), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_set_scalar");
  BAD(clt_kernel_set_local(NULL, 0, 0), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_set_local");
  BAD(clt_kernel_launch(NULL, 1, NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  BAD(clt_kernel_build(NULL, clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_build");
  CU_OK(clt_kernel_create(src, "f", NULL, &k));
  BAD(clt_kernel_build(k, NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_build");
  BAD(clt_kernel_build(k, CU_SENTINEL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_build");
  BAD(clt_kernel_set_tensor(k, INT32_MIN, NULL, CLT_READ), CLT_ERR_INVALID_ARGUMENT,
      "clt_kernel_set_tensor");
  BAD(clt_kernel_set_scalar(k, -3, &n, sizeof n), CLT_ERR_INVALID_ARGUMENT,
      "clt_kernel_set_scalar");
  BAD(clt_kernel_set_local(k, INT32_MAX, 16), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_set_local");
  size_t g[3] = {4, 4, 4}, l0[3] = {0, 1, 1};
  BAD(clt_kernel_launch(k, -1, g, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  BAD(clt_kernel_launch(k, 3, g, l0), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  BAD(clt_kernel_launch(k, 1, g, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  struct _cl_mem *mem = NULL;
  struct _cl_event *ev = NULL;
  struct _cl_context *ctx = NULL;
  BAD_OUT(&ctx, clt_device_cl(NULL, NULL, NULL, &ctx, NULL), CLT_ERR_INVALID_ARGUMENT,
          "clt_device_cl");
  BAD_OUT(&ctx, clt_device_cl(CU_SENTINEL, NULL, NULL, &ctx, NULL), CLT_ERR_INVALID_ARGUMENT,
          "clt_device_cl");
  BAD_OUT(&mem, clt_tensor_cl_mem(NULL, &mem, NULL), CLT_ERR_INVALID_ARGUMENT,
          "clt_tensor_cl_mem");
  BAD_OUT(&ev, clt_tensor_cl_acquire(NULL, CLT_READ, &ev), CLT_ERR_INVALID_ARGUMENT,
          "clt_tensor_cl_acquire");
  BAD(clt_tensor_cl_release_to(NULL, CLT_READ, NULL), CLT_ERR_INVALID_ARGUMENT,
      "clt_tensor_cl_release_to");
  int64_t shape[2] = {2, 3}, neg[2] = {2, -3};
  clt_tensor *t = NULL;
  for (int i = 0; i < n; i++) {
    clt_device *d = devs[i];
    bool host = !cu_is_cl(d); /* the host, or a device of another backend: no OpenCL buffers */
    clt_tensor *x;
    CU_OK(clt_ones(CLT_F32, 2, shape, d, &x));
    BAD(clt_kernel_set_tensor(k, 0, x, 0), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_set_tensor");
    BAD(clt_kernel_set_tensor(k, 0, x, CLT_READ | 0x100), CLT_ERR_INVALID_ARGUMENT,
        "clt_kernel_set_tensor");
    BAD_OUT(&t, clt_from_cl_mem(NULL, CLT_F32, 2, shape, d, &t),
            host ? CLT_ERR_UNSUPPORTED : CLT_ERR_INVALID_ARGUMENT, "clt_from_cl_mem");
    BAD_OUT(&t, clt_from_cl_mem(NULL, (clt_dtype)-1, 2, shape, d, &t), CLT_ERR_INVALID_ARGUMENT,
            "clt_from_cl_mem");
    BAD(clt_tensor_cl_mem(x, NULL, NULL), host ? CLT_ERR_UNSUPPORTED : CLT_ERR_INVALID_ARGUMENT,
        "clt_tensor_cl_mem");
    BAD(clt_tensor_cl_acquire(x, CLT_OFFSET, &ev),
        host ? CLT_ERR_UNSUPPORTED : CLT_ERR_INVALID_ARGUMENT, "clt_tensor_cl_acquire");
    BAD(clt_tensor_cl_release_to(x, 0, NULL), host ? CLT_ERR_UNSUPPORTED : CLT_ERR_INVALID_ARGUMENT,
        "clt_tensor_cl_release_to");
    if (host) {
      BAD(clt_kernel_set_tensor(k, 0, x, CLT_READ), CLT_ERR_UNSUPPORTED, "clt_kernel_set_tensor");
      BAD_OUT(&ctx, clt_device_cl(d, NULL, NULL, &ctx, NULL), CLT_ERR_UNSUPPORTED,
              "clt_device_cl");
    } else {
      CU_OK(clt_tensor_cl_mem(x, &mem, NULL));
      BAD_OUT(&t, clt_from_cl_mem(mem, CLT_F32, 2, neg, d, &t), CLT_ERR_INVALID_ARGUMENT,
              "clt_from_cl_mem");
      BAD_OUT(&t, clt_from_cl_mem(mem, CLT_F32, CLT_MAX_DIMS + 1, shape, d, &t),
              CLT_ERR_INVALID_ARGUMENT, "clt_from_cl_mem");
      /* too small for 2^20 f64 (or no fp64 at all) */
      BAD_OUT(&t, clt_from_cl_mem(mem, CLT_F64, 2, (const int64_t[]){1024, 1024}, d, &t),
              clt_device_has_fp64(d) ? CLT_ERR_INVALID_ARGUMENT : CLT_ERR_UNSUPPORTED,
              "clt_from_cl_mem");
    }
    clt_tensor_release(x);
  }
  clt_kernel_release(k);
  still_works(devs, n);
  report("interop");
}
END_TEST

Suite *badinput_suite(void) {
  Suite *s = suite_create("badinput");
  TCase *tc = cu_tcase("badinput");
  tcase_add_test(tc, test_bad_creation);
  tcase_add_test(tc, test_bad_operations);
  tcase_add_test(tc, test_bad_misc);
  tcase_add_test(tc, test_bad_interop);
  suite_add_tcase(s, tc);
  return s;
}
