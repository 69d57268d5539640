/* clt.h - OpenCL tensors: the one public header.
 *
 *   clt_device *dev = clt_device_default();      // $CLT_DEVICE, else first GPU, else cpu
 *   int64_t shape[1] = {3};
 *   clt_tensor *x, *y, *z;
 *   clt_ones(CLT_F32, 1, shape, clt_cpu(), &x);  // born on the host
 *   clt_move(&x, dev);                           // x = x.to(dev): explicit, a copy
 *   clt_ones(CLT_F32, 1, shape, dev, &y);        // or created on the device directly
 *   if (clt_add(x, y, &z) != CLT_OK)             // operands on one device, or an error
 *     fprintf(stderr, "%s\n", clt_last_error());
 *   clt_print(z);                                // tensor([2., 2., 2.], device='cl:0')
 *   clt_tensor_release(x); clt_tensor_release(y); clt_tensor_release(z);
 *
 * Conventions. Every function that can fail returns a clt_status; CLT_OK is 0 and errors are
 * negative. Results come back through out-parameters, which are left untouched on failure.
 * clt_last_error() gives a message naming the function, the argument and the devices involved.
 * Objects handed to the caller through an out-parameter carry one reference that the caller
 * must release (clt_tensor_release, clt_event_release). Devices are owned by clt and stay
 * valid until the process exits.
 *
 * Devices and transfers. The host is the device "cpu"; OpenCL devices are "cl:0", "cl:1", ...
 * in platform order, then device order. A tensor lives on one device. Moving it is explicit
 * (clt_to, clt_copy_to, clt_move, clt_copy) and asynchronous; operations whose operands live on
 * different devices fail with CLT_ERR_DEVICE_MISMATCH; nothing is copied behind your back except
 * by printing, which brings a device tensor home to format it.
 */
#ifndef CLT_H
#define CLT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CLT_VERSION_MAJOR 0
#define CLT_VERSION_MINOR 1
#define CLT_VERSION_PATCH 0

/** The library's version, "MAJOR.MINOR.PATCH". Static storage; never freed. */
const char *clt_version(void);

/* ---------------------------------------------------------------------------------------- */
/* Status codes                                                                              */

/* X(name, value, default message): one table for the enum, the names and the messages. */
#define CLT_STATUS_MAP(X)                                                                          \
  X(OK, 0, "success")                                                                              \
  X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                                                  \
  X(ERR_DEVICE_MISMATCH, -2, "operands are on different devices")                                  \
  X(ERR_NOT_ON_HOST, -3, "tensor is not on the host")                                              \
  X(ERR_UNSUPPORTED, -4, "not supported on this device")                                           \
  X(ERR_OUT_OF_MEMORY, -5, "out of memory")                                                        \
  X(ERR_DEVICE_NOT_FOUND, -6, "no such device")                                                    \
  X(ERR_SHAPE_MISMATCH, -7, "shapes are not compatible")                                           \
  X(ERR_DTYPE, -8, "dtype not supported by this operation")                                        \
  X(ERR_OPENCL, -9, "an OpenCL call failed")                                                       \
  X(ERR_BUILD, -10, "kernel build failed")                                                         \
  X(ERR_IO, -11, "input/output error")                                                             \
  X(ERR_FORMAT, -12, "malformed file")                                                             \
  X(ERR_INTERNAL, -13, "internal error")

typedef enum clt_status {
#define CLT_STATUS_ENUM_(name, value, msg) CLT_##name = value,
  CLT_STATUS_MAP(CLT_STATUS_ENUM_)
#undef CLT_STATUS_ENUM_
} clt_status;

/** The status's name without prefix ("ERR_DEVICE_MISMATCH"); "UNKNOWN" for other values.
 *  Static storage. */
const char *clt_status_name(clt_status s);

/** The status's default message ("operands are on different devices"). Static storage. */
const char *clt_status_message(clt_status s);

/** The detailed message of the last failing call on this thread, or "" if none failed.
 *  Owned by clt (thread-local); valid until the next failing call on this thread. */
