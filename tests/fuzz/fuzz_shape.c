/* SPDX-License-Identifier: MIT */
/* fuzz_shape.c - shape validation and broadcasting through the public API, on the host.
 *
 * The input is a little program: its first byte picks a mode, the following bytes give dtypes,
 * ndims and dimensions. Dimensions are mostly small but include negative ones, zero, powers of two
 * up to 2^62, INT64_MIN / INT64_MAX and raw 64-bit values, so products overflow; tensors with a
 * zero dimension may have huge other dimensions (they hold no elements, so they exist). Modes:
 *   0 create:    clt_empty / zeros / ones / full / from_host / rand / randn with any dtype, ndim
 *                and shape (NULL too);
 *   1 reshape:   clt_reshape of a tensor to any ndim and shape, -1 included;
 *   2 broadcast: add, sub, mul, maximum, eq, lt, where, add_ (in place) and add_out over operands
 *                of fuzzed shapes and dtypes;
 *   3 matmul:    clt_matmul over operands of 0 to 4 dimensions (torch.matmul's shapes);
 *   4 reduce:    sum / mean / max / argmax along a fuzzed dim (keepdim or not), whole-tensor sum,
 *                and clt_transpose of two fuzzed dims;
 *   5 linear:    clt_linear with or without bias.
 * Every call is checked against an oracle written here from the documentation (clt.h): the exact
 * status, a message naming the function, untouched out-parameters on failure; on success the
 * result's dtype, ndim, shape, numel and nbytes, and its elements (small integers, so exact).
 * Calls that would allocate more than 1 MiB are made only where clt must refuse them: a size
 * beyond 2^52 bytes must give CLT_ERR_OUT_OF_MEMORY (allocator_may_return_null=1 under ASan).
 */
#include "fuzz.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Under ASan an allocation it cannot serve must return NULL, as malloc does, not abort: clt turns
 * NULL into CLT_ERR_OUT_OF_MEMORY, which is what this target checks. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

#define SMALL_BYTES ((uint64_t)1 << 20) /* calls allocating at most this are made */
#define HUGE_BYTES ((uint64_t)1 << 52)  /* and those asking at least this, which must fail */
#define MAX_OPERAND 512                 /* elements of an operand built with data */
#define MAX_RESULT 65536                /* elements of a result computed and checked */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_init();
  return 0;
}

/* ---- decoding the input ------------------------------------------------------------------ */

static int64_t dim_any(fuzz_reader *r) {
  static const int64_t special[16] = {-1,
                                      -2,
                                      INT64_MIN,
                                      INT64_MAX,
                                      (int64_t)1 << 31,
                                      (int64_t)1 << 32,
                                      (int64_t)1 << 40,
                                      (int64_t)1 << 62,
                                      ((int64_t)1 << 62) + 1,
                                      3037000500, /* its square just exceeds INT64_MAX */
                                      INT32_MAX,
                                      (int64_t)1 << 61,
                                      65536,
                                      (int64_t)1 << 20,
                                      (int64_t)1 << 52,
                                      ((int64_t)1 << 60) + 1};
  uint8_t tag = fuzz_u8(r);
  if (tag < 0xc0)
    return tag % 5;
  if (tag < 0xe0)
    return tag - 0xc0 + 5;
  if (tag < 0xf0)
    return special[tag - 0xe0];
  return (int64_t)fuzz_u64(r);
}

static int ndim_any(fuzz_reader *r) {
  static const int special[16] = {-1, 9, 10, INT_MIN, INT_MAX, -8,   100, 0,
                                  8,  1, -2, 16,      255,     -255, 64,  7};
  uint8_t b = fuzz_u8(r);
  return b < 0xf0 ? b % 9 : special[b - 0xf0];
}

static clt_dtype dtype_any(fuzz_reader *r) {
  static const int special[16] = {-1, 6, 7, 100, INT_MIN, INT_MAX, 0,  1,
                                  2,  3, 4, 5,   -6,      255,     64, 8};
  uint8_t b = fuzz_u8(r);
  return (clt_dtype)(b < 0xf0 ? b % CLT_DTYPE_COUNT : special[b - 0xf0]);
}

static int dim_index_any(fuzz_reader *r) {
  static const int special[8] = {INT_MIN, INT_MAX, INT_MIN + 1, -9, 9, 8, -8, 100};
  uint8_t b = fuzz_u8(r);
  return b < 0xf8 ? (int)(int8_t)(b % 20) - 10 : special[b - 0xf8];
}

typedef struct shape {
  int ndim;
  int64_t d[CLT_MAX_DIMS];
} shape;

/* Product of the dimensions, 0 if one is 0 (then the others may be anything); *over when it does
 * not fit in int64_t. */
static int64_t product(int ndim, const int64_t *d, int *over) {
  int64_t n = 1;
  *over = 0;
  for (int i = 0; i < ndim; i++)
    if (d[i] == 0) {
      *over = 0;
      return 0;
    }
  for (int i = 0; i < ndim; i++)
    if (__builtin_mul_overflow(n, d[i], &n))
      *over = 1;
  return *over ? INT64_MAX : n;
}

/* A shape a tensor can have: ndim 0..maxnd, non-negative dimensions; either no elements (then
 * dimensions may be huge) or at most limit elements. */
static shape shape_small(fuzz_reader *r, int maxnd, int64_t limit) {
  shape s;
  s.ndim = fuzz_u8(r) % (maxnd + 1);
  for (int i = 0; i < s.ndim; i++) {
    s.d[i] = dim_any(r);
    if (s.d[i] < 0)
      s.d[i] = 1;
  }
  int over;
  int64_t n = product(s.ndim, s.d, &over);
  if (n == 0 && !over)
    return s;
  if (over || n > limit) {
    for (int i = 0; i < s.ndim; i++)
      s.d[i] = s.d[i] % 5 ? s.d[i] % 5 : 1;
    while (product(s.ndim, s.d, &over) > limit)
      s.ndim--;
  }
  return s;
}

