/* SPDX-License-Identifier: MIT */
/* check_program.c - run-time kernel builds: CLT_KERNEL_PATH, build failures and the disk cache. */
#define _POSIX_C_SOURCE 200809L
#include "check_util.h"
#include "clt-internal.h" /* clt__cache_dir, clt__cache_hits */

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
    "                   ulong n, ulong step, ulong oo, ulong oa, ulong ob) {\n"
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
  clt_set_lazy(0); /* the error at the call; tests/check_lazy.c has it from a deferred op */
  /* built in the caller's thread, so that the call itself fails (test_build_failure_deferred:
   * the same failure behind a deferred launch) */
  setenv("CLT_BACKGROUND_BUILDS", "0", 1);
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

/* Where builds run on a thread of their own (not Oclgrind), an eager op whose program is not
 * built returns at once, its kernel launched behind the build (lib/opencl/deferred.c); a build
 * that fails fails the read that needs the result, with the build's message: the file, the
 * function, the device and the log. The next use fails again (nothing cached as built). */
START_TEST(test_build_failure_deferred) {
  if (!cu_forked) {
    cu_skip("test_build_failure_deferred", "needs CK_FORK (sets CLT_KERNEL_PATH)");
    return;
  }
  clt_set_lazy(0);
  unsetenv("CLT_BACKGROUND_BUILDS");
  const char *dir = kernel_dir("", "__kernel void NAME(__global TO *out { this is not C }\n");
  setenv("CLT_KERNEL_PATH", dir, 1);
  if (!cu_need_cl("test_build_failure_deferred", 1) || !clt__background_builds(clt_device_at(0))) {
    if (cu_cl_count() >= 1)
      cu_skip("test_build_failure_deferred", "cl:0 builds in the caller's thread");
    remove_dir(dir);
    return;
  }
  int64_t shape[1] = {8};
  clt_tensor *a, *c, *c2;
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_device_at(0), &a));
  CU_OK(clt_add(a, a, &c)); /* returns: the build runs behind it */
  float out[8] = {0};
  CU_FAILS(clt_tensor_read(c, out, sizeof out), CLT_ERR_BUILD, "clt_tensor_read");
  const char *msg = clt_last_error();
  ck_assert_msg(strstr(msg, "kernels/elementwise.cl") && strstr(msg, "clt_add on cl:0") &&
                    strstr(msg, "build log"),
                "message lacks the file, the call, the device or the log: %s", msg);
  ck_assert_msg(out[0] == 0.0f, "the read wrote its destination");
  CU_OK(clt_add(a, a, &c2));
  CU_FAILS(clt_tensor_read(c2, out, sizeof out), CLT_ERR_BUILD, "clt_tensor_read");
  clt_tensor_release(a);
  clt_tensor_release(c);
  clt_tensor_release(c2);
  (void)clt_device_synchronize(clt_device_at(0)); /* nothing in flight at the exit */
  remove_dir(dir);
}
END_TEST

START_TEST(test_kernel_path_missing_file) {
  if (!cu_forked) {
    cu_skip("test_kernel_path_missing_file", "needs CK_FORK (sets CLT_KERNEL_PATH)");
    return;
  }
  clt_set_lazy(0); /* the error at the call; tests/check_lazy.c has it from a deferred op */
  setenv("CLT_BACKGROUND_BUILDS", "0", 1); /* built in the caller's thread: fails at the call */
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

/* ---- the disk cache ------------------------------------------------------------------------
 * The cache is set up from the environment once per process, and OpenCL does not survive a
 * fork, so each "process" below is a child forked before any clt call (the test's own process
 * makes none), and reports through its exit status. */

/* Exit statuses of cache_child. */
enum {
  CHILD_OK = 0,
  CHILD_CLT = 1,
  CHILD_WRONG = 2,
  CHILD_HITS = 3,
  CHILD_DIR = 4,
  CHILD_NO_CL = 5
};

/* In a child: clt_add of two 1000-element f32 tensors of ones on cl:0, checks the result, that
 * the disk cache gave want_hits programs (-1: any) and is in dir (NULL: off). */
static int cache_child(long want_hits, const char *dir) {
  if (cu_cl_count() < 1)
    return CHILD_NO_CL;
  clt_device *d = clt_device_at(0);
  if (!d)
    return CHILD_CLT;
  int64_t shape[1] = {1000};
  clt_tensor *a, *c;
  float out[1000];
  if (clt_ones(CLT_F32, 1, shape, d, &a) != CLT_OK || clt_add(a, a, &c) != CLT_OK ||
      clt_tensor_read(c, out, sizeof out) != CLT_OK)
    return CHILD_CLT;
  for (int i = 0; i < 1000; i++)
    if (out[i] != 2.0f)
      return CHILD_WRONG;
  if (want_hits >= 0 && clt__cache_hits() != want_hits)
    return CHILD_HITS;
  const char *got = clt__cache_dir();
  if (dir ? !got || strcmp(got, dir) != 0 : got != NULL)
    return CHILD_DIR;
  clt_tensor_release(a);
  clt_tensor_release(c);
  return CHILD_OK;
}

/* Runs cache_child in a fresh child process and asserts it succeeded. Returns 0 (after printing
 * a skip for test) when there is no OpenCL device, else 1. The test's own process must not call
 * clt (not even cu_need_cl): a child forked after OpenCL started would hang in PoCL. */
static int run_child(const char *test, long want_hits, const char *dir, const char *what) {
  static const char *why[] = {"ok",
                              "a clt call failed",
                              "a wrong result",
                              "the wrong number of cache hits",
                              "the wrong cache directory",
                              "no OpenCL device"};
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0)
    _exit(cache_child(want_hits, dir));
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status), "%s: the child died (status %d)", what, status);
  int code = WEXITSTATUS(status);
  if (code == CHILD_NO_CL) {
    cu_skip(test, "needs an OpenCL device (set POCL_DEVICES=\"pthread pthread\")");
    return 0;
  }
  ck_assert_msg(code == CHILD_OK, "%s: the child reported %s (expected %ld hits)", what,
                code < 5 ? why[code] : "?", want_hits);
  return 1;
}

