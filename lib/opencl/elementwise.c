/* SPDX-License-Identifier: MIT */
/* opencl/elementwise.c - launches kernels/elementwise.cl for every elementwise op. */
#include "cl-internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Mirrors clt_strided_t in kernels/common.cl. */
typedef struct clt_cl_strided {
  cl_long shape[CLT_MAX_DIMS];
  cl_long so[CLT_MAX_DIMS];
  cl_long s[3][CLT_MAX_DIMS];
  cl_long off[4]; /* the result's, then the operands' */
} clt_cl_strided;

/* The unsigned type an integer or bool compute type wraps in (the kernels' UTC). */
const char *clt__cl_unsigned_twin(clt_dtype dt) {
  switch (dt) {
  case CLT_I32:
    return "uint";
  case CLT_I64:
    return "ulong";
  default:
    return "uint"; /* u8 and bool compute in uint (C promotion), then wrap on store */
  }
}

/* How the result is stored: saturating float-to-integer with NaN giving 0 (docs/operations.md,
 * "Values C leaves undefined"; tested explicitly because Oclgrind's convert_int_sat_rtz gives
 * INT_MIN for NaN, though OpenCL 1.2 section 6.2.3.3 says 0), x != 0 for bool, a plain cast
 * else. The fused kernels (fuse.c) convert their values the same way. */
void clt__cl_store_conv(clt_dtype compute, clt_dtype out, const char *x, char *buf, size_t size) {
  const char *to = clt__dtype_cl_type(out);
  if (out == CLT_BOOL && compute != CLT_BOOL)
    snprintf(buf, size, "((uchar)((%s)!=0))", x);
  else if (clt__dtype_is_float(compute) && !clt__dtype_is_float(out))
    snprintf(buf, size, "(isnan(%s)?(%s)0:convert_%s_sat_rtz(%s))", x, to, to, x);
  else
    snprintf(buf, size, "((%s)(%s))", to, x);
}

/* The expression loading element i of operand p (dtype dt) for an op computing in `compute`:
 * f16 through vload_half (core OpenCL 1.2, no cl_khr_fp16 needed), bf16 by a shift; an operand
 * of an f16 or bf16 op that is of another dtype (an integer) is rounded to that dtype first, as
 * the host does. */
static const char *load_expr(clt_dtype dt, clt_dtype compute) {
  if (dt == CLT_F16)
    return "vload_half((i),(p))";
  if (dt == CLT_BF16)
    return "clt_bf16_to_f32((p)[i])";
  if (compute == CLT_F16)
    return "clt_round_f16((float)(p)[i])";
  if (compute == CLT_BF16)
    return "clt_round_bf16((float)(p)[i])";
  return "((p)[i])";
}

/* The statement storing x as element i of the result p: f16 and bf16 round from f32 to nearest
 * even (an f64 result goes through f32 first, as on the host), NaN as the one quiet NaN. */
static const char *store_expr(clt_dtype out) {
  if (out == CLT_F16)
    return "clt_store_f16((p),(i),(float)(x))";
  if (out == CLT_BF16)
    return "((p)[i]=clt_f32_to_bf16((float)(x)))";
  return "((p)[i]=STORE(x))";
}

/* ---- the launch memo ------------------------------------------------------------------------
 * A kernel is named by its defines, so finding it in the program cache means formatting about
 * 400 bytes of defines and comparing them with every program's: about half of a small launch's
 * time on the host. What the defines depend on is fewer than 64 bits (the op, four dtypes,
 * the kernel variant) plus the device, so launches look the kernel up here first, in a small
 * open-addressing table keyed by those, filled from the program cache on a miss. The program
 * cache never drops a kernel, so an entry stays valid until exit. A full table just stops
 * memoizing. */
#define MEMO_SLOTS 1024 /* a power of two */

typedef struct memo_slot {
  const clt_device *dev; /* NULL: empty */
  uint64_t key;
  cl_kernel kernel;
} memo_slot;

static memo_slot memo[MEMO_SLOTS];
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

_Static_assert(CLT__OP_COUNT <= 2048 && CLT_DTYPE_COUNT <= 16,
               "the memo key's fields are too narrow");

/* kernels/elementwise.cl's CLT_STRIP_ROWS, CLT_STRIP_COLS and CLT_TILE_GPU: the tiled kernel's
 * unit of work (a strip on CPU devices, a tile on GPUs) */
