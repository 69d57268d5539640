/* SPDX-License-Identifier: MIT */
/* clt-internal.h - declarations shared by the library's files; not installed. */
#ifndef CLT_INTERNAL_H
#define CLT_INTERNAL_H

#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clt.h"
#include "fault.h" /* injected faults: nothing unless configured with --enable-fault-injection */

/* Marks a loop whose iterations are independent for vectorization (the host's elementwise and
 * row loops): GCC 12 at -O2 vectorizes no loop whose count is unknown, so they ask for it with
 * OpenMP's simd, which needs no threads (-fopenmp-simd where the build has no OpenMP: configure).
 * Each element is still computed alone, as the scalar loop computes it: the same bits. */
#if defined(_OPENMP) || defined(HAVE_OMP_SIMD)
#define CLT__SIMD _Pragma("omp simd")
#ifdef __clang__ /* a loop of libm calls stays scalar, which is no news */
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
#else
#define CLT__SIMD
#endif

struct clt_backend;

/* A malloc'ed copy of s, or NULL when out of memory (malloc, so injected faults reach it, where
 * strdup would go around them). */
static inline char *clt__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c)
    memcpy(c, s, n);
  return c;
}

/* ---- errors (error.c) ------------------------------------------------------------------- */

/* Sets the thread's last error to "<fn>: <formatted message>" and returns s. (A backend's own
 * error codes are its business: lib/opencl/cl-internal.h has clt__cl_error.) */
