/* SPDX-License-Identifier: MIT */
/* backend.h - the table of functions a device kind implements, and the op descriptions the
 * dispatcher hands to it. Adding an elementwise op: one row of CLT_ELEMENTWISE_OPS
 * (include/clt_ops.h), which gives its declaration, its clt_op entry, its OpenCL C expression and
 * its host loop; the backend-ops harness (tests/check_backend_ops.c) then tests it on every
 * device. Adding a backend: one more struct clt_backend. */
#ifndef CLT_BACKEND_H
#define CLT_BACKEND_H

#include "clt-internal.h"

#include <string.h>

/* The elementwise operations: one per row of CLT_ELEMENTWISE_OPS (include/clt_ops.h), then cast,
 * which takes its result dtype from the caller. */
typedef enum clt_op_kind {
#define CLT__OP_ENUM_(name, ...) CLT__OP_##name,
  CLT_ELEMENTWISE_OPS(CLT__OP_ENUM_)
#undef CLT__OP_ENUM_
      CLT__OP_cast,
  CLT__OP_COUNT
} clt_op_kind;

/* The operations autograd records besides the elementwise ones (a node's kind, lib/autograd.c). */
typedef enum clt__grad_kind {
  CLT__GRAD_SUM = CLT__OP_COUNT, /* clt_sum */
  CLT__GRAD_MEAN,                /* clt_mean */
  CLT__GRAD_SUM_DIM,             /* clt_sum_dim: dim, keepdim */
  CLT__GRAD_MEAN_DIM,            /* clt_mean_dim: dim, keepdim */
  CLT__GRAD_MATMUL,              /* clt_matmul */
  CLT__GRAD_LINEAR,              /* clt_linear: x, weight and bias (if any) */
  CLT__GRAD_NARROW,              /* dim, start, length */
  CLT__GRAD_SELECT,              /* dim, index */
  CLT__GRAD_SLICE,               /* dim, start, stop, step */
  CLT__GRAD_DIAGONAL,            /* offset, dim1, dim2 */
  CLT__GRAD_PERMUTE,             /* dims */
  CLT__GRAD_TRANSPOSE,           /* dim0, dim1 */
  CLT__GRAD_EXPAND,              /* (the operand's shape is all it needs) */
  CLT__GRAD_RESHAPE,             /* view, reshape, squeeze, unsqueeze: back to the shape */
  CLT__GRAD_COPY,                /* contiguous, clone */
  CLT__GRAD_MAX,                 /* clt_max: the gradient split among the tied maxima */
  CLT__GRAD_MIN,                 /* clt_min */
  CLT__GRAD_MAX_DIM,             /* clt_max_dim: dim, keepdim (to argmax_dim's index) */
  CLT__GRAD_MIN_DIM,             /* clt_min_dim: dim, keepdim */
  CLT__GRAD_INDEX_SELECT,        /* t and index: dim */
  CLT__GRAD_CAT,                 /* the n tensors: dim */
  /* lib/solve.c's, whose derivatives it gives autograd through clt__grad_linalg_set */
  CLT__GRAD_LINALG_SOLVE,            /* clt_linalg_solve: A, B */
  CLT__GRAD_LINALG_SOLVE_TRIANGULAR, /* A, B: upper, left, unitriangular */
  CLT__GRAD_LINALG_CHOLESKY,         /* A: upper */
  CLT__GRAD_LINALG_INV,              /* A */
  CLT__GRAD_LINALG_DET,              /* A */
  CLT__GRAD_LINALG_SLOGDET,          /* A (the node of logabsdet; sign has no gradient) */
  CLT__GRAD_KIND_END
} clt__grad_kind;

/* How an op's result dtype follows from its operands' (the rule column of clt_ops.h). */
typedef enum clt_result_rule {
  CLT__RESULT_PROMOTE, /* the promoted dtype of the operands */
  CLT__RESULT_FLOAT,   /* the promoted dtype if float, else f32 (div, exp, ...) */
  CLT__RESULT_BOOL,    /* bool, computed in the promoted dtype (comparisons) */
  CLT__RESULT_GIVEN    /* chosen by the caller (cast) */
} clt_result_rule;

/* The kinds of compute dtype an expression exists for. */
typedef enum clt_expr_kind { CLT__EXPR_FLOAT, CLT__EXPR_INT, CLT__EXPR_BOOL } clt_expr_kind;

/* An elementwise operation: a row of clt_ops.h as data, which the dispatcher, the kernel sources
 * and the lazy fuser (lib/lazy.c, lib/opencl/fuse.c) read. */
typedef struct clt_op {
  clt_op_kind kind;
  const char *name;    /* "add": the kernel is named <name>_<result dtype> */
  const char *fn;      /* "clt_add": for messages */
  int arity;           /* 1, 2 or 3 */
  const char *expr[3]; /* by clt_expr_kind: the OpenCL C expression of a, b and c, or NULL where
                        * the op is not defined for that kind */
  clt_result_rule result;
  bool wraps; /* integers compute in their unsigned twin, so overflow wraps */
  bool cond;  /* ternary: the first operand is a bool condition, not promoted */
  int ulps;   /* the error allowed against the exact result, in ulps of the result dtype */
  const char *doc;
} clt_op;