#define STRIP_ROWS 32
#define STRIP_COLS 1024
#define TILE_GPU 16

/* Which kernel of an op: the fast one, NAME_strided or NAME_tiled. */
typedef enum variant { FAST, STRIDED, TILED } variant;
static const char *const variant_suffix[] = {"", "_strided", "_tiled"};

static uint64_t memo_key(const clt_op *op, clt_dtype out, clt_dtype compute, clt_dtype tk,
                         clt_dtype ta, clt_dtype tb, variant v) {
  return (uint64_t)op->kind << 22 | (uint64_t)tk << 18 | (uint64_t)out << 14 |
         (uint64_t)compute << 10 | (uint64_t)ta << 6 | (uint64_t)tb << 2 | (uint64_t)v;
}

static size_t memo_hash(const clt_device *d, uint64_t key) {
  uint64_t h = ((uint64_t)(uintptr_t)d >> 4) * 0x9e3779b97f4a7c15ull ^ key * 0xff51afd7ed558ccdull;
  return (size_t)(h >> 32) & (MEMO_SLOTS - 1);
}

static cl_kernel memo_get(const clt_device *d, uint64_t key) {
  cl_kernel k = NULL;
  pthread_mutex_lock(&memo_lock);
  for (size_t i = memo_hash(d, key), probes = 0; probes < MEMO_SLOTS && memo[i].dev;
       i = (i + 1) & (MEMO_SLOTS - 1), probes++)
    if (memo[i].dev == d && memo[i].key == key) {
      k = memo[i].kernel;
      break;
    }
  pthread_mutex_unlock(&memo_lock);
  return k;
}

static void memo_put(const clt_device *d, uint64_t key, cl_kernel k) {
  pthread_mutex_lock(&memo_lock);
  for (size_t i = memo_hash(d, key), probes = 0; probes < MEMO_SLOTS / 2;
       i = (i + 1) & (MEMO_SLOTS - 1), probes++) {
    if (memo[i].dev == d && memo[i].key == key)
      break;
    if (!memo[i].dev) {
      memo[i] = (memo_slot){d, key, k};
      break;
    }
  }
  pthread_mutex_unlock(&memo_lock);
}

/* A kernel to be launched behind its build (deferred.c): its program's defines and its name. */
typedef struct pending {
  bool defer;
  char defines[1536], kname[80];
} pending;

/* The program (defines) and kernel name (kname) of op's variant v for these dtypes (indt: the
 * operands', by position) on d. */