/* ---- the oracle --------------------------------------------------------------------------- */

/* What clt_empty and every creator must give for ndim and shape in a valid dtype of esize bytes:
 * CLT_OK with *bytes, or CLT_ERR_INVALID_ARGUMENT. */
static clt_status shape_status(int ndim, const int64_t *d, size_t esize, uint64_t *bytes) {
  if (ndim < 0 || ndim > CLT_MAX_DIMS || (ndim > 0 && !d))
    return CLT_ERR_INVALID_ARGUMENT;
  for (int i = 0; i < ndim; i++)
    if (d[i] < 0)
      return CLT_ERR_INVALID_ARGUMENT;
  int over;
  int64_t n = product(ndim, d, &over);
  uint64_t b;
  if (over || __builtin_mul_overflow((uint64_t)n, (uint64_t)esize, &b) || b > INT64_MAX)
    return CLT_ERR_INVALID_ARGUMENT;
  *bytes = b;
  return CLT_OK;
}

/* For a call that allocates a result of a valid shape: CLT_OK if it is small, OOM if it is huge,
 * or SKIP (a value no status has): too large to try. */
#define SKIP 1
static int alloc_expect(uint64_t bytes) {
  if (bytes <= SMALL_BYTES)
    return CLT_OK;
  if (bytes >= HUGE_BYTES)
    return CLT_ERR_OUT_OF_MEMORY;
  return SKIP;
}

static int is_float(clt_dtype dt) {
  return dt == CLT_F32 || dt == CLT_F64 || dt == CLT_F16 || dt == CLT_BF16;
}
static int is_half(clt_dtype dt) { return dt == CLT_F16 || dt == CLT_BF16; }

/* f16 and bf16 (11 and 8 significant bits), for the values here: finite, rounded to nearest
 * even by rint, independently of the library's bit manipulation. */
static double half_round(clt_dtype dt, double v) {
  int bits = dt == CLT_F16 ? 11 : 8, emin = dt == CLT_F16 ? -14 : -126, e;
  if (v == 0 || !isfinite(v))
    return v;
  frexp(v, &e);
  e = e - 1 < emin ? emin : e - 1;
  double q = ldexp(1.0, e - (bits - 1)), r = rint(v / q) * q;
  return dt == CLT_F16 && fabs(r) >= 65536 ? copysign(INFINITY, v) : r;
}
static uint16_t half_bits(clt_dtype dt, double v) {
  float f = (float)half_round(dt, v);
  uint32_t x;
  memcpy(&x, &f, 4);
  if (dt == CLT_BF16)
    return (uint16_t)(x >> 16);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  double a = fabs((double)f);
  if (isinf(a))
    return sign | 0x7c00u;
  if (a < 0x1p-14)
    return sign | (uint16_t)ldexp(a, 24);
  int e;
  frexp(a, &e);
  return sign | (uint16_t)((e + 14) << 10) | (uint16_t)(ldexp(a, 11 - e) - 1024);
}
static double half_value(clt_dtype dt, uint16_t h) {
  if (dt == CLT_BF16) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
  }
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double s = h & 0x8000 ? -1 : 1;
  if (e == 31)
    return m ? NAN : s * INFINITY;
  return e ? s * ldexp(1024 + m, e - 25) : s * ldexp(m, -24);
}

/* v as a result of float dtype dt stores it (rounded once). */
static double round_to(clt_dtype dt, double v) {
  return is_half(dt) ? half_round(dt, v) : dt == CLT_F32 ? (double)(float)v : v;
}

/* v converted to dt as C converts (integers wrap), as a double. */
static double as_dtype(clt_dtype dt, int64_t v) {
  switch (dt) {
  case CLT_U8:
    return (double)(uint8_t)v;
  case CLT_BOOL:
    return v != 0;
  case CLT_I32:
    return (double)(int32_t)(uint32_t)(uint64_t)v;
  case CLT_F16:
  case CLT_BF16:
    return half_round(dt, (double)v);
  default:
    return (double)v;
  }
}

static double get(const void *p, clt_dtype dt, int64_t i) {
  switch (dt) {
  case CLT_F32:
    return ((const float *)p)[i];
  case CLT_F64:
    return ((const double *)p)[i];
  case CLT_I32:
    return ((const int32_t *)p)[i];
  case CLT_I64:
    return (double)((const int64_t *)p)[i];
  case CLT_F16:
  case CLT_BF16:
    return half_value(dt, ((const uint16_t *)p)[i]);
  default:
    return ((const uint8_t *)p)[i];
  }
}

static void set(void *p, clt_dtype dt, int64_t i, int64_t v) {
  switch (dt) {
  case CLT_F32:
    ((float *)p)[i] = (float)v;
    break;
  case CLT_F64:
    ((double *)p)[i] = (double)v;
    break;
  case CLT_I32:
    ((int32_t *)p)[i] = (int32_t)v;
    break;
  case CLT_I64:
    ((int64_t *)p)[i] = v;
    break;
  case CLT_F16:
  case CLT_BF16:
    ((uint16_t *)p)[i] = half_bits(dt, (double)v);
    break;
  default:
    ((uint8_t *)p)[i] = (uint8_t)v;
  }
}

/* Checks a failed call: the expected status, a message from fn, out untouched. */
static void expect_failure(clt_status s, clt_status want, const char *fn, const void *out) {
  FUZZ_CHECK(s == want, "%s gave %s, expected %s", fn, clt_status_name(s), clt_status_name(want));
  clt_status allowed[2] = {want, CLT_OK};
  fuzz_check_failure(s, fn, allowed);
  FUZZ_CHECK(out == FUZZ_SENTINEL, "a failed %s wrote its out-parameter", fn);
}

