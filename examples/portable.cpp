/* SPDX-License-Identifier: MIT */
// portable.cpp - examples/portable.c in C++ (include/clt.hpp): pick a device once, create on the
// host or on the device, move explicitly, compute where the operands live, and bring the result
// home explicitly. It prints what examples/portable prints (tests/cxx_examples.sh compares them).
//
//   $ CLT_DEVICE=cl:0 ./examples/portable_cpp
#include <clt.hpp>

#include <iostream>

int main() try {
  clt::Device dev = clt::default_device(); // first GPU, else cpu; $CLT_DEVICE wins
  std::cout << "device: " << dev.name() << " (" << dev.description() << ")\n";

  clt::Tensor x = clt::ones({3});      // born on the host
  x.move_to(dev);                      // x = x.to(dev)
  clt::Tensor y = clt::ones({3}, dev); // or created there
  clt::Tensor z = x + y;               // both on dev
  std::cout << z << "\n";              // the only implicit trip home

  clt::Tensor back = z.to(clt::cpu()); // the explicit return trip
  std::cout << "back on " << back.device().name() << ":";
  for (float v : back.to_vector<float>())
    std::cout << " " << v;
  std::cout << "\n";
  return 0;
} catch (const clt::Error &e) { // every failure: clt's message, naming the function and the fix
  std::cerr << "portable: " << clt_status_name(e.status()) << "\n  " << e.what() << "\n";
  return 1;
}