static clt_status kernel_source(const clt_op *op, clt_device *d, clt_dtype outdt,
                                const clt_dtype *indt, clt_dtype compute, variant v,
                                char *defines, size_t dsize, char *kname, size_t ksize) {
  const char *fn = op->fn;
  int n = op->arity;
  bool fp64 = outdt == CLT_F64 || compute == CLT_F64;
  for (int k = 0; k < n; k++)
    fp64 = fp64 || indt[k] == CLT_F64;
  bool is_float = clt__dtype_is_float(compute);
  bool wraps = op->wraps && !is_float;
  /* f16 and bf16 compute in float */
  const char *tp = clt__dtype_is_half(compute) ? "float" : clt__dtype_cl_type(compute);
  const char *tc = wraps ? clt__cl_unsigned_twin(compute) : tp;
  const char *expr = clt__op_expr(op, compute);
  if (!expr)
    return clt__error(CLT_ERR_INTERNAL, fn, "%s has no expression for %s", op->name,
                      clt_dtype_name(compute));
  /* a ternary's operands are k, a, b: TK, TA, TB */
  clt_dtype ta = n == 3 ? indt[1] : indt[0], tb = n == 3 ? indt[2] : (n == 2 ? indt[1] : indt[0]);
  char name[64], store[64], raw[128] = "";
  if (v == TILED && d->chunked) {
    /* CLT_RAWp: operand p is stored as the tiled kernel stages it (plain loads, no conversion),
     * so that it can be staged through vload4 */
    int len = 0;
    for (int k = 0; k < n; k++) {
      const char *staged = op->cond && k == 0 ? "uchar" : tc;
      bool plain = strcmp(op->cond && k == 0 ? "((p)[i])" : load_expr(indt[k], compute),
                          "((p)[i])") == 0 &&
                   strcmp(clt__dtype_cl_type(indt[k]), staged) == 0;
      len += snprintf(raw + len, sizeof raw - (size_t)len, "#define CLT_RAW%d %d\n", k, plain);
    }
    if (clt__cl_can_prefetch(d))
      snprintf(raw + len, sizeof raw - (size_t)len, "#define CLT_PREFETCH 1\n");
  }
  snprintf(name, sizeof name, "%s_%s", op->name, clt_dtype_name(outdt));
  clt__cl_store_conv(compute, outdt, "x", store, sizeof store);
  snprintf(defines, dsize,
           "%s#define NAME %s\n#define ARITY %d\n#define TA %s\n#define TB %s\n#define TK %s\n"
           "#define TP %s\n#define TC %s\n#define UTC %s\n#define TKP %s\n#define TKC %s\n"
           "#define CLT_FLOAT %d\n#define TO %s\n#define STORE(x) %s\n#define OP(a,b,c) (%s)\n"
           "#define LOAD_A(p,i) %s\n#define LOAD_B(p,i) %s\n#define LOAD_K(p,i) %s\n"
           "#define STORE_AT(p,i,x) %s\n#define CLT_TILED %d\n%s",
           clt__cl_base_options(d, fp64), name, n, clt__dtype_cl_type(ta),
           clt__dtype_cl_type(tb), clt__dtype_cl_type(indt[0]), tp, tc,
           clt__cl_unsigned_twin(compute), op->cond ? "uchar" : tp, op->cond ? "uchar" : tc,
           is_float ? 1 : 0, clt__dtype_cl_type(outdt), store, expr,
           load_expr(ta, compute), load_expr(tb, compute),
           op->cond ? "((p)[i])" : load_expr(indt[0], compute), store_expr(outdt),
           v == TILED ? 1 : 0, raw);
  snprintf(kname, ksize, "%s%s", name, variant_suffix[v]);
  return CLT_OK;
}

/* The kernel of op for these dtypes on d, from the program cache (building it if needed).
 * ready: only a program built already (clt__get_kernel_ready: else its build starts in the
 * background and *kern is NULL). pend (or NULL): where the program is not built and d builds in
 * the background, *kern is NULL and pend says what to launch behind the build. */
static clt_status find_kernel(const clt_op *op, clt_device *d, clt_tensor *out,
                              clt_tensor *const *in, clt_dtype compute, variant v, bool ready,
                              pending *pend, cl_kernel *kern) {
  const char *fn = op->fn;
  clt_dtype indt[3] = {CLT_BOOL, CLT_BOOL, CLT_BOOL};
  for (int k = 0; k < op->arity; k++)
    indt[k] = in[k]->dtype;
  char defines[1536], kname[80];
  clt_status st = kernel_source(op, d, out->dtype, indt, compute, v, defines, sizeof defines,
                                kname, sizeof kname);
  if (st != CLT_OK)
    return st;
  if (pend && clt__deferred_wanted(d, "elementwise", defines)) {
    pend->defer = true;
    snprintf(pend->defines, sizeof pend->defines, "%s", defines);
    snprintf(pend->kname, sizeof pend->kname, "%s", kname);
    *kern = NULL;
    return CLT_OK;
  }
  return ready ? clt__get_kernel_ready(d, "elementwise", defines, kname, fn, kern)
               : clt__get_kernel(d, "elementwise", defines, kname, fn, kern);
}

/* The operands (bit k for operand k) that step through the last dimension of c by more than
 * through the one before it, and not by 0: transposed views, read across their rows. */
static int across_operands(const clt_bcast *c, int n) {
  int mask = 0, last = c->ndim - 1;
  if (c->ndim < 2)
    return 0;
  for (int k = 0; k < n; k++)
    if (c->s[k][last - 1] > 0 && c->s[k][last - 1] < c->s[k][last])
      mask |= 1 << k;
  return mask;
}

/* The kernel of this variant, from the memo or the program cache (ready: as find_kernel's;
 * *kern may then be NULL). */
