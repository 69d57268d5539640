/* SPDX-License-Identifier: MIT */
/* check_threads.c - host threads using clt at once (docs/threads.md): the same device and
 * different devices, shared read-only tensors and private ones, references retained and released
 * from several threads, transfers and operations mixed, kernels built on first use by threads
 * racing for them, the caching allocator under churn, per-thread generators and the shared
 * default one, counters, and error messages that stay with their thread.
 *
 * Every result is checked against values computed here on the host. Worker threads never call
 * Check's assertions (they are not thread-safe): they record their first failure, break the
 * barrier so that nobody waits for them, and the test's own thread asserts after joining.
 * Each test prints "threads: <test>: T threads x O operations" (O counts the clt calls the
 * workers made and checked); .ci/lanes/40-tsan adds them up. CLT_THREADS_TEST_SCALE (default
 * 1) multiplies the iterations, for longer soaks. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"
#include "clt-internal.h" /* clt__philox4x32_10: the raw generator, for expected random bits */

enum { NT = 8 }; /* worker threads per test */

/* ---- the harness ----------------------------------------------------------------------------- */

/* A barrier that a failing thread can break, so that the others return instead of waiting. */
typedef struct barrier {
  pthread_mutex_t m;
  pthread_cond_t c;
  int n, count;
  unsigned gen;
  bool broken;
} barrier;

static void barrier_init(barrier *b, int n) {
  pthread_mutex_init(&b->m, NULL);
  pthread_cond_init(&b->c, NULL);
  b->n = n;
  b->count = 0;
  b->gen = 0;
  b->broken = false;
}

static void barrier_destroy(barrier *b) {
  pthread_mutex_destroy(&b->m);
  pthread_cond_destroy(&b->c);
}

/* Waits for all n threads; false if the barrier is broken (some thread failed). */
static bool barrier_wait(barrier *b) {
  pthread_mutex_lock(&b->m);
  unsigned gen = b->gen;
  if (!b->broken && ++b->count == b->n) {
    b->count = 0;
    b->gen++;
    pthread_cond_broadcast(&b->c);
  } else {
    while (gen == b->gen && !b->broken)
      pthread_cond_wait(&b->c, &b->m);
  }
  bool ok = !b->broken;
  pthread_mutex_unlock(&b->m);
  return ok;
}

static void barrier_break(barrier *b) {
  pthread_mutex_lock(&b->m);
  b->broken = true;
  pthread_cond_broadcast(&b->c);
  pthread_mutex_unlock(&b->m);
}

typedef struct worker {
  int id;
  void *ctx;  /* the test's shared state */
  barrier *b; /* all workers of the test */
  long ops;   /* clt calls made and checked */
  char fail[1024];
} worker;

static void wfail(worker *w, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void wfail(worker *w, int line, const char *fmt, ...) {
  if (w->fail[0])
    return;
  int n = snprintf(w->fail, sizeof w->fail, "thread %d, line %d: ", w->id, line);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->fail + n, sizeof w->fail - (size_t)n, fmt, ap);
  va_end(ap);
  barrier_break(w->b);
}

/* In a worker: the call must succeed (it counts as one operation), else the thread stops. */
#define TH_OK(w, call)                                                                             \
  do {                                                                                             \
    clt_status w_st_ = (call);                                                                     \
    if (w_st_ != CLT_OK) {                                                                         \
      wfail(w, __LINE__, "%s failed: %s: %s", #call, clt_status_name(w_st_), clt_last_error());    \
      return NULL;                                                                                 \
    }                                                                                              \
    (w)->ops++;                                                                                    \
  } while (0)

/* In a worker: cond must hold, else the thread records the message and stops. */
#define TH_CHECK(w, cond, ...)                                                                     \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      wfail(w, __LINE__, __VA_ARGS__);                                                             \
      return NULL;                                                                                 \
    }                                                                                              \
  } while (0)

#define TH_SYNC(w)                                                                                 \
  do {                                                                                             \
    if (!barrier_wait((w)->b))                                                                     \
      return NULL;                                                                                 \
  } while (0)

/* The iterations of a test, times $CLT_THREADS_TEST_SCALE. */
static int iters(int base) {
  const char *s = getenv("CLT_THREADS_TEST_SCALE");
  int k = s && *s ? atoi(s) : 1;
  return base * (k > 0 ? k : 1);
}

/* Runs body on NT threads sharing ctx, joins them, asserts none failed and prints the count. */
static void run_workers(const char *test, void *(*body)(void *), void *ctx) {
  static worker w[NT];
  pthread_t th[NT];
  barrier b;
  barrier_init(&b, NT);
  for (int i = 0; i < NT; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    w[i].ctx = ctx;
    w[i].b = &b;
  }
  int started = 0;
  for (; started < NT; started++)
    if (pthread_create(&th[started], NULL, body, &w[started]) != 0) {
      barrier_break(&b);
      break;
    }
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  barrier_destroy(&b);
  ck_assert_msg(started == NT, "%s: could only start %d threads", test, started);
  long ops = 0;
  for (int i = 0; i < NT; i++) {
    ck_assert_msg(w[i].fail[0] == '\0', "%s: %s", test, w[i].fail);
    ops += w[i].ops;
  }
  printf("threads: %s: %d threads x %ld operations\n", test, NT, ops);
  fflush(stdout);
}

/* Elements of a float buffer that differ from want (exactly), as a message; NULL if none. */
static bool same_f32(const float *got, const float *want, int64_t n, int64_t *at) {
  for (int64_t i = 0; i < n; i++)
    if (!(got[i] == want[i])) {
      *at = i;
      return false;
    }
  return true;
}

/* Reads t into a new buffer (NULL with the error set on failure). */
static void *read_all(const clt_tensor *t) {
  void *p = malloc(clt_tensor_nbytes(t) ? clt_tensor_nbytes(t) : 1);
  if (p && clt_tensor_read(t, p, clt_tensor_nbytes(t)) != CLT_OK) {
    free(p);
    return NULL;
  }
  return p;
}

/* Uniform f32 element i of the stream of seed that starts at counter `offset` (kernels/random.cl:
 * counter c gives elements 4c .. 4c+3, word j as (w >> 8) 2^-24). */
static float philox_f32(uint64_t seed, uint64_t offset, int64_t i) {
  uint64_t c = offset + (uint64_t)i / 4;
  uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t out[4];
  clt__philox4x32_10(ctr, key, out);
  return ldexpf((float)(out[i % 4] >> 8), -24);
}

/* ---- the devices the threads share ----------------------------------------------------------- */

/* Oclgrind (21.10) is not thread-safe: it runs a queue's commands in whichever host thread waits
 * for them, without a lock, so two threads using one Oclgrind context abort it (Context::
 * notifyKernelBegin: `m_kernelInvocation == NULL'), crash it (free(): invalid pointer) or hand one
 * thread the other's data. tests/oclgrind/threads.c shows it without clt: two threads, each with
 * its own buffer and queue, fill, read and clFinish. A real GPU runs concurrently, so this is the
 * simulator's limit, not a reason to serialize clt: its devices are left out here, with a SKIP
 * line, and cpu and every other device still run each test. */
