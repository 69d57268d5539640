/* SPDX-License-Identifier: MIT */
/* dispatch.c - the rules every operation goes through, in one place: operands on one device
 * (else CLT_ERR_DEVICE_MISMATCH), dtype promotion, broadcasting; then the device's backend. */
#include "backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table of elementwise operations, one entry per row of include/clt_ops.h. */
#define WRAPS_WRAP 1
#define WRAPS_WRAP_INPLACE 1
#define WRAPS_INPLACE 0
#define WRAPS_PLAIN 0
#define WRAPS_COND 0
#define COND_COND 1
#define COND_WRAP 0
#define COND_WRAP_INPLACE 0
#define COND_INPLACE 0
#define COND_PLAIN 0
#define OP_ENTRY(name_, arity_, rule, form, f, i, b, ulps_, doc_)                                  \
  [CLT__OP_##name_] = {.kind = CLT__OP_##name_,                                                    \
                       .name = #name_,                                                             \
                       .fn = "clt_" #name_,                                                        \
                       .arity = arity_,                                                            \
                       .expr = {#f, #i, #b},                                                       \
                       .result = CLT__RESULT_##rule,                                               \
                       .wraps = WRAPS_##form,                                                      \
                       .cond = COND_##form,                                                        \
                       .ulps = ulps_,                                                              \
                       .doc = doc_},
const clt_op clt__ops[CLT__OP_COUNT] = {
    CLT_ELEMENTWISE_OPS(OP_ENTRY)[CLT__OP_cast] = {.kind = CLT__OP_cast,
                                                   .name = "cast",
                                                   .fn = "clt_cast",
                                                   .arity = 1,
                                                   .expr = {"(a)", "(a)", "(a)"},
                                                   .result = CLT__RESULT_GIVEN,
                                                   .doc = "a converted to another dtype"},
};
#undef OP_ENTRY

clt_status clt__device_mismatch(const char *fn, const clt_device *a, const char *where_a,
                                const clt_device *b, const char *where_b) {
  return clt__error(CLT_ERR_DEVICE_MISMATCH, fn,
                    "expected all tensors on the same device, but found %s (%s) and %s (%s); copy "
                    "one with clt_to()",
                    a->name, where_a, b->name, where_b);
}

/* The same-device rule (docs/architecture.md rule 3): argument positions are 1-based. */
static clt_status check_same_device(const char *fn, int n, clt_tensor *const *ts) {
  for (int i = 1; i < n; i++)
    if (ts[i]->storage->dev != ts[0]->storage->dev) {
      char where[32];
      snprintf(where, sizeof where, "argument %d", i + 1);
      return clt__device_mismatch(fn, ts[0]->storage->dev, "argument 1", ts[i]->storage->dev,
                                  where);
    }
  return CLT_OK;
}

static int int_rank(clt_dtype dt) { return dt == CLT_U8 ? 1 : dt == CLT_I32 ? 2 : 3; }
static int float_rank(clt_dtype dt) { return dt == CLT_F64 ? 3 : dt == CLT_F32 ? 2 : 1; }

static clt_dtype promote(clt_dtype a, clt_dtype b) {
  if (a == b)
    return a;
  if (a == CLT_BOOL)
    return b;
  if (b == CLT_BOOL)
    return a;
  if (clt__dtype_is_float(a) && clt__dtype_is_float(b)) {
    if (float_rank(a) == float_rank(b)) /* f16 with bf16: neither holds the other */
      return CLT_F32;
    return float_rank(a) > float_rank(b) ? a : b;
  }
  if (clt__dtype_is_float(a))
    return a;
  if (clt__dtype_is_float(b))
    return b;
  return int_rank(a) >= int_rank(b) ? a : b;
}

/* The result dtype of op over operands whose promoted dtype is `compute`; an error where op has
 * no expression for the dtype it would compute in (clt_ops.h: CLT_NA). */
static clt_status result_dtype(const clt_op *op, clt_dtype compute, clt_dtype given, const char *fn,
                               clt_dtype *out) {
  clt_dtype r = compute;
  switch (op->result) {
  case CLT__RESULT_PROMOTE:
    break;
  case CLT__RESULT_FLOAT:
    if (!clt__dtype_is_float(r))
      r = CLT_F32;
    break;
  case CLT__RESULT_BOOL:
    r = CLT_BOOL;
    break;
  case CLT__RESULT_GIVEN:
    r = given;
    break;
  }
  clt_dtype cd = op->result == CLT__RESULT_PROMOTE || op->result == CLT__RESULT_FLOAT ? r : compute;
  if (!clt__op_expr(op, cd))
    return clt__error(CLT_ERR_DTYPE, fn,
                      "%s is not defined for %s tensors; cast to %s dtype first with clt_cast()",
                      op->name,
                      cd == CLT_BOOL            ? "bool"
                      : clt__dtype_is_float(cd) ? "float"
                                                : "integer",
                      cd == CLT_BOOL            ? "an integer"
                      : clt__dtype_is_float(cd) ? "an integer"
                                                : "a float");
  *out = r;
  return CLT_OK;
}

static const clt_op *find_op(const char *name) {
  for (int i = 0; i < CLT__OP_COUNT; i++)
    if (clt__ops[i].arity == 2 && strcmp(clt__ops[i].name, name) == 0)
      return &clt__ops[i];
  return NULL;
}

clt_status clt_result_dtype(const char *op, clt_dtype a, clt_dtype b, clt_dtype *out) {
  static const char fn[] = "clt_result_dtype";
  clt_status s;
  if (!op || !out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", op ? "out" : "op");
  if ((s = clt__check_dtype(a, fn, "a")) != CLT_OK || (s = clt__check_dtype(b, fn, "b")) != CLT_OK)
    return s;
  const clt_op *bop = find_op(op);
  if (!bop)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "unknown operation '%s' (expected a binary operation such as add, sub, "
                      "mul, div, pow, maximum, minimum, eq, lt or logical_and: see clt_ops.h)",
                      op);
  return result_dtype(bop, promote(a, b), a, fn, out);
}

/* NumPy broadcasting of n contiguous operands. */
static clt_status broadcast(clt_tensor *const *in, int n, const char *fn, clt_bcast *bc) {
  int nd = 0;
  for (int k = 0; k < n; k++)
    if (in[k]->ndim > nd)
      nd = in[k]->ndim;
  memset(bc, 0, sizeof *bc);
  bc->ndim = nd;
  for (int d = nd - 1; d >= 0; d--) {
    int64_t size = 1;
    for (int k = 0; k < n; k++) {
      int dk = d - (nd - in[k]->ndim);
      int64_t nk = dk >= 0 ? in[k]->shape[dk] : 1;
      if (nk == size || nk == 1)
        continue;
      if (size != 1) {
        char sa[256], sb[256];
        clt__format_shape(sa, sizeof sa, in[0]->ndim, in[0]->shape);
        clt__format_shape(sb, sizeof sb, in[k]->ndim, in[k]->shape);
        return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                          "shapes %s (argument 1) and %s (argument %d) cannot be broadcast: "
                          "dimension %d is %lld in one and %lld in the other",
                          sa, sb, k + 1, d, (long long)size, (long long)nk);
      }
      size = nk;
    }
    bc->shape[d] = size;
  }
  bc->same = true;
  for (int k = 0; k < n; k++) {
    if (in[k]->ndim != nd || memcmp(in[k]->shape, bc->shape, sizeof(int64_t) * nd) != 0 ||
        !in[k]->contiguous)
      bc->same = false;
    bc->off[k] = clt__elem_offset(in[k]);
    for (int d = nd - 1; d >= 0; d--) {
      int dk = d - (nd - in[k]->ndim);
      bc->s[k][d] = dk < 0 || (in[k]->shape[dk] == 1 && bc->shape[d] != 1) ? 0 : in[k]->strides[dk];
    }
  }
  return CLT_OK;
}

