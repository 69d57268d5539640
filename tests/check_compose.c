/* SPDX-License-Identifier: MIT */
/* check_compose.c - how features compose (issue 32): a deferred result (lib/lazy.c) read through
 * every kind of view, and chains of views, by every kind of consumer (elementwise in every form,
 * reductions, matmul, cat, stack, index_select, casts, copies, transfers, printing, saving), in
 * every dtype, on every device, lazily and eagerly. Each case must give the same bytes in both
 * modes, the values this file computes itself from its own model of the view's geometry, and
 * leave the deferred result itself intact. The repros of issue 32 follow as tests of their own.
 *
 * The grid is what the tests of one operation at a time missed: stack([x * 2]) was [[2, 2, 2]]
 * by default, because a chain continued through a view of another shape (lib/lazy.c,
 * chains_of). The grid's tensors are small (24 elements), so that it runs whole on Oclgrind,
 * which interprets every kernel, in about 15 s.
 */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "backend.h"
#include "check_util.h"
#include "clt_dlpack.h"

static const clt_dtype grid_dtypes[] = {CLT_F32, CLT_F16, CLT_I32, CLT_BOOL,
                                        CLT_F64, CLT_BF16, CLT_I64, CLT_U8};
enum { N_GRID_DTYPES = sizeof grid_dtypes / sizeof grid_dtypes[0] };

/* v converted to dt as clt stores it (the values here are small integers: exact in every dtype
 * but bf16 and f16 above their integer range, which round to nearest even). */
static double conv(clt_dtype dt, double v) {
  switch (dt) {
  case CLT_BOOL:
    return v != 0;
  case CLT_U8:
    return (double)(((int64_t)v % 256 + 256) % 256);
  case CLT_F32:
    return (float)v;
  case CLT_F16:
  case CLT_BF16:
    return cu_round_narrow(v, dt);
  default:
    return v;
  }
}

/* ---- the deferred result and its views ----------------------------------------------------- */

enum { ROWS = 4, COLS = 6, M_NUMEL = ROWS * COLS };

/* x, and the deferred m = x * 2 + 1 (bool: m = !(x ^ y)), on d; mv gets m's values. */
static void make_m(clt_device *d, clt_dtype dt, clt_tensor **m, double *mv) {
  double xv[M_NUMEL], yv[M_NUMEL];
  void *xb = cu_malloc(clt_dtype_size(dt) * M_NUMEL), *yb = cu_malloc(clt_dtype_size(dt) * M_NUMEL);
  for (int i = 0; i < M_NUMEL; i++) {
    xv[i] = dt == CLT_BOOL ? (i * 7 % 5 < 2) : dt == CLT_U8 ? (i * 5 % 11) : (i * 5 % 11) - 5;
    yv[i] = i % 3 == 0;
    cu_set(xb, dt, i, xv[i]);
    cu_set(yb, dt, i, yv[i]);
  }
  int64_t shape[2] = {ROWS, COLS};
  clt_tensor *x = cu_tensor(xb, dt, 2, shape, d), *y = cu_tensor(yb, dt, 2, shape, d), *t;
  if (dt == CLT_BOOL) {
    CU_OK(clt_logical_xor(x, y, &t));
    CU_OK(clt_logical_not(t, m));
  } else {
    CU_OK(clt_mul_scalar(x, 2, &t));
    CU_OK(clt_add_scalar(t, 1, m));
  }
  for (int i = 0; i < M_NUMEL; i++)
    mv[i] = dt == CLT_BOOL ? !((xv[i] != 0) != (yv[i] != 0)) : conv(dt, xv[i] * 2 + 1);
  clt_tensor_release(x);
  clt_tensor_release(y);
  clt_tensor_release(t);
  free(xb);
  free(yb);
}

/* A view's geometry over m's elements (C order, shape ROWS x COLS), as this file computes it. */
typedef struct geom {
  int ndim;
  int64_t shape[4], strides[4], offset;
} geom;

static int64_t geom_numel(const geom *g) { return cu_numel(g->ndim, g->shape); }

/* The index into m of element k (C order) of the view. */
static int64_t geom_at(const geom *g, int64_t k) {
  int64_t at = g->offset;
  for (int dd = g->ndim - 1; dd >= 0; dd--) {
    at += (k % g->shape[dd]) * g->strides[dd];
    k /= g->shape[dd];
  }
  return at;
}

static const char *const view_names[] = {
    "m itself",          "unsqueeze(m, 0)",         "view(m, [6, 4])",
    "view(m, [24])",     "reshape(m, [2, 12])",     "narrow(m, 1, 1, 3)",
    "select(m, 0, 2)",   "slice(m, 1, 0, 6, 2)",    "transpose(m, 0, 1)",
    "expand(unsqueeze(m, 0), [2, 4, 6])",           "view(narrow(transpose(m), 1, 1, 2), [3, 2, 2])",
    "view(narrow(m, 0, 1, 2), [12])",               "unsqueeze(view(m, [24]), 1)"};
enum { N_VIEWS = sizeof view_names / sizeof view_names[0], VIEW_EXPAND = 9 };

