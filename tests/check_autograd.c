/* SPDX-License-Identifier: MIT */
/* check_autograd.c - reverse-mode autograd (lib/autograd.c, issue 26): gradients against central
 * finite differences in f64 for every differentiable operation (the elementwise ones generated
 * from clt_ops.h, so a new row is checked without a new test) and every view, on every device;
 * known values; broadcasting; accumulation; the graph's freeing; the in-place and version guards;
 * devices; grad mode; lazy and eager modes; detach; bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

Suite *autograd_suite(void); /* registered in check_main.c */

static void release_all(clt_tensor *const *ts, size_t n) {
  for (size_t i = 0; i < n; i++)
    clt_tensor_release(ts[i]);
}
#define RELEASE(...)                                                                               \
  release_all((clt_tensor *[]){__VA_ARGS__},                                                       \
              sizeof((clt_tensor *[]){__VA_ARGS__}) / sizeof(clt_tensor *))

/* ---- the gradient checker ------------------------------------------------------------------ */

/* A function of up to three f64 tensors, and its operands' shapes and value range. */
typedef clt_status (*fwd_fn)(clt_tensor *const *x, const void *arg, clt_tensor **out);
typedef struct gc_in {
  int ndim;
  int64_t shape[4];
} gc_in;

/* sum(f(x) * w) with the values v, on the host: no operand requires grad */
static double weighted(clt_device *dev, int n, const gc_in *ins, double *const *v, fwd_fn f,
                       const void *arg, const double *w) {
  clt_tensor *x[3] = {NULL, NULL, NULL}, *out;
  for (int k = 0; k < n; k++)
    x[k] = cu_tensor(v[k], CLT_F64, ins[k].ndim, ins[k].shape, dev);
  CU_OK(f(x, arg, &out));
  double *o = cu_read_double(out), sum = 0;
  for (int64_t i = 0; i < clt_tensor_numel(out); i++)
    sum += o[i] * w[i];
  free(o);
  RELEASE(x[0], x[1], x[2], out);
  return sum;
}

/* Checks the gradients backward gives for sum(f(x) * w) (w random) against central differences,
 * on dev, in f64, operand values uniform in [lo, hi]. */
static void gradcheck(clt_device *dev, const char *what, int n, const gc_in *ins, fwd_fn f,
                      const void *arg, double lo, double hi) {
  cu_rng r;
  cu_rng_seed(&r, 26);
  double *v[3] = {NULL, NULL, NULL};
  clt_tensor *x[3] = {NULL, NULL, NULL}, *out, *wt;
  for (int k = 0; k < n; k++) {
    int64_t m = cu_numel(ins[k].ndim, ins[k].shape);
    v[k] = cu_malloc(sizeof(double) * (size_t)(m ? m : 1));
    for (int64_t i = 0; i < m; i++)
      v[k][i] = lo + (hi - lo) * cu_rng_uniform(&r);
    x[k] = cu_tensor(v[k], CLT_F64, ins[k].ndim, ins[k].shape, dev);
    CU_OK(clt_requires_grad_(x[k], 1));
  }
  CU_OK(f(x, arg, &out));
  ck_assert_msg(clt_tensor_requires_grad(out), "%s on %s: the result does not require grad", what,
                cu_dev_name(dev));
  int64_t no = clt_tensor_numel(out);
  double *w = cu_malloc(sizeof(double) * (size_t)(no ? no : 1));
  for (int64_t i = 0; i < no; i++)
    w[i] = cu_rng_uniform(&r) * 2 - 1;
  wt = cu_tensor(w, CLT_F64, clt_tensor_ndim(out), clt_tensor_shape(out), dev);
  CU_OK(clt_backward(out, wt));
  for (int k = 0; k < n; k++) {
    clt_tensor *g = clt_tensor_grad(x[k]);
    ck_assert_msg(g, "%s on %s: no gradient for operand %d", what, cu_dev_name(dev), k + 1);
    cu_assert_meta(g, CLT_F64, dev, ins[k].ndim, ins[k].shape, what);
    double *an = cu_read_double(g);
    int64_t m = cu_numel(ins[k].ndim, ins[k].shape);
    for (int64_t i = 0; i < m; i++) {
      const double eps = 1e-6, keep = v[k][i];
      v[k][i] = keep + eps;
      double fp = weighted(dev, n, ins, v, f, arg, w);
      v[k][i] = keep - eps;
      double fm = weighted(dev, n, ins, v, f, arg, w);
      v[k][i] = keep;
      double num = (fp - fm) / (2 * eps);
      ck_assert_msg(fabs(an[i] - num) <= 1e-6 + 1e-5 * fabs(num),
                    "%s on %s: d/d(operand %d)[%lld] is %.12g by backward, %.12g by finite "
                    "differences",
                    what, cu_dev_name(dev), k + 1, (long long)i, an[i], num);
    }
    free(an);
  }
  free(w);
  for (int k = 0; k < n; k++)
    free(v[k]);
  RELEASE(x[0], x[1], x[2], out, wt);
}

/* The devices with f64, into devs; the count. */
static int f64_devices(const char *test, clt_device **devs) {
  clt_device *all[CU_MAX_DEVICES];
  int n = cu_devices(all), m = 0;
  for (int i = 0; i < n; i++)
    if (cu_dtype_ok(test, all[i], CLT_F64))
      devs[m++] = all[i];
  return m;
}

/* ---- every elementwise operation, from the table -------------------------------------------- */

typedef struct op_case {
  const char *name;
  int arity;
  int boolean; /* a bool result: never requires grad */
  int cond;    /* where: the first operand is a condition */
  clt_status (*fn1)(clt_tensor *, clt_tensor **);
  clt_status (*fn2)(clt_tensor *, clt_tensor *, clt_tensor **);
  clt_status (*fn3)(clt_tensor *, clt_tensor *, clt_tensor *, clt_tensor **);
  clt_status (*s2)(clt_tensor *, double, clt_tensor **);
  clt_status (*s3)(clt_tensor *, double, double, clt_tensor **);
} op_case;

#define IS_BOOL_PROMOTE 0
#define IS_BOOL_FLOAT 0
#define IS_BOOL_BOOL 1
#define IS_COND_PLAIN 0
#define IS_COND_WRAP 0
#define IS_COND_INPLACE 0
#define IS_COND_WRAP_INPLACE 0
#define IS_COND_COND 1
#define SC_1_PLAIN(n)
#define SC_1_WRAP(n)
#define SC_2_PLAIN(n) .s2 = clt_##n##_scalar,
#define SC_2_INPLACE(n) SC_2_PLAIN(n)
#define SC_2_WRAP_INPLACE(n) SC_2_PLAIN(n)
#define SC_3_PLAIN(n) .s3 = clt_##n##_scalar,
#define SC_3_COND(n)
#define CASE(name_, arity_, rule_, form_, fe_, ie_, be_, ulps_, doc_)                              \
  {.name = #name_,                                                                                 \
   .arity = arity_,                                                                                \
   .boolean = IS_BOOL_##rule_,                                                                     \
   .cond = IS_COND_##form_,                                                                        \
   .fn##arity_ = clt_##name_,                                                                      \
   SC_##arity_##_##form_(name_)},
static const op_case op_cases[] = {CLT_ELEMENTWISE_OPS(CASE)};
#undef CASE

static clt_status run_op(clt_tensor *const *x, const void *arg, clt_tensor **out) {
  const op_case *c = arg;
  if (c->cond) { /* where(x0 > 0.5, x0, x1) */
    clt_tensor *m;
    clt_status s = clt_gt_scalar(x[0], 0.5, &m);
    if (s == CLT_OK)
      s = c->fn3(m, x[0], x[1], out);
    clt_tensor_release(m);
    return s;
  }
  return c->arity == 1   ? c->fn1(x[0], out)
         : c->arity == 2 ? c->fn2(x[0], x[1], out)
                         : c->fn3(x[0], x[1], x[2], out);
}

static clt_status run_scalar(clt_tensor *const *x, const void *arg, clt_tensor **out) {
  const op_case *c = arg;
  return c->arity == 2 ? c->s2(x[0], 0.7, out) : c->s3(x[0], 0.4, 0.7, out);
}

START_TEST(test_elementwise_gradcheck) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = f64_devices("elementwise_gradcheck", devs);
  /* operands broadcast against each other: the gradients are summed back to each shape */
  const gc_in shapes[3] = {{2, {2, 3}}, {1, {3}}, {2, {2, 1}}};
  for (int d = 0; d < nd; d++)
    for (size_t i = 0; i < sizeof op_cases / sizeof op_cases[0]; i++) {
      const op_case *c = &op_cases[i];
      char what[64];
      if (c->boolean) { /* comparisons and logic: no gradient, no history */
        clt_tensor *a = cu_tensor((double[]){1, 2}, CLT_F64, 1, (int64_t[]){2}, devs[d]), *r;
        CU_OK(clt_requires_grad_(a, 1));
        CU_OK(c->arity == 1 ? c->fn1(a, &r) : c->fn2(a, a, &r));
        ck_assert_msg(!clt_tensor_requires_grad(r), "clt_%s's bool result requires grad", c->name);
        RELEASE(a, r);
        continue;
      }
      snprintf(what, sizeof what, "clt_%s", c->name);
      gradcheck(devs[d], what, c->cond ? 2 : c->arity, shapes, run_op, c, 0.2, 0.9);
      if (c->s2 || c->s3) {
        snprintf(what, sizeof what, "clt_%s_scalar", c->name);
        gradcheck(devs[d], what, 1, shapes, run_scalar, c, 0.2, 0.9);
      }
    }
}
END_TEST