static clt_status variant_kernel(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                                 clt_dtype compute, variant v, bool ready, pending *pend,
                                 cl_kernel *kern) {
  clt_device *d = out->storage->dev;
  int n = op->arity;
  /* a ternary's operands are k, a, b: TK, TA, TB */
  const clt_tensor *ta = n == 3 ? in[1] : in[0], *tb = n == 3 ? in[2] : (n == 2 ? in[1] : in[0]);
  uint64_t key =
      memo_key(op, out->dtype, compute, n == 3 ? in[0]->dtype : CLT_BOOL, ta->dtype, tb->dtype, v);
  if ((*kern = memo_get(d, key)) != NULL)
    return CLT_OK;
  clt_status st = find_kernel(op, d, out, in, compute, v, ready, pend, kern);
  if (st == CLT_OK && *kern)
    memo_put(d, key, *kern);
  return st;
}

bool clt__cl_elementwise_ready(clt_device *d, const clt_op *op, clt_dtype out, clt_dtype compute,
                               const clt_dtype *in) {
  int n = op->arity;
  clt_dtype ta = n == 3 ? in[1] : in[0], tb = n == 3 ? in[2] : (n == 2 ? in[1] : in[0]),
            tk = n == 3 ? in[0] : CLT_BOOL;
  /* FAST and STRIDED are kernels of one program, TILED of another (which the same operands'
   * geometry picks again): one in the memo, or its program built (a launch behind its build
   * leaves none in the memo), is taken to mean no build */
  if (memo_get(d, memo_key(op, out, compute, tk, ta, tb, FAST)) ||
      memo_get(d, memo_key(op, out, compute, tk, ta, tb, STRIDED)) ||
      memo_get(d, memo_key(op, out, compute, tk, ta, tb, TILED)))
    return true;
  char defines[1536], kname[80];
  const variant programs[2] = {FAST, TILED};
  for (int i = 0; i < 2; i++)
    if (kernel_source(op, d, out, in, compute, programs[i], defines, sizeof defines, kname,
                      sizeof kname) == CLT_OK &&
        clt__program_built(d, "elementwise", defines))
      return true;
  return false;
}

/* ---- transposed work on CPU devices, by the host's loops ---------------------------------------
 * A CPU device's buffers are host memory, and the host's own loops (4 x 4 blocks in SSE
 * registers, prefetches, OpenMP: lib/host/elementwise.c) can work on them. So on a CPU device
 * that runs native kernels (opencl/native.c) an exact op (ulps 0) that would take the tiled
 * kernel and that the host's loops run without allocating (clt__host_elementwise_direct: a copy,
 * or a binary or ternary op over operands of the compute dtype) can run as a native command:
 * still asynchronous and ordered by events, and no kernel to build. Large copies always do (they
 * are faster); other work only while its tiled kernel builds in the background, so that its first
 * use does not block on the build. CLT_NATIVE=0 keeps the tiled kernel, CLT_NATIVE=1 takes the
 * native command wherever it applies (the tests run all three).
 * PoCL, 2 cores, f32, paired with CLT_NATIVE=0 (ms, native / kernel): copies of 2048 x 2048
 * 0.72 / 0.90, 2048 x 8192 5.0 / 7.7, 3000 x 5000 4.3 / 7.2, 4096 x 4096 4.8 / 7.7, 2896 x 2896
 * and 4000 x 4200 even, 1448 x 1448 and below slower (0.25 / 0.24, 1024 x 1024 0.23 / 0.12: the
 * probes cost about 0.1 ms); the transposed add went either way from 4M elements on (4096 x 4096
 * 7.8 / 9.4, 3000 x 5000 7.3 / 8.4, but 4000 x 4200 7.3 / 6.1 and 5792 x 5792 14.0 / 11.8) and
 * slower below: binary and ternary ops keep the kernel once it is built. */
#define NATIVE_COPY_MIN ((int64_t)1 << 22)

typedef struct native_op {
  clt_cl_native head;
  const clt_op *op;
  clt_dtype compute;
  clt_bcast bc;
  int n;
  clt_tensor t[4];  /* the result and the operands, as they were at the call */
  clt_storage s[4]; /* their storages as the loops see them: host = the buffer's address */
} native_op;

static void run_native_op(clt_cl_native *p) {
  native_op *c = (native_op *)p;
  clt_tensor *in[3];
  for (int i = 0; i <= c->n; i++) {
    c->s[i].host = p->ptr[i];
    c->t[i].storage = &c->s[i];
    if (i > 0)
      in[i - 1] = &c->t[i];
  }
  clt__host_elementwise_run(c->op, &c->t[0], in, c->compute, &c->bc); /* cannot fail: _direct */
}

