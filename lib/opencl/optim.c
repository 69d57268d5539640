/* SPDX-License-Identifier: MIT */
/* opencl/optim.c - launches kernels/optim.cl: one optimizer step on one parameter as one kernel
 * (the OpenCL backend's optim_step). */
#include "cl-internal.h"

#include <stdio.h>

/* How an element of dt is loaded as the compute type and stored from it. */
static void access_defines(clt_dtype dt, char *buf, size_t size) {
  switch (dt) {
  case CLT_F16:
    snprintf(buf, size,
             "#define T half\n#define C float\n#define LD(p,i) vload_half((i),(p))\n"
             "#define ST(p,i,x) clt_store_f16((p),(i),(x))\n");
    break;
  case CLT_BF16:
    snprintf(buf, size,
             "#define T ushort\n#define C float\n#define LD(p,i) clt_bf16_to_f32((p)[i])\n"
             "#define ST(p,i,x) ((p)[i]=clt_f32_to_bf16(x))\n");
    break;
  default: {
    const char *t = dt == CLT_F64 ? "double" : "float";
    snprintf(buf, size,
             "#define T %s\n#define C %s\n#define LD(p,i) ((p)[i])\n#define ST(p,i,x) "
             "((p)[i]=(x))\n",
             t, t);
  }
  }
}

clt_status clt__cl_optim_step(const clt_optim_desc *o, clt_tensor *param, const clt_tensor *grad,
                              clt_tensor *s1, clt_tensor *s2, const char *fn) {
  clt_device *d = param->storage->dev;
  bool f64 = param->dtype == CLT_F64, sgd = o->kind == CLT__OPTIM_SGD;
  char name[48], access[256], options[768];
  snprintf(name, sizeof name, "optim_%s_%s", sgd ? "sgd" : "adamw", clt_dtype_name(param->dtype));
  access_defines(param->dtype, access, sizeof access);
  snprintf(options, sizeof options, "%s#define NAME %s\n#define %s\n%s",
           clt__cl_base_options(d, f64), name, sgd ? "SGD" : "ADAMW", access);
  cl_kernel k;
  clt_status st = clt__get_kernel(d, "optim", options, name, fn, &k);
  if (st != CLT_OK)
    return st;
  clt_launch l = clt__cl_launch_1d(d, param->numel);
  cl_ulong n = (cl_ulong)param->numel;
  /* The numbers, in the compute type. */
  double dv[8];
  float fv[8];
  int nv;
  if (sgd) {
    dv[0] = o->lr, dv[1] = o->weight_decay, dv[2] = o->momentum;
    nv = 3;
  } else {
    dv[0] = o->decay, dv[1] = o->beta1, dv[2] = o->beta2, dv[3] = 1 - o->beta1;
    dv[4] = 1 - o->beta2, dv[5] = o->eps, dv[6] = o->step_size, dv[7] = o->bc2_sqrt;
    nv = 8;
  }
  for (int i = 0; i < nv; i++)
    fv[i] = (float)dv[i];
  size_t vs = f64 ? sizeof(double) : sizeof(float);
  cl_int flags = (s1 ? 1 : 0) | (o->first ? 2 : 0) | (o->weight_decay != 0 ? 4 : 0);
  clt_cl_arg args[14];
  int na = 0;
  args[na++] = (clt_cl_arg){sizeof(cl_mem), &param->storage->buf};
  args[na++] = (clt_cl_arg){sizeof(cl_mem), &grad->storage->buf};
  /* SGD without momentum never touches its buffer argument: the gradient stands in. */
  args[na++] = (clt_cl_arg){sizeof(cl_mem), s1 ? &s1->storage->buf : &grad->storage->buf};
  if (!sgd)
    args[na++] = (clt_cl_arg){sizeof(cl_mem), &s2->storage->buf};
  args[na++] = (clt_cl_arg){sizeof(cl_ulong), &n};
  args[na++] = (clt_cl_arg){sizeof(cl_ulong), &l.chunk};
  for (int i = 0; i < nv; i++)
    args[na++] = (clt_cl_arg){vs, f64 ? (const void *)&dv[i] : (const void *)&fv[i]};
  if (sgd)
    args[na++] = (clt_cl_arg){sizeof(cl_int), &flags};
  clt_storage *reads[1] = {grad->storage};
  clt_storage *writes[3] = {param->storage, s1 ? s1->storage : NULL, s2 ? s2->storage : NULL};
  return clt__cl_run(d, k, &l, args, na, reads, 1, writes, 3, fn);
}
