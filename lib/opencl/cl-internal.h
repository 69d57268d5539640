/* SPDX-License-Identifier: MIT */
/* cl-internal.h - the OpenCL backend's own declarations, for the files of lib/opencl/ alone: the
 * OpenCL state of a device (struct clt_cl_device), OpenCL errors, the events on storages, the
 * program cache and the launch sequence. Nothing outside lib/opencl/ includes it (lib/io/dlpack.c
 * has the narrow lib/opencl/foreign.h, libclt_mpi lib/clt-internal-mpi.h); the rest of the library
 * sees a device as its struct clt_device and a storage's buffer and events as opaque handles
 * (lib/clt-internal.h). */
#ifndef CLT_CL_INTERNAL_H
#define CLT_CL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "backend.h"
#include "cl-fault.h" /* injected faults of OpenCL calls: nothing unless --enable-fault-injection */
#include "foreign.h"  /* clt__cl_error_name, the queries of foreign buffers */

/* ---- devices (device.c) ----------------------------------------------------------------- */

struct clt_program_cache; /* program.c */

/* An OpenCL device: the struct clt_device that the registry and the dispatcher see, then the
 * OpenCL objects behind it. clt__cl_discover allocates these; every clt_device whose backend is
 * clt__opencl_backend is the `base` of one, and clt__cl() gets back to it. */
struct clt_cl_device {
  clt_device base; /* first: a clt_device * of an OpenCL device points at one of these */
  cl_platform_id platform;
  cl_device_id id;
  cl_context context;     /* shared by the devices of one platform */
  cl_command_queue queue; /* in-order, profiling enabled */
  /* The program cache (program.c): the list under programs_lock; a program being built by one
   * thread is waited for on programs_built by the others (builds run outside the lock). */
  pthread_mutex_t programs_lock;
  pthread_cond_t programs_built;
  struct clt_program_cache *programs;
  /* Its runtime must not be entered by two threads at once (Oclgrind: its queues are plain
   * lists), so no other runtime's thread may call into it: order.c waits on the host for another
   * context's event instead of bridging it with a callback, and, while such a device exists,
   * another runtime's callback parks the host memory it would free (a pinned buffer, events of
   * this runtime) for a thread of the program to release (clt__cl_release_parked). */
  bool serial;
  /* It runs native kernels (CL_EXEC_NATIVE_KERNEL), asked once at discovery (native.c). */
  bool native;
  /* Host memory parked by its commands' callbacks is yet to come (order.c: clt__keep_alive). */
  atomic_int parked_pending;
};

/* The OpenCL state of d, an OpenCL device (never the host). */
static inline struct clt_cl_device *clt__cl(const clt_device *d) {
  return (struct clt_cl_device *)d;
}

/* ---- elementwise (elementwise.c) and fused kernels (fuse.c) ------------------------------ */

/* Writes to buf the OpenCL C expression converting the value x, computed in dtype compute, to
 * the result dtype out as every elementwise kernel stores it. */
void clt__cl_store_conv(clt_dtype compute, clt_dtype out, const char *x, char *buf, size_t size);
/* The unsigned type ("uint", "ulong") an integer or bool compute type wraps in: the WRAP forms
 * of include/clt_ops.h compute in it, and CLT_IPOW multiplies in it. */
const char *clt__cl_unsigned_twin(clt_dtype dt);
/* The backend's `fused` (lib/backend.h). */
clt_status clt__cl_fused(clt_device *dev, const clt_fused *f, bool *later);
/* Whether the program of op's kernels for these dtypes (in: the operands', by position) is built
 * on d and in elementwise.c's memo: running op needs no build. */
bool clt__cl_elementwise_ready(clt_device *d, const clt_op *op, clt_dtype out, clt_dtype compute,
                               const clt_dtype *in);

/* ---- devices (device.c), continued ------------------------------------------------------ */

/* Whether ctx is the context of a device whose runtime is serial (struct clt_cl_device). */
bool clt__cl_context_serial(cl_context ctx);
/* Whether any device found is serial: then no other runtime's callback thread may release a
 * storage (order.c: clt__keep_alive), which can hold that runtime's buffers and events. */
bool clt__cl_any_serial(void);
/* The device whose queue q is, or NULL. */
struct clt_cl_device *clt__cl_queue_device(cl_command_queue q);
/* Marks d's queue for the wait at process exit (device.c: finish_at_exit): called by the native
 * matmul, whose host code must not run during the process's teardown. */
void clt__cl_wait_at_exit(clt_device *d);

/* ---- errors (error.c) ------------------------------------------------------------------- */

