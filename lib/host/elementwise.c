/* SPDX-License-Identifier: MIT */
/* host/elementwise.c - elementwise operations on the host: one tight loop per (op, dtype) that
 * the compiler vectorizes; operands of another dtype are converted to the compute dtype first.
 * The semantics mirror kernels/elementwise.cl exactly (wrapping integers, NaN-propagating
 * maximum/minimum, saturating float-to-integer casts). */
#include "backend.h"

#include <stdlib.h>
#include <string.h>
#include <tgmath.h>
#ifdef __SSE2__
#include <xmmintrin.h>
#endif

/* ---- helpers the expressions of clt_ops.h use ---------------------------------------------- */

#define CLT_NA 0 /* never run: the dispatcher refuses the dtypes an op has no expression for */

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
static inline uint32_t ipow_u32(uint32_t a, uint32_t b) {
  return (uint32_t)ipow_u8((uint8_t)a, (uint8_t)b);
}
/* |INT_MIN| wraps back to INT_MIN, as OpenCL's abs does. */
static inline int32_t iabs_i32(int32_t x) { return x < 0 ? (int32_t)(0u - (uint32_t)x) : x; }
static inline int64_t iabs_i64(int64_t x) {
  return x < 0 ? (int64_t)((uint64_t)0 - (uint64_t)x) : x;
}
static inline uint32_t iabs_u(uint32_t x) { return x; }
#define CLT_IPOW(a, b)                                                                             \
  _Generic((a), int32_t : ipow_i32, int64_t : ipow_i64, uint8_t : ipow_u8, default : ipow_u32)(a, b)
#define CLT_IABS(a) _Generic((a), int32_t : iabs_i32, int64_t : iabs_i64, default : iabs_u)(a)
/* As kernels/common.cl's: -0 below +0, one result everywhere. */
#define CLT_FMAX(a, b) ((a) > (b) || ((a) == (b) && signbit(b)) ? (a) : (b))
#define CLT_FMIN(a, b) ((a) < (b) || ((a) == (b) && signbit(a)) ? (a) : (b))

/* ---- loops, one per (op, compute dtype), from the table ------------------------------------ */

/* Integers of WRAP forms compute in their unsigned twin (u8 in unsigned int, as C promotes). */
#define TCF_WRAP(S, U) U
#define TCF_WRAP_INPLACE(S, U) U
#define TCF_INPLACE(S, U) S
#define TCF_PLAIN(S, U) S
#define TCF_COND(S, U) S
/* The stored type of a result of compute type T, and the value stored. */
#define TO_PROMOTE(T) T
#define TO_FLOAT(T) T
#define TO_BOOL(T) uint8_t
#define ST_PROMOTE(e) (e)
#define ST_FLOAT(e) (e)
#define ST_BOOL(e) ((e) != 0)
/* The first operand of a COND op is the bool condition. */
#define TP0_COND(T) uint8_t
#define TP0_WRAP(T) T
#define TP0_WRAP_INPLACE(T) T
#define TP0_INPLACE(T) T
#define TP0_PLAIN(T) T

typedef clt__host_loop1 unary_fn;
typedef clt__host_loop2 binary_fn;
typedef clt__host_loop3 ternary_fn;

/* TP: the operands' type (the compute dtype's); TC: computed in; TO: stored as. The output may be
 * an operand itself (an op in place: the very same elements), so no pointer is restrict; the
 * contiguous loops are CLT__SIMD, iterations independent, an element read before it is stored. */
#define LOOP_1(fname, TP, TP0, TC_, TO, EXPR)                                                      \
  static void fname(void *o_, const void *a_, int64_t n) {                                         \
    typedef TC_ TC;                                                                                \
    TO *o = o_;                                                                                    \
    const TP *pa = a_;                                                                             \
    CLT__SIMD for (int64_t i = 0; i < n; i++) {                                                    \
      TC a = (TC)pa[i];                                                                            \
      (void)a;                                                                                     \
      o[i] = (TO)(EXPR);                                                                           \
    }                                                                                              \
  }
#define LOOP_2(fname, TP, TP0, TC_, TO, EXPR)                                                      \
  static void fname(void *o_, const void *a_, const void *b_, int64_t n, int64_t sa, int64_t sb) { \
    typedef TC_ TC;                                                                                \
    TO *o = o_;                                                                                    \
    const TP *pa = a_, *pb = b_;                                                                   \
    if (sa == 1 && sb == 1) {                                                                      \
      CLT__SIMD for (int64_t i = 0; i < n; i++) {                                                  \
        TC a = (TC)pa[i], b = (TC)pb[i];                                                           \
        (void)a, (void)b;                                                                          \
        o[i] = (TO)(EXPR);                                                                         \
      }                                                                                            \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                            \
        TC a = (TC)pa[i * sa], b = (TC)pb[i * sb];                                                 \
        (void)a, (void)b;                                                                          \
        o[i] = (TO)(EXPR);                                                                         \
      }                                                                                            \
    }                                                                                              \
  }
#define LOOP_3(fname, TP, TP0, TC_, TO, EXPR)                                                      \
  static void fname(void *o_, const void *a_, const void *b_, const void *c_, int64_t n,           \
                    const int64_t *s) {                                                            \
    typedef TC_ TC;                                                                                \
    TO *o = o_;                                                                                    \
    const TP0 *pa = a_;                                                                            \
    const TP *pb = b_, *pc = c_;                                                                   \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                                     \
      CLT__SIMD for (int64_t i = 0; i < n; i++) {                                                  \
        TP0 a = pa[i];                                                                             \
        TC b = (TC)pb[i], c = (TC)pc[i];                                                           \
        (void)a, (void)b, (void)c;                                                                 \
        o[i] = (TO)(EXPR);                                                                         \
      }                                                                                            \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                            \
        TP0 a = pa[i * s[0]];                                                                      \
        TC b = (TC)pb[i * s[1]], c = (TC)pc[i * s[2]];                                             \
        (void)a, (void)b, (void)c;                                                                 \
        o[i] = (TO)(EXPR);                                                                         \
      }                                                                                            \
    }                                                                                              \
  }

