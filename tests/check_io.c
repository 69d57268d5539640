/* SPDX-License-Identifier: MIT */
/* check_io.c - checkpoints (clt_save, clt_load): devices remembered and mapped, every dtype,
 * 0-d and empty tensors, atomic saves, hand-made hostile files, and interoperability with
 * Python's safetensors. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_util.h"

/* A fresh directory for one test's files; removed by rmdir_all. */
static char *tmpdir(void) {
  char *d = cu_malloc(64);
  strcpy(d, "/tmp/clt-io-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(d));
  return d;
}

static void rmdir_all(char *d) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
  ck_assert_int_eq(system(cmd), 0);
  free(d);
}

static void write_bytes(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(b, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

/* A safetensors file: the length field hlen (the header's own length if ~0), the header, then
 * ndata bytes of data (0x01 each, so BOOL data is valid). */
static void write_st(const char *path, uint64_t hlen, const char *json, size_t ndata) {
  size_t n = strlen(json);
  if (hlen == ~(uint64_t)0)
    hlen = n;
  unsigned char *b = cu_malloc(8 + n + ndata);
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)(hlen >> (8 * i));
  memcpy(b + 8, json, n);
  memset(b + 8 + n, 1, ndata);
  write_bytes(path, b, 8 + n + ndata);
  free(b);
}

static size_t file_size(const char *path) {
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  return (size_t)st.st_size;
}

/* A set of three f32 tensors with known values on dev. */
static clt_params *sample_set(clt_device *dev) {
  clt_params *p;
  CU_OK(clt_params_create(&p));
  int64_t sw[2] = {2, 3}, sb[1] = {2};
  float w[6] = {1, 2, 3, 4, 5, 6}, b[2] = {-1, 0.5f};
  clt_tensor *tw = cu_tensor(w, CLT_F32, 2, sw, dev), *tb = cu_tensor(b, CLT_F32, 1, sb, dev);
  CU_OK(clt_params_add(p, "layer.weight", tw));
  CU_OK(clt_params_add(p, "layer.bias", tb));
  clt_tensor_release(tw);
  clt_tensor_release(tb);
  return p;
}

static void assert_same(clt_params *a, clt_params *b, clt_device *where) {
  ck_assert_uint_eq(clt_params_count(a), clt_params_count(b));
  for (size_t i = 0; i < clt_params_count(a); i++) {
    ck_assert_str_eq(clt_params_name_at(a, i), clt_params_name_at(b, i));
    clt_tensor *x = clt_params_tensor_at(a, i), *y = clt_params_tensor_at(b, i);
    cu_assert_meta(y, clt_tensor_dtype(x), where ? where : clt_tensor_device(x), clt_tensor_ndim(x),
                   clt_tensor_shape(x), clt_params_name_at(a, i));
    void *bx = cu_read(x), *by = cu_read(y);
    ck_assert_msg(memcmp(bx, by, clt_tensor_nbytes(x)) == 0, "%s: contents differ",
                  clt_params_name_at(a, i));
    free(bx);
    free(by);
  }
}

/* Saved on cl:1: loaded back on cl:1 with no map location, on cpu with clt_cpu(). */
START_TEST(test_devices) {
  if (!cu_need_cl("test_devices", 2))
    return;
  char *dir = tmpdir(), path[128];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  clt_params *p = sample_set(clt_device_at(1)), *q = CU_SENTINEL, *r;
  CU_OK(clt_save(path, p));
  CU_OK(clt_load(path, NULL, &q));
  assert_same(p, q, clt_device_at(1));
  CU_OK(clt_load(path, clt_cpu(), &r));
  assert_same(p, r, clt_cpu());
  clt_params_release(r);
  CU_OK(clt_load(path, clt_device_at(0), &r));
  assert_same(p, r, clt_device_at(0));
  clt_params_release(r);
  /* a set spread over devices keeps each tensor's own device */
  clt_tensor *h;
  CU_OK(clt_arange(0, 4, 1, CLT_I32, clt_cpu(), &h));
  CU_OK(clt_params_add(q, "step", h));
  clt_tensor_release(h);
  CU_OK(clt_save(path, q));
  CU_OK(clt_load(path, NULL, &r));
  assert_same(q, r, NULL);
  ck_assert_ptr_eq(clt_tensor_device(clt_params_get(r, "step")), clt_cpu());
  ck_assert_ptr_eq(clt_tensor_device(clt_params_get(r, "layer.bias")), clt_device_at(1));
  clt_params_release(r);
  clt_params_release(q);
  clt_params_release(p);
  rmdir_all(dir);
}
END_TEST

/* A checkpoint from a machine with a cl:7: the error names the tensor, the device, the devices
 * here and the fix; with a map location it loads. */
START_TEST(test_missing_device) {
  char *dir = tmpdir(), path[128];
  snprintf(path, sizeof path, "%s/big-machine.safetensors", dir);
  write_st(path, ~(uint64_t)0,
           "{\"w\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
           "\"__metadata__\":{\"clt.device.w\":\"cl:7\"}}   ",
           3);
  clt_params *q = CU_SENTINEL;
  CU_FAILS(clt_load(path, NULL, &q), CLT_ERR_DEVICE_NOT_FOUND, "clt_load");
  ck_assert_ptr_eq(q, CU_SENTINEL);
  const char *msg = clt_last_error();
  ck_assert_msg(strstr(msg, "checkpoint tensor 'w' was saved on cl:7, which this machine does not "
                            "have (devices: cpu") != NULL,
                "%s", msg);
  ck_assert_msg(strstr(msg, "pass a map_location such as clt_cpu()") != NULL, "%s", msg);
  ck_assert_msg(strstr(msg, path) != NULL, "%s", msg);
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    CU_OK(clt_load(path, devs[d], &q));
    clt_tensor *t = clt_params_get(q, "w");
    ck_assert_ptr_eq(clt_tensor_device(t), devs[d]);
    unsigned char got[3];
    CU_OK(clt_tensor_read(t, got, 3));
    ck_assert(got[0] == 1 && got[1] == 1 && got[2] == 1);
    clt_params_release(q);
  }
  /* a file with no clt metadata (another writer) loads on cpu */
  write_st(path, ~(uint64_t)0, "{\"w\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}",
           3);
  CU_OK(clt_load(path, NULL, &q));
  ck_assert_ptr_eq(clt_tensor_device(clt_params_get(q, "w")), clt_cpu());
  clt_params_release(q);
  rmdir_all(dir);
}
END_TEST

/* Every dtype on every device, with 0-d, empty and 8-D tensors, and awkward names. */
START_TEST(test_roundtrip) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  char *dir = tmpdir(), path[128];
  snprintf(path, sizeof path, "%s/all.safetensors", dir);
  cu_rng r;
  cu_rng_seed(&r, 5);
  for (int d = 0; d < ndev; d++) {
    clt_params *p;
    CU_OK(clt_params_create(&p));
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      if (!cu_dtype_ok("test_roundtrip", devs[d], (clt_dtype)dt))
        continue;
      static const int64_t shapes[4][8] = {{0}, {3, 5}, {0, 3}, {1, 2, 1, 2, 1, 2, 1, 2}};
      static const int ndims[4] = {0, 2, 2, 8};
      for (int k = 0; k < 4; k++) {
        int64_t n = cu_numel(ndims[k], shapes[k]);
        void *buf = cu_malloc((size_t)n * clt_dtype_size((clt_dtype)dt));
        cu_fill(buf, (clt_dtype)dt, n, &r, -1e6, 1e6, 0);
        clt_tensor *t = cu_tensor(buf, (clt_dtype)dt, ndims[k], shapes[k], devs[d]);
        char name[64];
        snprintf(name, sizeof name, "%s \"t\\%d\"\n\xc3\xa9", cu_dt_name((clt_dtype)dt), k);
        CU_OK(clt_params_add(p, name, t));
        clt_tensor_release(t);
        free(buf);
      }
    }
    CU_OK(clt_save(path, p));
    unsigned char len[8];
    FILE *f = fopen(path, "rb");
    ck_assert_uint_eq(fread(len, 1, 8, f), 8);
    fclose(f);
    ck_assert_uint_eq(len[0] % 8, 0); /* the header is padded to a multiple of 8 */
    clt_params *q;
    CU_OK(clt_load(path, NULL, &q));
    assert_same(p, q, devs[d]);
    clt_params_release(q);
    clt_params_release(p);
  }
  /* the empty set */
  clt_params *e, *q;
  CU_OK(clt_params_create(&e));
  CU_OK(clt_save(path, e));
  CU_OK(clt_load(path, NULL, &q));
  ck_assert_uint_eq(clt_params_count(q), 0);
  clt_params_release(q);
  clt_params_release(e);
  rmdir_all(dir);
}
END_TEST