/* The table (lib/dispatch.c), indexed by clt_op_kind. */
extern const clt_op clt__ops[CLT__OP_COUNT];

/* The expression of op for compute dtype dt, or NULL where op is not defined for it. */
static inline const char *clt__op_expr(const clt_op *op, clt_dtype dt) {
  const char *e = op->expr[dt == CLT_BOOL            ? CLT__EXPR_BOOL
                           : clt__dtype_is_float(dt) ? CLT__EXPR_FLOAT
                                                     : CLT__EXPR_INT];
  return strcmp(e, "CLT_NA") == 0 ? NULL : e;
}

/* The same-device rule's error (lib/dispatch.c), for every caller that finds two operands on
 * different devices: CLT_ERR_DEVICE_MISMATCH, "expected all tensors on the same device, but
 * found <a> (<where_a>) and <b> (<where_b>); copy one with clt_to()". */
clt_status clt__device_mismatch(const char *fn, const clt_device *a, const char *where_a,
                                const clt_device *b, const char *where_b);

/* Runs op k of the table through the same path as its public function (the first form), for
 * clt_kernel_cache_warm and the tests: in holds arity operands. */
clt_status clt__op_run(clt_op_kind k, clt_tensor *const *in, clt_tensor **out);

/* How the operands of an elementwise op map onto its result, prepared by the dispatcher: the
 * result's shape; per operand, its element strides over that shape (its own strides, 0 where it
 * is broadcast) and its offset in elements; the same for the result. */
typedef struct clt_bcast {
  int ndim;
  int64_t shape[CLT_MAX_DIMS];
  int64_t s[3][CLT_MAX_DIMS];
  int64_t so[CLT_MAX_DIMS]; /* the result's strides */
  int64_t off[3], ooff;     /* offsets of the operands and of the result, in elements */
  /* No broadcasting and every operand and the result contiguous: element i of each is at its
   * offset + i (the fast loops). Else the strides say where each element is. */
  bool same;
} clt_bcast;

/* Merges neighbouring dimensions of bc that every one of its n operands and its result step
 * through as one (a contiguous block, or a broadcast one), and drops dimensions of size 1: fewer,
 * longer dimensions for the strided loops. The element order does not change. */
void clt__bcast_coalesce(clt_bcast *bc, int n);
/* Reorders the dimensions of bc so that the result's strides decrease: the loops then walk the
 * result in its memory order (a transposed result along its own rows), which an elementwise
 * operation may do, as no element depends on another. A C-order result keeps its order.
 * Coalesce after it. */
void clt__bcast_memory_order(clt_bcast *bc, int n);

/* ---- lazy fusion (lazy.c) ------------------------------------------------------------------
 * Deferred elementwise ops (docs/performance.md, "Fusion"): on a device whose backend has
 * `fused`, an elementwise op that makes a new tensor records a node instead of launching, and
 * the chain runs as one generated kernel when something needs its values. One function decides
 * whether a storage holds its values and computes it if not, clt__lazy_touch, and every access
 * passes it, twice over: the core calls clt__lazy_ready right before each compute member of
 * struct clt_backend (so a backend never gets a deferred operand, whatever it forgets), and the
 * backends touch again where they order commands (lib/opencl/order.c's wait lists, lib/memory.c's
 * host waits: a no-op by then), which also covers what they reach by themselves. Memory handed
 * out of clt (clt_tensor_data, clt_tensor_cl_mem, DLPack) is touched as a write and marked
 * `exposed`: no deferred op reads it later. */

#define CLT__FUSE_MAX_OPS 32    /* ops in one kernel: a longer chain is evaluated in parts */
#define CLT__FUSE_MAX_CONSTS 24 /* scalar operands (kernel arguments) */
#define CLT__FUSE_MAX_NODES (CLT__FUSE_MAX_OPS + CLT__FUSE_MAX_CONSTS)
#define CLT__FUSE_MAX_LEAVES 16 /* tensors it reads */
#define CLT__FUSE_MAX_STRIDED                                                                      \
  4                          /* of which neither contiguous nor one element (broadcast, views)     \
                              */
#define CLT__FUSE_MAX_OUTS 8 /* tensors it writes: the result and intermediates still held */

/* One op of a fused kernel, in evaluation order: arg[j] >= 0 is the value of an earlier node,
 * arg[j] < 0 is leaf -arg[j] - 1. A node without op is a scalar operand (clt_add_scalar's
 * number): its value, konst (dtype's bytes), is a kernel argument. */
