/* SPDX-License-Identifier: MIT */
/* foreign.h - the OpenCL backend's narrow accessor for foreign OpenCL buffers: what DLPack
 * (lib/io/dlpack.c) needs to export a tensor as kDLOpenCL and to import one (the same check of a
 * foreign buffer that clt_from_cl_mem makes), and the only lib/opencl/ header that a file
 * outside lib/opencl/ includes. */
#ifndef CLT_CL_FOREIGN_H
#define CLT_CL_FOREIGN_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "clt-internal.h"

/* The name of an OpenCL error code ("CL_OUT_OF_RESOURCES"; error.c). */
const char *clt__cl_error_name(cl_int err);

/* The OpenCL context of dev; NULL for a device of another backend (memory.c). */
cl_context clt__cl_device_context(const clt_device *dev);

/* Queries of a foreign OpenCL buffer (memory.c). clt__cl_buffer_context sets *ctx to mem's
 * context and returns the OpenCL error code (CL_SUCCESS); clt__cl_buffer_size sets *size to mem's
 * size in bytes, or fails with the query's error, reported for fn on dev. */
cl_int clt__cl_buffer_context(cl_mem mem, cl_context *ctx);
clt_status clt__cl_buffer_size(cl_mem mem, const clt_device *dev, const char *fn, size_t *size);

/* The device whose buffer a foreign cl_mem is, for an import (clt_from_cl_mem, DLPack's
 * kDLOpenCL; interop.c): mem must be a valid buffer (not an image) of an OpenCL context of clt's,
 * of dev's context when dev is given, else of the context of the device numbered device_id,
 * holding at least need bytes. Sets *out to that device; errors (for fn, naming mem as `what`)
 * CLT_ERR_INVALID_ARGUMENT (not a buffer, too small) and CLT_ERR_DEVICE_NOT_FOUND (another
 * context: the message lists the devices of mem's context). */
clt_status clt__cl_foreign_device(cl_mem mem, clt_device *dev, int device_id, size_t need,
                                  const char *what, const char *fn, clt_device **out);

#endif /* CLT_CL_FOREIGN_H */
