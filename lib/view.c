/* SPDX-License-Identifier: MIT */
/* view.c - views (docs/views.md): the functions that give another shape, strides and offset over
 * a tensor's storage without copying (narrow, select, slice, permute, transpose, expand,
 * unsqueeze, squeeze, view, reshape), the strides and offset accessors, and the functions that
 * copy views into new tensors (contiguous, cat, stack, index_select), on the tensors' own
 * device: through clt_clone and clt__copy_into (lib/dispatch.c), the elementwise copy, or the
 * backend's gather. Above the dispatcher and the transfers (docs/architecture.md, "Layers"):
 * nothing below calls it. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int64_t *clt_tensor_strides(const clt_tensor *t) { return t ? t->strides : NULL; }
int64_t clt_tensor_offset(const clt_tensor *t) { return t ? clt__elem_offset(t) : 0; }
int clt_is_contiguous(const clt_tensor *t) { return t && t->contiguous; }

/* Checks t and out, the first thing every function here does. */
static clt_status check_args(const clt_tensor *t, const void *out, const char *fn) {
  clt_status s = clt__check_tensor(t, fn, "t");
  if (s == CLT_OK && !out)
    s = clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  return s;
}

/* dim of a tensor of nd dimensions (nd >= 1) made non-negative, or an error naming the range. */
static clt_status norm_dim(int *dim, int nd, const char *fn, const char *what) {
  if (*dim < -nd || *dim >= nd)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "%s = %d is out of range for a tensor of %d dimension%s (expected %d..%d)",
                      what, *dim, nd, nd == 1 ? "" : "s", -nd, nd - 1);
  if (*dim < 0)
    *dim += nd;
  return CLT_OK;
}

/* t's offset moved by index steps of stride, in elements. A tensor without elements gives its
 * own offset: its views have none either, and its strides times its sizes may not fit. */
static int64_t moved(const clt_tensor *t, int64_t index, int64_t stride) {
  return t->numel == 0 ? clt__elem_offset(t) : clt__elem_offset(t) + index * stride;
}

/* Refuses a 0-d tensor for a function that indexes a dimension. */
static clt_status need_dims(const clt_tensor *t, const char *fn) {
  if (t->ndim == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "t is 0-d: it has no dimension to index (clt_unsqueeze gives it one)");
  return CLT_OK;
}

/* The product of shape's ndim sizes, checked to fit (with its bytes) as clt_empty checks. */
static clt_status check_numel(int ndim, const int64_t *shape, clt_dtype dt, const char *fn) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0)
      return CLT_OK;
  for (int i = 0; i < ndim; i++) {
    size_t bytes;
    if (__builtin_mul_overflow(n, shape[i], &n) ||
        __builtin_mul_overflow((size_t)n, clt_dtype_size(dt), &bytes)) {
      char sh[256];
      clt__format_shape(sh, sizeof sh, ndim, shape);
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "shape %s holds more elements than fit",
                        sh);
    }
  }
  return CLT_OK;
}

/* ---- views along one dimension --------------------------------------------------------- */

clt_status clt_diagonal(clt_tensor *t, int64_t offset, int dim1, int dim2, clt_tensor **out) {
  static const char fn[] = "clt_diagonal";
  CLT__GRAD_RECORD(CLT__GRAD_DIAGONAL, fn, &t, 1, ((int64_t[]){offset, dim1, dim2}), 3, out,
                   clt_diagonal(t, offset, dim1, dim2, &r_));
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK)
    return s;
  if (t->ndim < 2)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "t has %d dimension%s; a diagonal needs 2 or more (clt_diag makes a "
                      "matrix of a vector)",
                      t->ndim, t->ndim == 1 ? "" : "s");
  if ((s = norm_dim(&dim1, t->ndim, fn, "dim1")) != CLT_OK ||
      (s = norm_dim(&dim2, t->ndim, fn, "dim2")) != CLT_OK)
    return s;
  if (dim1 == dim2)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "dim1 and dim2 are both dimension %d; a diagonal takes two different ones",
                      dim1);
  /* the elements (i, i + offset) of dimensions dim1, dim2 (or (i - offset, i) for offset < 0),
   * as a last dimension after the others, in order (torch.diagonal) */
  int64_t n1 = t->shape[dim1], n2 = t->shape[dim2], len;
  if (offset >= 0)
    len = offset >= n2 ? 0 : (n1 < n2 - offset ? n1 : n2 - offset);
  else
    len = -offset >= n1 ? 0 : (n1 + offset < n2 ? n1 + offset : n2);
  int64_t shape[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  int r = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != dim1 && i != dim2) {
      shape[r] = t->shape[i];
      strides[r++] = t->strides[i];
    }
  shape[r] = len;
  strides[r++] = t->strides[dim1] + t->strides[dim2];
  int64_t first = len == 0 ? 0 : offset >= 0 ? offset * t->strides[dim2] : -offset * t->strides[dim1];
  return clt__tensor_view(t, r, shape, strides, moved(t, 1, first), fn, out);
}