/* A new empty directory for a cache; returns its path (static storage). */
static const char *cache_tmpdir(void) {
  static char dir[64];
  snprintf(dir, sizeof dir, "/tmp/clt-cache-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  return dir;
}

/* How many files dir holds; the name of the last ".bin" one goes to entry (if not NULL). Any
 * other file (a temp file left behind) counts as well. */
static int count_files(const char *dir, char *entry, size_t size) {
  DIR *dp = opendir(dir);
  ck_assert_ptr_nonnull(dp);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(dp)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    n++;
    size_t len = strlen(de->d_name);
    if (entry && len > 4 && strcmp(de->d_name + len - 4, ".bin") == 0)
      snprintf(entry, size, "%s/%s", dir, de->d_name);
  }
  closedir(dp);
  return n;
}

/* Removes dir and what it holds (one level, plus one level of subdirectories). */
static void remove_cache(const char *dir) {
  DIR *dp = opendir(dir);
  if (!dp)
    return;
  struct dirent *de;
  char path[512];
  while ((de = readdir(dp)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (unlink(path) != 0)
      remove_cache(path);
  }
  closedir(dp);
  rmdir(dir);
}

START_TEST(test_cache_fills_and_second_process_loads) {
  if (!cu_forked) {
    cu_skip("test_cache_fills_and_second_process_loads", "needs CK_FORK (sets CLT_CACHE_DIR)");
    return;
  }
  const char *dir = cache_tmpdir();
  setenv("CLT_CACHE_DIR", dir, 1);
  unsetenv("CLT_CACHE");
  if (!run_child("test_cache_fills_and_second_process_loads", 0, dir,
                 "first process (cold cache)")) {
    remove_cache(dir);
    return;
  }
  char entry[512] = "";
  int n = count_files(dir, entry, sizeof entry);
  ck_assert_msg(n == 1 && entry[0], "the first process left %d files in %s, expected one .bin", n,
                dir);
  struct stat before, after;
  ck_assert_int_eq(stat(entry, &before), 0);
  ck_assert_msg(before.st_size > 64, "the entry has only %lld bytes", (long long)before.st_size);
  run_child("test_cache_fills_and_second_process_loads", 1, dir, "second process (warm cache)");
  ck_assert_int_eq(stat(entry, &after), 0);
  ck_assert_msg(before.st_ino == after.st_ino && before.st_mtime == after.st_mtime,
                "the second process rewrote the entry instead of loading it");
  ck_assert_int_eq(count_files(dir, NULL, 0), 1);
  remove_cache(dir);
}
END_TEST

/* Damages the entry at path: kind 0 flips bytes in the middle, 1 truncates to half, 2 truncates
 * into the header, 3 overwrites the magic. */
static void damage(const char *path, int kind) {
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  if (kind == 1 || kind == 2) {
    ck_assert_int_eq(truncate(path, kind == 1 ? st.st_size / 2 : 10), 0);
    return;
  }
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  unsigned char junk[16];
  off_t at = kind == 0 ? st.st_size / 2 : 0;
  ck_assert_int_eq(pread(fd, junk, sizeof junk, at), (ssize_t)sizeof junk);
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] ^= 0x5a;
  ck_assert_int_eq(pwrite(fd, junk, sizeof junk, at), (ssize_t)sizeof junk);
  close(fd);
}

