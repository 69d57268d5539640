/* SPDX-License-Identifier: MIT */
/* check_views.c - strided views (issue 13): narrow, select, slice, permute, transpose, expand,
 * unsqueeze, squeeze, view, reshape, contiguous, clone, fill_, clt_copy into views, cat, stack,
 * index_select, and every kind of op, transfer, read and print on views, on every device.
 *
 * Written apart from the implementation, to check it: every expected layout (shape, strides,
 * offset) and every expected value is computed here in plain C loops over the index math of the
 * test, never by calling clt. The data is never zero (1, 2, 3, ... or a fixed permutation), so a
 * wrong index shows. Each check runs on cpu, cl:0 and cl:1 (what exists) and over f32, i32, f16
 * and f64 (f64 skipped where the device lacks it). Sizes stay small (tens of elements; one case
 * of about 10^4 per device) so that the suite also runs on Oclgrind. Writes through a view are
 * done on the device and read back with clt_tensor_read (cu_read), through the parent and the
 * view both.
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h" /* HAVE_DLPACK */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"
#ifdef HAVE_DLPACK
#include "clt_dlpack.h"
#endif

Suite *views_suite(void); /* registered in check_main.c */

/* ---- helpers -------------------------------------------------------------------------------- */

static const clt_dtype k_dtypes[] = {CLT_F32, CLT_I32, CLT_F16, CLT_F64};
#define N_DTYPES ((int)(sizeof k_dtypes / sizeof k_dtypes[0]))

/* "cl:0 f32": what the current check runs on, put in every message. */
static char ctx[64];

static void set_ctx(clt_device *dev, clt_dtype dt) {
  snprintf(ctx, sizeof ctx, "%s %s", cu_dev_name(dev), cu_dt_name(dt));
}

/* Runs fn on every device with every dtype of k_dtypes that the device has. */
static void each_device_dtype(const char *test, void (*fn)(clt_device *, clt_dtype)) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++)
    for (int k = 0; k < N_DTYPES; k++) {
      if (!cu_dtype_ok(test, devs[d], k_dtypes[k]))
        continue;
      set_ctx(devs[d], k_dtypes[k]);
      fn(devs[d], k_dtypes[k]);
    }
}

/* Element i of the usual test data: 1, 2, 3, ... (integers up to SEQ_PERIOD: exact in f16). */
enum { SEQ_PERIOD = 1000 };
static double seqv(int64_t i) { return (double)(i % SEQ_PERIOD + 1); }

/* A tensor of dtype dt on dev holding vals (numel of shape entries), converted with cu_set. */
static clt_tensor *from_doubles(const double *vals, clt_dtype dt, int ndim, const int64_t *shape,
                                clt_device *dev) {
  int64_t n = cu_numel(ndim, shape);
  void *buf = cu_malloc((size_t)(n > 0 ? n : 1) * clt_dtype_size(dt));
  for (int64_t i = 0; i < n; i++)
    cu_set(buf, dt, i, vals[i]);
  clt_tensor *t = cu_tensor(buf, dt, ndim, shape, dev);
  free(buf);
  return t;
}

/* A tensor whose element i is first + i % period; its values also into host if not NULL (at
 * least numel entries). */
static clt_tensor *ramp_every(double first, int64_t period, clt_dtype dt, int ndim,
                              const int64_t *shape, clt_device *dev, double *host) {
  int64_t n = cu_numel(ndim, shape);
  double *v = cu_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++)
    v[i] = first + (double)(i % period);
  clt_tensor *t = from_doubles(v, dt, ndim, shape, dev);
  if (host)
    memcpy(host, v, (size_t)n * sizeof *v);
  free(v);
  return t;
}

/* A tensor whose element i is first + i (first + 0, first + 1, ...); host copy in host if
 * not NULL (at least numel entries). */
static clt_tensor *ramp(double first, clt_dtype dt, int ndim, const int64_t *shape, clt_device *dev,
                        double *host) {
  return ramp_every(first, INT64_MAX, dt, ndim, shape, dev, host);
}

/* The usual data 1, 2, 3, ...: element i is seqv(i). */
static clt_tensor *seq(clt_dtype dt, int ndim, const int64_t *shape, clt_device *dev,
                       double *host) {
  return ramp_every(1, SEQ_PERIOD, dt, ndim, shape, dev, host);
}

/* The elements of the strided view (off, shape, strides) of base, in C order, into out. */
static void gather(const double *base, int64_t off, int ndim, const int64_t *shape,
                   const int64_t *strides, double *out) {
  int64_t n = cu_numel(ndim, shape);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, pos = off;
    for (int d = ndim - 1; d >= 0; d--) {
      pos += (rest % shape[d]) * strides[d];
      rest /= shape[d];
    }
    out[i] = base[pos];
  }
}

/* Asserts t's ndim, shape, strides (NULL: not checked; entries of dimensions of size 1 are not
 * checked, they are arbitrary as in PyTorch) and offset (-1: not checked). */
static void expect_layout(const clt_tensor *t, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset, const char *what) {
  ck_assert_msg(t != NULL, "%s (%s): tensor is NULL", what, ctx);
  ck_assert_msg(clt_tensor_ndim(t) == ndim, "%s (%s): ndim %d, expected %d", what, ctx,
                clt_tensor_ndim(t), ndim);
  const int64_t *sh = clt_tensor_shape(t);
  const int64_t *st = clt_tensor_strides(t);
  if (ndim > 0) {
    ck_assert_msg(sh != NULL, "%s (%s): shape is NULL", what, ctx);
    ck_assert_msg(st != NULL, "%s (%s): strides are NULL", what, ctx);
  }
  for (int d = 0; d < ndim; d++)
    ck_assert_msg(sh[d] == shape[d], "%s (%s): shape[%d] is %lld, expected %lld", what, ctx, d,
                  (long long)sh[d], (long long)shape[d]);
  ck_assert_msg(clt_tensor_numel(t) == cu_numel(ndim, shape), "%s (%s): numel %lld, expected %lld",
                what, ctx, (long long)clt_tensor_numel(t), (long long)cu_numel(ndim, shape));
  if (strides)
    for (int d = 0; d < ndim; d++)
      if (shape[d] > 1)
        ck_assert_msg(st[d] == strides[d], "%s (%s): strides[%d] is %lld, expected %lld", what, ctx,
                      d, (long long)st[d], (long long)strides[d]);
  if (offset >= 0)
    ck_assert_msg(clt_tensor_offset(t) == offset, "%s (%s): offset %lld, expected %lld", what, ctx,
                  (long long)clt_tensor_offset(t), (long long)offset);
}

/* Asserts t is contiguous, with C strides, offset 0 (a new tensor). */
static void expect_fresh(const clt_tensor *t, int ndim, const int64_t *shape, const char *what) {
  int64_t strides[CLT_MAX_DIMS];
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d];
  }
  expect_layout(t, ndim, shape, strides, 0, what);
  ck_assert_msg(clt_is_contiguous(t), "%s (%s): not contiguous", what, ctx);
}

/* Reads t with clt_tensor_read and compares with want (n elements): exact for integer dtypes
 * and values that are exact in t's dtype (rtol 0), else within rtol. */
static void expect_values_tol(const clt_tensor *t, const double *want, int64_t n, double rtol,
                              const char *what) {
  ck_assert_msg(clt_tensor_numel(t) == n, "%s (%s): numel %lld, expected %lld", what, ctx,
                (long long)clt_tensor_numel(t), (long long)n);
  double *got = cu_read_double(t);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(cu_close(got[i], want[i], rtol, rtol > 0 ? 1e-6 : 0),
                  "%s (%s): element %lld is %.9g, expected %.9g", what, ctx, (long long)i, got[i],
                  want[i]);
  free(got);
}

static void expect_values(const clt_tensor *t, const double *want, int64_t n, const char *what) {
  expect_values_tol(t, want, n, 0.0, what);
}

/* The view's elements read back equal the strided view (off, shape, strides) of base. */
static void expect_view_of(const clt_tensor *v, const double *base, int64_t off, int ndim,
                           const int64_t *shape, const int64_t *strides, const char *what) {
  int64_t n = cu_numel(ndim, shape);
  double *want = cu_malloc((size_t)(n > 0 ? n : 1) * sizeof *want);
  gather(base, off, ndim, shape, strides, want);
  expect_values(v, want, n, what);
  free(want);
}

/* Asserts clt_last_error() contains each of the n strings given. */
static void mentions(const char *what, int n, ...) {
  const char *msg = clt_last_error();
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    const char *tok = va_arg(ap, const char *);
    ck_assert_msg(strstr(msg, tok) != NULL, "%s: the message does not mention \"%s\": %s", what,
                  tok, msg);
  }
  va_end(ap);
}

/* The call fails (any error status), clt_last_status() agrees, the message names fn. For the
 * errors whose status the header leaves open. */
#define FAILS_ANY(call, fn)                                                                        \
  do {                                                                                             \
    clt_status st_ = (call);                                                                       \
    ck_assert_msg(st_ != CLT_OK, "%s succeeded, expected an error", #call);                        \
    ck_assert_msg(clt_last_status() == st_, "%s: clt_last_status() is %s, returned %s", #call,     \
                  clt_status_name(clt_last_status()), clt_status_name(st_));                       \
    cu_assert_prefix(clt_last_error(), fn, #call);                                                 \
  } while (0)

static clt_tensor *T_(clt_status s, clt_tensor *const *out, const char *call) {
  ck_assert_msg(s == CLT_OK, "%s (%s) failed: %s: %s", call, ctx, clt_status_name(s),
                clt_last_error());
  ck_assert_msg(*out != NULL, "%s (%s) gave NULL", call, ctx);
  return *out;
}
/* V(clt_narrow(t, 1, 2, 3, &v), v): runs a call that makes v, asserts success, gives v. (out is
 * read through its address after the call: the order in which arguments are evaluated is not
 * specified.) */
#define V(call, out) T_((call), &(out), #call)

static void rel(clt_tensor *t) { clt_tensor_release(t); }

/* ---- narrow --------------------------------------------------------------------------------- */

static void narrow_on(clt_device *dev, clt_dtype dt) {
  int64_t sh[2] = {4, 6};
  double base[24], src[24];
  clt_tensor *t = seq(dt, 2, sh, dev, base);
  clt_tensor *v = NULL, *w = NULL, *r = NULL, *e = NULL;

  V(clt_narrow(t, 1, 2, 3, &v), v);
  expect_layout(v, 2, (int64_t[]){4, 3}, (int64_t[]){6, 1}, 2, "narrow(t, 1, 2, 3)");
  ck_assert_msg(!clt_is_contiguous(v), "narrow along dim 1 is not contiguous (%s)", ctx);
  ck_assert_msg(clt_tensor_device(v) == dev, "a view lives on its tensor's device (%s)", ctx);
  {
    double want[12];
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 3; j++)
        want[i * 3 + j] = base[i * 6 + 2 + j];
    expect_values(v, want, 12, "narrow(t, 1, 2, 3)");
  }
  /* Rows 2..3 (negative start): contiguous, offset 12. */
  V(clt_narrow(t, 0, -2, 2, &r), r);
  expect_layout(r, 2, (int64_t[]){2, 6}, (int64_t[]){6, 1}, 12, "narrow(t, 0, -2, 2)");
  ck_assert_msg(clt_is_contiguous(r), "rows of a contiguous tensor are contiguous (%s)", ctx);
  expect_values(r, base + 12, 12, "narrow(t, 0, -2, 2)");
  /* A narrow of a narrow: the offsets add. */
  V(clt_narrow(v, -1, 1, 2, &w), w);
  expect_layout(w, 2, (int64_t[]){4, 2}, (int64_t[]){6, 1}, 3, "narrow(narrow(t,1,2,3),-1,1,2)");
  expect_view_of(w, base, 3, 2, (int64_t[]){4, 2}, (int64_t[]){6, 1}, "narrow of narrow");
  /* Length 0 at the end is a valid empty view. */
  V(clt_narrow(t, 1, 6, 0, &e), e);
  expect_layout(e, 2, (int64_t[]){4, 0}, NULL, -1, "narrow(t, 1, 6, 0)");
  /* Contiguity with dimensions of size 1: a column {4, 1} (elements 6 apart) is not
   * contiguous; a row {1, 6} and a single element {1, 1} are, whatever their strides. */
  {
    clt_tensor *c1 = NULL, *r1 = NULL, *e1 = NULL;
    V(clt_narrow(t, 1, 2, 1, &c1), c1);
    ck_assert_msg(!clt_is_contiguous(c1), "t[:, 2:3] is not contiguous (%s)", ctx);
    V(clt_narrow(t, 0, 2, 1, &r1), r1);
    ck_assert_msg(clt_is_contiguous(r1), "t[2:3] is contiguous (%s)", ctx);
    expect_layout(r1, 2, (int64_t[]){1, 6}, (int64_t[]){6, 1}, 12, "narrow(t, 0, 2, 1)");
    V(clt_narrow(c1, 0, 3, 1, &e1), e1);
    ck_assert_msg(clt_is_contiguous(e1), "t[3:4, 2:3] is contiguous (%s)", ctx);
    expect_layout(e1, 2, (int64_t[]){1, 1}, NULL, 20, "t[3:4, 2:3]");
    expect_values(e1, base + 20, 1, "t[3:4, 2:3]");
    rel(c1);
    rel(r1);
    rel(e1);
  }

  /* A write through the view is seen through the parent, and only there. */
  CU_OK(clt_fill_(v, 100));
  for (int i = 0; i < 4; i++)
    for (int j = 2; j < 5; j++)
      base[i * 6 + j] = 100;
  expect_values(t, base, 24, "t after fill_(narrow(t, 1, 2, 3), 100)");
  expect_view_of(w, base, 3, 2, (int64_t[]){4, 2}, (int64_t[]){6, 1}, "w after fill_(v)");
  /* And the reverse: a write into the parent is seen through the views. */
  clt_tensor *s = ramp(200, dt, 2, sh, dev, src);
  CU_OK(clt_copy(t, s));
  expect_view_of(v, src, 2, 2, (int64_t[]){4, 3}, (int64_t[]){6, 1}, "v after clt_copy(t, src)");
  expect_view_of(w, src, 3, 2, (int64_t[]){4, 2}, (int64_t[]){6, 1}, "w after clt_copy(t, src)");
  expect_values(r, src + 12, 12, "r after clt_copy(t, src)");

  /* The view keeps the memory alive. */
  rel(t);
  expect_view_of(v, src, 2, 2, (int64_t[]){4, 3}, (int64_t[]){6, 1}, "v after releasing t");
  CU_OK(clt_fill_(w, 7));
  {
    double want[12];
    gather(src, 2, 2, (int64_t[]){4, 3}, (int64_t[]){6, 1}, want);
    for (int i = 0; i < 4; i++)
      want[i * 3 + 1] = want[i * 3 + 2] = 7;
    expect_values(v, want, 12, "v after fill_(w, 7), t released");
  }
  rel(s);
  rel(v);
  rel(w);
  rel(r);
  rel(e);
}

START_TEST(test_narrow) { each_device_dtype("test_narrow", narrow_on); }
END_TEST

/* ---- select --------------------------------------------------------------------------------- */

static void select_on(clt_device *dev, clt_dtype dt) {
  int64_t sh[3] = {2, 3, 4};
  double base[24], src[24];
  clt_tensor *t = seq(dt, 3, sh, dev, base);
  clt_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *z = NULL;

  V(clt_select(t, 1, -1, &a), a); /* t[:, 2, :] */
  expect_layout(a, 2, (int64_t[]){2, 4}, (int64_t[]){12, 1}, 8, "select(t, 1, -1)");
  expect_view_of(a, base, 8, 2, (int64_t[]){2, 4}, (int64_t[]){12, 1}, "select(t, 1, -1)");
  ck_assert(!clt_is_contiguous(a));
  V(clt_select(t, 2, 1, &b), b); /* t[:, :, 1] */
  expect_layout(b, 2, (int64_t[]){2, 3}, (int64_t[]){12, 4}, 1, "select(t, 2, 1)");
  expect_view_of(b, base, 1, 2, (int64_t[]){2, 3}, (int64_t[]){12, 4}, "select(t, 2, 1)");
  V(clt_select(t, 0, 1, &c), c); /* t[1] */
  expect_layout(c, 2, (int64_t[]){3, 4}, (int64_t[]){4, 1}, 12, "select(t, 0, 1)");
  ck_assert(clt_is_contiguous(c));
  expect_values(c, base + 12, 12, "select(t, 0, 1)");
  V(clt_select(c, 0, 2, &d), d); /* t[1, 2] */
  expect_layout(d, 1, (int64_t[]){4}, (int64_t[]){1}, 20, "select(select(t, 0, 1), 0, 2)");
  V(clt_select(d, 0, -1, &z), z); /* t[1, 2, 3]: a 0-d view */
  expect_layout(z, 0, NULL, NULL, 23, "select of a 1-D view");
  double x = 0;
  CU_OK(clt_item(z, &x));
  ck_assert_msg(x == base[23], "item of t[1, 2, 3] is %g, expected %g (%s)", x, base[23], ctx);

  /* Write through the column t[:, :, 1]: the parent sees it. */
  CU_OK(clt_fill_(b, -5));
  for (int i = 0; i < 6; i++)
    base[i * 4 + 1] = -5;
  expect_values(t, base, 24, "t after fill_(t[:, :, 1], -5)");
  /* The 0-d view: written, then the parent rewritten under it. */
  CU_OK(clt_fill_(z, 9));
  base[23] = 9;
  expect_values(t, base, 24, "t after fill_(t[1, 2, 3], 9)");
  clt_tensor *s = ramp(300, dt, 3, sh, dev, src);
  CU_OK(clt_copy(t, s));
  CU_OK(clt_item(z, &x));
  ck_assert_msg(x == src[23], "t[1, 2, 3] after clt_copy(t, src) is %g, expected %g (%s)", x,
                src[23], ctx);
  expect_view_of(a, src, 8, 2, (int64_t[]){2, 4}, (int64_t[]){12, 1}, "a after clt_copy(t, src)");
  rel(s);
  rel(t);
  rel(a);
  rel(b);
  rel(c);
  rel(d);
  rel(z);
}

START_TEST(test_select) { each_device_dtype("test_select", select_on); }
END_TEST

/* ---- slice ---------------------------------------------------------------------------------- */

static void slice_on(clt_device *dev, clt_dtype dt) {
  double base[30], src[30];
  /* Python's x[start:stop:step] on a list of 10: the start and length it gives. */
  static const struct {
    int64_t start, stop, step, want_start, want_len;
  } cases[] = {
      {2, 8, 1, 2, 6},
      {-3, CLT_SLICE_END, 1, 7, 3},
      {0, CLT_SLICE_END, 3, 0, 4},
      {1, -1, 2, 1, 4},
      {-100, 100, 1, 0, 10},
      {5, 2, 1, 5, 0},
      {8, 100, 5, 8, 1},
      {-1, -2, 1, 9, 0},
      {10, 20, 1, 10, 0},
      {-12, 3, 2, 0, 2},
      {3, 3, 1, 3, 0},
      {0, 10, 7, 0, 2},
      {-4, -1, 2, 6, 2},
      {9, CLT_SLICE_END, 4, 9, 1},
      {INT64_MIN, CLT_SLICE_END, 1, 0, 10},
      {0, -100, 1, 0, 0},
      {-10, -9, 1, 0, 1},
  };
  clt_tensor *t = seq(dt, 1, (int64_t[]){10}, dev, base);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char what[96];
    snprintf(what, sizeof what, "slice(arange 10, %lld, %lld, %lld)", (long long)cases[c].start,
             (long long)cases[c].stop, (long long)cases[c].step);
    clt_tensor *v = NULL;
    V(clt_slice(t, 0, cases[c].start, cases[c].stop, cases[c].step, &v), v);
    if (cases[c].want_len > 0) {
      expect_layout(v, 1, (int64_t[]){cases[c].want_len}, (int64_t[]){cases[c].step},
                    cases[c].want_start, what);
      expect_view_of(v, base, cases[c].want_start, 1, (int64_t[]){cases[c].want_len},
                     (int64_t[]){cases[c].step}, what);
    } else {
      expect_layout(v, 1, (int64_t[]){0}, NULL, -1, what);
    }
    rel(v);
  }
  rel(t);

  /* 2-D, 6 x 5: every other row, every third column, slices of slices. */
  int64_t sh[2] = {6, 5};
  t = seq(dt, 2, sh, dev, base);
  clt_tensor *rows = NULL, *cols = NULL, *rr = NULL, *grid = NULL;
  V(clt_slice(t, 0, 1, CLT_SLICE_END, 2, &rows), rows); /* t[1::2] */
  expect_layout(rows, 2, (int64_t[]){3, 5}, (int64_t[]){10, 1}, 5, "t[1::2]");
  expect_view_of(rows, base, 5, 2, (int64_t[]){3, 5}, (int64_t[]){10, 1}, "t[1::2]");
  ck_assert(!clt_is_contiguous(rows));
  V(clt_slice(t, -1, 0, CLT_SLICE_END, 3, &cols), cols); /* t[:, ::3] */
  expect_layout(cols, 2, (int64_t[]){6, 2}, (int64_t[]){5, 3}, 0, "t[:, ::3]");
  expect_view_of(cols, base, 0, 2, (int64_t[]){6, 2}, (int64_t[]){5, 3}, "t[:, ::3]");
  V(clt_slice(rows, 0, -2, CLT_SLICE_END, 1, &rr), rr); /* t[1::2][-2:] = rows 3, 5 */
  expect_layout(rr, 2, (int64_t[]){2, 5}, (int64_t[]){10, 1}, 15, "t[1::2][-2:]");
  expect_view_of(rr, base, 15, 2, (int64_t[]){2, 5}, (int64_t[]){10, 1}, "t[1::2][-2:]");
  V(clt_slice(rows, 1, 0, CLT_SLICE_END, 2, &grid), grid); /* t[1::2, ::2] */
  expect_layout(grid, 2, (int64_t[]){3, 3}, (int64_t[]){10, 2}, 5, "t[1::2, ::2]");
  expect_view_of(grid, base, 5, 2, (int64_t[]){3, 3}, (int64_t[]){10, 2}, "t[1::2, ::2]");

  /* t[1::2] = -3: the parent has it in rows 1, 3, 5 only. */
  CU_OK(clt_fill_(rows, -3));
  for (int i = 1; i < 6; i += 2)
    for (int j = 0; j < 5; j++)
      base[i * 5 + j] = -3;
  expect_values(t, base, 30, "t after fill_(t[1::2], -3)");
  CU_OK(clt_fill_(cols, 4));
  for (int i = 0; i < 6; i++)
    base[i * 5] = base[i * 5 + 3] = 4;
  expect_values(t, base, 30, "t after fill_(t[:, ::3], 4)");
  clt_tensor *s = ramp(400, dt, 2, sh, dev, src);
  CU_OK(clt_copy(t, s));
  expect_view_of(grid, src, 5, 2, (int64_t[]){3, 3}, (int64_t[]){10, 2}, "grid after copy(t)");
  expect_view_of(rr, src, 15, 2, (int64_t[]){2, 5}, (int64_t[]){10, 1}, "rr after copy(t)");
  rel(s);
  rel(t);
  rel(rows);
  rel(cols);
  rel(rr);
  rel(grid);
}

