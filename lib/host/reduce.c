/* SPDX-License-Identifier: MIT */
/* host/reduce.c - reductions on the host: pairwise summation for floats (error grows with
 * log n, as in NumPy), wrapping integer sums, max/min/argmax with NaN propagation; the same
 * results as kernels/reduce.cl. The input is seen as (outer, r, inner), reduced over r. */
#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PAIRWISE(name, T)                                                                          \
  static T name(const T *x, int64_t n) {                                                           \
    if (n <= 128) {                                                                                \
      T s[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                           \
      int64_t i = 0;                                                                               \
      for (; i + 8 <= n; i += 8)                                                                   \
        for (int k = 0; k < 8; k++)                                                                \
          s[k] += x[i + k];                                                                        \
      T r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));                     \
      for (; i < n; i++)                                                                           \
        r += x[i];                                                                                 \
      return r;                                                                                    \
    }                                                                                              \
    int64_t half = n / 2 / 8 * 8;                                                                  \
    return name(x, half) + name(x + half, n - half);                                               \
  }
PAIRWISE(pairwise_f32, float)
PAIRWISE(pairwise_f64, double)

/* Large contiguous sums: fixed blocks summed pairwise in parallel, then the block sums pairwise.
 * The blocks do not depend on the number of threads, so neither does the result. */
#define SUM_BLOCK ((int64_t)1 << 16)
#define BLOCKED(name, T, PW)                                                                       \
  static T name(const T *x, int64_t n) {                                                           \
    if (n <= SUM_BLOCK || clt__host_parts(n) == 1)                                                 \
      return PW(x, n);                                                                             \
    int64_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;                                                  \
    T local[256];                                                                                  \
    T *part = nb <= 256 ? local : malloc((size_t)nb * sizeof(T));                                  \
    if (!part)                                                                                     \
      return PW(x, n);                                                                             \
    CLT__PARALLEL_FOR                                                                              \
    for (int64_t b = 0; b < nb; b++)                                                               \
      part[b] = PW(x + b * SUM_BLOCK, b == nb - 1 ? n - b * SUM_BLOCK : SUM_BLOCK);                \
    T r = PW(part, nb);                                                                            \
    if (part != local)                                                                             \
      free(part);                                                                                  \
    return r;                                                                                      \
  }
BLOCKED(blocked_f32, float, pairwise_f32)
BLOCKED(blocked_f64, double, pairwise_f64)

/* Column sums of r rows of w elements, the rows inner apart, into dst, pairwise over the rows:
 * blocks of ROWS_BLOCK rows added row by row (contiguous, so it vectorizes), the block sums
 * merged like a binary counter (block k is added to a partner of its own size when bit 0 of k
 * is set, the pair to the previous pair when bit 1 is, ...). The error grows with log r, as in
 * the contiguous case. stack holds rows_levels(r) rows of w sums. */
#define ROWS_BLOCK 16
#define ROWS_WIDTH 2048
static int64_t rows_levels(int64_t r) {
  int64_t levels = 1;
  for (int64_t nb = (r + ROWS_BLOCK - 1) / ROWS_BLOCK; nb > 1; nb >>= 1)
    levels++;
  return levels;
}
#define ROWS_PAIRWISE(name, T)                                                                     \
  static void name(const T *b, int64_t r, int64_t inner, int64_t w, T *dst, T *stack) {            \
    int64_t top = 0;                                                                               \
    for (int64_t k0 = 0, blk = 0; k0 < r; k0 += ROWS_BLOCK, blk++) {                               \
      T *s = stack + top * w;                                                                      \
      int64_t e = k0 + ROWS_BLOCK < r ? k0 + ROWS_BLOCK : r;                                       \
      memcpy(s, b + k0 * inner, (size_t)w * sizeof(T));                                            \
      for (int64_t k = k0 + 1; k < e; k++)                                                         \
        CLT__SIMD for (int64_t j = 0; j < w; j++) s[j] += b[k * inner + j];                        \
      for (int64_t m = blk; m & 1; m >>= 1, top--) {                                               \
        CLT__SIMD for (int64_t j = 0; j < w; j++) s[j - w] += s[j];                                \
        s -= w;                                                                                    \
      }                                                                                            \
      top++;                                                                                       \
    }                                                                                              \
    for (int64_t j = 0; j < w; j++) {                                                              \
      T acc = 0;                                                                                   \
      for (int64_t t = top - 1; t >= 0; t--)                                                       \
        acc = stack[t * w + j] + acc;                                                              \
      dst[j] = acc;                                                                                \
    }                                                                                              \
  }
