/* SPDX-License-Identifier: MIT */
/* geometry.c - shapes and strides: validation and printing of shapes, the view rule, contiguity,
 * overlap, and the merging and ordering of broadcast dimensions (clt_bcast) that the dispatcher,
 * lazy fusion and the backends all use. The bottom layer (docs/architecture.md): pure functions
 * that call nothing of clt's but the dtypes and the error report. */
#include "backend.h"

#include <stdio.h>
#include <string.h>

void clt__format_shape(char *buf, size_t size, int ndim, const int64_t *shape) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < ndim && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
}

clt_status clt__check_shape(int ndim, const int64_t *shape, clt_dtype dtype, const char *fn,
                            int64_t *numel_out, size_t *bytes_out) {
  if (ndim < 0 || ndim > CLT_MAX_DIMS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "ndim = %d is outside 0..%d", ndim,
                      CLT_MAX_DIMS);
  if (ndim > 0 && !shape)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "shape is NULL but ndim = %d", ndim);
  int64_t numel = 1;
  bool overflow = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "shape[%d] = %lld is negative", i,
                        (long long)shape[i]);
    if (!overflow && __builtin_mul_overflow(numel, shape[i], &numel))
      overflow = true;
  }
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0) {
      overflow = false;
      numel = 0;
    }
  size_t bytes = 0;
  if (overflow || (uint64_t)numel > SIZE_MAX ||
      __builtin_mul_overflow((size_t)numel, clt_dtype_size(dtype), &bytes) ||
      bytes > (size_t)INT64_MAX) {
    char s[256];
    clt__format_shape(s, sizeof s, ndim, shape);
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "shape %s of %s has too many elements: its size in bytes overflows", s,
                      clt_dtype_name(dtype));
  }
  *numel_out = numel;
  *bytes_out = bytes;
  return CLT_OK;
}

bool clt__view_strides(int nd, const int64_t *shape, const int64_t *strides, int ndim,
                       const int64_t *dims, int64_t *out) {
  if (nd == 0) { /* one element: every dimension of dims is 1, any stride shows it */
    for (int i = 0; i < ndim; i++)
      out[i] = 0;
    return true;
  }
  int v = ndim - 1;
  int64_t base = strides[nd - 1], tn = 1, vn = 1;
  for (int d = nd - 1; d >= 0; d--) {
    tn *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tn * base)) {
      /* the end of a run: the new dimensions must cover it exactly */
      while (v >= 0 && (vn < tn || dims[v] == 1)) {
        out[v] = vn * base;
        vn *= dims[v];
        v--;
      }
      if (vn != tn)
        return false;
      if (d > 0) {
        base = strides[d - 1];
        tn = vn = 1;
      }
    }
  }
  return v == -1;
}

bool clt__strides_contiguous(int ndim, const int64_t *shape, const int64_t *strides) {
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0)
      return true;  /* no elements (and the product of the others may not fit) */
  int64_t want = 1; /* the products below fit: so does the element count */
  for (int i = ndim - 1; i >= 0; i--) {
    if (shape[i] == 1)
      continue;
    if (strides[i] != want)
      return false;
    want *= shape[i];
  }
  return true;
}

bool clt__has_internal_overlap(const clt_tensor *t) {
  if (t->numel == 0) /* no element to share (its strides may even have overflowed to 0) */
    return false;
  for (int i = 0; i < t->ndim; i++)
    if (t->strides[i] == 0 && t->shape[i] > 1)
      return true;
  return false;
}

void clt__bcast_memory_order(clt_bcast *bc, int n) {
  /* insertion sort, stable: an already ordered result (a new one) keeps its C order */
  for (int d = 1; d < bc->ndim; d++)
    for (int e = d; e > 0 && bc->so[e - 1] < bc->so[e]; e--) {
      int64_t t = bc->shape[e];
      bc->shape[e] = bc->shape[e - 1];
      bc->shape[e - 1] = t;
      t = bc->so[e];
      bc->so[e] = bc->so[e - 1];
      bc->so[e - 1] = t;
      for (int k = 0; k < n; k++) {
        t = bc->s[k][e];
        bc->s[k][e] = bc->s[k][e - 1];
        bc->s[k][e - 1] = t;
      }
    }
}

void clt__bcast_coalesce(clt_bcast *bc, int n) {
  int nd = 0;
  for (int d = 0; d < bc->ndim; d++) {
    if (bc->shape[d] == 1)
      continue; /* its index is always 0 */
    bool merge = nd > 0 && bc->so[nd - 1] == bc->so[d] * bc->shape[d];
    for (int k = 0; k < n && merge; k++)
      merge = bc->s[k][nd - 1] == bc->s[k][d] * bc->shape[d];
    if (merge) {
      bc->shape[nd - 1] *= bc->shape[d];
      bc->so[nd - 1] = bc->so[d];
      for (int k = 0; k < n; k++)
        bc->s[k][nd - 1] = bc->s[k][d];
      continue;
    }
    bc->shape[nd] = bc->shape[d];
    bc->so[nd] = bc->so[d];
    for (int k = 0; k < n; k++)
      bc->s[k][nd] = bc->s[k][d];
    nd++;
  }
  bc->ndim = nd;
}