START_TEST(test_slice) { each_device_dtype("test_slice", slice_on); }
END_TEST

/* ---- permute -------------------------------------------------------------------------------- */

static void permute_on(clt_device *dev, clt_dtype dt) {
  int64_t sh[3] = {2, 3, 4};
  double base[24], src[24];
  clt_tensor *t = seq(dt, 3, sh, dev, base);
  clt_tensor *p = NULL, *q = NULL, *id = NULL, *c = NULL, *sel = NULL, *ps = NULL;

  V(clt_permute(t, 3, (int[]){2, 0, 1}, &p), p);
  expect_layout(p, 3, (int64_t[]){4, 2, 3}, (int64_t[]){1, 12, 4}, 0, "permute(t, {2, 0, 1})");
  ck_assert(!clt_is_contiguous(p));
  {
    double want[24];
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 2; j++)
        for (int k = 0; k < 3; k++)
          want[(i * 2 + j) * 3 + k] = base[j * 12 + k * 4 + i];
    expect_values(p, want, 24, "permute(t, {2, 0, 1})");
    V(clt_permute(t, 3, (int[]){-1, 0, -2}, &q), q);
    expect_layout(q, 3, (int64_t[]){4, 2, 3}, (int64_t[]){1, 12, 4}, 0, "permute(t, {-1, 0, -2})");
    expect_values(q, want, 24, "permute(t, {-1, 0, -2})");
    V(clt_contiguous(p, &c), c);
    expect_fresh(c, 3, (int64_t[]){4, 2, 3}, "contiguous(permute(t))");
    expect_values(c, want, 24, "contiguous(permute(t))");
  }
  V(clt_permute(t, 3, (int[]){0, 1, 2}, &id), id);
  expect_layout(id, 3, sh, (int64_t[]){12, 4, 1}, 0, "permute(t, {0, 1, 2})");
  ck_assert(clt_is_contiguous(id));
  /* The permutation of a selected slice keeps its offset. */
  V(clt_select(t, 0, 1, &sel), sel);
  V(clt_permute(sel, 2, (int[]){1, 0}, &ps), ps);
  expect_layout(ps, 2, (int64_t[]){4, 3}, (int64_t[]){1, 4}, 12, "permute(t[1], {1, 0})");
  expect_view_of(ps, base, 12, 2, (int64_t[]){4, 3}, (int64_t[]){1, 4}, "permute(t[1], {1, 0})");

  /* CLT_MAX_DIMS dimensions: the reversed permutation of an 8-D tensor, read, made contiguous
   * and negated (the strided kernels at their largest ndim). */
  {
    int64_t s8[8] = {2, 1, 2, 3, 1, 2, 2, 3}, st8[8], rs[8], rst[8];
    double b8[288], w8[288];
    clt_tensor *t8 = seq(dt, 8, s8, dev, b8), *p8 = NULL, *c8 = NULL, *n8 = NULL;
    int64_t acc = 1;
    for (int k = 7; k >= 0; k--) {
      st8[k] = acc;
      acc *= s8[k];
    }
    for (int k = 0; k < 8; k++) {
      rs[k] = s8[7 - k];
      rst[k] = st8[7 - k];
    }
    V(clt_permute(t8, 8, (int[]){7, 6, 5, 4, 3, 2, 1, 0}, &p8), p8);
    expect_layout(p8, 8, rs, rst, 0, "permute(8-D, reversed)");
    gather(b8, 0, 8, rs, rst, w8);
    int64_t n = cu_numel(8, s8);
    expect_values(p8, w8, n, "permute(8-D, reversed)");
    V(clt_contiguous(p8, &c8), c8);
    expect_fresh(c8, 8, rs, "contiguous(permute(8-D))");
    expect_values(c8, w8, n, "contiguous(permute(8-D))");
    V(clt_neg(p8, &n8), n8);
    for (int64_t i = 0; i < n; i++)
      w8[i] = -w8[i];
    expect_values(n8, w8, n, "neg(permute(8-D))");
    rel(t8);
    rel(p8);
    rel(c8);
    rel(n8);
  }

  /* A copy into the permuted view lands transposed in the parent. */
  clt_tensor *s = ramp(500, dt, 3, (int64_t[]){4, 2, 3}, dev, src);
  CU_OK(clt_copy(p, s));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 3; k++)
        base[j * 12 + k * 4 + i] = src[(i * 2 + j) * 3 + k];
  expect_values(t, base, 24, "t after clt_copy(permute(t), src)");
  expect_view_of(ps, base, 12, 2, (int64_t[]){4, 3}, (int64_t[]){1, 4}, "ps after copy");
  /* The contiguous copy made earlier did not change. */
  {
    double want[24], old[24];
    for (int i = 0; i < 24; i++)
      old[i] = seqv(i);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 2; j++)
        for (int k = 0; k < 3; k++)
          want[(i * 2 + j) * 3 + k] = old[j * 12 + k * 4 + i];
    expect_values(c, want, 24, "contiguous(permute(t)) after writing t (a copy)");
  }
  rel(s);
  rel(t);
  rel(p);
  rel(q);
  rel(id);
  rel(c);
  rel(sel);
  rel(ps);
}

START_TEST(test_permute) { each_device_dtype("test_permute", permute_on); }
END_TEST

/* ---- transpose ------------------------------------------------------------------------------ */

static void transpose_on(clt_device *dev, clt_dtype dt) {
  int64_t sh[2] = {3, 5};
  double base[24], src[15];
  clt_tensor *t = seq(dt, 2, sh, dev, base);
  clt_tensor *tr = NULL, *tr2 = NULL, *back = NULL, *col = NULL;

  V(clt_transpose(t, 0, 1, &tr), tr);
  expect_layout(tr, 2, (int64_t[]){5, 3}, (int64_t[]){1, 5}, 0, "transpose(t, 0, 1)");
  ck_assert(!clt_is_contiguous(tr));
  {
    double want[15];
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 3; j++)
        want[i * 3 + j] = base[j * 5 + i];
    expect_values(tr, want, 15, "transpose(t, 0, 1)");
    V(clt_transpose(t, -1, -2, &tr2), tr2);
    expect_layout(tr2, 2, (int64_t[]){5, 3}, (int64_t[]){1, 5}, 0, "transpose(t, -1, -2)");
    expect_values(tr2, want, 15, "transpose(t, -1, -2)");
  }
  V(clt_transpose(tr, 1, 0, &back), back);
  expect_layout(back, 2, sh, (int64_t[]){5, 1}, 0, "transpose(transpose(t))");
  ck_assert(clt_is_contiguous(back));
  expect_values(back, base, 15, "transpose(transpose(t))");

  /* Column 2 of t, as row 2 of its transpose. */
  V(clt_select(tr, 0, 2, &col), col);
  expect_layout(col, 1, (int64_t[]){3}, (int64_t[]){5}, 2, "transpose(t)[2]");
  CU_OK(clt_fill_(col, 77));
  for (int i = 0; i < 3; i++)
    base[i * 5 + 2] = 77;
  expect_values(t, base, 15, "t after fill_(transpose(t)[2], 77)");
  clt_tensor *s = ramp(600, dt, 2, sh, dev, src);
  CU_OK(clt_copy(t, s));
  {
    double want[15];
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 3; j++)
        want[i * 3 + j] = src[j * 5 + i];
    expect_values(tr, want, 15, "transpose(t) after clt_copy(t, src)");
  }
  rel(s);

  /* 3-D: swap the outer two of three. */
  clt_tensor *u = seq(dt, 3, (int64_t[]){2, 3, 4}, dev, base), *ut = NULL;
  V(clt_transpose(u, 0, 2, &ut), ut);
  expect_layout(ut, 3, (int64_t[]){4, 3, 2}, (int64_t[]){1, 4, 12}, 0, "transpose(u, 0, 2)");
  expect_view_of(ut, base, 0, 3, (int64_t[]){4, 3, 2}, (int64_t[]){1, 4, 12}, "transpose(u, 0, 2)");
  /* 0-d: 0 and -1 are accepted. */
  clt_tensor *z = from_doubles((double[]){42}, dt, 0, NULL, dev), *zt = NULL;
  V(clt_transpose(z, 0, -1, &zt), zt);
  expect_layout(zt, 0, NULL, NULL, -1, "transpose(0-d, 0, -1)");
  double x = 0;
  CU_OK(clt_item(zt, &x));
  ck_assert_msg(x == 42, "transpose of a 0-d tensor holds %g (%s)", x, ctx);
  rel(t);
  rel(tr);
  rel(tr2);
  rel(back);
  rel(col);
  rel(u);
  rel(ut);
  rel(z);
  rel(zt);
}

START_TEST(test_transpose) { each_device_dtype("test_transpose", transpose_on); }
END_TEST

/* ---- expand --------------------------------------------------------------------------------- */

static void expand_on(clt_device *dev, clt_dtype dt) {
  double base[4], cb[4];
  clt_tensor *b = seq(dt, 2, (int64_t[]){3, 1}, dev, base);
  clt_tensor *e = NULL, *e2 = NULL, *ce = NULL, *c1 = NULL, *e3 = NULL;

  V(clt_expand(b, 3, (int64_t[]){2, 3, 4}, &e), e);
  expect_layout(e, 3, (int64_t[]){2, 3, 4}, (int64_t[]){0, 1, 0}, 0, "expand({3,1} -> {2,3,4})");
  ck_assert(!clt_is_contiguous(e));
  {
    double want[24];
    for (int a = 0; a < 2; a++)
      for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
          want[(a * 3 + i) * 4 + k] = base[i];
    expect_values(e, want, 24, "expand({3,1} -> {2,3,4})");
  }
  V(clt_expand(b, 2, (int64_t[]){-1, 4}, &e2), e2);
  expect_layout(e2, 2, (int64_t[]){3, 4}, (int64_t[]){1, 0}, 0, "expand({3,1} -> {-1,4})");
  clt_tensor *c = seq(dt, 1, (int64_t[]){4}, dev, cb);
  V(clt_expand(c, 2, (int64_t[]){3, 4}, &ce), ce);
  expect_layout(ce, 2, (int64_t[]){3, 4}, (int64_t[]){0, 1}, 0, "expand({4} -> {3,4})");
  {
    double want[12];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++)
        want[i * 4 + j] = cb[j];
    expect_values(ce, want, 12, "expand({4} -> {3,4})");
  }
  /* To a size of 0 (a dimension of size 1 may become 0, as in PyTorch). */
  {
    clt_tensor *e0 = NULL;
    V(clt_expand(b, 2, (int64_t[]){3, 0}, &e0), e0);
    expect_layout(e0, 2, (int64_t[]){3, 0}, NULL, -1, "expand({3,1} -> {3,0})");
    rel(e0);
  }
  /* The expansion of a one-element view keeps its offset. */
  V(clt_narrow(c, 0, 1, 1, &c1), c1);
  V(clt_expand(c1, 1, (int64_t[]){5}, &e3), e3);
  expect_layout(e3, 1, (int64_t[]){5}, (int64_t[]){0}, 1, "expand(c[1:2], {5})");
  expect_values(e3, (double[]){cb[1], cb[1], cb[1], cb[1], cb[1]}, 5, "expand(c[1:2], {5})");

  /* Writing into an expanded tensor is an error, and nothing changes. */
  clt_tensor *src = seq(dt, 3, (int64_t[]){2, 3, 4}, dev, NULL);
  clt_tensor *one = NULL, *x = NULL, *y = NULL;
  CU_OK(clt_ones(dt, 3, (int64_t[]){2, 3, 4}, dev, &one));
  CU_OK(clt_ones(dt, 3, (int64_t[]){2, 3, 4}, dev, &x));
  CU_OK(clt_ones(dt, 3, (int64_t[]){2, 3, 4}, dev, &y));
  CU_FAILS(clt_fill_(e, 9), CLT_ERR_INVALID_ARGUMENT, "clt_fill_");
  CU_FAILS(clt_copy(e, src), CLT_ERR_INVALID_ARGUMENT, "clt_copy");
  CU_FAILS(clt_add_(e, one), CLT_ERR_INVALID_ARGUMENT, "clt_add_");
  CU_FAILS(clt_add_out(x, y, e), CLT_ERR_INVALID_ARGUMENT, "clt_add_out");
  CU_FAILS(clt_fill_(e3, 9), CLT_ERR_INVALID_ARGUMENT, "clt_fill_");
  CU_FAILS(clt_mul_(ce, ce), CLT_ERR_INVALID_ARGUMENT, "clt_mul_");
  expect_values(b, base, 3, "b after the refused writes into its expansion");
  expect_values(c, cb, 4, "c after the refused writes into its expansions");
  /* A row of the expansion {3, 4} of c has no element twice: writable, like any view of c. */
  {
    clt_tensor *row = NULL;
    V(clt_select(ce, 0, 1, &row), row); /* strides {1}: c itself */
    CU_OK(clt_fill_(row, 6));
    expect_values(c, (double[]){6, 6, 6, 6}, 4, "c after fill_(expand(c)[1], 6)");
    rel(row);
  }
  /* A write into the expanded tensor's storage through another view is seen in the expansion. */
  CU_OK(clt_fill_(b, 8));
  {
    double want[24];
    for (int i = 0; i < 24; i++)
      want[i] = 8;
    expect_values(e, want, 24, "expand(b) after fill_(b, 8)");
  }
  rel(src);
  rel(one);
  rel(x);
  rel(y);
  rel(b);
  rel(c);
  rel(e);
  rel(e2);
  rel(ce);
  rel(c1);
  rel(e3);
}

START_TEST(test_expand) { each_device_dtype("test_expand", expand_on); }
END_TEST

/* ---- unsqueeze and squeeze ------------------------------------------------------------------ */