START_TEST(test_args_and_io_errors) {
  char *dir = tmpdir(), path[128];
  snprintf(path, sizeof path, "%s/x.safetensors", dir);
  clt_params *p = sample_set(clt_cpu()), *q = CU_SENTINEL;
  CU_FAILS(clt_save(NULL, p), CLT_ERR_INVALID_ARGUMENT, "clt_save");
  CU_FAILS(clt_save(path, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_save");
  CU_FAILS(clt_load(path, NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_load");
  CU_FAILS(clt_load(NULL, NULL, &q), CLT_ERR_INVALID_ARGUMENT, "clt_load");
  CU_FAILS(clt_load(path, NULL, &q), CLT_ERR_IO, "clt_load"); /* no such file */
  ck_assert_ptr_nonnull(strstr(clt_last_error(), path));
  CU_FAILS(clt_load(dir, NULL, &q), CLT_ERR_IO, "clt_load"); /* a directory */
  CU_FAILS(clt_save("/dev/null/x.safetensors", p), CLT_ERR_IO, "clt_save");
  ck_assert_ptr_nonnull(strstr(clt_last_error(), "/dev/null/x.safetensors"));
  ck_assert_ptr_eq(q, CU_SENTINEL);
  clt_params_release(p);
  rmdir_all(dir);
}
END_TEST

static int count_files(const char *dir) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 1", dir);
  return system(cmd) == 0;
}

/* Saving over a file replaces it whole; a save that fails half-way leaves the old file as it
 * was and no temporary file behind. The failure is forced with RLIMIT_FSIZE (root ignores
 * directory permissions), so it runs only in a forked child. */
START_TEST(test_atomic) {
  char *dir = tmpdir(), path[128];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  clt_params *p = sample_set(clt_cpu()), *q;
  CU_OK(clt_save(path, p));
  clt_params *big;
  CU_OK(clt_params_create(&big));
  int64_t n[1] = {1 << 20};
  clt_tensor *t;
  CU_OK(clt_full(CLT_F32, 1, n, 3, clt_cpu(), &t));
  CU_OK(clt_params_add(big, "big", t));
  clt_tensor_release(t);
  CU_OK(clt_save(path, big)); /* over an existing file */
  CU_OK(clt_load(path, NULL, &q));
  assert_same(big, q, NULL);
  clt_params_release(q);
  ck_assert(count_files(dir));
  CU_OK(clt_save(path, p));
  size_t old = file_size(path);
  if (!cu_forked) {
    cu_skip("test_atomic", "the failing write needs a forked child (CK_FORK=no)");
  } else {
    struct rlimit lim = {65536, 65536};
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    CU_FAILS(clt_save(path, big), CLT_ERR_IO, "clt_save");
    ck_assert_msg(strstr(clt_last_error(), "writing") != NULL, "%s", clt_last_error());
    ck_assert_uint_eq(file_size(path), old);
    CU_OK(clt_load(path, NULL, &q));
    assert_same(p, q, NULL);
    clt_params_release(q);
    ck_assert_msg(count_files(dir), "a temporary file was left behind");
  }
  clt_params_release(big);
  clt_params_release(p);
  rmdir_all(dir);
}
END_TEST

/* ---- crash-safe saves: modes, directories, links ----------------------------------------- */

static mode_t file_mode(const char *path) {
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  return st.st_mode & 07777;
}

/* A new checkpoint gets 0666 less the umask, as files that open() creates; one saved over an
 * existing file keeps that file's permission bits (only those: not set-id bits). The same for
 * .npy files, which share the code. No temporary file is left. */
START_TEST(test_save_modes) {
  char *dir = tmpdir(), path[128], npy[128];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  snprintf(npy, sizeof npy, "%s/w.npy", dir);
  clt_params *p = sample_set(clt_cpu());
  mode_t old_mask = umask(027);
  CU_OK(clt_save(path, p));
  ck_assert_int_eq(file_mode(path), 0640);
  CU_OK(clt_save_npy(npy, clt_params_tensor_at(p, 0)));
  ck_assert_int_eq(file_mode(npy), 0640);
  umask(0);
  static const mode_t kept[] = {0600, 0604, 0444, 0660};
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
    ck_assert_int_eq(chmod(path, kept[i]), 0);
    CU_OK(clt_save(path, p));
    ck_assert_msg(file_mode(path) == kept[i], "mode %o became %o", (unsigned)kept[i],
                  (unsigned)file_mode(path));
    ck_assert_int_eq(chmod(npy, kept[i]), 0);
    CU_OK(clt_save_npy(npy, clt_params_tensor_at(p, 1)));
    ck_assert_int_eq(file_mode(npy), kept[i]);
  }
  ck_assert_int_eq(chmod(path, 02640), 0); /* set-gid: dropped */
  CU_OK(clt_save(path, p));
  ck_assert_int_eq(file_mode(path), 0640);
  umask(old_mask);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 2", dir);
  ck_assert_msg(system(cmd) == 0, "a temporary file was left beside the saved files");
  clt_params_release(p);
  rmdir_all(dir);
}
END_TEST

/* Saving into a directory the process may not write to fails with CLT_ERR_IO, a message naming
 * the file and the system's reason, and creates nothing. Root writes anywhere, so as root the
 * save runs in a child that first becomes "nobody"; the child is forked before this process
 * makes any clt call, and sees no OpenCL platform (it saves host tensors). */
START_TEST(test_save_readonly_dir) {
  if (!cu_forked) {
    cu_skip("test_save_readonly_dir", "needs CK_FORK (a child changes its user)");
    return;
  }
  char *dir = tmpdir(), path[128], npy[128];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  snprintf(npy, sizeof npy, "%s/w.npy", dir);
  ck_assert_int_eq(chmod(dir, 0555), 0);
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    char d[64]; /* the child frees what it inherits: memcheck checks it at _exit too */
    snprintf(d, sizeof d, "%s", dir);
    free(dir);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
      _exit(77);
    if (access(d, W_OK) == 0)
      _exit(78);
    setenv("OCL_ICD_VENDORS", "/nonexistent/check_io", 1);
    clt_params *p = sample_set(clt_cpu());
    int bad = 0;
    clt_status s = clt_save(path, p);
    const char *m = clt_last_error();
    if (s != CLT_ERR_IO || strncmp(m, "clt_save: ", 10) != 0 || !strstr(m, path) ||
        !strstr(m, strerror(EACCES))) {
      fprintf(stderr, "clt_save into a read-only directory: %s: %s\n", clt_status_name(s), m);
      bad = 1;
    }
    s = clt_save_npy(npy, clt_params_tensor_at(p, 0));
    m = clt_last_error();
    if (s != CLT_ERR_IO || strncmp(m, "clt_save_npy: ", 14) != 0 || !strstr(m, npy) ||
        !strstr(m, strerror(EACCES))) {
      fprintf(stderr, "clt_save_npy into a read-only directory: %s: %s\n", clt_status_name(s), m);
      bad = 1;
    }
    clt_params_release(p);
    _exit(bad);
  }
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert_int_eq(chmod(dir, 0700), 0);
  ck_assert(WIFEXITED(st));
  if (WEXITSTATUS(st) == 77 || WEXITSTATUS(st) == 78) {
    cu_skip("test_save_readonly_dir", WEXITSTATUS(st) == 77
                                          ? "cannot become the user nobody (65534)"
                                          : "this user can write to a mode 0555 directory");
  } else {
    ck_assert_msg(WEXITSTATUS(st) == 0, "the saving child failed (status %d)", WEXITSTATUS(st));
    char cmd[160];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
    ck_assert_msg(system(cmd) == 0, "a failed save left a file in the read-only directory");
  }
  rmdir_all(dir);
}
END_TEST

/* A save whose rename fails (the path is a directory) reports it, removes its temporary file and
 * leaves the directory alone; a symbolic link at the path is replaced by the new file, and the
 * file it pointed to is left as it was (documented in clt.h). */
START_TEST(test_save_over_dir_and_link) {
  char *dir = tmpdir(), path[128], other[128];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  snprintf(other, sizeof other, "%s/other", dir);
  clt_params *p = sample_set(clt_cpu());
  ck_assert_int_eq(mkdir(path, 0755), 0);
  CU_FAILS(clt_save(path, p), CLT_ERR_IO, "clt_save");
  ck_assert_msg(strstr(clt_last_error(), "renaming") && strstr(clt_last_error(), path), "%s",
                clt_last_error());
  struct stat st;
  ck_assert_int_eq(lstat(path, &st), 0);
  ck_assert(S_ISDIR(st.st_mode));
  ck_assert(count_files(dir)); /* the directory, no temporary file */
  ck_assert_int_eq(rmdir(path), 0);
  write_bytes(other, "old", 3);
  ck_assert_int_eq(symlink("other", path), 0);
  CU_OK(clt_save(path, p));
  ck_assert_int_eq(lstat(path, &st), 0);
  ck_assert(S_ISREG(st.st_mode));
  ck_assert_uint_eq(file_size(other), 3);
  clt_params *q;
  CU_OK(clt_load(path, NULL, &q));
  assert_same(p, q, NULL);
  clt_params_release(q);
  clt_params_release(p);
  rmdir_all(dir);
}
END_TEST

/* ---- hostile files ---------------------------------------------------------------------- */

#define T_A "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"
#define T_B "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]}"

static const struct hostile {
  const char *what, *json, *expect; /* expect: a piece of the message */
  size_t ndata;
} hostile[] = {
    {"overlapping offsets",
     "{" T_A ",\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]}}", "overlap", 16},
    {"a hole", "{" T_A ",\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[12,20]}}", "hole",
     20},
    {"a hole at the start", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     "hole", 12},
    {"trailing data", "{" T_A "," T_B "}", "longer", 20},
    {"dtype/shape vs bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
     "needs 12 bytes", 8},
    {"dtype vs bytes", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     "needs 16 bytes", 8},
    {"end before begin", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,0]}}",
     "before", 8},
    {"duplicate names", "{" T_A ",\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]}}",
     "twice", 16},
    {"non-UTF-8 name", "{\"\xff\xfe\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
     "UTF-8", 1},
    {"overlong UTF-8 name",
     "{\"\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "UTF-8", 1},
    {"surrogate in UTF-8",
     "{\"\xed\xa0\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "UTF-8", 1},
    {"lone surrogate escape",
     "{\"\\ud800\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "surrogate", 1},
    {"NUL escape in a name",
     "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "NUL", 1},
    {"empty name", "{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "empty", 1},
    {"product overflows",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,0]}}",
     "overflow", 0},
    {"bytes overflow",
     "{\"a\":{\"dtype\":\"F64\",\"shape\":[9223372036854775807,2],\"data_offsets\":[0,0]}}",
     "overflow", 0},
    {"shape entry above 2^63",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[99999999999999999999],\"data_offsets\":[0,1]}}", "2^63",
     1},
    {"offset above 2^63",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[18446744073709551615,0]}}", "2^63",
     1},
    {"huge offsets",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[9223372036854775806,"
     "9223372036854775807]}}",
     "hole", 1},
    {"huge but consistent shape",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[4611686018427387904],\"data_offsets\":[0,"
     "4611686018427387904]}}",
     "truncated", 1},
    {"negative shape", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}",
     "negative", 1},
    {"fractional shape", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}",
     "integers", 1},
    {"exponent shape", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1e0],\"data_offsets\":[0,1]}}",
     "integers", 1},
    {"leading zero", "{\"a\":{\"dtype\":\"U8\",\"shape\":[01],\"data_offsets\":[0,1]}}",
     "leading zero", 1},
    {"nine dimensions",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
     "more than 8", 1},
    {"unknown dtype", "{\"a\":{\"dtype\":\"X99\",\"shape\":[1],\"data_offsets\":[0,1]}}",
     "unknown dtype", 1},
    {"dtype not a string", "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,1]}}", "dtype",
     1},
    {"one offset", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1]}}", "two integers",
     1},
    {"three offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}",
     "two integers", 1},
    {"missing field", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", "missing", 1},
    {"duplicate field",
     "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "twice",
     1},
    {"unknown field",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"strides\":[1]}}",
     "unknown field", 1},
    {"tensor not an object", "{\"a\":[1,2]}", "expected an object", 1},
    {"top level not an object", "[]", "not a JSON object", 0},
    {"empty header", "", "not a JSON object", 0},
    {"missing brace", "{" T_A, "bad JSON", 8},
    {"trailing comma", "{" T_A ",}", "bad JSON", 8},
    {"text after the object", "{" T_A "} x", "bad JSON", 8},
    {"two objects", "{" T_A "}{}", "bad JSON", 8},
    {"unterminated string", "{\"a", "bad JSON", 0},
    {"control character in a string",
     "{\"a\nb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "control", 1},
    {"bad escape", "{\"a\\q\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "escape",
     1},
    {"short \\u escape", "{\"a\\u12\"}", "bad JSON", 0},
    {"no colon", "{\"a\" {\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "bad JSON", 1},
    {"deep nesting", "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
     "expected an object", 0},
    {"metadata not strings", "{" T_A ",\"__metadata__\":{\"clt.device.a\":7}}",
     "__metadata__ values must be strings, but the value of \"clt.device.a\" is a number", 8},
    {"metadata not an object", "{" T_A ",\"__metadata__\":[]}", "object", 8},
    {"metadata twice", "{" T_A ",\"__metadata__\":{},\"__metadata__\":{}}", "twice", 8},
    {"duplicate metadata key",
     "{" T_A ",\"__metadata__\":{\"clt.device.a\":\"cpu\",\"clt.device.a\":\"cl:0\"}}", "twice", 8},
    {"no tensors but data", "{}", "no tensors", 8},
    {"bool byte 2", "{\"a\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", NULL, 1},
};

START_TEST(test_hostile) {
  char *dir = tmpdir(), path[128];
  snprintf(path, sizeof path, "%s/hostile.safetensors", dir);
  clt_params *q = CU_SENTINEL;
  /* the base case is fine */
  write_st(path, ~(uint64_t)0, "{" T_A "," T_B "}", 16);
  CU_OK(clt_load(path, NULL, &q));
  ck_assert_uint_eq(clt_params_count(q), 2);
  clt_params_release(q);
  q = CU_SENTINEL;
  for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
    const struct hostile *h = &hostile[i];
    write_st(path, ~(uint64_t)0, h->json, h->ndata);
    if (!h->expect) { /* bool byte 2: write the data by hand */
      char b[64];
      size_t n = strlen(h->json);
      memset(b, 0, sizeof b);
      b[0] = (char)n;
      memcpy(b + 8, h->json, n);
      b[8 + n] = 2;
      write_bytes(path, b, 8 + n + 1);
    }
    clt_status s = clt_load(path, clt_cpu(), &q);
    ck_assert_msg(s == CLT_ERR_FORMAT, "%s: gave %s (%s)", h->what, clt_status_name(s),
                  clt_last_error());
    cu_assert_prefix(clt_last_error(), "clt_load", h->what);
    ck_assert_msg(strstr(clt_last_error(), path) != NULL, "%s: no path in %s", h->what,
                  clt_last_error());
    ck_assert_msg(!h->expect || strstr(clt_last_error(), h->expect) != NULL,
                  "%s: expected \"%s\" in: %s", h->what, h->expect, clt_last_error());
    ck_assert_ptr_eq(q, CU_SENTINEL);
  }
  /* a safetensors dtype clt lacks is unsupported, not malformed */
  write_st(path, ~(uint64_t)0, "{\"h\":{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[0,2]}}",
           2);
  CU_FAILS(clt_load(path, NULL, &q), CLT_ERR_UNSUPPORTED, "clt_load");
  char want[512];
  snprintf(want, sizeof want,
           "clt_load: %s: tensor 'h': dtype I16 has no clt equivalent (clt has F32, F64, I32, "
           "I64, U8, BOOL, F16 and BF16); convert it before saving",
           path);
  ck_assert_str_eq(clt_last_error(), want);
  /* Both messages list every dtype clt has (a new one cannot be left out). */
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    char upper[16];
    const char *n = cu_dt_name((clt_dtype)dt);
    size_t k = 0;
    for (; n[k] && k + 1 < sizeof upper; k++)
      upper[k] = (char)(n[k] >= 'a' && n[k] <= 'z' ? n[k] - 'a' + 'A' : n[k]);
    upper[k] = '\0';
    ck_assert_msg(strstr(clt_last_error(), upper) != NULL, "%s missing from: %s", upper,
                  clt_last_error());
  }
  write_st(path, ~(uint64_t)0, "{\"a\":{\"dtype\":\"X99\",\"shape\":[1],\"data_offsets\":[0,1]}}",
           1);
  CU_FAILS(clt_load(path, NULL, &q), CLT_ERR_FORMAT, "clt_load");
  snprintf(want, sizeof want,
           "clt_load: %s: tensor 'a': unknown dtype \"X99\" (expected F32, F64, I32, I64, U8, "
           "BOOL, F16 or BF16)",
           path);
  ck_assert_str_eq(clt_last_error(), want);

  /* header lengths that lie */
  static const uint64_t lens[] = {~(uint64_t)0,
                                  ~(uint64_t)0 - 7,
                                  (uint64_t)1 << 63,
                                  (uint64_t)1 << 32,
                                  (100u << 20) + 1,
                                  0,
                                  sizeof("{" T_A "," T_B "}") + 99};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    unsigned char b[8 + 200];
    const char *json = "{" T_A "," T_B "}";
    size_t n = strlen(json);
    for (int k = 0; k < 8; k++)
      b[k] = (unsigned char)(lens[i] >> (8 * k));
    memcpy(b + 8, json, n);
    memset(b + 8 + n, 0, 16);
    write_bytes(path, b, 8 + n + 16);
    clt_status s = clt_load(path, NULL, &q);
    ck_assert_msg(s == CLT_ERR_FORMAT, "header length %llu: gave %s (%s)",
                  (unsigned long long)lens[i], clt_status_name(s), clt_last_error());
  }

  /* truncated at every byte of a good file */
  write_st(path, ~(uint64_t)0, "{" T_A "," T_B "}", 16);
  size_t full = file_size(path);
  unsigned char *good = cu_malloc(full);
  FILE *f = fopen(path, "rb");
  ck_assert_uint_eq(fread(good, 1, full, f), full);
  fclose(f);
  for (size_t cut = 0; cut < full; cut++) {
    write_bytes(path, good, cut);
    clt_status s = clt_load(path, NULL, &q);
    ck_assert_msg(s == CLT_ERR_FORMAT, "truncated at %zu of %zu: gave %s (%s)", cut, full,
                  clt_status_name(s), clt_last_error());
    ck_assert_ptr_eq(q, CU_SENTINEL);
  }
  free(good);
  rmdir_all(dir);
}
END_TEST