clt_status clt_narrow(clt_tensor *t, int dim, int64_t start, int64_t length, clt_tensor **out) {
  static const char fn[] = "clt_narrow";
  CLT__GRAD_RECORD(CLT__GRAD_NARROW, fn, &t, 1, ((int64_t[]){dim, start, length}), 3, out,
                   clt_narrow(t, dim, start, length, &r_));
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK || (s = need_dims(t, fn)) != CLT_OK ||
      (s = norm_dim(&dim, t->ndim, fn, "dim")) != CLT_OK)
    return s;
  int64_t size = t->shape[dim];
  if (start < -size || start > size)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "start = %lld is out of range for dimension %d of size %lld (expected "
                      "%lld..%lld)",
                      (long long)start, dim, (long long)size, (long long)-size, (long long)size);
  if (start < 0)
    start += size;
  if (length < 0 || length > size - start)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "length = %lld is out of range: dimension %d has %lld elements from start "
                      "%lld (expected 0..%lld)",
                      (long long)length, dim, (long long)(size - start), (long long)start,
                      (long long)(size - start));
  int64_t shape[CLT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[dim] = length;
  return clt__tensor_view(t, t->ndim, shape, t->strides,
                          moved(t, start, t->strides[dim]), fn, out);
}

clt_status clt_select(clt_tensor *t, int dim, int64_t index, clt_tensor **out) {
  static const char fn[] = "clt_select";
  CLT__GRAD_RECORD(CLT__GRAD_SELECT, fn, &t, 1, ((int64_t[]){dim, index}), 2, out,
                   clt_select(t, dim, index, &r_));
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK || (s = need_dims(t, fn)) != CLT_OK ||
      (s = norm_dim(&dim, t->ndim, fn, "dim")) != CLT_OK)
    return s;
  int64_t size = t->shape[dim];
  if (index < -size || index >= size)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "index = %lld is out of range for dimension %d of size %lld (expected "
                      "%lld..%lld)",
                      (long long)index, dim, (long long)size, (long long)-size,
                      (long long)size - 1);
  if (index < 0)
    index += size;
  int64_t shape[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != dim) {
      shape[nd] = t->shape[i];
      strides[nd++] = t->strides[i];
    }
  return clt__tensor_view(t, nd, shape, strides, moved(t, index, t->strides[dim]), fn, out);
}

/* Python's rule for a slice bound: negative counts from the end, then clamped to 0..size. */
static int64_t slice_bound(int64_t v, int64_t size) {
  if (v < 0)
    v = v < -size ? 0 : v + size;
  return v > size ? size : v;
}

clt_status clt_slice(clt_tensor *t, int dim, int64_t start, int64_t stop, int64_t step,
                     clt_tensor **out) {
  static const char fn[] = "clt_slice";
  CLT__GRAD_RECORD(CLT__GRAD_SLICE, fn, &t, 1, ((int64_t[]){dim, start, stop, step}), 4, out,
                   clt_slice(t, dim, start, stop, step, &r_));
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK || (s = need_dims(t, fn)) != CLT_OK ||
      (s = norm_dim(&dim, t->ndim, fn, "dim")) != CLT_OK)
    return s;
  if (step < 1)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "step = %lld: a slice's step must be 1 or more (clt has no negative "
                      "strides; reverse with an index tensor instead)",
                      (long long)step);
  int64_t size = t->shape[dim];
  start = slice_bound(start, size);
  stop = slice_bound(stop, size);
  int64_t shape[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(strides, t->strides, sizeof strides);
  shape[dim] = stop > start ? (stop - start - 1) / step + 1 : 0;
  /* the stride of a dimension of size 0 or 1 is never used: keep it from overflowing */
  if (shape[dim] > 1 && __builtin_mul_overflow(strides[dim], step, &strides[dim]))
    strides[dim] = 0; /* only in a tensor without elements, whose strides are unused */
  return clt__tensor_view(t, t->ndim, shape, strides,
                          shape[dim] ? moved(t, start, t->strides[dim]) : clt__elem_offset(t),
                          fn, out);
}

