/* opencl/transpose.c - launches kernels/transpose.cl. */
#include "backend.h"

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
  clt_storage *reads[1] = {in->storage}, *writes[1] = {out->storage};
  clt_waitlist wl = {.n = 0};
  if ((st = clt__waitlist_for(&wl, d, reads, 1, writes, 1, fn)) != CLT_OK)
    return st;
  clt_launch l = clt__cl_launch_1d(d, out->numel);
  cl_ulong args[6] = {(cl_ulong)out->numel, l.chunk,         (cl_ulong)g->n0,
                      (cl_ulong)g->mid,     (cl_ulong)g->n1, (cl_ulong)g->inner};
  cl_event ev = NULL;
  pthread_mutex_lock(&d->lock);
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &out->storage->mem);
  err |= clSetKernelArg(k, 1, sizeof(cl_mem), &in->storage->mem);
  for (cl_uint i = 0; i < 6; i++)
    err |= clSetKernelArg(k, 2 + i, sizeof(cl_ulong), &args[i]);
  if (err != CL_SUCCESS)
    st = clt__error(CLT_ERR_OPENCL, fn, "setting the arguments of kernel %s on %s failed", name,
                    d->name);
  else if ((st = clt__cl_enqueue(d, k, &l, &wl, fn, &ev)) == CLT_OK)
    clt__note_command(ev, d, reads, 1, writes, 1);
  pthread_mutex_unlock(&d->lock);
  clt__waitlist_clear(&wl);
  if (st != CLT_OK)
    return st;
  return clt__command_done(ev, d, fn);
}
