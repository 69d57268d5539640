/* SPDX-License-Identifier: MIT */
/* opencl/matmul.c - matrix products on OpenCL devices, by one of three paths (clt_matmul_path):
 *   clblast  CLBlast's GEMM on the device's queue (GPUs: tuned kernels);
 *   native   the host's CBLAS as an OpenCL native kernel in the device's queue, for CPU devices
 *            (PoCL), whose buffers are host memory: OpenBLAS on the same cores is an order of
 *            magnitude faster than CLBlast's kernels there (bench/matmul.c), and running it as a
 *            command keeps the call asynchronous and ordered by events like any kernel;
 *   kernel   kernels/matmul.cl, local-memory tiles, when neither applies.
 * CLT_MATMUL=auto|clblast|native|kernel forces one. */
#include "cl-internal.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_CLBLAST
#include <clblast_c.h>
#endif

clt_status clt__cl_matmul_path(clt_device *dev, const char *fn, clt_matmul_kind *out) {
  const char *env = getenv("CLT_MATMUL");
  bool native = clt__cl_native_ok(dev);
  if (!env || !*env || strcmp(env, "auto") == 0) {
#ifdef HAVE_CBLAS
    if (dev->kind == CLT_DEVICE_CL_CPU && native) {
      *out = CLT__MM_NATIVE;
      return CLT_OK;
    }
#endif
#ifdef HAVE_CLBLAST
    *out = CLT__MM_CLBLAST;
#else
    *out = CLT__MM_KERNEL;
#endif
    return CLT_OK;
  }
  if (strcmp(env, "kernel") == 0) {
    *out = CLT__MM_KERNEL;
    return CLT_OK;
  }
  if (strcmp(env, "clblast") == 0) {
#ifdef HAVE_CLBLAST
    *out = CLT__MM_CLBLAST;
    return CLT_OK;
#else
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "CLT_MATMUL=clblast, but clt was built without CLBlast; use auto, native "
                      "or kernel");
#endif
  }
  if (strcmp(env, "native") == 0) {
    if (!native)
      return clt__error(CLT_ERR_UNSUPPORTED, fn,
                        "CLT_MATMUL=native, but %s cannot run native kernels "
                        "(CL_EXEC_NATIVE_KERNEL); use auto, clblast or kernel",
                        dev->name);
    *out = CLT__MM_NATIVE;
    return CLT_OK;
  }
  return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                    "CLT_MATMUL is '%s'; expected auto, clblast, native or kernel", env);
}

/* ---- native: the host's BLAS as a command in the device's queue -------------------------- */

/* The context of the product (opencl/native.c fills ptr: a, b, c's buffers). */
typedef struct native_ctx {
  clt_cl_native head;
  size_t off[3];
  clt_dtype dtype;
  clt_matmul_desc g;
} native_ctx;

static void run_native(clt_cl_native *p) {
  native_ctx *c = (native_ctx *)p;
  clt__host_matmul_run(c->dtype, &c->g, (char *)p->ptr[0] + c->off[0],
                       (char *)p->ptr[1] + c->off[1], (char *)p->ptr[2] + c->off[2]);
}

static clt_status enqueue_native(clt_device *d, clt_tensor *out, const clt_tensor *a,
                                 const clt_tensor *b, const clt_matmul_desc *g, clt_waitlist *wl,
                                 const char *fn, cl_event *ev) {
  native_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  const clt_tensor *ts[3] = {a, b, out};
  cl_mem bufs[3];
  for (int i = 0; i < 3; i++) {
    ctx->off[i] = ts[i]->offset;
    bufs[i] = ts[i]->storage->buf;
  }
  ctx->head.run = run_native;
  ctx->dtype = out->dtype;
  ctx->g = *g;
  return clt__cl_enqueue_native(d, &ctx->head, 3, bufs, wl, fn, ev);
}

/* ---- clblast ------------------------------------------------------------------------------ */

