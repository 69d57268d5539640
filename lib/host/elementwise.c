/* host/elementwise.c - binary elementwise operations on the host: one tight loop per (op,
 * dtype) that the compiler vectorizes, operands of another dtype converted first. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

/* T: element type; C: type computed in (unsigned twins for integers: overflow wraps). */
#define DEFINE_OP(name, T, C, EXPR)                                                                \
  static void name##_contig(void *o_, const void *a_, const void *b_, int64_t n) {                 \
    T *restrict o = o_;                                                                            \
    const T *restrict a = a_, *restrict b = b_;                                                    \
    for (int64_t i = 0; i < n; i++) {                                                              \
      C x = (C)a[i], y = (C)b[i];                                                                  \
      o[i] = (T)(EXPR);                                                                            \
    }                                                                                              \
  }                                                                                                \
  static void name##_strided(void *o_, const void *a_, const void *b_, int64_t n, int64_t sa,      \
                             int64_t sb) {                                                         \
    T *restrict o = o_;                                                                            \
    const T *a = a_, *b = b_;                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                              \
      C x = (C)a[i * sa], y = (C)b[i * sb];                                                        \
      o[i] = (T)(EXPR);                                                                            \
    }                                                                                              \
  }

#define DEFINE_ARITH(T, C, sfx)                                                                    \
  DEFINE_OP(add_##sfx, T, C, x + y)                                                                \
  DEFINE_OP(sub_##sfx, T, C, x - y)                                                                \
  DEFINE_OP(mul_##sfx, T, C, x *y)

DEFINE_ARITH(float, float, f32)
DEFINE_ARITH(double, double, f64)
DEFINE_ARITH(int32_t, uint32_t, i32)
DEFINE_ARITH(int64_t, uint64_t, i64)
DEFINE_ARITH(uint8_t, uint32_t, u8)
DEFINE_OP(div_f32, float, float, x / y)
DEFINE_OP(div_f64, double, double, x / y)
DEFINE_OP(add_bool, uint8_t, uint8_t, x | y)
DEFINE_OP(mul_bool, uint8_t, uint8_t, x &y)

typedef void (*contig_fn)(void *, const void *, const void *, int64_t);
typedef void (*strided_fn)(void *, const void *, const void *, int64_t, int64_t, int64_t);

#define ENTRY(op, sfx)                                                                             \
  { op##_##sfx##_contig, op##_##sfx##_strided }
#define NONE                                                                                       \
  { NULL, NULL }
static const struct {
  contig_fn contig;
  strided_fn strided;
} table[4][CLT_DTYPE_COUNT] = {
    [CLT__OP_ADD] = {[CLT_F32] = ENTRY(add, f32),
                     [CLT_F64] = ENTRY(add, f64),
                     [CLT_I32] = ENTRY(add, i32),
                     [CLT_I64] = ENTRY(add, i64),
                     [CLT_U8] = ENTRY(add, u8),
                     [CLT_BOOL] = ENTRY(add, bool)},
    [CLT__OP_SUB] = {[CLT_F32] = ENTRY(sub, f32),
                     [CLT_F64] = ENTRY(sub, f64),
                     [CLT_I32] = ENTRY(sub, i32),
                     [CLT_I64] = ENTRY(sub, i64),
                     [CLT_U8] = ENTRY(sub, u8),
                     [CLT_BOOL] = NONE},
    [CLT__OP_MUL] = {[CLT_F32] = ENTRY(mul, f32),
                     [CLT_F64] = ENTRY(mul, f64),
                     [CLT_I32] = ENTRY(mul, i32),
                     [CLT_I64] = ENTRY(mul, i64),
                     [CLT_U8] = ENTRY(mul, u8),
                     [CLT_BOOL] = ENTRY(mul, bool)},
    [CLT__OP_DIV] = {[CLT_F32] = ENTRY(div, f32), [CLT_F64] = ENTRY(div, f64)},
};

/* Converts n elements of dtype from at src into dtype to at dst. */
static void convert(void *dst, clt_dtype to, const void *src, clt_dtype from, int64_t n) {
#define LOAD(i)                                                                                    \
  (from == CLT_F32   ? (double)((const float *)src)[i]                                             \
   : from == CLT_F64 ? ((const double *)src)[i]                                                    \
   : from == CLT_I32 ? (double)((const int32_t *)src)[i]                                           \
                     : (double)((const uint8_t *)src)[i])
  for (int64_t i = 0; i < n; i++) {
    if (from == CLT_I64) { /* keep all 64 bits when going to an integer */
      int64_t v = ((const int64_t *)src)[i];
      switch (to) {
      case CLT_F32:
        ((float *)dst)[i] = (float)v;
        break;
      case CLT_F64:
        ((double *)dst)[i] = (double)v;
        break;
      case CLT_I32:
        ((int32_t *)dst)[i] = (int32_t)v;
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
      continue;
    }
    double v = LOAD(i);
    switch (to) {
    case CLT_F32:
      ((float *)dst)[i] = from == CLT_F64 ? (float)((const double *)src)[i] : (float)v;
      break;
    case CLT_F64:
      ((double *)dst)[i] = v;
      break;
    case CLT_I32:
      ((int32_t *)dst)[i] = (int32_t)v;
      break;
    case CLT_I64:
      ((int64_t *)dst)[i] = (int64_t)v;
      break;
    case CLT_U8:
      ((uint8_t *)dst)[i] = (uint8_t)(int64_t)v;
      break;
    case CLT_BOOL:
      ((uint8_t *)dst)[i] = v != 0;
      break;
    }
  }
#undef LOAD
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

clt_status clt__host_binary(const clt_binop *op, clt_tensor *out, const clt_tensor *a,
                            const clt_tensor *b, const clt_bcast *bc) {
  const char *fn = op->fn;
  clt_status st;
  if ((st = clt__storage_host_wait(a->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(b->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(out->storage, true, fn)) != CLT_OK)
    return st;
  contig_fn contig = table[op->kind][out->dtype].contig;
  strided_fn strided = table[op->kind][out->dtype].strided;
  if (!contig)
    return clt__error(CLT_ERR_INTERNAL, fn, "no host loop for %s", clt_dtype_name(out->dtype));
  void *ta, *tb;
  st = CLT_OK;
  const void *pa = as_dtype(a, out->dtype, &ta, fn, &st);
  const void *pb = pa ? as_dtype(b, out->dtype, &tb, fn, &st) : NULL;
  if (!pa || !pb) {
    free(ta);
    return st;
  }
  char *po = clt__host_ptr(out);
  size_t es = clt_dtype_size(out->dtype);
  if (bc->same) {
    contig(po, pa, pb, out->numel);
  } else {
    /* Walk the outer dimensions with an index, the innermost one with a strided loop. */
    int nd = bc->ndim;
    int64_t inner = nd ? bc->shape[nd - 1] : 1;
    int64_t isa = nd ? bc->sa[nd - 1] : 0, isb = nd ? bc->sb[nd - 1] : 0;
    int64_t outer = inner ? out->numel / inner : 0;
    int64_t idx[CLT_MAX_DIMS] = {0};
    for (int64_t o = 0; o < outer; o++) {
      int64_t offa = 0, offb = 0;
      for (int d = 0; d < nd - 1; d++) {
        offa += idx[d] * bc->sa[d];
        offb += idx[d] * bc->sb[d];
      }
      strided(po + (size_t)(o * inner) * es, (const char *)pa + (size_t)offa * es,
              (const char *)pb + (size_t)offb * es, inner, isa, isb);
      for (int d = nd - 2; d >= 0; d--) {
        if (++idx[d] < bc->shape[d])
          break;
        idx[d] = 0;
      }
    }
  }
  free(ta);
  free(tb);
  return CLT_OK;
}