typedef struct clt_fused_node {
  const clt_op *op;
  uint64_t konst;
  clt_dtype compute, dtype; /* as the backend's elementwise gets them; dtype: the result's */
  int arg[3];
  int out; /* the output it is stored to, or -1 */
} clt_fused_node;

/* How a fused kernel reads a leaf with strides s over the shape: contiguous (element off + i),
 * one element for all (every stride 0), or strided (its index from the coordinates). */
typedef enum clt_leaf_kind { CLT__LEAF_DENSE, CLT__LEAF_SCALAR, CLT__LEAF_STRIDED } clt_leaf_kind;
static inline clt_leaf_kind clt__leaf_kind(int ndim, const int64_t *shape, const int64_t *s) {
  bool zero = true, dense = true;
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (shape[d] != 1) {
      zero = zero && s[d] == 0;
      dense = dense && s[d] == st;
    }
    st *= shape[d];
  }
  return zero ? CLT__LEAF_SCALAR : dense ? CLT__LEAF_DENSE : CLT__LEAF_STRIDED;
}

/* A fused kernel to run: every node has the shape `shape`; leaf l is read at element
 * loff[l] + sum_d c_d * ls[l][d] for the element at coordinates c (strides 0 where broadcast);
 * outputs are contiguous tensors of that shape at element offset out_off[o]. */
typedef struct clt_fused {
  int nnodes, nleaves, nouts;
  clt_fused_node node[CLT__FUSE_MAX_NODES];
  const clt_tensor *leaf[CLT__FUSE_MAX_LEAVES];
  int64_t ls[CLT__FUSE_MAX_LEAVES][CLT_MAX_DIMS];
  int64_t loff[CLT__FUSE_MAX_LEAVES];
  clt_storage *out[CLT__FUSE_MAX_OUTS];
  int64_t out_off[CLT__FUSE_MAX_OUTS]; /* element offsets (0 but for an _out or in-place op) */
  clt_dtype out_dtype[CLT__FUSE_MAX_OUTS];
  int ndim;
  int64_t shape[CLT_MAX_DIMS];
  int64_t numel;
  const char *fn; /* the call that needs the values, for messages */
} clt_fused;

/* Whether an elementwise op of numel elements on dev is deferred: deferring on (clt_set_lazy,
 * CLT_LAZY; never under CLT_SYNC=1, nor on a backend without `fused`), a result not
 * empty, and on the host at least CLT__HOST_LAZY_MIN elements (below that the operands are in
 * the cache anyway, and a deferred op costs more than the loop; CLT_LAZY_HOST_MIN=N changes it,
 * for tests). */
#define CLT__HOST_LAZY_MIN ((int64_t)1 << 20)
bool clt__lazy_defers(const clt_device *dev, int64_t numel);
/* Sets the host's threshold to n elements when n > 0 (tests run small chains on the host);
 * returns the one before. */
int64_t clt__lazy_host_min(int64_t n);
/* Records out = op(in...) (arguments as the backend's elementwise gets them; out new and
 * contiguous) as a deferred node where it can be fused, setting *deferred; leaves *deferred
 * false where it cannot (its dtypes), and the caller launches it. */
clt_status clt__lazy_record(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                            clt_dtype compute, const clt_bcast *bc, bool *deferred);
/* dst = op(in...) for the _out and in-place forms (arguments as the backend's elementwise gets
 * them): where an operand is a deferred chain that op can continue, the chain and op run now as
 * one kernel writing into dst (and the chain's held intermediates), setting *done; else *done
 * stays false and the caller launches op (which computes the deferred operands first). */
clt_status clt__lazy_into(const clt_op *op, clt_tensor *dst, clt_tensor *const *in,
                          clt_dtype compute, const clt_bcast *bc, bool *done);
/* *out = a new 0-d tensor of dtype (not f16 or bf16) on dev holding v as clt_full would
 * (refusing what clt_full refuses), deferred: the scalar operand of the _scalar forms, which a
 * fused kernel takes as an argument instead of reading memory. */
clt_status clt__lazy_scalar(clt_dtype dtype, double v, clt_device *dev, const char *fn,
                            clt_tensor **out);
/* Before a command reads (writing = false) or writes s: computes s if it is deferred and, for
 * a write, every deferred chain that reads s. fn names the command in errors. */
clt_status clt__lazy_touch(clt_storage *s, bool writing, const char *fn);
/* clt__lazy_touch for the n tensors reads (NULL entries skipped) and then the one it writes
 * (NULL: none): what the core calls right before a compute member of the backend. */
clt_status clt__lazy_ready(clt_tensor *const *reads, int n, const clt_tensor *write,
                           const char *fn);
/* Computes every deferred chain on dev (NULL: on every device). */
clt_status clt__lazy_flush(clt_device *dev, const char *fn);
/* The allocator's call when dev is full: computes dev's deferred chains, so that operands only
 * they still hold are released; true if there were any. False, doing nothing, where this thread
 * cannot evaluate now (it is evaluating, or another call holds the chains). */
