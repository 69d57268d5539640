/* host/fuse.c - the host's evaluator of fused chains (lib/lazy.c plans them; docs/performance.md,
 * "Fusion"): one pass over the elements instead of one per op.
 *
 * The elements are taken in blocks of BLOCK. For each block, every node runs the loop of
 * host/elementwise.c that runs its op eagerly (the same conversions of the operands to the compute
 * dtype, the same expression, the same store), from and into small buffers that stay in the
 * cache, so only the leaves are read from memory and only the outputs written to it, and the
 * result is bit-identical to running the ops one by one. A leaf of the node's compute dtype is
 * read where it lies; a node whose output is a tensor is computed straight into it. Values that
 * are one element for every index (scalar operands, broadcast leaves, and nodes of only those)
 * are computed once per block, with stride 0. The blocks are shared among the threads. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK 4096 /* elements: an f64 value of a block is 32 KiB */

/* A value over a block: element i at p + i * s elements (s is 0 or 1). */
typedef struct val {
  const char *p;
  int64_t s;
  clt_dtype dt;
} val;

typedef struct plan {
  const clt_fused *f;
  clt_leaf_kind kind[CLT__FUSE_MAX_LEAVES];
  const char *leaf[CLT__FUSE_MAX_LEAVES]; /* element loff of each leaf */
  char *out[CLT__FUSE_MAX_OUTS];          /* element out_off of each output */
  clt__host_loop1 f1[CLT__FUSE_MAX_NODES];
  clt__host_loop2 f2[CLT__FUSE_MAX_NODES];
  clt__host_loop3 f3[CLT__FUSE_MAX_NODES];
  clt_dtype loop_dt[CLT__FUSE_MAX_NODES]; /* what the node's loop stores */
} plan;

/* The scratch of one thread: two buffers per operand (an operand of an f16 or bf16 op is rounded
 * to that dtype, then widened to f32), one for a loop's store before its conversion, one per
 * leaf (strided leaves are gathered) and one per node, BLOCK elements of up to 8 bytes each. */
#define BUF_BYTES ((size_t)BLOCK * 8)
#define ARG_BUFS 7
static size_t scratch_bytes(const clt_fused *f) {
  return BUF_BYTES * (size_t)(ARG_BUFS + f->nleaves + f->nnodes);
}

/* Leaf l's elements lo .. lo + m - 1 (in the shape's C order) gathered into buf. */
static void gather(const plan *pl, int l, int64_t lo, int64_t m, char *buf) {
  const clt_fused *f = pl->f;
  const int64_t *s = f->ls[l];
  int nd = f->ndim;
  int64_t idx[CLT_MAX_DIMS], off = 0, rem = lo;
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = rem % f->shape[d];
    rem /= f->shape[d];
    off += idx[d] * s[d];
  }
  size_t es = clt_dtype_size(f->leaf[l]->dtype);
  const char *p = pl->leaf[l];
  int64_t last = nd - 1, n_last = f->shape[last], s_last = s[last];
  for (int64_t i = 0; i < m;) {
    /* along the last dimension while it lasts */
    int64_t run = n_last - idx[last] < m - i ? n_last - idx[last] : m - i;
    switch (es) {
    case 1:
      for (int64_t j = 0; j < run; j++)
        ((uint8_t *)buf)[i + j] = ((const uint8_t *)p)[off + j * s_last];
      break;
    case 2:
      for (int64_t j = 0; j < run; j++)
        ((uint16_t *)buf)[i + j] = ((const uint16_t *)p)[off + j * s_last];
      break;
    case 4:
      for (int64_t j = 0; j < run; j++)
        ((uint32_t *)buf)[i + j] = ((const uint32_t *)p)[off + j * s_last];
      break;
    default:
      for (int64_t j = 0; j < run; j++)
        ((uint64_t *)buf)[i + j] = ((const uint64_t *)p)[off + j * s_last];
      break;
    }
    i += run;
    off += run * s_last;
    idx[last] += run;
    for (int d = last; d > 0 && idx[d] == f->shape[d]; d--) { /* carry into the dims before */
      off -= idx[d] * s[d];
      idx[d] = 0;
      idx[d - 1]++;
      off += s[d - 1];
    }
  }
}

