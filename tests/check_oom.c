/* SPDX-License-Identifier: MIT */
/* check_oom.c - asking a device for more than it has (issue 6, item 4): CLT_ERR_OUT_OF_MEMORY
 * with a message that says how much was asked, what the device has and what to try; the
 * out-parameter untouched; the cache released and the allocation retried once; afterwards the
 * library keeps working (earlier tensors intact, new ones and operations fine) and holds no more
 * memory than before. Nothing here touches more than a few MiB: the large requests are refused
 * before any memory is written, and the many-buffers case runs under POCL_MEMORY_LIMIT=1.
 *
 * The runner prints "figure: out-of-memory cases: N", the refusals checked (for
 * docs/reliability.md). */
#define _GNU_SOURCE /* mmap's MAP_ANONYMOUS */
#include "config.h"

#include "backend.h"
#include "check_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#ifdef CLT_FAULT_INJECTION
#include "fault.h"
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define CU_SANITIZED 1
#endif
#endif

/* The refusals checked, counted across the forked tests in memory shared with the runner. */
static long *oom_cases;

static void cases_setup(void) {
  void *p =
      mmap(NULL, sizeof *oom_cases, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  oom_cases = p == MAP_FAILED ? NULL : p;
  if (oom_cases)
    *oom_cases = 0;
}

static void cases_teardown(void) {
  if (!oom_cases)
    return;
  printf("figure: out-of-memory cases: %ld\n", *oom_cases);
  fflush(stdout);
  munmap(oom_cases, sizeof *oom_cases);
  oom_cases = NULL;
}

static void count_case(void) {
  if (oom_cases)
    __atomic_add_fetch(oom_cases, 1, __ATOMIC_RELAXED);
}

/* The last error contains each of the NULL-terminated strings. */
static void assert_mentions(const char *what, ...) {
  va_list ap;
  va_start(ap, what);
  const char *s;
  while ((s = va_arg(ap, const char *)) != NULL)
    ck_assert_msg(strstr(clt_last_error(), s) != NULL, "%s: the message does not mention '%s': %s",
                  what, s, clt_last_error());
  va_end(ap);
}

/* call must fail with status want (from fn) and leave its out-parameter t at the sentinel. */
#define EXPECT_REFUSED(call, t, want, fn)                                                          \
  do {                                                                                             \
    t = CU_SENTINEL;                                                                               \
    CU_FAILS(call, want, fn);                                                                      \
    ck_assert_msg((void *)(t) == CU_SENTINEL, "%s wrote its out-parameter on failure", #call);     \
    count_case();                                                                                  \
  } while (0)

/* ---- the library keeps working ------------------------------------------------------------- */

#define ALIVE_N 1000

/* A tensor of ALIVE_N known f32 values on dev, made before a failure. */
static clt_tensor *earlier_tensor(clt_device *dev, float seed) {
  float v[ALIVE_N];
  for (int i = 0; i < ALIVE_N; i++)
    v[i] = seed + (float)i;
  int64_t n = ALIVE_N;
  return cu_tensor(v, CLT_F32, 1, &n, dev);
}

/* After a failure on dev: the earlier tensor holds its values, a new tensor and an operation on
 * it give the right answer, and clt holds what it held before (before: allocated bytes then,
 * the earlier tensor included). */
static void check_alive(clt_device *dev, clt_tensor *earlier, float seed, uint64_t before) {
  clt_memory_stats m;
  CU_OK(clt_device_memory_stats(dev, &m));
  ck_assert_msg(m.allocated_bytes == before,
                "%s: %llu bytes allocated after the failure, %llu before: the failed call leaked",
                cu_dev_name(dev), (unsigned long long)m.allocated_bytes,
                (unsigned long long)before);
  float got[ALIVE_N];
  CU_OK(clt_tensor_read(earlier, got, sizeof got));
  for (int i = 0; i < ALIVE_N; i++)
    ck_assert_msg(got[i] == seed + (float)i, "%s: earlier tensor changed at %d: %g",
                  cu_dev_name(dev), i, (double)got[i]);
  int64_t n = ALIVE_N;
  clt_tensor *a, *b, *s;
  CU_OK(clt_full(CLT_F32, 1, &n, 2.0, dev, &a));
  CU_OK(clt_add(a, earlier, &b));
  CU_OK(clt_sum(b, &s));
  double total;
  CU_OK(clt_item(s, &total));
  double want = ALIVE_N * (2.0 + seed) + ALIVE_N * (ALIVE_N - 1) / 2.0;
  ck_assert_msg(total == want, "%s: a fresh operation gave %g, expected %g", cu_dev_name(dev),
                total, want);
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(s);
}

static uint64_t allocated(clt_device *dev) {
  clt_memory_stats m;
  CU_OK(clt_device_memory_stats(dev, &m));
  return m.allocated_bytes;
}

/* ---- the host -------------------------------------------------------------------------------- */

/* Sizes that do not fit in a size_t (or past INT64_MAX bytes) are invalid shapes, not memory. */
START_TEST(test_cpu_size_overflows) {
  clt_device *cpu = clt_cpu();
  clt_tensor *e = earlier_tensor(cpu, 1.0f), *t;
  uint64_t before = allocated(cpu);
  int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
  EXPECT_REFUSED(clt_empty(CLT_F32, 2, huge, cpu, &t), t, CLT_ERR_INVALID_ARGUMENT, "clt_empty");
  assert_mentions("product overflow", "overflows", "[1099511627776, 1099511627776]", NULL);
  int64_t near_max[1] = {(int64_t)1 << 61}; /* 2^64 bytes of f64 */
  EXPECT_REFUSED(clt_zeros(CLT_F64, 1, near_max, cpu, &t), t, CLT_ERR_INVALID_ARGUMENT,
                 "clt_zeros");
  assert_mentions("bytes overflow", "overflows", NULL);
  int64_t max[3] = {INT64_MAX, 1, 2};
  EXPECT_REFUSED(clt_ones(CLT_U8, 3, max, cpu, &t), t, CLT_ERR_INVALID_ARGUMENT, "clt_ones");
  check_alive(cpu, e, 1.0f, before);
  clt_tensor_release(e);
}
END_TEST

/* A representable size larger than the host's memory: refused before malloc sees it (under
 * AddressSanitizer such a malloc would abort the process). */
START_TEST(test_cpu_more_than_host) {
  clt_device *cpu = clt_cpu();
  clt_tensor *e = earlier_tensor(cpu, 2.0f), *t;
  uint64_t before = allocated(cpu);
  int64_t big[1] = {(int64_t)1 << 61}, big_f32[1] = {(int64_t)1 << 59}; /* 2^61 bytes */
  EXPECT_REFUSED(clt_empty(CLT_U8, 1, big, cpu, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_empty");
  assert_mentions("2^61 bytes on cpu", "2305843009213693952 bytes", "host memory", "the host has",
                  "smaller", NULL);
  int64_t max[1] = {INT64_MAX};
  EXPECT_REFUSED(clt_full(CLT_U8, 1, max, 7.0, cpu, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_full");
  EXPECT_REFUSED(clt_rand(CLT_F32, 1, big_f32, cpu, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_rand");
  /* A result too large for the host: a broadcast of two 4 MiB operands to 4 TiB, and the same
   * as an outer product. */
  int64_t col[2] = {1 << 20, 1}, row[2] = {1, 1 << 20};
  clt_tensor *a, *b;
  CU_OK(clt_ones(CLT_F32, 2, col, cpu, &a));
  CU_OK(clt_ones(CLT_F32, 2, row, cpu, &b));
  before = allocated(cpu);
  EXPECT_REFUSED(clt_add(a, b, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_add");
  assert_mentions("broadcast result", "4.00 TiB", NULL);
  EXPECT_REFUSED(clt_matmul(a, b, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_matmul");
  check_alive(cpu, e, 2.0f, before);
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(e);
}
END_TEST

/* malloc itself refuses: under an address-space limit a 1 GiB host tensor cannot be had. The
 * cache is emptied and the allocation retried before giving up. Skipped under sanitizers and
 * valgrind, whose own allocators do not mix with RLIMIT_AS. */
START_TEST(test_cpu_malloc_refuses) {
  const char *preload = getenv("LD_PRELOAD");
#ifdef CU_SANITIZED
  cu_skip("test_cpu_malloc_refuses", "RLIMIT_AS does not mix with a sanitizer's allocator");
  return;
#endif
  if (preload && strstr(preload, "vgpreload")) {
    cu_skip("test_cpu_malloc_refuses", "RLIMIT_AS does not mix with valgrind");
    return;
  }
  if (!cu_forked) {
    cu_skip("test_cpu_malloc_refuses", "needs CK_FORK (it limits its process's address space)");
    return;
  }
  clt_device *cpu = clt_cpu();
  clt_tensor *e = earlier_tensor(cpu, 3.0f), *t;
  /* A 64 MiB block in the cache, which the retry must give back. */
  int64_t mid[1] = {64 << 20};
  CU_OK(clt_empty(CLT_U8, 1, mid, cpu, &t));
  clt_tensor_release(t);
  clt_memory_stats m;
  CU_OK(clt_device_memory_stats(cpu, &m));
  ck_assert_msg(m.cached_bytes >= (64u << 20), "the 64 MiB block did not go to the cache");
  uint64_t before = m.allocated_bytes;

  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  ck_assert_msg(f && fscanf(f, "%lu", &pages) == 1, "cannot read /proc/self/statm");
  fclose(f);
  struct rlimit old, lim;
  ck_assert(getrlimit(RLIMIT_AS, &old) == 0);
  lim = old;
  lim.rlim_cur = (rlim_t)pages * 4096 + (256u << 20); /* 256 MiB more than now */
  if (old.rlim_max != RLIM_INFINITY && lim.rlim_cur > old.rlim_max)
    lim.rlim_cur = old.rlim_max;
  ck_assert(setrlimit(RLIMIT_AS, &lim) == 0);
  int64_t gib[1] = {(int64_t)1 << 30};
  t = CU_SENTINEL;
  clt_status st = clt_empty(CLT_U8, 1, gib, cpu, &t);
  ck_assert(setrlimit(RLIMIT_AS, &old) == 0);
  ck_assert_msg(st == CLT_ERR_OUT_OF_MEMORY, "clt_empty of 1 GiB under RLIMIT_AS gave %s: %s",
                clt_status_name(st), clt_last_error());
  ck_assert(t == CU_SENTINEL);
  count_case();
  cu_assert_prefix(clt_last_error(), "clt_empty", "clt_empty under RLIMIT_AS");
  assert_mentions("malloc refused", "1.00 GiB (1073741824 bytes)", "malloc failed",
                  "emptying clt's cache", "clt_device_empty_cache", NULL);
  CU_OK(clt_device_memory_stats(cpu, &m));
  ck_assert_msg(m.cached_bytes == 0, "the retry did not empty the cache (%llu bytes cached)",
                (unsigned long long)m.cached_bytes);
  check_alive(cpu, e, 3.0f, before);
  clt_tensor_release(e);
}
END_TEST

/* ---- OpenCL devices ------------------------------------------------------------------------ */

/* One buffer larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE, and one larger than the whole device. */
START_TEST(test_cl_more_than_device) {
  if (!cu_need_cl("test_cl_more_than_device", 1))
    return;
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int v = 1; v < nd; v++) {
    clt_device *d = devs[v];
    clt_device_info info;
    CU_OK(clt_device_info_get(d, &info));
    clt_tensor *e = earlier_tensor(d, 4.0f), *t;
    uint64_t before = allocated(d);
    char max[32];
    snprintf(max, sizeof max, "(%llu bytes)", (unsigned long long)info.max_alloc_bytes);
    int64_t over_max[1] = {(int64_t)info.max_alloc_bytes + 1};
    EXPECT_REFUSED(clt_empty(CLT_U8, 1, over_max, d, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_empty");
    assert_mentions("over max alloc", cu_dev_name(d), "CL_DEVICE_MAX_MEM_ALLOC_SIZE", max,
                    "smaller tensors", NULL);
    int64_t over_all[1] = {(int64_t)(info.memory_bytes / 4) + 1024};
    EXPECT_REFUSED(clt_zeros(CLT_F32, 1, over_all, d, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_zeros");
    snprintf(max, sizeof max, "(%llu bytes)", (unsigned long long)info.memory_bytes);
    assert_mentions("over global memory", cu_dev_name(d), max, NULL);
    EXPECT_REFUSED(clt_randn(CLT_F32, 1, over_all, d, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_randn");
    /* A result too large: broadcast and outer product of two 4 MiB operands. */
    int64_t col[2] = {1 << 20, 1}, row[2] = {1, 1 << 20};
    clt_tensor *a, *b;
    CU_OK(clt_ones(CLT_F32, 2, col, d, &a));
    CU_OK(clt_ones(CLT_F32, 2, row, d, &b));
    uint64_t with_ab = allocated(d);
    EXPECT_REFUSED(clt_mul(a, b, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_mul");
    EXPECT_REFUSED(clt_matmul(a, b, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_matmul");
    ck_assert(allocated(d) == with_ab);
    clt_tensor_release(a);
    clt_tensor_release(b);
    /* A host tensor of the device's whole memory cannot move there. */
    check_alive(d, e, 4.0f, before);
    clt_tensor_release(e);
  }
}
END_TEST

/* The block many_buffers and full_with_deferred allocate on a device: half its largest buffer,
 * a quarter of its memory at most, in whole 64 KiB. */
static int64_t block_bytes(const clt_device_info *info) {
  uint64_t size = info->max_alloc_bytes / 2;
  if (size > info->memory_bytes / 4)
    size = info->memory_bytes / 4;
  return (int64_t)(size / 65536 * 65536);
}

/* For a test of a device limited to 1 GiB: sets POCL_MEMORY_LIMIT before OpenCL starts (so only
 * in a forked test) and asks for an OpenCL device; false (with the skip said) where it cannot. */
static bool memory_limited(const char *test) {
  if (!cu_forked) {
    cu_skip(test, "needs CK_FORK (POCL_MEMORY_LIMIT is set before OpenCL starts)");
    return false;
  }
  setenv("POCL_MEMORY_LIMIT", "1", 1);
  return cu_need_cl(test, 1);
}

/* Many buffers that together exceed the device. PoCL accepts any number of buffers (it allocates
 * at first use), so clt keeps its own count against CL_DEVICE_GLOBAL_MEM_SIZE: past it, the cache
 * is emptied first, then the request refused. Run with POCL_MEMORY_LIMIT=1 (1 GiB, 256 MiB per
 * buffer) on every OpenCL device of at most 2 GiB (Oclgrind has 128 MiB), the sizes taken from
 * what the device reports; the buffers are never touched. */
/* On d: blocks as large as the device allows (half its largest buffer, a quarter of its memory
 * at most, so that several fit on any device: PoCL limited to 1 GiB takes 7 of 128 MiB,
 * Oclgrind's 128 MiB 3 of 32 MiB), as many as fit beside an earlier tensor, then one more. */
static void many_buffers(clt_device *d) {
  clt_device_info info;
  CU_OK(clt_device_info_get(d, &info));
  if (info.memory_bytes > ((uint64_t)2 << 30)) {
    char why[160];
    snprintf(why, sizeof why, "%s has more than 2 GiB (POCL_MEMORY_LIMIT had no effect)",
             cu_dev_name(d));
    cu_skip("test_cl_many_buffers", why);
    return;
  }
  clt_tensor *e = earlier_tensor(d, 5.0f), *t;
  int64_t block = block_bytes(&info);
  uint64_t fit = (info.memory_bytes - allocated(d)) / (uint64_t)block;
  ck_assert_msg(fit >= 2 && fit < 64,
                "%s: %llu blocks of %lld bytes fit in %llu bytes (largest buffer %llu)",
                cu_dev_name(d), (unsigned long long)fit, (long long)block,
                (unsigned long long)info.memory_bytes, (unsigned long long)info.max_alloc_bytes);
  clt_tensor *held[64];
  for (uint64_t i = 0; i < fit; i++)
    CU_OK(clt_empty(CLT_U8, 1, &block, d, &held[i]));
  uint64_t before = allocated(d);
  EXPECT_REFUSED(clt_empty(CLT_U8, 1, &block, d, &t), t, CLT_ERR_OUT_OF_MEMORY, "clt_empty");
  assert_mentions("device full", cu_dev_name(d), "already hold", "release tensors", NULL);
  /* Releasing one makes room again (the block comes back from the cache). */
  clt_tensor_release(held[0]);
  CU_OK(clt_empty(CLT_U8, 1, &block, d, &held[0]));
  ck_assert(allocated(d) == before);
  check_alive(d, e, 5.0f, before);
  /* All released: the cache holds them. A larger request fits none of the cached blocks and
   * exceeds the device with them, so the cache must be emptied for it to succeed. */
  for (uint64_t i = 0; i < fit; i++)
    clt_tensor_release(held[i]);
  clt_memory_stats m;
  CU_OK(clt_device_memory_stats(d, &m));
  ck_assert(m.cached_bytes >= fit * (uint64_t)block);
  int64_t large = block * 2;
  CU_OK(clt_empty(CLT_U8, 1, &large, d, &t));
  CU_OK(clt_device_memory_stats(d, &m));
  ck_assert_msg(m.cached_bytes == 0, "%llu bytes still cached: the cache was not released first",
                (unsigned long long)m.cached_bytes);
  count_case();
  clt_tensor_release(t);
  clt_tensor_release(e);
}

START_TEST(test_cl_many_buffers) {
  if (!memory_limited("test_cl_many_buffers"))
    return;
  for (int v = 0; v < cu_cl_count(); v++)
    many_buffers(clt_device_at(v));
}
END_TEST

/* A full device where a deferred chain holds memory the program released: the allocation that
 * finds no room computes the chain first (its operand's memory is freed) and succeeds (issue 15:
 * the device's memory limit forces evaluation). The chain reads 16 elements through a view of a
 * tensor of a whole block, so that it is quick on Oclgrind too. Sizes as in many_buffers. */
static void full_with_deferred(clt_device *d) {
  clt_device_info info;
  CU_OK(clt_device_info_get(d, &info));
  if (info.memory_bytes > ((uint64_t)2 << 30))
    return; /* many_buffers said why */
  int64_t block = block_bytes(&info), floats = block / 4, sixteen = 16;
  uint64_t fit = (info.memory_bytes - allocated(d)) / (uint64_t)block;
  ck_assert_msg(fit >= 2 && fit < 64, "%s: %llu blocks fit", cu_dev_name(d),
                (unsigned long long)fit);
  clt_tensor *held[64], *a, *v, *b, *t;
  for (uint64_t i = 0; i + 2 < fit; i++) /* a block stays free, less what b takes */
    CU_OK(clt_empty(CLT_U8, 1, &block, d, &held[i]));
  CU_OK(clt_full(CLT_F32, 1, &floats, 3.0, d, &a));
  CU_OK(clt_narrow(a, 0, floats - 16, 16, &v));
  clt_tensor_release(a); /* its memory lives on in v */
  clt_lazy_stats s0, s1, s2;
  clt__lazy_stats(&s0);
  CU_OK(clt_add_scalar(v, 4.0, &b));
  clt_tensor_release(v); /* now only b's deferred chain holds a's block */
  clt__lazy_stats(&s1);
  bool deferred = s1.deferred > s0.deferred;
  /* the device is full: a block more is had only by computing b's chain */
  CU_OK(clt_empty(CLT_U8, 1, &block, d, &t));
  clt__lazy_stats(&s2);
  if (deferred)
    ck_assert_msg(s2.evaluations == s1.evaluations + 1,
                  "%s: the allocation ran %ld fused evaluations, expected 1", cu_dev_name(d),
                  s2.evaluations - s1.evaluations);
  float got[16];
  CU_OK(clt_tensor_read(b, got, sizeof got));
  for (int i = 0; i < 16; i++)
    ck_assert_msg(got[i] == 7.0f, "%s: element %d of the chain is %g, expected 7", cu_dev_name(d),
                  i, (double)got[i]);
  ck_assert_int_eq(clt_tensor_numel(b), sixteen);
  count_case();
  clt_tensor_release(t);
  clt_tensor_release(b);
  for (uint64_t i = 0; i + 2 < fit; i++)
    clt_tensor_release(held[i]);
}

START_TEST(test_cl_full_with_deferred) {
  if (!memory_limited("test_cl_full_with_deferred"))
    return;
  int was = clt_set_lazy(1);
  for (int v = 0; v < cu_cl_count(); v++)
    full_with_deferred(clt_device_at(v));
  clt_set_lazy(was);
}
END_TEST

/* Pinned host memory beyond what one buffer of the device may be. */
START_TEST(test_pinned_too_large) {
  if (!cu_need_cl("test_pinned_too_large", 1))
    return;
  clt_device *d = clt_device_at(0);
  clt_device_info info;
  CU_OK(clt_device_info_get(d, &info));
  int64_t n = ALIVE_N;
  clt_tensor *pinned, *t;
  CU_OK(clt_empty_pinned(CLT_F32, 1, &n, d, &pinned));
  float *p = clt_tensor_data(pinned);
  ck_assert(p != NULL);
  for (int i = 0; i < ALIVE_N; i++)
    p[i] = 6.0f + (float)i;
  int64_t over[1] = {(int64_t)info.max_alloc_bytes + 1};
  EXPECT_REFUSED(clt_empty_pinned(CLT_U8, 1, over, d, &t), t, CLT_ERR_OUT_OF_MEMORY,
                 "clt_empty_pinned");
  assert_mentions("pinned over max alloc", "pinned host memory", cu_dev_name(d),
                  "CL_DEVICE_MAX_MEM_ALLOC_SIZE", NULL);
  int64_t huge[2] = {(int64_t)1 << 62, 8};
  EXPECT_REFUSED(clt_empty_pinned(CLT_F32, 2, huge, d, &t), t, CLT_ERR_INVALID_ARGUMENT,
                 "clt_empty_pinned");
  /* The earlier pinned tensor is intact and the device still copies through pinned memory. */
  clt_tensor *on_dev, *again;
  CU_OK(clt_to(pinned, d, &on_dev));
  CU_OK(clt_empty_pinned(CLT_F32, 1, &n, d, &again));
  CU_OK(clt_copy(again, on_dev));
  float *q = clt_tensor_data(again);
  ck_assert(q != NULL);
  for (int i = 0; i < ALIVE_N; i++)
    ck_assert_msg(q[i] == 6.0f + (float)i, "pinned round trip differs at %d: %g", i, (double)q[i]);
  clt_tensor_release(on_dev);
  clt_tensor_release(again);
  clt_tensor_release(pinned);
}
END_TEST

/* ---- the retry, with injected faults ----------------------------------------------------------
 */

#ifdef CLT_FAULT_INJECTION
/* A driver that refuses a buffer once: clt empties the cache, asks again and succeeds; one that
 * keeps refusing gives CLT_ERR_OUT_OF_MEMORY. On every OpenCL device. */
START_TEST(test_retry_after_driver_refusal) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int v = 1; v < nd; v++) {
    clt_device *d = devs[v];
    clt_tensor *e = earlier_tensor(d, 7.0f), *t;
    int64_t small = 1 << 16, other = 3 << 16;
    CU_OK(clt_empty(CLT_U8, 1, &small, d, &t)); /* to the cache on release */
    clt_tensor_release(t);
    uint64_t before = allocated(d);
    clt_memory_stats m;
    clt__fault_set(CLT__FAULT_ALLOC, 1, CLT__FAULT_THIS_THREAD);
    clt_status st = clt_empty(CLT_U8, 1, &other, d, &t);
    long injected = clt__fault_injected(), calls = clt__fault_count(CLT__FAULT_ALLOC);
    clt__fault_reset();
    ck_assert_msg(st == CLT_OK, "%s: one refused clCreateBuffer was not retried: %s",
                  cu_dev_name(d), clt_last_error());
    ck_assert_msg(injected == 1 && calls == 2, "%s: %ld faults injected in %ld calls",
                  cu_dev_name(d), injected, calls);
    CU_OK(clt_device_memory_stats(d, &m));
    ck_assert_msg(m.cached_bytes == 0, "%s: the retry did not empty the cache", cu_dev_name(d));
    clt_tensor_release(t);
    count_case();

    int64_t third = 5 << 16; /* "other" is in the cache now */
    clt__fault_set(CLT__FAULT_ALLOC, 1, CLT__FAULT_THIS_THREAD | CLT__FAULT_STICKY);
    t = CU_SENTINEL;
    st = clt_empty(CLT_U8, 1, &third, d, &t);
    calls = clt__fault_count(CLT__FAULT_ALLOC);
    clt__fault_reset();
    ck_assert_msg(st == CLT_ERR_OUT_OF_MEMORY, "%s: gave %s: %s", cu_dev_name(d),
                  clt_status_name(st), clt_last_error());
    ck_assert(t == CU_SENTINEL && calls == 2);
    cu_assert_prefix(clt_last_error(), "clt_empty", "clt_empty refused twice");
    assert_mentions("driver refusal", "CL_MEM_OBJECT_ALLOCATION_FAILURE", "also after emptying",
                    "327680 bytes", "release tensors", NULL);
    count_case();
    check_alive(d, e, 7.0f, before);
    clt_tensor_release(e);
  }
}
END_TEST

/* Every host allocation of clt_empty on cpu refused once in turn: the call fails cleanly, except
 * for the memory itself, which the retry gets. */
START_TEST(test_retry_after_malloc_refusal) {
  clt_device *cpu = clt_cpu();
  clt_tensor *e = earlier_tensor(cpu, 8.0f), *t;
  int64_t n = 5000;
  CU_OK(clt_empty(CLT_U8, 1, &n, cpu, &t));
  clt_tensor_release(t);
  int64_t other = 50000;
  clt__fault_set(CLT__FAULT_HOST, 0, CLT__FAULT_THIS_THREAD);
  CU_OK(clt_empty(CLT_U8, 1, &other, cpu, &t));
  long sites = clt__fault_count(CLT__FAULT_HOST);
  clt__fault_reset();
  clt_tensor_release(t);
  ck_assert_msg(sites >= 3, "clt_empty made %ld host allocations", sites);
  uint64_t before = allocated(cpu);
  int retried = 0;
  for (long k = 1; k <= sites; k++) {
    other += 1000; /* never a cache hit */
    t = CU_SENTINEL;
    clt__fault_set(CLT__FAULT_HOST, k, CLT__FAULT_THIS_THREAD);
    clt_status st = clt_empty(CLT_U8, 1, &other, cpu, &t);
    const char *site = clt__fault_site();
    clt__fault_reset();
    if (strcmp(site, "aligned_alloc") == 0) {
      ck_assert_msg(st == CLT_OK, "a refused aligned_alloc was not retried: %s", clt_last_error());
      retried++;
      clt_tensor_release(t);
    } else {
      ck_assert_msg(st == CLT_ERR_OUT_OF_MEMORY, "%s refused: clt_empty gave %s: %s", site,
                    clt_status_name(st), clt_last_error());
      ck_assert(t == CU_SENTINEL);
    }
    count_case();
  }
  ck_assert_msg(retried == 1, "the memory itself was refused %d times", retried);
  check_alive(cpu, e, 8.0f, before);
  clt_tensor_release(e);
}
END_TEST
#endif

Suite *oom_suite(void) {
  Suite *s = suite_create("oom");
  TCase *tc = cu_tcase("oom");
  tcase_add_unchecked_fixture(tc, cases_setup, cases_teardown);
  tcase_add_test(tc, test_cpu_size_overflows);
  tcase_add_test(tc, test_cpu_more_than_host);
  tcase_add_test(tc, test_cpu_malloc_refuses);
  tcase_add_test(tc, test_cl_more_than_device);
  tcase_add_test(tc, test_cl_many_buffers);
  tcase_add_test(tc, test_cl_full_with_deferred);
  tcase_add_test(tc, test_pinned_too_large);
#ifdef CLT_FAULT_INJECTION
  tcase_add_test(tc, test_retry_after_driver_refusal);
  tcase_add_test(tc, test_retry_after_malloc_refusal);
#endif
  suite_add_tcase(s, tc);
  return s;
}
