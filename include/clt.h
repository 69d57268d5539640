/* SPDX-License-Identifier: MIT */
/**
 * @file clt.h
 * @brief OpenCL tensors: the one public header.
 *
 * @code
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
 * @endcode
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
 *
 * Threads (docs/threads.md). Any function may be called from any thread, on the same device or
 * on different ones at once. Tensors may be shared by threads that only read them, and retained
 * and released from any thread; the last error is per thread. A thread that writes a tensor
 * (an _out or in-place form, clt_copy into it, writes through clt_tensor_data) must be ordered
 * by the program against other threads' use of it, as must the release of anything another thread
 * still uses and changes to a clt_params set. Once a call has returned, another thread may use
 * its results with no clt_device_synchronize: each device has one in-order queue, and every
 * tensor remembers the events of its last write and reads, which later commands wait for.
 */
#ifndef CLT_H
#define CLT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* CLT_API marks what libclt exports: the library is built with -fvisibility=hidden, so only the
 * declarations in the public headers (clt.h, clt_dlpack.h; clt_mpi.h has CLT_MPI_API) are visible
 * to programs; tests/exports.sh checks both ways. On Windows, libclt's own sources define
 * CLT_BUILDING_LIBRARY (dllexport) and programs linking a static libclt define CLT_STATIC. A
 * definition made before this header (-DCLT_API=...) wins. */
#ifndef CLT_API
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(CLT_BUILDING_LIBRARY)
#define CLT_API __declspec(dllexport)
#elif defined(CLT_STATIC)
#define CLT_API
#else
#define CLT_API __declspec(dllimport)
#endif
#elif (defined(__GNUC__) && __GNUC__ >= 4) || defined(__clang__)
#define CLT_API __attribute__((visibility("default")))
#else
#define CLT_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The major version of this header; clt_version() gives the library's. */
#define CLT_VERSION_MAJOR 0
/** The minor version of this header. */
#define CLT_VERSION_MINOR 1
/** The patch version of this header. */
#define CLT_VERSION_PATCH 0

/** The library's version, "MAJOR.MINOR.PATCH". Static storage; never freed. */
CLT_API const char *clt_version(void);

/* ---------------------------------------------------------------------------------------- */
/* Status codes                                                                              */

/** X(name, value, default message): one table for the clt_status enum, clt_status_name() and
 *  clt_status_message(). Each row becomes the enumerator CLT_<name>. */
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
  X(ERR_INTERNAL, -13, "internal error")                                                           \
  X(ERR_TRANSFER_GUARD, -14, "implicit transfer refused by the transfer guard")                   \
  X(ERR_LINALG, -15, "the matrix is singular, not positive-definite, or the method did not converge")

/** What a call returns: CLT_OK (0) on success, a negative CLT_ERR_ value on failure, with the
 *  details in clt_last_error(). The values and their default messages are the rows of
 *  CLT_STATUS_MAP: CLT_OK "success"; CLT_ERR_INVALID_ARGUMENT "invalid argument";
 *  CLT_ERR_DEVICE_MISMATCH "operands are on different devices"; CLT_ERR_NOT_ON_HOST "tensor is
 *  not on the host"; CLT_ERR_UNSUPPORTED "not supported on this device"; CLT_ERR_OUT_OF_MEMORY
 *  "out of memory"; CLT_ERR_DEVICE_NOT_FOUND "no such device"; CLT_ERR_SHAPE_MISMATCH "shapes are
 *  not compatible"; CLT_ERR_DTYPE "dtype not supported by this operation"; CLT_ERR_OPENCL "an
 *  OpenCL call failed"; CLT_ERR_BUILD "kernel build failed"; CLT_ERR_IO "input/output error";
 *  CLT_ERR_FORMAT "malformed file"; CLT_ERR_INTERNAL "internal error";
 *  CLT_ERR_TRANSFER_GUARD "implicit transfer refused by the transfer guard"; CLT_ERR_LINALG
 *  "the matrix is singular, not positive-definite, or the method did not converge" (the
 *  clt_linalg_* routines; PyTorch's LinAlgError). */
typedef enum clt_status {
#define CLT_STATUS_ENUM_(name, value, msg) CLT_##name = value,
  CLT_STATUS_MAP(CLT_STATUS_ENUM_)
#undef CLT_STATUS_ENUM_
} clt_status;

/** The status's name without prefix ("ERR_DEVICE_MISMATCH"); "UNKNOWN" for other values.
 *  Static storage. */
CLT_API const char *clt_status_name(clt_status s);

/** The status's default message ("operands are on different devices"). Static storage. */
CLT_API const char *clt_status_message(clt_status s);

/** The detailed message of the last failing call on this thread, or "" if none failed.
 *  Owned by clt (thread-local); valid until the next failing call on this thread. */
CLT_API const char *clt_last_error(void);

/** The status of the last failing call on this thread (CLT_OK if none). Useful after the
 *  functions that return a pointer, such as clt_tensor_data. */
CLT_API clt_status clt_last_status(void);

/** Forgets the last error of this thread. */
CLT_API void clt_clear_error(void);

#if defined(__GNUC__) || defined(__clang__)
#define CLT_PRINTF_LIKE_(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define CLT_PRINTF_LIKE_(fmt_index, first_arg)
#endif

/** Sets this thread's last error the way clt's own functions do, for libraries and programs
 *  built on clt (libclt_mpi uses it) that report their failures through clt_last_error() and
 *  clt_last_status().
 *  @param s   the status to report: one of the CLT_ERR_ values of CLT_STATUS_MAP.
 *  @param fn  the name of the failing function; the message starts with "<fn>: ". Names longer
 *             than 256 bytes are cut there.
 *  @param fmt a printf format for the rest of the message, followed by its arguments. They may
 *             quote clt_last_error() itself (to wrap a nested call's message). The whole message
 *             is cut at 4095 bytes.
 *  @return s, so that `return clt_set_error(CLT_ERR_IO, fn, "...");` reports and fails at once.
 *  If s is CLT_OK (use clt_clear_error() to forget an error) or not a clt_status, or fn or fmt
 *  is NULL or fn is empty, nothing of the request is kept: the last error becomes
 *  CLT_ERR_INVALID_ARGUMENT with a message from "clt_set_error" saying what was wrong, and
 *  CLT_ERR_INVALID_ARGUMENT is returned. The message is owned by clt (thread-local). */
CLT_API clt_status clt_set_error(clt_status s, const char *fn, const char *fmt, ...)
    CLT_PRINTF_LIKE_(3, 4);

/* ---------------------------------------------------------------------------------------- */
/* Devices                                                                                   */

/** A device: the host ("cpu") or one OpenCL device ("cl:0", ...). Opaque; owned by clt and
 *  valid until the process exits, so it is never released. */
typedef struct clt_device clt_device;

/** What kind of device a clt_device is (clt_device_info.kind). */
typedef enum clt_device_kind {
  CLT_DEVICE_HOST = 0,       /**< the host itself: "cpu" */
  CLT_DEVICE_CL_CPU,         /**< an OpenCL CPU device (PoCL, Intel CPU runtime) */
  CLT_DEVICE_CL_GPU,         /**< an OpenCL GPU */
  CLT_DEVICE_CL_ACCELERATOR, /**< an OpenCL accelerator (CL_DEVICE_TYPE_ACCELERATOR) */
  CLT_DEVICE_CL_OTHER        /**< any other OpenCL device type, or a device of another
                                  backend (the reference devices ref:N of CLT_REF_DEVICES) */
} clt_device_kind;

/** What is known about a device. Strings are owned by clt, valid until exit. */
typedef struct clt_device_info {
  const char *name;           /**< "cpu", "cl:0", ... */
  clt_device_kind kind;       /**< host, OpenCL CPU, GPU, ... */
  const char *kind_name;      /**< "host", "cpu", "gpu", "accelerator", "other" */
  const char *vendor;         /**< CL_DEVICE_VENDOR; "host" for the host */
  const char *model;          /**< CL_DEVICE_NAME; the CPU model for the host */
  const char *driver_version; /**< CL_DRIVER_VERSION; clt's version for the host */
  const char *cl_version;     /**< CL_DEVICE_VERSION; "" for the host */
  const char *platform;       /**< platform name; "" for the host */
  uint64_t memory_bytes;      /**< global memory (physical memory for the host) */
  uint64_t max_alloc_bytes;   /**< largest single buffer */
  int compute_units;          /**< compute units (logical CPUs for the host) */
  int fp64;                   /**< 1 if f64 tensors are supported */
  int platform_index;         /**< -1 for the host and the reference devices */
  int context_index;          /**< devices with equal context_index copy directly; -1 host */
} clt_device_info;

/** The host device, "cpu". Never NULL. */
CLT_API clt_device *clt_cpu(void);

/** Number of devices found besides the host (which always exists): the OpenCL devices, then
 *  the reference devices that CLT_REF_DEVICES asks for (none by default). */
CLT_API int clt_device_count(void);

/** Device number index of clt_device_count(): the OpenCL device "cl:<index>" for the first
 *  ones, then "ref:0", ...; NULL (with the last error set) if out of range. */
CLT_API clt_device *clt_device_at(int index);

/** Looks a device up by name ("cpu", "cl:0", ...). On an unknown name returns
 *  CLT_ERR_DEVICE_NOT_FOUND with a message listing the devices that exist. */
CLT_API clt_status clt_device_get(const char *name, clt_device **out);

/** The default device: the one named by $CLT_DEVICE if set (a warning on stderr if it names no
 *  device), else the first GPU, else cpu. Never NULL. */
CLT_API clt_device *clt_device_default(void);

/** The i-th OpenCL GPU (0-based, among GPUs only), or cpu if there are not that many. */
CLT_API clt_device *clt_try_gpu(int i);

/** The device's name: "cpu", "cl:0", ... Static storage. */
CLT_API const char *clt_device_name(const clt_device *d);

/** One line: vendor, model, driver, OpenCL version, memory, compute units, fp64. */
CLT_API const char *clt_device_description(const clt_device *d);

/** 1 if the device is an OpenCL GPU. */
CLT_API int clt_device_is_gpu(const clt_device *d);

/** 1 if the device is the host. */
CLT_API int clt_device_is_host(const clt_device *d);

/** 1 if the device supports f64 tensors. */
CLT_API int clt_device_has_fp64(const clt_device *d);

/** Fills *out with what is known about d. */
CLT_API clt_status clt_device_info_get(const clt_device *d, clt_device_info *out);

/** Waits until all work enqueued on d so far has finished, and reports an asynchronous
 *  failure if one happened. NULL waits for every device. A no-op on the host. */
CLT_API clt_status clt_device_synchronize(clt_device *d);


/** Memory use of one device's caching allocator. Released tensor memory is kept for reuse by
 *  tensors of about the same size (it is never reused before the device work that touches it is
 *  ordered first); CLT_ALLOC_CACHE=0 turns the cache off. */
typedef struct clt_memory_stats {
  uint64_t allocated_bytes;      /**< held by live tensors */
  uint64_t peak_allocated_bytes; /**< the most allocated_bytes has been */
  uint64_t cached_bytes;         /**< released, kept for reuse */
  uint64_t reserved_bytes;       /**< allocated + cached: what the device gave clt */
  uint64_t cached_blocks;        /**< number of buffers in the cache */
  uint64_t allocations;          /**< requests served */
  uint64_t cache_hits;           /**< requests served from the cache */
} clt_memory_stats;

/** Fills *out with dev's allocator statistics. */
CLT_API clt_status clt_device_memory_stats(clt_device *dev, clt_memory_stats *out);

/** Returns dev's cached memory to the device or the system (NULL: every device). */
CLT_API clt_status clt_device_empty_cache(clt_device *dev);

/* Out of memory. Asking a device for more than it has fails with CLT_ERR_OUT_OF_MEMORY, and the
 * message says how much was asked, what the device has and what to try. clt refuses before any
 * driver call a buffer larger than the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE, and an allocation
 * that would take the memory clt holds on the device (tensors and cache) past its
 * CL_DEVICE_GLOBAL_MEM_SIZE: the same answer on every driver, also on those that accept any
 * buffer and only fail at its first use, or never (PoCL allocates lazily). On the host, a request
 * larger than RAM and swap together is refused before malloc. When the driver or malloc refuses
 * all the same, clt empties that device's cache and tries once more. A failed allocation leaves
 * everything as it was: earlier tensors intact, nothing held, the device usable. The counts are
 * clt's own: memory that other programs, or other libraries in this one, use on the device is not
 * in them. */

/* ---------------------------------------------------------------------------------------- */
/* Tensors                                                                                   */

/** Element types: CLT_F32 and CLT_F64 (IEEE floats), CLT_I32 and CLT_I64 (signed integers),
 *  CLT_U8 (unsigned byte), CLT_BOOL (one byte holding 0 or 1), and the 16-bit storage floats
 *  CLT_F16 (IEEE binary16) and CLT_BF16 (bfloat16: the top half of an f32). f16 and bf16 are
 *  stored narrow and computed in f32: every operation converts them to f32, computes, and rounds
 *  the result to nearest, ties to even (docs/operations.md, "f16 and bf16"). */
typedef enum clt_dtype {
  CLT_F32 = 0,
  CLT_F64,
  CLT_I32,
  CLT_I64,
  CLT_U8,
  CLT_BOOL,
  CLT_F16,
  CLT_BF16
} clt_dtype;

/** The number of dtypes: valid clt_dtype values are 0 .. CLT_DTYPE_COUNT - 1. */
#define CLT_DTYPE_COUNT 8
/** The most dimensions a tensor may have. */
#define CLT_MAX_DIMS 8

