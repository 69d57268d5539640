// cxx_api.cpp - include/clt.hpp, the C++ face (issue 16): handles and reference counts, creation,
// transfers, operators against the C API's results, reductions, printing, errors as clt::Error
// with clt's status and message, Params and events; on cpu and, where there is one, on cl:0.
// Built by 'make check' with -Wall -Wextra -Werror (and under ASan in .ci/lanes/10-asan);
// tests/cxx_compilers.sh compiles it with every C++ compiler there is.
#include <clt.hpp>

#include "cxx_check.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
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
  clt::Tensor y = clt::linear(m, clt::ones({1, 3}, dev), clt::full({1}, 1, dev));
  CHECK(same(y.to_vector<float>(), {4, 13}));
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

  clt::Event start = clt::Event::record(dev);
  clt::Tensor s = (clt::ones({1000}, dev) * 3).sum();
  clt::Event end = clt::Event::record(dev);
  end.wait();
  CHECK(start.elapsed_ms(end) >= 0 && s.item() == 3000);
  dev.synchronize();
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