/* View kind k of m into *v, and its geometry. */
static void make_view(clt_tensor *m, int k, clt_tensor **v, geom *g) {
  clt_tensor *a = NULL, *b = NULL;
  memset(g, 0, sizeof *g);
  switch (k) {
  case 0:
    *v = clt_tensor_retain(m);
    *g = (geom){2, {4, 6}, {6, 1}, 0};
    break;
  case 1:
    CU_OK(clt_unsqueeze(m, 0, v));
    *g = (geom){3, {1, 4, 6}, {24, 6, 1}, 0};
    break;
  case 2:
    CU_OK(clt_view(m, 2, (int64_t[]){6, 4}, v));
    *g = (geom){2, {6, 4}, {4, 1}, 0};
    break;
  case 3:
    CU_OK(clt_view(m, 1, (int64_t[]){24}, v));
    *g = (geom){1, {24}, {1}, 0};
    break;
  case 4:
    CU_OK(clt_reshape(m, 2, (int64_t[]){2, 12}, v));
    *g = (geom){2, {2, 12}, {12, 1}, 0};
    break;
  case 5:
    CU_OK(clt_narrow(m, 1, 1, 3, v));
    *g = (geom){2, {4, 3}, {6, 1}, 1};
    break;
  case 6:
    CU_OK(clt_select(m, 0, 2, v));
    *g = (geom){1, {6}, {1}, 12};
    break;
  case 7:
    CU_OK(clt_slice(m, 1, 0, 6, 2, v));
    *g = (geom){2, {4, 3}, {6, 2}, 0};
    break;
  case 8:
    CU_OK(clt_transpose(m, 0, 1, v));
    *g = (geom){2, {6, 4}, {1, 6}, 0};
    break;
  case 9:
    CU_OK(clt_unsqueeze(m, 0, &a));
    CU_OK(clt_expand(a, 3, (int64_t[]){2, 4, 6}, v));
    *g = (geom){3, {2, 4, 6}, {0, 6, 1}, 0};
    break;
  case 10:
    CU_OK(clt_transpose(m, 0, 1, &a));
    CU_OK(clt_narrow(a, 1, 1, 2, &b));
    CU_OK(clt_view(b, 3, (int64_t[]){3, 2, 2}, v));
    *g = (geom){3, {3, 2, 2}, {2, 1, 6}, 6};
    break;
  case 11:
    CU_OK(clt_narrow(m, 0, 1, 2, &a));
    CU_OK(clt_view(a, 1, (int64_t[]){12}, v));
    *g = (geom){1, {12}, {1}, 6};
    break;
  default:
    CU_OK(clt_view(m, 1, (int64_t[]){24}, &a));
    CU_OK(clt_unsqueeze(a, 1, v));
    *g = (geom){2, {24, 1}, {1, 1}, 0};
    break;
  }
  clt_tensor_release(a);
  clt_tensor_release(b);
  /* clt's geometry agrees with the model (strides of size-1 dimensions are free) */
  ck_assert_int_eq(clt_tensor_ndim(*v), g->ndim);
  ck_assert_int_eq(clt_tensor_offset(*v), g->offset);
  for (int dd = 0; dd < g->ndim; dd++) {
    ck_assert_int_eq(clt_tensor_shape(*v)[dd], g->shape[dd]);
    ck_assert_msg(g->shape[dd] == 1 || clt_tensor_strides(*v)[dd] == g->strides[dd],
                  "%s: stride %d is %lld, want %lld", view_names[k], dd,
                  (long long)clt_tensor_strides(*v)[dd], (long long)g->strides[dd]);
  }
}

/* ---- the consumers ------------------------------------------------------------------------- */

static const char *const consumer_names[] = {
    "add(v, v)",        "add_scalar(v, 1)", "add_out(v, v, out)", "add_(zeros, v)",
    "add_(v, v)",       "(v * 3) + 1",      "sum(v)",             "sum_dim(v, 0)",
    "max(v)",           "matmul(v, ones)",  "cat([v], 0)",        "cat([v, v], 0)",
    "stack([v], 0)",    "index_select(v, 0, [last, 0])",          "cast(v)",
    "copy(empty, v)",   "clone(v)",         "contiguous(v)",      "to(v, cpu)",
    "copy_to(v, other device)",             "format(v)",          "save and load(v)",
    "sub(v, v[0]) broadcast"};
enum {
  C_ADD, C_ADD_SCALAR, C_ADD_OUT, C_INPLACE_OPERAND, C_INPLACE_DEST, C_CHAIN, C_SUM, C_SUM_DIM,
  C_MAX, C_MATMUL, C_CAT1, C_CAT2, C_STACK, C_INDEX_SELECT, C_CAST, C_COPY, C_CLONE,
  C_CONTIGUOUS, C_TO_CPU, C_COPY_TO, C_FORMAT, C_SAVE, C_BROADCAST, N_CONSUMERS
};

/* What one case gives: the status, the result (dtype, shape, bytes), the text of format, and
 * m's bytes afterwards. */
typedef struct outcome {
  clt_status st;
  clt_dtype dt;
  int ndim;
  int64_t shape[4];
  void *bytes;
  size_t nbytes;
  char text[2048];
  void *m_bytes;
} outcome;

static clt_device *other_device(clt_device *d) {
  clt_device *devs[CU_MAX_DEVICES];
  int n = cu_devices(devs);
  for (int i = 1; i < n; i++)
    if (devs[i] != d && cu_is_cl(devs[i]))
      return devs[i];
  return NULL;
}