/* The first and one past the last byte of the storage that t's elements occupy (numel > 0;
 * strides are never negative). */
static void byte_span(const clt_tensor *t, size_t *lo, size_t *hi) {
  int64_t last = 0;
  for (int d = 0; d < t->ndim; d++)
    last += (t->shape[d] - 1) * t->strides[d];
  *lo = t->offset;
  *hi = t->offset + ((size_t)last + 1) * clt_dtype_size(t->dtype);
}

/* Calls each(i, ctx) with the storage index (in elements) of every element of t, in C order. */
static void each_element(const clt_tensor *t, void (*each)(int64_t i, void *ctx), void *ctx) {
  int64_t idx[CLT_MAX_DIMS] = {0}, at = clt__elem_offset(t);
  for (int64_t n = 0; n < t->numel; n++) {
    each(at, ctx);
    for (int d = t->ndim - 1; d >= 0; d--) {
      at += t->strides[d];
      if (++idx[d] < t->shape[d])
        break;
      at -= idx[d] * t->strides[d];
      idx[d] = 0;
    }
  }
}

typedef struct marks {
  int64_t lo, hi; /* the storage indices the bitmap covers, inclusive */
  unsigned char *bits;
  bool hit;
} marks;

static void mark(int64_t i, void *ctx) {
  marks *m = ctx;
  if (i >= m->lo && i <= m->hi)
    m->bits[(i - m->lo) >> 3] |= (unsigned char)(1u << ((i - m->lo) & 7));
}

static void probe(int64_t i, void *ctx) {
  marks *m = ctx;
  if (i >= m->lo && i <= m->hi && (m->bits[(i - m->lo) >> 3] >> ((i - m->lo) & 7) & 1))
    m->hit = true;
}

/* Whether views a and b of one storage, whose spans intersect in the storage elements [lo, hi]
 * (inclusive), share an element: from the index math only (no data is read), a bitmap of one bit
 * per element of [lo, hi] (8 MiB at the limit), every element of a marked in it and every
 * element of b probed, on the host, on each call that gets here. Where [lo, hi], a or b holds
 * more than 2^26 elements, or the bitmap cannot be allocated, the answer is yes without looking:
 * the write is then refused as a partial overlap even if the views share nothing. */
static bool share_element(const clt_tensor *a, const clt_tensor *b, int64_t lo, int64_t hi) {
  const int64_t limit = (int64_t)1 << 26;
  if (hi - lo >= limit || a->numel > limit || b->numel > limit)
    return true;
  marks m = {lo, hi, calloc((size_t)((hi - lo) / 8 + 1), 1), false};
  if (!m.bits)
    return true;
  each_element(a, mark, &m);
  each_element(b, probe, &m);
  free(m.bits);
  return m.hit;
}

/* Whether writing the result into dst elementwise could change operand k before it is read: an
 * element of dst is an element of operand k but not at the same index of the result (an operand
 * that is the destination itself, read and written at the same place, is fine: a += b; so are
 * views of one storage that share no element, such as t[:, ::2] and t[:, 1::2]). Costs a few
 * comparisons unless the two byte spans intersect with different layouts; then, for one dtype,
 * share_element walks both views (its limit applies), and for two dtypes the answer is yes. */
static bool overlaps(const clt_tensor *dst, const clt_tensor *t, const clt_bcast *bc, int k) {
  if (dst->storage != t->storage || dst->numel == 0 || t->numel == 0)
    return false;
  size_t dl, dh, tl, th;
  byte_span(dst, &dl, &dh);
  byte_span(t, &tl, &th);
  if (dh <= tl || th <= dl)
    return false;
  if (t->dtype != dst->dtype)
    return true;
  bool same = t->offset == dst->offset;
  for (int d = 0; d < bc->ndim && same; d++)
    same = bc->shape[d] <= 1 || bc->s[k][d] == dst->strides[d];
  if (same)
    return false;
  size_t es = clt_dtype_size(dst->dtype), lo = dl > tl ? dl : tl, hi = dh < th ? dh : th;
  return share_element(dst, t, (int64_t)(lo / es), (int64_t)(hi / es) - 1);
}

