/* SPDX-License-Identifier: MIT */
/* check_npy.c - NumPy .npy files: round trips of every dtype on every device, 0-d and empty
 * arrays, big-endian and Fortran-ordered files written here byte by byte, versions 2.0 and 3.0,
 * NumPy itself on both sides (skipped without numpy), and hostile files, each of which must give
 * CLT_ERR_FORMAT or CLT_ERR_DTYPE, never a crash or a huge allocation. */
#define _POSIX_C_SOURCE 200809L
#include "check_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert(d != NULL);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      n++;
  closedir(d);
  return n;
}

/* Removes a directory made by cu_temp_dir, with its files. */
static void rm_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  char p[1024];
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  closedir(d);
  rmdir(dir);
}

static void write_bytes(const char *path, const void *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot create %s", path);
  ck_assert(n == 0 || fwrite(buf, 1, n, f) == n);
  ck_assert(fclose(f) == 0);
}

static unsigned char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = cu_malloc((size_t)len);
  ck_assert(fread(buf, 1, (size_t)len, f) == (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return buf;
}

/* Writes a .npy file by hand: the preamble of version major.0, the dict padded with spaces and
 * a newline to a multiple of 64 (as NumPy does), then n data bytes. */
static void write_npy(const char *path, int major, const char *dict, const void *data, size_t n) {
  size_t pre = major == 1 ? 10 : 12, len = strlen(dict);
  size_t total = (pre + len + 1 + 63) / 64 * 64;
  unsigned char *buf = cu_malloc(total + n);
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  size_t hlen = total - pre;
  for (size_t i = 0; i < pre - 8; i++)
    buf[8 + i] = (unsigned char)(hlen >> (8 * i));
  memcpy(buf + pre, dict, len);
  memset(buf + pre + len, ' ', total - pre - len - 1);
  buf[total - 1] = '\n';
  if (n)
    memcpy(buf + total, data, n);
  write_bytes(path, buf, total + n);
  free(buf);
}

static const int64_t shapes[][3] = {{0, 0, 0}, {7, 0, 0}, {3, 5, 0}, {2, 3, 4}, {2, 0, 3}};
static const int shape_ndims[] = {0, 1, 2, 3, 3};

START_TEST(test_round_trip) {
  char dir[512], path[600];
  cu_temp_dir(dir, sizeof dir, "npy");
  snprintf(path, sizeof path, "%s/a.npy", dir);
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  cu_rng r;
  cu_rng_seed(&r, 42);
  for (int k = 0; k < nd; k++)
    for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
      if (!cu_dtype_ok("test_round_trip", devs[k], (clt_dtype)dt))
        continue;
      if (dt == CLT_BF16) { /* no NumPy type code: refused, the message names the way out */
        int64_t one = 1;
        clt_tensor *b;
        CU_OK(clt_zeros(CLT_BF16, 1, &one, devs[k], &b));
        CU_FAILS(clt_save_npy(path, b), CLT_ERR_DTYPE, "clt_save_npy");
        ck_assert_ptr_nonnull(strstr(clt_last_error(), "clt_cast"));
        clt_tensor_release(b);
        continue;
      }
      for (size_t s = 0; s < sizeof shape_ndims / sizeof shape_ndims[0]; s++) {
        int ndim = shape_ndims[s];
        int64_t n = cu_numel(ndim, shapes[s]);
        size_t bytes = (size_t)n * clt_dtype_size((clt_dtype)dt);
        void *src = cu_malloc(bytes);
        cu_fill(src, (clt_dtype)dt, n, &r, 0, 100, 0);
        clt_tensor *t = cu_tensor(src, (clt_dtype)dt, ndim, shapes[s], devs[k]), *back;
        CU_OK(clt_save_npy(path, t));
        /* The data starts at a multiple of 64, after a version 1.0 header. */
        size_t flen;
        unsigned char *file = read_file(path, &flen);
        ck_assert(flen >= bytes + 64);
        ck_assert_msg((flen - bytes) % 64 == 0, "data at offset %zu", flen - bytes);
        ck_assert(memcmp(file, "\x93NUMPY\x01\x00", 8) == 0);
        ck_assert_uint_eq(file[8] | file[9] << 8, flen - bytes - 10);
        ck_assert(file[flen - bytes - 1] == '\n');
        free(file);
        for (int j = 0; j < nd; j++) {
          if (!clt_device_has_fp64(devs[j]) && dt == CLT_F64)
            continue;
          CU_OK(clt_load_npy(path, devs[j], &back));
          cu_assert_meta(back, (clt_dtype)dt, devs[j], ndim, shapes[s], "loaded");
          void *got = cu_read(back);
          ck_assert_msg(bytes == 0 || memcmp(got, src, bytes) == 0, "%s %s -> %s: data differ",
                        cu_dt_name((clt_dtype)dt), cu_dev_name(devs[k]), cu_dev_name(devs[j]));
          free(got);
          clt_tensor_release(back);
        }
        clt_tensor_release(t);
        free(src);
      }
    }
  ck_assert_int_eq(count_files(dir), 1); /* no temporary file left behind */
  rm_dir(dir);
}
END_TEST