/* Consumer c of v (of dtype dt, on d) into *r; the status of the operation. */
static clt_status consume(int c, clt_tensor *v, const geom *g, clt_dtype dt, clt_device *d,
                          clt_tensor **r, char *text, size_t tsize) {
  clt_tensor *a = NULL;
  clt_status st = CLT_OK;
  switch (c) {
  case C_ADD:
    st = clt_add(v, v, r);
    break;
  case C_ADD_SCALAR:
    st = clt_add_scalar(v, 1, r);
    break;
  case C_ADD_OUT:
    CU_OK(clt_empty(dt, g->ndim, g->shape, d, r));
    st = clt_add_out(v, v, *r);
    break;
  case C_INPLACE_OPERAND:
    CU_OK(clt_zeros(dt, g->ndim, g->shape, d, r));
    st = clt_add_(*r, v);
    break;
  case C_INPLACE_DEST:
    st = clt_add_(v, v);
    *r = clt_tensor_retain(v);
    break;
  case C_CHAIN:
    if ((st = clt_mul_scalar(v, 3, &a)) == CLT_OK)
      st = clt_add_scalar(a, 1, r);
    break;
  case C_SUM:
    st = clt_sum(v, r);
    break;
  case C_SUM_DIM:
    st = clt_sum_dim(v, 0, 0, r);
    break;
  case C_MAX:
    st = clt_max(v, r);
    break;
  case C_MATMUL:
    CU_OK(clt_ones(dt, 2, (int64_t[]){g->shape[g->ndim - 1], 2}, d, &a));
    st = clt_matmul(v, a, r);
    break;
  case C_CAT1:
    st = clt_cat(1, (clt_tensor *[]){v}, 0, r);
    break;
  case C_CAT2:
    st = clt_cat(2, (clt_tensor *[]){v, v}, 0, r);
    break;
  case C_STACK:
    st = clt_stack(1, (clt_tensor *[]){v}, 0, r);
    break;
  case C_INDEX_SELECT: {
    int64_t idx[2] = {g->shape[0] - 1, 0};
    a = cu_tensor(idx, CLT_I64, 1, (int64_t[]){2}, d);
    st = clt_index_select(v, 0, a, r);
    break;
  }
  case C_CAST:
    st = clt_cast(v, dt == CLT_F32 ? CLT_I32 : CLT_F32, r);
    break;
  case C_COPY:
    CU_OK(clt_empty(dt, g->ndim, g->shape, d, r));
    st = clt_copy(*r, v);
    break;
  case C_CLONE:
    st = clt_clone(v, r);
    break;
  case C_CONTIGUOUS:
    st = clt_contiguous(v, r);
    break;
  case C_TO_CPU:
    st = clt_to(v, clt_cpu(), r);
    break;
  case C_COPY_TO:
    st = clt_copy_to(v, other_device(d), r);
    break;
  case C_FORMAT:
    st = clt_format(v, text, tsize, NULL);
    *r = clt_tensor_retain(v);
    break;
  case C_SAVE: {
    char dir[512], path[600];
    cu_temp_dir(dir, sizeof dir, "compose");
    snprintf(path, sizeof path, "%s/v.safetensors", dir);
    clt_params *p, *q = NULL;
    CU_OK(clt_params_create(&p));
    CU_OK(clt_params_add(p, "v", v));
    if ((st = clt_save(path, p)) == CLT_OK && (st = clt_load(path, NULL, &q)) == CLT_OK)
      *r = clt_tensor_retain(clt_params_get(q, "v"));
    clt_params_release(p);
    clt_params_release(q);
    unlink(path);
    rmdir(dir);
    break;
  }
  default: /* C_BROADCAST: v minus its first row (dim 0 index 0), broadcast over dim 0 */
    CU_OK(clt_narrow(v, 0, 0, 1, &a));
    st = dt == CLT_BOOL ? clt_logical_xor(v, a, r) : clt_sub(v, a, r);
    break;
  }
  clt_tensor_release(a);
  return st;
}

/* Whether consumer c applies to view k in dtype dt (an in-place write through an expanded view
 * writes one element twice: not a case; matmul takes float operands of 1 or more dimensions;
 * copy_to needs a second device). */
static bool applies(int c, int k, clt_dtype dt, clt_device *d) {
  if (c == C_INPLACE_DEST && k == VIEW_EXPAND)
    return false;
  if (c == C_COPY_TO && !other_device(d))
    return false;
  (void)dt;
  return true;
}

/* Runs view k, consumer c, on d in dtype dt, lazily or not, into o; mv gets m's values as made
 * and g the view's geometry (checked against clt's by make_view). */
static void run_case(clt_device *d, clt_dtype dt, int k, int c, int lazy, outcome *o,
                     double *mv, geom *g) {
  memset(o, 0, sizeof *o);
  int was = clt_set_lazy(lazy);
  int64_t host_min = clt__lazy_host_min(lazy ? 1 : 0); /* every host op deferred when lazy */
  clt_lazy_stats s0, s1;
  clt__lazy_stats(&s0);
  clt_tensor *m, *v, *r = NULL;
  make_m(d, dt, &m, mv);
  clt__lazy_stats(&s1);
  /* the test is of deferred results: m must be one in lazy mode, and not otherwise */
  ck_assert_msg(s1.deferred - s0.deferred == (lazy ? 2 : 0), "%s %s: %ld ops deferred making m",
                cu_dev_name(d), lazy ? "lazy" : "eager", (long)(s1.deferred - s0.deferred));
  make_view(m, k, &v, g);
  o->st = consume(c, v, g, dt, d, &r, o->text, sizeof o->text);
  if (o->st == CLT_OK) {
    o->dt = clt_tensor_dtype(r);
    o->ndim = clt_tensor_ndim(r);
    memcpy(o->shape, clt_tensor_shape(r), sizeof(int64_t) * (size_t)o->ndim);
    o->nbytes = clt_tensor_nbytes(r);
    o->bytes = cu_read(r);
  }
  o->m_bytes = cu_read(m);
  clt_tensor_release(r);
  clt_tensor_release(v);
  clt_tensor_release(m);
  clt__lazy_host_min(host_min);
  clt_set_lazy(was);
}

/* The values consumer c must give for view values ev (geometry g), and their count; *want_st
 * the status it must return. */