static bool usable(const char *test, clt_device *d) {
  if (!cu_is_oclgrind(d))
    return true;
  char why[256];
  snprintf(why, sizeof why, "%s left out: Oclgrind is not thread-safe (tests/oclgrind/threads.c)",
           cu_dev_name(d));
  cu_skip(test, why);
  return false;
}

/* cu_devices without the devices that cannot be shared by threads: cpu first. */
static int thread_devices(const char *test, clt_device **devs) {
  clt_device *all[CU_MAX_DEVICES];
  int n = cu_devices(all), k = 0;
  for (int i = 0; i < n; i++)
    if (usable(test, all[i]))
      devs[k++] = all[i];
  return k;
}

/* The OpenCL devices that threads can share, in order; 0 (and a SKIP line) if fewer than need. */
static int thread_cl(const char *test, clt_device **cl, int need) {
  int k = 0;
  for (int i = 0; i < clt_device_count() && k < CU_MAX_DEVICES; i++)
    if (usable(test, clt_device_at(i)))
      cl[k++] = clt_device_at(i);
  if (k >= need)
    return k;
  char why[128];
  snprintf(why, sizeof why, "needs %d OpenCL devices that threads can share, found %d", need, k);
  cu_skip(test, why);
  return 0;
}

/* ---- mixed: shared tensors, private tensors, transfers and ops on every device -------------- */

enum { MR = 48, MK = 40, MN = 24 };

typedef struct mixed_ctx {
  int nd;
  clt_device *devs[CU_MAX_DEVICES];
  clt_tensor *x[CU_MAX_DEVICES],
      *wt[CU_MAX_DEVICES]; /* shared, read-only: x (MR, MK), w (MK, MN) */
  float hx[MR * MK], hw[MK * MN];
  double sum_x, mean0[MK], xw[MR * MN];
  int iters;
} mixed_ctx;

static void *mixed_body(void *arg) {
  worker *w = arg;
  mixed_ctx *c = w->ctx;
  const int64_t xs[2] = {MR, MK};
  float p[MR * MK], want[MR * MK];
  cu_rng r;
  cu_rng_seed(&r, 100 + (uint64_t)w->id);
  clt_generator *g;
  uint64_t seed = 1000 + (uint64_t)w->id, offset = 0;
  TH_OK(w, clt_generator_create(seed, &g));
  TH_SYNC(w); /* start together */
  for (int it = 0; it < c->iters; it++) {
    int k = (w->id + it) % c->nd, k2 = (k + 1) % c->nd;
    clt_device *d = c->devs[k], *d2 = c->devs[k2];
    const char *dn = clt_device_name(d);
    clt_tensor *x = clt_tensor_retain(c->x[k]); /* a reference of this thread's own */
    for (int i = 0; i < MR * MK; i++) {
      p[i] = (float)(2.0 * cu_rng_uniform(&r) - 1.0);
      want[i] = c->hx[i] + p[i];
    }
    clt_tensor *pt, *sum, *mm, *mean, *pd2, *back, *am, *rnd;
    int64_t at;
    /* a private tensor, an op with a shared one, and the result read back */
    TH_OK(w, clt_from_host(p, CLT_F32, 2, xs, d, &pt));
    clt_tensor *sumt;
    TH_OK(w, clt_add(x, pt, &sumt));
    float *got = read_all(sumt);
    TH_CHECK(w, got, "reading x + p on %s: %s", dn, clt_last_error());
    w->ops++;
    TH_CHECK(w, same_f32(got, want, MR * MK, &at), "%s: (x + p)[%lld] = %.9g, expected %.9g", dn,
             (long long)at, got[at], want[at]);
    free(got);
    /* an asynchronous copy of the result into pinned host memory (OpenCL devices) */
    if (!clt_device_is_host(d)) {
      clt_tensor *pin;
      TH_OK(w, clt_empty_pinned(CLT_F32, 2, xs, d, &pin));
      TH_OK(w, clt_copy(pin, sumt));
      float *pp = clt_tensor_data(pin);
      TH_CHECK(w, pp, "clt_tensor_data(pinned) on %s: %s", dn, clt_last_error());
      w->ops++;
      TH_CHECK(w, same_f32(pp, want, MR * MK, &at), "%s: pinned copy [%lld] = %.9g, expected %.9g",
               dn, (long long)at, pp[at], want[at]);
      clt_tensor_release(pin);
    }
    clt_tensor_release(sumt);
    /* reductions and a product of shared tensors */
    double v;
    TH_OK(w, clt_sum(x, &sum));
    TH_OK(w, clt_item(sum, &v));
    TH_CHECK(w, fabs(v - c->sum_x) <= 1e-3, "%s: sum(x) = %.9g, expected %.9g", dn, v, c->sum_x);
    TH_OK(w, clt_mean_dim(x, 0, 0, &mean));
    float *gm = read_all(mean);
    TH_CHECK(w, gm, "reading mean(x, 0) on %s: %s", dn, clt_last_error());
    w->ops++;
    for (int j = 0; j < MK; j++)
      TH_CHECK(w, fabs(gm[j] - c->mean0[j]) <= 1e-5, "%s: mean(x, 0)[%d] = %.9g, expected %.9g", dn,
               j, gm[j], c->mean0[j]);
    free(gm);
    TH_OK(w, clt_matmul(x, c->wt[k], &mm));
    float *gmm = read_all(mm);
    TH_CHECK(w, gmm, "reading x @ w on %s: %s", dn, clt_last_error());
    w->ops++;
    for (int i = 0; i < MR * MN; i++)
      TH_CHECK(w, fabs(gmm[i] - c->xw[i]) <= 1e-4 + 1e-4 * fabs(c->xw[i]),
               "%s: (x @ w)[%d] = %.9g, expected %.9g", dn, i, gmm[i], c->xw[i]);
    free(gmm);
    int64_t ai;
    int64_t best = 0;
    for (int i = 1; i < MR * MK; i++)
      if (p[i] > p[best])
        best = i;
    TH_OK(w, clt_argmax(pt, &am));
    TH_OK(w, clt_item_i64(am, &ai));
    TH_CHECK(w, ai == best, "%s: argmax(p) = %lld, expected %lld", dn, (long long)ai,
             (long long)best);
    /* transfers: to another device, back home as a fresh copy, and a move */
    TH_OK(w, clt_to(pt, d2, &pd2));
    TH_OK(w, clt_copy_to(pd2, clt_cpu(), &back));
    float *hb = clt_tensor_data(back);
    TH_CHECK(w, hb, "clt_tensor_data: %s", clt_last_error());
    w->ops++;
    TH_CHECK(w, memcmp(hb, p, sizeof p) == 0, "%s -> %s -> cpu changed the data", dn,
             clt_device_name(d2));
    TH_OK(w, clt_move(&pt, d2));
    TH_CHECK(w, clt_tensor_device(pt) == d2, "clt_move left the tensor on %s",
             clt_device_name(clt_tensor_device(pt)));
    float *hm = read_all(pt);
    TH_CHECK(w, hm && memcmp(hm, p, sizeof p) == 0, "%s: moved data differ (%s)",
             clt_device_name(d2), clt_last_error());
    w->ops++;
    free(hm);
    /* random numbers from this thread's generator, on this device */
    int64_t rn[1] = {64};
    TH_OK(w, clt_generator_rand(g, CLT_F32, 1, rn, d, &rnd));
    float *gr = read_all(rnd);
    TH_CHECK(w, gr, "reading rand on %s: %s", dn, clt_last_error());
    w->ops++;
    for (int i = 0; i < 64; i++)
      TH_CHECK(w, gr[i] == philox_f32(seed, offset, i),
               "%s: rand[%d] = %.9g, expected %.9g (seed %llu, counter %llu)", dn, i, gr[i],
               philox_f32(seed, offset, i), (unsigned long long)seed, (unsigned long long)offset);
    offset += 16;
    free(gr);
    clt_tensor_release(rnd);
    clt_tensor_release(am);
    clt_tensor_release(sum);
    clt_tensor_release(mean);
    clt_tensor_release(mm);
    clt_tensor_release(pd2);
    clt_tensor_release(back);
    clt_tensor_release(pt);
    clt_tensor_release(x);
  }
  clt_generator_release(g);
  return NULL;
}