/* ---- reductions, matmul, linear, views ------------------------------------------------------- */

typedef struct call {
  int kind;
  int64_t p[4];
} call;
enum {
  K_SUM,
  K_MEAN,
  K_SUM_DIM,
  K_MEAN_DIM,
  K_MATMUL,
  K_DOT,
  K_MV,
  K_OUTER,
  K_ADDMM,
  K_TRIL,
  K_TRIU,
  K_DIAG,
  K_DIAGONAL,
  K_TRACE,
  K_LINEAR,
  K_LINEAR_NOBIAS,
  K_NARROW,
  K_SELECT,
  K_SLICE,
  K_PERMUTE,
  K_TRANSPOSE,
  K_EXPAND,
  K_UNSQUEEZE,
  K_SQUEEZE,
  K_VIEW,
  K_RESHAPE_T,
  K_CONTIGUOUS_T,
  K_CLONE,
  K_CAST,
  K_SOFTMAX,
  K_LOG_SOFTMAX,
  K_LOGSUMEXP,
  K_MSE,
  K_CROSS_ENTROPY,
  K_MAX,
  K_MIN,
  K_MAX_DIM,
  K_MIN_DIM,
  K_INDEX_SELECT,
  K_CAT,
  K_CAT5,
  K_STACK
};

/* cross_entropy's fixed targets in the gradient checks: 4 rows, classes 0..2 (one repeated) */
static const int64_t xent_target[4] = {2, 0, 1, 2};

static clt_status run_call(clt_tensor *const *x, const void *arg, clt_tensor **out) {
  const call *c = arg;
  const int64_t *p = c->p;
  clt_tensor *t = NULL;
  clt_status s;
  switch (c->kind) {
  case K_SUM:
    return clt_sum(x[0], out);
  case K_MEAN:
    return clt_mean(x[0], out);
  case K_SUM_DIM:
    return clt_sum_dim(x[0], (int)p[0], (int)p[1], out);
  case K_MEAN_DIM:
    return clt_mean_dim(x[0], (int)p[0], (int)p[1], out);
  case K_MATMUL:
    return clt_matmul(x[0], x[1], out);
  case K_DOT:
    return clt_dot(x[0], x[1], out);
  case K_MV:
    return clt_mv(x[0], x[1], out);
  case K_OUTER:
    return clt_outer(x[0], x[1], out);
  case K_TRIL:
    return clt_tril(x[0], p[0], out);
  case K_TRIU:
    return clt_triu(x[0], p[0], out);
  case K_DIAG:
    return clt_diag(x[0], p[0], out);
  case K_DIAGONAL:
    return clt_diagonal(x[0], p[0], (int)p[1], (int)p[2], out);
  case K_TRACE:
    return clt_trace(x[0], out);
  case K_ADDMM: /* p: beta and alpha in tenths */
    return clt_addmm(x[0], x[1], x[2], (double)p[0] / 10, (double)p[1] / 10, out);
  case K_LINEAR:
    return clt_linear(x[0], x[1], x[2], out);
  case K_LINEAR_NOBIAS:
    return clt_linear(x[0], x[1], NULL, out);
  case K_NARROW:
    return clt_narrow(x[0], (int)p[0], p[1], p[2], out);
  case K_SELECT:
    return clt_select(x[0], (int)p[0], p[1], out);
  case K_SLICE:
    return clt_slice(x[0], (int)p[0], p[1], p[2], p[3], out);
  case K_PERMUTE:
    return clt_permute(x[0], 3, (int[]){2, 0, -2}, out);
  case K_TRANSPOSE:
    return clt_transpose(x[0], (int)p[0], (int)p[1], out);
  case K_EXPAND:
    return clt_expand(x[0], 3, (int64_t[]){2, 3, 4}, out);
  case K_UNSQUEEZE:
    return clt_unsqueeze(x[0], (int)p[0], out);
  case K_SQUEEZE:
    return clt_squeeze(x[0], (int)p[0], out);
  case K_VIEW:
    return clt_view(x[0], 2, (int64_t[]){3, -1}, out);
  case K_RESHAPE_T: /* a transposed view: reshape copies */
  case K_CONTIGUOUS_T:
    if ((s = clt_transpose(x[0], 0, 1, &t)) == CLT_OK)
      s = c->kind == K_RESHAPE_T ? clt_reshape(t, 1, (int64_t[]){-1}, out) : clt_contiguous(t, out);
    clt_tensor_release(t);
    return s;
  case K_CLONE:
    return clt_clone(x[0], out);
  case K_CAST: /* f64 -> f64 and to f32 and back would lose the digits the check needs */
    return clt_cast(x[0], CLT_F64, out);
  case K_SOFTMAX:
    return clt_softmax(x[0], (int)p[0], out);
  case K_LOG_SOFTMAX:
    return clt_log_softmax(x[0], (int)p[0], out);
  case K_LOGSUMEXP:
    return clt_logsumexp(x[0], (int)p[0], (int)p[1], out);
  case K_MSE:
    return clt_mse_loss(x[0], x[1], out);
  case K_CROSS_ENTROPY:
    t = cu_tensor(xent_target, CLT_I64, 1, (int64_t[]){4}, clt_tensor_device(x[0]));
    s = clt_cross_entropy(x[0], t, out);
    clt_tensor_release(t);
    return s;
  case K_MAX:
    return clt_max(x[0], out);
  case K_MIN:
    return clt_min(x[0], out);
  case K_MAX_DIM:
    return clt_max_dim(x[0], (int)p[0], (int)p[1], out);
  case K_MIN_DIM:
    return clt_min_dim(x[0], (int)p[0], (int)p[1], out);
  case K_INDEX_SELECT: /* repeated indices: their gradients add up */
    t = cu_tensor((int64_t[]){2, 0, 2, 1, 2}, CLT_I64, 1, (int64_t[]){p[1]},
                  clt_tensor_device(x[0]));
    s = clt_index_select(x[0], (int)p[0], t, out);
    clt_tensor_release(t);
    return s;
  case K_CAT:
    return clt_cat(3, x, (int)p[0], out);
  case K_CAT5: /* more operands than a node keeps inline, one of them three times */
    return clt_cat(5, (clt_tensor *[]){x[0], x[1], x[0], x[1], x[0]}, (int)p[0], out);
  case K_STACK:
    return clt_stack(2, x, (int)p[0], out);
  }
  return CLT_ERR_INTERNAL;
}

/* One gradient check: the call, its operands' number and shapes. */
typedef struct gc_call {
  const char *what;
  call c;
  int n;
  gc_in in[3];
} gc_call;

