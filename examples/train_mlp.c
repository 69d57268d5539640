/* SPDX-License-Identifier: MIT */
/* train_mlp.c - a 2-layer perceptron trained with autograd and AdamW on a synthetic 10-class
 * problem: the training loop of PyTorch's tutorials, in C.
 *
 *   $ POCL_DEVICES="pthread pthread" CLT_DEVICE=cl:0 ./examples/train_mlp [--losses]
 *
 * The data are born on the host from a fixed seed: N points of D features around C class
 * centres (examples/mlp_data.h). The model (W1 [H, D], b1 [H], W2 [C, H], b2 [C], in a clt_params
 * set) is initialised on the host, moved to the default device once, and trained there in
 * batches: logits = linear(relu(linear(x, W1, b1)), W2, b2), loss = cross_entropy(logits, y),
 * clt_backward, clt_optim_step. One number per epoch comes home (the mean loss). --losses
 * prints the losses alone, one a line (%.9g), for comparing devices (tests/train_mlp.sh). The
 * same seed gives the same curve on every device, to float rounding: the ops run in the same
 * order, but reductions and matmuls may sum in another order on another device.
 */
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_data.h"

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "train_mlp: %s failed: %s\n  %s\n", what, clt_status_name(s),
            clt_last_error());
    exit(1);
  }
}

int main(int argc, char **argv) {
  int losses_only = argc == 2 && strcmp(argv[1], "--losses") == 0;
  if (argc > 1 && !losses_only) {
    fprintf(stderr, "usage: %s [--losses]\n", argv[0]);
    return 2;
  }
  FILE *out = losses_only ? stderr : stdout;
  clt_device *dev = clt_device_default();
  fprintf(out, "training a %d-%d-%d perceptron on %s\n", MLP_D, MLP_H, MLP_C,
          clt_device_name(dev));

  clt_tensor *xs[MLP_BATCHES], *ys[MLP_BATCHES];
  clt_params *model;
  check(mlp_data(xs, ys), "mlp_data");
  check(mlp_model(&model), "mlp_model");
  check(clt_params_to(model, dev), "clt_params_to"); /* in place: the handles stay */
  clt_tensor *w1 = clt_params_get(model, "fc1.weight"), *b1 = clt_params_get(model, "fc1.bias");
  clt_tensor *w2 = clt_params_get(model, "fc2.weight"), *b2 = clt_params_get(model, "fc2.bias");

  clt_optim *opt;
  check(clt_optim_adamw(model, MLP_LR, 0.9, 0.999, 1e-8, 0.01, &opt), "clt_optim_adamw");
  double first = 0, last = 0;
  for (int epoch = 0; epoch < MLP_EPOCHS; epoch++) {
    clt_tensor *loss_sum;
    check(clt_zeros(CLT_F32, 0, NULL, dev, &loss_sum), "clt_zeros");
    for (int i = 0; i < MLP_BATCHES; i++) {
      clt_tensor *x, *y, *h, *a, *logits, *loss, *l;
      check(clt_to(xs[i], dev, &x), "clt_to(x)"); /* the batch goes to the device */
      check(clt_to(ys[i], dev, &y), "clt_to(y)");
      check(clt_linear(x, w1, b1, &h), "clt_linear(fc1)");
      check(clt_relu(h, &a), "clt_relu");
      check(clt_linear(a, w2, b2, &logits), "clt_linear(fc2)");
      check(clt_cross_entropy(logits, y, &loss), "clt_cross_entropy");
      check(clt_optim_zero_grad(opt), "clt_optim_zero_grad");
      check(clt_backward(loss, NULL), "clt_backward"); /* gradients into the parameters' .grad */
      check(clt_optim_step(opt), "clt_optim_step");
      check(clt_detach(loss, &l), "clt_detach");
      check(clt_add_(loss_sum, l), "clt_add_(loss)");
      clt_tensor *objs[] = {x, y, h, a, logits, loss, l};
      for (size_t k = 0; k < sizeof objs / sizeof objs[0]; k++)
        clt_tensor_release(objs[k]);
    }
    double total;
    check(clt_item(loss_sum, &total), "clt_item"); /* the one number per epoch that comes home */
    clt_tensor_release(loss_sum);
    last = total / MLP_BATCHES;
    if (epoch == 0)
      first = last;
    fprintf(out, "epoch %2d: loss %.6f\n", epoch + 1, last);
    if (losses_only)
      printf("%.9g\n", last);
  }

  /* accuracy over all the data, without recording a graph */
  int was = clt_set_grad_enabled(0);
  int64_t right = 0;
  for (int i = 0; i < MLP_BATCHES; i++) {
    clt_tensor *x, *y, *h, *a, *logits, *pred, *eq, *n;
    check(clt_to(xs[i], dev, &x), "clt_to(x)");
    check(clt_to(ys[i], dev, &y), "clt_to(y)");
    check(clt_linear(x, w1, b1, &h), "clt_linear(fc1)");
    check(clt_relu(h, &a), "clt_relu");
    check(clt_linear(a, w2, b2, &logits), "clt_linear(fc2)");
    check(clt_argmax_dim(logits, 1, 0, &pred), "clt_argmax_dim");
    check(clt_eq(pred, y, &eq), "clt_eq");
    check(clt_sum(eq, &n), "clt_sum");
    int64_t k;
    check(clt_item_i64(n, &k), "clt_item_i64");
    right += k;
    clt_tensor *objs[] = {x, y, h, a, logits, pred, eq, n};
    for (size_t j = 0; j < sizeof objs / sizeof objs[0]; j++)
      clt_tensor_release(objs[j]);
  }
  clt_set_grad_enabled(was);
  double acc = (double)right / (MLP_BATCHES * MLP_BATCH);
  fprintf(out, "accuracy: %.1f%% (loss %.4f -> %.4f)\n", 100 * acc, first, last);

  clt_optim_release(opt);
  for (int i = 0; i < MLP_BATCHES; i++) {
    clt_tensor_release(xs[i]);
    clt_tensor_release(ys[i]);
  }
  clt_params_release(model);
  return acc > 0.9 && last < first / 4 ? 0 : 1;
}