START_TEST(test_mixed) {
  static mixed_ctx c;
  memset(&c, 0, sizeof c);
  c.nd = thread_devices("test_mixed", c.devs);
  c.iters = iters(16);
  cu_rng r;
  cu_rng_seed(&r, 7);
  for (int i = 0; i < MR * MK; i++)
    c.hx[i] = (float)(2.0 * cu_rng_uniform(&r) - 1.0);
  for (int i = 0; i < MK * MN; i++)
    c.hw[i] = (float)(2.0 * cu_rng_uniform(&r) - 1.0);
  for (int i = 0; i < MR * MK; i++)
    c.sum_x += c.hx[i];
  for (int j = 0; j < MK; j++) {
    for (int i = 0; i < MR; i++)
      c.mean0[j] += c.hx[i * MK + j];
    c.mean0[j] /= MR;
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < MN; j++) {
      double s = 0;
      for (int q = 0; q < MK; q++)
        s += (double)c.hx[i * MK + q] * c.hw[q * MN + j];
      c.xw[i * MN + j] = s;
    }
  const int64_t xs[2] = {MR, MK}, ws[2] = {MK, MN};
  for (int k = 0; k < c.nd; k++) {
    c.x[k] = cu_tensor(c.hx, CLT_F32, 2, xs, c.devs[k]);
    c.wt[k] = cu_tensor(c.hw, CLT_F32, 2, ws, c.devs[k]);
  }
  run_workers("mixed", mixed_body, &c);
  /* The shared tensors are intact. */
  for (int k = 0; k < c.nd; k++) {
    float *v = cu_read(c.x[k]);
    ck_assert_msg(memcmp(v, c.hx, sizeof c.hx) == 0, "%s: shared x changed",
                  cu_dev_name(c.devs[k]));
    free(v);
    clt_tensor_release(c.x[k]);
    clt_tensor_release(c.wt[k]);
  }
}
END_TEST

/* ---- references: retain and release the same tensors from every thread ---------------------- */

enum { RC_TENSORS = 64 };

typedef struct rc_ctx {
  int nd;
  clt_device *devs[CU_MAX_DEVICES];
  clt_tensor *shared[CU_MAX_DEVICES];
  clt_tensor *handed[RC_TENSORS]; /* each holds one reference per worker */
  int iters;
} rc_ctx;

static void *rc_body(void *arg) {
  worker *w = arg;
  rc_ctx *c = w->ctx;
  TH_SYNC(w);
  /* Many retain/release pairs and views on the shared tensors at once. */
  for (int it = 0; it < c->iters; it++) {
    clt_tensor *t = c->shared[(w->id + it) % c->nd];
    clt_tensor *a = clt_tensor_retain(t), *b = clt_tensor_retain(t), *view;
    int64_t flat[1] = {-1};
    TH_OK(w, clt_reshape(a, 1, flat, &view));
    clt_tensor_release(a);
    clt_tensor_release(view);
    clt_tensor_release(b);
    w->ops += 3;
  }
  TH_SYNC(w);
  /* Every worker drops its reference to each handed tensor, in an order of its own: whichever
   * thread is last frees it (to the caching allocator). */
  int order[RC_TENSORS];
  for (int i = 0; i < RC_TENSORS; i++)
    order[i] = i;
  cu_rng r;
  cu_rng_seed(&r, 300 + (uint64_t)w->id);
  for (int i = RC_TENSORS - 1; i > 0; i--) {
    int j = (int)(cu_rng_next(&r) % (uint64_t)(i + 1)), tmp = order[i];
    order[i] = order[j];
    order[j] = tmp;
  }
  for (int i = 0; i < RC_TENSORS; i++) {
    clt_tensor *t = c->handed[order[i]];
    /* While we hold our reference, the data is whole: read its first element. */
    double v;
    TH_OK(w, clt_item(t, &v));
    TH_CHECK(w, v == (double)order[i], "handed tensor %d holds %g", order[i], v);
    clt_tensor_release(t);
    w->ops++;
  }
  return NULL;
}

START_TEST(test_refcounts) {
  static rc_ctx c;
  memset(&c, 0, sizeof c);
  c.nd = thread_devices("test_refcounts", c.devs);
  c.iters = iters(2000);
  clt_memory_stats before[CU_MAX_DEVICES];
  for (int k = 0; k < c.nd; k++) {
    int64_t shape[2] = {16, 16};
    CU_OK(clt_full(CLT_F32, 2, shape, 3.0, c.devs[k], &c.shared[k]));
    CU_OK(clt_device_synchronize(c.devs[k]));
    CU_OK(clt_device_memory_stats(c.devs[k], &before[k]));
  }
  for (int i = 0; i < RC_TENSORS; i++) {
    CU_OK(clt_full(CLT_F32, 0, NULL, (double)i, c.devs[i % c.nd], &c.handed[i]));
    for (int k = 0; k < NT - 1; k++)
      clt_tensor_retain(c.handed[i]); /* NT references: one per worker */
  }
  run_workers("refcounts", rc_body, &c);
  for (int k = 0; k < c.nd; k++) {
    clt_memory_stats m;
    CU_OK(clt_device_synchronize(c.devs[k]));
    CU_OK(clt_device_memory_stats(c.devs[k], &m));
    ck_assert_msg(m.allocated_bytes == before[k].allocated_bytes,
                  "%s: %llu bytes allocated after every reference was dropped, %llu before",
                  cu_dev_name(c.devs[k]), (unsigned long long)m.allocated_bytes,
                  (unsigned long long)before[k].allocated_bytes);
    ck_assert(m.reserved_bytes == m.allocated_bytes + m.cached_bytes);
    float *v = cu_read(c.shared[k]);
    for (int i = 0; i < 256; i++)
      ck_assert_msg(v[i] == 3.0f, "%s: shared[%d] = %g", cu_dev_name(c.devs[k]), i, v[i]);
    free(v);
    clt_tensor_release(c.shared[k]);
  }
}
END_TEST