static const gc_call calls[] = {
    {"clt_sum", {K_SUM, {0}}, 1, {{2, {2, 3}}}},
    {"clt_mean", {K_MEAN, {0}}, 1, {{2, {2, 3}}}},
    {"clt_sum of a 0-d tensor", {K_SUM, {0}}, 1, {{0, {0}}}},
    {"clt_sum_dim(1)", {K_SUM_DIM, {1, 0}}, 1, {{3, {2, 3, 2}}}},
    {"clt_sum_dim(0, keepdim)", {K_SUM_DIM, {0, 1}}, 1, {{2, {2, 3}}}},
    {"clt_mean_dim(-1)", {K_MEAN_DIM, {-1, 0}}, 1, {{2, {2, 3}}}},
    {"clt_mean_dim(1, keepdim)", {K_MEAN_DIM, {1, 1}}, 1, {{3, {2, 3, 2}}}},
    {"clt_matmul 2-D", {K_MATMUL, {0}}, 2, {{2, {2, 3}}, {2, {3, 4}}}},
    {"clt_matmul batched", {K_MATMUL, {0}}, 2, {{3, {2, 2, 3}}, {3, {2, 3, 4}}}},
    {"clt_matmul 3-D by 2-D", {K_MATMUL, {0}}, 2, {{3, {2, 2, 3}}, {2, {3, 4}}}},
    {"clt_matmul 2-D by 3-D", {K_MATMUL, {0}}, 2, {{2, {2, 3}}, {3, {2, 3, 4}}}},
    {"clt_matmul 1-D by 1-D", {K_MATMUL, {0}}, 2, {{1, {3}}, {1, {3}}}},
    {"clt_matmul 2-D by 1-D", {K_MATMUL, {0}}, 2, {{2, {2, 3}}, {1, {3}}}},
    {"clt_matmul 1-D by 3-D", {K_MATMUL, {0}}, 2, {{1, {3}}, {3, {2, 3, 4}}}},
    {"clt_matmul 4-D by 3-D, batches broadcast",
     {K_MATMUL, {0}},
     2,
     {{4, {2, 1, 2, 3}}, {3, {3, 3, 2}}}},
    {"clt_matmul 3-D by 3-D, batch 1 broadcast",
     {K_MATMUL, {0}},
     2,
     {{3, {1, 2, 3}}, {3, {2, 3, 2}}}},
    {"clt_dot", {K_DOT, {0}}, 2, {{1, {4}}, {1, {4}}}},
    {"clt_mv", {K_MV, {0}}, 2, {{2, {3, 4}}, {1, {4}}}},
    {"clt_outer", {K_OUTER, {0}}, 2, {{1, {3}}, {1, {2}}}},
    {"clt_tril(0) of a batch", {K_TRIL, {0}}, 1, {{3, {2, 3, 4}}}},
    {"clt_triu(1)", {K_TRIU, {1}}, 1, {{2, {3, 4}}}},
    {"clt_tril(-1)", {K_TRIL, {-1}}, 1, {{2, {4, 3}}}},
    {"clt_diag(1) of a vector", {K_DIAG, {1}}, 1, {{1, {3}}}},
    {"clt_diag(-1) of a matrix", {K_DIAG, {-1}}, 1, {{2, {4, 3}}}},
    {"clt_diagonal(1, 0, 2)", {K_DIAGONAL, {1, 0, 2}}, 1, {{3, {2, 3, 4}}}},
    {"clt_diagonal(-1, -1, -2)", {K_DIAGONAL, {-1, -1, -2}}, 1, {{2, {3, 4}}}},
    {"clt_trace", {K_TRACE, {0}}, 1, {{2, {3, 4}}}},
    {"clt_addmm", {K_ADDMM, {5, 20}}, 3, {{2, {2, 4}}, {2, {2, 3}}, {2, {3, 4}}}},
    {"clt_addmm, c a broadcast row", {K_ADDMM, {-10, 10}}, 3, {{1, {4}}, {2, {2, 3}}, {2, {3, 4}}}},
    {"clt_linear", {K_LINEAR, {0}}, 3, {{2, {4, 3}}, {2, {2, 3}}, {1, {2}}}},
    {"clt_linear 3-D", {K_LINEAR, {0}}, 3, {{3, {2, 2, 3}}, {2, {2, 3}}, {1, {2}}}},
    {"clt_linear without bias", {K_LINEAR_NOBIAS, {0}}, 2, {{2, {4, 3}}, {2, {2, 3}}}},
    {"clt_narrow", {K_NARROW, {1, 1, 2}}, 1, {{2, {2, 4}}}},
    {"clt_select", {K_SELECT, {-1, 2}}, 1, {{2, {2, 4}}}},
    {"clt_slice", {K_SLICE, {1, 1, 5, 2}}, 1, {{2, {2, 5}}}},
    {"clt_permute", {K_PERMUTE, {0}}, 1, {{3, {2, 3, 4}}}},
    {"clt_transpose", {K_TRANSPOSE, {0, -1}}, 1, {{3, {2, 3, 4}}}},
    {"clt_expand", {K_EXPAND, {0}}, 1, {{2, {3, 1}}}},
    {"clt_unsqueeze", {K_UNSQUEEZE, {1}}, 1, {{2, {2, 3}}}},
    {"clt_squeeze", {K_SQUEEZE, {1}}, 1, {{3, {2, 1, 3}}}},
    {"clt_squeeze of a dimension > 1", {K_SQUEEZE, {0}}, 1, {{2, {2, 3}}}},
    {"clt_view", {K_VIEW, {0}}, 1, {{2, {2, 3}}}},
    {"clt_reshape of a transposed view", {K_RESHAPE_T, {0}}, 1, {{2, {2, 3}}}},
    {"clt_contiguous of a transposed view", {K_CONTIGUOUS_T, {0}}, 1, {{2, {2, 3}}}},
    {"clt_clone", {K_CLONE, {0}}, 1, {{2, {2, 3}}}},
    {"clt_cast", {K_CAST, {0}}, 1, {{2, {2, 3}}}},
    {"clt_softmax(1)", {K_SOFTMAX, {1}}, 1, {{2, {3, 4}}}},
    {"clt_softmax(0)", {K_SOFTMAX, {0}}, 1, {{3, {3, 2, 2}}}},
    {"clt_softmax(-1) of a 1-D tensor", {K_SOFTMAX, {-1}}, 1, {{1, {5}}}},
    {"clt_log_softmax(-1)", {K_LOG_SOFTMAX, {-1}}, 1, {{2, {3, 4}}}},
    {"clt_log_softmax(1)", {K_LOG_SOFTMAX, {1}}, 1, {{3, {2, 3, 2}}}},
    {"clt_logsumexp(1)", {K_LOGSUMEXP, {1, 0}}, 1, {{2, {3, 4}}}},
    {"clt_logsumexp(-2, keepdim)", {K_LOGSUMEXP, {-2, 1}}, 1, {{3, {2, 3, 2}}}},
    {"clt_mse_loss", {K_MSE, {0}}, 2, {{2, {2, 3}}, {2, {2, 3}}}},
    {"clt_cross_entropy", {K_CROSS_ENTROPY, {0}}, 1, {{2, {4, 3}}}},
    {"clt_max", {K_MAX, {0}}, 1, {{2, {3, 4}}}},
    {"clt_min", {K_MIN, {0}}, 1, {{2, {3, 4}}}},
    {"clt_max_dim(1)", {K_MAX_DIM, {1, 0}}, 1, {{2, {3, 4}}}},
    {"clt_max_dim(0, keepdim)", {K_MAX_DIM, {0, 1}}, 1, {{3, {3, 2, 2}}}},
    {"clt_min_dim(-1, keepdim)", {K_MIN_DIM, {-1, 1}}, 1, {{2, {3, 4}}}},
    {"clt_min_dim(1)", {K_MIN_DIM, {1, 0}}, 1, {{3, {2, 3, 2}}}},
    {"clt_index_select(0)", {K_INDEX_SELECT, {0, 5}}, 1, {{2, {3, 2}}}},
    {"clt_index_select(1)", {K_INDEX_SELECT, {1, 4}}, 1, {{3, {2, 3, 2}}}},
    {"clt_index_select(-1) of a 1-D tensor", {K_INDEX_SELECT, {-1, 5}}, 1, {{1, {3}}}},
    {"clt_cat(0)", {K_CAT, {0}}, 3, {{2, {1, 3}}, {2, {2, 3}}, {2, {3, 3}}}},
    {"clt_cat(-1)", {K_CAT, {-1}}, 3, {{2, {2, 1}}, {2, {2, 3}}, {2, {2, 2}}}},
    {"clt_cat of 5", {K_CAT5, {1}}, 2, {{2, {2, 2}}, {2, {2, 1}}}},
    {"clt_stack(1)", {K_STACK, {1}}, 2, {{2, {2, 3}}, {2, {2, 3}}}},
    {"clt_stack(-1)", {K_STACK, {-1}}, 2, {{1, {3}}, {1, {3}}}},
};

START_TEST(test_other_gradcheck) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = f64_devices("other_gradcheck", devs);
  for (int d = 0; d < nd; d++)
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
      gradcheck(devs[d], calls[i].what, calls[i].n, calls[i].in, run_call, &calls[i].c, -1, 1);
}
END_TEST

/* ---- the linalg routines that record (lib/solve.c's derivatives) ------------------------------
 */

enum { L_SOLVE, L_TRI, L_INV, L_DET, L_SLOGDET, L_CHOL };

/* a + 4 I (a's last two dimensions square): well conditioned for operands in [-1, 1] */
static clt_status shifted(clt_tensor *a, double by, clt_tensor **out) {
  int64_t n = clt_tensor_shape(a)[clt_tensor_ndim(a) - 1];
  clt_tensor *I = NULL, *J = NULL;
  clt_status s = clt_eye(n, n, CLT_F64, clt_tensor_device(a), &I);
  if (s == CLT_OK && (s = clt_mul_scalar(I, by, &J)) == CLT_OK)
    s = clt_add(a, J, out);
  RELEASE(I, J);
  return s;
}

static clt_status run_linalg(clt_tensor *const *x, const void *arg, clt_tensor **out) {
  const call *c = arg;
  const int64_t *p = c->p;
  clt_tensor *A = NULL, *xt = NULL, *m = NULL;
  clt_status s;
  if (c->kind == L_CHOL) { /* x x^T + 3 I: symmetric positive-definite */
    if ((s = clt_transpose(x[0], -2, -1, &xt)) == CLT_OK &&
        (s = clt_matmul(x[0], xt, &m)) == CLT_OK)
      s = shifted(m, 3, &A);
  } else {
    s = shifted(x[0], 4, &A);
  }
  if (s == CLT_OK)
    switch (c->kind) {
    case L_SOLVE:
      s = clt_linalg_solve(A, x[1], out);
      break;
    case L_TRI:
      s = clt_linalg_solve_triangular(A, x[1], (int)p[0], (int)p[1], (int)p[2], out);
      break;
    case L_INV:
      s = clt_linalg_inv(A, out);
      break;
    case L_DET:
      s = clt_linalg_det(A, out);
      break;
    case L_SLOGDET: { /* logabsdet of A or of -A (p[0]): a negative determinant too */
      clt_tensor *sign = NULL, *N = NULL;
      if (p[0] && (s = clt_neg(A, &N)) != CLT_OK)
        break;
      if ((s = clt_linalg_slogdet(N ? N : A, &sign, out)) == CLT_OK &&
          clt_tensor_requires_grad(sign))
        s = CLT_ERR_INTERNAL; /* sign has no history */
      RELEASE(sign, N);
      break;
    }
    default:
      s = clt_linalg_cholesky(A, (int)p[0], out);
    }
  RELEASE(A, xt, m);
  return s;
}