clt_status clt__error(clt_status s, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- files replaced atomically (io/atomic_file.c) --------------------------------------- */

/* A file being written under a temporary name beside path, "<path>.tmp-<pid>-<n>" (created with
 * O_EXCL, mode 0666 less the umask, or the mode of the file it replaces), renamed over path on
 * commit: a crash at any point leaves path as it was or entirely new (docs/reliability.md). */
typedef struct clt__afile {
  int fd;
  char *tmp;        /* the temporary file's name, malloc'ed */
  const char *path; /* borrowed from the caller */
} clt__afile;

/* Creates the temporary file. On failure nothing is left to clean up. */
clt_status clt__afile_open(clt__afile *f, const char *path, const char *fn);
/* Writes all n bytes (retrying short writes and EINTR). On failure, call clt__afile_abort. */
clt_status clt__afile_write(clt__afile *f, const void *data, size_t n, const char *fn);
/* fsync and close, without the rename yet: a save of several files (clt_save_sharded) writes
 * and closes each before it renames any. On failure the temporary file is removed. */
clt_status clt__afile_close(clt__afile *f, const char *fn);
/* fsync and close (unless clt__afile_close did), rename over path, fsync of the directory. On
 * failure before the rename the temporary file is removed and path is untouched; the one
 * failure after it (the directory's fsync) is reported with a message saying the new file is in
 * place. */
clt_status clt__afile_commit(clt__afile *f, const char *fn);
/* The first two steps of clt__afile_commit: fsync and close (unless done), rename over path. */
clt_status clt__afile_rename(clt__afile *f, const char *fn);
/* The last step of clt__afile_commit: fsync of the directory of path, after the renames into
 * it. */
clt_status clt__afile_sync_dir(const char *path, const char *fn);
/* Closes and removes the temporary file (after a failure). */
void clt__afile_abort(clt__afile *f);

/* ---- devices (device.c) ----------------------------------------------------------------- */

/* A device: the facts and state that every backend shares. A device backend allocates each of
 * its devices inside a struct of its own that begins with this one (lib/opencl/cl-internal.h:
 * struct clt_cl_device, with the platform, context, queue and program cache), so no field here
 * is of a device API's type. */
struct clt_device {
  int index; /* -1 for the host, else the backend's own number: the n of "cl:n", "ref:n" */
  char name[16];
  clt_device_kind kind;
  const struct clt_backend *backend;
  /* Which context of its backend the device is in (devices of one context copy buffers to each
   * other directly) and which platform, numbered from 0 in discovery order; -1 on the host. The
   * registry moves each backend's context numbers past the previous backends' (device.c). */
  int context_index;
  int platform_index;
  bool fp64;
  bool unified_memory; /* CL_DEVICE_HOST_UNIFIED_MEMORY */
  /* Kernel shape: chunked (each work-item walks one contiguous chunk; CPU devices) or grid-stride
   * with work-group reductions (GPUs); CLT_KERNEL_SHAPE overrides it (device.c). */
  bool chunked;
  size_t max_work_group;
  uint64_t max_alloc;  /* the largest buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE) */
  uint64_t global_mem; /* the device's memory (CL_DEVICE_GLOBAL_MEM_SIZE) */
  int compute_units;
  char vendor[128], model[128], driver[64], cl_version[128], platform_name[128];
  char description[512];
  /* The queue lock, held from each enqueue on the device's queue until the storages it reads
   * and writes have noted its event (lib/opencl/order.c: clt__note_command), so that the event a
   * storage keeps for this queue is always the queue's latest access to it, whatever threads
   * enqueue at once; it also covers setting the arguments of the cached kernels, which are shared
   * (a cl_kernel is not thread-safe). Not held while waiting for device work (but see the
   * overflow case of clt__storage_note). */
  pthread_mutex_t lock;
  /* caching allocator (memory.c) */
  pthread_mutex_t cache_lock;
  struct clt_storage *cache; /* released blocks, kept with their pending events */
  clt_memory_stats mem;
  /* transfer counters (transfer.c), guarded by cache_lock */
  clt_transfer_stats xfer;
};

/* A per-device setting from the environment variable var: one value for every OpenCL device
 * ("grid"), or a comma-separated list of NAME=VALUE ("cl:1=grid,cl:0=chunked"). Copies the value
 * for the device called name into buf and returns buf; NULL when unset or not listed. */
const char *clt__device_setting(const char *var, const char *name, char *buf, size_t size);

/* For device backends' discovery: clt__device_setup completes an entry whose backend has filled
 * its name, kind and hardware facts (the settings of the environment such as CLT_NO_FP64 and
 * CLT_KERNEL_SHAPE, the locks, the description); clt__device_forget undoes it (zeroing the
 * struct clt_device) for a device that could not be opened, whose slot is reused. clt__trim
 * strips surrounding blanks in place. */
void clt__device_setup(clt_device *d);
void clt__device_forget(clt_device *d);
void clt__trim(char *s);

/* Checks that dev is a real device; sets the error for fn and returns the status. */
clt_status clt__check_device(const clt_device *dev, const char *fn, const char *arg);
/* Process-wide settings read once from the environment. */
bool clt__env_sync(void);
bool clt__env_alloc_cache(void); /* CLT_ALLOC_CACHE, default on */
/* The devices that the device backends discovered, in the order of clt_device_at: an array of
 * *count pointers, fixed from the first call until exit. */
clt_device *const *clt__device_list(int *count);

/* ---- storage and tensors (memory.c, tensor.c) ------------------------------------------- */

#define CLT__MAX_READERS 8

/* The memory behind a tensor, refcounted, with the events that order work on it. The buffer and
 * the events are handles of the backend that made them, opaque outside it: lib/opencl/ keeps its
 * buffer object in buf, its events in write_ev and read_ev and their queues in write_q and read_q
 * (lib/opencl/order.c owns the events). */
typedef struct clt_storage {
  atomic_int refs;
  clt_device *dev; /* where it lives: the host (host/pinned memory) or a device of a backend */
  size_t bytes;
  void *host;           /* host memory (host tensors), or the mapped pointer when pinned */
  void *buf;            /* device buffer; for pinned host memory the buffer behind it */
  clt_device *pin_dev;  /* the device whose context holds the pinned buffer */
  pthread_mutex_t lock; /* guards the events below */
  void *write_ev;       /* the last enqueued command writing it (NULL if none pending) */
  void *write_q;        /* the queue of write_ev */
  void *read_ev[CLT__MAX_READERS]; /* last read by each queue, at most one per queue */
  void *read_q[CLT__MAX_READERS];
  int nreads;
  /* The backend whose events the fields above hold (set by its first note, never cleared; NULL
   * while no command was ever noted): clt__storage_host_wait and clt__storage_events_drop go to
   * its storage_wait and storage_drop. */
  _Atomic(const struct clt_backend *) order;
  /* Lazy fusion (lib/lazy.c): the deferred elementwise chain whose result this storage will
   * hold (NULL once computed, and for storages no deferred op made), and how many deferred chains
   * read it (a command writing it evaluates them first). */
  _Atomic(struct clt_lazy *) pending;
  atomic_int lazy_readers;
  /* Host memory the program can reach without clt: clt_tensor_data's pointer, a DLPack export,
   * memory it lent (clt_from_dlpack). No deferred chain reads it (lazy.c). */
  atomic_bool exposed;
  struct clt_storage *next_free; /* in the device's cache */
  /* Autograd's version counter (lib/autograd.c): raised by every write into existing memory
   * (clt__write_check), so that a backward can tell that a tensor it saved changed since. */
  atomic_uint version;
  /* Foreign memory (DLPack imports): clt did not allocate host or buf, so the storage never goes
   * to the cache nor counts in the allocator's statistics; when it is freed, clt waits for the
   * device commands using it, releases its own reference to buf and calls release(release_ctx). */
  void (*release)(void *ctx);
  void *release_ctx;
} clt_storage;

/* A view of a storage (docs/views.md): element (i0, i1, ...) lives at element
 * offset / dtype size + sum(i_d * strides[d]) of the storage. */
struct clt_tensor {
  atomic_int refs;
  clt_dtype dtype;
  int ndim;
  int64_t shape[CLT_MAX_DIMS];
  int64_t strides[CLT_MAX_DIMS]; /* in elements; 0 along an expanded dimension */
  int64_t numel;
  size_t nbytes;   /* numel elements' bytes (not the span a strided view covers) */
  size_t offset;   /* of the first element in the storage, in bytes */
  bool contiguous; /* strides are C order's for the shape (dimensions of size 1 aside) */
  clt_storage *storage;
  struct clt_grad_meta *ag;     /* autograd's state (NULL for a tensor that never required grad) */
  struct clt_tensor *dead_next; /* clt_tensor_release's list of tensors to free (tensor.c) */
};

/* ---- autograd's records (tensor.c keeps them; lib/autograd.c runs the backward) ---------- */

/* A tensor's autograd state, owned by the tensor. A leaf has fn NULL; a result of an operation
 * on tensors that require grad has the node that made it. */
typedef struct clt_grad_meta {
  bool requires_grad;
  bool retain_grad;         /* a non-leaf keeps its .grad too (clt_retain_grad) */
  clt_tensor *grad;         /* one reference; NULL before any backward and after clt_zero_grad */
  struct clt_grad_node *fn; /* one reference */
} clt_grad_meta;

/* One recorded operation: its kind (a clt_op_kind for the elementwise ops and casts, else a
 * clt__grad_kind of lib/backend.h), its public function for messages, its operands (one
 * reference each, dropped when a backward frees the graph) with their storages' versions at the
 * call, and its parameters (dims, starts, ... as the call gave them). */
typedef struct clt_grad_node {
  atomic_int refs;
  int kind;
  const char *fn;
  int n;
  clt_tensor **in;   /* n operands: in_3 for up to three, else allocated (clt_cat) */
  unsigned *version; /* as in: version_3, else allocated */
  clt_tensor *in_3[3];
  unsigned version_3[3];
  int np;
  int64_t p[CLT_MAX_DIMS + 2];
  /* For exp, tanh and sigmoid, whose derivatives are made of their results (as PyTorch saves
   * them): a view of the result without history (a reference to its memory, not to the result,
   * which holds this node: no cycle), and its memory's version at the call; else NULL. */
  clt_tensor *out;
  unsigned out_version;
  bool freed;              /* a backward without retain freed the operands */
  clt_grad_meta *retained; /* the result's state where clt_retain_grad asked (not owned) */
  clt_tensor *grad;        /* the backward's scratch: the result's gradient so far */
  int deps;                /* the backward's scratch: consumers not yet run */
  bool listed;             /* the backward's scratch: in its list of nodes */
} clt_grad_node;

/* Whether grad mode is on for the calling thread (clt_set_grad_enabled), and the setter, which
 * returns the previous setting. */
bool clt__grad_enabled(void);
bool clt__grad_mode_set(bool on);
/* The state of t, made on first use; NULL when out of memory. */
clt_grad_meta *clt__grad_meta(clt_tensor *t);
void clt__grad_node_release(clt_grad_node *node);
/* Drops the operands of node (a backward without retain frees its graph so). */
void clt__grad_node_free(clt_grad_node *node);
/* Records r = fn(in[0..n-1]; p[0..np-1]) as a node of kind on r, which then requires grad, and
 * gives it to *out; on failure r is released and *out untouched. */
clt_status clt__grad_record(int kind, const char *fn, clt_tensor *const *in, int n,
                            const int64_t *p, int np, clt_tensor *r, clt_tensor **out);
/* The derivatives of the kinds CLT__GRAD_LINALG_* (lib/backend.h), which lib/solve.c gives: the
 * gradients of node's operands that need[] asks for, from g (its result's), as new references in
 * gx (all NULL on failure). lib/solve.c sets it before it records such a node; autograd, a layer
 * below it, calls it through the pointer. */
typedef clt_status (*clt__grad_linalg_fn)(const clt_grad_node *node, clt_tensor *g,
                                          const bool *need, clt_tensor **gx);
void clt__grad_linalg_set(clt__grad_linalg_fn f);
/* Whether an operation on in[0..n-1] (NULLs skipped) records: one of them requires grad and
 * grad mode is on. The test costs a load per operand where nothing requires grad. */
static inline bool clt__grad_wanted(clt_tensor *const *in, int n) {
  for (int k = 0; k < n; k++)
    if (in[k] && in[k]->ag && in[k]->ag->requires_grad)
      return clt__grad_enabled();
  return false;
}
/* The call of a public operation that records: where clt__grad_wanted(in, n), runs call (an
 * expression writing its result to r_) with grad mode off, so that the operations it is made of
 * record nothing, and records one node for it; returns from the enclosing function. */
#define CLT__GRAD_RECORD(kind, fn, in, n, p, np, outp, call)                                       \
  do {                                                                                             \
    if (clt__grad_wanted(in, n)) {                                                                 \
      clt_tensor *r_ = NULL;                                                                       \
      bool on_ = clt__grad_mode_set(false);                                                        \
      clt_status s_ = (call);                                                                      \
      clt__grad_mode_set(on_);                                                                     \
      return s_ != CLT_OK ? s_ : clt__grad_record(kind, fn, in, n, p, np, r_, outp);               \
    }                                                                                              \
  } while (0)
/* Before fn writes into the existing tensor dst from in[0..n-1] (in place, _out, clt_copy,
 * fills): refuses, while grad mode is on, a dst that requires grad (a leaf, or a tensor with
 * history: in-place operations are not recorded) and an operand that requires grad (the write
 * would not be recorded); then raises dst's storage's version. */
clt_status clt__write_check(clt_tensor *dst, clt_tensor *const *in, int n, const char *fn);

clt_status clt__storage_alloc(clt_device *dev, size_t bytes, const char *fn, clt_storage **out);
clt_status clt__storage_alloc_pinned(clt_device *near, size_t bytes, const char *fn,
                                     clt_storage **out);
/* Storage over foreign memory: host memory at host (dev is the host) or the buffer buf of a
 * device dev (its backend's handle: an OpenCL buffer object; retained here). release(ctx) runs once
 * when the storage is freed, after the commands that use it have finished; it is not called if
 * this function fails. */
clt_status clt__storage_wrap_foreign(clt_device *dev, void *host, void *buf, size_t bytes,
                                     void (*release)(void *ctx), void *ctx, const char *fn,
                                     clt_storage **out);
clt_storage *clt__storage_retain(clt_storage *s);
void clt__storage_release(clt_storage *s);

/* Validates ndim and shape (0..CLT_MAX_DIMS dimensions, none negative, the size in bytes of
 * dtype elements representable) for fn and gives the number of elements and bytes. */
clt_status clt__check_shape(int ndim, const int64_t *shape, clt_dtype dtype, const char *fn,
                            int64_t *numel, size_t *bytes);
/* Validates dtype, ndim, shape and device for a new tensor and allocates it. */
clt_status clt__tensor_new(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                           const char *fn, clt_tensor **out);
/* A new tensor over existing storage (retains it). */
clt_status clt__tensor_wrap(clt_dtype dtype, int ndim, const int64_t *shape, clt_storage *s,
                            const char *fn, clt_tensor **out);
/* A view over t's storage with the given shape, strides (elements) and offset (elements):
 * the caller has checked that it stays inside the storage. */
clt_status clt__tensor_view(clt_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                            int64_t offset, const char *fn, clt_tensor **out);
/* Strides that show, at shape dims (ndim), the elements that strides show at shape (nd, shape)
 * of as many elements (at least one), in the same C order: PyTorch's view rule (each run of
 * dimensions that lie one inside the other may be split or merged, not two runs together).
 * False where no strides do. clt_view and clt_reshape use it on a tensor, lib/lazy.c on the
 * leaves of a chain that goes on through a view of another shape. */
bool clt__view_strides(int nd, const int64_t *shape, const int64_t *strides, int ndim,
                       const int64_t *dims, int64_t *out);
/* Whether strides are C order's for shape (dimensions of size 1 and empty shapes aside). */
bool clt__strides_contiguous(int ndim, const int64_t *shape, const int64_t *strides);
/* The offset of t's first element in elements. */
static inline int64_t clt__elem_offset(const clt_tensor *t) {
  return (int64_t)(t->offset / clt_dtype_size(t->dtype));
}
/* Whether t can be handed to code that reads numel elements from its offset on (every backend
 * function but elementwise): contiguous, and on a device at offset 0 (kernels other than the
 * elementwise ones take no offset). */
static inline bool clt__is_dense(const clt_tensor *t) {
  return t->contiguous && (t->offset == 0 || t->storage->dev->kind == CLT_DEVICE_HOST);
}
/* *out = t retained where clt__is_dense(t), else a new contiguous copy of t on its device (made
 * by the elementwise copy, lib/dispatch.c): what functions other than the elementwise ones call
 * on their operands, so that every function takes views. */
clt_status clt__dense(const clt_tensor *t, const char *fn, clt_tensor **out);
/* dst (any view that clt__has_internal_overlap refuses not) = src broadcast to dst's shape and
 * converted to its dtype, on their one device: clt_copy, clt_fill_ and the copying view
 * functions (cat, stack, contiguous) go through it. */
clt_status clt__copy_into(clt_tensor *dst, clt_tensor *src, const char *fn);
/* Whether some element of t shares its memory with another (an expanded dimension): such a
 * tensor cannot be written elementwise. */
bool clt__has_internal_overlap(const clt_tensor *t);
clt_status clt__check_dtype(clt_dtype dt, const char *fn, const char *arg);
clt_status clt__check_tensor(const clt_tensor *t, const char *fn, const char *arg);
/* The product of two 2-D or 3-D tensors (dispatch.c; the public clt_matmul, lib/linalg.c, takes
 * every shape torch.matmul takes and reaches this one through views); it records its autograd
 * node. clt__matmul_check: the checks every product makes first (NULLs, rule 3, float dtypes,
 * one dtype), with fn's name in the messages; clt__matmul_shape_error: CLT_ERR_SHAPE_MISMATCH
 * naming both operands' shapes and why. */
clt_status clt__matmul(clt_tensor *a, clt_tensor *b, clt_tensor **out);
clt_status clt__matmul_check(clt_tensor *a, clt_tensor *b, clt_tensor **out, const char *fn);
clt_status clt__matmul_shape_error(const char *fn, const clt_tensor *a, const clt_tensor *b,
                                   const char *why);
bool clt__dtype_is_float(clt_dtype dt);
bool clt__dtype_is_int(clt_dtype dt);  /* i32, i64, u8 (not bool) */
bool clt__dtype_is_half(clt_dtype dt); /* f16, bf16: stored narrow, computed in f32 */
/* The storage type in OpenCL C: "float", "double", "int", "long", "uchar", and "half" (f16, read
 * and written with vload_half and vstore_half) and "ushort" (bf16's bits). */
const char *clt__dtype_cl_type(clt_dtype dt);
/* Writes v to buf as one element of dtype dt (the bytes clt_full fills with), refusing with
 * CLT_ERR_INVALID_ARGUMENT a value an integer dtype cannot hold (fractional, NaN, out of range);
 * buf is untouched on failure. */
clt_status clt__scalar_bytes(clt_dtype dt, double v, void *buf, const char *fn);
/* f16 and bf16 bits to and from f32: the host's conversions, bit for bit those of
 * kernels/elementwise.cl (vstore_half_rte and clt_f32_to_bf16): round to nearest, ties to even.
 * NaN becomes the one quiet NaN (0x7e00, 0x7fc0), sign and payload dropped, so that every device
 * stores the same bits. Inline, so that the host's conversion loops vectorize them. */
static inline uint16_t clt__f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) /* NaN: the one quiet NaN, whatever the sign and payload */
    return 0x7e00u;
  if (ax >= 0x477ff000u) /* 65520 and up (inf too): halfway to 2^16 or more rounds to inf */
    return (uint16_t)(sign | 0x7c00u);
  if (ax < 0x38800000u) {  /* below 2^-14, the smallest normal: a subnormal or zero */
    if (ax <= 0x33000000u) /* 2^-25 and below: half of 2^-24 or less rounds to (even) zero */
      return (uint16_t)sign;
    int e = (int)(ax >> 23);
    uint32_t m = (ax & 0x7fffffu) | 0x800000u; /* value = m * 2^(e - 150) */
    int shift = 126 - e;                       /* in units of 2^-24: m >> shift, 14..24 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u)))
      r++; /* may carry into the smallest normal, 0x0400, which is right */
    return (uint16_t)(sign | r);
  }
  uint32_t r = ax - 0x38000000u; /* exponent rebiased from 127 to 15 */
  uint32_t h = r >> 13, rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    h++; /* may carry into the exponent; 65504 and below never reach inf here */
  return (uint16_t)(sign | h);
}

