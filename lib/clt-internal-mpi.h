/* SPDX-License-Identifier: MIT */
/* clt-internal-mpi.h - the interface between libclt and libclt_mpi; not installed, not a public
 * API.
 *
 * libclt_mpi stages device tensors through host memory, ordered against the tensor's other
 * commands (lib/mpi/clt_mpi.c). That needs a little more than clt.h gives: asynchronous copies of
 * byte ranges between a tensor and host memory that start after the tensor's pending work,
 * handles to wait for each, a way to record the last of them as the tensor's last read and write,
 * the transfer counters. Those are the functions below, and nothing else of libclt is visible to
 * libclt_mpi: libclt is built with -fvisibility=hidden, and these are the only exported functions
 * outside the public headers (tests/exports.sh checks that). They take public types and opaque
 * handles only, so libclt_mpi depends neither on the layout of libclt's structures nor on any
 * backend: libclt carries each call to the staging members of the device's struct clt_backend
 * (lib/backend.h; lib/staging.c), which the OpenCL backend implements with its queue and events
 * (lib/opencl/staging.c) and the reference backend with memcpy (lib/ref/ref.c).
 *
 * Versioned: CLT_INTERNAL_MPI_VERSION changes with any change here (a signature, a meaning), and
 * libclt_mpi refuses to run (CLT_ERR_INTERNAL, saying why) when the libclt.so it was loaded with
 * reports another version through clt_internal_mpi_version(). Both libraries are built from one
 * tree and installed together; the check catches a mixed install.
 *
 * fn is always the public function to name in error messages. */
#ifndef CLT_INTERNAL_MPI_H
#define CLT_INTERNAL_MPI_H

#include "clt.h"

#define CLT_INTERNAL_MPI_VERSION 3

#ifndef CLT_INTERNAL_API
#if defined(__GNUC__) || defined(__clang__)
#define CLT_INTERNAL_API __attribute__((visibility("default")))
#else
#define CLT_INTERNAL_API
#endif
#endif

/* One staging session: the copies between one tensor pair and host memory (opaque). */
typedef struct clt_internal_stage clt_internal_stage;
/* The completion of one copy of a session (opaque; the backend's event). NULL stands for a copy
 * that needs no waiting for. */
typedef struct clt_internal_done clt_internal_done;

/* CLT_INTERNAL_MPI_VERSION as libclt was built. */
CLT_INTERNAL_API int clt_internal_mpi_version(void);

/* The host address of element 0 of t, a host or pinned tensor, without waiting for anything. */
CLT_INTERNAL_API void *clt_internal_host_ptr(const clt_tensor *t);

/* Begins a session of copies that read src and write dst (either may be NULL, not both; both on
 * one device, not the host). Its first copy waits for the tensors' pending work (src's last
 * write; dst's last write and reads); the later ones follow it in order on the device. *out is
 * the session, or NULL on failure (CLT_ERR_UNSUPPORTED for a device whose backend cannot stage;
 * the backend's error where the pending work cannot be waited for). */
CLT_INTERNAL_API clt_status clt_internal_stage_begin(const clt_tensor *src, const clt_tensor *dst,
                                                     const char *fn, clt_internal_stage **out);

/* Starts copying len bytes of src, from byte offset of its element 0, to host, after `after`
 * (NULL: nothing more than the session's order). *done gets the copy's handle, which the caller
 * releases; host must stay untouched until it completes. */
CLT_INTERNAL_API clt_status clt_internal_stage_read(clt_internal_stage *s, size_t offset,
                                                    size_t len, void *host,
                                                    clt_internal_done *after,
                                                    clt_internal_done **done);

/* Starts copying len bytes from host into dst at byte offset of its element 0; as
 * clt_internal_stage_read otherwise (host must stay unchanged until the copy completes). */
CLT_INTERNAL_API clt_status clt_internal_stage_write(clt_internal_stage *s, size_t offset,
                                                     size_t len, const void *host,
                                                     clt_internal_done *after,
                                                     clt_internal_done **done);

/* Where the device shares memory with the host (a CPU device, an integrated GPU), gives MPI the
 * tensors' own memory instead of copies: maps len bytes of src from byte src_off for reading into
 * *src_ptr and of dst from dst_off for writing into *dst_ptr (NULL for a tensor the session has
 * not), after the tensors' pending work, and returns once they can be used. Call it before any
 * copy of the session, at most once; the session's end unmaps them. CLT_ERR_UNSUPPORTED where
 * the device cannot (nothing mapped: copy instead); another error where mapping failed (then
 * nothing is mapped either, and copies still work). */
CLT_INTERNAL_API clt_status clt_internal_stage_map(clt_internal_stage *s, size_t src_off,
                                                   size_t dst_off, size_t len, void **src_ptr,
                                                   void **dst_ptr);

/* Ends the session (NULL: nothing to do) and frees it, unmapping what it mapped. If it made any
 * copy or mapping: keep (the host memory copied from and into) stays alive until the last copy
 * completes, a marker after the last copy (or unmap) is recorded as the last read of src and, if
 * something was written, the last write of dst, so that later commands wait for the copies
 * (under CLT_SYNC=1 it is waited for); if the marker fails, nothing is recorded, this waits for
 * the copies instead and returns the error (or the unmap's).
 * The bytes copied or mapped count as transfers of the device (clt_transfer_stats_get). */
CLT_INTERNAL_API clt_status clt_internal_stage_end(clt_internal_stage *s, const clt_tensor *keep);

/* Waits until d (a handle of dev's, or NULL) completes; the error of a failed copy names `what`. */
CLT_INTERNAL_API clt_status clt_internal_done_wait(clt_device *dev, clt_internal_done *d,
                                                   const char *fn, const char *what);

/* Takes one more reference to d (a handle of dev's, or NULL). */
CLT_INTERNAL_API void clt_internal_done_retain(clt_device *dev, clt_internal_done *d);

/* Releases one reference to d (a handle of dev's, or NULL). */
CLT_INTERNAL_API void clt_internal_done_release(clt_device *dev, clt_internal_done *d);

#endif /* CLT_INTERNAL_MPI_H */
