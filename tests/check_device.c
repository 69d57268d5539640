/* SPDX-License-Identifier: MIT */
/* check_device.c - the device registry: names, lookup, default device, info, errors. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"

START_TEST(test_status_table) {
  ck_assert_str_eq(clt_version(), "0.1.0");
  ck_assert_str_eq(clt_status_name(CLT_OK), "OK");
  ck_assert_str_eq(clt_status_name(CLT_ERR_DEVICE_MISMATCH), "ERR_DEVICE_MISMATCH");
  ck_assert_str_eq(clt_status_name(CLT_ERR_INTERNAL), "ERR_INTERNAL");
  ck_assert_str_eq(clt_status_name((clt_status)-99), "UNKNOWN");
  ck_assert_str_eq(clt_status_name((clt_status)1), "UNKNOWN");
  ck_assert_str_eq(clt_status_message(CLT_ERR_DEVICE_MISMATCH),
                   "operands are on different devices");
  ck_assert_str_eq(clt_status_message(CLT_OK), "success");
  for (int s = -1; s >= -13; s--) {
    const char *name = clt_status_name((clt_status)s);
    ck_assert_msg(name != NULL && strncmp(name, "ERR_", 4) == 0, "status %d has name %s", s,
                  name ? name : "(null)");
    const char *msg = clt_status_message((clt_status)s);
    ck_assert_msg(msg != NULL && msg[0] != '\0', "status %d has no message", s);
  }
  if (cu_forked) { /* nothing failed yet in this process */
    ck_assert_str_eq(clt_last_error(), "");
    ck_assert_int_eq(clt_last_status(), CLT_OK);
  }
  clt_device *d = CU_SENTINEL;
  CU_FAILS(clt_device_get("nonsense", &d), CLT_ERR_DEVICE_NOT_FOUND, "clt_device_get");
  ck_assert_ptr_eq(d, CU_SENTINEL);
  clt_clear_error();
  ck_assert_str_eq(clt_last_error(), "");
  ck_assert_int_eq(clt_last_status(), CLT_OK);
}
END_TEST

START_TEST(test_cpu) {
  clt_device *cpu = clt_cpu();
  ck_assert_ptr_nonnull(cpu);
  ck_assert_ptr_eq(clt_cpu(), cpu);
  ck_assert_str_eq(clt_device_name(cpu), "cpu");
  ck_assert_int_eq(clt_device_is_host(cpu), 1);
  ck_assert_int_eq(clt_device_is_gpu(cpu), 0);
  ck_assert_int_eq(clt_device_has_fp64(cpu), 1);
  const char *desc = clt_device_description(cpu);
  ck_assert_msg(desc != NULL && desc[0] != '\0', "cpu has an empty description");

  clt_device_info info;
  memset(&info, 0xAB, sizeof info);
  CU_OK(clt_device_info_get(cpu, &info));
  ck_assert_str_eq(info.name, "cpu");
  ck_assert_int_eq(info.kind, CLT_DEVICE_HOST);
  ck_assert_str_eq(info.kind_name, "host");
  ck_assert_ptr_nonnull(info.vendor);
  ck_assert_ptr_nonnull(info.model);
  ck_assert_ptr_nonnull(info.driver_version);
  ck_assert_str_eq(info.cl_version, "");
  ck_assert_str_eq(info.platform, "");
  ck_assert_msg(info.memory_bytes > 0, "cpu memory_bytes is 0");
  ck_assert_msg(info.compute_units > 0, "cpu compute_units is %d", info.compute_units);
  ck_assert_int_eq(info.fp64, 1);
  ck_assert_int_eq(info.platform_index, -1);
  ck_assert_int_eq(info.context_index, -1);
}
END_TEST

