/* SPDX-License-Identifier: MIT */
/* host/host.c - the host backend's table. The host backend computes in the calling thread, with
 * the host loops of the other files of lib/host/ (a layer below every backend: the reference
 * backend and the OpenCL backend's CPU-device matmul run them too); each first waits for pending
 * device copies into or out of its operands. */
#include "backend.h"

const struct clt_backend clt__host_backend = {
    .name = "host",
    .compute.fill = clt__host_fill,
    .compute.upload = clt__host_upload,
    .compute.elementwise = clt__host_elementwise,
    .compute.reduce = clt__host_reduce,
    .compute.fill_random = clt__host_fill_random,
    .compute.matmul = clt__host_matmul,
    .compute.matmul_path = clt__host_matmul_path,
    .compute.index_select = clt__host_index_select,
    .compute.fused = clt__host_fused,
    .compute.optim_step = clt__host_optim_step,
};