/* Checks a result's metadata: dtype, host device, ndim, shape, numel, nbytes. */
static void check_meta(const clt_tensor *t, clt_dtype dt, int ndim, const int64_t *d,
                       const char *fn) {
  FUZZ_CHECK(t && t != FUZZ_SENTINEL, "%s succeeded without a tensor", fn);
  FUZZ_CHECK(clt_tensor_dtype(t) == dt, "%s gave dtype %s, expected %s", fn,
             clt_dtype_name(clt_tensor_dtype(t)), clt_dtype_name(dt));
  FUZZ_CHECK(clt_device_is_host(clt_tensor_device(t)), "%s: the result is not on cpu", fn);
  FUZZ_CHECK(clt_tensor_ndim(t) == ndim, "%s gave ndim %d, expected %d", fn, clt_tensor_ndim(t),
             ndim);
  const int64_t *got = clt_tensor_shape(t);
  for (int i = 0; i < ndim; i++)
    FUZZ_CHECK(got[i] == d[i], "%s: dimension %d is %lld, expected %lld", fn, i, (long long)got[i],
               (long long)d[i]);
  int over;
  int64_t n = product(ndim, d, &over);
  FUZZ_CHECK(!over && clt_tensor_numel(t) == n, "%s: numel %lld, expected %lld", fn,
             (long long)clt_tensor_numel(t), (long long)n);
  FUZZ_CHECK(clt_tensor_nbytes(t) == (size_t)n * clt_dtype_size(dt), "%s: nbytes %zu, expected %zu",
             fn, clt_tensor_nbytes(t), (size_t)n * clt_dtype_size(dt));
}

/* Element i of an operand of dtype dt made from seed: a small integer (0..6 for u8, 0 or 1 for
 * bool, -3..3 otherwise). */
static int64_t operand_value(clt_dtype dt, uint8_t seed, int64_t i) {
  int64_t v = (i * 5 + seed) % 7;
  return dt == CLT_BOOL ? v & 1 : dt == CLT_U8 ? v : v - 3;
}

/* A host tensor of shape s and dtype dt holding operand_value(dt, seed, i) (asserted to work: s
 * has at most MAX_OPERAND elements or none). */
static clt_tensor *operand(const shape *s, clt_dtype dt, uint8_t seed) {
  int over;
  int64_t n = product(s->ndim, s->d, &over);
  uint8_t *buf = malloc(n > 0 ? (size_t)n * clt_dtype_size(dt) : 1);
  FUZZ_CHECK(buf, "out of memory in the fuzz target");
  for (int64_t i = 0; i < n; i++)
    set(buf, dt, i, operand_value(dt, seed, i));
  clt_tensor *t = NULL;
  clt_status s2 = clt_from_host(buf, dt, s->ndim, s->d, clt_cpu(), &t);
  FUZZ_CHECK(s2 == CLT_OK, "clt_from_host of a valid small shape failed");
  free(buf);
  return t;
}

/* The flat index into an operand of shape (nd, d) for the result coordinates idx (of rnd dims),
 * broadcasting. */
static int64_t bindex(const int64_t *idx, int rnd, int nd, const int64_t *d) {
  int64_t k = 0;
  for (int i = 0; i < nd; i++) {
    int64_t c = idx[rnd - nd + i];
    k = k * d[i] + (d[i] == 1 ? 0 : c);
  }
  return k;
}

static void next_index(int64_t *idx, int nd, const int64_t *d) {
  for (int i = nd - 1; i >= 0; i--) {
    if (++idx[i] < d[i])
      return;
    idx[i] = 0;
  }
}

/* NumPy broadcasting of n shapes into out; 0 if they do not broadcast. */
static int broadcast(const shape *const *in, int n, shape *out) {
  out->ndim = 0;
  for (int k = 0; k < n; k++)
    if (in[k]->ndim > out->ndim)
      out->ndim = in[k]->ndim;
  for (int i = 0; i < out->ndim; i++) {
    int64_t size = 1;
    for (int k = 0; k < n; k++) {
      int j = i - (out->ndim - in[k]->ndim);
      int64_t dk = j >= 0 ? in[k]->d[j] : 1;
      if (dk == 1)
        continue;
      if (size != 1 && dk != size)
        return 0;
      size = dk;
    }
    out->d[i] = size;
  }
  return 1;
}

/* ---- mode 0: creating tensors ---------------------------------------------------------------- */

