/* SPDX-License-Identifier: MIT */
/* difftest.c - the seeded random-program differential tester (see difftest.h): the program
 * generator, the runner (one run per device and mode, with the reference's error bounds), the
 * comparison, the minimizer and the printer of self-contained repros.
 *
 * A program is a list of steps over DT_SLOTS tensor slots. Steps name the slots they read and
 * write; a step whose operand slot is empty is skipped in every run (so dropping steps while
 * minimizing always leaves a runnable program). The generator picks each step from the state of
 * a live eager host run of the steps so far, so most steps are valid; those that fail (refused
 * dtypes, shapes that do not broadcast, views that need a copy) must fail alike everywhere.
 * A program draws most dtypes and sizes from a palette of three (fewer kernels for PoCL to
 * build), and one step in ten is the composition issue 32 was about: a deferred result, views of
 * it, and a consumer of the view.
 *
 * Tolerances. The reference run (the host, eager) follows, per storage (a slot and its views
 * share one), how far another device's values may be from its own: exact (bit for bit, NaN
 * equal to NaN, +0 equal to -0), approximate (|got - want| <= E + r |want|, from the op
 * table's ulps and the magnitudes of the operands, carried through the operations that keep
 * such a bound, with a margin of 8) or unchecked (a discontinuous function of approximate
 * values: a comparison, a cast to an integer, a rounding). Lazy against eager on one device is
 * always bit for bit, and each run must give back every byte it allocated.
 *
 * Autograd (issue 26). 45% of the seeds, chosen by a generator of their own (grng) so that the
 * other seeds' programs are unchanged, give programs with grad (a third of all programs end up
 * with grad steps: the others make no float tensor to mark): half their new float tensors
 * are marked as requiring grad (clt_requires_grad_) as soon as they are made, most writes that
 * grad mode refuses (in place, _out, copy, fill into or from a tensor that requires grad) are
 * wrapped in clt_set_grad_enabled(0) and (1), as an optimizer's step is, which also raises the
 * versions that a later backward checks, and backward steps appear: from a slot that requires
 * grad, through clt_sum or with a seeded gradient of its shape (NULL for one element),
 * clt_backward or clt_backward_retain, then each marked leaf's clt_tensor_grad into a slot
 * (retained; NO GRAD where it is NULL), and now and then the leaf minus it in place (an
 * optimizer's step; a retained graph that saved the leaf then refuses a backward, naming the
 * operation, alike everywhere). Every run starts in grad mode. Statuses must agree
 * everywhere, and the gradients lazy against eager on one device bit for bit, like any value;
 * against the reference on another device they are unchecked (tol_unchecked_v), as is anything
 * computed from them: a backward is a chain of reductions, matmuls and elementwise ops whose
 * bound would have to be derived through every node of the graph, which this tester does not
 * follow. tests/check_autograd.c checks the gradients' values on every device instead.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strdup */
#include "difftest.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h" /* clt__lazy_host_min: the host's lazy runs defer every op */

#define DT_SLOTS 8
#define DT_MAX_STEPS 160
#define DT_SKIP 1 /* a step's status when an operand slot is empty: not run */
#define DT_NO_GRAD 2 /* K_GRAD's status when clt_tensor_grad gives NULL */

/* ---- the PRNG: splitmix64 ----------------------------------------------------------------- */

typedef struct dt_rng {
  uint64_t s;
} dt_rng;

