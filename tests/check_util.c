/* SPDX-License-Identifier: MIT */
/* check_util.c - helpers shared by the Check suites (see check_util.h). */
#define _POSIX_C_SOURCE 200809L

#include "check_util.h"
#include "backend.h" /* clt__cl_matmul_clear_cache */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cu_forked = 1;
char cu_sentinel_storage[16];

/* After every test, in its child: empty CLBlast's program cache before the process exits.
 * Otherwise CLBlast releases its programs from a static destructor, after Oclgrind 21.10 has
 * destroyed the thread-local state its clReleaseProgram writes to, and the heap is corrupted at
 * exit (tests/oclgrind/exit_release.c): the test's child may then abort after passing. */
static void clear_clblast(void) { clt__cl_matmul_clear_cache(); }

TCase *cu_tcase(const char *name) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, 300);
  tcase_add_checked_fixture(tc, NULL, clear_clblast);
  return tc;
}

void cu_skip(const char *test, const char *why) {
  printf("SKIP %s: %s\n", test, why);
  fflush(stdout);
}

/* ---- devices ------------------------------------------------------------------------------ */

int cu_devices(clt_device **devs) {
  int n = 0;
  devs[n++] = clt_cpu();
  ck_assert_msg(devs[0] != NULL, "clt_cpu() returned NULL");
  int count = clt_device_count();
  for (int i = 0; i < count && n < CU_MAX_DEVICES; i++) {
    devs[n] = clt_device_at(i);
    ck_assert_msg(devs[n] != NULL, "clt_device_at(%d) returned NULL: %s", i, clt_last_error());
    n++;
  }
  return n;
}

bool cu_is_cl(const clt_device *d) { return strncmp(clt_device_name(d), "cl:", 3) == 0; }

int cu_cl_count(void) {
  int n = 0;
  for (int i = 0; i < clt_device_count(); i++)
    n += cu_is_cl(clt_device_at(i));
  return n;
}

int cu_need_cl(const char *test, int n) {
  int count = cu_cl_count();
  if (count >= n)
    return 1;
  char why[128];
  snprintf(why, sizeof why,
           "needs %d OpenCL devices, found %d (set POCL_DEVICES=\"pthread pthread\")", n, count);
  cu_skip(test, why);
  return 0;
}

bool cu_is_oclgrind(const clt_device *d) {
  const char *s = d ? clt_device_description(d) : NULL;
  return s && strstr(s, "Oclgrind") != NULL;
}

int cu_dtype_ok(const char *test, clt_device *d, clt_dtype dt) {
  if (dt != CLT_F64 || clt_device_has_fp64(d))
    return 1;
  char why[128];
  snprintf(why, sizeof why, "f64 not supported on %s", clt_device_name(d));
  cu_skip(test, why);
  return 0;
}

const char *cu_dev_name(clt_device *d) {
  const char *s = d ? clt_device_name(d) : NULL;
  return s ? s : "(null)";
}

const char *cu_dt_name(clt_dtype dt) {
  static const char *names[] = {"f32", "f64", "i32", "i64", "u8", "bool", "f16", "bf16"};
  return (unsigned)dt < 8 ? names[dt] : "?";
}

int cu_is_float(clt_dtype dt) {
  return dt == CLT_F32 || dt == CLT_F64 || dt == CLT_F16 || dt == CLT_BF16;
}

/* ---- f16 and bf16, independently of the library: by arithmetic on the value (frexp, rint in
 * the default round-to-nearest-even mode), not by bit manipulation of an f32 as lib/clt-internal.h
 * does. */

/* v rounded to a float of `bits` significand bits, exponents emin..emax (of the value in
 * [1, 2)); subnormals below 2^emin; inf above. Exact in double: v / q and r * q are scalings by
 * powers of two. (Not long double: valgrind runs x87 arithmetic at 64 bits and loses its
 * infinities, which made the valgrind lane see wrong expected values.) */
static double round_float(double v, int bits, int emin, int emax) {
  if (isnan(v) || isinf(v) || v == 0)
    return v;
  int e;
  frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
  e -= 1;
  if (e < emin)
    e = emin;
  double q = ldexp(1.0, e - (bits - 1)); /* the spacing at v */
  double r = rint(v / q) * q;
  if (fabs(r) >= ldexp(1.0, emax + 1))
    return copysign(INFINITY, v);
  return r;
}

