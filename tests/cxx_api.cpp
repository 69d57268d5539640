/* SPDX-License-Identifier: MIT */
// cxx_api.cpp - include/clt.hpp, the C++ face (issue 16): handles and reference counts, creation,
// transfers, operators against the C API's results, reductions, printing, errors as clt::Error
// with clt's status and message, Params and events, views, t[i], t.index({...}) and indexed
// assignment (against element formulas, and written through to the parent); on cpu and, where
// there is one, on cl:0.
// Built by 'make check' with -Wall -Wextra -Werror (and under ASan in .ci/lanes/10-asan);
// tests/cxx_compilers.sh compiles it with every C++ compiler there is.
#include <clt.hpp>

#include "cxx_check.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

// The call throws clt::Error with this status and a message that starts with prefix.
#define CHECK_THROWS(call, want, prefix)                                                           \
  do {                                                                                             \
    try {                                                                                          \
      (void)(call);                                                                                \
      std::fprintf(stderr, "%s:%d: %s did not throw\n", __FILE__, __LINE__, #call);                \
      failures++;                                                                                  \
    } catch (const clt::Error &e) {                                                                \
      CHECK(e.status() == (want));                                                                 \
      CHECK(std::strncmp(e.what(), prefix, std::strlen(prefix)) == 0);                             \
      CHECK(std::string(e.what()) == clt_last_error());                                            \
    }                                                                                              \
  } while (0)

static_assert(std::is_nothrow_destructible_v<clt::Tensor>);
static_assert(std::is_nothrow_copy_constructible_v<clt::Tensor>);
static_assert(std::is_nothrow_move_constructible_v<clt::Tensor>);
static_assert(!std::is_copy_constructible_v<clt::Params>);
static_assert(std::is_nothrow_move_constructible_v<clt::Params>);
static_assert(!std::is_copy_constructible_v<clt::Event>);
static_assert(std::is_base_of_v<std::runtime_error, clt::Error>);
static_assert(static_cast<int>(clt::dtype::bf16) == CLT_BF16);
// a named Tensor is rebound by =, a view just made (an rvalue) is written into, as in libtorch
static_assert(std::is_nothrow_copy_assignable_v<clt::Tensor>);
static_assert(!std::is_assignable_v<clt::Tensor &, double>);
static_assert(std::is_assignable_v<clt::Tensor &&, double>);
static_assert(std::is_assignable_v<clt::Tensor &&, const clt::Tensor &>);
static_assert(!std::is_constructible_v<clt::Index, bool>); // no masks: a bool is not 0 or 1
static_assert(std::is_constructible_v<clt::Index, int> &&
              std::is_constructible_v<clt::Index, long>);

static bool same(const std::vector<float> &a, const std::vector<float> &b) { return a == b; }

// The elements of a C tensor the C API computed, adopted.
static std::vector<float> c_result(clt_status s, clt_tensor **out) {
  CHECK(s == CLT_OK);
  return clt::Tensor::adopt(*out).to_vector<float>();
}

static void handles(clt::Device dev) {
  clt::Tensor a = clt::ones({3}, dev);
  clt::Tensor b = a; // another handle to the same tensor, as in PyTorch
  CHECK(b.get() == a.get());
  b += 1;
  CHECK(same(a.to_vector<float>(), {2, 2, 2}));
  clt::Tensor c = std::move(b);
  CHECK(!b.defined() && c.get() == a.get());
  // C and C++ mix: adopt takes a C reference, borrow adds one, release hands one back.
  clt_tensor *raw = nullptr;
  CHECK(clt_ones(CLT_F32, 0, nullptr, dev.get(), &raw) == CLT_OK);
  clt::Tensor d = clt::Tensor::adopt(raw);
  clt::Tensor e = clt::Tensor::borrow(d.get());
  clt_tensor *back = e.release();
  CHECK(!e.defined() && back == raw);
  clt_tensor_release(back);
  CHECK(d.item<int>() == 1);
  a = clt::Tensor(); // assigning releases the old reference (ASan's leak check counts)
  CHECK(!a.defined() && c.numel() == 3);
}

static void creation(clt::Device dev) {
  clt::Tensor z = clt::zeros({2, 3}, dev);
  CHECK((z.shape() == clt::Shape{2, 3}) && z.dim() == 2 && z.size(-1) == 3 && z.numel() == 6);
  CHECK(z.dtype() == clt::dtype::f32 && z.device() == dev);
  CHECK(clt::ones({2}, clt::dtype::i64).device() == clt::cpu()); // born on the host by default
  clt::Tensor f = clt::full({2}, 2.5, {dev, clt::dtype::f64});
  CHECK(f.dtype() == clt::dtype::f64 && f.to_vector<double>()[1] == 2.5);
  CHECK((clt::arange(4, dev).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3}));
  CHECK((clt::arange(1, 7, 2, {dev, clt::dtype::i32}).to_vector<int32_t>() ==
         std::vector<int32_t>{1, 3, 5}));
  clt::Tensor v = clt::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  CHECK(v.shape() == (clt::Shape{2, 3}) && v.device() == dev);
  CHECK((v.to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 5, 6})); // cast, then read
  clt::Tensor bits = clt::from_vector(std::vector<bool>{true, false, true});
  CHECK(bits.dtype() == clt::dtype::boolean &&
        (bits.to_vector<bool>() == std::vector<bool>{1, 0, 1}));
  CHECK_THROWS(clt::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), CLT_ERR_SHAPE_MISMATCH,
               "clt::from_vector: ");
  // rand and randn draw what the C functions draw from the same seed.
  clt::manual_seed(7);
  std::vector<float> r = clt::rand({5}, dev).to_vector<float>();
  clt::manual_seed(7);
  int64_t n = 5;
  clt_tensor *cr = nullptr;
  CHECK(same(r, c_result(clt_rand(CLT_F32, 1, &n, dev.get(), &cr), &cr)));
  clt::Tensor rn = clt::randn({4}, {dev, clt::dtype::f32});
  CHECK(rn.numel() == 4 && rn.device() == dev);
}