#define LOOPS_(name, arity, rule, form, f, i, b, ulps, doc)                                        \
  LOOP_##arity(h_##name##_f32, float, TP0_##form(float), float, TO_##rule(float), ST_##rule(f))    \
      LOOP_##arity(h_##name##_f64, double, TP0_##form(double), double, TO_##rule(double),          \
                   ST_##rule(f)) LOOP_##arity(h_##name##_i32, int32_t, TP0_##form(int32_t),        \
                                              TCF_##form(int32_t, uint32_t), TO_##rule(int32_t),   \
                                              ST_##rule(i))                                        \
          LOOP_##arity(h_##name##_i64, int64_t, TP0_##form(int64_t),                               \
                       TCF_##form(int64_t, uint64_t), TO_##rule(int64_t), ST_##rule(i))            \
              LOOP_##arity(h_##name##_u8, uint8_t, TP0_##form(uint8_t),                            \
                           TCF_##form(uint8_t, uint32_t), TO_##rule(uint8_t), ST_##rule(i))        \
                  LOOP_##arity(h_##name##_bool, uint8_t, uint8_t, uint8_t, uint8_t, ST_##rule(b))

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtype-limits"    /* u8 < 0 in relu and sign */
#pragma GCC diagnostic ignored "-Wbool-operation" /* the bool column of neg, never run */
CLT_ELEMENTWISE_OPS(LOOPS_)
#pragma GCC diagnostic pop

#define ROW_(name)                                                                                 \
  [CLT__OP_##name] = {                                                                             \
      [CLT_F32] = h_##name##_f32, [CLT_F64] = h_##name##_f64, [CLT_I32] = h_##name##_i32,          \
      [CLT_I64] = h_##name##_i64, [CLT_U8] = h_##name##_u8,   [CLT_BOOL] = h_##name##_bool},
#define ROW_1_1(name) ROW_(name)
#define ROW_1_2(name)
#define ROW_1_3(name)
#define ROW_2_1(name)
#define ROW_2_2(name) ROW_(name)
#define ROW_2_3(name)
#define ROW_3_1(name)
#define ROW_3_2(name)
#define ROW_3_3(name) ROW_(name)
#define UNARY_ROW_(name, arity, ...) ROW_1_##arity(name)
#define BINARY_ROW_(name, arity, ...) ROW_2_##arity(name)
#define TERNARY_ROW_(name, arity, ...) ROW_3_##arity(name)
static const unary_fn unary_table[CLT__OP_COUNT][CLT_DTYPE_COUNT] = {
    CLT_ELEMENTWISE_OPS(UNARY_ROW_)};
static const binary_fn binary_table[CLT__OP_COUNT][CLT_DTYPE_COUNT] = {
    CLT_ELEMENTWISE_OPS(BINARY_ROW_)};
static const ternary_fn ternary_table[CLT__OP_COUNT][CLT_DTYPE_COUNT] = {
    CLT_ELEMENTWISE_OPS(TERNARY_ROW_)};

void clt__host_loops(clt_op_kind k, clt_dtype c, clt__host_loop1 *f1, clt__host_loop2 *f2,
                     clt__host_loop3 *f3) {
  *f1 = unary_table[k][c];
  *f2 = binary_table[k][c];
  *f3 = ternary_table[k][c];
}

/* ---- conversion (casts and operand promotion) ---------------------------------------------- */

/* float to integer: truncate toward zero, saturate, NaN gives 0 (OpenCL's convert_T_sat_rtz).
 * One expression, so that the loops below vectorize it. */
static inline int64_t sat(double v, double lo, double hi) {
  /* 2^63 itself does not fit an int64_t */
  int64_t top = hi >= 9223372036854775807.0 ? INT64_MAX : (int64_t)hi;
  return isnan(v) ? 0 : v <= lo ? (int64_t)lo : v >= hi ? top : (int64_t)v;
}
/* The same for a range inside int32_t's (i32, u8), through a conversion to int32_t. */
static inline int32_t sat32(double v, double lo, double hi) {
  return isnan(v) ? 0 : v <= lo ? (int32_t)lo : v >= hi ? (int32_t)hi : (int32_t)v;
}

/* Conversions, one loop per (from, to): an element is read as a double (float dtypes) or an
 * int64_t (integer dtypes and bool), then stored. Float to integer saturates (sat); integer to
 * integer wraps, as OpenCL's casts; f64 to f32 rounds to nearest; f64 to f16 or bf16 goes through
 * f32, as the kernels and PyTorch do. */
#define LD_F32(x) (double)(x)
#define LD_F64(x) (x)
#define LD_F16(x) (double)clt__f16_to_f32(x)
#define LD_BF16(x) (double)clt__bf16_to_f32(x)
#define LD_I32(x) (int64_t)(x)
#define LD_I64(x) (x)
#define LD_U8(x) (int64_t)(x)
#define LD_BOOL LD_U8
#define SF_F32(v) (float)(v)
#define SF_F64(v) (double)(v)
#define SF_I32(v) sat32(v, -2147483648.0, 2147483647.0)
#define SF_I64(v) sat(v, -9223372036854775808.0, 9223372036854775807.0)
#define SF_U8(v) (uint8_t) sat32(v, 0.0, 255.0)
#define SF_BOOL(v) (uint8_t)((v) != 0)
#define SF_F16(v) clt__f32_to_f16((float)(v))
#define SF_BF16(v) clt__f32_to_bf16((float)(v))
#define SI_F32(v) (float)(v)
#define SI_F64(v) (double)(v)
#define SI_I32(v) (int32_t)(uint32_t)(v)
#define SI_I64(v) (v)
#define SI_U8(v) (uint8_t)(v)
#define SI_BOOL(v) (uint8_t)((v) != 0)
#define SI_F16(v) clt__f32_to_f16((float)(v))
#define SI_BF16(v) clt__f32_to_bf16((float)(v))
#define CV_LOOP(from, TF, to, V, S, TT)                                                            \
  static void cv_##from##_##to(void *d_, const void *s_, int64_t n) {                              \
    TT *d = d_;                                                                                    \
    const TF *s = s_;                                                                              \
    CLT__SIMD for (int64_t i = 0; i < n; i++) {                                                    \
      V v = LD_##from(s[i]);                                                                       \
      d[i] = S##to(v);                                                                             \
    }                                                                                              \
  }
