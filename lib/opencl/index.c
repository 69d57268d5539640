/* SPDX-License-Identifier: MIT */
/* opencl/index.c - launches kernels/index.cl (clt_index_select, clt_arange). */
#include "cl-internal.h"

#include <stdio.h>

clt_status clt__cl_index_select(clt_tensor *out, const clt_tensor *in, const clt_tensor *idx,
                                const clt_index_desc *g, const char *fn) {
  clt_device *d = out->storage->dev;
  size_t es = clt_dtype_size(in->dtype);
  const char *type = es == 1 ? "uchar" : es == 2 ? "ushort" : es == 4 ? "uint" : "ulong";
  const char *ti = idx->dtype == CLT_I32 ? "int" : "long";
  char name[48], options[256];
  snprintf(name, sizeof name, "index_select_x%zu_%s", es * 8, clt_dtype_name(idx->dtype));
  snprintf(options, sizeof options, "%s#define NAME %s\n#define T %s\n#define TI %s\n",
           clt__cl_base_options(d, false), name, type, ti);
  cl_kernel k;
  clt_status st = clt__get_kernel(d, "index", options, name, fn, &k);
  if (st != CLT_OK)
    return st;
  clt_launch l = clt__cl_launch_1d(d, out->numel);
  cl_ulong v[5] = {(cl_ulong)out->numel, l.chunk, (cl_ulong)g->k, (cl_ulong)g->size,
                   (cl_ulong)g->inner};
  clt_cl_arg args[8] = {{sizeof(cl_mem), &out->storage->buf},
                        {sizeof(cl_mem), &in->storage->buf},
                        {sizeof(cl_mem), &idx->storage->buf}};
  for (int i = 0; i < 5; i++)
    args[3 + i] = (clt_cl_arg){sizeof(cl_ulong), &v[i]};
  clt_storage *reads[2] = {in->storage, idx->storage};
  return clt__cl_run(d, k, &l, args, 8, reads, 2, &out->storage, 1, fn);
}

clt_status clt__cl_arange(clt_tensor *out, double start, double step, const char *fn) {
  clt_device *d = out->storage->dev;
  const char *type = out->dtype == CLT_I64   ? "long"
                     : out->dtype == CLT_I32 ? "int"
                     : out->dtype == CLT_U8  ? "uchar"
                                             : NULL;
  if (!type)
    return clt__error(CLT_ERR_INTERNAL, fn, "no arange kernel for %s", clt_dtype_name(out->dtype));
  char name[32], options[256];
  snprintf(name, sizeof name, "arange_%s", clt_dtype_name(out->dtype));
  snprintf(options, sizeof options, "%s#define ARANGE\n#define NAME %s\n#define T %s\n",
           clt__cl_base_options(d, false), name, type);
  cl_kernel k;
  clt_status st = clt__get_kernel(d, "index", options, name, fn, &k);
  if (st != CLT_OK)
    return st;
  clt_launch l = clt__cl_launch_1d(d, out->numel);
  cl_ulong v[2] = {(cl_ulong)out->numel, l.chunk};
  /* a one-element range is its start, whatever the step (not checked to fit then) */
  cl_long s0 = (cl_long)start, s1 = out->numel > 1 ? (cl_long)step : 0;
  clt_cl_arg args[5] = {{sizeof(cl_mem), &out->storage->buf},
                        {sizeof(cl_ulong), &v[0]},
                        {sizeof(cl_ulong), &v[1]},
                        {sizeof s0, &s0},
                        {sizeof s1, &s1}};
  return clt__cl_run(d, k, &l, args, 5, NULL, 0, &out->storage, 1, fn);
}