/** "f32", "f64", "i32", "i64", "u8", "bool", "f16", "bf16"; NULL for an unknown dtype. */
CLT_API const char *clt_dtype_name(clt_dtype dt);

/** Bytes per element (1 for u8 and bool, 2 for f16 and bf16); 0 for an unknown dtype. */
CLT_API size_t clt_dtype_size(clt_dtype dt);

/** A tensor: dtype, shape and C-ordered elements on one device. Opaque and reference
 *  counted: every handle a function gives back carries one reference, dropped with
 *  clt_tensor_release(). */
typedef struct clt_tensor clt_tensor;

/** Creates an uninitialized tensor of ndim (0..CLT_MAX_DIMS) dimensions on dev. shape may be
 *  NULL when ndim is 0. The caller releases *out.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (bad dtype, ndim, negative dimension, size overflow, NULL),
 *  CLT_ERR_UNSUPPORTED (f64 on a device without cl_khr_fp64), CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_empty(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                             clt_tensor **out);
/** Like clt_empty, filled with zeros. */
CLT_API clt_status clt_zeros(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                             clt_tensor **out);
/** Like clt_empty, filled with ones (true for bool). */
CLT_API clt_status clt_ones(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                            clt_tensor **out);
/** Like clt_empty, filled with value converted to dtype (non-zero is true for bool; for integer
 *  dtypes value must be an integer within the dtype's range). */
CLT_API clt_status clt_full(clt_dtype dtype, int ndim, const int64_t *shape, double value,
                            clt_device *dev, clt_tensor **out);
/** A 1-D tensor start, start + step, ... up to but excluding end (NumPy's arange). step must be
 *  non-zero; the length is ceil((end - start) / step), or 0. bool is not accepted. */
CLT_API clt_status clt_arange(double start, double end, double step, clt_dtype dtype,
                              clt_device *dev, clt_tensor **out);
/** Creates a tensor on dev holding a copy of the C-ordered elements at src (numel * dtype size
 *  bytes). src may be reused as soon as the call returns. bool elements must be 0 or 1. */
CLT_API clt_status clt_from_host(const void *src, clt_dtype dtype, int ndim, const int64_t *shape,
                                 clt_device *dev, clt_tensor **out);
/** Creates an uninitialized host tensor in pinned (page-locked, device-mapped) memory of the
 *  OpenCL device near, so that copies between it and devices of near's context are faster and
 *  truly asynchronous. The tensor lives on cpu. CLT_ERR_INVALID_ARGUMENT if near is the host. */
CLT_API clt_status clt_empty_pinned(clt_dtype dtype, int ndim, const int64_t *shape,
                                    clt_device *near, clt_tensor **out);

/** Adds a reference. Returns t. NULL-safe. */
CLT_API clt_tensor *clt_tensor_retain(clt_tensor *t);
/** Drops a reference; the last one frees the tensor once pending copies that read or write it
 *  have finished (the call itself does not wait). NULL-safe. */
CLT_API void clt_tensor_release(clt_tensor *t);

/** Lazy fusion (docs/performance.md, "Fusion"). On an OpenCL device, and on the host for results
 *  of 2^20 elements or more, an elementwise operation that returns a new tensor (of any dtype)
 *  is deferred: the call checks its
 *  arguments, devices, dtypes and shapes, allocates the result and returns it at once, and the
 *  chain of such operations runs later as one generated kernel (on the host, one pass), when
 *  something needs its values
 *  (a reduction, matmul, a copy or transfer, printing, clt_tensor_read, clt_item, a write into an
 *  operand, an event, clt_device_synchronize, a save, an MPI collective, clt_eval) or when the
 *  chain reaches 32 operations. Only the result and the intermediates still held are written to
 *  memory. Results are bit-identical to running the operations one by one. An error while
 *  running the chain is returned by the call that needed its values, naming the operations.
 *  The _out and in-place forms run at once, in one kernel with the deferred chains of their
 *  operands (w -= lr * g is one kernel). Everything runs at once when CLT_SYNC=1; so does an
 *  operation reading host memory the program holds a pointer to (clt_tensor_data, DLPack),
 *  together with its operands' deferred chains.
 *
 *  clt_set_lazy(1) or (0) turns deferring on or off for the whole process and returns the
 *  previous setting (1 or 0); CLT_LAZY=0 in the environment starts with it off (default: on).
 *  Turning it off does not run the chains already deferred; they run when needed, as before.
 *  CLT_LAZY_DEBUG=1 prints
 *  each fused evaluation and what forced it on stderr. */
CLT_API int clt_set_lazy(int on);
/** Runs the deferred operations that t's values depend on now (a no-op when there are none).
 *  Errors: CLT_ERR_INVALID_ARGUMENT (t is NULL or released), and those of the operations. */
CLT_API clt_status clt_eval(clt_tensor *t);

/** The number of dimensions of t (0 for a 0-d tensor, and for NULL). */
CLT_API int clt_tensor_ndim(const clt_tensor *t);
/** The shape (ndim entries), owned by the tensor and valid while it lives; NULL for
 *  NULL. */
CLT_API const int64_t *clt_tensor_shape(const clt_tensor *t);
/** The number of elements of t: the product of its dimensions (1 for a 0-d tensor;
 *  0 for NULL). */
CLT_API int64_t clt_tensor_numel(const clt_tensor *t);
/** The size of t's elements in bytes: numel times clt_dtype_size(dtype); 0 for NULL. */
CLT_API size_t clt_tensor_nbytes(const clt_tensor *t);
/** The dtype of t (CLT_F32 for NULL). */
CLT_API clt_dtype clt_tensor_dtype(const clt_tensor *t);
/** The device t lives on (owned by clt; never released); NULL for NULL. */
CLT_API clt_device *clt_tensor_device(const clt_tensor *t);
/** 1 if t is a host tensor in pinned memory. */
CLT_API int clt_tensor_is_pinned(const clt_tensor *t);

/** The host tensor's elements, C-ordered, writable; waits first for pending copies into or out
 *  of it. Returns NULL (last status CLT_ERR_NOT_ON_HOST) for a device tensor: copy it to the
 *  host with clt_to(t, clt_cpu(), &h) first; and NULL (CLT_ERR_INVALID_ARGUMENT) for a view
 *  whose elements are not contiguous: clt_contiguous gives a tensor whose are. For a contiguous
 *  view, the pointer is to its first element. Owned by the tensor. Deferred operations that
 *  read or write t run first, and from then on every operation reading t's memory runs at its
 *  call (lazy fusion never reads memory the program may change behind clt's back). */
CLT_API void *clt_tensor_data(clt_tensor *t);

/** Copies all elements of t (any view), on any device, into dst (C order), blocking until done.
 *  dst_bytes must be at least clt_tensor_nbytes(t). */
CLT_API clt_status clt_tensor_read(const clt_tensor *t, void *dst, size_t dst_bytes);

/** The single element of a one-element tensor as a double (bool gives 0 or 1). Blocks. */
CLT_API clt_status clt_item(const clt_tensor *t, double *out);
/** The same as an int64_t, exact for i64 (floats are truncated toward zero and saturate; NaN
 *  gives 0). */
CLT_API clt_status clt_item_i64(const clt_tensor *t, int64_t *out);

/* ---------------------------------------------------------------------------------------- */
/* Transfers (asynchronous: they enqueue and return)                                        */

/** A tensor with t's contents on dev. If t is already on dev, *out is t itself with one more
 *  reference (a no-op, like PyTorch's .to); otherwise a new tensor. The caller releases *out.
 *  t may be released at once: it stays alive until the copy has read it. */
CLT_API clt_status clt_to(clt_tensor *t, clt_device *dev, clt_tensor **out);

/** Always a new tensor on dev with t's contents, even if t is already there. */
CLT_API clt_status clt_copy_to(clt_tensor *t, clt_device *dev, clt_tensor **out);

/** x = x.to(dev) for C: replaces *t by its copy on dev and releases the old handle (nothing
 *  happens if *t is already there). On failure *t is untouched. */
CLT_API clt_status clt_move(clt_tensor **t, clt_device *dev);

/** Copies src's elements into dst, which may be any view (torch.Tensor.copy_): src is broadcast
 *  to dst's shape and converted to dst's dtype (as clt_cast converts). src may be on another
 *  device: it is then copied to dst's device first (an explicit transfer). An expanded dst
 *  (several elements in one place) or a dst that partly overlaps src is
 *  CLT_ERR_INVALID_ARGUMENT; shapes that do not broadcast, CLT_ERR_SHAPE_MISMATCH. */
CLT_API clt_status clt_copy(clt_tensor *dst, clt_tensor *src);

/* ---------------------------------------------------------------------------------------- */
/* Transfer accounting and the transfer guard (docs/architecture.md rule 8)                 */

/** Copies between the host and one device, counted on that device. "Explicit" copies are the
 *  ones the program asked for (clt_to, clt_copy_to, clt_move, clt_copy, clt_from_host,
 *  clt_tensor_read, clt_item); "implicit" ones are the trips home that printing makes. A loop
 *  whose d2h_count grows every step ferries data back and forth: this is how to see it. */
typedef struct clt_transfer_stats {
  uint64_t h2d_count, h2d_bytes;           /**< host to this device: copies, bytes */
  uint64_t d2h_count, d2h_bytes;           /**< this device to the host, explicit */
  uint64_t d2d_in_count, d2d_in_bytes;     /**< another device to this one */
  uint64_t d2d_out_count, d2d_out_bytes;   /**< this device to another one */
  uint64_t implicit_count, implicit_bytes; /**< this device to the host, implicit (printing) */
  uint64_t internal_count, internal_bytes; /**< clt's own trips for an operation, both ways */
} clt_transfer_stats;
/** @var clt_transfer_stats::h2d_count
 *  Copies from the host to this device (h2d_bytes: their bytes). */
/** @var clt_transfer_stats::d2h_count
 *  Explicit copies from this device to the host (d2h_bytes: their bytes). */
/** @var clt_transfer_stats::d2d_in_count
 *  Copies from another OpenCL device to this one (d2d_in_bytes: their bytes). */
/** @var clt_transfer_stats::d2d_out_count
 *  Copies from this device to another OpenCL device (d2d_out_bytes: their bytes). */
/** @var clt_transfer_stats::implicit_count
 *  Implicit copies from this device to the host, made by printing (implicit_bytes: their
 *  bytes). */
/** @var clt_transfer_stats::internal_count
 *  Copies between this device and the host, either way, that clt makes for an operation it
 *  computes on the host: the clt_linalg_* routines on a device where LAPACK cannot run on the
 *  data (docs/linalg.md says which). The tensors stay on this device; the transfer guard does
 *  not apply (internal_bytes: their bytes). */

/** Fills *out with dev's counters since the start of the process or the last reset. The host
 *  has none (all zero): each copy is counted on the OpenCL device at its other end.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL dev or out). */
CLT_API clt_status clt_transfer_stats_get(clt_device *dev, clt_transfer_stats *out);
/** Sets dev's counters to zero (NULL: every device's). Errors: CLT_ERR_INVALID_ARGUMENT (dev
 *  is not a device). */
CLT_API clt_status clt_transfer_stats_reset(clt_device *dev);
/** Prints one line per device with non-zero counters (or "no transfers") to f.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL f). */
CLT_API clt_status clt_transfer_stats_print(FILE *f);

/** What happens to an implicit device-to-host copy (the one printing makes). */
typedef enum clt_transfer_guard {
  CLT_GUARD_ALLOW = 0, /**< implicit transfers happen silently (the default) */
  CLT_GUARD_LOG,       /**< each implicit transfer prints a line on stderr */
  CLT_GUARD_DISALLOW   /**< implicit transfers fail with CLT_ERR_TRANSFER_GUARD */
} clt_transfer_guard;

/** Sets the process-wide guard for implicit transfers; returns the previous mode (or -1 with
 *  CLT_ERR_INVALID_ARGUMENT for an unknown mode). The initial mode comes from
 *  $CLT_TRANSFER_GUARD (allow, log or disallow). Explicit copies are never affected. */
CLT_API int clt_transfer_guard_set(clt_transfer_guard mode);
/** The current process-wide guard mode. */
CLT_API clt_transfer_guard clt_transfer_guard_get(void);

/* ---------------------------------------------------------------------------------------- */
/* Operations: all operands on one device (else CLT_ERR_DEVICE_MISMATCH); the result lives there.
 *
 * Type promotion: equal dtypes give that dtype; a float with an integer or bool gives the float
 * dtype; the wider float wins (f16 and bf16 < f32 < f64), and f16 with bf16 gives f32; f16 and
 * bf16 compute in f32 and round the result to their own dtype; among integers the wider wins and
 * u8 with i32 gives i32; bool with anything gives the other dtype (as in PyTorch). Operations on
 * two bools: add is logical or, mul logical and, maximum or, minimum and; sub, pow, neg, abs and
 * relu refuse bool (CLT_ERR_DTYPE). div is true division and the math functions (exp, log, sqrt,
 * sin, cos, tanh, sigmoid, ...: rule FLOAT in clt_ops.h) give f32 for integer or bool input.
 * Comparisons and the logical operations compute in the promoted dtype and give bool. Shapes
 * broadcast as in NumPy. Integer add, sub, mul and neg wrap around; integer pow with a negative
 * exponent gives 0 unless the base is 1 or -1. maximum and minimum propagate NaN. Float-to-integer
 * casts truncate toward zero and saturate (NaN gives 0).
 *
 * Forms: clt_add(a, b, &out) allocates the result; clt_add_out(a, b, out) writes into an
 * existing tensor of the result's shape and dtype on the same device (it may be a or b when they
 * already have the result's shape); clt_add_(a, b) is a += b; clt_add_scalar(a, 2.0, &out) takes a
 * number, which does not widen a's dtype (i32 + 7 is i32; i32 + 2.5 is f32; a value the integer
 * dtype cannot hold is an error). */

