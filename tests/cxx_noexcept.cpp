/* SPDX-License-Identifier: MIT */
// cxx_noexcept.cpp - include/clt.hpp with CLT_NO_EXCEPTIONS, built with -fno-exceptions: a failing
// call throws nothing, gives an undefined Tensor (or a zero value) and records the first failure
// of the thread in clt::status(); clt::attempt gives a clt::Result. The views and indexed
// assignment compile without exceptions and report the same way.
#include <clt.hpp>

#include "cxx_check.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static bool starts(const std::string &s, const char *prefix) { return s.rfind(prefix, 0) == 0; }

int main() {
  CHECK(clt::status().ok());
  clt::Tensor a = clt::ones({2}), b = clt::ones({3});
  clt::Tensor c = a + b; // shapes that do not broadcast
  CHECK(!c.defined());
  CHECK(clt::status().code == CLT_ERR_SHAPE_MISMATCH && starts(clt::status().message, "clt_add: "));
  // the first failure is kept: what follows from it does not overwrite it
  clt::Tensor d = c.exp();
  CHECK(!d.defined() && d.sum().item() == 0.0 && d.to_vector<float>().empty());
  CHECK(clt::status().code == CLT_ERR_SHAPE_MISMATCH);
  clt::clear_status();
  CHECK(clt::status().ok());
  // success leaves the status alone
  CHECK((a + a).sum().item() == 4.0 && clt::status().ok());
  clt::Device none = clt::device("cl:99");
  CHECK(none.get() == nullptr && clt::status().code == CLT_ERR_DEVICE_NOT_FOUND);
  clt::clear_status();
  // attempt: the value, or the failure, and the thread's status as it was
  clt::Result<clt::Tensor> r = clt::attempt([&] { return (a + b).exp(); });
  CHECK(!r && r.status.code == CLT_ERR_SHAPE_MISMATCH && starts(r.status.message, "clt_add: "));
  CHECK(clt::status().ok());
  clt::Result<double> ok = clt::attempt([&] { return a.sum().item(); });
  CHECK(ok && ok.value == 2.0);
  // views: a bad index gives an undefined view and the failure; writing into it changes nothing
  clt::Tensor v = clt::arange(3);
  clt::Tensor bad = v.index({0, 0});
  CHECK(!bad.defined() && clt::status().code == CLT_ERR_INVALID_ARGUMENT &&
        starts(clt::status().message, "clt::Tensor::index: "));
  clt::clear_status();
  v[5] = 1;
  CHECK(clt::status().code == CLT_ERR_INVALID_ARGUMENT &&
        starts(clt::status().message, "clt_select: "));
  clt::clear_status();
  v[1] = 7;
  v.index({clt::slice(2)}) = v[0];
  v.index_put_({"..."}, v + 1);
  CHECK(clt::status().ok() && v.to_vector<float>() == std::vector<float>({1, 8, 1}));
  clt::Params p;
  clt::Tensor missing = p["x"];
  CHECK(!missing.defined() && clt::status().code == CLT_ERR_INVALID_ARGUMENT);
  std::printf("cxx_noexcept: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