/* ---- the caching allocator under churn --------------------------------------------------------
 */

enum { CHURN_LIVE = 4 };

typedef struct churn_ctx {
  int nd;
  clt_device *devs[CU_MAX_DEVICES];
  int iters;
} churn_ctx;

/* Checks that t (n elements) still holds value everywhere. */
static bool holds(const clt_tensor *t, float value, int64_t *at, float *got) {
  float *v = read_all(t);
  if (!v) {
    *at = -1;
    return false;
  }
  bool ok = true;
  for (int64_t i = 0; i < clt_tensor_numel(t) && ok; i++)
    if (v[i] != value) {
      *at = i;
      *got = v[i];
      ok = false;
    }
  free(v);
  return ok;
}

static void *churn_body(void *arg) {
  worker *w = arg;
  churn_ctx *c = w->ctx;
  /* A few sizes shared by every thread, so that blocks freed by one are taken by another. */
  static const int64_t sizes[] = {100, 1000, 4000, 20000, 70000};
  clt_tensor *live[CHURN_LIVE] = {NULL};
  float vals[CHURN_LIVE] = {0};
  cu_rng r;
  cu_rng_seed(&r, 500 + (uint64_t)w->id);
  TH_SYNC(w);
  for (int it = 0; it < c->iters; it++) {
    int slot = it % CHURN_LIVE;
    if (live[slot]) {
      int64_t at = 0;
      float got = 0;
      TH_CHECK(w, holds(live[slot], vals[slot], &at, &got),
               "%s: a live tensor of %lld elements changed: [%lld] = %g, expected %g (%s)",
               clt_device_name(clt_tensor_device(live[slot])),
               (long long)clt_tensor_numel(live[slot]), (long long)at, got, vals[slot],
               at < 0 ? clt_last_error() : "another tensor got its memory");
      w->ops++;
      clt_tensor_release(live[slot]);
      live[slot] = NULL;
    }
    int k = (int)(cu_rng_next(&r) % (uint64_t)c->nd);
    clt_device *d = c->devs[k];
    int64_t n = sizes[cu_rng_next(&r) % (sizeof sizes / sizeof *sizes)];
    vals[slot] = (float)(w->id * 100000 + it);
    if (it % 8 == 7 && k > 0) { /* now and then pinned host memory near an OpenCL device */
      TH_OK(w, clt_empty_pinned(CLT_F32, 1, &n, d, &live[slot]));
      float *p = clt_tensor_data(live[slot]);
      TH_CHECK(w, p, "clt_tensor_data(pinned): %s", clt_last_error());
      for (int64_t i = 0; i < n; i++)
        p[i] = vals[slot];
    } else {
      TH_OK(w, clt_full(CLT_F32, 1, &n, vals[slot], d, &live[slot]));
    }
    if (it % 16 == 0) {
      clt_memory_stats m;
      TH_OK(w, clt_device_memory_stats(d, &m));
    }
    if (w->id == 0 && it % 50 == 49) /* blocks in flight to and from the cache meanwhile */
      TH_OK(w, clt_device_empty_cache(NULL));
  }
  for (int s = 0; s < CHURN_LIVE; s++) {
    int64_t at = 0;
    float got = 0;
    TH_CHECK(w, holds(live[s], vals[s], &at, &got), "a live tensor changed at the end");
    clt_tensor_release(live[s]);
  }
  return NULL;
}

START_TEST(test_allocator_churn) {
  static churn_ctx c;
  memset(&c, 0, sizeof c);
  c.nd = thread_devices("test_allocator_churn", c.devs);
  c.iters = iters(300);
  clt_memory_stats before[CU_MAX_DEVICES];
  for (int k = 0; k < c.nd; k++)
    CU_OK(clt_device_memory_stats(c.devs[k], &before[k]));
  run_workers("allocator_churn", churn_body, &c);
  for (int k = 0; k < c.nd; k++) {
    clt_memory_stats m;
    CU_OK(clt_device_memory_stats(c.devs[k], &m));
    ck_assert_msg(m.allocated_bytes == before[k].allocated_bytes,
                  "%s: %llu bytes still allocated, %llu before", cu_dev_name(c.devs[k]),
                  (unsigned long long)m.allocated_bytes,
                  (unsigned long long)before[k].allocated_bytes);
    ck_assert_msg(m.reserved_bytes == m.allocated_bytes + m.cached_bytes,
                  "%s: reserved %llu != allocated %llu + cached %llu", cu_dev_name(c.devs[k]),
                  (unsigned long long)m.reserved_bytes, (unsigned long long)m.allocated_bytes,
                  (unsigned long long)m.cached_bytes);
    ck_assert(m.peak_allocated_bytes >= m.allocated_bytes);
    CU_OK(clt_device_empty_cache(c.devs[k]));
    CU_OK(clt_device_memory_stats(c.devs[k], &m));
    ck_assert(m.cached_bytes == 0 && m.cached_blocks == 0);
  }
}
END_TEST

/* ---- first use: every thread launches the same never-built kernel at the same moment ----------
 */

typedef struct first_ctx {
  int nd;
  clt_device *devs[CU_MAX_DEVICES];
} first_ctx;

static void *first_body(void *arg) {
  worker *w = arg;
  first_ctx *c = w->ctx;
  /* a: (4, 5) i32 0..19, e: (5) i32 1, 2, 1, 2, 1 */
  int32_t ha[20], he[5] = {1, 2, 1, 2, 1};
  float hf[20];
  uint8_t hc[20];
  for (int i = 0; i < 20; i++) {
    ha[i] = i - 7;
    hf[i] = (float)i * 0.25f - 2.0f;
    hc[i] = (uint8_t)(i % 3 == 0);
  }
  const int64_t s2[2] = {4, 5}, s1[1] = {5};
  /* Each round, every worker uses the same device and the same ops, none run before in this
   * process (a test is a fresh process). */
  for (int k = 0; k < c->nd; k++) {
    clt_device *d = c->devs[(k + 1) % c->nd]; /* OpenCL devices first */
    const char *dn = clt_device_name(d);
    clt_tensor *a, *e, *f, *cond, *pw, *wh, *mn, *tr;
    TH_OK(w, clt_from_host(ha, CLT_I32, 2, s2, d, &a));
    TH_OK(w, clt_from_host(he, CLT_I32, 1, s1, d, &e));
    TH_OK(w, clt_from_host(hf, CLT_F32, 2, s2, d, &f));
    TH_OK(w, clt_from_host(hc, CLT_BOOL, 2, s2, d, &cond));
    TH_SYNC(w);
    TH_OK(w, clt_pow(a, e, &pw)); /* broadcast integer power */
    TH_OK(w, clt_where(cond, f, f, &wh));
    TH_OK(w, clt_min_dim(a, 1, 0, &mn));
    TH_OK(w, clt_transpose(f, 0, 1, &tr));
    int32_t *gp = read_all(pw), *gm = read_all(mn);
    float *gw = read_all(wh), *gt = read_all(tr);
    TH_CHECK(w, gp && gm && gw && gt, "reading results on %s: %s", dn, clt_last_error());
    w->ops += 4;
    for (int i = 0; i < 20; i++) {
      int32_t x = ha[i], want = he[i % 5] == 1 ? x : x * x;
      TH_CHECK(w, gp[i] == want, "%s: pow[%d] = %d, expected %d", dn, i, gp[i], want);
      TH_CHECK(w, gw[i] == hf[i], "%s: where[%d] = %g, expected %g", dn, i, gw[i], hf[i]);
      int row = i / 5, col = i % 5; /* tr is (5, 4): tr[col][row] = f[row][col] */
      TH_CHECK(w, gt[col * 4 + row] == hf[i], "%s: transpose differs at %d", dn, i);
    }
    for (int row = 0; row < 4; row++)
      TH_CHECK(w, gm[row] == ha[row * 5], "%s: min row %d = %d, expected %d", dn, row, gm[row],
               ha[row * 5]);
    free(gp);
    free(gm);
    free(gw);
    free(gt);
    clt_tensor_release(a);
    clt_tensor_release(e);
    clt_tensor_release(f);
    clt_tensor_release(cond);
    clt_tensor_release(pw);
    clt_tensor_release(wh);
    clt_tensor_release(mn);
    clt_tensor_release(tr);
  }
  return NULL;
}