/* ---- views that reorder or add dimensions ---------------------------------------------- */

clt_status clt_permute(clt_tensor *t, int ndim, const int *dims, clt_tensor **out) {
  static const char fn[] = "clt_permute";
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK)
    return s;
  if (ndim != t->ndim)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "ndim = %d but t has %d dimensions: dims must name each of them once", ndim,
                      t->ndim);
  if (ndim > 0 && !dims)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "dims is NULL but ndim = %d", ndim);
  int64_t shape[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  bool seen[CLT_MAX_DIMS] = {false};
  for (int i = 0; i < ndim; i++) {
    int d = dims[i];
    char what[32];
    snprintf(what, sizeof what, "dims[%d]", i);
    if ((s = norm_dim(&d, ndim, fn, what)) != CLT_OK)
      return s;
    if (seen[d])
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "dims[%d] = %d names dimension %d a second time: dims must name each of "
                        "0..%d once",
                        i, dims[i], d, ndim - 1);
    seen[d] = true;
    shape[i] = t->shape[d];
    strides[i] = t->strides[d];
  }
  if (clt__grad_wanted(&t, 1)) {
    int64_t p[CLT_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
      p[i] = dims[i];
    CLT__GRAD_RECORD(CLT__GRAD_PERMUTE, fn, &t, 1, p, ndim, out,
                     clt__tensor_view(t, ndim, shape, strides, clt__elem_offset(t), fn, &r_));
  }
  return clt__tensor_view(t, ndim, shape, strides, clt__elem_offset(t), fn, out);
}

clt_status clt_transpose(clt_tensor *t, int dim0, int dim1, clt_tensor **out) {
  static const char fn[] = "clt_transpose";
  CLT__GRAD_RECORD(CLT__GRAD_TRANSPOSE, fn, &t, 1, ((int64_t[]){dim0, dim1}), 2, out,
                   clt_transpose(t, dim0, dim1, &r_));
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK)
    return s;
  int nd = t->ndim > 0 ? t->ndim : 1; /* a 0-d tensor takes 0 and -1, as in PyTorch */
  if ((s = norm_dim(&dim0, nd, fn, "dim0")) != CLT_OK ||
      (s = norm_dim(&dim1, nd, fn, "dim1")) != CLT_OK)
    return s;
  int64_t shape[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(strides, t->strides, sizeof strides);
  if (t->ndim > 0) {
    shape[dim0] = t->shape[dim1];
    shape[dim1] = t->shape[dim0];
    strides[dim0] = t->strides[dim1];
    strides[dim1] = t->strides[dim0];
  }
  return clt__tensor_view(t, t->ndim, shape, strides, clt__elem_offset(t), fn, out);
}

clt_status clt_expand(clt_tensor *t, int ndim, const int64_t *shape, clt_tensor **out) {
  static const char fn[] = "clt_expand";
  CLT__GRAD_RECORD(CLT__GRAD_EXPAND, fn, &t, 1, NULL, 0, out, clt_expand(t, ndim, shape, &r_));
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK)
    return s;
  if (ndim < t->ndim || ndim > CLT_MAX_DIMS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "ndim = %d is outside %d..%d: the new shape needs at least t's %d "
                      "dimensions",
                      ndim, t->ndim, CLT_MAX_DIMS, t->ndim);
  if (ndim > 0 && !shape)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "shape is NULL but ndim = %d", ndim);
  int lead = ndim - t->ndim;
  int64_t dims[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int k = i - lead; /* t's dimension, aligned at the end */
    if (k < 0) {
      if (shape[i] < 0)
        return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                          "shape[%d] = %lld: a new leading dimension needs a size of 0 or more "
                          "(-1 keeps only an existing dimension)",
                          i, (long long)shape[i]);
      dims[i] = shape[i];
      strides[i] = 0;
    } else if (shape[i] == -1 || shape[i] == t->shape[k]) {
      dims[i] = t->shape[k];
      strides[i] = t->strides[k];
    } else if (t->shape[k] == 1 && shape[i] >= 0) {
      dims[i] = shape[i];
      strides[i] = 0;
    } else {
      char have[256], want[256];
      clt__format_shape(have, sizeof have, t->ndim, t->shape);
      clt__format_shape(want, sizeof want, ndim, shape);
      return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                        "cannot expand shape %s to %s: dimension %d is %lld, and only a "
                        "dimension of size 1 can grow",
                        have, want, i, (long long)t->shape[k]);
    }
  }
  if ((s = check_numel(ndim, dims, t->dtype, fn)) != CLT_OK)
    return s;
  return clt__tensor_view(t, ndim, dims, strides, clt__elem_offset(t), fn, out);
}