#include "clt_ops.h"

/* The declarations of every row of CLT_ELEMENTWISE_OPS (clt_ops.h), by arity and form. */
#define CLT_OPS_DECL_1_(name) CLT_API clt_status clt_##name(clt_tensor *t, clt_tensor **out);
#define CLT_OPS_DECL_2_(name)                                                                      \
  CLT_API clt_status clt_##name(clt_tensor *a, clt_tensor *b, clt_tensor **out);                   \
  CLT_API clt_status clt_##name##_out(clt_tensor *a, clt_tensor *b, clt_tensor *out);              \
  CLT_API clt_status clt_##name##_scalar(clt_tensor *a, double b, clt_tensor **out);
#define CLT_OPS_DECL_3_(name)                                                                      \
  CLT_API clt_status clt_##name(clt_tensor *a, clt_tensor *b, clt_tensor *c, clt_tensor **out);
#define CLT_OPS_DECL_PLAIN_3_(name)                                                                \
  CLT_API clt_status clt_##name##_scalar(clt_tensor *a, double b, double c, clt_tensor **out);
#define CLT_OPS_DECL_INPLACE_2_(name) CLT_API clt_status clt_##name##_(clt_tensor *a, clt_tensor *b);
#define CLT_OPS_DECL_WRAP_INPLACE_2_(name) CLT_OPS_DECL_INPLACE_2_(name)
#define CLT_OPS_DECL_PLAIN_1_(name)
#define CLT_OPS_DECL_PLAIN_2_(name)
#define CLT_OPS_DECL_WRAP_1_(name)
#define CLT_OPS_DECL_COND_3_(name)
#define CLT_OPS_DECL_(name, arity, rule, form, f, i, b, ulps, doc)                                 \
  CLT_OPS_DECL_##arity##_(name) CLT_OPS_DECL_##form##_##arity##_(name)

/** @name Elementwise operations
 *  One row of CLT_ELEMENTWISE_OPS (clt_ops.h) each; that table says, per operation, what it
 *  computes, which dtypes it takes and which it gives. */
/** @{ */
/** Elementwise operations, declared from the table in clt_ops.h (here for add, exp, clamp and
 *  where):
 *  - clt_exp(t, &out): a unary operation; *out is a new tensor of t's shape.
 *  - clt_add(a, b, &out): a binary operation; a new tensor of the broadcast shape and the result
 *    dtype on a's and b's device; the caller releases *out.
 *  - clt_add_out(a, b, out): writes into out, an existing tensor of exactly the result's shape
 *    and dtype on the same device; out may be a or b itself when that already has the result's
 *    shape, but not a partial overlap of one (a reshape view of it, say). Nothing is allocated
 *    or returned to release.
 *  - clt_add_scalar(a, b, &out): b is a number, turned into a 0-d operand that does not widen a's
 *    dtype (i32 + 7 gives i32; i32 + 2.5 gives f32); the caller releases *out.
 *  - clt_add_(a, b): in place, a = a + b (the same as clt_add_out(a, b, a)), for add, sub, mul
 *    and div: b broadcasts to a's shape, and the result's dtype must be a's (an f32 a with an f64
 *    b is CLT_ERR_DTYPE; an integer a cannot be divided in place, since true division gives f32).
 *  - clt_clamp(t, lo, hi, &out) and clt_clamp_scalar(t, lo, hi, &out): ternary; the three
 *    broadcast together.
 *  - clt_where(cond, a, b, &out): cond ? a : b; cond must be bool; the result has the promoted
 *    dtype of a and b.
 *  Like every operation, the work is enqueued on the device and the call returns.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (a NULL tensor or out, out overlapping an input partially,
 *  a scalar the integer dtype cannot hold), CLT_ERR_DEVICE_MISMATCH (operands, or out, on
 *  different devices; the message names both and the fix), CLT_ERR_SHAPE_MISMATCH (shapes that
 *  do not broadcast; an out of the wrong shape), CLT_ERR_DTYPE (a dtype the operation refuses,
 *  such as bool for sub, neg or pow, with the cast to make; an out of the wrong dtype; a cond
 *  that is not bool), CLT_ERR_UNSUPPORTED (f64 without fp64), CLT_ERR_OUT_OF_MEMORY,
 *  CLT_ERR_OPENCL, CLT_ERR_BUILD. */
CLT_ELEMENTWISE_OPS(CLT_OPS_DECL_)
/** @} */

/** t converted to dtype: a new tensor of t's shape on t's device, even for the same dtype,
 *  which the caller releases. Non-zero is true for bool; float-to-integer conversion truncates
 *  toward zero and saturates (NaN gives 0); conversion to f16 and bf16 goes through f32 and
 *  rounds to nearest even (past f16's range: inf; NaN: the one quiet NaN).
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL, an unknown dtype), CLT_ERR_UNSUPPORTED (f64 on a
 *  device without fp64), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL, CLT_ERR_BUILD. */
CLT_API clt_status clt_cast(clt_tensor *t, clt_dtype dtype, clt_tensor **out);

/** @name Reductions */
/** @{ */
/** Reductions, over the whole tensor (clt_sum(t, &out): a 0-d result) or along one dimension
 *  (clt_sum_dim(t, dim, keepdim, &out): dim may be negative, counting from the end; keepdim
 *  nonzero keeps it with size 1, zero drops it). The result is a new tensor on t's device,
 *  which the caller releases.
 *  - sum: floats in their own dtype (pairwise on the host, a tree on devices, so 16M ones sum
 *    to exactly 16777216); integers and bool to i64, wrapping around. f16 and bf16 are reduced
 *    as f32 and the result (of sum, mean, max, min) rounded back to their dtype.
 *  - mean: floats only (CLT_ERR_DTYPE otherwise: cast first); NaN for an empty reduction.
 *  - max, min: the input's dtype; NaN propagates; an empty reduction is
 *    CLT_ERR_INVALID_ARGUMENT.
 *  - argmax: i64 index of the first maximum (over the flattened tensor for the whole-tensor
 *    form); NaN counts as the maximum.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL t or out, dim out of range, an empty max, min or
 *  argmax), CLT_ERR_DTYPE (mean of integers or bool), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL,
 *  CLT_ERR_BUILD. */
CLT_API clt_status clt_sum(clt_tensor *t, clt_tensor **out);
CLT_API clt_status clt_sum_dim(clt_tensor *t, int dim, int keepdim, clt_tensor **out);
CLT_API clt_status clt_mean(clt_tensor *t, clt_tensor **out);
CLT_API clt_status clt_mean_dim(clt_tensor *t, int dim, int keepdim, clt_tensor **out);
CLT_API clt_status clt_max(clt_tensor *t, clt_tensor **out);
CLT_API clt_status clt_max_dim(clt_tensor *t, int dim, int keepdim, clt_tensor **out);
CLT_API clt_status clt_min(clt_tensor *t, clt_tensor **out);
CLT_API clt_status clt_min_dim(clt_tensor *t, int dim, int keepdim, clt_tensor **out);
CLT_API clt_status clt_argmax(clt_tensor *t, clt_tensor **out);
CLT_API clt_status clt_argmax_dim(clt_tensor *t, int dim, int keepdim, clt_tensor **out);
/** @} */

/** Matrix product with torch.matmul's semantics: (m,k) x (k,n) gives (m,n); a 1-D operand is a
 *  row (on the left) or a column (on the right) whose dimension is dropped from the result, so
 *  (k) x (k) gives a 0-d dot product, (m,k) x (k) an (m) matrix-vector product and (k) x (k,n) an
 *  (n) vector; operands of 3 or more dimensions are batches of matrices whose leading (batch)
 *  dimensions broadcast: (B,m,k) x (B,k,n) gives (B,m,n), (B,m,k) x (k,n) uses the one matrix
 *  for every batch entry, and [2,1,3,4] x [5,4,2] gives [2,5,3,2]. Both operands must have one
 *  float dtype, f16, bf16, f32 or f64 (CLT_ERR_DTYPE otherwise: cast first); the result has
 *  their dtype and lives on their device. k = 0 gives zeros. f32 products accumulate in f32
 *  (BLAS order), so results differ between devices by rounding only; f16 and bf16 operands are
 *  multiplied as f32 copies and the result rounded once. A product with one row or one column
 *  (a matrix-vector product) runs as gemv on the blas, native and clblast paths, never as a
 *  gemm with n = 1. How it is computed depends on the device (see clt_matmul_path). Views
 *  whose matrices BLAS can address (a row or column slice, a transpose: one of the last two
 *  strides 1) are multiplied in place through leading dimensions and transpose flags on the
 *  blas, native and clblast paths; other views, batches that broadcast, and every view on the
 *  kernel path, as contiguous copies. The caller releases *out.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL), CLT_ERR_DEVICE_MISMATCH, CLT_ERR_DTYPE,
 *  CLT_ERR_SHAPE_MISMATCH (a 0-d operand, inner dimensions that differ, batch sizes that
 *  differ where neither is 1; the message names both shapes), CLT_ERR_UNSUPPORTED (a path
 *  forced by CLT_MATMUL that this device or build lacks), CLT_ERR_OPENCL. */
CLT_API clt_status clt_matmul(clt_tensor *a, clt_tensor *b, clt_tensor **out);
/** The dot product of two 1-D tensors of one length and one float dtype: a 0-d tensor
 *  (torch.dot; clt_matmul's (k) x (k) case). Errors as clt_matmul; CLT_ERR_SHAPE_MISMATCH
 *  unless both are 1-D of one length. */
CLT_API clt_status clt_dot(clt_tensor *a, clt_tensor *b, clt_tensor **out);
/** The product of an (m,k) matrix and a vector of k elements: an (m) vector (torch.mv), run as
 *  gemv. Errors as clt_matmul; CLT_ERR_SHAPE_MISMATCH for other shapes. */
CLT_API clt_status clt_mv(clt_tensor *a, clt_tensor *x, clt_tensor **out);
/** The outer product of two 1-D tensors: out[i][j] = a[i] * b[j], an (m,n) tensor
 *  (torch.outer), exact (each element one product); dtypes promote as in clt_mul, so any dtype
 *  is taken. Errors: CLT_ERR_INVALID_ARGUMENT (NULL), CLT_ERR_DEVICE_MISMATCH,
 *  CLT_ERR_SHAPE_MISMATCH (not both 1-D). */
CLT_API clt_status clt_outer(clt_tensor *a, clt_tensor *b, clt_tensor **out);
/** beta * c + alpha * (a x b) for an (m,k) matrix a and a (k,n) matrix b, c broadcasting to
 *  (m,n) (torch.addmm(c, a, b, beta=beta, alpha=alpha)); beta = 0 ignores c's values (NaN in c
 *  does not propagate), though c is still checked, and c then takes no part in autograd (its
 *  gradient stays unset where PyTorch's would be zeros). All three of one float dtype, on one
 *  device. Errors as clt_matmul, and CLT_ERR_SHAPE_MISMATCH where c does not broadcast to
 *  (m,n). */
CLT_API clt_status clt_addmm(clt_tensor *c, clt_tensor *a, clt_tensor *b, double beta,
                             double alpha, clt_tensor **out);
/** Matrix structure, as torch.tril, torch.triu, torch.diag, torch.trace: the lower (tril) or
 *  upper (triu) triangle of the last two dimensions of t (2 or more; a batch of matrices),
 *  from diagonal k on (k = 0 the main diagonal, k > 0 above it, k < 0 below), the rest 0; any
 *  dtype; exact (elements are selected, never computed). diag of a vector of n elements is the
 *  (n + |k|)-square matrix with it on diagonal k, zeros elsewhere; diag of a matrix is a copy of
 *  its diagonal k (clt_diagonal is the view). trace is the sum of a matrix's diagonal (as
 *  clt_sum: integers sum in i64). All differentiate (autograd) and run on t's device.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL), CLT_ERR_SHAPE_MISMATCH (too few dimensions, or
 *  more than 2 for diag and trace). */
CLT_API clt_status clt_tril(clt_tensor *t, int64_t k, clt_tensor **out);
CLT_API clt_status clt_triu(clt_tensor *t, int64_t k, clt_tensor **out);
CLT_API clt_status clt_diag(clt_tensor *t, int64_t k, clt_tensor **out);
CLT_API clt_status clt_trace(clt_tensor *t, clt_tensor **out);
/** The n x m identity (ones on the main diagonal, zeros elsewhere) of dtype on dev; m < 0 gives
 *  n x n (torch.eye). Errors: CLT_ERR_INVALID_ARGUMENT (NULL out or dev, an unknown dtype,
 *  n < 0, more than 2^31 rows or columns), CLT_ERR_UNSUPPORTED (f64 where the device lacks
 *  it). */
CLT_API clt_status clt_eye(int64_t n, int64_t m, clt_dtype dtype, clt_device *dev,
                           clt_tensor **out);
/** steps values from start to end, evenly spaced, both ends included (torch.linspace): element i
 *  is start + i * step for i < steps / 2 and end - (steps - 1 - i) * step from there, step =
 *  (end - start) / (steps - 1), with start, end and step in f32 for f32, f16 and bf16 and each
 *  element an exact f64 product and sum rounded to the dtype (PyTorch's f32 values, which it
 *  computes with a fused multiply-add; in f32 on a device without f64), in f64 for f64 and the
 *  integers (truncated, as a cast); the ends are exact;
 *  steps 0 gives an empty tensor, 1 gives [start]. Errors: CLT_ERR_INVALID_ARGUMENT (NULL
 *  out or dev, an unknown dtype, steps outside 0..2^31, start or end not finite),
 *  CLT_ERR_UNSUPPORTED (f64 where the device lacks it). */