static void fuzz_create(fuzz_reader *r) {
  static const char *const fns[] = {"clt_empty",     "clt_zeros", "clt_ones", "clt_full",
                                    "clt_from_host", "clt_rand",  "clt_randn"};
  int ndim = ndim_any(r);
  clt_dtype dt = dtype_any(r);
  uint8_t how = fuzz_u8(r);
  int creator = (how & 7) % 7, null_shape = how >= 0xe0;
  int n = ndim < 0 ? 0 : ndim > 16 ? 16 : ndim; /* the library must not read past ndim */
  int64_t *d = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  FUZZ_CHECK(d, "out of memory in the fuzz target");
  for (int i = 0; i < n; i++)
    d[i] = dim_any(r);
  const int64_t *arg = null_shape ? NULL : d;
  int value = (how >> 3) & 1;
  const char *fn = fns[creator];

  size_t esize = clt_dtype_size(dt);
  uint64_t bytes = 0;
  int want;
  if (esize == 0)
    want = CLT_ERR_INVALID_ARGUMENT;
  else if (creator >= 5 && (!is_float(dt) || is_half(dt))) /* rand: f32 and f64 only */
    want = CLT_ERR_DTYPE;
  else if ((want = shape_status(ndim, arg, esize, &bytes)) == CLT_OK)
    want = alloc_expect(bytes);
  /* from_host reads bytes from src: only where it can be given that many. */
  if (want == SKIP || (creator == 4 && want == CLT_ERR_OUT_OF_MEMORY)) {
    free(d);
    return;
  }
  uint8_t *src = NULL;
  if (creator == 4) {
    src = malloc(bytes ? bytes : 1);
    FUZZ_CHECK(src, "out of memory in the fuzz target");
    for (uint64_t i = 0; i < bytes; i++)
      src[i] = dt == CLT_BOOL ? (uint8_t)(i % 3 == 0) : (uint8_t)(i * 37 + 11);
  }

  clt_tensor *t = FUZZ_SENTINEL;
  clt_status s;
  clt_clear_error();
  switch (creator) {
  case 0:
    s = clt_empty(dt, ndim, arg, clt_cpu(), &t);
    break;
  case 1:
    s = clt_zeros(dt, ndim, arg, clt_cpu(), &t);
    break;
  case 2:
    s = clt_ones(dt, ndim, arg, clt_cpu(), &t);
    break;
  case 3:
    s = clt_full(dt, ndim, arg, value, clt_cpu(), &t);
    break;
  case 4:
    s = clt_from_host(src, dt, ndim, arg, clt_cpu(), &t);
    break;
  case 5:
    s = clt_rand(dt, ndim, arg, clt_cpu(), &t);
    break;
  default:
    s = clt_randn(dt, ndim, arg, clt_cpu(), &t);
    break;
  }
  fuzz_outcome = s == CLT_OK;
  if (want != CLT_OK) {
    expect_failure(s, (clt_status)want, fn, t);
  } else {
    FUZZ_CHECK(s == CLT_OK, "%s failed", fn);
    check_meta(t, dt, ndim, d, fn);
    int64_t numel = clt_tensor_numel(t);
    const uint8_t *p = clt_tensor_data(t);
    FUZZ_CHECK(p || numel == 0, "%s: no data pointer", fn);
    for (int64_t i = 0; i < numel; i++) {
      double v = get(p, dt, i);
      if (creator == 1 || creator == 2 || creator == 3)
        FUZZ_CHECK(v == (creator == 1   ? 0
                         : creator == 2 ? 1
                                        : value),
                   "%s: element %lld is %g", fn, (long long)i, v);
      else if (creator == 5)
        FUZZ_CHECK(v >= 0 && v < 1, "clt_rand: element %lld is %g", (long long)i, v);
      else if (creator == 6)
        FUZZ_CHECK(isfinite(v), "clt_randn: element %lld is %g", (long long)i, v);
    }
    if (creator == 4)
      FUZZ_CHECK(bytes == 0 || !memcmp(p, src, bytes), "clt_from_host: the data differs");
    clt_tensor_release(t);
  }
  free(src);
  free(d);
}

/* ---- mode 1: reshape ----------------------------------------------------------------------------
 */

static void fuzz_reshape(fuzz_reader *r) {
  static const char fn[] = "clt_reshape";
  shape base = shape_small(r, CLT_MAX_DIMS, MAX_OPERAND);
  clt_dtype dt = (clt_dtype)(fuzz_u8(r) % CLT_DTYPE_COUNT);
  int ndim = ndim_any(r);
  uint8_t flags = fuzz_u8(r);
  int n = ndim < 0 ? 0 : ndim > 16 ? 16 : ndim;
  int64_t *d = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  FUZZ_CHECK(d, "out of memory in the fuzz target");
  for (int i = 0; i < n; i++)
    d[i] = dim_any(r);
  const int64_t *arg = flags >= 0xf0 ? NULL : d;

  int over;
  int64_t numel = product(base.ndim, base.d, &over);
  /* The oracle: structure first (ndim, NULL, negatives other than one -1), then the count. */
  clt_status want = CLT_OK;
  int64_t result[CLT_MAX_DIMS];
  int infer = -1;
  if (ndim < 0 || ndim > CLT_MAX_DIMS || (ndim > 0 && !arg)) {
    want = CLT_ERR_INVALID_ARGUMENT;
  } else {
    for (int i = 0; i < ndim && want == CLT_OK; i++) {
      if (d[i] == -1 && infer < 0)
        infer = i;
      else if (d[i] < 0)
        want = CLT_ERR_INVALID_ARGUMENT;
    }
  }
  if (want == CLT_OK) {
    memcpy(result, d, sizeof(int64_t) * (size_t)ndim);
    if (infer >= 0) {
      result[infer] = 1;
      int64_t known = product(ndim, result, &over);
      for (int i = 0; i < ndim; i++)
        if (i != infer && d[i] == 0)
          known = 0;
      if (known == 0 || over || numel % known != 0)
        want = CLT_ERR_SHAPE_MISMATCH;
      else
        result[infer] = numel / known;
    } else {
      int64_t m = product(ndim, result, &over);
      if (over || m != numel)
        want = CLT_ERR_SHAPE_MISMATCH;
    }
  }

  clt_tensor *t = operand(&base, dt, flags), *v = FUZZ_SENTINEL;
  clt_clear_error();
  clt_status s = clt_reshape(t, ndim, arg, &v);
  fuzz_outcome = s == CLT_OK;
  if (want != CLT_OK) {
    expect_failure(s, want, fn, v);
  } else {
    FUZZ_CHECK(s == CLT_OK, "clt_reshape failed");
    check_meta(v, dt, ndim, result, fn);
    FUZZ_CHECK(clt_tensor_data(v) == clt_tensor_data(t), "clt_reshape: the view has other data");
    clt_tensor_release(v);
  }
  clt_tensor_release(t);
  free(d);
}

/* ---- mode 2: broadcasting ------------------------------------------------------------------ */

static int64_t binop(int op, int64_t a, int64_t b) {
  switch (op) {
  case 0:
    return a + b;
  case 1:
    return a - b;
  case 2:
    return a * b;
  case 3:
    return a > b ? a : b;
  case 4:
    return a == b;
  default:
    return a < b;
  }
}