bool clt__lazy_free_memory(clt_device *dev, const char *fn);
/* s is being freed: its deferred chain, if it has one, is no longer written into it. */
void clt__lazy_storage_gone(clt_storage *s);
/* Counts since the start, for tests and benchmarks: ops deferred, fused kernels run, and the
 * ops they computed (an op computed in two kernels counts twice). */
typedef struct clt_lazy_stats {
  long deferred, evaluations, ops;
  long each; /* evaluations run op by op while their fused kernel was built in the background */
} clt_lazy_stats;
void clt__lazy_stats(clt_lazy_stats *s);

typedef enum clt_reduce_kind {
  CLT__RED_SUM,
  CLT__RED_MEAN,
  CLT__RED_MAX,
  CLT__RED_MIN,
  CLT__RED_ARGMAX
} clt_reduce_kind;

/* A reduction prepared by the dispatcher. */
typedef struct clt_reduce {
  clt_reduce_kind kind;
  const char *name; /* "sum": kernels are named <name>_<input dtype> */
  const char *fn;   /* for messages */
  int64_t outer, r, inner;
} clt_reduce;

/* A matmul prepared by the dispatcher: batch products of (m,k) x (k,n) into a contiguous result
 * (row-major, m * n apart). Each operand, from its tensor's offset, is a matrix in BLAS's terms:
 * row-major with leading dimension ld (element (i, j) at i * ld + j), or when t is set, its
 * transpose stored row-major (element (i, j) at j * ld + i): views such as a column slice or a
 * transposed tensor multiply in place. Each operand's element stride between batch entries is s
 * (0: one matrix for all). The kernel path (CLT__MM_KERNEL) gets contiguous operands only. */
typedef struct clt_matmul_desc {
  int64_t batch, m, k, n;
  int64_t sa, sb;   /* batch strides of a and b in elements; the result's is m * n */
  int64_t lda, ldb; /* leading dimensions in elements */
  bool ta, tb;      /* a or b stored transposed */
} clt_matmul_desc;

/* An index_select prepared by the dispatcher: the input viewed as (outer, size, inner), the
 * result as (outer, k, inner), both contiguous; the k indices (i32 or i64, contiguous) were
 * checked to lie in [0, size). */
typedef struct clt_index_desc {
  int64_t outer, size, k, inner;
} clt_index_desc;

/* One optimizer step on one parameter, prepared by lib/optim.c (its numbers for this step).
 * SGD: d = g + weight_decay * p (when weight_decay != 0); with buf (momentum != 0),
 * buf = d when first, else momentum * buf + d, and d = buf; p -= lr * d.
 * AdamW: p *= decay; m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g * g;
 * p -= step_size * m / (sqrt(v) / bc2_sqrt + eps).
 * Computed in f64 for f64 parameters, else in f32 (f16 and bf16 are loaded to f32 and rounded
 * back when stored), every number converted to that dtype first. */
typedef struct clt_optim_desc {
  clt__optim_kind kind;
  double lr, weight_decay, momentum;                    /* SGD */
  bool first;                                           /* SGD: the momentum buffer takes d */
  double beta1, beta2, eps, decay, step_size, bc2_sqrt; /* AdamW */
} clt_optim_desc;

/* The ways clt_matmul can run on a device (clt_matmul_path names them). */
typedef enum clt_matmul_kind {
  CLT__MM_BLAS,    /* host CBLAS */
  CLT__MM_LOOP,    /* host blocked loops */
  CLT__MM_CLBLAST, /* CLBlast on the device's queue */
  CLT__MM_NATIVE,  /* host CBLAS as an OpenCL native kernel (CPU devices) */
  CLT__MM_KERNEL   /* kernels/matmul.cl */
} clt_matmul_kind;

/* A staging session (the staging members of struct clt_backend; lib/staging.c): copies between
 * src (read; may be NULL) and dst (written; may be NULL), both on dev, and host memory. */
#define CLT__STAGE_MAX_WAIT (2 * CLT__MAX_READERS + 4)
typedef struct clt_stage {
  clt_device *dev;
  const clt_tensor *src, *dst;
  const char *fn;
  /* What the first copy waits for (the backend's events, held), until it is enqueued. */
  void *wait[CLT__STAGE_MAX_WAIT];
  int nwait;
  void *last;             /* the handle of the last copy (held), or NULL before the first */
  size_t nread, nwritten; /* bytes copied or mapped, for the transfer counters */
  /* Ranges mapped into host memory (stage_map), for stage_unmap: their pointers and the
   * backend's buffers. */
  void *map_ptr[2], *map_buf[2];
  int nmaps;
} clt_stage;

