/* SPDX-License-Identifier: MIT */
/**
 * @file clt_mpi.h
 * @brief MPI collectives on clt tensors (optional: libclt_mpi, `pkg-config clt_mpi`).
 *
 * @code
 *   MPI_Init(&argc, &argv);
 *   clt_device *dev;
 *   clt_mpi_device(MPI_COMM_WORLD, &dev);             // one OpenCL device per node-local rank
 *   clt_tensor *g;
 *   clt_zeros(CLT_F32, 1, shape, dev, &g);            // ... gradients computed on dev ...
 *   if (clt_mpi_allreduce(g, CLT_MPI_MEAN, MPI_COMM_WORLD) != CLT_OK)
 *     fprintf(stderr, "%s\n", clt_last_error());      // every rank gets the same status
 *   clt_tensor_release(g);
 *   MPI_Finalize();
 * @endcode
 *
 * Every function here is collective over comm (send and recv: over the pair), returns a
 * clt_status and sets clt_last_error() like the rest of clt. Before moving data the ranks
 * exchange each tensor's dtype and shape, so ranks that pass different dtypes or shapes all
 * return CLT_ERR_DTYPE or CLT_ERR_SHAPE_MISMATCH, with a message naming every rank's tensor,
 * instead of hanging or reading garbage. A rank whose own arguments are bad (NULL tensor) makes
 * every rank fail the same way.
 *
 * Data. Host tensors are handed to MPI in place, without a copy. Device tensors are staged
 * through pinned host memory in chunks (1 MiB by default; clt_mpi_chunk_set, $CLT_MPI_CHUNK):
 * while MPI works on one chunk, the device-to-host copy of the next and the host-to-device copy
 * of the previous run on the device's queue. The staging is ordered by the tensor's events like
 * any clt command: it starts after pending kernels and copies that write the tensor (or, when
 * the call writes it, also read it), and the copies back are the tensor's last write, so later
 * operations wait for them; the call returns while the last chunks are still being copied
 * back. On a device that shares the host's memory (CL_DEVICE_HOST_UNIFIED_MEMORY: CPU devices,
 * integrated GPUs), the tensor is mapped into host memory instead and MPI works on it without
 * copies ($CLT_MPI_MAP=0 stages anyway). Results stay on the tensor's device. Each device keeps
 * its staging memory (at most 64 MiB) for the next call until MPI_Finalize. Tensors of any size
 * are accepted: data goes to MPI in calls of at most INT_MAX elements, so MPI's int counts are no
 * limit ($CLT_MPI_MAX_COUNT lowers that bound, for tests). The copies (or mapped bytes) count in
 * the devices' transfer statistics (clt_transfer_stats_get). A rank that fails while moving data
 * (an OpenCL error) still completes the MPI calls, and then every rank returns the failure.
 *
 * dtypes: all of them. bool: CLT_MPI_SUM and CLT_MPI_MAX are a logical or, CLT_MPI_MIN a logical
 * and; CLT_MPI_MEAN takes floats only (CLT_ERR_DTYPE otherwise, as clt_mean).
 * Errors of MPI itself (with an error handler that returns) give CLT_ERR_IO with MPI's message.
 * See docs/mpi.md for a guide.
 */
#ifndef CLT_MPI_H
#define CLT_MPI_H

#include <mpi.h>

#include "clt.h"

/* CLT_MPI_API marks what libclt_mpi exports (see CLT_API in clt.h); on Windows, libclt_mpi's
 * sources define CLT_MPI_BUILDING_LIBRARY and programs linking it statically CLT_STATIC. */
#ifndef CLT_MPI_API
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(CLT_MPI_BUILDING_LIBRARY)
#define CLT_MPI_API __declspec(dllexport)
#elif defined(CLT_STATIC)
#define CLT_MPI_API
#else
#define CLT_MPI_API __declspec(dllimport)
#endif
#elif (defined(__GNUC__) && __GNUC__ >= 4) || defined(__clang__)
#define CLT_MPI_API __attribute__((visibility("default")))
#else
#define CLT_MPI_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Reductions of clt_mpi_allreduce. */
typedef enum clt_mpi_op {
  CLT_MPI_SUM = 0, /**< elementwise sum (bool: logical or) */
  CLT_MPI_MAX,     /**< elementwise maximum (bool: logical or) */
  CLT_MPI_MIN,     /**< elementwise minimum (bool: logical and) */
  CLT_MPI_MEAN     /**< sum divided by the number of ranks; f32 and f64 only */
} clt_mpi_op;