const char *clt_last_error(void);

/** The status of the last failing call on this thread (CLT_OK if none). Useful after the
 *  functions that return a pointer, such as clt_tensor_data. */
clt_status clt_last_status(void);

/** Forgets the last error of this thread. */
void clt_clear_error(void);

/* ---------------------------------------------------------------------------------------- */
/* Devices                                                                                   */

typedef struct clt_device clt_device;

typedef enum clt_device_kind {
  CLT_DEVICE_HOST = 0, /* the host itself: "cpu" */
  CLT_DEVICE_CL_CPU,   /* an OpenCL CPU device (PoCL, Intel CPU runtime) */
  CLT_DEVICE_CL_GPU,   /* an OpenCL GPU */
  CLT_DEVICE_CL_ACCELERATOR,
  CLT_DEVICE_CL_OTHER
} clt_device_kind;

/** What is known about a device. Strings are owned by clt, valid until exit. */
typedef struct clt_device_info {
  const char *name; /* "cpu", "cl:0", ... */
  clt_device_kind kind;
  const char *kind_name; /* "host", "cpu", "gpu", "accelerator", "other" */
  const char *vendor;
  const char *model;
  const char *driver_version;
  const char *cl_version;   /* CL_DEVICE_VERSION; "" for the host */
  const char *platform;     /* platform name; "" for the host */
  uint64_t memory_bytes;    /* global memory (physical memory for the host) */
  uint64_t max_alloc_bytes; /* largest single buffer */
  int compute_units;        /* compute units (logical CPUs for the host) */
  int fp64;                 /* 1 if f64 tensors are supported */
  int platform_index;       /* -1 for the host */
  int context_index;        /* devices with equal context_index copy directly; -1 host */
} clt_device_info;

/** The host device, "cpu". Never NULL. */
clt_device *clt_cpu(void);

/** Number of OpenCL devices found (the host is not counted; it always exists). */
int clt_device_count(void);

/** The OpenCL device "cl:<index>", or NULL (with the last error set) if out of range. */
clt_device *clt_device_at(int index);

/** Looks a device up by name ("cpu", "cl:0", ...). On an unknown name returns
 *  CLT_ERR_DEVICE_NOT_FOUND with a message listing the devices that exist. */
clt_status clt_device_get(const char *name, clt_device **out);

/** The default device: the one named by $CLT_DEVICE if set (a warning on stderr if it names no
 *  device), else the first GPU, else cpu. Never NULL. */
clt_device *clt_device_default(void);

/** The i-th OpenCL GPU (0-based, among GPUs only), or cpu if there are not that many. */
clt_device *clt_try_gpu(int i);

/** The device's name: "cpu", "cl:0", ... Static storage. */
const char *clt_device_name(const clt_device *d);

/** One line: vendor, model, driver, OpenCL version, memory, compute units, fp64. */
const char *clt_device_description(const clt_device *d);

/** 1 if the device is an OpenCL GPU. */
int clt_device_is_gpu(const clt_device *d);

/** 1 if the device is the host. */
int clt_device_is_host(const clt_device *d);

/** 1 if the device supports f64 tensors. */
int clt_device_has_fp64(const clt_device *d);

/** Fills *out with what is known about d. */
clt_status clt_device_info_get(const clt_device *d, clt_device_info *out);

/** Waits until all work enqueued on d so far has finished, and reports an asynchronous
 *  failure if one happened. NULL waits for every device. A no-op on the host. */
clt_status clt_device_synchronize(clt_device *d);

/** Memory use of one device's caching allocator. Released tensor memory is kept for reuse by
 *  tensors of about the same size (it is never reused before the device work that touches it is
 *  ordered first); CLT_ALLOC_CACHE=0 turns the cache off. */
typedef struct clt_memory_stats {
  uint64_t allocated_bytes;      /* held by live tensors */
  uint64_t peak_allocated_bytes; /* the most allocated_bytes has been */
  uint64_t cached_bytes;         /* released, kept for reuse */
  uint64_t reserved_bytes;       /* allocated + cached: what the device gave clt */
  uint64_t cached_blocks;
  uint64_t allocations; /* requests served */
  uint64_t cache_hits;  /* requests served from the cache */
} clt_memory_stats;

