/* SPDX-License-Identifier: MIT */
// train_linear.cpp - examples/train_linear.c in C++ (include/clt.hpp): the same data, model,
// loop and output, and the same weights to the last bit (tests/cxx_examples.sh compares them).
//
//   $ POCL_DEVICES="pthread pthread" CLT_DEVICE=cl:0 ./examples/train_linear_cpp [--weights]
#include <clt.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "linear_data.h"

int main(int argc, char **argv) try {
  bool weights_only = argc == 2 && std::string(argv[1]) == "--weights";
  if (argc > 1 && !weights_only) {
    std::fprintf(stderr, "usage: %s [--weights]\n", argv[0]);
    return 2;
  }
  FILE *out = weights_only ? stderr : stdout; // --weights: stdout gets the weights alone
  clt::Device dev = clt::default_device();
  std::fprintf(out, "training on %s\n", dev.name().c_str());
  clt_tensor *xs[BATCHES], *ys[BATCHES]; // the data, on the host, from known weights
  clt::check(linear_data(xs, ys));
  std::vector<clt::Tensor> xv, yv; // their handles, to release them
  for (int i = 0; i < BATCHES; i++)
    xv.push_back(clt::Tensor::adopt(xs[i])), yv.push_back(clt::Tensor::adopt(ys[i]));
  clt::Params model; // born on the host with zeros, requiring grad, moved once: in place
  model.add("weight", clt::zeros({1, 2}).requires_grad_())
      .add("bias", clt::zeros({1}).requires_grad_())
      .to(dev);
  clt::optim::SGD opt(model, LR);                // lr 0.1, no momentum, no weight decay
  clt::check(clt_transfer_stats_reset(nullptr)); // count the loop only
  clt::Tensor w = model["weight"], b = model["bias"];

  for (int epoch = 0; epoch < EPOCHS; epoch++) {
    clt::Tensor loss_sum = clt::zeros({}, dev); // the loss never leaves the device in the loop
    for (int i = 0; i < BATCHES; i++) {
      clt::Tensor x = xv[i].to(dev), y = yv[i].to(dev); // the batch goes to the device
      clt::Tensor loss = clt::mse_loss(clt::linear(x, w, b), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      loss_sum += loss.detach();
    }
    std::fprintf(out, "epoch %d: loss %.6f\n", epoch + 1, loss_sum.item() / BATCHES);
  }
  std::fprintf(out, "transfers in the loop: ");
  clt::check(clt_transfer_stats_print(out));
  std::vector<float> wv = w.to_vector<float>(), bv = b.to_vector<float>();
  std::fprintf(out, "weight: [%.4f, %.4f] (true [%.1f, %.1f])\n", wv[0], wv[1], W_TRUE0, W_TRUE1);
  std::fprintf(out, "bias:   %.4f (true %.1f)\n", bv[0], B_TRUE);
  if (weights_only)
    std::printf("%.9g\n%.9g\n%.9g\n", wv[0], wv[1], bv[0]);
  bool ok = wv[0] > 1.95f && wv[0] < 2.05f && wv[1] > -3.45f && wv[1] < -3.35f;
  return ok && bv[0] > 4.15f && bv[0] < 4.25f ? 0 : 1;
} catch (const clt::Error &e) {
  std::fprintf(stderr, "train_linear: %s\n  %s\n", clt_status_name(e.status()), e.what());
  return 1;
}