/* ctx: the command's context, on the caller's stack; the command gets a copy of its own */
static clt_status enqueue_native_op(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                    cl_event *ev) {
  native_op *c = malloc(sizeof *c);
  if (!c)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  memcpy(c, ctx, sizeof *c);
  cl_mem bufs[4];
  for (int i = 0; i <= c->n; i++)
    bufs[i] = c->s[i].buf;
  return clt__cl_enqueue_native(d, &c->head, c->n + 1, bufs, wl, fn, ev);
}

/* CLT_NATIVE: 0 never (the tiled kernel), 1 always where it applies (for tests), else auto. */
typedef enum native_mode { NATIVE_NEVER, NATIVE_ALWAYS, NATIVE_AUTO } native_mode;
static native_mode native_wanted(clt_device *d) {
  const char *e = getenv("CLT_NATIVE");
  if (d->kind != CLT_DEVICE_CL_CPU || (e && strcmp(e, "0") == 0) || !clt__cl_native_ok(d))
    return NATIVE_NEVER;
  return e && strcmp(e, "1") == 0 ? NATIVE_ALWAYS : NATIVE_AUTO;
}

static clt_status native_elementwise(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                                     clt_dtype compute, const clt_bcast *bc) {
  const char *fn = op->fn;
  clt_device *d = out->storage->dev;
  native_op cc, *c = &cc;
  memset(c, 0, sizeof *c);
  c->head.run = run_native_op;
  c->op = op;
  c->compute = compute;
  c->bc = *bc;
  c->n = op->arity;
  clt_storage *reads[3] = {NULL, NULL, NULL};
  for (int i = 0; i <= c->n; i++) {
    const clt_tensor *t = i == 0 ? out : in[i - 1];
    memcpy(&c->t[i], t, sizeof *t);
    c->s[i].buf = t->storage->buf; /* the rest of the copy stays zero: the loops read host only */
    c->s[i].dev = clt_cpu();
    if (i > 0)
      reads[i - 1] = in[i - 1]->storage;
  }
  return clt__cl_submit(d, reads, c->n, &out->storage, 1, enqueue_native_op, c, fn, NULL);
}