static void transfers(clt::Device dev) {
  clt::Tensor h = clt::arange(3);
  clt::Tensor d = h.to(dev);
  CHECK(d.device() == dev && same(d.to_vector<float>(), {0, 1, 2}));
  CHECK(d.to(dev).get() == d.get()); // already there: the same tensor
  clt::Tensor c = d.copy_to(dev);
  CHECK(c.get() != d.get() && same(c.to_vector<float>(), {0, 1, 2}));
  clt::Tensor m = h;
  m.move_to(dev); // m = m.to(dev); h keeps the host tensor
  CHECK(m.device() == dev && h.device() == clt::cpu());
  clt::Tensor into = clt::zeros({3});
  into.copy_(d);
  CHECK(same(into.to_vector<float>(), {0, 1, 2}));
}

static void operators(clt::Device dev) {
  clt::Tensor a = clt::from_vector(std::vector<float>{1, 2, 4}, dev);
  clt::Tensor b = clt::from_vector(std::vector<float>{3, 5, 8}, dev);
  clt_tensor *o = nullptr;
  // each operator is the C function of the table, in both orders for a number
  CHECK(same((a + b).to_vector<float>(), c_result(clt_add(a.get(), b.get(), &o), &o)));
  CHECK(same((a - b).to_vector<float>(), c_result(clt_sub(a.get(), b.get(), &o), &o)));
  CHECK(same((a * b).to_vector<float>(), c_result(clt_mul(a.get(), b.get(), &o), &o)));
  CHECK(same((a / b).to_vector<float>(), c_result(clt_div(a.get(), b.get(), &o), &o)));
  CHECK(same((a - 0.5).to_vector<float>(), c_result(clt_sub_scalar(a.get(), 0.5, &o), &o)));
  CHECK(same((a / 3).to_vector<float>(), c_result(clt_div_scalar(a.get(), 3, &o), &o)));
  CHECK(same((2 + a).to_vector<float>(), {3, 4, 6}));
  CHECK(same((2 * a).to_vector<float>(), {2, 4, 8}));
  CHECK(same((10 - a).to_vector<float>(), {9, 8, 6}));
  CHECK(same((1 / a).to_vector<float>(), {1, 0.5f, 0.25f}));
  CHECK(same((-a).to_vector<float>(), {-1, -2, -4}));
  // a number does not widen, as with the C _scalar forms, in either order
  clt::Tensor i = clt::arange(3, {dev, clt::dtype::i32});
  CHECK((7 - i).dtype() == clt::dtype::i32 && (i - 7).dtype() == clt::dtype::i32);
  CHECK((2.5 - i).dtype() == clt::dtype::f32 &&
        same((2.5 - i).to_vector<float>(), {2.5f, 1.5f, 0.5f}));
  CHECK((1 - clt::ones({2}, {dev, clt::dtype::boolean})).dtype() == clt::dtype::i64);
  // compound assignment is in place: the same tensor, seen by every handle
  clt::Tensor alias = a;
  clt_tensor *before = a.get();
  a += b;
  a -= 1;
  a *= 2;
  a /= b;
  CHECK(a.get() == before &&
        same(alias.to_vector<float>(), {(4 - 1) * 2 / 3.0f, 12 / 5.0f, 22 / 8.0f}));
  CHECK_THROWS(i += 2.5, CLT_ERR_DTYPE, "clt_add_: "); // i32 cannot hold the f32 result
  // comparisons give bool tensors
  clt::Tensor x = clt::from_vector(std::vector<float>{1, 2, 3}, dev);
  CHECK((x < 2).dtype() == clt::dtype::boolean);
  CHECK(((x < 2).to_vector<bool>() == std::vector<bool>{1, 0, 0}));
  CHECK(((2 < x).to_vector<bool>() == std::vector<bool>{0, 0, 1}));
  CHECK(((x >= 2).to_vector<bool>() == std::vector<bool>{0, 1, 1}));
  CHECK(((2 >= x).to_vector<bool>() == std::vector<bool>{1, 1, 0}));
  CHECK(((x == x).to_vector<bool>() == std::vector<bool>{1, 1, 1}));
  CHECK(((x != 2).to_vector<bool>() == std::vector<bool>{1, 0, 1}));
  CHECK(((x <= 2) == (2 >= x)).to_vector<bool>() == std::vector<bool>(3, true));
  // methods and free functions from the op table
  CHECK(same(x.exp().to_vector<float>(), clt::exp(x).to_vector<float>()));
  CHECK(same(x.maximum(2).to_vector<float>(), {2, 2, 3}));
  CHECK(same(clt::clamp(x, 1.5, 2.5).to_vector<float>(), {1.5f, 2, 2.5f}));
  CHECK(same(clt::where(x > 1, x, -x).to_vector<float>(), {-1, 2, 3}));
  CHECK(((x > 1).logical_and(x < 3).to_vector<bool>() == std::vector<bool>{0, 1, 0}));
}

