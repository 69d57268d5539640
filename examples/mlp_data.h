/* SPDX-License-Identifier: MIT */
/* mlp_data.h - the problem and the initial model of examples/train_mlp and train_mlp_cpp, made
 * the same way by both: from clt_manual_seed(7), MLP_C class centres of MLP_D features
 * (N(0, 1) each), MLP_BATCHES batches of MLP_BATCH points, point j of batch i in class
 * (7 i + j) mod MLP_C at its centre plus N(0, 1) noise; weights N(0, 1) / sqrt(fan-in), biases 0,
 * all requiring grad. Everything is born on the host. */
#ifndef MLP_DATA_H
#define MLP_DATA_H

#include <clt.h>

#include <math.h>
#include <stdlib.h>

enum { MLP_D = 20, MLP_H = 32, MLP_C = 10, MLP_BATCHES = 8, MLP_BATCH = 64, MLP_EPOCHS = 12 };
#define MLP_LR 0.01

/* Fills xs with (MLP_BATCH, MLP_D) f32 and ys with (MLP_BATCH,) i64 host tensors that the caller
 * releases; on failure returns the status, with nothing left to release. */
static clt_status mlp_data(clt_tensor **xs, clt_tensor **ys) {
  int64_t sc[2] = {MLP_C, MLP_D}, sx[2] = {MLP_BATCH, MLP_D}, sy[1] = {MLP_BATCH};
  float *centre = (float *)malloc(sizeof(float) * MLP_C * MLP_D);
  float *x = (float *)malloc(sizeof(float) * MLP_BATCH * MLP_D);
  int64_t y[MLP_BATCH];
  clt_tensor *c = NULL, *noise = NULL;
  clt_status s = centre && x ? clt_manual_seed(7) : CLT_ERR_OUT_OF_MEMORY;
  if (s == CLT_OK)
    s = clt_randn(CLT_F32, 2, sc, clt_cpu(), &c);
  if (s == CLT_OK)
    s = clt_tensor_read(c, centre, sizeof(float) * MLP_C * MLP_D);
  int made = 0;
  for (; made < MLP_BATCHES && s == CLT_OK; made++) {
    xs[made] = ys[made] = NULL;
    s = clt_randn(CLT_F32, 2, sx, clt_cpu(), &noise);
    if (s == CLT_OK)
      s = clt_tensor_read(noise, x, sizeof(float) * MLP_BATCH * MLP_D);
    clt_tensor_release(noise);
    for (int j = 0; j < MLP_BATCH && s == CLT_OK; j++) {
      y[j] = (7 * made + j) % MLP_C;
      for (int k = 0; k < MLP_D; k++)
        x[j * MLP_D + k] += centre[y[j] * MLP_D + k];
    }
    if (s == CLT_OK)
      s = clt_from_host(x, CLT_F32, 2, sx, clt_cpu(), &xs[made]);
    if (s == CLT_OK)
      s = clt_from_host(y, CLT_I64, 1, sy, clt_cpu(), &ys[made]);
  }
  clt_tensor_release(c);
  free(centre);
  free(x);
  if (s != CLT_OK)
    for (int i = 0; i < made; i++) {
      clt_tensor_release(xs[i]);
      clt_tensor_release(ys[i]);
    }
  return s;
}

/* A weight (N(0, 1) / sqrt(fan_in)) or a bias (zeros) that requires grad, added to p. */
static clt_status mlp_param(clt_params *p, const char *name, int ndim, const int64_t *shape) {
  clt_tensor *r = NULL, *t = NULL;
  clt_status s;
  if (ndim == 2) {
    s = clt_randn(CLT_F32, 2, shape, clt_cpu(), &r);
    if (s == CLT_OK)
      s = clt_mul_scalar(r, 1.0 / sqrt((double)shape[1]), &t);
  } else {
    s = clt_zeros(CLT_F32, 1, shape, clt_cpu(), &t);
  }
  if (s == CLT_OK)
    s = clt_requires_grad_(t, 1);
  if (s == CLT_OK)
    s = clt_params_add(p, name, t);
  clt_tensor_release(r);
  clt_tensor_release(t);
  return s;
}

/* The model: fc1.weight [H, D], fc1.bias [H], fc2.weight [C, H], fc2.bias [C], in *out. */
static clt_status mlp_model(clt_params **out) {
  int64_t s1[2] = {MLP_H, MLP_D}, sb1[1] = {MLP_H}, s2[2] = {MLP_C, MLP_H}, sb2[1] = {MLP_C};
  clt_params *p = NULL;
  clt_status s = clt_params_create(&p);
  if (s == CLT_OK)
    s = mlp_param(p, "fc1.weight", 2, s1);
  if (s == CLT_OK)
    s = mlp_param(p, "fc1.bias", 1, sb1);
  if (s == CLT_OK)
    s = mlp_param(p, "fc2.weight", 2, s2);
  if (s == CLT_OK)
    s = mlp_param(p, "fc2.bias", 1, sb2);
  if (s != CLT_OK) {
    clt_params_release(p);
    return s;
  }
  *out = p;
  return CLT_OK;
}

#endif /* MLP_DATA_H */