CLT_API clt_status clt_linspace(double start, double end, int64_t steps, clt_dtype dtype,
                                clt_device *dev, clt_tensor **out);

/* ---------------------------------------------------------------------------------------- */
/* Factorizations and solvers, as torch.linalg (docs/linalg.md)                              */
/*                                                                                            */
/* Matrices are the last two dimensions of a tensor; the dimensions before them are a batch   */
/* (each matrix solved on its own), which broadcasts between two operands as in torch. f32 and */
/* f64 only (CLT_ERR_DTYPE for the rest: cast first); every operand on one device, where the   */
/* results are made. LAPACK (LAPACKE over OpenBLAS) computes them on the host: on an OpenCL    */
/* device the operands are copied to the host and the results back, counted as the device's   */
/* internal trips (clt_transfer_stats::internal_count; the transfer guard does not apply). The */
/* call waits for the result, as PyTorch's checks of LAPACK's verdict do. A matrix LAPACK     */
/* cannot factor gives CLT_ERR_LINALG with a message that says why and which batch element.   */
/* Autograd: solve, solve_triangular, cholesky, inv, det and slogdet's logabsdet record       */
/* (their derivatives are PyTorch's); the others refuse an operand that requires grad, in     */
/* grad mode (CLT_ERR_UNSUPPORTED). Common errors: CLT_ERR_INVALID_ARGUMENT (NULL),           */
/* CLT_ERR_DEVICE_MISMATCH, CLT_ERR_DTYPE, CLT_ERR_SHAPE_MISMATCH (fewer than 2 dimensions,    */
/* not square where square is needed, shapes or batches that do not match: the message names  */
/* both), CLT_ERR_UNSUPPORTED (built without LAPACKE; a matrix of more than 2^31-1 elements),  */
/* CLT_ERR_OUT_OF_MEMORY. On any error the outputs are left untouched.                        */

/** X with A X = B (torch.linalg.solve): A (*, n, n); B (*, n, k), or a vector of n elements
 *  (B 1-D, or B's shape is A's without its last dimension), whose X is a vector too. LU with
 *  partial pivoting (getrf, getrs). CLT_ERR_LINALG where A is singular (the message names the
 *  zero of U). */
CLT_API clt_status clt_linalg_solve(clt_tensor *A, clt_tensor *B, clt_tensor **X);
/** X with op(A) X = B (left) or X op(A) = B (left = 0) for triangular A (*, n, n), upper or
 *  lower (the other triangle is not read), its diagonal taken as ones if unitriangular
 *  (torch.linalg.solve_triangular); B (*, n, k) for left, (*, k, n) otherwise. CLT_ERR_LINALG
 *  where a diagonal element is exactly zero (PyTorch returns inf there). */
CLT_API clt_status clt_linalg_solve_triangular(clt_tensor *A, clt_tensor *B, int upper, int left,
                                               int unitriangular, clt_tensor **X);
/** The Cholesky factor of a symmetric positive-definite A (*, n, n): lower L with L L^T = A,
 *  or upper U with U^T U = A (torch.linalg.cholesky); only A's lower (upper) triangle is read;
 *  the other triangle of the result is zero. CLT_ERR_LINALG where A is not positive-definite
 *  (the message names the order of the leading minor that is not). */
CLT_API clt_status clt_linalg_cholesky(clt_tensor *A, int upper, clt_tensor **L);
/** The LU factorization with partial pivoting of A (*, m, n) (torch.linalg.lu_factor): LU holds
 *  L (unit diagonal, not stored) below its diagonal and U on and above it; pivots (*, min(m, n))
 *  i32, 1-based as LAPACK's: row i was swapped with row pivots[i]. CLT_ERR_LINALG where U has
 *  an exact zero on its diagonal (lu_solve would divide by it), as torch. */
CLT_API clt_status clt_linalg_lu_factor(clt_tensor *A, clt_tensor **LU, clt_tensor **pivots);
/** X with A X = B from clt_linalg_lu_factor's LU (*, n, n) and pivots (*, n) (i32, each in
 *  1..n, else CLT_ERR_INVALID_ARGUMENT); B (*, n, k), its batch broadcasting with LU's
 *  (torch.linalg.lu_solve). */
CLT_API clt_status clt_linalg_lu_solve(clt_tensor *LU, clt_tensor *pivots, clt_tensor *B,
                                       clt_tensor **X);
/** The reduced QR factorization of A (*, m, n) (torch.linalg.qr, mode "reduced"): Q (*, m, k)
 *  with orthonormal columns and upper triangular R (*, k, n), k = min(m, n), A = Q R
 *  (Householder: geqrf, orgqr; R's diagonal may be negative, as LAPACK's and torch's). */
CLT_API clt_status clt_linalg_qr(clt_tensor *A, clt_tensor **Q, clt_tensor **R);
/** The least-squares solution X (*, n, k) of A X ~ B for A (*, m, n) and B (*, m, k)
 *  (torch.linalg.lstsq's solution, its default driver gelsy on the host): a QR factorization
 *  with column pivoting whose effective rank is where the estimated condition of its leading
 *  block passes 1 / (eps * max(m, n)) (torch's default rcond), so a rank-deficient A gives the
 *  solution of least norm among the best fits. */
CLT_API clt_status clt_linalg_lstsq(clt_tensor *A, clt_tensor *B, clt_tensor **X);
/** The eigenvalues w (*, n), ascending, and eigenvectors V (*, n, n) (the columns, orthonormal;
 *  NULL V: the values only) of the symmetric A (*, n, n), of which only the lower triangle is
 *  read (torch.linalg.eigh, UPLO "L"; divide and conquer, syevd). A V = V diag(w). Each vector's
 *  sign is LAPACK's. CLT_ERR_LINALG where the method does not converge (NaN in A). */
CLT_API clt_status clt_linalg_eigh(clt_tensor *A, clt_tensor **w, clt_tensor **V);
/** The singular value decomposition A = U diag(S) Vh of A (*, m, n) (torch.linalg.svd): S (*, k)
 *  descending, k = min(m, n); U (*, m, m) and Vh (*, n, n) with full_matrices, else (*, m, k)
 *  and (*, k, n); U and Vh both NULL: the values only (torch.linalg.svdvals). Divide and conquer
 *  (gesdd). Signs of the vectors are LAPACK's. CLT_ERR_LINALG where it does not converge. */
CLT_API clt_status clt_linalg_svd(clt_tensor *A, int full_matrices, clt_tensor **U,
                                  clt_tensor **S, clt_tensor **Vh);
/** The inverse of A (*, n, n) (torch.linalg.inv; getrf, getri). CLT_ERR_LINALG where A is
 *  singular. Solving with clt_linalg_solve is faster and more accurate than multiplying by the
 *  inverse. */
CLT_API clt_status clt_linalg_inv(clt_tensor *A, clt_tensor **out);
/** The determinant of each matrix of A (*, n, n), of A's batch shape (torch.linalg.det): the
 *  product of U's diagonal from the LU factorization, in f64, its sign by the row swaps; 0 for
 *  a singular matrix (no error); 1 for 0 x 0. */
CLT_API clt_status clt_linalg_det(clt_tensor *A, clt_tensor **out);
/** The sign (1, -1, or 0 where singular) and the log of the absolute value of the determinant
 *  (-inf where singular) of each matrix of A (*, n, n), of A's batch shape and dtype
 *  (torch.linalg.slogdet): no overflow where det itself would overflow. */
CLT_API clt_status clt_linalg_slogdet(clt_tensor *A, clt_tensor **sign, clt_tensor **logabsdet);
/** The norm of A (torch.linalg.norm): ord NULL, the 2-norm of all of A's elements (a 0-d
 *  tensor; the Frobenius norm of a matrix); for a 1-D A, "1" (sum of |a|), "2", "inf" (max
 *  |a|); for a matrix or a batch of them (the last two dimensions; a tensor of the batch's
 *  shape), "fro", "nuc" (the sum of the singular values), "1" (the largest column sum of |A|),
 *  "2" (the largest singular value), "inf" (the largest row sum). "fro", "1", "inf" and the
 *  vector norms are elementwise operations and reductions on A's device (autograd records
 *  them; any float dtype); "2" and "nuc" take the singular values (f32, f64; no autograd).
 *  Errors: also CLT_ERR_INVALID_ARGUMENT (an unknown ord), CLT_ERR_SHAPE_MISMATCH (a matrix
 *  norm of a 1-D tensor, "fro" or "nuc" of a vector). */
CLT_API clt_status clt_linalg_norm(clt_tensor *A, const char *ord, clt_tensor **out);
/** The 2-norm condition number of each matrix of A (*, m, n): its largest singular value over
 *  its smallest (inf where singular, NaN for a zero matrix: 0 / 0), of the batch's shape
 *  (torch.linalg.cond, p = None).
 *  CLT_ERR_SHAPE_MISMATCH for empty matrices. */
CLT_API clt_status clt_linalg_cond(clt_tensor *A, clt_tensor **out);
/** The rank of each matrix of A (*, m, n): how many singular values exceed max(m, n) * eps *
 *  the largest (torch.linalg.matrix_rank's default tolerance), an i64 tensor of the batch's
 *  shape. */
CLT_API clt_status clt_linalg_matrix_rank(clt_tensor *A, clt_tensor **out);
/** The Moore-Penrose pseudo-inverse of A (*, m, n), of shape (*, n, m) (torch.linalg.pinv):
 *  V diag(1/s) U^T over the singular values s above max(m, n) * eps * the largest, the rest
 *  taken as zero. */
CLT_API clt_status clt_linalg_pinv(clt_tensor *A, clt_tensor **out);

/** Which implementation clt_matmul uses on d: "blas" (the host's CBLAS), "loop" (the host's
 *  own blocked loops, built without CBLAS), "clblast" (CLBlast on the device's queue), "native"
 *  (the host's CBLAS run as an OpenCL native kernel in the device's queue: OpenCL CPU devices
 *  such as PoCL, where it is several times faster than CLBlast), "kernel" (clt's tiled kernel,
 *  kernels/matmul.cl). The environment variable CLT_MATMUL=auto|clblast|native|kernel, read at
 *  each call, forces a path on OpenCL devices (the host ignores it). Returns NULL, with the last
 *  error set (CLT_ERR_UNSUPPORTED), when the forced path is not available on d. Static
 *  storage. */
CLT_API const char *clt_matmul_path(clt_device *d);

/* ---------------------------------------------------------------------------------------- */
/* Views (docs/views.md)                                                                     */
/*                                                                                            */
/* A tensor is a storage and a view of it: an offset, a shape and strides, all in elements,    */
/* as in PyTorch. The functions below that make views copy nothing, do no device work and      */
/* return at once: the view shares t's memory (a write through either is seen through the      */
/* other), lives on t's device and keeps the memory alive. Dimensions may be negative, counted */
/* from the end (-1 is the last). On any error *out is left untouched.                         */

/** The strides of t in elements (ndim entries; 0 along an expanded dimension), owned by the
 *  tensor and valid while it lives; NULL for NULL. */
CLT_API const int64_t *clt_tensor_strides(const clt_tensor *t);
/** The offset of t's first element in its memory, in elements; 0 for NULL. */
CLT_API int64_t clt_tensor_offset(const clt_tensor *t);
/** 1 if t's elements lie one after another in C order (its strides are those of a new tensor of
 *  its shape, dimensions of size 1 aside), whatever its offset; 0 otherwise and for NULL. */
CLT_API int clt_is_contiguous(const clt_tensor *t);
/** *out is t itself with one more reference if t is contiguous, else a new contiguous tensor on
 *  t's device holding t's elements (torch.Tensor.contiguous). */
CLT_API clt_status clt_contiguous(clt_tensor *t, clt_tensor **out);
/** A new contiguous tensor on t's device holding a copy of t's elements (torch.clone). */
CLT_API clt_status clt_clone(clt_tensor *t, clt_tensor **out);

/** The view of t's diagonal offset in dimensions dim1 and dim2 (negative counts from the end),
 *  as torch.diagonal: the elements (i, i + offset) (offset >= 0) or (i - offset, i), as a last
 *  dimension after t's others, sharing t's memory (writes through it reach t). t needs 2 or
 *  more dimensions; an offset past the edge gives an empty diagonal. Errors:
 *  CLT_ERR_INVALID_ARGUMENT (NULL, fewer than 2 dimensions, a dimension out of range, dim1 ==
 *  dim2). */
CLT_API clt_status clt_diagonal(clt_tensor *t, int64_t offset, int dim1, int dim2,
                                clt_tensor **out);
/** The view t[..., start:start+length, ...] along dim (torch.narrow): 0 <= length and
 *  start + length <= size; a negative start counts from the end.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL, dim, start or length out of range: the message gives
 *  the valid range). */
CLT_API clt_status clt_narrow(clt_tensor *t, int dim, int64_t start, int64_t length,
                              clt_tensor **out);
/** The view t[..., index, ...]: dim removed (torch.select); a negative index counts from the
 *  end. Selecting from a 1-D tensor gives a 0-d view. */
CLT_API clt_status clt_select(clt_tensor *t, int dim, int64_t index, clt_tensor **out);
/** The view t[..., start:stop:step, ...] along dim, with Python's rules: negative start and stop
 *  count from the end, both are clamped to the dimension, and step must be >= 1 (a step of 0 or
 *  less is CLT_ERR_INVALID_ARGUMENT). CLT_SLICE_END as stop means "to the end". */
