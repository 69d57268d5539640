/* host/reduce.c - whole-tensor sums on the host: pairwise summation for floats (error grows
 * with log n, as in NumPy), exact wrapping integer sums. */
#include "backend.h"

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
PAIRWISE(sum_f32, float)
PAIRWISE(sum_f64, double)

#define INT_SUM(name, T)                                                                           \
  static uint64_t name(const T *x, int64_t n) {                                                    \
    uint64_t s = 0;                                                                                \
    for (int64_t i = 0; i < n; i++)                                                                \
      s += (uint64_t)x[i];                                                                         \
    return s;                                                                                      \
  }
INT_SUM(sum_i32, int32_t)
INT_SUM(sum_i64, int64_t)
INT_SUM(sum_u8, uint8_t)

clt_status clt__host_sum(clt_tensor *out, const clt_tensor *in, const char *fn) {
  clt_status st;
  if ((st = clt__storage_host_wait(in->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(out->storage, true, fn)) != CLT_OK)
    return st;
  const void *p = clt__host_ptr(in);
  void *o = clt__host_ptr(out);
  int64_t n = in->numel;
  switch (in->dtype) {
  case CLT_F32:
    *(float *)o = sum_f32(p, n);
    break;
  case CLT_F64:
    *(double *)o = sum_f64(p, n);
    break;
  case CLT_I32:
    *(int64_t *)o = (int64_t)sum_i32(p, n);
    break;
  case CLT_I64:
    *(int64_t *)o = (int64_t)sum_i64(p, n);
    break;
  case CLT_U8:
  case CLT_BOOL:
    *(int64_t *)o = (int64_t)sum_u8(p, n);
    break;
  }
  return CLT_OK;
}
