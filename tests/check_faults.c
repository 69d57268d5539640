/* SPDX-License-Identifier: MIT */
/* check_faults.c - injected faults (issue 6, item 5): a workload that touches every part of clt
 * (tensors on cpu, cl:0 and cl:1; transfers both ways and between devices; pinned memory;
 * elementwise, reduce, matmul, rand, transpose, cast; events; parameters moved, saved and
 * loaded; .npy files; DLPack; printing) runs once counting the OpenCL allocations, enqueues and
 * builds and the host allocations it makes, then once for every one of them with that call failing
 * (lib/fault.h). Each time the workload must return an error with a message (or, for a fault
 * clt recovers from, the right results), leave every out-parameter untouched, keep the tensors
 * made before it intact, let a fresh operation on every device succeed, and hold no memory nor
 * OpenCL object afterwards. Each run is a child process of its own (OpenCL state does not
 * survive fork, and a crash or hang must not take the walk with it), which exits through exit()
 * so that LeakSanitizer, in a sanitizer build, checks it.
 *
 * Two ways to fail: "sticky" (the n-th call and every later one of the kind fail, until the
 * workload gives up and releases what it made: the device is gone, so the workload must report
 * an error) and "once" (only the n-th fails, releases included: clt may recover, by its
 * allocation retry or by rebuilding a kernel its disk cache failed to load, and then its results
 * are checked). The runner prints the figures for docs/reliability.md:
 *   figure: fault sites (alloc/enqueue/build): A/E/B      (and host allocations, separately)
 *   figure: faults injected: N                            (every injected run, both ways)
 * Needs configure --enable-fault-injection; otherwise every test skips and says so.
 * CLT_FAULT_WALK_STRIDE=k tries only every k-th call of each kind (and the last), for a quicker
 * run under a sanitizer or valgrind; the default, 1, tries them all. */
#define _GNU_SOURCE
#include "config.h"

#include "check_util.h"

#ifdef CLT_FAULT_INJECTION

#define CLT_FAULT_NO_REDIRECT /* the test's own malloc is not counted */
#include "opencl/cl-internal.h" /* clt__cl: the context and queue behind a device */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_DLPACK
#include "clt_dlpack.h"
#endif

/* ---- figures, shared by the forked tests and the runner ---------------------------------- */

typedef struct figures {
  long sites[CLT__FAULT_KINDS]; /* calls of each kind the workload makes */
  long injected;                /* runs with a fault injected */
  long errors;                  /* ... that returned an error */
  long recovered;               /* ... that recovered with the right results */
} figures;

static figures *fig;