#define CV_FROM(from, TF, V, S)                                                                    \
  CV_LOOP(from, TF, F32, V, S, float)                                                              \
  CV_LOOP(from, TF, F64, V, S, double)                                                             \
  CV_LOOP(from, TF, I32, V, S, int32_t)                                                            \
  CV_LOOP(from, TF, I64, V, S, int64_t)                                                            \
  CV_LOOP(from, TF, U8, V, S, uint8_t)                                                             \
  CV_LOOP(from, TF, BOOL, V, S, uint8_t)                                                           \
  CV_LOOP(from, TF, F16, V, S, uint16_t)                                                           \
  CV_LOOP(from, TF, BF16, V, S, uint16_t)
CV_FROM(F32, float, double, SF_)
CV_FROM(F64, double, double, SF_)
CV_FROM(F16, uint16_t, double, SF_)
CV_FROM(BF16, uint16_t, double, SF_)
CV_FROM(I32, int32_t, int64_t, SI_)
CV_FROM(I64, int64_t, int64_t, SI_)
CV_FROM(U8, uint8_t, int64_t, SI_)
CV_FROM(BOOL, uint8_t, int64_t, SI_)
#define CV_ROW(from)                                                                               \
  [CLT_##from] = {                                                                                 \
      [CLT_F32] = cv_##from##_F32, [CLT_F64] = cv_##from##_F64,  [CLT_I32] = cv_##from##_I32,      \
      [CLT_I64] = cv_##from##_I64, [CLT_U8] = cv_##from##_U8,    [CLT_BOOL] = cv_##from##_BOOL,    \
      [CLT_F16] = cv_##from##_F16, [CLT_BF16] = cv_##from##_BF16}
static void (*const convert_loop[CLT_DTYPE_COUNT][CLT_DTYPE_COUNT])(void *, const void *,
                                                                    int64_t) = {
    CV_ROW(F32), CV_ROW(F64),  CV_ROW(I32), CV_ROW(I64),
    CV_ROW(U8),  CV_ROW(BOOL), CV_ROW(F16), CV_ROW(BF16)};

void clt__host_convert(void *dst, clt_dtype to, const void *src, clt_dtype from, int64_t n) {
  if (to == from)
    memcpy(dst, src, (size_t)n * clt_dtype_size(to));
  else
    convert_loop[from][to](dst, src, n);
}

/* An f32 copy of an operand of an f16 or bf16 operation (compute dtype narrow): the operand is
 * first converted to narrow (an i32 operand of an f16 add is rounded to f16, as PyTorch does),
 * then widened exactly. */
static void *narrow_operand_f32(const clt_tensor *t, clt_dtype narrow, const char *fn,
                                clt_status *st) {
  size_t bytes = (size_t)t->numel * sizeof(float);
  float *f = malloc(bytes ? bytes : 1);
  if (!f) {
    *st = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory converting an operand");
    return NULL;
  }
  clt__host_convert(f, CLT_F32, clt__host_ptr(t), t->dtype, t->numel);
  if (t->dtype != narrow)
    for (int64_t i = 0; i < t->numel; i++)
      f[i] = narrow == CLT_F16 ? clt__f16_to_f32(clt__f32_to_f16(f[i]))
                               : clt__bf16_to_f32(clt__f32_to_bf16(f[i]));
  return f;
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
  clt__host_convert(*tmp, to, clt__host_ptr(t), t->dtype, t->numel);
  return *tmp;
}

typedef void (*row_fn)(void *ctx, int64_t o, const int64_t *off, int64_t inner);

/* Runs a strided inner loop over every row of the broadcast result (contiguous: row r starts at
 * element r * inner), the rows shared among the threads. */
static void over_rows(const clt_bcast *bc, int64_t numel, row_fn row, void *ctx, int nops) {
  int nd = bc->ndim;
  int64_t inner = nd ? bc->shape[nd - 1] : 1;
  int64_t outer = inner ? numel / inner : 0;
  int64_t parts = clt__host_parts(numel);
  if (parts > outer)
    parts = outer;
#define ROWS_(lo, hi)                                                                              \
  do {                                                                                             \
    int64_t idx[CLT_MAX_DIMS] = {0}, rem = (lo);                                                   \
    for (int d = nd - 2; d >= 0; d--) {                                                            \
      idx[d] = rem % bc->shape[d];                                                                 \
      rem /= bc->shape[d];                                                                         \
    }                                                                                              \
    for (int64_t o = (lo); o < (hi); o++) {                                                        \
      int64_t off[3] = {0, 0, 0};                                                                  \
      for (int d = 0; d < nd - 1; d++)                                                             \
        for (int k = 0; k < nops; k++)                                                             \
          off[k] += idx[d] * bc->s[k][d];                                                          \
      row(ctx, o *inner, off, inner);                                                              \
      for (int d = nd - 2; d >= 0; d--) {                                                          \
        if (++idx[d] < bc->shape[d])                                                               \
          break;                                                                                   \
        idx[d] = 0;                                                                                \
      }                                                                                            \
    }                                                                                              \
  } while (0)
  if (parts <= 1) {
    ROWS_(0, outer);
    return;
  }
  CLT__PARALLEL_FOR
  for (int64_t p = 0; p < parts; p++) {
    int64_t lo = outer * p / parts, hi = outer * (p + 1) / parts;
    ROWS_(lo, hi);
  }
#undef ROWS_
}

/* The operands (bit k for operand k) of bc that step through its last dimension by more than
 * through the one before it, and not by 0: transposed views, read across their rows. */
static int across_operands(const clt_bcast *bc, int nops) {
  int mask = 0, last = bc->ndim - 1;
  if (bc->ndim < 2)
    return 0;
  for (int k = 0; k < nops; k++)
    if (bc->s[k][last - 1] > 0 && bc->s[k][last - 1] < bc->s[k][last])
      mask |= 1 << k;
  return mask;
}

typedef struct rowctx {
  binary_fn f;
  ternary_fn g;
  char *o;
  const char *p[3];
  size_t es[3], eo;
  int64_t s[3];
} rowctx;

/* ---- strips, for operands read across their rows (transposed views) ------------------------
 * An operand read across its rows (across_operands: a transposed view) moves to another cache
 * line at every element of a result row. Such work is cut into strips of at most STRIP_ROWS
 * rows by STRIP_COLS columns of the result; each across operand's part of a strip is first
 * transposed into a buffer of the thread's (tile_transpose), then the strip's rows are computed
 * (or copied) from it along the result's rows. The sizes, measured on a 4096 x 4096 f32
 * transposed add (a standalone copy of these loops on a 2-core Xeon, one thread, memory on huge
 * pages as clt's; profiles of bench/views):
 *   - a source line (64 B) is used up while it is in the L1 cache: tile_transpose reads the
 *     strip's source lines 4 at a time, each along its STRIP_ROWS elements (64 rows: 4 lines
 *     of f32, which the L2 cache's adjacent-line prefetch fetches in pairs);
 *   - the buffer's rows are STRIP_PAD bytes longer than the strip: 1024 f32 are 4 KiB, and rows
 *     a multiple of 4 KiB apart share one set of the L1 cache (12 ways), so that a 64-row
 *     buffer evicts itself at every store (the transposition took 14 ms instead of 6.5);
 *   - the result's and the other operands' rows are STRIP_COLS long: the op's loop (or memcpy)
 *     starts every row at the same address modulo 4 KiB as the row before it in the result and
 *     in a contiguous operand (rows of 4096 f32, 16 KiB), and a load that follows recent
 *     stores at the same address modulo 4 KiB waits for them (4K aliasing); in 64-element rows
 *     (the tiles before) the add's own loop took 3 times as long as along whole rows.
 * 64 x 1024 strips: 22 ms against 13 ms for the contiguous add (before tile_transpose's
 * prefetch); 64 x 64 tiles in 512 x 512 blocks took 64 ms. */
#define STRIP_ROWS 64
#define STRIP_COLS 1024
#define STRIP_PAD 64
#define STRIP_PREFETCH 8 /* source lines ahead, in tile_transpose */

/* The row stride, in elements, of a strip buffer of elements of es bytes for w columns. */
static int64_t strip_stride(int64_t w, size_t es) { return w + (int64_t)(STRIP_PAD / es); }

/* The bytes of a strip buffer for h x w elements of es bytes, a multiple of 64. */
static size_t strip_bytes(int64_t h, int64_t w, size_t es) {
  return ((size_t)(h * strip_stride(w, es)) * es + 63) / 64 * 64;
}

/* o[i * ow + j] = p[i * sr + j * sc] for i < h, j < w: a strip of an operand read across its
 * rows (sr < sc), elements of es bytes, into a buffer written along its rows. The source is read
 * a line at a time (j outer: 4 lines at a time, each along its h elements), so each of its cache
 * lines is fetched once. 4-byte elements one column apart (sr == 1, a transposed view) move in
 * 4 x 4 blocks transposed in SSE registers: one 16-byte load per source line and one store per
 * buffer row, instead of an element at a time. */
static void tile_transpose(char *o, int64_t ow, const char *p, int64_t sr, int64_t sc, int64_t h,
                           int64_t w, size_t es) {
  int64_t h4 = 0, w4 = 0;
#ifdef __SSE2__
  if (es == 4 && sr == 1) {
    float *fo = (float *)o;
    const float *fp = (const float *)p;
    h4 = h & ~(int64_t)3;
    w4 = w & ~(int64_t)3;
    for (int64_t j = 0; j < w4; j += 4) {
      /* the source lines 8 columns on: no hardware prefetcher follows a 16 KiB stride (a
       * 4096 x 4096 transposed f32 strip: 11.5 ms without, 6 with) */
      if (j + 4 + STRIP_PREFETCH <= w)
        for (int64_t k = j + STRIP_PREFETCH; k < j + STRIP_PREFETCH + 4; k++)
          for (int64_t i = 0; i < h; i += 16)
            _mm_prefetch((const char *)(fp + i + k * sc), _MM_HINT_T0);
      for (int64_t i = 0; i < h4; i += 4) {
        const float *q = fp + i + j * sc;
        __m128 r0 = _mm_loadu_ps(q), r1 = _mm_loadu_ps(q + sc), r2 = _mm_loadu_ps(q + 2 * sc),
               r3 = _mm_loadu_ps(q + 3 * sc);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3); /* bit moves only: any 4-byte dtype */
        float *d = fo + i * ow + j;
        _mm_storeu_ps(d, r0);
        _mm_storeu_ps(d + ow, r1);
        _mm_storeu_ps(d + 2 * ow, r2);
        _mm_storeu_ps(d + 3 * ow, r3);
      }
    }
  }
#endif
  /* what the blocks left, a source line at a time: the rows from h4 of the columns below w4,
   * and the columns from w4 */
#define TRANSPOSE_REST_(T)                                                                         \
  for (int64_t j = 0; j < w; j++)                                                                  \
    for (int64_t i = j < w4 ? h4 : 0; i < h; i++)                                                  \
      ((T *)o)[i * ow + j] = ((const T *)p)[i * sr + j * sc];
  switch (es) {
  case 1:
    TRANSPOSE_REST_(uint8_t)
    break;
  case 2:
    TRANSPOSE_REST_(uint16_t)
    break;
  case 4:
    TRANSPOSE_REST_(uint32_t)
    break;
  default:
    TRANSPOSE_REST_(uint64_t)
    break;
  }
#undef TRANSPOSE_REST_
}