struct clt_backend {
  const char *name;
  /* ---- device: discovery, synchronization, timing events ---- */
  struct {
    /* (optional: device backends) Discovery, run once by lib/device.c's registry, which lists the
     * devices of every backend of its table in turn: sets *out to an array of pointers to the
     * *count devices of this kind (the backend's, kept until exit: the registry copies the pointers
     * and never frees or grows it; NULL and 0 when there are none), each named, described and
     * opened (clt__device_setup, then whatever the backend needs: the OpenCL backend's context and
     * queue). Each device is allocated by the backend, inside a struct of its own that begins with
     * the struct clt_device. Devices that cannot be opened are left out with a warning on stderr.
     */
    void (*discover)(clt_device ***out, int *count);
    /* (optional: NULL where work is done when its call returns, as on the host) Returns when every
     * command enqueued on dev so far has completed; fn names the caller in errors. */
    clt_status (*synchronize)(clt_device *dev, const char *fn);
    /* (optional: NULL where an event is the host time of recording, as on the host) Timing
     * events. event_record puts a marker after the work enqueued on dev so far and returns it as
     * *out; event_wait blocks until it has completed; event_elapsed gives the ms between two
     * completed markers of dev, or CLT_ERR_UNSUPPORTED where dev gives no times; event_release
     * frees a marker. */
    clt_status (*event_record)(clt_device *dev, const char *fn, void **out);
    clt_status (*event_wait)(clt_device *dev, void *ev, const char *fn);
    clt_status (*event_elapsed)(clt_device *dev, void *start, void *end, const char *fn,
                                double *ms);
    void (*event_release)(void *ev);
  } device;
  /* ---- memory: buffers under lib/memory.c's storages, copies between them and host memory,
   * and the events that order work on a storage ---- */
  struct {
    /* (optional: device backends) Memory behind storages, for lib/memory.c's allocator.
     * buffer_alloc allocates s->bytes (> 0) on s->dev into s->buf; pinned_alloc allocates alloc
     * bytes of host memory that near's copies reach directly, its buffer in s->buf, mapped at
     * s->host; both return 0 or the backend's own error code (OpenCL's: CL_SUCCESS is 0), which
     * error_name names ("CL_OUT_OF_RESOURCES") and error_is_oom tells out-of-memory failures by.
     * buffer_retain takes a reference to the foreign buffer buf of dev (a DLPack import), reporting
     * a failure for fn; buffer_free releases s's buffer (unmapping pinned memory first). */
    int (*buffer_alloc)(clt_storage *s);
    int (*pinned_alloc)(clt_device *near, clt_storage *s, size_t alloc);
    const char *(*error_name)(int err);
    bool (*error_is_oom)(int err);
    clt_status (*buffer_retain)(clt_device *dev, void *buf, const char *fn);
    void (*buffer_free)(clt_storage *s);
    /* (optional: device backends) Enqueues the copy of src's bytes into dst (as many as src has)
     * on q's queue, after the commands that use them: host to device, device to host, or device to
     * device within one context. Host memory involved stays alive until the copy is done. */
    clt_status (*copy)(clt_device *q, clt_tensor *dst, const clt_tensor *src, const char *fn);
    /* (optional: device backends) Copies t's bytes into dst, host memory, after the commands that
     * write t; returns when dst holds them. */
    clt_status (*read)(const clt_tensor *t, void *dst, const char *fn);
    /* (optional: device backends) The events on storages, which the backend records in their
     * write_ev/write_q and read_ev/read_q and marks as its own by setting s->order to its table:
     * storage_wait blocks until the commands that write s (and, if writing, read s) are done;
     * storage_drop releases the events of s, which is being freed, after waiting for them if wait
     * is set. lib/memory.c's clt__storage_host_wait and clt__storage_events_drop call them. */
    clt_status (*storage_wait)(clt_storage *s, bool writing, const char *fn);
    void (*storage_drop)(clt_storage *s, bool wait);
  } memory;
  /* ---- compute: what the dispatcher (lib/dispatch.c) and lazy fusion (lib/lazy.c) run; the
   * core calls clt__lazy_ready right before each member, so no operand is deferred ---- */
  struct {
    /* Fills out with one element's bytes (pattern has clt_dtype_size(out->dtype) bytes). */
    clt_status (*fill)(clt_tensor *out, const void *pattern, const char *fn);
    /* Copies numel elements from user memory into out; src is reusable on return. */
    clt_status (*upload)(clt_tensor *out, const void *src, const char *fn);
    /* out = op(in[0], ...): operands converted to the compute dtype `compute` first (the promoted
     * dtype; for where, of in[1] and in[2]), the result stored as out's dtype. */
    clt_status (*elementwise)(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                              clt_dtype compute, const clt_bcast *bc);
    /* out = the reduction of in viewed as (outer, r, inner) over r: out has outer * inner
     * elements (one, for a whole-tensor reduction, where outer = inner = 1). */
    clt_status (*reduce)(const clt_reduce *red, clt_tensor *out, const clt_tensor *in);
    /* Fills out (f32 or f64, numel > 0) with Philox4x32-10 numbers of seed from the counters
     * offset, offset + 1, ...: uniform in [0, 1), or standard normal if normal is set. Every
     * backend must give the same bits (kernels/random.cl is the one definition). */
    clt_status (*fill_random)(clt_tensor *out, uint64_t seed, uint64_t offset, bool normal,
                              const char *fn);
    /* out = a x b as described (k > 0 and out non-empty; the dispatcher handles the rest). */
    clt_status (*matmul)(clt_tensor *out, const clt_tensor *a, const clt_tensor *b,
                         const clt_matmul_desc *g, const char *fn);
    /* The path matmul takes on dev, or an error (a forced path dev lacks). */
    clt_status (*matmul_path)(clt_device *dev, const char *fn, clt_matmul_kind *out);
    /* out = in gathered along its middle dimension at the indices idx, as described (numel > 0). */
    clt_status (*index_select)(clt_tensor *out, const clt_tensor *in, const clt_tensor *idx,
                               const clt_index_desc *g, const char *fn);
    /* (optional: NULL makes the values on the host and uploads them, as the core does for the
     * float dtypes) out[i] = start + i step for a new contiguous 1-D out of an integer dtype
     * (I64, I32, U8): start and step are integers there, and every value fits. */
    clt_status (*arange)(clt_tensor *out, double start, double step, const char *fn);
    /* (optional: NULL composes the step from the public operations, lib/optim.c) One
     * optimizer step as o describes, in place: param, grad and the state s1 and s2 (SGD:
     * s1 the momentum buffer or NULL, s2 NULL; AdamW: exp_avg and exp_avg_sq) are dense
     * (clt__is_dense), of one shape, dtype and device; grad is only read. One kernel or loop. */
    clt_status (*optim_step)(const clt_optim_desc *o, clt_tensor *param, const clt_tensor *grad,
                             clt_tensor *s1, clt_tensor *s2, const char *fn);
    /* (optional: NULL where ops are never deferred) Runs the fused kernel f on dev, after the
     * commands its leaves and outputs wait for (lib/lazy.c plans it). Or, where the kernel is not
     * built yet and the backend builds it in the background (lib/opencl/program.c), runs nothing
     * and sets *later: lib/lazy.c then runs the chain op by op with `elementwise`, the same bits.
     */
    clt_status (*fused)(clt_device *dev, const clt_fused *f, bool *later);
    /* (optional) Builds, for dtype dt on dev, the programs that running every operation once does
     * not build (clt_kernel_cache_warm calls it after those runs for f32 and f64): the OpenCL
     * backend's tiled matmul kernel, which only CLT_MATMUL=kernel takes on some devices. */
    clt_status (*warm)(clt_device *dev, clt_dtype dt, const char *fn);
  } compute;
  /* ---- staging for libclt_mpi (optional: device backends; NULL where MPI cannot reach the
   * device). lib/staging.c carries the functions of lib/clt-internal-mpi.h to these, so that
   * libclt_mpi copies a device tensor to and from host memory in chunks, overlapping the copies
   * with MPI, without knowing the backend. A session (clt_stage) is one tensor pair; a handle
   * (void *) is the completion of one copy, the backend's own, and may be shared (stage_retain)
   * and outlive its session. */
  struct {
    /* Opens s (dev, src, dst, fn set; the deferred work of src and dst already computed): what its
     * first copy must wait for, into s->wait and s->nwait; on failure nothing is held. */
    clt_status (*stage_begin)(clt_stage *s);
    /* Starts the copy of len bytes at byte off of s->src's element 0 into host (stage_read) or of
     * host into s->dst (stage_write), after `after` (a handle, or NULL), and after s->wait when it
     * is the session's first copy (then clears s->nwait); *done gets a handle of the copy. */
    clt_status (*stage_read)(clt_stage *s, size_t off, size_t len, void *host, void *after,
                             void **done);
    clt_status (*stage_write)(clt_stage *s, size_t off, size_t len, const void *host, void *after,
                              void **done);
    /* Records a marker after the session's copies as the last read of s->src and, if `wrote`, the
     * last write of s->dst; nothing is recorded on failure. */
    clt_status (*stage_finish)(clt_stage *s, bool wrote);
    /* Keeps storage k alive until the copy of handle done completes. */
    void (*stage_keep_alive)(void *done, clt_storage *k, const char *fn);
    /* Waits for a handle, reporting a failed copy as `what`; takes and drops a reference. */
    clt_status (*stage_wait)(clt_device *dev, void *done, const char *fn, const char *what);
    void (*stage_retain)(void *done);
    void (*stage_release)(void *done);
    /* (optional: devices that share memory with the host) Maps len bytes of s->src from byte
     * src_off for reading into *src_ptr and of s->dst from dst_off for writing into *dst_ptr (one
     * read-write mapping where they are the same bytes), after s->wait, returning once they can be
     * used; records them in s->map_*. CLT_ERR_UNSUPPORTED, with nothing mapped or waited for,
     * where this device or these ranges cannot be mapped. stage_unmap unmaps them in order on the
     * device and gives the handle of the last unmap. */
    clt_status (*stage_map)(clt_stage *s, size_t src_off, size_t dst_off, size_t len,
                            void **src_ptr, void **dst_ptr);
    clt_status (*stage_unmap)(clt_stage *s, void **done);
  } staging;
};