/* The header's text is what NumPy writes, so other readers parse it. */
START_TEST(test_header_text) {
  char dir[512], path[600];
  cu_temp_dir(dir, sizeof dir, "npy");
  snprintf(path, sizeof path, "%s/h.npy", dir);
  static const struct {
    clt_dtype dt;
    int ndim;
    int64_t shape[2];
    const char *text;
  } cases[] = {
      {CLT_F32, 2, {2, 3}, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
      {CLT_F64, 1, {4, 0}, "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }"},
      {CLT_I32, 0, {0, 0}, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }"},
      {CLT_I64, 1, {0, 0}, "{'descr': '<i8', 'fortran_order': False, 'shape': (0,), }"},
      {CLT_U8, 1, {1, 0}, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }"},
      {CLT_BOOL, 1, {1, 0}, "{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    clt_tensor *t;
    CU_OK(clt_zeros(cases[i].dt, cases[i].ndim, cases[i].shape, clt_cpu(), &t));
    CU_OK(clt_save_npy(path, t));
    size_t n;
    unsigned char *file = read_file(path, &n);
    ck_assert_msg(memcmp(file + 10, cases[i].text, strlen(cases[i].text)) == 0, "%s: %.60s",
                  cases[i].text, file + 10);
    free(file);
    clt_tensor_release(t);
  }
  rm_dir(dir);
}
END_TEST

/* Big-endian files are byte-swapped on load; Fortran-ordered ones reordered into C order. */
START_TEST(test_big_endian_and_fortran) {
  char dir[512], path[600];
  cu_temp_dir(dir, sizeof dir, "npy");
  snprintf(path, sizeof path, "%s/b.npy", dir);
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int k = 0; k < nd; k++) {
    clt_device *d = devs[k];
    clt_tensor *t;
    /* '>f8' [1.5, -2.0]: 0x3FF8000000000000, 0xC000000000000000 */
    if (clt_device_has_fp64(d)) {
      static const unsigned char f8[16] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0, 0, 0, 0, 0, 0};
      write_npy(path, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", f8, 16);
      CU_OK(clt_load_npy(path, d, &t));
      double *v = cu_read(t);
      ck_assert(v[0] == 1.5 && v[1] == -2.0);
      free(v);
      clt_tensor_release(t);
    }
    /* '>i4' (2, 2): 1, -2, 0x01020304, 256 */
    static const unsigned char i4[16] = {0, 0,    0,    1,    0xff, 0xff, 0xff, 0xfe,
                                         1, 0x02, 0x03, 0x04, 0,    0,    1,    0};
    write_npy(path, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2, 2), }", i4, 16);
    CU_OK(clt_load_npy(path, d, &t));
    int32_t *w = cu_read(t);
    ck_assert(w[0] == 1 && w[1] == -2 && w[2] == 0x01020304 && w[3] == 256);
    free(w);
    clt_tensor_release(t);
    /* '>i8' (1,): -3 */
    static const unsigned char i8[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfd};
    write_npy(path, 1, "{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }", i8, 8);
    CU_OK(clt_load_npy(path, d, &t));
    int64_t *q = cu_read(t);
    ck_assert(q[0] == -3);
    free(q);
    clt_tensor_release(t);

    /* Fortran order (2, 3, 4): the file holds element [i][j][l] at i + 2 j + 6 l. */
    int32_t fdata[24], want[24];
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++)
        for (int l = 0; l < 4; l++) {
          int32_t v = 100 * i + 10 * j + l;
          fdata[i + 2 * j + 6 * l] = v;
          want[(i * 3 + j) * 4 + l] = v;
        }
    write_npy(path, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", fdata,
              sizeof fdata);
    CU_OK(clt_load_npy(path, d, &t));
    cu_assert_meta(t, CLT_I32, d, 3, (int64_t[]){2, 3, 4}, "fortran");
    w = cu_read(t);
    for (int i = 0; i < 24; i++)
      ck_assert_msg(w[i] == want[i], "%s: [%d] = %d, want %d", cu_dev_name(d), i, w[i], want[i]);
    free(w);
    clt_tensor_release(t);
    /* Fortran and big-endian together, 2-D, with the keys in another order. */
    static const unsigned char fb[24] = {0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2,
                                         0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 6};
    write_npy(path, 1, "{'shape': (2, 3), 'fortran_order': True, 'descr': '>i4'}", fb, 24);
    CU_OK(clt_load_npy(path, d, &t));
    w = cu_read(t);
    for (int i = 0; i < 6; i++)
      ck_assert_int_eq(w[i], i + 1);
    free(w);
    clt_tensor_release(t);
  }
  rm_dir(dir);
}
END_TEST

