/* check_io.c - checkpoints (clt_save, clt_load): devices remembered and mapped, every dtype,
 * 0-d and empty tensors, atomic saves, hand-made hostile files, and interoperability with
 * Python's safetensors. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
    {"metadata not strings", "{" T_A ",\"__metadata__\":{\"clt.device.a\":7}}", "strings", 8},
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
  ck_assert_ptr_nonnull(strstr(clt_last_error(), "I16"));

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
  suite_add_tcase(s, tc);
  return s;
}