clt_status clt_unsqueeze(clt_tensor *t, int dim, clt_tensor **out) {
  static const char fn[] = "clt_unsqueeze";
  CLT__GRAD_RECORD(CLT__GRAD_RESHAPE, fn, &t, 1, NULL, 0, out, clt_unsqueeze(t, dim, &r_));
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK)
    return s;
  if (t->ndim == CLT_MAX_DIMS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "t already has the most dimensions, %d",
                      CLT_MAX_DIMS);
  if ((s = norm_dim(&dim, t->ndim + 1, fn, "dim")) != CLT_OK)
    return s;
  int64_t shape[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  for (int i = 0, k = 0; i <= t->ndim; i++) {
    if (i == dim) {
      shape[i] = 1;
      strides[i] = 1; /* any stride serves a dimension of size 1: C order's where it fits */
      if (dim < t->ndim && __builtin_mul_overflow(t->shape[dim], t->strides[dim], &strides[i]))
        strides[i] = 0;
    } else {
      shape[i] = t->shape[k];
      strides[i] = t->strides[k++];
    }
  }
  return clt__tensor_view(t, t->ndim + 1, shape, strides, clt__elem_offset(t), fn, out);
}

clt_status clt_squeeze(clt_tensor *t, int dim, clt_tensor **out) {
  static const char fn[] = "clt_squeeze";
  CLT__GRAD_RECORD(CLT__GRAD_RESHAPE, fn, &t, 1, NULL, 0, out, clt_squeeze(t, dim, &r_));
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK ||
      (s = norm_dim(&dim, t->ndim > 0 ? t->ndim : 1, fn, "dim")) != CLT_OK)
    return s;
  if (t->ndim == 0 || t->shape[dim] != 1) {
    *out = clt_tensor_retain(t);
    return CLT_OK;
  }
  int64_t shape[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != dim) {
      shape[nd] = t->shape[i];
      strides[nd++] = t->strides[i];
    }
  return clt__tensor_view(t, nd, shape, strides, clt__elem_offset(t), fn, out);
}

/* ---- another shape: view and reshape ---------------------------------------------------- */

/* The new shape with a -1 resolved into dims, checked against t's element count. */
static clt_status resolve_shape(const clt_tensor *t, int ndim, const int64_t *shape,
                                const char *fn, int64_t *dims) {
  if (ndim < 0 || ndim > CLT_MAX_DIMS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "ndim = %d is outside 0..%d", ndim,
                      CLT_MAX_DIMS);
  if (ndim > 0 && !shape)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "shape is NULL but ndim = %d", ndim);
  /* Every dimension is checked before any count: a -1 at most once, no other negative. Counts
   * follow clt_empty's rule: a shape with a 0 holds 0 elements whatever its other dimensions. */
  int64_t known = 1;
  int infer = -1;
  bool zero = false, overflow = false;
  for (int i = 0; i < ndim; i++) {
    dims[i] = shape[i];
    if (shape[i] == -1) {
      if (infer >= 0)
        return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                          "shape[%d] and shape[%d] are both -1; only one dimension can be "
                          "inferred",
                          infer, i);
      infer = i;
    } else if (shape[i] < 0) {
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "shape[%d] = %lld is negative", i,
                        (long long)shape[i]);
    } else if (shape[i] == 0) {
      zero = true;
    } else if (!overflow && __builtin_mul_overflow(known, shape[i], &known)) {
      overflow = true; /* cannot match any numel, unless a 0 follows */
    }
  }
  if (zero)
    known = 0;
  else if (overflow)
    known = -1;
  bool fits;
  if (infer >= 0) {
    if (known == 0)
      return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                        "cannot infer the -1 dimension when another dimension is 0");
    fits = known > 0 && t->numel % known == 0;
    if (fits)
      dims[infer] = t->numel / known;
  } else {
    fits = known == t->numel;
  }
  if (!fits) {
    char want[256], have[256];
    clt__format_shape(want, sizeof want, ndim, shape);
    clt__format_shape(have, sizeof have, t->ndim, t->shape);
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                      "cannot view a tensor of shape %s (%lld elements) as shape %s", have,
                      (long long)t->numel, want);
  }
  return CLT_OK;
}

