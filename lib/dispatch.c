/* dispatch.c - the rules every operation goes through, in one place: operands on one device
 * (else CLT_ERR_DEVICE_MISMATCH), dtype promotion, broadcasting; then the device's backend. */
#include "backend.h"

#include <stdio.h>
#include <string.h>

static const clt_binop binops[] = {
    {CLT__OP_ADD, "add", "clt_add", "((a)+(b))", "((a)|(b))", false},
    {CLT__OP_SUB, "sub", "clt_sub", "((a)-(b))", NULL, false},
    {CLT__OP_MUL, "mul", "clt_mul", "((a)*(b))", "((a)&(b))", false},
    {CLT__OP_DIV, "div", "clt_div", "((a)/(b))", NULL, true},
};

/* The same-device rule (DESIGN.md rule 3): argument positions are 1-based. */
static clt_status check_same_device(const char *fn, int n, clt_tensor *const *ts) {
  for (int i = 1; i < n; i++)
    if (ts[i]->storage->dev != ts[0]->storage->dev)
      return clt__error(CLT_ERR_DEVICE_MISMATCH, fn,
                        "expected all tensors on the same device, but found %s (argument 1) and "
                        "%s (argument %d); copy one with clt_to()",
                        ts[0]->storage->dev->name, ts[i]->storage->dev->name, i + 1);
  return CLT_OK;
}

static int int_rank(clt_dtype dt) { return dt == CLT_U8 ? 1 : dt == CLT_I32 ? 2 : 3; }

static clt_dtype promote(clt_dtype a, clt_dtype b) {
  if (a == b)
    return a;
  if (a == CLT_BOOL)
    return b;
  if (b == CLT_BOOL)
    return a;
  if (clt__dtype_is_float(a) && clt__dtype_is_float(b))
    return CLT_F64;
  if (clt__dtype_is_float(a))
    return a;
  if (clt__dtype_is_float(b))
    return b;
  return int_rank(a) >= int_rank(b) ? a : b;
}

static clt_status result_dtype(const clt_binop *op, clt_dtype a, clt_dtype b, const char *fn,
                               clt_dtype *out) {
  clt_dtype r = promote(a, b);
  if (op->true_div && !clt__dtype_is_float(r))
    r = CLT_F32;
  if (r == CLT_BOOL && !op->bool_expr)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "%s of two bool tensors is not supported; cast them to an integer dtype "
                      "first",
                      op->name);
  *out = r;
  return CLT_OK;
}

static const clt_binop *find_binop(const char *name) {
  for (size_t i = 0; i < sizeof binops / sizeof binops[0]; i++)
    if (strcmp(binops[i].name, name) == 0)
      return &binops[i];
  return NULL;
}

clt_status clt_result_dtype(const char *op, clt_dtype a, clt_dtype b, clt_dtype *out) {
  static const char fn[] = "clt_result_dtype";
  clt_status s;
  if (!op || !out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", op ? "out" : "op");
  if ((s = clt__check_dtype(a, fn, "a")) != CLT_OK || (s = clt__check_dtype(b, fn, "b")) != CLT_OK)
    return s;
  const clt_binop *bop = find_binop(op);
  if (!bop)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "unknown operation '%s' (expected add, sub, mul or div)", op);
  return result_dtype(bop, a, b, fn, out);
}

/* NumPy broadcasting of two contiguous operands. */
static clt_status broadcast(const clt_tensor *a, const clt_tensor *b, const char *fn,
                            clt_bcast *bc) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  memset(bc, 0, sizeof *bc);
  bc->ndim = nd;
  int64_t stride_a = 1, stride_b = 1;
  for (int d = nd - 1; d >= 0; d--) {
    int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
    int64_t na = da >= 0 ? a->shape[da] : 1, nb = db >= 0 ? b->shape[db] : 1;
    if (na != nb && na != 1 && nb != 1) {
      char sa[256], sb[256];
      clt__format_shape(sa, sizeof sa, a->ndim, a->shape);
      clt__format_shape(sb, sizeof sb, b->ndim, b->shape);
      return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                        "shapes %s (argument 1) and %s (argument 2) cannot be broadcast: "
                        "dimension %d is %lld in one and %lld in the other",
                        sa, sb, d, (long long)na, (long long)nb);
    }
    int64_t n = na == 1 ? nb : na;
    bc->shape[d] = n;
    bc->sa[d] = (na == 1 && n != 1) ? 0 : stride_a;
    bc->sb[d] = (nb == 1 && n != 1) ? 0 : stride_b;
    stride_a *= na;
    stride_b *= nb;
  }
  bc->same = a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof(int64_t) * a->ndim) == 0;
  return CLT_OK;
}