START_TEST(test_cl_devices) {
  if (!cu_need_cl("test_cl_devices", 2))
    return;
  int count = clt_device_count(), ncl = cu_cl_count();
  ck_assert_msg(ncl == 2, "POCL_DEVICES=\"pthread pthread\" should give 2 devices, found %d", ncl);
  for (int i = 0; i < ncl; i++) {
    char want[16];
    snprintf(want, sizeof want, "cl:%d", i);
    clt_device *d = clt_device_at(i);
    ck_assert_msg(d != NULL, "clt_device_at(%d) is NULL: %s", i, clt_last_error());
    ck_assert_msg(d != clt_cpu(), "clt_device_at(%d) is cpu", i);
    ck_assert_str_eq(clt_device_name(d), want);
    ck_assert_int_eq(clt_device_is_host(d), 0);
    clt_device *g = CU_SENTINEL;
    CU_OK(clt_device_get(want, &g));
    ck_assert_msg(g == d, "clt_device_get(\"%s\") is not clt_device_at(%d)", want, i);
    const char *desc = clt_device_description(d);
    ck_assert_msg(desc != NULL && desc[0] != '\0', "%s has an empty description", want);
  }
  ck_assert_ptr_ne(clt_device_at(0), clt_device_at(1));

  clt_clear_error();
  ck_assert_ptr_null(clt_device_at(count));
  ck_assert_msg(clt_last_status() != CLT_OK, "clt_device_at(%d) set no error", count);
  cu_assert_prefix(clt_last_error(), "clt_device_at", "clt_device_at(count)");
  clt_clear_error();
  ck_assert_ptr_null(clt_device_at(-1));
  ck_assert_msg(clt_last_status() != CLT_OK, "clt_device_at(-1) set no error");
  cu_assert_prefix(clt_last_error(), "clt_device_at", "clt_device_at(-1)");
}
END_TEST

START_TEST(test_device_get) {
  clt_device *d = CU_SENTINEL;
  CU_OK(clt_device_get("cpu", &d));
  ck_assert_ptr_eq(d, clt_cpu());

  d = CU_SENTINEL;
  CU_FAILS(clt_device_get("cl:5", &d), CLT_ERR_DEVICE_NOT_FOUND, "clt_device_get");
  ck_assert_ptr_eq(d, CU_SENTINEL);
  const char *msg = clt_last_error();
  ck_assert_msg(strstr(msg, "no device named 'cl:5'") != NULL, "message: %s", msg);
  /* The message lists what exists, in the registry's order. */
  char avail[256] = "available: cpu";
  for (int i = 0; i < clt_device_count(); i++) {
    size_t n = strlen(avail);
    snprintf(avail + n, sizeof avail - n, ", %s", clt_device_name(clt_device_at(i)));
  }
  ck_assert_msg(strstr(msg, avail) != NULL, "message lacks \"%s\": %s", avail, msg);
  if (cu_cl_count() == 2)
    ck_assert_msg(strstr(msg, "available: cpu, cl:0, cl:1") != NULL, "message: %s", msg);

  CU_FAILS(clt_device_get("", &d), CLT_ERR_DEVICE_NOT_FOUND, "clt_device_get");
  CU_FAILS(clt_device_get("cl:", &d), CLT_ERR_DEVICE_NOT_FOUND, "clt_device_get");
  CU_FAILS(clt_device_get(NULL, &d), CLT_ERR_INVALID_ARGUMENT, "clt_device_get");
  ck_assert_ptr_eq(d, CU_SENTINEL);
  CU_FAILS(clt_device_get("cpu", NULL), CLT_ERR_INVALID_ARGUMENT, "clt_device_get");
}
END_TEST

/* The first GPU, else cpu: what clt_device_default() gives without $CLT_DEVICE. */
static clt_device *first_gpu_or_cpu(void) {
  for (int i = 0; i < clt_device_count(); i++)
    if (clt_device_is_gpu(clt_device_at(i)))
      return clt_device_at(i);
  return clt_cpu();
}