#ifdef HAVE_CLBLAST
/* CLBlast (1.5.3, and its master as of 2024) must not be entered by two threads at once: its
 * tuning database is a static vector that clblast::Database's constructor fills on first use
 * without a lock (a thread reading it while another assigns it crashed tests/check_threads.c
 * test_matmul_paths, and ThreadSanitizer reports it), and two devices with one name (identical
 * GPUs; PoCL's pthread devices) compiling a routine at once both store it in its binary cache,
 * where the second store throws (CLBlastUnexpectedError, CLBlast issue #486). So every CLBlast
 * call of the process runs under this lock, taken inside the device's lock. It covers the
 * enqueue only; the product runs on the device's queue as before. */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;

static clt_status enqueue_clblast(clt_device *d, clt_tensor *out, const clt_tensor *a,
                                  const clt_tensor *b, const clt_matmul_desc *g, clt_waitlist *wl,
                                  const char *fn, cl_event *ev) {
  /* CLBlast takes no wait list: a barrier makes the in-order queue wait for other queues'
   * work on the operands first. */
  if (wl->n) {
    cl_int err = clEnqueueBarrierWithWaitList(clt__cl(d)->queue, wl->n, wl->ev, NULL);
    if (err != CL_SUCCESS)
      return clt__cl_error(err, fn, "clEnqueueBarrierWithWaitList", d);
  }
  size_t es = clt_dtype_size(out->dtype);
  size_t oa = a->offset / es, ob = b->offset / es, oc = out->offset / es;
  size_t m = (size_t)g->m, n = (size_t)g->n, k = (size_t)g->k, nb = (size_t)g->batch;
  bool f32 = out->dtype == CLT_F32;
  CLBlastStatusCode cs;
  const char *what;
  cl_mem am = a->storage->buf, bm = b->storage->buf, cm = out->storage->buf;
  size_t lda = (size_t)g->lda, ldb = (size_t)g->ldb;
  CLBlastTranspose xa = g->ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                   xb = g->tb ? CLBlastTransposeYes : CLBlastTransposeNo;
  pthread_mutex_lock(&clblast_lock);
  bool single = nb == 1 || (g->sb == 0 && !g->ta && g->sa == g->m * g->lda);
  if (single && (n == 1 || nb * m == 1)) {
    /* one column or one row of C: gemv (as host/matmul.c: the matrix as stored, its flag).
     * CLBlast's gemv computes beta * y even for beta = 0, and y is reused memory (NaN there gave
     * NaN results): it is zeroed first, on the same in-order queue. */
    bool col = n == 1;
    static const double zero = 0;
    cl_int ferr = clEnqueueFillBuffer(clt__cl(d)->queue, cm, &zero, es, oc * es, nb * m * n * es,
                                      0, NULL, NULL);
    if (ferr != CL_SUCCESS) {
      pthread_mutex_unlock(&clblast_lock);
      return clt__cl_error(ferr, fn, "clEnqueueFillBuffer", d);
    }
    size_t rows = col ? (g->ta ? k : nb * m) : (g->tb ? n : k);
    size_t cols = col ? (g->ta ? nb * m : k) : (g->tb ? k : n);
    cl_mem mat = col ? am : bm, vec = col ? bm : am;
    size_t omat = col ? oa : ob, ovec = col ? ob : oa, ld = col ? lda : ldb;
    size_t inc = col ? (g->tb ? 1 : ldb) : (g->ta ? lda : 1), incy = col ? n : 1;
    CLBlastTranspose x = (col ? g->ta : !g->tb) ? CLBlastTransposeYes : CLBlastTransposeNo;
    what = f32 ? "CLBlastSgemv" : "CLBlastDgemv";
    if (f32)
      cs = CLBlastSgemv(CLBlastLayoutRowMajor, x, rows, cols, 1.0f, mat, omat, ld, vec, ovec, inc,
                        0.0f, cm, oc, incy, &clt__cl(d)->queue, ev);
    else
      cs = CLBlastDgemv(CLBlastLayoutRowMajor, x, rows, cols, 1.0, mat, omat, ld, vec, ovec, inc,
                        0.0, cm, oc, incy, &clt__cl(d)->queue, ev);
  } else if (single) {
    /* one B for all, A's matrices one below the other: a single (batch*m, k) x (k, n) product */
    what = f32 ? "CLBlastSgemm" : "CLBlastDgemm";
    if (f32)
      cs = CLBlastSgemm(CLBlastLayoutRowMajor, xa, xb, nb * m, n, k, 1.0f, am, oa, lda, bm, ob, ldb,
                        0.0f, cm, oc, n, &clt__cl(d)->queue, ev);
    else
      cs = CLBlastDgemm(CLBlastLayoutRowMajor, xa, xb, nb * m, n, k, 1.0, am, oa, lda, bm, ob, ldb,
                        0.0, cm, oc, n, &clt__cl(d)->queue, ev);
  } else {
    what = f32 ? "CLBlastSgemmStridedBatched" : "CLBlastDgemmStridedBatched";
    if (f32)
      cs = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, xa, xb, m, n, k, 1.0f, am, oa, lda,
                                      (size_t)g->sa, bm, ob, ldb, (size_t)g->sb, 0.0f, cm, oc, n,
                                      m * n, nb, &clt__cl(d)->queue, ev);
    else
      cs = CLBlastDgemmStridedBatched(CLBlastLayoutRowMajor, xa, xb, m, n, k, 1.0, am, oa, lda,
                                      (size_t)g->sa, bm, ob, ldb, (size_t)g->sb, 0.0, cm, oc, n,
                                      m * n, nb, &clt__cl(d)->queue, ev);
  }
  pthread_mutex_unlock(&clblast_lock);
  if (cs != CLBlastSuccess) {
    if (cs > -1000) /* an OpenCL error code */
      return clt__cl_error((cl_int)cs, fn, what, d);
    return clt__error(CLT_ERR_OPENCL, fn, "%s failed on %s: CLBlast status %d", what, d->name,
                      (int)cs);
  }
  return CLT_OK;
}
#endif

