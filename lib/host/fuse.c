/* SPDX-License-Identifier: MIT */
/* host/fuse.c - the host's evaluator of fused chains (lib/lazy.c plans them; docs/performance.md,
 * "Fusion"): one pass over the elements instead of one per op.
 *
 * The elements are taken in blocks (of BLOCK, or smaller ones for a pass that streams from
 * memory: see STREAM_MIN). For each block, every node runs the loop of
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
/* A pass that streams more than STREAM_MIN bytes (its dense leaves and its outputs, numel times
 * the sum of their element sizes) reads them from memory rather than from the cache. Its blocks
 * are STREAM_BLOCK bytes of the widest of those streams, and the dense leaves' elements of the
 * block AHEAD blocks on are prefetched while a block runs. In blocks of 4096 the loops take the
 * streams one or two at a time (a * b + c: a and b, then c and the output), and the pass ran at
 * 1.27x the eager ops' speed for a * b + c on 2^24 f32 (one thread's CPU time, a 2-core Xeon with
 * 2 MiB pages); in blocks of 320 with the leaves 640 elements ahead every stream has its reads
 * in flight at once: 1.42x, f64 2.5x -> 3.1x. Small blocks cost a call and a mispredicted loop
 * exit per node per block, which shows where the operands are in the cache: at 2^20 f32 (16 MiB
 * streamed) blocks of 320 were 8% slower than blocks of 4096; from 2^21 (32 MiB) they were as fast
 * or faster. Other block sizes and distances measured: 128 to 1024 elements, 1 to 6 blocks ahead;
 * 256 to 384 elements 1.25 to 3 KiB ahead did about as well; 2 KiB ahead gained little, 4 KiB
 * ahead, or a burst of prefetches for a block of 1024 or more, did worse than none. */
#define STREAM_MIN ((uint64_t)24 << 20)
#define STREAM_BLOCK 1280 /* bytes */
#define AHEAD 2

/* Where an operand of a node comes from, and the conversions that run_range applies to it: its
 * source's dtype to `want`, then, for an operand of an f16 or bf16 op, on to f32. */
typedef struct operand {
  int src;   /* a node (>= 0) or leaf -src - 1, as clt_fused_node.arg */
  int64_t s; /* 1 along the block, 0 one element for all */
  clt_dtype from, want;
  bool widen; /* then from `want` to f32 */
} operand;

typedef struct plan {
  const clt_fused *f;
  clt_leaf_kind kind[CLT__FUSE_MAX_LEAVES];
  const char *leaf[CLT__FUSE_MAX_LEAVES]; /* element loff of each leaf */
  size_t leaf_es[CLT__FUSE_MAX_LEAVES];
  char *out[CLT__FUSE_MAX_OUTS]; /* element out_off of each output */
  clt__host_loop1 f1[CLT__FUSE_MAX_NODES];
  clt__host_loop2 f2[CLT__FUSE_MAX_NODES];
  clt__host_loop3 f3[CLT__FUSE_MAX_NODES];
  clt_dtype loop_dt[CLT__FUSE_MAX_NODES]; /* what the node's loop stores */
  operand arg[CLT__FUSE_MAX_NODES][3];
  int64_t s[CLT__FUSE_MAX_NODES];          /* the node's value: 1 along the block, 0 one element */
  size_t es[CLT__FUSE_MAX_NODES];          /* the size of the node's dtype */
  bool direct[CLT__FUSE_MAX_NODES];        /* its loop stores straight into its output */
  int ops[CLT__FUSE_MAX_NODES], nops;      /* the nodes that run a loop, in order */
  int dense[CLT__FUSE_MAX_LEAVES], ndense; /* the leaves read where they lie */
  int strided[CLT__FUSE_MAX_LEAVES], nstrided; /* the leaves gathered */
  int64_t block;                               /* elements, at most BLOCK */
  int64_t ahead; /* blocks: the dense leaves of that block on are prefetched; 0 none */
} plan;

