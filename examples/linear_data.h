/* SPDX-License-Identifier: MIT */
/* linear_data.h - the data that examples/train_linear and examples/mpi_linear fit, made the same
 * way by both so that their final weights can be compared: seeded random points on the host,
 * BATCHES batches of BATCH points x ~ N(0, 1)^2 with labels y = x w^T + b + 0.01 N(0, 1) for
 * w = W_TRUE, b = B_TRUE. */
#ifndef LINEAR_DATA_H
#define LINEAR_DATA_H

#include <clt.h>

enum { BATCHES = 10, BATCH = 100, EPOCHS = 5 };
#define LR 0.1
#define W_TRUE0 2.0f
#define W_TRUE1 (-3.4f)
#define B_TRUE 4.2f

/* Fills xs[0..BATCHES) with (BATCH, 2) and ys[0..BATCHES) with (BATCH, 1) f32 host tensors that
 * the caller releases. On failure returns the status; the tensors made so far are released. */
static clt_status linear_data(clt_tensor **xs, clt_tensor **ys) {
  const float w_true[2] = {W_TRUE0, W_TRUE1}, b_true[1] = {B_TRUE};
  int64_t sw[2] = {1, 2}, sb[1] = {1}, sx[2] = {BATCH, 2}, sy[2] = {BATCH, 1};
  clt_tensor *tw = NULL, *tb = NULL;
  clt_status s = clt_manual_seed(42);
  if (s == CLT_OK)
    s = clt_from_host(w_true, CLT_F32, 2, sw, clt_cpu(), &tw);
  if (s == CLT_OK)
    s = clt_from_host(b_true, CLT_F32, 1, sb, clt_cpu(), &tb);
  int made = 0;
  for (; made < BATCHES && s == CLT_OK; made++) {
    clt_tensor *clean = NULL, *noise = NULL;
    xs[made] = ys[made] = NULL;
    s = clt_randn(CLT_F32, 2, sx, clt_cpu(), &xs[made]);
    if (s == CLT_OK)
      s = clt_linear(xs[made], tw, tb, &clean);
    if (s == CLT_OK)
      s = clt_randn(CLT_F32, 2, sy, clt_cpu(), &noise);
    if (s == CLT_OK)
      s = clt_mul_scalar(noise, 0.01, &ys[made]);
    if (s == CLT_OK)
      s = clt_add_(ys[made], clean);
    clt_tensor_release(clean);
    clt_tensor_release(noise);
  }
  clt_tensor_release(tw);
  clt_tensor_release(tb);
  if (s != CLT_OK)
    for (int i = 0; i < made; i++) {
      clt_tensor_release(xs[i]);
      clt_tensor_release(ys[i]);
    }
  return s;
}

#endif /* LINEAR_DATA_H */
