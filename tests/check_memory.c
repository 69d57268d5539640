/* check_memory.c - the caching allocator: reuse, statistics, empty_cache, CLT_ALLOC_CACHE=0,
 * and that reused memory never overtakes pending device work on another queue. */
#define _POSIX_C_SOURCE 200809L
#include "check_util.h"

#include <stdlib.h>
#include <string.h>

START_TEST(test_reuse_and_stats) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int k = 0; k < nd; k++) {
    clt_device *d = devs[k];
    CU_OK(clt_device_empty_cache(d));
    clt_memory_stats m0, m1, m2, m3;
    CU_OK(clt_device_memory_stats(d, &m0));
    ck_assert_msg(m0.cached_bytes == 0, "%s: cache not empty", cu_dev_name(d));
    int64_t shape[1] = {1 << 18}; /* 1 MiB of f32 */
    clt_tensor *a, *b;
    CU_OK(clt_ones(CLT_F32, 1, shape, d, &a));
    CU_OK(clt_device_memory_stats(d, &m1));
    ck_assert_msg(m1.allocated_bytes >= m0.allocated_bytes + (1u << 20),
                  "%s: allocated %llu -> %llu", cu_dev_name(d),
                  (unsigned long long)m0.allocated_bytes, (unsigned long long)m1.allocated_bytes);
    ck_assert(m1.peak_allocated_bytes >= m1.allocated_bytes);
    clt_tensor_release(a);
    CU_OK(clt_device_memory_stats(d, &m2));
    ck_assert_msg(m2.cached_bytes >= (1u << 20) && m2.cached_blocks >= 1,
                  "%s: released memory not cached (%llu bytes)", cu_dev_name(d),
                  (unsigned long long)m2.cached_bytes);
    ck_assert(m2.reserved_bytes == m2.allocated_bytes + m2.cached_bytes);
    CU_OK(clt_full(CLT_F32, 1, shape, 7.0, d, &b)); /* the same size: served from the cache */
    CU_OK(clt_device_memory_stats(d, &m3));
    ck_assert_msg(m3.cache_hits == m2.cache_hits + 1, "%s: no cache hit", cu_dev_name(d));
    ck_assert(m3.reserved_bytes == m2.reserved_bytes);
    float *v = cu_read(b);
    for (int64_t i = 0; i < shape[0]; i += 4099)
      ck_assert_msg(v[i] == 7.0f, "%s: reused memory holds %g", cu_dev_name(d), v[i]);
    free(v);
    clt_tensor_release(b);
    CU_OK(clt_device_empty_cache(d));
    CU_OK(clt_device_memory_stats(d, &m3));
    ck_assert_msg(m3.cached_bytes == 0 && m3.cached_blocks == 0, "%s: cache not emptied",
                  cu_dev_name(d));
  }
  CU_OK(clt_device_empty_cache(NULL));
  clt_memory_stats m;
  CU_FAILS(clt_device_memory_stats(NULL, &m), CLT_ERR_INVALID_ARGUMENT, "clt_device_memory_stats");
  CU_FAILS(clt_device_memory_stats(clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT,
           "clt_device_memory_stats");
}
END_TEST

/* A tensor on cl:0 is copied to cl:1 (the copy runs on cl:1's queue) and released at once; a
 * new tensor reusing its memory is written on cl:0's queue. The write must wait for cl:1's read,
 * or the copy would see the new values. */
START_TEST(test_reuse_waits_for_other_queue) {
  if (!cu_need_cl("test_reuse_waits_for_other_queue", 2))
    return;
  clt_device *d0 = clt_device_at(0), *d1 = clt_device_at(1);
  int64_t n = 4 << 20;
  for (int round = 0; round < 4; round++) {
    clt_tensor *a, *copy, *b;
    CU_OK(clt_arange(0, (double)n, 1, CLT_F32, d0, &a));
    CU_OK(clt_to(a, d1, &copy));
    clt_tensor_release(a);
    clt_memory_stats before, after;
    CU_OK(clt_device_memory_stats(d0, &before));
    CU_OK(clt_full(CLT_F32, 1, &n, -1.0, d0, &b));
    CU_OK(clt_device_memory_stats(d0, &after));
    ck_assert_msg(after.cache_hits == before.cache_hits + 1, "the memory was not reused");
    float *v = cu_read(copy);
    for (int64_t i = 0; i < n; i += 997)
      ck_assert_msg(v[i] == (float)i, "round %d: copy[%lld] = %g: reuse overtook the copy", round,
                    (long long)i, v[i]);
    free(v);
    clt_tensor_release(copy);
    clt_tensor_release(b);
  }
}
END_TEST