/* v as dtype `to` (converted into buf when it is not). */
static val as_dtype(val v, clt_dtype to, int64_t m, char *buf) {
  if (v.dt == to)
    return v;
  clt__host_convert(buf, to, v.p, v.dt, v.s ? m : 1);
  return (val){buf, v.s, to};
}

/* n copies of the one element at src (es bytes) at dst. */
static void replicate(char *dst, const char *src, size_t es, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    memcpy(dst + (size_t)i * es, src, es);
}

/* The elements lo .. hi - 1 of every output, with scratch (scratch_bytes(f)). */
static void run_range(const plan *pl, int64_t lo, int64_t hi, char *scratch) {
  const clt_fused *f = pl->f;
  const size_t bs = BUF_BYTES;
  char *arg_buf = scratch, *leaf_buf = arg_buf + bs * ARG_BUFS,
       *node_buf = leaf_buf + bs * (size_t)f->nleaves;
  val leaf[CLT__FUSE_MAX_LEAVES], v[CLT__FUSE_MAX_NODES];
  for (int64_t b0 = lo; b0 < hi; b0 += BLOCK) {
    int64_t m = hi - b0 < BLOCK ? hi - b0 : BLOCK;
    for (int l = 0; l < f->nleaves; l++) {
      clt_dtype dt = f->leaf[l]->dtype;
      size_t es = clt_dtype_size(dt);
      if (pl->kind[l] == CLT__LEAF_SCALAR) {
        leaf[l] = (val){pl->leaf[l], 0, dt};
      } else if (pl->kind[l] == CLT__LEAF_DENSE) {
        leaf[l] = (val){pl->leaf[l] + (size_t)b0 * es, 1, dt};
      } else {
        gather(pl, l, b0, m, leaf_buf + bs * (size_t)l);
        leaf[l] = (val){leaf_buf + bs * (size_t)l, 1, dt};
      }
    }
    for (int i = 0; i < f->nnodes; i++) {
      const clt_fused_node *nd = &f->node[i];
      const clt_op *op = nd->op;
      if (!op) { /* a scalar operand: its bytes */
        v[i] = (val){(const char *)&nd->konst, 0, nd->dtype};
        continue;
      }
      val a[3];
      int64_t s = 0;
      bool half = clt__dtype_is_half(nd->compute);
      for (int k = 0; k < op->arity; k++) {
        int r = nd->arg[k];
        val x = r >= 0 ? v[r] : leaf[-r - 1];
        clt_dtype want = op->kind == CLT__OP_cast ? x.dt
                         : op->cond && k == 0     ? CLT_BOOL
                                                  : nd->compute;
        a[k] = as_dtype(x, want, m, arg_buf + bs * (size_t)k);
        if (half && want == nd->compute &&
            op->kind != CLT__OP_cast) /* f32 loops, rounded operands */
          a[k] = as_dtype(a[k], CLT_F32, m, arg_buf + bs * (size_t)(3 + k));
        s |= a[k].s;
      }
      int64_t n = s ? m : 1; /* every operand one element: so is the value */
      size_t es = clt_dtype_size(nd->dtype);
      char *own = node_buf + bs * (size_t)i;
      /* straight into the output when the loop stores the node's dtype along the block */
      char *dst = nd->out >= 0 && s && pl->loop_dt[i] == nd->dtype
                      ? pl->out[nd->out] + (size_t)b0 * es
                      : own;
      if (op->kind == CLT__OP_cast) {
        clt__host_convert(dst, nd->dtype, a[0].p, a[0].dt, n);
      } else {
        /* the loop's own store, then the node's dtype where they differ */
        char *lo_dst = pl->loop_dt[i] == nd->dtype ? dst : arg_buf + bs * 6;
        if (op->arity == 1) {
          pl->f1[i](lo_dst, a[0].p, n);
        } else if (op->arity == 2) {
          pl->f2[i](lo_dst, a[0].p, a[1].p, n, a[0].s, a[1].s);
        } else {
          int64_t st[3] = {a[0].s, a[1].s, a[2].s};
          pl->f3[i](lo_dst, a[0].p, a[1].p, a[2].p, n, st);
        }
        if (lo_dst != dst)
          clt__host_convert(dst, nd->dtype, lo_dst, pl->loop_dt[i], n);
      }
      v[i] = (val){dst, s ? 1 : 0, nd->dtype};
      if (nd->out >= 0 && dst == own) {
        char *o = pl->out[nd->out] + (size_t)b0 * es;
        if (s)
          memcpy(o, own, (size_t)m * es);
        else
          replicate(o, own, es, m);
      }
    }
  }
}