/* ---- kernel: kernels/matmul.cl ------------------------------------------------------------ */

/* The tile edge and rows per work-item for d: 32 x 32 tiles of 256 work-items where the
 * device allows, smaller ones otherwise. */
static void tile_shape(const clt_device *d, int *ts, int *wpt) {
  *ts = 32;
  *wpt = 4;
  while (*ts > 4 && (size_t)(*ts * *ts / *wpt) > d->max_work_group)
    *ts /= 2;
  if (*wpt > *ts)
    *wpt = *ts;
}

static clt_status get_tiled_kernel(clt_device *d, clt_dtype dt, const char *fn, cl_kernel *k) {
  int ts, wpt;
  tile_shape(d, &ts, &wpt);
  bool f64 = dt == CLT_F64;
  char name[32], kname[48], options[256];
  snprintf(name, sizeof name, "matmul_%s", clt_dtype_name(dt));
  snprintf(kname, sizeof kname, "%s_tiled", name);
  snprintf(options, sizeof options,
           "%s#define NAME %s\n#define T %s\n#define TS %d\n#define WPT %d\n",
           clt__cl_base_options(d, f64), name, f64 ? "double" : "float", ts, wpt);
  return clt__get_kernel(d, "matmul", options, kname, fn, k);
}

void clt__cl_matmul_clear_cache(void) {
#ifdef HAVE_CLBLAST
  pthread_mutex_lock(&clblast_lock);
  CLBlastClearCache();
  pthread_mutex_unlock(&clblast_lock);
#endif
}

clt_status clt__cl_matmul_build(clt_device *d, clt_dtype dt, const char *fn) {
  cl_kernel k;
  return get_tiled_kernel(d, dt, fn, &k);
}