/* ---- files real tools accept: metadata, alignment (issue 14, item 4) --------------------- */

static unsigned char *slurp(const char *path, size_t *n) {
  *n = file_size(path);
  unsigned char *b = cu_malloc(*n + 1);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fread(b, 1, *n, f), *n);
  fclose(f);
  return b;
}

/* Asserts that the message names the path and holds each of the NULL-terminated words. */
static void assert_names(const char *path, ...) {
  const char *e = clt_last_error();
  ck_assert_msg(strstr(e, path) != NULL, "no %s in: %s", path, e);
  va_list ap;
  va_start(ap, path);
  for (const char *w; (w = va_arg(ap, const char *)) != NULL;)
    ck_assert_msg(strstr(e, w) != NULL, "expected \"%s\" in: %s", w, e);
  va_end(ap);
}

/* The exact bytes of a file clt writes, written out here by hand from the format's spec: the
 * set's order in the header, the data larger elements first, "format": "pt" in __metadata__,
 * the header padded with spaces to a multiple of 8. */
START_TEST(test_save_bytes) {
  char *dir = tmpdir(), path[128];
  snprintf(path, sizeof path, "%s/m.safetensors", dir);
  clt_params *p;
  CU_OK(clt_params_create(&p));
  uint8_t b[3] = {1, 2, 3};
  double a = 1.5;
  float c[2] = {2.0f, -1.0f};
  int64_t s3[1] = {3}, s1[1] = {1}, s2[1] = {2};
  clt_tensor *tb = cu_tensor(b, CLT_U8, 1, s3, clt_cpu()),
             *ta = cu_tensor(&a, CLT_F64, 1, s1, clt_cpu());
  clt_tensor *tc = cu_tensor(c, CLT_F32, 1, s2, clt_cpu());
  CU_OK(clt_params_add(p, "b", tb));
  CU_OK(clt_params_add(p, "c", tc));
  CU_OK(clt_params_add(p, "a", ta));
  CU_OK(clt_save(path, p));
  const char *json = "{\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[16,19]},"
                     "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                     "\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                     "\"__metadata__\":{\"format\":\"pt\",\"clt.device.b\":\"cpu\","
                     "\"clt.device.c\":\"cpu\",\"clt.device.a\":\"cpu\"}}";
  size_t hlen = strlen(json), padded = (hlen + 7) / 8 * 8;
  unsigned char want[512];
  memset(want, ' ', sizeof want);
  for (int i = 0; i < 8; i++)
    want[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  memcpy(want + 8, json, hlen);
  static const unsigned char data[19] = {0, 0, 0, 0,    0, 0, 0xf8, 0x3f, /* 1.5 */
                                         0, 0, 0, 0x40, 0, 0, 0x80, 0xbf, /* 2, -1 */
                                         1, 2, 3};
  memcpy(want + 8 + padded, data, sizeof data);
  size_t n;
  unsigned char *got = slurp(path, &n);
  ck_assert_uint_eq(n, 8 + padded + sizeof data);
  ck_assert_msg(memcmp(got, want, n) == 0, "clt_save wrote\n%.*s\nexpected\n%.*s", (int)n - 8,
                (const char *)got + 8, (int)n - 8, (const char *)want + 8);
  ck_assert_uint_eq((8 + padded) % 8, 0);
  free(got);

  /* The set's own metadata goes first; a "format" of the set's wins over "pt". */
  CU_OK(clt_params_set_metadata(p, "producer", "clt test"));
  CU_OK(clt_params_set_metadata(p, "format", "np"));
  ck_assert_str_eq(clt_params_metadata(p, "format"), "np");
  ck_assert_uint_eq(clt_params_metadata_count(p), 2);
  ck_assert_str_eq(clt_params_metadata_key_at(p, 0), "producer");
  CU_OK(clt_save(path, p));
  got = slurp(path, &n);
  got[n] = '\0';
  ck_assert_ptr_nonnull(strstr((char *)got + 8, "\"__metadata__\":{\"producer\":\"clt test\","
                                                "\"format\":\"np\",\"clt.device.b\":\"cpu\""));
  ck_assert_ptr_null(strstr((char *)got + 8, "\"pt\""));
  free(got);
  CU_OK(clt_params_set_metadata(p, "format", NULL)); /* removed: "pt" again */
  ck_assert_ptr_null(clt_params_metadata(p, "format"));
  CU_OK(clt_params_set_metadata(p, "missing", NULL)); /* removing what is not there is fine */
  CU_OK(clt_save(path, p));
  got = slurp(path, &n);
  got[n] = '\0';
  ck_assert_ptr_nonnull(strstr((char *)got + 8, "{\"producer\":\"clt test\",\"format\":\"pt\","));
  free(got);

  /* Bad metadata is refused, the set unchanged. */
  CU_FAILS(clt_params_set_metadata(p, "clt.device.b", "cl:0"), CLT_ERR_INVALID_ARGUMENT,
           "clt_params_set_metadata");
  ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_to"));
  CU_FAILS(clt_params_set_metadata(p, "", "x"), CLT_ERR_INVALID_ARGUMENT,
           "clt_params_set_metadata");
  CU_FAILS(clt_params_set_metadata(p, NULL, "x"), CLT_ERR_INVALID_ARGUMENT,
           "clt_params_set_metadata");
  CU_FAILS(clt_params_set_metadata(NULL, "k", "x"), CLT_ERR_INVALID_ARGUMENT,
           "clt_params_set_metadata");
  CU_FAILS(clt_params_set_metadata(p, "k", "\xff"), CLT_ERR_INVALID_ARGUMENT,
           "clt_params_set_metadata");
  CU_FAILS(clt_params_set_metadata(p, "\xc3", "x"), CLT_ERR_INVALID_ARGUMENT,
           "clt_params_set_metadata");
  ck_assert_uint_eq(clt_params_metadata_count(p), 1);
  ck_assert_ptr_null(clt_params_metadata_key_at(p, 1));
  ck_assert_ptr_null(clt_params_metadata(NULL, "k"));
  ck_assert_uint_eq(clt_params_metadata_count(NULL), 0);

  /* An empty set still says its format. */
  clt_params *e;
  CU_OK(clt_params_create(&e));
  CU_OK(clt_save(path, e));
  got = slurp(path, &n);
  got[n] = '\0';
  ck_assert_ptr_nonnull(strstr((char *)got + 8, "{\"__metadata__\":{\"format\":\"pt\"}}"));
  ck_assert_uint_eq(n % 8, 0);
  free(got);
  clt_params *q;
  CU_OK(clt_load(path, NULL, &q));
  ck_assert_uint_eq(clt_params_count(q), 0);
  ck_assert_str_eq(clt_params_metadata(q, "format"), "pt");
  clt_params_release(q);
  clt_params_release(e);
  clt_tensor_release(ta);
  clt_tensor_release(tb);
  clt_tensor_release(tc);
  clt_params_release(p);
  rmdir_all(dir);
}
END_TEST

/* A loaded file's metadata survives a re-save; clt's device entries stay the tensors' own. */
START_TEST(test_metadata_kept) {
  char *dir = tmpdir(), path[128], again[128];
  snprintf(path, sizeof path, "%s/in.safetensors", dir);
  snprintf(again, sizeof again, "%s/out.safetensors", dir);
  write_st(path, ~(uint64_t)0,
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},\"__metadata__\":{"
           "\"format\":\"pt\",\"note\":\"caf\\u00e9\",\"clt.device.a\":\"cpu\","
           "\"clt.device.gone\":\"cl:7\"}}",
           2);
  clt_params *q;
  CU_OK(clt_load(path, NULL, &q));
  ck_assert_uint_eq(clt_params_metadata_count(q), 2);
  ck_assert_str_eq(clt_params_metadata(q, "format"), "pt");
  ck_assert_str_eq(clt_params_metadata(q, "note"), "caf\xc3\xa9");
  ck_assert_ptr_null(clt_params_metadata(q, "clt.device.a"));
  CU_OK(clt_params_to(q, clt_cpu())); /* moving keeps it */
  CU_OK(clt_save(again, q));
  size_t n;
  unsigned char *got = slurp(again, &n);
  got[n] = '\0';
  ck_assert_msg(strstr((char *)got + 8, "\"note\":\"caf\xc3\xa9\"") != NULL, "%s", got + 8);
  ck_assert_ptr_nonnull(strstr((char *)got + 8, "\"format\":\"pt\""));
  ck_assert_ptr_null(strstr((char *)got + 8, "gone"));
  free(got);
  clt_params_release(q);
  rmdir_all(dir);
}
END_TEST