static void fuzz_broadcast(fuzz_reader *r) {
  static const char *const fns[] = {"clt_add", "clt_sub",   "clt_mul", "clt_maximum", "clt_eq",
                                    "clt_lt",  "clt_where", "clt_add_", "clt_add_out"};
  static const char *const names[] = {"add", "sub", "mul", "maximum", "eq", "lt"};
  int op = fuzz_u8(r) % 9; /* 6: where, 7: add_ (in place), 8: add_out */
  int nin = op == 6 ? 3 : 2;
  shape sh[3];
  clt_dtype dt[3];
  uint8_t seed[3];
  clt_tensor *in[3] = {NULL, NULL, NULL};
  for (int k = 0; k < nin; k++) {
    seed[k] = fuzz_u8(r);
    dt[k] = (clt_dtype)(seed[k] % CLT_DTYPE_COUNT);
    if (op == 6 && k == 0 && seed[k] < 0xf0)
      dt[k] = CLT_BOOL; /* the condition, nearly always */
    sh[k] = shape_small(r, CLT_MAX_DIMS, MAX_OPERAND);
    in[k] = operand(&sh[k], dt[k], seed[k]);
  }
  shape dsh = {0, {0}};
  clt_dtype ddt = CLT_F32;
  clt_tensor *dst = NULL;
  if (op == 8) {
    uint8_t b = fuzz_u8(r);
    ddt = (clt_dtype)(b % CLT_DTYPE_COUNT);
    dsh = shape_small(r, CLT_MAX_DIMS, MAX_OPERAND);
    dst = operand(&dsh, ddt, b);
  }
  const char *fn = fns[op];

  /* The oracle, in the dispatcher's documented order: dtypes, broadcasting, the out tensor. */
  clt_dtype rt = CLT_F32;
  clt_status want = CLT_OK;
  const clt_dtype *ops_dt = op == 6 ? dt + 1 : dt;
  if (op == 6 && dt[0] != CLT_BOOL)
    want = CLT_ERR_DTYPE;
  else if (clt_result_dtype(op >= 6 ? "add" : names[op], ops_dt[0], ops_dt[1], &rt) != CLT_OK)
    want = CLT_ERR_DTYPE;
  shape res;
  const shape *shp[3] = {&sh[0], &sh[1], &sh[2]};
  int fits = broadcast(shp, nin, &res);
  if (want == CLT_OK && !fits)
    want = CLT_ERR_SHAPE_MISMATCH;
  int over = 0;
  int64_t rn = fits ? product(res.ndim, res.d, &over) : 0;
  FUZZ_CHECK(!over, "the broadcast of existing tensors has too many elements");
  const shape *outsh = op == 7 ? &sh[0] : op == 8 ? &dsh : NULL;
  clt_dtype outdt = op == 7 ? dt[0] : ddt;
  if (want == CLT_OK && outsh &&
      (outsh->ndim != res.ndim || memcmp(outsh->d, res.d, sizeof(int64_t) * (size_t)res.ndim)))
    want = CLT_ERR_SHAPE_MISMATCH;
  if (want == CLT_OK && outsh && outdt != rt)
    want = CLT_ERR_DTYPE;
  if (want == CLT_OK && !outsh && rn > MAX_RESULT)
    goto done; /* would allocate much: the add_out mode covers such shapes */

  clt_tensor *out = FUZZ_SENTINEL;
  clt_status s;
  clt_clear_error();
  if (op < 6) {
    clt_status (*const f[6])(clt_tensor *, clt_tensor *, clt_tensor **) = {
        clt_add, clt_sub, clt_mul, clt_maximum, clt_eq, clt_lt};
    s = f[op](in[0], in[1], &out);
  } else if (op == 6) {
    s = clt_where(in[0], in[1], in[2], &out);
  } else if (op == 7) {
    s = clt_add_(in[0], in[1]);
  } else {
    s = clt_add_out(in[0], in[1], dst);
  }
  fuzz_outcome = s == CLT_OK;
  if (want != CLT_OK) {
    expect_failure(s, want, fn, outsh ? FUZZ_SENTINEL : out);
    if (want == CLT_ERR_SHAPE_MISMATCH)
      FUZZ_CHECK(strstr(clt_last_error(), fits ? " has shape " : "cannot be broadcast"),
                 "%s: the message does not say what does not fit", fn);
    goto done;
  }
  FUZZ_CHECK(s == CLT_OK, "%s failed", fn);
  clt_tensor *res_t = op == 7 ? in[0] : op == 8 ? dst : out;
  check_meta(res_t, rt, res.ndim, res.d, fn);
  const void *rp = clt_tensor_data(res_t);
  int64_t idx[CLT_MAX_DIMS] = {0};
  for (int64_t i = 0; i < rn; i++, next_index(idx, res.ndim, res.d)) {
    int64_t v[3];
    for (int k = 0; k < nin; k++)
      v[k] = operand_value(dt[k], seed[k], bindex(idx, res.ndim, sh[k].ndim, sh[k].d));
    double want_v = op == 6 ? as_dtype(rt, v[0] ? v[1] : v[2])
                            : as_dtype(rt, binop(op >= 7 ? 0 : op, v[0], v[1]));
    FUZZ_CHECK(get(rp, rt, i) == want_v, "%s: element %lld is %g, expected %g", fn, (long long)i,
               get(rp, rt, i), want_v);
  }
  if (!outsh)
    clt_tensor_release(out);
done:
  for (int k = 0; k < nin; k++)
    clt_tensor_release(in[k]);
  clt_tensor_release(dst);
}

/* ---- mode 3: matmul ---------------------------------------------------------------------- */