static void unsqueeze_on(clt_device *dev, clt_dtype dt) {
  double base[12];
  clt_tensor *t = seq(dt, 2, (int64_t[]){3, 4}, dev, base);
  static const struct {
    int dim;
    int64_t shape[3], strides[3];
  } cases[] = {
      {0, {1, 3, 4}, {0, 4, 1}},  {1, {3, 1, 4}, {4, 0, 1}},  {2, {3, 4, 1}, {4, 1, 0}},
      {-1, {3, 4, 1}, {4, 1, 0}}, {-3, {1, 3, 4}, {0, 4, 1}}, {-2, {3, 1, 4}, {4, 0, 1}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char what[64];
    snprintf(what, sizeof what, "unsqueeze({3,4}, %d)", cases[c].dim);
    clt_tensor *u = NULL;
    V(clt_unsqueeze(t, cases[c].dim, &u), u);
    expect_layout(u, 3, cases[c].shape, cases[c].strides, 0, what);
    ck_assert_msg(clt_is_contiguous(u), "%s is contiguous (%s)", what, ctx);
    expect_values(u, base, 12, what);
    rel(u);
  }
  /* A column of t, unsqueezed to {3, 1}: offset and stride kept; writes reach t. */
  clt_tensor *col = NULL, *cu = NULL, *z = NULL, *zu = NULL;
  V(clt_select(t, 1, 1, &col), col);
  V(clt_unsqueeze(col, -1, &cu), cu);
  expect_layout(cu, 2, (int64_t[]){3, 1}, (int64_t[]){4, 0}, 1, "unsqueeze(t[:, 1], -1)");
  expect_view_of(cu, base, 1, 2, (int64_t[]){3, 1}, (int64_t[]){4, 1}, "unsqueeze(t[:, 1], -1)");
  CU_OK(clt_fill_(cu, 55));
  for (int i = 0; i < 3; i++)
    base[i * 4 + 1] = 55;
  expect_values(t, base, 12, "t after fill_(unsqueeze(t[:, 1]), 55)");
  /* 0-d to 1-D. */
  z = from_doubles((double[]){6}, dt, 0, NULL, dev);
  V(clt_unsqueeze(z, 0, &zu), zu);
  expect_layout(zu, 1, (int64_t[]){1}, NULL, 0, "unsqueeze(0-d, 0)");
  expect_values(zu, (double[]){6}, 1, "unsqueeze(0-d, 0)");
  rel(t);
  rel(col);
  rel(cu);
  rel(z);
  rel(zu);
}

START_TEST(test_unsqueeze) { each_device_dtype("test_unsqueeze", unsqueeze_on); }
END_TEST

static void squeeze_on(clt_device *dev, clt_dtype dt) {
  double base[12];
  clt_tensor *t = seq(dt, 3, (int64_t[]){3, 1, 4}, dev, base);
  clt_tensor *a = NULL, *b = NULL, *same = NULL, *one = NULL, *oz = NULL, *n = NULL, *ns = NULL;
  V(clt_squeeze(t, 1, &a), a);
  expect_layout(a, 2, (int64_t[]){3, 4}, (int64_t[]){4, 1}, 0, "squeeze({3,1,4}, 1)");
  expect_values(a, base, 12, "squeeze({3,1,4}, 1)");
  V(clt_squeeze(t, -2, &b), b);
  expect_layout(b, 2, (int64_t[]){3, 4}, (int64_t[]){4, 1}, 0, "squeeze({3,1,4}, -2)");
  /* A dimension that is not 1: t itself, one more reference. */
  V(clt_squeeze(t, 0, &same), same);
  ck_assert_msg(same == t, "squeeze of a dimension of size 3 gives t itself (%s)", ctx);
  rel(same); /* t is still alive: its own reference remains */
  expect_values(t, base, 12, "t after releasing squeeze(t, 0)");
  /* {1} to 0-d. */
  one = from_doubles((double[]){3}, dt, 1, (int64_t[]){1}, dev);
  V(clt_squeeze(one, 0, &oz), oz);
  expect_layout(oz, 0, NULL, NULL, 0, "squeeze({1}, 0)");
  /* The squeeze of a narrowed view keeps its offset and reaches the parent. */
  V(clt_narrow(t, 2, 3, 1, &n), n); /* {3, 1, 1}, offset 3 */
  V(clt_squeeze(n, 2, &ns), ns);
  expect_layout(ns, 2, (int64_t[]){3, 1}, (int64_t[]){4, 0}, 3, "squeeze(t[:, :, 3:4], 2)");
  CU_OK(clt_fill_(ns, -2));
  for (int i = 0; i < 3; i++)
    base[i * 4 + 3] = -2;
  expect_values(t, base, 12, "t after fill_(squeeze(t[:, :, 3:4]), -2)");
  expect_values(a, base, 12, "squeeze(t, 1) after the write");
  rel(t);
  rel(a);
  rel(b);
  rel(one);
  rel(oz);
  rel(n);
  rel(ns);
}

START_TEST(test_squeeze) { each_device_dtype("test_squeeze", squeeze_on); }
END_TEST

/* ---- view and reshape ----------------------------------------------------------------------- */

static void view_on(clt_device *dev, clt_dtype dt) {
  double base[24];
  clt_tensor *t = seq(dt, 2, (int64_t[]){3, 4}, dev, base);
  static const struct {
    int ndim;
    int64_t shape[3], want[3], strides[3];
  } cases[] = {
      {2, {2, 6}, {2, 6}, {6, 1}},
      {1, {12}, {12}, {1}},
      {2, {-1, 3}, {4, 3}, {3, 1}},
      {3, {2, -1, 2}, {2, 3, 2}, {6, 2, 1}},
      {3, {1, 12, 1}, {1, 12, 1}, {0, 1, 0}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char what[64];
    snprintf(what, sizeof what, "view({3,4}, case %zu)", c);
    clt_tensor *v = NULL;
    V(clt_view(t, cases[c].ndim, cases[c].shape, &v), v);
    expect_layout(v, cases[c].ndim, cases[c].want, cases[c].strides, 0, what);
    expect_values(v, base, 12, what);
    rel(v);
  }
  /* Empty tensors: -1 is inferred where the other dimensions are not 0, ambiguous where one is
   * (as in PyTorch). */
  {
    clt_tensor *z = NULL, *zv = NULL, *out = CU_SENTINEL;
    CU_OK(clt_zeros(dt, 2, (int64_t[]){0, 3}, dev, &z));
    V(clt_view(z, 2, (int64_t[]){-1, 3}, &zv), zv);
    expect_layout(zv, 2, (int64_t[]){0, 3}, NULL, -1, "view({0,3}, {-1, 3})");
    rel(zv);
    V(clt_view(z, 3, (int64_t[]){3, -1, 1}, &zv), zv);
    expect_layout(zv, 3, (int64_t[]){3, 0, 1}, NULL, -1, "view({0,3}, {3, -1, 1})");
    rel(zv);
    FAILS_ANY(clt_view(z, 2, (int64_t[]){-1, 0}, &out), "clt_view"); /* clt.h names no status */
    ck_assert_ptr_eq(out, CU_SENTINEL);
    rel(z);
  }
  /* Writes through a view reach t: row 1 of the {2, 6} view is t's elements 6..11. */
  clt_tensor *v26 = NULL, *row = NULL;
  V(clt_view(t, 2, (int64_t[]){2, 6}, &v26), v26);
  V(clt_select(v26, 0, 1, &row), row);
  CU_OK(clt_fill_(row, 31));
  for (int i = 6; i < 12; i++)
    base[i] = 31;
  expect_values(t, base, 12, "t after fill_(view(t, {2,6})[1], 31)");

  /* Rows 1..2 of t (contiguous with an offset) view as {8}. */
  clt_tensor *rows = NULL, *rv = NULL;
  V(clt_narrow(t, 0, 1, 2, &rows), rows);
  V(clt_view(rows, 1, (int64_t[]){8}, &rv), rv);
  expect_layout(rv, 1, (int64_t[]){8}, (int64_t[]){1}, 4, "view(t[1:3], {8})");
  expect_values(rv, base + 4, 8, "view(t[1:3], {8})");

  /* Columns 2..4 of a {4, 6}: the rows can be split ({2, 2, 3}), not flattened ({12}). */
  double b46[24];
  clt_tensor *u = seq(dt, 2, (int64_t[]){4, 6}, dev, b46), *n = NULL, *split = NULL;
  V(clt_narrow(u, 1, 2, 3, &n), n);
  V(clt_view(n, 3, (int64_t[]){2, 2, 3}, &split), split);
  expect_layout(split, 3, (int64_t[]){2, 2, 3}, (int64_t[]){12, 6, 1}, 2,
                "view(u[:, 2:5], {2,2,3})");
  expect_view_of(split, b46, 2, 3, (int64_t[]){2, 2, 3}, (int64_t[]){12, 6, 1},
                 "view(u[:, 2:5], {2,2,3})");
  clt_tensor *out = CU_SENTINEL;
  CU_FAILS(clt_view(n, 1, (int64_t[]){12}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_view");
  ck_assert_ptr_eq(out, CU_SENTINEL);

  /* The transpose of t cannot be flattened by a view; reshape copies instead (below). The same
   * shape, or one with dimensions of size 1 added, needs no copy (as in PyTorch). */
  clt_tensor *tr = NULL, *tv = NULL;
  V(clt_transpose(t, 0, 1, &tr), tr);
  CU_FAILS(clt_view(tr, 1, (int64_t[]){12}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_view");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  CU_FAILS(clt_view(tr, 2, (int64_t[]){2, 6}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_view");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  V(clt_view(tr, 3, (int64_t[]){4, 1, 3}, &tv), tv);
  expect_layout(tv, 3, (int64_t[]){4, 1, 3}, (int64_t[]){1, 0, 4}, 0, "view(t.T, {4,1,3})");
  expect_view_of(tv, base, 0, 3, (int64_t[]){4, 1, 3}, (int64_t[]){1, 1, 4}, "view(t.T, {4,1,3})");
  rel(t);
  rel(v26);
  rel(row);
  rel(rows);
  rel(rv);
  rel(u);
  rel(n);
  rel(split);
  rel(tr);
  rel(tv);
}

START_TEST(test_view) { each_device_dtype("test_view", view_on); }
END_TEST

static void reshape_on(clt_device *dev, clt_dtype dt) {
  double base[24];
  clt_tensor *t = seq(dt, 2, (int64_t[]){3, 4}, dev, base);
  clt_tensor *r = NULL, *tr = NULL, *rc = NULL, *r2 = NULL;

  /* Contiguous: a view. */
  V(clt_reshape(t, 2, (int64_t[]){2, 6}, &r), r);
  expect_layout(r, 2, (int64_t[]){2, 6}, (int64_t[]){6, 1}, 0, "reshape(t, {2,6})");
  CU_OK(clt_fill_(r, 12));
  for (int i = 0; i < 12; i++)
    base[i] = 12;
  expect_values(t, base, 12, "t after fill_(reshape(t, {2,6}), 12): a reshape that can view");
  clt_tensor *s = ramp(700, dt, 2, (int64_t[]){3, 4}, dev, base);
  CU_OK(clt_copy(t, s));
  expect_values(r, base, 12, "reshape(t, {2,6}) after clt_copy(t, src)");

  /* Transposed: a copy, in the transpose's C order, that does not alias t. */
  V(clt_transpose(t, 0, 1, &tr), tr);
  V(clt_reshape(tr, 1, (int64_t[]){12}, &rc), rc);
  expect_fresh(rc, 1, (int64_t[]){12}, "reshape(t.T, {12})");
  double want[12];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      want[i * 3 + j] = base[j * 4 + i];
  expect_values(rc, want, 12, "reshape(t.T, {12})");
  CU_OK(clt_fill_(rc, -1));
  expect_values(t, base, 12, "t after fill_(reshape(t.T, {12})): the reshape copied");
  CU_OK(clt_fill_(t, 3));
  {
    double m1[12];
    for (int i = 0; i < 12; i++)
      m1[i] = -1;
    expect_values(rc, m1, 12, "reshape(t.T, {12}) after fill_(t, 3)");
  }
  /* -1 inferred, on the transpose. */
  V(clt_reshape(tr, 2, (int64_t[]){2, -1}, &r2), r2);
  expect_fresh(r2, 2, (int64_t[]){2, 6}, "reshape(t.T, {2, -1})");
  for (int i = 0; i < 12; i++)
    want[i] = 3;
  expect_values(r2, want, 12, "reshape(t.T, {2, -1})");

  /* Columns 2..4 of a {4, 6}, rows split: a view (writes reach the parent). */
  double b46[24];
  clt_tensor *u = seq(dt, 2, (int64_t[]){4, 6}, dev, b46), *n = NULL, *rs = NULL;
  V(clt_narrow(u, 1, 2, 3, &n), n);
  V(clt_reshape(n, 3, (int64_t[]){2, 2, 3}, &rs), rs);
  expect_layout(rs, 3, (int64_t[]){2, 2, 3}, (int64_t[]){12, 6, 1}, 2, "reshape(u[:, 2:5])");
  CU_OK(clt_fill_(rs, 21));
  for (int i = 0; i < 4; i++)
    for (int j = 2; j < 5; j++)
      b46[i * 6 + j] = 21;
  expect_values(u, b46, 24, "u after fill_(reshape(u[:, 2:5], {2,2,3}), 21)");
  rel(s);
  rel(t);
  rel(r);
  rel(tr);
  rel(rc);
  rel(r2);
  rel(u);
  rel(n);
  rel(rs);
}

START_TEST(test_reshape) { each_device_dtype("test_reshape", reshape_on); }
END_TEST

/* ---- contiguous and clone ------------------------------------------------------------------- */

static void contiguous_on(clt_device *dev, clt_dtype dt) {
  double base[24];
  clt_tensor *t = seq(dt, 2, (int64_t[]){4, 6}, dev, base);
  clt_tensor *c = NULL, *rows = NULL, *rc = NULL, *tr = NULL, *tc = NULL;
  ck_assert(clt_is_contiguous(t));
  V(clt_contiguous(t, &c), c);
  ck_assert_msg(c == t, "contiguous of a contiguous tensor is the same handle (%s)", ctx);
  rel(c); /* the extra reference */
  expect_values(t, base, 24, "t after releasing contiguous(t)");
  /* Rows 1..2: contiguous with an offset; the same handle too. */
  V(clt_narrow(t, 0, 1, 2, &rows), rows);
  V(clt_contiguous(rows, &rc), rc);
  ck_assert_msg(rc == rows, "contiguous of t[1:3] is the same handle (%s)", ctx);
  rel(rc);
  /* The transpose: a new tensor, C strides, offset 0, not aliasing t. */
  V(clt_transpose(t, 0, 1, &tr), tr);
  V(clt_contiguous(tr, &tc), tc);
  ck_assert_msg(tc != tr && tc != t, "contiguous of a transpose is a new tensor (%s)", ctx);
  expect_fresh(tc, 2, (int64_t[]){6, 4}, "contiguous(t.T)");
  double want[24];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++)
      want[i * 4 + j] = base[j * 6 + i];
  expect_values(tc, want, 24, "contiguous(t.T)");
  CU_OK(clt_fill_(tc, 2));
  expect_values(t, base, 24, "t after fill_(contiguous(t.T)): a copy");
  /* An expansion and a strided slice. */
  clt_tensor *c4 = seq(dt, 1, (int64_t[]){4}, dev, NULL), *e = NULL, *ec = NULL, *sl = NULL,
             *sc = NULL;
  V(clt_expand(c4, 2, (int64_t[]){2, 4}, &e), e);
  V(clt_contiguous(e, &ec), ec);
  expect_fresh(ec, 2, (int64_t[]){2, 4}, "contiguous(expand)");
  expect_values(ec, (double[]){1, 2, 3, 4, 1, 2, 3, 4}, 8, "contiguous(expand)");
  CU_OK(clt_fill_(ec, 0)); /* writable: its own memory */
  V(clt_slice(t, 1, 1, CLT_SLICE_END, 2, &sl), sl);
  V(clt_contiguous(sl, &sc), sc);
  expect_fresh(sc, 2, (int64_t[]){4, 3}, "contiguous(t[:, 1::2])");
  expect_view_of(sc, base, 1, 2, (int64_t[]){4, 3}, (int64_t[]){6, 2}, "contiguous(t[:, 1::2])");
  rel(t);
  rel(rows);
  rel(tr);
  rel(tc);
  rel(c4);
  rel(e);
  rel(ec);
  rel(sl);
  rel(sc);
}

START_TEST(test_contiguous) { each_device_dtype("test_contiguous", contiguous_on); }
END_TEST

static void clone_on(clt_device *dev, clt_dtype dt) {
  double base[24];
  clt_tensor *t = seq(dt, 2, (int64_t[]){4, 6}, dev, base);
  clt_tensor *c = NULL, *tr = NULL, *tc = NULL, *rows = NULL, *rc = NULL, *z = NULL, *zc = NULL;
  V(clt_clone(t, &c), c);
  ck_assert_msg(c != t, "clone is a new tensor (%s)", ctx);
  expect_fresh(c, 2, (int64_t[]){4, 6}, "clone(t)");
  expect_values(c, base, 24, "clone(t)");
  CU_OK(clt_fill_(c, 5));
  expect_values(t, base, 24, "t after fill_(clone(t), 5)");
  CU_OK(clt_fill_(t, 6));
  {
    double f[24];
    for (int i = 0; i < 24; i++)
      f[i] = 5;
    expect_values(c, f, 24, "clone(t) after fill_(t, 6)");
  }
  clt_tensor *s = seq(dt, 2, (int64_t[]){4, 6}, dev, base);
  CU_OK(clt_copy(t, s));
  V(clt_transpose(t, 0, 1, &tr), tr);
  V(clt_clone(tr, &tc), tc);
  expect_fresh(tc, 2, (int64_t[]){6, 4}, "clone(t.T)");
  expect_view_of(tc, base, 0, 2, (int64_t[]){6, 4}, (int64_t[]){1, 6}, "clone(t.T)");
  V(clt_narrow(t, 0, 2, 2, &rows), rows);
  V(clt_clone(rows, &rc), rc);
  expect_fresh(rc, 2, (int64_t[]){2, 6}, "clone(t[2:4])");
  expect_values(rc, base + 12, 12, "clone(t[2:4])");
  V(clt_select(rows, 1, 4, &z), z); /* t[2:4, 4] */
  clt_tensor *z0 = NULL;
  V(clt_select(z, 0, 1, &z0), z0); /* t[3, 4] */
  V(clt_clone(z0, &zc), zc);
  expect_fresh(zc, 0, NULL, "clone(t[3, 4])");
  expect_values(zc, base + 22, 1, "clone(t[3, 4])");
  rel(s);
  rel(t);
  rel(c);
  rel(tr);
  rel(tc);
  rel(rows);
  rel(rc);
  rel(z);
  rel(z0);
  rel(zc);
}

START_TEST(test_clone) { each_device_dtype("test_clone", clone_on); }
END_TEST

/* ---- fill_ ---------------------------------------------------------------------------------- */

static void fill_on(clt_device *dev, clt_dtype dt) {
  double base[24];
  clt_tensor *t = seq(dt, 2, (int64_t[]){4, 6}, dev, base);
  clt_tensor *col = NULL, *even = NULL, *tr = NULL, *empty = NULL, *z = NULL;
  V(clt_select(t, 1, 2, &col), col);
  CU_OK(clt_fill_(col, 7));
  for (int i = 0; i < 4; i++)
    base[i * 6 + 2] = 7;
  expect_values(t, base, 24, "t after fill_(t[:, 2], 7)");
  V(clt_slice(t, 0, 0, CLT_SLICE_END, 2, &even), even);
  CU_OK(clt_fill_(even, -1));
  for (int i = 0; i < 4; i += 2)
    for (int j = 0; j < 6; j++)
      base[i * 6 + j] = -1;
  expect_values(t, base, 24, "t after fill_(t[::2], -1)");
  V(clt_narrow(t, 0, 1, 0, &empty), empty);
  CU_OK(clt_fill_(empty, 99));
  expect_values(t, base, 24, "t after fill_ of an empty view");
  V(clt_select(col, 0, 3, &z), z); /* t[3, 2] */
  double v = cu_is_float(dt) ? 0.5 : 11;
  CU_OK(clt_fill_(z, v));
  base[3 * 6 + 2] = v;
  expect_values(t, base, 24, "t after fill_(t[3, 2])");
  if (!cu_is_float(dt)) {
    /* As clt_full converts: an integer dtype takes integers only; nothing is written. */
    CU_FAILS(clt_fill_(col, 2.5), CLT_ERR_INVALID_ARGUMENT, "clt_fill_");
    expect_values(t, base, 24, "t after the refused fill_(t[:, 2], 2.5)");
  }
  V(clt_transpose(t, 0, 1, &tr), tr);
  CU_OK(clt_fill_(tr, 4));
  for (int i = 0; i < 24; i++)
    base[i] = 4;
  expect_values(t, base, 24, "t after fill_(t.T, 4)");
  rel(t);
  rel(col);
  rel(even);
  rel(tr);
  rel(empty);
  rel(z);
}

START_TEST(test_fill) { each_device_dtype("test_fill", fill_on); }
END_TEST

/* u8 and bool views: fill_ and clt_copy (bool: non-zero is true). */
START_TEST(test_fill_u8_bool) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++)
    for (int k = 0; k < 2; k++) {
      clt_dtype dt = k == 0 ? CLT_U8 : CLT_BOOL;
      set_ctx(devs[d], dt);
      double base[12], src[3] = {0, 3, 0};
      for (int i = 0; i < 12; i++)
        base[i] = dt == CLT_BOOL ? (double)(i % 2) : (double)(i + 1);
      clt_tensor *t = from_doubles(base, dt, 2, (int64_t[]){3, 4}, devs[d]);
      clt_tensor *col = NULL, *s = NULL;
      V(clt_select(t, 1, 1, &col), col); /* t[:, 1] */
      CU_OK(clt_fill_(col, dt == CLT_BOOL ? 0 : 200));
      for (int i = 0; i < 3; i++)
        base[i * 4 + 1] = dt == CLT_BOOL ? 0 : 200;
      expect_values(t, base, 12, "t after fill_(t[:, 1])");
      s = from_doubles(src, CLT_I32, 1, (int64_t[]){3}, devs[d]);
      CU_OK(clt_copy(col, s));
      for (int i = 0; i < 3; i++)
        base[i * 4 + 1] = dt == CLT_BOOL ? (src[i] != 0) : src[i];
      expect_values(t, base, 12, "t after clt_copy(t[:, 1], i32 {0, 3, 0})");
      rel(t);
      rel(col);
      rel(s);
    }
}
END_TEST

/* ---- clt_copy into views -------------------------------------------------------------------- */

/* The value src_v converted to dt as clt_cast converts (floats to integers toward zero). */
static double conv(double src_v, clt_dtype dt) {
  if (dt == CLT_I32 || dt == CLT_I64 || dt == CLT_U8)
    return trunc(src_v);
  if (dt == CLT_F16 || dt == CLT_BF16)
    return cu_round_narrow(src_v, dt);
  if (dt == CLT_F32)
    return (double)(float)src_v;
  return src_v;
}

/* Rounds each of the n values to dt, as an op's result is rounded (f16: computed in f32, then
 * rounded to f16). The host model of a chain of in-place ops calls it after each step. */
static void rnd(double *v, int n, clt_dtype dt) {
  for (int i = 0; i < n; i++)
    v[i] = conv(v[i], dt);
}

static void copy_into_view_on(clt_device *dev, clt_dtype dt) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs), me = 0;
  for (int d = 0; d < ndev; d++)
    if (devs[d] == dev)
      me = d;
  double base[24], sv[24];
  clt_tensor *t = seq(dt, 2, (int64_t[]){4, 6}, dev, base);
  clt_tensor *col = NULL, *blk = NULL;

  /* A column from a 1-D tensor. */
  V(clt_select(t, 1, 4, &col), col);
  clt_tensor *s = ramp(50, dt, 1, (int64_t[]){4}, dev, sv);
  CU_OK(clt_copy(col, s));
  for (int i = 0; i < 4; i++)
    base[i * 6 + 4] = sv[i];
  expect_values(t, base, 24, "t after clt_copy(t[:, 4], src)");
  rel(s);

  /* A block t[1:3, 0:3] from a broadcast row, then from a 0-d tensor. */
  clt_tensor *n0 = NULL;
  V(clt_narrow(t, 0, 1, 2, &n0), n0);
  V(clt_narrow(n0, 1, 0, 3, &blk), blk);
  s = ramp(60, dt, 1, (int64_t[]){3}, dev, sv);
  CU_OK(clt_copy(blk, s));
  for (int i = 1; i < 3; i++)
    for (int j = 0; j < 3; j++)
      base[i * 6 + j] = sv[j];
  expect_values(t, base, 24, "t after clt_copy(t[1:3, 0:3], row)");
  rel(s);
  s = from_doubles((double[]){-8}, dt, 0, NULL, dev);
  CU_OK(clt_copy(blk, s));
  for (int i = 1; i < 3; i++)
    for (int j = 0; j < 3; j++)
      base[i * 6 + j] = -8;
  expect_values(t, base, 24, "t after clt_copy(t[1:3, 0:3], 0-d)");
  rel(s);

  /* Another dtype: i32 into a float view; f32 with fractions into an i32 view (truncated). */
  clt_dtype sdt = dt == CLT_I32 ? CLT_F32 : CLT_I32;
  double fr[4] = {1.75, -2.5, 3.25, -0.5}, in[4] = {70, -71, 72, 73};
  s = from_doubles(dt == CLT_I32 ? fr : in, sdt, 1, (int64_t[]){4}, dev);
  CU_OK(clt_copy(col, s));
  for (int i = 0; i < 4; i++)
    base[i * 6 + 4] = conv(dt == CLT_I32 ? fr[i] : in[i], dt);
  expect_values(t, base, 24, "t after clt_copy(t[:, 4], src of another dtype)");
  rel(s);

  /* From the next device (cpu -> cl:0 -> cl:1 -> cpu), the source a transposed view there. */
  clt_device *other = devs[(me + 1) % ndev];
  if (cu_dtype_ok("test_copy_into_view", other, dt)) {
    clt_tensor *so = ramp(80, dt, 2, (int64_t[]){3, 2}, other, sv), *sot = NULL;
    V(clt_transpose(so, 0, 1, &sot), sot); /* {2, 3}: sot[i][j] = sv[j * 2 + i] */
    CU_OK(clt_copy(blk, sot));
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++)
        base[(1 + i) * 6 + j] = sv[j * 2 + i];
    expect_values(t, base, 24, "t after clt_copy(t[1:3, 0:3], transposed src on another device)");
    ck_assert_msg(clt_tensor_device(t) == dev, "clt_copy does not move dst (%s)", ctx);
    rel(so);
    rel(sot);
  }

  /* Views of one tensor that do not overlap: row 0 into row 3; odd columns into even ones
   * (interleaved in memory, no element shared: PyTorch copies them). */
  clt_tensor *r0 = NULL, *r3 = NULL, *ev = NULL, *od = NULL;
  V(clt_select(t, 0, 0, &r0), r0);
  V(clt_select(t, 0, 3, &r3), r3);
  CU_OK(clt_copy(r3, r0));
  for (int j = 0; j < 6; j++)
    base[18 + j] = base[j];
  expect_values(t, base, 24, "t after clt_copy(t[3], t[0])");
  V(clt_slice(t, 1, 0, CLT_SLICE_END, 2, &ev), ev);
  V(clt_slice(t, 1, 1, CLT_SLICE_END, 2, &od), od);
  CU_OK(clt_copy(ev, od));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j += 2)
      base[i * 6 + j] = base[i * 6 + j + 1];
  expect_values(t, base, 24, "t after clt_copy(t[:, ::2], t[:, 1::2])");
  /* Exactly the same elements: allowed, nothing changes. */
  CU_OK(clt_copy(col, col));
  expect_values(t, base, 24, "t after clt_copy(t[:, 4], t[:, 4])");
  /* Shapes that do not broadcast. */
  s = seq(dt, 1, (int64_t[]){5}, dev, NULL);
  CU_FAILS(clt_copy(col, s), CLT_ERR_SHAPE_MISMATCH, "clt_copy");
  expect_values(t, base, 24, "t after the refused clt_copy(t[:, 4], 5 elements)");
  rel(s);
  rel(t);
  rel(col);
  rel(n0);
  rel(blk);
  rel(r0);
  rel(r3);
  rel(ev);
  rel(od);
}

START_TEST(test_copy_into_view) { each_device_dtype("test_copy_into_view", copy_into_view_on); }
END_TEST

/* A destination and a source over the same elements in another order: t += t.T, and
 * clt_copy(t, t.T) on a square t. Reading and writing the same memory in different orders, a
 * kernel would give a result that depends on the order it visits the elements in. clt must give
 * the answer computed from the old values or a clear CLT_ERR_INVALID_ARGUMENT with t unchanged
 * (the issue: "the result PyTorch gives or a clear error"; clt refuses, as PyTorch does); never a
 * mixture. 8 x 8, so that work-groups on the devices interleave. */