/* A value at the block that starts at element b0: p + b0 * step (step 0: the same bytes for every
 * block, a buffer of the thread's or one element for all). */
typedef struct ref {
  const char *p;
  size_t step;
} ref;

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
  size_t es = pl->leaf_es[l];
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

/* n copies of the one element at src (es bytes) at dst. */
static void replicate(char *dst, const char *src, size_t es, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    memcpy(dst + (size_t)i * es, src, es);
}

/* The elements lo .. hi - 1 of every output, with scratch (scratch_bytes(f)). */
static void run_range(const plan *pl, int64_t lo, int64_t hi, char *scratch) {
  const clt_fused *f = pl->f;
  const size_t bs = BUF_BYTES;
  const int64_t block = pl->block, ahead = pl->ahead;
  char *arg_buf = scratch, *leaf_buf = arg_buf + bs * ARG_BUFS,
       *node_buf = leaf_buf + bs * (size_t)f->nleaves;
  ref leaf[CLT__FUSE_MAX_LEAVES], v[CLT__FUSE_MAX_NODES];
  for (int l = 0; l < f->nleaves; l++)
    leaf[l] = pl->kind[l] == CLT__LEAF_DENSE    ? (ref){pl->leaf[l], pl->leaf_es[l]}
              : pl->kind[l] == CLT__LEAF_SCALAR ? (ref){pl->leaf[l], 0}
                                                : (ref){leaf_buf + bs * (size_t)l, 0};
  for (int i = 0; i < f->nnodes; i++)
    v[i] = !f->node[i].op  ? (ref){(const char *)&f->node[i].konst, 0}
           : pl->direct[i] ? (ref){pl->out[f->node[i].out], pl->es[i]}
                           : (ref){node_buf + bs * (size_t)i, 0};
  for (int64_t b0 = lo; b0 < hi; b0 += block) {
    int64_t m = hi - b0 < block ? hi - b0 : block;
    /* the cache lines of the block `ahead` blocks on, of every dense leaf (written out here: GCC
     * drops a function that only prefetches, as one without effects) */
    if (ahead && b0 + ahead * block < hi) {
      int64_t q0 = b0 + ahead * block, q1 = q0 + block < hi ? q0 + block : hi;
      for (int j = 0; j < pl->ndense; j++) {
        int l = pl->dense[j];
        uintptr_t p = (uintptr_t)(pl->leaf[l] + (size_t)q0 * pl->leaf_es[l]) & ~(uintptr_t)63;
        uintptr_t e = (uintptr_t)(pl->leaf[l] + (size_t)q1 * pl->leaf_es[l]);
        for (; p < e; p += 64)
          __builtin_prefetch((const void *)p);
      }
    }
    for (int j = 0; j < pl->nstrided; j++)
      gather(pl, pl->strided[j], b0, m, leaf_buf + bs * (size_t)pl->strided[j]);
    for (int j = 0; j < pl->nops; j++) {
      int i = pl->ops[j];
      const clt_fused_node *nd = &f->node[i];
      const clt_op *op = nd->op;
      const char *a[3];
      for (int k = 0; k < op->arity; k++) {
        const operand *x = &pl->arg[i][k];
        const ref *r = x->src >= 0 ? &v[x->src] : &leaf[-x->src - 1];
        int64_t xn = x->s ? m : 1;
        a[k] = r->p + (size_t)b0 * r->step;
        if (x->from != x->want) {
          clt__host_convert(arg_buf + bs * (size_t)k, x->want, a[k], x->from, xn);
          a[k] = arg_buf + bs * (size_t)k;
        }
        if (x->widen) {
          clt__host_convert(arg_buf + bs * (size_t)(3 + k), CLT_F32, a[k], x->want, xn);
          a[k] = arg_buf + bs * (size_t)(3 + k);
        }
      }
      int64_t n = pl->s[i] ? m : 1; /* every operand one element: so is the value */
      char *dst = (char *)v[i].p + (size_t)b0 * v[i].step;
      if (op->kind == CLT__OP_cast) {
        clt__host_convert(dst, nd->dtype, a[0], pl->arg[i][0].want, n);
      } else {
        /* the loop's own store, then the node's dtype where they differ */
        char *lo_dst = pl->loop_dt[i] == nd->dtype ? dst : arg_buf + bs * 6;
        if (op->arity == 1) {
          pl->f1[i](lo_dst, a[0], n);
        } else if (op->arity == 2) {
          pl->f2[i](lo_dst, a[0], a[1], n, pl->arg[i][0].s, pl->arg[i][1].s);
        } else {
          int64_t st[3] = {pl->arg[i][0].s, pl->arg[i][1].s, pl->arg[i][2].s};
          pl->f3[i](lo_dst, a[0], a[1], a[2], n, st);
        }
        if (lo_dst != dst)
          clt__host_convert(dst, nd->dtype, lo_dst, pl->loop_dt[i], n);
      }
      if (nd->out >= 0 && !pl->direct[i]) { /* from its buffer into its output */
        char *o = pl->out[nd->out] + (size_t)b0 * pl->es[i];
        if (pl->s[i])
          memcpy(o, dst, (size_t)m * pl->es[i]);
        else
          replicate(o, dst, pl->es[i], m);
      }
    }
  }
}