clt_status clt__cl_elementwise(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                               clt_dtype compute, const clt_bcast *bc) {
  const char *fn = op->fn;
  clt_device *d = out->storage->dev;
  int n = op->arity;
  variant v = n == 3 || !bc->same ? STRIDED : FAST;
  clt_bcast c;
  int stage = 0;
  cl_kernel kern = NULL;
  clt_status st;
  if (v == STRIDED) {
    /* the result's memory order, merged: a transposed result is walked along its own rows */
    c = *bc;
    clt__bcast_memory_order(&c, n);
    clt__bcast_coalesce(&c, n);
    /* the tiles take 256 work-items to a work-group on GPUs */
    if ((stage = across_operands(&c, n)) != 0 && (d->chunked || d->max_work_group >= 256))
      v = TILED;
    /* exact ops only (ulps 0 in the op table): elsewhere the host's libm and the device's
     * could round differently, and this device's fused kernels must give the bits it does */
    native_mode mode =
        v == TILED && op->ulps == 0 && clt__host_elementwise_direct(op, out, in, compute)
            ? native_wanted(d)
            : NATIVE_NEVER;
    if (mode != NATIVE_NEVER) {
      /* a copy of NATIVE_COPY_MIN elements or more always (the host's strips beat the kernel
       * there); anything else through the tiled kernel where it is built, and through the native
       * command only while it builds (in the background), so that the first use does not wait */
      bool big_copy = op->kind == CLT__OP_cast && out->numel >= NATIVE_COPY_MIN;
      if (mode == NATIVE_AUTO && !big_copy &&
          (st = variant_kernel(op, out, in, compute, TILED, true, NULL, &kern)) != CLT_OK)
        return st;
      if (!kern)
        return native_elementwise(op, out, in, compute, bc);
    }
  }
  /* the tiled kernel's launch depends on what the built kernel can take (below): built here */
  pending pend = {.defer = false};
  if (!kern &&
      (st = variant_kernel(op, out, in, compute, v, false, v == TILED ? NULL : &pend, &kern)) !=
          CLT_OK)
    return st;
  if (v == TILED) {
    /* what this kernel can take on this device: 256 work-items to a group on GPUs (registers,
     * local memory); on CPU devices, its strip buffers in local memory */
    size_t wg = 0;
    cl_ulong need = 0, have = 0;
    cl_device_id id = clt__cl(d)->id;
    bool fits = d->chunked ? clGetKernelWorkGroupInfo(kern, id, CL_KERNEL_LOCAL_MEM_SIZE,
                                                      sizeof need, &need, NULL) == CL_SUCCESS &&
                                 clGetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof have, &have,
                                                 NULL) == CL_SUCCESS &&
                                 need <= have
                           : clGetKernelWorkGroupInfo(kern, id, CL_KERNEL_WORK_GROUP_SIZE,
                                                      sizeof wg, &wg, NULL) == CL_SUCCESS &&
                                 wg >= 256;
    if (!fits) {
      v = STRIDED;
      if ((st = variant_kernel(op, out, in, compute, v, false, NULL, &kern)) != CLT_OK)
        return st;
    }
  }

  clt_storage *reads[3] = {NULL, NULL, NULL};
  for (int k = 0; k < n; k++)
    reads[k] = in[k]->storage;
  clt_launch l = clt__cl_launch_1d(d, out->numel);
  cl_ulong count = (cl_ulong)out->numel, step = l.chunk;
  if (v == TILED) {
    /* units: strips of 32 x 1024 (CPU devices) or tiles of 16 x 16 (GPUs), over the batch */
    int64_t th = d->chunked ? STRIP_ROWS : TILE_GPU, tw = d->chunked ? STRIP_COLS : TILE_GPU;
    int64_t rows = c.shape[c.ndim - 2], cols = c.shape[c.ndim - 1];
    count = (cl_ulong)(out->numel / rows / cols) * (cl_ulong)((rows + th - 1) / th) *
            (cl_ulong)((cols + tw - 1) / tw);
    if (d->chunked) {
      cl_ulong items = (cl_ulong)d->compute_units * 4;
      step = (count + items - 1) / items;
      l.global = (size_t)((count + step - 1) / step);
      l.local = 1;
    } else {
      cl_ulong groups = (cl_ulong)d->compute_units * 16;
      if (groups > count)
        groups = count;
      l.global = (size_t)groups * 256;
      l.local = 256;
      step = groups;
    }
  }
  clt_cl_arg args[11];
  int arg = 0;
  args[arg++] = (clt_cl_arg){sizeof(cl_mem), &out->storage->buf};
  for (int k = 0; k < n; k++)
    args[arg++] = (clt_cl_arg){sizeof(cl_mem), &in[k]->storage->buf};
  args[arg++] = (clt_cl_arg){sizeof count, &count};
  args[arg++] = (clt_cl_arg){sizeof step, &step};
  clt_cl_strided g;
  cl_int nd, cl_stage = stage;
  cl_ulong off[4];
  if (v != FAST) {
    nd = c.ndim;
    memset(&g, 0, sizeof g);
    for (int i = 0; i < c.ndim; i++) {
      g.shape[i] = c.shape[i];
      g.so[i] = c.so[i];
      for (int k = 0; k < n; k++)
        g.s[k][i] = c.s[k][i];
    }
    g.off[0] = c.ooff;
    for (int k = 0; k < n; k++)
      g.off[k + 1] = c.off[k];
    args[arg++] = (clt_cl_arg){sizeof nd, &nd};
    if (v == TILED)
      args[arg++] = (clt_cl_arg){sizeof cl_stage, &cl_stage};
    args[arg++] = (clt_cl_arg){sizeof g, &g};
  } else {
    off[0] = (cl_ulong)bc->ooff;
    args[arg++] = (clt_cl_arg){sizeof off[0], &off[0]};
    for (int k = 0; k < n; k++) {
      off[k + 1] = (cl_ulong)bc->off[k];
      args[arg++] = (clt_cl_arg){sizeof off[k + 1], &off[k + 1]};
    }
  }
  if (pend.defer)
    return clt__cl_run_deferred_args(d, "elementwise", pend.defines, pend.kname, &l, args, arg,
                                     reads, n, &out->storage, 1, fn);
  return clt__cl_run(d, kern, &l, args, arg, reads, n, &out->storage, 1, fn);
}