/* Maps an OpenCL error to a status and sets the message "<fn>: <what> failed on <dev>: NAME". */
clt_status clt__cl_error(cl_int err, const char *fn, const char *what, const clt_device *dev);

/* ---- events on storage (order.c) -------------------------------------------------------- */

/* Releases the host storages that callbacks parked (clt__keep_alive), after waiting up to 5 s for
 * those of d's finished commands (d NULL: none waited for). Called where no clt lock is held: by
 * synchronize, and by clt__keep_alive itself. */
void clt__cl_release_parked(clt_device *d);

/* A list of events to wait for before a command enqueued on one queue. */
typedef struct clt_waitlist {
  cl_event ev[2 * CLT__MAX_READERS + 4];
  cl_uint n;
} clt_waitlist;

/* The waitlist holds references: release with clt__waitlist_clear. */
/* An event of the program's own queue q that clt's later commands wait for
 * (clt_tensor_cl_release_to): kept until it completes where q's runtime runs a queue only
 * inside clFlush or clFinish (Oclgrind), so that clt__cl_flush_foreign, which every blocking
 * wait of clt's calls first, flushes q then; true if kept (q must not be flushed now). */
bool clt__cl_note_foreign(cl_event ev, cl_command_queue q);
void clt__cl_flush_foreign(void);
void clt__waitlist_clear(clt_waitlist *wl);
/* Records that the command ev on queue q read (writing=false) or wrote s. Call it with the lock
 * of q's device held, taken before the enqueue of ev. */
void clt__storage_note(clt_storage *s, cl_event ev, cl_command_queue q, bool writing);
/* The backend's storage_wait and storage_drop (lib/backend.h). */
clt_status clt__cl_storage_wait(clt_storage *s, bool writing, const char *fn);
void clt__cl_storage_drop(clt_storage *s, bool wait);
/* The backend's staging members (lib/backend.h), in opencl/staging.c. */
clt_status clt__cl_stage_begin(clt_stage *s);
clt_status clt__cl_stage_read(clt_stage *s, size_t off, size_t len, void *host, void *after,
                              void **done);
clt_status clt__cl_stage_write(clt_stage *s, size_t off, size_t len, const void *host, void *after,
                               void **done);
clt_status clt__cl_stage_finish(clt_stage *s, bool wrote);
void clt__cl_stage_keep_alive(void *done, clt_storage *k, const char *fn);
clt_status clt__cl_stage_wait(clt_device *dev, void *done, const char *fn, const char *what);
void clt__cl_stage_retain(void *done);
void clt__cl_stage_release(void *done);
clt_status clt__cl_stage_map(clt_stage *s, size_t src_off, size_t dst_off, size_t len,
                             void **src_ptr, void **dst_ptr);
clt_status clt__cl_stage_unmap(clt_stage *s, void **done);
/* The wait list of a command on d's queue that reads the storages `reads` and writes `writes`
 * (both lists may hold NULL entries, which are skipped). Events of d's own queue are left out:
 * the queue is in order, so they come first anyway, and a short list is a cheaper launch. On
 * failure the list is cleared. */
clt_status clt__waitlist_for(clt_waitlist *wl, clt_device *d, clt_storage *const *reads, int nreads,
                             clt_storage *const *writes, int nwrites, const char *fn);
/* Records the command ev just enqueued on d's queue as a read of `reads` and a write of
 * `writes`. Call it with d->lock held, the lock taken before the enqueue (see clt_device.lock). */
void clt__note_command(cl_event ev, clt_device *d, clt_storage *const *reads, int nreads,
                       clt_storage *const *writes, int nwrites);
/* After unlocking: waits for ev under CLT_SYNC=1 (reporting its failure), then releases ev. */
clt_status clt__command_done(cl_event ev, clt_device *d, const char *fn);
/* Keeps s alive until ev completes (for host memory used by an asynchronous copy). */
clt_status clt__keep_alive(cl_event ev, clt_storage *s, const char *fn);
/* Waits for ev; an error naming `what` if waiting fails or the command failed. */
clt_status clt__wait_command(cl_event ev, clt_device *dev, const char *fn, const char *what);
/* Waits on ev if CLT_SYNC=1 and reports its failure. */
clt_status clt__maybe_sync(cl_event ev, clt_device *dev, const char *fn);

/* ---- programs (program.c) --------------------------------------------------------------- */