START_TEST(test_default_unset) {
  if (!cu_forked) {
    cu_skip("test_default_unset", "needs a fresh process per test (CK_FORK=no)");
    return;
  }
  unsetenv("CLT_DEVICE");
  clt_device *def = clt_device_default();
  ck_assert_ptr_nonnull(def);
  clt_device *want = first_gpu_or_cpu();
  ck_assert_msg(def == want, "default is %s, expected %s", cu_dev_name(def), cu_dev_name(want));
  ck_assert_ptr_eq(clt_device_default(), def);
  ck_assert_msg(clt_try_gpu(0) == want, "clt_try_gpu(0) is %s, expected %s",
                cu_dev_name(clt_try_gpu(0)), cu_dev_name(want));
  ck_assert_ptr_eq(clt_try_gpu(CU_MAX_DEVICES + 5), clt_cpu());
  ck_assert_ptr_eq(clt_try_gpu(-1), clt_cpu());
  /* Under PoCL every OpenCL device is a CPU device: no GPU at all. */
  int gpus = 0;
  for (int i = 0; i < clt_device_count(); i++)
    gpus += clt_device_is_gpu(clt_device_at(i));
  if (gpus == 0) {
    ck_assert_ptr_eq(def, clt_cpu());
    ck_assert_ptr_eq(clt_try_gpu(0), clt_cpu());
  }
}
END_TEST

START_TEST(test_default_env) {
  if (!cu_forked) {
    cu_skip("test_default_env", "needs a fresh process per test (CK_FORK=no)");
    return;
  }
  setenv("CLT_DEVICE", "cl:1", 1); /* before any clt call in this process */
  if (!cu_need_cl("test_default_env", 2))
    return;
  clt_device *def = clt_device_default();
  ck_assert_msg(def == clt_device_at(1), "with CLT_DEVICE=cl:1 the default is %s",
                cu_dev_name(def));
}
END_TEST

START_TEST(test_default_env_cl0) {
  if (!cu_forked) {
    cu_skip("test_default_env_cl0", "needs a fresh process per test (CK_FORK=no)");
    return;
  }
  setenv("CLT_DEVICE", "cl:0", 1);
  if (!cu_need_cl("test_default_env_cl0", 1))
    return;
  clt_device *def = clt_device_default();
  ck_assert_msg(def == clt_device_at(0), "with CLT_DEVICE=cl:0 the default is %s",
                cu_dev_name(def));
}
END_TEST

START_TEST(test_default_env_bad) {
  if (!cu_forked) {
    cu_skip("test_default_env_bad", "needs a fresh process per test (CK_FORK=no)");
    return;
  }
  setenv("CLT_DEVICE", "cl:42", 1);
  /* Capture stderr for the warning. */
  cu_stderr cap;
  cu_stderr_begin(&cap);
  clt_device *def = clt_device_default();
  char text[1024] = "";
  cu_stderr_end(&cap, text, sizeof text);
  ck_assert_ptr_nonnull(def);
  clt_device *want = first_gpu_or_cpu();
  ck_assert_msg(def == want, "with CLT_DEVICE=cl:42 the default is %s, expected %s",
                cu_dev_name(def), cu_dev_name(want));
  ck_assert_msg(strstr(text, "cl:42") != NULL, "no warning naming cl:42 on stderr (got \"%s\")",
                text);
}
END_TEST

