/* SPDX-License-Identifier: MIT */
/* opencl/fuse.c - the fused kernels of lazy fusion (lib/lazy.c plans them): one generated kernel
 * per chain structure, kernels/fused.cl filled in by defines.
 *
 * The defines hold the whole structure (each node's op, dtypes and operands, each leaf's dtype
 * and kind of access, each output's dtype) and nothing else: sizes, offsets and strides are
 * arguments, and scalar operands are 0-d leaves, so a chain run again with other values or
 * sizes finds its program in the cache (in memory and on disk). Each node's value is computed
 * exactly as kernels/elementwise.cl computes it (operands converted to the compute type, then
 * for the integer ops that wrap to its unsigned twin; the table's expression, with the integer
 * helpers of that type; the result converted to its dtype as clt__cl_store_conv says) and kept
 * in a variable of the result type, so the fused result is bit-identical to running the ops one
 * by one, for float, integer and bool computations alike; FP_CONTRACT is off in the kernel, so
 * no multiply and add of two nodes become one fma. */
#include "cl-internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The table's expression for a node computing in the type tc (wrapping in utc), as the text of
 * a define's body: the expression is a macro argument in elementwise.cl, where TC and the integer
 * helpers are defines of the one compute type, so here TC becomes tc, CLT_IPOW the function
 * clt_ipow_<tc> (its definition added to `helpers` once per type), and CLT_IABS(x) becomes
 * CLT_IABS_AS(tc, x) (kernels/common.cl defines both for the two kernel files). */