static int64_t expected(int c, clt_dtype dt, clt_dtype rdt, const geom *g, const double *ev,
                        double *out, clt_status *want_st) {
  int64_t n = geom_numel(g), inner = n / g->shape[0];
  *want_st = CLT_OK;
  switch (c) {
  case C_ADD:
  case C_ADD_OUT:
  case C_INPLACE_DEST:
    for (int64_t i = 0; i < n; i++)
      out[i] = conv(dt, 2 * ev[i]);
    return n;
  case C_ADD_SCALAR:
    for (int64_t i = 0; i < n; i++)
      out[i] = conv(rdt, ev[i] + 1);
    return n;
  case C_CHAIN: /* (v * 3) in the dtype of v * 3 (that of v + 1 here: scalars do not promote) */
    for (int64_t i = 0; i < n; i++)
      out[i] = conv(rdt, conv(rdt, ev[i] * 3) + 1);
    return n;
  case C_SUM: {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
      s += ev[i];
    out[0] = conv(rdt, s);
    return 1;
  }
  case C_SUM_DIM:
    for (int64_t j = 0; j < inner; j++) {
      double s = 0;
      for (int64_t i = 0; i < g->shape[0]; i++)
        s += ev[i * inner + j];
      out[j] = conv(rdt, s);
    }
    return inner;
  case C_MAX: {
    double mx = ev[0];
    for (int64_t i = 1; i < n; i++)
      mx = ev[i] > mx ? ev[i] : mx;
    out[0] = mx;
    return 1;
  }
  case C_MATMUL: {
    if (!cu_is_float(dt) || g->ndim < 1) { /* torch.matmul's shapes: 1-D and batches too */
      *want_st = cu_is_float(dt) ? CLT_ERR_SHAPE_MISMATCH : CLT_ERR_DTYPE;
      return 0;
    }
    int64_t kk = g->shape[g->ndim - 1];
    for (int64_t row = 0; row < n / kk; row++) {
      double s = 0;
      for (int64_t j = 0; j < kk; j++)
        s += ev[row * kk + j];
      out[2 * row] = out[2 * row + 1] = conv(dt, s);
    }
    return 2 * (n / kk);
  }
  case C_CAT2:
    memcpy(out, ev, sizeof(double) * (size_t)n);
    memcpy(out + n, ev, sizeof(double) * (size_t)n);
    return 2 * n;
  case C_INDEX_SELECT:
    memcpy(out, ev + (g->shape[0] - 1) * inner, sizeof(double) * (size_t)inner);
    memcpy(out + inner, ev, sizeof(double) * (size_t)inner);
    return 2 * inner;
  case C_CAST:
    for (int64_t i = 0; i < n; i++)
      out[i] = conv(dt == CLT_F32 ? CLT_I32 : CLT_F32, ev[i]);
    return n;
  case C_BROADCAST:
    for (int64_t i = 0; i < n; i++)
      out[i] = dt == CLT_BOOL ? ((ev[i] != 0) != (ev[i % inner] != 0)) : conv(dt, ev[i] - ev[i % inner]);
    return n;
  default: /* the view's values, unchanged */
    memcpy(out, ev, sizeof(double) * (size_t)n);
    return n;
  }
}