/* Temporary files of the kernel cache ("<key>.bin.XXXXXX") left in dir. */
static int cache_temps(const char *dir) {
  DIR *dp = opendir(dir);
  int n = 0;
  struct dirent *de;
  while (dp && (de = readdir(dp)) != NULL)
    if (strstr(de->d_name, ".bin."))
      n++;
  if (dp)
    closedir(dp);
  return n;
}

/* With an empty disk cache of its own (when the test has a process of its own: the directory is
 * read once per process), so that threads also store the same entries at once: cl:0 and cl:1
 * are alike, so their programs share keys. */
START_TEST(test_first_use) {
  static first_ctx c;
  memset(&c, 0, sizeof c);
  char dir[256] = "";
  if (cu_forked) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/clt-threads-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp failed");
    setenv("CLT_CACHE_DIR", dir, 1);
  }
  c.nd = thread_devices("test_first_use", c.devs);
  run_workers("first_use", first_body, &c);
  if (dir[0]) {
    size_t entries = 0, removed = 0;
    CU_OK(clt_kernel_cache_list(NULL, NULL, &entries));
    ck_assert_msg(c.nd == 1 || entries > 0, "no program reached the disk cache %s", dir);
    ck_assert_msg(cache_temps(dir) == 0, "temporary files left in %s", dir);
    CU_OK(clt_kernel_cache_clear(&removed));
    ck_assert_msg(removed == entries, "removed %zu of %zu entries", removed, entries);
    ck_assert_msg(rmdir(dir) == 0, "%s holds files that are not cache entries", dir);
  }
}
END_TEST

/* ---- the host backend's own threads (OpenMP) entered from several threads at once ------------ */

enum { HP_N = 1 << 17 }; /* above CLT__PAR_MIN: split over OpenMP threads when built with it */

typedef struct hostpar_ctx {
  clt_tensor *x; /* shared: x[i] = i % 1000 */
  int iters;
} hostpar_ctx;

static void *hostpar_body(void *arg) {
  worker *w = arg;
  hostpar_ctx *c = w->ctx;
  int64_t n = HP_N;
  TH_SYNC(w);
  for (int it = 0; it < c->iters; it++) {
    double k = w->id * 10 + it;
    clt_tensor *y, *sum, *s, *cast;
    TH_OK(w, clt_add_scalar(c->x, k, &y));
    TH_OK(w, clt_cast(y, CLT_F64, &cast));
    TH_OK(w, clt_mul(cast, cast, &s));
    TH_OK(w, clt_sum(y, &sum));
    double v;
    TH_OK(w, clt_item(sum, &v));
    /* f32 sums round: a relative tolerance */
    double want = 0;
    for (int64_t i = 0; i < n; i++)
      want += (double)(i % 1000) + k;
    TH_CHECK(w, fabs(v - want) <= 1e-5 * want, "sum = %.9g, expected %.9g", v, want);
    const double *ps = clt_tensor_data(s);
    TH_CHECK(w, ps, "clt_tensor_data: %s", clt_last_error());
    for (int64_t i = 0; i < n; i += 997) {
      double e = (double)(i % 1000) + k;
      TH_CHECK(w, ps[i] == e * e, "(x + %g)^2 [%lld] = %.17g, expected %.17g", k, (long long)i,
               ps[i], e * e);
    }
    TH_CHECK(w, ps[n - 1] == ((double)((n - 1) % 1000) + k) * ((double)((n - 1) % 1000) + k),
             "the last element is wrong");
    clt_tensor_release(y);
    clt_tensor_release(cast);
    clt_tensor_release(s);
    clt_tensor_release(sum);
  }
  return NULL;
}

START_TEST(test_host_parallel) {
  static hostpar_ctx c;
  c.iters = iters(4);
  float *h = cu_malloc(HP_N * sizeof *h);
  for (int64_t i = 0; i < HP_N; i++)
    h[i] = (float)(i % 1000);
  int64_t n = HP_N;
  c.x = cu_tensor(h, CLT_F32, 1, &n, clt_cpu());
  free(h);
  run_workers("host_parallel", hostpar_body, &c);
  clt_tensor_release(c.x);
}
END_TEST

/* ---- matmul by every path, first used by several threads on several devices at once -------- */

enum { PM = 33, PK = 17, PN = 29 };

typedef struct paths_ctx {
  int ncl;
  clt_device *cl[CU_MAX_DEVICES];
  float ha[PM * PK], hb[PK * PN];
  double want[PM * PN];
} paths_ctx;

static void *paths_body(void *arg) {
  worker *w = arg;
  paths_ctx *c = w->ctx;
  const int64_t sa[2] = {PM, PK}, sb[2] = {PK, PN};
  clt_device *d = c->cl[w->id % c->ncl];
  clt_tensor *a, *b, *p;
  TH_OK(w, clt_from_host(c->ha, CLT_F32, 2, sa, d, &a));
  TH_OK(w, clt_from_host(c->hb, CLT_F32, 2, sb, d, &b));
  TH_SYNC(w); /* the first product on every device, by every thread at once */
  TH_OK(w, clt_matmul(a, b, &p));
  float *g = read_all(p);
  TH_CHECK(w, g, "reading a @ b on %s: %s", clt_device_name(d), clt_last_error());
  w->ops++;
  for (int i = 0; i < PM * PN; i++)
    TH_CHECK(w, fabs(g[i] - c->want[i]) <= 1e-4 + 1e-4 * fabs(c->want[i]),
             "%s (%s): (a @ b)[%d] = %.9g, expected %.9g", clt_device_name(d), clt_matmul_path(d),
             i, g[i], c->want[i]);
  free(g);
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(p);
  return NULL;
}