/* ---- files that are not safetensors ------------------------------------------------------ */

/* A zip archive's first local file header, naming its first entry. */
static void write_zip(const char *path, const char *entry) {
  unsigned char b[256];
  memset(b, 0, sizeof b);
  size_t len = strlen(entry);
  memcpy(b, "PK\x03\x04", 4);
  b[4] = 20;
  b[26] = (unsigned char)len;
  memcpy(b + 30, entry, len);
  write_bytes(path, b, 30 + len + 40);
}

START_TEST(test_not_safetensors) {
  char *dir = tmpdir(), path[128];
  clt_params *q = CU_SENTINEL;
  struct {
    const char *file, *entry, *bytes, *expect;
    size_t n;
  } cases[] = {
      {"model.pt", "archive/data.pkl", NULL, "PyTorch checkpoint", 0},
      {"model.bin", "pytorch_model/version", NULL, "PyTorch checkpoint", 0},
      {"arrays.npz", "weight.npy", NULL, "NumPy .npz", 0},
      {"other.zip", "readme.txt", NULL, "a zip archive (PyTorch .pt or NumPy .npz)", 0},
      {"empty.zip", NULL, "PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", "zip archive", 22},
      {"w.npy", NULL, "\x93NUMPY\x01\x00v\x00{'descr': '<f4', }", "clt_load_npy", 28},
      {"old.pt", NULL, "\x80\x02}q\x00(X\x01\x00\x00\x00wq\x01K\x01u.", "pickle", 18},
      {"m.gguf", NULL, "GGUF\x03\0\0\0\0\0\0\0\0\0\0\0", "GGUF", 16},
      {"m.h5", NULL, "\x89HDF\r\n\x1a\n\0\0\0\0\0\0\0\0", "HDF5", 16},
      {"config.json", NULL, "{\n  \"model_type\": \"gpt2\"\n}\n",
       "JSON file without a \"weight_map\"", 0},
      {"tiny.json", NULL, "{}", "JSON", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, cases[i].file);
    if (cases[i].entry)
      write_zip(path, cases[i].entry);
    else
      write_bytes(path, cases[i].bytes, cases[i].n ? cases[i].n : strlen(cases[i].bytes));
    clt_status s = clt_load(path, clt_cpu(), &q);
    ck_assert_msg(s == CLT_ERR_FORMAT, "%s: gave %s (%s)", cases[i].file, clt_status_name(s),
                  clt_last_error());
    cu_assert_prefix(clt_last_error(), "clt_load", cases[i].file);
    assert_names(path, cases[i].expect, NULL);
    ck_assert_ptr_eq(q, CU_SENTINEL);
  }
  /* Real files, where Python and NumPy are here. */
  if (system("python3 -c 'import numpy' >/dev/null 2>&1") == 0) {
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import numpy as np; np.savez(\"%s/real.npz\", w=np.ones(3)); "
             "np.save(\"%s/real.npy\", np.ones(3))'",
             dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/real.npz", dir);
    CU_FAILS(clt_load(path, NULL, &q), CLT_ERR_FORMAT, "clt_load");
    assert_names(path, "NumPy .npz", NULL);
    snprintf(path, sizeof path, "%s/real.npy", dir);
    CU_FAILS(clt_load(path, NULL, &q), CLT_ERR_FORMAT, "clt_load");
    assert_names(path, "NumPy .npy", NULL);
  } else {
    cu_skip("test_not_safetensors (NumPy's own files)",
            "python3 with numpy is not available; the hand-made files above were checked");
  }
  rmdir_all(dir);
}
END_TEST

/* ---- allocation before reading ----------------------------------------------------------- */

/* A tensor too big for its device fails before any byte is read: the file's first tensor holds
 * a bad bool byte that reading would report, and the second claims 1 TiB (a sparse file). */
START_TEST(test_too_big_fails_before_reading) {
  char *dir = tmpdir(), path[128];
  snprintf(path, sizeof path, "%s/huge.safetensors", dir);
  const char *json = "{\"flag\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]},"
                     "\"huge\":{\"dtype\":\"F32\",\"shape\":[274877906944],"
                     "\"data_offsets\":[1,1099511627777]}}";
  size_t n = strlen(json);
  unsigned char b[256] = {0};
  b[0] = (unsigned char)n;
  memcpy(b + 8, json, n);
  b[8 + n] = 2; /* flag: not a bool */
  write_bytes(path, b, 8 + n + 1);
  if (truncate(path, (off_t)(8 + n + 1 + ((uint64_t)1 << 40))) != 0) {
    cu_skip("test_too_big_fails_before_reading", "this file system has no 1 TiB sparse files");
    rmdir_all(dir);
    return;
  }
  int ndev = clt_device_count();
  for (int d = -1; d < ndev; d++) {
    clt_device *dev = d < 0 ? clt_cpu() : clt_device_at(d);
    clt_params *q = CU_SENTINEL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU_FAILS(clt_load(path, dev, &q), CLT_ERR_OUT_OF_MEMORY, "clt_load");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_names(path, "tensor 'huge'", clt_device_name(dev), "before any tensor is read", NULL);
    ck_assert_ptr_eq(q, CU_SENTINEL);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    ck_assert_msg(s < 5, "failing took %.1f s", s);
  }
  rmdir_all(dir);
}
END_TEST

/* Device tensors arrive whole through the staging buffers, also tensors larger than one
 * staging chunk (16 MiB) and many small ones after it (the two buffers alternate). */
START_TEST(test_staged_upload) {
  char *dir = tmpdir(), path[128];
  snprintf(path, sizeof path, "%s/big.safetensors", dir);
  int64_t nbig = (int64_t)5 << 20; /* 20 MiB of f32 */
  float *big = cu_malloc((size_t)nbig * sizeof *big);
  for (int64_t i = 0; i < nbig; i++)
    big[i] = (float)(i % 1000003) * 0.25f;
  clt_params *p;
  CU_OK(clt_params_create(&p));
  clt_tensor *t = cu_tensor(big, CLT_F32, 1, &nbig, clt_cpu());
  CU_OK(clt_params_add(p, "big", t));
  clt_tensor_release(t);
  for (int k = 0; k < 5; k++) {
    int64_t s[1] = {3};
    int32_t v[3] = {k, -k, 7 * k};
    char name[16];
    snprintf(name, sizeof name, "small%d", k);
    t = cu_tensor(v, CLT_I32, 1, s, clt_cpu());
    CU_OK(clt_params_add(p, name, t));
    clt_tensor_release(t);
  }
  CU_OK(clt_save(path, p));
  clt_params_release(p);
  int ndev = clt_device_count();
  for (int d = 0; d < ndev; d++) {
    clt_params *q;
    clt_transfer_stats before, after;
    CU_OK(clt_transfer_stats_get(clt_device_at(d), &before));
    CU_OK(clt_load(path, clt_device_at(d), &q));
    CU_OK(clt_transfer_stats_get(clt_device_at(d), &after));
    ck_assert_uint_eq(after.h2d_count - before.h2d_count, 6); /* one per tensor */
    ck_assert_uint_eq(after.h2d_bytes - before.h2d_bytes, (uint64_t)nbig * 4 + 5 * 12);
    float *back = cu_malloc((size_t)nbig * sizeof *back);
    CU_OK(clt_tensor_read(clt_params_get(q, "big"), back, (size_t)nbig * sizeof *back));
    ck_assert(memcmp(back, big, (size_t)nbig * sizeof *back) == 0);
    free(back);
    for (int k = 0; k < 5; k++) {
      char name[16];
      int32_t v[3];
      snprintf(name, sizeof name, "small%d", k);
      CU_OK(clt_tensor_read(clt_params_get(q, name), v, sizeof v));
      ck_assert(v[0] == k && v[1] == -k && v[2] == 7 * k);
    }
    clt_params_release(q);
  }
  if (ndev == 0)
    cu_skip("test_staged_upload", "no OpenCL device");
  free(big);
  rmdir_all(dir);
}
END_TEST

/* ---- sharded checkpoints ------------------------------------------------------------------ */

#define SHARD_A "{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}"
#define SHARD_B                                                                                    \
  "{\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"                                \
  "\"c\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[3,7]},"                                 \
  "\"__metadata__\":{\"format\":\"pt\"}}"

static void write_index(const char *dir, const char *map) {
  char path[256], text[1024];
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  snprintf(text, sizeof text,
           "{\n  \"metadata\": {\"total_size\": 15, \"nested\": [1, 2.5e3, true, null, {\"x\": "
           "\"y\"}]},\n  \"weight_map\": {%s}\n}\n",
           map);
  write_bytes(path, text, strlen(text));
}

START_TEST(test_sharded) {
  char *dir = tmpdir(), path[256], idx[256];
  mkdir(dir, 0700);
  snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
  snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
  write_st(path, ~(uint64_t)0, SHARD_A, 8); /* data bytes 0x01 */
  snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
  write_st(path, ~(uint64_t)0, SHARD_B, 7);
  write_index(dir, "\"c\": \"model-00002-of-00002.safetensors\", \"a\": "
                   "\"model-00001-of-00002.safetensors\", \"b\": "
                   "\"model-00002-of-00002.safetensors\"");
  clt_device *where = clt_device_count() > 0 ? clt_device_at(0) : clt_cpu();
  clt_params *q = CU_SENTINEL;
  CU_OK(clt_load(idx, where, &q));
  /* shards in the order the weight map first names them, each in its header's order */
  ck_assert_uint_eq(clt_params_count(q), 3);
  ck_assert_str_eq(clt_params_name_at(q, 0), "b");
  ck_assert_str_eq(clt_params_name_at(q, 1), "c");
  ck_assert_str_eq(clt_params_name_at(q, 2), "a");
  int64_t s2[1] = {2}, s3[1] = {3};
  cu_assert_meta(clt_params_get(q, "a"), CLT_I32, where, 1, s2, "a");
  cu_assert_meta(clt_params_get(q, "b"), CLT_U8, where, 1, s3, "b");
  cu_assert_meta(clt_params_get(q, "c"), CLT_F32, where, 0, NULL, "c");
  int32_t a[2];
  uint8_t bb[3];
  CU_OK(clt_tensor_read(clt_params_get(q, "a"), a, sizeof a));
  CU_OK(clt_tensor_read(clt_params_get(q, "b"), bb, sizeof bb));
  ck_assert(a[0] == 0x01010101 && a[1] == 0x01010101);
  ck_assert(bb[0] == 1 && bb[1] == 1 && bb[2] == 1);
  ck_assert_str_eq(clt_params_metadata(q, "format"), "pt");
  clt_params_release(q);
  q = CU_SENTINEL;
  /* without a map location: where each shard says (cpu here) */
  CU_OK(clt_load(idx, NULL, &q));
  ck_assert_ptr_eq(clt_tensor_device(clt_params_get(q, "a")), clt_cpu());
  clt_params_release(q);
  q = CU_SENTINEL;

  /* Only what the index names is loaded: "c" is in the second shard, but not in the map. Its
   * bytes are not read either (an upload to a device counts them). */
  write_index(dir, "\"a\": \"model-00001-of-00002.safetensors\", \"b\": "
                   "\"model-00002-of-00002.safetensors\"");
  clt_transfer_stats before, after;
  CU_OK(clt_transfer_stats_get(where, &before));
  CU_OK(clt_load(idx, where, &q));
  CU_OK(clt_transfer_stats_get(where, &after));
  ck_assert_uint_eq(clt_params_count(q), 2);
  ck_assert_str_eq(clt_params_name_at(q, 0), "a");
  ck_assert_str_eq(clt_params_name_at(q, 1), "b");
  ck_assert_ptr_null(clt_params_get(q, "c"));
  cu_assert_meta(clt_params_get(q, "b"), CLT_U8, where, 1, s3, "b");
  CU_OK(clt_tensor_read(clt_params_get(q, "b"), bb, sizeof bb));
  ck_assert(bb[0] == 1 && bb[1] == 1 && bb[2] == 1);
  ck_assert_str_eq(clt_params_metadata(q, "format"), "pt"); /* the shard's metadata is kept */
  if (where != clt_cpu())
    ck_assert_uint_eq(after.h2d_bytes - before.h2d_bytes, 8 + 3); /* a and b, not c's 4 */
  clt_params_release(q);
  q = CU_SENTINEL;

  /* What is wrong is named. */
  struct {
    const char *map, *expect;
    clt_status s;
  } bad[] = {
      {"\"a\": \"model-00001-of-00002.safetensors\", \"b\": \"missing.safetensors\"",
       "missing.safetensors", CLT_ERR_IO},
      {"\"a\": \"model-00001-of-00002.safetensors\", \"b\": \"model-00002-of-00002.safetensors\", "
       "\"a\": \"model-00002-of-00002.safetensors\"",
       "lists tensor 'a' twice", CLT_ERR_FORMAT},
      {"\"a\": \"model-00002-of-00002.safetensors\", \"b\": \"model-00002-of-00002.safetensors\"",
       "puts tensor 'a' in", CLT_ERR_FORMAT},
      {"\"a\": \"model-00001-of-00002.safetensors\", \"z\": \"model-00001-of-00002.safetensors\"",
       "which does not hold it", CLT_ERR_FORMAT},
      {"\"a\": \"../model-00001-of-00002.safetensors\"", "without '..'", CLT_ERR_FORMAT},
      {"\"a\": \"/etc/passwd\"", "relative to the index's directory", CLT_ERR_FORMAT},
      {"", "\"weight_map\" is empty", CLT_ERR_FORMAT},
      /* a bad value is blamed on its tensor, not on "__metadata__" */
      {"\"a\": \"model-00001-of-00002.safetensors\", \"b\": 5, \"c\": "
       "\"model-00002-of-00002.safetensors\"",
       "tensor 'b': its value in \"weight_map\" must be a string, the file name of its shard, not "
       "a number (byte ",
       CLT_ERR_FORMAT},
      {"\"b\": [\"model-00002-of-00002.safetensors\"]", "tensor 'b': its value in \"weight_map\"",
       CLT_ERR_FORMAT},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_index(dir, bad[i].map);
    clt_status s = clt_load(idx, NULL, &q);
    ck_assert_msg(s == bad[i].s, "%s: gave %s (%s)", bad[i].map, clt_status_name(s),
                  clt_last_error());
    cu_assert_prefix(clt_last_error(), "clt_load", bad[i].map);
    assert_names(idx, bad[i].expect, NULL);
    ck_assert_msg(!strstr(clt_last_error(), "__metadata__"), "%s", clt_last_error());
    ck_assert_ptr_eq(q, CU_SENTINEL);
  }
  /* A weight_map that is not an object is named as such. */
  static const char not_object[] = "{\"weight_map\": [\"a\"]}";
  write_bytes(idx, not_object, strlen(not_object));
  CU_FAILS(clt_load(idx, NULL, &q), CLT_ERR_FORMAT, "clt_load");
  char want[512];
  snprintf(want, sizeof want, "clt_load: %s: \"weight_map\" must be an object of strings", idx);
  ck_assert_str_eq(clt_last_error(), want);
  /* A tensor in two shards. */
  snprintf(path, sizeof path, "%s/dup.safetensors", dir);
  write_st(path, ~(uint64_t)0, SHARD_A, 8);
  write_index(dir, "\"a\": \"model-00001-of-00002.safetensors\", \"b\": \"dup.safetensors\"");
  CU_FAILS(clt_load(idx, NULL, &q), CLT_ERR_FORMAT, "clt_load");
  assert_names(idx, "tensor 'a' is in two shards", "dup.safetensors", NULL);
  /* A shard that is not safetensors is named. */
  write_zip(path, "archive/data.pkl");
  CU_FAILS(clt_load(idx, NULL, &q), CLT_ERR_FORMAT, "clt_load");
  assert_names(path, "PyTorch", NULL);
  ck_assert_ptr_eq(q, CU_SENTINEL);
  rmdir_all(dir);
}
END_TEST

/* ---- sharded saves ------------------------------------------------------------------------ */

/* The set that test_save_sharded saves with max_shard_bytes 600: each tensor with the shard it
 * must land in (runs of the set in its order, at most 600 bytes of data each, "big" alone since
 * it is larger than that). */
static const struct shard_spec {
  const char *name;
  clt_dtype dt;
  int ndim;
  int64_t shape[2];
  int shard;
} shard_specs[] = {
    {"embed.weight", CLT_F32, 2, {16, 8}, 1},   /* 512 bytes */
    {"layer.0.bias", CLT_F16, 1, {8}, 1},       /* 16: 528 */
    {"layer.0.weight", CLT_BF16, 2, {8, 8}, 2}, /* 128: 656 would pass 600 */
    {"big", CLT_I64, 1, {100}, 3},              /* 800: larger than 600, alone */
    {"count", CLT_F64, 1, {3}, 4},              /* 24 */
    {"mask", CLT_BOOL, 1, {5}, 4},              /* 5 */
    {"ids", CLT_I32, 2, {2, 2}, 4},             /* 16 */
    {"none", CLT_U8, 2, {0, 3}, 4},             /* 0 */
    {"scale \"q\"", CLT_F32, 0, {0}, 4},        /* 4, a name JSON escapes */
};
#define SHARD_MAX 600
#define SHARD_COUNT 4

/* The set of shard_specs on dev with random elements (seeded by seed); f64 as i64 where dev has
 * no fp64. */
static clt_params *shard_set(clt_device *dev, uint64_t seed) {
  clt_params *p;
  CU_OK(clt_params_create(&p));
  CU_OK(clt_params_set_metadata(p, "note", "sharded by clt"));
  cu_rng r;
  cu_rng_seed(&r, seed);
  for (size_t i = 0; i < sizeof shard_specs / sizeof shard_specs[0]; i++) {
    const struct shard_spec *sp = &shard_specs[i];
    clt_dtype dt = sp->dt == CLT_F64 && !clt_device_has_fp64(dev) ? CLT_I64 : sp->dt;
    int64_t n = 1;
    for (int d = 0; d < sp->ndim; d++)
      n *= sp->shape[d];
    void *buf = cu_malloc((size_t)n * clt_dtype_size(dt));
    cu_fill(buf, dt, n, &r, -100, 100, 0);
    clt_tensor *t = cu_tensor(buf, dt, sp->ndim, sp->shape, dev);
    CU_OK(clt_params_add(p, sp->name, t));
    clt_tensor_release(t);
    free(buf);
  }
  return p;
}

/* The names in dir, sorted, joined by spaces (temporary files included). */
static void list_dir(const char *dir, char *out, size_t size) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | sort | tr '\\n' ' '", dir);
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(out, 1, size - 1, f);
  out[n] = '\0';
  pclose(f);
}