static const char *const arg_names[3][3] = {{"t"}, {"a", "b"}, {"cond", "a", "b"}};

/* Hands the new result r of op to *out, as autograd's node where an operand requires grad (the
 * one branch that autograd costs an operation where nothing does). */
static clt_status recorded(const char *fn, const clt_op *op, clt_tensor *const *in, clt_tensor *r,
                           clt_tensor **out) {
  if (clt__grad_wanted(in, op->arity))
    return clt__grad_record(op->kind, fn, in, op->arity, NULL, 0, r, out);
  *out = r;
  return CLT_OK;
}

/* Every elementwise operation comes through here: arguments, the same-device rule, dtypes,
 * broadcasting, then the device's backend. dst, when given, receives the result (the _out and
 * in-place forms); otherwise a new tensor goes to *out. fn is the public function's name, which
 * every message starts with (clt_add, clt_add_out, clt_add_scalar, clt_add_ are four names). */
static clt_status elementwise(const char *fn, const clt_op *op, clt_tensor *const *in,
                              clt_dtype given, clt_tensor *dst, clt_tensor **out) {
  int n = op->arity;
  clt_status s;
  for (int k = 0; k < n; k++)
    if ((s = clt__check_tensor(in[k], fn, arg_names[n - 1][k])) != CLT_OK)
      return s;
  if (!dst && !out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_tensor *all[4] = {in[0], n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, NULL};
  all[n] = dst;
  if ((s = check_same_device(fn, dst ? n + 1 : n, all)) != CLT_OK)
    return s;
  clt_dtype compute = in[0]->dtype;
  if (n == 2)
    compute = promote(in[0]->dtype, in[1]->dtype);
  if (n == 3 && !op->cond)
    compute = promote(promote(in[0]->dtype, in[1]->dtype), in[2]->dtype);
  if (n == 3 && op->cond) {
    if (in[0]->dtype != CLT_BOOL)
      return clt__error(CLT_ERR_DTYPE, fn,
                        "cond must be a bool tensor, not %s; compare first (clt_ne(x, zero)) or "
                        "cast it",
                        clt_dtype_name(in[0]->dtype));
    compute = promote(in[1]->dtype, in[2]->dtype);
  }
  clt_dtype rt;
  if ((s = result_dtype(op, compute, given, fn, &rt)) != CLT_OK)
    return s;
  if (op->result == CLT__RESULT_PROMOTE || op->result == CLT__RESULT_FLOAT)
    compute = rt; /* e.g. i32 / i32 computes in f32 */
  clt_bcast bc;
  if ((s = broadcast(in, n, fn, &bc)) != CLT_OK)
    return s;
  clt_device *dev = in[0]->storage->dev;
  clt_tensor *r;
  if (dst) {
    /* in place (clt_add_(a, b), or clt_add_out(a, b, a)): the messages speak of a */
    const char *dst_name = op->kind == CLT__OP_cast ? "dst" : dst == in[0] ? "a" : "out";
    if (dst->ndim != bc.ndim || memcmp(dst->shape, bc.shape, sizeof(int64_t) * bc.ndim) != 0) {
      char want[256], got[256];
      clt__format_shape(want, sizeof want, bc.ndim, bc.shape);
      clt__format_shape(got, sizeof got, dst->ndim, dst->shape);
      return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "%s has shape %s but the result has shape %s",
                        dst_name, got, want);
    }
    if (dst->dtype != rt)
      return clt__error(CLT_ERR_DTYPE, fn, "%s is %s but the result is %s", dst_name,
                        clt_dtype_name(dst->dtype), clt_dtype_name(rt));
    if (clt__has_internal_overlap(dst))
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "%s is expanded (a dimension of stride 0): several of its elements are "
                        "one memory location, so it cannot be written elementwise; write into "
                        "the tensor it was expanded from, or into a clt_clone of it",
                        dst_name);
    /* An operand may be the destination itself (each element is read, then written, at the same
     * place: a += b). One that shares some elements with it otherwise (a shifted or transposed
     * view of the same memory) would read elements already written, in an order no one
     * promises: refused, as PyTorch refuses it. */
    for (int k = 0; k < n; k++)
      if (overlaps(dst, in[k], &bc, k))
        return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                          "%s and %s share some elements but not all (a shifted or transposed "
                          "view of the same memory): the result would depend on the order of the "
                          "writes; clone %s first (clt_clone)",
                          dst_name, op->kind == CLT__OP_cast ? "src" : arg_names[n - 1][k],
                          op->kind == CLT__OP_cast ? "src" : arg_names[n - 1][k]);
    if ((s = clt__write_check(dst, in, n, fn)) != CLT_OK)
      return s;
    r = dst;
  } else if ((s = clt__tensor_new(rt, bc.ndim, bc.shape, dev, fn, &r)) != CLT_OK) {
    return s;
  }
  memcpy(bc.so, r->strides, sizeof bc.so);
  bc.ooff = clt__elem_offset(r);
  bc.same = bc.same && r->contiguous;
  if (dst && clt__lazy_defers(dev, r->numel)) {
    /* a deferred operand's chain and this op run as one kernel into dst (lazy.c) */
    bool done = false;
    if ((s = clt__lazy_into(op, dst, in, compute, &bc, &done)) != CLT_OK || done)
      return s;
  }
  if (!dst && clt__lazy_defers(dev, r->numel)) {
    /* deferred: recorded now, computed with the rest of its chain when needed (lazy.c) */
    bool deferred = false;
    if ((s = clt__lazy_record(op, r, in, compute, &bc, &deferred)) != CLT_OK) {
      clt_tensor_release(r);
      return s;
    }
    if (deferred)
      return recorded(fn, op, in, r, out);
  }
  if (r->numel > 0 && ((s = clt__lazy_ready(in, op->arity, r, fn)) != CLT_OK ||
                       (s = dev->backend->compute.elementwise(op, r, in, compute, &bc)) != CLT_OK)) {
    if (!dst)
      clt_tensor_release(r);
    return s;
  }
  if (!dst)
    return recorded(fn, op, in, r, out);
  return CLT_OK;
}