/* CLT_MATMUL is read at each call: set it here, in this test's own process, before any thread
 * starts. */
START_TEST(test_matmul_paths) {
  if (!cu_forked) {
    cu_skip("test_matmul_paths", "sets CLT_MATMUL: needs a process of its own (CK_FORK=yes)");
    return;
  }
  static const char *const paths[] = {"clblast", "native", "kernel"};
  size_t which = (size_t)_i;
  setenv("CLT_MATMUL", paths[which], 1);
  static paths_ctx c;
  memset(&c, 0, sizeof c);
  if ((c.ncl = thread_cl("test_matmul_paths", c.cl, 1)) == 0)
    return;
  if (!clt_matmul_path(c.cl[0])) {
    char why[256];
    snprintf(why, sizeof why, "CLT_MATMUL=%s: %s", paths[which], clt_last_error());
    cu_skip("test_matmul_paths", why);
    return;
  }
  cu_rng r;
  cu_rng_seed(&r, 11);
  for (int i = 0; i < PM * PK; i++)
    c.ha[i] = (float)(2.0 * cu_rng_uniform(&r) - 1.0);
  for (int i = 0; i < PK * PN; i++)
    c.hb[i] = (float)(2.0 * cu_rng_uniform(&r) - 1.0);
  for (int i = 0; i < PM; i++)
    for (int j = 0; j < PN; j++) {
      double s = 0;
      for (int q = 0; q < PK; q++)
        s += (double)c.ha[i * PK + q] * c.hb[q * PN + j];
      c.want[i * PN + j] = s;
    }
  char name[64];
  snprintf(name, sizeof name, "matmul_paths (%s)", paths[which]);
  run_workers(name, paths_body, &c);
}
END_TEST

/* ---- several queues reading one tensor at once, then a write -------------------------------- */

/* Every worker copies a shared tensor (asynchronously, on the destination's queue) at the same
 * time; once they all returned, one thread overwrites the tensor. Its write must wait for every
 * copy: if the tensor remembered the earlier of two reads enqueued on one queue, the later copy
 * would see the new values. */
enum { RD_N = 1 << 18 };

typedef struct readers_ctx {
  clt_tensor *src; /* on src_dev */
  clt_device *dst_dev;
  clt_tensor *fresh; /* the new values, on src_dev */
  float *host_src;   /* src's data when src is on the host */
  int rounds;
} readers_ctx;

static void *readers_body(void *arg) {
  worker *w = arg;
  readers_ctx *c = w->ctx;
  float *v = malloc(RD_N * sizeof *v);
  TH_CHECK(w, v, "out of memory");
  for (int round = 0; round < c->rounds; round++) {
    clt_tensor *copy;
    TH_SYNC(w);
    TH_OK(w, clt_to(c->src, c->dst_dev, &copy));
    TH_SYNC(w);
    if (w->id == 0) { /* overwrite the source, ordered after the copies by clt alone */
      if (c->host_src) {
        float *p = clt_tensor_data(c->src);
        TH_CHECK(w, p, "clt_tensor_data: %s", clt_last_error());
        for (int i = 0; i < RD_N; i++)
          p[i] = (float)(round + 1);
      } else {
        clt_tensor *f;
        TH_OK(w, clt_full(CLT_F32, 1, &(int64_t){RD_N}, (double)(round + 1),
                          clt_tensor_device(c->src), &f));
        TH_OK(w, clt_copy(c->src, f));
        clt_tensor_release(f);
      }
    }
    TH_SYNC(w);
    TH_OK(w, clt_tensor_read(copy, v, RD_N * sizeof *v));
    for (int i = 0; i < RD_N; i += 4093)
      TH_CHECK(w, v[i] == (float)round,
               "round %d: copy[%d] = %g: the write overtook a copy still reading the source", round,
               i, v[i]);
    TH_CHECK(w, v[RD_N - 1] == (float)round, "round %d: the copy's last element is %g", round,
             v[RD_N - 1]);
    clt_tensor_release(copy);
  }
  free(v);
  return NULL;
}

static void readers_case(const char *test, clt_device *src_dev, clt_device *dst_dev) {
  static readers_ctx c;
  memset(&c, 0, sizeof c);
  c.dst_dev = dst_dev;
  c.rounds = iters(100);
  int64_t n = RD_N;
  CU_OK(clt_zeros(CLT_F32, 1, &n, src_dev, &c.src));
  if (clt_device_is_host(src_dev))
    c.host_src = clt_tensor_data(c.src);
  run_workers(test, readers_body, &c);
  clt_tensor_release(c.src);
}

START_TEST(test_readers_then_writer) {
  clt_device *cl[CU_MAX_DEVICES];
  int ncl = thread_cl("test_readers_then_writer", cl, 1);
  if (ncl == 0)
    return;
  /* host memory read by cl:0's queue (uploads), then written by the host */
  readers_case("readers_host_to_cl0", clt_cpu(), cl[0]);
  if (ncl >= 2) /* cl:0's memory read by cl:1's queue, then written on cl:0's */
    readers_case("readers_cl0_to_cl1", cl[0], cl[1]);
}
END_TEST

/* ---- error messages stay with their thread --------------------------------------------------- */

typedef struct errors_ctx {
  int rounds;
  clt_device *cl; /* an OpenCL device the threads can share, or NULL */
} errors_ctx;