static uint64_t rng_next(dt_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int rng_below(dt_rng *r, int n) { return n <= 0 ? 0 : (int)(rng_next(r) % (uint64_t)n); }

static double rng_unit(dt_rng *r) { return (double)(rng_next(r) >> 11) * 0x1p-53; }

static bool rng_chance(dt_rng *r, int percent) { return rng_below(r, 100) < percent; }

/* An index drawn with the given weights. */
static int rng_pick(dt_rng *r, const int *w, int n) {
  int total = 0;
  for (int i = 0; i < n; i++)
    total += w[i];
  int x = rng_below(r, total);
  for (int i = 0; i < n; i++) {
    if (x < w[i])
      return i;
    x -= w[i];
  }
  return n - 1;
}

/* ---- the op table, from clt_ops.h: new rows join by themselves ------------------------------ */

typedef struct dt_op {
  const char *name, *rule, *form, *expr[3]; /* expr: float, integer, bool ("CLT_NA": refused) */
  int arity, ulps;
  clt_status (*f1)(clt_tensor *, clt_tensor **);
  clt_status (*f2)(clt_tensor *, clt_tensor *, clt_tensor **);
  clt_status (*f2_out)(clt_tensor *, clt_tensor *, clt_tensor *);
  clt_status (*f2_scalar)(clt_tensor *, double, clt_tensor **);
  clt_status (*f2_inplace)(clt_tensor *, clt_tensor *);
  clt_status (*f3)(clt_tensor *, clt_tensor *, clt_tensor *, clt_tensor **);
  clt_status (*f3_scalar)(clt_tensor *, double, double, clt_tensor **);
} dt_op;

#define DT_FNS_1_(nm) .f1 = clt_##nm,
#define DT_FNS_2_(nm) .f2 = clt_##nm, .f2_out = clt_##nm##_out, .f2_scalar = clt_##nm##_scalar,
#define DT_FNS_3_(nm) .f3 = clt_##nm,
#define DT_FORM_PLAIN_1_(nm)
#define DT_FORM_PLAIN_2_(nm)
#define DT_FORM_PLAIN_3_(nm) .f3_scalar = clt_##nm##_scalar,
#define DT_FORM_WRAP_1_(nm)
#define DT_FORM_INPLACE_2_(nm) .f2_inplace = clt_##nm##_,
#define DT_FORM_WRAP_INPLACE_2_(nm) DT_FORM_INPLACE_2_(nm)
#define DT_FORM_COND_3_(nm)
#define DT_OP_(nm, ar, ru, fo, fx, ix, bx, ul, doc)                                                \
  {.name = #nm,                                                                                    \
   .rule = #ru,                                                                                    \
   .form = #fo,                                                                                    \
   .expr = {#fx, #ix, #bx},                                                                        \
   .arity = ar,                                                                                    \
   .ulps = ul,                                                                                     \
   DT_FNS_##ar##_(nm) DT_FORM_##fo##_##ar##_(nm)},
static const dt_op ops[] = {CLT_ELEMENTWISE_OPS(DT_OP_)};
#define NOPS ((int)(sizeof ops / sizeof ops[0]))

static bool name_in(const char *name, const char *const *list) {
  for (; *list; list++)
    if (strcmp(name, *list) == 0)
      return true;
  return false;
}

/* ---- dtypes: sizes, bits, values ----------------------------------------------------------- */

static const clt_dtype all_dtypes[] = {CLT_F32, CLT_F64,  CLT_I32, CLT_I64,
                                       CLT_U8,  CLT_BOOL, CLT_F16, CLT_BF16};

static bool is_float(clt_dtype dt) {
  return dt == CLT_F32 || dt == CLT_F64 || dt == CLT_F16 || dt == CLT_BF16;
}

static const char *dtype_enum(clt_dtype dt) {
  static const char *names[] = {"CLT_F32", "CLT_F64",  "CLT_I32", "CLT_I64",
                                "CLT_U8",  "CLT_BOOL", "CLT_F16", "CLT_BF16"};
  return (unsigned)dt < 8 ? names[dt] : "?";
}

/* The relative spacing of dt's floats (1 ulp at 1), 0 for integers; the largest finite value;
 * the smallest normal one. */
static double dt_eps(clt_dtype dt) {
  switch (dt) {
  case CLT_F32:
    return 0x1p-23;
  case CLT_F64:
    return 0x1p-52;
  case CLT_F16:
    return 0x1p-10;
  case CLT_BF16:
    return 0x1p-7;
  default:
    return 0;
  }
}

static double dt_max(clt_dtype dt) {
  switch (dt) {
  case CLT_F32:
    return FLT_MAX;
  case CLT_F64:
    return DBL_MAX;
  case CLT_F16:
    return 65504.0;
  case CLT_BF16:
    return 0x1.fep127;
  case CLT_I32:
    return 2147483647.0;
  case CLT_I64:
    return 9223372036854775807.0;
  case CLT_U8:
    return 255;
  default:
    return 1;
  }
}

static double dt_min_normal(clt_dtype dt) {
  switch (dt) {
  case CLT_F32:
    return FLT_MIN;
  case CLT_F64:
    return DBL_MIN;
  case CLT_F16:
    return 0x1p-14;
  case CLT_BF16:
    return 0x1p-126;
  default:
    return 0;
  }
}

static double dt_min_denormal(clt_dtype dt) {
  switch (dt) {
  case CLT_F32:
    return 0x1p-149;
  case CLT_F64:
    return 0x1p-1074;
  case CLT_F16:
    return 0x1p-24;
  default:
    return 0x1p-133;
  }
}

/* f16 and bf16 written here from a double (round to nearest even) and read back, by
 * arithmetic, independently of the library's conversions. */
static uint16_t f16_bits(double v) {
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  if (isnan(v))
    return 0x7e00;
  double a = fabs(v);
  if (a >= 65520.0)
    return sign | 0x7c00;
  if (a < 0x1p-14)
    return sign | (uint16_t)rint(a * 0x1p24); /* 1024 gives the smallest normal */
  int e;
  double m = frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
  double q = rint((2 * m - 1) * 1024);
  int exp = e - 1 + 15;
  if (q == 1024) {
    q = 0;
    exp++;
  }
  if (exp >= 31)
    return sign | 0x7c00;
  return sign | (uint16_t)(exp << 10) | (uint16_t)q;
}

static double f16_value(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t bf16_bits(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (isnan(f))
    return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static double bf16_value(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Element i of a buffer of dtype dt: its bits, and its value as a double. */
static uint64_t get_bits(const void *b, clt_dtype dt, int64_t i) {
  switch (clt_dtype_size(dt)) {
  case 1:
    return ((const uint8_t *)b)[i];
  case 2:
    return ((const uint16_t *)b)[i];
  case 4:
    return ((const uint32_t *)b)[i];
  default:
    return ((const uint64_t *)b)[i];
  }
}

static double get_value(const void *b, clt_dtype dt, int64_t i) {
  switch (dt) {
  case CLT_F32:
    return ((const float *)b)[i];
  case CLT_F64:
    return ((const double *)b)[i];
  case CLT_I32:
    return ((const int32_t *)b)[i];
  case CLT_I64:
    return (double)((const int64_t *)b)[i];
  case CLT_U8:
  case CLT_BOOL:
    return ((const uint8_t *)b)[i];
  case CLT_F16:
    return f16_value(((const uint16_t *)b)[i]);
  default:
    return bf16_value(((const uint16_t *)b)[i]);
  }
}

/* Stores v (a float value, or an integer within dt's range) as element i. */
static void set_value(void *b, clt_dtype dt, int64_t i, double v) {
  switch (dt) {
  case CLT_F32:
    ((float *)b)[i] = (float)v;
    break;
  case CLT_F64:
    ((double *)b)[i] = v;
    break;
  case CLT_I32:
    ((int32_t *)b)[i] = (int32_t)v;
    break;
  case CLT_I64:
    ((int64_t *)b)[i] = (int64_t)v;
    break;
  case CLT_U8:
    ((uint8_t *)b)[i] = (uint8_t)v;
    break;
  case CLT_BOOL:
    ((uint8_t *)b)[i] = v != 0;
    break;
  case CLT_F16:
    ((uint16_t *)b)[i] = f16_bits(v);
    break;
  case CLT_BF16:
    ((uint16_t *)b)[i] = bf16_bits(v);
    break;
  }
}

static void set_i64(void *b, clt_dtype dt, int64_t i, int64_t v) {
  if (dt == CLT_I64)
    ((int64_t *)b)[i] = v;
  else if (dt == CLT_I32)
    ((int32_t *)b)[i] = (int32_t)v;
  else
    set_value(b, dt, i, (double)v);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "difftest: out of memory (%zu bytes)\n", n);
    abort();
  }
  return p;
}

static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++)
    n *= shape[d];
  return n;
}

/* ---- data ---------------------------------------------------------------------------------- */

enum {
  D_UNIFORM,  /* floats in [-4, 4); integers in [-8, 8] ([0, 16] for u8) */
  D_SMALLINT, /* small integers, exact in every dtype */
  D_SPECIAL,  /* NaN, infinities, signed zeros, denormals, extremes among ordinary values */
  D_POSITIVE, /* in (0, 8): the domain of log and sqrt */
  D_WIDE,     /* magnitudes from 2^-40 to 2^40; integers anywhere in their range */
  D_SIMPLE,   /* i % 7 - 3 (bool: i % 2): what the minimizer tries instead */
  D_COUNT
};

/* The edge values of a float dtype. */
static double float_special(dt_rng *r, clt_dtype dt) {
  double max = dt_max(dt), tiny = dt_min_denormal(dt), mn = dt_min_normal(dt);
  const double v[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, tiny, -tiny * 3, mn,
                      -mn, max,      -max,      1.0, -1.0, 0.5,  mn * 0.75, 1e4};
  return v[rng_below(r, (int)(sizeof v / sizeof v[0]))];
}

static int64_t int_special(dt_rng *r, clt_dtype dt) {
  if (dt == CLT_U8) {
    const int64_t v[] = {0, 1, 127, 128, 254, 255};
    return v[rng_below(r, 6)];
  }
  int64_t max = dt == CLT_I32 ? INT32_MAX : INT64_MAX, min = dt == CLT_I32 ? INT32_MIN : INT64_MIN;
  const int64_t v[] = {min, min + 1, max, max - 1, -1, 0, 1, 2};
  return v[rng_below(r, 8)];
}

/* n elements of dtype dt at buf, from seed, of the given kind (D_*). */
static void make_data(void *buf, clt_dtype dt, int64_t n, uint64_t seed, int mode) {
  dt_rng r = {seed};
  for (int64_t i = 0; i < n; i++) {
    if (dt == CLT_BOOL) {
      set_value(buf, dt, i, mode == D_SIMPLE ? (double)(i % 2) : (double)(rng_next(&r) & 1));
      continue;
    }
    if (mode == D_SIMPLE) {
      set_value(buf, dt, i, dt == CLT_U8 ? (double)(i % 7) : (double)(i % 7 - 3));
      continue;
    }
    if (is_float(dt)) {
      double v;
      switch (mode) {
      case D_UNIFORM:
        v = -4 + 8 * rng_unit(&r);
        break;
      case D_SMALLINT:
        v = rng_below(&r, 17) - 8;
        break;
      case D_SPECIAL:
        v = rng_chance(&r, 40) ? float_special(&r, dt) : -4 + 8 * rng_unit(&r);
        break;
      case D_POSITIVE:
        v = 1e-3 + 8 * rng_unit(&r);
        break;
      default:
        v = ldexp(0.5 + 0.5 * rng_unit(&r), rng_below(&r, 81) - 40) * (rng_chance(&r, 50) ? -1 : 1);
        break;
      }
      set_value(buf, dt, i, v);
    } else {
      int64_t v;
      switch (mode) {
      case D_SPECIAL:
        v = rng_chance(&r, 40) ? int_special(&r, dt) : rng_below(&r, 17) - 8;
        break;
      case D_WIDE:
        v = dt == CLT_I64   ? (int64_t)rng_next(&r)
            : dt == CLT_I32 ? (int32_t)(uint32_t)rng_next(&r)
                            : (int64_t)(rng_next(&r) & 255);
        break;
      case D_POSITIVE:
        v = 1 + rng_below(&r, 8);
        break;
      default:
        v = rng_below(&r, 17) - 8;
        break;
      }
      if (dt == CLT_U8 && (v < 0 || v > 255))
        v = (v % 17 + 17) % 17;
      set_i64(buf, dt, i, v);
    }
  }
}

/* An index tensor's values: in [0, size), one in 20 out of range. */
static void make_index(void *buf, clt_dtype dt, int64_t n, uint64_t seed, int64_t size) {
  dt_rng r = {seed};
  for (int64_t i = 0; i < n; i++) {
    int64_t v = size > 0 ? (int64_t)(rng_next(&r) % (uint64_t)size) : 0;
    if (rng_chance(&r, 5))
      v = rng_chance(&r, 50) ? -1 : size;
    set_i64(buf, dt, i, v);
  }
}

/* ---- programs ------------------------------------------------------------------------------ */

enum dt_kind {
  K_FROM_HOST,
  K_FULL, /* sub: 0 zeros, 1 ones, 2 full(s0) */
  K_ARANGE,
  K_EW, /* an elementwise op: ops[op] in form */
  K_CAST,
  K_CLONE,
  K_CONTIGUOUS,
  K_COPY,
  K_FILL,
  K_VIEW,
  K_RESHAPE,
  K_NARROW,
  K_SELECT,
  K_SLICE,
  K_TRANSPOSE,
  K_PERMUTE,
  K_EXPAND,
  K_UNSQUEEZE,
  K_SQUEEZE,
  K_REDUCE, /* sub: R_* */
  K_MATMUL,
  K_CAT,
  K_STACK,
  K_INDEX_SELECT, /* src[1] >= 0: a slot's index, else its own (sub 1: made deferred) */
  K_READ,         /* a comparison point: every run reads the slot */
  K_PRINT,
  K_EVAL,
  K_SYNC,
  K_RELEASE,
  K_REQUIRES_GRAD, /* clt_requires_grad_(src[0], 1) */
  K_GRAD_MODE,     /* clt_set_grad_enabled(sub) */
  K_BACKWARD,      /* from src[0]: sub bit 0: through clt_sum (else with a seeded grad of shape,
                    * dtype, data and mode; NULL for ndim < 0); bit 1: clt_backward_retain */
  K_GRAD,          /* dst = clt_tensor_grad(src[0]), retained (DT_NO_GRAD where NULL) */
  K_DIAGONAL,      /* the view clt_diagonal(src[0], start, dim, dim2) */
  K_TRIL,          /* clt_tril (sub 0) or clt_triu (sub 1) of src[0] from diagonal start */
  K_COUNT
};
enum { F_PLAIN, F_SCALAR, F_OUT, F_INPLACE };
enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_ARGMAX };
static const char *const reduce_names[] = {"sum", "mean", "max", "min", "argmax"};

typedef struct dt_step {
  int kind, op, form, sub;
  int dst, src[4], n; /* the slot written; those read (-1: none); n of src for cat and stack */
  clt_dtype dtype;    /* created, cast to, or the index's */
  int ndim;           /* of shape: a creation's, view's, expansion's, permutation's */
  int64_t shape[CLT_MAX_DIMS];
  int dim, dim2, keepdim, whole;
  int64_t start, stop, step;
  double s0, s1, s2;
  uint64_t data; /* the seed of a creation's (or an index's) values */
  int mode;      /* their kind, D_* */
} dt_step;

typedef struct dt_program {
  uint64_t seed;
  int n;
  bool f64; /* uses f64 somewhere: skipped on devices without fp64 */
  dt_step step[DT_MAX_STEPS];
} dt_program;

static dt_step step_new(int kind) {
  dt_step s;
  memset(&s, 0, sizeof s);
  s.kind = kind;
  s.dst = -1;
  for (int i = 0; i < 4; i++)
    s.src[i] = -1;
  return s;
}

/* ---- tolerances ---------------------------------------------------------------------------- */

/* How far another device's values may be from the reference's: exact (E = r = 0), within
 * E + r |want| of it, or not compared at all. */
typedef struct dt_tol {
  bool unchecked;
  double E, r;
} dt_tol;

static const dt_tol tol_exact_v = {false, 0, 0};
static const dt_tol tol_unchecked_v = {true, 0, 0};

static bool tol_exact(dt_tol t) { return !t.unchecked && t.E == 0 && t.r == 0; }

static dt_tol tol_merge(dt_tol a, dt_tol b) {
  dt_tol t = {a.unchecked || b.unchecked, fmax(a.E, b.E), fmax(a.r, b.r)};
  return t;
}

/* A bound so loose it says nothing, or one on integers or bools (a discontinuous function of
 * approximate values), is no bound. */
static dt_tol tol_final(dt_tol t, clt_dtype out) {
  if (t.unchecked || tol_exact(t))
    return t;
  if (!is_float(out) || !(t.r <= 1e-2) || !(t.E <= dt_max(out) / 16))
    return tol_unchecked_v;
  return t;
}

/* The error of a freshly rounded result of compute dtype (an op of `ulps`), rounded to out. */
static double op_rel(int ulps, clt_dtype out) {
  clt_dtype compute = out == CLT_F64 ? CLT_F64 : CLT_F32;
  return (ulps + 1) * dt_eps(compute) + (out == compute ? 0 : dt_eps(out));
}

/* The operands' magnitudes, read from the reference run: the largest finite |value|, and
 * whether any is infinite. */
typedef struct dt_mag {
  double max;
  bool inf;
} dt_mag;

/* An elementwise op's bound from its operands' (in, their magnitudes m) and the result's dtype.
 * Exact operands give the op's own error (its ulps in the table); approximate ones carry their
 * error through the ops whose effect on it is known, and nothing through the others. */
static dt_tol tol_elementwise(const dt_op *op, int n, const dt_tol *in, const dt_mag *m,
                              clt_dtype out) {
  bool exact = true, unchecked = false, inf = false;
  for (int i = 0; i < n; i++) {
    exact = exact && tol_exact(in[i]);
    unchecked = unchecked || in[i].unchecked;
    inf = inf || (!tol_exact(in[i]) && m[i].inf);
  }
  if (unchecked)
    return tol_unchecked_v;
  if (exact) {
    if (op->ulps == 0)
      return tol_exact_v;
    dt_tol t = {false, 0, op_rel(op->ulps, out)};
    return tol_final(t, out);
  }
  /* An approximate operand: an infinity in it may be a finite number elsewhere. */
  if (inf || strcmp(op->rule, "BOOL") == 0 || !is_float(out))
    return tol_unchecked_v;
  static const char *const lipschitz[] = {"neg",     "abs",   "relu",  "maximum",
                                          "minimum", "clamp", "where", NULL};
  static const char *const smooth[] = {"atan", "tanh", "sigmoid", "erf", NULL};
  double abs_in[3]; /* each operand's absolute error */
  for (int i = 0; i < n; i++)
    abs_in[i] = in[i].E + in[i].r * m[i].max;
  double own = op_rel(op->ulps, out);
  dt_tol t = {false, 0, 0};
  const char *name = op->name;
  if (name_in(name, lipschitz)) {
    t = strcmp(name, "where") == 0 ? tol_merge(in[1], in[2]) : in[0];
    for (int i = 1; i < n && strcmp(name, "where") != 0; i++)
      t = tol_merge(t, in[i]);
    t.r += own;
  } else if (strcmp(name, "add") == 0 || strcmp(name, "sub") == 0) {
    t.E = abs_in[0] + abs_in[1];
    t.r = own;
  } else if (strcmp(name, "mul") == 0) {
    if (in[0].E == 0 && in[1].E == 0) {
      t.r = in[0].r + in[1].r + in[0].r * in[1].r + own;
    } else {
      t.E = abs_in[0] * m[1].max + abs_in[1] * m[0].max + abs_in[0] * abs_in[1];
      t.r = own;
    }
  } else if (strcmp(name, "div") == 0) {
    if (in[0].E != 0 || in[1].E != 0)
      return tol_unchecked_v;
    t.r = in[0].r + 2 * in[1].r + own;
  } else if (strcmp(name, "exp") == 0) {
    t.r = abs_in[0] * 1.01 + own;
  } else if (strcmp(name, "expm1") == 0) {
    t.E = abs_in[0] * 1.01 * (exp(fmin(m[0].max, 700)) + 1);
    t.r = own;
  } else if (strcmp(name, "log") == 0) {
    if (in[0].E != 0)
      return tol_unchecked_v;
    t.E = in[0].r * 1.01;
    t.r = own;
  } else if (strcmp(name, "sqrt") == 0 || strcmp(name, "rsqrt") == 0) {
    if (in[0].E != 0)
      return tol_unchecked_v;
    t.r = in[0].r + own;
  } else if (strcmp(name, "sin") == 0 || strcmp(name, "cos") == 0) {
    t.E = abs_in[0];
    t.r = own;
  } else if (name_in(name, smooth)) {
    t.E = 1.2 * abs_in[0];
    t.r = own;
  } else {
    return tol_unchecked_v; /* tan, pow, atan2, log1p, rounding, sign, and rows added later */
  }
  return tol_final(t, out);
}

/* A conversion to out. */
static dt_tol tol_cast(dt_tol in, clt_dtype out) {
  if (in.unchecked || tol_exact(in))
    return in;
  if (!is_float(out))
    return tol_unchecked_v;
  in.r += dt_eps(out);
  return tol_final(in, out);
}

/* A sum of n terms of magnitude up to m.max in any order (a tree on devices, pairwise on the
 * host), each carrying the operand's error; f16 and bf16 add in f32. */
static dt_tol tol_sum(dt_tol in, dt_mag m, int64_t n, clt_dtype out) {
  if (in.unchecked)
    return in;
  if (!is_float(out) || n <= 1)
    return n <= 1 ? in : tol_exact_v;
  clt_dtype acc = out == CLT_F64 ? CLT_F64 : CLT_F32;
  double terms = (double)n * m.max;
  if (!(terms < dt_max(out) / 4) || (m.inf && !tol_exact(in)))
    return tol_unchecked_v; /* overflow may depend on the order */
  dt_tol t = {false,
              (log2((double)n) + 2) * dt_eps(acc) * terms + (double)n * (in.E + in.r * m.max),
              acc == out ? 0 : dt_eps(out)};
  return tol_final(t, out);
}

/* (.., m, k) x (.., k, n). */
static dt_tol tol_matmul(dt_tol a, dt_mag ma, dt_tol b, dt_mag mb, int64_t k, clt_dtype out) {
  if (a.unchecked || b.unchecked)
    return tol_unchecked_v;
  if (k == 0)
    return tol_exact_v;
  double ea = a.E + a.r * ma.max, eb = b.E + b.r * mb.max, prod = ma.max * mb.max;
  if (!(prod * (double)k < dt_max(out) / 4) ||
      ((ma.inf || mb.inf) && !(tol_exact(a) && tol_exact(b))))
    return tol_unchecked_v;
  clt_dtype acc = out == CLT_F64 ? CLT_F64 : CLT_F32;
  dt_tol t = {false,
              (log2((double)k) + 2) * dt_eps(acc) * (double)k * prod +
                  (double)k * (ea * mb.max + eb * ma.max + ea * eb),
              acc == out ? 2 * dt_eps(acc) : dt_eps(out)};
  if (t.E == 0)
    t.E = dt_min_normal(out); /* a single product may still be fused (FMA) or not */
  return tol_final(t, out);
}

/* ---- runs ---------------------------------------------------------------------------------- */

/* What a run saw at a K_READ (bytes) or K_PRINT (text) step. */
typedef struct dt_snap {
  int step;
  clt_dtype dtype;
  int ndim;
  int64_t shape[CLT_MAX_DIMS];
  size_t nbytes;
  void *bytes;
  char *text;
  dt_tol tol; /* the reference's bound for these values */
} dt_snap;

typedef struct dt_run {
  clt_device *dev;
  bool lazy, track; /* track: the reference, which follows the bounds */
  clt_tensor *slot[DT_SLOTS];
  int group[DT_SLOTS]; /* slots with one storage (views) share a group and its bound */
  dt_tol *gtol;
  int ngroups, cap;
  int status[DT_MAX_STEPS];
  char *error[DT_MAX_STEPS]; /* clt_last_error() of failing steps */
  dt_snap snap[DT_MAX_STEPS];
  int nsnaps;
  int64_t leaked; /* bytes still allocated on dev after every tensor was released */
  int old_lazy, old_grad;
  int64_t old_host_min;
} dt_run;

static void run_begin(dt_run *r, clt_device *dev, bool lazy, bool track) {
  memset(r, 0, sizeof *r);
  r->dev = dev;
  r->lazy = lazy;
  r->track = track;
  r->cap = 16;
  r->gtol = xmalloc(sizeof(dt_tol) * (size_t)r->cap);
  r->old_lazy = clt_set_lazy(lazy);
  r->old_grad = clt_set_grad_enabled(1); /* every run starts in grad mode */
  if (lazy && clt_device_is_host(dev))
    r->old_host_min = clt__lazy_host_min(1); /* every host op deferred, however small */
}

static void run_release_slots(dt_run *r) {
  for (int k = 0; k < DT_SLOTS; k++) {
    clt_tensor_release(r->slot[k]);
    r->slot[k] = NULL;
  }
}

static void run_end(dt_run *r) {
  run_release_slots(r);
  if (r->old_host_min > 0)
    clt__lazy_host_min(r->old_host_min);
  clt_set_lazy(r->old_lazy);
  clt_set_grad_enabled(r->old_grad);
}

static void run_free(dt_run *r) {
  for (int i = 0; i < r->nsnaps; i++) {
    free(r->snap[i].bytes);
    free(r->snap[i].text);
  }
  for (int i = 0; i < DT_MAX_STEPS; i++)
    free(r->error[i]);
  free(r->gtol);
  memset(r, 0, sizeof *r);
}

static int new_group(dt_run *r, dt_tol t) {
  if (r->ngroups == r->cap) {
    r->cap *= 2;
    dt_tol *g = realloc(r->gtol, sizeof(dt_tol) * (size_t)r->cap);
    if (!g)
      abort();
    r->gtol = g;
  }
  r->gtol[r->ngroups] = t;
  return r->ngroups++;
}

static dt_tol slot_tol(const dt_run *r, int k) { return r->gtol[r->group[k]]; }

/* Puts t into slot k (releasing what was there): in a new group with bound tol, or, for a view,
 * in the group of slot `share`. */
static void put(dt_run *r, int k, clt_tensor *t, int share, dt_tol tol) {
  int g = share >= 0 ? r->group[share] : new_group(r, tol);
  clt_tensor_release(r->slot[k]);
  r->slot[k] = t;
  r->group[k] = g;
}

/* A write of values bounded by tol into slot k's storage. */
static void wrote(dt_run *r, int k, dt_tol tol) {
  r->gtol[r->group[k]] = tol_merge(r->gtol[r->group[k]], tol);
}

/* The magnitude of t's values (the reference's; read on the host). */
static dt_mag magnitude(const clt_tensor *t) {
  dt_mag m = {0, false};
  size_t nb = clt_tensor_nbytes(t);
  void *buf = xmalloc(nb);
  if (clt_tensor_read(t, buf, nb) == CLT_OK) {
    clt_dtype dt = clt_tensor_dtype(t);
    for (int64_t i = 0; i < clt_tensor_numel(t); i++) {
      double v = fabs(get_value(buf, dt, i));
      if (isinf(v))
        m.inf = true;
      else if (v > m.max)
        m.max = v;
    }
  }
  free(buf);
  return m;
}

static clt_tensor *S(const dt_run *r, int k) { return k >= 0 && k < DT_SLOTS ? r->slot[k] : NULL; }

static clt_status exec_ew(dt_run *r, const dt_step *s) {
  const dt_op *op = &ops[s->op];
  clt_tensor *a = S(r, s->src[0]), *b = S(r, s->src[1]), *c = S(r, s->src[2]), *t = NULL;
  int nin = op->arity;
  clt_status st;
  if (!a || (nin >= 2 && s->form != F_SCALAR && !b) || (nin == 3 && s->form != F_SCALAR && !c))
    return DT_SKIP;
  if ((s->form == F_OUT && !S(r, s->dst)))
    return DT_SKIP;
  if (nin == 1)
    st = op->f1(a, &t);
  else if (nin == 2 && s->form == F_PLAIN)
    st = op->f2(a, b, &t);
  else if (nin == 2 && s->form == F_SCALAR)
    st = op->f2_scalar(a, s->s0, &t);
  else if (nin == 2 && s->form == F_OUT)
    st = op->f2_out(a, b, S(r, s->dst));
  else if (nin == 2 && s->form == F_INPLACE)
    st = op->f2_inplace(a, b);
  else if (nin == 3 && s->form == F_SCALAR)
    st = op->f3_scalar(a, s->s0, s->s1, &t);
  else
    st = op->f3(a, b, c, &t);
  if (st != CLT_OK)
    return st;
  dt_tol tol = tol_exact_v;
  clt_tensor *res = t ? t : s->form == F_OUT ? S(r, s->dst) : a;
  if (r->track) {
    dt_tol in[3];
    dt_mag m[3];
    bool exact = true;
    for (int i = 0; i < nin; i++) {
      bool scalar = s->form == F_SCALAR && i > 0;
      in[i] = scalar ? tol_exact_v : slot_tol(r, s->src[i]);
      exact = exact && tol_exact(in[i]);
    }
    if (!exact || op->ulps > 0)
      for (int i = 0; i < nin; i++) {
        bool scalar = s->form == F_SCALAR && i > 0;
        double v = i == 1 ? s->s0 : s->s1;
        m[i] = scalar ? (dt_mag){isinf(v) ? 0 : fabs(v), isinf(v)} : magnitude(S(r, s->src[i]));
      }
    tol = tol_elementwise(op, nin, in, m, clt_tensor_dtype(res));
  }
  if (t)
    put(r, s->dst, t, -1, tol);
  else
    wrote(r, s->form == F_OUT ? s->dst : s->src[0], tol);
  return CLT_OK;
}

static clt_status exec_reduce(dt_run *r, const dt_step *s) {
  clt_tensor *a = S(r, s->src[0]), *t = NULL;
  if (!a)
    return DT_SKIP;
  static clt_status (*const whole[])(clt_tensor *, clt_tensor **) = {clt_sum, clt_mean, clt_max,
                                                                     clt_min, clt_argmax};
  static clt_status (*const dim[])(clt_tensor *, int, int, clt_tensor **) = {
      clt_sum_dim, clt_mean_dim, clt_max_dim, clt_min_dim, clt_argmax_dim};
  clt_status st = s->whole ? whole[s->sub](a, &t) : dim[s->sub](a, s->dim, s->keepdim, &t);
  if (st != CLT_OK)
    return st;
  dt_tol tol = tol_exact_v;
  if (r->track) {
    dt_tol in = slot_tol(r, s->src[0]);
    int64_t nout = clt_tensor_numel(t), n = nout ? clt_tensor_numel(a) / nout : 0;
    clt_dtype out = clt_tensor_dtype(t);
    if (s->sub == R_SUM || s->sub == R_MEAN) {
      tol = tol_sum(in, magnitude(a), n, out);
      if (s->sub == R_MEAN && !tol.unchecked && is_float(out) && n > 1) {
        tol.E /= (double)n;
        tol.r += op_rel(0, out);
      }
    } else if (s->sub == R_ARGMAX) {
      tol = tol_exact(in) ? tol_exact_v : tol_unchecked_v;
    } else {
      tol = in;
    }
  }
  put(r, s->dst, t, -1, tol);
  return CLT_OK;
}

/* A slot's index tensor, or the step's own (made from its data; deferred when sub is 1). */
static clt_status index_tensor(dt_run *r, const dt_step *s, clt_tensor **out) {
  if (s->src[1] >= 0) {
    if (!S(r, s->src[1]))
      return DT_SKIP;
    *out = clt_tensor_retain(S(r, s->src[1]));
    return CLT_OK;
  }
  void *buf = xmalloc((size_t)s->shape[0] * clt_dtype_size(s->dtype));
  make_index(buf, s->dtype, s->shape[0], s->data, s->stop);
  clt_tensor *i = NULL;
  clt_status st = clt_from_host(buf, s->dtype, 1, s->shape, r->dev, &i);
  free(buf);
  if (st == CLT_OK && s->sub == 1) {
    clt_tensor *j = NULL;
    st = clt_add_scalar(i, 0, &j);
    clt_tensor_release(i);
    i = j;
  }
  if (st == CLT_OK)
    *out = i;
  return st;
}

/* A backward from slot src[0]: through its sum (sub bit 0), else with a seeded gradient of the
 * shape and dtype recorded at generation (NULL where ndim < 0); retaining the graph (bit 1). */
static clt_status exec_backward(dt_run *r, const dt_step *s) {
  clt_tensor *root = NULL, *grad = NULL;
  clt_status st = CLT_OK;
  if (s->sub & 1) {
    st = clt_sum(S(r, s->src[0]), &root);
  } else if (s->ndim >= 0) {
    int64_t n = numel_of(s->ndim, s->shape);
    void *buf = xmalloc((size_t)n * clt_dtype_size(s->dtype));
    make_data(buf, s->dtype, n, s->data, s->mode);
    st = clt_from_host(buf, s->dtype, s->ndim, s->shape, r->dev, &grad);
    free(buf);
  }
  if (st == CLT_OK) {
    clt_tensor *from = root ? root : S(r, s->src[0]);
    st = s->sub & 2 ? clt_backward_retain(from, grad) : clt_backward(from, grad);
  }
  clt_tensor_release(root);
  clt_tensor_release(grad);
  return st;
}

/* Runs step idx of p on r and records its status (and its snapshot for K_READ and K_PRINT). */
static int exec_step(dt_run *r, const dt_step *s, int idx) {
  clt_tensor *a = S(r, s->src[0]), *t = NULL;
  clt_status st = CLT_OK;
  bool new_tensor = false; /* t goes into s->dst in a new group of bound tol */
  int share = -1;          /* or into s->dst sharing src[0]'s group (a view) */
  dt_tol tol = tol_exact_v;
  switch (s->kind) {
  case K_FROM_HOST: {
    int64_t n = numel_of(s->ndim, s->shape);
    void *buf = xmalloc((size_t)n * clt_dtype_size(s->dtype));
    make_data(buf, s->dtype, n, s->data, s->mode);
    st = clt_from_host(buf, s->dtype, s->ndim, s->shape, r->dev, &t);
    free(buf);
    new_tensor = true;
    break;
  }
  case K_FULL:
    st = s->sub == 0   ? clt_zeros(s->dtype, s->ndim, s->shape, r->dev, &t)
         : s->sub == 1 ? clt_ones(s->dtype, s->ndim, s->shape, r->dev, &t)
                       : clt_full(s->dtype, s->ndim, s->shape, s->s0, r->dev, &t);
    new_tensor = true;
    break;
  case K_ARANGE:
    st = clt_arange(s->s0, s->s1, s->s2, s->dtype, r->dev, &t);
    new_tensor = true;
    break;
  case K_EW:
    return exec_ew(r, s);
  case K_REDUCE:
    return exec_reduce(r, s);
  case K_CAST:
    if (!a)
      return DT_SKIP;
    st = clt_cast(a, s->dtype, &t);
    new_tensor = true;
    if (r->track)
      tol = tol_cast(slot_tol(r, s->src[0]), s->dtype);
    break;
  case K_CLONE:
    if (!a)
      return DT_SKIP;
    st = clt_clone(a, &t);
    new_tensor = true;
    if (r->track)
      tol = slot_tol(r, s->src[0]);
    break;
  case K_CONTIGUOUS:
  case K_VIEW:
  case K_RESHAPE:
  case K_NARROW:
  case K_SELECT:
  case K_SLICE:
  case K_TRANSPOSE:
  case K_PERMUTE:
  case K_EXPAND:
  case K_UNSQUEEZE:
  case K_DIAGONAL:
  case K_SQUEEZE: {
    if (!a)
      return DT_SKIP;
    int perm[CLT_MAX_DIMS];
    for (int d = 0; d < s->ndim; d++)
      perm[d] = (int)s->shape[d];
    share = s->src[0]; /* a copy (contiguous, reshape) shares too: its bound is the same */
    switch (s->kind) {
    case K_CONTIGUOUS:
      st = clt_contiguous(a, &t);
      break;
    case K_VIEW:
      st = clt_view(a, s->ndim, s->shape, &t);
      break;
    case K_RESHAPE:
      st = clt_reshape(a, s->ndim, s->shape, &t);
      break;
    case K_NARROW:
      st = clt_narrow(a, s->dim, s->start, s->stop, &t);
      break;
    case K_SELECT:
      st = clt_select(a, s->dim, s->start, &t);
      break;
    case K_SLICE:
      st = clt_slice(a, s->dim, s->start, s->stop, s->step, &t);
      break;
    case K_TRANSPOSE:
      st = clt_transpose(a, s->dim, s->dim2, &t);
      break;
    case K_PERMUTE:
      st = clt_permute(a, s->ndim, perm, &t);
      break;
    case K_EXPAND:
      st = clt_expand(a, s->ndim, s->shape, &t);
      break;
    case K_UNSQUEEZE:
      st = clt_unsqueeze(a, s->dim, &t);
      break;
    case K_DIAGONAL:
      st = clt_diagonal(a, s->start, s->dim, s->dim2, &t);
      break;
    default:
      st = clt_squeeze(a, s->dim, &t);
      break;
    }
    break;
  }
  case K_TRIL:
    if (!a)
      return DT_SKIP;
    st = s->sub ? clt_triu(a, s->start, &t) : clt_tril(a, s->start, &t);
    new_tensor = true;
    if (st == CLT_OK && r->track)
      tol = slot_tol(r, s->src[0]); /* elements selected, never computed */
    break;
  case K_COPY:
    if (!a || !S(r, s->dst))
      return DT_SKIP;
    st = clt_copy(S(r, s->dst), a);
    if (st == CLT_OK && r->track)
      wrote(r, s->dst, tol_cast(slot_tol(r, s->src[0]), clt_tensor_dtype(S(r, s->dst))));
    break;
  case K_FILL:
    if (!S(r, s->dst))
      return DT_SKIP;
    st = clt_fill_(S(r, s->dst), s->s0);
    break;
  case K_MATMUL: {
    clt_tensor *b = S(r, s->src[1]);
    if (!a || !b)
      return DT_SKIP;
    st = clt_matmul(a, b, &t);
    new_tensor = true;
    if (st == CLT_OK && r->track) {
      int nd = clt_tensor_ndim(a);
      tol = tol_matmul(slot_tol(r, s->src[0]), magnitude(a), slot_tol(r, s->src[1]), magnitude(b),
                       clt_tensor_shape(a)[nd - 1], clt_tensor_dtype(t));
    }
    break;
  }
  case K_CAT:
  case K_STACK: {
    clt_tensor *in[4];
    for (int i = 0; i < s->n; i++)
      if (!(in[i] = S(r, s->src[i])))
        return DT_SKIP;
    st = s->kind == K_CAT ? clt_cat(s->n, in, s->dim, &t) : clt_stack(s->n, in, s->dim, &t);
    new_tensor = true;
    if (st == CLT_OK && r->track)
      for (int i = 0; i < s->n; i++)
        tol = tol_merge(tol, tol_cast(slot_tol(r, s->src[i]), clt_tensor_dtype(t)));
    break;
  }
  case K_INDEX_SELECT: {
    if (!a)
      return DT_SKIP;
    clt_tensor *i = NULL;
    st = index_tensor(r, s, &i);
    if (st != CLT_OK)
      return st;
    st = clt_index_select(a, s->dim, i, &t);
    clt_tensor_release(i);
    new_tensor = true;
    if (r->track)
      tol = s->src[1] >= 0 && !tol_exact(slot_tol(r, s->src[1])) ? tol_unchecked_v
                                                                 : slot_tol(r, s->src[0]);
    break;
  }
  case K_READ: {
    if (!a)
      return DT_SKIP;
    dt_snap *sn = &r->snap[r->nsnaps];
    memset(sn, 0, sizeof *sn);
    sn->nbytes = clt_tensor_nbytes(a);
    sn->bytes = xmalloc(sn->nbytes);
    st = clt_tensor_read(a, sn->bytes, sn->nbytes);
    sn->step = idx;
    sn->dtype = clt_tensor_dtype(a);
    sn->ndim = clt_tensor_ndim(a);
    memcpy(sn->shape, clt_tensor_shape(a), sizeof(int64_t) * (size_t)sn->ndim);
    if (r->track)
      sn->tol = slot_tol(r, s->src[0]);
    r->nsnaps++;
    break;
  }
  case K_PRINT: {
    if (!a)
      return DT_SKIP;
    size_t len = 0;
    st = clt_format(a, NULL, 0, &len);
    dt_snap *sn = &r->snap[r->nsnaps];
    memset(sn, 0, sizeof *sn);
    sn->step = idx;
    sn->text = xmalloc(len + 1);
    sn->text[0] = 0;
    if (st == CLT_OK)
      st = clt_format(a, sn->text, len + 1, NULL);
    r->nsnaps++;
    break;
  }
  case K_EVAL:
    if (!a)
      return DT_SKIP;
    st = clt_eval(a);
    break;
  case K_SYNC:
    st = clt_device_synchronize(r->dev);
    break;
  case K_RELEASE:
    if (!S(r, s->dst))
      return DT_SKIP;
    clt_tensor_release(r->slot[s->dst]);
    r->slot[s->dst] = NULL;
    break;
  case K_REQUIRES_GRAD:
    if (!a)
      return DT_SKIP;
    st = clt_requires_grad_(a, 1);
    break;
  case K_GRAD_MODE:
    clt_set_grad_enabled(s->sub);
    break;
  case K_BACKWARD:
    if (!a)
      return DT_SKIP;
    return exec_backward(r, s);
  case K_GRAD: {
    if (!a)
      return DT_SKIP;
    clt_tensor *g = clt_tensor_grad(a);
    if (!g)
      return DT_NO_GRAD;
    /* gradients are checked bit for bit lazy against eager, and their statuses everywhere, but
     * not against the reference's values (see the header comment) */
    put(r, s->dst, clt_tensor_retain(g), -1, tol_unchecked_v);
    return CLT_OK;
  }
  }
  if (st == CLT_OK && t)
    put(r, s->dst, t, new_tensor ? -1 : share, tol);
  return st;
}

static void run_step(dt_run *r, const dt_program *p, int idx) {
  clt_clear_error();
  int st = exec_step(r, &p->step[idx], idx);
  r->status[idx] = st;
  if (st != CLT_OK && st != DT_SKIP && st != DT_NO_GRAD)
    r->error[idx] = strdup(clt_last_error());
}

/* Runs p on dev: every step, then releases every tensor and checks that the device's
 * allocator holds what it held before. */
static void run_program(dt_run *r, const dt_program *p, clt_device *dev, bool lazy, bool track) {
  clt_memory_stats before, after;
  clt_device_synchronize(dev);
  clt_device_memory_stats(dev, &before);
  run_begin(r, dev, lazy, track);
  for (int i = 0; i < p->n; i++)
    run_step(r, p, i);
  run_end(r);
  clt_device_synchronize(dev);
  clt_device_memory_stats(dev, &after);
  r->leaked = (int64_t)after.allocated_bytes - (int64_t)before.allocated_bytes;
}

/* ---- comparing ----------------------------------------------------------------------------- */

typedef enum dt_fail_kind {
  FAIL_NONE,
  FAIL_STATUS,
  FAIL_VALUE,
  FAIL_TEXT,
  FAIL_LEAK,
  FAIL_CRASH
} dt_fail_kind;
static const char *const fail_names[] = {"none", "status", "value", "text", "leak", "crash"};

/* Runs are numbered: mode 2d is device d eager, 2d + 1 device d lazy; device 0 is the host, and
 * mode 0 the reference. */
typedef struct dt_failure {
  dt_fail_kind kind;
  int step;       /* the step where it shows (-1: after the program) */
  int mode, base; /* the run that differs, and the run it is compared with */
  char why[768];
} dt_failure;

typedef struct dt_ctx {
  const dt_options *o;
  clt_device *dev[DT_MAX_DEVICES + 1]; /* the host, then o->devs */
  int ndev;
  long skipped;
} dt_ctx;

static void mode_name(const dt_ctx *c, int mode, char *buf, size_t n) {
  snprintf(buf, n, "%s %s", clt_device_name(c->dev[mode / 2]), mode % 2 ? "lazy" : "eager");
}

static int base_of(int mode) { return mode % 2 ? mode - 1 : 0; }

static void fmt_elem(const void *b, clt_dtype dt, int64_t i, char *out, size_t n) {
  if (is_float(dt))
    snprintf(out, n, "%.9g (0x%0*" PRIx64 ")", get_value(b, dt, i), (int)clt_dtype_size(dt) * 2,
             get_bits(b, dt, i));
  else
    snprintf(out, n, "%.17g", get_value(b, dt, i));
}

/* Whether got (of the run checked) agrees with want (its baseline's): bit for bit, or within
 * want's bound. */
static bool snaps_agree(const dt_snap *want, const dt_snap *got, bool bitwise, char *why,
                        size_t n) {
  if (want->text || got->text) {
    if (!bitwise || !want->text || !got->text || strcmp(want->text, got->text) == 0)
      return true;
    snprintf(why, n, "printed \"%.200s\", expected \"%.200s\"", got->text, want->text);
    return false;
  }
  if (want->dtype != got->dtype || want->ndim != got->ndim ||
      memcmp(want->shape, got->shape, sizeof(int64_t) * (size_t)want->ndim) != 0) {
    snprintf(why, n, "dtype %s, %d dims; expected %s, %d dims", clt_dtype_name(got->dtype),
             got->ndim, clt_dtype_name(want->dtype), want->ndim);
    return false;
  }
  clt_dtype dt = want->dtype;
  int64_t count = (int64_t)(want->nbytes / clt_dtype_size(dt));
  dt_tol tol = want->tol;
  if (!bitwise && tol.unchecked)
    return true;
  for (int64_t i = 0; i < count; i++) {
    uint64_t wb = get_bits(want->bytes, dt, i), gb = get_bits(got->bytes, dt, i);
    if (wb == gb)
      continue;
    bool ok = false;
    /* NaN's sign and payload are not a result (IEEE 754, 6.3: "this standard does not interpret
     * the sign of a NaN"): x86 divides 0 by 0 into -NaN, and a fused kernel may give +NaN for the
     * same chain (seed 7551; docs/operations.md, "Values C leaves undefined") */
    if (bitwise && is_float(dt) && isnan(get_value(want->bytes, dt, i)) &&
        isnan(get_value(got->bytes, dt, i)))
      continue;
    if (!bitwise && is_float(dt)) {
      double w = get_value(want->bytes, dt, i), g = get_value(got->bytes, dt, i);
      if (isnan(w) || isnan(g))
        ok = isnan(w) && isnan(g);
      else if (w == g)
        ok = true; /* +0 and -0: fmax/fmin of the two, and sums of zeros, may give either */
      else if (!tol_exact(tol)) {
        /* an overflow near the largest finite value may round to it or to infinity */
        double lim = dt_max(dt) * (1 + dt_eps(dt));
        w = isinf(w) ? copysign(lim, w) : w;
        g = isinf(g) ? copysign(lim, g) : g;
        ok = fabs(g - w) <= 8 * (tol.E + tol.r * fmax(fabs(w), fabs(g))) + 4 * dt_min_normal(dt);
      }
    }
    if (ok)
      continue;
    char ws[64], gs[64];
    fmt_elem(want->bytes, dt, i, ws, sizeof ws);
    fmt_elem(got->bytes, dt, i, gs, sizeof gs);
    if (bitwise || tol_exact(tol))
      snprintf(why, n, "%s element %" PRId64 " of %" PRId64 ": %s, expected %s (bit for bit)",
               clt_dtype_name(dt), i, count, gs, ws);
    else
      snprintf(why, n,
               "%s element %" PRId64 " of %" PRId64 ": %s, expected %s (within %.3g + %.3g |x|)",
               clt_dtype_name(dt), i, count, gs, ws, 8 * tol.E, 8 * tol.r);
    return false;
  }
  return true;
}

static const char *status_text(int st) {
  return st == DT_SKIP ? "SKIPPED" : st == DT_NO_GRAD ? "NO GRAD" : clt_status_name(st);
}

/* The first difference between run r (mode) and its baseline b, by step. */
static bool compare_runs(const dt_ctx *c, const dt_program *p, const dt_run *b, const dt_run *r,
                         int mode, dt_failure *f) {
  char mn[64], bn[64];
  mode_name(c, mode, mn, sizeof mn);
  mode_name(c, base_of(mode), bn, sizeof bn);
  bool bitwise = mode % 2 == 1;
  int si = 0;
  for (int i = 0; i < p->n; i++) {
    if (b->status[i] != r->status[i]) {
      *f = (dt_failure){FAIL_STATUS, i, mode, base_of(mode), ""};
      snprintf(f->why, sizeof f->why, "%s gives %s (%.250s), %s gives %s (%.250s)", mn,
               status_text(r->status[i]),
               r->error[i] ? r->error[i] : "", bn,
               status_text(b->status[i]),
               b->error[i] ? b->error[i] : "");
      return false;
    }
    for (; si < b->nsnaps && si < r->nsnaps && b->snap[si].step == i; si++) {
      char why[512];
      if (b->status[i] == CLT_OK &&
          !snaps_agree(&b->snap[si], &r->snap[si], bitwise, why, sizeof why)) {
        *f = (dt_failure){b->snap[si].text ? FAIL_TEXT : FAIL_VALUE, i, mode, base_of(mode), ""};
        snprintf(f->why, sizeof f->why, "%s differs from %s: %s", mn, bn, why);
        return false;
      }
    }
  }
  if (r->leaked != 0) {
    *f = (dt_failure){FAIL_LEAK, -1, mode, mode, ""};
    snprintf(f->why, sizeof f->why,
             "%s: %" PRId64 " bytes still allocated on %s after every tensor "
             "was released",
             mn, r->leaked, clt_device_name(r->dev));
    return false;
  }
  return true;
}

/* Runs p in the modes asked (only: one mode and its baselines; -1: every mode) and compares
 * them; fills f with the first failure. */
static bool check_program(dt_ctx *c, const dt_program *p, int only, dt_failure *f) {
  f->kind = FAIL_NONE;
  dt_run *ref = xmalloc(sizeof *ref), *eager = xmalloc(sizeof *eager),
         *lazy = xmalloc(sizeof *lazy);
  run_program(ref, p, c->dev[0], false, true);
  bool ok = true;
  if (ref->leaked) { /* the reference against itself: only its leak can show */
    ok = compare_runs(c, p, ref, ref, 0, f);
  }
  for (int d = 0; ok && d < c->ndev; d++) {
    if (only >= 0 && only / 2 != d)
      continue;
    if (p->f64 && !clt_device_has_fp64(c->dev[d])) {
      c->skipped++;
      continue;
    }
    dt_run *base = ref;
    if (d > 0) {
      run_program(eager, p, c->dev[d], false, false);
      ok = compare_runs(c, p, ref, eager, 2 * d, f);
      base = eager;
    }
    if (ok && (only < 0 || only % 2 == 1)) {
      run_program(lazy, p, c->dev[d], true, false);
      ok = compare_runs(c, p, base, lazy, 2 * d + 1, f);
      run_free(lazy);
    }
    if (d > 0)
      run_free(eager);
  }
  run_free(ref);
  free(ref);
  free(eager);
  free(lazy);
  return ok;
}

/* ---- generating ---------------------------------------------------------------------------- */

typedef struct dt_gen {
  dt_rng rng;
  dt_program *p;
  dt_run run; /* the steps so far, run eagerly on the host: what the next step is chosen from */
  int64_t max_numel;
  bool small;
  /* the NumPy lane's stream (dt_export_numpy): matmul operands of 2 or 3 dimensions and no
   * diagonal or tril steps, the programs as they were when its 8000 seeds were last shown to
   * pass; the new shapes and steps run in every device run (their NumPy rules exist in
   * numpy_check.py, but seeds up to 8000 meet model gaps beside them: stop 37's note) */
  bool classic;
  bool big; /* a program of larger tensors: the tiled and streamed paths of the kernels */
  int last; /* the slot written last: the next step likes to read it */
  clt_dtype palette[3];
  int64_t dims[3];
  int force; /* >= 0: the slot every pick of a live slot gives (gen_compose) */
  /* autograd: a program with grad (45% of the seeds) marks new float tensors as requiring
   * grad and has backward steps; every choice about it is drawn from grng, so that the programs
   * of the other seeds are those they always were */
  dt_rng grng;
  bool grad;
  const clt_tensor *leaf[DT_SLOTS]; /* the tensor marked in each slot (the host run's) */
} dt_gen;

static int gen_room(const dt_gen *g) { return DT_MAX_STEPS - DT_SLOTS - 4 - g->p->n; }

static bool emit_one(dt_gen *g, dt_step s) {
  if (gen_room(g) <= 0)
    return false;
  dt_program *p = g->p;
  p->step[p->n] = s;
  run_step(&g->run, p, p->n);
  p->n++;
  if (s.dtype == CLT_F64 && (s.kind == K_FROM_HOST || s.kind == K_FULL || s.kind == K_ARANGE ||
                             s.kind == K_CAST || s.kind == K_INDEX_SELECT))
    p->f64 = true;
  for (int k = 0; k < DT_SLOTS; k++)
    if (g->run.slot[k] && clt_tensor_dtype(g->run.slot[k]) == CLT_F64)
      p->f64 = true;
  if (s.dst >= 0 && g->run.status[p->n - 1] == CLT_OK)
    g->last = s.dst;
  for (int k = 0; k < DT_SLOTS; k++) /* a marked tensor replaced: exact, as it was alive */
    if (g->leaf[k] != g->run.slot[k])
      g->leaf[k] = NULL;
  return true;
}

static bool slot_requires_grad(const dt_gen *g, int k) {
  return k >= 0 && k < DT_SLOTS && clt_tensor_requires_grad(g->run.slot[k]);
}

/* Whether s writes into an existing tensor that requires grad, or from an operand that does:
 * refused while grad mode is on. */
static bool guarded_write(const dt_gen *g, const dt_step *s) {
  bool write = s->kind == K_COPY || s->kind == K_FILL ||
               (s->kind == K_EW && (s->form == F_OUT || s->form == F_INPLACE));
  if (!write)
    return false;
  bool any = slot_requires_grad(g, s->dst);
  for (int i = 0; i < 4; i++)
    any = any || slot_requires_grad(g, s->src[i]);
  return any;
}

static void emit_grad_mode(dt_gen *g, int on) {
  dt_step m = step_new(K_GRAD_MODE);
  m.sub = on;
  emit_one(g, m);
}

/* Appends s to the program, running it on the host. In a program with grad, a write that grad
 * mode would refuse is mostly wrapped in grad mode off and on again (as an optimizer's step),
 * and a new tensor is half the time marked as requiring grad (a float one; now and then an
 * integer or bool one, refused alike everywhere). */
static void emit(dt_gen *g, dt_step s) {
  if (!g->grad) {
    emit_one(g, s);
    return;
  }
  bool wrap = guarded_write(g, &s) && rng_chance(&g->grng, 70);
  if (wrap)
    emit_grad_mode(g, 0);
  bool done = emit_one(g, s);
  if (wrap)
    emit_grad_mode(g, 1);
  bool created = s.kind == K_FROM_HOST || s.kind == K_FULL || s.kind == K_ARANGE;
  if (!done || !created || g->run.status[g->p->n - 1 - wrap] != CLT_OK || !g->run.slot[s.dst])
    return;
  bool fl = is_float(clt_tensor_dtype(g->run.slot[s.dst]));
  if (rng_chance(&g->grng, fl ? 50 : 4)) {
    dt_step m = step_new(K_REQUIRES_GRAD);
    m.src[0] = s.dst;
    if (emit_one(g, m) && g->run.status[g->p->n - 1] == CLT_OK)
      g->leaf[s.dst] = g->run.slot[s.dst];
  }
}

static clt_tensor *slot(const dt_gen *g, int k) { return k >= 0 ? g->run.slot[k] : NULL; }

/* A live slot, the last written one half the time; -1 if none. */
static int pick_live(dt_gen *g) {
  if (slot(g, g->force))
    return g->force;
  if (slot(g, g->last) && rng_chance(&g->rng, 50))
    return g->last;
  int live[DT_SLOTS], n = 0;
  for (int k = 0; k < DT_SLOTS; k++)
    if (g->run.slot[k])
      live[n++] = k;
  return n ? live[rng_below(&g->rng, n)] : -1;
}

/* A slot to write a new tensor into: a free one mostly, else any (its tensor is released). */
static int pick_dst(dt_gen *g) {
  int free_[DT_SLOTS], n = 0;
  for (int k = 0; k < DT_SLOTS; k++)
    if (!g->run.slot[k])
      free_[n++] = k;
  if (n && rng_chance(&g->rng, 75))
    return free_[rng_below(&g->rng, n)];
  return rng_below(&g->rng, DT_SLOTS);
}

/* NumPy broadcasting of two shapes; the result's ndim, or -1. */
static int broadcast(int na, const int64_t *a, int nb, const int64_t *b, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - na ? 1 : a[i - (n - na)], y = i < n - nb ? 1 : b[i - (n - nb)];
    if (x != y && x != 1 && y != 1)
      return -1;
    if (out)
      out[i] = x == 1 ? y : x;
  }
  return n;
}