clt_status clt__copy_into(clt_tensor *dst, clt_tensor *src, const char *fn) {
  clt_tensor *ts[2] = {dst, src};
  clt_status s = check_same_device(fn, 2, ts);
  if (s != CLT_OK)
    return s;
  /* src broadcast to dst's shape: stride 0 along the dimensions it lacks or has as 1 */
  int lead = dst->ndim - src->ndim;
  int64_t st[CLT_MAX_DIMS];
  bool fits = lead >= 0;
  for (int i = 0; fits && i < dst->ndim; i++) {
    int k = i - lead;
    st[i] = k < 0 || src->shape[k] != dst->shape[i] ? 0 : src->strides[k];
    fits = k < 0 || src->shape[k] == dst->shape[i] || src->shape[k] == 1;
  }
  clt_tensor *e;
  if (!fits) {
    char sd[256], ss[256];
    clt__format_shape(sd, sizeof sd, dst->ndim, dst->shape);
    clt__format_shape(ss, sizeof ss, src->ndim, src->shape);
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "src of shape %s cannot be broadcast to dst's shape %s", ss, sd);
  }
  if ((s = clt__tensor_view(src, dst->ndim, dst->shape, st, clt__elem_offset(src), fn, &e)) !=
      CLT_OK)
    return s;
  clt_tensor *in[1] = {e};
  s = elementwise(fn, &clt__ops[CLT__OP_cast], in, dst->dtype, dst, NULL);
  clt_tensor_release(e);
  return s;
}

clt_status clt_clone(clt_tensor *t, clt_tensor **out) {
  static const char fn[] = "clt_clone";
  clt_status s;
  clt_tensor *r;
  CLT__GRAD_RECORD(CLT__GRAD_COPY, fn, &t, 1, NULL, 0, out, clt_clone(t, &r_));
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((s = clt__tensor_new(t->dtype, t->ndim, t->shape, t->storage->dev, fn, &r)) != CLT_OK)
    return s;
  /* The elementwise copy, also for a transposed tensor: its strided forms (rows walked per chunk
   * on CPU devices, tiles on the host) beat the dedicated transpose kernels that clt used to have
   * (bench/views). */
  if (r->numel > 0 && (s = clt__copy_into(r, t, fn)) != CLT_OK) {
    clt_tensor_release(r);
    return s;
  }
  *out = r;
  return CLT_OK;
}

clt_status clt__dense(const clt_tensor *t, const char *fn, clt_tensor **out) {
  clt_tensor *u = (clt_tensor *)t; /* retained or read, never written */
  if (clt__is_dense(t)) {
    *out = clt_tensor_retain(u);
    return CLT_OK;
  }
  clt_status s = clt_clone(u, out);
  if (s != CLT_OK)
    return clt__error(s, fn, "making a contiguous copy of the view: %s", clt_last_error());
  return CLT_OK;
}

/* The 0-d tensor a scalar operand becomes, following PyTorch: a scalar does not widen a tensor of
 * its own kind (f32 + 2.5 stays f32; i32 + 7 stays i32, and a value the integer dtype cannot
 * hold is refused rather than wrapped), a fractional scalar makes an integer or bool tensor's
 * result f32, and an integer scalar makes a bool tensor's result i64. */
static clt_status scalar_tensor(clt_tensor *t, double v, const char *fn, clt_tensor **out) {
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "a")) != CLT_OK)
    return s;
  clt_dtype dt = t->dtype;
  if (!clt__dtype_is_float(dt)) {
    bool integral = v == floor(v) && v >= -9.2e18 && v <= 9.2e18;
    if (!integral)
      dt = CLT_F32;
    else if (dt == CLT_BOOL)
      dt = CLT_I64;
  }
  if (!clt__dtype_is_half(dt) && clt__lazy_defers(t->storage->dev, t->numel))
    s = clt__lazy_scalar(dt, v, t->storage->dev, fn, out); /* a kernel argument when fused */
  else
    s = clt_full(dt, 0, NULL, v, t->storage->dev, out);
  if (s == CLT_ERR_INVALID_ARGUMENT) /* the only refusal of the value itself */
    return clt__error(s, fn, "the scalar %g does not fit a %s tensor: %s", v,
                      clt_dtype_name(t->dtype), clt_last_error());
  if (s != CLT_OK) /* out of memory, a device error: the 0-d tensor that holds it */
    return clt__error(s, fn, "the scalar operand %g on %s: %s", v, t->storage->dev->name,
                      clt_last_error());
  return CLT_OK;
}

/* ---- the public functions of the table (clt_ops.h), by arity and form ---------------------- */

#define API_1_(name)                                                                               \
  clt_status clt_##name(clt_tensor *t, clt_tensor **out) {                                         \
    clt_tensor *in[1] = {t};                                                                       \
    return elementwise("clt_" #name, &clt__ops[CLT__OP_##name], in, CLT_F32, NULL, out);           \
  }