static void *errors_body(void *arg) {
  worker *w = arg;
  const errors_ctx *c = w->ctx;
  char name[64], want[96];
  clt_device *cl = c->cl;
  for (int round = 0; round < c->rounds; round++) {
    /* Everyone fails with a message of its own... */
    snprintf(name, sizeof name, "no-such-device-t%d-r%d", w->id, round);
    snprintf(want, sizeof want, "no device named '%s'", name);
    clt_device *d;
    clt_status s = clt_device_get(name, &d);
    TH_CHECK(w, s == CLT_ERR_DEVICE_NOT_FOUND, "clt_device_get(%s) gave %s", name,
             clt_status_name(s));
    w->ops++;
    TH_SYNC(w);
    /* ...then half of them fail differently while the others succeed: each still sees its own
     * error. */
    if (w->id % 2 == 0) {
      int64_t bad[1] = {7};
      if (cl) { /* a device mismatch first, whose message names only the devices */
        clt_tensor *a, *b, *z;
        TH_OK(w, clt_ones(CLT_F32, 1, bad, clt_cpu(), &a));
        TH_OK(w, clt_ones(CLT_F32, 1, bad, cl, &b));
        s = clt_add(a, b, &z);
        TH_CHECK(w, s == CLT_ERR_DEVICE_MISMATCH, "clt_add(cpu, cl:0) gave %s", clt_status_name(s));
        w->ops++;
        TH_CHECK(w, strncmp(clt_last_error(), "clt_add: ", 9) == 0, "mismatch message: %s",
                 clt_last_error());
        clt_tensor_release(a);
        clt_tensor_release(b);
      }
      /* then a reshape whose message holds this thread's shape */
      int64_t shape[2] = {w->id + 1, round + 2};
      clt_tensor *t, *v;
      TH_OK(w, clt_zeros(CLT_F32, 2, shape, clt_cpu(), &t));
      int64_t prime[1] = {1000003}; /* no product of this test's shapes */
      s = clt_reshape(t, 1, prime, &v);
      TH_CHECK(w, s == CLT_ERR_SHAPE_MISMATCH, "clt_reshape gave %s", clt_status_name(s));
      w->ops++;
      snprintf(want, sizeof want, "clt_reshape: cannot view a tensor of shape [%d, %d]", w->id + 1,
               round + 2);
      clt_tensor_release(t);
    } else {
      clt_tensor *a, *b;
      TH_OK(w, clt_arange(0, 33, 1, CLT_F32, clt_cpu(), &a));
      TH_OK(w, clt_mul_scalar(a, 2.0, &b));
      double v;
      clt_tensor *s1;
      TH_OK(w, clt_sum(b, &s1));
      TH_OK(w, clt_item(s1, &v));
      TH_CHECK(w, v == 1056.0, "sum of 2 * arange(33) = %g", v);
      clt_tensor_release(a);
      clt_tensor_release(b);
      clt_tensor_release(s1);
    }
    TH_SYNC(w);
    TH_CHECK(w, strstr(clt_last_error(), want) != NULL,
             "round %d: clt_last_error() is \"%s\", expected it to contain \"%s\"", round,
             clt_last_error(), want);
    TH_CHECK(w, clt_last_status() != CLT_OK, "clt_last_status() is CLT_OK");
    TH_SYNC(w);
    /* Clearing is per thread too. */
    if (w->id == 0)
      clt_clear_error();
    TH_SYNC(w);
    if (w->id == 0)
      TH_CHECK(w, clt_last_error()[0] == '\0' && clt_last_status() == CLT_OK,
               "clt_clear_error did not clear");
    else
      TH_CHECK(w, strstr(clt_last_error(), want) != NULL,
               "thread 0's clt_clear_error cleared this thread's message too");
    TH_SYNC(w);
  }
  return NULL;
}

START_TEST(test_errors_per_thread) {
  errors_ctx c = {.rounds = iters(10)};
  clt_device *cl[CU_MAX_DEVICES];
  if (thread_cl("test_errors_per_thread", cl, 0) > 0)
    c.cl = cl[0];
  run_workers("errors_per_thread", errors_body, &c);
}
END_TEST

/* ---- the shared default generator: concurrent draws take disjoint counters ------------------- */

enum { DG_DRAWS = 12, DG_COUNTERS = 8 }; /* per thread; each draw 8 counters = 32 f32 */

typedef struct dg_ctx {
  int nd;
  clt_device *devs[CU_MAX_DEVICES];
  float got[NT][DG_DRAWS][4 * DG_COUNTERS];
} dg_ctx;

static void *dg_body(void *arg) {
  worker *w = arg;
  dg_ctx *c = w->ctx;
  int64_t n[1] = {4 * DG_COUNTERS};
  TH_SYNC(w);
  for (int i = 0; i < DG_DRAWS; i++) {
    clt_tensor *t;
    TH_OK(w, clt_rand(CLT_F32, 1, n, c->devs[(w->id + i) % c->nd], &t));
    TH_OK(w, clt_tensor_read(t, c->got[w->id][i], sizeof c->got[w->id][i]));
    clt_tensor_release(t);
  }
  return NULL;
}

START_TEST(test_default_generator) {
  static dg_ctx c;
  memset(&c, 0, sizeof c);
  c.nd = thread_devices("test_default_generator", c.devs);
  const uint64_t seed = 4242;
  CU_OK(clt_manual_seed(seed));
  run_workers("default_generator", dg_body, &c);
  /* Each draw is the stream at a whole counter, each counter drawn exactly once. */
  enum { TOTAL = NT * DG_DRAWS * DG_COUNTERS };
  static int used[TOTAL];
  memset(used, 0, sizeof used);
  for (int t = 0; t < NT; t++)
    for (int i = 0; i < DG_DRAWS; i++) {
      const float *v = c.got[t][i];
      int at = -1;
      for (int ctr = 0; ctr + DG_COUNTERS <= TOTAL && at < 0; ctr++)
        if (v[0] == philox_f32(seed, (uint64_t)ctr, 0) &&
            v[1] == philox_f32(seed, (uint64_t)ctr, 1))
          at = ctr;
      ck_assert_msg(at >= 0, "thread %d draw %d is no part of the stream", t, i);
      for (int e = 0; e < 4 * DG_COUNTERS; e++)
        ck_assert_msg(v[e] == philox_f32(seed, (uint64_t)at, e),
                      "thread %d draw %d element %d differs from the stream at counter %d", t, i, e,
                      at);
      for (int k = 0; k < DG_COUNTERS; k++)
        ck_assert_msg(used[at + k]++ == 0, "counter %d drawn twice", at + k);
    }
  for (int k = 0; k < TOTAL; k++)
    ck_assert_msg(used[k] == 1, "counter %d never drawn", k);
}
END_TEST

/* ---- counters, the guard, printing, events and synchronization ---------------------------------
 */

enum { CT_N = 1000 };

typedef struct counters_ctx {
  int nd;
  clt_device *devs[CU_MAX_DEVICES];
  clt_tensor *shown[CU_MAX_DEVICES]; /* shared, printed by every thread */
  char text[CU_MAX_DEVICES][256];
  int iters;
} counters_ctx;

static void *counters_body(void *arg) {
  worker *w = arg;
  counters_ctx *c = w->ctx;
  float h[CT_N];
  for (int i = 0; i < CT_N; i++)
    h[i] = (float)(i + w->id);
  int64_t n = CT_N;
  TH_SYNC(w);
  for (int it = 0; it < c->iters; it++) {
    for (int k = 1; k < c->nd; k++) {
      clt_device *d = c->devs[k];
      clt_tensor *ht, *dt, *back;
      clt_event *e0, *e1;
      TH_OK(w, clt_event_record(d, &e0));
      TH_OK(w, clt_from_host(h, CLT_F32, 1, &n, clt_cpu(), &ht));
      TH_OK(w, clt_to(ht, d, &dt));           /* one upload of 4000 bytes */
      TH_OK(w, clt_to(dt, clt_cpu(), &back)); /* one download */
      TH_OK(w, clt_event_record(d, &e1));
      double ms;
      TH_OK(w, clt_event_elapsed_ms(e0, e1, &ms));
      TH_CHECK(w, ms >= 0, "elapsed %g ms", ms);
      float *b = clt_tensor_data(back);
      TH_CHECK(w, b && memcmp(b, h, sizeof h) == 0, "round trip to %s changed the data",
               clt_device_name(d));
      char buf[256];
      TH_OK(w, clt_format(c->shown[k], buf, sizeof buf, NULL)); /* one implicit download */
      TH_CHECK(w, strcmp(buf, c->text[k]) == 0, "clt_format gave \"%s\", expected \"%s\"", buf,
               c->text[k]);
      TH_OK(w, clt_device_synchronize(it % 2 ? d : NULL));
      clt_event_release(e0);
      clt_event_release(e1);
      clt_tensor_release(ht);
      clt_tensor_release(dt);
      clt_tensor_release(back);
    }
    clt_timer *tm;
    double ms;
    TH_OK(w, clt_timer_start(c->devs[it % c->nd], &tm));
    TH_OK(w, clt_timer_stop(tm, &ms));
    clt_timer_release(tm);
  }
  return NULL;
}