static void self_transposed_on(clt_device *dev, clt_dtype dt) {
  double base[64], want[64];
  clt_tensor *t = seq(dt, 2, (int64_t[]){8, 8}, dev, base), *tt = NULL;
  V(clt_transpose(t, 0, 1, &tt), tt);
  clt_clear_error();
  clt_status st = clt_add_(t, tt);
  if (st == CLT_OK) {
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 8; j++)
        want[i * 8 + j] = base[i * 8 + j] + base[j * 8 + i];
    expect_values(t, want, 64, "t after t += t.T (computed from the old values)");
    memcpy(base, want, sizeof want);
  } else {
    ck_assert_msg(st == CLT_ERR_INVALID_ARGUMENT, "t += t.T gave %s: %s (%s)", clt_status_name(st),
                  clt_last_error(), ctx);
    cu_assert_prefix(clt_last_error(), "clt_add_", "t += t.T");
    expect_values(t, base, 64, "t after the refused t += t.T");
  }
  st = clt_copy(t, tt);
  if (st == CLT_OK) {
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 8; j++)
        want[i * 8 + j] = base[j * 8 + i];
    expect_values(t, want, 64, "t after clt_copy(t, t.T) (the old transpose)");
  } else {
    ck_assert_msg(st == CLT_ERR_INVALID_ARGUMENT, "clt_copy(t, t.T) gave %s: %s (%s)",
                  clt_status_name(st), clt_last_error(), ctx);
    expect_values(t, base, 64, "t after the refused clt_copy(t, t.T)");
  }
  rel(t);
  rel(tt);
}

START_TEST(test_inplace_self_transposed) {
  each_device_dtype("test_inplace_self_transposed", self_transposed_on);
}
END_TEST

/* ---- partial overlap of a destination and a source ----------------------------------------- */

/* clt_copy, an in-place op and an _out form whose destination shares some elements with a
 * source, but not all: CLT_ERR_INVALID_ARGUMENT and nothing written (clt.h: "a dst that partly
 * overlaps src is CLT_ERR_INVALID_ARGUMENT"; "out overlapping an input partially"), which is
 * also what PyTorch does ("unsupported operation: some elements of the input tensor and the
 * written-to tensor refer to a single memory location"). A test of its own, in the TCases of
 * copy_into_view, inplace_on_views and out_on_views, so that this rule does not hide the
 * others. */
static void partial_overlap_on(clt_device *dev, clt_dtype dt) {
  double base[24];
  clt_tensor *t = seq(dt, 2, (int64_t[]){4, 6}, dev, base);
  clt_tensor *a = NULL, *b = NULL, *flat = NULL, *fa = NULL, *fb = NULL;
  V(clt_narrow(t, 1, 0, 5, &a), a); /* t[:, 0:5] */
  V(clt_narrow(t, 1, 1, 5, &b), b); /* t[:, 1:6] */
  CU_FAILS(clt_copy(b, a), CLT_ERR_INVALID_ARGUMENT, "clt_copy");
  expect_values(t, base, 24, "t after the refused clt_copy(t[:, 1:6], t[:, 0:5])");
  CU_FAILS(clt_add_(b, a), CLT_ERR_INVALID_ARGUMENT, "clt_add_");
  expect_values(t, base, 24, "t after the refused t[:, 1:6] += t[:, 0:5]");
  V(clt_view(t, 1, (int64_t[]){24}, &flat), flat);
  V(clt_narrow(flat, 0, 0, 23, &fa), fa);
  V(clt_narrow(flat, 0, 1, 23, &fb), fb);
  CU_FAILS(clt_add_out(fa, fa, fb), CLT_ERR_INVALID_ARGUMENT, "clt_add_out");
  expect_values(t, base, 24, "t after the refused add_out(f[0:23], f[0:23], f[1:24])");
  rel(t);
  rel(a);
  rel(b);
  rel(flat);
  rel(fa);
  rel(fb);
}

START_TEST(test_copy_partial_overlap) {
  each_device_dtype("test_copy_partial_overlap", partial_overlap_on);
}
END_TEST

/* ---- cat and stack -------------------------------------------------------------------------- */

static void cat_on(clt_device *dev, clt_dtype dt) {
  double x[6], y[6], p[6];
  clt_tensor *X = seq(dt, 2, (int64_t[]){2, 3}, dev, x);
  clt_tensor *Y = ramp(20, dt, 2, (int64_t[]){2, 3}, dev, y);
  clt_tensor *c0 = NULL, *c1 = NULL, *cm = NULL, *c3 = NULL, *cv = NULL, *ce = NULL, *c_one = NULL;

  V(clt_cat(2, (clt_tensor *[]){X, Y}, 0, &c0), c0);
  expect_fresh(c0, 2, (int64_t[]){4, 3}, "cat({X, Y}, 0)");
  double want[36];
  for (int i = 0; i < 6; i++) {
    want[i] = x[i];
    want[6 + i] = y[i];
  }
  expect_values(c0, want, 12, "cat({X, Y}, 0)");
  V(clt_cat(2, (clt_tensor *[]){X, Y}, 1, &c1), c1);
  expect_fresh(c1, 2, (int64_t[]){2, 6}, "cat({X, Y}, 1)");
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      want[i * 6 + j] = x[i * 3 + j];
      want[i * 6 + 3 + j] = y[i * 3 + j];
    }
  expect_values(c1, want, 12, "cat({X, Y}, 1)");
  V(clt_cat(2, (clt_tensor *[]){X, Y}, -1, &cm), cm);
  expect_values(cm, want, 12, "cat({X, Y}, -1)");

  /* Three of different widths, one a transposed view, one a column view. */
  clt_tensor *P = ramp(40, dt, 2, (int64_t[]){3, 2}, dev, p), *Pt = NULL, *col = NULL;
  V(clt_transpose(P, 0, 1, &Pt), Pt); /* {2, 3}: Pt[i][j] = p[j * 2 + i] */
  clt_tensor *n1 = NULL;
  V(clt_narrow(Y, 1, 2, 1, &n1), n1); /* {2, 1}: y[i * 3 + 2] */
  V(clt_cat(3, (clt_tensor *[]){n1, Pt, X}, 1, &c3), c3);
  expect_fresh(c3, 2, (int64_t[]){2, 7}, "cat({Y[:, 2:3], P.T, X}, 1)");
  for (int i = 0; i < 2; i++) {
    want[i * 7] = y[i * 3 + 2];
    for (int j = 0; j < 3; j++) {
      want[i * 7 + 1 + j] = p[j * 2 + i];
      want[i * 7 + 4 + j] = x[i * 3 + j];
    }
  }
  expect_values(c3, want, 14, "cat({Y[:, 2:3], P.T, X}, 1)");
  /* Along 0 with a strided slice: rows of X, then P.T's first row. */
  V(clt_narrow(Pt, 0, 0, 1, &col), col);
  V(clt_cat(2, (clt_tensor *[]){X, col}, 0, &cv), cv);
  expect_fresh(cv, 2, (int64_t[]){3, 3}, "cat({X, P.T[0:1]}, 0)");
  for (int i = 0; i < 6; i++)
    want[i] = x[i];
  for (int j = 0; j < 3; j++)
    want[6 + j] = p[j * 2];
  expect_values(cv, want, 9, "cat({X, P.T[0:1]}, 0)");
  /* An empty operand is skipped. */
  clt_tensor *E = NULL;
  CU_OK(clt_zeros(dt, 2, (int64_t[]){0, 3}, dev, &E));
  V(clt_cat(3, (clt_tensor *[]){E, X, E}, 0, &ce), ce);
  expect_fresh(ce, 2, (int64_t[]){2, 3}, "cat({empty, X, empty}, 0)");
  expect_values(ce, x, 6, "cat({empty, X, empty}, 0)");
  /* One tensor: a copy, not X itself. */
  V(clt_cat(1, (clt_tensor *[]){Pt}, 0, &c_one), c_one);
  ck_assert_msg(c_one != Pt && c_one != P, "cat of one tensor is a new tensor (%s)", ctx);
  expect_fresh(c_one, 2, (int64_t[]){2, 3}, "cat({P.T}, 0)");
  /* The results are copies: writing the inputs leaves them alone. */
  CU_OK(clt_fill_(X, 0));
  for (int i = 0; i < 6; i++) {
    want[i] = x[i];
    want[6 + i] = y[i];
  }
  expect_values(c0, want, 12, "cat({X, Y}, 0) after fill_(X, 0)");
  rel(X);
  rel(Y);
  rel(P);
  rel(Pt);
  rel(col);
  rel(n1);
  rel(E);
  rel(c0);
  rel(c1);
  rel(cm);
  rel(c3);
  rel(cv);
  rel(ce);
  rel(c_one);
}

START_TEST(test_cat) { each_device_dtype("test_cat", cat_on); }
END_TEST

static void stack_on(clt_device *dev, clt_dtype dt) {
  double x[6], y[6], p[6];
  clt_tensor *X = seq(dt, 2, (int64_t[]){2, 3}, dev, x);
  clt_tensor *Y = ramp(20, dt, 2, (int64_t[]){2, 3}, dev, y);
  clt_tensor *P = ramp(40, dt, 2, (int64_t[]){3, 2}, dev, p), *Pt = NULL;
  V(clt_transpose(P, 0, 1, &Pt), Pt); /* Pt[i][j] = p[j * 2 + i] */
  double pt[6];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      pt[i * 3 + j] = p[j * 2 + i];
  const double *in[3] = {x, pt, y};
  clt_tensor *ts[3] = {X, Pt, Y};
  for (int dim = -1; dim <= 2; dim++) {
    int d = dim < 0 ? dim + 3 : dim;
    int64_t shape[3];
    int64_t isz[2] = {2, 3};
    for (int k = 0, m = 0; k < 3; k++)
      shape[k] = k == d ? 3 : isz[m++];
    clt_tensor *s = NULL;
    char what[64];
    snprintf(what, sizeof what, "stack({X, P.T, Y}, %d)", dim);
    V(clt_stack(3, ts, dim, &s), s);
    expect_fresh(s, 3, shape, what);
    double want[18];
    for (int k = 0; k < 3; k++)
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
          int idx[3];
          int q[2] = {i, j};
          for (int a = 0, m = 0; a < 3; a++)
            idx[a] = a == d ? k : q[m++];
          want[(idx[0] * shape[1] + idx[1]) * shape[2] + idx[2]] = in[k][i * 3 + j];
        }
    expect_values(s, want, 18, what);
    rel(s);
  }
  /* One tensor, a 1-D strided view: {1, 3}. */
  clt_tensor *r = NULL, *s1 = NULL;
  V(clt_select(Pt, 1, 1, &r), r); /* P.T[:, 1] = P[1] as a strided... {2}: p[2], p[3] */
  V(clt_stack(1, (clt_tensor *[]){r}, 1, &s1), s1);
  expect_fresh(s1, 2, (int64_t[]){2, 1}, "stack({P.T[:, 1]}, 1)");
  expect_values(s1, (double[]){p[2], p[3]}, 2, "stack({P.T[:, 1]}, 1)");
  rel(X);
  rel(Y);
  rel(P);
  rel(Pt);
  rel(r);
  rel(s1);
}

START_TEST(test_stack) { each_device_dtype("test_stack", stack_on); }
END_TEST

/* ---- index_select ----------------------------------------------------------------------- */

static void index_select_on(clt_device *dev, clt_dtype dt) {
  double base[24], want[48];
  clt_tensor *t = seq(dt, 2, (int64_t[]){4, 6}, dev, base);
  clt_tensor *r = NULL, *tr = NULL;
  /* Rows 3, 0, 3, 1 (a repeat), an i64 index. */
  int64_t i64[4] = {3, 0, 3, 1};
  clt_tensor *ix = cu_tensor(i64, CLT_I64, 1, (int64_t[]){4}, dev);
  V(clt_index_select(t, 0, ix, &r), r);
  expect_fresh(r, 2, (int64_t[]){4, 6}, "index_select(t, 0, {3, 0, 3, 1})");
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 6; j++)
      want[k * 6 + j] = base[i64[k] * 6 + j];
  expect_values(r, want, 24, "index_select(t, 0, {3, 0, 3, 1})");
  CU_OK(clt_fill_(r, 0)); /* a copy: t keeps its values */
  expect_values(t, base, 24, "t after fill_ of index_select(t, ...)");
  rel(r);
  /* Along dim 1 of the transpose, an i32 index: out[i][k] = t[idx[k]][i]. */
  int32_t i32[2] = {3, 1};
  clt_tensor *ix32 = cu_tensor(i32, CLT_I32, 1, (int64_t[]){2}, dev);
  V(clt_transpose(t, 0, 1, &tr), tr);
  V(clt_index_select(tr, 1, ix32, &r), r);
  expect_fresh(r, 2, (int64_t[]){6, 2}, "index_select(t.T, 1, {3, 1})");
  for (int i = 0; i < 6; i++)
    for (int k = 0; k < 2; k++)
      want[i * 2 + k] = base[i32[k] * 6 + i];
  expect_values(r, want, 12, "index_select(t.T, 1, {3, 1})");
  rel(r);
  /* The index itself a strided view: {5, 9, 2, 9, 0}[::2] = {5, 2, 0}, along dim -1. */
  int64_t iv[5] = {5, 9, 2, 9, 0};
  clt_tensor *ib = cu_tensor(iv, CLT_I64, 1, (int64_t[]){5}, dev), *is = NULL;
  V(clt_slice(ib, 0, 0, CLT_SLICE_END, 2, &is), is);
  V(clt_index_select(t, -1, is, &r), r);
  expect_fresh(r, 2, (int64_t[]){4, 3}, "index_select(t, -1, {5, 2, 0} as a view)");
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 3; k++)
      want[i * 3 + k] = base[i * 6 + iv[2 * k]];
  expect_values(r, want, 12, "index_select(t, -1, {5, 2, 0} as a view)");
  rel(r);
  /* A 0-d index keeps the dimension, with size 1 (torch.index_select). */
  clt_tensor *i0 = NULL;
  V(clt_select(ib, 0, 2, &i0), i0); /* 2 */
  V(clt_index_select(t, 1, i0, &r), r);
  expect_fresh(r, 2, (int64_t[]){4, 1}, "index_select(t, 1, 0-d 2)");
  for (int i = 0; i < 4; i++)
    want[i] = base[i * 6 + 2];
  expect_values(r, want, 4, "index_select(t, 1, 0-d 2)");
  rel(r);

  /* Errors: *out untouched. */
  clt_tensor *out = CU_SENTINEL;
  int64_t bad[2] = {1, 4};
  clt_tensor *ixb = cu_tensor(bad, CLT_I64, 1, (int64_t[]){2}, dev);
  CU_FAILS(clt_index_select(t, 0, ixb, &out), CLT_ERR_INVALID_ARGUMENT, "clt_index_select");
  mentions("index_select value 4 of dimension 0 of size 4", 2, "4", "3");
  int64_t neg[1] = {-1};
  clt_tensor *ixn = cu_tensor(neg, CLT_I64, 1, (int64_t[]){1}, dev);
  CU_FAILS(clt_index_select(t, 0, ixn, &out), CLT_ERR_INVALID_ARGUMENT, "clt_index_select");
  mentions("index_select value -1", 1, "-1");
  clt_tensor *ixf = seq(CLT_F32, 1, (int64_t[]){2}, dev, NULL);
  CU_FAILS(clt_index_select(t, 0, ixf, &out), CLT_ERR_DTYPE, "clt_index_select");
  clt_tensor *ix2 = cu_tensor(i64, CLT_I64, 2, (int64_t[]){2, 2}, dev);
  CU_FAILS(clt_index_select(t, 0, ix2, &out), CLT_ERR_INVALID_ARGUMENT, "clt_index_select");
  CU_FAILS(clt_index_select(t, 2, ix, &out), CLT_ERR_INVALID_ARGUMENT, "clt_index_select");
  mentions("index_select dim 2 of a 2-D tensor", 2, "-2", "1");
  CU_FAILS(clt_index_select(NULL, 0, ix, &out), CLT_ERR_INVALID_ARGUMENT, "clt_index_select");
  CU_FAILS(clt_index_select(t, 0, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_index_select");
  CU_FAILS(clt_index_select(t, 0, ix, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_index_select");
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  clt_device *other = devs[0] == dev ? (ndev > 1 ? devs[1] : dev) : devs[0];
  if (other != dev) {
    clt_tensor *ixo = cu_tensor(i64, CLT_I64, 1, (int64_t[]){4}, other);
    CU_FAILS(clt_index_select(t, 0, ixo, &out), CLT_ERR_DEVICE_MISMATCH, "clt_index_select");
    mentions("index on another device", 2, cu_dev_name(dev), cu_dev_name(other));
    rel(ixo);
  }
  ck_assert_msg(out == CU_SENTINEL, "index_select: out was changed on an error (%s)", ctx);
  rel(t);
  rel(tr);
  rel(ix);
  rel(ix32);
  rel(ib);
  rel(is);
  rel(i0);
  rel(ixb);
  rel(ixn);
  rel(ixf);
  rel(ix2);
}

START_TEST(test_index_select) { each_device_dtype("test_index_select", index_select_on); }
END_TEST

/* ---- in-place ops and _out forms on views --------------------------------------------------- */

static void inplace_on_views_on(clt_device *dev, clt_dtype dt) {
  double base[24], sv[24];
  clt_tensor *t = seq(dt, 2, (int64_t[]){4, 6}, dev, base);
  clt_tensor *col = NULL, *even = NULL, *tr = NULL, *rows = NULL, *r0 = NULL, *r3 = NULL;

  /* t[:, 1] += s */
  V(clt_select(t, 1, 1, &col), col);
  clt_tensor *s = ramp(10, dt, 1, (int64_t[]){4}, dev, sv);
  CU_OK(clt_add_(col, s));
  for (int i = 0; i < 4; i++)
    base[i * 6 + 1] += sv[i];
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after t[:, 1] += s");
  rel(s);
  /* t[::2] *= 2 (a 0-d operand broadcast) */
  V(clt_slice(t, 0, 0, CLT_SLICE_END, 2, &even), even);
  s = from_doubles((double[]){2}, dt, 0, NULL, dev);
  CU_OK(clt_mul_(even, s));
  for (int i = 0; i < 4; i += 2)
    for (int j = 0; j < 6; j++)
      base[i * 6 + j] *= 2;
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after t[::2] *= 2");
  rel(s);
  /* t.T -= u, u of the transpose's shape {6, 4} */
  V(clt_transpose(t, 0, 1, &tr), tr);
  double uv[24];
  for (int i = 0; i < 24; i++)
    uv[i] = (double)(i % 3 + 1);
  s = from_doubles(uv, dt, 2, (int64_t[]){6, 4}, dev);
  CU_OK(clt_sub_(tr, s));
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++)
      base[j * 6 + i] -= uv[i * 4 + j];
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after t.T -= u");
  rel(s);
  /* v += v, the same view twice (exact aliasing): doubled */
  V(clt_narrow(t, 0, 1, 2, &rows), rows);
  CU_OK(clt_add_(rows, rows));
  for (int i = 6; i < 18; i++)
    base[i] *= 2;
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after t[1:3] += t[1:3]");
  /* Two rows of one tensor: t[0] += t[3] */
  V(clt_select(t, 0, 0, &r0), r0);
  V(clt_select(t, 0, 3, &r3), r3);
  CU_OK(clt_add_(r0, r3));
  for (int j = 0; j < 6; j++)
    base[j] += base[18 + j];
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after t[0] += t[3]");
  /* A column, in place, on a transposed column view: t.T[5] *= t.T[5] (t[:, 5] squared) */
  clt_tensor *c5 = NULL;
  V(clt_select(tr, 0, 5, &c5), c5);
  CU_OK(clt_mul_(c5, c5));
  for (int i = 0; i < 4; i++)
    base[i * 6 + 5] *= base[i * 6 + 5];
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after t[:, 5] *= t[:, 5]");
  if (cu_is_float(dt)) {
    clt_tensor *two = from_doubles((double[]){2}, dt, 0, NULL, dev);
    CU_OK(clt_div_(col, two));
    for (int i = 0; i < 4; i++)
      base[i * 6 + 1] /= 2;
    rnd(base, 24, dt);
    expect_values(t, base, 24, "t after t[:, 1] /= 2");
    rel(two);
  }
  rel(t);
  rel(col);
  rel(even);
  rel(tr);
  rel(rows);
  rel(r0);
  rel(r3);
  rel(c5);
}

START_TEST(test_inplace_on_views) {
  each_device_dtype("test_inplace_on_views", inplace_on_views_on);
}
END_TEST

static void out_on_views_on(clt_device *dev, clt_dtype dt) {
  double base[24], av[24], bv[24];
  clt_tensor *t = seq(dt, 2, (int64_t[]){4, 6}, dev, base);
  clt_tensor *col = NULL, *odd = NULL, *blk = NULL, *bt = NULL, *r0 = NULL, *r1 = NULL, *r2 = NULL;

  /* Into a column: t[:, 3] = a + b */
  clt_tensor *A = ramp(10, dt, 1, (int64_t[]){4}, dev, av);
  clt_tensor *B = ramp(20, dt, 1, (int64_t[]){4}, dev, bv);
  V(clt_select(t, 1, 3, &col), col);
  CU_OK(clt_add_out(A, B, col));
  for (int i = 0; i < 4; i++)
    base[i * 6 + 3] = av[i] + bv[i];
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after add_out(a, b, t[:, 3])");
  rel(A);
  rel(B);
  /* Into every other row: t[1::2] = x * y, y a row broadcast */
  A = ramp(1, dt, 2, (int64_t[]){2, 6}, dev, av);
  B = ramp(2, dt, 1, (int64_t[]){6}, dev, bv);
  V(clt_slice(t, 0, 1, CLT_SLICE_END, 2, &odd), odd);
  CU_OK(clt_mul_out(A, B, odd));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 6; j++)
      base[(2 * i + 1) * 6 + j] = av[i * 6 + j] * bv[j];
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after mul_out(x, y, t[1::2])");
  rel(A);
  rel(B);
  /* Into a transposed block: t[:, 0:4].T = p - q */
  A = ramp(30, dt, 2, (int64_t[]){4, 4}, dev, av);
  double qv[16];
  for (int i = 0; i < 16; i++)
    qv[i] = (double)((i * 5) % 16 + 1);
  B = from_doubles(qv, dt, 2, (int64_t[]){4, 4}, dev);
  V(clt_narrow(t, 1, 0, 4, &blk), blk);
  V(clt_transpose(blk, 0, 1, &bt), bt);
  CU_OK(clt_sub_out(A, B, bt));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      base[j * 6 + i] = av[i * 4 + j] - qv[i * 4 + j];
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after sub_out(p, q, t[:, 0:4].T)");
  rel(A);
  rel(B);
  /* Operands and out all rows of t: t[2] = t[0] + t[1]; then out is an operand: t[0] = t[0] *
   * t[1]. */
  V(clt_select(t, 0, 0, &r0), r0);
  V(clt_select(t, 0, 1, &r1), r1);
  V(clt_select(t, 0, 2, &r2), r2);
  CU_OK(clt_add_out(r0, r1, r2));
  for (int j = 0; j < 6; j++)
    base[12 + j] = base[j] + base[6 + j];
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after add_out(t[0], t[1], t[2])");
  /* Keep the product small enough for f16: t[1] is at most 40 here, t[0] at most 24. */
  CU_OK(clt_mul_out(r0, r1, r0));
  for (int j = 0; j < 6; j++)
    base[j] = base[j] * base[6 + j];
  rnd(base, 24, dt);
  expect_values(t, base, 24, "t after mul_out(t[0], t[1], t[0])");
  rel(t);
  rel(col);
  rel(odd);
  rel(blk);
  rel(bt);
  rel(r0);
  rel(r1);
  rel(r2);
}

START_TEST(test_out_on_views) { each_device_dtype("test_out_on_views", out_on_views_on); }
END_TEST

/* ---- elementwise ops reading views ---------------------------------------------------------- */

static void ops_on_views_on(clt_device *dev, clt_dtype dt) {
  double a[24], b[24], w[24];
  clt_tensor *A = seq(dt, 2, (int64_t[]){4, 6}, dev, a);
  clt_tensor *B = ramp(30, dt, 2, (int64_t[]){6, 4}, dev, b);
  clt_tensor *Bt = NULL, *r = NULL, *ev = NULL, *mid = NULL, *c = NULL, *ce = NULL;

  /* A + B.T */
  V(clt_transpose(B, 0, 1, &Bt), Bt);
  V(clt_add(A, Bt, &r), r);
  expect_fresh(r, 2, (int64_t[]){4, 6}, "A + B.T");
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      w[i * 6 + j] = a[i * 6 + j] + b[j * 4 + i];
  expect_values(r, w, 24, "A + B.T");
  rel(r);
  /* A[::2] * A[2:4] (a strided and an offset operand) */
  V(clt_slice(A, 0, 0, CLT_SLICE_END, 2, &ev), ev);
  V(clt_narrow(A, 0, 2, 2, &mid), mid);
  V(clt_mul(ev, mid, &r), r);
  expect_fresh(r, 2, (int64_t[]){2, 6}, "A[::2] * A[2:4]");
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 6; j++)
      w[i * 6 + j] = a[2 * i * 6 + j] * a[(2 + i) * 6 + j];
  expect_values(r, w, 12, "A[::2] * A[2:4]");
  rel(r);
  /* A[1:3] + A[2:4]: two contiguous operands with offsets (the fast path must honour them) */
  clt_tensor *lo = NULL;
  V(clt_narrow(A, 0, 1, 2, &lo), lo);
  V(clt_add(lo, mid, &r), r);
  for (int i = 0; i < 12; i++)
    w[i] = a[6 + i] + a[12 + i];
  expect_values(r, w, 12, "A[1:3] + A[2:4]");
  rel(r);
  rel(lo);
  /* Contiguous views at odd offsets (1 and 3 elements: 2 bytes for f16), through the fast
   * kernels; and an empty view. */
  {
    clt_tensor *flat = NULL, *f1 = NULL, *f3 = NULL, *e0 = NULL, *e1 = NULL;
    V(clt_view(A, 1, (int64_t[]){24}, &flat), flat);
    V(clt_narrow(flat, 0, 1, 19, &f1), f1);
    V(clt_narrow(flat, 0, 3, 19, &f3), f3);
    V(clt_add(f1, f3, &r), r);
    for (int i = 0; i < 19; i++)
      w[i] = a[1 + i] + a[3 + i];
    expect_values(r, w, 19, "A.view(24)[1:20] + A.view(24)[3:22]");
    rel(r);
    V(clt_neg(f3, &r), r);
    for (int i = 0; i < 19; i++)
      w[i] = -a[3 + i];
    expect_values(r, w, 19, "neg(A.view(24)[3:22])");
    rel(r);
    V(clt_narrow(A, 0, 4, 0, &e0), e0);
    V(clt_narrow(Bt, 0, 1, 0, &e1), e1);
    V(clt_add(e0, e1, &r), r);
    expect_layout(r, 2, (int64_t[]){0, 6}, NULL, -1, "empty + empty view");
    rel(r);
    rel(flat);
    rel(f1);
    rel(f3);
    rel(e0);
    rel(e1);
  }
  /* A strided column broadcast against a transpose: B.T + A[:, 0:1] */
  {
    clt_tensor *c0 = NULL;
    V(clt_narrow(A, 1, 0, 1, &c0), c0); /* {4, 1}, strides {6, 1} */
    V(clt_add(Bt, c0, &r), r);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 6; j++)
        w[i * 6 + j] = b[j * 4 + i] + a[i * 6];
    expect_values(r, w, 24, "B.T + A[:, 0:1]");
    rel(r);
    rel(c0);
  }
  /* An expanded operand: A + expand(c, {4, 6}), and B.T - expand(c) */
  double cv[6];
  c = ramp(1, dt, 1, (int64_t[]){6}, dev, cv);
  V(clt_expand(c, 2, (int64_t[]){4, 6}, &ce), ce);
  V(clt_add(A, ce, &r), r);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      w[i * 6 + j] = a[i * 6 + j] + cv[j];
  expect_values(r, w, 24, "A + expand(c)");
  rel(r);
  V(clt_sub(Bt, ce, &r), r);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      w[i * 6 + j] = b[j * 4 + i] - cv[j];
  expect_values(r, w, 24, "B.T - expand(c)");
  rel(r);
  /* A 0-d view broadcast: A[1, 2] + A */
  clt_tensor *row = NULL, *s0 = NULL;
  V(clt_select(A, 0, 1, &row), row);
  V(clt_select(row, 0, 2, &s0), s0);
  V(clt_add(s0, A, &r), r);
  for (int i = 0; i < 24; i++)
    w[i] = a[8] + a[i];
  expect_values(r, w, 24, "A[1, 2] + A");
  rel(r);
  /* where(cond.T, A, B.T), cond {6, 4}; and where(expand(cond6), B.T, A) */
  bool cb[24], c6[6];
  for (int i = 0; i < 24; i++)
    cb[i] = i % 3 == 0;
  for (int j = 0; j < 6; j++)
    c6[j] = j % 2 == 1;
  clt_tensor *C = cu_tensor(cb, CLT_BOOL, 2, (int64_t[]){6, 4}, dev), *Ct = NULL;
  clt_tensor *C6 = cu_tensor(c6, CLT_BOOL, 1, (int64_t[]){6}, dev), *C6e = NULL;
  V(clt_transpose(C, 0, 1, &Ct), Ct);
  V(clt_where(Ct, A, Bt, &r), r);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      w[i * 6 + j] = cb[j * 4 + i] ? a[i * 6 + j] : b[j * 4 + i];
  expect_values(r, w, 24, "where(C.T, A, B.T)");
  rel(r);
  V(clt_expand(C6, 2, (int64_t[]){4, 6}, &C6e), C6e);
  V(clt_where(C6e, Bt, A, &r), r);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      w[i * 6 + j] = c6[j] ? b[j * 4 + i] : a[i * 6 + j];
  expect_values(r, w, 24, "where(expand(c6), B.T, A)");
  rel(r);
  /* A comparison (bool result) and a _scalar form on strided views */
  {
    clt_tensor *ac = NULL;
    V(clt_clone(ev, &ac), ac); /* A[::2], contiguous */
    V(clt_eq(ev, ac, &r), r);
    ck_assert_int_eq(clt_tensor_dtype(r), CLT_BOOL);
    for (int i = 0; i < 12; i++)
      w[i] = 1;
    expect_values(r, w, 12, "eq(A[::2], clone(A[::2]))");
    rel(r);
    V(clt_gt(Bt, A, &r), r);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 6; j++)
        w[i * 6 + j] = b[j * 4 + i] > a[i * 6 + j];
    expect_values(r, w, 24, "gt(B.T, A)");
    rel(r);
    V(clt_add_scalar(Bt, 3, &r), r);
    ck_assert_int_eq(clt_tensor_dtype(r), dt);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 6; j++)
        w[i * 6 + j] = b[j * 4 + i] + 3;
    expect_values(r, w, 24, "add_scalar(B.T, 3)");
    rel(r);
    rel(ac);
  }
  /* cast of a transposed view */
  clt_dtype to = dt == CLT_F32 ? CLT_I32 : CLT_F32;
  V(clt_cast(Bt, to, &r), r);
  expect_fresh(r, 2, (int64_t[]){4, 6}, "cast(B.T)");
  ck_assert_int_eq(clt_tensor_dtype(r), to);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      w[i * 6 + j] = b[j * 4 + i];
  expect_values(r, w, 24, "cast(B.T)");
  rel(r);
  /* unary: neg of a transpose; exp of a strided slice (floats) */
  V(clt_neg(Bt, &r), r);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      w[i * 6 + j] = -b[j * 4 + i];
  expect_values(r, w, 24, "neg(B.T)");
  rel(r);
  if (cu_is_float(dt)) {
    double xv[24];
    for (int i = 0; i < 24; i++)
      xv[i] = conv(0.125 * (double)(i % 17) - 1.0, dt); /* exact in f16 too */
    clt_tensor *X = from_doubles(xv, dt, 2, (int64_t[]){4, 6}, dev), *xs = NULL;
    V(clt_slice(X, 1, 1, CLT_SLICE_END, 2, &xs), xs); /* {4, 3} */
    V(clt_exp(xs, &r), r);
    expect_fresh(r, 2, (int64_t[]){4, 3}, "exp(X[:, 1::2])");
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 3; j++)
        w[i * 3 + j] = exp(xv[i * 6 + 1 + 2 * j]);
    expect_values_tol(r, w, 12,
                      dt == CLT_F16   ? 2e-3
                      : dt == CLT_F32 ? 1e-6
                                      : 1e-13,
                      "exp(X[:, 1::2])");
    rel(r);
    rel(X);
    rel(xs);
  }
  rel(A);
  rel(B);
  rel(Bt);
  rel(ev);
  rel(mid);
  rel(c);
  rel(ce);
  rel(row);
  rel(s0);
  rel(C);
  rel(Ct);
  rel(C6);
  rel(C6e);
}