static void figures_setup(void) {
  void *p = mmap(NULL, sizeof *fig, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  fig = p == MAP_FAILED ? NULL : p;
  if (fig)
    memset(fig, 0, sizeof *fig);
}

static void figures_teardown(void) {
  if (!fig)
    return;
  if (fig->injected > 0) {
    printf("figure: fault sites (alloc/enqueue/build): %ld/%ld/%ld\n", fig->sites[CLT__FAULT_ALLOC],
           fig->sites[CLT__FAULT_ENQUEUE], fig->sites[CLT__FAULT_BUILD]);
    printf("figure: fault sites (host allocations): %ld\n", fig->sites[CLT__FAULT_HOST]);
    printf("figure: faults injected: %ld\n", fig->injected);
    printf("figure: faults reported as errors: %ld\n", fig->errors);
    printf("figure: faults recovered from: %ld\n", fig->recovered);
    fflush(stdout);
  }
  munmap(fig, sizeof *fig);
  fig = NULL;
}

/* ---- what a child reports ------------------------------------------------------------------ */

typedef struct report {
  int status;                   /* the workload's */
  char message[1024];           /* clt_last_error() after it */
  long count[CLT__FAULT_KINDS]; /* calls counted */
  long injected;
  char site[40];    /* where the fault went */
  char bad[1024];   /* the first broken promise, "" if none */
  int workload_ran; /* the child got as far as the workload */
} report;

static void flag(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void flag(report *r, const char *fmt, ...) {
  if (r->bad[0])
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->bad, sizeof r->bad, fmt, ap);
  va_end(ap);
}

/* ---- the workload -------------------------------------------------------------------------- */

#define WR 4
#define WC 8
#define WN (WR * WC)

typedef struct workload {
  clt_device *cpu, *d0, *d1;
  report *r;
  char path[256];    /* a file of its own, for checkpoints and .npy */
  bool calm_cleanup; /* faults stop when the workload releases what it made */
} workload;

/* The step fails the workload; a failing call must not have written its out-parameter. */
#define STEP(call)                                                                                 \
  do {                                                                                             \
    if ((st = (call)) != CLT_OK)                                                                   \
      goto out;                                                                                    \
  } while (0)
#define MAKE(call, t)                                                                              \
  do {                                                                                             \
    t = CU_SENTINEL;                                                                               \
    if ((st = (call)) != CLT_OK) {                                                                 \
      if ((void *)(t) != CU_SENTINEL)                                                              \
        flag(w->r, "%s failed (%s) but wrote its out-parameter", #call, clt_status_name(st));      \
      t = NULL;                                                                                    \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      flag(w->r, __VA_ARGS__);                                                                     \
  } while (0)

/* t's n f32 values equal want's (exactly: every step below is exact in f32). A failing read is
 * the workload's error, like any other call's. */
static clt_status check_values(workload *w, const char *what, const clt_tensor *t,
                               const float *want, int n) {
  float got[64];
  clt_status st = clt_tensor_read(t, got, sizeof got);
  for (int i = 0; st == CLT_OK && i < n; i++)
    if (got[i] != want[i]) {
      flag(w->r, "%s: element %d is %g, expected %g", what, i, (double)got[i], (double)want[i]);
      break;
    }
  return st;
}

/* Every part of clt once; on success, checks every result. Releases all it made. */
static clt_status run_workload(workload *w) {
  clt_device *cpu = w->cpu, *d0 = w->d0, *d1 = w->d1;
  clt_status st = CLT_OK;
  float A[WN], B[WN], want[64];
  for (int i = 0; i < WN; i++) {
    A[i] = 0.5f * (float)i - 3.0f;
    B[i] = (float)(i % 7) - 2.0f;
  }
  int64_t sa[2] = {WR, WC}, sb[2] = {WC, WR}, sr[1] = {16};
  clt_tensor *ha = NULL, *hb = NULL, *a0 = NULL, *b0 = NULL, *a1 = NULL, *c0 = NULL, *c1 = NULL,
             *m0 = NULL, *s0 = NULL, *sd1 = NULL, *t0 = NULL, *k1 = NULL, *r0 = NULL, *rh = NULL,
             *pin = NULL, *back1 = NULL, *mv = NULL, *npy = NULL, *imported = NULL, *ga = NULL,
             *gy = NULL, *gs = NULL, *ow = NULL, *oy = NULL, *os = NULL;
  clt_event *e0 = NULL, *e1 = NULL;
  clt_params *p = NULL, *loaded = NULL, *on_cpu = NULL, *op = NULL;
  clt_optim *opt = NULL;
  char text[512];

  MAKE(clt_from_host(A, CLT_F32, 2, sa, cpu, &ha), ha);
  MAKE(clt_from_host(B, CLT_F32, 2, sb, cpu, &hb), hb);
  MAKE(clt_to(ha, d0, &a0), a0);          /* host to device */
  MAKE(clt_copy_to(hb, d0, &b0), b0);     /* host to device */
  MAKE(clt_copy_to(a0, d1, &a1), a1);     /* device to device */
  MAKE(clt_add(a0, a0, &c0), c0);         /* 2A on cl:0 */
  MAKE(clt_mul(a1, a1, &c1), c1);         /* A*A on cl:1 */
  MAKE(clt_matmul(a0, b0, &m0), m0);      /* A B on cl:0 */
  MAKE(clt_sum(c0, &s0), s0);             /* whole-tensor reduction */
  MAKE(clt_sum_dim(c1, 1, 0, &sd1), sd1); /* along a dimension */
  MAKE(clt_transpose(a0, 0, 1, &t0), t0);
  MAKE(clt_cast(a1, CLT_I32, &k1), k1);
  STEP(clt_manual_seed(42));
  MAKE(clt_rand(CLT_F32, 1, sr, d0, &r0), r0);
  STEP(clt_manual_seed(42));
  MAKE(clt_rand(CLT_F32, 1, sr, cpu, &rh), rh);
  /* pinned memory: a device-to-host copy into it, then host to device from it */
  MAKE(clt_empty_pinned(CLT_F32, 2, sa, d0, &pin), pin);
  STEP(clt_copy(pin, c0));
  MAKE(clt_to(pin, d1, &back1), back1);
  /* events and synchronization */
  MAKE(clt_event_record(d0, &e0), e0);
  MAKE(clt_event_record(d0, &e1), e1);
  STEP(clt_event_wait(e1));
  double ms;
  STEP(clt_event_elapsed_ms(e0, e1, &ms));
  STEP(clt_device_synchronize(d1));
  MAKE(clt_copy_to(t0, cpu, &mv), mv);
  STEP(clt_move(&mv, d1)); /* replaces mv only on success */
  /* parameters: moved in place (all or nothing), saved, loaded where saved and onto cpu */
  MAKE(clt_params_create(&p), p);
  STEP(clt_params_add(p, "m", m0));
  STEP(clt_params_add(p, "t", t0));
  STEP(clt_params_add(p, "k", k1));
  if ((st = clt_params_to(p, d1)) != CLT_OK) {
    CHECK(clt_params_get(p, "m") == m0 && clt_params_get(p, "t") == t0 &&
              clt_params_get(p, "k") == k1,
          "clt_params_to failed (%s) but changed the set", clt_status_name(st));
    goto out;
  }
  STEP(clt_save(w->path, p));
  MAKE(clt_load(w->path, NULL, &loaded), loaded);
  MAKE(clt_load(w->path, cpu, &on_cpu), on_cpu);
  STEP(clt_save_npy(w->path, c1));
  MAKE(clt_load_npy(w->path, d0, &npy), npy);
  STEP(clt_format(s0, text, sizeof text, NULL));
#ifdef HAVE_DLPACK
  /* exported and imported again, without a copy */
  DLManagedTensor *dl = CU_SENTINEL;
  if ((st = clt_to_dlpack(c1, &dl)) != CLT_OK) {
    CHECK((void *)dl == CU_SENTINEL, "clt_to_dlpack failed but wrote its out-parameter");
    goto out;
  }
  imported = CU_SENTINEL;
  if ((st = clt_from_dlpack(dl, &imported)) != CLT_OK) {
    CHECK((void *)imported == CU_SENTINEL, "clt_from_dlpack failed but wrote its out-parameter");
    imported = NULL;
    dl->deleter(dl); /* still ours */
    goto out;
  }
#endif
  /* autograd: d sum(A*A) / dA on cl:0, with a leaf of its own over a0's memory */
  MAKE(clt_detach(a0, &ga), ga);
  STEP(clt_requires_grad_(ga, 1));
  MAKE(clt_mul(ga, ga, &gy), gy);
  MAKE(clt_sum(gy, &gs), gs);
  STEP(clt_backward(gs, NULL));
  /* optimizers: an SGD step with momentum on cl:0 (one kernel), the state moved to cl:1 with
   * its set (all or nothing), saved, loaded and stepped again; every value exact in f32 */
  MAKE(clt_clone(a0, &ow), ow);
  STEP(clt_requires_grad_(ow, 1));
  MAKE(clt_mul(ow, ow, &oy), oy);
  MAKE(clt_sum(oy, &os), os);
  STEP(clt_backward(os, NULL)); /* ow.grad = 2A */
  MAKE(clt_params_create(&op), op);
  STEP(clt_params_add(op, "w", ow));
  MAKE(clt_optim_sgd(op, 0.25, 0.5, 0, &opt), opt);
  STEP(clt_optim_step(opt)); /* buf = 2A, w = A - 0.25 * 2A = A / 2 */
  if ((st = clt_params_to(op, d1)) != CLT_OK) {
    CHECK(clt_params_get(op, "w") == ow, "clt_params_to failed (%s) but changed the set",
          clt_status_name(st));
    goto out;
  }
  STEP(clt_optim_save(w->path, opt));
  STEP(clt_optim_load(w->path, opt, NULL));
  STEP(clt_optim_step(opt)); /* buf = 0.5 * 2A + 2A = 3A, w = A / 2 - 0.25 * 3A = -A / 4 */
  STEP(clt_device_synchronize(NULL));

  /* Everything succeeded: the results must be right. */
  CHECK(clt_tensor_grad(ga), "no gradient after clt_backward");
  for (int i = 0; i < WN; i++)
    want[i] = 2.0f * A[i];
  if (clt_tensor_grad(ga))
    STEP(check_values(w, "d sum(A*A) / dA (autograd, on cl:0)", clt_tensor_grad(ga), want, WN));
  for (int i = 0; i < WN; i++)
    want[i] = -0.25f * A[i];
  clt_tensor *ow1 = clt_params_get(op, "w");
  CHECK(ow1 && clt_tensor_device(ow1) == d1, "the optimized 'w' is not on %s",
        clt_device_name(d1));
  if (ow1)
    STEP(check_values(w, "two SGD steps (cl:0, then moved to cl:1)", ow1, want, WN));
  for (int i = 0; i < WN; i++)
    want[i] = 2.0f * A[i];
  STEP(check_values(w, "2A (via pinned memory, on cl:1)", back1, want, WN));
  for (int i = 0; i < WN; i++)
    want[i] = A[i] * A[i];
  STEP(check_values(w, "A*A (.npy round trip)", npy, want, WN));
#ifdef HAVE_DLPACK
  STEP(check_values(w, "A*A (DLPack round trip)", imported, want, WN));
#endif
  for (int i = 0; i < WR; i++)
    for (int j = 0; j < WR; j++) {
      float acc = 0;
      for (int k = 0; k < WC; k++)
        acc += A[i * WC + k] * B[k * WR + j];
      want[i * WR + j] = acc;
    }
  clt_tensor *lm = clt_params_get(loaded, "m");
  CHECK(lm && clt_tensor_device(lm) == d1, "the loaded 'm' is not on %s", clt_device_name(d1));
  if (lm)
    STEP(check_values(w, "A B (saved from cl:1, loaded)", lm, want, WR * WR));
  for (int i = 0; i < WC; i++)
    for (int j = 0; j < WR; j++)
      want[i * WR + j] = A[j * WC + i];
  clt_tensor *lt = clt_params_get(on_cpu, "t");
  CHECK(lt && clt_tensor_device(lt) == cpu, "the 't' loaded onto cpu is not there");
  if (lt)
    STEP(check_values(w, "A transposed (loaded onto cpu)", lt, want, WN));
  STEP(check_values(w, "A transposed (moved to cl:1)", mv, want, WN));
  int32_t ki[WN];
  STEP(clt_tensor_read(clt_params_get(loaded, "k"), ki, sizeof ki));
  for (int i = 0; i < WN; i++)
    CHECK(ki[i] == (int32_t)A[i], "cast to i32: element %d is %d, expected %d", i, (int)ki[i],
          (int)(int32_t)A[i]);
  double total = 0, want_total = 0;
  for (int i = 0; i < WN; i++)
    want_total += 2.0 * A[i];
  STEP(clt_item(s0, &total));
  CHECK(total == want_total, "sum(2A) is %g, expected %g", total, want_total);
  for (int i = 0; i < WR; i++) {
    want[i] = 0;
    for (int j = 0; j < WC; j++)
      want[i] += A[i * WC + j] * A[i * WC + j];
  }
  STEP(check_values(w, "row sums of A*A", sd1, want, WR));
  float rv[16];
  STEP(clt_tensor_read(rh, rv, sizeof rv));
  STEP(check_values(w, "rand on cl:0 against cpu (same seed)", r0, rv, 16));
  CHECK(strstr(text, "tensor(") == text, "clt_format gave '%s'", text);
  CHECK(ms >= 0, "elapsed time %g ms", ms);

out:
  if (w->calm_cleanup)
    clt__fault_reset(); /* counts stay; the releases below run without faults */
  clt_tensor_release(ha);
  clt_tensor_release(hb);
  clt_tensor_release(a0);
  clt_tensor_release(b0);
  clt_tensor_release(a1);
  clt_tensor_release(c0);
  clt_tensor_release(c1);
  clt_tensor_release(m0);
  clt_tensor_release(s0);
  clt_tensor_release(sd1);
  clt_tensor_release(t0);
  clt_tensor_release(k1);
  clt_tensor_release(r0);
  clt_tensor_release(rh);
  clt_tensor_release(pin);
  clt_tensor_release(back1);
  clt_tensor_release(mv);
  clt_tensor_release(npy);
  clt_tensor_release(imported);
  clt_tensor_release(ga);
  clt_tensor_release(gy);
  clt_tensor_release(gs);
  clt_event_release(e0);
  clt_event_release(e1);
  clt_params_release(p);
  clt_params_release(loaded);
  clt_params_release(on_cpu);
  clt_tensor_release(ow);
  clt_tensor_release(oy);
  clt_tensor_release(os);
  clt_optim_release(opt);
  clt_params_release(op);
  unlink(w->path);
  return st;
}
#undef STEP
#undef MAKE
#undef CHECK

/* ---- one child: earlier tensors, the workload under a fault, the checks after -------------- */

#define EARLIER_N 257

static clt_tensor *make_earlier(clt_device *d, float base, report *r) {
  float v[EARLIER_N];
  for (int i = 0; i < EARLIER_N; i++)
    v[i] = base + (float)i * 0.25f;
  int64_t n = EARLIER_N;
  clt_tensor *t = NULL;
  if (clt_from_host(v, CLT_F32, 1, &n, d, &t) != CLT_OK)
    flag(r, "making an earlier tensor on %s failed: %s", clt_device_name(d), clt_last_error());
  return t;
}

static void check_earlier(clt_tensor *t, float base, report *r) {
  float v[EARLIER_N];
  if (clt_tensor_read(t, v, sizeof v) != CLT_OK) {
    flag(r, "reading an earlier tensor on %s failed: %s", clt_device_name(clt_tensor_device(t)),
         clt_last_error());
    return;
  }
  for (int i = 0; i < EARLIER_N; i++)
    if (v[i] != base + (float)i * 0.25f) {
      flag(r, "the earlier tensor on %s changed at %d: %g", clt_device_name(clt_tensor_device(t)),
           i, (double)v[i]);
      return;
    }
}

/* A fresh operation on d after the fault: 3 + earlier, summed. */
static void check_fresh(clt_device *d, clt_tensor *earlier, float base, report *r) {
  int64_t n = EARLIER_N;
  clt_tensor *x = NULL, *y = NULL, *s = NULL;
  double got = 0, want = 0;
  for (int i = 0; i < EARLIER_N; i++)
    want += 3.0 + base + i * 0.25;
  if (clt_full(CLT_F32, 1, &n, 3.0, d, &x) != CLT_OK || clt_add(x, earlier, &y) != CLT_OK ||
      clt_sum(y, &s) != CLT_OK || clt_item(s, &got) != CLT_OK)
    flag(r, "a fresh operation on %s failed after the fault: %s", clt_device_name(d),
         clt_last_error());
  else if (fabs(got - want) > 1e-3 * fabs(want))
    flag(r, "a fresh operation on %s gave %g, expected %g", clt_device_name(d), got, want);
  clt_tensor_release(x);
  clt_tensor_release(y);
  clt_tensor_release(s);
}

static cl_uint context_refs(clt_device *d) {
  cl_uint n = 0;
  clGetContextInfo(clt__cl(d)->context, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL);
  return n;
}

static cl_uint queue_refs(clt_device *d) {
  cl_uint n = 0;
  clGetCommandQueueInfo(clt__cl(d)->queue, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, NULL);
  return n;
}

/* The OpenCL objects clt holds: each device's queue references (one, plus one per live event)
 * and its context's (one per device, per live buffer or user event, and per cached program). */
static void cl_objects(clt_device **devs, int nd, long *ctx_extra, long *queue_extra) {
  *ctx_extra = *queue_extra = 0;
  for (int v = 1; v < nd; v++) {
    *queue_extra += (long)queue_refs(devs[v]);
    bool first = true; /* count each context once, through its first device */
    for (int u = 1; u < v; u++)
      first = first && clt__cl(devs[u])->context != clt__cl(devs[v])->context;
    if (!first)
      continue;
    long programs = 0;
    for (int u = 1; u < nd; u++)
      if (clt__cl(devs[u])->context == clt__cl(devs[v])->context)
        programs += clt__program_count(devs[u]);
    *ctx_extra += (long)context_refs(devs[v]) - programs;
  }
}

typedef struct walk_config {
  clt_fault_kind kind;
  unsigned flags;
  bool contexts_per_device; /* CLT_CONTEXT_PER_DEVICE=1: cross-context copies and events */
} walk_config;

/* The child: n = 0 counts, n >= 1 arms the n-th call of the kind. */
static void child(const walk_config *c, long n, report *r) {
  /* Builds in the calling thread: a program not yet built is otherwise built on a thread of its
   * own, its kernel launched behind the build (lib/opencl/deferred.c), and the walk's counts of
   * calls and OpenCL objects would depend on when that thread runs. The deferred launch's own
   * failures are tests/check_reduce.c's (test_reduce_deferred_build_error). */
  setenv("CLT_BACKGROUND_BUILDS", "0", 1);
  if (c->contexts_per_device)
    setenv("CLT_CONTEXT_PER_DEVICE", "1", 1);
  clt_device *devs[CU_MAX_DEVICES];
  int nd = 1;
  devs[0] = clt_cpu();
  for (int i = 0; i < clt_device_count() && nd < CU_MAX_DEVICES; i++)
    if (cu_is_cl(clt_device_at(i))) /* the walk counts OpenCL objects (cl_objects) */
      devs[nd++] = clt_device_at(i);
  if (nd < 2) {
    flag(r, "no OpenCL device");
    return;
  }
  workload w = {.cpu = devs[0],
                .d0 = devs[1],
                .d1 = devs[nd > 2 ? 2 : 1],
                .r = r,
                .calm_cleanup = (c->flags & CLT__FAULT_STICKY) != 0};
  const char *tmp = getenv("TMPDIR");
  snprintf(w.path, sizeof w.path, "%s/clt-faults-%ld.bin", tmp && *tmp ? tmp : "/tmp",
           (long)getpid());
  /* CLBlast keeps its compiled programs for the life of the process (a context reference
   * each): let it make them before the count starts. */
  bool clblast = false;
  for (int v = 1; v < nd; v++) {
    const char *path = clt_matmul_path(devs[v]);
    if (path && strcmp(path, "clblast") == 0) {
      clblast = true;
      int64_t sq[2] = {WR, WR};
      clt_tensor *x = NULL, *y = NULL;
      if (clt_ones(CLT_F32, 2, sq, devs[v], &x) != CLT_OK || clt_matmul(x, x, &y) != CLT_OK ||
          clt_device_synchronize(devs[v]) != CLT_OK)
        flag(r, "warming CLBlast up on %s failed: %s", clt_device_name(devs[v]), clt_last_error());
      clt_tensor_release(x);
      clt_tensor_release(y);
    }
  }
  clt_device_empty_cache(NULL);
  long ctx0, q0;
  cl_objects(devs, nd, &ctx0, &q0);

  clt_tensor *earlier[CU_MAX_DEVICES] = {NULL};
  for (int v = 0; v < nd; v++)
    earlier[v] = make_earlier(devs[v], (float)v * 100.0f, r);
  if (r->bad[0])
    return;

  clt__fault_set(c->kind, n, c->flags | CLT__FAULT_THIS_THREAD);
  r->workload_ran = 1;
  r->status = run_workload(&w);
  for (int k = 0; k < CLT__FAULT_KINDS; k++)
    r->count[k] = clt__fault_count((clt_fault_kind)k);
  r->injected = clt__fault_injected();
  snprintf(r->site, sizeof r->site, "%s", clt__fault_site());
  clt__fault_reset();
  snprintf(r->message, sizeof r->message, "%s", r->status == CLT_OK ? "" : clt_last_error());

  /* After the fault: earlier tensors intact, every device working. */
  for (int v = 0; v < nd; v++) {
    check_earlier(earlier[v], (float)v * 100.0f, r);
    check_fresh(devs[v], earlier[v], (float)v * 100.0f, r);
    clt_tensor_release(earlier[v]);
  }
  /* Nothing held: no tensor memory, no buffer, event or user event left in OpenCL. */
  if (clt_device_synchronize(NULL) != CLT_OK)
    flag(r, "clt_device_synchronize failed after the fault: %s", clt_last_error());
  clt_device_empty_cache(NULL);
  for (int v = 0; v < nd; v++) {
    clt_memory_stats m;
    clt_device_memory_stats(devs[v], &m);
    if (m.allocated_bytes != 0 || m.cached_bytes != 0)
      flag(r, "%llu bytes still allocated (%llu cached) on %s after everything was released",
           (unsigned long long)m.allocated_bytes, (unsigned long long)m.cached_bytes,
           clt_device_name(devs[v]));
  }
  long ctx1, q1;
  /* callbacks may still be releasing events: up to 5 s. (A context reference the 60-gpu lane
   * once saw held was no slowness: pinned memory's unmap was never flushed, and Oclgrind kept it
   * queued; lib/opencl/memory.c flushes it now.) */
  for (int tries = 0; tries < 1000; tries++) {
    cl_objects(devs, nd, &ctx1, &q1);
    if (ctx1 <= ctx0 && q1 <= q0)
      break;
    usleep(5000);
  }
  /* Fewer references than before would be a release too many, except that CLBlast drops
   * events it held at the start. */
  if (ctx1 > ctx0 || q1 > q0 || (!clblast && (ctx1 != ctx0 || q1 != q0)))
    flag(r,
         "OpenCL objects leaked or released too often: context references %+ld (buffers, "
         "user events), queue references %+ld (events)",
         ctx1 - ctx0, q1 - q0);
}

/* Runs child() in a process of its own; false (with the report's bad set) if it crashed, hung,
 * or exited with a failure status (LeakSanitizer's, for one). */
static void spawn(const walk_config *c, long n, report *out) {
  memset(out, 0, sizeof *out);
  report *shared =
      mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_msg(shared != MAP_FAILED, "mmap: %s", strerror(errno));
  memset(shared, 0, sizeof *shared);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    alarm(120); /* a hang ends as SIGALRM */
    child(c, n, shared);
    exit(0); /* through exit(): LeakSanitizer checks at exit */
  }
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
    ;
  *out = *shared;
  munmap(shared, sizeof *shared);
  if (WIFSIGNALED(ws))
    snprintf(out->bad, sizeof out->bad, "the child died of signal %d (%s)%s", WTERMSIG(ws),
             strsignal(WTERMSIG(ws)), WTERMSIG(ws) == SIGALRM ? ": it hung" : "");
  else if (WEXITSTATUS(ws) != 0 && !out->bad[0])
    snprintf(out->bad, sizeof out->bad,
             "the child exited with status %d (a sanitizer's report, such as a leak, is on "
             "stderr)",
             WEXITSTATUS(ws));
}

/* Counts the workload's calls of c's kind, then fails each in turn. */
static void walk(const walk_config *c, const char *test) {
  if (!cu_forked) {
    cu_skip(test, "needs CK_FORK (it forks a process per injected fault)");
    return;
  }
  const char *kind = clt__fault_kind_name(c->kind);
  bool sticky = c->flags & CLT__FAULT_STICKY;
  report r;
  spawn(c, 0, &r);
  ck_assert_msg(!r.bad[0], "%s: the workload without faults: %s", test, r.bad);
  ck_assert_msg(r.status == CLT_OK, "%s: the workload failed without faults: %s", test, r.message);
  long sites = r.count[c->kind];
  ck_assert_msg(sites > 0, "%s: the workload makes no %s calls", test, kind);
  ck_assert_msg(r.count[CLT__FAULT_ANY] == r.count[CLT__FAULT_ALLOC] + r.count[CLT__FAULT_ENQUEUE] +
                                               r.count[CLT__FAULT_BUILD] + r.count[CLT__FAULT_HOST],
                "%s: 'any' counted %ld calls, the kinds %ld/%ld/%ld/%ld", test,
                r.count[CLT__FAULT_ANY], r.count[CLT__FAULT_ALLOC], r.count[CLT__FAULT_ENQUEUE],
                r.count[CLT__FAULT_BUILD], r.count[CLT__FAULT_HOST]);
  if (fig && !c->contexts_per_device && c->kind < CLT__FAULT_ANY)
    fig->sites[c->kind] = sites;
  /* CLT_FAULT_WALK_STRIDE=k fails only every k-th call (and the last), for a quicker run;
   * CLT_FAULT_WALK_STRIDE_HOST (_ALLOC, _ENQUEUE, _BUILD) sets it for one kind (.ci/lanes/60-gpu
   * walks the host's allocations, hundreds of sites that no device changes, with a stride on
   * the simulator, where each run of the workload takes a second). */
  char ename[64];
  snprintf(ename, sizeof ename, "CLT_FAULT_WALK_STRIDE_%s", kind);
  for (char *p = ename; *p; p++)
    *p = (char)toupper((unsigned char)*p);
  const char *e = getenv(ename);
  if (!e || !*e)
    e = getenv("CLT_FAULT_WALK_STRIDE");
  long stride = e && atol(e) > 1 ? atol(e) : 1, walked = 0;
  long errors = 0, recovered = 0, missed = 0;
  for (long n = 1; n <= sites; n = n < sites && n + stride > sites ? sites : n + stride) {
    walked++;
    spawn(c, n, &r);
    ck_assert_msg(!r.bad[0], "%s: %s call %ld (%s) failing: %s (the workload returned %s: %s)",
                  test, kind, n, r.site, r.bad, clt_status_name(r.status), r.message);
    if (r.injected == 0) {
      /* The workload made fewer calls this time. Not every count is fixed: a host buffer that
       * a driver callback returns to the cache a little later or earlier carries events of
       * other contexts, and reusing it bridges them with user events (or not). */
      ck_assert_msg(r.status == CLT_OK, "%s: the workload failed with no fault injected: %s", test,
                    r.message);
      missed++;
      continue;
    }
    if (r.status != CLT_OK) {
      ck_assert_msg(strncmp(r.message, "clt_", 4) == 0 && strstr(r.message, ": ") != NULL,
                    "%s: %s call %ld (%s) failing gave %s with the message '%s'", test, kind, n,
                    r.site, clt_status_name(r.status), r.message);
      errors++;
    } else {
      /* Recovered: the workload checked its results. A sticky fault that failed more than one
       * call leaves nothing to recover with; one that failed only the last call is a fault once
       * (a best-effort allocation, such as lib/lazy.c's memo of an evaluation, may be that). */
      ck_assert_msg(!sticky || r.injected == 1,
                    "%s: %s calls from %ld on (%s first) failing gave no error", test, kind, n,
                    r.site);
      recovered++;
    }
  }
  printf("%s: %ld of %ld %s calls failed one at a time%s: %ld errors, %ld recovered, %ld not "
         "reached\n",
         test, walked, sites, kind, sticky ? " (and every later one)" : "", errors, recovered,
         missed);
  fflush(stdout);
  ck_assert_msg(missed * 10 <= walked, "%s: %ld of the %ld %s calls tried were not made again",
                test, missed, walked, kind);
  if (fig) {
    __atomic_add_fetch(&fig->injected, errors + recovered, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fig->errors, errors, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fig->recovered, recovered, __ATOMIC_RELAXED);
  }
}

#define WALK_TEST(name, kind_, flags_, per_device)                                                 \
  START_TEST(name) {                                                                               \
    walk_config c = {kind_, flags_, per_device};                                                   \
    walk(&c, #name);                                                                               \
  }                                                                                                \
  END_TEST

WALK_TEST(test_alloc_sticky, CLT__FAULT_ALLOC, CLT__FAULT_STICKY, false)
WALK_TEST(test_alloc_once, CLT__FAULT_ALLOC, 0, false)
WALK_TEST(test_enqueue_sticky, CLT__FAULT_ENQUEUE, CLT__FAULT_STICKY, false)
WALK_TEST(test_enqueue_once, CLT__FAULT_ENQUEUE, 0, false)
WALK_TEST(test_build_sticky, CLT__FAULT_BUILD, CLT__FAULT_STICKY, false)
WALK_TEST(test_build_once, CLT__FAULT_BUILD, 0, false)
WALK_TEST(test_host_sticky, CLT__FAULT_HOST, CLT__FAULT_STICKY, false)
WALK_TEST(test_host_once, CLT__FAULT_HOST, 0, false)
WALK_TEST(test_contexts_alloc_once, CLT__FAULT_ALLOC, 0, true)
WALK_TEST(test_contexts_enqueue_sticky, CLT__FAULT_ENQUEUE, CLT__FAULT_STICKY, true)

/* CLT_FAULT in the environment arms the same switch for a whole program. */
/* CLT_FAULT_DELAY_US holds every command back behind a gate (lib/fault.c): the device runs behind
 * the host, as a GPU does. The add below cannot finish before its gate opens, so synchronize
 * waits at least the delay after the add was enqueued; and the result is still right. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

START_TEST(test_delay) {
  if (!cu_forked) {
    cu_skip("test_delay", "needs a fresh process (CK_FORK=no): the delay is read once");
    return;
  }
  if (!cu_need_cl("test_delay", 1))
    return;
  setenv("CLT_FAULT_DELAY_US", "300000", 1);
  clt_device *d = NULL;
  CU_OK(clt_device_get("cl:0", &d));
  int64_t shape[1] = {1000};
  clt_tensor *a = NULL, *b = NULL;
  CU_OK(clt_full(CLT_F32, 1, shape, 1.5, d, &a));
  double t0 = now_s();
  CU_OK(clt_add(a, a, &b));
  CU_OK(clt_device_synchronize(d));
  double waited = now_s() - t0;
  ck_assert_msg(waited >= 0.29, "synchronize returned %.3f s after the add; the delay is 0.3 s",
                waited);
  float got[1000];
  CU_OK(clt_tensor_read(b, got, sizeof got));
  for (int i = 0; i < 1000; i++)
    ck_assert_msg(got[i] == 3.0f, "element %d is %g, expected 3", i, got[i]);
  clt_tensor_release(a);
  clt_tensor_release(b);
  unsetenv("CLT_FAULT_DELAY_US");
}
END_TEST

START_TEST(test_environment) {
  if (!cu_forked) {
    cu_skip("test_environment", "needs CK_FORK (CLT_FAULT is read once per process)");
    return;
  }
  setenv("CLT_FAULT", "enqueue:1", 1);
  int64_t n = 8;
  clt_tensor *t = CU_SENTINEL;
  if (!cu_need_cl("test_environment", 1))
    return;
  CU_FAILS(clt_ones(CLT_F32, 1, &n, clt_device_at(0), &t), CLT_ERR_OPENCL, "clt_ones");
  ck_assert(t == CU_SENTINEL);
  ck_assert_msg(strstr(clt_last_error(), "clEnqueueFillBuffer") &&
                    strstr(clt_last_error(), "CL_OUT_OF_RESOURCES"),
                "%s", clt_last_error());
  ck_assert_str_eq(clt__fault_site(), "clEnqueueFillBuffer");
  CU_OK(clt_ones(CLT_F32, 1, &n, clt_device_at(0), &t)); /* once: the next call works */
  clt_tensor_release(t);
}
END_TEST

/* Device discovery that fails (no memory for its lists, no context) leaves the host alone, and
 * the host works. Runs in the test's own process: nothing has opened OpenCL there yet. */
static void discovery_fails(clt_fault_kind kind, const char *test) {
  if (!cu_forked) {
    cu_skip(test, "needs CK_FORK (devices are discovered once per process)");
    return;
  }
  clt__fault_set(kind, 1, CLT__FAULT_THIS_THREAD | CLT__FAULT_STICKY);
  int n = cu_cl_count(); /* ref:0 of CLT_REF_DEVICES opens no OpenCL context */
  long injected = clt__fault_injected();
  clt__fault_reset();
  ck_assert_msg(injected >= 1, "%s: no %s call during discovery", test, clt__fault_kind_name(kind));
  ck_assert_msg(n == 0, "%s: %d OpenCL devices although discovery failed", test, n);
  int64_t shape[1] = {4};
  clt_tensor *a, *s;
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_cpu(), &a));
  CU_OK(clt_sum(a, &s));
  double v;
  CU_OK(clt_item(s, &v));
  ck_assert(v == 4.0);
  clt_tensor_release(a);
  clt_tensor_release(s);
}