static inline float clt__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0x1f)
    x = sign | 0x7f800000u | (m << 13);
  else if (e)
    x = sign | ((e + 112) << 23) | (m << 13);
  else if (!m)
    x = sign;
  else {
    float v = (float)m * 0x1p-24f; /* exact */
    return sign ? -v : v;
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline uint16_t clt__f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return 0x7fc0u; /* the one quiet NaN, never rounded into inf */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float clt__bf16_to_f32(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
void clt__format_shape(char *buf, size_t size, int ndim, const int64_t *shape);
/* Host pointer to the tensor's first element (host tensors only). */
static inline void *clt__host_ptr(const clt_tensor *t) {
  return (char *)t->storage->host + t->offset;
}

/* ---- the lazy hook (memory.c) -----------------------------------------------------------
 * The one place where deferred evaluation meets storage. lib/lazy.c sits above the storages and
 * the backends (docs/architecture.md, "Layers"), so they cannot call it; it installs these
 * functions the first time it may defer an op, before any storage can be deferred, and until
 * then every hook is a no-op. clt__storage_touch is what everything below lazy calls before a
 * command or a host access reaches a storage (lib/opencl/order.c's wait lists, host waits). */
typedef struct clt_storage_hooks {
  /* clt__lazy_touch: computes s if it is deferred and, for a write, the chains that read it */
  clt_status (*touch)(clt_storage *s, bool writing, const char *fn);
  /* clt__lazy_free_memory: the allocator's call when dev is full */
  bool (*free_memory)(clt_device *dev, const char *fn);
  /* clt__lazy_storage_gone: s is being freed */
  void (*gone)(clt_storage *s);
} clt_storage_hooks;
void clt__storage_set_hooks(const clt_storage_hooks *h);
clt_status clt__storage_touch(clt_storage *s, bool writing, const char *fn);

/* ---- events on storage (memory.c; the backend of s->order does the work) ---------------- */

/* Releases the events s keeps (it is being freed), after waiting for them if wait is set. */
void clt__storage_events_drop(clt_storage *s, bool wait);
/* Blocks until pending device commands that write s (and, if writing, read s) are done. */
clt_status clt__storage_host_wait(clt_storage *s, bool writing, const char *fn);

/* ---- transfers (transfer.c) ------------------------------------------------------------- */

/* Blocking copy of a tensor's bytes to host memory, counted as an explicit transfer. */
clt_status clt__read_bytes(const clt_tensor *t, void *dst, const char *fn);
/* The same for an implicit transfer (printing): the transfer guard applies. */
clt_status clt__read_bytes_implicit(const clt_tensor *t, void *dst, const char *fn);
/* The transfer counters (device.c): a copy of bytes from src to dst, counted on the device
 * side(s); implicit: printing's copy to the host. */
void clt__count_transfer(clt_device *src, clt_device *dst, size_t bytes, bool implicit);
/* An internal trip between dev and the host (clt_transfer_stats::internal_count). */
void clt__count_internal(clt_device *dev, size_t bytes);
/* A copy of t (its elements, contiguous) on dev for clt's own use, counted as an internal trip
 * on the device end (never the transfer guard's business); dev may be t's own device (a private
 * copy). */
clt_status clt__copy_internal(clt_tensor *t, clt_device *dev, const char *fn, clt_tensor **out);
/* Counts an upload of bytes from the host to dev (clt_from_host and friends). */
void clt__count_h2d(clt_device *dev, size_t bytes);
/* Counts an explicit download of bytes from dev to the host (libclt_mpi's staging). */
void clt__count_d2h(clt_device *dev, size_t bytes);

/* ---- programs (opencl/program.c) -------------------------------------------------------- */

struct clt__kernel_source {
  const char *name; /* "elementwise" for kernels/elementwise.cl */
  const char *text;
};
extern const struct clt__kernel_source clt__kernel_sources[];
extern const size_t clt__kernel_source_count;

/* How many programs dev's cache holds (each holds a reference to the device's context). */
int clt__program_count(clt_device *dev);
/* Whether dev builds kernels in the background where it can (lib/opencl/program.c): an OpenCL
 * device of a thread-safe runtime (not Oclgrind), unless CLT_BACKGROUND_BUILDS=0. */
bool clt__background_builds(const clt_device *dev);
/* How many launches this process has deferred behind their program's build
 * (lib/opencl/deferred.c): for tests. */
long clt__deferred_launches(void);
/* The directory of the on-disk program cache ($CLT_CACHE_DIR, else $XDG_CACHE_HOME/clt, else
 * $HOME/.cache/clt, else $TMPDIR/clt-<uid>), or NULL when it is off (CLT_CACHE=0) or no directory
 * is usable. Read from the environment once; the string is static. */
const char *clt__cache_dir(void);
/* How many programs this process has loaded from the disk cache (for tests and tools). */
long clt__cache_hits(void);

/* ---- random numbers (random.c, host/random.c) ------------------------------------------- */

/* The raw generator: out = Philox4x32-10(counter ctr, key key), as the kernels compute it
 * (exported for the known-answer test). */
void clt__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* The two halves of randn f32's Box-Muller step, the statements every device runs (exported
 * for the exhaustive test): sqrt(-2 ln(m 2^-24)) for m in [1, 2^24], and cos and sin of
 * 2 pi n 2^-24 for n in [0, 2^24). */
float clt__randn_radius_f32(uint32_t m);
void clt__randn_sincos_f32(uint32_t n, float *c, float *s);
/* Counters (128 random bits each) that a random tensor of numel elements of dtype consumes. */
static inline uint64_t clt__random_counters(clt_dtype dtype, int64_t numel) {
  uint64_t per = dtype == CLT_F32 ? 4 : 2; /* RNG_PER_F32, RNG_PER_F64 in kernels/random.cl */
  return ((uint64_t)numel + per - 1) / per;
}

/* ---- parameter sets (params.c) ---------------------------------------------------------- */

/* 1 if the n bytes at s are valid UTF-8 (no overlong forms, surrogates or code points above
 * U+10FFFF). */
bool clt__utf8_valid(const unsigned char *s, size_t n);
/* clt_params_add without its checks of the name, for a caller that has made them for a whole set
 * at once (the safetensors loader sorts the names): name is valid UTF-8, not empty, not
 * "__metadata__" and not yet in p. clt_params_add looks for duplicates one by one, which made
 * loading a file of n tensors take time in n^2. Errors are reported for fn. */
clt_status clt__params_add_unique(clt_params *p, const char *name, clt_tensor *t, const char *fn);
/* clt_params_set_metadata without its checks (the loader's: it validated the file's strings). */
clt_status clt__params_set_metadata(clt_params *p, const char *key, const char *value,
                                    const char *fn);
/* Takes one more reference to p (an optimizer's); clt_params_release drops one. */
clt_params *clt__params_retain(clt_params *p);
/* Makes clt_params_to(p, dev) move f too, in the same all-or-nothing step (an optimizer's state
 * follows its parameters; at most 4 sets follow one); clt__params_unfollow undoes it. f is
 * borrowed: its owner unfollows it before releasing it. */
clt_status clt__params_follow(clt_params *p, clt_params *f, const char *fn);
void clt__params_unfollow(clt_params *p, clt_params *f);
/* The tensor named name in p, borrowed, or NULL (no error is set). */
clt_tensor *clt__params_find(const clt_params *p, const char *name);

/* ---- optimizers (optim.c; io/optim.c saves and loads their state) ------------------------ */

typedef enum clt__optim_kind { CLT__OPTIM_SGD, CLT__OPTIM_ADAMW } clt__optim_kind;
/* An optimizer: its hyperparameters, its parameter set (one reference) and its state, a set of
 * its own that follows the parameters (clt__params_follow) and that clt_optim_save writes as it
 * is: tensors "<param>.momentum_buffer" (SGD with momentum), "<param>.exp_avg" and
 * "<param>.exp_avg_sq" (AdamW), and metadata "<param>.step" (AdamW: the steps taken, decimal),
 * "optimizer" ("sgd" or "adamw") and the hyperparameters ("lr", ..., as %.17g). */
struct clt_optim {
  clt__optim_kind kind;
  double lr, momentum, weight_decay, beta1, beta2, eps;
  clt_params *params;
  clt_params *state;
};
/* The names of kind's state tensors ("exp_avg", ...), NULL-terminated; sgd's has one. */
const char *const *clt__optim_keys(const clt_optim *o);
/* Writes o's kind and hyperparameters into the metadata of st (o's state set, or one replacing it).
 */
clt_status clt__optim_describe(const clt_optim *o, clt_params *st, const char *fn);

/* The __metadata__ key prefix under which clt_save records a tensor's device. */
#define CLT__DEVICE_KEY "clt.device."

/* ---- files from memory (io/safetensors.c, io/npy.c) ------------------------------------- */

/* clt_load and clt_load_npy over the size bytes at data instead of a file (the fuzz targets in
 * tests/fuzz call these): the same checks, results and errors, name standing for the path in
 * messages. */
clt_status clt__load_mem(const void *data, size_t size, const char *name, clt_device *map_location,
                         clt_params **out);
clt_status clt__load_npy_mem(const void *data, size_t size, const char *name, clt_device *dev,
                             clt_tensor **out);

#endif /* CLT_INTERNAL_H */
