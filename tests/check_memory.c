/* SPDX-License-Identifier: MIT */
/* check_memory.c - the caching allocator: reuse, statistics, empty_cache, CLT_ALLOC_CACHE=0,
 * host blocks (cached like device buffers, huge-page aligned), and that reused memory never
 * overtakes pending device work on another queue nor a tensor still using it. */
#define _POSIX_C_SOURCE 200809L
#include "check_util.h"

#include <stdint.h>
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

/* Host blocks go to cpu's cache on release and come back to the next tensor of their size, at
 * the same address; clt_device_empty_cache(clt_cpu()) gives them back and the statistics drop.
 * Large blocks are 2 MiB-aligned (for transparent huge pages). */
START_TEST(test_host_cache) {
  clt_device *cpu = clt_cpu();
  CU_OK(clt_device_empty_cache(cpu));
  int64_t sizes[2] = {1000, 4 << 20}; /* 4 KB, and 16 MiB of f32 (huge-page path) */
  for (int k = 0; k < 2; k++) {
    clt_memory_stats m0, m1, m2, m3;
    CU_OK(clt_device_memory_stats(cpu, &m0));
    clt_tensor *a, *b;
    CU_OK(clt_ones(CLT_F32, 1, &sizes[k], cpu, &a));
    void *pa = clt_tensor_data(a);
    ck_assert_ptr_nonnull(pa);
    if (sizes[k] * 4 >= (2 << 20))
      ck_assert_msg((uintptr_t)pa % (2u << 20) == 0, "a 16 MiB host block at %p: not 2 MiB-aligned",
                    pa);
    clt_tensor_release(a);
    CU_OK(clt_device_memory_stats(cpu, &m1));
    ck_assert_msg(m1.cached_bytes >= m0.cached_bytes + (uint64_t)sizes[k] * 4 &&
                      m1.cached_blocks == m0.cached_blocks + 1,
                  "released host block not cached (%llu -> %llu bytes)",
                  (unsigned long long)m0.cached_bytes, (unsigned long long)m1.cached_bytes);
    CU_OK(clt_empty(CLT_I32, 1, &sizes[k], cpu, &b)); /* same bytes, another dtype */
    CU_OK(clt_device_memory_stats(cpu, &m2));
    ck_assert_msg(m2.cache_hits == m1.cache_hits + 1, "no cache hit for the host block");
    ck_assert_ptr_eq(clt_tensor_data(b), pa);
    ck_assert(m2.reserved_bytes == m1.reserved_bytes);
    clt_tensor_release(b);
    CU_OK(clt_device_empty_cache(cpu));
    CU_OK(clt_device_memory_stats(cpu, &m3));
    ck_assert_msg(m3.cached_bytes == 0 && m3.cached_blocks == 0 &&
                      m3.reserved_bytes == m3.allocated_bytes &&
                      m3.reserved_bytes + (uint64_t)sizes[k] * 4 <= m2.reserved_bytes,
                  "empty_cache(cpu) kept %llu bytes (reserved %llu -> %llu)",
                  (unsigned long long)m3.cached_bytes, (unsigned long long)m2.reserved_bytes,
                  (unsigned long long)m3.reserved_bytes);
  }
}
END_TEST

/* A host block is not handed out while a tensor still uses it: a view sharing the storage keeps
 * it, and so does a pending asynchronous copy out of it. */
START_TEST(test_host_block_in_use) {
  clt_device *cpu = clt_cpu();
  int64_t n = 1 << 20, shape2[2] = {1024, 1024};
  clt_tensor *a, *view, *b;
  CU_OK(clt_arange(0, (double)n, 1, CLT_F32, cpu, &a));
  CU_OK(clt_reshape(a, 2, shape2, &view));
  void *pa = clt_tensor_data(a);
  clt_tensor_release(a); /* the view still holds the block */
  CU_OK(clt_full(CLT_F32, 1, &n, -1.0, cpu, &b));
  ck_assert_ptr_ne(clt_tensor_data(b), pa);
  const float *v = clt_tensor_data(view);
  for (int64_t i = 0; i < n; i += 997)
    ck_assert_msg(v[i] == (float)i, "view[%lld] = %g: its block was reused", (long long)i, v[i]);
  clt_tensor_release(view);
  clt_tensor_release(b);

  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int k = 1; k < nd; k++)
    for (int round = 0; round < 4; round++) {
      clt_tensor *src, *dev_copy, *c;
      CU_OK(clt_arange(0, (double)(4 * n), 1, CLT_F32, cpu, &src));
      CU_OK(clt_to(src, devs[k], &dev_copy)); /* asynchronous: reads src's block */
      clt_tensor_release(src);
      int64_t n4 = 4 * n;
      CU_OK(clt_full(CLT_F32, 1, &n4, -1.0, cpu, &c)); /* must not get src's block too early */
      float *got = cu_read(dev_copy);
      for (int64_t i = 0; i < n4; i += 1009)
        ck_assert_msg(got[i] == (float)i, "%s round %d: copy[%lld] = %g: the host block was reused",
                      cu_dev_name(devs[k]), round, (long long)i, got[i]);
      free(got);
      clt_tensor_release(dev_copy);
      clt_tensor_release(c);
    }
}
END_TEST

/* Reused memory keeps what it held: nothing may rely on it being zero, but clt_zeros must still
 * give zeros from a reused block, on every device. */
START_TEST(test_zeros_from_reused_block) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int k = 0; k < nd; k++) {
    int64_t n = 300000;
    clt_dtype dts[2] = {CLT_F32, CLT_I64};
    for (int j = 0; j < 2; j++) {
      clt_tensor *a, *z;
      CU_OK(clt_full(dts[j], 1, &n, 7.0, devs[k], &a));
      CU_OK(clt_device_synchronize(devs[k]));
      clt_tensor_release(a);
      clt_memory_stats m0, m1;
      CU_OK(clt_device_memory_stats(devs[k], &m0));
      CU_OK(clt_zeros(dts[j], 1, &n, devs[k], &z));
      CU_OK(clt_device_memory_stats(devs[k], &m1));
      ck_assert_msg(m1.cache_hits == m0.cache_hits + 1, "%s: clt_zeros did not reuse the block",
                    cu_dev_name(devs[k]));
      double *v = cu_read_double(z);
      for (int64_t i = 0; i < n; i++)
        if (v[i] != 0.0)
          ck_abort_msg("%s %s: zeros[%lld] = %g from a reused block", cu_dev_name(devs[k]),
                       cu_dt_name(dts[j]), (long long)i, v[i]);
      free(v);
      clt_tensor_release(z);
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
  tcase_add_test(tc, test_host_cache);
  tcase_add_test(tc, test_host_block_in_use);
  tcase_add_test(tc, test_zeros_from_reused_block);
  suite_add_tcase(s, tc);
  return s;
}