START_TEST(test_ops_on_views) { each_device_dtype("test_ops_on_views", ops_on_views_on); }
END_TEST

/* The one larger case: a 96 x 104 transposed f32 operand (9984 elements) on each device, added
 * to a contiguous one, and an in-place add into the transpose. */
START_TEST(test_ops_on_views_large) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  const int64_t R = 96, C = 104, n = R * C;
  double *m = cu_malloc((size_t)n * sizeof *m), *k = cu_malloc((size_t)n * sizeof *k);
  double *w = cu_malloc((size_t)n * sizeof *w);
  for (int64_t i = 0; i < n; i++) {
    m[i] = (double)((i * 37) % 1013);
    k[i] = (double)((i * 11) % 97) + 0.5;
  }
  for (int d = 0; d < ndev; d++) {
    set_ctx(devs[d], CLT_F32);
    clt_tensor *M = from_doubles(m, CLT_F32, 2, (int64_t[]){R, C}, devs[d]);
    clt_tensor *K = from_doubles(k, CLT_F32, 2, (int64_t[]){C, R}, devs[d]);
    clt_tensor *Mt = NULL, *r = NULL;
    V(clt_transpose(M, 0, 1, &Mt), Mt);
    V(clt_add(Mt, K, &r), r);
    for (int64_t i = 0; i < C; i++)
      for (int64_t j = 0; j < R; j++)
        w[i * R + j] = m[j * C + i] + k[i * R + j];
    expect_values(r, w, n, "M.T + K (96 x 104)");
    CU_OK(clt_add_(Mt, K));
    for (int64_t i = 0; i < R; i++)
      for (int64_t j = 0; j < C; j++)
        w[i * C + j] = m[i * C + j] + k[j * R + i];
    expect_values(M, w, n, "M after M.T += K (96 x 104)");
    rel(M);
    rel(K);
    rel(Mt);
    rel(r);
  }
  free(m);
  free(k);
  free(w);
}
END_TEST

/* ---- reductions on views -------------------------------------------------------------------- */

static void reductions_on_views_on(clt_device *dev, clt_dtype dt) {
  /* A permutation of 1..24, so that the maximum is not the last element. */
  double a[24];
  for (int i = 0; i < 24; i++)
    a[i] = (double)((i * 7) % 24 + 1);
  clt_tensor *A = from_doubles(a, dt, 2, (int64_t[]){4, 6}, dev);
  clt_tensor *At = NULL, *ev = NULL, *mid = NULL, *odd = NULL, *r = NULL;
  clt_dtype sdt = cu_is_float(dt) ? dt : CLT_I64;
  double want[8];

  V(clt_transpose(A, 0, 1, &At), At);
  V(clt_sum(At, &r), r);
  ck_assert_int_eq(clt_tensor_dtype(r), sdt);
  expect_values(r, (double[]){300}, 1, "sum(A.T)");
  rel(r);
  V(clt_slice(A, 0, 0, CLT_SLICE_END, 2, &ev), ev);
  V(clt_sum(ev, &r), r);
  want[0] = 0;
  for (int j = 0; j < 6; j++)
    want[0] += a[j] + a[12 + j];
  expect_values(r, want, 1, "sum(A[::2])");
  rel(r);
  V(clt_narrow(A, 0, 1, 2, &mid), mid);
  V(clt_sum(mid, &r), r);
  want[0] = 0;
  for (int i = 6; i < 18; i++)
    want[0] += a[i];
  expect_values(r, want, 1, "sum(A[1:3])");
  rel(r);
  /* A contiguous view at an odd offset: A.view(24)[3:20] */
  {
    clt_tensor *flat = NULL, *f3 = NULL;
    V(clt_view(A, 1, (int64_t[]){24}, &flat), flat);
    V(clt_narrow(flat, 0, 3, 17, &f3), f3);
    V(clt_sum(f3, &r), r);
    want[0] = 0;
    for (int i = 3; i < 20; i++)
      want[0] += a[i];
    expect_values(r, want, 1, "sum(A.view(24)[3:20])");
    rel(r);
    V(clt_max(f3, &r), r);
    want[0] = 0;
    for (int i = 3; i < 20; i++)
      want[0] = fmax(want[0], a[i]);
    expect_values(r, want, 1, "max(A.view(24)[3:20])");
    rel(r);
    rel(flat);
    rel(f3);
  }
  /* Along a dimension of the transpose: row sums and column sums of A. */
  V(clt_sum_dim(At, 0, 0, &r), r);
  expect_fresh(r, 1, (int64_t[]){4}, "sum_dim(A.T, 0)");
  for (int i = 0; i < 4; i++) {
    want[i] = 0;
    for (int j = 0; j < 6; j++)
      want[i] += a[i * 6 + j];
  }
  expect_values(r, want, 4, "sum_dim(A.T, 0)");
  rel(r);
  V(clt_sum_dim(At, 1, 1, &r), r);
  expect_layout(r, 2, (int64_t[]){6, 1}, NULL, 0, "sum_dim(A.T, 1, keepdim)");
  for (int j = 0; j < 6; j++) {
    want[j] = 0;
    for (int i = 0; i < 4; i++)
      want[j] += a[i * 6 + j];
  }
  expect_values(r, want, 6, "sum_dim(A.T, 1, keepdim)");
  rel(r);
  /* max of the odd columns; max along the transpose's dimension 1 (A's columns) */
  V(clt_slice(A, 1, 1, CLT_SLICE_END, 2, &odd), odd);
  V(clt_max(odd, &r), r);
  ck_assert_int_eq(clt_tensor_dtype(r), dt);
  want[0] = 0;
  for (int i = 0; i < 4; i++)
    for (int j = 1; j < 6; j += 2)
      want[0] = fmax(want[0], a[i * 6 + j]);
  expect_values(r, want, 1, "max(A[:, 1::2])");
  rel(r);
  V(clt_max_dim(At, 1, 0, &r), r);
  for (int j = 0; j < 6; j++) {
    want[j] = 0;
    for (int i = 0; i < 4; i++)
      want[j] = fmax(want[j], a[i * 6 + j]);
  }
  expect_values(r, want, 6, "max_dim(A.T, 1)");
  rel(r);
  /* argmax of a strided view: the index within the view */
  V(clt_argmax(odd, &r), r);
  {
    int64_t best = 0;
    for (int64_t q = 1; q < 12; q++)
      if (a[(q / 3) * 6 + 1 + 2 * (q % 3)] > a[(best / 3) * 6 + 1 + 2 * (best % 3)])
        best = q;
    want[0] = (double)best;
  }
  expect_values(r, want, 1, "argmax(A[:, 1::2])");
  rel(r);
  /* sum of an expansion counts each element as often as it appears */
  clt_tensor *c = ramp(1, dt, 1, (int64_t[]){6}, dev, NULL), *ce = NULL;
  V(clt_expand(c, 2, (int64_t[]){4, 6}, &ce), ce);
  V(clt_sum(ce, &r), r);
  expect_values(r, (double[]){84}, 1, "sum(expand(1..6, {4, 6}))");
  rel(r);
  V(clt_sum_dim(ce, 0, 0, &r), r);
  expect_values(r, (double[]){4, 8, 12, 16, 20, 24}, 6, "sum_dim(expand(1..6, {4, 6}), 0)");
  rel(r);
  if (cu_is_float(dt)) {
    V(clt_mean_dim(odd, 0, 0, &r), r);
    for (int j = 0; j < 3; j++) {
      want[j] = 0;
      for (int i = 0; i < 4; i++)
        want[j] += a[i * 6 + 1 + 2 * j];
      want[j] /= 4;
    }
    expect_values_tol(r, want, 3, cu_rtol(dt), "mean_dim(A[:, 1::2], 0)");
    rel(r);
  }
  rel(A);
  rel(At);
  rel(ev);
  rel(mid);
  rel(odd);
  rel(c);
  rel(ce);
}

START_TEST(test_reductions_on_views) {
  each_device_dtype("test_reductions_on_views", reductions_on_views_on);
}
END_TEST

/* ---- matmul on views ------------------------------------------------------------------------ */

/* C = A (m x k, strides sa) times B (k x n, strides sb), in double. */
static void ref_mm(const double *A, int64_t oa, const int64_t *sa, const double *B, int64_t ob,
                   const int64_t *sb, int64_t m, int64_t k, int64_t n, double *C) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t q = 0; q < k; q++)
        s += A[oa + i * sa[0] + q * sa[1]] * B[ob + q * sb[0] + j * sb[1]];
      C[i * n + j] = s;
    }
}

static void matmul_on_views_on(clt_device *dev, clt_dtype dt) {
  if (!cu_is_float(dt))
    return; /* matmul takes floats only */
  /* Small integers: every product and sum is exact in every float dtype. */
  double a[48], b[48], at[48], bt[48], want[64];
  for (int i = 0; i < 48; i++) {
    a[i] = (double)(i % 5) - 2;
    b[i] = (double)((i * 3) % 7) - 3;
  }
  clt_tensor *A = from_doubles(a, dt, 2, (int64_t[]){4, 6}, dev);
  clt_tensor *B = from_doubles(b, dt, 2, (int64_t[]){6, 5}, dev);
  /* At (6 x 4) holds A transposed, Bt (5 x 6) B transposed. */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      at[j * 4 + i] = a[i * 6 + j];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 5; j++)
      bt[j * 6 + i] = b[i * 5 + j];
  clt_tensor *At = from_doubles(at, dt, 2, (int64_t[]){6, 4}, dev);
  clt_tensor *Bt = from_doubles(bt, dt, 2, (int64_t[]){5, 6}, dev);
  clt_tensor *Atv = NULL, *Btv = NULL, *r = NULL, *ak = NULL, *bk = NULL, *ar = NULL, *bc = NULL;
  double rt = cu_rtol(dt);

  V(clt_transpose(At, 0, 1, &Atv), Atv);
  V(clt_matmul(Atv, B, &r), r);
  expect_fresh(r, 2, (int64_t[]){4, 5}, "matmul(At.T, B)");
  ref_mm(a, 0, (int64_t[]){6, 1}, b, 0, (int64_t[]){5, 1}, 4, 6, 5, want);
  expect_values_tol(r, want, 20, rt, "matmul(At.T, B)");
  rel(r);
  V(clt_transpose(Bt, 0, 1, &Btv), Btv);
  V(clt_matmul(A, Btv, &r), r);
  expect_values_tol(r, want, 20, rt, "matmul(A, Bt.T)");
  rel(r);
  V(clt_matmul(Atv, Btv, &r), r);
  expect_values_tol(r, want, 20, rt, "matmul(At.T, Bt.T)");
  rel(r);
  /* k narrowed: A[:, 1:5] B[1:5] (leading dimensions larger than k) */
  V(clt_narrow(A, 1, 1, 4, &ak), ak);
  V(clt_narrow(B, 0, 1, 4, &bk), bk);
  V(clt_matmul(ak, bk, &r), r);
  ref_mm(a, 1, (int64_t[]){6, 1}, b, 5, (int64_t[]){5, 1}, 4, 4, 5, want);
  expect_values_tol(r, want, 20, rt, "matmul(A[:, 1:5], B[1:5])");
  rel(r);
  /* Strided rows and columns: A[::2] B[:, ::2] */
  V(clt_slice(A, 0, 0, CLT_SLICE_END, 2, &ar), ar);
  V(clt_slice(B, 1, 0, CLT_SLICE_END, 2, &bc), bc);
  V(clt_matmul(ar, bc, &r), r);
  expect_fresh(r, 2, (int64_t[]){2, 3}, "matmul(A[::2], B[:, ::2])");
  ref_mm(a, 0, (int64_t[]){12, 1}, b, 0, (int64_t[]){5, 2}, 2, 6, 3, want);
  expect_values_tol(r, want, 6, rt, "matmul(A[::2], B[:, ::2])");
  rel(r);
  /* Batched: permute(P {4, 2, 6}, {1, 0, 2}) is {2, 4, 6}; times B */
  clt_tensor *P = from_doubles(a, dt, 3, (int64_t[]){4, 2, 6}, dev), *Pp = NULL;
  V(clt_permute(P, 3, (int[]){1, 0, 2}, &Pp), Pp);
  V(clt_matmul(Pp, B, &r), r);
  expect_fresh(r, 3, (int64_t[]){2, 4, 5}, "matmul(permute(P), B)");
  for (int bi = 0; bi < 2; bi++)
    ref_mm(a, bi * 6, (int64_t[]){12, 1}, b, 0, (int64_t[]){5, 1}, 4, 6, 5, want + bi * 20);
  expect_values_tol(r, want, 40, rt, "matmul(permute(P), B)");
  rel(r);
  /* An expanded batch: expand(A, {2, 4, 6}) times Q {2, 6, 5} */
  double q[60];
  for (int i = 0; i < 60; i++)
    q[i] = (double)((i * 5) % 9) - 4;
  clt_tensor *Q = from_doubles(q, dt, 3, (int64_t[]){2, 6, 5}, dev), *Ae = NULL;
  V(clt_expand(A, 3, (int64_t[]){2, 4, 6}, &Ae), Ae);
  V(clt_matmul(Ae, Q, &r), r);
  for (int bi = 0; bi < 2; bi++)
    ref_mm(a, 0, (int64_t[]){6, 1}, q, bi * 30, (int64_t[]){5, 1}, 4, 6, 5, want + bi * 20);
  expect_values_tol(r, want, 40, rt, "matmul(expand(A), Q)");
  rel(r);
  rel(A);
  rel(B);
  rel(At);
  rel(Bt);
  rel(Atv);
  rel(Btv);
  rel(ak);
  rel(bk);
  rel(ar);
  rel(bc);
  rel(P);
  rel(Pp);
  rel(Q);
  rel(Ae);
}