START_TEST(test_cl_info) {
  if (!cu_forked) {
    cu_skip("test_cl_info", "needs a fresh process per test (CK_FORK=no)");
    return;
  }
  unsetenv("CLT_CONTEXT_PER_DEVICE");
  if (!cu_need_cl("test_cl_info", 2))
    return;
  int ctx[CU_MAX_DEVICES], plat[CU_MAX_DEVICES];
  /* the OpenCL devices' facts; the reference backend's are tests/check_ref.c's */
  for (int i = 0; i < cu_cl_count() && i < CU_MAX_DEVICES; i++) {
    clt_device *d = clt_device_at(i);
    const char *name = clt_device_name(d);
    clt_device_info info;
    memset(&info, 0xAB, sizeof info);
    CU_OK(clt_device_info_get(d, &info));
    ck_assert_str_eq(info.name, name);
    /* PoCL's devices are CPUs with fp64; Oclgrind (the 60-gpu lane) is a GPU. */
    bool pocl = strstr(info.platform, "Portable Computing Language") != NULL;
    if (pocl || cu_is_oclgrind(d)) {
      clt_device_kind want = pocl ? CLT_DEVICE_CL_CPU : CLT_DEVICE_CL_GPU;
      ck_assert_msg(info.kind == want, "%s: kind %d, expected %d (%s)", name, (int)info.kind,
                    (int)want, info.platform);
      ck_assert_str_eq(info.kind_name, pocl ? "cpu" : "gpu");
    }
    ck_assert_msg(info.vendor && info.model && info.driver_version && info.platform,
                  "%s: NULL strings in info", name);
    ck_assert_msg(strncmp(info.cl_version, "OpenCL ", 7) == 0, "%s: cl_version \"%s\"", name,
                  info.cl_version);
    ck_assert_msg(info.platform[0] != '\0', "%s: empty platform name", name);
    ck_assert_msg(info.compute_units > 0, "%s: compute_units %d", name, info.compute_units);
    ck_assert_msg(info.memory_bytes > 0, "%s: memory_bytes 0", name);
    ck_assert_msg(info.max_alloc_bytes > 0 && info.max_alloc_bytes <= info.memory_bytes,
                  "%s: max_alloc_bytes %llu, memory %llu", name,
                  (unsigned long long)info.max_alloc_bytes, (unsigned long long)info.memory_bytes);
    ck_assert_int_eq(info.fp64, clt_device_has_fp64(d));
    ck_assert_msg(!pocl || info.fp64 == 1,
                  "%s: PoCL's pthread device supports fp64 (info.fp64 = %d)", name, info.fp64);
    ck_assert_msg(info.platform_index >= 0, "%s: platform_index %d", name, info.platform_index);
    ck_assert_msg(info.context_index >= 0, "%s: context_index %d", name, info.context_index);
    ck_assert_int_eq(clt_device_is_gpu(d), info.kind == CLT_DEVICE_CL_GPU);
    ctx[i] = info.context_index;
    plat[i] = info.platform_index;
  }
  /* Devices of one platform share a context; two vendors (Oclgrind and PoCL) cannot. */
  ck_assert_msg((ctx[0] == ctx[1]) == (plat[0] == plat[1]),
                "cl:0 and cl:1 (platforms %d and %d): contexts %d and %d", plat[0], plat[1], ctx[0],
                ctx[1]);

  clt_device_info info;
  CU_FAILS(clt_device_info_get(NULL, &info), CLT_ERR_INVALID_ARGUMENT, "clt_device_info_get");
  CU_FAILS(clt_device_info_get(clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_device_info_get");
}
END_TEST

START_TEST(test_synchronize) {
  clt_device *devs[CU_MAX_DEVICES];
  int n = cu_devices(devs);
  CU_OK(clt_device_synchronize(NULL));
  for (int i = 0; i < n; i++) {
    clt_status s = clt_device_synchronize(devs[i]);
    ck_assert_msg(s == CLT_OK, "clt_device_synchronize(%s): %s: %s", cu_dev_name(devs[i]),
                  clt_status_name(s), clt_last_error());
  }
  /* Again with work pending on every device. */
  int64_t shape[1] = {1000};
  clt_tensor *t[CU_MAX_DEVICES];
  for (int i = 0; i < n; i++)
    CU_OK(clt_full(CLT_F32, 1, shape, 2.5, devs[i], &t[i]));
  CU_OK(clt_device_synchronize(NULL));
  for (int i = 0; i < n; i++) {
    double *v = cu_read_double(t[i]);
    ck_assert_msg(v[0] == 2.5 && v[999] == 2.5, "%s: full gave %g, %g", cu_dev_name(devs[i]), v[0],
                  v[999]);
    free(v);
    clt_tensor_release(t[i]);
  }
}
END_TEST

Suite *device_suite(void) {
  Suite *s = suite_create("device");
  TCase *tc = cu_tcase("registry");
  tcase_add_test(tc, test_status_table);
  tcase_add_test(tc, test_cpu);
  tcase_add_test(tc, test_cl_devices);
  tcase_add_test(tc, test_device_get);
  tcase_add_test(tc, test_cl_info);
  tcase_add_test(tc, test_synchronize);
  suite_add_tcase(s, tc);
  tc = cu_tcase("default");
  tcase_add_test(tc, test_default_unset);
  tcase_add_test(tc, test_default_env);
  tcase_add_test(tc, test_default_env_cl0);
  tcase_add_test(tc, test_default_env_bad);
  suite_add_tcase(s, tc);
  return s;
}
