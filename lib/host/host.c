/* SPDX-License-Identifier: MIT */
/* host/host.c - the host backend's table, fill and upload. The host backend computes in the
 * calling thread; it first waits for pending device copies into or out of its operands. */
#include "backend.h"

#include <string.h>

static clt_status host_fill(clt_tensor *out, const void *pattern, const char *fn) {
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

static clt_status host_upload(clt_tensor *out, const void *src, const char *fn) {
  clt_status s = clt__storage_host_wait(out->storage, true, fn);
  if (s != CLT_OK)
    return s;
  memcpy(clt__host_ptr(out), src, out->nbytes);
  return CLT_OK;
}

const struct clt_backend clt__host_backend = {
    .name = "host",
    .fill = host_fill,
    .upload = host_upload,
    .elementwise = clt__host_elementwise,
    .reduce = clt__host_reduce,
    .fill_random = clt__host_fill_random,
    .matmul = clt__host_matmul,
    .matmul_path = clt__host_matmul_path,
    .index_select = clt__host_index_select,
    .fused = clt__host_fused,
};