/* The row loops of a binary or ternary op (c->f or c->g) over a result with an operand read
 * across its rows (across_operands, bits in mask), in strips (above): the strips of the last two
 * dimensions, over the batch, are shared among the threads; each across operand's part of a
 * strip is transposed into the thread's buffer, so that the row loops read it contiguously.
 * Returns CLT_ERR_OUT_OF_MEMORY, reporting nothing, when the buffers cannot be allocated. */
static clt_status over_strips(const clt_bcast *bc, int64_t numel, const rowctx *c, int nops,
                              int mask) {
  int last = bc->ndim - 1;
  int64_t rows = bc->shape[last - 1], cols = bc->shape[last];
  int64_t sh = rows < STRIP_ROWS ? rows : STRIP_ROWS, sw = cols < STRIP_COLS ? cols : STRIP_COLS;
  int64_t nsr = (rows + sh - 1) / sh, nsc = (cols + sw - 1) / sw;
  int64_t units = numel / rows / cols * nsr * nsc, parts = clt__host_parts(numel);
  if (parts > units)
    parts = units;
  size_t at[3] = {0, 0, 0}, per = 0; /* operand k's buffer at byte at[k] of a part's */
  for (int k = 0; k < nops; k++)
    if (mask >> k & 1) {
      at[k] = per;
      per += strip_bytes(sh, sw, c->es[k]);
    }
  char *mem = aligned_alloc(64, (size_t)parts * per);
  if (!mem)
    return CLT_ERR_OUT_OF_MEMORY; /* over_elements walks the rows instead */
#define STRIPS_(lo, hi, buf)                                                                       \
  for (int64_t u = (lo); u < (hi); u++) {                                                          \
    int64_t c0 = u % nsc * sw, q = u / nsc, r0 = q % nsr * sh, rem = q / nsr;                      \
    int64_t base[3] = {0, 0, 0}, obase = rem * rows * cols;                                        \
    for (int d = last - 2; d >= 0; d--) {                                                          \
      int64_t cd = rem % bc->shape[d];                                                             \
      rem /= bc->shape[d];                                                                         \
      for (int k = 0; k < nops; k++)                                                               \
        base[k] += cd * bc->s[k][d];                                                               \
    }                                                                                              \
    int64_t h = r0 + sh < rows ? sh : rows - r0, w = c0 + sw < cols ? sw : cols - c0;              \
    const char *tp[3];                                                                             \
    int64_t st[3], rs[3];                                                                          \
    for (int k = 0; k < nops; k++) {                                                               \
      int64_t sr = bc->s[k][last - 1], sc = bc->s[k][last];                                        \
      tp[k] = c->p[k] + (size_t)(base[k] + r0 * sr + c0 * sc) * c->es[k];                          \
      st[k] = sc;                                                                                  \
      rs[k] = sr;                                                                                  \
      if (mask >> k & 1) {                                                                         \
        rs[k] = strip_stride(sw, c->es[k]);                                                        \
        tile_transpose((buf) + at[k], rs[k], tp[k], sr, sc, h, w, c->es[k]);                       \
        tp[k] = (buf) + at[k];                                                                     \
        st[k] = 1;                                                                                 \
      }                                                                                            \
    }                                                                                              \
    for (int64_t r = 0; r < h; r++) {                                                              \
      char *orow = c->o + (size_t)(obase + (r0 + r) * cols + c0) * c->eo;                          \
      const char *pr[3];                                                                           \
      for (int k = 0; k < nops; k++)                                                               \
        pr[k] = tp[k] + (size_t)(r * rs[k]) * c->es[k];                                            \
      if (nops == 2)                                                                               \
        c->f(orow, pr[0], pr[1], w, st[0], st[1]);                                                 \
      else                                                                                         \
        c->g(orow, pr[0], pr[1], pr[2], w, st);                                                    \
    }                                                                                              \
  }
  if (parts <= 1) {
    STRIPS_(0, units, mem)
  } else {
    CLT__PARALLEL_FOR
    for (int64_t p = 0; p < parts; p++) {
      int64_t lo = units * p / parts, hi = units * (p + 1) / parts;
      STRIPS_(lo, hi, mem + (size_t)p * per)
    }
  }
#undef STRIPS_
  free(mem);
  return CLT_OK;
}