/* Host threads: loops over at least CLT__PAR_MIN elements are split into one contiguous part
 * per thread (OpenMP, when configure found it); smaller ones run on the calling thread without
 * entering a parallel region at all (one costs about a microsecond even for one thread).
 * CLT__FOR_PARTS(n, lo, hi, body) runs body once per part with lo and hi its bounds; parts are
 * aligned to 64 elements. clt__host_parts(n) is the number of parts. */
#define CLT__PAR_MIN ((int64_t)1 << 16)
#ifdef _OPENMP
#include <omp.h>
#define CLT__PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
static inline int64_t clt__host_parts(int64_t n) {
  int t = omp_get_max_threads();
  return (n < CLT__PAR_MIN || t < 2) ? 1 : t;
}
#else
#define CLT__PARALLEL_FOR
static inline int64_t clt__host_parts(int64_t n) {
  (void)n;
  return 1;
}
#endif
/* The bounds of part k of parts over n elements, aligned to 64 elements. */
static inline void clt__part(int64_t n, int64_t parts, int64_t k, int64_t *lo, int64_t *hi) {
  int64_t step = ((n + parts - 1) / parts + 63) / 64 * 64;
  *lo = k * step < n ? k * step : n;
  *hi = (k + 1) * step < n ? (k + 1) * step : n;
}
#define CLT__FOR_PARTS(n, lo, hi, ...)                                                             \
  do {                                                                                             \
    int64_t clt_n_ = (n), clt_parts_ = clt__host_parts(clt_n_);                                    \
    if (clt_parts_ == 1) {                                                                         \
      int64_t lo = 0, hi = clt_n_;                                                                 \
      __VA_ARGS__;                                                                                 \
    } else {                                                                                       \
      CLT__PARALLEL_FOR                                                                            \
      for (int64_t clt_k_ = 0; clt_k_ < clt_parts_; clt_k_++) {                                    \
        int64_t lo, hi;                                                                            \
        clt__part(clt_n_, clt_parts_, clt_k_, &lo, &hi);                                           \
        __VA_ARGS__;                                                                               \
      }                                                                                            \
    }                                                                                              \
  } while (0)