START_TEST(test_counters_and_printing) {
  static counters_ctx c;
  memset(&c, 0, sizeof c);
  c.nd = thread_devices("test_counters_and_printing", c.devs);
  c.iters = iters(8);
  for (int k = 1; k < c.nd; k++) {
    CU_OK(clt_arange(1, 4, 1, CLT_F32, c.devs[k], &c.shown[k]));
    snprintf(c.text[k], sizeof c.text[k], "tensor([1., 2., 3.], device='%s')",
             cu_dev_name(c.devs[k]));
  }
  CU_OK(clt_device_synchronize(NULL));
  CU_OK(clt_transfer_stats_reset(NULL));
  run_workers("counters_and_printing", counters_body, &c);
  for (int k = 1; k < c.nd; k++) {
    clt_transfer_stats x;
    CU_OK(clt_transfer_stats_get(c.devs[k], &x));
    uint64_t calls = (uint64_t)NT * (uint64_t)c.iters;
    ck_assert_msg(x.h2d_count == calls && x.h2d_bytes == calls * CT_N * 4,
                  "%s: %llu uploads (%llu B), expected %llu (%llu B)", cu_dev_name(c.devs[k]),
                  (unsigned long long)x.h2d_count, (unsigned long long)x.h2d_bytes,
                  (unsigned long long)calls, (unsigned long long)(calls * CT_N * 4));
    ck_assert_msg(x.d2h_count == calls && x.d2h_bytes == calls * CT_N * 4,
                  "%s: %llu downloads, expected %llu", cu_dev_name(c.devs[k]),
                  (unsigned long long)x.d2h_count, (unsigned long long)calls);
    ck_assert_msg(x.implicit_count == calls && x.implicit_bytes == calls * 12,
                  "%s: %llu implicit transfers, expected %llu", cu_dev_name(c.devs[k]),
                  (unsigned long long)x.implicit_count, (unsigned long long)calls);
    clt_tensor_release(c.shown[k]);
  }
}
END_TEST

/* ---- files: checkpoints saved and loaded by several threads ---------------------------------- */

typedef struct files_ctx {
  char dir[256];
  int nd;
  clt_device *devs[CU_MAX_DEVICES];
  int iters;
} files_ctx;

static void *files_body(void *arg) {
  worker *w = arg;
  files_ctx *c = w->ctx;
  char own[320], common[320], npy[320];
  snprintf(own, sizeof own, "%s/t%d.safetensors", c->dir, w->id);
  snprintf(common, sizeof common, "%s/common.safetensors", c->dir);
  snprintf(npy, sizeof npy, "%s/t%d.npy", c->dir, w->id);
  int64_t shape[2] = {3, 4};
  TH_SYNC(w);
  for (int it = 0; it < c->iters; it++) {
    clt_device *d = c->devs[(w->id + it) % c->nd];
    double base = w->id * 1000 + it;
    clt_tensor *a;
    TH_OK(w, clt_full(CLT_F32, 2, shape, base, d, &a));
    clt_params *p, *q;
    TH_OK(w, clt_params_create(&p));
    TH_OK(w, clt_params_add(p, "a", a));
    TH_OK(w, clt_save(own, p));
    TH_OK(w, clt_save(common, p)); /* every thread over one file: always a whole one */
    TH_OK(w, clt_load(own, clt_cpu(), &q));
    clt_tensor *qa = clt_params_get(q, "a");
    TH_CHECK(w, qa, "no tensor a in %s", own);
    float *v = clt_tensor_data(qa);
    TH_CHECK(w, v, "clt_tensor_data: %s", clt_last_error());
    for (int i = 0; i < 12; i++)
      TH_CHECK(w, v[i] == (float)base, "%s: a[%d] = %g, expected %g", own, i, v[i], base);
    clt_params_release(q);
    TH_OK(w, clt_load(common, clt_cpu(), &q));
    qa = clt_params_get(q, "a");
    TH_CHECK(w, qa, "no tensor a in %s", common);
    v = clt_tensor_data(qa);
    TH_CHECK(w, v, "clt_tensor_data: %s", clt_last_error());
    for (int i = 1; i < 12; i++)
      TH_CHECK(w, v[i] == v[0], "%s is a mix of two saves", common);
    clt_params_release(q);
    clt_tensor *b;
    TH_OK(w, clt_save_npy(npy, a));
    TH_OK(w, clt_load_npy(npy, d, &b));
    float *vb = read_all(b);
    TH_CHECK(w, vb && vb[11] == (float)base, "%s read back wrong", npy);
    w->ops++;
    free(vb);
    clt_tensor_release(b);
    clt_params_release(p);
    clt_tensor_release(a);
  }
  return NULL;
}

START_TEST(test_files) {
  static files_ctx c;
  memset(&c, 0, sizeof c);
  c.nd = thread_devices("test_files", c.devs);
  c.iters = iters(6);
  const char *tmp = getenv("TMPDIR");
  snprintf(c.dir, sizeof c.dir, "%s/clt-threads-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ck_assert_msg(mkdtemp(c.dir) != NULL, "mkdtemp failed");
  run_workers("files", files_body, &c);
  char path[320];
  for (int t = 0; t < NT; t++) {
    snprintf(path, sizeof path, "%s/t%d.safetensors", c.dir, t);
    unlink(path);
    snprintf(path, sizeof path, "%s/t%d.npy", c.dir, t);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/common.safetensors", c.dir);
  unlink(path);
  ck_assert_msg(rmdir(c.dir) == 0, "%s holds files nobody wrote (temporary files left over?)",
                c.dir);
}
END_TEST

Suite *threads_suite(void) {
  Suite *s = suite_create("threads");
  TCase *tc = cu_tcase("threads");
  tcase_add_test(tc, test_mixed);
  tcase_add_test(tc, test_refcounts);
  tcase_add_test(tc, test_allocator_churn);
  tcase_add_test(tc, test_first_use);
  tcase_add_loop_test(tc, test_matmul_paths, 0, 3);
  tcase_add_test(tc, test_host_parallel);
  tcase_add_test(tc, test_readers_then_writer);
  tcase_add_test(tc, test_errors_per_thread);
  tcase_add_test(tc, test_default_generator);
  tcase_add_test(tc, test_counters_and_printing);
  tcase_add_test(tc, test_files);
  suite_add_tcase(s, tc);
  return s;
}