#define API_2_(name)                                                                               \
  clt_status clt_##name(clt_tensor *a, clt_tensor *b, clt_tensor **out) {                          \
    clt_tensor *in[2] = {a, b};                                                                    \
    return elementwise("clt_" #name, &clt__ops[CLT__OP_##name], in, CLT_F32, NULL, out);           \
  }                                                                                                \
  clt_status clt_##name##_out(clt_tensor *a, clt_tensor *b, clt_tensor *out) {                     \
    clt_tensor *in[2] = {a, b};                                                                    \
    if (!out)                                                                                      \
      return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_" #name "_out", "out is NULL");             \
    return elementwise("clt_" #name "_out", &clt__ops[CLT__OP_##name], in, CLT_F32, out, NULL);    \
  }                                                                                                \
  clt_status clt_##name##_scalar(clt_tensor *a, double b, clt_tensor **out) {                      \
    return with_scalars("clt_" #name "_scalar", &clt__ops[CLT__OP_##name], a, b, 0, out);          \
  }
#define API_3_(name)                                                                               \
  clt_status clt_##name(clt_tensor *a, clt_tensor *b, clt_tensor *c, clt_tensor **out) {           \
    clt_tensor *in[3] = {a, b, c};                                                                 \
    return elementwise("clt_" #name, &clt__ops[CLT__OP_##name], in, CLT_F32, NULL, out);           \
  }
#define API_PLAIN_3_(name)                                                                         \
  clt_status clt_##name##_scalar(clt_tensor *a, double b, double c, clt_tensor **out) {            \
    return with_scalars("clt_" #name "_scalar", &clt__ops[CLT__OP_##name], a, b, c, out);          \
  }
#define API_INPLACE_2_(name)                                                                       \
  clt_status clt_##name##_(clt_tensor *a, clt_tensor *b) {                                         \
    clt_tensor *in[2] = {a, b};                                                                    \
    if (!a)                                                                                        \
      return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_" #name "_", "a is NULL");                  \
    return elementwise("clt_" #name "_", &clt__ops[CLT__OP_##name], in, CLT_F32, a, NULL);         \
  }
#define API_WRAP_INPLACE_2_(name) API_INPLACE_2_(name)
#define API_PLAIN_1_(name)
#define API_PLAIN_2_(name)
#define API_WRAP_1_(name)
#define API_COND_3_(name)
#define API_(name, arity, rule, form, f, i, b, ulps, doc)                                          \
  API_##arity##_(name) API_##form##_##arity##_(name)

/* The _scalar forms: a op b, or op(a, b, c), with the numbers b (and c) as 0-d operands. */
static clt_status with_scalars(const char *fn, const clt_op *op, clt_tensor *a, double b, double c,
                               clt_tensor **out) {
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_tensor *in[3] = {a, NULL, NULL};
  clt_status s = CLT_OK;
  for (int k = 1; k < op->arity && s == CLT_OK; k++)
    s = scalar_tensor(a, k == 1 ? b : c, fn, &in[k]);
  if (s == CLT_OK)
    s = elementwise(fn, op, in, CLT_F32, NULL, out);
  clt_tensor_release(in[1]);
  clt_tensor_release(in[2]);
  return s;
}

CLT_ELEMENTWISE_OPS(API_)

clt_status clt__op_run(clt_op_kind k, clt_tensor *const *in, clt_tensor **out) {
  if ((int)k < 0 || k >= CLT__OP_COUNT)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt__op_run", "no operation %d", (int)k);
  if (k == CLT__OP_cast)
    return clt_cast(in[0], CLT_F32, out);
  return elementwise(clt__ops[k].fn, &clt__ops[k], in, CLT_F32, NULL, out);
}

clt_status clt_cast(clt_tensor *t, clt_dtype dtype, clt_tensor **out) {
  clt_status s = clt__check_dtype(dtype, "clt_cast", "dtype");
  if (s != CLT_OK)
    return s;
  clt_tensor *in[1] = {t};
  return elementwise("clt_cast", &clt__ops[CLT__OP_cast], in, dtype, NULL, out);
}

static const char *const reduce_names[] = {"sum", "mean", "max", "min", "argmax"};

/* The product of shape[from .. to-1]: 0 if one of them is 0, INT64_MAX if it does not fit (a
 * tensor without elements may have any other dimensions). */
static int64_t dims_product(const int64_t *shape, int from, int to) {
  for (int d = from; d < to; d++)
    if (shape[d] == 0)
      return 0;
  int64_t n = 1;
  for (int d = from; d < to; d++)
    if (__builtin_mul_overflow(n, shape[d], &n))
      return INT64_MAX;
  return n;
}

static clt_status reduce_dense(clt_reduce_kind kind, const char *fn, clt_tensor *t, bool whole,
                               int dim, int keepdim, clt_tensor **out);

/* Every reduction comes through here: whole, or along dim. A view that is not contiguous is
 * reduced as a contiguous copy. */
static clt_status reduce(clt_reduce_kind kind, const char *fn, clt_tensor *t, bool whole, int dim,
                         int keepdim, clt_tensor **out) {
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_tensor *d;
  if ((s = clt__dense(t, fn, &d)) != CLT_OK)
    return s;
  s = reduce_dense(kind, fn, d, whole, dim, keepdim, out);
  clt_tensor_release(d);
  return s;
}