extern const struct clt_backend clt__host_backend;
extern const struct clt_backend clt__opencl_backend;
extern const struct clt_backend clt__ref_backend; /* lib/ref/: off unless CLT_REF_DEVICES=N */

/* The host loops (lib/host/): the host backend's members, which other backends whose memory the
 * host can address run too. */
/* LAPACK on host memory (lib/host/lapack.c): batches of row-major f32 or f64 matrices stored one
 * after another; each returns 0, LAPACK's info (> 0) of the first matrix that failed (its index
 * in *which), CLT__LAPACK_NOMEM, or CLT__LAPACK_MISSING (built without LAPACKE). Dimensions are
 * at most CLT__LAPACK_MAX, one matrix at most CLT__LAPACK_MAX elements (32-bit LAPACK). lu:
 * getrf in place, piv (batch, min(m, n)), 1-based; lu_solve: getrs of x (n x nrhs) in place;
 * solve: A X = B, a overwritten by the factors of A^T, piv n entries (reused), x (n x nrhs) in
 * place, work n x nrhs elements (unused for nrhs = 1); inv: getrf and getri in place; cholesky:
 * potrf in place, the other triangle zeroed; trsolve: trtrs of x in place (trans: op(A) = A^T);
 * qr: geqrf of a (overwritten) into q (m x k) and r (k x n), k = min(m, n); eigh: syevd of a's
 * lower triangle, w ascending, a the vectors (as columns) when asked; svd: gesdd of a
 * (overwritten), s descending, u and vt reduced or full, or all three NULL but s; lstsq: gelsy,
 * bx max(m, n) x nrhs with B in its first m rows and X in its first n after. */
enum { CLT__LAPACK_NOMEM = -1000, CLT__LAPACK_MISSING = -1001 };
#define CLT__LAPACK_MAX ((int64_t)INT32_MAX)
int clt__lapack_lu(clt_dtype dt, int64_t batch, int64_t m, int64_t n, void *a, int32_t *piv,
                   int64_t *which);
int clt__lapack_lu_solve(clt_dtype dt, int64_t batch, int64_t n, int64_t nrhs, const void *lu,
                         const int32_t *piv, void *x);
int clt__lapack_solve(clt_dtype dt, int64_t batch, int64_t n, int64_t nrhs, void *a, int32_t *piv,
                      void *x, void *work, int64_t *which);