/* ---- the disk cache (disk_cache.c) ---- */
#define CLT__CACHE_DIR_MAX 4096
/* A program's key (the SHA-256 of everything that can change its binary) and its file. */
typedef struct clt__cache_key {
  unsigned char hash[32];
  char path[CLT__CACHE_DIR_MAX + 80];
} clt__cache_key;
/* Whether programs for dev go through the disk cache. */
bool clt__cl_use_disk_cache(const clt_device *dev);
/* The key of the program of the sources srcs (joined in order) built with opts for dev, and its
 * file's path; false when the disk cache is off. */
bool clt__cl_cache_key(clt_device *dev, const char *opts, const char *const srcs[3],
                       clt__cache_key *k);
/* The program of entry k, built from its binary for dev; NULL where there is none, or it is
 * damaged or refused (never an error: the caller builds from source). */
cl_program clt__cl_cache_load(clt_device *dev, const clt__cache_key *k, const char *opts);
/* Writes p's binary for dev as entry k (atomically; failures are ignored). */
void clt__cl_cache_store(clt_device *dev, const clt__cache_key *k, cl_program p);

/* The kernel `kernel` of kernels/<family>.cl built for dev, the source preceded by defines (lines
 * such as "#define T float\n": the dtype and op macros travel in the source, not as -D options,
 * since drivers split option strings differently). Cached per (device, family, defines); threads
 * asking for a program another thread is building wait for that build. The kernel is owned by the
 * cache and shared: hold dev->lock from setting its arguments until the enqueue (and the notes)
 * are done. */
clt_status clt__get_kernel(clt_device *dev, const char *family, const char *defines,
                           const char *kernel, const char *fn, cl_kernel *out);
/* As clt__get_kernel where the program is built already; else starts its build in the background
 * (where clt__background_builds) and gives *out NULL: the caller runs without it this time. */
clt_status clt__get_kernel_ready(clt_device *dev, const char *family, const char *defines,
                                 const char *kernel, const char *fn, cl_kernel *out);
void clt__program_cache_free(struct clt_program_cache *c);
/* A build handed to another thread: begin before handing it, end when its build is over
 * (whatever the outcome); clt__cl_builds_wait returns when none is pending (their cache entries
 * are on disk). The threads' other work (launches) is not waited for. */
void clt__cl_builds_begin(void);
void clt__cl_builds_end(void);
void clt__cl_builds_wait(void);
/* Whether the program (family, defines) is built for dev and in memory (no wait, no build). */
bool clt__program_built(clt_device *dev, const char *family, const char *defines);
/* Whether the program (family, defines) for dev is in the disk cache (its file exists): loading
 * it takes milliseconds, where a build from source can take a second. */
bool clt__program_on_disk(clt_device *dev, const char *family, const char *defines);
/* The program (family, defines) for dev, built here if no thread has (as clt__get_kernel). The
 * program is the cache's: create kernels of your own from it. */
clt_status clt__get_program(clt_device *dev, const char *family, const char *defines,
                            const char *fn, cl_program *out);
/* Starts run(arg) on a detached thread that exit() waits for, where dev may build in the
 * background (clt__background_builds) and fewer than max such threads run; false otherwise (the
 * caller does the work itself). The thread calls clt__cl_thread_end() last. */
bool clt__cl_thread_start(clt_device *dev, void *(*run)(void *), void *arg, int max);
void clt__cl_thread_end(void);

/* The program of a user's OpenCL C source (clt_kernel_create) built for dev with options (the
 * user's; $CLT_BUILD_OPTIONS is appended), cached per (device, source, options) beside clt's own
 * programs, in memory and on disk; `what` names it in a build error ("kernel heat (from
 * heat.cl)"), which is CLT_ERR_BUILD with the device and the build log. The program is owned by
 * the cache (until exit): the caller creates kernels of its own from it. */
clt_status clt__get_user_program(clt_device *dev, const char *source, const char *options,
                                 const char *what, const char *fn, cl_program *out);

/* ---- the backend's functions (opencl.c and the files named after them) ----------------- */

clt_status clt__cl_elementwise(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                               clt_dtype compute, const clt_bcast *bc);
clt_status clt__cl_reduce(const clt_reduce *red, clt_tensor *out, const clt_tensor *in);
clt_status clt__cl_fill_random(clt_tensor *out, uint64_t seed, uint64_t offset, bool normal,
                               const char *fn);
clt_status clt__cl_matmul(clt_tensor *out, const clt_tensor *a, const clt_tensor *b,
                          const clt_matmul_desc *g, const char *fn);
clt_status clt__cl_matmul_path(clt_device *dev, const char *fn, clt_matmul_kind *out);
/* Builds the tiled matmul kernel for dt on d without running it (the backend's warm hook: the
 * path clt_matmul takes may not use it, CLT_MATMUL=kernel does). */