START_TEST(test_matmul_on_views) { each_device_dtype("test_matmul_on_views", matmul_on_views_on); }
END_TEST

/* The issue's layout rules for strided operands, seen through the allocator: an elementwise op
 * on a transposed or sliced operand runs the strided kernels on it in place (issue 13, item 5:
 * "a strided operand goes through one strided kernel family"), and clt_matmul of a transposed
 * operand, or of one narrowed along its columns, passes its leading dimension and offset to
 * BLAS or CLBlast "instead of copies where the layout allows". Either way the only memory the
 * call asks for is the result's. f32 and f64 (f16 matmul multiplies f32 copies, as
 * documented). */
static uint64_t allocations(clt_device *dev) {
  clt_memory_stats ms;
  CU_OK(clt_device_memory_stats(dev, &ms));
  return ms.allocations;
}

static void no_copy(clt_device *dev, clt_dtype dt, int which) {
  if (dt != CLT_F32 && dt != CLT_F64)
    return;
  double a[48];
  for (int i = 0; i < 48; i++)
    a[i] = (double)(i % 5) - 2;
  clt_tensor *A = from_doubles(a, dt, 2, (int64_t[]){4, 6}, dev);
  clt_tensor *B = from_doubles(a, dt, 2, (int64_t[]){6, 5}, dev);
  clt_tensor *At = from_doubles(a, dt, 2, (int64_t[]){6, 4}, dev);
  clt_tensor *Bt = NULL, *ak = NULL, *bk = NULL, *Atv = NULL, *ev = NULL, *r = NULL;
  V(clt_transpose(B, 0, 1, &Bt), Bt);               /* {5, 6} */
  V(clt_narrow(A, 1, 1, 4, &ak), ak);               /* {4, 4}, lda 6 */
  V(clt_narrow(B, 0, 1, 4, &bk), bk);               /* {4, 5}, offset 5 */
  V(clt_transpose(At, 0, 1, &Atv), Atv);            /* {4, 6}, transposed */
  V(clt_slice(A, 0, 0, CLT_SLICE_END, 2, &ev), ev); /* {2, 6}, rows 12 apart */
  CU_OK(clt_device_synchronize(dev));
  struct {
    const char *what;
    clt_tensor *x, *y;
    int matmul;
  } cases[] = {
      {"add(A.T-view, A)", Atv, A, 0},      {"add(B.T, B.T)", Bt, Bt, 0},
      {"add(A[::2], A[1:3])", ev, NULL, 0}, {"matmul(A[:, 1:5], B[1:5])", ak, bk, 1},
      {"matmul(At.T, B)", Atv, B, 1},       {"matmul(A[::2], B)", ev, B, 1},
  };
  clt_tensor *mid = NULL;
  V(clt_narrow(A, 0, 1, 2, &mid), mid);
  cases[2].y = mid;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    if (cases[c].matmul != which)
      continue;
    uint64_t before = allocations(dev);
    clt_status st = cases[c].matmul ? clt_matmul(cases[c].x, cases[c].y, &r)
                                    : clt_add(cases[c].x, cases[c].y, &r);
    ck_assert_msg(st == CLT_OK, "%s (%s): %s", cases[c].what, ctx, clt_last_error());
    uint64_t n = allocations(dev) - before;
    /* the tiled kernel path (CLT_MATMUL=kernel, or no CLBlast on a GPU) takes contiguous
     * operands only: it multiplies copies, as clt.h says */
    const char *path = clt_matmul_path(dev);
    bool copies_allowed = cases[c].matmul && path && strcmp(path, "kernel") == 0;
    ck_assert_msg(n == 1 || (copies_allowed && n <= 3),
                  "%s (%s) asked the allocator for %llu buffers: the result and %llu copies",
                  cases[c].what, ctx, (unsigned long long)n, (unsigned long long)(n - 1));
    rel(r);
  }
  rel(A);
  rel(B);
  rel(At);
  rel(Bt);
  rel(ak);
  rel(bk);
  rel(Atv);
  rel(ev);
  rel(mid);
}

static void no_copy_elementwise_on(clt_device *dev, clt_dtype dt) { no_copy(dev, dt, 0); }
static void no_copy_matmul_on(clt_device *dev, clt_dtype dt) { no_copy(dev, dt, 1); }

START_TEST(test_views_no_copy_elementwise) {
  each_device_dtype("test_views_no_copy_elementwise", no_copy_elementwise_on);
}
END_TEST

START_TEST(test_views_no_copy_matmul) {
  each_device_dtype("test_views_no_copy_matmul", no_copy_matmul_on);
}
END_TEST

/* ---- transfers of views --------------------------------------------------------------------- */

static void transfers_of_views_on(clt_device *dev, clt_dtype dt) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs), me = 0;
  for (int d = 0; d < ndev; d++)
    if (devs[d] == dev)
      me = d;
  clt_device *to = devs[(me + 1) % ndev];
  if (!cu_dtype_ok("test_transfers_of_views", to, dt))
    return;
  double base[240], want[240];
  clt_tensor *t = seq(dt, 2, (int64_t[]){40, 6}, dev, base);
  clt_tensor *tr = NULL, *o = NULL, *nv = NULL, *c = NULL, *ce = NULL, *same = NULL, *cp = NULL;

  /* The transpose of rows 10..13: to the next device, a contiguous {6, 4} with just those. */
  clt_tensor *rows = NULL;
  V(clt_narrow(t, 0, 10, 4, &rows), rows);
  V(clt_transpose(rows, 0, 1, &tr), tr);
  clt_transfer_stats before, after;
  clt_device *cl = !clt_device_is_host(to) ? to : NULL;
  if (cl && clt_device_is_host(dev))
    CU_OK(clt_transfer_stats_get(cl, &before));
  V(clt_to(tr, to, &o), o);
  ck_assert_msg(clt_tensor_device(o) == to, "clt_to(view) lives on %s (%s)", cu_dev_name(to), ctx);
  gather(base, 60, 2, (int64_t[]){6, 4}, (int64_t[]){1, 6}, want);
  if (to != dev) {
    expect_fresh(o, 2, (int64_t[]){6, 4}, "clt_to(t[10:14].T, next)");
    expect_values(o, want, 24, "clt_to(t[10:14].T, next)");
    if (cl && clt_device_is_host(dev)) {
      /* Just the view's elements cross, not the 240 of its storage. */
      CU_OK(clt_transfer_stats_get(cl, &after));
      ck_assert_msg(after.h2d_bytes - before.h2d_bytes == clt_tensor_nbytes(tr),
                    "clt_to(t[10:14].T, %s) sent %llu bytes, expected %zu (%s)", cu_dev_name(to),
                    (unsigned long long)(after.h2d_bytes - before.h2d_bytes), clt_tensor_nbytes(tr),
                    ctx);
    }
    /* A copy: writing it leaves t alone. */
    CU_OK(clt_fill_(o, 3));
    expect_values(t, base, 240, "t after fill_ of its view's copy on another device");
  } else {
    ck_assert_msg(o == tr, "clt_to(view, its own device) is the view itself (%s)", ctx);
  }
  rel(o);

  /* Rows 20..22 (contiguous with an offset). */
  V(clt_narrow(t, 0, 20, 3, &nv), nv);
  if (cl && clt_device_is_host(dev))
    CU_OK(clt_transfer_stats_get(cl, &before));
  V(clt_to(nv, to, &o), o);
  if (to != dev) {
    expect_fresh(o, 2, (int64_t[]){3, 6}, "clt_to(t[20:23], next)");
    if (cl && clt_device_is_host(dev)) {
      CU_OK(clt_transfer_stats_get(cl, &after));
      ck_assert_msg(after.h2d_bytes - before.h2d_bytes == clt_tensor_nbytes(nv),
                    "clt_to(t[20:23], %s) sent %llu bytes, expected %zu (%s)", cu_dev_name(to),
                    (unsigned long long)(after.h2d_bytes - before.h2d_bytes), clt_tensor_nbytes(nv),
                    ctx);
    }
  }
  expect_values(o, base + 120, 18, "clt_to(t[20:23], next)");
  rel(o);

  /* An expansion arrives as a contiguous tensor of all its elements. */
  c = ramp(1, dt, 1, (int64_t[]){3}, dev, NULL);
  V(clt_expand(c, 2, (int64_t[]){2, 3}, &ce), ce);
  V(clt_to(ce, to, &o), o);
  if (to != dev)
    expect_fresh(o, 2, (int64_t[]){2, 3}, "clt_to(expand, next)");
  expect_values(o, (double[]){1, 2, 3, 1, 2, 3}, 6, "clt_to(expand, next)");
  if (to != dev) {
    CU_OK(clt_fill_(o, 7)); /* its own memory, writable */
    expect_values(c, (double[]){1, 2, 3}, 3, "c after fill_ of its expansion's copy");
  }
  rel(o);

  /* A 0-d view (t[33, 4], offset 202) and an empty one. */
  {
    clt_tensor *r33 = NULL, *z = NULL, *e = NULL, *oz = NULL, *oe = NULL;
    V(clt_select(t, 0, 33, &r33), r33);
    V(clt_select(r33, 0, 4, &z), z);
    V(clt_to(z, to, &oz), oz);
    expect_layout(oz, 0, NULL, NULL, to != dev ? 0 : 202, "clt_to(t[33, 4], next)");
    expect_values(oz, base + 202, 1, "clt_to(t[33, 4], next)");
    V(clt_narrow(t, 0, 40, 0, &e), e);
    V(clt_to(e, to, &oe), oe);
    expect_layout(oe, 2, (int64_t[]){0, 6}, NULL, -1, "clt_to(t[40:40], next)");
    rel(r33);
    rel(z);
    rel(e);
    rel(oz);
    rel(oe);
  }

  /* To its own device: clt_to is the same handle, clt_copy_to a new contiguous copy. */
  V(clt_to(tr, dev, &same), same);
  ck_assert_msg(same == tr, "clt_to(view, its device) is the view itself (%s)", ctx);
  V(clt_copy_to(tr, dev, &cp), cp);
  ck_assert_msg(cp != tr, "clt_copy_to makes a new tensor (%s)", ctx);
  expect_fresh(cp, 2, (int64_t[]){6, 4}, "clt_copy_to(t[10:14].T, own device)");
  expect_values(cp, want, 24, "clt_copy_to(t[10:14].T, own device)");
  CU_OK(clt_fill_(cp, 2));
  expect_values(t, base, 240, "t after fill_ of clt_copy_to of its view");

  /* clt_move of a view: the handle is replaced by the copy; t keeps its elements. */
  clt_tensor *mv = NULL;
  V(clt_select(t, 1, 5, &mv), mv); /* t[:, 5] */
  CU_OK(clt_move(&mv, to));
  ck_assert_msg(clt_tensor_device(mv) == to, "clt_move(view) moved it (%s)", ctx);
  gather(base, 5, 1, (int64_t[]){40}, (int64_t[]){6}, want);
  expect_values(mv, want, 40, "clt_move(t[:, 5], next)");
  expect_values(t, base, 240, "t after clt_move of its view");
  rel(mv);
  rel(t);
  rel(rows);
  rel(tr);
  rel(nv);
  rel(c);
  rel(ce);
  rel(same);
  rel(cp);
}

START_TEST(test_transfers_of_views) {
  each_device_dtype("test_transfers_of_views", transfers_of_views_on);
}
END_TEST

/* ---- clt_tensor_read, clt_item, clt_format, clt_tensor_data of views ------------------------ */

START_TEST(test_read_item_print_views) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  static const clt_dtype dts[] = {CLT_F32, CLT_I32, CLT_F16};
  for (int d = 0; d < ndev; d++)
    for (int k = 0; k < 3; k++) {
      clt_device *dev = devs[d];
      clt_dtype dt = dts[k];
      set_ctx(dev, dt);
      double base[6];
      clt_tensor *t = seq(dt, 2, (int64_t[]){2, 3}, dev, base);
      clt_tensor *tr = NULL, *r = NULL, *z = NULL, *one = NULL, *o1 = NULL, *c = NULL, *ce = NULL,
                 *flat = NULL, *sl = NULL;
      V(clt_transpose(t, 0, 1, &tr), tr);

      /* clt_tensor_read: exactly nbytes works, one byte less is refused. */
      size_t nb = clt_tensor_nbytes(tr);
      ck_assert_uint_eq(nb, 6 * clt_dtype_size(dt));
      unsigned char buf[64];
      memset(buf, 0xAB, sizeof buf);
      CU_OK(clt_tensor_read(tr, buf, nb));
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
          ck_assert_msg(cu_get(buf, dt, i * 2 + j) == base[j * 3 + i],
                        "clt_tensor_read(t.T)[%d][%d] is %g (%s)", i, j, cu_get(buf, dt, i * 2 + j),
                        ctx);
      ck_assert_msg(buf[nb] == 0xAB, "clt_tensor_read wrote past nbytes (%s)", ctx);
      CU_FAILS(clt_tensor_read(tr, buf, nb - 1), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_read");

      /* clt_item of a 0-d view with an offset, and of a one-element 2-D view. */
      V(clt_select(tr, 0, 2, &r), r); /* t[:, 2] */
      V(clt_select(r, 0, 1, &z), z);  /* t[1, 2] */
      double x = 0;
      CU_OK(clt_item(z, &x));
      ck_assert_msg(x == base[5], "item(t[1, 2]) is %g, expected %g (%s)", x, base[5], ctx);
      V(clt_narrow(t, 0, 1, 1, &one), one);
      V(clt_narrow(one, 1, 1, 1, &o1), o1); /* t[1:2, 1:2] */
      CU_OK(clt_item(o1, &x));
      ck_assert_msg(x == base[4], "item(t[1:2, 1:2]) is %g, expected %g (%s)", x, base[4], ctx);
      int64_t xi = 0;
      CU_OK(clt_item_i64(z, &xi));
      ck_assert_msg(xi == 6, "item_i64(t[1, 2]) is %lld (%s)", (long long)xi, ctx);

      /* clt_format of the transpose, a strided slice, an expansion and a 0-d view. */
      char dev_sfx[32] = "", dt_sfx[32] = "", sfx[64], want[256], got[256];
      if (!clt_device_is_host(dev))
        snprintf(dev_sfx, sizeof dev_sfx, ", device='%s'", cu_dev_name(dev));
      if (dt != CLT_F32)
        snprintf(dt_sfx, sizeof dt_sfx, ", dtype=%s", cu_dt_name(dt));
      snprintf(sfx, sizeof sfx, "%s%s)", dev_sfx, dt_sfx);
      int fl = cu_is_float(dt);
      snprintf(want, sizeof want, "tensor([[1%s, 4%s],\n        [2%s, 5%s],\n        [3%s, 6%s]]%s",
               fl ? "." : "", fl ? "." : "", fl ? "." : "", fl ? "." : "", fl ? "." : "",
               fl ? "." : "", sfx);
      CU_OK(clt_format(tr, got, sizeof got, NULL));
      ck_assert_msg(strcmp(got, want) == 0, "format(t.T) is\n%s\nexpected\n%s", got, want);
      V(clt_view(t, 1, (int64_t[]){6}, &flat), flat);
      V(clt_slice(flat, 0, 0, CLT_SLICE_END, 2, &sl), sl);
      snprintf(want, sizeof want, "tensor([1%s, 3%s, 5%s]%s", fl ? "." : "", fl ? "." : "",
               fl ? "." : "", sfx);
      CU_OK(clt_format(sl, got, sizeof got, NULL));
      ck_assert_msg(strcmp(got, want) == 0, "format(t.view(6)[::2]) is\n%s\nexpected\n%s", got,
                    want);
      c = ramp(1, dt, 1, (int64_t[]){3}, dev, NULL);
      V(clt_expand(c, 2, (int64_t[]){2, 3}, &ce), ce);
      snprintf(want, sizeof want, "tensor([[1%s, 2%s, 3%s],\n        [1%s, 2%s, 3%s]]%s",
               fl ? "." : "", fl ? "." : "", fl ? "." : "", fl ? "." : "", fl ? "." : "",
               fl ? "." : "", sfx);
      CU_OK(clt_format(ce, got, sizeof got, NULL));
      ck_assert_msg(strcmp(got, want) == 0, "format(expand) is\n%s\nexpected\n%s", got, want);
      snprintf(want, sizeof want, "tensor(6%s%s", fl ? "." : "", sfx);
      CU_OK(clt_format(z, got, sizeof got, NULL));
      ck_assert_msg(strcmp(got, want) == 0, "format(t[1, 2]) is\n%s\nexpected\n%s", got, want);

      /* clt_tensor_data: a contiguous host view points at its first element; a strided one
       * has no such pointer. */
      if (clt_device_is_host(dev)) {
        char *p0 = clt_tensor_data(t);
        ck_assert_ptr_nonnull(p0);
        char *p1 = clt_tensor_data(one);
        ck_assert_msg(p1 == p0 + 3 * clt_dtype_size(dt),
                      "clt_tensor_data(t[1:2]) is not t's data + 3 elements (%s)", ctx);
        clt_clear_error();
        ck_assert_ptr_null(clt_tensor_data(tr));
        ck_assert_int_eq(clt_last_status(), CLT_ERR_INVALID_ARGUMENT);
        cu_assert_prefix(clt_last_error(), "clt_tensor_data", "clt_tensor_data(t.T)");
      }
      rel(t);
      rel(tr);
      rel(r);
      rel(z);
      rel(one);
      rel(o1);
      rel(c);
      rel(ce);
      rel(flat);
      rel(sl);
    }
}
END_TEST

/* A view of more than 1000 elements prints summarized, exactly as its contiguous clone does. */
START_TEST(test_print_large_view) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    set_ctx(devs[d], CLT_F32);
    clt_tensor *t = seq(CLT_F32, 2, (int64_t[]){30, 41}, devs[d], NULL);
    clt_tensor *n = NULL, *tr = NULL, *c = NULL;
    V(clt_narrow(t, 1, 1, 40, &n), n);  /* {30, 40}, rows 41 apart */
    V(clt_transpose(n, 0, 1, &tr), tr); /* {40, 30}: 1200 elements */
    V(clt_clone(tr, &c), c);
    size_t lv = 0, lc = 0;
    CU_OK(clt_format(tr, NULL, 0, &lv));
    CU_OK(clt_format(c, NULL, 0, &lc));
    char *fv = cu_malloc(lv + 1), *fc = cu_malloc(lc + 1);
    CU_OK(clt_format(tr, fv, lv + 1, NULL));
    CU_OK(clt_format(c, fc, lc + 1, NULL));
    ck_assert_msg(strcmp(fv, fc) == 0, "format of a view and of its clone differ (%s):\n%s\n%s",
                  ctx, fv, fc);
    ck_assert_msg(strstr(fv, "...") != NULL, "1200 elements are summarized (%s): %s", ctx, fv);
    free(fv);
    free(fc);
    rel(t);
    rel(n);
    rel(tr);
    rel(c);
  }
}
END_TEST

/* clt_item_i64 is exact for an i64 view beyond 2^53. */
START_TEST(test_item_i64_view) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    set_ctx(devs[d], CLT_I64);
    int64_t v[4];
    for (int i = 0; i < 4; i++)
      v[i] = (INT64_C(1) << 60) + 2 * i + 1;
    clt_tensor *t = cu_tensor(v, CLT_I64, 1, (int64_t[]){4}, devs[d]), *z = NULL;
    V(clt_select(t, 0, -2, &z), z);
    int64_t x = 0;
    CU_OK(clt_item_i64(z, &x));
    ck_assert_msg(x == v[2], "item_i64(t[-2]) is %lld, expected %lld (%s)", (long long)x,
                  (long long)v[2], ctx);
    rel(t);
    rel(z);
  }
}
END_TEST