static bool ident_char(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Whether the identifier `name` starts at p (and is not part of a longer one). */
static bool ident_at(const char *expr, const char *p, const char *name) {
  size_t n = strlen(name);
  return strncmp(p, name, n) == 0 && (p == expr || !ident_char(p[-1])) && !ident_char(p[n]);
}

typedef struct helpers {
  text t;            /* the instantiations, for the define CLT_FUSED_HELPERS */
  const char *ipow[8]; /* the types whose clt_ipow_<type> it defines */
  int nipow;
} helpers;

static void expr_text(text *t, const char *expr, const char *tc, const char *utc, helpers *h) {
  for (const char *p = expr; *p;) {
    if (ident_at(expr, p, "TC")) {
      put(t, "%s", tc);
      p += 2;
    } else if (ident_at(expr, p, "CLT_IPOW")) {
      bool have = false;
      for (int i = 0; i < h->nipow && !have; i++)
        have = strcmp(h->ipow[i], tc) == 0;
      if (!have && h->nipow < 8) {
        h->ipow[h->nipow++] = tc;
        put(&h->t, "CLT_DEFINE_IPOW(clt_ipow_%s, %s, %s) ", tc, tc, utc);
      } else if (!have) {
        h->t.full = true; /* cannot happen: there are five integer compute types */
      }
      put(t, "clt_ipow_%s", tc);
      p += strlen("CLT_IPOW");
    } else if (ident_at(expr, p, "CLT_IABS")) {
      const char *q = p + strlen("CLT_IABS");
      while (*q == ' ')
        q++;
      if (*q != '(') { /* not a call: left for the build to report */
        put(t, "CLT_IABS");
        p += strlen("CLT_IABS");
        continue;
      }
      put(t, "CLT_IABS_AS(%s, ", tc);
      p = q + 1;
    } else {
      put(t, "%c", *p++);
    }
  }
}

/* The type of a node's variable: its dtype's, but float for f16 and bf16 (their values, rounded
 * as stored). */
static const char *var_type(clt_dtype dt) {
  return clt__dtype_is_half(dt) ? "float" : clt__dtype_cl_type(dt);
}

/* The value of operand r of a node, as text: an earlier node's variable or a leaf's element (f16
 * through vload_half, bf16 as the top half of a float, as kernels/elementwise.cl loads them). */
static void operand_text(text *t, const clt_fused *f, int r, const clt_leaf_kind *kinds,
                         const int *slot) {
  if (r >= 0) {
    put(t, "v%d", r);
    return;
  }
  int l = -r - 1;
  char at[64];
  if (kinds[l] == CLT__LEAF_SCALAR)
    snprintf(at, sizeof at, "lo%d", l);
  else if (kinds[l] == CLT__LEAF_DENSE)
    snprintf(at, sizeof at, "lo%d+i", l);
  else
    snprintf(at, sizeof at, "lo%d+x[%d]", l, slot[l]);
  if (f->leaf[l]->dtype == CLT_F16)
    put(t, "vload_half(%s,l%d)", at, l);
  else if (f->leaf[l]->dtype == CLT_BF16)
    put(t, "clt_bf16_to_f32(l%d[%s])", l, at);
  else
    put(t, "l%d[%s]", l, at);
}

/* The dtype of operand r of a node. */
static clt_dtype operand_dtype(const clt_fused *f, int r) {
  return r >= 0 ? f->node[r].dtype : f->leaf[-r - 1]->dtype;
}

static clt_status fused_defines(clt_device *d, const clt_fused *f, const clt_leaf_kind *kinds,
                                const int *slot, int nstrided, text *t) {
  char hbuf[1024];
  helpers hs = {{hbuf, sizeof hbuf, 0, false}, {NULL}, 0}, *h = &hs;
  hbuf[0] = 0;
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
  for (int o = 0; o < f->nouts; o++)
    put(t, ", ulong oo%d", o);
  for (int l = 0; l < f->nleaves; l++)
    put(t, ", ulong lo%d", l);
  for (int i = 0; i < f->nnodes; i++)
    if (!f->node[i].op)
      put(t, ", %s c%d", clt__dtype_cl_type(f->node[i].dtype), i);
  if (nstrided)
    put(t, ", int ndim, clt_fused_geom_t g");
  put(t, "\n#define CLT_FUSED_BODY ");
  for (int i = 0; i < f->nnodes; i++) {
    const clt_fused_node *nd = &f->node[i];
    const clt_op *op = nd->op;
    if (!op) { /* a scalar operand */
      put(t, "%s v%d = c%d; ", clt__dtype_cl_type(nd->dtype), i, i);
      continue;
    }
    const char *expr = clt__op_expr(op, nd->compute);
    if (!expr)
      return clt__error(CLT_ERR_INTERNAL, f->fn, "%s has no expression for %s", op->name,
                        clt_dtype_name(nd->compute));
    /* as kernels/elementwise.cl: operands converted to TP, then TC (the unsigned twin for the
     * integer ops that wrap; f16 and bf16 compute in float, an operand of another dtype rounded
     * to theirs first); where's condition to uchar */
    bool wraps = op->wraps && !clt__dtype_is_float(nd->compute);
    const char *tp = var_type(nd->compute), *utc = "uint";
    if (!clt__dtype_is_float(nd->compute))
      utc = clt__cl_unsigned_twin(nd->compute);
    const char *tc = wraps ? utc : tp;
    put(t, "%s v%d; { ", var_type(nd->dtype), i);
    static const char *const names[3] = {"a", "b", "c"};
    for (int j = 0; j < 3; j++) {
      int k = op->arity == 1 ? 0 : op->arity == 2 && j == 2 ? 1 : j; /* OP(x,x,x), OP(x,y,y) */
      bool cond = op->cond && k == 0;
      const char *round = "";
      if (!cond && !clt__dtype_is_half(operand_dtype(f, nd->arg[k])))
        round = nd->compute == CLT_F16    ? "clt_round_f16((float)"
                : nd->compute == CLT_BF16 ? "clt_round_bf16((float)"
                                          : "";
      put(t, "%s %s = (%s)(%s)%s", cond ? "uchar" : tc, names[j], cond ? "uchar" : tc,
          cond ? "uchar" : tp, round);
      operand_text(t, f, nd->arg[k], kinds, slot);
      put(t, "%s; ", *round ? ")" : "");
    }
    char x[2048];
    text xe = {x, sizeof x, 0, false};
    expr_text(&xe, expr, tc, utc, h);
    if (xe.full)
      return clt__error(CLT_ERR_INTERNAL, f->fn, "the expression of %s is too long", op->name);
    char conv[4096 + 256];
    if (nd->dtype == CLT_F16) /* as clt_store_f16 stores it and vload_half reads it back */
      snprintf(conv, sizeof conv, "clt_f16_stored((float)(%s))", x);
    else if (nd->dtype == CLT_BF16)
      snprintf(conv, sizeof conv, "clt_round_bf16((float)(%s))", x);
    else
      clt__cl_store_conv(nd->compute, nd->dtype, x, conv, sizeof conv);
    put(t, "v%d = %s; } ", i, conv);
    if (nd->out >= 0 && nd->dtype == CLT_F16) /* exact: v is an f16 value */
      put(t, "clt_store_f16(o%d, oo%d+i, v%d); ", nd->out, nd->out, i);
    else if (nd->out >= 0 && nd->dtype == CLT_BF16)
      put(t, "o%d[oo%d+i] = clt_f32_to_bf16(v%d); ", nd->out, nd->out, i);
    else if (nd->out >= 0)
      put(t, "o%d[oo%d+i] = v%d; ", nd->out, nd->out, i);
  }
  put(t, "\n#define CLT_FUSED_HELPERS %s\n", hbuf);
  if (t->full || h->t.full)
    return clt__error(CLT_ERR_INTERNAL, f->fn, "the fused kernel's source outgrew its buffer");
  return CLT_OK;
}

/* ---- the kernel memo --------------------------------------------------------------------------
 * Formatting a chain's defines and finding them in the program cache costs several microseconds,
 * as much as a small kernel runs. A chain's structure fits in a few dozen small numbers (its
 * signature), so launches look the kernel up here first, by device and signature; a miss formats
 * the defines and fills the slot. The program cache never drops a kernel, so an entry stays valid
 * until exit; a full table just stops memoizing. */
#define SIG_MAX (4 + 6 * CLT__FUSE_MAX_NODES + 2 * CLT__FUSE_MAX_LEAVES + CLT__FUSE_MAX_OUTS)
#define FUSE_MEMO_SLOTS 512 /* a power of two */

typedef struct sig {
  uint16_t v[SIG_MAX];
  int n;
} sig;

typedef struct fuse_slot {
  const clt_device *dev; /* NULL: empty */
  uint64_t hash;
  uint16_t *v; /* the signature, malloc'ed */
  int n;
  cl_kernel kernel;
} fuse_slot;

static fuse_slot fuse_memo[FUSE_MEMO_SLOTS];
static pthread_mutex_t fuse_memo_lock = PTHREAD_MUTEX_INITIALIZER;

static void signature(const clt_fused *f, const clt_leaf_kind *kinds, sig *g) {
  g->n = 0;
  g->v[g->n++] = (uint16_t)f->nnodes;
  g->v[g->n++] = (uint16_t)f->nleaves;
  g->v[g->n++] = (uint16_t)f->nouts;
  g->v[g->n++] = (uint16_t)f->ndim; /* kernels differ only by CLT_FUSED_STRIDED, but cheap */
  for (int i = 0; i < f->nnodes; i++) {
    const clt_fused_node *nd = &f->node[i];
    g->v[g->n++] = nd->op ? (uint16_t)nd->op->kind : 0xffffu;
    g->v[g->n++] = (uint16_t)(nd->compute << 8 | nd->dtype);
    for (int j = 0; j < 3; j++)
      g->v[g->n++] = (uint16_t)(int16_t)nd->arg[j];
    g->v[g->n++] = (uint16_t)(int16_t)nd->out;
  }
  for (int l = 0; l < f->nleaves; l++) {
    g->v[g->n++] = (uint16_t)f->leaf[l]->dtype;
    g->v[g->n++] = (uint16_t)kinds[l];
  }
  for (int o = 0; o < f->nouts; o++)
    g->v[g->n++] = (uint16_t)f->out_dtype[o];
}

static uint64_t sig_hash(const clt_device *d, const sig *g) {
  uint64_t h = (uint64_t)(uintptr_t)d * 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < g->n; i++)
    h = (h ^ g->v[i]) * 0x100000001b3ull;
  return h;
}