static const gc_call linalg_calls[] = {
    {"clt_linalg_solve", {L_SOLVE, {0}}, 2, {{2, {3, 3}}, {2, {3, 2}}}},
    {"clt_linalg_solve of a vector", {L_SOLVE, {0}}, 2, {{2, {3, 3}}, {1, {3}}}},
    {"clt_linalg_solve, a batch of A, one B", {L_SOLVE, {0}}, 2, {{3, {2, 3, 3}}, {2, {3, 2}}}},
    {"clt_linalg_solve, one A, a batch of B", {L_SOLVE, {0}}, 2, {{2, {3, 3}}, {3, {2, 3, 1}}}},
    {"clt_linalg_solve, a batch of vectors", {L_SOLVE, {0}}, 2, {{3, {2, 3, 3}}, {2, {2, 3}}}},
    {"clt_linalg_solve_triangular lower left", {L_TRI, {0, 1, 0}}, 2, {{2, {3, 3}}, {2, {3, 2}}}},
    {"clt_linalg_solve_triangular upper left", {L_TRI, {1, 1, 0}}, 2, {{2, {3, 3}}, {2, {3, 2}}}},
    {"clt_linalg_solve_triangular upper right", {L_TRI, {1, 0, 0}}, 2, {{2, {3, 3}}, {2, {2, 3}}}},
    {"clt_linalg_solve_triangular lower right, unit, batched",
     {L_TRI, {0, 0, 1}},
     2,
     {{3, {2, 3, 3}}, {2, {2, 3}}}},
    {"clt_linalg_inv", {L_INV, {0}}, 1, {{2, {3, 3}}}},
    {"clt_linalg_inv batched", {L_INV, {0}}, 1, {{3, {2, 3, 3}}}},
    {"clt_linalg_det", {L_DET, {0}}, 1, {{2, {3, 3}}}},
    {"clt_linalg_det batched", {L_DET, {0}}, 1, {{3, {2, 3, 3}}}},
    {"clt_linalg_slogdet", {L_SLOGDET, {0}}, 1, {{2, {3, 3}}}},
    {"clt_linalg_slogdet of -A (negative det), batched", {L_SLOGDET, {1}}, 1, {{3, {2, 3, 3}}}},
    {"clt_linalg_cholesky", {L_CHOL, {0}}, 1, {{2, {3, 3}}}},
    {"clt_linalg_cholesky upper, batched", {L_CHOL, {1}}, 1, {{3, {2, 3, 3}}}},
};

/* det of a singular matrix: the backward fails naming why (its inverse), not a later step */
static void singular_det_backward(clt_device *dev) {
  double v[4] = {1, 2, 2, 4};
  clt_tensor *A = cu_tensor(v, CLT_F64, 2, (int64_t[]){2, 2}, dev), *d = NULL;
  CU_OK(clt_requires_grad_(A, 1));
  CU_OK(clt_linalg_det(A, &d));
  CU_FAILS(clt_backward(d, NULL), CLT_ERR_LINALG, "clt_backward");
  ck_assert_msg(strstr(clt_last_error(), "singular"), "on %s: %s", cu_dev_name(dev),
                clt_last_error());
  RELEASE(A, d);
}

START_TEST(test_linalg_gradcheck) {
  double one = 1;
  clt_tensor *a = cu_tensor(&one, CLT_F64, 2, (int64_t[]){1, 1}, clt_cpu()), *d = NULL;
  clt_status st = clt_linalg_det(a, &d);
  RELEASE(a, d);
  if (st == CLT_ERR_UNSUPPORTED) {
    cu_skip("test_linalg_gradcheck", "clt was built without LAPACKE");
    return;
  }
  clt_device *devs[CU_MAX_DEVICES];
  int nd = f64_devices("linalg_gradcheck", devs);
  for (int k = 0; k < nd; k++)
    for (size_t i = 0; i < sizeof linalg_calls / sizeof linalg_calls[0]; i++)
      gradcheck(devs[k], linalg_calls[i].what, linalg_calls[i].n, linalg_calls[i].in, run_linalg,
                &linalg_calls[i].c, -1, 1);
  for (int k = 0; k < nd; k++)
    singular_det_backward(devs[k]);
}
END_TEST

/* ---- known values ---------------------------------------------------------------------------- */

static void assert_values(const clt_tensor *t, const double *want, int64_t n, const char *what,
                          clt_device *dev) {
  ck_assert_msg(t, "%s on %s: no gradient", what, cu_dev_name(dev));
  ck_assert_int_eq(clt_tensor_numel(t), n);
  double *got = cu_read_double(t);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 * (1 + fabs(want[i])),
                  "%s on %s: [%lld] is %g, expected %g", what, cu_dev_name(dev), (long long)i,
                  got[i], want[i]);
  free(got);
}

START_TEST(test_known_values) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    clt_device *dev = devs[d];
    /* d/dx sum(x^2 + 3x) = 2x + 3, in f32 */
    clt_tensor *x = cu_tensor((float[]){1, 2, 3}, CLT_F32, 1, (int64_t[]){3}, dev);
    clt_tensor *x2, *x3, *y, *s;
    CU_OK(clt_requires_grad_(x, 1));
    CU_OK(clt_mul(x, x, &x2));
    CU_OK(clt_mul_scalar(x, 3, &x3));
    CU_OK(clt_add(x2, x3, &y));
    CU_OK(clt_sum(y, &s));
    CU_OK(clt_backward(s, NULL));
    assert_values(clt_tensor_grad(x), (double[]){5, 7, 9}, 3, "sum(x^2 + 3x)", dev);
    ck_assert_int_eq(clt_tensor_dtype(clt_tensor_grad(x)), CLT_F32);
    ck_assert_ptr_eq(clt_tensor_device(clt_tensor_grad(x)), dev);
    ck_assert_ptr_null(clt_tensor_grad(y)); /* not a leaf */
    RELEASE(x, x2, x3, y, s);

    /* sum(A @ B): dA = 1 B^T, dB = A^T 1 */
    clt_tensor *a = cu_tensor((float[]){1, 2, 3, 4}, CLT_F32, 2, (int64_t[]){2, 2}, dev);
    clt_tensor *b = cu_tensor((float[]){5, 6, 7, 8}, CLT_F32, 2, (int64_t[]){2, 2}, dev), *m;
    CU_OK(clt_requires_grad_(a, 1));
    CU_OK(clt_requires_grad_(b, 1));
    CU_OK(clt_matmul(a, b, &m));
    CU_OK(clt_sum(m, &s));
    CU_OK(clt_backward(s, NULL));
    assert_values(clt_tensor_grad(a), (double[]){11, 15, 11, 15}, 4, "sum(A @ B) / dA", dev);
    assert_values(clt_tensor_grad(b), (double[]){4, 4, 6, 6}, 4, "sum(A @ B) / dB", dev);
    RELEASE(a, b, m, s);

    /* broadcasting: a [2, 3] + b [3] * c [2, 1]; d/db sums over rows, d/dc over columns */
    a = cu_tensor((float[]){1, 2, 3, 4, 5, 6}, CLT_F32, 2, (int64_t[]){2, 3}, dev);
    b = cu_tensor((float[]){1, 2, 3}, CLT_F32, 1, (int64_t[]){3}, dev);
    clt_tensor *c = cu_tensor((float[]){2, 5}, CLT_F32, 2, (int64_t[]){2, 1}, dev), *bc, *r;
    CU_OK(clt_requires_grad_(a, 1));
    CU_OK(clt_requires_grad_(b, 1));
    CU_OK(clt_requires_grad_(c, 1));
    CU_OK(clt_mul(b, c, &bc));
    CU_OK(clt_add(a, bc, &r));
    CU_OK(clt_sum(r, &s));
    CU_OK(clt_backward(s, NULL));
    assert_values(clt_tensor_grad(a), (double[]){1, 1, 1, 1, 1, 1}, 6, "broadcast a", dev);
    assert_values(clt_tensor_grad(b), (double[]){7, 7, 7}, 3, "broadcast b", dev);
    assert_values(clt_tensor_grad(c), (double[]){6, 6}, 2, "broadcast c", dev);
    RELEASE(a, b, c, bc, r, s);

    /* a cast from f32 to f64 and a mean: the gradient comes back as f32 */
    x = cu_tensor((float[]){1, -2, 4, 8}, CLT_F32, 1, (int64_t[]){4}, dev);
    clt_tensor *x64, *i32;
    CU_OK(clt_requires_grad_(x, 1));
    CU_OK(clt_cast(x, CLT_F64, &x64));
    CU_OK(clt_mul(x64, x64, &x2));
    CU_OK(clt_mean(x2, &s));
    CU_OK(clt_backward(s, NULL));
    assert_values(clt_tensor_grad(x), (double[]){0.5, -1, 2, 4}, 4, "mean(cast(x)^2)", dev);
    ck_assert_int_eq(clt_tensor_dtype(clt_tensor_grad(x)), CLT_F32);
    CU_OK(clt_cast(x, CLT_I32, &i32)); /* to an integer dtype: no history */
    ck_assert(!clt_tensor_requires_grad(i32));
    RELEASE(x, x64, x2, s, i32);
  }
}
END_TEST

/* ---- accumulation, retain, the graph's freeing ------------------------------------------------
 */

