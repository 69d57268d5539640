/* opencl/fuse.c - the fused kernels of lazy fusion (lib/lazy.c plans them): one generated kernel
 * per chain structure, kernels/fused.cl filled in by defines.
 *
 * The defines hold the whole structure (each node's op, dtypes and operands, each leaf's dtype
 * and kind of access, each output's dtype) and nothing else: sizes, offsets and strides are
 * arguments, and scalar operands are 0-d leaves, so a chain run again with other values or
 * sizes finds its program in the cache (in memory and on disk). Each node's value is computed
 * exactly as kernels/elementwise.cl computes it (operands converted to the compute type, the
 * table's expression, the result converted to its dtype) and kept in a variable of the result
 * type, so the fused result is bit-identical to running the ops one by one; FP_CONTRACT is off
 * in the kernel, so no multiply and add of two nodes become one fma. */
#include "cl-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Mirrors clt_fused_geom_t in kernels/fused.cl: the shape and the strided leaves' strides. */
typedef struct clt_cl_fused_geom {
  cl_long shape[CLT_MAX_DIMS];
  cl_long s[CLT__FUSE_MAX_STRIDED][CLT_MAX_DIMS];
} clt_cl_fused_geom;

_Static_assert(CLT_MAX_DIMS == 8 && CLT__FUSE_MAX_STRIDED == 4,
               "kernels/fused.cl's clt_fused_geom_t has 4 x 8 strides");

typedef struct text {
  char *buf;
  size_t size, len;
  bool full;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= t->size - t->len) {
    t->full = true;
    t->len = t->size - 1;
  } else {
    t->len += (size_t)n;
  }
}

/* The table's expression with its type name TC replaced by tc (the expression is a macro
 * argument in elementwise.cl, where TC is a define; here it goes into a define's body). */