double cu_round_narrow(double v, clt_dtype dt) {
  return dt == CLT_F16 ? round_float(v, 11, -14, 15) : round_float(v, 8, -126, 127);
}

uint16_t cu_narrow_bits(double v, clt_dtype dt) {
  if (isnan(v))
    return dt == CLT_F16 ? 0x7e00 : 0x7fc0;
  int man = dt == CLT_F16 ? 10 : 7, bias = dt == CLT_F16 ? 15 : 127;
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  double a = fabs(cu_round_narrow(v, dt));
  if (isinf(a))
    return sign | (uint16_t)(((1u << (15 - man)) - 1) << man);
  if (a < ldexp(1.0, 1 - bias)) /* subnormal or zero: a multiple of 2^(1-bias-man) */
    return sign | (uint16_t)ldexp(a, bias - 1 + man);
  int e;
  frexp(a, &e);
  e -= 1;
  uint16_t m = (uint16_t)(ldexp(a, man - e) - ldexp(1.0, man));
  return sign | (uint16_t)((unsigned)(e + bias) << man) | m;
}

double cu_narrow_value(uint16_t h, clt_dtype dt) {
  int man = dt == CLT_F16 ? 10 : 7, bias = dt == CLT_F16 ? 15 : 127;
  int ebits = 15 - man;
  unsigned e = (h >> man) & ((1u << ebits) - 1), m = h & ((1u << man) - 1);
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == (1u << ebits) - 1)
    return m ? NAN : s * INFINITY;
  if (e == 0)
    return s * ldexp((double)m, 1 - bias - man);
  return s * ldexp((double)(m | (1u << man)), (int)e - bias - man);
}