/* A live slot whose shape broadcasts with slot a's (to_a: broadcasts to a's shape exactly);
 * one in ten times any live slot. */
static int pick_partner(dt_gen *g, int a, bool to_a, clt_dtype want, bool want_dtype) {
  clt_tensor *ta = slot(g, a);
  int cand[DT_SLOTS], n = 0;
  /* mostly of a's dtype, as in real programs (mixed dtypes build kernels of their own) */
  bool same = !want_dtype && rng_chance(&g->rng, 70);
  for (int pass = 0; pass < 2 && n == 0; pass++, same = false)
    for (int k = 0; k < DT_SLOTS; k++) {
      clt_tensor *t = g->run.slot[k];
      if (!t || (want_dtype && clt_tensor_dtype(t) != want) ||
          (same && clt_tensor_dtype(t) != clt_tensor_dtype(ta)))
        continue;
      int64_t out[CLT_MAX_DIMS];
      int nd = broadcast(clt_tensor_ndim(ta), clt_tensor_shape(ta), clt_tensor_ndim(t),
                         clt_tensor_shape(t), out);
      if (nd < 0 || (to_a && (nd != clt_tensor_ndim(ta) ||
                              memcmp(out, clt_tensor_shape(ta), sizeof(int64_t) * (size_t)nd))))
        continue;
      cand[n++] = k;
    }
  if (n == 0 || rng_chance(&g->rng, 10))
    return want_dtype && n == 0 ? -1 : pick_live(g);
  return cand[rng_below(&g->rng, n)];
}