static cl_kernel memo_find(const clt_device *d, const sig *g, uint64_t h) {
  cl_kernel k = NULL;
  pthread_mutex_lock(&fuse_memo_lock);
  for (size_t i = (size_t)h & (FUSE_MEMO_SLOTS - 1), probes = 0;
       probes < FUSE_MEMO_SLOTS && fuse_memo[i].dev; i = (i + 1) & (FUSE_MEMO_SLOTS - 1), probes++)
    if (fuse_memo[i].dev == d && fuse_memo[i].hash == h && fuse_memo[i].n == g->n &&
        memcmp(fuse_memo[i].v, g->v, sizeof(uint16_t) * (size_t)g->n) == 0) {
      k = fuse_memo[i].kernel;
      break;
    }
  pthread_mutex_unlock(&fuse_memo_lock);
  return k;
}

static void memo_keep(const clt_device *d, const sig *g, uint64_t h, cl_kernel k) {
  pthread_mutex_lock(&fuse_memo_lock);
  for (size_t i = (size_t)h & (FUSE_MEMO_SLOTS - 1), probes = 0; probes < FUSE_MEMO_SLOTS / 2;
       i = (i + 1) & (FUSE_MEMO_SLOTS - 1), probes++) {
    if (fuse_memo[i].dev == d && fuse_memo[i].hash == h && fuse_memo[i].n == g->n &&
        memcmp(fuse_memo[i].v, g->v, sizeof(uint16_t) * (size_t)g->n) == 0)
      break;
    if (!fuse_memo[i].dev) {
      uint16_t *v = malloc(sizeof(uint16_t) * (size_t)g->n);
      if (v) {
        memcpy(v, g->v, sizeof(uint16_t) * (size_t)g->n);
        fuse_memo[i] = (fuse_slot){d, h, v, g->n, k};
      }
      break;
    }
  }
  pthread_mutex_unlock(&fuse_memo_lock);
}