/* clt_save_sharded on cpu and on each OpenCL device: the shards' names and the index's exact
 * text, each shard a safetensors file of its own run of the set, and the set back bit for bit
 * through the index, on the devices saved and mapped to cpu; then saved again over itself, and
 * as one shard when everything fits. */
START_TEST(test_save_sharded) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    if (d > 0 && !cu_is_cl(devs[d]))
      continue;
    char *dir = tmpdir(), idx[128], path[128], names[1024], want[4096];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    clt_params *p = shard_set(devs[d], 100 + (uint64_t)d), *q;
    CU_OK(clt_save_sharded(dir, p, SHARD_MAX));
    list_dir(dir, names, sizeof names);
    ck_assert_str_eq(names, "model-00001-of-00004.safetensors model-00002-of-00004.safetensors "
                            "model-00003-of-00004.safetensors model-00004-of-00004.safetensors "
                            "model.safetensors.index.json ");
    /* The index, as transformers writes it (the set's order). */
    uint64_t total = 0;
    for (size_t i = 0; i < clt_params_count(p); i++)
      total += clt_tensor_nbytes(clt_params_tensor_at(p, i));
    int used = snprintf(want, sizeof want,
                        "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
                        (unsigned long long)total);
    for (size_t i = 0; i < sizeof shard_specs / sizeof shard_specs[0]; i++)
      used += snprintf(want + used, sizeof want - (size_t)used,
                       "%s\n    \"%s\": \"model-%05d-of-%05d.safetensors\"", i ? "," : "",
                       i == 8 ? "scale \\\"q\\\"" : shard_specs[i].name, shard_specs[i].shard,
                       SHARD_COUNT);
    snprintf(want + used, sizeof want - (size_t)used, "\n  }\n}\n");
    size_t n;
    char *text = (char *)slurp(idx, &n);
    text[n] = '\0';
    ck_assert_str_eq(text, want);
    free(text);
    /* Each shard is a safetensors file of its own tensors, in the set's order. */
    for (int k = 1; k <= SHARD_COUNT; k++) {
      snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, k, SHARD_COUNT);
      CU_OK(clt_load(path, NULL, &q));
      size_t at = 0;
      for (size_t i = 0; i < sizeof shard_specs / sizeof shard_specs[0]; i++)
        if (shard_specs[i].shard == k) {
          ck_assert_uint_gt(clt_params_count(q), at);
          ck_assert_str_eq(clt_params_name_at(q, at++), shard_specs[i].name);
        }
      ck_assert_uint_eq(clt_params_count(q), at);
      ck_assert_str_eq(clt_params_metadata(q, "format"), "pt");
      ck_assert_str_eq(clt_params_metadata(q, "note"), "sharded by clt");
      clt_params_release(q);
    }
    /* The whole set back through the index: where it was saved, and on cpu. */
    CU_OK(clt_load(idx, NULL, &q));
    assert_same(p, q, NULL);
    ck_assert_str_eq(clt_params_metadata(q, "note"), "sharded by clt");
    clt_params_release(q);
    CU_OK(clt_load(idx, clt_cpu(), &q));
    assert_same(p, q, clt_cpu());
    clt_params_release(q);
    /* Saved again over itself, with other values: replaced whole, nothing left beside. */
    clt_params *p2 = shard_set(devs[d], 200 + (uint64_t)d);
    CU_OK(clt_save_sharded(dir, p2, SHARD_MAX));
    list_dir(dir, names, sizeof names);
    ck_assert_uint_eq(strlen(names), strlen("model-00001-of-00004.safetensors ") * 4 +
                                         strlen("model.safetensors.index.json "));
    CU_OK(clt_load(idx, NULL, &q));
    assert_same(p2, q, NULL);
    clt_params_release(q);
    clt_params_release(p2);
    /* Everything fits: one shard, and the index all the same. */
    char *one = tmpdir();
    CU_OK(clt_save_sharded(one, p, (size_t)1 << 30));
    list_dir(one, names, sizeof names);
    ck_assert_str_eq(names, "model-00001-of-00001.safetensors model.safetensors.index.json ");
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", one);
    CU_OK(clt_load(idx, NULL, &q));
    assert_same(p, q, NULL);
    clt_params_release(q);
    /* A limit of 1 byte: every tensor is larger, so each is a shard of its own (the empty one
     * too, since nothing joins a shard of a tensor that is larger than the limit). */
    CU_OK(clt_save_sharded(one, p, 1));
    for (int k = 8; k <= 9; k++) {
      snprintf(path, sizeof path, "%s/model-%05d-of-00009.safetensors", one, k);
      CU_OK(clt_load(path, NULL, &q));
      ck_assert_uint_eq(clt_params_count(q), 1);
      ck_assert_str_eq(clt_params_name_at(q, 0), k == 8 ? "none" : "scale \"q\"");
      clt_params_release(q);
    }
    rmdir_all(one);
    clt_params_release(p);
    rmdir_all(dir);
  }
}
END_TEST