#define CLT_SLICE_END INT64_MAX
CLT_API clt_status clt_slice(clt_tensor *t, int dim, int64_t start, int64_t stop, int64_t step,
                             clt_tensor **out);
/** The view of t with its dimensions reordered: dimension i of *out is dimension dims[i] of t
 *  (torch.permute). dims holds each of 0..ndim-1 once (negative values count from the end). */
CLT_API clt_status clt_permute(clt_tensor *t, int ndim, const int *dims, clt_tensor **out);
/** The view of t with dimensions dim0 and dim1 swapped (torch.transpose). A 0-d tensor accepts 0
 *  and -1. clt_contiguous of the result gives the swapped elements in C order. */
CLT_API clt_status clt_transpose(clt_tensor *t, int dim0, int dim1, clt_tensor **out);
/** The view of t broadcast to shape (torch.expand): t's dimensions are aligned with the last of
 *  shape, each of size 1 may grow (stride 0) and the others must be equal or -1 (kept); new
 *  leading dimensions are added with stride 0. ndim >= t's. An expanded tensor is read-only for
 *  elementwise writes: an in-place op, an _out form or clt_copy into it is CLT_ERR_INVALID_ARGUMENT
 *  (several elements share one memory location), as in PyTorch. */
CLT_API clt_status clt_expand(clt_tensor *t, int ndim, const int64_t *shape, clt_tensor **out);
/** The view of t with a dimension of size 1 inserted at dim (0..ndim; negative counts from
 *  ndim + 1, as in PyTorch). */
CLT_API clt_status clt_unsqueeze(clt_tensor *t, int dim, clt_tensor **out);
/** The view of t without dimension dim if its size is 1, else t itself (a new reference), as
 *  torch.squeeze(t, dim). */
CLT_API clt_status clt_squeeze(clt_tensor *t, int dim, clt_tensor **out);
/** A view of t with another shape and the same elements in the same (C) order, sharing t's
 *  memory (torch.view). One dimension may be -1 and is then inferred. Fails with
 *  CLT_ERR_INVALID_ARGUMENT where t's strides do not allow it (a transposed tensor, say):
 *  clt_reshape copies then.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL, ndim outside 0..8, more than one -1, another
 *  negative dimension, a view that needs a copy), CLT_ERR_SHAPE_MISMATCH (the element counts
 *  differ; the message names both shapes). */
CLT_API clt_status clt_view(clt_tensor *t, int ndim, const int64_t *shape, clt_tensor **out);
/** Like clt_view where t's strides allow a view; otherwise a new contiguous tensor with t's
 *  elements in the new shape (PyTorch's rule for torch.reshape). */
CLT_API clt_status clt_reshape(clt_tensor *t, int ndim, const int64_t *shape, clt_tensor **out);

/** Fills every element of t (any view, on any device) with value converted to t's dtype (as
 *  clt_full converts). Errors: as clt_copy into t. */
CLT_API clt_status clt_fill_(clt_tensor *t, double value);

/** A new tensor with t's slices along dim at the positions index holds, in its order (repeats
 *  allowed): torch.index_select. index is a 1-D (or 0-d) i64 or i32 tensor on t's device whose
 *  values lie in 0..size-1 of that dimension. The values are checked before the gather, by a
 *  clt_min and a clt_max of index whose results the call waits for (a host sync, whatever the
 *  device): on an OpenCL device that is two reductions and two numbers read back, counted as one
 *  explicit transfer each.
 *  Errors: CLT_ERR_DEVICE_MISMATCH (index elsewhere), CLT_ERR_DTYPE (index not i32 or i64),
 *  CLT_ERR_INVALID_ARGUMENT (NULL, dim out of range, index of 2 or more dimensions, a value out
 *  of range: the message gives the value and the range). */
CLT_API clt_status clt_index_select(clt_tensor *t, int dim, clt_tensor *index, clt_tensor **out);

/** The tensors, all on one device, joined along the existing dimension dim (torch.cat): their
 *  other dimensions must be equal, and their dtypes are promoted to one as clt_add promotes
 *  (f32 with i32 gives f32). n >= 1. A new contiguous tensor. */
CLT_API clt_status clt_cat(int n, clt_tensor *const *tensors, int dim, clt_tensor **out);
/** The tensors, all on one device and of one shape, joined along a new dimension dim (0..ndim;
 *  torch.stack); dtypes are promoted as by clt_cat. n >= 1. A new contiguous tensor. */
CLT_API clt_status clt_stack(int n, clt_tensor *const *tensors, int dim, clt_tensor **out);

/** The dtype a binary operation on a and b gives (see above), or CLT_ERR_DTYPE. op is the
 *  operation's name without prefix: "add", "sub", "mul", "div", "pow", "maximum", "minimum",
 *  "eq", "ne", "lt", "le", "gt" or "ge". */
CLT_API clt_status clt_result_dtype(const char *op, clt_dtype a, clt_dtype b, clt_dtype *out);

/* ---------------------------------------------------------------------------------------- */
/* Automatic differentiation (docs/autograd.md)                                              */
/*
 * Reverse mode, as PyTorch's autograd. A leaf tensor that requires grad (clt_requires_grad_)
 * makes every operation on it record a node (the operation, the operands it needs, its device);
 * the result requires grad too. clt_backward(root, grad) walks the recorded graph from root and
 * adds the gradient of root with respect to each leaf into that leaf's .grad (clt_tensor_grad),
 * on the leaf's device: gradients are computed by clt's own operations on the device where the
 * forward ran, and nothing moves between devices. Differentiable so far: the elementwise
 * operations of clt_ops.h (the comparisons and logical operations give bool results without
 * history; floor, ceil, round, trunc and sign give a zero gradient), their _scalar forms, clt_cast
 * between float dtypes, clt_sum, clt_mean, clt_max, clt_min (whole and along a dim; whole: the
 * gradient split evenly among tied extremes; along a dim: to the index clt_argmax_dim picks, the
 * first), clt_matmul, clt_linear, the views (narrow, select, slice, permute, transpose, expand,
 * unsqueeze, squeeze, view, reshape) with clt_contiguous and clt_clone, clt_cat, clt_stack,
 * clt_index_select (repeated indices add up), and the losses and layers below. Writes into
 * existing tensors (in-place and _out forms, clt_copy, clt_fill_) whose operands or destination
 * require grad are refused while grad mode is on. Transfers (clt_to to another device,
 * clt_copy_to) give results without history. The autograd state of a tensor is not thread-safe:
 * one graph, one thread at a time.
 */

/** Sets whether t requires grad (on nonzero): a leaf that requires grad is what clt_backward
 *  computes gradients for. Only float tensors (f16, bf16, f32, f64) may require grad, else
 *  CLT_ERR_DTYPE; turning it off on a tensor with history (a result of operations) is
 *  CLT_ERR_INVALID_ARGUMENT (detach it with clt_detach instead). */
CLT_API clt_status clt_requires_grad_(clt_tensor *t, int on);
/** 1 if t requires grad (a leaf marked with clt_requires_grad_, or a result recorded from one),
 *  else 0 (also for NULL). */
CLT_API int clt_tensor_requires_grad(const clt_tensor *t);
/** Turns grad mode on (nonzero) or off for the calling thread, and returns the previous setting
 *  (1 or 0). With grad mode off nothing records, as under torch.no_grad(): results do not
 *  require grad, and leaves that require grad may be written in place (an optimizer's step).
 *  On by default in every thread. */
CLT_API int clt_set_grad_enabled(int on);
/** Backward from root: adds d root / d leaf, weighted by grad (the gradient of some scalar with
 *  respect to root: a tensor of root's shape, dtype and device), into the .grad of every leaf
 *  that requires grad and that root was computed from (and of the tensors clt_retain_grad
 *  marked). grad may be NULL only when root has one element (then it is 1). The graph's saved
 *  tensors are released afterwards: a second backward through it is CLT_ERR_INVALID_ARGUMENT
 *  (use clt_backward_retain for all but the last). Errors: root does not require grad,
 *  grad of another shape or dtype (CLT_ERR_SHAPE_MISMATCH, CLT_ERR_DTYPE) or device
 *  (CLT_ERR_DEVICE_MISMATCH, naming both), a tensor the graph saved was written in place since
 *  (CLT_ERR_INVALID_ARGUMENT naming the operation that saved it), or the errors of the
 *  operations that compute the gradients. On an error before any gradient was computed no .grad
 *  changes. grad is not released. */
CLT_API clt_status clt_backward(clt_tensor *root, clt_tensor *grad);
/** clt_backward, keeping the graph so that another backward can go through it. */
CLT_API clt_status clt_backward_retain(clt_tensor *root, clt_tensor *grad);
/** The gradient accumulated in t by backward passes (t's shape and dtype, on t's device),
 *  borrowed: valid until t is released or clt_zero_grad(t); NULL before any backward reached t,
 *  for tensors that are not leaves (unless clt_retain_grad), and for NULL. */
CLT_API clt_tensor *clt_tensor_grad(const clt_tensor *t);
/** Drops t's gradient (sets it to none, as zero_grad(set_to_none=True)): the next backward
 *  starts it afresh. A tensor without one is left as it is. */
CLT_API clt_status clt_zero_grad(clt_tensor *t);
/** *out is a new tensor over t's memory (same shape, strides and elements, so writes show in
 *  both) without history and not requiring grad (torch.Tensor.detach). Release it. */
CLT_API clt_status clt_detach(clt_tensor *t, clt_tensor **out);
/** Makes the non-leaf t keep its gradient in .grad during backward passes (as a leaf does);
 *  nothing to do for a leaf. CLT_ERR_INVALID_ARGUMENT if t does not require grad. */
CLT_API clt_status clt_retain_grad(clt_tensor *t);

/* ---------------------------------------------------------------------------------------- */
/* Losses and layers (docs/autograd.md)                                                      */
/*
 * Numerically stable softmax family and the usual losses, on every device. Each is made of
 * clt's public operations (the shift by the maximum along dim is taken from a detached view of
 * the input), so with grad mode on and an operand that requires grad autograd records their
 * parts and they are differentiable like any composition. The result lives on the operands'
 * device and the caller releases it; on failure *out is untouched.
 */

/** softmax along dim (torch.softmax): exp(t - m) / sum(exp(t - m), dim), m the maximum along
 *  dim, so inputs of any size give no overflow (a row of 1000s gives 1/n each). dim may be
 *  negative, counting from the end. t must be a float tensor (f16, bf16, f32, f64). An empty t
 *  gives an empty result (logsumexp along an empty dim gives -inf).
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL, dim out of range), CLT_ERR_DTYPE (t not float), and
 *  those of the operations it is made of. */
CLT_API clt_status clt_softmax(clt_tensor *t, int dim, clt_tensor **out);
/** log of softmax along dim (torch.log_softmax), computed as (t - m) - log(sum(exp(t - m))),
 *  never as the log of a softmax that underflowed. Arguments and errors as clt_softmax. */
CLT_API clt_status clt_log_softmax(clt_tensor *t, int dim, clt_tensor **out);
/** log(sum(exp(t), dim)) (torch.logsumexp), as m + log(sum(exp(t - m), dim)); a maximum of
 *  +-inf along dim is shifted by 0 instead (a row of -inf gives -inf). keepdim nonzero keeps dim
 *  with size 1. Arguments and errors as clt_softmax. */
CLT_API clt_status clt_logsumexp(clt_tensor *t, int dim, int keepdim, clt_tensor **out);
/** Mean of the squared differences of pred and target (torch.nn.functional.mse_loss with
 *  reduction "mean"): a 0-d tensor of their promoted dtype (NaN for empty tensors). pred and
 *  target must have equal shapes (no broadcasting) and float dtypes, on one device.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL), CLT_ERR_DEVICE_MISMATCH, CLT_ERR_SHAPE_MISMATCH
 *  (the message names both shapes), CLT_ERR_DTYPE. */
CLT_API clt_status clt_mse_loss(clt_tensor *pred, clt_tensor *target, clt_tensor **out);
/** Cross entropy of logits [N, C] (float) against class indices target [N] (i64) on the same
 *  device (torch.nn.functional.cross_entropy with reduction "mean"): the mean over i of
 *  -log_softmax(logits, 1)[i, target[i]], a 0-d tensor of logits' dtype (NaN for N = 0).
 *  The targets are checked before anything else is computed: a count of those outside 0..C-1,
 *  whose result the call waits for (a host sync, whatever the device: one reduction and one
 *  number read back, as clt_index_select), and where there is one, target is read back to name
 *  the first. Errors: CLT_ERR_INVALID_ARGUMENT (NULL, C = 0, a target outside 0..C-1: the
 *  message gives its index and value), CLT_ERR_DEVICE_MISMATCH, CLT_ERR_DTYPE (logits not
 *  float, target not i64), CLT_ERR_SHAPE_MISMATCH (not [N, C] and [N]; the message names both
 *  shapes). */
CLT_API clt_status clt_cross_entropy(clt_tensor *logits, clt_tensor *target, clt_tensor **out);

