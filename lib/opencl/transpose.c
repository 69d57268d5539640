/* opencl/transpose.c - launches kernels/transpose.cl. */
#include "cl-internal.h"

#include <stdio.h>

clt_status clt__cl_transpose(clt_tensor *out, const clt_tensor *in, const clt_transpose_desc *g,
                             const char *fn) {
  clt_device *d = out->storage->dev;
  size_t es = clt_dtype_size(in->dtype);
  const char *type = es == 1 ? "uchar" : es == 2 ? "ushort" : es == 4 ? "uint" : "ulong";
  char name[32], options[256];
  snprintf(name, sizeof name, "transpose_x%zu", es * 8);
  snprintf(options, sizeof options, "%s#define NAME %s\n#define T %s\n",
           clt__cl_base_options(d, false), name, type);
  cl_kernel k;
  clt_status st = clt__get_kernel(d, "transpose", options, name, fn, &k);
  if (st != CLT_OK)
    return st;
  clt_launch l = clt__cl_launch_1d(d, out->numel);
  cl_ulong v[6] = {(cl_ulong)out->numel, l.chunk,         (cl_ulong)g->n0,
                   (cl_ulong)g->mid,     (cl_ulong)g->n1, (cl_ulong)g->inner};
  clt_cl_arg args[8] = {{sizeof(cl_mem), &out->storage->buf}, {sizeof(cl_mem), &in->storage->buf}};
  for (int i = 0; i < 6; i++)
    args[2 + i] = (clt_cl_arg){sizeof(cl_ulong), &v[i]};
  return clt__cl_run(d, k, &l, args, 8, &in->storage, 1, &out->storage, 1, fn);
}