START_TEST(test_versions) {
  char dir[512], path[600];
  cu_temp_dir(dir, sizeof dir, "npy");
  snprintf(path, sizeof path, "%s/v.npy", dir);
  float data[3] = {1, 2, 3};
  for (int major = 1; major <= 3; major++) {
    write_npy(path, major, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3,)}", data,
              sizeof data);
    clt_tensor *t;
    CU_OK(clt_load_npy(path, clt_cpu(), &t));
    ck_assert(memcmp(clt_tensor_data(t), data, sizeof data) == 0);
    clt_tensor_release(t);
  }
  rm_dir(dir);
}
END_TEST

/* A hostile file: load must fail with want, the message naming the file and containing what. */
static void expect_bad(const char *path, clt_status want, const char *what) {
  clt_tensor *t = CU_SENTINEL;
  CU_FAILS(clt_load_npy(path, clt_cpu(), &t), want, "clt_load_npy");
  ck_assert_msg(t == CU_SENTINEL, "out-parameter written on failure");
  ck_assert_msg(strstr(clt_last_error(), path) != NULL, "message does not name the file: %s",
                clt_last_error());
  ck_assert_msg(strstr(clt_last_error(), what) != NULL, "message lacks '%s': %s", what,
                clt_last_error());
}

START_TEST(test_hostile) {
  char dir[512], path[600];
  cu_temp_dir(dir, sizeof dir, "npy");
  snprintf(path, sizeof path, "%s/bad.npy", dir);
  float data[6] = {0};
  const char *ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

  /* Truncations of a good file at every length. */
  write_npy(path, 1, ok_dict, data, sizeof data);
  size_t n;
  unsigned char *good = read_file(path, &n);
  for (size_t cut = 0; cut < n; cut++) {
    write_bytes(path, good, cut);
    clt_tensor *t = CU_SENTINEL;
    CU_FAILS(clt_load_npy(path, clt_cpu(), &t), CLT_ERR_FORMAT, "clt_load_npy");
    ck_assert(t == CU_SENTINEL);
  }
  /* One byte too many. */
  unsigned char *longer = cu_malloc(n + 1);
  memcpy(longer, good, n);
  longer[n] = 0;
  write_bytes(path, longer, n + 1);
  expect_bad(path, CLT_ERR_FORMAT, "trailing bytes");
  free(longer);

  /* Header lengths beyond the file, and near 2^32 (version 2.0). */
  unsigned char pre[12];
  memcpy(pre, good, 10);
  pre[8] = 0xff;
  pre[9] = 0xff;
  write_bytes(path, pre, 10);
  expect_bad(path, CLT_ERR_FORMAT, "past the end");
  memcpy(pre, "\x93NUMPY\x02\x00\xff\xff\xff\xff", 12);
  write_bytes(path, pre, 12);
  expect_bad(path, CLT_ERR_FORMAT, "limit");
  memcpy(pre, "\x93NUMPY\x04\x00\x10\x00", 10);
  write_bytes(path, pre, 10);
  expect_bad(path, CLT_ERR_FORMAT, "version 4.0");
  memcpy(pre, "\x93NUMPX\x01\x00\x10\x00", 10);
  write_bytes(path, pre, 10);
  expect_bad(path, CLT_ERR_FORMAT, "not a .npy file");
  free(good);

  static const struct {
    const char *dict;
    clt_status want;
    const char *what;
  } cases[] = {
      /* huge shapes: a product that overflows, one that does not but is far beyond the file */
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
       CLT_ERR_FORMAT, "overflows"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976,), }",
       CLT_ERR_FORMAT, "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }", CLT_ERR_FORMAT,
       "truncated"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
       CLT_ERR_FORMAT, "larger than"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", CLT_ERR_FORMAT, "negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 6), }",
       CLT_ERR_FORMAT, "more than 8"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", CLT_ERR_FORMAT, "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", CLT_ERR_FORMAT,
       "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", CLT_ERR_FORMAT, "commas"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3.0), }", CLT_ERR_FORMAT, "commas"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", CLT_ERR_FORMAT, "integers"},
      /* bad dicts */
      {"{'descr': '<f4', 'fortran_order': False}", CLT_ERR_FORMAT, "no 'shape'"},
      {"{'descr': '<f4', 'shape': (6,)}", CLT_ERR_FORMAT, "no 'fortran_order'"},
      {"{'fortran_order': False, 'shape': (6,)}", CLT_ERR_FORMAT, "no 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", CLT_ERR_FORMAT,
       "other than"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", CLT_ERR_FORMAT,
       "twice"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (6,)}", CLT_ERR_FORMAT, "True or False"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (6,)}", CLT_ERR_FORMAT, "True or False"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}", CLT_ERR_FORMAT, "commas"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (6,)}", CLT_ERR_FORMAT, "':'"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (6,)}", CLT_ERR_FORMAT, "key"},
      {"'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", CLT_ERR_FORMAT, "dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", CLT_ERR_FORMAT, "commas"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", CLT_ERR_FORMAT, "followed"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (6,)}", CLT_ERR_FORMAT, "'descr'"},
      {"", CLT_ERR_FORMAT, "dict"},
      /* wrong or unsupported descr */
      {"{'descr': '<i2', 'fortran_order': False, 'shape': (12,), }", CLT_ERR_DTYPE, "'<i2'"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", CLT_ERR_DTYPE, "'<c8'"},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", CLT_ERR_DTYPE, "'|O'"},
      {"{'descr': 'O', 'fortran_order': False, 'shape': (3,), }", CLT_ERR_DTYPE, "'O'"},
      {"{'descr': '|f4', 'fortran_order': False, 'shape': (6,), }", CLT_ERR_DTYPE, "'|f4'"},
      {"{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", CLT_ERR_DTYPE, "'<U3'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", CLT_ERR_DTYPE,
       "structured"},
      /* data shorter or longer than the shape */
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }", CLT_ERR_FORMAT, "truncated"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", CLT_ERR_FORMAT,
       "trailing bytes"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", CLT_ERR_FORMAT, "trailing bytes"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }", CLT_ERR_FORMAT, "truncated"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_npy(path, 1, cases[i].dict, data, sizeof data);
    expect_bad(path, cases[i].want, cases[i].what);
  }

  /* A bool array holding something other than 0 and 1. */
  unsigned char b[3] = {0, 1, 2};
  write_npy(path, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b, 3);
  expect_bad(path, CLT_ERR_FORMAT, "not 0 or 1");

  /* Not a file at all. */
  clt_tensor *t = CU_SENTINEL;
  snprintf(path, sizeof path, "%s/missing.npy", dir);
  CU_FAILS(clt_load_npy(path, clt_cpu(), &t), CLT_ERR_IO, "clt_load_npy");
  CU_FAILS(clt_load_npy(dir, clt_cpu(), &t), CLT_ERR_IO, "clt_load_npy");
  CU_FAILS(clt_load_npy(NULL, clt_cpu(), &t), CLT_ERR_INVALID_ARGUMENT, "clt_load_npy");
  CU_FAILS(clt_load_npy(path, NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_load_npy");
  CU_FAILS(clt_load_npy(path, clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_load_npy");
  ck_assert(t == CU_SENTINEL);
  rm_dir(dir);
}
END_TEST

START_TEST(test_save_errors) {
  char dir[512], path[600];
  cu_temp_dir(dir, sizeof dir, "npy");
  clt_tensor *t;
  CU_OK(clt_arange(0, 4, 1, CLT_F32, clt_cpu(), &t));
  /* Saving over an existing file replaces it; a failed save leaves the old file whole. */
  snprintf(path, sizeof path, "%s/x.npy", dir);
  write_bytes(path, "old", 3);
  CU_OK(clt_save_npy(path, t));
  clt_tensor *back;
  CU_OK(clt_load_npy(path, clt_cpu(), &back));
  ck_assert(memcmp(clt_tensor_data(back), clt_tensor_data(t), 16) == 0);
  clt_tensor_release(back);
  snprintf(path, sizeof path, "%s/no/such/dir/x.npy", dir);
  CU_FAILS(clt_save_npy(path, t), CLT_ERR_IO, "clt_save_npy");
  ck_assert(strstr(clt_last_error(), path) != NULL);
  CU_FAILS(clt_save_npy(NULL, t), CLT_ERR_INVALID_ARGUMENT, "clt_save_npy");
  CU_FAILS(clt_save_npy(path, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_save_npy");
  ck_assert_int_eq(count_files(dir), 1);
  clt_tensor_release(t);
  rm_dir(dir);
}
END_TEST

static int have_numpy(void) { return system("python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

/* NumPy reads what clt writes, and clt reads what NumPy writes (Fortran order and '>f8' too). */
START_TEST(test_numpy_interop) {
  if (!have_numpy()) {
    cu_skip("test_numpy_interop", "python3 with numpy is not available");
    return;
  }
  char dir[512], cmd[4096];
  cu_temp_dir(dir, sizeof dir, "npy");
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  clt_device *d = nd > 1 ? devs[1] : devs[0];
  /* clt -> NumPy: every dtype, from a device. */
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    if ((!clt_device_has_fp64(d) && dt == CLT_F64) || dt == CLT_BF16)
      continue;
    clt_tensor *a, *t;
    CU_OK(clt_arange(0, 6, 1, CLT_I32, d, &a));
    CU_OK(clt_cast(a, (clt_dtype)dt, &t));
    char path[600];
    snprintf(path, sizeof path, "%s/%s.npy", dir, cu_dt_name((clt_dtype)dt));
    CU_OK(clt_save_npy(path, t));
    clt_tensor_release(a);
    clt_tensor_release(t);
  }
  snprintf(cmd, sizeof cmd,
           "cd '%s' && python3 -c \"\n"
           "import numpy as np\n"
           "want = {'f32': 'float32', 'f64': 'float64', 'i32': 'int32', 'i64': 'int64',\n"
           "        'u8': 'uint8', 'bool': 'bool', 'f16': 'float16'}\n"
           "import os\n"
           "for k, v in want.items():\n"
           "    if not os.path.exists(k + '.npy'): continue\n"
           "    a = np.load(k + '.npy')\n"
           "    assert a.dtype == np.dtype(v), (k, a.dtype)\n"
           "    assert (a == np.arange(6).astype(v)).all(), (k, a)\n"
           "x = np.arange(24, dtype='<i4').reshape(2, 3, 4)\n"
           "np.save('fortran.npy', np.asfortranarray(x))\n"
           "np.save('big.npy', (np.arange(6, dtype='>f8') / 4).reshape(3, 2))\n"
           "np.save('fbig.npy', np.asfortranarray(np.arange(6, dtype='>i8').reshape(2, 3)))\n"
           "np.save('scalar.npy', np.float32(2.5))\n"
           "np.save('empty.npy', np.zeros((0, 3), dtype=np.uint8))\n"
           "np.save('bools.npy', np.array([True, False, True]))\n"
           "np.save('half.npy', np.array([1, 0.1, 65504, 2.0**-24, -0.0, np.inf], dtype='<f2'))\n"
           "\"",
           dir);
  ck_assert_msg(system(cmd) == 0, "the Python side failed");
  char path[600];
  clt_tensor *t;
  snprintf(path, sizeof path, "%s/fortran.npy", dir);
  CU_OK(clt_load_npy(path, d, &t));
  cu_assert_meta(t, CLT_I32, d, 3, (int64_t[]){2, 3, 4}, "fortran");
  int32_t *w = cu_read(t);
  for (int i = 0; i < 24; i++)
    ck_assert_int_eq(w[i], i);
  free(w);
  clt_tensor_release(t);
  snprintf(path, sizeof path, "%s/big.npy", dir);
  if (clt_device_has_fp64(d)) {
    CU_OK(clt_load_npy(path, d, &t));
    cu_assert_meta(t, CLT_F64, d, 2, (int64_t[]){3, 2}, "big");
    double *v = cu_read(t);
    for (int i = 0; i < 6; i++)
      ck_assert(v[i] == i / 4.0);
    free(v);
    clt_tensor_release(t);
  }
  snprintf(path, sizeof path, "%s/half.npy", dir); /* NumPy's own f16 rounding */
  CU_OK(clt_load_npy(path, d, &t));
  cu_assert_meta(t, CLT_F16, d, 1, (int64_t[]){6}, "half");
  uint16_t *h = cu_read(t);
  static const uint16_t hbits[6] = {0x3C00, 0x2E66, 0x7BFF, 0x0001, 0x8000, 0x7C00};
  for (int i = 0; i < 6; i++)
    ck_assert_msg(h[i] == hbits[i], "half.npy [%d]: 0x%04X, expected 0x%04X", i, h[i], hbits[i]);
  free(h);
  clt_tensor_release(t);
  snprintf(path, sizeof path, "%s/fbig.npy", dir);
  CU_OK(clt_load_npy(path, d, &t));
  int64_t *q = cu_read(t);
  for (int i = 0; i < 6; i++)
    ck_assert(q[i] == i);
  free(q);
  clt_tensor_release(t);
  snprintf(path, sizeof path, "%s/scalar.npy", dir);
  CU_OK(clt_load_npy(path, d, &t));
  cu_assert_meta(t, CLT_F32, d, 0, NULL, "scalar");
  double item;
  CU_OK(clt_item(t, &item));
  ck_assert(item == 2.5);
  clt_tensor_release(t);
  snprintf(path, sizeof path, "%s/empty.npy", dir);
  CU_OK(clt_load_npy(path, d, &t));
  cu_assert_meta(t, CLT_U8, d, 2, (int64_t[]){0, 3}, "empty");
  clt_tensor_release(t);
  snprintf(path, sizeof path, "%s/bools.npy", dir);
  CU_OK(clt_load_npy(path, d, &t));
  uint8_t *b = cu_read(t);
  ck_assert(b[0] == 1 && b[1] == 0 && b[2] == 1);
  free(b);
  clt_tensor_release(t);
  rm_dir(dir);
}
END_TEST

Suite *npy_suite(void) {
  Suite *s = suite_create("npy");
  TCase *tc = cu_tcase("npy");
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_header_text);
  tcase_add_test(tc, test_big_endian_and_fortran);
  tcase_add_test(tc, test_versions);
  tcase_add_test(tc, test_hostile);
  tcase_add_test(tc, test_save_errors);
  tcase_add_test(tc, test_numpy_interop);
  suite_add_tcase(s, tc);
  return s;
}