START_TEST(test_discovery_no_memory) {
  discovery_fails(CLT__FAULT_HOST, "test_discovery_no_memory");
}
END_TEST

START_TEST(test_discovery_no_context) {
  discovery_fails(CLT__FAULT_ALLOC, "test_discovery_no_context");
}
END_TEST

Suite *faults_suite(void) {
  Suite *s = suite_create("faults");
  TCase *tc = cu_tcase("faults");
  tcase_set_timeout(tc, 1200);
  tcase_add_unchecked_fixture(tc, figures_setup, figures_teardown);
  tcase_add_test(tc, test_environment);
  tcase_add_test(tc, test_delay);
  tcase_add_test(tc, test_discovery_no_memory);
  tcase_add_test(tc, test_discovery_no_context);
  tcase_add_test(tc, test_alloc_sticky);
  tcase_add_test(tc, test_alloc_once);
  tcase_add_test(tc, test_enqueue_sticky);
  tcase_add_test(tc, test_enqueue_once);
  tcase_add_test(tc, test_build_sticky);
  tcase_add_test(tc, test_build_once);
  tcase_add_test(tc, test_host_sticky);
  tcase_add_test(tc, test_host_once);
  tcase_add_test(tc, test_contexts_alloc_once);
  tcase_add_test(tc, test_contexts_enqueue_sticky);
  suite_add_tcase(s, tc);
  return s;
}

#else /* no fault injection in this build */

START_TEST(test_not_built) {
  cu_skip("faults", "fault injection is not compiled in (configure --enable-fault-injection)");
}
END_TEST

Suite *faults_suite(void) {
  Suite *s = suite_create("faults");
  TCase *tc = cu_tcase("faults");
  tcase_add_test(tc, test_not_built);
  suite_add_tcase(s, tc);
  return s;
}

#endif