/** Chooses this rank's device: the node-local rank (MPI_Comm_split_type with
 *  MPI_COMM_TYPE_SHARED) modulo the number of OpenCL devices, so the ranks on one node spread
 *  over its devices; the host "cpu" when there is no OpenCL device. Collective over comm.
 *  Prints nothing: clt_mpi_device_reason() says what was chosen and why. *out is owned by clt.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL out), CLT_ERR_IO (an MPI call failed). */
CLT_MPI_API clt_status clt_mpi_device(MPI_Comm comm, clt_device **out);

/** One line saying which device the last clt_mpi_device call on this thread chose and why
 *  ("node-local rank 1 of 2, 2 OpenCL devices: cl:1"); "" before any call. Thread-local, owned
 *  by clt, valid until the next clt_mpi_device call on this thread. */
CLT_MPI_API const char *clt_mpi_device_reason(void);

/** Sets the size in bytes of the chunks in which device tensors are staged through pinned host
 *  memory, process-wide, and returns the previous size. The default is 1 MiB, or
 *  $CLT_MPI_CHUNK when set (read at the first call of libclt_mpi: bytes, or with a k, m or g
 *  suffix for KiB, MiB, GiB). 0 stages each tensor whole (one read, the MPI call, one write:
 *  no overlap), which is mainly there to measure what the overlap gains. Sizes are rounded down
 *  to whole elements, at least one. Ranks may use different sizes: each call moves its data in
 *  chunks of the smallest size among the ranks involved. Thread-safe. */
CLT_MPI_API size_t clt_mpi_chunk_set(size_t bytes);

/** The chunk size clt_mpi_chunk_set set (or the default), in bytes. */
CLT_MPI_API size_t clt_mpi_chunk_get(void);

/** Replaces t, on every rank of comm, by the elementwise op over all ranks' t (in place; t keeps
 *  its device). Every rank must pass the same dtype, shape and op.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL t, unknown op, ranks passing different ops),
 *  CLT_ERR_DTYPE (dtypes differ; CLT_MPI_MEAN of integers or bool; f16 and bf16, which MPI
 *  cannot add: cast to f32), CLT_ERR_SHAPE_MISMATCH, CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL,
 *  CLT_ERR_IO. */
CLT_MPI_API clt_status clt_mpi_allreduce(clt_tensor *t, clt_mpi_op op, MPI_Comm comm);

/** Copies root's t into t on every other rank of comm (in place). Every rank must pass the same
 *  dtype, shape and root. Errors: those of clt_mpi_allreduce, CLT_ERR_INVALID_ARGUMENT for a
 *  root out of range or differing between ranks. */
CLT_MPI_API clt_status clt_mpi_broadcast(clt_tensor *t, int root, MPI_Comm comm);

/** *out = every rank's t concatenated along the first dimension, in rank order, on t's device
 *  (a new tensor the caller releases). t must have at least one dimension; the ranks must agree
 *  on the dtype and on every dimension but the first, which may differ. On failure *out is
 *  untouched. Errors: those of clt_mpi_allreduce, CLT_ERR_INVALID_ARGUMENT (NULL out, 0-d t). */
CLT_MPI_API clt_status clt_mpi_allgather(clt_tensor *t, MPI_Comm comm, clt_tensor **out);

/** Sends t to rank dest of comm. The matching clt_mpi_recv must pass a tensor of the same
 *  dtype and shape, else both calls fail (CLT_ERR_DTYPE, CLT_ERR_SHAPE_MISMATCH) and no data
 *  moves. Blocks until the receiver has accepted the header (like MPI_Ssend): order sends and
 *  receives so that every send meets its receive. tag must be a valid MPI tag.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL t), those of clt_mpi_recv. */
CLT_MPI_API clt_status clt_mpi_send(clt_tensor *t, int dest, int tag, MPI_Comm comm);

/** Receives into t (in place, on t's device) the tensor that rank src (or MPI_ANY_SOURCE) sends
 *  with clt_mpi_send and tag. Errors: CLT_ERR_INVALID_ARGUMENT (NULL t), CLT_ERR_DTYPE and
 *  CLT_ERR_SHAPE_MISMATCH (the sender's tensor differs; the message names both),
 *  CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL, CLT_ERR_IO. */
CLT_MPI_API clt_status clt_mpi_recv(clt_tensor *t, int src, int tag, MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* CLT_MPI_H */
