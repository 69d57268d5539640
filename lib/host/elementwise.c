/* host/elementwise.c - elementwise operations on the host: one tight loop per (op, dtype) that
 * the compiler vectorizes; operands of another dtype are converted to the compute dtype first.
 * The semantics mirror kernels/elementwise.cl exactly (wrapping integers, NaN-propagating
 * maximum/minimum, saturating float-to-integer casts). */
#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers the expressions use ---------------------------------------------------------- */

#define IPOW(name, T, UT)                                                                          \
  static inline T name(T a, T b) {                                                                 \
    if (b < 0)                                                                                     \
      return a == (T)1 ? (T)1 : a == (T)-1 ? ((b & 1) ? (T)-1 : (T)1) : (T)0;                      \
    UT r = 1, x = (UT)a;                                                                           \
    while (b > 0) {                                                                                \
      if (b & 1)                                                                                   \
        r *= x;                                                                                    \
      x *= x;                                                                                      \
      b >>= 1;                                                                                     \
    }                                                                                              \
    return (T)r;                                                                                   \
  }
IPOW(ipow_i32, int32_t, uint32_t)
IPOW(ipow_i64, int64_t, uint64_t)
static inline uint8_t ipow_u8(uint8_t a, uint8_t b) {
  uint32_t r = 1, x = a;
  while (b > 0) {
    if (b & 1)
      r *= x;
    x *= x;
    b >>= 1;
  }
  return (uint8_t)r;
}

#define FMAX(x, y, f) (isnan(x) ? (x) : isnan(y) ? (y) : f(x, y))
#define IMAX(x, y) ((x) > (y) ? (x) : (y))
#define IMIN(x, y) ((x) < (y) ? (x) : (y))
#define RELU(x) ((x) < 0 ? 0 : (x))

/* ---- loops -------------------------------------------------------------------------------- */

typedef void (*binary_fn)(void *, const void *, const void *, int64_t, int64_t, int64_t);
typedef void (*unary_fn)(void *, const void *, int64_t);

/* TP: operand type; TC: computed in; TO: stored as; EXPR in x and y. */
#define BIN(name, TP, TC, TO, EXPR)                                                                \
  static void name(void *o_, const void *a_, const void *b_, int64_t n, int64_t sa, int64_t sb) {  \
    TO *restrict o = o_;                                                                           \
    const TP *a = a_, *b = b_;                                                                     \
    if (sa == 1 && sb == 1) {                                                                      \
      for (int64_t i = 0; i < n; i++) {                                                            \
        TC x = (TC)a[i], y = (TC)b[i];                                                             \
        o[i] = (TO)(EXPR);                                                                         \
      }                                                                                            \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                            \
        TC x = (TC)a[i * sa], y = (TC)b[i * sb];                                                   \
        o[i] = (TO)(EXPR);                                                                         \
      }                                                                                            \
    }                                                                                              \
  }

#define UN(name, TP, TC, TO, EXPR)                                                                 \
  static void name(void *o_, const void *a_, int64_t n) {                                          \
    TO *restrict o = o_;                                                                           \
    const TP *restrict a = a_;                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                              \
      TC x = (TC)a[i];                                                                             \
      o[i] = (TO)(EXPR);                                                                           \
    }                                                                                              \
  }

