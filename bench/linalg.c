/* SPDX-License-Identifier: MIT */
/* linalg.c - the factorizations and solvers (issue 27, "Speed"): clt_linalg_solve, cholesky,
 * eigh and svd against LAPACKE called directly on host arrays (the limit: what clt adds is its
 * checks and the private copies LAPACK overwrites) and, through bench/peers.py numpy, against
 * numpy.linalg.
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/linalg [--reps N] [--kv]
 *
 * Rows: solve 2048 f64 (one right-hand side) on cpu, solve 2048 f32 on cpu and cl:0 (the copies
 * to the host and back are clt's internal trips there), cholesky 2048 f32 on cpu and cl:0, eigh
 * 1024 f64 and svd 1024 x 512 f64 (values and vectors, reduced) on cpu, cholesky 4096 f32 on
 * cl:0 by the whole-matrix path (CLT_LINALG=host) and by the hybrid one (CLT_LINALG=hybrid:
 * panels on the host, updates on the device; its factor checked against the other's).
 * Matrices: diagonally dominant (solve), M M^T / n + I (cholesky, eigh), symmetric and
 * diagonally dominant (cholesky 4096), uniform (svd), made on the host with a fixed generator.
 * Medians of N runs (default 5) after one warm-up; each run ends when the result is on the host.
 * The residual of each solve is checked (|A x - b| / (|A| |x|) < 1e-3).
 * --kv adds "kv linalg_<row>_ms value" lines for bench/run.
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <clt.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef HAVE_LAPACKE
#include <lapacke.h>
#endif

#define BENCH_NAME "linalg"
#include "bench.h"

enum { MAX_RUNS = 101 };
static int runs = 5;
static bool kv = false;

static clt_tensor *T(clt_status s, clt_tensor *t) {
  if (s != CLT_OK)
    die("%s", clt_last_error());
  return t;
}

static uint64_t st = 88172645463325252ull;
static double uni(void) {
  st ^= st << 13, st ^= st >> 7, st ^= st << 17;
  return (double)(st >> 11) / 9007199254740992.0 - 0.5;
}

/* n x m doubles: kind 0 uniform, 1 diagonally dominant, 2 M M^T / n + I (square), 3 symmetric
 * and diagonally dominant (positive-definite: n on the diagonal, the rest in [-0.5, 0.5)) */
static double *gen(int64_t n, int64_t m, int kind) {
  double *a = malloc(sizeof(double) * (size_t)(n * m));
  if (!a)
    die("out of memory");
  if (kind == 2) {
    double *g = malloc(sizeof(double) * (size_t)(n * n));
    if (!g)
      die("out of memory");
    for (int64_t i = 0; i < n * n; i++)
      g[i] = uni();
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++) {
        double s = 0;
        for (int64_t k = 0; k < n; k++)
          s += g[i * n + k] * g[j * n + k];
        a[i * n + j] = a[j * n + i] = s / (double)n + (i == j);
      }
    free(g);
    return a;
  }
  if (kind == 3) {
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++)
        a[i * n + j] = a[j * n + i] = i == j ? (double)n : uni();
    return a;
  }
  for (int64_t i = 0; i < n * m; i++)
    a[i] = uni() + (kind == 1 && i % (m + 1) == 0 ? (double)n / 4 : 0);
  return a;
}

static clt_tensor *tensor(const double *v, clt_dtype dt, int nd, const int64_t *shape,
                          clt_device *d) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= shape[i];
  clt_tensor *t = NULL;
  if (dt == CLT_F64) {
    T(clt_from_host(v, dt, nd, shape, d, &t), t);
    return t;
  }
  float *f = malloc(sizeof(float) * (size_t)n);
  if (!f)
    die("out of memory");
  for (int64_t i = 0; i < n; i++)
    f[i] = (float)v[i];
  T(clt_from_host(f, dt, nd, shape, d, &t), t);
  free(f);
  return t;
}