static void binary_row(void *c_, int64_t o, const int64_t *off, int64_t inner) {
  rowctx *c = c_;
  c->f(c->o + (size_t)o * c->eo, c->p[0] + (size_t)off[0] * c->es[0],
       c->p[1] + (size_t)off[1] * c->es[1], inner, c->s[0], c->s[1]);
}

static void ternary_row(void *c_, int64_t o, const int64_t *off, int64_t inner) {
  rowctx *c = c_;
  c->g(c->o + (size_t)o * c->eo, c->p[0] + (size_t)off[0] * c->es[0],
       c->p[1] + (size_t)off[1] * c->es[1], c->p[2] + (size_t)off[2] * c->es[2], inner, c->s);
}

/* The row loops of a binary or ternary op: in strips where an operand is read across its rows
 * and the result is large, else (or when the strips' buffers cannot be allocated: the same bits,
 * slower, and never a failure) row by row (row: binary_row or ternary_row). */
static void over_elements(const clt_bcast *bc, int64_t numel, rowctx *c, row_fn row, int nops) {
  int mask = numel >= (1 << 14) ? across_operands(bc, nops) : 0;
  if (!mask || over_strips(bc, numel, c, nops, mask) != CLT_OK)
    over_rows(bc, numel, row, c, nops);
}