void cu_assert_prefix(const char *msg, const char *fn, const char *what) {
  size_t n = strlen(fn);
  ck_assert_msg(msg != NULL, "%s: clt_last_error() is NULL", what);
  ck_assert_msg(strncmp(msg, fn, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ',
                "%s: message does not start with \"%s: \": \"%s\"", what, fn, msg);
}

/* ---- host data ---------------------------------------------------------------------------- */

void cu_rng_seed(cu_rng *r, uint64_t seed) {
  r->s = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
}

uint64_t cu_rng_next(cu_rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double cu_rng_uniform(cu_rng *r) {
  return (double)(cu_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

void cu_fill(void *buf, clt_dtype dt, int64_t n, cu_rng *r, double lo, double hi, int flags) {
  for (int64_t i = 0; i < n; i++) {
    if (dt == CLT_BOOL) {
      cu_set_i64(buf, dt, i, (flags & CU_NONZERO) ? 1 : (int64_t)(cu_rng_next(r) >> 63));
      continue;
    }
    for (;;) {
      if (cu_is_float(dt)) {
        double v = lo + (hi - lo) * cu_rng_uniform(r);
        cu_set(buf, dt, i, v);
      } else {
        int64_t a = (int64_t)lo, b = (int64_t)hi;
        uint64_t span = (uint64_t)(b - a) + 1;
        cu_set_i64(buf, dt, i, a + (int64_t)(cu_rng_next(r) % span));
      }
      if (!(flags & CU_NONZERO) || cu_get(buf, dt, i) != 0.0)
        break;
    }
  }
}

double cu_get(const void *buf, clt_dtype dt, int64_t i) {
  switch (dt) {
  case CLT_F32:
    return ((const float *)buf)[i];
  case CLT_F64:
    return ((const double *)buf)[i];
  case CLT_I32:
    return ((const int32_t *)buf)[i];
  case CLT_I64:
    return (double)((const int64_t *)buf)[i];
  case CLT_U8:
    return ((const uint8_t *)buf)[i];
  case CLT_BOOL:
    return ((const uint8_t *)buf)[i];
  case CLT_F16:
  case CLT_BF16:
    return cu_narrow_value(((const uint16_t *)buf)[i], dt);
  }
  ck_abort_msg("cu_get: bad dtype %d", (int)dt);
  return 0;
}

int64_t cu_get_i64(const void *buf, clt_dtype dt, int64_t i) {
  switch (dt) {
  case CLT_F32:
    return (int64_t)((const float *)buf)[i];
  case CLT_F64:
    return (int64_t)((const double *)buf)[i];
  case CLT_I32:
    return ((const int32_t *)buf)[i];
  case CLT_I64:
    return ((const int64_t *)buf)[i];
  case CLT_U8:
    return ((const uint8_t *)buf)[i];
  case CLT_BOOL:
    return ((const uint8_t *)buf)[i];
  case CLT_F16:
  case CLT_BF16:
    return (int64_t)cu_narrow_value(((const uint16_t *)buf)[i], dt);
  }
  ck_abort_msg("cu_get_i64: bad dtype %d", (int)dt);
  return 0;
}

void cu_set(void *buf, clt_dtype dt, int64_t i, double v) {
  switch (dt) {
  case CLT_F32:
    ((float *)buf)[i] = (float)v;
    return;
  case CLT_F64:
    ((double *)buf)[i] = v;
    return;
  case CLT_BOOL:
    ((uint8_t *)buf)[i] = v != 0.0;
    return;
  case CLT_F16:
  case CLT_BF16:
    ((uint16_t *)buf)[i] = cu_narrow_bits(v, dt);
    return;
  default:
    cu_set_i64(buf, dt, i, (int64_t)v);
    return;
  }
}

void cu_set_i64(void *buf, clt_dtype dt, int64_t i, int64_t v) {
  switch (dt) {
  case CLT_F32:
    ((float *)buf)[i] = (float)v;
    return;
  case CLT_F64:
    ((double *)buf)[i] = (double)v;
    return;
  case CLT_I32:
    ((int32_t *)buf)[i] = (int32_t)(uint32_t)(uint64_t)v;
    return;
  case CLT_I64:
    ((int64_t *)buf)[i] = v;
    return;
  case CLT_U8:
    ((uint8_t *)buf)[i] = (uint8_t)(uint64_t)v;
    return;
  case CLT_BOOL:
    ((uint8_t *)buf)[i] = v != 0;
    return;
  case CLT_F16:
  case CLT_BF16:
    ((uint16_t *)buf)[i] = cu_narrow_bits((double)v, dt);
    return;
  }
  ck_abort_msg("cu_set_i64: bad dtype %d", (int)dt);
}

void *cu_malloc(size_t n) {
  void *p = malloc(n ? n : 1);
  ck_assert_msg(p != NULL, "out of host memory (%zu bytes)", n);
  return p;
}

clt_tensor *cu_tensor(const void *src, clt_dtype dt, int ndim, const int64_t *shape,
                      clt_device *dev) {
  clt_tensor *t = NULL;
  clt_status s = clt_from_host(src, dt, ndim, shape, dev, &t);
  ck_assert_msg(s == CLT_OK && t != NULL, "clt_from_host(%s, ndim %d) on %s failed: %s: %s",
                cu_dt_name(dt), ndim, cu_dev_name(dev), clt_status_name(s), clt_last_error());
  return t;
}

void *cu_read(const clt_tensor *t) {
  size_t nb = clt_tensor_nbytes(t);
  void *p = cu_malloc(nb);
  clt_status s = clt_tensor_read(t, p, nb);
  ck_assert_msg(s == CLT_OK, "clt_tensor_read (%s on %s, %zu bytes) failed: %s: %s",
                cu_dt_name(clt_tensor_dtype(t)), cu_dev_name(clt_tensor_device(t)), nb,
                clt_status_name(s), clt_last_error());
  return p;
}

double *cu_read_double(const clt_tensor *t) {
  int64_t n = clt_tensor_numel(t);
  void *raw = cu_read(t);
  double *d = cu_malloc((size_t)n * sizeof *d);
  for (int64_t i = 0; i < n; i++)
    d[i] = cu_get(raw, clt_tensor_dtype(t), i);
  free(raw);
  return d;
}

double cu_item(const clt_tensor *t) {
  double v;
  CU_OK(clt_item(t, &v));
  return v;
}

void cu_temp_dir(char *dir, size_t size, const char *name) {
  const char *base = getenv("TMPDIR");
  snprintf(dir, size, "%s/clt-%s-XXXXXX", base && *base ? base : "/tmp", name);
  ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp failed");
}

void cu_assert_meta(const clt_tensor *t, clt_dtype dt, clt_device *dev, int ndim,
                    const int64_t *shape, const char *what) {
  ck_assert_msg(t != NULL, "%s: tensor is NULL", what);
  ck_assert_msg(clt_tensor_dtype(t) == dt, "%s: dtype %s, expected %s", what,
                cu_dt_name(clt_tensor_dtype(t)), cu_dt_name(dt));
  ck_assert_msg(clt_tensor_device(t) == dev, "%s: device %s, expected %s", what,
                cu_dev_name(clt_tensor_device(t)), cu_dev_name(dev));
  ck_assert_msg(clt_tensor_ndim(t) == ndim, "%s: ndim %d, expected %d", what, clt_tensor_ndim(t),
                ndim);
  const int64_t *got = clt_tensor_shape(t);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    ck_assert_msg(got[i] == shape[i], "%s: shape[%d] is %lld, expected %lld", what, i,
                  (long long)got[i], (long long)shape[i]);
    n *= shape[i];
  }
  ck_assert_msg(clt_tensor_numel(t) == n, "%s: numel %lld, expected %lld", what,
                (long long)clt_tensor_numel(t), (long long)n);
  ck_assert_msg(clt_tensor_nbytes(t) == (size_t)n * clt_dtype_size(dt),
                "%s: nbytes %zu, expected %zu", what, clt_tensor_nbytes(t),
                (size_t)n * clt_dtype_size(dt));
}

int cu_close(double got, double want, double rtol, double atol) {
  if (isnan(want))
    return isnan(got);
  if (isinf(want))
    return got == want;
  if (isnan(got) || isinf(got))
    return 0;
  return fabs(got - want) <= rtol * fabs(want) + atol;
}

double cu_rtol(clt_dtype dt) {
  switch (dt) {
  case CLT_F32:
    return 1e-6;
  case CLT_F64:
    return 1e-12;
  case CLT_F16:
    return 1e-3;
  case CLT_BF16:
    return 8e-3;
  default:
    return 0.0;
  }
}

/* ---- broadcasting oracle ------------------------------------------------------------------ */

int cu_broadcast(int na, const int64_t *sa, int nb, const int64_t *sb, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int k = 0; k < n; k++) { /* k counts from the last dimension */
    int64_t x = k < na ? sa[na - 1 - k] : 1;
    int64_t y = k < nb ? sb[nb - 1 - k] : 1;
    if (x != y && x != 1 && y != 1)
      return -1;
    out[n - 1 - k] = x == 1 ? y : x;
  }
  return n;
}

int64_t cu_bindex(int64_t i, int nout, const int64_t *oshape, int n, const int64_t *shape) {
  int64_t idx = 0, stride = 1;
  for (int k = 0; k < nout; k++) { /* from the last dimension */
    int64_t od = oshape[nout - 1 - k];
    int64_t c = i % od;
    i /= od;
    if (k < n) {
      int64_t d = shape[n - 1 - k];
      idx += (d == 1 ? 0 : c) * stride;
      stride *= d;
    }
  }
  return idx;
}

int64_t cu_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  return n;
}

void cu_stderr_begin(cu_stderr *c) {
  snprintf(c->path, sizeof c->path, "/tmp/clt-check-stderr-XXXXXX");
  c->fd = mkstemp(c->path);
  ck_assert_int_ge(c->fd, 0);
  fflush(stderr);
  c->saved = dup(STDERR_FILENO);
  ck_assert_int_ge(c->saved, 0);
  dup2(c->fd, STDERR_FILENO);
}

void cu_stderr_end(cu_stderr *c, char *text, size_t size) {
  fflush(stderr);
  dup2(c->saved, STDERR_FILENO);
  close(c->saved);
  lseek(c->fd, 0, SEEK_SET);
  ssize_t n = read(c->fd, text, size - 1);
  text[n > 0 ? n : 0] = '\0';
  close(c->fd);
  unlink(c->path);
}