START_TEST(test_cache_off) {
  if (!cu_forked) {
    cu_skip("test_cache_off", "needs CK_FORK (sets CLT_ALLOC_CACHE)");
    return;
  }
  setenv("CLT_ALLOC_CACHE", "0", 1);
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int k = 0; k < nd; k++) {
    int64_t shape[1] = {1000};
    clt_tensor *a;
    for (int i = 0; i < 3; i++) {
      CU_OK(clt_ones(CLT_I32, 1, shape, devs[k], &a));
      clt_tensor_release(a);
    }
    clt_memory_stats m;
    CU_OK(clt_device_memory_stats(devs[k], &m));
    ck_assert_msg(m.cache_hits == 0 && m.cached_bytes == 0 && m.allocated_bytes == 0,
                  "%s: cache used with CLT_ALLOC_CACHE=0", cu_dev_name(devs[k]));
    ck_assert(m.peak_allocated_bytes >= 4000);
  }
}
END_TEST

/* Asking a device for more memory than it has is a clean error, and the library still works. */
START_TEST(test_out_of_memory) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int v = 1; v < nd; v++) {
    clt_device_info info;
    CU_OK(clt_device_info_get(devs[v], &info));
    int64_t n = (int64_t)(info.memory_bytes / 4) * 2; /* twice the device's memory in f32 */
    clt_tensor *t = CU_SENTINEL;
    CU_FAILS(clt_empty(CLT_F32, 1, &n, devs[v], &t), CLT_ERR_OUT_OF_MEMORY, "clt_empty");
    ck_assert_ptr_eq(t, CU_SENTINEL);
    ck_assert_msg(strstr(clt_last_error(), cu_dev_name(devs[v])) != NULL,
                  "the message names no device: %s", clt_last_error());
    int64_t small = 1000;
    clt_tensor *a, *s;
    CU_OK(clt_ones(CLT_F32, 1, &small, devs[v], &a));
    CU_OK(clt_sum(a, &s));
    double total;
    CU_OK(clt_item(s, &total));
    ck_assert(total == 1000.0);
    clt_tensor_release(a);
    clt_tensor_release(s);
  }
}
END_TEST

/* A tensor released while a kernel still reads it: the memory returns to the cache and is
 * reused at once by a tensor written on the same queue; the kernel's result must not see it. */
START_TEST(test_reuse_while_kernel_runs) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  int64_t n = 2 << 20;
  for (int v = 0; v < nd; v++) {
    for (int round = 0; round < 3; round++) {
      clt_tensor *a, *b, *c, *d;
      CU_OK(clt_arange(0, (double)n, 1, CLT_F32, devs[v], &a));
      CU_OK(clt_ones(CLT_F32, 1, &n, devs[v], &b));
      CU_OK(clt_add(a, b, &c)); /* enqueued; a and b may still be read */
      clt_tensor_release(a);
      clt_tensor_release(b);
      CU_OK(clt_full(CLT_F32, 1, &n, -7.0, devs[v], &d)); /* reuses a's or b's memory */
      float *got = cu_read(c);
      for (int64_t i = 0; i < n; i += 1021)
        ck_assert_msg(got[i] == (float)i + 1.0f, "%s round %d: c[%lld] = %g", cu_dev_name(devs[v]),
                      round, (long long)i, got[i]);
      free(got);
      clt_tensor_release(c);
      clt_tensor_release(d);
    }
  }
}
END_TEST

Suite *memory_suite(void) {
  Suite *s = suite_create("memory");
  TCase *tc = cu_tcase("caching allocator");
  tcase_add_test(tc, test_reuse_and_stats);
  tcase_add_test(tc, test_reuse_waits_for_other_queue);
  tcase_add_test(tc, test_cache_off);
  tcase_add_test(tc, test_out_of_memory);
  tcase_add_test(tc, test_reuse_while_kernel_runs);
  suite_add_tcase(s, tc);
  return s;
}