/** Fills *out with dev's allocator statistics. */
clt_status clt_device_memory_stats(clt_device *dev, clt_memory_stats *out);

/** Returns dev's cached memory to the device or the system (NULL: every device). */
clt_status clt_device_empty_cache(clt_device *dev);

/* ---------------------------------------------------------------------------------------- */
/* Tensors                                                                                   */

typedef enum clt_dtype { CLT_F32 = 0, CLT_F64, CLT_I32, CLT_I64, CLT_U8, CLT_BOOL } clt_dtype;

#define CLT_DTYPE_COUNT 6
#define CLT_MAX_DIMS 8

/** "f32", "f64", "i32", "i64", "u8", "bool"; NULL for an unknown dtype. */
const char *clt_dtype_name(clt_dtype dt);

/** Bytes per element (1 for u8 and bool); 0 for an unknown dtype. */
size_t clt_dtype_size(clt_dtype dt);

typedef struct clt_tensor clt_tensor;

/** Creates an uninitialized tensor of ndim (0..CLT_MAX_DIMS) dimensions on dev. shape may be
 *  NULL when ndim is 0. The caller releases *out.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (bad dtype, ndim, negative dimension, size overflow, NULL),
 *  CLT_ERR_UNSUPPORTED (f64 on a device without cl_khr_fp64), CLT_ERR_OUT_OF_MEMORY. */
clt_status clt_empty(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                     clt_tensor **out);
/** Like clt_empty, filled with zeros. */
clt_status clt_zeros(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                     clt_tensor **out);
/** Like clt_empty, filled with ones (true for bool). */
clt_status clt_ones(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                    clt_tensor **out);
/** Like clt_empty, filled with value converted to dtype (non-zero is true for bool; for integer
 *  dtypes value must be an integer within the dtype's range). */
clt_status clt_full(clt_dtype dtype, int ndim, const int64_t *shape, double value, clt_device *dev,
                    clt_tensor **out);
/** A 1-D tensor start, start + step, ... up to but excluding end (NumPy's arange). step must be
 *  non-zero; the length is ceil((end - start) / step), or 0. bool is not accepted. */
clt_status clt_arange(double start, double end, double step, clt_dtype dtype, clt_device *dev,
                      clt_tensor **out);
/** Creates a tensor on dev holding a copy of the C-ordered elements at src (numel * dtype size
 *  bytes). src may be reused as soon as the call returns. bool elements must be 0 or 1. */
clt_status clt_from_host(const void *src, clt_dtype dtype, int ndim, const int64_t *shape,
                         clt_device *dev, clt_tensor **out);
/** Creates an uninitialized host tensor in pinned (page-locked, device-mapped) memory of the
 *  OpenCL device near, so that copies between it and devices of near's context are faster and
 *  truly asynchronous. The tensor lives on cpu. CLT_ERR_INVALID_ARGUMENT if near is the host. */
clt_status clt_empty_pinned(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *near,
                            clt_tensor **out);

/** Adds a reference. Returns t. NULL-safe. */
clt_tensor *clt_tensor_retain(clt_tensor *t);
/** Drops a reference; the last one frees the tensor once pending copies that read or write it
 *  have finished (the call itself does not wait). NULL-safe. */
void clt_tensor_release(clt_tensor *t);

int clt_tensor_ndim(const clt_tensor *t);
/** The shape (ndim entries), owned by the tensor. */
const int64_t *clt_tensor_shape(const clt_tensor *t);
int64_t clt_tensor_numel(const clt_tensor *t);
size_t clt_tensor_nbytes(const clt_tensor *t);
clt_dtype clt_tensor_dtype(const clt_tensor *t);
clt_device *clt_tensor_device(const clt_tensor *t);
/** 1 if t is a host tensor in pinned memory. */
int clt_tensor_is_pinned(const clt_tensor *t);