static clt_dtype any_dtype(dt_gen *g) {
  static const int w[] = {30, 10, 12, 10, 8, 10, 10, 10}; /* the order of all_dtypes */
  return all_dtypes[rng_pick(&g->rng, w, 8)];
}

/* A dtype of the program's palette mostly, else any: a program of few dtypes, as real ones are,
 * needs fewer kernels built (a mix of dtypes has kernels of its own); seeds cover them all. */
static clt_dtype gen_dtype(dt_gen *g) {
  return rng_chance(&g->rng, 85) ? g->palette[rng_below(&g->rng, 3)] : any_dtype(g);
}

static int64_t any_dim(dt_gen *g) {
  static const int64_t sizes[] = {1, 2, 3, 4, 5, 6, 0, 8, 16, 33, 67, 130, 257, 1030};
  static const int w[] = {25, 15, 20, 10, 10, 5, 3, 4, 3, 3, 1, 1, 4, 4};
  return sizes[rng_pick(&g->rng, w, g->small ? 8 : g->big ? 14 : 12)];
}

/* A dimension of the program's palette mostly: PoCL compiles a kernel again for each new work
 * size, so a program of few sizes costs far less to run; seeds cover them all. */
static int64_t gen_dim(dt_gen *g) {
  return rng_chance(&g->rng, 85) ? g->dims[rng_below(&g->rng, 3)] : any_dim(g);
}

/* A shape of at most max_numel elements: new, or derived from a live slot's (the same, some
 * dimensions 1, a trailing part) so that binary ops find partners. */
static int gen_shape(dt_gen *g, int64_t *shape) {
  int nd;
  int k = pick_live(g);
  if (k >= 0 && rng_chance(&g->rng, 50)) {
    clt_tensor *t = slot(g, k);
    int tn = clt_tensor_ndim(t);
    const int64_t *ts = clt_tensor_shape(t);
    int drop = rng_chance(&g->rng, 30) ? rng_below(&g->rng, tn + 1) : 0;
    nd = tn - drop;
    for (int d = 0; d < nd; d++)
      shape[d] = rng_chance(&g->rng, 20) ? 1 : ts[d + drop];
  } else {
    static const int w[] = {8, 25, 35, 22, 10};
    nd = rng_pick(&g->rng, w, 5);
    for (int d = 0; d < nd; d++)
      shape[d] = gen_dim(g);
  }
  while (numel_of(nd, shape) > g->max_numel) { /* halve the largest dimension */
    int big = 0;
    for (int d = 1; d < nd; d++)
      if (shape[d] > shape[big])
        big = d;
    shape[big] /= 2;
  }
  return nd;
}

static void gen_from_host(dt_gen *g, int dst, clt_dtype dt, int nd, const int64_t *shape) {
  dt_step s = step_new(K_FROM_HOST);
  s.dst = dst;
  s.dtype = dt;
  s.ndim = nd;
  memcpy(s.shape, shape, sizeof(int64_t) * (size_t)nd);
  s.data = rng_next(&g->rng);
  static const int w[] = {30, 20, 25, 15, 10};
  s.mode = rng_pick(&g->rng, w, 5);
  emit(g, s);
}