START_TEST(test_cache_damaged_entry_rebuilt) {
  if (!cu_forked) {
    cu_skip("test_cache_damaged_entry_rebuilt", "needs CK_FORK (sets CLT_CACHE_DIR)");
    return;
  }
  const char *dir = cache_tmpdir();
  setenv("CLT_CACHE_DIR", dir, 1);
  unsetenv("CLT_CACHE");
  static const char *kinds[] = {"bytes flipped in the middle", "truncated to half",
                                "truncated into the header", "wrong magic"};
  if (!run_child("test_cache_damaged_entry_rebuilt", 0, dir, "filling the cache")) {
    remove_cache(dir);
    return;
  }
  char entry[512] = "";
  ck_assert_int_eq(count_files(dir, entry, sizeof entry), 1);
  for (int kind = 0; kind < 4; kind++) {
    struct stat good;
    ck_assert_int_eq(stat(entry, &good), 0);
    damage(entry, kind);
    char what[128];
    snprintf(what, sizeof what, "entry %s: rebuilt from source", kinds[kind]);
    run_child("test_cache_damaged_entry_rebuilt", 0, dir, what);
    struct stat now;
    ck_assert_int_eq(stat(entry, &now), 0);
    ck_assert_msg(now.st_size == good.st_size, "entry %s: rewritten with %lld bytes, not %lld",
                  kinds[kind], (long long)now.st_size, (long long)good.st_size);
    snprintf(what, sizeof what, "entry %s: loaded after the rewrite", kinds[kind]);
    run_child("test_cache_damaged_entry_rebuilt", 1, dir, what);
    ck_assert_int_eq(count_files(dir, NULL, 0), 1);
  }
  remove_cache(dir);
}
END_TEST

START_TEST(test_cache_unusable_dir) {
  if (!cu_forked) {
    cu_skip("test_cache_unusable_dir", "needs CK_FORK (sets CLT_CACHE_DIR)");
    return;
  }
  unsetenv("CLT_CACHE");
  /* A path under a regular file cannot be a directory, even for root. */
  setenv("CLT_CACHE_DIR", "/dev/null/clt", 1);
  if (!run_child("test_cache_unusable_dir", 0, NULL, "CLT_CACHE_DIR under /dev/null"))
    return;
  /* A usable directory where the entry cannot be written: its name is taken by a directory. */
  const char *dir = cache_tmpdir();
  setenv("CLT_CACHE_DIR", dir, 1);
  run_child("test_cache_unusable_dir", 0, dir, "filling the cache");
  char entry[512] = "";
  ck_assert_int_eq(count_files(dir, entry, sizeof entry), 1);
  ck_assert_int_eq(unlink(entry), 0);
  ck_assert_int_eq(mkdir(entry, 0700), 0);
  run_child("test_cache_unusable_dir", 0, dir, "the entry's name taken by a directory");
  ck_assert_int_eq(count_files(dir, NULL, 0), 1); /* no temp file left behind */
  remove_cache(dir);
}
END_TEST

START_TEST(test_cache_off_writes_nothing) {
  if (!cu_forked) {
    cu_skip("test_cache_off_writes_nothing", "needs CK_FORK (sets CLT_CACHE)");
    return;
  }
  const char *dir = cache_tmpdir();
  char home[128];
  snprintf(home, sizeof home, "%s", dir);
  dir = cache_tmpdir();
  setenv("CLT_CACHE_DIR", dir, 1);
  setenv("HOME", home, 1);
  setenv("XDG_CACHE_HOME", home, 1);
  setenv("CLT_CACHE", "0", 1);
  if (!run_child("test_cache_off_writes_nothing", 0, NULL, "CLT_CACHE=0")) {
    remove_cache(dir);
    remove_cache(home);
    return;
  }
  ck_assert_msg(count_files(dir, NULL, 0) == 0, "CLT_CACHE=0 wrote into CLT_CACHE_DIR");
  /* PoCL keeps its own cache under $XDG_CACHE_HOME/pocl: only clt's is looked at. */
  char clt_home[160];
  snprintf(clt_home, sizeof clt_home, "%s/clt", home);
  ck_assert_msg(access(clt_home, F_OK) != 0, "CLT_CACHE=0 created %s", clt_home);
  /* The same with the cache on fills it: the test above can fail. */
  setenv("CLT_CACHE", "1", 1);
  run_child("test_cache_off_writes_nothing", 0, dir, "CLT_CACHE=1");
  ck_assert_int_eq(count_files(dir, NULL, 0), 1);
  remove_cache(dir);
  remove_cache(home);
}
END_TEST