static void report(const char *what, const char *key, double *t) {
  double med = median(t, runs);
  printf("%-44s %10.2f ms\n", what, 1e3 * med);
  if (kv)
    printf("kv linalg_%s_ms %.4f\n", key, 1e3 * med);
  fflush(stdout);
}

/* Times op(ctx) (which returns when the result is on the host). */
static void time_it(const char *what, const char *key, void (*op)(void *), void *ctx) {
  double t[MAX_RUNS];
  for (int r = -1; r < runs; r++) {
    double t0 = now_s();
    op(ctx);
    if (r >= 0)
      t[r] = now_s() - t0;
  }
  report(what, key, t);
}

typedef struct solve_ctx {
  clt_tensor *a, *b, *x;
  int64_t n;
  int which; /* 0 solve, 1 cholesky, 2 eigh, 3 svd */
} solve_ctx;

static void run_clt(void *p) {
  solve_ctx *c = p;
  clt_tensor *x = NULL, *y = NULL, *z = NULL;
  switch (c->which) {
  case 0:
    CLT_CHECK(clt_linalg_solve(c->a, c->b, &x));
    break;
  case 1:
    CLT_CHECK(clt_linalg_cholesky(c->a, 0, &x));
    break;
  case 2:
    CLT_CHECK(clt_linalg_eigh(c->a, &x, &y));
    break;
  default:
    CLT_CHECK(clt_linalg_svd(c->a, 0, &x, &y, &z));
  }
  CLT_CHECK(clt_device_synchronize(clt_tensor_device(x))); /* (the call already waited) */
  clt_tensor_release(c->x);
  c->x = x; /* the last one is checked after the timing */
  clt_tensor_release(y);
  clt_tensor_release(z);
}

/* |A x - b| / (|A| |x|), in double, on the host. */
static double residual(solve_ctx *c) {
  clt_tensor *xa = NULL, *ah = NULL, *bh = NULL, *a64 = NULL, *b64 = NULL, *x64 = NULL;
  T(clt_to(c->x, clt_cpu(), &xa), xa);
  T(clt_to(c->a, clt_cpu(), &ah), ah);
  T(clt_to(c->b, clt_cpu(), &bh), bh);
  T(clt_cast(ah, CLT_F64, &a64), a64);
  T(clt_cast(bh, CLT_F64, &b64), b64);
  T(clt_cast(xa, CLT_F64, &x64), x64);
  const double *A = clt_tensor_data(a64), *B = clt_tensor_data(b64), *X = clt_tensor_data(x64);
  if (!A || !B || !X)
    die("clt_tensor_data: %s", clt_last_error());
  double num = 0, na = 0, nx = 0;
  for (int64_t i = 0; i < c->n; i++) {
    double s = -B[i];
    for (int64_t j = 0; j < c->n; j++) {
      s += A[i * c->n + j] * X[j];
      na += A[i * c->n + j] * A[i * c->n + j];
    }
    num += s * s;
    nx += X[i] * X[i];
  }
  clt_tensor *ts[] = {xa, ah, bh, a64, b64, x64};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
    clt_tensor_release(ts[i]);
  return sqrt(num) / (sqrt(na) * sqrt(nx));
}

#ifdef HAVE_LAPACKE
typedef struct raw_ctx {
  const double *a;
  double *w, *w2, *w3, *w4;
  int64_t n, m;
  int which;
  bool f32;
} raw_ctx;

/* LAPACKE on host arrays, as fast as it goes there (no transposed copies where the layout allows:
 * solve and cholesky as clt calls them); the copy of the input LAPACK overwrites is made
 * outside the timing */