clt_status clt__host_fused(clt_device *dev, const clt_fused *f) {
  (void)dev;
  const char *fn = f->fn;
  clt_status st = CLT_OK;
  plan pl;
  memset(&pl, 0, sizeof pl);
  pl.f = f;
  /* pending device copies into or out of the operands are waited for first, as eagerly */
  for (int l = 0; l < f->nleaves && st == CLT_OK; l++) {
    clt_storage *s = f->leaf[l]->storage;
    st = clt__storage_host_wait(s, false, fn);
    pl.kind[l] = clt__leaf_kind(f->ndim, f->shape, f->ls[l]);
    pl.leaf[l] = (const char *)s->host + (size_t)f->loff[l] * clt_dtype_size(f->leaf[l]->dtype);
  }
  for (int o = 0; o < f->nouts && st == CLT_OK; o++) {
    st = clt__storage_host_wait(f->out[o], true, fn);
    pl.out[o] = (char *)f->out[o]->host + (size_t)f->out_off[o] * clt_dtype_size(f->out_dtype[o]);
  }
  if (st != CLT_OK)
    return st;
  for (int i = 0; i < f->nnodes; i++) {
    const clt_fused_node *nd = &f->node[i];
    pl.loop_dt[i] = nd->dtype;
    if (!nd->op || nd->op->kind == CLT__OP_cast)
      continue;
    /* f16 and bf16 compute in the f32 loops, as host/elementwise.c does */
    clt_dtype lc = clt__dtype_is_half(nd->compute) ? CLT_F32 : nd->compute;
    clt__host_loops(nd->op->kind, lc, &pl.f1[i], &pl.f2[i], &pl.f3[i]);
    bool have = nd->op->arity == 1   ? pl.f1[i] != NULL
                : nd->op->arity == 2 ? pl.f2[i] != NULL
                                     : pl.f3[i] != NULL;
    if (!have)
      return clt__error(CLT_ERR_INTERNAL, fn, "no host loop for %s in %s", nd->op->name,
                        clt_dtype_name(nd->compute));
    pl.loop_dt[i] = nd->op->result == CLT__RESULT_BOOL ? CLT_BOOL : lc;
  }
  const size_t bytes = scratch_bytes(f);
  int64_t parts = clt__host_parts(f->numel);
  char **scratch = calloc((size_t)parts, sizeof *scratch);
  bool ok = scratch != NULL;
  for (int64_t k = 0; k < parts && ok; k++)
    ok = (scratch[k] = malloc(bytes)) != NULL;
  if (ok) {
    if (parts == 1) {
      run_range(&pl, 0, f->numel, scratch[0]);
    } else {
      CLT__PARALLEL_FOR
      for (int64_t k = 0; k < parts; k++) {
        int64_t lo, hi;
        clt__part(f->numel, parts, k, &lo, &hi);
        run_range(&pl, lo, hi, scratch[k]);
      }
    }
  }
  for (int64_t k = 0; scratch && k < parts; k++)
    free(scratch[k]);
  free(scratch);
  if (!ok)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory for a fused chain's buffers");
  return CLT_OK;
}