static clt_status binary(const clt_binop *op, clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  const char *fn = op->fn;
  clt_status s;
  if ((s = clt__check_tensor(a, fn, "a")) != CLT_OK ||
      (s = clt__check_tensor(b, fn, "b")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_tensor *operands[2] = {a, b};
  if ((s = check_same_device(fn, 2, operands)) != CLT_OK)
    return s;
  clt_dtype rt;
  if ((s = result_dtype(op, a->dtype, b->dtype, fn, &rt)) != CLT_OK)
    return s;
  clt_bcast bc;
  if ((s = broadcast(a, b, fn, &bc)) != CLT_OK)
    return s;
  clt_device *dev = a->storage->dev;
  clt_tensor *r;
  if ((s = clt__tensor_new(rt, bc.ndim, bc.shape, dev, fn, &r)) != CLT_OK)
    return s;
  if (r->numel > 0 && (s = dev->backend->binary(op, r, a, b, &bc)) != CLT_OK) {
    clt_tensor_release(r);
    return s;
  }
  *out = r;
  return CLT_OK;
}

clt_status clt_add(clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  return binary(&binops[CLT__OP_ADD], a, b, out);
}
clt_status clt_sub(clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  return binary(&binops[CLT__OP_SUB], a, b, out);
}
clt_status clt_mul(clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  return binary(&binops[CLT__OP_MUL], a, b, out);
}
clt_status clt_div(clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  return binary(&binops[CLT__OP_DIV], a, b, out);
}

clt_status clt_sum(clt_tensor *t, clt_tensor **out) {
  static const char fn[] = "clt_sum";
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_dtype rt = clt__dtype_is_float(t->dtype) ? t->dtype : CLT_I64;
  clt_device *dev = t->storage->dev;
  clt_tensor *r;
  if ((s = clt__tensor_new(rt, 0, NULL, dev, fn, &r)) != CLT_OK)
    return s;
  if ((s = dev->backend->sum(r, t, fn)) != CLT_OK) {
    clt_tensor_release(r);
    return s;
  }
  *out = r;
  return CLT_OK;
}

/* ---- linear algebra --------------------------------------------------------------------- */

static const char *const matmul_path_names[] = {
    [CLT__MM_BLAS] = "blas",     [CLT__MM_LOOP] = "loop",     [CLT__MM_CLBLAST] = "clblast",
    [CLT__MM_NATIVE] = "native", [CLT__MM_KERNEL] = "kernel",
};

const char *clt_matmul_path(clt_device *d) {
  static const char fn[] = "clt_matmul_path";
  if (clt__check_device(d, fn, "d") != CLT_OK)
    return NULL;
  clt_matmul_kind k;
  if (d->backend->matmul_path(d, fn, &k) != CLT_OK)
    return NULL;
  return matmul_path_names[k];
}

static clt_status shape_error(const char *fn, const clt_tensor *a, const clt_tensor *b,
                              const char *why) {
  char sa[256], sb[256];
  clt__format_shape(sa, sizeof sa, a->ndim, a->shape);
  clt__format_shape(sb, sizeof sb, b->ndim, b->shape);
  return clt__error(CLT_ERR_SHAPE_MISMATCH, fn,
                    "cannot multiply %s (argument 1) by %s (argument 2): %s", sa, sb, why);
}

clt_status clt_matmul(clt_tensor *a, clt_tensor *b, clt_tensor **out) {
  static const char fn[] = "clt_matmul";
  clt_status s;
  if ((s = clt__check_tensor(a, fn, "a")) != CLT_OK ||
      (s = clt__check_tensor(b, fn, "b")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_tensor *operands[2] = {a, b};
  if ((s = check_same_device(fn, 2, operands)) != CLT_OK)
    return s;
  for (int i = 0; i < 2; i++)
    if (!clt__dtype_is_float(operands[i]->dtype))
      return clt__error(CLT_ERR_DTYPE, fn,
                        "argument %d is %s; matmul takes f32 or f64 tensors (cast it with "
                        "clt_cast first)",
                        i + 1, clt_dtype_name(operands[i]->dtype));
  if (a->dtype != b->dtype)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "argument 1 is %s and argument 2 is %s; matmul takes two tensors of one "
                      "dtype: cast one with clt_cast first",
                      clt_dtype_name(a->dtype), clt_dtype_name(b->dtype));
  if (a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > 3)
    return shape_error(fn, a, b, "both operands must be 2-D or 3-D");
  clt_matmul_desc g;
  g.m = a->shape[a->ndim - 2];
  g.k = a->shape[a->ndim - 1];
  g.n = b->shape[b->ndim - 1];
  if (b->shape[b->ndim - 2] != g.k) {
    char why[128];
    snprintf(why, sizeof why, "the inner dimensions differ (%lld and %lld)", (long long)g.k,
             (long long)b->shape[b->ndim - 2]);
    return shape_error(fn, a, b, why);
  }
  int64_t ba = a->ndim == 3 ? a->shape[0] : -1, bb = b->ndim == 3 ? b->shape[0] : -1;
  if (ba >= 0 && bb >= 0 && ba != bb) {
    char why[128];
    snprintf(why, sizeof why, "the batch sizes differ (%lld and %lld)", (long long)ba,
             (long long)bb);
    return shape_error(fn, a, b, why);
  }
  g.batch = ba >= 0 ? ba : bb >= 0 ? bb : 1;
  g.sa = ba >= 0 ? g.m * g.k : 0;
  g.sb = bb >= 0 ? g.k * g.n : 0;
  if (g.batch * g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX)
    return shape_error(fn, a, b, "BLAS takes dimensions up to 2^31-1 (batch * m counts as one)");
  int nd = ba >= 0 || bb >= 0 ? 3 : 2;
  int64_t shape[3] = {g.batch, g.m, g.n};
  clt_device *dev = a->storage->dev;
  clt_matmul_kind kind;
  if ((s = dev->backend->matmul_path(dev, fn, &kind)) != CLT_OK)
    return s;
  clt_tensor *r;
  if ((s = clt__tensor_new(a->dtype, nd, nd == 3 ? shape : shape + 1, dev, fn, &r)) != CLT_OK)
    return s;
  if (r->numel > 0) {
    if (g.k == 0) {
      static const unsigned char zero[8] = {0};
      s = dev->backend->fill(r, zero, fn);
    } else {
      s = dev->backend->matmul(r, a, b, &g, fn);
    }
    if (s != CLT_OK) {
      clt_tensor_release(r);
      return s;
    }
  }
  *out = r;
  return CLT_OK;
}

clt_status clt_transpose(clt_tensor *t, int dim0, int dim1, clt_tensor **out) {
  static const char fn[] = "clt_transpose";
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  int nd = t->ndim > 0 ? t->ndim : 1; /* a 0-d tensor takes 0 and -1, as in PyTorch */
  int dims[2] = {dim0, dim1};
  for (int i = 0; i < 2; i++) {
    if (dims[i] < -nd || dims[i] >= nd)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "dim%d is %d, out of range for a %d-D tensor (expected %d to %d)", i,
                        dims[i], t->ndim, -nd, nd - 1);
    if (dims[i] < 0)
      dims[i] += nd;
  }
  int d0 = dims[0] < dims[1] ? dims[0] : dims[1], d1 = dims[0] < dims[1] ? dims[1] : dims[0];
  int64_t shape[CLT_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++)
    shape[i] = t->shape[i];
  clt_transpose_desc g = {1, 1, 1, 1, 1};
  if (t->ndim > 0) {
    shape[d0] = t->shape[d1];
    shape[d1] = t->shape[d0];
    for (int i = 0; i < t->ndim; i++) {
      if (i < d0)
        g.outer *= t->shape[i];
      else if (i == d0)
        g.n0 = t->shape[i];
      else if (i < d1)
        g.mid *= t->shape[i];
      else if (i == d1)
        g.n1 = t->shape[i];
      else
        g.inner *= t->shape[i];
    }
  }
  clt_device *dev = t->storage->dev;
  clt_tensor *r;
  if ((s = clt__tensor_new(t->dtype, t->ndim, shape, dev, fn, &r)) != CLT_OK)
    return s;
  if (r->numel > 0 && (s = dev->backend->transpose(r, t, &g, fn)) != CLT_OK) {
    clt_tensor_release(r);
    return s;
  }
  *out = r;
  return CLT_OK;
}