clt_status clt__cl_matmul_build(clt_device *d, clt_dtype dt, const char *fn);
clt_status clt__cl_arange(clt_tensor *out, double start, double step, const char *fn);
clt_status clt__cl_index_select(clt_tensor *out, const clt_tensor *in, const clt_tensor *idx,
                                const clt_index_desc *g, const char *fn);
clt_status clt__cl_optim_step(const clt_optim_desc *o, clt_tensor *param, const clt_tensor *grad,
                              clt_tensor *s1, clt_tensor *s2, const char *fn);
clt_status clt__cl_copy(clt_device *q, clt_tensor *dst, const clt_tensor *src, const char *fn);
clt_status clt__cl_read(const clt_tensor *t, void *dst, const char *fn);
clt_status clt__cl_event_record(clt_device *dev, const char *fn, void **out);
clt_status clt__cl_event_wait(clt_device *dev, void *ev, const char *fn);
clt_status clt__cl_event_elapsed(clt_device *dev, void *start, void *end, const char *fn,
                                 double *ms);
void clt__cl_event_release(void *ev);
int clt__cl_buffer_alloc(clt_storage *s);
int clt__cl_pinned_alloc(clt_device *near, clt_storage *s, size_t alloc);
bool clt__cl_error_is_oom(int err);
clt_status clt__cl_buffer_retain(clt_device *dev, void *buf, const char *fn);
void clt__cl_buffer_free(clt_storage *s);
void clt__cl_discover(clt_device ***out, int *count);
clt_status clt__cl_synchronize(clt_device *dev, const char *fn);
/* Launch geometry for a loop over n elements: CPU devices get one contiguous chunk per
 * work-item (a few per compute unit), GPUs a grid-stride loop over coalesced elements. */
typedef struct clt_launch {
  size_t global, local; /* local 0: let the driver choose */
  cl_ulong chunk;       /* elements per work-item (chunked), or the stride (grid-stride) */
} clt_launch;
clt_launch clt__cl_launch_1d(const clt_device *dev, int64_t n);
/* The defines every program gets on dev: "#define CLT_CHUNKED 1" (CPU devices) or 0, and
 * "#define CLT_FP64" when the program uses double. */
const char *clt__cl_base_options(const clt_device *dev, bool need_fp64);
/* Whether kernels for dev may call __builtin_prefetch: PoCL's CPU devices, which compile with
 * clang into a real prefetch instruction (other vendors' compilers may reject it). */
bool clt__cl_can_prefetch(const clt_device *dev);
/* Enqueues kernel k over the launch on dev's queue after the waitlist; returns its event. */
clt_status clt__cl_enqueue(clt_device *dev, cl_kernel k, const clt_launch *l, clt_waitlist *wl,
                           const char *fn, cl_event *ev);

/* Enqueues one command on d's queue after the events in wl, which it must not change, and sets
 * *ev to the command's event (left NULL on failure, or set if the command was enqueued and the
 * failure came after). Called with d->lock held: it may set the arguments of cached kernels.
 * A function that enqueues more than one command (the whole-tensor reduction) may instead note
 * the storages itself, each against its own command's event, and leave *ev NULL. */
typedef clt_status (*clt_cl_enqueue_fn)(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                        cl_event *ev);
/* A command on d's queue that reads the storages `reads` and writes `writes` (NULL entries are
 * skipped), the one sequence every launch follows: the wait list (clt__waitlist_for); d->lock;
 * enqueue(d, wl, ctx, fn, &ev); on success the notes (clt__note_command); unlock; then
 * clt__command_done, or, when keep is not NULL, *keep = ev for the caller to wait for and
 * release. On failure nothing is noted and the error of the failing step is returned. When
 * enqueue leaves ev NULL and succeeds, it has taken the notes itself: nothing is noted or
 * finished here, and *keep is NULL. */
clt_status clt__cl_submit(clt_device *d, clt_storage *const *reads, int nreads,
                          clt_storage *const *writes, int nwrites, clt_cl_enqueue_fn enqueue,
                          void *ctx, const char *fn, cl_event *keep);
/* A kernel argument: size bytes at value, or local memory of size bytes when value is NULL. */
typedef struct clt_cl_arg {
  size_t size;
  const void *value;
} clt_cl_arg;
/* Runs the 1-d kernel k (from clt__get_kernel) over l with the nargs arguments args, through
 * clt__cl_submit; a failure to set the arguments is reported with the kernel's name. */