static void gen_create(dt_gen *g) {
  int64_t shape[CLT_MAX_DIMS] = {0};
  int nd = gen_shape(g, shape);
  clt_dtype dt = gen_dtype(g);
  if (slot(g, g->last) && rng_chance(&g->rng, 50))
    dt = clt_tensor_dtype(slot(g, g->last));
  int dst = pick_dst(g);
  int kind = rng_below(&g->rng, 10);
  if (kind < 7) {
    gen_from_host(g, dst, dt, nd, shape);
    return;
  }
  dt_step s = step_new(kind < 9 ? K_FULL : K_ARANGE);
  s.dst = dst;
  s.dtype = dt;
  s.ndim = nd;
  memcpy(s.shape, shape, sizeof(int64_t) * (size_t)nd);
  s.sub = rng_below(&g->rng, 3);
  s.s0 = is_float(dt) ? float_special(&g->rng, dt) : (double)(rng_below(&g->rng, 9) - 2);
  if (s.kind == K_ARANGE) {
    s.s0 = rng_below(&g->rng, 9) - 4;
    s.s2 = rng_chance(&g->rng, 70) ? rng_below(&g->rng, 3) + 1 : 0.25 * (rng_below(&g->rng, 9) - 4);
    s.s1 = s.s0 + s.s2 * rng_below(&g->rng, 20);
  }
  emit(g, s);
}

/* A scalar operand for a tensor of dtype dt: small integers mostly; for floats edge values too;
 * sometimes one the integer dtype cannot hold (an error, alike everywhere). */
static double gen_scalar(dt_gen *g, clt_dtype dt) {
  if (rng_chance(&g->rng, 60))
    return rng_below(&g->rng, 9) - 3;
  if (!is_float(dt) && rng_chance(&g->rng, 80))
    return rng_chance(&g->rng, 50) ? 0.5 : 300;
  const double v[] = {0.5, -1.25, 1e-3, 2.5, -0.0, NAN, INFINITY, -INFINITY, 1e30, 100.0, 0.1};
  return v[rng_below(&g->rng, (int)(sizeof v / sizeof v[0]))];
}

static void gen_elementwise(dt_gen *g) {
  int opi = rng_below(&g->rng, NOPS);
  const dt_op *op = &ops[opi];
  int a = pick_live(g);
  if (a < 0)
    return;
  dt_step s = step_new(K_EW);
  s.op = opi;
  s.src[0] = a;
  s.dst = pick_dst(g);
  clt_dtype adt = clt_tensor_dtype(slot(g, a));
  if (op->arity == 2) {
    const int w[] = {40, 25, 20, op->f2_inplace ? 15 : 0};
    s.form = rng_pick(&g->rng, w, 4);
    if (s.form == F_SCALAR)
      s.s0 = gen_scalar(g, adt);
    else
      s.src[1] = pick_partner(g, a, s.form == F_INPLACE, 0, false);
    if (s.form == F_INPLACE)
      s.dst = a;
    if (s.form == F_OUT) {
      /* the result's dtype and shape, from the plain op on the host */
      clt_tensor *t = NULL;
      if (op->f2(slot(g, a), slot(g, s.src[1]), &t) != CLT_OK || rng_chance(&g->rng, 10)) {
        s.dst = pick_live(g);
      } else {
        int cand[DT_SLOTS], n = 0;
        for (int k = 0; k < DT_SLOTS; k++) {
          clt_tensor *u = g->run.slot[k];
          if (u && clt_tensor_dtype(u) == clt_tensor_dtype(t) &&
              clt_tensor_ndim(u) == clt_tensor_ndim(t) &&
              memcmp(clt_tensor_shape(u), clt_tensor_shape(t),
                     sizeof(int64_t) * (size_t)clt_tensor_ndim(t)) == 0)
            cand[n++] = k;
        }
        if (n) {
          s.dst = cand[rng_below(&g->rng, n)];
        } else { /* a new tensor to write into */
          dt_step z = step_new(K_FULL);
          do
            z.dst = pick_dst(g);
          while (z.dst == a || z.dst == s.src[1]);
          z.dtype = clt_tensor_dtype(t);
          z.ndim = clt_tensor_ndim(t);
          memcpy(z.shape, clt_tensor_shape(t), sizeof(int64_t) * (size_t)z.ndim);
          emit(g, z);
          s.dst = z.dst;
        }
      }
      clt_tensor_release(t);
    }
  } else if (op->arity == 3) {
    if (strcmp(op->form, "COND") == 0) {
      int cond = pick_partner(g, a, false, CLT_BOOL, true);
      if (cond < 0 || rng_chance(&g->rng, 20)) { /* a condition computed from a */
        dt_step c = step_new(K_EW);
        for (c.op = 0; c.op < NOPS && strcmp(ops[c.op].name, "gt") != 0; c.op++)
          ;
        c.form = F_SCALAR;
        c.src[0] = a;
        c.dst = pick_dst(g);
        emit(g, c);
        cond = c.dst;
      }
      s.src[0] = cond;
      s.src[1] = a;
      s.src[2] = pick_partner(g, a, false, 0, false);
    } else if (op->f3_scalar && rng_chance(&g->rng, 35)) {
      s.form = F_SCALAR;
      s.s0 = gen_scalar(g, adt);
      s.s1 = rng_chance(&g->rng, 80) ? fabs(gen_scalar(g, adt)) : gen_scalar(g, adt);
    } else {
      s.src[1] = pick_partner(g, a, false, 0, false);
      s.src[2] = pick_partner(g, a, false, 0, false);
    }
  }
  emit(g, s);
}

/* A shape of numel elements for view and reshape: numel's prime factors spread over 1 to 4
 * dimensions, perhaps with a 1 inserted or one dimension given as -1. */
static int gen_reshape(dt_gen *g, int64_t numel, int64_t *shape) {
  int nd = 1 + rng_below(&g->rng, 4);
  if (numel == 0) {
    for (int d = 0; d < nd; d++)
      shape[d] = 1 + rng_below(&g->rng, 3);
    shape[rng_below(&g->rng, nd)] = 0;
    return nd;
  }
  if (numel == 1 && rng_chance(&g->rng, 30))
    return 0;
  for (int d = 0; d < nd; d++)
    shape[d] = 1;
  int64_t n = numel;
  for (int64_t p = 2; n > 1; p++)
    while (n % p == 0) {
      shape[rng_below(&g->rng, nd)] *= p;
      n /= p;
    }
  if (nd < CLT_MAX_DIMS && rng_chance(&g->rng, 20)) {
    int at = rng_below(&g->rng, nd + 1);
    memmove(shape + at + 1, shape + at, sizeof(int64_t) * (size_t)(nd - at));
    shape[at] = 1;
    nd++;
  }
  if (rng_chance(&g->rng, 25))
    shape[rng_below(&g->rng, nd)] = -1;
  return nd;
}

static void gen_view(dt_gen *g) {
  int a = pick_live(g);
  if (a < 0)
    return;
  clt_tensor *t = slot(g, a);
  int nd = clt_tensor_ndim(t);
  const int64_t *sh = clt_tensor_shape(t);
  static const int w[] = {12, 8, 12, 8, 12, 10, 8, 10, 8, 6, 6, 5, 5};
  static const int kinds[] = {K_VIEW,      K_RESHAPE, K_NARROW,     K_SELECT,   K_SLICE,
                              K_TRANSPOSE, K_PERMUTE, K_EXPAND,     K_UNSQUEEZE, K_SQUEEZE,
                              K_CONTIGUOUS, K_DIAGONAL, K_TRIL};
  dt_step s = step_new(kinds[rng_pick(&g->rng, w, g->classic ? 11 : 13)]);
  s.src[0] = a;
  s.dst = pick_dst(g);
  int dim = nd ? rng_below(&g->rng, nd) : 0;
  int64_t size = nd ? sh[dim] : 1;
  s.dim = rng_chance(&g->rng, 20) ? dim - nd : dim;
  switch (s.kind) {
  case K_VIEW:
  case K_RESHAPE:
    s.ndim = gen_reshape(g, clt_tensor_numel(t), s.shape);
    break;
  case K_NARROW:
    s.start = rng_below(&g->rng, (int)size + 1);
    s.stop = rng_below(&g->rng, (int)(size - s.start) + 1); /* the length */
    if (s.start < size && rng_chance(&g->rng, 20))
      s.start -= size;
    break;
  case K_SELECT:
    s.start = rng_below(&g->rng, (int)size + 1) - (rng_chance(&g->rng, 25) ? size : 0);
    if (s.start == size && size > 0)
      s.start = 0;
    break;
  case K_SLICE:
    s.start = rng_below(&g->rng, (int)size + 3) - 1 - (rng_chance(&g->rng, 20) ? size : 0);
    s.stop = rng_chance(&g->rng, 30) ? CLT_SLICE_END : rng_below(&g->rng, (int)size + 3) - 1;
    s.step = 1 + rng_below(&g->rng, 3);
    break;
  case K_TRANSPOSE:
    s.dim2 = nd ? rng_below(&g->rng, nd) : -1;
    if (nd >= 2 && s.dim2 == dim)
      s.dim2 = (dim + 1) % nd;
    break;
  case K_PERMUTE:
    s.ndim = nd;
    for (int d = 0; d < nd; d++)
      s.shape[d] = d;
    for (int d = nd - 1; d > 0; d--) {
      int j = rng_below(&g->rng, d + 1);
      int64_t x = s.shape[d];
      s.shape[d] = s.shape[j];
      s.shape[j] = x;
    }
    if (nd && rng_chance(&g->rng, 20))
      s.shape[0] -= nd;
    break;
  case K_EXPAND: {
    int extra = nd < CLT_MAX_DIMS - 2 ? rng_below(&g->rng, 3) : 0;
    s.ndim = nd + extra;
    for (int d = 0; d < extra; d++)
      s.shape[d] = 1 + rng_below(&g->rng, 3);
    for (int d = 0; d < nd; d++)
      s.shape[extra + d] = sh[d] == 1                ? 1 + rng_below(&g->rng, 4)
                           : rng_chance(&g->rng, 20) ? -1
                                                     : sh[d];
    if (numel_of(s.ndim, s.shape) > 4 * g->max_numel)
      s.shape[0] = 1;
    break;
  }
  case K_UNSQUEEZE:
    s.dim = rng_below(&g->rng, nd + 1) - (rng_chance(&g->rng, 20) ? nd + 1 : 0);
    break;
  case K_DIAGONAL: /* two dimensions (now and then the same one, refused), an offset */
    s.dim2 = nd ? rng_below(&g->rng, nd) - (rng_chance(&g->rng, 20) ? nd : 0) : 0;
    if (nd >= 2 && (s.dim2 + nd) % nd == dim && !rng_chance(&g->rng, 10))
      s.dim2 = (dim + 1) % nd;
    s.start = rng_below(&g->rng, 7) - 3;
    break;
  case K_TRIL:
    s.sub = rng_below(&g->rng, 2);
    s.start = rng_below(&g->rng, 7) - 3;
    break;
  default:
    break;
  }
  emit(g, s);
}

static void gen_reduce(dt_gen *g) {
  int a = pick_live(g);
  if (a < 0)
    return;
  int nd = clt_tensor_ndim(slot(g, a));
  dt_step s = step_new(K_REDUCE);
  s.src[0] = a;
  s.dst = pick_dst(g);
  s.sub = rng_below(&g->rng, 5);
  s.whole = nd == 0 || rng_chance(&g->rng, 30);
  s.dim = nd ? rng_below(&g->rng, nd) - (rng_chance(&g->rng, 20) ? nd : 0) : 0;
  s.keepdim = rng_chance(&g->rng, 40);
  emit(g, s);
}

/* A float operand of 2 or 3 dimensions (made if there is none), and a second one of matching
 * inner size: new, perhaps transposed, perhaps the result of an op (deferred). */
static void gen_matmul(dt_gen *g) {
  int a = -1;
  for (int k = 0; k < DT_SLOTS && a < 0; k++) {
    clt_tensor *t = g->run.slot[k];
    int nd = t ? clt_tensor_ndim(t) : 0;
    if (t && is_float(clt_tensor_dtype(t)) &&
        (g->classic ? nd == 2 || nd == 3 : nd >= 1 && nd <= 4) && rng_chance(&g->rng, 60))
      a = k;
  }
  static const clt_dtype floats[] = {CLT_F32, CLT_F32, CLT_F64, CLT_F16, CLT_BF16};
  if (a < 0) {
    int64_t sh[3] = {1 + rng_below(&g->rng, 6), 1 + rng_below(&g->rng, 8), 0};
    a = pick_dst(g);
    gen_from_host(g, a, floats[rng_below(&g->rng, 5)], 2, sh);
    if (!slot(g, a))
      return;
  }
  clt_tensor *ta = slot(g, a);
  int nd = clt_tensor_ndim(ta);
  const int64_t *sh = clt_tensor_shape(ta);
  int64_t k = sh[nd - 1], n = 1 + rng_below(&g->rng, g->small ? 4 : 9);
  /* b: a vector (15%), a matrix, or a batch of 1 or 2 dimensions whose sizes match a's batch
   * or are 1 (broadcast), as torch.matmul takes; a 1-D a meets a matrix or a batch */
  int bnd;
  if (g->classic)
    bnd = nd == 3 && rng_chance(&g->rng, 50) ? 3 : 2;
  else
    bnd = rng_chance(&g->rng, 15) ? 1 : nd >= 3 && rng_chance(&g->rng, 50) ? nd : 2;
  if (!g->classic && bnd == 2 && nd == 1 && rng_chance(&g->rng, 30))
    bnd = 3;
  int64_t bs[4];
  bool transposed = (g->classic || bnd >= 2) && rng_chance(&g->rng, 30);
  for (int i = 0; i < bnd - 2; i++) {
    int ia = i - (bnd - 2) + (nd - 2); /* a's batch dimension aligned with it, if any */
    if (g->classic)
      bs[i] = sh[0]; /* 3-D by 3-D: one batch */
    else
      bs[i] = ia >= 0 && ia < nd - 2 && !rng_chance(&g->rng, 25) ? sh[ia]
                                                                 : 1 + rng_below(&g->rng, 2);
  }
  if (bnd == 1) {
    bs[0] = k;
  } else {
    bs[bnd - 2] = transposed ? n : k;
    bs[bnd - 1] = transposed ? k : n;
  }
  clt_dtype dt = rng_chance(&g->rng, 90) ? clt_tensor_dtype(ta) : floats[rng_below(&g->rng, 5)];
  int b = pick_dst(g);
  while (b == a)
    b = rng_below(&g->rng, DT_SLOTS);
  gen_from_host(g, b, dt, bnd, bs);
  if (transposed) {
    dt_step t = step_new(K_TRANSPOSE);
    t.src[0] = t.dst = b;
    t.dim = bnd - 2;
    t.dim2 = bnd - 1;
    emit(g, t);
  }
  if (rng_chance(&g->rng, 40)) {
    dt_step e = step_new(K_EW);
    for (e.op = 0; e.op < NOPS && strcmp(ops[e.op].name, "mul") != 0; e.op++)
      ;
    e.form = F_SCALAR;
    e.s0 = 0.5;
    e.src[0] = e.dst = b;
    emit(g, e);
  }
  dt_step s = step_new(K_MATMUL);
  s.src[0] = a;
  s.src[1] = b;
  s.dst = pick_dst(g);
  emit(g, s);
}

static void gen_join(dt_gen *g) {
  int a = pick_live(g);
  if (a < 0)
    return;
  clt_tensor *ta = slot(g, a);
  int nd = clt_tensor_ndim(ta);
  dt_step s = step_new(rng_chance(&g->rng, 50) ? K_CAT : K_STACK);
  s.dst = pick_dst(g);
  s.dim = s.kind == K_CAT ? (nd ? rng_below(&g->rng, nd) : 0) : rng_below(&g->rng, nd + 1);
  s.n = 1 + rng_below(&g->rng, 3);
  s.src[0] = a;
  for (int i = 1; i < s.n; i++) { /* slots of the same shape (cat: but along dim) */
    int cand[DT_SLOTS], n = 0;
    for (int k = 0; k < DT_SLOTS; k++) {
      clt_tensor *t = g->run.slot[k];
      if (!t || clt_tensor_ndim(t) != nd)
        continue;
      bool same = true;
      for (int d = 0; d < nd; d++)
        same = same && (clt_tensor_shape(t)[d] == clt_tensor_shape(ta)[d] ||
                        (s.kind == K_CAT && d == s.dim));
      if (same)
        cand[n++] = k;
    }
    s.src[i] = rng_chance(&g->rng, 10) ? pick_live(g) : cand[rng_below(&g->rng, n)];
  }
  emit(g, s);
}