static clt_status reduce_dense(clt_reduce_kind kind, const char *fn, clt_tensor *t, bool whole,
                               int dim, int keepdim, clt_tensor **out) {
  clt_status s;
  clt_reduce red = {kind, reduce_names[kind], fn, 1, t->numel, 1};
  int64_t shape[CLT_MAX_DIMS];
  int ndim = 0;
  if (!whole) {
    int nd = t->ndim;
    if (dim < -(nd ? nd : 1) || dim >= (nd ? nd : 1))
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "dim = %d is out of range for a tensor of %d dimensions (expected %d..%d)",
                        dim, nd, -(nd ? nd : 1), (nd ? nd : 1) - 1);
    if (nd > 0) {
      if (dim < 0)
        dim += nd;
      /* Saturated where the result would not fit: clt__tensor_new refuses its shape. */
      red.outer = dims_product(t->shape, 0, dim);
      red.inner = dims_product(t->shape, dim + 1, nd);
      red.r = t->shape[dim];
      for (int d = 0; d < nd; d++)
        if (d != dim)
          shape[ndim++] = t->shape[d];
        else if (keepdim)
          shape[ndim++] = 1;
    }
  }
  clt_dtype rt = t->dtype;
  switch (kind) {
  case CLT__RED_SUM:
    if (!clt__dtype_is_float(rt))
      rt = CLT_I64;
    break;
  case CLT__RED_MEAN:
    if (!clt__dtype_is_float(rt))
      return clt__error(CLT_ERR_DTYPE, fn,
                        "mean needs a float tensor, not %s; cast it with clt_cast(t, CLT_F32, "
                        "&f) first",
                        clt_dtype_name(rt));
    break;
  case CLT__RED_MAX:
  case CLT__RED_MIN:
    break;
  case CLT__RED_ARGMAX:
    rt = CLT_I64;
    break;
  }
  /* refused whenever the reduced size is 0, even where the result has no element either (a
   * [0, 0] tensor along dim 1), as PyTorch and NumPy refuse (found by the NumPy lane) */
  if (red.r == 0 && (kind == CLT__RED_MAX || kind == CLT__RED_MIN || kind == CLT__RED_ARGMAX))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "%s of an empty %s has no value: the reduced size is 0", red.name,
                      whole ? "tensor" : "dimension");
  clt_device *dev = t->storage->dev;
  clt_tensor *r;
  if ((s = clt__tensor_new(rt, ndim, shape, dev, fn, &r)) != CLT_OK)
    return s;
  if (r->numel > 0 && clt__dtype_is_half(t->dtype)) {
    /* f16 and bf16 accumulate in f32: reduce an f32 copy, then round into r. The result is
     * allocated first, so that its errors (a shape too large) are this function's, as for
     * every other dtype. An empty input reduces to 0 (sum) or NaN (mean) with no copy. */
    clt_tensor *f = NULL, *fr = NULL;
    if (t->numel == 0) {
      uint16_t pattern = kind == CLT__RED_SUM ? 0 : t->dtype == CLT_F16 ? 0x7e00 : 0x7fc0;
      s = dev->backend->compute.fill(r, &pattern, fn);
    } else {
      clt_tensor *in[1] = {t};
      if ((s = elementwise(fn, &clt__ops[CLT__OP_cast], in, CLT_F32, NULL, &f)) == CLT_OK)
        s = reduce_dense(kind, fn, f, whole, dim, keepdim, &fr);
      if (s == CLT_OK) {
        clt_tensor *back[1] = {fr};
        s = elementwise(fn, &clt__ops[CLT__OP_cast], back, r->dtype, r, NULL);
      }
    }
    clt_tensor_release(f);
    clt_tensor_release(fr);
    if (s != CLT_OK) {
      clt_tensor_release(r);
      return s;
    }
    *out = r;
    return CLT_OK;
  }
  if (r->numel > 0 && ((s = clt__lazy_ready(&t, 1, r, fn)) != CLT_OK ||
                       (s = dev->backend->compute.reduce(&red, r, t)) != CLT_OK)) {
    clt_tensor_release(r);
    return s;
  }
  *out = r;
  return CLT_OK;
}

/* The reductions' public functions; sum, mean, max and min record for autograd (G_ the node
 * kinds), argmax gives integers, which never require grad. */
#define G_SUM CLT__GRAD_SUM
#define G_MEAN CLT__GRAD_MEAN
#define G_SUM_dim CLT__GRAD_SUM_DIM
#define G_MEAN_dim CLT__GRAD_MEAN_DIM
#define G_MAX CLT__GRAD_MAX
#define G_MIN CLT__GRAD_MIN
#define G_ARGMAX -1
#define G_MAX_dim CLT__GRAD_MAX_DIM
#define G_MIN_dim CLT__GRAD_MIN_DIM
#define G_ARGMAX_dim -1
static clt_status reduce_api(clt_reduce_kind kind, int gk, const char *fn, clt_tensor *t,
                             bool whole, int dim, int keepdim, clt_tensor **out) {
  if (gk >= 0)
    CLT__GRAD_RECORD(gk, fn, &t, 1, ((int64_t[]){dim, keepdim}), 2, out,
                     reduce(kind, fn, t, whole, dim, keepdim, &r_));
  return reduce(kind, fn, t, whole, dim, keepdim, out);
}
#define REDUCE_API(name, K)                                                                        \
  clt_status clt_##name(clt_tensor *t, clt_tensor **out) {                                         \
    return reduce_api(CLT__RED_##K, G_##K, "clt_" #name, t, true, 0, 0, out);                      \
  }                                                                                                \
  clt_status clt_##name##_dim(clt_tensor *t, int dim, int keepdim, clt_tensor **out) {             \
    return reduce_api(CLT__RED_##K, G_##K##_dim, "clt_" #name "_dim", t, false, dim, keepdim,      \
                      out);                                                                        \
  }
REDUCE_API(sum, SUM)
REDUCE_API(mean, MEAN)
REDUCE_API(max, MAX)
REDUCE_API(min, MIN)
REDUCE_API(argmax, ARGMAX)
/* ---- linear algebra --------------------------------------------------------------------- */

static const char *const matmul_path_names[] = {
    [CLT__MM_BLAS] = "blas",     [CLT__MM_LOOP] = "loop",     [CLT__MM_CLBLAST] = "clblast",
    [CLT__MM_NATIVE] = "native", [CLT__MM_KERNEL] = "kernel",
};

const char *clt_matmul_path(clt_device *d) {
  static const char fn[] = "clt_matmul_path";
  if (clt__check_device(d, fn, "d") != CLT_OK)
    return NULL;
  clt_matmul_kind k;
  if (d->backend->compute.matmul_path(d, fn, &k) != CLT_OK)
    return NULL;
  return matmul_path_names[k];
}