/* clt_save_npy and clt_save (safetensors) write a view's elements, contiguous: loading gives
 * the view's shape and values. */
START_TEST(test_save_views) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  char dir[256], path[300];
  cu_temp_dir(dir, sizeof dir, "views");
  for (int d = 0; d < ndev; d++)
    for (int k = 0; k < 2; k++) {
      clt_dtype dt = k == 0 ? CLT_F32 : CLT_I32;
      set_ctx(devs[d], dt);
      double base[24], want[24];
      clt_tensor *t = seq(dt, 2, (int64_t[]){4, 6}, devs[d], base);
      clt_tensor *tr = NULL, *rows = NULL, *back = NULL;
      V(clt_transpose(t, 0, 1, &tr), tr);     /* {6, 4} */
      V(clt_narrow(t, 0, 1, 2, &rows), rows); /* {2, 6}, offset 6 */
      gather(base, 0, 2, (int64_t[]){6, 4}, (int64_t[]){1, 6}, want);
      snprintf(path, sizeof path, "%s/tr.npy", dir);
      CU_OK(clt_save_npy(path, tr));
      CU_OK(clt_load_npy(path, clt_cpu(), &back));
      expect_fresh(back, 2, (int64_t[]){6, 4}, "load_npy(save_npy(t.T))");
      expect_values(back, want, 24, "load_npy(save_npy(t.T))");
      rel(back);
      clt_params *p = NULL, *q = NULL;
      CU_OK(clt_params_create(&p));
      CU_OK(clt_params_add(p, "tr", tr));
      CU_OK(clt_params_add(p, "rows", rows));
      snprintf(path, sizeof path, "%s/views.safetensors", dir);
      CU_OK(clt_save(path, p));
      CU_OK(clt_load(path, clt_cpu(), &q));
      expect_values(clt_params_get(q, "tr"), want, 24, "load(save({t.T}))[tr]");
      expect_layout(clt_params_get(q, "rows"), 2, (int64_t[]){2, 6}, NULL, -1,
                    "load(save({t[1:3]}))[rows]");
      expect_values(clt_params_get(q, "rows"), base + 6, 12, "load(save({t[1:3]}))[rows]");
      clt_params_release(p);
      clt_params_release(q);
      rel(t);
      rel(tr);
      rel(rows);
    }
  snprintf(path, sizeof path, "%s/tr.npy", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/views.safetensors", dir);
  remove(path);
  rmdir(dir);
}
END_TEST

#ifdef HAVE_DLPACK
/* DLPack export and import with strides (issue 13, item 5): a view is exported as the view it
 * is (shape, strides in elements, its first element at data + byte_offset; for OpenCL the
 * cl_mem and the byte offset), and a strided host DLPack tensor comes in as a view of its
 * memory. */
static int dl_deleted;
static void dl_deleter(DLManagedTensor *self) {
  dl_deleted++;
  free(self->dl_tensor.data);
  free(self->dl_tensor.shape);
  free(self);
}

START_TEST(test_dlpack_views) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    if (!clt_device_is_host(devs[d]) && !cu_is_cl(devs[d])) {
      cu_skip("test_dlpack_views", "DLPack describes host memory and OpenCL buffers only: "
                                   "ref:N is refused (tests/check_ref.c)");
      continue;
    }
    set_ctx(devs[d], CLT_F32);
    double base[24];
    clt_tensor *t = seq(CLT_F32, 2, (int64_t[]){4, 6}, devs[d], base);
    clt_tensor *rows = NULL, *tr = NULL;
    V(clt_narrow(t, 0, 1, 2, &rows), rows); /* offset 6 */
    V(clt_transpose(rows, 0, 1, &tr), tr);  /* {6, 2}, strides {1, 6} */
    DLManagedTensor *m = NULL;
    CU_OK(clt_to_dlpack(tr, &m));
    DLTensor *dl = &m->dl_tensor;
    ck_assert_int_eq(dl->ndim, 2);
    ck_assert_msg(dl->shape[0] == 6 && dl->shape[1] == 2, "DLPack shape of t[1:3].T (%s)", ctx);
    ck_assert_msg(dl->strides != NULL && dl->strides[0] == 1 && dl->strides[1] == 6,
                  "DLPack strides of t[1:3].T are not {1, 6} (%s)", ctx);
    if (clt_device_is_host(devs[d])) {
      const float *p0 = (const float *)((const char *)dl->data + dl->byte_offset);
      const float *t0 = clt_tensor_data(t);
      ck_assert_msg(p0 == t0 + 6, "DLPack data of t[1:3].T is not t's element 6 (%s)", ctx);
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 2; j++)
          ck_assert_msg(p0[i * dl->strides[0] + j * dl->strides[1]] == base[6 + j * 6 + i],
                        "DLPack t[1:3].T[%d][%d] (%s)", i, j, ctx);
    } else {
      ck_assert_msg(dl->byte_offset == 6 * sizeof(float),
                    "DLPack byte_offset of t[1:3].T on %s is %llu, expected 24", ctx,
                    (unsigned long long)dl->byte_offset);
    }
    m->deleter(m);
    rel(t);
    rel(rows);
    rel(tr);
  }
  /* Import: a {3, 2} host tensor with strides {1, 3} (the transpose of a {2, 3} block). */
  set_ctx(clt_cpu(), CLT_F32);
  DLManagedTensor *m = calloc(1, sizeof *m);
  float *data = malloc(6 * sizeof *data);
  int64_t *shape = malloc(4 * sizeof *shape);
  ck_assert(m && data && shape);
  for (int i = 0; i < 6; i++)
    data[i] = (float)(10 + i);
  shape[0] = 3;
  shape[1] = 2;
  shape[2] = 1; /* strides, kept in the same allocation */
  shape[3] = 3;
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = 2;
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = shape;
  m->dl_tensor.strides = shape + 2;
  m->deleter = dl_deleter;
  dl_deleted = 0;
  clt_tensor *u = NULL;
  V(clt_from_dlpack(m, &u), u);
  expect_layout(u, 2, (int64_t[]){3, 2}, (int64_t[]){1, 3}, 0, "from_dlpack(strides {1, 3})");
  ck_assert(!clt_is_contiguous(u));
  expect_values(u, (double[]){10, 13, 11, 14, 12, 15}, 6, "from_dlpack(strides {1, 3})");
  rel(u);
  ck_assert_int_eq(dl_deleted, 1);
}
END_TEST
#endif

/* ---- errors --------------------------------------------------------------------------------- */

/* Each refused call: the status, the message (it names the function and, for a value out of
 * range, the valid range), and *out untouched. */
START_TEST(test_errors) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    clt_device *dev = devs[d];
    set_ctx(dev, CLT_F32);
    double base[35];
    clt_tensor *t = seq(CLT_F32, 2, (int64_t[]){5, 7}, dev, base); /* dims -2..1 */
    clt_tensor *t3 = seq(CLT_F32, 3, (int64_t[]){2, 3, 4}, dev, NULL);
    clt_tensor *out = CU_SENTINEL;