/* ---------------------------------------------------------------------------------------- */
/* Random numbers                                                                            */
/*
 * Philox4x32-10, a counter-based generator: 128 random bits per 128-bit counter under a 64-bit
 * key (the seed). A generator is a seed and an offset, the next unused counter. Each call draws
 * the counters offset, offset + 1, ... and advances the offset by the number it used:
 * ceil(numel / 4) for f32, ceil(numel / 2) for f64 (a counter gives 4 f32 or 2 f64 elements,
 * uniform or normal alike). The numbers depend on nothing else, so the same seed and the same
 * sequence of calls give bit-identical tensors on cpu and on every OpenCL device
 * (docs/architecture.md rule 9). Consequently, two consecutive calls of n elements equal the halves of one call of 2n
 * elements when n is a multiple of 4 (f32) or 2 (f64); otherwise the unused rest of the last
 * counter is skipped. A failing call may still consume its counters. The arithmetic (and the
 * exact mapping of bits to numbers) is written down in kernels/random.cl:
 *   uniform f32: a 32-bit word w gives (w >> 8) * 2^-24, exactly, in [0, 1);
 *   uniform f64: two words give 53 bits times 2^-53, exactly, in [0, 1);
 *   normal: Box-Muller, r = sqrt(-2 ln u1), u1 in (0, 1]; (r cos 2 pi u2, r sin 2 pi u2), with
 *   log, sqrt and sincos computed from + - * only, so that every device rounds them alike;
 *   within about 3e-7 (f32) and 1e-15 (f64) of r times the exact value.
 * The default generator, used by clt_rand and clt_randn, starts with seed 67280421310721 (as
 * PyTorch's does); it is shared by all threads (calls are serialized on its offset), so for
 * reproducible results with several threads give each its own clt_generator.
 */

/** Reseeds the default generator: its seed becomes seed and its offset 0. Thread-safe.
 *  Always returns CLT_OK. */
CLT_API clt_status clt_manual_seed(uint64_t seed);

/** A new dtype tensor of the given shape on dev (see clt_empty), filled from the default
 *  generator with numbers uniform in [0, 1). The caller releases *out.
 *  Errors: CLT_ERR_DTYPE (dtype is not CLT_F32 or CLT_F64; for f16 and bf16, draw f32 and cast
 *  it), CLT_ERR_INVALID_ARGUMENT (NULL out,
 *  bad dtype value, ndim or shape, NULL dev), CLT_ERR_UNSUPPORTED (f64 on a device without
 *  fp64), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL, CLT_ERR_BUILD. */
CLT_API clt_status clt_rand(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                            clt_tensor **out);

/** Like clt_rand, with standard normal numbers (mean 0, variance 1). */
CLT_API clt_status clt_randn(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                             clt_tensor **out);

/** A generator of its own: a seed and an offset (see above). Not tied to a device. */
typedef struct clt_generator clt_generator;

/** Creates a generator with this seed and offset 0. The caller releases *out with
 *  clt_generator_release. Errors: CLT_ERR_INVALID_ARGUMENT (NULL out), CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_generator_create(uint64_t seed, clt_generator **out);

/** Frees g. It must not be in use by another thread. NULL-safe. */
CLT_API void clt_generator_release(clt_generator *g);

/** Like clt_rand, drawing from g (thread-safe: concurrent calls get disjoint counters, in the
 *  order they take them). Errors: those of clt_rand, and CLT_ERR_INVALID_ARGUMENT for NULL g. */
CLT_API clt_status clt_generator_rand(clt_generator *g, clt_dtype dtype, int ndim,
                                      const int64_t *shape, clt_device *dev, clt_tensor **out);

/** Like clt_randn, drawing from g. */
CLT_API clt_status clt_generator_randn(clt_generator *g, clt_dtype dtype, int ndim,
                                       const int64_t *shape, clt_device *dev, clt_tensor **out);

/* ---------------------------------------------------------------------------------------- */
/* Printing: the only implicit device-to-host copy.                                          */

/** Formats t as PyTorch does: "tensor([2., 2., 2.], device='cl:0')"; the device is omitted for
 *  host tensors and the dtype shown when it is not f32; tensors of more than 1000 elements are
 *  summarized with "...". Writes at most size bytes including the terminating NUL (size may be
 *  0 and buf NULL to measure); *len (optional) receives the full length, as snprintf returns.
 *  Formatting a device tensor is an implicit device-to-host copy: the transfer guard applies
 *  (CLT_ERR_TRANSFER_GUARD when it disallows). */
CLT_API clt_status clt_format(const clt_tensor *t, char *buf, size_t size, size_t *len);

/** Prints clt_format's text and a newline to stdout. */
CLT_API clt_status clt_print(const clt_tensor *t);

/** Prints to the given stream. */
CLT_API clt_status clt_fprint(FILE *f, const clt_tensor *t);

/* ---------------------------------------------------------------------------------------- */
/* NumPy .npy files (one tensor)                                                             */

/** Writes t, on any device, to path as a NumPy .npy file (format version 1.0, little-endian,
 *  C order: descr '<f2', '<f4', '<f8', '<i4', '<i8', '|u1' or '|b1'; the data starts at a
 *  multiple of 64 bytes). bf16 has no NumPy type code and is refused (save it as safetensors, or
 *  cast it to f32, which is exact). A device tensor is read back explicitly, as clt_tensor_read
 *  does (blocking). The write is atomic, as clt_save's: a temporary file in path's directory,
 *  fsync, then a rename over path and a flush of the directory, so a crash leaves either the old
 *  file or the new one whole.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL), CLT_ERR_IO (the message names the file and the
 *  system's reason), CLT_ERR_DTYPE (bf16), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL. */
CLT_API clt_status clt_save_npy(const char *path, const clt_tensor *t);

/** Reads the .npy file at path into a new tensor on dev. Versions 1.0, 2.0 and 3.0; the dtypes
 *  above in either byte order ('>f8' is byte-swapped while loading); Fortran-ordered arrays
 *  (fortran_order: True) are reordered into C order, so element [i, j] is the same as in NumPy.
 *  The file is validated entirely before memory is allocated for its data: preamble, header
 *  length (at most 100000 bytes and within the file), a Python dict with exactly 'descr',
 *  'fortran_order' and 'shape', non-negative dimensions, at most 8 of them, and the element count
 *  times the item size equal to the bytes that follow the header (no overflow). The caller
 *  releases *out.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL path or out, bad dev), CLT_ERR_IO (cannot open or read),
 *  CLT_ERR_FORMAT (not a well-formed .npy file: the message names the file and the problem),
 *  CLT_ERR_DTYPE (a dtype clt lacks, such as '<i2', '<c8' or 'O'; the message names it),
 *  CLT_ERR_UNSUPPORTED (f64 on a device without fp64), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL. */
CLT_API clt_status clt_load_npy(const char *path, clt_device *dev, clt_tensor **out);

/* ---------------------------------------------------------------------------------------- */
/* Events and timing                                                                         */

/** A point in one device's stream of work, for waiting and timing. Opaque; released with
 *  clt_event_release(). */
typedef struct clt_event clt_event;

/** Records a point in dev's stream of work: it completes when all work enqueued on dev before
 *  it has finished. On the host it completes at once. The caller releases *out with
 *  clt_event_release. Errors: CLT_ERR_INVALID_ARGUMENT (NULL dev or out),
 *  CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL. */
CLT_API clt_status clt_event_record(clt_device *dev, clt_event **out);

/** Blocks until the event has completed. Errors: CLT_ERR_INVALID_ARGUMENT (NULL ev),
 *  CLT_ERR_OPENCL (the wait failed, or work before the event failed). */
CLT_API clt_status clt_event_wait(clt_event *ev);

/** Waits for both events and stores in *ms the milliseconds between them (device timestamps
 *  where the device has them, else the host times at which completion was seen; never
 *  negative). Errors: CLT_ERR_INVALID_ARGUMENT (NULL, or events recorded on different
 *  devices), CLT_ERR_OPENCL, CLT_ERR_UNSUPPORTED (the device gives no timestamps at all). */
CLT_API clt_status clt_event_elapsed_ms(clt_event *start, clt_event *end, double *ms);

/** Frees the event (waiting first, if it has not completed). NULL-safe. */
CLT_API void clt_event_release(clt_event *ev);

/** A wall-clock timer that cannot forget to wait: starting it waits for the device's pending
 *  work (so earlier work is not counted), stopping it waits again (so the timed work is).
 *  Opaque; released with clt_timer_release(). */
typedef struct clt_timer clt_timer;
/** Waits for dev's pending work (dev NULL: every device's), then starts a timer. The caller
 *  releases *out with clt_timer_release. Errors: CLT_ERR_INVALID_ARGUMENT (dev is not a device,
 *  NULL out), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL (the wait failed). */
CLT_API clt_status clt_timer_start(clt_device *dev, clt_timer **out);
/** Waits for the timer's device(s) and stores in *ms the milliseconds since clt_timer_start.
 *  May be called several times (laps). Errors: CLT_ERR_INVALID_ARGUMENT (NULL t or ms),
 *  CLT_ERR_OPENCL (the wait failed). */
CLT_API clt_status clt_timer_stop(clt_timer *t, double *ms);
/** Frees the timer. NULL-safe. */
CLT_API void clt_timer_release(clt_timer *t);

/* ---------------------------------------------------------------------------------------- */
/* Layers                                                                                    */

/** A fully connected layer's forward pass: y = x W^T + b, with x of shape (N, in) (or
 *  (B, N, in)), weight of shape (out, in) and bias of shape (out) or NULL; y has shape (N, out)
 *  (or (B, N, out)). x, weight and bias must have one float dtype, and be on one device
 *  (the same-device rule: input on cpu and parameters on cl:0 fail with
 *  CLT_ERR_DEVICE_MISMATCH, nothing is copied). The caller releases *y.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL), CLT_ERR_DEVICE_MISMATCH, CLT_ERR_DTYPE,
 *  CLT_ERR_SHAPE_MISMATCH, and those of clt_matmul. */
CLT_API clt_status clt_linear(clt_tensor *x, clt_tensor *weight, clt_tensor *bias, clt_tensor **y);

/* ---------------------------------------------------------------------------------------- */
/* Parameter sets and checkpoints                                                            */
/*
 * A parameter set holds named tensors in the order they were added (a model's weights).
 *
 *   clt_params *model;
 *   clt_params_create(&model);
 *   clt_params_add(model, "weight", w);         // the set retains w
 *   clt_params_to(model, dev);                  // moves every tensor IN PLACE
 *   clt_linear(x, clt_params_get(model, "weight"), clt_params_get(model, "bias"), &y);
 *   clt_save("model.safetensors", model);       // remembers each tensor's device
 *   clt_params_release(model);
 *
 * Note the asymmetry, the same as PyTorch's between model.to(dev) and tensor.to(dev):
 * clt_params_to(p, dev) changes p itself (the handle stays; each entry is replaced by its copy
 * on dev, and a tensor handle taken earlier with clt_params_get still points to the old copy),
 * while clt_to(t, dev, &out) leaves t alone and returns the copy.
 */
/** A parameter set: named tensors in the order added. Opaque; released with
 *  clt_params_release(). */
typedef struct clt_params clt_params;

/** Creates an empty set. The caller releases *out with clt_params_release.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL out), CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_params_create(clt_params **out);

/** Releases every tensor the set holds, then the set. NULL-safe. */
CLT_API void clt_params_release(clt_params *p);

/** Adds t under name (copied) at the end of the set, which retains t (the caller keeps its own
 *  reference). Tensors may live on any devices.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL, an empty or non-UTF-8 name, the reserved name
 *  "__metadata__", a name already in the set), CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_params_add(clt_params *p, const char *name, clt_tensor *t);

/** The tensor named name, borrowed: owned by the set, valid until it is released or moved by
 *  clt_params_to (retain it to keep it longer). NULL, with the last error set
 *  (CLT_ERR_INVALID_ARGUMENT), if there is none. */
CLT_API clt_tensor *clt_params_get(const clt_params *p, const char *name);

/** The number of tensors in the set (0 for NULL). */
CLT_API size_t clt_params_count(const clt_params *p);

/** The i-th name (in the order added), owned by the set; NULL if i is out of range. */
CLT_API const char *clt_params_name_at(const clt_params *p, size_t i);

/** The i-th tensor, borrowed like clt_params_get's; NULL if i is out of range. */
CLT_API clt_tensor *clt_params_tensor_at(const clt_params *p, size_t i);

/** Moves every tensor of the set to dev, in place (model.to(dev)): each entry not already on
 *  dev is replaced by its copy there (clt_to) and the set drops its reference to the old one.
 *  A leaf that requires grad stays one (its copy requires grad, and its .grad moves too), as a
 *  module's parameters do. All or nothing: on failure the set is unchanged. Asynchronous, like
 *  clt_to.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL p or dev), and those of clt_to. */
CLT_API clt_status clt_params_to(clt_params *p, clt_device *dev);

/** The device all of the set's tensors live on. CLT_ERR_DEVICE_MISMATCH, with a message naming
 *  each device and a tensor on it, when they are spread over several; CLT_ERR_INVALID_ARGUMENT
 *  for an empty set. */
CLT_API clt_status clt_params_device(const clt_params *p, clt_device **out);

/** Sets the metadata entry key to value in the set (both copied; an entry of that key is
 *  replaced, and value NULL removes it). clt_save writes the entries into the file's
 *  __metadata__ and clt_load fills them from it, so a loaded file's metadata survives a re-save.
 *  clt_save adds "format": "pt" when the set has no "format" entry (transformers refuses
 *  safetensors files without one).
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL p or key, an empty key, a key or value that is not
 *  UTF-8, a key starting with "clt.device.": clt_save records each tensor's device there),
 *  CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_params_set_metadata(clt_params *p, const char *key, const char *value);

/** The metadata value of key, owned by the set (valid until the entry is set again or the set
 *  is released), or NULL if there is none (no error is set). */
CLT_API const char *clt_params_metadata(const clt_params *p, const char *key);

/** The number of metadata entries (0 for NULL). */
CLT_API size_t clt_params_metadata_count(const clt_params *p);

/** The i-th metadata key (in the order set), owned by the set; NULL if i is out of range. */
CLT_API const char *clt_params_metadata_key_at(const clt_params *p, size_t i);