int clt__lapack_inv(clt_dtype dt, int64_t batch, int64_t n, void *a, int64_t *which);
int clt__lapack_cholesky(clt_dtype dt, int64_t batch, int64_t n, bool upper, void *a,
                         int64_t *which);
int clt__lapack_trsolve(clt_dtype dt, int64_t batch, int64_t n, int64_t nrhs, bool upper,
                        bool trans, bool unit, const void *a, void *x, int64_t *which);
int clt__lapack_qr(clt_dtype dt, int64_t batch, int64_t m, int64_t n, void *a, void *q, void *r);
int clt__lapack_eigh(clt_dtype dt, int64_t batch, int64_t n, bool vectors, void *a, void *w,
                     int64_t *which);
int clt__lapack_svd(clt_dtype dt, int64_t batch, int64_t m, int64_t n, bool full, void *a, void *u,
                    void *s, void *vt, int64_t *which);
int clt__lapack_lstsq(clt_dtype dt, int64_t batch, int64_t m, int64_t n, int64_t nrhs, void *a,
                      void *bx, double rcond);
clt_status clt__host_fill(clt_tensor *out, const void *pattern, const char *fn);
clt_status clt__host_upload(clt_tensor *out, const void *src, const char *fn);
clt_status clt__host_elementwise(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                                 clt_dtype compute, const clt_bcast *bc);
/* clt__host_elementwise without its waits: the loops on the memory of the tensors' storages
 * (s->host), which need not be clt's (a CPU device's mapped buffers). */
clt_status clt__host_elementwise_run(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                                     clt_dtype compute, const clt_bcast *bc);
/* Whether clt__host_elementwise_run runs op without allocating or calling into clt beyond its
 * loops, so that it cannot fail: a copy within one dtype, or a binary or ternary op whose result
 * is contiguous and whose operands are of the compute dtype (not f16 or bf16). */
bool clt__host_elementwise_direct(const clt_op *op, const clt_tensor *out, clt_tensor *const *in,
                                  clt_dtype compute);
clt_status clt__host_reduce(const clt_reduce *red, clt_tensor *out, const clt_tensor *in);
clt_status clt__host_fill_random(clt_tensor *out, uint64_t seed, uint64_t offset, bool normal,
                                 const char *fn);
clt_status clt__host_matmul(clt_tensor *out, const clt_tensor *a, const clt_tensor *b,
                            const clt_matmul_desc *g, const char *fn);
clt_status clt__host_matmul_path(clt_device *dev, const char *fn, clt_matmul_kind *out);
clt_status clt__host_index_select(clt_tensor *out, const clt_tensor *in, const clt_tensor *idx,
                                  const clt_index_desc *g, const char *fn);
clt_status clt__host_optim_step(const clt_optim_desc *o, clt_tensor *param, const clt_tensor *grad,
                                clt_tensor *s1, clt_tensor *s2, const char *fn);
/* Runs the fused chain f on the host (host/fuse.c): its nodes one after the other over blocks of
 * elements that stay in cache, each with the loop of host/elementwise.c that runs it eagerly. */
clt_status clt__host_fused(clt_device *dev, const clt_fused *f, bool *later);
/* host/elementwise.c's loops, for host/fuse.c: element i of o is the op of element i * s_k of
 * each operand (the unary loop reads its operand contiguously), computed in the loop's dtype. */
typedef void (*clt__host_loop1)(void *o, const void *a, int64_t n);
typedef void (*clt__host_loop2)(void *o, const void *a, const void *b, int64_t n, int64_t sa,
                                int64_t sb);
typedef void (*clt__host_loop3)(void *o, const void *a, const void *b, const void *c, int64_t n,
                                const int64_t *s);
/* The loop of op kind k computing in dtype c, of the op's arity (the others set to NULL). */
void clt__host_loops(clt_op_kind k, clt_dtype c, clt__host_loop1 *f1, clt__host_loop2 *f2,
                     clt__host_loop3 *f3);
/* n elements of dtype `from` at src converted to dtype `to` at dst, as clt_cast converts. */
void clt__host_convert(void *dst, clt_dtype to, const void *src, clt_dtype from, int64_t n);
/* The products g describes on host memory (a, b, c: the operands' first elements), with CBLAS
 * when built with it, else blocked loops. Used by the host backend and by the OpenCL
 * native-kernel path, which runs it in a CPU device's queue. */
void clt__host_matmul_run(clt_dtype dt, const clt_matmul_desc *g, const void *a, const void *b,
                          void *c);

/* Empties CLBlast's program cache (a no-op without CLBlast), for tests on Oclgrind, which cannot
 * take the release of those programs at exit (tests/oclgrind/exit_release.c). The rest of the
 * OpenCL backend is declared in lib/opencl/cl-internal.h, for lib/opencl/ alone. */
void clt__cl_matmul_clear_cache(void);

#endif /* CLT_BACKEND_H */