static void run_raw(void *p) {
  raw_ctx *c = p;
  lapack_int n = (lapack_int)c->n, m = (lapack_int)c->m;
  int info = 0;
  switch (c->which) {
  case 0: { /* the row-major A as its transpose in column-major order: getrf, getrs 'T' */
    lapack_int *piv = malloc(sizeof(lapack_int) * (size_t)n);
    if (!piv)
      die("out of memory");
    if (c->f32) {
      info = LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, n, n, (float *)c->w, n, piv);
      if (info == 0)
        info = LAPACKE_sgetrs_work(LAPACK_COL_MAJOR, 'T', n, 1, (float *)c->w, n, piv,
                                   (float *)c->w2, n);
    } else {
      info = LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, n, n, c->w, n, piv);
      if (info == 0)
        info = LAPACKE_dgetrs_work(LAPACK_COL_MAJOR, 'T', n, 1, c->w, n, piv, c->w2, n);
    }
    free(piv);
    break;
  }
  case 1: /* symmetric: the buffer is A in column-major order too */
    info = c->f32 ? LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'U', n, (float *)c->w, n)
                  : LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', n, c->w, n);
    break;
  case 2:
    info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'L', n, c->w, n, c->w2);
    break;
  default:
    info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', n, m, c->w, m, c->w2, c->w3, m, c->w4, m);
  }
  if (info != 0)
    die("LAPACKE: info %d", info);
}