/* Strides that show t's elements, in C order, with shape dims, where t's strides allow it
 * (clt__view_strides: PyTorch's rule). False where only a copy has that shape. */
static bool view_strides(const clt_tensor *t, int ndim, const int64_t *dims, int64_t *strides) {
  if (t->contiguous || t->numel == 0) {
    int64_t st = 1;
    for (int i = ndim - 1; i >= 0; i--) {
      strides[i] = st;
      if (dims[i] > 1 && __builtin_mul_overflow(st, dims[i], &st))
        st = 0; /* only in an empty tensor, whose strides are unused */
    }
    return true;
  }
  return clt__view_strides(t->ndim, t->shape, t->strides, ndim, dims, strides);
}

clt_status clt_view(clt_tensor *t, int ndim, const int64_t *shape, clt_tensor **out) {
  static const char fn[] = "clt_view";
  CLT__GRAD_RECORD(CLT__GRAD_RESHAPE, fn, &t, 1, NULL, 0, out, clt_view(t, ndim, shape, &r_));
  int64_t dims[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK ||
      (s = resolve_shape(t, ndim, shape, fn, dims)) != CLT_OK)
    return s;
  if (!view_strides(t, ndim, dims, strides)) {
    char want[256], have[256];
    clt__format_shape(want, sizeof want, ndim, dims);
    clt__format_shape(have, sizeof have, t->ndim, t->shape);
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "t (shape %s) is a view whose strides cannot show its elements as shape %s "
                      "without a copy; use clt_reshape, which copies then, or clt_contiguous "
                      "first",
                      have, want);
  }
  return clt__tensor_view(t, ndim, dims, strides, clt__elem_offset(t), fn, out);
}

clt_status clt_reshape(clt_tensor *t, int ndim, const int64_t *shape, clt_tensor **out) {
  static const char fn[] = "clt_reshape";
  CLT__GRAD_RECORD(CLT__GRAD_RESHAPE, fn, &t, 1, NULL, 0, out,
                   clt_reshape(t, ndim, shape, &r_));
  int64_t dims[CLT_MAX_DIMS], strides[CLT_MAX_DIMS];
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK ||
      (s = resolve_shape(t, ndim, shape, fn, dims)) != CLT_OK)
    return s;
  if (view_strides(t, ndim, dims, strides))
    return clt__tensor_view(t, ndim, dims, strides, clt__elem_offset(t), fn, out);
  clt_tensor *c, *r;
  if ((s = clt_contiguous(t, &c)) != CLT_OK)
    return clt__error(s, fn, "copying the view: %s", clt_last_error());
  view_strides(c, ndim, dims, strides);
  s = clt__tensor_view(c, ndim, dims, strides, 0, fn, &r);
  clt_tensor_release(c);
  if (s == CLT_OK)
    *out = r;
  return s;
}

/* ---- copies ----------------------------------------------------------------------------- */

clt_status clt_contiguous(clt_tensor *t, clt_tensor **out) {
  CLT__GRAD_RECORD(CLT__GRAD_COPY, "clt_contiguous", &t, 1, NULL, 0, out, clt_contiguous(t, &r_));
  clt_status s = check_args(t, out, "clt_contiguous");
  if (s != CLT_OK)
    return s;
  if (t->contiguous) {
    *out = clt_tensor_retain(t);
    return CLT_OK;
  }
  return clt_clone(t, out);
}

/* The checks cat and stack share: out not NULL; n tensors, none NULL, all on the first one's
 * device; the dtype they promote to. */