static clt_status shape_error(const char *fn, const clt_tensor *a, const clt_tensor *b,
                              const char *why) {
  char sa[256], sb[256];
  clt__format_shape(sa, sizeof sa, a->ndim, a->shape);
  clt__format_shape(sb, sizeof sb, b->ndim, b->shape);
  return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                    "cannot multiply %s (argument 1) by %s (argument 2): %s", sa, sb, why);
}

/* How BLAS can address the (rows, cols) matrices of t (its last two dimensions; 2-D or 3-D) in
 * place: row-major with leading dimension *ld (element (i, j) at i * ld + j), or transposed
 * (at j * ld + i) when *trans; false where neither holds (an expanded or doubly strided view). */
static bool blas_layout(const clt_tensor *t, int64_t rows, int64_t cols, int64_t *ld, bool *trans) {
  int64_t s0 = t->strides[t->ndim - 2], s1 = t->strides[t->ndim - 1];
  if ((cols == 1 || s1 == 1) && (rows == 1 || s0 >= cols)) {
    *ld = rows == 1 ? cols : s0;
    *trans = false;
  } else if ((rows == 1 || s0 == 1) && (cols == 1 || s1 >= rows)) {
    *ld = cols == 1 ? rows : s1;
    *trans = true;
  } else {
    return false;
  }
  if (*ld < 1)
    *ld = 1;
  return *ld <= INT32_MAX;
}

/* The operand t of a matmul as the backend takes it (*use, one reference): t itself where views
 * is set and BLAS can address it, else a contiguous copy; its leading dimension, transposition
 * and batch stride (0 for a 2-D operand or a batch of one). */
static clt_status matmul_operand(clt_tensor *t, int64_t rows, int64_t cols, bool views,
                                 const char *fn, clt_tensor **use, int64_t *ld, bool *trans,
                                 int64_t *bstride) {
  clt_status s;
  if (views && blas_layout(t, rows, cols, ld, trans) &&
      (t->ndim == 2 || t->shape[0] == 1 || t->strides[0] > 0)) {
    *use = clt_tensor_retain(t);
  } else {
    if ((s = clt__dense(t, fn, use)) != CLT_OK)
      return s;
    *ld = cols;
    *trans = false;
  }
  *bstride = t->ndim == 3 && t->shape[0] > 1 ? (*use)->strides[0] : 0;
  return CLT_OK;
}