static void fuzz_matmul(fuzz_reader *r) {
  static const char fn[] = "clt_matmul";
  shape sh[2];
  clt_dtype dt[2];
  uint8_t seed[2];
  clt_tensor *in[2];
  for (int k = 0; k < 2; k++) {
    seed[k] = fuzz_u8(r);
    if (seed[k] >= 0xe0)
      dt[k] = (clt_dtype)(seed[k] % CLT_DTYPE_COUNT); /* any dtype, now and then */
    else
      dt[k] = k == 1 ? dt[0] : seed[k] & 1 ? CLT_F64 : CLT_F32;
    sh[k] = shape_small(r, 4, MAX_OPERAND);
    in[k] = operand(&sh[k], dt[k], seed[k]);
  }
  /* The oracle (clt.h, torch.matmul): f16, bf16, f32 or f64, one dtype; 1 or more dimensions
   * (a 1-D a is a row, a 1-D b a column, their dimension dropped from the result); inner
   * dimensions equal; batch dimensions (those before the last two) that broadcast; rows of all
   * batch entries (batch * m), k and n that BLAS can take. */
  clt_status want = CLT_OK;
  const shape *a = &sh[0], *b = &sh[1];
  int64_t m = 0, k = 0, n = 0, batch = 1, bs[4] = {0};
  int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
  int nb = na > nbb ? na : nbb;
  if (!is_float(dt[0]) || !is_float(dt[1]) || dt[0] != dt[1]) {
    want = CLT_ERR_DTYPE;
  } else if (a->ndim < 1 || b->ndim < 1) {
    want = CLT_ERR_SHAPE_MISMATCH;
  } else {
    m = a->ndim == 1 ? 1 : a->d[a->ndim - 2];
    k = a->d[a->ndim - 1];
    n = b->ndim == 1 ? 1 : b->d[b->ndim - 1];
    int64_t kb = b->ndim == 1 ? b->d[0] : b->d[b->ndim - 2];
    if (kb != k)
      want = CLT_ERR_SHAPE_MISMATCH;
    for (int i = 0; i < nb && want == CLT_OK; i++) {
      int64_t da = i - (nb - na) >= 0 ? a->d[i - (nb - na)] : 1;
      int64_t db = i - (nb - nbb) >= 0 ? b->d[i - (nb - nbb)] : 1;
      if (da != db && da != 1 && db != 1)
        want = CLT_ERR_SHAPE_MISMATCH;
      bs[i] = da == 1 ? db : da;
    }
    /* the batch's matrices: 0 where a batch dimension is 0, else their product, which must
     * fit (with m) in BLAS's 2^31-1 rows */
    bool empty = false, over = false;
    for (int i = 0; i < nb; i++)
      empty = empty || bs[i] == 0;
    for (int i = 0; i < nb && !empty && want == CLT_OK; i++)
      over = over || __builtin_mul_overflow(batch, bs[i], &batch);
    if (empty)
      batch = 0;
    int64_t bm;
    if (want == CLT_OK && (over || __builtin_mul_overflow(batch, m, &bm) || bm > INT32_MAX ||
                           n > INT32_MAX || k > INT32_MAX))
      want = CLT_ERR_SHAPE_MISMATCH;
  }
  int nd = 0;
  int64_t rs[6];
  for (int i = 0; i < nb; i++)
    rs[nd++] = bs[i];
  if (a->ndim > 1)
    rs[nd++] = m;
  if (b->ndim > 1)
    rs[nd++] = n;
  uint64_t bytes = 0;
  if (want == CLT_OK && (want = shape_status(nd, rs, clt_dtype_size(dt[0]), &bytes)) == CLT_OK) {
    int al = alloc_expect(bytes);
    if (al == SKIP)
      goto done;
    want = (clt_status)al;
  }
  clt_tensor *out = FUZZ_SENTINEL;
  clt_clear_error();
  clt_status s = clt_matmul(in[0], in[1], &out);
  fuzz_outcome = s == CLT_OK;
  if (want != CLT_OK) {
    expect_failure(s, want, fn, out);
    goto done;
  }
  FUZZ_CHECK(s == CLT_OK, "clt_matmul failed");
  check_meta(out, dt[0], nd, rs, fn);
  const void *p = clt_tensor_data(out);
  int64_t i = 0;
  if (clt_tensor_numel(out) == 0)
    batch = 0; /* nothing to check, and the loops below could be long */
  for (int64_t q = 0; q < batch; q++) {
    /* the offsets of q's matrices in a and b (a batch dimension of size 1 repeats) */
    int64_t oa = 0, ob = 0, sta = m * k, stb = k * n, rem = q, idx[4] = {0};
    for (int d = nb - 1; d >= 0; d--) {
      idx[d] = rem % bs[d];
      rem /= bs[d];
    }
    for (int d = nb - 1; d >= 0; d--) {
      int ia = d - (nb - na), ib = d - (nb - nbb);
      if (ia >= 0) {
        oa += (a->d[ia] == 1 ? 0 : idx[d]) * sta;
        sta *= a->d[ia];
      }
      if (ib >= 0) {
        ob += (b->d[ib] == 1 ? 0 : idx[d]) * stb;
        stb *= b->d[ib];
      }
    }
    for (int64_t x = 0; x < m; x++)
      for (int64_t y = 0; y < n; y++, i++) {
        int64_t acc = 0;
        for (int64_t z = 0; z < k; z++) {
          int64_t ja = oa + x * k + z;
          int64_t jb = ob + z * n + y;
          acc += operand_value(dt[0], seed[0], ja) * operand_value(dt[1], seed[1], jb);
        }
        FUZZ_CHECK(get(p, dt[0], i) == round_to(dt[0], (double)acc),
                   "clt_matmul: element %lld is %g, expected %lld", (long long)i, get(p, dt[0], i),
                   (long long)acc);
      }
  }
  clt_tensor_release(out);
done:
  clt_tensor_release(in[0]);
  clt_tensor_release(in[1]);
}

/* ---- mode 4: reductions and transpose ------------------------------------------------------ */