/** Writes the set to path in the safetensors format (readable by Python's safetensors, PyTorch,
 *  JAX, transformers' from_pretrained, ...): the header lists the tensors in the set's order and
 *  its __metadata__ holds the set's metadata (clt_params_set_metadata), "format": "pt" unless
 *  the set has a "format", and each tensor's device as "clt.device.<name>": "cl:1". The data
 *  section starts at a multiple of 8 bytes (the header is padded with spaces) and holds the
 *  tensors larger elements first, so each starts at a multiple of its element size. Device
 *  tensors are read back with a blocking copy. The write is atomic: the file is written under a temporary name in the same directory,
 *  "<path>.tmp-<pid>-<n>", flushed to disk (fsync) and renamed over path, then the directory is
 *  flushed too, so a failure, a crash or a power loss leaves the old file whole or the new one.
 *  The new file gets the permission bits of the file it replaces, else 0666 less the umask; a
 *  symbolic link at path is replaced, not followed. A process killed in the middle of a save
 *  leaves its temporary file behind: clt never deletes files it did not just create, so remove
 *  stale "<path>.tmp-*" files yourself.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL), CLT_ERR_IO (with the path and the system's
 *  message; path is then unchanged, except when only the final flush of the directory failed,
 *  which the message says), CLT_ERR_OUT_OF_MEMORY, and those of clt_tensor_read. */
CLT_API clt_status clt_save(const char *path, const clt_params *p);

/** Writes the set into the existing directory dir as a sharded checkpoint, the layout that
 *  transformers' save_pretrained writes and from_pretrained (4.x and 5.x) and clt_load read:
 *  shards "model-00001-of-00003.safetensors", ... (numbers of at least 5 digits), each a
 *  safetensors file as clt_save writes it (the set's metadata and "format": "pt" in each, and
 *  the devices of its own tensors), and "model.safetensors.index.json":
 *  {"metadata": {"total_size": <bytes of tensor data>}, "weight_map": {"<name>": "<shard>", ...}}.
 *  The shards hold runs of the set in its order, each at most max_shard_bytes of tensor data
 *  (headers not counted), filled in turn; a tensor larger than max_shard_bytes is a shard of its
 *  own. The index is written even when one shard holds everything
 *  ("model-00001-of-00001.safetensors"), so that dir always has the same layout: load it with
 *  clt_load("<dir>/model.safetensors.index.json", ...), which gives the set back in its order.
 *  Device tensors are read back with a blocking copy, as clt_save does.
 *  Every file is written under a temporary name beside it and flushed to disk (fsync) before any
 *  is renamed into place; then the shards are renamed, the index last, and the directory is
 *  flushed. A failure before the renames (a full disk, a tensor that cannot be read) leaves dir
 *  as it was (no file replaced, no temporary file left); a crash during the renames can leave
 *  some shards of the new save beside the previous index, each file whole, and a process killed
 *  before them leaves its temporary files "<file>.tmp-<pid>-<n>" as clt_save does. Files of an
 *  earlier save that this one does not overwrite (shards "of-0000N" of another count, a
 *  "model.safetensors" written by clt_save, which transformers prefers over an index) are left
 *  in place: clt never deletes files it did not create.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL or empty dir, NULL p, max_shard_bytes 0, a set
 *  without tensors), CLT_ERR_IO (dir missing or not a directory; a file that cannot be written
 *  or renamed, with its path and the system's message), CLT_ERR_OUT_OF_MEMORY, and those of
 *  clt_tensor_read. */
CLT_API clt_status clt_save_sharded(const char *dir, const clt_params *p, size_t max_shard_bytes);

/** Reads a safetensors file into a new set (tensors in the header's order, the header's
 *  __metadata__ as the set's metadata, less clt's "clt.device." entries). Given a sharded
 *  checkpoint's index (model.safetensors.index.json), loads every shard its "weight_map" names
 *  (file names relative to the index's directory) into one set, shard by shard in the order the
 *  map first names them. The map is what the checkpoint holds: a tensor of a shard that the map
 *  does not name is not loaded (its header entry is validated with the rest of the shard, its
 *  bytes are not read). A missing shard is CLT_ERR_IO; a tensor listed twice, in two shards
 *  (even when the map names only one of them) or not in the shard the map names is
 *  CLT_ERR_FORMAT. Every tensor is allocated on its device
 *  before any tensor's bytes are read (a tensor too big fails at once), then each is read once:
 *  straight into a host tensor's memory, or through two reused host staging buffers onto a
 *  device (asynchronous copies, ordered like clt_to's). A file that is not safetensors (a
 *  PyTorch .pt/.bin zip or pickle, a NumPy .npz or .npy, GGUF, HDF5, other JSON) is
 *  CLT_ERR_FORMAT with a message saying what it is and how to convert it. map_location NULL
 *  puts each tensor back on the device it was saved from (cpu for files that do not record
 *  one); if that device does not exist here the load fails with CLT_ERR_DEVICE_NOT_FOUND and a
 *  message naming the tensor, the missing device, the devices there are, and the fix: pass a
 *  map_location such as clt_cpu(), which puts every tensor on that device (torch.load's
 *  map_location). The header is validated in full before anything is allocated: its length
 *  (at most 100 MiB, within the file), JSON syntax, UTF-8 names, no duplicate names, known
 *  dtypes, at most CLT_MAX_DIMS dimensions, shape times dtype size equal to the tensor's byte
 *  count without overflow, data offsets that tile the data section exactly (no overlap, no
 *  hole) and a file size of 8 + header + data; bool bytes must be 0 or 1. The caller releases
 *  *out with clt_params_release.
 *  Errors (every message names the file and, where one is involved, the tensor):
 *  CLT_ERR_INVALID_ARGUMENT (NULL path or out, a bad map_location), CLT_ERR_IO (cannot open or
 *  read, a missing shard), CLT_ERR_FORMAT (anything malformed, or not safetensors),
 *  CLT_ERR_UNSUPPORTED (a safetensors dtype clt lacks, such as F8_E4M3; f64 on a device without
 *  fp64), CLT_ERR_DEVICE_NOT_FOUND, CLT_ERR_OUT_OF_MEMORY (a tensor its device cannot hold,
 *  found before any byte is read). */
CLT_API clt_status clt_load(const char *path, clt_device *map_location, clt_params **out);

/* ---------------------------------------------------------------------------------------- */
/* Optimizers                                                                                */
/*
 * PyTorch's torch.optim.SGD and torch.optim.AdamW over a parameter set (docs/autograd.md,
 * "Optimizers"):
 *
 *   clt_optim *opt;
 *   clt_optim_sgd(model, 0.03, 0.9, 0.0, &opt);  // lr, momentum, weight decay
 *   for (...) {
 *     clt_optim_zero_grad(opt);                   // every .grad to none
 *     ... forward, clt_backward(loss, NULL) ...
 *     clt_optim_step(opt);                        // updates the parameters in place
 *   }
 *   clt_optim_save("opt.safetensors", opt);       // the state, beside clt_save(model)
 *   clt_optim_release(opt);
 *
 * A step updates each parameter's memory in place (the handles in the set stay valid), with one
 * kernel per parameter on OpenCL devices and one loop on the host. The state (momentum buffers,
 * exp_avg, exp_avg_sq, step counts) lives on each parameter's device and moves with it: the
 * optimizer registers its state with the set, so clt_params_to(params, dev) moves both at once.
 */
/** An optimizer over a parameter set. Opaque; released with clt_optim_release. */
typedef struct clt_optim clt_optim;

/** Creates a stochastic gradient descent optimizer over params (torch.optim.SGD with dampening 0,
 *  no Nesterov): per parameter p with gradient g (skipped while its .grad is none),
 *  d = g + weight_decay * p; with momentum > 0, buf = d on the first step and
 *  buf = momentum * buf + d after, and d = buf; then p -= lr * d. The optimizer holds a reference
 *  to params (releasing the set first is safe) and updates the tensors the set holds at each
 *  step, including tensors added after this call. The caller releases *out with
 *  clt_optim_release.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL params or out, an empty set, a parameter that is not
 *  f16, bf16, f32 or f64, lr < 0, momentum < 0, weight_decay < 0, a value that is not finite,
 *  more than 4 optimizers on one set), CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_optim_sgd(clt_params *params, double lr, double momentum,
                                 double weight_decay, clt_optim **out);

/** Creates an AdamW optimizer over params (torch.optim.AdamW, amsgrad off; weight_decay 0 is
 *  Adam): per parameter p with gradient g at step t (its own count, from 1),
 *  p *= 1 - lr * weight_decay; m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g^2;
 *  p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps), with m and v zero at first.
 *  Ownership as clt_optim_sgd.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (as clt_optim_sgd; beta1 or beta2 outside [0, 1), eps <= 0),
 *  CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_optim_adamw(clt_params *params, double lr, double beta1, double beta2,
                                   double eps, double weight_decay, clt_optim **out);

/** One step: updates every parameter of the set whose .grad is not none, in place, with grad mode
 *  off for the step. A parameter and its gradient and state must be on one device
 *  (clt_params_to keeps them so); the state is created on the parameter's device at its first
 *  step. Asynchronous on devices, like the operations.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL), CLT_ERR_DEVICE_MISMATCH (a parameter and its gradient
 *  or state on different devices; the message names both; nothing is copied),
 *  CLT_ERR_SHAPE_MISMATCH or CLT_ERR_DTYPE (a gradient or state that does not match its
 *  parameter), and those of the operations. A failure can leave the parameters before it in the
 *  set updated. */
CLT_API clt_status clt_optim_step(clt_optim *opt);

/** Sets the gradient of every parameter of the set to none (zero_grad(set_to_none=True)).
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL). */
CLT_API clt_status clt_optim_zero_grad(clt_optim *opt);

/** Releases the optimizer, its state and its reference to the parameter set. NULL-safe. */
CLT_API void clt_optim_release(clt_optim *opt);

/** Writes opt's state to path as a safetensors file (clt_save's format, atomic write), each
 *  tensor recording its device: tensors "<param>.momentum_buffer" (SGD with momentum, after the
 *  parameter's first step), "<param>.exp_avg" and "<param>.exp_avg_sq" (AdamW); metadata
 *  "optimizer" ("sgd" or "adamw"), the hyperparameters ("lr", "momentum", "weight_decay",
 *  "beta1", "beta2", "eps") and, for AdamW, "<param>.step" (decimal). The parameters themselves
 *  are not written: save them with clt_save.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL), and those of clt_save. */
CLT_API clt_status clt_optim_save(const char *path, const clt_optim *opt);

/** Replaces opt's state by the state in path (written by clt_optim_save for an optimizer of the
 *  same kind), so that stepping continues as the saved optimizer would have. Tensors are loaded
 *  as clt_load loads them: onto map_location, or where they were saved if NULL; each must then be
 *  on its parameter's device (nothing is copied behind your back: a mismatch is
 *  CLT_ERR_DEVICE_MISMATCH naming both devices; pass the parameters' device as map_location).
 *  All or nothing: on failure opt is unchanged. The hyperparameters in the file are not used;
 *  opt keeps its own.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL path or opt), CLT_ERR_FORMAT (a file of another
 *  optimizer kind, a tensor for no parameter of the set or of another shape or dtype, a missing
 *  or malformed step), CLT_ERR_DEVICE_MISMATCH, and those of clt_load. */
CLT_API clt_status clt_optim_load(const char *path, clt_optim *opt, clt_device *map_location);

/* ---------------------------------------------------------------------------------------- */
/* Kernel cache                                                                              */
/*
 * clt builds its OpenCL kernels at run time, the first time an operation needs them, and keeps
 * the program binaries on disk so that the next process starts warm. The directory is
 * $CLT_CACHE_DIR if set (used or nothing), else $XDG_CACHE_HOME/clt, else $HOME/.cache/clt,
 * else $TMPDIR/clt-<uid>; CLT_CACHE=0 turns the disk cache off. Both are read once per process.
 * Each entry is one file, "<64 hex digits>.bin" (the SHA-256 of the source, the build options,
 * the platform, the device, the driver and clt's version); clt never evicts entries, and other
 * files in the directory are never touched. The tool clt-cache(1) wraps these functions.
 */

/** The kernel cache directory, or NULL when the disk cache is off (CLT_CACHE=0) or no usable
 *  directory was found. Static storage; never freed. */
CLT_API const char *clt_kernel_cache_dir(void);

/** One entry of the kernel cache, as clt_kernel_cache_list reports it. */
typedef struct clt_kernel_cache_entry {
  const char *name; /**< the file name within clt_kernel_cache_dir(), "<64 hex>.bin" */
  uint64_t size;    /**< its size in bytes */
  int64_t mtime;    /**< when it was written, in seconds since the Epoch */
} clt_kernel_cache_entry;

/** Calls each(entry, ctx) for every entry of the kernel cache, in directory order, and gives
 *  their number in *count (count may be NULL; each may be NULL to count only). The entry and
 *  its name are valid during the call only. With the cache off there are no entries. Only
 *  files named like entries count; temporary files and other files are skipped. Kernel builds
 *  this process runs on other threads (CLT_BACKGROUND_BUILDS) finish first, so their entries
 *  are listed (the device work queued meanwhile is not waited for); another process's may land
 *  at any time.
 *  Errors: CLT_ERR_IO (the directory cannot be read; the message names it). */
CLT_API clt_status clt_kernel_cache_list(void (*each)(const clt_kernel_cache_entry *e, void *ctx),
                                         void *ctx, size_t *count);