static void compute(clt::Device dev) {
  clt::Tensor m = clt::arange(6, dev).reshape({2, 3});
  CHECK(m.sum().item() == 15 && m.mean().item<float>() == 2.5f && m.max().item<int>() == 5);
  CHECK(same(m.sum(0).to_vector<float>(), {3, 5, 7}));
  CHECK((m.sum(1, true).shape() == clt::Shape{2, 1}));
  CHECK(m.min().item() == 0 && m.argmax().item<int64_t>() == 5);
  clt::Tensor t = m.transpose(0, 1);
  CHECK((t.shape() == clt::Shape{3, 2}) && same(t.to_vector<float>(), {0, 3, 1, 4, 2, 5}));
  clt::Tensor p = clt::matmul(m, t);
  CHECK(same(p.to_vector<float>(), {5, 14, 14, 50}) &&
        same(m.matmul(t).to_vector<float>(), {5, 14, 14, 50}));
  /* torch.matmul's shapes and the level-1/2 products: m is [[0, 1, 2], [3, 4, 5]] */
  clt::Tensor u = clt::from_vector(std::vector<float>{1, 2, 3}, {3}, dev);
  CHECK(clt::dot(u, u).item() == 14 && clt::dot(u, u).dim() == 0);
  CHECK(same(clt::mv(m, u).to_vector<float>(), {8, 26}) &&
        same(clt::matmul(m, u).to_vector<float>(), {8, 26}));
  CHECK((clt::outer(u, u).shape() == clt::Shape{3, 3}) && clt::outer(u, u).sum().item() == 36);
  CHECK(same(clt::addmm(clt::ones({2, 2}, dev), m, t, 2.0, 0.5).to_vector<float>(),
             {4.5, 9, 9, 27}));
  CHECK((clt::matmul(m.reshape({1, 2, 3}).expand({4, 2, 3}), u).shape() == clt::Shape{4, 2}));
  CHECK_THROWS(clt::dot(u, m), CLT_ERR_SHAPE_MISMATCH, "clt_dot: ");
  CHECK(same(clt::tril(m).to_vector<float>(), {0, 0, 0, 3, 4, 0}) &&
        same(clt::triu(m, 1).to_vector<float>(), {0, 1, 2, 0, 0, 5}));
  CHECK(same(clt::diagonal(m).to_vector<float>(), {0, 4}) && clt::trace(m).item() == 4 &&
        same(clt::diag(clt::diag(m)).to_vector<float>(), {0, 0, 0, 4}));
  CHECK(clt::eye(3, -1, dev).sum().item() == 3 &&
        same(clt::linspace(0, 1, 5, dev).to_vector<float>(), {0, 0.25, 0.5, 0.75, 1}));
  /* clt::linalg: A = [[4, 1], [1, 3]] (SPD), b = [1, 2]: x = [1/11, 7/11] */
  clt::Tensor A = clt::from_vector(std::vector<double>{4, 1, 1, 3}, {2, 2}, dev);
  clt::Tensor b = clt::from_vector(std::vector<double>{1, 2}, {2}, dev);
  std::vector<double> x = clt::linalg::solve(A, b).to_vector<double>();
  CHECK(std::fabs(x[0] - 1.0 / 11) < 1e-15 && std::fabs(x[1] - 7.0 / 11) < 1e-15);
  CHECK(std::fabs(clt::linalg::det(A).item() - 11) < 1e-12);
  auto [w, V] = clt::linalg::eigh(A);
  CHECK(w.numel() == 2 && (V.shape() == clt::Shape{2, 2}) && w.to_vector<double>()[0] < 3);
  auto [Q, R] = clt::linalg::qr(A);
  CHECK(std::fabs(clt::matmul(Q, R).sub(A).abs().max().item()) < 1e-14);
  auto [LU, piv] = clt::linalg::lu_factor(A);
  CHECK(std::fabs(clt::linalg::lu_solve(LU, piv, b.reshape({2, 1})).to_vector<double>()[1] -
                  7.0 / 11) < 1e-15);
  auto [U, S, Vh] = clt::linalg::svd(A, false);
  CHECK(clt::linalg::svdvals(A).numel() == 2 && S.to_vector<double>()[0] > 3);
  auto [sg, la] = clt::linalg::slogdet(A);
  CHECK(sg.item() == 1 && std::fabs(la.item() - std::log(11.0)) < 1e-14);
  CHECK(clt::linalg::cholesky(A).to_vector<double>()[0] == 2 &&
        clt::linalg::inv(A).numel() == 4 && clt::linalg::eigvalsh(A).numel() == 2);
  CHECK(clt::linalg::solve_triangular(clt::linalg::cholesky(A), b.reshape({2, 1}), false)
            .numel() == 2 &&
        clt::linalg::lstsq(A, b.reshape({2, 1})).numel() == 2);
  CHECK(clt::linalg::norm(A, "inf").item() == 5 && clt::linalg::matrix_rank(A).item() == 2 &&
        clt::linalg::cond(A).item() > 1 && (clt::linalg::pinv(A).shape() == clt::Shape{2, 2}) &&
        std::fabs(clt::linalg::norm(b).item() - std::sqrt(5.0)) < 1e-15);
  CHECK_THROWS(clt::linalg::cholesky(clt::from_vector(std::vector<double>{1, 2, 2, 1}, {2, 2}, dev)),
               CLT_ERR_LINALG, "clt_linalg_cholesky: ");
  clt::Tensor y = clt::linear(m, clt::ones({1, 3}, dev), clt::full({1}, 1, dev));
  CHECK(same(y.to_vector<float>(), {4, 13}));
  /* losses and layers: uniform logits give log(3) */
  clt::Tensor z = clt::zeros({2, 3}, dev), cls = clt::arange(0, 4, 2, {dev, clt::dtype::i64});
  CHECK(std::fabs(clt::cross_entropy(z, cls).item() - std::log(3.0)) < 1e-6);
  CHECK(std::fabs(clt::logsumexp(z, 1).to_vector<float>()[1] - std::log(3.0)) < 1e-6);
  CHECK(std::fabs(clt::log_softmax(z, -1).to_vector<float>()[0] + std::log(3.0)) < 1e-6);
  CHECK(std::fabs(clt::softmax(m.to(clt::dtype::f32), 1).sum().item() - 2) < 1e-6);
  CHECK(std::fabs(clt::mse_loss(m.to(clt::dtype::f32), z).item() - 55.0 / 6) < 1e-5);
  CHECK(clt::reshape(m, {6}).dim() == 1 && m.to(clt::dtype::f64).dtype() == clt::dtype::f64);
}