/* Bad arguments are refused with messages that say what to do, before anything is written; a
 * save that fails half-way leaves the previous checkpoint as it was, and no temporary file. */
START_TEST(test_save_sharded_errors) {
  char *dir = tmpdir(), path[128], before[1024], after[1024];
  clt_params *p = sample_set(clt_cpu()), *empty, *q;
  CU_OK(clt_params_create(&empty));
  CU_FAILS(clt_save_sharded(NULL, p, 100), CLT_ERR_INVALID_ARGUMENT, "clt_save_sharded");
  ck_assert_str_eq(clt_last_error(), "clt_save_sharded: dir is NULL or empty");
  CU_FAILS(clt_save_sharded("", p, 100), CLT_ERR_INVALID_ARGUMENT, "clt_save_sharded");
  CU_FAILS(clt_save_sharded(dir, NULL, 100), CLT_ERR_INVALID_ARGUMENT, "clt_save_sharded");
  ck_assert_str_eq(clt_last_error(), "clt_save_sharded: p is NULL");
  CU_FAILS(clt_save_sharded(dir, p, 0), CLT_ERR_INVALID_ARGUMENT, "clt_save_sharded");
  ck_assert_str_eq(clt_last_error(),
                   "clt_save_sharded: max_shard_bytes is 0; give the most bytes of tensor data a "
                   "shard may hold (transformers' default max_shard_size is 5 GB: 5000000000)");
  CU_FAILS(clt_save_sharded(dir, empty, 100), CLT_ERR_INVALID_ARGUMENT, "clt_save_sharded");
  ck_assert_ptr_nonnull(strstr(clt_last_error(), "no tensors"));
  snprintf(path, sizeof path, "%s/missing", dir);
  CU_FAILS(clt_save_sharded(path, p, 100), CLT_ERR_IO, "clt_save_sharded");
  char want[512];
  snprintf(want, sizeof want,
           "clt_save_sharded: cannot save into the directory %s: %s; create it first", path,
           strerror(ENOENT));
  ck_assert_str_eq(clt_last_error(), want);
  snprintf(path, sizeof path, "%s/file", dir);
  write_bytes(path, "x", 1);
  CU_FAILS(clt_save_sharded(path, p, 100), CLT_ERR_IO, "clt_save_sharded");
  assert_names(path, "is not a directory", NULL);
  ck_assert_int_eq(unlink(path), 0);
  list_dir(dir, before, sizeof before);
  ck_assert_str_eq(before, ""); /* nothing was written */

  /* A rename that fails (the second shard's name is a directory) says what was replaced. */
  char sub[128];
  snprintf(sub, sizeof sub, "%s/model-00002-of-00002.safetensors", dir);
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  CU_FAILS(clt_save_sharded(dir, p, 8), CLT_ERR_IO, "clt_save_sharded");
  assert_names(sub, "renaming", "1 of the 3 files had been renamed into place already",
               "save again", NULL);
  ck_assert_int_eq(rmdir(sub), 0);
  list_dir(dir, after, sizeof after);
  ck_assert_str_eq(after, "model-00001-of-00002.safetensors "); /* no temporary file */

  /* A failure half-way (the second shard passes RLIMIT_FSIZE): the previous save is intact. */
  CU_OK(clt_save_sharded(dir, p, 8)); /* weight (24 bytes) and bias (8): two shards */
  list_dir(dir, before, sizeof before);
  ck_assert_str_eq(before, "model-00001-of-00002.safetensors model-00002-of-00002.safetensors "
                           "model.safetensors.index.json ");
  size_t n0, n1;
  snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
  unsigned char *shard0 = slurp(path, &n0);
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  unsigned char *index0 = slurp(path, &n1);
  if (!cu_forked) {
    cu_skip("test_save_sharded_errors", "the failing write needs a forked child (CK_FORK=no)");
  } else {
    clt_params *big;
    CU_OK(clt_params_create(&big));
    int64_t small[1] = {4}, large[1] = {1 << 16};
    clt_tensor *a, *b;
    CU_OK(clt_full(CLT_F32, 1, small, 1, clt_cpu(), &a));
    CU_OK(clt_full(CLT_F32, 1, large, 2, clt_cpu(), &b));
    CU_OK(clt_params_add(big, "a", a));
    CU_OK(clt_params_add(big, "b", b));
    clt_tensor_release(a);
    clt_tensor_release(b);
    struct rlimit lim = {65536, 65536};
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    CU_FAILS(clt_save_sharded(dir, big, 16), CLT_ERR_IO, "clt_save_sharded");
    ck_assert_msg(strstr(clt_last_error(), "writing") != NULL, "%s", clt_last_error());
    list_dir(dir, after, sizeof after);
    ck_assert_str_eq(after, before);
    size_t m;
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    unsigned char *b0 = slurp(path, &m);
    ck_assert(m == n0 && memcmp(b0, shard0, m) == 0);
    free(b0);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    b0 = slurp(path, &m);
    ck_assert(m == n1 && memcmp(b0, index0, m) == 0);
    free(b0);
    CU_OK(clt_load(path, NULL, &q));
    assert_same(p, q, NULL);
    clt_params_release(q);
    clt_params_release(big);
  }
  free(shard0);
  free(index0);
  clt_params_release(empty);
  clt_params_release(p);
  rmdir_all(dir);
}
END_TEST

