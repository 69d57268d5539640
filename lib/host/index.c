/* SPDX-License-Identifier: MIT */
/* host/index.c - gathers along one dimension on the host (clt_index_select): elements are moved
 * as 1-, 2-, 4- or 8-byte words whatever their dtype, one row of `inner` elements at a time. */
#include "backend.h"

#include <string.h>

clt_status clt__host_index_select(clt_tensor *out, const clt_tensor *in, const clt_tensor *idx,
                                  const clt_index_desc *g, const char *fn) {
  clt_status st;
  if ((st = clt__storage_host_wait(in->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(idx->storage, false, fn)) != CLT_OK ||
      (st = clt__storage_host_wait(out->storage, true, fn)) != CLT_OK)
    return st;
  size_t row = (size_t)g->inner * clt_dtype_size(in->dtype);
  char *o = clt__host_ptr(out);
  const char *p = clt__host_ptr(in);
  const void *ix = clt__host_ptr(idx);
  bool i32 = idx->dtype == CLT_I32;
  for (int64_t q = 0; q < g->outer; q++)
    for (int64_t j = 0; j < g->k; j++) {
      int64_t at = i32 ? ((const int32_t *)ix)[j] : ((const int64_t *)ix)[j];
      memcpy(o + (size_t)(q * g->k + j) * row, p + (size_t)(q * g->size + at) * row, row);
    }
  return CLT_OK;
}