/* ---- views ------------------------------------------------------------------------------ */

/* Copies the rows [lo, hi) of a strided copy: row r is the index r over shape[0 .. nd-2]. */
static void copy_rows(char *dst, const int64_t *ds, const char *src, const int64_t *ss,
                      const int64_t *shape, int nd, size_t es, int64_t lo, int64_t hi) {
  int64_t inner = nd ? shape[nd - 1] : 1, di = nd ? ds[nd - 1] : 0, si = nd ? ss[nd - 1] : 0;
  for (int64_t r = lo; r < hi; r++) {
    int64_t od = 0, os = 0, rem = r;
    for (int d = nd - 2; d >= 0; d--) {
      int64_t c = rem % shape[d];
      rem /= shape[d];
      od += c * ds[d];
      os += c * ss[d];
    }
    char *o = dst + (size_t)od * es;
    const char *p = src + (size_t)os * es;
#define COPY_ROW_(T)                                                                               \
  for (int64_t i = 0; i < inner; i++)                                                              \
    ((T *)o)[i * di] = ((const T *)p)[i * si];
    switch (es) {
    case 1:
      COPY_ROW_(uint8_t)
      break;
    case 2:
      COPY_ROW_(uint16_t)
      break;
    case 4:
      COPY_ROW_(uint32_t)
      break;
    default:
      COPY_ROW_(uint64_t)
      break;
    }
#undef COPY_ROW_
  }
}

/* Copies the rows [lo, hi) of a 2-D strided copy whose source is read across its rows (the
 * source's stride along a row is not 1: a transposed view), in strips (see over_strips): each
 * strip goes through tile_transpose into buf (strip_bytes of the strip), then along its rows
 * into the destination, by memcpy where the destination's rows are contiguous. */
static void copy_strips(char *dst, const int64_t *ds, const char *src, const int64_t *ss,
                        int64_t cols, size_t es, int64_t lo, int64_t hi, char *buf) {
  int64_t bw = strip_stride(cols < STRIP_COLS ? cols : STRIP_COLS, es);
  for (int64_t rt = lo; rt < hi; rt += STRIP_ROWS) {
    int64_t h = rt + STRIP_ROWS < hi ? STRIP_ROWS : hi - rt;
    for (int64_t ct = 0; ct < cols; ct += STRIP_COLS) {
      int64_t w = ct + STRIP_COLS < cols ? STRIP_COLS : cols - ct;
      tile_transpose(buf, bw, src + (size_t)(rt * ss[0] + ct * ss[1]) * es, ss[0], ss[1], h, w, es);
      for (int64_t r = 0; r < h; r++) {
        char *o = dst + (size_t)((rt + r) * ds[0] + ct * ds[1]) * es;
        const char *p = buf + (size_t)(r * bw) * es;
        if (ds[1] == 1) {
          memcpy(o, p, (size_t)w * es);
          continue;
        }
#define COPY_STRIP_ROW_(T)                                                                         \
  for (int64_t j = 0; j < w; j++)                                                                  \
    ((T *)o)[j * ds[1]] = ((const T *)p)[j];
        switch (es) {
        case 1:
          COPY_STRIP_ROW_(uint8_t)
          break;
        case 2:
          COPY_STRIP_ROW_(uint16_t)
          break;
        case 4:
          COPY_STRIP_ROW_(uint32_t)
          break;
        default:
          COPY_STRIP_ROW_(uint64_t)
          break;
        }
#undef COPY_STRIP_ROW_
      }
    }
  }
}

/* dst[i] = src[i] for every index i of shape, each at its own strides (elements of es bytes).
 * The rows are shared among the threads by the element count (a 4096 x 4096 copy has only 4096
 * rows, fewer than CLT__PAR_MIN). Never fails (returns CLT_OK): a transposed copy whose
 * strip buffers cannot be allocated walks the rows instead. */