/** Removes every entry of the kernel cache, and temporary entry files a crashed process may
 *  have left ("<64 hex>.bin.XXXXXX"), and gives the number of files removed in *removed (may
 *  be NULL). Other files and subdirectories are left alone. Programs already loaded in this or
 *  another process keep working; their next build goes to the source. Kernel builds this
 *  process runs on other threads finish first (their entries are removed too). With the cache
 *  off it removes nothing.
 *  Errors: CLT_ERR_IO (the directory cannot be read, or a file cannot be removed; the message
 *  names it and says how many were removed before; *removed is then untouched). */
CLT_API clt_status clt_kernel_cache_clear(size_t *removed);

/** Builds, ahead of time, every kernel program clt uses on dev, so that later processes (and
 *  this one) find them in the caches: each elementwise operation, cast and where over every
 *  dtype (f64 only where the device has fp64), each reduction over every dtype, the random
 *  generators, transpose and the tiled matmul kernel. It runs each operation once on tiny
 *  tensors on dev, through the real code paths; operations a dtype does not support are
 *  skipped. Programs for operands of two different dtypes (an i32 tensor plus an f32 tensor)
 *  are built on first use. progress (may be NULL) is called with (0, total, ctx) first and
 *  after each step with the steps done so far. The host has no kernels: dev = clt_cpu()
 *  succeeds at once, with total 0. Entries are written only when the disk cache is on.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL dev), CLT_ERR_BUILD (a kernel failed to build: the
 *  message holds the build log), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL. */
CLT_API clt_status clt_kernel_cache_warm(clt_device *dev,
                                         void (*progress)(int done, int total, void *ctx),
                                         void *ctx);

/* ---------------------------------------------------------------------------------------- */
/* Your own kernels and raw OpenCL handles (docs/interop.md)                                 */
/*
 * A kernel of your own runs on clt tensors like any clt operation: on the device of its tensor
 * arguments (all on one device, else CLT_ERR_DEVICE_MISMATCH), ordered by the tensors' events
 * (it waits for the writers of what it reads and for the readers and writers of what it
 * writes; later operations wait for it), with no host synchronization:
 *
 *   clt_kernel *k;
 *   clt_kernel_create("__kernel void axpy(__global float *y, __global const float *x, float a)"
 *                     "{ size_t i = get_global_id(0); y[i] += a * x[i]; }", "axpy", NULL, &k);
 *   float a = 2.0f;
 *   clt_kernel_set_tensor(k, 0, y, CLT_READ | CLT_WRITE);
 *   clt_kernel_set_tensor(k, 1, x, CLT_READ);
 *   clt_kernel_set_scalar(k, 2, &a, sizeof a);
 *   size_t n = 1000;
 *   clt_kernel_launch(k, 1, &n, NULL);     // asynchronous, like clt_add
 *   clt_kernel_release(k);
 *
 * The raw handles (clt_device_cl, clt_tensor_cl_mem) let you enqueue work of your own (CLBlast,
 * clFFT, your own queue): bracket it with clt_tensor_cl_acquire, whose event your first command
 * waits for, and clt_tensor_cl_release_to, which hands clt the event your last command ends
 * with. The OpenCL types appear here as the struct pointers that <CL/cl.h> names cl_mem,
 * cl_event, ...; this header does not include <CL/cl.h>.
 */

/** A user's OpenCL kernel: source, kernel name, build options and an argument list. Opaque,
 *  refcounted (clt_kernel_retain, clt_kernel_release). Thread-safe: arguments may be set and
 *  the kernel launched from several threads; each launch uses the arguments set when it is
 *  called (a launch holds the kernel's lock while it sets them and enqueues). Threads that want
 *  different arguments at once should create a kernel each: the program is built once per
 *  device and source whatever the number of kernels. */
typedef struct clt_kernel clt_kernel;

/** How a kernel (or your own OpenCL work) uses a tensor: CLT_READ, CLT_WRITE, or both; with
 *  CLT_OFFSET (clt_kernel_set_tensor only), the tensor's element offset is passed as the next
 *  argument. */
typedef enum clt_access {
  CLT_READ = 1,       /**< reads the tensor's memory */
  CLT_WRITE = 2,      /**< writes it */
  CLT_READ_WRITE = 3, /**< both */
  CLT_OFFSET = 4      /**< clt_kernel_set_tensor: pass the view's element offset as a ulong next */
} clt_access;

/** Creates a kernel from OpenCL C source (copied) and the name of one of its __kernel functions
 *  (copied); options (may be NULL) are the build options (clBuildProgram's, such as
 *  "-DN=64 -cl-std=CL1.2"), followed by $CLT_BUILD_OPTIONS when set. Nothing is built here: the
 *  program is built for a device when the kernel is first launched there (or clt_kernel_build),
 *  through clt's program cache, in memory (one build per device, source and options, shared by
 *  every clt_kernel) and on disk (see "Kernel cache"). The caller releases *out with
 *  clt_kernel_release.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL or empty source or name, NULL out),
 *  CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_kernel_create(const char *source, const char *name, const char *options,
                                     clt_kernel **out);

/** clt_kernel_create with the source read from the file at path (read now, once); messages
 *  name the file. Errors: those of clt_kernel_create, CLT_ERR_IO (the file cannot be read; the
 *  message names it and the system's reason). */
CLT_API clt_status clt_kernel_create_file(const char *path, const char *name, const char *options,
                                          clt_kernel **out);

/** Takes a reference to k; returns k (NULL-safe). */
CLT_API clt_kernel *clt_kernel_retain(clt_kernel *k);

/** Drops a reference to k; the last one frees it and releases the tensors set as its arguments.
 *  Launches already enqueued run to completion. NULL-safe. */
CLT_API void clt_kernel_release(clt_kernel *k);

/** The kernel's function name, owned by k (NULL for NULL). */
CLT_API const char *clt_kernel_name(const clt_kernel *k);

/** Builds k's program for dev now, instead of at the first launch there, so that a build error
 *  shows early, and gives the number of arguments the kernel takes in *nargs (may be NULL).
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL k, dev not a device, or the source has no kernel of
 *  k's name), CLT_ERR_UNSUPPORTED (dev is the host), CLT_ERR_BUILD (the message names the
 *  device and holds the build log), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL. */
CLT_API clt_status clt_kernel_build(clt_kernel *k, clt_device *dev, int *nargs);

/** Sets argument index of k to tensor t's buffer (a __global or __constant pointer to its first
 *  element), used as access says (CLT_READ, CLT_WRITE or both: what orders the launch against
 *  other work on t). t must be contiguous; a view that starts past the beginning of its buffer
 *  (a narrow, a select) needs CLT_OFFSET in access: the argument index + 1 is then set to the
 *  view's element offset as a ulong, which the kernel adds to the pointer. k retains t until the
 *  argument is set again or k is released. An argument set once stays set.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL k or t, index outside 0..65535, access without CLT_READ or
 *  CLT_WRITE or with unknown bits, a non-contiguous view, a view with an offset without
 *  CLT_OFFSET, index holding the offset of a tensor set at index - 1 with CLT_OFFSET, or CLT_OFFSET
 *  given where index + 1 holds a tensor set with CLT_OFFSET), CLT_ERR_UNSUPPORTED (t is not on
 *  an OpenCL device, the host's for one: the message names the device k runs on, that of its
 *  first tensor argument, else the one it was last built for, else the OpenCL devices there are,
 *  and the clt_to call that copies t there), CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_kernel_set_tensor(clt_kernel *k, int index, clt_tensor *t, int access);

/** Sets argument index of k to the size bytes at value (copied): a scalar of the kernel's
 *  parameter type (int: 4 bytes, long and ulong: 8, float: 4, double: 8) or a struct. A size
 *  that does not match the parameter is reported by the launch.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL k or value, index outside 0..65535, size 0, index holding another
 *  tensor's offset), CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_kernel_set_scalar(clt_kernel *k, int index, const void *value, size_t size);

/** Sets argument index of k, a __local pointer, to bytes of local memory per work-group.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL k, index outside 0..65535, bytes 0, index holding another
 *  tensor's offset), CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_kernel_set_local(clt_kernel *k, int index, size_t bytes);

/** Enqueues k over a work_dim-dimensional range (1 to 3) of global[d] work-items, in work-groups
 *  of local[d] (local NULL: the driver chooses), on the device of its tensor arguments, and
 *  returns without waiting (CLT_SYNC=1 waits, and reports a failure of the kernel here). The
 *  program is built for that device first if it is not yet. The launch is ordered like clt's own
 *  operations: after the work that writes what it reads and the work that reads or writes what
 *  it writes, before later work on those tensors. A range with a zero in it launches nothing.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL k or global, work_dim outside 1..3, a local size of 0
 *  or one that does not divide the global size, no tensor argument (the device comes from
 *  them), an argument the kernel takes that was never set, one set past the kernel's last, or
 *  one of the wrong kind or size: the message names the kernel, the argument and OpenCL's
 *  error), CLT_ERR_DEVICE_MISMATCH (tensor arguments on two devices: the message names both
 *  and their argument indices), CLT_ERR_BUILD (with the device and the build log),
 *  CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL (the enqueue failed, such as a work-group too large
 *  for the kernel on that device). */
CLT_API clt_status clt_kernel_launch(clt_kernel *k, int work_dim, const size_t *global,
                                     const size_t *local);

struct _cl_platform_id;
struct _cl_device_id;
struct _cl_context;
struct _cl_command_queue;
struct _cl_mem;
struct _cl_event;

/** The OpenCL objects behind dev: its platform, device, context and command queue (the
 *  in-order, profiling-enabled queue all of clt's work on dev goes to). Any out-pointer may be
 *  NULL. Nothing is retained: the handles are owned by clt and valid until the process exits;
 *  retain them (clRetainContext, ...) to keep them past that, never release what you did not
 *  retain. Work you enqueue on clt's queue runs in order with clt's; work on a queue of your own
 *  (in this context) needs clt_tensor_cl_acquire and clt_tensor_cl_release_to.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (dev not a device), CLT_ERR_UNSUPPORTED (dev is the host;
 *  it has no OpenCL objects). */
CLT_API clt_status clt_device_cl(clt_device *dev, struct _cl_platform_id **platform,
                                 struct _cl_device_id **device, struct _cl_context **context,
                                 struct _cl_command_queue **queue);

/** The OpenCL buffer behind the device tensor t, and the byte offset of t's first element in it
 *  (nonzero for a view such as a narrow; may be NULL). Not retained: valid while t (or another
 *  tensor of its memory) lives. t's elements lie as clt_tensor_strides says. Touching the
 *  buffer outside clt needs the ordering of clt_tensor_cl_acquire and clt_tensor_cl_release_to.
 *  A tensor without elements may have no buffer (*mem NULL). The buffer is handed out for good:
 *  a deferred result in it is computed now, so are the deferred ops reading it, and later ops
 *  reading it run at their call rather than deferred (docs/interop.md).
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL t or mem), CLT_ERR_UNSUPPORTED (t is on the host: use
 *  clt_tensor_data). */
CLT_API clt_status clt_tensor_cl_mem(const clt_tensor *t, struct _cl_mem **mem,
                                     size_t *offset_bytes);

/** Before your own OpenCL commands use t's buffer (access: CLT_READ, CLT_WRITE or both): gives
 *  in *event an event of t's device's context that completes when the clt work your commands
 *  must follow has (the writes of t if you read; its reads and writes too if you write). Put it
 *  in the wait list of your first command on t. Always a valid event (a marker on the device's
 *  queue, flushed), which the caller releases with clReleaseEvent. Does not block.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL t or event, bad access), CLT_ERR_UNSUPPORTED (t on
 *  the host), CLT_ERR_OPENCL. */
CLT_API clt_status clt_tensor_cl_acquire(clt_tensor *t, int access, struct _cl_event **event);

/** After your own OpenCL commands used t's buffer as access says: hands clt the event your last
 *  command on t ends with (of any queue, and of any context: events of other contexts are
 *  bridged), so that later clt work on t waits for it: clt operations that read t wait for your
 *  write, those that write t wait for your reads and writes. clt retains the event (you still
 *  release yours) and flushes its queue. event NULL says your work is already complete (you
 *  waited for it): nothing to record. Your commands must have waited for the event of
 *  clt_tensor_cl_acquire with the same access, or for later work. Does not block.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL t, bad access, event not a valid cl_event),
 *  CLT_ERR_UNSUPPORTED (t on the host). */
CLT_API clt_status clt_tensor_cl_release_to(clt_tensor *t, int access, struct _cl_event *event);

/** Wraps an OpenCL buffer made elsewhere as a contiguous tensor of dtype and shape on dev,
 *  starting at the buffer's first byte. mem must belong to dev's context and hold at least the
 *  tensor's bytes. clt retains mem and releases its reference when the tensor's memory is freed
 *  (after clt's commands on it have finished); it never frees the buffer itself, and never
 *  gives it to its caching allocator. Work of your own on mem is ordered against clt's with
 *  clt_tensor_cl_acquire and clt_tensor_cl_release_to. The caller releases *out.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL mem (for a tensor with elements) or out, bad dtype,
 *  ndim or shape, dev not a device, mem not a buffer, mem smaller than the tensor: the message
 *  gives both sizes), CLT_ERR_UNSUPPORTED (dev is the host; f64 on a device without fp64),
 *  CLT_ERR_DEVICE_NOT_FOUND (mem is of another context: the message names the devices of its
 *  context, if clt has any), CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_from_cl_mem(struct _cl_mem *mem, clt_dtype dtype, int ndim,
                                   const int64_t *shape, clt_device *dev, clt_tensor **out);

#ifdef __cplusplus
}
#endif

#endif /* CLT_H */