clt_status clt__matmul_check(clt_tensor *a, clt_tensor *b, clt_tensor **out, const char *fn) {
  clt_status s;
  if ((s = clt__check_tensor(a, fn, "a")) != CLT_OK ||
      (s = clt__check_tensor(b, fn, "b")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_tensor *operands[2] = {a, b};
  if ((s = check_same_device(fn, 2, operands)) != CLT_OK)
    return s;
  for (int i = 0; i < 2; i++)
    if (!clt__dtype_is_float(operands[i]->dtype))
      return clt__error(CLT_ERR_DTYPE, fn,
                        "argument %d is %s; matmul takes f16, bf16, f32 or f64 tensors (cast "
                        "it with clt_cast first)",
                        i + 1, clt_dtype_name(operands[i]->dtype));
  if (a->dtype != b->dtype)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "argument 1 is %s and argument 2 is %s; matmul takes two tensors of one "
                      "dtype: cast one with clt_cast first",
                      clt_dtype_name(a->dtype), clt_dtype_name(b->dtype));
  return CLT_OK;
}

clt_status clt__matmul_shape_error(const char *fn, const clt_tensor *a, const clt_tensor *b,
                                   const char *why) {
  return shape_error(fn, a, b, why);
}

clt_status clt__matmul(clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  static const char fn[] = "clt_matmul";
  clt_status s;
  CLT__GRAD_RECORD(CLT__GRAD_MATMUL, fn, ((clt_tensor *[]){a, b}), 2, NULL, 0, out,
                   clt__matmul(a, b, &r_));
  if ((s = clt__matmul_check(a, b, out, fn)) != CLT_OK)
    return s;
  if (a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > 3)
    return shape_error(fn, a, b, "both operands must be 2-D or 3-D");
  clt_matmul_desc g;
  g.m = a->shape[a->ndim - 2];
  g.k = a->shape[a->ndim - 1];
  g.n = b->shape[b->ndim - 1];
  if (b->shape[b->ndim - 2] != g.k) {
    char why[128];
    snprintf(why, sizeof why, "the inner dimensions differ (%lld and %lld)", (long long)g.k,
             (long long)b->shape[b->ndim - 2]);
    return shape_error(fn, a, b, why);
  }
  int64_t ba = a->ndim == 3 ? a->shape[0] : -1, bb = b->ndim == 3 ? b->shape[0] : -1;
  if (ba >= 0 && bb >= 0 && ba != bb) {
    char why[128];
    snprintf(why, sizeof why, "the batch sizes differ (%lld and %lld)", (long long)ba,
             (long long)bb);
    return shape_error(fn, a, b, why);
  }
  g.batch = ba >= 0 ? ba : bb >= 0 ? bb : 1;
  int64_t rows;
  if (__builtin_mul_overflow(g.batch, g.m, &rows) || rows > INT32_MAX || g.n > INT32_MAX ||
      g.k > INT32_MAX)
    return shape_error(fn, a, b, "BLAS takes dimensions up to 2^31-1 (batch * m counts as one)");
  if (clt__dtype_is_half(a->dtype)) {
    /* f16 and bf16 multiply in f32 (the products and sums), rounded once at the end */
    clt_tensor *fa = NULL, *fb = NULL, *fr = NULL, *r = NULL;
    if ((s = clt_cast(a, CLT_F32, &fa)) == CLT_OK && (s = clt_cast(b, CLT_F32, &fb)) == CLT_OK &&
        (s = clt__matmul(fa, fb, &fr)) == CLT_OK)
      s = clt_cast(fr, a->dtype, &r);
    clt_tensor_release(fa);
    clt_tensor_release(fb);
    clt_tensor_release(fr);
    if (s == CLT_OK)
      *out = r;
    return s;
  }
  int nd = ba >= 0 || bb >= 0 ? 3 : 2;
  int64_t shape[3] = {g.batch, g.m, g.n};
  clt_device *dev = a->storage->dev;
  clt_matmul_kind kind;
  if ((s = dev->backend->compute.matmul_path(dev, fn, &kind)) != CLT_OK)
    return s;
  clt_tensor *r, *ua = NULL, *ub = NULL;
  if ((s = clt__tensor_new(a->dtype, nd, nd == 3 ? shape : shape + 1, dev, fn, &r)) != CLT_OK)
    return s;
  if (r->numel > 0 && g.k == 0) {
    static const unsigned char zero[8] = {0};
    s = dev->backend->compute.fill(r, zero, fn);
  } else if (r->numel > 0) {
    /* views multiply in place where BLAS can address them (not on the kernel path) */
    bool views = kind != CLT__MM_KERNEL;
    if ((s = matmul_operand(a, g.m, g.k, views, fn, &ua, &g.lda, &g.ta, &g.sa)) == CLT_OK &&
        (s = matmul_operand(b, g.k, g.n, views, fn, &ub, &g.ldb, &g.tb, &g.sb)) == CLT_OK &&
        (s = clt__lazy_ready((clt_tensor *[]){ua, ub}, 2, r, fn)) == CLT_OK)
      s = dev->backend->compute.matmul(r, ua, ub, &g, fn);
  }
  clt_tensor_release(ua);
  clt_tensor_release(ub);
  if (s != CLT_OK) {
    clt_tensor_release(r);
    return s;
  }
  *out = r;
  return CLT_OK;
}

clt_status clt_linear(clt_tensor *x, clt_tensor *weight, clt_tensor *bias, clt_tensor **y) {
  static const char fn[] = "clt_linear";
  clt_status s;
  CLT__GRAD_RECORD(CLT__GRAD_LINEAR, fn, ((clt_tensor *[]){x, weight, bias}), 3, NULL, 0, y,
                   clt_linear(x, weight, bias, &r_));
  if ((s = clt__check_tensor(x, fn, "x")) != CLT_OK ||
      (s = clt__check_tensor(weight, fn, "weight")) != CLT_OK)
    return s;
  if (!y)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "y is NULL");
  /* The same-device rule over all three, before anything is computed. */
  clt_tensor *operands[3] = {x, weight, bias};
  if ((s = check_same_device(fn, bias ? 3 : 2, operands)) != CLT_OK)
    return s;
  for (int i = 0; i < (bias ? 3 : 2); i++)
    if (!clt__dtype_is_float(operands[i]->dtype) || operands[i]->dtype != x->dtype)
      return clt__error(CLT_ERR_DTYPE, fn,
                        "x is %s, weight %s and bias %s; a linear layer takes f16, bf16, f32 or "
                        "f64 tensors of one dtype (cast with clt_cast first)",
                        clt_dtype_name(x->dtype), clt_dtype_name(weight->dtype),
                        bias ? clt_dtype_name(bias->dtype) : "NULL");
  char sx[256], sw[256], sb[256] = "NULL";
  clt__format_shape(sx, sizeof sx, x->ndim, x->shape);
  clt__format_shape(sw, sizeof sw, weight->ndim, weight->shape);
  if (bias)
    clt__format_shape(sb, sizeof sb, bias->ndim, bias->shape);
  if (weight->ndim != 2 || x->ndim < 2 || x->ndim > 3 ||
      x->shape[x->ndim - 1] != weight->shape[1] ||
      (bias && (bias->ndim != 1 || bias->shape[0] != weight->shape[0])))
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "x %s, weight %s and bias %s do not fit: expected x (N, in), weight "
                      "(out, in) and bias (out) or NULL",
                      sx, sw, sb);
  clt_tensor *wt, *r;
  if ((s = clt__tensor_view(weight, 2, (int64_t[]){weight->shape[1], weight->shape[0]},
                            (int64_t[]){weight->strides[1], weight->strides[0]},
                            clt__elem_offset(weight), fn, &wt)) != CLT_OK) /* its transpose */
    return s;
  s = clt__matmul(x, wt, &r);
  clt_tensor_release(wt);
  if (s != CLT_OK)
    return s;
  if (bias && (s = clt_add_(r, bias)) != CLT_OK) {
    clt_tensor_release(r);
    return s;
  }
  *y = r;
  return CLT_OK;
}

clt_status clt_fill_(clt_tensor *t, double value) {
  static const char fn[] = "clt_fill_";
  uint64_t pattern = 0;
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK ||
      (s = clt__scalar_bytes(t->dtype, value, &pattern, fn)) != CLT_OK)
    return s;
  if (clt__has_internal_overlap(t))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "t is expanded (a dimension of stride 0): several of its elements are one "
                      "memory location; fill the tensor it was expanded from, or a clt_clone");
  if ((s = clt__write_check(t, NULL, 0, fn)) != CLT_OK)
    return s;
  if (t->numel == 0)
    return CLT_OK;
  clt_device *dev = t->storage->dev;
  if (t->contiguous) { /* one fill of the bytes it spans, at its offset */
    if ((s = clt__lazy_ready(NULL, 0, t, fn)) != CLT_OK)
      return s;
    return dev->backend->compute.fill(t, &pattern, fn);
  }
  clt_tensor *v;
  if ((s = clt__tensor_new(t->dtype, 0, NULL, dev, fn, &v)) != CLT_OK)
    return s;
  if ((s = dev->backend->compute.fill(v, &pattern, fn)) == CLT_OK)
    s = clt__copy_into(t, v, fn);
  clt_tensor_release(v);
  return s;
}