static clt_status check_list(int n, clt_tensor *const *ts, clt_tensor **out, const char *fn,
                             clt_dtype *dt) {
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (n < 1 || !ts)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s: expected n >= 1 tensors",
                      ts ? "n < 1" : "tensors is NULL");
  for (int i = 0; i < n; i++)
    if (!ts[i])
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "tensors[%d] is NULL", i);
  *dt = ts[0]->dtype;
  for (int i = 1; i < n; i++) {
    if (ts[i]->storage->dev != ts[0]->storage->dev)
      return clt__error(CLT_ERR_DEVICE_MISMATCH, fn,
                        "expected all tensors on the same device, but found %s (tensors[0]) and "
                        "%s (tensors[%d]); copy one with clt_to()",
                        ts[0]->storage->dev->name, ts[i]->storage->dev->name, i);
    clt_status s = clt_result_dtype("add", *dt, ts[i]->dtype, dt);
    if (s != CLT_OK)
      return s;
  }
  return CLT_OK;
}

/* CLT_ERR_SHAPE_MISMATCH for cat and stack: tensors[i] (t) does not fit tensors[0] (t0). */
static clt_status list_shape_error(const char *fn, const clt_tensor *t0, int i, const clt_tensor *t,
                                   const char *why) {
  char a[256], b[256];
  clt__format_shape(a, sizeof a, t0->ndim, t0->shape);
  clt__format_shape(b, sizeof b, t->ndim, t->shape);
  return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "tensors[0] has shape %s and tensors[%d] %s: %s", a,
                    i, b, why);
}

clt_status clt_cat(int n, clt_tensor *const *tensors, int dim, clt_tensor **out) {
  static const char fn[] = "clt_cat";
  clt_dtype dt;
  clt_status s;
  if ((s = check_list(n, tensors, out, fn, &dt)) != CLT_OK)
    return s;
  CLT__GRAD_RECORD(CLT__GRAD_CAT, fn, tensors, n, ((int64_t[]){dim}), 1, out,
                   clt_cat(n, tensors, dim, &r_));
  const clt_tensor *t0 = tensors[0];
  if (t0->ndim == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "tensors[0] is 0-d: cat joins along an existing dimension (clt_stack adds "
                      "one)");
  if ((s = norm_dim(&dim, t0->ndim, fn, "dim")) != CLT_OK)
    return s;
  int64_t shape[CLT_MAX_DIMS];
  memcpy(shape, t0->shape, sizeof shape);
  for (int i = 1; i < n; i++) {
    const clt_tensor *t = tensors[i];
    bool ok = t->ndim == t0->ndim;
    for (int d = 0; ok && d < t0->ndim; d++)
      ok = d == dim || t->shape[d] == t0->shape[d];
    if (!ok) {
      char why[64];
      snprintf(why, sizeof why, "every dimension but dim = %d must be equal", dim);
      return list_shape_error(fn, t0, i, t, why);
    }
    if (__builtin_add_overflow(shape[dim], t->shape[dim], &shape[dim]))
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "the joined dimension does not fit");
  }
  clt_tensor *r;
  if ((s = clt__tensor_new(dt, t0->ndim, shape, t0->storage->dev, fn, &r)) != CLT_OK)
    return s;
  int64_t at = 0;
  for (int i = 0; i < n && s == CLT_OK; i++) {
    clt_tensor *part;
    int64_t len = tensors[i]->shape[dim];
    if (len == 0 || r->numel == 0)
      continue;
    if ((s = clt_narrow(r, dim, at, len, &part)) == CLT_OK) {
      s = clt__copy_into(part, tensors[i], fn);
      clt_tensor_release(part);
    }
    at += len;
  }
  if (s != CLT_OK) {
    clt_tensor_release(r);
    return s;
  }
  *out = r;
  return CLT_OK;
}

