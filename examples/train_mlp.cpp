/* SPDX-License-Identifier: MIT */
// train_mlp.cpp - examples/train_mlp.c in C++ (include/clt.hpp): the same data, model, loop and
// losses to the last bit (tests/train_mlp.sh compares them).
//
//   $ POCL_DEVICES="pthread pthread" CLT_DEVICE=cl:0 ./examples/train_mlp_cpp [--losses]
#include <clt.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "mlp_data.h"

int main(int argc, char **argv) try {
  bool losses_only = argc == 2 && std::string(argv[1]) == "--losses";
  if (argc > 1 && !losses_only) {
    std::fprintf(stderr, "usage: %s [--losses]\n", argv[0]);
    return 2;
  }
  FILE *out = losses_only ? stderr : stdout;
  clt::Device dev = clt::default_device();
  std::fprintf(out, "training a %d-%d-%d perceptron on %s\n", MLP_D, MLP_H, MLP_C,
               dev.name().c_str());
  clt_tensor *xs[MLP_BATCHES], *ys[MLP_BATCHES];
  clt::check(mlp_data(xs, ys));
  std::vector<clt::Tensor> xv, yv;
  for (int i = 0; i < MLP_BATCHES; i++)
    xv.push_back(clt::Tensor::adopt(xs[i])), yv.push_back(clt::Tensor::adopt(ys[i]));
  clt_params *raw = nullptr;
  clt::check(mlp_model(&raw));
  clt::Params model = clt::Params::adopt(raw);
  model.to(dev); // in place
  clt::Tensor w1 = model["fc1.weight"], b1 = model["fc1.bias"];
  clt::Tensor w2 = model["fc2.weight"], b2 = model["fc2.bias"];
  auto forward = [&](const clt::Tensor &x) {
    return clt::linear(clt::linear(x, w1, b1).relu(), w2, b2);
  };

  clt::optim::AdamW opt(model, MLP_LR, 0.9, 0.999, 1e-8, 0.01);
  double first = 0, last = 0;
  for (int epoch = 0; epoch < MLP_EPOCHS; epoch++) {
    clt::Tensor loss_sum = clt::zeros({}, dev);
    for (int i = 0; i < MLP_BATCHES; i++) {
      clt::Tensor x = xv[i].to(dev), y = yv[i].to(dev);
      clt::Tensor loss = clt::cross_entropy(forward(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      loss_sum += loss.detach();
    }
    last = loss_sum.item() / MLP_BATCHES;
    if (epoch == 0)
      first = last;
    std::fprintf(out, "epoch %2d: loss %.6f\n", epoch + 1, last);
    if (losses_only)
      std::printf("%.9g\n", last);
  }

  int64_t right = 0;
  {
    clt::NoGradGuard no_grad;
    for (int i = 0; i < MLP_BATCHES; i++) {
      clt::Tensor pred = forward(xv[i].to(dev)).argmax(1);
      right += pred.eq(yv[i].to(dev)).sum().item<int64_t>();
    }
  }
  double acc = static_cast<double>(right) / (MLP_BATCHES * MLP_BATCH);
  std::fprintf(out, "accuracy: %.1f%% (loss %.4f -> %.4f)\n", 100 * acc, first, last);
  return acc > 0.9 && last < first / 4 ? 0 : 1;
} catch (const clt::Error &e) {
  std::fprintf(stderr, "train_mlp: %s\n  %s\n", clt_status_name(e.status()), e.what());
  return 1;
}