ROWS_PAIRWISE(rows_f32, float)
ROWS_PAIRWISE(rows_f64, double)

/* Sums over r of a (outer, r, inner) block: pairwise when contiguous, pairwise over rows in
 * strips of ROWS_WIDTH columns otherwise (the strips bound the scratch rows). */
#define FLOAT_SUM(name, T, PW, ROWS)                                                               \
  static clt_status name(const T *p, T *out, int64_t outer, int64_t r, int64_t inner, bool mean,   \
                         const char *fn) {                                                         \
    int64_t w = inner < ROWS_WIDTH ? inner : ROWS_WIDTH;                                           \
    T *stack = NULL;                                                                               \
    if (inner > 1 && !(stack = malloc((size_t)(rows_levels(r) * w) * sizeof(T))))                  \
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory for %lld partial sums",     \
                        (long long)(rows_levels(r) * w));                                          \
    for (int64_t o = 0; o < outer; o++) {                                                          \
      const T *b = p + o * r * inner;                                                              \
      T *dst = out + o * inner;                                                                    \
      if (inner == 1)                                                                              \
        dst[0] = PW(b, r);                                                                         \
      else                                                                                         \
        for (int64_t j = 0; j < inner; j += w)                                                     \
          ROWS(b + j, r, inner, inner - j < w ? inner - j : w, dst + j, stack);                    \
      if (mean)                                                                                    \
        for (int64_t j = 0; j < inner; j++)                                                        \
          dst[j] = dst[j] / (T)r;                                                                  \
    }                                                                                              \
    free(stack);                                                                                   \
    return CLT_OK;                                                                                 \
  }
FLOAT_SUM(sum_f32, float, blocked_f32, rows_f32)
FLOAT_SUM(sum_f64, double, blocked_f64, rows_f64)

/* Integer sums wrap around (unsigned arithmetic), so any order gives the same result. */
#define INT_SUM(name, T)                                                                           \
  static void name(const T *p, int64_t *out, int64_t outer, int64_t r, int64_t inner) {            \
    if (outer == 1 && inner == 1 && clt__host_parts(r) > 1) {                                      \
      int64_t parts = clt__host_parts(r);                                                          \
      uint64_t part[64] = {0};                                                                     \
      if (parts > 64)                                                                              \
        parts = 64;                                                                                \
      CLT__PARALLEL_FOR                                                                            \
      for (int64_t k = 0; k < parts; k++) {                                                        \
        int64_t lo, hi;                                                                            \
        clt__part(r, parts, k, &lo, &hi);                                                          \
        uint64_t s = 0;                                                                            \
        for (int64_t i = lo; i < hi; i++)                                                          \
          s += (uint64_t)p[i];                                                                     \
        part[k] = s;                                                                               \
      }                                                                                            \
      uint64_t s = 0;                                                                              \
      for (int64_t k = 0; k < parts; k++)                                                          \
        s += part[k];                                                                              \
      out[0] = (int64_t)s;                                                                         \
      return;                                                                                      \
    }                                                                                              \
    for (int64_t o = 0; o < outer; o++)                                                            \
      for (int64_t j = 0; j < inner; j++) {                                                        \
        uint64_t s = 0;                                                                            \
        for (int64_t k = 0; k < r; k++)                                                            \
          s += (uint64_t)p[(o * r + k) * inner + j];                                               \
        out[o * inner + j] = (int64_t)s;                                                           \
      }                                                                                            \
  }
INT_SUM(isum_i32, int32_t)
INT_SUM(isum_i64, int64_t)
INT_SUM(isum_u8, uint8_t)

/* max (sign 1), min (sign -1), argmax: the first winner; NaN wins. */
#define EXTREME(name, T, ISNAN)                                                                    \
  static void name(const T *p, void *out, int64_t outer, int64_t r, int64_t inner, int sign,       \
                   bool arg) {                                                                     \
    for (int64_t o = 0; o < outer; o++)                                                            \
      for (int64_t j = 0; j < inner; j++) {                                                        \
        const T *b = p + o * r * inner + j;                                                        \
        T best = b[0];                                                                             \
        int64_t at = 0;                                                                            \
        for (int64_t k = 1; k < r && !ISNAN(best); k++) {                                          \
          T x = b[k * inner];                                                                      \
          if (ISNAN(x) || (sign > 0 ? x > best : x < best)) {                                      \
            best = x;                                                                              \
            at = k;                                                                                \
          }                                                                                        \
        }                                                                                          \
        if (arg)                                                                                   \
          ((int64_t *)out)[o * inner + j] = at;                                                    \
        else                                                                                       \
          ((T *)out)[o * inner + j] = best;                                                        \
      }                                                                                            \
  }
#define NEVER_NAN(x) 0
EXTREME(ext_f32, float, isnan)
EXTREME(ext_f64, double, isnan)
EXTREME(ext_i32, int32_t, NEVER_NAN)
EXTREME(ext_i64, int64_t, NEVER_NAN)
EXTREME(ext_u8, uint8_t, NEVER_NAN)

clt_status clt__host_reduce(const clt_reduce *red, clt_tensor *out, const clt_tensor *in) {
  clt_status st;
  if ((st = clt__storage_host_wait(in->storage, false, red->fn)) != CLT_OK ||
      (st = clt__storage_host_wait(out->storage, true, red->fn)) != CLT_OK)
    return st;
  const void *p = clt__host_ptr(in);
  void *o = clt__host_ptr(out);
  int64_t outer = red->outer, r = red->r, inner = red->inner;
  if (red->kind == CLT__RED_SUM || red->kind == CLT__RED_MEAN) {
    bool mean = red->kind == CLT__RED_MEAN;
    switch (in->dtype) {
    case CLT_F32:
      return sum_f32(p, o, outer, r, inner, mean, red->fn);
    case CLT_F64:
      return sum_f64(p, o, outer, r, inner, mean, red->fn);
    case CLT_I32:
      isum_i32(p, o, outer, r, inner);
      break;
    case CLT_I64:
      isum_i64(p, o, outer, r, inner);
      break;
    case CLT_U8:
    case CLT_BOOL:
      isum_u8(p, o, outer, r, inner);
      break;
    case CLT_F16:
    case CLT_BF16: /* reduced as f32 by the dispatcher */
      break;
    }
    return CLT_OK;
  }
  int sign = red->kind == CLT__RED_MIN ? -1 : 1;
  bool arg = red->kind == CLT__RED_ARGMAX;
  switch (in->dtype) {
  case CLT_F32:
    ext_f32(p, o, outer, r, inner, sign, arg);
    break;
  case CLT_F64:
    ext_f64(p, o, outer, r, inner, sign, arg);
    break;
  case CLT_I32:
    ext_i32(p, o, outer, r, inner, sign, arg);
    break;
  case CLT_I64:
    ext_i64(p, o, outer, r, inner, sign, arg);
    break;
  case CLT_U8:
  case CLT_BOOL:
    ext_u8(p, o, outer, r, inner, sign, arg);
    break;
  case CLT_F16:
  case CLT_BF16: /* reduced as f32 by the dispatcher */
    break;
  }
  return CLT_OK;
}