clt_status clt_stack(int n, clt_tensor *const *tensors, int dim, clt_tensor **out) {
  static const char fn[] = "clt_stack";
  clt_dtype dt;
  clt_status s;
  if ((s = check_list(n, tensors, out, fn, &dt)) != CLT_OK)
    return s;
  const clt_tensor *t0 = tensors[0];
  for (int i = 1; i < n; i++) {
    const clt_tensor *t = tensors[i];
    if (t->ndim != t0->ndim || memcmp(t->shape, t0->shape, sizeof(int64_t) * t0->ndim) != 0)
      return list_shape_error(fn, t0, i, t, "stack needs one shape");
  }
  if (t0->ndim == CLT_MAX_DIMS)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the tensors already have the most dimensions, %d", CLT_MAX_DIMS);
  if ((s = norm_dim(&dim, t0->ndim + 1, fn, "dim")) != CLT_OK)
    return s;
  clt_tensor **u = calloc((size_t)n, sizeof *u);
  if (!u)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  for (int i = 0; i < n && s == CLT_OK; i++)
    s = clt_unsqueeze(tensors[i], dim, &u[i]);
  if (s == CLT_OK)
    s = clt_cat(n, u, dim, out);
  for (int i = 0; i < n; i++)
    clt_tensor_release(u[i]);
  free(u);
  if (s != CLT_OK)
    return clt__error(s, fn, "%s", clt_last_error());
  return CLT_OK;
}

clt_status clt_index_select(clt_tensor *t, int dim, clt_tensor *index, clt_tensor **out) {
  static const char fn[] = "clt_index_select";
  clt_status s;
  if ((s = check_args(t, out, fn)) != CLT_OK || (s = clt__check_tensor(index, fn, "index")) != CLT_OK)
    return s;
  CLT__GRAD_RECORD(CLT__GRAD_INDEX_SELECT, fn, ((clt_tensor *[]){t, index}), 2, ((int64_t[]){dim}),
                   1, out, clt_index_select(t, dim, index, &r_));
  if (index->storage->dev != t->storage->dev)
    return clt__error(CLT_ERR_DEVICE_MISMATCH, fn,
                      "expected t and index on the same device, but found %s (t) and %s "
                      "(index); copy index with clt_to()",
                      t->storage->dev->name, index->storage->dev->name);
  if (index->dtype != CLT_I64 && index->dtype != CLT_I32)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "index is %s; it must be an i64 or i32 tensor (cast it with clt_cast)",
                      clt_dtype_name(index->dtype));
  if (index->ndim > 1)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "index has %d dimensions; it must be 1-D (or 0-d): flatten it with "
                      "clt_reshape first",
                      index->ndim);
  if ((s = need_dims(t, fn)) != CLT_OK || (s = norm_dim(&dim, t->ndim, fn, "dim")) != CLT_OK)
    return s;
  clt_index_desc g = {1, t->shape[dim], index->numel, 1};
  if (g.k > 0) { /* every value in 0..size-1, read back as the documentation says */
    clt_tensor *lo = NULL, *hi = NULL;
    int64_t vlo = 0, vhi = 0;
    if ((s = clt_min(index, &lo)) == CLT_OK && (s = clt_max(index, &hi)) == CLT_OK &&
        (s = clt_item_i64(lo, &vlo)) == CLT_OK)
      s = clt_item_i64(hi, &vhi);
    clt_tensor_release(lo);
    clt_tensor_release(hi);
    if (s != CLT_OK)
      return clt__error(s, fn, "checking the index values: %s", clt_last_error());
    if (vlo < 0 || vhi >= g.size)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "index holds %lld, out of range for dimension %d of size %lld (expected "
                        "0..%lld)",
                        (long long)(vlo < 0 ? vlo : vhi), dim, (long long)g.size,
                        (long long)g.size - 1);
  }
  int64_t shape[CLT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[dim] = g.k;
  if ((s = check_numel(t->ndim, shape, t->dtype, fn)) != CLT_OK)
    return s;
  clt_tensor *r, *dt = NULL, *di = NULL;
  if ((s = clt__tensor_new(t->dtype, t->ndim, shape, t->storage->dev, fn, &r)) != CLT_OK)
    return s;
  if (r->numel > 0) {
    for (int i = 0; i < dim; i++)
      g.outer *= t->shape[i];
    for (int i = dim + 1; i < t->ndim; i++)
      g.inner *= t->shape[i];
    if ((s = clt__dense(t, fn, &dt)) == CLT_OK && (s = clt__dense(index, fn, &di)) == CLT_OK &&
        (s = clt__lazy_ready((clt_tensor *[]){dt, di}, 2, r, fn)) == CLT_OK)
      s = t->storage->dev->backend->compute.index_select(r, dt, di, &g, fn);
  }
  clt_tensor_release(dt);
  clt_tensor_release(di);
  if (s != CLT_OK) {
    clt_tensor_release(r);
    return s;
  }
  *out = r;
  return CLT_OK;
}