clt_status clt__host_fused(clt_device *dev, const clt_fused *f, bool *later) {
  *later = false; /* nothing to build */
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
    pl.leaf_es[l] = clt_dtype_size(f->leaf[l]->dtype);
    pl.leaf[l] = (const char *)s->host + (size_t)f->loff[l] * pl.leaf_es[l];
    if (pl.kind[l] == CLT__LEAF_DENSE)
      pl.dense[pl.ndense++] = l;
    else if (pl.kind[l] == CLT__LEAF_STRIDED)
      pl.strided[pl.nstrided++] = l;
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
  /* what every block does with each operand, and where each node's value goes */
  for (int i = 0; i < f->nnodes; i++) {
    const clt_fused_node *nd = &f->node[i];
    const clt_op *op = nd->op;
    pl.es[i] = clt_dtype_size(nd->dtype);
    if (!op) /* a scalar operand: its bytes */
      continue;
    pl.ops[pl.nops++] = i;
    bool half = clt__dtype_is_half(nd->compute);
    for (int k = 0; k < op->arity; k++) {
      operand *x = &pl.arg[i][k];
      int r = nd->arg[k];
      x->src = r;
      x->s = r >= 0 ? pl.s[r] : pl.kind[-r - 1] != CLT__LEAF_SCALAR;
      x->from = r >= 0 ? f->node[r].dtype : f->leaf[-r - 1]->dtype;
      x->want = op->kind == CLT__OP_cast ? x->from : op->cond && k == 0 ? CLT_BOOL : nd->compute;
      /* f32 loops, rounded operands */
      x->widen = half && x->want == nd->compute && op->kind != CLT__OP_cast;
      pl.s[i] |= x->s;
    }
    /* straight into the output when the loop stores the node's dtype along the block */
    pl.direct[i] = nd->out >= 0 && pl.s[i] && pl.loop_dt[i] == nd->dtype;
  }
  /* the blocks, from the bytes the pass streams (STREAM_MIN) */
  size_t widest = 1, row = 0;
  for (int j = 0; j < pl.ndense; j++) {
    size_t es = pl.leaf_es[pl.dense[j]];
    widest = es > widest ? es : widest;
    row += es;
  }
  for (int o = 0; o < f->nouts; o++) {
    size_t es = clt_dtype_size(f->out_dtype[o]);
    widest = es > widest ? es : widest;
    row += es;
  }
  pl.block = BLOCK;
  if ((uint64_t)f->numel * row > STREAM_MIN) {
    pl.block = STREAM_BLOCK / (int64_t)widest;
    pl.ahead = AHEAD;
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