static void printing(clt::Device dev) {
  clt::Tensor z = clt::ones({3}, dev) * 2;
  std::ostringstream s;
  s << z;
  size_t len = 0;
  CHECK(clt_format(z.get(), nullptr, 0, &len) == CLT_OK);
  std::string want(len + 1, '\0');
  CHECK(clt_format(z.get(), &want[0], want.size(), nullptr) == CLT_OK);
  CHECK(s.str() == want.c_str());
  std::string tail = dev.is_host() ? "])" : "], device='" + dev.name() + "')";
  CHECK(s.str() == "tensor([2., 2., 2." + tail);
  std::ostringstream d;
  d << dev;
  CHECK(d.str() == dev.name());
}

static void errors(clt::Device dev) {
  CHECK_THROWS(clt::device("cl:99"), CLT_ERR_DEVICE_NOT_FOUND, "clt_device_get: ");
  CHECK_THROWS(clt::Tensor().exp(), CLT_ERR_INVALID_ARGUMENT, "clt_exp: ");
  CHECK_THROWS(clt::ones({2}).sum(3), CLT_ERR_INVALID_ARGUMENT, "clt_sum_dim: ");
  CHECK_THROWS(clt::ones({2, 3}).matmul(clt::ones({2, 3})), CLT_ERR_SHAPE_MISMATCH, "clt_matmul: ");
  clt::Tensor a = clt::ones({3}), keep = a;
  if (dev != clt::cpu()) {
    clt::Tensor b = clt::ones({3}, dev);
    CHECK_THROWS(a + b, CLT_ERR_DEVICE_MISMATCH,
                 "clt_add: expected all tensors on the same device, but found cpu (argument 1) "
                 "and ");
    CHECK_THROWS(a += b, CLT_ERR_DEVICE_MISMATCH, "clt_add_: ");
    CHECK(same(keep.to_vector<float>(), {1, 1, 1})); // untouched on failure
  }
  clt::Result<clt::Tensor> r = clt::attempt([&] { return clt::ones({2}) + clt::ones({3}); });
  CHECK(!r && r.status.code == CLT_ERR_SHAPE_MISMATCH && !r.value.defined());
  CHECK(r.status.message.rfind("clt_add: ", 0) == 0);
  clt::Result<double> ok = clt::attempt([] { return clt::ones({2}).sum().item(); });
  CHECK(ok && ok.value == 2);
}

static void params_events(clt::Device dev) {
  clt::Params p;
  p.add("w", clt::ones({2, 2})).add("b", clt::zeros({2}));
  CHECK(p.size() == 2 && p.name_at(0) == "w" && p.contains("b") && !p.contains("c"));
  clt::Tensor w_host = p["w"];
  p.to(dev); // in place: the set's entries move, a handle taken before keeps the old copy
  CHECK(p.device() == dev && p["w"].device() == dev && w_host.device() == clt::cpu());
  CHECK(p.tensor_at(1).get() == p["b"].get());
  CHECK_THROWS(p["c"], CLT_ERR_INVALID_ARGUMENT, "clt::Params::operator[]: ");
  const char *tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/clt-cxx-" +
                     std::to_string(static_cast<long>(getpid())) + ".safetensors";
  p.save(path);
  clt::Params q = clt::Params::load(path, clt::cpu());
  std::remove(path.c_str());
  CHECK(q.size() == 2 && q.device() == clt::cpu() && same(q["w"].to_vector<float>(), {1, 1, 1, 1}));
  clt::Params moved = std::move(q);
  CHECK(moved.size() == 2 && q.get() == nullptr);
  // Sharded: w (16 bytes) and b (8) in two shards of at most 8 bytes, read back through the index.
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/clt-cxx-sharded-" +
                    std::to_string(static_cast<long>(getpid()));
  CHECK(mkdir(dir.c_str(), 0700) == 0);
  p.save_sharded(dir, 8);
  clt::Params r = clt::Params::load(dir + "/model.safetensors.index.json", clt::cpu());
  CHECK(r.size() == 2 && r.name_at(0) == "w" && same(r["w"].to_vector<float>(), {1, 1, 1, 1}));
  CHECK_THROWS(p.save_sharded(dir, 0), CLT_ERR_INVALID_ARGUMENT, "clt_save_sharded: ");
  for (const char *f : {"/model-00001-of-00002.safetensors", "/model-00002-of-00002.safetensors",
                        "/model.safetensors.index.json"})
    CHECK(std::remove((dir + f).c_str()) == 0);
  CHECK(rmdir(dir.c_str()) == 0);

  clt::Event start = clt::Event::record(dev);
  clt::Tensor s = (clt::ones({1000}, dev) * 3).sum();
  clt::Event end = clt::Event::record(dev);
  end.wait();
  CHECK(start.elapsed_ms(end) >= 0 && s.item() == 3000);
  dev.synchronize();
}

