/* host/transpose.c - materialized transposes on the host: elements are moved as 1-, 4- or
 * 8-byte words whatever their dtype, in square tiles so that both sides stay in cache. */
#include "backend.h"

enum { TILE = 32 };

/* in is (outer, n0, mid, n1, inner), out is (outer, n1, mid, n0, inner). */
#define DEFINE_TRANSPOSE(name, T)                                                                  \
  static void name(T *restrict out, const T *restrict in, const clt_transpose_desc *g) {           \
    int64_t n0 = g->n0, n1 = g->n1, mid = g->mid, inner = g->inner;                                \
    for (int64_t o = 0; o < g->outer; o++)                                                         \
      for (int64_t j1t = 0; j1t < n1; j1t += TILE)                                                 \
        for (int64_t j0t = 0; j0t < n0; j0t += TILE)                                               \
          for (int64_t md = 0; md < mid; md++)                                                     \
            for (int64_t j1 = j1t; j1 < n1 && j1 < j1t + TILE; j1++)                               \
              for (int64_t j0 = j0t; j0 < n0 && j0 < j0t + TILE; j0++) {                           \
                T *restrict dst = out + (((o * n1 + j1) * mid + md) * n0 + j0) * inner;            \
                const T *restrict src = in + (((o * n0 + j0) * mid + md) * n1 + j1) * inner;       \
                for (int64_t c = 0; c < inner; c++)                                                \
                  dst[c] = src[c];                                                                 \
              }                                                                                    \
  }
DEFINE_TRANSPOSE(transpose_1, uint8_t)
DEFINE_TRANSPOSE(transpose_4, uint32_t)
DEFINE_TRANSPOSE(transpose_8, uint64_t)
DEFINE_TRANSPOSE(transpose_2, uint16_t)

clt_status clt__host_transpose(clt_tensor *out, const clt_tensor *in, const clt_transpose_desc *g,
                               const char *fn) {
  clt_status st;
  if ((st = clt__storage_host_wait(in->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(out->storage, true, fn)) != CLT_OK)
    return st;
  switch (clt_dtype_size(in->dtype)) {
  case 1:
    transpose_1(clt__host_ptr(out), clt__host_ptr(in), g);
    break;
  case 2:
    transpose_2(clt__host_ptr(out), clt__host_ptr(in), g);
    break;
  case 4:
    transpose_4(clt__host_ptr(out), clt__host_ptr(in), g);
    break;
  default:
    transpose_8(clt__host_ptr(out), clt__host_ptr(in), g);
    break;
  }
  return CLT_OK;
}