START_TEST(test_accumulate_and_free) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    clt_device *dev = devs[d];
    clt_tensor *x = cu_tensor((float[]){1, 2, 3}, CLT_F32, 1, (int64_t[]){3}, dev), *y, *z, *s;
    CU_OK(clt_requires_grad_(x, 1));
    CU_OK(clt_mul_scalar(x, 2, &y));
    CU_OK(clt_retain_grad(y));
    CU_OK(clt_mul(y, y, &z)); /* z = 4 x^2: dz/dx = 8x, dz/dy = 2y */
    CU_OK(clt_sum(z, &s));
    CU_OK(clt_backward_retain(s, NULL));
    assert_values(clt_tensor_grad(x), (double[]){8, 16, 24}, 3, "first backward", dev);
    assert_values(clt_tensor_grad(y), (double[]){4, 8, 12}, 3, "retained grad", dev);
    CU_OK(clt_backward(s, NULL)); /* accumulates, then frees the graph */
    assert_values(clt_tensor_grad(x), (double[]){16, 32, 48}, 3, "second backward", dev);
    CU_FAILS(clt_backward(s, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_backward");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "freed"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_backward_retain"));
    assert_values(clt_tensor_grad(x), (double[]){16, 32, 48}, 3, "after the refusal", dev);
    CU_OK(clt_zero_grad(x));
    ck_assert_ptr_null(clt_tensor_grad(x));
    RELEASE(y, z, s);
    /* a new graph from the same leaf starts afresh */
    CU_OK(clt_mul_scalar(x, 5, &y));
    CU_OK(clt_sum(y, &s));
    CU_OK(clt_backward(s, NULL));
    assert_values(clt_tensor_grad(x), (double[]){5, 5, 5}, 3, "after zero_grad", dev);
    /* a leaf as root: its own gradient */
    clt_tensor *g = cu_tensor((float[]){1, 2, 3}, CLT_F32, 1, (int64_t[]){3}, dev);
    CU_OK(clt_backward(x, g));
    assert_values(clt_tensor_grad(x), (double[]){6, 7, 8}, 3, "a leaf as root", dev);
    RELEASE(x, y, s, g);
  }
}
END_TEST

/* A graph deeper than the stack could hold in recursive calls: backward and the release of the
 * graph go one node after another. */
START_TEST(test_deep_graph) {
  clt_tensor *x = cu_tensor((float[]){1, 2}, CLT_F32, 1, (int64_t[]){2}, clt_cpu()), *t, *u, *s;
  CU_OK(clt_requires_grad_(x, 1));
  t = clt_tensor_retain(x);
  for (int i = 0; i < 100000; i++) {
    CU_OK(clt_mul_scalar(t, 1.0, &u));
    clt_tensor_release(t);
    t = u;
  }
  CU_OK(clt_sum(t, &s));
  RELEASE(t);
  CU_OK(clt_backward_retain(s, NULL));
  assert_values(clt_tensor_grad(x), (double[]){1, 1}, 2, "a deep graph", clt_cpu());
  RELEASE(s, x); /* the whole graph goes here */
}
END_TEST

/* ---- guards -----------------------------------------------------------------------------------
 */

START_TEST(test_guards) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    clt_device *dev = devs[d];
    clt_tensor *x = cu_tensor((float[]){1, 2, 3}, CLT_F32, 1, (int64_t[]){3}, dev);
    clt_tensor *c = cu_tensor((float[]){4, 5, 6}, CLT_F32, 1, (int64_t[]){3}, dev), *y, *s;
    CU_OK(clt_requires_grad_(x, 1));
    /* in place on a leaf that requires grad: refused while grad mode is on */
    CU_FAILS(clt_add_(x, c), CLT_ERR_INVALID_ARGUMENT, "clt_add_");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "leaf"));
    CU_FAILS(clt_fill_(x, 1), CLT_ERR_INVALID_ARGUMENT, "clt_fill_");
    CU_FAILS(clt_copy(x, c), CLT_ERR_INVALID_ARGUMENT, "clt_copy");
    CU_FAILS(clt_add_(c, x), CLT_ERR_INVALID_ARGUMENT, "clt_add_"); /* not recorded */
    assert_values(x, (double[]){1, 2, 3}, 3, "x after the refusals", dev);
    /* with grad mode off: allowed (an optimizer's step) */
    ck_assert_int_eq(clt_set_grad_enabled(0), 1);
    CU_OK(clt_add_(x, c));
    CU_OK(clt_mul_scalar(x, 2, &y));
    ck_assert(!clt_tensor_requires_grad(y)); /* nothing records */
    CU_FAILS(clt_backward(y, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_backward");
    clt_tensor_release(y);
    ck_assert_int_eq(clt_set_grad_enabled(1), 0);
    /* in place on a tensor with history */
    CU_OK(clt_mul_scalar(x, 2, &y));
    CU_FAILS(clt_add_(y, c), CLT_ERR_INVALID_ARGUMENT, "clt_add_");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "history"));
    RELEASE(y);
    /* the version counter: c saved by clt_mul, written since */
    CU_OK(clt_mul(x, c, &y));
    CU_OK(clt_sum(y, &s));
    CU_OK(clt_fill_(c, 2));
    CU_FAILS(clt_backward(s, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_backward");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_mul"));
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "modified in place"));
    ck_assert_ptr_null(clt_tensor_grad(x)); /* nothing was accumulated */
    RELEASE(y, s);
    /* an operation that saves no values (add) does not mind */
    CU_OK(clt_add(x, c, &y));
    CU_OK(clt_sum(y, &s));
    CU_OK(clt_fill_(c, 3));
    CU_OK(clt_backward(s, NULL));
    assert_values(clt_tensor_grad(x), (double[]){1, 1, 1}, 3, "add after a write", dev);
    RELEASE(y, s);
    CU_OK(clt_zero_grad(x));
    /* exp, tanh and sigmoid keep their results (as PyTorch): a write into the result fails the
     * backward, naming the result; a write into the operand does not */
    clt_tensor *e, *t;
    CU_OK(clt_exp(x, &e));
    CU_OK(clt_tanh(x, &t));
    CU_OK(clt_add(e, t, &y));
    CU_OK(clt_sum(y, &s));
    ck_assert_int_eq(clt_set_grad_enabled(0), 1);
    CU_OK(clt_fill_(x, 0)); /* x: 0, but the gradient is of the values at the call */
    ck_assert_int_eq(clt_set_grad_enabled(1), 0);
    CU_OK(clt_backward_retain(s, NULL));
    float *g = cu_read(clt_tensor_grad(x));
    float *ev = cu_read(e), *tv = cu_read(t);
    for (int i = 0; i < 3; i++) {
      double w = (double)ev[i] + (1.0 - (double)tv[i] * tv[i]);
      ck_assert_msg(fabs(g[i] - w) <= 1e-5 * fabs(w), "%s: d(exp + tanh)[%d] = %g, want %g",
                    cu_dev_name(dev), i, g[i], w);
    }
    free(g);
    free(ev);
    free(tv);
    ck_assert_int_eq(clt_set_grad_enabled(0), 1);
    CU_OK(clt_fill_(t, 0.5)); /* the saved result of clt_tanh */
    ck_assert_int_eq(clt_set_grad_enabled(1), 0);
    CU_FAILS(clt_backward(s, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_backward");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "the result of clt_tanh"));
    RELEASE(x, c, y, s, e, t);
  }
}
END_TEST

START_TEST(test_devices) {
  if (!cu_need_cl("autograd_devices", 1))
    return;
  clt_device *dev = clt_device_at(0);
  clt_tensor *x = cu_tensor((float[]){1, 2}, CLT_F32, 1, (int64_t[]){2}, dev), *y;
  clt_tensor *g = cu_tensor((float[]){1, 1}, CLT_F32, 1, (int64_t[]){2}, clt_cpu());
  CU_OK(clt_requires_grad_(x, 1));
  CU_OK(clt_exp(x, &y));
  CU_FAILS(clt_backward(y, g), CLT_ERR_DEVICE_MISMATCH, "clt_backward");
  ck_assert_ptr_nonnull(strstr(clt_last_error(), clt_device_name(dev)));
  ck_assert_ptr_nonnull(strstr(clt_last_error(), "cpu"));
  ck_assert_ptr_null(clt_tensor_grad(x));
  RELEASE(x, y, g);
}
END_TEST

/* clt_params_to keeps a leaf that requires grad one, and moves its gradient */
START_TEST(test_params_to) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    clt_params *p;
    clt_tensor *w = cu_tensor((float[]){1, 2}, CLT_F32, 1, (int64_t[]){2}, clt_cpu()), *y, *s;
    CU_OK(clt_requires_grad_(w, 1));
    CU_OK(clt_mul(w, w, &y));
    CU_OK(clt_sum(y, &s));
    CU_OK(clt_backward(s, NULL));
    CU_OK(clt_params_create(&p));
    CU_OK(clt_params_add(p, "w", w));
    CU_OK(clt_params_to(p, devs[d]));
    clt_tensor *m = clt_params_get(p, "w");
    ck_assert(clt_tensor_requires_grad(m));
    ck_assert_ptr_eq(clt_tensor_device(clt_tensor_grad(m)), devs[d]);
    assert_values(clt_tensor_grad(m), (double[]){2, 4}, 2, "the moved gradient", devs[d]);
    RELEASE(w, y, s);
    /* and it trains there: a new graph on devs[d] accumulates into the moved gradient */
    CU_OK(clt_mul_scalar(m, 3, &y));
    CU_OK(clt_sum(y, &s));
    CU_OK(clt_backward(s, NULL));
    assert_values(clt_tensor_grad(m), (double[]){5, 7}, 2, "accumulated after the move", devs[d]);
    RELEASE(y, s);
    clt_params_release(p);
  }
}
END_TEST

/* ---- lazy and eager give the same gradients ---------------------------------------------------
 */