static void gen_index_select(dt_gen *g) {
  int a = pick_live(g);
  if (a < 0)
    return;
  clt_tensor *ta = slot(g, a);
  int nd = clt_tensor_ndim(ta);
  dt_step s = step_new(K_INDEX_SELECT);
  s.src[0] = a;
  s.dst = pick_dst(g);
  s.dim = nd ? rng_below(&g->rng, nd) : 0;
  s.stop = nd ? clt_tensor_shape(ta)[s.dim] : 1; /* the size indexed */
  s.dtype = rng_chance(&g->rng, 50) ? CLT_I64 : CLT_I32;
  s.shape[0] = rng_below(&g->rng, 6);
  s.ndim = 1;
  s.data = rng_next(&g->rng);
  s.sub = rng_chance(&g->rng, 30);
  if (rng_chance(&g->rng, 20)) {
    for (int k = 0; k < DT_SLOTS; k++) {
      clt_tensor *t = g->run.slot[k];
      if (t && clt_tensor_ndim(t) == 1 &&
          (clt_tensor_dtype(t) == CLT_I64 || clt_tensor_dtype(t) == CLT_I32))
        s.src[1] = k;
    }
  }
  emit(g, s);
}

static void gen_write(dt_gen *g) {
  int d = pick_live(g);
  if (d < 0)
    return;
  clt_tensor *td = slot(g, d);
  if (rng_chance(&g->rng, 25)) {
    dt_step s = step_new(K_FILL);
    s.dst = d;
    s.s0 = gen_scalar(g, clt_tensor_dtype(td));
    emit(g, s);
    return;
  }
  dt_step s = step_new(K_COPY);
  s.dst = d;
  s.src[0] = pick_partner(g, d, true, 0, false);
  if (rng_chance(&g->rng, 30)) { /* a new source of the destination's shape */
    int k = pick_dst(g);
    if (k != d) {
      gen_from_host(g, k, gen_dtype(g), clt_tensor_ndim(td), clt_tensor_shape(td));
      s.src[0] = k;
    }
  }
  emit(g, s);
}

static void gen_misc(dt_gen *g) {
  static const int w[] = {30, 15, 15, 10, 15, 15};
  static const int kinds[] = {K_READ, K_PRINT, K_EVAL, K_SYNC, K_RELEASE, K_CAST};
  dt_step s = step_new(kinds[rng_pick(&g->rng, w, 6)]);
  int a = pick_live(g);
  if (a < 0)
    return;
  s.src[0] = a;
  if (s.kind == K_RELEASE) {
    s.src[0] = -1;
    s.dst = a;
  }
  if (s.kind == K_CAST) {
    s.dst = pick_dst(g);
    s.dtype = gen_dtype(g);
    if (rng_chance(&g->rng, 30))
      s.kind = rng_chance(&g->rng, 50) ? K_CLONE : K_CONTIGUOUS;
  }
  emit(g, s);
}

/* The composition issue 32 was about, on purpose: a new result of an elementwise op (deferred,
 * in a lazy run), one or two views of it, and a consumer of the view (an elementwise op in any
 * form, a join, a reduction, an index_select, a copy into it, a clone, contiguous or cast), then
 * perhaps reads of the result and of what was made from it. */
static void gen_compose(dt_gen *g) {
  int a = pick_live(g);
  if (a < 0)
    return;
  dt_step x = step_new(K_EW);
  do
    x.op = rng_below(&g->rng, NOPS);
  while (ops[x.op].arity == 3);
  x.form = ops[x.op].arity == 2 ? F_SCALAR : F_PLAIN;
  x.s0 = gen_scalar(g, clt_tensor_dtype(slot(g, a)));
  x.src[0] = a;
  x.dst = pick_dst(g);
  emit(g, x);
  if (!slot(g, x.dst) || g->run.status[g->p->n - 1] != CLT_OK)
    return;
  g->force = x.dst;
  int views = 1 + rng_below(&g->rng, 2);
  for (int i = 0; i < views; i++) {
    gen_view(g);
    if (g->run.status[g->p->n - 1] == CLT_OK && slot(g, g->last))
      g->force = g->last;
  }
  switch (rng_below(&g->rng, 7)) {
  case 0:
  case 1:
    gen_elementwise(g);
    break;
  case 2:
    gen_join(g);
    break;
  case 3:
    gen_reduce(g);
    break;
  case 4:
    gen_index_select(g);
    break;
  case 5:
    gen_write(g);
    break;
  default: {
    dt_step c = step_new(rng_chance(&g->rng, 40)   ? K_CAST
                         : rng_chance(&g->rng, 50) ? K_CLONE
                                                   : K_CONTIGUOUS);
    c.src[0] = g->force;
    c.dst = pick_dst(g);
    c.dtype = gen_dtype(g);
    emit(g, c);
    break;
  }
  }
  g->force = -1;
  for (int k = 0; k < 2; k++) { /* the deferred result itself, and the consumer's */
    int r = k == 0 ? x.dst : g->last;
    if (slot(g, r) && rng_chance(&g->rng, 50)) {
      dt_step s = step_new(K_READ);
      s.src[0] = r;
      emit(g, s);
    }
  }
}

/* A backward from a slot that requires grad (one with history mostly), through its sum or with a
 * seeded gradient of its shape (NULL for one element, now and then), perhaps keeping the graph;
 * then the gradients of the leaves into slots, where the end's reads compare them. */
static void gen_backward(dt_gen *g) {
  int cand[DT_SLOTS], n = 0, inner[DT_SLOTS], ni = 0;
  for (int k = 0; k < DT_SLOTS; k++)
    if (slot_requires_grad(g, k)) {
      cand[n++] = k;
      if (g->leaf[k] != g->run.slot[k])
        inner[ni++] = k;
    }
  if (n == 0)
    return;
  int a = ni && rng_chance(&g->grng, 80) ? inner[rng_below(&g->grng, ni)]
                                          : cand[rng_below(&g->grng, n)];
  clt_tensor *t = g->run.slot[a];
  dt_step s = step_new(K_BACKWARD);
  s.src[0] = a;
  s.sub = (rng_chance(&g->grng, 50) ? 1 : 0) | (rng_chance(&g->grng, 50) ? 2 : 0);
  s.dtype = clt_tensor_dtype(t);
  s.ndim = clt_tensor_ndim(t);
  memcpy(s.shape, clt_tensor_shape(t), sizeof(int64_t) * (size_t)s.ndim);
  s.data = rng_next(&g->grng);
  s.mode = rng_chance(&g->grng, 70) ? D_UNIFORM : D_SMALLINT;
  if (!(s.sub & 1) && clt_tensor_numel(t) == 1 && rng_chance(&g->grng, 40))
    s.ndim = -1; /* grad NULL */
  emit(g, s);
  for (int k = 0; k < DT_SLOTS; k++) {
    if (!g->leaf[k] || g->leaf[k] != g->run.slot[k] || !rng_chance(&g->grng, 80))
      continue;
    dt_step r = step_new(K_GRAD);
    r.src[0] = k;
    r.dst = pick_dst(g);
    emit(g, r);
    if (r.dst == k || g->run.status[g->p->n - 1] != CLT_OK || !rng_chance(&g->grng, 40))
      continue;
    dt_step u = step_new(K_EW); /* an optimizer's step: the leaf minus its gradient, in place */
    for (u.op = 0; u.op < NOPS && strcmp(ops[u.op].name, "sub") != 0; u.op++)
      ;
    u.form = F_INPLACE;
    u.src[0] = u.dst = k;
    u.src[1] = r.dst;
    emit(g, u); /* in grad mode off mostly (emit) */
  }
}

static void generate(dt_program *p, uint64_t seed, bool small, bool classic) {
  memset(p, 0, sizeof *p);
  p->seed = seed;
  dt_gen g = {.rng = {seed * 0x2545f4914f6cdd1dull + 1},
              .p = p,
              .small = small,
              .classic = classic,
              .last = -1,
              .force = -1};
  g.big = !small && rng_chance(&g.rng, 10);
  for (int i = 0; i < 3; i++) {
    g.palette[i] = any_dtype(&g);
    g.dims[i] = i == 0 ? 1 : any_dim(&g);
  }
  g.max_numel = small ? 64 : g.big ? 1 << 16 : 2048;
  g.grng.s = seed ^ 0x6a09e667f3bcc908ull;
  g.grad = rng_chance(&g.grng, 45);
  run_begin(&g.run, clt_cpu(), false, false);
  int target = small ? 6 + rng_below(&g.rng, 12) : 10 + rng_below(&g.rng, 35);
  int first = 1 + rng_below(&g.rng, 3);
  for (int i = 0; i < first; i++)
    gen_create(&g);
  static const int w[] = {10, 30, 18, 6, 3, 5, 3, 6, 9, 10};
  while (p->n < target && gen_room(&g) > 0) {
    switch (rng_pick(&g.rng, w, 10)) {
    case 0:
      gen_create(&g);
      break;
    case 1:
      gen_elementwise(&g);
      break;
    case 2:
      gen_view(&g);
      break;
    case 3:
      gen_reduce(&g);
      break;
    case 4:
      gen_matmul(&g);
      break;
    case 5:
      gen_join(&g);
      break;
    case 6:
      gen_index_select(&g);
      break;
    case 7:
      gen_write(&g);
      break;
    case 8:
      gen_misc(&g);
      break;
    default:
      gen_compose(&g);
      break;
    }
    if (!g.run.slot[0] && !g.run.slot[1] && rng_chance(&g.rng, 50))
      gen_create(&g);
    if (g.grad && rng_chance(&g.grng, 10))
      gen_backward(&g);
  }
  if (g.grad)
    gen_backward(&g);
  for (int k = 0; k < DT_SLOTS; k++) /* the end: every live slot is compared */
    if (g.run.slot[k]) {
      dt_step s = step_new(K_READ);
      s.src[0] = k;
      p->step[p->n++] = s;
    }
  run_end(&g.run);
  run_free(&g.run);
}

/* ---- the repro: a C program over clt.h ------------------------------------------------------ */

static void fmt_double(double v, char *buf, size_t n) {
  if (isnan(v))
    snprintf(buf, n, "NAN");
  else if (isinf(v))
    snprintf(buf, n, v > 0 ? "INFINITY" : "-INFINITY");
  else if (v == 0 && signbit(v))
    snprintf(buf, n, "-0.0");
  else
    snprintf(buf, n, "%.17g", v);
}

static void fmt_shape(const int64_t *shape, int nd, char *buf, size_t n) {
  if (nd == 0) {
    snprintf(buf, n, "NULL");
    return;
  }
  size_t len = (size_t)snprintf(buf, n, "(int64_t[]){");
  for (int d = 0; d < nd && len < n; d++)
    len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, d ? ", " : "", shape[d]);
  if (len < n)
    snprintf(buf + len, n - len, "}");
}

/* The call of step s as C, its result (if any) in t; data arrays are named d<i>. */
static void call_text(const dt_step *s, int i, char *buf, size_t n) {
  char sh[256], v0[40], v1[40], v2[40];
  fmt_shape(s->shape, s->ndim, sh, sizeof sh);
  fmt_double(s->s0, v0, sizeof v0);
  fmt_double(s->s1, v1, sizeof v1);
  fmt_double(s->s2, v2, sizeof v2);
  int a = s->src[0], b = s->src[1], c = s->src[2], d = s->dst;
  const char *dt = dtype_enum(s->dtype);
  switch (s->kind) {
  case K_FROM_HOST:
    snprintf(buf, n, "clt_from_host(d%d, %s, %d, %s, dev, &t)", i, dt, s->ndim, sh);
    break;
  case K_FULL:
    if (s->sub == 2)
      snprintf(buf, n, "clt_full(%s, %d, %s, %s, dev, &t)", dt, s->ndim, sh, v0);
    else
      snprintf(buf, n, "clt_%s(%s, %d, %s, dev, &t)", s->sub ? "ones" : "zeros", dt, s->ndim, sh);
    break;
  case K_ARANGE:
    snprintf(buf, n, "clt_arange(%s, %s, %s, %s, dev, &t)", v0, v1, v2, dt);
    break;
  case K_EW: {
    const char *nm = ops[s->op].name;
    int ar = ops[s->op].arity;
    if (ar == 1)
      snprintf(buf, n, "clt_%s(s[%d], &t)", nm, a);
    else if (s->form == F_SCALAR && ar == 2)
      snprintf(buf, n, "clt_%s_scalar(s[%d], %s, &t)", nm, a, v0);
    else if (s->form == F_SCALAR)
      snprintf(buf, n, "clt_%s_scalar(s[%d], %s, %s, &t)", nm, a, v0, v1);
    else if (s->form == F_OUT)
      snprintf(buf, n, "clt_%s_out(s[%d], s[%d], s[%d])", nm, a, b, d);
    else if (s->form == F_INPLACE)
      snprintf(buf, n, "clt_%s_(s[%d], s[%d])", nm, a, b);
    else if (ar == 2)
      snprintf(buf, n, "clt_%s(s[%d], s[%d], &t)", nm, a, b);
    else
      snprintf(buf, n, "clt_%s(s[%d], s[%d], s[%d], &t)", nm, a, b, c);
    break;
  }
  case K_CAST:
    snprintf(buf, n, "clt_cast(s[%d], %s, &t)", a, dt);
    break;
  case K_CLONE:
    snprintf(buf, n, "clt_clone(s[%d], &t)", a);
    break;
  case K_CONTIGUOUS:
    snprintf(buf, n, "clt_contiguous(s[%d], &t)", a);
    break;
  case K_COPY:
    snprintf(buf, n, "clt_copy(s[%d], s[%d])", d, a);
    break;
  case K_FILL:
    snprintf(buf, n, "clt_fill_(s[%d], %s)", d, v0);
    break;
  case K_VIEW:
  case K_RESHAPE:
  case K_EXPAND:
    snprintf(buf, n, "clt_%s(s[%d], %d, %s, &t)",
             s->kind == K_VIEW      ? "view"
             : s->kind == K_RESHAPE ? "reshape"
                                    : "expand",
             a, s->ndim, sh);
    break;
  case K_NARROW:
    snprintf(buf, n, "clt_narrow(s[%d], %d, %" PRId64 ", %" PRId64 ", &t)", a, s->dim, s->start,
             s->stop);
    break;
  case K_SELECT:
    snprintf(buf, n, "clt_select(s[%d], %d, %" PRId64 ", &t)", a, s->dim, s->start);
    break;
  case K_SLICE:
    if (s->stop == CLT_SLICE_END)
      snprintf(buf, n, "clt_slice(s[%d], %d, %" PRId64 ", CLT_SLICE_END, %" PRId64 ", &t)", a,
               s->dim, s->start, s->step);
    else
      snprintf(buf, n, "clt_slice(s[%d], %d, %" PRId64 ", %" PRId64 ", %" PRId64 ", &t)", a, s->dim,
               s->start, s->stop, s->step);
    break;
  case K_TRANSPOSE:
    snprintf(buf, n, "clt_transpose(s[%d], %d, %d, &t)", a, s->dim, s->dim2);
    break;
  case K_PERMUTE: {
    char p[128] = "NULL";
    size_t len = 0;
    for (int k = 0; k < s->ndim; k++)
      len += (size_t)snprintf(p + len, sizeof p - len, "%s%d", k ? ", " : "(int[]){",
                              (int)s->shape[k]);
    if (s->ndim)
      snprintf(p + len, sizeof p - len, "}");
    snprintf(buf, n, "clt_permute(s[%d], %d, %s, &t)", a, s->ndim, p);
    break;
  }
  case K_UNSQUEEZE:
  case K_SQUEEZE:
    snprintf(buf, n, "clt_%s(s[%d], %d, &t)", s->kind == K_SQUEEZE ? "squeeze" : "unsqueeze", a,
             s->dim);
    break;
  case K_DIAGONAL:
    snprintf(buf, n, "clt_diagonal(s[%d], %" PRId64 ", %d, %d, &t)", a, s->start, s->dim,
             s->dim2);
    break;
  case K_TRIL:
    snprintf(buf, n, "clt_%s(s[%d], %" PRId64 ", &t)", s->sub ? "triu" : "tril", a, s->start);
    break;
  case K_REDUCE:
    if (s->whole)
      snprintf(buf, n, "clt_%s(s[%d], &t)", reduce_names[s->sub], a);
    else
      snprintf(buf, n, "clt_%s_dim(s[%d], %d, %d, &t)", reduce_names[s->sub], a, s->dim,
               s->keepdim);
    break;
  case K_MATMUL:
    snprintf(buf, n, "clt_matmul(s[%d], s[%d], &t)", a, b);
    break;
  case K_CAT:
  case K_STACK: {
    char l[64] = "";
    size_t len = 0;
    for (int k = 0; k < s->n; k++)
      len += (size_t)snprintf(l + len, sizeof l - len, "%ss[%d]", k ? ", " : "", s->src[k]);
    snprintf(buf, n, "clt_%s(%d, (clt_tensor *[]){%s}, %d, &t)", s->kind == K_CAT ? "cat" : "stack",
             s->n, l, s->dim);
    break;
  }
  case K_INDEX_SELECT:
    if (b >= 0)
      snprintf(buf, n, "clt_index_select(s[%d], %d, s[%d], &t)", a, s->dim, b);
    else
      snprintf(buf, n, "clt_index_select(s[%d], %d, ix, &t)", a, s->dim);
    break;
  case K_READ:
    snprintf(buf, n, "clt_tensor_read(s[%d], ...)", a);
    break;
  case K_PRINT:
    snprintf(buf, n, "clt_format(s[%d], ...)", a);
    break;
  case K_EVAL:
    snprintf(buf, n, "clt_eval(s[%d])", a);
    break;
  case K_SYNC:
    snprintf(buf, n, "clt_device_synchronize(dev)");
    break;
  case K_RELEASE:
    snprintf(buf, n, "clt_tensor_release(s[%d])", d);
    break;
  case K_REQUIRES_GRAD:
    snprintf(buf, n, "clt_requires_grad_(s[%d], 1)", a);
    break;
  case K_GRAD_MODE:
    snprintf(buf, n, "clt_set_grad_enabled(%d)", s->sub);
    break;
  case K_BACKWARD:
    snprintf(buf, n, "clt_backward%s(%s%d%s, %s)", s->sub & 2 ? "_retain" : "",
             s->sub & 1 ? "sum(s[" : "s[", a, s->sub & 1 ? "])" : "]",
             s->sub & 1 ? "NULL" : s->ndim >= 0 ? "g" : "NULL");
    break;
  case K_GRAD:
    snprintf(buf, n, "clt_tensor_grad(s[%d])", a);
    break;
  }
}