/* The text clt_format gives for a tensor made directly from the values vals. */
static void format_of(const double *vals, const geom *g, clt_dtype dt, clt_device *d, char *text,
                      size_t size) {
  int64_t n = geom_numel(g);
  void *buf = cu_malloc(clt_dtype_size(dt) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    cu_set(buf, dt, i, vals[i]);
  clt_tensor *t = cu_tensor(buf, dt, g->ndim, g->shape, d);
  CU_OK(clt_format(t, text, size, NULL));
  clt_tensor_release(t);
  free(buf);
}

static void check_case(clt_device *d, clt_dtype dt, int k, int c) {
  outcome eager, lazy;
  double mv[M_NUMEL];
  geom g;
  run_case(d, dt, k, c, 0, &eager, mv, &g);
  run_case(d, dt, k, c, 1, &lazy, mv, &g);
  char what[256];
  snprintf(what, sizeof what, "%s %s, v = %s, %s", cu_dev_name(d), cu_dt_name(dt), view_names[k],
           consumer_names[c]);
  /* deferring changes no status, dtype, shape, bit or character */
  ck_assert_msg(lazy.st == eager.st, "%s: lazy %s, eager %s", what, clt_status_name(lazy.st),
                clt_status_name(eager.st));
  ck_assert_msg(lazy.nbytes == eager.nbytes && lazy.dt == eager.dt && lazy.ndim == eager.ndim &&
                    memcmp(lazy.shape, eager.shape, sizeof lazy.shape) == 0,
                "%s: lazy and eager results differ in dtype or shape", what);
  for (size_t i = 0; i < eager.nbytes; i++)
    ck_assert_msg(((unsigned char *)lazy.bytes)[i] == ((unsigned char *)eager.bytes)[i],
                  "%s: lazy and eager differ at byte %zu (element %zu)", what, i,
                  i / clt_dtype_size(eager.dt));
  ck_assert_msg(strcmp(lazy.text, eager.text) == 0, "%s: lazy prints\n%s\neager prints\n%s", what,
                lazy.text, eager.text);
  ck_assert_msg(memcmp(lazy.m_bytes, eager.m_bytes, clt_dtype_size(dt) * M_NUMEL) == 0,
                "%s: m itself differs afterwards, lazy and eager", what);

  /* and both equal what this file computes */
  int64_t n = geom_numel(&g);
  double *ev = cu_malloc(sizeof(double) * (size_t)n), *want = cu_malloc(sizeof(double) * 4 * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    ev[i] = mv[geom_at(&g, i)];
  clt_status want_st;
  int64_t nw = expected(c, dt, eager.st == CLT_OK ? eager.dt : dt, &g, ev, want, &want_st);
  ck_assert_msg(eager.st == want_st, "%s: %s, want %s", what, clt_status_name(eager.st),
                clt_status_name(want_st));
  if (eager.st == CLT_OK) {
    int64_t got_n = eager.nbytes / clt_dtype_size(eager.dt);
    ck_assert_msg(got_n == nw, "%s: %lld elements, want %lld", what, (long long)got_n,
                  (long long)nw);
    for (int64_t i = 0; i < nw; i++) {
      double gv = cu_get(eager.bytes, eager.dt, i);
      ck_assert_msg(gv == want[i], "%s: element %lld is %.9g, want %.9g", what, (long long)i, gv,
                    want[i]);
    }
  }
  if (c == C_FORMAT) {
    char text[2048];
    format_of(ev, &g, dt, d, text, sizeof text);
    ck_assert_msg(strcmp(eager.text, text) == 0, "%s: prints\n%s\nwant\n%s", what, eager.text,
                  text);
  }
  /* m afterwards: as made, or with the view's elements doubled by add_(v, v) */
  double mwant[M_NUMEL];
  memcpy(mwant, mv, sizeof mwant);
  if (c == C_INPLACE_DEST)
    for (int64_t i = 0; i < n; i++)
      mwant[geom_at(&g, i)] = conv(dt, 2 * mv[geom_at(&g, i)]);
  for (int i = 0; i < M_NUMEL; i++)
    ck_assert_msg(cu_get(eager.m_bytes, dt, i) == mwant[i], "%s: m[%d] is %.9g afterwards, want %.9g",
                  what, i, cu_get(eager.m_bytes, dt, i), mwant[i]);
  free(ev);
  free(want);
  free(eager.bytes);
  free(lazy.bytes);
  free(eager.m_bytes);
  free(lazy.m_bytes);
}

/* The grid for one dtype (the loop index), on every device. */
START_TEST(test_compose_grid) {
  clt_dtype dt = grid_dtypes[_i];
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs), cases = 0;
  for (int di = 0; di < nd; di++) {
    clt_device *d = devs[di];
    if (!cu_dtype_ok("test_compose_grid", d, dt))
      continue;
    for (int k = 0; k < N_VIEWS; k++)
      for (int c = 0; c < N_CONSUMERS; c++)
        if (applies(c, k, dt, d)) {
          check_case(d, dt, k, c);
          cases++;
        }
  }
  ck_assert_int_gt(cases, 0);
}
END_TEST

/* ---- the repros of issue 32, each on every device, lazily and eagerly ------------------------ */

/* A repro makes its result on d into *r and the values it must have into want (at most 64 K);
 * returns their count. */
typedef int64_t (*repro_fn)(clt_device *d, clt_tensor **r, double *want);

static clt_tensor *from_values(const double *v, clt_dtype dt, int ndim, const int64_t *shape,
                               clt_device *d) {
  int64_t n = cu_numel(ndim, shape);
  void *buf = cu_malloc(clt_dtype_size(dt) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    cu_set(buf, dt, i, v[i]);
  clt_tensor *t = cu_tensor(buf, dt, ndim, shape, d);
  free(buf);
  return t;
}

/* stack([x * 2]) of [1, 2, 3]: [[2, 4, 6]] (it was [[2, 2, 2]]) */
static int64_t repro_stack(clt_device *d, clt_tensor **r, double *want) {
  clt_tensor *a = from_values((double[]){1, 2, 3}, CLT_F32, 1, (int64_t[]){3}, d), *m;
  CU_OK(clt_mul_scalar(a, 2, &m));
  CU_OK(clt_stack(1, (clt_tensor *[]){m}, 0, r));
  memcpy(want, (double[]){2, 4, 6}, 3 * sizeof(double));
  clt_tensor_release(a);
  clt_tensor_release(m);
  return 3;
}

/* view(y * 2, [2, 3]) + 0, then y * 2 itself: both 0 2 4 6 8 10 */
static int64_t repro_view_add(clt_device *d, clt_tensor **r, double *want) {
  clt_tensor *b = from_values((double[]){0, 1, 2, 3, 4, 5}, CLT_F32, 1, (int64_t[]){6}, d), *n, *v,
             *s;
  CU_OK(clt_mul_scalar(b, 2, &n));
  CU_OK(clt_view(n, 2, (int64_t[]){2, 3}, &v));
  CU_OK(clt_add_scalar(v, 0, &s));
  CU_OK(clt_cat(2, (clt_tensor *[]){v, s}, 0, r)); /* n (through v), then the sum */
  for (int i = 0; i < 12; i++)
    want[i] = 2 * (i % 6);
  clt_tensor_release(b);
  clt_tensor_release(n);
  clt_tensor_release(v);
  clt_tensor_release(s);
  return 12;
}

/* cat([unsqueeze(arange(0, 6) * 2, 0)], 0) and the same through view(.., [1, 6]) */
static int64_t repro_cat_unsqueeze(clt_device *d, clt_tensor **r, double *want) {
  clt_tensor *a, *m, *u, *w, *c1, *c2;
  CU_OK(clt_arange(0, 6, 1, CLT_F32, d, &a));
  CU_OK(clt_mul_scalar(a, 2, &m));
  CU_OK(clt_unsqueeze(m, 0, &u));
  CU_OK(clt_cat(1, (clt_tensor *[]){u}, 0, &c1));
  clt_tensor_release(m);
  CU_OK(clt_mul_scalar(a, 2, &m));
  CU_OK(clt_view(m, 2, (int64_t[]){1, 6}, &w));
  CU_OK(clt_cat(1, (clt_tensor *[]){w}, 0, &c2));
  CU_OK(clt_cat(2, (clt_tensor *[]){c1, c2}, 0, r));
  for (int i = 0; i < 12; i++)
    want[i] = 2 * (i % 6);
  clt_tensor *all[] = {a, m, u, w, c1, c2};
  for (int i = 0; i < 6; i++)
    clt_tensor_release(all[i]);
  return 12;
}

/* clone(view(arange(0, 6) * 2 + 1, [2, 3])): 1 3 5 7 9 11 (it was 1 1 1 3 3 3) */
static int64_t repro_clone_view(clt_device *d, clt_tensor **r, double *want) {
  clt_tensor *a, *m, *p, *v;
  CU_OK(clt_arange(0, 6, 1, CLT_F32, d, &a));
  CU_OK(clt_mul_scalar(a, 2, &m));
  CU_OK(clt_add_scalar(m, 1, &p));
  CU_OK(clt_view(p, 2, (int64_t[]){2, 3}, &v));
  CU_OK(clt_clone(v, r));
  for (int i = 0; i < 6; i++)
    want[i] = 2 * i + 1;
  clt_tensor *all[] = {a, m, p, v};
  for (int i = 0; i < 4; i++)
    clt_tensor_release(all[i]);
  return 6;
}

/* i64: v = view(x, [9]) of a [3, 3] leaf; stack([mul(v, clamp_scalar(v, -inf, 2))], 0) */
static int64_t repro_i64_clamp(clt_device *d, clt_tensor **r, double *want) {
  double xv[9];
  for (int i = 0; i < 9; i++)
    xv[i] = i * 3 % 7 - 3;
  clt_tensor *x = from_values(xv, CLT_I64, 2, (int64_t[]){3, 3}, d), *v, *c, *p;
  CU_OK(clt_view(x, 1, (int64_t[]){9}, &v));
  CU_OK(clt_clamp_scalar(v, -INFINITY, 2, &c));
  CU_OK(clt_mul(v, c, &p));
  CU_OK(clt_stack(1, (clt_tensor *[]){p}, 0, r));
  for (int i = 0; i < 9; i++)
    want[i] = xv[i] * (xv[i] < 2 ? xv[i] : 2);
  clt_tensor *all[] = {x, v, c, p};
  for (int i = 0; i < 4; i++)
    clt_tensor_release(all[i]);
  return 9;
}

/* f64: stack([atan2(zeros(3), [1, -0.0224, 1]), zeros(3)], 0): 0 pi 0, then zeros */
static int64_t repro_f64_atan2(clt_device *d, clt_tensor **r, double *want) {
  if (!clt_device_has_fp64(d)) {
    CU_OK(clt_zeros(CLT_F32, 1, (int64_t[]){1}, d, r));
    want[0] = 0;
    return 1;
  }
  clt_tensor *z, *q = from_values((double[]){1, -0.0224, 1}, CLT_F64, 1, (int64_t[]){3}, d), *c;
  CU_OK(clt_zeros(CLT_F64, 1, (int64_t[]){3}, d, &z));
  CU_OK(clt_atan2(z, q, &c));
  CU_OK(clt_stack(2, (clt_tensor *[]){c, z}, 0, r));
  memcpy(want, (double[]){0, atan2(0.0, -0.0224), 0, 0, 0, 0}, 6 * sizeof(double));
  clt_tensor_release(z);
  clt_tensor_release(q);
  clt_tensor_release(c);
  return 6;
}

/* atan2_scalar(zeros i32 [3, 2, 4], 3), view(.., [24, -1]), cat with a [24, 1] tensor: zeros,
 * then the other tensor (it read pi/4 where 0 is right) */
static int64_t repro_i32_atan2_cat(clt_device *d, clt_tensor **r, double *want) {
  clt_tensor *z, *a, *v, *o;
  CU_OK(clt_zeros(CLT_I32, 3, (int64_t[]){3, 2, 4}, d, &z));
  CU_OK(clt_atan2_scalar(z, 3, &a));
  CU_OK(clt_view(a, 2, (int64_t[]){24, -1}, &v));
  double ov[24];
  for (int i = 0; i < 24; i++)
    ov[i] = i - 7;
  o = from_values(ov, CLT_F32, 2, (int64_t[]){24, 1}, d);
  CU_OK(clt_cat(2, (clt_tensor *[]){v, o}, 0, r));
  for (int i = 0; i < 48; i++)
    want[i] = i < 24 ? 0 : ov[i - 24];
  clt_tensor *all[] = {z, a, v, o};
  for (int i = 0; i < 4; i++)
    clt_tensor_release(all[i]);
  return 48;
}

/* f16: clamp_scalar(cast(bf16 tensor, f16), 0.5, -5) (lo > hi gives hi) and clamp_scalar(..,
 * -1, 5), stacked with a u8 and an f16 tensor of the same shape (the result is f16) */
static int64_t repro_f16_clamp_stack(clt_device *d, clt_tensor **r, double *want) {
  double bv[4] = {-3, 0.25, 7, 1.5}, uv[4] = {0, 9, 200, 3}, hv[4] = {-0.5, 2, 65, 1024};
  clt_tensor *b = from_values(bv, CLT_BF16, 1, (int64_t[]){4}, d), *h, *c1, *c2;
  clt_tensor *u = from_values(uv, CLT_U8, 1, (int64_t[]){4}, d),
             *f = from_values(hv, CLT_F16, 1, (int64_t[]){4}, d);
  CU_OK(clt_cast(b, CLT_F16, &h));
  CU_OK(clt_clamp_scalar(h, 0.5, -5, &c1));
  CU_OK(clt_clamp_scalar(h, -1, 5, &c2));
  CU_OK(clt_stack(4, (clt_tensor *[]){c1, c2, u, f}, 0, r));
  for (int i = 0; i < 4; i++) {
    want[i] = -5;
    want[4 + i] = bv[i] < -1 ? -1 : bv[i] > 5 ? 5 : bv[i];
    want[8 + i] = uv[i];
    want[12 + i] = hv[i];
  }
  clt_tensor *all[] = {b, h, c1, c2, u, f};
  for (int i = 0; i < 6; i++)
    clt_tensor_release(all[i]);
  return 16;
}

/* u8: ge_scalar(t, 4) of a [5, 2, 2] tensor, view(.., [20]), sub_scalar(.., -5) */
static int64_t repro_u8_ge_view(clt_device *d, clt_tensor **r, double *want) {
  double tv[20];
  for (int i = 0; i < 20; i++)
    tv[i] = i * 7 % 9;
  clt_tensor *t = from_values(tv, CLT_U8, 3, (int64_t[]){5, 2, 2}, d), *g, *v;
  CU_OK(clt_ge_scalar(t, 4, &g));
  CU_OK(clt_view(g, 1, (int64_t[]){20}, &v));
  CU_OK(clt_sub_scalar(v, -5, r));
  for (int i = 0; i < 20; i++)
    want[i] = (tv[i] >= 4) + 5;
  clt_tensor_release(t);
  clt_tensor_release(g);
  clt_tensor_release(v);
  return 20;
}

/* m = arange(0, n) * full(2); clone(unsqueeze(m, 0)), then clone(narrow(m, 0, 1, 4)): 2 4 6 8
 * (it was 0 0 0 0: the first clone had written m at the wrong shape); n = 2^20 on the host,
 * where that many elements defer by default */
static int64_t repro_held_narrow(clt_device *d, clt_tensor **r, double *want) {
  int64_t n = d == clt_cpu() ? (int64_t)1 << 20 : 4096;
  clt_tensor *a, *two, *m, *u, *c1, *nw, *c2;
  CU_OK(clt_arange(0, (double)n, 1, CLT_F32, d, &a));
  CU_OK(clt_full(CLT_F32, 1, &n, 2, d, &two));
  CU_OK(clt_mul(a, two, &m));
  CU_OK(clt_unsqueeze(m, 0, &u));
  CU_OK(clt_clone(u, &c1));
  CU_OK(clt_narrow(m, 0, 1, 4, &nw));
  CU_OK(clt_clone(nw, &c2));
  clt_tensor *tail;
  CU_OK(clt_narrow(c1, 1, n - 2, 2, &tail));
  clt_tensor *flat;
  CU_OK(clt_view(tail, 1, (int64_t[]){2}, &flat));
  CU_OK(clt_cat(2, (clt_tensor *[]){c2, flat}, 0, r)); /* 2 4 6 8, and c1's last two */
  memcpy(want, (double[]){2, 4, 6, 8, 2.0 * (double)(n - 2), 2.0 * (double)(n - 1)},
         6 * sizeof(double));
  clt_tensor *all[] = {a, two, m, u, c1, nw, c2, tail, flat};
  for (int i = 0; i < 9; i++)
    clt_tensor_release(all[i]);
  return 6;
}

/* view(b * 2, [3, 2]) + 0 of a [2, 3] tensor b: 0 2 4 6 8 10 (it read outside the chain) */
static int64_t repro_view_other_shape(clt_device *d, clt_tensor **r, double *want) {
  clt_tensor *b = from_values((double[]){0, 1, 2, 3, 4, 5}, CLT_F32, 2, (int64_t[]){2, 3}, d), *m,
             *v;
  CU_OK(clt_mul_scalar(b, 2, &m));
  CU_OK(clt_view(m, 2, (int64_t[]){3, 2}, &v));
  CU_OK(clt_add_scalar(v, 0, r));
  for (int i = 0; i < 6; i++)
    want[i] = 2 * i;
  clt_tensor_release(b);
  clt_tensor_release(m);
  clt_tensor_release(v);
  return 6;
}

/* add(select(m, 1, 3), m), m deferred: the view's chain was computed while the node of m was
 * already taken as the other operand's chain, and freed (found by tests/diff: a crash on the
 * host, garbage on OpenCL devices) */
static int64_t repro_view_and_whole(clt_device *d, clt_tensor **r, double *want) {
  clt_tensor *x, *m, *v;
  CU_OK(clt_full(CLT_F32, 2, (int64_t[]){1, 5}, 5, d, &x));
  CU_OK(clt_mul_scalar(x, 3, &m));
  CU_OK(clt_select(m, 1, 3, &v));
  CU_OK(clt_add(v, m, r));
  for (int i = 0; i < 5; i++)
    want[i] = 30;
  clt_tensor_release(x);
  clt_tensor_release(m);
  clt_tensor_release(v);
  return 5;
}

/* The _out form of it: lt_out(select(a, 0, 2), a, out), a = relu(view(x, [3, 2])) deferred */
static int64_t repro_view_and_whole_out(clt_device *d, clt_tensor **r, double *want) {
  double xv[6] = {-1, 4, 2, -3, 5, 0.5};
  clt_tensor *x = from_values(xv, CLT_F32, 2, (int64_t[]){2, 3}, d), *w, *a, *s;
  CU_OK(clt_view(x, 2, (int64_t[]){3, 2}, &w));
  CU_OK(clt_relu(w, &a));
  CU_OK(clt_select(a, 0, 2, &s));
  CU_OK(clt_zeros(CLT_BOOL, 2, (int64_t[]){3, 2}, d, r));
  CU_OK(clt_lt_out(s, a, *r));
  for (int i = 0; i < 6; i++) {
    double ai = xv[i] > 0 ? xv[i] : 0, si = xv[4 + i % 2] > 0 ? xv[4 + i % 2] : 0;
    want[i] = si < ai;
  }
  clt_tensor *all[] = {x, w, a, s};
  for (int i = 0; i < 4; i++)
    clt_tensor_release(all[i]);
  return 6;
}

/* clamp(a, a, h) of a = -0.0 (f64, [6, 1]) and h = +0.0 (f16, [6]): -0 everywhere; the host's
 * fused pass gave -0 where its vectorized loop gave +0 (fmin and fmax may return either zero;
 * found by tests/diff, seed 2077). The bytes of lazy and eager are compared too. */
static int64_t repro_signed_zero_clamp(clt_device *d, clt_tensor **r, double *want) {
  clt_tensor *a, *h, *c;
  CU_OK(clt_full(clt_device_has_fp64(d) ? CLT_F64 : CLT_F32, 2, (int64_t[]){6, 1}, -0.0, d, &a));
  CU_OK(clt_full(CLT_F16, 1, (int64_t[]){6}, 0.0, d, &h));
  CU_OK(clt_clamp(a, a, h, &c));
  CU_OK(clt_expm1(c, r)); /* a chain of two on the host, as the tester's */
  for (int i = 0; i < 36; i++)
    want[i] = -0.0;
  clt_tensor_release(a);
  clt_tensor_release(h);
  clt_tensor_release(c);
  return 36;
}

/* m = pow_scalar(x, 3) of x [1, 1, 6] deferred, c = cast(unsqueeze(m, 2), same dtype) deferred,
 * m read first (so c's chain reads m's value, kept at m's shape), then c: the host's copy read
 * the value through its own strides at c's shape: -27 six times (tests/diff, seed 3464) */
static int64_t repro_value_other_shape(clt_device *d, clt_tensor **r, double *want) {
  double xv[6] = {-3, -2, -1, 0, 1, 2};
  clt_tensor *x = from_values(xv, CLT_F32, 3, (int64_t[]){1, 1, 6}, d), *m, *u;
  CU_OK(clt_pow_scalar(x, 3, &m));
  CU_OK(clt_unsqueeze(m, 2, &u));
  CU_OK(clt_cast(u, CLT_F32, r));
  float mv[6];
  CU_OK(clt_tensor_read(m, mv, sizeof mv));
  for (int i = 0; i < 6; i++)
    want[i] = xv[i] * xv[i] * xv[i];
  clt_tensor_release(x);
  clt_tensor_release(m);
  clt_tensor_release(u);
  return 6;
}

static const struct {
  const char *name;
  repro_fn fn;
} repros[] = {{"stack([x * 2])", repro_stack},
              {"view(y * 2, [2, 3]) + 0", repro_view_add},
              {"cat([unsqueeze(arange * 2, 0)])", repro_cat_unsqueeze},
              {"clone(view(arange * 2 + 1, [2, 3]))", repro_clone_view},
              {"i64 stack([v * clamp(v, -inf, 2)])", repro_i64_clamp},
              {"f64 stack([atan2(0, q), 0])", repro_f64_atan2},
              {"i32 cat([view(atan2(0, 3), [24, -1]), o])", repro_i32_atan2_cat},
              {"f16 stack([clamp(cast(bf16)), u8, f16])", repro_f16_clamp_stack},
              {"u8 view(t >= 4, [20]) - (-5)", repro_u8_ge_view},
              {"clone(narrow(m)) after clone(unsqueeze(m))", repro_held_narrow},
              {"view(b * 2, [3, 2]) + 0", repro_view_other_shape},
              {"add(select(m, 1, 3), m)", repro_view_and_whole},
              {"lt_out(select(a, 0, 2), a, out)", repro_view_and_whole_out},
              {"clamp(-0, -0, +0)", repro_signed_zero_clamp},
              {"cast(unsqueeze(m)) after reading m", repro_value_other_shape}};
enum { N_REPROS = sizeof repros / sizeof repros[0] };

/* Repro _i on every device: lazily (every host op deferred) and eagerly the same bytes, and the
 * values the repro computes itself. */
START_TEST(test_compose_issue32_repros) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  double *want = cu_malloc(sizeof(double) * 64);
  for (int di = 0; di < nd; di++) {
    void *bytes[2] = {NULL, NULL};
    size_t nbytes[2] = {0, 0};
    for (int lazy = 0; lazy < 2; lazy++) {
      int was = clt_set_lazy(lazy);
      int64_t host_min = clt__lazy_host_min(lazy ? 1 : 0);
      clt_tensor *r;
      int64_t n = repros[_i].fn(devs[di], &r, want);
      ck_assert_int_eq(clt_tensor_numel(r), n);
      nbytes[lazy] = clt_tensor_nbytes(r);
      bytes[lazy] = cu_read(r);
      for (int64_t k = 0; k < n; k++) {
        double g = cu_get(bytes[lazy], clt_tensor_dtype(r), k);
        ck_assert_msg(g == want[k] && signbit(g) == signbit(want[k]),
                      "%s on %s, %s: element %lld is %.17g, want %.17g",
                      repros[_i].name, cu_dev_name(devs[di]), lazy ? "lazy" : "eager",
                      (long long)k, g, want[k]);
      }
      clt_tensor_release(r);
      clt__lazy_host_min(host_min);
      clt_set_lazy(was);
    }
    ck_assert_msg(nbytes[0] == nbytes[1] && memcmp(bytes[0], bytes[1], nbytes[0]) == 0,
                  "%s on %s: lazy and eager bytes differ", repros[_i].name, cu_dev_name(devs[di]));
    free(bytes[0]);
    free(bytes[1]);
  }
  free(want);
}
END_TEST

/* ---- memory handed out of clt: the caller may write it behind clt's back ------------------- */

/* y = x * 2 deferred, and x's buffer written with zeros on clt's own queue (which "runs in order
 * with clt's", clt_device_cl) after clt_tensor_cl_mem or clt_to_dlpack handed it out: y keeps
 * 2 4 6 8 whichever comes first, the hand-out or the deferred op (the hand-out is a write for
 * lib/lazy.c: chains reading the buffer run first, and later ones read it at once). Found by a
 * review of every reader of storage (issue 32): y was 0 0 0 0 by default. */
START_TEST(test_compose_handed_out_buffers) {
  if (!cu_need_cl("test_compose_handed_out_buffers", 1))
    return;
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int di = 0; di < nd; di++) {
    if (!cu_is_cl(devs[di]))
      continue;
    clt_device *d = devs[di];
    cl_command_queue q;
    CU_OK(clt_device_cl(d, NULL, NULL, NULL, (struct _cl_command_queue **)&q));
    for (int how = 0; how < 4; how++) { /* cl_mem or DLPack; before or after the op */
      float v[4] = {1, 2, 3, 4}, zero[4] = {0, 0, 0, 0};
      int64_t n = 4;
      clt_tensor *x = cu_tensor(v, CLT_F32, 1, &n, d), *y = NULL;
      DLManagedTensor *m = NULL;
      cl_mem mem = NULL;
      size_t off = 0;
      bool dlpack = how >= 2, first = how % 2 == 0;
      if (!first)
        CU_OK(clt_mul_scalar(x, 2, &y));
      if (dlpack) {
        CU_OK(clt_to_dlpack(x, &m));
        mem = (cl_mem)m->dl_tensor.data;
        off = (size_t)m->dl_tensor.byte_offset;
      } else {
        CU_OK(clt_tensor_cl_mem(x, (struct _cl_mem **)&mem, &off));
      }
      if (first)
        CU_OK(clt_mul_scalar(x, 2, &y));
      ck_assert_int_eq(clEnqueueWriteBuffer(q, mem, CL_TRUE, off, sizeof zero, zero, 0, NULL, NULL),
                       CL_SUCCESS);
      float *yv = cu_read(y);
      for (int i = 0; i < 4; i++)
        ck_assert_msg(yv[i] == 2 * v[i], "%s, %s the op, on %s: y[%d] = %g, want %g",
                      dlpack ? "clt_to_dlpack" : "clt_tensor_cl_mem", first ? "before" : "after",
                      cu_dev_name(d), i, yv[i], 2 * v[i]);
      free(yv);
      if (m)
        m->deleter(m);
      clt_tensor_release(x);
      clt_tensor_release(y);
    }
  }
}
END_TEST

Suite *compose_suite(void);
Suite *compose_suite(void) {
  Suite *s = suite_create("compose");
  TCase *tc = cu_tcase("grid");
  tcase_add_loop_test(tc, test_compose_grid, 0, N_GRID_DTYPES);
  tcase_add_loop_test(tc, test_compose_issue32_repros, 0, N_REPROS);
  tcase_add_test(tc, test_compose_handed_out_buffers);
  suite_add_tcase(s, tc);
  return s;
}