/* ---- the kernel cache API (clt_kernel_cache_*) ---------------------------------------------- */

static void count_entry(const clt_kernel_cache_entry *e, void *ctx) {
  size_t *n = ctx;
  if (strlen(e->name) == 68 && strcmp(e->name + 64, ".bin") == 0 && e->size > 64 && e->mtime > 0)
    ++*n;
}

/* In a child: warms cl:0, then checks that list shows the entries the directory holds and that
 * clear removes them all and only them (dir also holds keep.txt). Exit statuses as cache_child. */
static int api_child(const char *dir) {
  if (cu_cl_count() < 1)
    return CHILD_NO_CL;
  const char *got = clt_kernel_cache_dir();
  if (!got || strcmp(got, dir) != 0)
    return CHILD_DIR;
  clt_device *d = clt_device_at(0);
  if (!d || clt_kernel_cache_warm(d, NULL, NULL) != CLT_OK) {
    fprintf(stderr, "api_child: clt_kernel_cache_warm: %s\n", clt_last_error()); /* the why */
    return CHILD_CLT;
  }
  size_t listed = 0, seen = 0, removed = 0, after = 99;
  if (clt_kernel_cache_list(count_entry, &seen, &listed) != CLT_OK)
    return CHILD_CLT;
  if (listed == 0 || seen != listed || (int)listed != count_files(dir, NULL, 0) - 1)
    return CHILD_WRONG;
  if (clt_kernel_cache_clear(&removed) != CLT_OK || removed != listed)
    return CHILD_WRONG;
  if (clt_kernel_cache_list(NULL, NULL, &after) != CLT_OK || after != 0 ||
      count_files(dir, NULL, 0) != 1)
    return CHILD_WRONG;
  return CHILD_OK;
}

START_TEST(test_cache_api_warm_list_clear) {
  if (!cu_forked) {
    cu_skip("test_cache_api_warm_list_clear", "needs CK_FORK (sets CLT_CACHE_DIR)");
    return;
  }
  const char *dir = cache_tmpdir();
  char keep[512];
  snprintf(keep, sizeof keep, "%s/keep.txt", dir);
  FILE *f = fopen(keep, "w");
  ck_assert_ptr_nonnull(f);
  fputs("not a cache entry\n", f);
  fclose(f);
  setenv("CLT_CACHE_DIR", dir, 1);
  unsetenv("CLT_CACHE");
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0)
    _exit(api_child(dir));
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status), "the child died (status %d)", status);
  int code = WEXITSTATUS(status);
  if (code == CHILD_NO_CL) {
    cu_skip("test_cache_api_warm_list_clear", "needs an OpenCL device");
    remove_cache(dir);
    return;
  }
  static const char *why[] = {"ok", "warm failed", "list or clear gave the wrong counts", "?",
                              "the wrong cache directory"};
  ck_assert_msg(code == CHILD_OK, "the child reported %s (its stderr says why)",
                code < 5 ? why[code] : "?");
  ck_assert_msg(access(keep, F_OK) == 0, "clt_kernel_cache_clear removed keep.txt");
  remove_cache(dir);

  /* CLT_CACHE=0: no directory, nothing listed, nothing cleared. */
  setenv("CLT_CACHE", "0", 1);
  fflush(NULL);
  pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    size_t n = 99, r = 99;
    _exit(clt_kernel_cache_dir() == NULL && clt_kernel_cache_list(NULL, NULL, &n) == CLT_OK &&
                  n == 0 && clt_kernel_cache_clear(&r) == CLT_OK && r == 0
              ? CHILD_OK
              : CHILD_DIR);
  }
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OK,
                "CLT_CACHE=0: the cache directory is not NULL or has entries");
}
END_TEST

Suite *program_suite(void) {
  Suite *s = suite_create("program");
  TCase *tc = cu_tcase("kernel sources");
  tcase_add_test(tc, test_kernel_path_loads_from_disk);
  tcase_add_test(tc, test_build_failure_reports_log);
  tcase_add_test(tc, test_build_failure_deferred);
  tcase_add_test(tc, test_kernel_path_missing_file);
  suite_add_tcase(s, tc);
  tc = cu_tcase("disk cache");
  tcase_add_test(tc, test_cache_fills_and_second_process_loads);
  tcase_add_test(tc, test_cache_damaged_entry_rebuilt);
  tcase_add_test(tc, test_cache_unusable_dir);
  tcase_add_test(tc, test_cache_off_writes_nothing);
  tcase_add_test(tc, test_cache_api_warm_list_clear);
  suite_add_tcase(s, tc);
  return s;
}