/* ---- Python interoperability ------------------------------------------------------------ */

START_TEST(test_python) {
  if (system("python3 -c 'import safetensors.numpy, numpy' >/dev/null 2>&1") != 0) {
    cu_skip("test_python", "python3 with the safetensors and numpy modules is not available "
                           "(pip install safetensors numpy)");
    return;
  }
  char *dir = tmpdir(), path[128], cmd[1024];
  snprintf(path, sizeof path, "%s/clt.safetensors", dir);
  /* clt writes (one tensor per dtype, from cl:1 when there is one), Python reads. */
  clt_device *dev = clt_device_count() >= 2 ? clt_device_at(1) : clt_cpu();
  clt_params *p;
  CU_OK(clt_params_create(&p));
  int64_t s23[2] = {2, 3};
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    if (dt ==
        CLT_BF16) /* NumPy has no bfloat16 (safetensors.numpy fails on it without ml_dtypes) */
      continue;
    double v[6] = {0, 1, 2, 3, 4, 5};
    clt_tensor *a, *c;
    CU_OK(clt_from_host(v, CLT_F64, 2, s23, clt_cpu(), &a));
    if (dt == CLT_BOOL) {
      clt_tensor *two;
      CU_OK(clt_full(CLT_F64, 0, NULL, 2, clt_cpu(), &two));
      CU_OK(clt_lt(a, two, &c)); /* [1,1,0,0,0,0] */
      clt_tensor_release(two);
    } else {
      CU_OK(clt_cast(a, (clt_dtype)dt, &c));
    }
    CU_OK(clt_move(&c, dev));
    CU_OK(clt_params_add(p, cu_dt_name((clt_dtype)dt), c));
    clt_tensor_release(a);
    clt_tensor_release(c);
  }
  CU_OK(clt_save(path, p));
  snprintf(cmd, sizeof cmd,
           "python3 -c '\n"
           "import numpy as np, safetensors.numpy as st, json, struct, sys\n"
           "d = st.load_file(\"%s\")\n"
           "want = {\"f32\": np.float32, \"f64\": np.float64, \"i32\": np.int32, \"i64\": "
           "np.int64, \"u8\": np.uint8, \"bool\": np.bool_}\n"
           "for k, t in want.items():\n"
           "    v = np.arange(6).reshape(2, 3)\n"
           "    v = (v < 2) if k == \"bool\" else v.astype(t)\n"
           "    assert d[k].dtype == t and d[k].shape == (2, 3), (k, d[k])\n"
           "    assert (d[k] == v).all(), (k, d[k])\n"
           "raw = open(\"%s\", \"rb\").read()\n"
           "n = struct.unpack(\"<Q\", raw[:8])[0]\n"
           "meta = json.loads(raw[8:8 + n])[\"__metadata__\"]\n"
           "assert meta[\"clt.device.f32\"] == \"%s\", meta\n"
           "st.save_file({\"w\": np.array([[1.5, -2], [3, 4]], np.float32), \"n\": "
           "np.array([7, 8, 9], np.int64), \"flag\": np.array([True, False]), \"s\": "
           "np.array(2.5)}, \"%s/py.safetensors\")\n"
           "'",
           path, path, clt_device_name(dev), dir);
  ck_assert_msg(system(cmd) == 0, "the Python side failed (see its output above)");
  /* Python writes, clt reads. */
  snprintf(path, sizeof path, "%s/py.safetensors", dir);
  clt_params *q;
  CU_OK(clt_load(path, NULL, &q));
  ck_assert_uint_eq(clt_params_count(q), 4);
  float w[4];
  int64_t n[3];
  uint8_t flag[2];
  double s;
  int64_t sw[2] = {2, 2}, sn[1] = {3}, sf[1] = {2};
  cu_assert_meta(clt_params_get(q, "w"), CLT_F32, clt_cpu(), 2, sw, "w");
  cu_assert_meta(clt_params_get(q, "n"), CLT_I64, clt_cpu(), 1, sn, "n");
  cu_assert_meta(clt_params_get(q, "flag"), CLT_BOOL, clt_cpu(), 1, sf, "flag");
  cu_assert_meta(clt_params_get(q, "s"), CLT_F64, clt_cpu(), 0, NULL, "s");
  CU_OK(clt_tensor_read(clt_params_get(q, "w"), w, sizeof w));
  CU_OK(clt_tensor_read(clt_params_get(q, "n"), n, sizeof n));
  CU_OK(clt_tensor_read(clt_params_get(q, "flag"), flag, sizeof flag));
  CU_OK(clt_item(clt_params_get(q, "s"), &s));
  ck_assert(w[0] == 1.5f && w[1] == -2 && w[2] == 3 && w[3] == 4);
  ck_assert(n[0] == 7 && n[1] == 8 && n[2] == 9);
  ck_assert(flag[0] == 1 && flag[1] == 0);
  ck_assert(s == 2.5);
  clt_params_release(q);
  clt_params_release(p);
  rmdir_all(dir);
}
END_TEST