static bool writes_new(const dt_step *s) {
  switch (s->kind) {
  case K_COPY:
  case K_FILL:
  case K_READ:
  case K_PRINT:
  case K_EVAL:
  case K_SYNC:
  case K_RELEASE:
  case K_REQUIRES_GRAD:
  case K_GRAD_MODE:
  case K_BACKWARD:
    return false;
  case K_EW:
    return s->form != F_OUT && s->form != F_INPLACE;
  default:
    return true;
  }
}

static void print_array(FILE *f, const char *name, const void *buf, clt_dtype dt, int64_t n) {
  size_t es = clt_dtype_size(dt);
  const char *ct = es == 1 ? "uint8_t" : es == 2 ? "uint16_t" : es == 4 ? "uint32_t" : "uint64_t";
  int per_line = es == 8 ? 4 : es == 4 ? 7 : 10; /* within 100 columns */
  fprintf(f, "    static const %s %s[%" PRId64 "] = {", ct, name, n ? n : 1);
  for (int64_t i = 0; i < n; i++)
    fprintf(f, "%s0x%" PRIx64 "%s", i % per_line ? " " : "\n        ", get_bits(buf, dt, i),
            i + 1 < n ? "," : "");
  fprintf(f, "%s};\n", n ? "\n    " : "0");
}

/* Prints p as a C program that runs it in the two modes of f and compares what the failing
 * step gives (its status, or the values read there); steps skipped everywhere are left out. */
static void print_repro(FILE *f, const dt_ctx *c, const dt_program *p, const dt_run *ref,
                        const dt_failure *fail) {
  char na[64], nb[64];
  mode_name(c, fail->mode, na, sizeof na);
  mode_name(c, fail->base, nb, sizeof nb);
  bool host_lazy = fail->mode == 1 || fail->base == 1;
  fprintf(f,
          "/* difftest seed %" PRIu64 ": %s mismatch at step %d, %s against %s.\n"
          " * Build: cc repro.c -o repro $(pkg-config --cflags --libs clt) */\n",
          p->seed, fail_names[fail->kind], fail->step, na, nb);
  fprintf(
      f,
      "#define _POSIX_C_SOURCE 200809L\n#include <math.h>\n#include <stdint.h>\n"
      "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n#include \"clt.h\"\n\n"
      "static clt_tensor *s[%d];\nstatic void *probe;\nstatic size_t probe_len;\n\n"
      "static void put(int k, clt_tensor *t) {\n  if (t) {\n    clt_tensor_release(s[k]);\n"
      "    s[k] = t;\n  }\n}\n\n"
      "static void note(int step, clt_status st) {\n  if (st != CLT_OK)\n"
      "    printf(\"  step %%d: %%s: %%s\\n\", step, clt_status_name(st), clt_last_error());\n}\n\n"
      "/* The program on dev; returns the probed step's status. */\n"
      "static clt_status run(clt_device *dev) {\n  clt_status st = CLT_OK, probe_st = CLT_OK;\n"
      "  char text[4096];\n  (void)text;\n  clt_set_grad_enabled(1);\n",
      DT_SLOTS);
  int end = fail->step >= 0 ? fail->step : p->n - 1; /* a leak: the whole program */
  for (int i = 0; i <= end; i++) {
    const dt_step *s = &p->step[i];
    if (ref->status[i] == DT_SKIP && i != fail->step)
      continue;
    char call[512];
    call_text(s, i, call, sizeof call);
    fprintf(f, "  {\n");
    if (s->kind == K_FROM_HOST) {
      int64_t n = numel_of(s->ndim, s->shape);
      void *buf = xmalloc((size_t)n * clt_dtype_size(s->dtype));
      make_data(buf, s->dtype, n, s->data, s->mode);
      char name[16];
      snprintf(name, sizeof name, "d%d", i);
      print_array(f, name, buf, s->dtype, n);
      free(buf);
    }
    if (s->kind == K_INDEX_SELECT && s->src[1] < 0) {
      void *buf = xmalloc((size_t)s->shape[0] * clt_dtype_size(s->dtype));
      make_index(buf, s->dtype, s->shape[0], s->data, s->stop);
      print_array(f, "iv", buf, s->dtype, s->shape[0]);
      free(buf);
      fprintf(f,
              "    clt_tensor *ix = NULL;\n    st = clt_from_host(iv, %s, 1, (int64_t[]){%" PRId64
              "}, dev, &ix);\n",
              dtype_enum(s->dtype), s->shape[0]);
      if (s->sub == 1)
        fprintf(f, "    clt_tensor *deferred = NULL;\n"
                   "    if (st == CLT_OK)\n      st = clt_add_scalar(ix, 0, &deferred);\n"
                   "    clt_tensor_release(ix);\n    ix = deferred;\n");
    }
    if (s->kind == K_READ) {
      bool probed = i == fail->step;
      fprintf(f,
              "    size_t n = clt_tensor_nbytes(s[%d]);\n    void *buf = malloc(n ? n : 1);\n"
              "    st = clt_tensor_read(s[%d], buf, n);\n",
              s->src[0], s->src[0]);
      if (probed)
        fprintf(f, "    clt_print(s[%d]);\n    probe = buf;\n    probe_len = n;\n", s->src[0]);
      else
        fprintf(f, "    free(buf);\n");
    } else if (s->kind == K_PRINT) {
      fprintf(f, "    st = clt_format(s[%d], text, sizeof text, NULL);\n", s->src[0]);
      if (i == fail->step)
        fprintf(f, "    printf(\"  %%s\\n\", text);\n    probe = strdup(text);\n"
                   "    probe_len = strlen(text);\n");
    } else if (s->kind == K_RELEASE) {
      fprintf(f, "    clt_tensor_release(s[%d]);\n    s[%d] = NULL;\n", s->dst, s->dst);
    } else if (s->kind == K_GRAD_MODE) {
      fprintf(f, "    clt_set_grad_enabled(%d);\n    st = CLT_OK;\n", s->sub);
    } else if (s->kind == K_GRAD) {
      fprintf(f,
              "    clt_tensor *t = clt_tensor_grad(s[%d]); /* borrowed */\n    st = CLT_OK;\n"
              "    if (!t)\n      printf(\"  step %d: no grad\\n\");\n"
              "    put(%d, t ? clt_tensor_retain(t) : NULL);\n",
              s->src[0], i, s->dst);
    } else if (s->kind == K_BACKWARD) {
      char sh[256];
      fmt_shape(s->shape, s->ndim, sh, sizeof sh);
      bool seeded = !(s->sub & 1) && s->ndim >= 0;
      if (seeded) {
        int64_t n = numel_of(s->ndim, s->shape);
        void *buf = xmalloc((size_t)n * clt_dtype_size(s->dtype));
        make_data(buf, s->dtype, n, s->data, s->mode);
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        print_array(f, name, buf, s->dtype, n);
        free(buf);
      }
      fprintf(f, "    clt_tensor *root = NULL, *g = NULL;\n");
      if (s->sub & 1)
        fprintf(f, "    st = clt_sum(s[%d], &root);\n", s->src[0]);
      else if (seeded)
        fprintf(f, "    st = clt_from_host(d%d, %s, %d, %s, dev, &g);\n", i, dtype_enum(s->dtype),
                s->ndim, sh);
      else
        fprintf(f, "    st = CLT_OK;\n");
      fprintf(f,
              "    if (st == CLT_OK)\n      st = clt_backward%s(root ? root : s[%d], g);\n"
              "    clt_tensor_release(root);\n    clt_tensor_release(g);\n",
              s->sub & 2 ? "_retain" : "", s->src[0]);
    } else if (writes_new(s)) {
      bool index = s->kind == K_INDEX_SELECT && s->src[1] < 0;
      fprintf(f, "    clt_tensor *t = NULL;\n    %s%s;\n",
              index ? "if (st == CLT_OK)\n      st = " : "st = ", call);
      if (index)
        fprintf(f, "    clt_tensor_release(ix);\n");
      fprintf(f, "    put(%d, t);\n", s->dst);
    } else {
      fprintf(f, "    st = %s;\n", call);
    }
    fprintf(f, "    note(%d, st);\n", i);
    if (i == fail->step)
      fprintf(f, "    probe_st = st;\n");
    fprintf(f, "  }\n");
  }
  fprintf(f,
          "  for (int k = 0; k < %d; k++) {\n    clt_tensor_release(s[k]);\n    s[k] = NULL;\n"
          "  }\n  clt_memory_stats ms;\n  clt_device_synchronize(dev);\n"
          "  clt_device_memory_stats(dev, &ms);\n"
          "  printf(\"  %%llu bytes allocated after every tensor was released\\n\",\n"
          "         (unsigned long long)ms.allocated_bytes);\n  return probe_st;\n}\n\n",
          DT_SLOTS);
  fprintf(f, "int main(void) {\n");
  if (host_lazy)
    fprintf(f, "  setenv(\"CLT_LAZY_HOST_MIN\", \"1\", 1); /* the host defers every op */\n");
  fprintf(
      f,
      "  const char *dev_name[2] = {\"%s\", \"%s\"};\n  int lazy[2] = {%d, %d};\n"
      "  clt_status st[2];\n  void *got[2];\n  size_t len[2];\n  for (int i = 0; i < 2; i++) {\n"
      "    clt_device *dev;\n    if (clt_device_get(dev_name[i], &dev) != CLT_OK) {\n"
      "      fprintf(stderr, \"%%s\\n\", clt_last_error());\n      return 2;\n    }\n"
      "    clt_set_lazy(lazy[i]);\n    printf(\"%%s %%s:\\n\", dev_name[i], lazy[i] ? \"lazy\" : "
      "\"eager\");\n"
      "    st[i] = run(dev);\n    got[i] = probe;\n    len[i] = probe_len;\n    probe = NULL;\n"
      "    probe_len = 0;\n  }\n"
      "  int same = st[0] == st[1] && len[0] == len[1] && (!len[0] || memcmp(got[0], got[1], "
      "len[0]) == 0);\n"
      "  printf(\"%%s\\n\", same ? \"same\" : \"DIFFERENT\");\n  free(got[0]);\n  free(got[1]);\n"
      "  return same ? 0 : 1;\n}\n",
      clt_device_name(c->dev[fail->mode / 2]), clt_device_name(c->dev[fail->base / 2]),
      fail->mode % 2, fail->base % 2);
}

/* ---- minimizing ---------------------------------------------------------------------------- */

/* Whether p still fails as want did: the same kind, between the same two runs. */
static bool still_fails(dt_ctx *c, const dt_program *p, const dt_failure *want, dt_failure *got) {
  if (check_program(c, p, want->mode, got))
    return false;
  return got->kind == want->kind && got->mode == want->mode && got->base == want->base;
}

static void drop_steps(dt_program *p, int from, int count) {
  memmove(&p->step[from], &p->step[from + count], sizeof(dt_step) * (size_t)(p->n - from - count));
  p->n -= count;
}

/* Delta debugging: drops chunks of steps (halves, quarters, ... single steps) while the failure
 * stays, then tries simpler data. f is updated to the minimized program's failure. */
static void minimize(dt_ctx *c, dt_program *p, dt_failure *f) {
  if (f->step >= 0)
    p->n = f->step + 1; /* what follows the failing step cannot matter */
  dt_program *cand = xmalloc(sizeof *cand);
  dt_failure got;
  for (int pass = 0; pass < 3; pass++) {
    bool changed = false;
    for (int chunk = p->n / 2 > 0 ? p->n / 2 : 1; chunk >= 1; chunk /= 2) {
      for (int i = 0; i + chunk <= p->n;) {
        *cand = *p;
        drop_steps(cand, i, chunk);
        if (cand->n > 0 && still_fails(c, cand, f, &got)) {
          *p = *cand;
          *f = got;
          if (f->step >= 0)
            p->n = f->step + 1;
          changed = true;
        } else {
          i += chunk;
        }
      }
    }
    for (int i = 0; i < p->n; i++) { /* simpler values */
      if (p->step[i].kind != K_FROM_HOST || p->step[i].mode == D_SIMPLE)
        continue;
      *cand = *p;
      cand->step[i].mode = D_SIMPLE;
      if (still_fails(c, cand, f, &got)) {
        *p = *cand;
        *f = got;
        changed = true;
      }
    }
    if (!changed)
      break;
  }
  free(cand);
}

/* ---- checking seeds ------------------------------------------------------------------------ */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool dt_is_simulated(clt_device *d) {
  const char *s = d ? clt_device_description(d) : NULL;
  return s && strstr(s, "Oclgrind") != NULL;
}

void dt_options_default(dt_options *o) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < clt_device_count() && o->ndevs < DT_MAX_DEVICES; i++) {
    clt_device *d = clt_device_at(i);
    if (!d)
      continue;
    o->devs[o->ndevs++] = d;
    o->small = o->small || dt_is_simulated(d);
  }
  o->minimize = true;
}

static void ctx_init(dt_ctx *c, const dt_options *o) {
  memset(c, 0, sizeof *c);
  c->o = o;
  c->dev[c->ndev++] = clt_cpu();
  for (int i = 0; i < o->ndevs; i++)
    if (!clt_device_is_host(o->devs[i]))
      c->dev[c->ndev++] = o->devs[i];
}

static void describe_step(FILE *out, const dt_program *p, int i) {
  char call[512];
  call_text(&p->step[i], i, call, sizeof call);
  fprintf(out, "%s", call);
  if (writes_new(&p->step[i]) && p->step[i].dst >= 0)
    fprintf(out, " -> s[%d]", p->step[i].dst);
}

/* What a crash prints (dt_catch_crashes): the seed being run, formatted before it runs. */
static char crash_line[192];
static volatile sig_atomic_t crash_len;

static void on_crash(int sig) {
  if (crash_len > 0 && write(STDERR_FILENO, crash_line, (size_t)crash_len) < 0)
    crash_len = 0;
  signal(sig, SIG_DFL);
  raise(sig);
}

void dt_catch_crashes(void) {
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGABRT, on_crash);
  signal(SIGFPE, on_crash);
  signal(SIGILL, on_crash);
}