static void time_raw(const char *what, const char *key, raw_ctx *c, const double *b) {
  double t[MAX_RUNS];
  size_t na = (size_t)(c->n * c->m);
  for (int r = -1; r < runs; r++) {
    for (size_t i = 0; i < na; i++) /* a fresh copy, not timed */
      if (c->f32)
        ((float *)c->w)[i] = (float)c->a[i];
      else
        c->w[i] = c->a[i];
    for (int64_t i = 0; c->which == 0 && i < c->n; i++) {
      if (c->f32)
        ((float *)c->w2)[i] = (float)b[i];
      else
        c->w2[i] = b[i];
    }
    double t0 = now_s();
    run_raw(c);
    if (r >= 0)
      t[r] = now_s() - t0;
  }
  report(what, key, t);
}
#endif

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0 &&
        atoi(argv[i + 1]) <= MAX_RUNS)
      runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--kv") == 0)
      kv = true;
    else
      die("usage: %s [--reps 1..%d] [--kv]", argv[0], MAX_RUNS);
  }
  clt_device *cl0 = clt_device_count() > 0 ? clt_device_at(0) : NULL;
  printf("clt %s bench/linalg: median of %d after 1 warm-up%s%s\n", clt_version(), runs,
         cl0 ? "; cl:0 is " : "", cl0 ? clt_device_description(cl0) : "");
  const int64_t N = 2048, E = 1024, SM = 1024, SN = 512, H = 4096;
  double *ad = gen(N, N, 1), *bd = gen(N, 1, 0), *spd = gen(N, N, 2), *se = gen(E, E, 2);
  double *sh = gen(H, H, 3);
  double *sv = gen(SM, SN, 0);
  struct {
    const char *what, *key;
    const double *a;
    int64_t n, m;
    clt_dtype dt;
    int which;
    bool dev, hybrid;
  } rows[] = {
      {"clt_linalg_solve 2048 f64, cpu", "solve2048_f64_cpu", ad, N, N, CLT_F64, 0, false, false},
      {"clt_linalg_solve 2048 f32, cpu", "solve2048_f32_cpu", ad, N, N, CLT_F32, 0, false, false},
      {"clt_linalg_solve 2048 f32, cl:0", "solve2048_f32_cl", ad, N, N, CLT_F32, 0, true, false},
      {"clt_linalg_cholesky 2048 f32, cpu", "cholesky2048_f32_cpu", spd, N, N, CLT_F32, 1, false,
       false},
      {"clt_linalg_cholesky 2048 f32, cl:0", "cholesky2048_f32_cl", spd, N, N, CLT_F32, 1, true,
       false},
      {"clt_linalg_eigh 1024 f64, cpu", "eigh1024_f64_cpu", se, E, E, CLT_F64, 2, false, false},
      {"clt_linalg_svd 1024x512 f64, cpu", "svd1024x512_f64_cpu", sv, SM, SN, CLT_F64, 3, false,
       false},
      {"clt_linalg_cholesky 4096 f32, cl:0", "cholesky4096_f32_cl", sh, H, H, CLT_F32, 1, true,
       false},
      {"clt_linalg_cholesky 4096 f32, cl:0, hybrid", "cholesky4096_f32_cl_hybrid", sh, H, H,
       CLT_F32, 1, true, true},
  };
  clt_tensor *whole = NULL; /* the 4096 factor of the whole-matrix path, for the hybrid's */
  char *path = getenv("CLT_LINALG") ? strdup(getenv("CLT_LINALG")) : NULL;
  for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
    clt_device *d = rows[r].dev ? cl0 : clt_cpu();
    if (!d)
      continue;
    solve_ctx c = {.n = rows[r].n, .which = rows[r].which};
    c.a = tensor(rows[r].a, rows[r].dt, 2, (int64_t[]){rows[r].n, rows[r].m}, d);
    c.b = tensor(bd, rows[r].dt, 1, (int64_t[]){rows[r].n}, d);
    if (c.n == H) /* the whole matrix through the host, then the hybrid path, forced */
      setenv("CLT_LINALG", rows[r].hybrid ? "hybrid" : "host", 1);
    time_it(rows[r].what, rows[r].key, run_clt, &c);
    if (path)
      setenv("CLT_LINALG", path, 1);
    else
      unsetenv("CLT_LINALG");
    if (c.n == H && !rows[r].hybrid)
      whole = clt_tensor_retain(c.x);
    if (c.n == H && rows[r].hybrid && whole) {
      clt_tensor *df = NULL, *ad_ = NULL, *mx = NULL, *wa = NULL, *wm = NULL;
      double e = 0, w = 0;
      T(clt_sub(c.x, whole, &df), df);
      T(clt_abs(df, &ad_), ad_);
      T(clt_max(ad_, &mx), mx);
      T(clt_abs(whole, &wa), wa);
      T(clt_max(wa, &wm), wm);
      CLT_CHECK(clt_item(mx, &e));
      CLT_CHECK(clt_item(wm, &w));
      printf("  largest difference from the whole-matrix factor: %.3g of its largest element\n",
             e / w);
      if (!(e / w < 1e-4))
        die("%s: the factor differs from the whole-matrix path's by %g", rows[r].what, e / w);
      clt_tensor *ts[] = {df, ad_, mx, wa, wm};
      for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_release(ts[i]);
    }
    if (c.which == 0) {
      double e = residual(&c);
      if (!(e < 1e-3))
        die("%s: residual %g", rows[r].what, e);
      printf("  residual |A x - b| / (|A| |x|) = %.3g\n", e);
    }
    clt_tensor_release(c.x);
    clt_tensor_release(c.a);
    clt_tensor_release(c.b);
#ifdef HAVE_LAPACKE
    if (!rows[r].dev) {
      int64_t n = rows[r].n, m = rows[r].m;
      raw_ctx x = {
          .a = rows[r].a, .n = n, .m = m, .which = rows[r].which, .f32 = rows[r].dt == CLT_F32};
      x.w = malloc(sizeof(double) * (size_t)(n * m));
      x.w2 = malloc(sizeof(double) * (size_t)(n > m ? n : m));
      x.w3 = malloc(sizeof(double) * (size_t)(n * m));
      x.w4 = malloc(sizeof(double) * (size_t)(m * m));
      if (!x.w || !x.w2 || !x.w3 || !x.w4)
        die("out of memory");
      char what[96], key[96];
      snprintf(what, sizeof what, "  LAPACKE directly (%s)", rows[r].key);
      snprintf(key, sizeof key, "%s_lapacke", rows[r].key);
      time_raw(what, key, &x, bd);
      free(x.w), free(x.w2), free(x.w3), free(x.w4);
    }
#endif
  }
  clt_tensor_release(whole);
  free(path);
  free(ad), free(bd), free(spd), free(se), free(sv), free(sh);
  return 0;
}