// The elements, in C order, of a tensor of this shape whose element at index i is at(i): what a
// view must hold, computed from the parent's element formula and not from strides.
static std::vector<float> expect(const clt::Shape &shape,
                                 const std::function<float(const std::vector<int64_t> &)> &at) {
  std::vector<float> out;
  std::vector<int64_t> i(shape.size(), 0);
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  for (int64_t k = 0; k < n; k++) {
    out.push_back(at(i));
    for (size_t d = shape.size(); d-- > 0;) { // the next index in C order
      if (++i[d] < shape[d])
        break;
      i[d] = 0;
    }
  }
  return out;
}

// The 2x3x4 tensor of the view tests: element [i][j][k] is A(i, j, k).
static float A(int64_t i, int64_t j, int64_t k) { return static_cast<float>(i * 12 + j * 4 + k); }
static clt::Tensor make_a(clt::Device dev) { return clt::arange(24, dev).reshape({2, 3, 4}); }

static void views(clt::Device dev) {
  using I = std::vector<int64_t>;
  clt::Tensor a = make_a(dev);
  CHECK((a.strides() == clt::Shape{12, 4, 1}) && a.offset() == 0 && a.is_contiguous());
  CHECK(a.stride(-1) == 1 && a.storage_offset() == 0);

  clt::Tensor n = a.narrow(1, 1, 2);
  CHECK((n.shape() == clt::Shape{2, 2, 4}) && (n.strides() == clt::Shape{12, 4, 1}));
  CHECK(n.offset() == 4 && !n.is_contiguous() && n.device() == dev);
  CHECK(same(n.to_vector<float>(),
             expect(n.shape(), [](const I &x) { return A(x[0], x[1] + 1, x[2]); })));
  CHECK(same(a.narrow(2, -2, 2).to_vector<float>(),
             expect({2, 3, 2}, [](const I &x) { return A(x[0], x[1], x[2] + 2); })));

  clt::Tensor s = a.select(1, 2);
  CHECK((s.shape() == clt::Shape{2, 4}) && s.offset() == 8);
  CHECK(same(s.to_vector<float>(), expect({2, 4}, [](const I &x) { return A(x[0], 2, x[1]); })));
  CHECK(a.select(0, 1).select(0, 2).select(0, 3).dim() == 0 &&
        a.select(0, -1).select(0, -1).select(0, -1).item() == 23);

  clt::Tensor sl = a.slice(2, 1, CLT_SLICE_END, 2);
  CHECK((sl.shape() == clt::Shape{2, 3, 2}) && (sl.strides() == clt::Shape{12, 4, 2}));
  CHECK(same(sl.to_vector<float>(),
             expect(sl.shape(), [](const I &x) { return A(x[0], x[1], 1 + 2 * x[2]); })));
  CHECK((a.slice(1, 1, 100).shape() == clt::Shape{2, 2, 4})); // clamped, as in Python
  CHECK((a.slice(0, -1).shape() == clt::Shape{1, 3, 4}) && a.slice(0, -1).offset() == 12);
  CHECK((a.slice().shape() == clt::Shape{2, 3, 4}));

  clt::Tensor p = a.permute({2, 0, 1});
  CHECK((p.shape() == clt::Shape{4, 2, 3}) && (p.strides() == clt::Shape{1, 12, 4}));
  CHECK(same(p.to_vector<float>(),
             expect(p.shape(), [](const I &x) { return A(x[1], x[2], x[0]); })));
  CHECK(same(a.permute({-1, 0, 1}).to_vector<float>(), p.to_vector<float>()));
  clt::Tensor tr = a.transpose(0, 2); // now a view
  CHECK((tr.shape() == clt::Shape{4, 3, 2}) && (tr.strides() == clt::Shape{1, 4, 12}));
  CHECK(same(tr.to_vector<float>(),
             expect(tr.shape(), [](const I &x) { return A(x[2], x[1], x[0]); })));

  clt::Tensor col = clt::arange(3, dev).reshape({3, 1});
  clt::Tensor e = col.expand({2, 3, 4});
  CHECK((e.shape() == clt::Shape{2, 3, 4}) && (e.strides() == clt::Shape{0, 1, 0}));
  CHECK(same(e.to_vector<float>(),
             expect(e.shape(), [](const I &x) { return static_cast<float>(x[1]); })));
  CHECK((col.expand({-1, 5}).shape() == clt::Shape{3, 5}));

  CHECK((a.unsqueeze(1).shape() == clt::Shape{2, 1, 3, 4}));
  CHECK((a.unsqueeze(-1).shape() == clt::Shape{2, 3, 4, 1}));
  CHECK((a.unsqueeze(1).squeeze(1).shape() == clt::Shape{2, 3, 4}));
  CHECK((a.squeeze(0).shape() == clt::Shape{2, 3, 4})); // size 2: kept
  CHECK((a.unsqueeze(0).unsqueeze(3).squeeze().shape() == clt::Shape{2, 3, 4}));
  CHECK(clt::ones({1, 1}, dev).squeeze().dim() == 0);

  clt::Tensor v = a.view({6, -1});
  CHECK((v.shape() == clt::Shape{6, 4}) && same(v.to_vector<float>(), a.to_vector<float>()));
  CHECK_THROWS(tr.view({24}), CLT_ERR_INVALID_ARGUMENT, "clt_view: "); // needs a copy
  CHECK_THROWS(a.view({5, 5}), CLT_ERR_SHAPE_MISMATCH, "clt_view: ");
  clt::Tensor rc = tr.reshape({24}); // a copy, in the transposed order
  CHECK(rc.is_contiguous() && same(rc.to_vector<float>(), expect({4, 3, 2}, [](const I &x) {
                                     return A(x[2], x[1], x[0]);
                                   })));
  clt::Tensor c = tr.contiguous();
  CHECK(c.is_contiguous() && c.get() != tr.get() &&
        same(c.to_vector<float>(), tr.to_vector<float>()));
  CHECK(a.contiguous().get() == a.get()); // already contiguous: the same tensor
  clt::Tensor cl = a.clone();
  CHECK(cl.get() != a.get() && same(cl.to_vector<float>(), a.to_vector<float>()));

  // writes through a view are seen in the parent; copies (clone, reshape's copy) are apart
  std::vector<float> h = a.to_vector<float>();
  n.fill_(-1); // [:, 1:3, :]
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 1; j < 3; j++)
      for (int64_t k = 0; k < 4; k++)
        h[static_cast<size_t>(i * 12 + j * 4 + k)] = -1;
  CHECK(same(a.to_vector<float>(), h));
  tr.narrow(0, 1, 2).select(1, 0) += 100; // a[:, 0, 1:3] += 100, through two views of a view
  for (int64_t i = 0; i < 2; i++)
    for (int64_t k = 1; k < 3; k++)
      h[static_cast<size_t>(i * 12 + k)] += 100;
  CHECK(same(a.to_vector<float>(), h));
  // copy_ broadcasts and converts: an i32 row of 3 into every a[i, :, 0]
  a.select(2, 0).copy_(clt::from_vector(std::vector<int32_t>{7, 8, 9}, dev));
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++)
      h[static_cast<size_t>(i * 12 + j * 4)] = static_cast<float>(7 + j);
  CHECK(same(a.to_vector<float>(), h));
  p.select(0, 3).fill_(0.5); // a[:, :, 3] through the permuted view
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++)
      h[static_cast<size_t>(i * 12 + j * 4 + 3)] = 0.5f;
  CHECK(same(a.to_vector<float>(), h));
  v.select(0, 5).select(0, 1).fill_(42); // a.view({6, 4})[5][1] is a[1][2][1]
  h[21] = 42;
  CHECK(same(a.to_vector<float>(), h));
  cl.fill_(0);
  rc.fill_(0);
  CHECK(same(a.to_vector<float>(), h));
  if (!dev.is_host()) { // from another device: an explicit transfer into the view
    a.select(0, 0).select(0, 0).copy_(clt::full({4}, 3));
    for (size_t k = 0; k < 4; k++)
      h[k] = 3;
    CHECK(same(a.to_vector<float>(), h));
  }
  clt::Tensor before = a.clone();
  CHECK_THROWS(e.fill_(1), CLT_ERR_INVALID_ARGUMENT, "clt_fill_: "); // expanded: read-only
  CHECK_THROWS(e.copy_(clt::ones({4}, dev)), CLT_ERR_INVALID_ARGUMENT, "clt_copy: ");
  CHECK_THROWS(a.select(0, 0).copy_(clt::ones({5}, dev)), CLT_ERR_SHAPE_MISMATCH, "clt_copy: ");
  CHECK_THROWS(a.narrow(1, 2, 5), CLT_ERR_INVALID_ARGUMENT, "clt_narrow: ");
  CHECK_THROWS(a.slice(0, 0, 2, 0), CLT_ERR_INVALID_ARGUMENT, "clt_slice: ");
  CHECK_THROWS(a.permute({0, 0, 1}), CLT_ERR_INVALID_ARGUMENT, "clt_permute: ");
  CHECK_THROWS(a.permute({0, 1, int64_t(1) << 40}), CLT_ERR_INVALID_ARGUMENT, "clt_permute: ");
  CHECK(same(a.to_vector<float>(), before.to_vector<float>())); // untouched by the failures

  // cat and stack: new tensors, from views too
  clt::Tensor b = make_a(dev);
  clt::Tensor ct = clt::cat({b.select(0, 0), b.select(0, 1)}, 1);
  CHECK((ct.shape() == clt::Shape{3, 8}) &&
        same(ct.to_vector<float>(),
             expect({3, 8}, [](const I &x) { return A(x[1] / 4, x[0], x[1] % 4); })));
  CHECK((clt::cat({b, b.narrow(0, 0, 1)}).shape() == clt::Shape{3, 3, 4}));
  clt::Tensor st = clt::stack({b[0], b[1]}, 2);
  CHECK((st.shape() == clt::Shape{3, 4, 2}) &&
        same(st.to_vector<float>(),
             expect({3, 4, 2}, [](const I &x) { return A(x[2], x[0], x[1]); })));
  CHECK((clt::stack({b, b}).shape() == clt::Shape{2, 2, 3, 4}));
  st.fill_(0); // a new tensor: b keeps its elements
  CHECK(same(b.to_vector<float>(),
             expect({2, 3, 4}, [](const I &x) { return A(x[0], x[1], x[2]); })));
  CHECK_THROWS(clt::cat({}), CLT_ERR_INVALID_ARGUMENT, "clt_cat: ");
  CHECK_THROWS(clt::stack({b, b[0]}), CLT_ERR_SHAPE_MISMATCH, "clt_stack: ");
}

