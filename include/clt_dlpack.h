/* SPDX-License-Identifier: MIT */
/**
 * @file clt_dlpack.h
 * @brief Exchanging tensors with other frameworks through DLPack, without copies.
 *
 * @code
 *   DLManagedTensor *m;
 *   clt_to_dlpack(t, &m);          // m->dl_tensor points into t's memory; t stays alive
 *   ...                            // hand m to the consumer (PyTorch, NumPy, CuPy, TVM, ...)
 *   m->deleter(m);                 // the consumer calls this when done: clt lets go of t
 *
 *   clt_tensor *u;
 *   clt_from_dlpack(m, &u);        // clt now owns m and calls m->deleter(m) when u's memory
 *   clt_tensor_release(u);         // (shared with every view of u) is freed
 * @endcode
 *
 * A separate header so that clt.h does not need DLPack installed: this one needs <dlpack/dlpack.h>
 * (Debian/Ubuntu: apt-get install libdlpack-dev; DLPack 0.6 or later). It is installed, and the
 * two functions built, only when configure found that header.
 *
 * Devices. Host tensors are exchanged as kDLCPU (data is the host pointer). OpenCL tensors as
 * kDLOpenCL, following DLPack's convention that data holds the cl_mem handle (not a host address)
 * and byte_offset the offset into it; device_id is clt's device index, n for "cl:n".
 * dtypes: f16, f32, f64 (kDLFloat 16/32/64), bf16 (kDLBfloat 16), i32, i64 (kDLInt 32/64), u8
 * (kDLUInt 8) and bool (type code 6, kDLBool in DLPack 0.8 and later, 8 bits), one lane: every
 * clt dtype.
 */
#ifndef CLT_DLPACK_H
#define CLT_DLPACK_H

#if defined(__has_include)
#if !__has_include(<dlpack/dlpack.h>)
#error "clt_dlpack.h needs <dlpack/dlpack.h> (Debian/Ubuntu: apt-get install libdlpack-dev)"
#endif
#endif

#include <clt.h>
#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Exports t, without a copy, as a DLPack tensor with t's shape and strides (in elements; a view
 *  is exported as the view it is), data pointing at t's memory (host tensors: its first element;
 *  OpenCL tensors: the cl_mem, with byte_offset the tensor's offset in it). Before returning, the call waits for the
 *  device commands pending on t's memory (writes, and reads, since the consumer may write), so
 *  the consumer sees finished data without knowing clt's queues; the consumer's own writes must
 *  be finished before clt uses t again. *out holds a reference to t (so its memory, and for
 *  OpenCL the cl_mem and its context, stay valid) until (*out)->deleter(*out) is called, which
 *  the consumer must do exactly once; it frees *out as well. Writes through either side are seen
 *  by the other.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL t or out), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_OPENCL (a
 *  pending command failed). */
CLT_API clt_status clt_to_dlpack(clt_tensor *t, DLManagedTensor **out);

/** Imports m, without a copy, as a new tensor. kDLCPU tensors become host tensors over m's memory
 *  (data + byte_offset, aligned to the item size); kDLOpenCL tensors become tensors of the OpenCL
 *  device cl:N (N = device_id), whose context must be the one the cl_mem (data) belongs to
 *  (byte_offset a whole number of elements; clt retains the cl_mem). Strides (in elements, none
 *  negative) make the tensor a view (docs/views.md); NULL means C order. On success clt owns
 *  m: m->deleter(m) (if not NULL) is called exactly once, when the last tensor sharing this memory
 *  (views made by clt_reshape included) is released and the device commands using it have
 *  finished. It may run on any thread: the one that releases the last tensor, or, for host
 *  memory that an asynchronous copy still used then, a thread of the OpenCL driver when the copy
 *  completes (docs/threads.md). On failure m is untouched and still the caller's. The caller
 *  releases *out.
 *  Errors: CLT_ERR_INVALID_ARGUMENT (NULL, ndim outside 0..8, negative or overflowing shape, NULL
 *  data with elements, a cl_mem smaller than the tensor), CLT_ERR_DTYPE (a dtype clt lacks, such
 *  as float8 or vector lanes), CLT_ERR_UNSUPPORTED (a device type other than kDLCPU and
 *  kDLOpenCL, a negative stride, misaligned memory or byte_offset, f64 without fp64),
 *  CLT_ERR_DEVICE_NOT_FOUND (no cl:N for N = device_id, or its context is not the cl_mem's),
 *  CLT_ERR_OPENCL, CLT_ERR_OUT_OF_MEMORY. */
CLT_API clt_status clt_from_dlpack(DLManagedTensor *m, clt_tensor **out);

#ifdef __cplusplus
}
#endif

#endif /* CLT_DLPACK_H */