static bool ident_char(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static void expr_text(text *t, const char *expr, const char *tc) {
  for (const char *p = expr; *p;) {
    if (p[0] == 'T' && p[1] == 'C' && (p == expr || !ident_char(p[-1])) && !ident_char(p[2])) {
      put(t, "%s", tc);
      p += 2;
    } else {
      put(t, "%c", *p++);
    }
  }
}

/* The value of operand r of a node, as text: an earlier node's variable or a leaf's element. */
static void operand_text(text *t, int r, const clt_leaf_kind *kinds, const int *slot) {
  if (r >= 0) {
    put(t, "v%d", r);
    return;
  }
  int l = -r - 1;
  if (kinds[l] == CLT__LEAF_SCALAR)
    put(t, "l%d[lo%d]", l, l);
  else if (kinds[l] == CLT__LEAF_DENSE)
    put(t, "l%d[lo%d+i]", l, l);
  else
    put(t, "l%d[lo%d+x[%d]]", l, l, slot[l]);
}

static clt_status fused_defines(clt_device *d, const clt_fused *f, const clt_leaf_kind *kinds,
                                const int *slot, int nstrided, text *t) {
  bool fp64 = false;
  for (int i = 0; i < f->nnodes; i++)
    fp64 = fp64 || f->node[i].compute == CLT_F64 || f->node[i].dtype == CLT_F64;
  for (int l = 0; l < f->nleaves; l++)
    fp64 = fp64 || f->leaf[l]->dtype == CLT_F64;
  put(t, "%s#define CLT_FUSED_STRIDED %d\n", clt__cl_base_options(d, fp64), nstrided);
  put(t, "#define CLT_FUSED_PARAMS ");
  for (int o = 0; o < f->nouts; o++)
    put(t, "__global %s *restrict o%d, ", clt__dtype_cl_type(f->out_dtype[o]), o);
  for (int l = 0; l < f->nleaves; l++)
    put(t, "__global const %s *restrict l%d, ", clt__dtype_cl_type(f->leaf[l]->dtype), l);
  put(t, "ulong n, ulong step");
  for (int l = 0; l < f->nleaves; l++)
    put(t, ", ulong lo%d", l);
  if (nstrided)
    put(t, ", int ndim, clt_fused_geom_t g");
  put(t, "\n#define CLT_FUSED_BODY ");
  for (int i = 0; i < f->nnodes; i++) {
    const clt_fused_node *nd = &f->node[i];
    const clt_op *op = nd->op;
    const char *expr = clt__op_expr(op, nd->compute);
    if (!expr)
      return clt__error(CLT_ERR_INTERNAL, f->fn, "%s has no expression for %s", op->name,
                        clt_dtype_name(nd->compute));
    const char *tc = clt__dtype_cl_type(nd->compute); /* float or double: no wrapping twin */
    put(t, "%s v%d; { ", clt__dtype_cl_type(nd->dtype), i);
    static const char *const names[3] = {"a", "b", "c"};
    for (int j = 0; j < 3; j++) {
      int k = op->arity == 1 ? 0 : op->arity == 2 && j == 2 ? 1 : j; /* OP(x,x,x), OP(x,y,y) */
      const char *ty = op->cond && k == 0 ? "uchar" : tc;
      put(t, "%s %s = (%s)(%s)", ty, names[j], ty, ty);
      operand_text(t, nd->arg[k], kinds, slot);
      put(t, "; ");
    }
    char x[2048];
    text xe = {x, sizeof x, 0, false};
    expr_text(&xe, expr, tc);
    if (xe.full)
      return clt__error(CLT_ERR_INTERNAL, f->fn, "the expression of %s is too long", op->name);
    char conv[4096 + 256];
    clt__cl_store_conv(nd->compute, nd->dtype, x, conv, sizeof conv);
    put(t, "v%d = %s; } ", i, conv);
    if (nd->out >= 0)
      put(t, "o%d[i] = v%d; ", nd->out, i);
  }
  put(t, "\n");
  if (t->full)
    return clt__error(CLT_ERR_INTERNAL, f->fn, "the fused kernel's source outgrew its buffer");
  return CLT_OK;
}

clt_status clt__cl_fused(clt_device *d, const clt_fused *f) {
  const char *fn = f->fn;
  clt_leaf_kind kinds[CLT__FUSE_MAX_LEAVES];
  int slot[CLT__FUSE_MAX_LEAVES], nstrided = 0, strided_leaf[CLT__FUSE_MAX_STRIDED];
  for (int l = 0; l < f->nleaves; l++) {
    kinds[l] = clt__leaf_kind(f->ndim, f->shape, f->ls[l]);
    slot[l] = -1;
    if (kinds[l] == CLT__LEAF_STRIDED) {
      if (nstrided == CLT__FUSE_MAX_STRIDED)
        return clt__error(CLT_ERR_INTERNAL, fn, "a fused kernel with too many strided operands");
      strided_leaf[nstrided] = l;
      slot[l] = nstrided++;
    }
  }
  char defines[16384];
  text t = {defines, sizeof defines, 0, false};
  clt_status st = fused_defines(d, f, kinds, slot, nstrided, &t);
  if (st != CLT_OK)
    return st;
  cl_kernel kern;
  if ((st = clt__get_kernel(d, "fused", defines, "fused", fn, &kern)) != CLT_OK)
    return st;

  clt_launch l = clt__cl_launch_1d(d, f->numel);
  cl_ulong count = (cl_ulong)f->numel, step = l.chunk;
  cl_ulong loff[CLT__FUSE_MAX_LEAVES];
  clt_cl_arg args[CLT__FUSE_MAX_OUTS + 2 * CLT__FUSE_MAX_LEAVES + 4];
  clt_storage *reads[CLT__FUSE_MAX_LEAVES];
  clt_storage *writes[CLT__FUSE_MAX_OUTS];
  int arg = 0;
  for (int o = 0; o < f->nouts; o++) {
    args[arg++] = (clt_cl_arg){sizeof(cl_mem), &f->out[o]->buf};
    writes[o] = f->out[o];
  }
  for (int k = 0; k < f->nleaves; k++) {
    args[arg++] = (clt_cl_arg){sizeof(cl_mem), &f->leaf[k]->storage->buf};
    reads[k] = f->leaf[k]->storage;
  }
  args[arg++] = (clt_cl_arg){sizeof count, &count};
  args[arg++] = (clt_cl_arg){sizeof step, &step};
  for (int k = 0; k < f->nleaves; k++) {
    loff[k] = (cl_ulong)f->loff[k];
    args[arg++] = (clt_cl_arg){sizeof loff[k], &loff[k]};
  }
  cl_int nd = f->ndim;
  clt_cl_fused_geom g;
  if (nstrided) {
    memset(&g, 0, sizeof g);
    for (int i = 0; i < f->ndim; i++) {
      g.shape[i] = f->shape[i];
      for (int k = 0; k < nstrided; k++)
        g.s[k][i] = f->ls[strided_leaf[k]][i];
    }
    args[arg++] = (clt_cl_arg){sizeof nd, &nd};
    args[arg++] = (clt_cl_arg){sizeof g, &g};
  }
  return clt__cl_run(d, kern, &l, args, arg, reads, f->nleaves, writes, f->nouts, fn);
}