static void fuzz_reduce(fuzz_reader *r) {
  static const char *const fns[] = {"clt_sum_dim",    "clt_mean_dim", "clt_max_dim",
                                    "clt_argmax_dim", "clt_sum",      "clt_transpose"};
  int op = fuzz_u8(r) % 6;
  uint8_t seed = fuzz_u8(r);
  clt_dtype dt = (clt_dtype)(seed % CLT_DTYPE_COUNT);
  shape sh = shape_small(r, CLT_MAX_DIMS, MAX_OPERAND);
  int dim = dim_index_any(r), dim1 = dim_index_any(r);
  int keepdim = fuzz_u8(r) & 1;
  const char *fn = fns[op];
  clt_tensor *t = operand(&sh, dt, seed);

  int nd = sh.ndim ? sh.ndim : 1; /* a 0-d tensor takes dim 0 and -1 */
  clt_status want = CLT_OK;
  shape res = {0, {0}};
  clt_dtype rt = dt;
  int rdim = -1; /* the dimension reduced or swapped, in 0..ndim-1 */
  int swap = -1;
  if (op == 5) {
    if (dim < -nd || dim >= nd || dim1 < -nd || dim1 >= nd) {
      want = CLT_ERR_INVALID_ARGUMENT;
    } else {
      rdim = dim < 0 ? dim + nd : dim;
      swap = dim1 < 0 ? dim1 + nd : dim1;
      res = sh;
      if (sh.ndim > 0) {
        res.d[rdim] = sh.d[swap];
        res.d[swap] = sh.d[rdim];
      }
    }
  } else if (op == 4) {
    rt = is_float(dt) ? dt : CLT_I64;
  } else if (dim < -nd || dim >= nd) {
    want = CLT_ERR_INVALID_ARGUMENT;
  } else if (op == 1 && !is_float(dt)) {
    want = CLT_ERR_DTYPE;
  } else {
    rt = op == 0 ? (is_float(dt) ? dt : CLT_I64) : op == 3 ? CLT_I64 : dt;
    if (sh.ndim > 0) {
      rdim = dim < 0 ? dim + nd : dim;
      for (int i = 0; i < sh.ndim; i++)
        if (i != rdim)
          res.d[res.ndim++] = sh.d[i];
        else if (keepdim)
          res.d[res.ndim++] = 1;
    }
    /* max and argmax of an empty dimension have no value, even where the result is empty too
     * (as PyTorch and NumPy; the NumPy lane of issue 32 found it accepted). */
    if ((op == 2 || op == 3) && sh.ndim > 0 && sh.d[rdim] == 0)
      want = CLT_ERR_INVALID_ARGUMENT;
  }
  uint64_t bytes = 0;
  if (want == CLT_OK &&
      (want = shape_status(res.ndim, res.d, clt_dtype_size(rt), &bytes)) == CLT_OK) {
    int a = alloc_expect(bytes);
    if (a == SKIP)
      goto done;
    want = (clt_status)a;
  }

  clt_tensor *out = FUZZ_SENTINEL, *dense = NULL;
  clt_status s;
  clt_clear_error();
  switch (op) {
  case 0:
    s = clt_sum_dim(t, dim, keepdim, &out);
    break;
  case 1:
    s = clt_mean_dim(t, dim, keepdim, &out);
    break;
  case 2:
    s = clt_max_dim(t, dim, keepdim, &out);
    break;
  case 3:
    s = clt_argmax_dim(t, dim, keepdim, &out);
    break;
  case 4:
    s = clt_sum(t, &out);
    break;
  default:
    s = clt_transpose(t, dim, dim1, &out);
    break;
  }
  fuzz_outcome = s == CLT_OK;
  if (want != CLT_OK) {
    expect_failure(s, want, fn, out);
    goto done;
  }
  FUZZ_CHECK(s == CLT_OK, "%s failed", fn);
  check_meta(out, rt, res.ndim, res.d, fn);
  int over;
  int64_t rn = product(res.ndim, res.d, &over);
  /* Values: not for mean (not exact in general), nor without elements (the input may then have
   * dimensions whose product does not fit). */
  if (op == 1 || rn == 0 || rn > MAX_RESULT)
    goto release;
  /* a transpose is a view: its elements in C order come from a contiguous copy */
  FUZZ_CHECK(clt_contiguous(out, &dense) == CLT_OK, "clt_contiguous: %s", clt_last_error());
  const void *p = clt_tensor_data(dense);
  FUZZ_CHECK(p != NULL, "clt_tensor_data of a contiguous tensor: %s", clt_last_error());
  /* The input as (outer, len, inner) around the dimension reduced (all of it for sum): with a
   * result of elements, outer and inner fit, and len is 0 if the input has none. */
  int64_t outer = 1, len, inner = 1;
  if (op == 4 || sh.ndim == 0) {
    len = product(sh.ndim, sh.d, &over);
  } else {
    outer = product(rdim, sh.d, &over);
    len = sh.d[rdim];
    inner = product(sh.ndim - rdim - 1, sh.d + rdim + 1, &over);
  }
  if (op == 5) { /* transpose: out[.., j, .., i, ..] = t[.., i, .., j, ..] */
    int64_t idx[CLT_MAX_DIMS] = {0};
    for (int64_t i = 0; i < rn; i++, next_index(idx, res.ndim, res.d)) {
      int64_t src[CLT_MAX_DIMS];
      memcpy(src, idx, sizeof src);
      if (sh.ndim > 0) {
        src[rdim] = idx[swap];
        src[swap] = idx[rdim];
      }
      int64_t j = 0;
      for (int q = 0; q < sh.ndim; q++)
        j = j * sh.d[q] + src[q];
      double want_v = as_dtype(dt, operand_value(dt, seed, j));
      FUZZ_CHECK(get(p, dt, i) == want_v, "clt_transpose: element %lld is %g, expected %g",
                 (long long)i, get(p, dt, i), want_v);
    }
    goto release;
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t q = 0; q < inner; q++) {
      int64_t acc = op == 2 || op == 3 ? INT64_MIN : 0, at = 0;
      for (int64_t j = 0; j < len; j++) {
        int64_t v = operand_value(dt, seed, (o * len + j) * inner + q);
        if (op == 0 || op == 4)
          acc += v;
        else if (v > acc)
          acc = v, at = j;
      }
      double want_v = op == 3 ? (double)at : as_dtype(rt, acc);
      int64_t i = o * inner + q;
      FUZZ_CHECK(get(p, rt, i) == want_v, "%s: element %lld is %g, expected %g", fn, (long long)i,
                 get(p, rt, i), want_v);
    }
release:
  clt_tensor_release(dense);
  clt_tensor_release(out);
done:
  clt_tensor_release(t);
}