static double *lazy_grads(clt_device *dev, int lazy) {
  int was = clt_set_lazy(lazy);
  float v[12];
  for (int i = 0; i < 12; i++)
    v[i] = 0.1f * (float)(i + 1);
  clt_tensor *x = cu_tensor(v, CLT_F32, 2, (int64_t[]){3, 4}, dev), *t[8], *s;
  CU_OK(clt_requires_grad_(x, 1));
  CU_OK(clt_mul_scalar(x, 1.5, &t[0]));
  CU_OK(clt_exp(t[0], &t[1]));
  CU_OK(clt_tanh(x, &t[2]));
  CU_OK(clt_mul(t[1], t[2], &t[3]));
  CU_OK(clt_sigmoid(t[3], &t[4]));
  CU_OK(clt_transpose(t[4], 0, 1, &t[5]));
  CU_OK(clt_sqrt(t[5], &t[6]));
  CU_OK(clt_sum_dim(t[6], 0, 0, &t[7]));
  CU_OK(clt_sum(t[7], &s));
  CU_OK(clt_backward(s, NULL));
  double *g = cu_read_double(clt_tensor_grad(x));
  release_all(t, 8);
  RELEASE(x, s);
  clt_set_lazy(was);
  return g;
}

START_TEST(test_lazy_eager) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    double *e = lazy_grads(devs[d], 0), *l = lazy_grads(devs[d], 1);
    for (int i = 0; i < 12; i++)
      ck_assert_msg(e[i] == l[i], "on %s, [%d]: eager %.9g, lazy %.9g", cu_dev_name(devs[d]), i,
                    e[i], l[i]);
    free(e);
    free(l);
  }
}
END_TEST

/* ---- detach and bad input ---------------------------------------------------------------------
 */