/* Launches the tiled kernel k (from get_tiled_kernel); the device lock is held. */
static clt_status enqueue_kernel(clt_device *d, cl_kernel k, clt_tensor *out, const clt_tensor *a,
                                 const clt_tensor *b, const clt_matmul_desc *g, clt_waitlist *wl,
                                 const char *fn, cl_event *ev) {
  int ts, wpt;
  tile_shape(d, &ts, &wpt);
  cl_mem am = a->storage->buf, bm = b->storage->buf, cm = out->storage->buf;
  if (a->offset || b->offset || out->offset)
    return clt__error(CLT_ERR_INTERNAL, fn, "the matmul kernel takes tensors at offset 0");
  cl_int m = (cl_int)g->m, n = (cl_int)g->n, kk = (cl_int)g->k;
  cl_long sa = g->sa, sb = g->sb;
  size_t local[3] = {(size_t)ts, (size_t)(ts / wpt), 1};
  size_t global[3] = {((size_t)n + ts - 1) / ts * ts, ((size_t)m + ts - 1) / ts * local[1],
                      (size_t)g->batch};
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &am);
  err |= clSetKernelArg(k, 1, sizeof(cl_mem), &bm);
  err |= clSetKernelArg(k, 2, sizeof(cl_mem), &cm);
  err |= clSetKernelArg(k, 3, sizeof m, &m);
  err |= clSetKernelArg(k, 4, sizeof n, &n);
  err |= clSetKernelArg(k, 5, sizeof kk, &kk);
  err |= clSetKernelArg(k, 6, sizeof sa, &sa);
  err |= clSetKernelArg(k, 7, sizeof sb, &sb);
  if (err != CL_SUCCESS)
    return clt__error(CLT_ERR_OPENCL, fn, "setting the arguments of the matmul kernel on %s failed",
                      d->name);
  err = clEnqueueNDRangeKernel(clt__cl(d)->queue, k, 3, NULL, global, local, wl->n,
                               wl->n ? wl->ev : NULL, ev);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clEnqueueNDRangeKernel", d);
  return CLT_OK;
}

typedef struct matmul_args {
  clt_matmul_kind kind;
  cl_kernel k; /* the tiled kernel (CLT__MM_KERNEL) */
  clt_tensor *out;
  const clt_tensor *a, *b;
  const clt_matmul_desc *g;
} matmul_args;

static clt_status enqueue_matmul(clt_device *d, clt_waitlist *wl, void *ctx, const char *fn,
                                 cl_event *ev) {
  const matmul_args *m = ctx;
  switch (m->kind) {
  case CLT__MM_NATIVE:
    return enqueue_native(d, m->out, m->a, m->b, m->g, wl, fn, ev);
#ifdef HAVE_CLBLAST
  case CLT__MM_CLBLAST:
    return enqueue_clblast(d, m->out, m->a, m->b, m->g, wl, fn, ev);
#endif
  default:
    return enqueue_kernel(d, m->k, m->out, m->a, m->b, m->g, wl, fn, ev);
  }
}

clt_status clt__cl_matmul(clt_tensor *out, const clt_tensor *a, const clt_tensor *b,
                          const clt_matmul_desc *g, const char *fn) {
  clt_device *d = out->storage->dev;
  clt_matmul_kind kind;
  clt_status st = clt__cl_matmul_path(d, fn, &kind);
  if (st != CLT_OK)
    return st;
  cl_kernel k = NULL;
  if (kind == CLT__MM_KERNEL && (st = get_tiled_kernel(d, out->dtype, fn, &k)) != CLT_OK)
    return st;
  clt_storage *reads[2] = {a->storage, b->storage};
  matmul_args m = {kind, k, out, a, b, g};
  return clt__cl_submit(d, reads, 2, &out->storage, 1, enqueue_matmul, &m, fn, NULL);
}