/** The host tensor's elements, C-ordered, writable; waits first for pending copies into or out
 *  of it. Returns NULL (last status CLT_ERR_NOT_ON_HOST) for a device tensor: copy it to the
 *  host with clt_to(t, clt_cpu(), &h) first. Owned by the tensor. */
void *clt_tensor_data(clt_tensor *t);

/** Copies all elements of t, on any device, into dst (C order), blocking until done.
 *  dst_bytes must be at least clt_tensor_nbytes(t). */
clt_status clt_tensor_read(const clt_tensor *t, void *dst, size_t dst_bytes);

/** The single element of a one-element tensor as a double (bool gives 0 or 1). Blocks. */
clt_status clt_item(const clt_tensor *t, double *out);
/** The same as an int64_t, exact for i64 (floats are truncated toward zero). */
clt_status clt_item_i64(const clt_tensor *t, int64_t *out);

/* ---------------------------------------------------------------------------------------- */
/* Transfers (asynchronous: they enqueue and return)                                        */

/** A tensor with t's contents on dev. If t is already on dev, *out is t itself with one more
 *  reference (a no-op, like PyTorch's .to); otherwise a new tensor. The caller releases *out.
 *  t may be released at once: it stays alive until the copy has read it. */
clt_status clt_to(clt_tensor *t, clt_device *dev, clt_tensor **out);

/** Always a new tensor on dev with t's contents, even if t is already there. */
clt_status clt_copy_to(clt_tensor *t, clt_device *dev, clt_tensor **out);

/** x = x.to(dev) for C: replaces *t by its copy on dev and releases the old handle (nothing
 *  happens if *t is already there). On failure *t is untouched. */
clt_status clt_move(clt_tensor **t, clt_device *dev);

/** Copies src's elements into dst, which may be on another device. Shapes and dtypes must be
 *  equal (CLT_ERR_SHAPE_MISMATCH, CLT_ERR_DTYPE). */
clt_status clt_copy(clt_tensor *dst, clt_tensor *src);

/* ---------------------------------------------------------------------------------------- */
/* Operations: all operands on one device (else CLT_ERR_DEVICE_MISMATCH); the result lives there.
 *
 * Type promotion for binary operations: equal dtypes give that dtype; a float with an integer
 * or bool gives the float dtype; f32 with f64 gives f64; among integers the wider wins and u8
 * with i32 gives i32; bool with anything gives the other dtype. bool with bool: add is logical
 * or, mul logical and, sub is refused. div is true division: integer or bool operands give
 * f32. Shapes broadcast as in NumPy. Integer overflow wraps around. */

clt_status clt_add(clt_tensor *a, clt_tensor *b, clt_tensor **out);
clt_status clt_sub(clt_tensor *a, clt_tensor *b, clt_tensor **out);
clt_status clt_mul(clt_tensor *a, clt_tensor *b, clt_tensor **out);
clt_status clt_div(clt_tensor *a, clt_tensor *b, clt_tensor **out);

/** The sum of all elements as a 0-dimensional tensor on t's device. Floats sum in their own
 *  dtype (pairwise/tree order); integers and bool sum to i64. */
clt_status clt_sum(clt_tensor *t, clt_tensor **out);

/** Matrix product, as torch.matmul for 2-D and 3-D operands: (m,k) x (k,n) gives (m,n);
 *  (B,m,k) x (B,k,n) gives (B,m,n) (one product per batch entry); (B,m,k) x (k,n) and
 *  (m,k) x (B,k,n) use the 2-D operand for every batch entry. Both operands must be f32 or both
 *  f64 (CLT_ERR_DTYPE otherwise: cast first); the result has their dtype and lives on their
 *  device. k = 0 gives zeros. f32 products accumulate in f32 (BLAS order), so results differ
 *  between devices by rounding only. How it is computed depends on the device (see
 *  clt_matmul_path). The caller releases *out.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL), CLT_ERR_DEVICE_MISMATCH, CLT_ERR_DTYPE,
 *  CLT_ERR_SHAPE_MISMATCH (not 2-D/3-D, inner dimensions or batch sizes differ; the message
 *  names both shapes), CLT_ERR_UNSUPPORTED (a path forced by CLT_MATMUL that this device or
 *  build lacks), CLT_ERR_OPENCL. */