/* transformers' from_pretrained takes what clt_save writes: a tiny GPT-2 made here (nothing is
 * downloaded), loaded by clt, saved again as loaded (its "format" kept), as a sharded checkpoint
 * (clt_save_sharded: several shards and model.safetensors.index.json) and with the format
 * removed (clt adds "pt"), each read back by transformers with the same weights. Needs torch and
 * transformers, which CI does not install: skipped where they are missing; test_save_bytes checks
 * the "format" entry in C. */
START_TEST(test_transformers) {
  if (system("python3 -c 'import torch, transformers' >/dev/null 2>&1") != 0) {
    cu_skip("test_transformers", "python3 with torch and transformers is not available (pip "
                                 "install torch transformers); test_save_bytes checks the "
                                 "\"format\" entry they need");
    return;
  }
  char *dir = tmpdir(), script[256], cmd[1024], path[256];
  snprintf(script, sizeof script, "%s/tf.py", dir);
  static const char py[] =
      "import os, shutil, sys, torch, transformers\n"
      "from transformers import GPT2Config, GPT2LMHeadModel\n"
      "d = sys.argv[2]\n"
      "if sys.argv[1] == 'make':\n"
      "    torch.manual_seed(0)\n"
      "    cfg = GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8)\n"
      "    GPT2LMHeadModel(cfg).save_pretrained(d + '/ref', safe_serialization=True)\n"
      "    for k in ('kept', 'added', 'sharded'):\n"
      "        os.makedirs(d + '/' + k)\n"
      "        shutil.copy(d + '/ref/config.json', d + '/' + k)\n"
      "else:\n"
      "    ref = GPT2LMHeadModel.from_pretrained(d + '/ref').state_dict()\n"
      "    shards = [f for f in os.listdir(d + '/sharded') if f.endswith('.safetensors')]\n"
      "    assert len(shards) > 1, shards\n"
      "    for k in ('kept', 'added', 'sharded'):\n"
      "        got = GPT2LMHeadModel.from_pretrained(d + '/' + k).state_dict()\n"
      "        assert got.keys() == ref.keys(), k\n"
      "        for n in ref:\n"
      "            assert torch.equal(got[n], ref[n]), (k, n)\n"
      "    print('transformers', transformers.__version__, 'loaded all three')\n";
  write_bytes(script, py, strlen(py));
  snprintf(cmd, sizeof cmd, "python3 %s make %s", script, dir);
  ck_assert_msg(system(cmd) == 0, "making the model failed (see its output above)");
  clt_params *q;
  snprintf(path, sizeof path, "%s/ref/model.safetensors", dir);
  CU_OK(clt_load(path, NULL, &q));
  ck_assert_str_eq(clt_params_metadata(q, "format"), "pt");
  snprintf(path, sizeof path, "%s/kept/model.safetensors", dir);
  CU_OK(clt_save(path, q));
  snprintf(path, sizeof path, "%s/sharded", dir); /* shards of at most 1 KiB of weights */
  CU_OK(clt_save_sharded(path, q, 1024));
  CU_OK(clt_params_set_metadata(q, "format", NULL));
  snprintf(path, sizeof path, "%s/added/model.safetensors", dir);
  CU_OK(clt_save(path, q));
  clt_params_release(q);
  snprintf(cmd, sizeof cmd, "python3 %s check %s", script, dir);
  ck_assert_msg(system(cmd) == 0, "transformers refused clt's files (see its output above)");
  rmdir_all(dir);
}
END_TEST

Suite *io_suite(void) {
  Suite *s = suite_create("io");
  TCase *tc = cu_tcase("io");
  tcase_add_test(tc, test_devices);
  tcase_add_test(tc, test_missing_device);
  tcase_add_test(tc, test_roundtrip);
  tcase_add_test(tc, test_args_and_io_errors);
  tcase_add_test(tc, test_atomic);
  tcase_add_test(tc, test_save_modes);
  tcase_add_test(tc, test_save_readonly_dir);
  tcase_add_test(tc, test_save_over_dir_and_link);
  tcase_add_test(tc, test_hostile);
  tcase_add_test(tc, test_python);
  tcase_add_test(tc, test_save_bytes);
  tcase_add_test(tc, test_metadata_kept);
  tcase_add_test(tc, test_not_safetensors);
  tcase_add_test(tc, test_too_big_fails_before_reading);
  tcase_add_test(tc, test_staged_upload);
  tcase_add_test(tc, test_sharded);
  tcase_add_test(tc, test_save_sharded);
  tcase_add_test(tc, test_save_sharded_errors);
  tcase_add_test(tc, test_transformers);
  suite_add_tcase(s, tc);
  return s;
}