static clt_status strided_copy(void *dst, const int64_t *dstr, const void *src, const int64_t *sstr,
                               const int64_t *shape, int nd, size_t es) {
  clt_bcast b = {.ndim = nd};
  int64_t numel = 1;
  for (int d = 0; d < nd; d++) {
    b.shape[d] = shape[d];
    b.so[d] = dstr[d];
    b.s[0][d] = sstr[d];
    numel *= shape[d];
  }
  if (numel == 0)
    return CLT_OK;
  clt__bcast_memory_order(&b, 1); /* a transposed destination is written along its rows */
  clt__bcast_coalesce(&b, 1);
  int64_t inner = b.ndim ? b.shape[b.ndim - 1] : 1, rows = numel / inner;
  if (b.ndim == 1 && b.so[0] == 1 && b.s[0][0] == 1) {
    memcpy(dst, src, (size_t)numel * es);
    return CLT_OK;
  }
  bool strips = b.ndim == 2 && across_operands(&b, 1);
  int64_t parts = clt__host_parts(numel);
  if (parts > rows)
    parts = rows;
  size_t per = 0;
  char *mem = NULL;
  if (strips) {
    per = strip_bytes(rows < STRIP_ROWS ? rows : STRIP_ROWS,
                      inner < STRIP_COLS ? inner : STRIP_COLS, es);
    /* without its buffers the copy walks the rows, slower but the same bits: it never fails, so
     * that it can run where no error can be reported (a native command, opencl/elementwise.c) */
    if (!(mem = aligned_alloc(64, (size_t)parts * per)))
      strips = false;
  }
#define COPY_PART_(lo, hi, buf)                                                                    \
  (strips ? copy_strips(dst, b.so, src, b.s[0], inner, es, lo, hi, buf)                            \
          : copy_rows(dst, b.so, src, b.s[0], b.shape, b.ndim, es, lo, hi))
  if (parts <= 1) {
    COPY_PART_(0, rows, mem);
  } else {
    CLT__PARALLEL_FOR
    for (int64_t k = 0; k < parts; k++) {
      int64_t lo, hi;
      clt__part(rows, parts, k, &lo, &hi);
      COPY_PART_(lo, hi, mem + (size_t)k * per);
    }
  }
#undef COPY_PART_
  free(mem);
  return CLT_OK;
}

/* A contiguous host copy of the view t (which lives on the host). */
static clt_status gather(const clt_tensor *t, const char *fn, clt_tensor **out) {
  clt_status s = clt__tensor_new(t->dtype, t->ndim, t->shape, clt_cpu(), fn, out);
  if (s == CLT_OK &&
      (s = strided_copy(clt__host_ptr(*out), (*out)->strides, clt__host_ptr(t), t->strides,
                        t->shape, t->ndim, clt_dtype_size(t->dtype))) != CLT_OK) {
    clt_tensor_release(*out);
    *out = NULL;
  }
  return s;
}

static clt_status elementwise_contiguous_out(const clt_op *op, clt_tensor *out,
                                             clt_tensor *const *in, clt_dtype compute,
                                             const clt_bcast *bc);

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
  return clt__host_elementwise_run(op, out, in, compute, bc);
}

bool clt__host_elementwise_direct(const clt_op *op, const clt_tensor *out, clt_tensor *const *in,
                                  clt_dtype compute) {
  if (op->kind == CLT__OP_cast)
    return in[0]->dtype == out->dtype; /* strided_copy */
  if (op->arity < 2 || clt__dtype_is_half(compute) || clt__dtype_is_half(out->dtype) ||
      !out->contiguous)
    return false;
  for (int k = 0; k < op->arity; k++)
    if (in[k]->dtype != ((op->cond && k == 0) ? CLT_BOOL : compute))
      return false; /* gathered or converted first: allocations */
  return true;
}

clt_status clt__host_elementwise_run(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                                     clt_dtype compute, const clt_bcast *bc) {
  const char *fn = op->fn;
  int n = op->arity;
  clt_status st = CLT_OK;
  /* A copy (a cast to the same dtype: clt_contiguous, clt_clone, clt_cat, clt_copy) goes from
   * the operand's strides to the result's in one pass, not through a gathered copy. */
  if (op->kind == CLT__OP_cast && in[0]->dtype == out->dtype)
    return strided_copy(clt__host_ptr(out), out->strides, clt__host_ptr(in[0]), in[0]->strides,
                        out->shape, out->ndim, clt_dtype_size(out->dtype));
  /* Operands the loops cannot read through their strides (a unary op's or a cast's, or one that
   * is converted first) are gathered into contiguous copies; a result that is not contiguous is
   * computed contiguous, then scattered. */
  clt_tensor *g[3] = {NULL, NULL, NULL}, *use[3] = {NULL, NULL, NULL}, *tmp_out = NULL;
  clt_bcast b = *bc;
  bool half = clt__dtype_is_half(compute);
  for (int k = 0; k < n && st == CLT_OK; k++) {
    use[k] = in[k];
    clt_dtype want = (op->cond && k == 0) ? CLT_BOOL : compute;
    /* binary and ternary ops read operands of their compute dtype through their strides
     * (over_elements: in strips where an operand is read across its rows, a transposed view) */
    if (in[k]->contiguous || (n > 1 && !half && in[k]->dtype == want))
      continue;
    if ((st = gather(in[k], fn, &g[k])) != CLT_OK)
      break;
    use[k] = g[k];
    int lead = b.ndim - g[k]->ndim;
    for (int d = 0; d < b.ndim; d++) {
      int dk = d - lead;
      b.s[k][d] = dk < 0 || (g[k]->shape[dk] == 1 && b.shape[d] != 1) ? 0 : g[k]->strides[dk];
    }
    b.off[k] = 0;
  }
  if (st == CLT_OK && !out->contiguous)
    st = clt__tensor_new(out->dtype, out->ndim, out->shape, clt_cpu(), fn, &tmp_out);
  if (st == CLT_OK) {
    b.same = true; /* the fast loops: no broadcasting, every operand contiguous */
    for (int k = 0; k < n; k++)
      b.same = b.same && use[k]->contiguous && use[k]->ndim == b.ndim &&
               memcmp(use[k]->shape, b.shape, sizeof(int64_t) * b.ndim) == 0;
    st = elementwise_contiguous_out(op, tmp_out ? tmp_out : out, use, compute, &b);
  }
  if (st == CLT_OK && tmp_out)
    st = strided_copy(clt__host_ptr(out), out->strides, clt__host_ptr(tmp_out), tmp_out->strides,
                      out->shape, out->ndim, clt_dtype_size(out->dtype));
  clt_tensor_release(tmp_out);
  for (int k = 0; k < 3; k++)
    clt_tensor_release(g[k]);
  return st;
}