/* Whether every op of f has its own kernel built on d (clt__cl_elementwise_ready). */
static bool ops_ready(clt_device *d, const clt_fused *f) {
  for (int i = 0; i < f->nnodes; i++) {
    const clt_fused_node *nd = &f->node[i];
    if (!nd->op)
      continue;
    clt_dtype in[3] = {CLT_BOOL, CLT_BOOL, CLT_BOOL};
    for (int k = 0; k < nd->op->arity; k++) {
      int a = nd->arg[k];
      in[k] = a >= 0 ? f->node[a].dtype : f->leaf[-a - 1]->dtype;
    }
    if (!clt__cl_elementwise_ready(d, nd->op, nd->dtype, nd->compute, in))
      return false;
  }
  return true;
}

clt_status clt__cl_fused(clt_device *d, const clt_fused *f, bool *later) {
  *later = false;
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
  sig sg;
  signature(f, kinds, &sg);
  uint64_t h = sig_hash(d, &sg);
  cl_kernel kern = memo_find(d, &sg, h);
  clt_status st;
  char defines[16384];
  bool defer = false;
  if (!kern) {
    text t = {defines, sizeof defines, 0, false};
    if ((st = fused_defines(d, f, kinds, slot, nstrided, &t)) != CLT_OK)
      return st;
    /* Where each op's own kernel is built, the chain runs op by op while the fused kernel
     * builds in the background; where one is not, running op by op would build too (and PoCL
     * builds one program at a time), so the fused kernel is built (or loaded from the disk
     * cache) once, where eager mode would make one build per op: on a thread of its own, the
     * kernel launched behind the build (deferred.c), or here and now where builds stay in the
     * caller's thread. */
    bool ready = ops_ready(d, f);
    defer = !ready && clt__deferred_wanted(d, "fused", defines);
    if (!defer) {
      st = ready ? clt__get_kernel_ready(d, "fused", defines, "fused", fn, &kern)
                 : clt__get_kernel(d, "fused", defines, "fused", fn, &kern);
      if (st != CLT_OK)
        return st;
      if (!kern) { /* being built in the background: lib/lazy.c runs the chain op by op */
        *later = true;
        return CLT_OK;
      }
      memo_keep(d, &sg, h, kern);
    }
  }

  clt_launch l = clt__cl_launch_1d(d, f->numel);
  cl_ulong count = (cl_ulong)f->numel, step = l.chunk;
  cl_ulong loff[CLT__FUSE_MAX_LEAVES], ooff[CLT__FUSE_MAX_OUTS];
  clt_cl_arg args[2 * CLT__FUSE_MAX_OUTS + 2 * CLT__FUSE_MAX_LEAVES + CLT__FUSE_MAX_CONSTS + 4];
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
  for (int o = 0; o < f->nouts; o++) {
    ooff[o] = (cl_ulong)f->out_off[o];
    args[arg++] = (clt_cl_arg){sizeof ooff[o], &ooff[o]};
  }
  for (int k = 0; k < f->nleaves; k++) {
    loff[k] = (cl_ulong)f->loff[k];
    args[arg++] = (clt_cl_arg){sizeof loff[k], &loff[k]};
  }
  for (int i = 0; i < f->nnodes; i++)
    if (!f->node[i].op)
      args[arg++] = (clt_cl_arg){clt_dtype_size(f->node[i].dtype), &f->node[i].konst};
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
  if (defer)
    return clt__cl_run_deferred_args(d, "fused", defines, "fused", &l, args, arg, reads,
                                     f->nleaves, writes, f->nouts, fn);
  return clt__cl_run(d, kern, &l, args, arg, reads, f->nleaves, writes, f->nouts, fn);
}