static void indexing(clt::Device dev) {
  using I = std::vector<int64_t>;
  clt::Tensor a = make_a(dev);
  CHECK((a[1].shape() == clt::Shape{3, 4}) &&
        same(a[1].to_vector<float>(), expect({3, 4}, [](const I &x) { return A(1, x[0], x[1]); })));
  CHECK(same(a[-1].to_vector<float>(), a[1].to_vector<float>()));
  CHECK(a[1][2][3].dim() == 0 && a[1][2][3].item() == A(1, 2, 3));
  // Python's a[:, 1:3, 2]
  clt::Tensor x = a.index({clt::all, clt::slice(1, 3), 2});
  CHECK(
      (x.shape() == clt::Shape{2, 2}) &&
      same(x.to_vector<float>(), expect({2, 2}, [](const I &i) { return A(i[0], i[1] + 1, 2); })));
  CHECK(same(a.index({1}).to_vector<float>(), a[1].to_vector<float>()));
  CHECK(a.index({}).get() == a.get());
  CHECK((a.index({clt::slice(0, 1)}).shape() == clt::Shape{1, 3, 4})); // missing dims kept
  CHECK((a.index({clt::slice(-1)}).shape() == clt::Shape{1, 3, 4}) &&
        a.index({clt::slice(-1)}).offset() == 12);
  // a[..., 1], a[0, ..., ::2], a[None, 0]
  CHECK(same(a.index({clt::ellipsis, 1}).to_vector<float>(),
             expect({2, 3}, [](const I &i) { return A(i[0], i[1], 1); })));
  CHECK(
      same(a.index({"...", 1}).to_vector<float>(), a.index({clt::ellipsis, 1}).to_vector<float>()));
  CHECK(same(a.index({0, "...", clt::slice(0, CLT_SLICE_END, 2)}).to_vector<float>(),
             expect({3, 2}, [](const I &i) { return A(0, i[0], 2 * i[1]); })));
  CHECK((a.index({clt::newaxis, 0}).shape() == clt::Shape{1, 3, 4}));
  CHECK((a.index({1, clt::newaxis, clt::all, clt::newaxis}).shape() == clt::Shape{1, 3, 1, 4}));
  CHECK((a.index({0, 1, 2, clt::ellipsis}).dim() == 0));
  CHECK_THROWS(a.index({0, 0, 0, 0}), CLT_ERR_INVALID_ARGUMENT, "clt::Tensor::index: ");
  CHECK_THROWS(a.index({"...", 0, "..."}), CLT_ERR_INVALID_ARGUMENT, "clt::Tensor::index: ");
  CHECK_THROWS(a.index({"..x"}), CLT_ERR_INVALID_ARGUMENT, "clt::Tensor::index: ");
  CHECK_THROWS(a.index({0, 3}), CLT_ERR_INVALID_ARGUMENT, "clt_select: ");
  CHECK_THROWS(a[2], CLT_ERR_INVALID_ARGUMENT, "clt_select: ");
  CHECK_THROWS(clt::Tensor().index({0}), CLT_ERR_INVALID_ARGUMENT, "clt_select: ");
  CHECK_THROWS(a.index({clt::slice(0, 2, 0)}), CLT_ERR_INVALID_ARGUMENT, "clt_slice: ");

  // indexed assignment writes into the parent, as Python's a[...] = v
  std::vector<float> h = a.to_vector<float>();
  auto at = [&](int64_t i, int64_t j, int64_t k) -> float & {
    return h[static_cast<size_t>(i * 12 + j * 4 + k)];
  };
  a[1] = 5; // a[1] = 5
  for (int64_t j = 0; j < 3; j++)
    for (int64_t k = 0; k < 4; k++)
      at(1, j, k) = 5;
  CHECK(same(a.to_vector<float>(), h));
  // a[:, 1] = [10, 20, 30, 40], broadcast over the first dimension
  a.index({clt::all, 1}) = clt::from_vector(std::vector<float>{10, 20, 30, 40}, dev);
  for (int64_t i = 0; i < 2; i++)
    for (int64_t k = 0; k < 4; k++)
      at(i, 1, k) = static_cast<float>(10 * (k + 1));
  CHECK(same(a.to_vector<float>(), h));
  a[0][2][3] = -1;
  at(0, 2, 3) = -1;
  a.index({0, clt::slice(0, CLT_SLICE_END, 2), "..."}) = 0.25; // a[0, ::2, ...] = 0.25
  for (int64_t j = 0; j < 3; j += 2)
    for (int64_t k = 0; k < 4; k++)
      at(0, j, k) = 0.25f;
  CHECK(same(a.to_vector<float>(), h));
  a.index_put_({clt::ellipsis, 0}, 9.0)
      .index_put_({1, 2}, a[0][1]); // a[..., 0] = 9; a[1, 2] = a[0, 1]
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++)
      at(i, j, 0) = 9;
  for (int64_t k = 0; k < 4; k++)
    at(1, 2, k) = at(0, 1, k);
  CHECK(same(a.to_vector<float>(), h));
  a[1] += 1; // compound assignment through a view
  a.index({clt::all, clt::all, clt::slice(2)}) *= 2;
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++)
      for (int64_t k = 0; k < 4; k++)
        at(i, j, k) = (at(i, j, k) + (i == 1 ? 1.0f : 0.0f)) * (k >= 2 ? 2.0f : 1.0f);
  CHECK(same(a.to_vector<float>(), h));
  if (!dev.is_host()) { // a host tensor assigned into a view of a device one
    a[0] = clt::full({4}, 8);
    for (int64_t j = 0; j < 3; j++)
      for (int64_t k = 0; k < 4; k++)
        at(0, j, k) = 8;
    CHECK(same(a.to_vector<float>(), h));
  }
  // converted to the view's dtype
  clt::Tensor ti = clt::arange(6, {dev, clt::dtype::i32}).reshape({2, 3});
  ti[1] = clt::from_vector(std::vector<float>{7, 8, 9}, dev);
  ti.index({clt::all, 0}) = 4;
  CHECK((ti.to_vector<int32_t>() == std::vector<int32_t>{4, 1, 2, 4, 8, 9}));
  // a named Tensor is rebound, not written into: a is left alone
  clt::Tensor row = a[0];
  row = a[1];
  CHECK(row.offset() == 12 && same(a.to_vector<float>(), h));
  // a failing assignment leaves the parent untouched
  CHECK_THROWS(a[0] = clt::ones({5}, dev), CLT_ERR_SHAPE_MISMATCH, "clt_copy: ");
  CHECK_THROWS(a[7] = 1, CLT_ERR_INVALID_ARGUMENT, "clt_select: ");
  CHECK_THROWS(a.index_put_({0, 0, 0, 0}, 1.0), CLT_ERR_INVALID_ARGUMENT, "clt::Tensor::index: ");
  clt::Tensor one = clt::ones({3}, dev); // a row of an expanded tensor has its elements apart
  one.expand({2, 3})[1] = 2;
  CHECK(same(one.to_vector<float>(), {2, 2, 2}));
  CHECK_THROWS(clt::ones({3}, dev).expand({2, 3}).index({clt::all, 0}) = 1,
               CLT_ERR_INVALID_ARGUMENT, "clt_fill_: ");
  CHECK(same(a.to_vector<float>(), h));
}

