/* SPDX-License-Identifier: MIT */
// cg_poisson.cpp - examples/cg_poisson.c in C++ (include/clt.hpp): the 2-D Poisson problem solved
// by conjugate gradients on the device chosen at run time, checked against a direct
// clt::linalg::solve and the exact solution. It prints what examples/cg_poisson prints
// (tests/cxx_examples.sh compares them with --no-times).
//
//   $ CLT_DEVICE=cl:0 ./examples/cg_poisson_cpp 32
#include <clt.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

static double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) try {
  bool times = true;
  int N = 24;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--no-times") == 0)
      times = false;
    else if (std::atoi(argv[i]) >= 2 && std::atoi(argv[i]) <= 64)
      N = std::atoi(argv[i]);
    else {
      std::fprintf(stderr, "usage: %s [--no-times] [N, 2..64]\n", argv[0]);
      return 2;
    }
  }
  clt::Device dev = clt::default_device();
  clt::dtype dt = dev.has_fp64() ? clt::dtype::f64 : clt::dtype::f32;
  double tol = dt == clt::dtype::f64 ? 1e-10 : 1e-4;
  int n = N * N;
  double h = 1.0 / (N + 1);

  // the matrix and the right-hand side, on the host, in double
  std::vector<double> a(static_cast<size_t>(n) * n), f(n), exact(n);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      int k = i * N + j;
      size_t row = static_cast<size_t>(k) * n;
      a[row + k] = 4 / (h * h);
      if (i > 0)
        a[row + k - N] = -1 / (h * h);
      if (i < N - 1)
        a[row + k + N] = -1 / (h * h);
      if (j > 0)
        a[row + k - 1] = -1 / (h * h);
      if (j < N - 1)
        a[row + k + 1] = -1 / (h * h);
      double xi = (i + 1) * h, yj = (j + 1) * h;
      exact[k] = xi * (1 - xi) * yj * (1 - yj);
      f[k] = 2 * (xi * (1 - xi) + yj * (1 - yj));
    }
  clt::Tensor A = clt::from_vector(a, {n, n}).to(dt).to(dev);
  clt::Tensor b = clt::from_vector(f, {n}).to(dt).to(dev);
  std::printf("cg_poisson: %d x %d grid, n = %d unknowns, %s on %s\n", N, N, n, clt::name(dt),
              dev.name().c_str());

  // conjugate gradients: x = 0, r = p = b
  double t0 = now();
  clt::Tensor x = clt::zeros({n}, {dev, dt}), r = b.clone(), p = b.clone();
  clt::Tensor rr = clt::dot(r, r);
  double bnorm = std::sqrt(rr.item()), rnorm = bnorm;
  int it = 0;
  while (rnorm / bnorm > tol && it < n) {
    clt::Tensor ap = clt::mv(A, p);
    clt::Tensor alpha = rr / clt::dot(p, ap);
    x = x + p * alpha;
    r = r - ap * alpha;
    clt::Tensor rr2 = clt::dot(r, r);
    p = r + p * (rr2 / rr);
    rr = rr2;
    rnorm = std::sqrt(rr.item()); // the one trip home per step: when to stop
    it++;
  }
  double t_cg = now() - t0;

  // the direct solve of the same system, on the same device
  t0 = now();
  clt::Tensor xd = clt::linalg::solve(A, b);
  dev.synchronize();
  double t_direct = now() - t0;

  // both on the host, in double: their difference, and each against the exact solution
  std::vector<double> xc = x.to(clt::cpu()).to(clt::dtype::f64).to_vector<double>();
  std::vector<double> xs = xd.to(clt::cpu()).to(clt::dtype::f64).to_vector<double>();
  double diff = 0, norm = 0, err_cg = 0, err_direct = 0;
  for (int k = 0; k < n; k++) {
    diff += (xc[k] - xs[k]) * (xc[k] - xs[k]);
    norm += xs[k] * xs[k];
    err_cg = std::max(err_cg, std::fabs(xc[k] - exact[k]));
    err_direct = std::max(err_direct, std::fabs(xs[k] - exact[k]));
  }
  double rel = std::sqrt(diff / norm);
  std::printf("CG: %d iterations, residual |r| / |b| = %.3g\n", it, rnorm / bnorm);
  std::printf("CG against clt_linalg_solve: relative difference %.3g\n", rel);
  std::printf("largest error against the exact solution: CG %.2g, direct %.2g\n", err_cg,
              err_direct);
  if (times)
    std::printf("times: CG %.1f ms, clt_linalg_solve %.1f ms\n", 1e3 * t_cg, 1e3 * t_direct);
  bool ok = it < n && rel < (dt == clt::dtype::f64 ? 1e-8 : 1e-3) &&
            err_direct < (dt == clt::dtype::f64 ? 1e-10 : 1e-4);
  std::printf("%s\n", ok ? "ok" : "FAILED: CG and the direct solve disagree");
  return ok ? 0 : 1;
} catch (const clt::Error &e) {
  std::cerr << "cg_poisson: " << clt_status_name(e.status()) << "\n  " << e.what() << "\n";
  return 1;
}
