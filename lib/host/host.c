/* SPDX-License-Identifier: MIT */
/* host/host.c - the host backend's table. The host backend computes in the calling thread, with
 * the host loops of the other files of lib/host/ (a layer below every backend: the reference
 * backend and the OpenCL backend's CPU-device matmul run them too); each first waits for pending
 * device copies into or out of its operands. */
#include "backend.h"

const struct clt_backend clt__host_backend = {
    .name = "host",
    .fill = clt__host_fill,
    .upload = clt__host_upload,
    .elementwise = clt__host_elementwise,
    .reduce = clt__host_reduce,
    .fill_random = clt__host_fill_random,
    .matmul = clt__host_matmul,
    .matmul_path = clt__host_matmul_path,
    .index_select = clt__host_index_select,
    .fused = clt__host_fused,
};