// Autograd: requires_grad_, backward, grad, NoGradGuard, retain_graph, detach, retain_grad.
static void autograd(clt::Device dev) {
  auto x = clt::from_vector<double>({1, 2, 3}, dev);
  CHECK(!x.requires_grad() && &x.requires_grad_() == &x && x.requires_grad());
  CHECK(!x.grad().defined());
  auto y = x * x;
  CHECK(y.requires_grad());
  auto loss = y.sum();
  loss.backward(clt::Tensor(), true); // retain_graph: a second backward may follow
  CHECK((x.grad().to_vector<double>() == std::vector<double>{2, 4, 6}));
  CHECK(x.grad().device() == dev);
  loss.backward(); // accumulates
  CHECK((x.grad().to_vector<double>() == std::vector<double>{4, 8, 12}));
  CHECK_THROWS(loss.backward(), CLT_ERR_INVALID_ARGUMENT, "clt_backward");
  x.zero_grad();
  CHECK(!x.grad().defined());
  {
    clt::NoGradGuard g;
    CHECK(!(x * 2).requires_grad());
    x -= 0.5; // in place on a leaf: allowed with grad mode off
  }
  CHECK((x * 2).requires_grad());
  CHECK((x.to_vector<double>() == std::vector<double>{0.5, 1.5, 2.5}));
  CHECK(!x.detach().requires_grad() && x.detach().device() == dev);
  auto h = x * 3;
  h.retain_grad();
  auto z = (h * h).sum();
  z.backward();
  CHECK((h.grad().to_vector<double>() == std::vector<double>{3, 9, 15}));
  CHECK((x.grad().to_vector<double>() == std::vector<double>{9, 27, 45}));
  // an optimizer over a Params set: one SGD step, w -= 0.5 * 2w
  clt::Params model;
  auto w = clt::from_vector<float>({1, -2}, dev).requires_grad_();
  model.add("w", w);
  clt::optim::SGD sgd(model, 0.5);
  (w * w).sum().backward();
  sgd.step();
  CHECK((w.to_vector<float>() == std::vector<float>{0, 0}));
  sgd.zero_grad();
  CHECK(!w.grad().defined());
  clt::optim::AdamW adam(model, 0.1);
  (w + 1).sum().backward();
  adam.step(); // the first Adam step moves each weight by lr against its gradient's sign
  auto wv = w.to_vector<float>();
  CHECK(std::fabs(wv[0] + 0.1f) < 1e-6f && std::fabs(wv[1] + 0.1f) < 1e-6f);
  CHECK_THROWS(clt::optim::SGD(model, -1.0), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  bool was = clt::set_grad_enabled(false);
  CHECK(was && !clt::set_grad_enabled(true));
  CHECK_THROWS(clt::ones({2}, {dev, clt::dtype::i32}).requires_grad_(), CLT_ERR_DTYPE,
               "clt_requires_grad_");
}

int main() {
  std::vector<clt::Device> devs{clt::cpu()};
  if (clt::device_count() > 1)
    devs.push_back(clt::device("cl:0"));
  for (clt::Device dev : devs) {
    try {
      handles(dev);
      creation(dev);
      transfers(dev);
      operators(dev);
      compute(dev);
      printing(dev);
      errors(dev);
      params_events(dev);
      views(dev);
      indexing(dev);
      autograd(dev);
    } catch (const clt::Error &e) {
      std::fprintf(stderr, "cxx_api: unexpected clt::Error on %s: %s\n", dev.name().c_str(),
                   e.what());
      failures++;
    }
  }
  CHECK(clt::try_gpu(100) == clt::cpu() || clt::try_gpu(100).is_gpu());
  CHECK(clt::default_device().get() == clt_device_default());
  std::printf("cxx_api: %s on %zu device(s)\n", failures ? "FAILED" : "ok", devs.size());
  return failures ? 1 : 0;
}
