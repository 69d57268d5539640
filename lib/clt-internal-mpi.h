/* SPDX-License-Identifier: MIT */
/* clt-internal-mpi.h - the interface between libclt and libclt_mpi; not installed, not a public
 * API.
 *
 * libclt_mpi stages device tensors through pinned host memory on the device's own queue, ordered
 * against the tensor's other commands (lib/mpi/clt_mpi.c). That needs a little more than clt.h
 * gives: the tensor's OpenCL buffer and queue, the events it must wait for, a way to record its
 * last command, the transfer counters. Those are the functions below, and nothing else of libclt
 * is visible to libclt_mpi: libclt is built with -fvisibility=hidden, and these are the only
 * exported functions outside the public headers (tests/exports.sh checks that). They take public
 * types only, so libclt_mpi does not depend on the layout of libclt's structures.
 *
 * Versioned: CLT_INTERNAL_MPI_VERSION changes with any change here (a signature, a meaning, the
 * size of the wait list), and libclt_mpi refuses to run (CLT_ERR_INTERNAL, saying why) when the
 * libclt.so it was loaded with reports another version through clt_internal_mpi_version(). Both
 * libraries are built from one tree and installed together; the check catches a mixed install.
 *
 * Every function is called with a tensor on an OpenCL device (not the host), and fn is the public
 * function to name in error messages. */
#ifndef CLT_INTERNAL_MPI_H
#define CLT_INTERNAL_MPI_H

#include "clt.h"

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "opencl/cl-fault.h" /* libclt_mpi's OpenCL calls are counted too in a fault-injection build */

#define CLT_INTERNAL_MPI_VERSION 1

/* Room for the wait list of one command (clt_internal_wait_list); libclt checks at compile time
 * that its own wait lists fit. */
#define CLT_INTERNAL_MAX_WAIT 64

#ifndef CLT_INTERNAL_API
#if defined(__GNUC__) || defined(__clang__)
#define CLT_INTERNAL_API __attribute__((visibility("default")))
#else
#define CLT_INTERNAL_API
#endif
#endif

/* CLT_INTERNAL_MPI_VERSION as libclt was built. */
CLT_INTERNAL_API int clt_internal_mpi_version(void);

/* t's buffer (*mem), its byte offset in it (*offset) and the in-order queue of its device
 * (*queue); no references are taken. CLT_ERR_INVALID_ARGUMENT for a host tensor. */
CLT_INTERNAL_API clt_status clt_internal_tensor_cl(const clt_tensor *t, cl_command_queue *queue,
                                                   cl_mem *mem, size_t *offset, const char *fn);

/* The host address of element 0 of t, a host or pinned tensor, without waiting for anything. */
CLT_INTERNAL_API void *clt_internal_host_ptr(const clt_tensor *t);

/* What a command on the device's queue must wait for before it reads src and writes dst (either
 * may be NULL; both are on one device; when they share storage, the write covers the read): up to
 * CLT_INTERNAL_MAX_WAIT events into ev, their number into *n. The events are retained: release
 * them with clt_internal_events_release. On failure *n is 0 and nothing is held. */
CLT_INTERNAL_API clt_status clt_internal_wait_list(const clt_tensor *src, const clt_tensor *dst,
                                                   cl_event *ev, cl_uint *n, const char *fn);

/* Releases the n events of ev. */
CLT_INTERNAL_API void clt_internal_events_release(cl_event *ev, cl_uint n);

/* Ends a sequence of commands on the device's queue that read src and wrote dst (either may be
 * NULL): enqueues a marker under the device's lock and records it as their last read and write,
 * so that later commands wait for the sequence; under CLT_SYNC=1 waits for it. If the marker
 * cannot be enqueued nothing is recorded and the error is returned: the caller must then wait for
 * its commands itself. */
CLT_INTERNAL_API clt_status clt_internal_finish(const clt_tensor *src, const clt_tensor *dst,
                                                const char *fn);

/* Keeps t's storage alive until ev completes (host memory an asynchronous copy uses). */
CLT_INTERNAL_API void clt_internal_keep_alive(cl_event ev, const clt_tensor *t, const char *fn);

/* Reports the OpenCL error err of `what` on dev (the thread's message names fn, err and dev) and
 * returns its status. */
CLT_INTERNAL_API clt_status clt_internal_cl_error(cl_int err, const char *fn, const char *what,
                                                  const clt_device *dev);

/* Counts explicit transfers of dev: d2h bytes downloaded to the host, h2d uploaded. */
CLT_INTERNAL_API void clt_internal_count_transfer(clt_device *dev, size_t d2h, size_t h2d);

#endif /* CLT_INTERNAL_MPI_H */