#define UNTOUCHED() ck_assert_msg(out == CU_SENTINEL, "out was changed (%s)", ctx)

    /* narrow */
    CU_FAILS(clt_narrow(t, 2, 0, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    mentions("narrow dim 2 of a 2-D tensor", 2, "-2", "1");
    UNTOUCHED();
    CU_FAILS(clt_narrow(t, -3, 0, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    mentions("narrow dim -3 of a 2-D tensor", 2, "-2", "1");
    CU_FAILS(clt_narrow(t, 1, 8, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    mentions("narrow start 8 of 7", 1, "7");
    CU_FAILS(clt_narrow(t, 1, -8, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    mentions("narrow start -8 of 7", 1, "-7");
    CU_FAILS(clt_narrow(t, 1, 5, 3, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    mentions("narrow 5 + 3 > 7: the length can be 0..2", 1, "2");
    CU_FAILS(clt_narrow(t, 1, 0, -1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    mentions("narrow length -1", 1, "length");
    CU_FAILS(clt_narrow(NULL, 0, 0, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    CU_FAILS(clt_narrow(t, 0, 0, 1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    UNTOUCHED();

    /* select */
    CU_FAILS(clt_select(t, 1, 7, &out), CLT_ERR_INVALID_ARGUMENT, "clt_select");
    mentions("select index 7 of 7", 2, "-7", "6");
    CU_FAILS(clt_select(t, 1, -8, &out), CLT_ERR_INVALID_ARGUMENT, "clt_select");
    mentions("select index -8 of 7", 2, "-7", "6");
    CU_FAILS(clt_select(t, 2, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_select");
    mentions("select dim 2 of a 2-D tensor", 2, "-2", "1");
    {
      clt_tensor *z = from_doubles((double[]){1}, CLT_F32, 0, NULL, dev);
      CU_FAILS(clt_select(z, 0, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_select");
      rel(z);
    }
    UNTOUCHED();

    /* slice */
    CU_FAILS(clt_slice(t, 1, 0, 7, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_slice");
    mentions("slice step 0", 1, "step");
    CU_FAILS(clt_slice(t, 1, 6, 0, -1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_slice");
    mentions("slice step -1", 1, "step");
    CU_FAILS(clt_slice(t, -3, 0, 1, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_slice");
    mentions("slice dim -3 of a 2-D tensor", 2, "-2", "1");
    UNTOUCHED();

    /* permute */
    CU_FAILS(clt_permute(t3, 2, (int[]){0, 1}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_permute");
    mentions("permute of 2 dims for a 3-D tensor", 1, "3");
    CU_FAILS(clt_permute(t3, 3, (int[]){0, 0, 1}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_permute");
    CU_FAILS(clt_permute(t3, 3, (int[]){0, 1, 3}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_permute");
    mentions("permute dim 3 of a 3-D tensor", 2, "-3", "2");
    CU_FAILS(clt_permute(t3, 3, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_permute");
    UNTOUCHED();

    /* transpose */
    CU_FAILS(clt_transpose(t, 0, 2, &out), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
    mentions("transpose dim 2 of a 2-D tensor", 2, "-2", "1");
    CU_FAILS(clt_transpose(t, -3, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
    UNTOUCHED();

    /* expand */
    FAILS_ANY(clt_expand(t, 2, (int64_t[]){5, 8}, &out), "clt_expand");
    mentions("expand {5,7} to {5,8}", 2, "7", "8");
    CU_FAILS(clt_expand(t, 1, (int64_t[]){7}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_expand");
    FAILS_ANY(clt_expand(t, 3, (int64_t[]){-1, 5, 7}, &out), "clt_expand");
    CU_FAILS(clt_expand(t, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 5, 7}, &out),
             CLT_ERR_INVALID_ARGUMENT, "clt_expand");
    UNTOUCHED();

    /* unsqueeze, squeeze */
    CU_FAILS(clt_unsqueeze(t, 3, &out), CLT_ERR_INVALID_ARGUMENT, "clt_unsqueeze");
    mentions("unsqueeze dim 3 of a 2-D tensor", 2, "-3", "2");
    CU_FAILS(clt_unsqueeze(t, -4, &out), CLT_ERR_INVALID_ARGUMENT, "clt_unsqueeze");
    mentions("unsqueeze dim -4 of a 2-D tensor", 2, "-3", "2");
    CU_FAILS(clt_squeeze(t, 2, &out), CLT_ERR_INVALID_ARGUMENT, "clt_squeeze");
    mentions("squeeze dim 2 of a 2-D tensor", 2, "-2", "1");
    UNTOUCHED();

    /* view and reshape */
    CU_FAILS(clt_view(t, 2, (int64_t[]){6, 6}, &out), CLT_ERR_SHAPE_MISMATCH, "clt_view");
    mentions("view {5,7} as {6,6}", 3, "5", "7", "6");
    CU_FAILS(clt_view(t, 2, (int64_t[]){-1, -1}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_view");
    CU_FAILS(clt_view(t, 2, (int64_t[]){-2, 7}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_view");
    CU_FAILS(clt_view(t, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 5, 7}, &out), CLT_ERR_INVALID_ARGUMENT,
             "clt_view");
    {
      clt_tensor *tr = NULL;
      V(clt_transpose(t, 0, 1, &tr), tr);
      CU_FAILS(clt_view(tr, 1, (int64_t[]){35}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_view");
      const char *m = clt_last_error();
      ck_assert_msg(strstr(m, "reshape") || strstr(m, "contiguous"),
                    "a view that needs a copy: the message names the fix: %s", m);
      rel(tr);
    }
    CU_FAILS(clt_reshape(t, 2, (int64_t[]){6, 6}, &out), CLT_ERR_SHAPE_MISMATCH, "clt_reshape");
    CU_FAILS(clt_reshape(t, 2, (int64_t[]){-1, -1}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_reshape");
    UNTOUCHED();

    /* contiguous, clone */
    CU_FAILS(clt_contiguous(NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_contiguous");
    CU_FAILS(clt_contiguous(t, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_contiguous");
    CU_FAILS(clt_clone(NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_clone");
    CU_FAILS(clt_clone(t, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_clone");
    UNTOUCHED();

    /* cat and stack */
    clt_tensor *u = seq(CLT_F32, 2, (int64_t[]){5, 6}, dev, NULL);
    clt_tensor *ti = seq(CLT_I32, 2, (int64_t[]){5, 7}, dev, NULL);
    CU_FAILS(clt_cat(0, (clt_tensor *[]){t}, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_cat");
    CU_FAILS(clt_cat(1, NULL, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_cat");
    CU_FAILS(clt_cat(2, (clt_tensor *[]){t, NULL}, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_cat");
    FAILS_ANY(clt_cat(2, (clt_tensor *[]){t, u}, 0, &out), "clt_cat"); /* 7 vs 6 columns */
    mentions("cat of {5,7} and {5,6} along 0", 2, "7", "6");
    CU_FAILS(clt_cat(2, (clt_tensor *[]){t, t}, 2, &out), CLT_ERR_INVALID_ARGUMENT, "clt_cat");
    mentions("cat along dim 2 of 2-D tensors", 2, "-2", "1");
    FAILS_ANY(clt_cat(2, (clt_tensor *[]){t, t3}, 0, &out), "clt_cat"); /* 2-D and 3-D */
    CU_FAILS(clt_stack(0, (clt_tensor *[]){t}, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_stack");
    FAILS_ANY(clt_stack(2, (clt_tensor *[]){t, u}, 0, &out), "clt_stack");
    CU_FAILS(clt_stack(2, (clt_tensor *[]){t, t}, 3, &out), CLT_ERR_INVALID_ARGUMENT, "clt_stack");
    mentions("stack along dim 3 of 2-D tensors", 2, "-3", "2");
    clt_device *other = devs[(d + 1) % ndev];
    if (other != dev) {
      clt_tensor *to = seq(CLT_F32, 2, (int64_t[]){5, 7}, other, NULL);
      CU_FAILS(clt_cat(2, (clt_tensor *[]){t, to}, 0, &out), CLT_ERR_DEVICE_MISMATCH, "clt_cat");
      mentions("cat across devices", 2, cu_dev_name(dev), cu_dev_name(other));
      CU_FAILS(clt_stack(2, (clt_tensor *[]){t, to}, 0, &out), CLT_ERR_DEVICE_MISMATCH,
               "clt_stack");
      rel(to);
    }
    UNTOUCHED();

    /* clt_copy, clt_fill_ and _out forms into views */
    clt_tensor *col = NULL, *s4 = seq(CLT_F32, 1, (int64_t[]){4}, dev, NULL);
    V(clt_select(t, 1, 0, &col), col); /* 5 elements */
    CU_FAILS(clt_copy(col, s4), CLT_ERR_SHAPE_MISMATCH, "clt_copy");
    CU_FAILS(clt_copy(NULL, s4), CLT_ERR_INVALID_ARGUMENT, "clt_copy");
    CU_FAILS(clt_copy(col, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_copy");
    CU_FAILS(clt_fill_(NULL, 1), CLT_ERR_INVALID_ARGUMENT, "clt_fill_");
    {
      clt_tensor *ci = NULL;
      V(clt_select(ti, 1, 0, &ci), ci);
      CU_FAILS(clt_fill_(ci, 2.5), CLT_ERR_INVALID_ARGUMENT, "clt_fill_");
      CU_FAILS(clt_fill_(ci, 3e9), CLT_ERR_INVALID_ARGUMENT, "clt_fill_");
      clt_tensor *a5 = seq(CLT_F32, 1, (int64_t[]){5}, dev, NULL);
      CU_FAILS(clt_add_out(a5, a5, ci), CLT_ERR_DTYPE, "clt_add_out"); /* f32 result, i32 out */
      clt_tensor *r6 = NULL;
      V(clt_select(u, 0, 0, &r6), r6); /* 6 elements */
      CU_FAILS(clt_add_out(a5, a5, r6), CLT_ERR_SHAPE_MISMATCH, "clt_add_out");
      rel(ci);
      rel(a5);
      rel(r6);
    }
    expect_values(t, base, 35, "t after the refused writes");

    /* Values at the ends of int64_t: no overflow, no crash. */
    CU_FAILS(clt_narrow(t, 1, 1, INT64_MAX, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    CU_FAILS(clt_narrow(t, 1, INT64_MAX, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    CU_FAILS(clt_narrow(t, 1, INT64_MIN, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_narrow");
    CU_FAILS(clt_select(t, 1, INT64_MIN, &out), CLT_ERR_INVALID_ARGUMENT, "clt_select");
    CU_FAILS(clt_expand(t, 3, (int64_t[]){INT64_MAX / 2, 5, 7}, &out), CLT_ERR_INVALID_ARGUMENT,
             "clt_expand");
    CU_FAILS(clt_view(t, 3, (int64_t[]){INT64_MAX / 5, 5, 7}, &out), CLT_ERR_SHAPE_MISMATCH,
             "clt_view");
    UNTOUCHED();
    {
      clt_tensor *v = NULL;
      V(clt_slice(t, 1, 2, CLT_SLICE_END, INT64_MAX, &v), v); /* t[:, 2::huge] */
      expect_layout(v, 2, (int64_t[]){5, 1}, NULL, 2, "slice(t, 1, 2, end, INT64_MAX)");
      rel(v);
      V(clt_slice(t, 1, INT64_MIN, INT64_MIN, 1, &v), v); /* t[:, -huge:-huge] */
      expect_layout(v, 2, (int64_t[]){5, 0}, NULL, -1, "slice(t, 1, INT64_MIN, INT64_MIN, 1)");
      rel(v);
    }

    /* NULL tensor or NULL out, for each function that makes a view */
    CU_FAILS(clt_select(NULL, 0, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_select");
    CU_FAILS(clt_select(t, 0, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_select");
    CU_FAILS(clt_slice(NULL, 0, 0, 1, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_slice");
    CU_FAILS(clt_slice(t, 0, 0, 1, 1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_slice");
    CU_FAILS(clt_permute(NULL, 2, (int[]){1, 0}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_permute");
    CU_FAILS(clt_permute(t, 2, (int[]){1, 0}, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_permute");
    CU_FAILS(clt_transpose(NULL, 0, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
    CU_FAILS(clt_transpose(t, 0, 1, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_transpose");
    CU_FAILS(clt_expand(NULL, 2, (int64_t[]){5, 7}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_expand");
    CU_FAILS(clt_expand(t, 2, (int64_t[]){5, 7}, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_expand");
    CU_FAILS(clt_expand(t, 2, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_expand");
    CU_FAILS(clt_unsqueeze(NULL, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_unsqueeze");
    CU_FAILS(clt_unsqueeze(t, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_unsqueeze");
    CU_FAILS(clt_squeeze(NULL, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_squeeze");
    CU_FAILS(clt_squeeze(t, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_squeeze");
    CU_FAILS(clt_view(NULL, 1, (int64_t[]){35}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_view");
    CU_FAILS(clt_view(t, 1, (int64_t[]){35}, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_view");
    CU_FAILS(clt_reshape(NULL, 1, (int64_t[]){35}, &out), CLT_ERR_INVALID_ARGUMENT, "clt_reshape");
    CU_FAILS(clt_cat(1, (clt_tensor *[]){t}, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_cat");
    CU_FAILS(clt_stack(1, (clt_tensor *[]){t}, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_stack");
    UNTOUCHED();

    /* accessors */
    ck_assert_ptr_null(clt_tensor_strides(NULL));
    ck_assert_int_eq(clt_tensor_offset(NULL), 0);
    ck_assert_int_eq(clt_is_contiguous(NULL), 0);
#undef UNTOUCHED
    rel(t);
    rel(t3);
    rel(u);
    rel(ti);
    rel(col);
    rel(s4);
  }
}
END_TEST

/* clt_cat and clt_stack promote their tensors to one dtype as clt_add does (clt.h), as PyTorch's
 * torch.cat does: f32 with i32 gives f32 holding both tensors' values. */
START_TEST(test_cat_promotes) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    set_ctx(devs[d], CLT_F32);
    double vf[35], vi[35], want[70];
    clt_tensor *t = seq(CLT_F32, 2, (int64_t[]){5, 7}, devs[d], vf);
    clt_tensor *ti = seq(CLT_I32, 2, (int64_t[]){5, 7}, devs[d], vi);
    clt_tensor *out = NULL;
    CU_OK(clt_cat(2, (clt_tensor *[]){t, ti}, 0, &out));
    ck_assert_msg(clt_tensor_dtype(out) == CLT_F32, "cat of f32 and i32 is %s (%s)",
                  clt_dtype_name(clt_tensor_dtype(out)), ctx);
    for (int k = 0; k < 35; k++) {
      want[k] = vf[k];
      want[35 + k] = vi[k];
    }
    expect_values(out, want, 70, "cat of f32 and i32 along 0");
    rel(out);
    out = NULL;
    CU_OK(clt_stack(2, (clt_tensor *[]){ti, t}, 0, &out));
    ck_assert_msg(clt_tensor_dtype(out) == CLT_F32, "stack of i32 and f32 is %s (%s)",
                  clt_dtype_name(clt_tensor_dtype(out)), ctx);
    for (int k = 0; k < 35; k++) {
      want[k] = vi[k];
      want[35 + k] = vf[k];
    }
    expect_values(out, want, 70, "stack of i32 and f32 along 0");
    rel(out);
    rel(t);
    rel(ti);
  }
}
END_TEST

/* ---- tiles: operands read across their rows -------------------------------------------------
 * A transposed operand (or result) goes through tiles: NAME_tiled in kernels/elementwise.cl on
 * OpenCL devices (strips of 32 x 1024 through local memory on CPU devices, 16 x 16 work-group
 * tiles through local memory on GPUs such as Oclgrind), over_strips and copy_strips in
 * lib/host/elementwise.c (strips of 64 x 1024, from 2^14 elements). These checks use shapes that
 * are not multiples of any tile (the larger ones, skipped on Oclgrind, cross the block and strip
 * edges), every mix of transposed operands and result, broadcasting, a batch
 * dimension, unary, binary and ternary ops and copies, over f32, i32 and f64 (copies also f16,
 * u8 and bool). Expected values come from the index math here; each device's result is also
 * compared with the host's. Self-contained: only check_util.h. */

/* On a CPU device that runs native kernels the transposed copies and binary and ternary ops can
 * run the host's loops as a native command (lib/opencl/elementwise.c): large copies always, the
 * rest while the tiled kernel builds (its first uses; later ones take the kernel). So the ops
 * and the copies below run such a device as it chooses (CLT_NATIVE unset, pass 0) and with the
 * native command wherever it applies (CLT_NATIVE=1, pass 2), the large copy as it chooses (the
 * native command) and with the tiled kernel (CLT_NATIVE=0, pass 1). tiled_pass(dev, pass) says
 * whether pass applies to dev and sets the variable for it (tiled_end unsets it); tiled_mode
 * names it. */
static const char *tiled_mode = "";
static int tiled_pass(clt_device *dev, int pass) {
  static const char *const value[] = {NULL, "0", "1"};
  static const char *const mode[] = {"", ", CLT_NATIVE=0", ", CLT_NATIVE=1"};
  clt_device_info info;
  if (pass > 0 && (dev == clt_cpu() || clt_device_info_get(dev, &info) != CLT_OK ||
                   info.kind != CLT_DEVICE_CL_CPU))
    return 0;
  if (value[pass])
    setenv("CLT_NATIVE", value[pass], 1);
  else
    unsetenv("CLT_NATIVE");
  tiled_mode = mode[pass];
  return 1;
}
static void tiled_end(void) {
  unsetenv("CLT_NATIVE");
  tiled_mode = "";
}

/* Storage element i of the operands: never 0, distinct along rows and columns, exact in f16. */
static double tiled_va(int64_t i) { return (double)(i % 251 + 1); }
static double tiled_vb(int64_t i) { return (double)(i % 13 + 2); }
/* What a destination holds before it is written: uploaded, not filled (Oclgrind's
 * uninitialized-value checker loses what clEnqueueFillBuffer writes: tests/oclgrind/known-reports)
 */
static double tiled_vc(int64_t i) { return tiled_va(i) > tiled_vb(i) ? 1 : 0; }
static double tiled_vo(int64_t i) { return (double)(-1 - i % 7); }

/* A tensor of dt on dev whose storage element i is f(i). */
static clt_tensor *tiled_tensor(double (*f)(int64_t), clt_dtype dt, int ndim, const int64_t *shape,
                                clt_device *dev) {
  int64_t n = cu_numel(ndim, shape);
  void *buf = cu_malloc((size_t)n * clt_dtype_size(dt));
  for (int64_t i = 0; i < n; i++)
    cu_set(buf, dt, i, f(i));
  clt_tensor *t = cu_tensor(buf, dt, ndim, shape, dev);
  free(buf);
  return t;
}

static clt_tensor *tiled_t(clt_tensor *x) {
  clt_tensor *t = NULL;
  CU_OK(clt_transpose(x, -2, -1, &t));
  return t;
}

/* Compares t's elements (C order) with want[0..n), exactly, and, when host is not NULL, with
 * the host's result host (C order too). Releases t. */
static void tiled_expect(clt_tensor *t, const double *want, const clt_tensor *host, int64_t n,
                         const char *what, const char *where) {
  ck_assert_msg(clt_tensor_numel(t) == n, "%s (%s): %lld elements, expected %lld", what, where,
                (long long)clt_tensor_numel(t), (long long)n);
  double *got = cu_read_double(t), *h = host ? cu_read_double(host) : NULL;
  for (int64_t i = 0; i < n; i++) {
    ck_assert_msg(got[i] == want[i], "%s (%s): element %lld is %g, expected %g", what, where,
                  (long long)i, got[i], want[i]);
    if (h)
      ck_assert_msg(got[i] == h[i], "%s (%s): element %lld is %g, the host gives %g", what, where,
                    (long long)i, got[i], h[i]);
  }
  free(got);
  free(h);
  clt_tensor_release(t);
}

/* One shape (rows x cols, under a batch of nb when nb > 0) on dev in dt; hdev is the host, for
 * the comparison (NULL when dev is the host). */
static void tiled_case(clt_device *dev, clt_dtype dt, int nb, int64_t rows, int64_t cols) {
  clt_device *cpu = clt_cpu();
  int on_host = dev == cpu;
  int nd = nb > 0 ? 3 : 2;
  int64_t B = nb > 0 ? nb : 1, n = B * rows * cols;
  int64_t shp[3] = {B, rows, cols}, tshp[3] = {B, cols, rows};
  const int64_t *rc = nb > 0 ? shp : shp + 1, *cr = nb > 0 ? tshp : tshp + 1;
  char where[128];
  snprintf(where, sizeof where, "%s %s, %s%lld x %lld%s", cu_dev_name(dev), cu_dt_name(dt),
           nb > 0 ? "batch 3 of " : "", (long long)rows, (long long)cols, tiled_mode);
  double *want = cu_malloc((size_t)n * sizeof *want);
  /* element (q, i, j) of the views: a, b C order over (rows, cols); at, bt transposes of
   * (cols, rows) storages */
#define IDX(q, i, j) (((q)*rows + (i)) * cols + (j))
#define TIDX(q, i, j) (((q)*cols + (j)) * rows + (i))
#define EACH(...)                                                                                  \
  for (int64_t q = 0; q < B; q++)                                                                  \
    for (int64_t i = 0; i < rows; i++)                                                             \
      for (int64_t j = 0; j < cols; j++) {                                                         \
        __VA_ARGS__;                                                                               \
      }
  clt_tensor *a = tiled_tensor(tiled_va, dt, nd, rc, dev),
             *b = tiled_tensor(tiled_vb, dt, nd, rc, dev);
  clt_tensor *as = tiled_tensor(tiled_va, dt, nd, cr, dev),
             *bs = tiled_tensor(tiled_vb, dt, nd, cr, dev);
  clt_tensor *at = tiled_t(as), *bt = tiled_t(bs);
  clt_tensor *ha = tiled_tensor(tiled_va, dt, nd, rc, cpu),
             *hb = tiled_tensor(tiled_vb, dt, nd, rc, cpu);
  clt_tensor *has = tiled_tensor(tiled_va, dt, nd, cr, cpu),
             *hbs = tiled_tensor(tiled_vb, dt, nd, cr, cpu);
  clt_tensor *hat = tiled_t(has), *hbt = tiled_t(hbs);
  clt_tensor *r = NULL, *h = NULL;
  char what[96];
  /* binary, sub (order matters): transposed a, transposed b, both */
  EACH(want[IDX(q, i, j)] = tiled_va(TIDX(q, i, j)) - tiled_vb(IDX(q, i, j)));
  CU_OK(clt_sub(at, b, &r));
  CU_OK(clt_sub(hat, hb, &h));
  tiled_expect(r, want, on_host ? NULL : h, n, "sub(transpose(a), b)", where);
  clt_tensor_release(h);
  EACH(want[IDX(q, i, j)] = tiled_va(IDX(q, i, j)) - tiled_vb(TIDX(q, i, j)));
  CU_OK(clt_sub(a, bt, &r));
  CU_OK(clt_sub(ha, hbt, &h));
  tiled_expect(r, want, on_host ? NULL : h, n, "sub(a, transpose(b))", where);
  clt_tensor_release(h);
  EACH(want[IDX(q, i, j)] = tiled_va(TIDX(q, i, j)) - tiled_vb(TIDX(q, i, j)));
  CU_OK(clt_sub(at, bt, &r));
  CU_OK(clt_sub(hat, hbt, &h));
  tiled_expect(r, want, on_host ? NULL : h, n, "sub(transpose(a), transpose(b))", where);
  clt_tensor_release(h);
  /* a transposed result: _out into the transposed view of a (cols, rows) storage, from
   * contiguous and from transposed operands; read through the storage and the view */
  for (int from_t = 0; from_t < 2; from_t++) {
    clt_tensor *o = tiled_tensor(tiled_vo, dt, nd, cr, dev), *ot;
    ot = tiled_t(o);
    CU_OK(clt_sub_out(from_t ? at : a, b, ot));
    EACH(want[TIDX(q, i, j)] =
             (from_t ? tiled_va(TIDX(q, i, j)) : tiled_va(IDX(q, i, j))) - tiled_vb(IDX(q, i, j)));
    snprintf(what, sizeof what, "sub_out(%s, b, transpose(o)), o", from_t ? "transpose(a)" : "a");
    tiled_expect(clt_tensor_retain(o), want, NULL, n, what, where);
    EACH(want[IDX(q, i, j)] =
             (from_t ? tiled_va(TIDX(q, i, j)) : tiled_va(IDX(q, i, j))) - tiled_vb(IDX(q, i, j)));
    snprintf(what, sizeof what, "sub_out(%s, b, transpose(o)), the view",
             from_t ? "transpose(a)" : "a");
    tiled_expect(ot, want, NULL, n, what, where);
    clt_tensor_release(o);
  }
  /* broadcasting with a transposed operand: a row (cols) and a column (rows x 1) */
  {
    clt_tensor *row = tiled_tensor(tiled_vb, dt, 1, &cols, dev), *col = NULL, *hrow, *hcol;
    clt_tensor *colsrc = tiled_tensor(tiled_vb, dt, 2, (int64_t[]){rows, 1}, dev);
    col = clt_tensor_retain(colsrc);
    hrow = tiled_tensor(tiled_vb, dt, 1, &cols, cpu);
    hcol = tiled_tensor(tiled_vb, dt, 2, (int64_t[]){rows, 1}, cpu);
    EACH(want[IDX(q, i, j)] = tiled_vb(j) - tiled_va(TIDX(q, i, j)));
    CU_OK(clt_sub(row, at, &r));
    CU_OK(clt_sub(hrow, hat, &h));
    tiled_expect(r, want, on_host ? NULL : h, n, "sub(row, transpose(a))", where);
    clt_tensor_release(h);
    EACH(want[IDX(q, i, j)] = tiled_va(TIDX(q, i, j)) - tiled_vb(i));
    CU_OK(clt_sub(at, col, &r));
    CU_OK(clt_sub(hat, hcol, &h));
    tiled_expect(r, want, on_host ? NULL : h, n, "sub(transpose(a), column)", where);
    clt_tensor_release(h);
    clt_tensor_release(row);
    clt_tensor_release(col);
    clt_tensor_release(colsrc);
    clt_tensor_release(hrow);
    clt_tensor_release(hcol);
  }
  /* unary and ternary: neg, and where(transpose(a) > b, transpose(a), b) with a transposed
   * bool condition (made contiguous transposed, then transposed back) */
  if (dt != CLT_U8) {
    EACH(want[IDX(q, i, j)] = -tiled_va(TIDX(q, i, j)));
    CU_OK(clt_neg(at, &r));
    CU_OK(clt_neg(hat, &h));
    tiled_expect(r, want, on_host ? NULL : h, n, "neg(transpose(a))", where);
    clt_tensor_release(h);
  }
  {
    /* the condition uploaded, not computed (Oclgrind loses track of what kernels write into
     * a released buffer's slot: tests/oclgrind/known-reports) */
    clt_tensor *gt = tiled_tensor(tiled_vc, CLT_BOOL, nd, cr, dev); /* (cols, rows) */
    clt_tensor *hgt = tiled_tensor(tiled_vc, CLT_BOOL, nd, cr, cpu);
    clt_tensor *cond = tiled_t(gt), *hcond = tiled_t(hgt);
    EACH(double x = tiled_va(TIDX(q, i, j)), y = tiled_vb(TIDX(q, i, j));
         want[IDX(q, i, j)] = x > y ? x : tiled_vb(IDX(q, i, j)));
    CU_OK(clt_where(cond, at, b, &r));
    CU_OK(clt_where(hcond, hat, hb, &h));
    tiled_expect(r, want, on_host ? NULL : h, n, "where(transpose(a > b), transpose(a), b)", where);
    clt_tensor_release(h);
    EACH(want[IDX(q, i, j)] = tiled_va(TIDX(q, i, j)) > tiled_vb(TIDX(q, i, j)) ? 1 : 0);
    CU_OK(clt_contiguous(cond, &r));
    tiled_expect(r, want, NULL, n, "contiguous(transpose(a > b)), bool", where);
    clt_tensor_release(cond);
    clt_tensor_release(hcond);
    clt_tensor_release(gt);
    clt_tensor_release(hgt);
  }
  /* copies: clt_contiguous of the transpose, and clt_copy into a transposed view */
  EACH(want[IDX(q, i, j)] = tiled_va(TIDX(q, i, j)));
  CU_OK(clt_contiguous(at, &r));
  tiled_expect(r, want, NULL, n, "contiguous(transpose(a))", where);
  {
    clt_tensor *o = tiled_tensor(tiled_vo, dt, nd, cr, dev), *ot;
    ot = tiled_t(o);
    CU_OK(clt_copy(ot, b));
    EACH(want[TIDX(q, i, j)] = tiled_vb(IDX(q, i, j)));
    tiled_expect(o, want, NULL, n, "copy(transpose(o), b), o", where);
    clt_tensor_release(ot);
  }
#undef EACH
#undef IDX
#undef TIDX
  clt_tensor *all[] = {a, b, as, bs, at, bt, ha, hb, has, hbs, hat, hbt};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
    clt_tensor_release(all[k]);
  free(want);
}

START_TEST(test_tiled_transposed_ops) {
  static const int64_t small[][2] = {{37, 53}, {1, 1000}, {1000, 1}, {65, 65}, {17, 16}};
  static const int64_t large[][2] = {{600, 70}, {131, 257}, {37, 1500}};
  static const clt_dtype dts[] = {CLT_F32, CLT_I32, CLT_F64};
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    int grind = devs[d] != clt_cpu() && cu_is_oclgrind(devs[d]);
    for (int pass = 0; pass < 3; pass += 2) {
      if (!tiled_pass(devs[d], pass))
        continue;
      for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        if (!cu_dtype_ok("tiled_transposed_ops", devs[d], dts[k]))
          continue;
        for (size_t s = 0; s < sizeof small / sizeof small[0]; s++)
          tiled_case(devs[d], dts[k], 0, small[s][0], small[s][1]);
        tiled_case(devs[d], dts[k], 3, 37, 53);
        for (size_t s = 0; s < sizeof large / sizeof large[0] && !grind; s++)
          tiled_case(devs[d], dts[k], 0, large[s][0], large[s][1]);
      }
    }
  }
  tiled_end();
}
END_TEST

/* Copies through tiles of every element size: clt_contiguous of a transposed view of f16 (2
 * bytes), u8 and bool (1 byte), i64 (8 bytes); and clt_copy of it into a view that steps over
 * every other column (a destination whose rows are not contiguous either). */
START_TEST(test_tiled_transposed_copies) {
  static const clt_dtype dts[] = {CLT_F16, CLT_U8, CLT_BOOL, CLT_I64};
  static const int64_t shapes[][2] = {{37, 53}, {65, 65}, {600, 70}, {37, 1500}};
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    int grind = devs[d] != clt_cpu() && cu_is_oclgrind(devs[d]);
    for (int pass = 0; pass < 3; pass += 2) {
      if (!tiled_pass(devs[d], pass))
        continue;
      for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
          int64_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
          if (grind && n > 10000)
            continue;
          char where[96];
          snprintf(where, sizeof where, "%s %s, %lld x %lld%s", cu_dev_name(devs[d]),
                   cu_dt_name(dts[k]), (long long)rows, (long long)cols, tiled_mode);
          double (*f)(int64_t) = dts[k] == CLT_BOOL ? NULL : tiled_va;
          void *buf = cu_malloc((size_t)n * clt_dtype_size(dts[k]));
          for (int64_t i = 0; i < n; i++)
            cu_set(buf, dts[k], i, f ? f(i) : (double)((i * 7 / 3) % 2));
          clt_tensor *s_ = cu_tensor(buf, dts[k], 2, (int64_t[]){cols, rows}, devs[d]);
          free(buf);
          clt_tensor *t = tiled_t(s_), *r = NULL;
          double *want = cu_malloc((size_t)n * sizeof *want);
          for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
              int64_t src = j * rows + i;
              want[i * cols + j] = f ? f(src) : (double)((src * 7 / 3) % 2);
            }
          CU_OK(clt_contiguous(t, &r));
          tiled_expect(r, want, NULL, n, "contiguous(transpose(x))", where);
          /* o[:, ::2] = transpose(x), o (rows x 2 cols) filled with 0 first */
          clt_tensor *o = NULL, *ov = NULL;
          CU_OK(clt_zeros(dts[k], 2, (int64_t[]){rows, 2 * cols}, devs[d], &o));
          CU_OK(clt_slice(o, 1, 0, 2 * cols, 2, &ov));
          CU_OK(clt_copy(ov, t));
          double *want2 = cu_malloc((size_t)(2 * n) * sizeof *want2);
          for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < 2 * cols; j++)
              want2[i * 2 * cols + j] = j % 2 ? 0 : want[i * cols + j / 2];
          tiled_expect(o, want2, NULL, 2 * n, "copy(o[:, ::2], transpose(x)), o", where);
          clt_tensor_release(ov);
          free(want2);
          free(want);
          clt_tensor_release(t);
          clt_tensor_release(s_);
        }
    }
  }
  tiled_end();
}
END_TEST

/* A transposed copy large enough (2^22 elements) that CPU devices run it as a native command
 * unless CLT_NATIVE=0 says otherwise. */
START_TEST(test_tiled_large_copy) {
  static const clt_dtype dts[] = {CLT_F32};
  const int64_t rows = 2048, cols = 2048, n = rows * cols;
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    if (devs[d] == clt_cpu() || cu_is_oclgrind(devs[d]))
      continue; /* the host's copy is the same loop; Oclgrind: too slow for 4M elements */
    for (int pass = 0; pass < 2; pass++)
      for (size_t k = 0; k < sizeof dts / sizeof dts[0] && tiled_pass(devs[d], pass); k++) {
        char where[96];
        snprintf(where, sizeof where, "%s %s, %lld x %lld%s", cu_dev_name(devs[d]),
                 cu_dt_name(dts[k]), (long long)rows, (long long)cols, tiled_mode);
        clt_tensor *s_ = tiled_tensor(tiled_va, dts[k], 2, (int64_t[]){cols, rows}, devs[d]);
        clt_tensor *t = tiled_t(s_), *r = NULL;
        double *want = cu_malloc((size_t)n * sizeof *want);
        for (int64_t i = 0; i < rows; i++)
          for (int64_t j = 0; j < cols; j++)
            want[i * cols + j] = tiled_va(j * rows + i);
        CU_OK(clt_contiguous(t, &r));
        tiled_expect(r, want, NULL, n, "contiguous(transpose(x))", where);
        free(want);
        clt_tensor_release(t);
        clt_tensor_release(s_);
      }
  }
  tiled_end();
}
END_TEST

Suite *views_suite(void) {
  Suite *s = suite_create("views");
  TCase *tc;
#define ONE_CASE(name, test)                                                                       \
  tc = cu_tcase(name);                                                                             \
  tcase_add_test(tc, test);                                                                        \
  suite_add_tcase(s, tc)
  ONE_CASE("narrow", test_narrow);
  ONE_CASE("select", test_select);
  ONE_CASE("slice", test_slice);
  ONE_CASE("permute", test_permute);
  ONE_CASE("transpose", test_transpose);
  ONE_CASE("expand", test_expand);
  ONE_CASE("unsqueeze", test_unsqueeze);
  ONE_CASE("squeeze", test_squeeze);
  ONE_CASE("view", test_view);
  ONE_CASE("reshape", test_reshape);
  ONE_CASE("contiguous", test_contiguous);
  ONE_CASE("clone", test_clone);
  ONE_CASE("fill_", test_fill);
  tcase_add_test(tc, test_fill_u8_bool);
  ONE_CASE("copy_into_view", test_copy_into_view);
  tcase_add_test(tc, test_copy_partial_overlap);
  ONE_CASE("cat", test_cat);
  ONE_CASE("stack", test_stack);
  ONE_CASE("index_select", test_index_select);
  ONE_CASE("inplace_on_views", test_inplace_on_views);
  tcase_add_test(tc, test_inplace_self_transposed);
  ONE_CASE("out_on_views", test_out_on_views);
  ONE_CASE("ops_on_views", test_ops_on_views);
  tcase_add_test(tc, test_ops_on_views_large);
  tcase_add_test(tc, test_views_no_copy_elementwise);
  ONE_CASE("reductions_on_views", test_reductions_on_views);
  ONE_CASE("matmul_on_views", test_matmul_on_views);
  tcase_add_test(tc, test_views_no_copy_matmul);
  ONE_CASE("transfers_of_views", test_transfers_of_views);
#ifdef HAVE_DLPACK
  tcase_add_test(tc, test_dlpack_views);
#endif
  ONE_CASE("read_item_print_views", test_read_item_print_views);
  tcase_add_test(tc, test_item_i64_view);
  tcase_add_test(tc, test_print_large_view);
  tcase_add_test(tc, test_save_views);
  ONE_CASE("errors", test_errors);
  tcase_add_test(tc, test_cat_promotes);
  ONE_CASE("tiled", test_tiled_transposed_ops);
  tcase_add_test(tc, test_tiled_transposed_copies);
  tcase_add_test(tc, test_tiled_large_copy);
#undef ONE_CASE
  return s;
}