clt_status clt__cl_run(clt_device *d, cl_kernel k, const clt_launch *l, const clt_cl_arg *args,
                       int nargs, clt_storage *const *reads, int nreads, clt_storage *const *writes,
                       int nwrites, const char *fn);

/* ---- kernels launched before their program is built (deferred.c) ------------------------- */

#define CLT__DEFERRED_MAX_KERNELS 2
#define CLT__DEFERRED_MAX_ARGS 80
#define CLT__DEFERRED_BLOB 4096
/* One kernel of a deferred launch: its name, launch and arguments, copied by value. */
typedef struct clt_cl_deferred_kernel {
  char name[80];
  clt_launch launch;
  int nargs;
  struct {
    size_t size;      /* bytes of the value, or of local memory */
    size_t at;        /* where the value lies in blob */
    bool local, mem;  /* local memory (no value); a buffer (retained until the launch) */
  } args[CLT__DEFERRED_MAX_ARGS];
  size_t used; /* bytes of blob taken */
  unsigned char blob[CLT__DEFERRED_BLOB];
} clt_cl_deferred_kernel;
/* Appends an argument to k: a value of size <= 8 bytes, a buffer, or local memory. */
void clt__deferred_value(clt_cl_deferred_kernel *k, size_t size, const void *value);
void clt__deferred_mem(clt_cl_deferred_kernel *k, cl_mem m);
void clt__deferred_local(clt_cl_deferred_kernel *k, size_t size);
/* The last deferred launch that failed in this process, as "<what> (the launch of <kernel> by
 * <fn> on <device>) failed: <error>", into buf; false if none failed. */
bool clt__deferred_failure(char *buf, size_t size);
/* Runs the 1-d kernel kname of program (family, defines) over l with the nargs arguments args,
 * as clt__cl_run would with the built kernel, but behind the build (clt__cl_run_deferred); a
 * buffer argument is one equal to the buffer of a storage among reads and writes. */
clt_status clt__cl_run_deferred_args(clt_device *d, const char *family, const char *defines,
                                     const char *kname, const clt_launch *l,
                                     const clt_cl_arg *args, int nargs,
                                     clt_storage *const *reads, int nreads,
                                     clt_storage *const *writes, int nwrites, const char *fn);
/* Whether a launch of program (family, defines) on d should be deferred: its program is neither
 * in memory nor in the disk cache (a build from source is due), and d builds in the background.
 * (A program on disk loads in milliseconds, in the caller's thread, as before.) */
bool clt__deferred_wanted(clt_device *d, const char *family, const char *defines);
/* Enqueues on d's queue a barrier that holds every later command until the nk kernels of
 * program (family, defines) have run in order, after every command before on d's queue and
 * the storages' earlier commands: the program is built (or loaded) on a thread of its own,
 * which then launches the kernels on a queue of its own and opens the barrier; the calling
 * thread does not wait for the build. The barrier's event stands for the kernels in the notes
 * of reads and writes (list scratch storages among the writes). A failed build or launch fails
 * the barrier's event, whose waits report it. The rest as clt__cl_submit (keep included). */
clt_status clt__cl_run_deferred(clt_device *d, const char *family, const char *defines,
                                const clt_cl_deferred_kernel *k, int nk,
                                clt_storage *const *reads, int nreads,
                                clt_storage *const *writes, int nwrites, const char *fn,
                                cl_event *keep);

/* ---- host code as a command (native.c) ------------------------------------------------------ */

/* Whether d runs native kernels (CL_EXEC_NATIVE_KERNEL). On a CPU device its buffers are host
 * memory that the host's loops can work on. */
bool clt__cl_native_ok(const clt_device *d);
#define CLT__NATIVE_MAX 4 /* buffers of one native command */
/* The head of a native command's context: ptr[i] is set to the host address of buffer i before
 * run(ctx) runs on the device's queue. */
typedef struct clt_cl_native {
  void *ptr[CLT__NATIVE_MAX];
  void (*run)(struct clt_cl_native *ctx);
} clt_cl_native;
/* An enqueue step of clt__cl_submit: ctx->run as a command on d's queue, after the wait list wl,
 * over the n (<= CLT__NATIVE_MAX) buffers bufs (duplicates allowed). ctx (malloc'ed, with the
 * head first) is freed when the command completes, or here on failure. */
clt_status clt__cl_enqueue_native(clt_device *d, clt_cl_native *ctx, int n, const cl_mem *bufs,
                                  clt_waitlist *wl, const char *fn, cl_event *ev);

#endif /* CLT_CL_INTERNAL_H */