START_TEST(test_detach_and_bad_input) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    clt_device *dev = devs[d];
    clt_tensor *x = cu_tensor((float[]){1, 2, 3, 4}, CLT_F32, 1, (int64_t[]){4}, dev), *dx, *y;
    CU_OK(clt_requires_grad_(x, 1));
    CU_OK(clt_detach(x, &dx));
    ck_assert(!clt_tensor_requires_grad(dx));
    CU_OK(clt_fill_(dx, 7)); /* shares x's memory */
    assert_values(x, (double[]){7, 7, 7, 7}, 4, "x after writing its detached alias", dev);
    CU_OK(clt_mul(dx, dx, &y));
    ck_assert(!clt_tensor_requires_grad(y));
    RELEASE(dx, y);

    clt_tensor *i = cu_tensor((int32_t[]){1, 2}, CLT_I32, 1, (int64_t[]){2}, dev),
               *out = CU_SENTINEL;
    CU_FAILS(clt_requires_grad_(i, 1), CLT_ERR_DTYPE, "clt_requires_grad_");
    CU_OK(clt_requires_grad_(i, 0));
    CU_FAILS(clt_requires_grad_(NULL, 1), CLT_ERR_INVALID_ARGUMENT, "clt_requires_grad_");
    ck_assert(!clt_tensor_requires_grad(NULL));
    ck_assert_ptr_null(clt_tensor_grad(NULL));
    CU_FAILS(clt_detach(x, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_detach");
    CU_FAILS(clt_detach(NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_detach");
    ck_assert_ptr_eq(out, CU_SENTINEL);
    CU_FAILS(clt_zero_grad(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_zero_grad");
    CU_FAILS(clt_retain_grad(i), CLT_ERR_INVALID_ARGUMENT, "clt_retain_grad");
    CU_FAILS(clt_backward(NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_backward");
    CU_FAILS(clt_backward(i, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_backward");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "does not require grad"));

    CU_OK(clt_exp(x, &y));
    CU_FAILS(clt_requires_grad_(y, 0), CLT_ERR_INVALID_ARGUMENT, "clt_requires_grad_");
    CU_OK(clt_requires_grad_(y, 1));
    CU_FAILS(clt_backward(y, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_backward"); /* 4 elements */
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "one element"));
    clt_tensor *g3 = cu_tensor((float[]){1, 1, 1}, CLT_F32, 1, (int64_t[]){3}, dev);
    clt_tensor *g64 = cu_tensor((double[]){1, 1, 1, 1}, CLT_F64, 1, (int64_t[]){4}, dev);
    CU_FAILS(clt_backward(y, g3), CLT_ERR_SHAPE_MISMATCH, "clt_backward");
    CU_FAILS(clt_backward_retain(y, g64), CLT_ERR_DTYPE, "clt_backward_retain");
    ck_assert_ptr_null(clt_tensor_grad(x));
    RELEASE(x, i, y, g3, g64);
  }
}
END_TEST

/* Ties: whole-tensor max and min split the gradient evenly among the tied extremes; along a dim,
 * it goes to the one index argmax_dim picks (the first). */
START_TEST(test_extremes_ties) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    clt_device *dev = devs[d];
    clt_tensor *x = cu_tensor((float[]){3, 1, 3, 2, 1, 3}, CLT_F32, 2, (int64_t[]){2, 3}, dev);
    clt_tensor *r, *idx;
    CU_OK(clt_requires_grad_(x, 1));
    CU_OK(clt_max(x, &r));
    ck_assert(clt_tensor_requires_grad(r));
    CU_OK(clt_backward(r, NULL));
    assert_values(clt_tensor_grad(x), (double[]){1. / 3, 0, 1. / 3, 0, 0, 1. / 3}, 6,
                  "max with three tied", dev);
    clt_tensor_release(r);
    CU_OK(clt_zero_grad(x));
    CU_OK(clt_min(x, &r));
    CU_OK(clt_backward(r, NULL));
    assert_values(clt_tensor_grad(x), (double[]){0, 0.5, 0, 0, 0.5, 0}, 6, "min with two tied",
                  dev);
    clt_tensor_release(r);
    CU_OK(clt_zero_grad(x));
    clt_tensor *w = cu_tensor((float[]){10, 20}, CLT_F32, 1, (int64_t[]){2}, dev);
    CU_OK(clt_max_dim(x, 1, 0, &r));
    CU_OK(clt_argmax_dim(x, 1, 0, &idx));
    assert_values(idx, (double[]){0, 2}, 2, "argmax_dim's picks", dev);
    CU_OK(clt_backward(r, w));
    assert_values(clt_tensor_grad(x), (double[]){10, 0, 0, 0, 0, 20}, 6, "max_dim with ties", dev);
    RELEASE(r, idx);
    CU_OK(clt_zero_grad(x));
    CU_OK(clt_min_dim(x, 1, 0, &r));
    CU_OK(clt_backward(r, w));
    assert_values(clt_tensor_grad(x), (double[]){0, 10, 0, 0, 20, 0}, 6, "min_dim", dev);
    RELEASE(r, w);
    /* index_select with a repeated index, and cat of the same tensor twice: they add up */
    CU_OK(clt_zero_grad(x));
    clt_tensor *i = cu_tensor((int64_t[]){2, 2, 0}, CLT_I64, 1, (int64_t[]){3}, dev), *s;
    CU_OK(clt_index_select(x, 1, i, &r));
    CU_OK(clt_sum(r, &s));
    CU_OK(clt_backward(s, NULL));
    assert_values(clt_tensor_grad(x), (double[]){1, 0, 2, 1, 0, 2}, 6, "index_select repeated",
                  dev);
    RELEASE(r, s, i);
    CU_OK(clt_zero_grad(x));
    CU_OK(clt_cat(2, (clt_tensor *[]){x, x}, 0, &r));
    CU_OK(clt_sum(r, &s));
    CU_OK(clt_backward(s, NULL));
    assert_values(clt_tensor_grad(x), (double[]){2, 2, 2, 2, 2, 2}, 6, "cat(x, x)", dev);
    RELEASE(r, s);
    /* promoted dtypes: an i32 operand (no gradient) and an f32 one in an f64 stack; the f32
     * operand's gradient comes back as f32 */
    if (cu_dtype_ok("extremes_ties", dev, CLT_F64)) {
      CU_OK(clt_zero_grad(x));
      clt_tensor *k = cu_tensor((int32_t[]){1, 2, 3, 4, 5, 6}, CLT_I32, 2, (int64_t[]){2, 3}, dev);
      clt_tensor *x64 = cu_tensor((double[]){1, 1, 1, 1, 1, 1}, CLT_F64, 2, (int64_t[]){2, 3}, dev),
                 *w6;
      CU_OK(clt_stack(3, (clt_tensor *[]){k, x, x64}, 0, &r));
      ck_assert_int_eq(clt_tensor_dtype(r), CLT_F64);
      CU_OK(clt_mul(r, r, &w6)); /* d/dx = 2x */
      CU_OK(clt_sum(w6, &s));
      CU_OK(clt_backward(s, NULL));
      ck_assert_int_eq(clt_tensor_dtype(clt_tensor_grad(x)), CLT_F32);
      assert_values(clt_tensor_grad(x), (double[]){6, 2, 6, 4, 2, 6}, 6, "stack of mixed dtypes",
                    dev);
      RELEASE(k, x64, r, w6, s);
    }
    RELEASE(x);
  }
}
END_TEST

/* ---- losses and layers (lib/loss.c) ---------------------------------------------------------- */

/* softmax of each row of x (rows of n), in double, the textbook way (values small enough) */
static void ref_softmax(const double *x, int rows, int n, double *y, double *lse) {
  for (int r = 0; r < rows; r++) {
    double sum = 0;
    for (int j = 0; j < n; j++)
      sum += exp(x[r * n + j]);
    for (int j = 0; j < n; j++)
      y[r * n + j] = exp(x[r * n + j]) / sum;
    lse[r] = log(sum);
  }
}

static void assert_close_to(const clt_tensor *t, const double *want, int64_t n, double tol,
                            const char *what, clt_device *dev) {
  ck_assert_msg(t, "%s on %s: no tensor", what, cu_dev_name(dev));
  ck_assert_int_eq(clt_tensor_numel(t), n);
  double *got = cu_read_double(t);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(isfinite(got[i]) && fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])),
                  "%s on %s: [%lld] is %.17g, expected %.17g", what, cu_dev_name(dev), (long long)i,
                  got[i], want[i]);
  free(got);
}

/* Values against numbers computed here, in f64 (tight) and f32 (to f32's precision), with the
 * gradients of cross_entropy ((softmax - onehot) / N) and of a weighted softmax. */
START_TEST(test_loss_values) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const double xv[6] = {1, 2, 3, -1, 0.5, 4};
  const int64_t tv[2] = {2, 0};
  double y[6], lse[2], logy[6], lse0[3], xent, gx[6];
  ref_softmax(xv, 2, 3, y, lse);
  for (int i = 0; i < 6; i++)
    logy[i] = xv[i] - lse[i / 3];
  for (int j = 0; j < 3; j++)
    lse0[j] = log(exp(xv[j]) + exp(xv[3 + j]));
  xent = -(logy[0 * 3 + 2] + logy[1 * 3 + 0]) / 2;
  for (int i = 0; i < 6; i++)
    gx[i] = (y[i] - (i % 3 == tv[i / 3] ? 1 : 0)) / 2;
  for (int d = 0; d < nd; d++) {
    clt_device *dev = devs[d];
    for (int k = 0; k < 2; k++) {
      clt_dtype dt = k ? CLT_F64 : CLT_F32;
      if (!cu_dtype_ok("loss_values", dev, dt))
        continue;
      double tol = dt == CLT_F64 ? 1e-13 : 3e-6;
      float xf[6];
      for (int i = 0; i < 6; i++)
        xf[i] = (float)xv[i];
      clt_tensor *x = cu_tensor(dt == CLT_F64 ? (const void *)xv : (const void *)xf, dt, 2,
                                (int64_t[]){2, 3}, dev);
      clt_tensor *t = cu_tensor(tv, CLT_I64, 1, (int64_t[]){2}, dev), *r;
      CU_OK(clt_softmax(x, 1, &r));
      cu_assert_meta(r, dt, dev, 2, (int64_t[]){2, 3}, "clt_softmax");
      assert_close_to(r, y, 6, tol, "clt_softmax", dev);
      clt_tensor_release(r);
      CU_OK(clt_log_softmax(x, -1, &r));
      assert_close_to(r, logy, 6, tol, "clt_log_softmax", dev);
      clt_tensor_release(r);
      CU_OK(clt_logsumexp(x, 1, 0, &r));
      cu_assert_meta(r, dt, dev, 1, (int64_t[]){2}, "clt_logsumexp");
      assert_close_to(r, lse, 2, tol, "clt_logsumexp", dev);
      clt_tensor_release(r);
      CU_OK(clt_logsumexp(x, -2, 1, &r));
      cu_assert_meta(r, dt, dev, 2, (int64_t[]){1, 3}, "clt_logsumexp keepdim");
      assert_close_to(r, lse0, 3, tol, "clt_logsumexp(0, keepdim)", dev);
      clt_tensor_release(r);
      /* mse: (1 + 0 + 4 + 9 + 0.25 + 1) / 6 */
      clt_tensor *tg = cu_tensor((double[]){0, 2, 5, 2, 0, 3}, CLT_F64, 2, (int64_t[]){2, 3}, dev),
                 *tgc;
      CU_OK(clt_cast(tg, dt, &tgc));
      CU_OK(clt_mse_loss(x, tgc, &r));
      cu_assert_meta(r, dt, dev, 0, NULL, "clt_mse_loss");
      assert_close_to(r, (double[]){15.25 / 6}, 1, tol, "clt_mse_loss", dev);
      RELEASE(r, tg, tgc);
      /* cross_entropy and its gradient */
      CU_OK(clt_requires_grad_(x, 1));
      CU_OK(clt_cross_entropy(x, t, &r));
      cu_assert_meta(r, dt, dev, 0, NULL, "clt_cross_entropy");
      ck_assert(clt_tensor_requires_grad(r));
      assert_close_to(r, &xent, 1, tol, "clt_cross_entropy", dev);
      CU_OK(clt_backward(r, NULL));
      assert_close_to(clt_tensor_grad(x), gx, 6, tol, "d clt_cross_entropy", dev);
      clt_tensor_release(r);
      /* sum(softmax(x) * w): y (w - sum(w y)) */
      const double wv[6] = {0.5, -1, 2, 1, 3, -0.25};
      double gs[6];
      for (int row = 0; row < 2; row++) {
        double dot = 0;
        for (int j = 0; j < 3; j++)
          dot += wv[row * 3 + j] * y[row * 3 + j];
        for (int j = 0; j < 3; j++)
          gs[row * 3 + j] = y[row * 3 + j] * (wv[row * 3 + j] - dot);
      }
      clt_tensor *w64 = cu_tensor(wv, CLT_F64, 2, (int64_t[]){2, 3}, dev), *w, *sm;
      CU_OK(clt_cast(w64, dt, &w));
      CU_OK(clt_zero_grad(x));
      CU_OK(clt_softmax(x, 1, &sm));
      CU_OK(clt_backward(sm, w));
      assert_close_to(clt_tensor_grad(x), gs, 6, tol, "d clt_softmax", dev);
      RELEASE(x, t, w64, w, sm);
    }
  }
}
END_TEST

/* Inputs of 1000 in f32: no overflow, no NaN, in the values or the gradients; a row of -inf. */
START_TEST(test_loss_stability) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const double e1 = exp(-1.0);
  for (int d = 0; d < nd; d++) {
    clt_device *dev = devs[d];
    clt_tensor *x =
        cu_tensor((float[]){1000, 1000, 999, -1000, 0, 1000}, CLT_F32, 2, (int64_t[]){2, 3}, dev);
    clt_tensor *t = cu_tensor((int64_t[]){2, 1}, CLT_I64, 1, (int64_t[]){2}, dev), *r;
    CU_OK(clt_requires_grad_(x, 1));
    CU_OK(clt_softmax(x, 1, &r));
    double s0 = 1 / (2 + e1);
    assert_close_to(r, (double[]){s0, s0, e1 * s0, 0, 0, 1}, 6, 1e-6, "softmax of 1000s", dev);
    clt_tensor_release(r);
    CU_OK(clt_log_softmax(x, 1, &r));
    double l0 = -log(2 + e1);
    assert_close_to(r, (double[]){l0, l0, l0 - 1, -2000, -1000, 0}, 6, 1e-6, "log_softmax of 1000s",
                    dev);
    clt_tensor_release(r);
    CU_OK(clt_logsumexp(x, 1, 0, &r));
    assert_close_to(r, (double[]){1000 + log(2 + e1), 1000}, 2, 1e-6, "logsumexp of 1000s", dev);
    clt_tensor_release(r);
    CU_OK(clt_cross_entropy(x, t, &r)); /* (-(l0 - 1) + 1000) / 2 */
    assert_close_to(r, (double[]){(1 - l0 + 1000) / 2}, 1, 1e-6, "cross_entropy of 1000s", dev);
    CU_OK(clt_backward(r, NULL));
    assert_close_to(clt_tensor_grad(x), (double[]){s0 / 2, s0 / 2, (e1 * s0 - 1) / 2, 0, -0.5, 0.5},
                    6, 1e-6, "d cross_entropy of 1000s", dev);
    RELEASE(x, t, r);
    /* a row of -inf: logsumexp -inf (no NaN from -inf - -inf) */
    x = cu_tensor((float[]){-INFINITY, -INFINITY, 0, 1}, CLT_F32, 2, (int64_t[]){2, 2}, dev);
    CU_OK(clt_logsumexp(x, 1, 0, &r));
    double *v = cu_read_double(r);
    ck_assert_msg(isinf(v[0]) && v[0] < 0, "logsumexp of -inf on %s: %g", cu_dev_name(dev), v[0]);
    ck_assert_msg(fabs(v[1] - log(1 + exp(1.0))) < 1e-6, "logsumexp(0, 1) on %s: %g",
                  cu_dev_name(dev), v[1]);
    free(v);
    RELEASE(x, r);
    /* empty: an empty softmax; logsumexp along an empty dim is -inf */
    x = cu_tensor((float[]){0}, CLT_F32, 2, (int64_t[]){2, 0}, dev);
    CU_OK(clt_softmax(x, 0, &r));
    cu_assert_meta(r, CLT_F32, dev, 2, (int64_t[]){2, 0}, "empty softmax");
    clt_tensor_release(r);
    CU_OK(clt_logsumexp(x, 1, 0, &r));
    cu_assert_meta(r, CLT_F32, dev, 1, (int64_t[]){2}, "logsumexp along an empty dim");
    v = cu_read_double(r);
    ck_assert_msg(isinf(v[0]) && v[0] < 0 && isinf(v[1]) && v[1] < 0,
                  "logsumexp along an empty dim on %s: %g %g", cu_dev_name(dev), v[0], v[1]);
    free(v);
    RELEASE(x, r);
  }
}
END_TEST

static uint64_t allocated(clt_device *dev) {
  clt_memory_stats st;
  CU_OK(clt_device_synchronize(dev));
  CU_OK(clt_device_memory_stats(dev, &st));
  return st.allocated_bytes;
}

START_TEST(test_loss_bad_input) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    clt_device *dev = devs[d];
    clt_tensor *x = cu_tensor((float[]){1, 2, 3, 4, 5, 6}, CLT_F32, 2, (int64_t[]){2, 3}, dev);
    clt_tensor *xi = cu_tensor((int32_t[]){1, 2, 3, 4, 5, 6}, CLT_I32, 2, (int64_t[]){2, 3}, dev);
    clt_tensor *t = cu_tensor((int64_t[]){0, 5}, CLT_I64, 1, (int64_t[]){2}, dev);
    clt_tensor *tn = cu_tensor((int64_t[]){-1, 0}, CLT_I64, 1, (int64_t[]){2}, dev);
    clt_tensor *t3 = cu_tensor((int64_t[]){0, 1, 2}, CLT_I64, 1, (int64_t[]){3}, dev);
    clt_tensor *ti = cu_tensor((int32_t[]){0, 1}, CLT_I32, 1, (int64_t[]){2}, dev);
    clt_tensor *y = cu_tensor((float[]){1, 2, 3}, CLT_F32, 1, (int64_t[]){3}, dev);
    clt_tensor *out = CU_SENTINEL;
    CU_OK(clt_requires_grad_(x, 1));
    uint64_t before = allocated(dev);
    CU_FAILS(clt_softmax(xi, 1, &out), CLT_ERR_DTYPE, "clt_softmax");
    CU_FAILS(clt_log_softmax(xi, 1, &out), CLT_ERR_DTYPE, "clt_log_softmax");
    CU_FAILS(clt_logsumexp(xi, 1, 0, &out), CLT_ERR_DTYPE, "clt_logsumexp");
    CU_FAILS(clt_softmax(x, 2, &out), CLT_ERR_INVALID_ARGUMENT, "clt_softmax");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "dim 2 is out of range"));
    CU_FAILS(clt_log_softmax(x, -3, &out), CLT_ERR_INVALID_ARGUMENT, "clt_log_softmax");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "-2..1"));
    CU_FAILS(clt_logsumexp(x, 7, 1, &out), CLT_ERR_INVALID_ARGUMENT, "clt_logsumexp");
    CU_FAILS(clt_softmax(NULL, 0, &out), CLT_ERR_INVALID_ARGUMENT, "clt_softmax");
    CU_FAILS(clt_softmax(x, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_softmax");
    CU_FAILS(clt_mse_loss(x, y, &out), CLT_ERR_SHAPE_MISMATCH, "clt_mse_loss");
    ck_assert_ptr_nonnull(strstr(clt_last_error(), "[2, 3]"));
    CU_FAILS(clt_mse_loss(x, xi, &out), CLT_ERR_DTYPE, "clt_mse_loss");
    CU_FAILS(clt_mse_loss(x, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_mse_loss");
    CU_FAILS(clt_cross_entropy(x, t, &out), CLT_ERR_INVALID_ARGUMENT, "clt_cross_entropy");
    ck_assert_msg(strstr(clt_last_error(), "target[1] is 5"), "%s", clt_last_error());
    CU_FAILS(clt_cross_entropy(x, tn, &out), CLT_ERR_INVALID_ARGUMENT, "clt_cross_entropy");
    ck_assert_msg(strstr(clt_last_error(), "target[0] is -1"), "%s", clt_last_error());
    CU_FAILS(clt_cross_entropy(x, ti, &out), CLT_ERR_DTYPE, "clt_cross_entropy");
    CU_FAILS(clt_cross_entropy(xi, tn, &out), CLT_ERR_DTYPE, "clt_cross_entropy");
    CU_FAILS(clt_cross_entropy(x, t3, &out), CLT_ERR_SHAPE_MISMATCH, "clt_cross_entropy");
    CU_FAILS(clt_cross_entropy(y, t3, &out), CLT_ERR_SHAPE_MISMATCH, "clt_cross_entropy");
    CU_FAILS(clt_cross_entropy(x, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_cross_entropy");
    if (dev != clt_cpu()) {
      clt_tensor *hx =
          cu_tensor((float[]){1, 2, 3, 4, 5, 6}, CLT_F32, 2, (int64_t[]){2, 3}, clt_cpu());
      clt_tensor *ht = cu_tensor((int64_t[]){0, 1}, CLT_I64, 1, (int64_t[]){2}, clt_cpu());
      CU_FAILS(clt_cross_entropy(x, ht, &out), CLT_ERR_DEVICE_MISMATCH, "clt_cross_entropy");
      ck_assert_ptr_nonnull(strstr(clt_last_error(), clt_device_name(dev)));
      ck_assert_ptr_nonnull(strstr(clt_last_error(), "cpu"));
      CU_FAILS(clt_mse_loss(hx, x, &out), CLT_ERR_DEVICE_MISMATCH, "clt_mse_loss");
      RELEASE(hx, ht);
    }
    ck_assert_ptr_eq(out, CU_SENTINEL);
    ck_assert_ptr_null(clt_tensor_grad(x));
    ck_assert_msg(allocated(dev) == before,
                  "on %s: %llu bytes allocated before the refusals, %llu after", cu_dev_name(dev),
                  (unsigned long long)before, (unsigned long long)allocated(dev));
    RELEASE(x, xi, t, tn, t3, ti, y);
  }
}
END_TEST

/* The loss of a small classifier and its gradient, lazy and eager: the same bits. */
static double *loss_grads(clt_device *dev, int lazy) {
  int was = clt_set_lazy(lazy);
  float v[12];
  for (int i = 0; i < 12; i++)
    v[i] = 0.3f * (float)(i % 5) - 0.2f * (float)(i % 3);
  clt_tensor *x = cu_tensor(v, CLT_F32, 2, (int64_t[]){4, 3}, dev), *t[6], *u[7];
  clt_tensor *tg = cu_tensor((int64_t[]){1, 0, 2, 2}, CLT_I64, 1, (int64_t[]){4}, dev);
  CU_OK(clt_requires_grad_(x, 1));
  CU_OK(clt_tanh(x, &u[0])); /* tanh(x) through cat, index_select, max_dim and max */
  CU_OK(clt_cat(2, (clt_tensor *[]){u[0], x}, 0, &u[1]));
  CU_OK(clt_index_select(u[1], 0, tg, &u[2]));
  CU_OK(clt_max_dim(u[1], 1, 1, &u[3]));
  CU_OK(clt_max(u[2], &u[4]));
  CU_OK(clt_add(u[3], u[4], &u[5]));
  CU_OK(clt_add(u[1], u[5], &u[6])); /* [8, 3] */
  CU_OK(clt_narrow(u[6], 0, 2, 4, &t[0]));
  CU_OK(clt_cross_entropy(t[0], tg, &t[1]));
  CU_OK(clt_softmax(x, 0, &t[2]));
  CU_OK(clt_mse_loss(t[2], t[0], &t[3]));
  CU_OK(clt_logsumexp(x, 1, 0, &t[4]));
  CU_OK(clt_sum(t[4], &t[5]));
  clt_tensor *a, *b;
  CU_OK(clt_add(t[1], t[3], &a));
  CU_OK(clt_add(a, t[5], &b));
  CU_OK(clt_backward(b, NULL));
  double *g = cu_malloc(sizeof(double) * 13);
  double *gx = cu_read_double(clt_tensor_grad(x));
  memcpy(g, gx, sizeof(double) * 12);
  g[12] = cu_item(b);
  free(gx);
  release_all(t, 6);
  release_all(u, 7);
  RELEASE(x, tg, a, b);
  clt_set_lazy(was);
  return g;
}

START_TEST(test_loss_lazy_eager) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int d = 0; d < nd; d++) {
    double *e = loss_grads(devs[d], 0), *l = loss_grads(devs[d], 1);
    for (int i = 0; i < 13; i++)
      ck_assert_msg(e[i] == l[i] && isfinite(e[i]), "on %s, [%d]: eager %.9g, lazy %.9g",
                    cu_dev_name(devs[d]), i, e[i], l[i]);
    free(e);
    free(l);
  }
}
END_TEST

Suite *autograd_suite(void) {
  Suite *s = suite_create("autograd");
  TCase *tc = cu_tcase("autograd");
  tcase_add_test(tc, test_elementwise_gradcheck);
  tcase_add_test(tc, test_other_gradcheck);
  tcase_add_test(tc, test_linalg_gradcheck);
  tcase_add_test(tc, test_known_values);
  tcase_add_test(tc, test_accumulate_and_free);
  tcase_add_test(tc, test_deep_graph);
  tcase_add_test(tc, test_guards);
  tcase_add_test(tc, test_devices);
  tcase_add_test(tc, test_params_to);
  tcase_add_test(tc, test_lazy_eager);
  tcase_add_test(tc, test_detach_and_bad_input);
  tcase_add_test(tc, test_extremes_ties);
  tcase_add_test(tc, test_loss_values);
  tcase_add_test(tc, test_loss_stability);
  tcase_add_test(tc, test_loss_bad_input);
  tcase_add_test(tc, test_loss_lazy_eager);
  suite_add_tcase(s, tc);
  return s;
}