/* ---- mode 5: a linear layer ---------------------------------------------------------------- */

static void fuzz_linear(fuzz_reader *r) {
  static const char fn[] = "clt_linear";
  shape sh[3];
  clt_dtype dt[3];
  uint8_t seed[3];
  clt_tensor *in[3] = {NULL, NULL, NULL};
  int with_bias = fuzz_u8(r) & 1, n = with_bias ? 3 : 2; /* x, weight, bias */
  for (int k = 0; k < n; k++) {
    seed[k] = fuzz_u8(r);
    if (seed[k] >= 0xe0)
      dt[k] = (clt_dtype)(seed[k] % CLT_DTYPE_COUNT); /* any dtype, now and then */
    else
      dt[k] = k > 0 ? dt[0] : seed[k] & 1 ? CLT_F64 : CLT_F32;
    sh[k] = shape_small(r, 4, MAX_OPERAND);
    in[k] = operand(&sh[k], dt[k], seed[k]);
  }
  /* The oracle (clt.h): one float dtype; x (N, in) or (B, N, in), weight (out, in), bias (out);
   * then "those of clt_matmul": x times the transposed weight. */
  clt_status want = CLT_OK;
  const shape *x = &sh[0], *w = &sh[1], *b = with_bias ? &sh[2] : NULL;
  for (int k = 0; k < n; k++)
    if (!is_float(dt[k]) || dt[k] != dt[0])
      want = CLT_ERR_DTYPE;
  int64_t out_f = 0, in_f = 0, rows = 0;
  if (want == CLT_OK) {
    if (w->ndim != 2 || x->ndim < 2 || x->ndim > 3 || x->d[x->ndim - 1] != w->d[1] ||
        (b && (b->ndim != 1 || b->d[0] != w->d[0])))
      want = CLT_ERR_SHAPE_MISMATCH;
  }
  shape res = {0, {0}};
  if (want == CLT_OK) {
    out_f = w->d[0];
    in_f = w->d[1];
    int64_t batch = x->ndim == 3 ? x->d[0] : 1;
    if (__builtin_mul_overflow(batch, x->d[x->ndim - 2], &rows) || rows > INT32_MAX ||
        out_f > INT32_MAX || in_f > INT32_MAX)
      want = CLT_ERR_SHAPE_MISMATCH;
    res = *x;
    res.d[res.ndim - 1] = out_f;
  }
  uint64_t bytes = 0;
  if (want == CLT_OK &&
      (want = shape_status(res.ndim, res.d, clt_dtype_size(dt[0]), &bytes)) == CLT_OK) {
    int a = alloc_expect(bytes);
    if (a == SKIP)
      goto done;
    want = (clt_status)a;
  }

  clt_tensor *y = FUZZ_SENTINEL;
  clt_clear_error();
  clt_status s = clt_linear(in[0], in[1], b ? in[2] : NULL, &y);
  fuzz_outcome = s == CLT_OK;
  if (want != CLT_OK) {
    FUZZ_CHECK(s == want, "clt_linear gave %s, expected %s", clt_status_name(s),
               clt_status_name(want));
    FUZZ_CHECK(y == FUZZ_SENTINEL, "a failed clt_linear wrote its out-parameter");
    /* Its own checks, or those of the operations it calls (documented). */
    const char *msg = clt_last_error();
    FUZZ_CHECK(!strncmp(msg, "clt_linear: ", 12) || !strncmp(msg, "clt_matmul: ", 12),
               "clt_linear failed with a message from elsewhere");
    goto done;
  }
  FUZZ_CHECK(s == CLT_OK, "clt_linear failed");
  check_meta(y, dt[0], res.ndim, res.d, fn);
  const void *p = clt_tensor_data(y);
  int64_t rn = clt_tensor_numel(y);
  for (int64_t i = 0; i < rn && rn <= MAX_RESULT; i++) {
    int64_t row = i / out_f, o = i % out_f, acc = 0;
    for (int64_t k = 0; k < in_f; k++)
      acc += operand_value(dt[0], seed[0], row * in_f + k) *
             operand_value(dt[1], seed[1], o * in_f + k);
    /* the product is rounded to the dtype, then the bias added and rounded (f16, bf16) */
    double want_v = round_to(dt[0], (double)acc);
    if (b)
      want_v = round_to(dt[0], want_v + (double)operand_value(dt[2], seed[2], o));
    FUZZ_CHECK(get(p, dt[0], i) == want_v, "clt_linear: element %lld is %g, expected %g",
               (long long)i, get(p, dt[0], i), want_v);
  }
  clt_tensor_release(y);
done:
  for (int k = 0; k < n; k++)
    clt_tensor_release(in[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_reader r = {data, size, 0};
  fuzz_outcome = -1;
  switch (fuzz_u8(&r) % 6) {
  case 0:
    fuzz_create(&r);
    break;
  case 1:
    fuzz_reshape(&r);
    break;
  case 2:
    fuzz_broadcast(&r);
    break;
  case 3:
    fuzz_matmul(&r);
    break;
  case 4:
    fuzz_reduce(&r);
    break;
  default:
    fuzz_linear(&r);
    break;
  }
  return 0;
}