static int check_seed(dt_ctx *c, uint64_t seed, long *steps) {
  const dt_options *o = c->o;
  crash_len = 0;
  crash_len = snprintf(crash_line, sizeof crash_line,
                       "\ndifftest: seed %" PRIu64 " crashed (a signal); minimize it with "
                       "tests/difftest --seeds %" PRIu64 " --crash (or --print it)\n",
                       seed, seed);
  FILE *out = o->out ? o->out : stdout;
  dt_program *p = xmalloc(sizeof *p);
  generate(p, seed, o->small, false);
  if (steps)
    *steps = p->n;
  dt_failure f;
  if (o->verbose) {
    fprintf(out, "difftest: seed %" PRIu64 ": %d steps\n", seed, p->n);
    fflush(out);
  }
  if (check_program(c, p, -1, &f)) {
    free(p);
    return 0;
  }
  char where[128] = "after the program";
  if (f.step >= 0) {
    snprintf(where, sizeof where, "step %d of %d", f.step, p->n);
  }
  fprintf(out, "difftest: seed %" PRIu64 ": FAILED (%s mismatch) at %s: ", seed, fail_names[f.kind],
          where);
  if (f.step >= 0)
    describe_step(out, p, f.step);
  fprintf(out, "\n  %s\n", f.why);
  int n0 = p->n;
  if (o->minimize) {
    long skipped = c->skipped;
    minimize(c, p, &f);
    c->skipped = skipped;
    fprintf(out, "difftest: seed %" PRIu64 ": minimized from %d to %d steps: at step %d: ", seed,
            n0, p->n, f.step);
    if (f.step >= 0)
      describe_step(out, p, f.step);
    fprintf(out, "\n  %s\n", f.why);
  }
  dt_run *ref = xmalloc(sizeof *ref);
  run_program(ref, p, c->dev[0], false, false);
  fprintf(out, "---- repro (seed %" PRIu64 ", %s against ", seed,
          clt_device_name(c->dev[f.mode / 2]));
  fprintf(out, "%s) ----\n", clt_device_name(c->dev[f.base / 2]));
  print_repro(out, c, p, ref, &f);
  fprintf(out,
          "---- end of repro; rerun: tests/difftest --seeds %" PRIu64 ":%" PRIu64 "%s%s ----\n",
          seed, seed, f.mode / 2 ? " --device " : "",
          f.mode / 2 ? clt_device_name(c->dev[f.mode / 2]) : "");
  fflush(out);
  run_free(ref);
  free(ref);
  free(p);
  return 1;
}

int dt_check_seed(uint64_t seed, const dt_options *o, long *steps) {
  dt_ctx c;
  ctx_init(&c, o);
  return check_seed(&c, seed, steps);
}

/* Whether p, run on the host (lazily or not), kills the process: run in a child process, which
 * uses the host only (OpenCL does not survive a fork). */
static bool crashes_on_host(const dt_program *p, bool lazy) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return false;
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    signal(SIGABRT, SIG_DFL);
    if (!freopen("/dev/null", "w", stderr)) /* the C library's words on a corrupted heap */
      _exit(0);
    dt_run *r = xmalloc(sizeof *r);
    run_program(r, p, clt_cpu(), lazy, false);
    _exit(0);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    ;
  return WIFSIGNALED(st);
}

int dt_minimize_crash(uint64_t seed, const dt_options *o) {
  dt_ctx c;
  ctx_init(&c, o);
  FILE *out = o->out ? o->out : stdout;
  dt_program *p = xmalloc(sizeof *p), *cand = xmalloc(sizeof *cand);
  generate(p, seed, o->small, false);
  int lazy = crashes_on_host(p, true) ? 1 : crashes_on_host(p, false) ? 0 : -1;
  if (lazy < 0) {
    fprintf(out,
            "difftest: seed %" PRIu64 ": no crash on the host, lazily or eagerly (a device's"
            " crash: tests/difftest --seeds %" PRIu64 " --print)\n",
            seed, seed);
    free(p);
    free(cand);
    return 1;
  }
  int n0 = p->n;
  for (int pass = 0; pass < 3; pass++) { /* as minimize(), with the crash as the failure */
    bool changed = false;
    for (int chunk = p->n / 2 > 0 ? p->n / 2 : 1; chunk >= 1; chunk /= 2)
      for (int i = 0; i + chunk <= p->n;) {
        *cand = *p;
        drop_steps(cand, i, chunk);
        if (cand->n > 0 && crashes_on_host(cand, lazy)) {
          *p = *cand;
          changed = true;
        } else {
          i += chunk;
        }
      }
    for (int i = 0; i < p->n; i++) {
      if (p->step[i].kind != K_FROM_HOST || p->step[i].mode == D_SIMPLE)
        continue;
      *cand = *p;
      cand->step[i].mode = D_SIMPLE;
      if (crashes_on_host(cand, lazy)) {
        *p = *cand;
        changed = true;
      }
    }
    if (!changed)
      break;
  }
  fprintf(out, "difftest: seed %" PRIu64 ": crashes on cpu %s; minimized from %d to %d steps\n",
          seed, lazy ? "lazy" : "eager", n0, p->n);
  dt_run *ref = xmalloc(sizeof *ref);
  memset(ref, 0, sizeof *ref); /* not run (it may crash): every step is printed */
  dt_failure f = {FAIL_CRASH, p->n - 1, lazy, 0, ""};
  fprintf(out, "---- repro (seed %" PRIu64 ", a crash) ----\n", seed);
  print_repro(out, &c, p, ref, &f);
  fprintf(out, "---- end of repro ----\n");
  free(ref);
  free(p);
  free(cand);
  return 0;
}

int dt_print_seed(uint64_t seed, const dt_options *o) {
  dt_ctx c;
  ctx_init(&c, o);
  FILE *out = o->out ? o->out : stdout;
  dt_program *p = xmalloc(sizeof *p);
  generate(p, seed, o->small, false);
  dt_run *ref = xmalloc(sizeof *ref);
  run_program(ref, p, c.dev[0], false, false);
  int mode = c.ndev > 1 ? 3 : 1; /* the first device given, lazy, against its eager run */
  dt_failure f = {FAIL_VALUE, p->n - 1, mode, base_of(mode), ""};
  fprintf(out, "---- program of seed %" PRIu64 " (%d steps) ----\n", seed, p->n);
  print_repro(out, &c, p, ref, &f);
  fprintf(out, "---- end of program ----\n");
  run_free(ref);
  free(ref);
  free(p);
  return 0;
}

void dt_campaign(uint64_t first, uint64_t last, const dt_options *o, dt_summary *s) {
  memset(s, 0, sizeof *s);
  dt_ctx c;
  ctx_init(&c, o);
  double t0 = now();
  for (uint64_t seed = first; seed <= last; seed++) {
    long steps = 0;
    if (check_seed(&c, seed, &steps)) {
      if (s->failures++ == 0)
        s->first_failing_seed = seed;
    }
    s->programs++;
    s->steps += steps;
    if (seed == UINT64_MAX)
      break;
  }
  s->skipped = c.skipped;
  s->seconds = now() - t0;
}

/* ---- the tester's own checks --------------------------------------------------------------- */

static bool selftest_fail(char *why, size_t n, const char *what) {
  snprintf(why, n, "%s", what);
  return false;
}

bool dt_selftest(char *why, size_t n) {
  /* the oracle: one bit apart fails bit for bit; NaNs of other payloads and zeros of other signs
   * agree across devices; approximate values within their bound agree, outside it not */
  float want[4] = {1.0f, NAN, 0.0f, 3.0f}, got[4] = {1.0f, -NAN, -0.0f, 3.0f};
  dt_snap a = {.dtype = CLT_F32, .ndim = 1, .shape = {4}, .nbytes = sizeof want, .bytes = want};
  dt_snap b = a;
  b.bytes = got;
  char w[512];
  if (snaps_agree(&a, &b, true, w, sizeof w))
    return selftest_fail(why, n, "NaN and zero of other signs pass bit for bit");
  if (!snaps_agree(&a, &b, false, w, sizeof w))
    return selftest_fail(why, n, "NaN and zero of other signs fail across devices");
  got[3] = nextafterf(3.0f, 4.0f);
  if (snaps_agree(&a, &b, false, w, sizeof w))
    return selftest_fail(why, n, "an exact value one ulp off passes");
  a.tol = (dt_tol){false, 0, 4 * dt_eps(CLT_F32)};
  if (!snaps_agree(&a, &b, false, w, sizeof w))
    return selftest_fail(why, n, "an approximate value one ulp off fails");
  got[3] = 3.01f;
  if (snaps_agree(&a, &b, false, w, sizeof w))
    return selftest_fail(why, n, "an approximate value far off passes");

  /* the generator: a seed gives one program; every row of the op table, in every form it has,
   * and every other kind of step appear within a few hundred seeds */
  dt_program *p = xmalloc(sizeof *p), *q = xmalloc(sizeof *q);
  static int seen[NOPS][4];
  bool kinds[K_COUNT] = {false};
  memset(seen, 0, sizeof seen);
  bool ok = true;
  for (uint64_t seed = 1; seed <= 300 && ok; seed++) {
    generate(p, seed, false, false);
    generate(q, seed, false, false);
    if (p->n != q->n || memcmp(p->step, q->step, sizeof(dt_step) * (size_t)p->n) != 0) {
      snprintf(why, n, "seed %" PRIu64 " gave two programs", seed);
      ok = false;
    }
    for (int i = 0; i < p->n; i++) {
      kinds[p->step[i].kind] = true;
      if (p->step[i].kind == K_EW)
        seen[p->step[i].op][p->step[i].form]++;
    }
  }
  for (int k = 0; ok && k < K_COUNT; k++)
    if (!kinds[k]) {
      snprintf(why, n, "no step of kind %d in 300 programs", k);
      ok = false;
    }
  for (int o = 0; ok && o < NOPS; o++) {
    const dt_op *op = &ops[o];
    bool has[4] = {true, op->arity == 2 || op->f3_scalar != NULL, op->arity == 2,
                   op->f2_inplace != NULL};
    for (int f = 0; ok && f < 4; f++)
      if (has[f] && !seen[o][f]) {
        snprintf(why, n, "clt_%s in form %d never generated in 300 programs", op->name, f);
        ok = false;
      }
  }
  free(p);
  free(q);
  return ok;
}

/* ---- the NumPy lane's export --------------------------------------------------------------- */

static const char *const kind_names[] = {
    "from_host", "full",      "arange",  "ew",        "cast",      "clone",   "contiguous",
    "copy",      "fill",      "view",    "reshape",   "narrow",    "select",  "slice",
    "transpose", "permute",   "expand",  "unsqueeze", "squeeze",   "reduce",  "matmul",
    "cat",       "stack",     "index_select", "read", "print",     "eval",    "sync",
    "release",   "requires_grad", "grad_mode", "backward", "grad", "diagonal", "tril"};
static const char *const form_names[] = {"plain", "scalar", "out", "inplace"};

/* A double as JSON (Python's json reads NaN, Infinity and -Infinity; -0.0 keeps its sign). */
static void json_double(FILE *f, double v) {
  if (isnan(v))
    fprintf(f, "NaN");
  else if (isinf(v))
    fprintf(f, v > 0 ? "Infinity" : "-Infinity");
  else {
    char b[40];
    snprintf(b, sizeof b, "%.17g", v);
    fprintf(f, "%s%s", b, strpbrk(b, ".e") ? "" : ".0");
  }
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 32)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

/* Writes the buffer of n elements of dtype dt (shape nd, shape) to the blob and its description
 * to f as a JSON object. */
static void json_data(FILE *f, FILE *blob, const void *buf, clt_dtype dt, int nd,
                      const int64_t *shape) {
  size_t nbytes = (size_t)numel_of(nd, shape) * clt_dtype_size(dt);
  long off = ftell(blob);
  if (nbytes)
    fwrite(buf, 1, nbytes, blob);
  fprintf(f, "{\"dtype\": \"%s\", \"shape\": [", clt_dtype_name(dt));
  for (int d = 0; d < nd; d++)
    fprintf(f, "%s%" PRId64, d ? ", " : "", shape[d]);
  fprintf(f, "], \"offset\": %ld, \"nbytes\": %zu}", off, nbytes);
}

static void json_tensor(FILE *f, FILE *blob, const clt_tensor *t) {
  size_t nb = clt_tensor_nbytes(t);
  void *buf = xmalloc(nb);
  if (clt_tensor_read(t, buf, nb) != CLT_OK)
    memset(buf, 0, nb);
  json_data(f, blob, buf, clt_tensor_dtype(t), clt_tensor_ndim(t), clt_tensor_shape(t));
  free(buf);
}

/* The slot whose tensor step s made or wrote, -1 if none. */
static int step_target(const dt_step *s) {
  if (s->kind == K_EW && s->form == F_INPLACE)
    return s->src[0];
  if (s->kind == K_READ)
    return s->src[0];
  if (writes_new(s) || s->kind == K_COPY || (s->kind == K_EW && s->form == F_OUT) ||
      s->kind == K_FILL)
    return s->dst;
  return -1;
}

int dt_export_numpy(uint64_t seed, const dt_options *o, const char *dir) {
  char path[4096], bpath[4096];
  snprintf(path, sizeof path, "%s/seed-%" PRIu64 ".json", dir, seed);
  snprintf(bpath, sizeof bpath, "%s/seed-%" PRIu64 ".bin", dir, seed);
  FILE *f = fopen(path, "w"), *blob = fopen(bpath, "wb");
  if (!f || !blob) {
    fprintf(stderr, "difftest: cannot write %s or %s\n", path, bpath);
    if (f)
      fclose(f);
    if (blob)
      fclose(blob);
    return 1;
  }
  dt_program *p = xmalloc(sizeof *p);
  generate(p, seed, o->small, true);
  dt_run *r = xmalloc(sizeof *r);
  run_begin(r, clt_cpu(), false, false);
  fprintf(f, "{\"seed\": %" PRIu64 ", \"steps\": [\n", seed);
  for (int i = 0; i < p->n; i++) {
    const dt_step *s = &p->step[i];
    run_step(r, p, i);
    int st = r->status[i];
    fprintf(f, "%s{\"i\": %d, \"kind\": \"%s\", \"status\": ", i ? ",\n" : "", i,
            kind_names[s->kind]);
    if (st == DT_SKIP)
      fprintf(f, "\"SKIP\"");
    else if (st == DT_NO_GRAD)
      fprintf(f, "\"NO_GRAD\"");
    else
      fprintf(f, "\"%s\"", clt_status_name(st));
    if (r->error[i]) {
      fprintf(f, ", \"error\": ");
      json_string(f, r->error[i]);
    }
    if (s->kind == K_EW)
      fprintf(f, ", \"op\": \"%s\", \"form\": \"%s\"", ops[s->op].name, form_names[s->form]);
    if (s->kind == K_REDUCE)
      fprintf(f, ", \"op\": \"%s\", \"whole\": %d", reduce_names[s->sub], s->whole);
    fprintf(f, ", \"sub\": %d, \"dst\": %d, \"src\": [%d, %d, %d, %d], \"n\": %d, \"dtype\": \"%s\"",
            s->sub, s->dst, s->src[0], s->src[1], s->src[2], s->src[3], s->n,
            clt_dtype_name(s->dtype));
    fprintf(f, ", \"shape\": [");
    for (int d = 0; d < s->ndim; d++)
      fprintf(f, "%s%" PRId64, d ? ", " : "", s->shape[d]);
    fprintf(f, "], \"dim\": %d, \"dim2\": %d, \"keepdim\": %d, \"start\": %" PRId64
               ", \"stop\": %" PRId64 ", \"step\": %" PRId64 ", \"s\": [",
            s->dim, s->dim2, s->keepdim, s->start, s->stop == CLT_SLICE_END ? -1 : s->stop,
            s->step);
    json_double(f, s->s0);
    fprintf(f, ", ");
    json_double(f, s->s1);
    fprintf(f, ", ");
    json_double(f, s->s2);
    fprintf(f, "], \"slice_end\": %d", s->stop == CLT_SLICE_END);
    if (s->kind == K_FROM_HOST && st != DT_SKIP) {
      int64_t n = numel_of(s->ndim, s->shape);
      void *buf = xmalloc((size_t)n * clt_dtype_size(s->dtype));
      make_data(buf, s->dtype, n, s->data, s->mode);
      fprintf(f, ", \"input\": ");
      json_data(f, blob, buf, s->dtype, s->ndim, s->shape);
      free(buf);
    }
    if (s->kind == K_INDEX_SELECT && s->src[1] < 0 && st != DT_SKIP) {
      void *buf = xmalloc((size_t)s->shape[0] * clt_dtype_size(s->dtype));
      make_index(buf, s->dtype, s->shape[0], s->data, s->stop);
      fprintf(f, ", \"index\": ");
      json_data(f, blob, buf, s->dtype, 1, s->shape);
      free(buf);
    }
    int k = step_target(s);
    if (st == CLT_OK && k >= 0 && S(r, k)) {
      fprintf(f, ", \"result\": ");
      json_tensor(f, blob, S(r, k));
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n]}\n");
  run_end(r);
  run_free(r);
  free(r);
  free(p);
  int bad = ferror(f) || ferror(blob);
  bad |= fclose(f) != 0;
  bad |= fclose(blob) != 0;
  return bad;
}