/* The loops, for a contiguous result; operands are contiguous where the loop needs them to be
 * (unary ops, casts, converted operands) and strided otherwise (bc). */
static clt_status elementwise_contiguous_out(const clt_op *op, clt_tensor *out,
                                             clt_tensor *const *in, clt_dtype compute,
                                             const clt_bcast *bc_) {
  const char *fn = op->fn;
  int n = op->arity;
  clt_status st = CLT_OK;
  clt_bcast bcc = *bc_, *bc = &bcc;
  memcpy(bc->so, out->strides, sizeof bc->so);
  clt__bcast_coalesce(bc, n);
  if (op->kind == CLT__OP_cast) {
    size_t ei = clt_dtype_size(in[0]->dtype), eo = clt_dtype_size(out->dtype);
    char *po = clt__host_ptr(out);
    const char *pi = clt__host_ptr(in[0]);
    CLT__FOR_PARTS(out->numel, lo, hi,
                   clt__host_convert(po + (size_t)lo * eo, out->dtype, pi + (size_t)lo * ei,
                                     in[0]->dtype, hi - lo));
    return CLT_OK;
  }
  void *tmp[3] = {NULL, NULL, NULL};
  const void *p[3] = {NULL, NULL, NULL};
  /* f16 and bf16: the f32 loops over f32 copies of the operands, the result rounded at the end */
  clt_dtype narrow = clt__dtype_is_half(compute) ? compute : CLT_F32;
  if (narrow != CLT_F32)
    compute = CLT_F32;
  void *wide_out = NULL; /* the f32 result of an op whose result is narrow */
  char *obase = clt__host_ptr(out);
  clt_dtype odt = out->dtype;
  for (int k = 0; k < n; k++) {
    clt_dtype want = (op->cond && k == 0) ? CLT_BOOL : compute;
    if (narrow != CLT_F32 && want != CLT_BOOL)
      p[k] = tmp[k] = narrow_operand_f32(in[k], narrow, fn, &st);
    else
      p[k] = as_dtype(in[k], want, &tmp[k], fn, &st);
    if (!p[k])
      goto done;
  }
  if (clt__dtype_is_half(out->dtype)) {
    size_t bytes = (size_t)out->numel * sizeof(float);
    if (!(wide_out = malloc(bytes ? bytes : 1))) {
      st = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory for an f32 result");
      goto done;
    }
    obase = wide_out;
    odt = CLT_F32;
  }
  if (n == 1) {
    unary_fn f = unary_table[op->kind][compute];
    if (!f) {
      st = clt__error(CLT_ERR_INTERNAL, fn, "no host loop for %s", clt_dtype_name(compute));
      goto done;
    }
    size_t ei = clt_dtype_size(compute), eo = clt_dtype_size(odt);
    char *po = obase;
    const char *pi = p[0];
    CLT__FOR_PARTS(out->numel, lo, hi, f(po + (size_t)lo * eo, pi + (size_t)lo * ei, hi - lo));
    goto done;
  }
  rowctx c = {.o = obase, .eo = clt_dtype_size(odt)};
  for (int k = 0; k < n; k++) {
    c.p[k] = p[k];
    c.es[k] = (op->cond && k == 0) ? 1 : clt_dtype_size(compute);
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
      over_elements(bc, out->numel, &c, binary_row, 2);
  } else {
    c.g = ternary_table[op->kind][compute];
    if (!c.g) {
      st = clt__error(CLT_ERR_INTERNAL, fn, "no host loop for %s", clt_dtype_name(compute));
      goto done;
    }
    over_elements(bc, out->numel, &c, ternary_row, 3);
  }
done:
  if (wide_out && st == CLT_OK)
    clt__host_convert(clt__host_ptr(out), out->dtype, wide_out, CLT_F32, out->numel);
  free(wide_out);
  for (int k = 0; k < 3; k++)
    free(tmp[k]);
  return st;
}

/* ---- fill and upload (the host backend's, and the reference backend's) ---------------------- */

clt_status clt__host_fill(clt_tensor *out, const void *pattern, const char *fn) {
  clt_status s = clt__storage_host_wait(out->storage, true, fn);
  if (s != CLT_OK)
    return s;
  size_t es = clt_dtype_size(out->dtype);
  char *p = clt__host_ptr(out);
  const unsigned char *pat = pattern;
  bool zero = true;
  for (size_t i = 0; i < es; i++)
    zero = zero && pat[i] == 0;
  if (zero || es == 1) {
    memset(p, pat[0], out->nbytes);
    return CLT_OK;
  }
  int64_t n = out->numel;
  if (es == 2) {
    uint16_t v;
    memcpy(&v, pattern, 2);
    uint16_t *q = (uint16_t *)p;
    for (int64_t i = 0; i < n; i++)
      q[i] = v;
  } else if (es == 4) {
    uint32_t v;
    memcpy(&v, pattern, 4);
    uint32_t *q = (uint32_t *)p;
    for (int64_t i = 0; i < n; i++)
      q[i] = v;
  } else {
    uint64_t v;
    memcpy(&v, pattern, 8);
    uint64_t *q = (uint64_t *)p;
    for (int64_t i = 0; i < n; i++)
      q[i] = v;
  }
  return CLT_OK;
}

clt_status clt__host_upload(clt_tensor *out, const void *src, const char *fn) {
  clt_status s = clt__storage_host_wait(out->storage, true, fn);
  if (s != CLT_OK)
    return s;
  memcpy(clt__host_ptr(out), src, out->nbytes);
  return CLT_OK;
}
