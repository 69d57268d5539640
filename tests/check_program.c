/* check_program.c - run-time kernel builds: CLT_KERNEL_PATH and build failures. */
#define _POSIX_C_SOURCE 200809L
#include "check_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Makes a temp directory holding the given kernel files; returns its path (static storage). */
static const char *kernel_dir(const char *common, const char *elementwise) {
  static char dir[64];
  snprintf(dir, sizeof dir, "/tmp/clt-kernels-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[128];
  FILE *f;
  if (common) {
    snprintf(path, sizeof path, "%s/common.cl", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs(common, f);
    fclose(f);
  }
  if (elementwise) {
    snprintf(path, sizeof path, "%s/elementwise.cl", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs(elementwise, f);
    fclose(f);
  }
  return dir;
}

static void remove_dir(const char *dir) {
  char path[128];
  snprintf(path, sizeof path, "%s/common.cl", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/elementwise.cl", dir);
  unlink(path);
  rmdir(dir);
}

/* A replacement add kernel that ignores its operands: proves the source came from disk. */
static const char fake_elementwise[] =
    "__kernel void NAME(__global TO *out, __global const TA *a, __global const TB *b,\n"
    "                   ulong n, ulong step) {\n"
    "#if CLT_CHUNKED\n"
    "  ulong s = get_global_id(0) * step, e = min(s + step, n);\n"
    "  for (ulong i = s; i < e; i++) out[i] = (TO)42;\n"
    "#else\n"
    "  for (ulong i = get_global_id(0); i < n; i += step) out[i] = (TO)42;\n"
    "#endif\n"
    "}\n";

START_TEST(test_kernel_path_loads_from_disk) {
  if (!cu_forked) {
    cu_skip("test_kernel_path_loads_from_disk", "needs CK_FORK (sets CLT_KERNEL_PATH)");
    return;
  }
  const char *dir = kernel_dir("/* empty prelude */\n", fake_elementwise);
  setenv("CLT_KERNEL_PATH", dir, 1);
  if (!cu_need_cl("test_kernel_path_loads_from_disk", 1)) {
    remove_dir(dir);
    return;
  }
  clt_device *d = clt_device_at(0);
  int64_t shape[1] = {1000};
  clt_tensor *a, *b, *c;
  CU_OK(clt_ones(CLT_F32, 1, shape, d, &a));
  CU_OK(clt_ones(CLT_F32, 1, shape, d, &b));
  CU_OK(clt_add(a, b, &c));
  float out[1000];
  CU_OK(clt_tensor_read(c, out, sizeof out));
  for (int i = 0; i < 1000; i++)
    ck_assert_msg(out[i] == 42.0f, "out[%d] = %g: the kernel did not come from CLT_KERNEL_PATH", i,
                  out[i]);
  /* The host backend is untouched by kernel sources. */
  clt_tensor *ha, *hc;
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_cpu(), &ha));
  CU_OK(clt_add(ha, ha, &hc));
  double v;
  clt_tensor *s;
  CU_OK(clt_sum(hc, &s));
  CU_OK(clt_item(s, &v));
  ck_assert_msg(v == 2000.0, "host sum %g", v);
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(c);
  clt_tensor_release(ha);
  clt_tensor_release(hc);
  clt_tensor_release(s);
  remove_dir(dir);
}
END_TEST

START_TEST(test_build_failure_reports_log) {
  if (!cu_forked) {
    cu_skip("test_build_failure_reports_log", "needs CK_FORK (sets CLT_KERNEL_PATH)");
    return;
  }
  const char *dir = kernel_dir("", "__kernel void NAME(__global TO *out { this is not C }\n");
  setenv("CLT_KERNEL_PATH", dir, 1);
  if (!cu_need_cl("test_build_failure_reports_log", 1)) {
    remove_dir(dir);
    return;
  }
  int64_t shape[1] = {8};
  clt_tensor *a;
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_device_at(0), &a));
  clt_tensor *c = CU_SENTINEL;
  CU_FAILS(clt_add(a, a, &c), CLT_ERR_BUILD, "clt_add");
  ck_assert_ptr_eq(c, CU_SENTINEL);
  const char *msg = clt_last_error();
  ck_assert_msg(strstr(msg, "kernels/elementwise.cl") && strstr(msg, "cl:0") &&
                    strstr(msg, "build log"),
                "message lacks the file, device or log: %s", msg);
  /* The failure is not cached as a success, and the library stays usable. */
  CU_FAILS(clt_add(a, a, &c), CLT_ERR_BUILD, "clt_add");
  clt_tensor_release(a);
  remove_dir(dir);
}
END_TEST

START_TEST(test_kernel_path_missing_file) {
  if (!cu_forked) {
    cu_skip("test_kernel_path_missing_file", "needs CK_FORK (sets CLT_KERNEL_PATH)");
    return;
  }
  const char *dir = kernel_dir("", NULL); /* no elementwise.cl */
  setenv("CLT_KERNEL_PATH", dir, 1);
  if (!cu_need_cl("test_kernel_path_missing_file", 1)) {
    remove_dir(dir);
    return;
  }
  int64_t shape[1] = {8};
  clt_tensor *a, *c = CU_SENTINEL;
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_device_at(0), &a));
  CU_FAILS(clt_add(a, a, &c), CLT_ERR_IO, "clt_add");
  ck_assert_msg(strstr(clt_last_error(), "elementwise.cl") != NULL, "%s", clt_last_error());
  ck_assert_ptr_eq(c, CU_SENTINEL);
  clt_tensor_release(a);
  remove_dir(dir);
}
END_TEST

Suite *program_suite(void) {
  Suite *s = suite_create("program");
  TCase *tc = cu_tcase("kernel sources");
  tcase_add_test(tc, test_kernel_path_loads_from_disk);
  tcase_add_test(tc, test_build_failure_reports_log);
  tcase_add_test(tc, test_kernel_path_missing_file);
  suite_add_tcase(s, tc);
  return s;
}