/* Arithmetic that wraps: integers compute in their unsigned twin. */
#define WRAPPING(op, EXPR)                                                                         \
  BIN(op##_f32, float, float, float, EXPR)                                                         \
  BIN(op##_f64, double, double, double, EXPR)                                                      \
  BIN(op##_i32, int32_t, uint32_t, int32_t, EXPR)                                                  \
  BIN(op##_i64, int64_t, uint64_t, int64_t, EXPR)                                                  \
  BIN(op##_u8, uint8_t, uint32_t, uint8_t, EXPR)
WRAPPING(add, x + y)
WRAPPING(sub, x - y)
WRAPPING(mul, x *y)
BIN(add_bool, uint8_t, uint8_t, uint8_t, x | y)
BIN(mul_bool, uint8_t, uint8_t, uint8_t, x &y)
BIN(div_f32, float, float, float, x / y)
BIN(div_f64, double, double, double, x / y)
BIN(pow_f32, float, float, float, powf(x, y))
BIN(pow_f64, double, double, double, pow(x, y))
BIN(pow_i32, int32_t, int32_t, int32_t, ipow_i32(x, y))
BIN(pow_i64, int64_t, int64_t, int64_t, ipow_i64(x, y))
BIN(pow_u8, uint8_t, uint8_t, uint8_t, ipow_u8(x, y))
#define MINMAX(op, FF, FD, I, B)                                                                   \
  BIN(op##_f32, float, float, float, FMAX(x, y, FF))                                               \
  BIN(op##_f64, double, double, double, FMAX(x, y, FD))                                            \
  BIN(op##_i32, int32_t, int32_t, int32_t, I(x, y))                                                \
  BIN(op##_i64, int64_t, int64_t, int64_t, I(x, y))                                                \
  BIN(op##_u8, uint8_t, uint8_t, uint8_t, I(x, y))                                                 \
  BIN(op##_bool, uint8_t, uint8_t, uint8_t, B)
MINMAX(maximum, fmaxf, fmax, IMAX, x | y)
MINMAX(minimum, fminf, fmin, IMIN, x &y)
#define COMPARE(op, EXPR)                                                                          \
  BIN(op##_f32, float, float, uint8_t, EXPR)                                                       \
  BIN(op##_f64, double, double, uint8_t, EXPR)                                                     \
  BIN(op##_i32, int32_t, int32_t, uint8_t, EXPR)                                                   \
  BIN(op##_i64, int64_t, int64_t, uint8_t, EXPR)                                                   \
  BIN(op##_u8, uint8_t, uint8_t, uint8_t, EXPR)                                                    \
  BIN(op##_bool, uint8_t, uint8_t, uint8_t, EXPR)
COMPARE(eq, x == y)
COMPARE(ne, x != y)
COMPARE(lt, x < y)
COMPARE(le, x <= y)
COMPARE(gt, x > y)
COMPARE(ge, x >= y)

UN(neg_f32, float, float, float, -x)
UN(neg_f64, double, double, double, -x)
UN(neg_i32, int32_t, uint32_t, int32_t, 0u - x)
UN(neg_i64, int64_t, uint64_t, int64_t, (uint64_t)0 - x)
UN(neg_u8, uint8_t, uint32_t, uint8_t, 0u - x)
UN(abs_f32, float, float, float, fabsf(x))
UN(abs_f64, double, double, double, fabs(x))
UN(abs_i32, int32_t, int32_t, int32_t, x < 0 ? (int32_t)(0u - (uint32_t)x) : x)
UN(abs_i64, int64_t, int64_t, int64_t, x < 0 ? (int64_t)((uint64_t)0 - (uint64_t)x) : x)
UN(abs_u8, uint8_t, uint8_t, uint8_t, x)
UN(relu_f32, float, float, float, RELU(x))
UN(relu_f64, double, double, double, RELU(x))
UN(relu_i32, int32_t, int32_t, int32_t, RELU(x))
UN(relu_i64, int64_t, int64_t, int64_t, RELU(x))
UN(relu_u8, uint8_t, uint8_t, uint8_t, x)
#define MATH(op, FF, FD)                                                                           \
  UN(op##_f32, float, float, float, FF(x))                                                         \
  UN(op##_f64, double, double, double, FD(x))
MATH(exp, expf, exp)
MATH(log, logf, log)
MATH(sqrt, sqrtf, sqrt)
MATH(sin, sinf, sin)
MATH(cos, cosf, cos)
MATH(tanh, tanhf, tanh)
UN(sigmoid_f32, float, float, float, 1.0f / (1.0f + expf(-x)))
UN(sigmoid_f64, double, double, double, 1.0 / (1.0 + exp(-x)))

#define ROW6(op)                                                                                   \
  {                                                                                                \
    [CLT_F32] = op##_f32, [CLT_F64] = op##_f64, [CLT_I32] = op##_i32, [CLT_I64] = op##_i64,        \
    [CLT_U8] = op##_u8, [CLT_BOOL] = op##_bool                                                     \
  }
#define ROW5(op)                                                                                   \
  {                                                                                                \
    [CLT_F32] = op##_f32, [CLT_F64] = op##_f64, [CLT_I32] = op##_i32, [CLT_I64] = op##_i64,        \
    [CLT_U8] = op##_u8                                                                             \
  }
#define ROW2(op)                                                                                   \
  { [CLT_F32] = op##_f32, [CLT_F64] = op##_f64 }

static const binary_fn binary_table[CLT__OP_COUNT][CLT_DTYPE_COUNT] = {
    [CLT__OP_ADD] = ROW6(add),         [CLT__OP_SUB] = ROW5(sub), [CLT__OP_MUL] = ROW6(mul),
    [CLT__OP_DIV] = ROW2(div),         [CLT__OP_POW] = ROW5(pow), [CLT__OP_MAXIMUM] = ROW6(maximum),
    [CLT__OP_MINIMUM] = ROW6(minimum), [CLT__OP_EQ] = ROW6(eq),   [CLT__OP_NE] = ROW6(ne),
    [CLT__OP_LT] = ROW6(lt),           [CLT__OP_LE] = ROW6(le),   [CLT__OP_GT] = ROW6(gt),
    [CLT__OP_GE] = ROW6(ge),
};

static const unary_fn unary_table[CLT__OP_COUNT][CLT_DTYPE_COUNT] = {
    [CLT__OP_NEG] = ROW5(neg),         [CLT__OP_ABS] = ROW5(abs), [CLT__OP_RELU] = ROW5(relu),
    [CLT__OP_EXP] = ROW2(exp),         [CLT__OP_LOG] = ROW2(log), [CLT__OP_SQRT] = ROW2(sqrt),
    [CLT__OP_SIN] = ROW2(sin),         [CLT__OP_COS] = ROW2(cos), [CLT__OP_TANH] = ROW2(tanh),
    [CLT__OP_SIGMOID] = ROW2(sigmoid),
};

/* ---- conversion (casts and operand promotion) ---------------------------------------------- */

/* float to integer: truncate toward zero, saturate, NaN gives 0 (OpenCL's convert_T_sat_rtz). */
static int64_t sat(double v, double lo, double hi) {
  if (isnan(v))
    return 0;
  if (v <= lo)
    return (int64_t)lo;
  if (v >= hi) /* 2^63 itself does not fit an int64_t */
    return hi >= 9223372036854775807.0 ? INT64_MAX : (int64_t)hi;
  return (int64_t)v;
}

static void convert(void *dst, clt_dtype to, const void *src, clt_dtype from, int64_t n) {
  if (to == from) {
    memcpy(dst, src, (size_t)n * clt_dtype_size(to));
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (clt__dtype_is_float(from)) {
      double v = from == CLT_F32 ? (double)((const float *)src)[i] : ((const double *)src)[i];
      switch (to) {
      case CLT_F32:
        ((float *)dst)[i] = (float)v; /* f64 to f32 rounds to nearest */
        break;
      case CLT_F64:
        ((double *)dst)[i] = v;
        break;
      case CLT_I32:
        ((int32_t *)dst)[i] = (int32_t)sat(v, -2147483648.0, 2147483647.0);
        break;
      case CLT_I64:
        ((int64_t *)dst)[i] = sat(v, -9223372036854775808.0, 9223372036854775807.0);
        break;
      case CLT_U8:
        ((uint8_t *)dst)[i] = (uint8_t)sat(v, 0.0, 255.0);
        break;
      case CLT_BOOL:
        ((uint8_t *)dst)[i] = v != 0;
        break;
      }
      continue;
    }
    int64_t v = from == CLT_I32   ? ((const int32_t *)src)[i]
                : from == CLT_I64 ? ((const int64_t *)src)[i]
                                  : ((const uint8_t *)src)[i];
    switch (to) {
    case CLT_F32:
      ((float *)dst)[i] = (float)v;
      break;
    case CLT_F64:
      ((double *)dst)[i] = (double)v;
      break;
    case CLT_I32:
      ((int32_t *)dst)[i] = (int32_t)(uint32_t)v; /* wraps, as OpenCL's cast */
      break;
    case CLT_I64:
      ((int64_t *)dst)[i] = v;
      break;
    case CLT_U8:
      ((uint8_t *)dst)[i] = (uint8_t)v;
      break;
    case CLT_BOOL:
      ((uint8_t *)dst)[i] = v != 0;
      break;
    }
  }
}

/* The operand's elements in dtype `to`: the tensor's own memory, or a converted copy in *tmp. */
static const void *as_dtype(const clt_tensor *t, clt_dtype to, void **tmp, const char *fn,
                            clt_status *st) {
  *tmp = NULL;
  if (t->dtype == to)
    return clt__host_ptr(t);
  size_t bytes = (size_t)t->numel * clt_dtype_size(to);
  *tmp = malloc(bytes ? bytes : 1);
  if (!*tmp) {
    *st = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory converting an operand");
    return NULL;
  }
  convert(*tmp, to, clt__host_ptr(t), t->dtype, t->numel);
  return *tmp;
}

/* Runs a strided inner loop over every row of the broadcast result. */
static void over_rows(const clt_bcast *bc, int64_t numel,
                      void (*row)(void *ctx, int64_t o, const int64_t *off, int64_t inner),
                      void *ctx, int nops) {
  int nd = bc->ndim;
  int64_t inner = nd ? bc->shape[nd - 1] : 1;
  int64_t outer = inner ? numel / inner : 0;
  int64_t idx[CLT_MAX_DIMS] = {0};
  for (int64_t o = 0; o < outer; o++) {
    int64_t off[3] = {0, 0, 0};
    for (int d = 0; d < nd - 1; d++)
      for (int k = 0; k < nops; k++)
        off[k] += idx[d] * bc->s[k][d];
    row(ctx, o * inner, off, inner);
    for (int d = nd - 2; d >= 0; d--) {
      if (++idx[d] < bc->shape[d])
        break;
      idx[d] = 0;
    }
  }
}

typedef struct rowctx {
  binary_fn f;
  char *o;
  const char *p[3];
  size_t es[3], eo;
  int64_t s[3];
} rowctx;

static void binary_row(void *c_, int64_t o, const int64_t *off, int64_t inner) {
  rowctx *c = c_;
  c->f(c->o + (size_t)o * c->eo, c->p[0] + (size_t)off[0] * c->es[0],
       c->p[1] + (size_t)off[1] * c->es[1], inner, c->s[0], c->s[1]);
}

static void where_row(void *c_, int64_t o, const int64_t *off, int64_t inner) {
  rowctx *c = c_;
  const uint8_t *k = (const uint8_t *)c->p[0] + off[0];
  const char *a = c->p[1] + (size_t)off[1] * c->es[1], *b = c->p[2] + (size_t)off[2] * c->es[2];
  char *out = c->o + (size_t)o * c->eo;
  size_t es = c->eo;
  for (int64_t i = 0; i < inner; i++)
    memcpy(out + (size_t)i * es,
           k[i * c->s[0]] ? a + (size_t)(i * c->s[1]) * es : b + (size_t)(i * c->s[2]) * es, es);
}

clt_status clt__host_elementwise(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                                 clt_dtype compute, const clt_bcast *bc) {
  const char *fn = op->fn;
  int n = op->arity;
  clt_status st = CLT_OK;
  for (int k = 0; k < n && st == CLT_OK; k++)
    st = clt__storage_host_wait(in[k]->storage, false, fn);
  if (st == CLT_OK)
    st = clt__storage_host_wait(out->storage, true, fn);
  if (st != CLT_OK)
    return st;
  if (op->kind == CLT__OP_CAST) {
    size_t ei = clt_dtype_size(in[0]->dtype), eo = clt_dtype_size(out->dtype);
    char *po = clt__host_ptr(out);
    const char *pi = clt__host_ptr(in[0]);
    CLT__FOR_PARTS(
        out->numel, lo, hi,
        convert(po + (size_t)lo * eo, out->dtype, pi + (size_t)lo * ei, in[0]->dtype, hi - lo));
    return CLT_OK;
  }
  void *tmp[3] = {NULL, NULL, NULL};
  const void *p[3] = {NULL, NULL, NULL};
  for (int k = 0; k < n; k++) {
    clt_dtype want = (n == 3 && k == 0) ? CLT_BOOL : compute;
    if (!(p[k] = as_dtype(in[k], want, &tmp[k], fn, &st)))
      goto done;
  }
  if (n == 1) {
    unary_fn f = unary_table[op->kind][compute];
    if (!f) {
      st = clt__error(CLT_ERR_INTERNAL, fn, "no host loop for %s", clt_dtype_name(compute));
      goto done;
    }
    size_t ei = clt_dtype_size(compute), eo = clt_dtype_size(out->dtype);
    char *po = clt__host_ptr(out);
    const char *pi = p[0];
    CLT__FOR_PARTS(out->numel, lo, hi, f(po + (size_t)lo * eo, pi + (size_t)lo * ei, hi - lo));
    goto done;
  }
  rowctx c = {.o = clt__host_ptr(out), .eo = clt_dtype_size(out->dtype)};
  for (int k = 0; k < n; k++) {
    c.p[k] = p[k];
    c.es[k] = (n == 3 && k == 0) ? 1 : clt_dtype_size(compute);
    c.s[k] = bc->ndim ? bc->s[k][bc->ndim - 1] : 0;
  }
  if (n == 2) {
    c.f = binary_table[op->kind][compute];
    if (!c.f) {
      st = clt__error(CLT_ERR_INTERNAL, fn, "no host loop for %s", clt_dtype_name(compute));
      goto done;
    }
    if (bc->same)
      CLT__FOR_PARTS(out->numel, lo, hi,
                     c.f(c.o + (size_t)lo * c.eo, c.p[0] + (size_t)lo * c.es[0],
                         c.p[1] + (size_t)lo * c.es[1], hi - lo, 1, 1));
    else
      over_rows(bc, out->numel, binary_row, &c, 2);
  } else {
    over_rows(bc, out->numel, where_row, &c, 3);
  }
done:
  for (int k = 0; k < 3; k++)
    free(tmp[k]);
  return st;
}
