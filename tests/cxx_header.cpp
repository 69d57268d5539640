/* SPDX-License-Identifier: MIT */
// cxx_header.cpp - <clt.h> must compile as C++ (extern "C", no C-only constructs) and link.
#include <clt.h>

#include <cstdio>
#include <cstring>

int main() {
  clt_status s = CLT_OK;
  clt_dtype dt = CLT_F32;
  clt_tensor *t = nullptr;
  clt_device_info info;
  (void)t;
  (void)info;
  const char *name = clt_dtype_name(dt);
  if (name == nullptr || std::strcmp(name, "f32") != 0) {
    std::fprintf(stderr, "cxx_header: clt_dtype_name(CLT_F32) is \"%s\"\n", name ? name : "(null)");
    return 1;
  }
  if (std::strcmp(clt_status_name(s), "OK") != 0 ||
      std::strcmp(clt_status_name(CLT_ERR_DEVICE_MISMATCH), "ERR_DEVICE_MISMATCH") != 0) {
    std::fprintf(stderr, "cxx_header: clt_status_name gives \"%s\"\n", clt_status_name(s));
    return 1;
  }
  if (clt_dtype_size(CLT_F64) != 8) {
    std::fprintf(stderr, "cxx_header: clt_dtype_size(CLT_F64) is %zu\n", clt_dtype_size(CLT_F64));
    return 1;
  }
  std::printf("cxx_header: ok (clt %d.%d.%d)\n", CLT_VERSION_MAJOR, CLT_VERSION_MINOR,
              CLT_VERSION_PATCH);
  return 0;
}