clt_status clt_matmul(clt_tensor *a, clt_tensor *b, clt_tensor **out);

/** Which implementation clt_matmul uses on d: "blas" (the host's CBLAS), "loop" (the host's
 *  own blocked loops, built without CBLAS), "clblast" (CLBlast on the device's queue), "native"
 *  (the host's CBLAS run as an OpenCL native kernel in the device's queue: OpenCL CPU devices
 *  such as PoCL, where it is several times faster than CLBlast), "kernel" (clt's tiled kernel,
 *  kernels/matmul.cl). The environment variable CLT_MATMUL=auto|clblast|native|kernel, read at
 *  each call, forces a path on OpenCL devices (the host ignores it). Returns NULL, with the last
 *  error set (CLT_ERR_UNSUPPORTED), when the forced path is not available on d. Static
 *  storage. */
const char *clt_matmul_path(clt_device *d);

/** A new contiguous tensor holding t with dimensions dim0 and dim1 swapped (torch.transpose,
 *  materialized). Any dtype, any device. Negative dimensions count from the end (-1 is the
 *  last); a 0-d tensor accepts 0 and -1. The caller releases *out.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL, a dimension out of range), CLT_ERR_OPENCL. */
clt_status clt_transpose(clt_tensor *t, int dim0, int dim1, clt_tensor **out);

/** The dtype a binary operation on a and b gives (see above), or CLT_ERR_DTYPE. op is "add",
 *  "sub", "mul" or "div". */
clt_status clt_result_dtype(const char *op, clt_dtype a, clt_dtype b, clt_dtype *out);

/* ---------------------------------------------------------------------------------------- */
/* Printing: the only implicit device-to-host copy.                                          */

/** Formats t as PyTorch does: "tensor([2., 2., 2.], device='cl:0')"; the device is omitted for
 *  host tensors and the dtype shown when it is not f32; tensors of more than 1000 elements are
 *  summarized with "...". Writes at most size bytes including the terminating NUL (size may be
 *  0 and buf NULL to measure); *len (optional) receives the full length, as snprintf returns. */
clt_status clt_format(const clt_tensor *t, char *buf, size_t size, size_t *len);

/** Prints clt_format's text and a newline to stdout. */
clt_status clt_print(const clt_tensor *t);

/** Prints to the given stream. */
clt_status clt_fprint(FILE *f, const clt_tensor *t);

/* ---------------------------------------------------------------------------------------- */
/* Events and timing                                                                         */

typedef struct clt_event clt_event;

/** Records a point in dev's stream of work: it completes when all work enqueued on dev before
 *  it has finished. On the host it completes at once. The caller releases *out. */
clt_status clt_event_record(clt_device *dev, clt_event **out);

/** Waits for the event to complete. */
clt_status clt_event_wait(clt_event *ev);

/** Waits for both events and gives the milliseconds between them (device timestamps where the
 *  device has them). Both must come from the same device. */
clt_status clt_event_elapsed_ms(clt_event *start, clt_event *end, double *ms);

/** NULL-safe. */
void clt_event_release(clt_event *ev);

/** A wall-clock timer that cannot forget to wait: starting it waits for the device's pending
 *  work (so earlier work is not counted), stopping it waits again (so the timed work is).
 *  dev may be NULL to wait for every device. The caller releases *out. */
typedef struct clt_timer clt_timer;
clt_status clt_timer_start(clt_device *dev, clt_timer **out);
/** Waits for the timer's device(s) and gives the milliseconds since clt_timer_start. May be
 *  called several times (laps). */
clt_status clt_timer_stop(clt_timer *t, double *ms);
/** NULL-safe. */
void clt_timer_release(clt_timer *t);

#ifdef __cplusplus
}
#endif

#endif /* CLT_H */
