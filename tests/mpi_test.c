/* SPDX-License-Identifier: MIT */
/* mpi_test.c - libclt_mpi under mpirun (run by tests/mpi.sh with 2 and 3 ranks).
 *
 * Every collective x every dtype x (host, this rank's device) against a reference that each
 * rank computes alone from the generator gen(), which gives every rank's data; then the error
 * paths: ranks passing different shapes, dtypes, ops, a NULL tensor, and a send/recv pair that
 * disagree must all fail with the same status on every rank, promptly, and leave the
 * communicator usable. Then the chunked staging of device tensors: ranks whose tensors live on
 * different kinds of devices or who set different chunk sizes, pending kernels that write the
 * tensor right before the call (the staging must wait for them) and work that reads the result
 * right after (it must wait for the copies back), these two and 64 MiB tensors in several chunk
 * sizes, chunk boundaries that do not divide the tensor included, with --large only. In a build
 * with --enable-fault-injection, without --large: faults in the middle of every collective on
 * one rank (test_faults). With --ref (and CLT_REF_DEVICES=1), the device tests again on ref:0
 * of the reference backend, mixed with ranks on the host and on OpenCL devices. tests/mpi.sh
 * runs it again with tiny chunks and MPI counts ($CLT_MPI_CHUNK, $CLT_MPI_MAX_COUNT) so that every
 * collective crosses chunk boundaries. Exit status 0 if every check passed on every rank, 1
 * otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#include "clt_mpi.h"

#ifdef CLT_FAULT_INJECTION
#define CLT_FAULT_NO_REDIRECT /* the test's own allocations are not counted */
#include "fault.h"
#endif

static int rank, size, checks, failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    checks++;                                                                                      \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__);                          \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, " [last error: %s]\n", clt_last_error());                                    \
    }                                                                                              \
  } while (0)

static const clt_dtype dtypes[] = {CLT_F32, CLT_F64,  CLT_I32, CLT_I64,
                                   CLT_U8,  CLT_BOOL, CLT_F16, CLT_BF16};
static const char *op_names[] = {"sum", "max", "min", "mean"};

/* Element i of rank r's tensor: small integers, so that sums are exact in every dtype. */
static double gen(int r, int64_t i, clt_dtype dt) {
  if (dt == CLT_BOOL)
    return (r + i) % 3 == 0;
  double v = (double)((r * 7 + i * 3) % 11);
  return dt == CLT_U8 ? v : v - 5;
}

/* The f16 and bf16 bits of a small integer v (exact in both), and back. */
static uint16_t half_bits(clt_dtype dt, double v) {
  if (v == 0)
    return 0;
  int e;
  double m = frexp(fabs(v), &e); /* |v| = m 2^e, m in [0.5, 1) */
  int man = dt == CLT_F16 ? 10 : 7, bias = dt == CLT_F16 ? 15 : 127;
  unsigned frac = (unsigned)ldexp(m * 2 - 1, man);
  return (uint16_t)((v < 0 ? 0x8000u : 0) | (unsigned)(e - 1 + bias) << man | frac);
}
static double half_value(clt_dtype dt, uint16_t h) {
  int man = dt == CLT_F16 ? 10 : 7, bias = dt == CLT_F16 ? 15 : 127;
  unsigned e = (h & 0x7fffu) >> man, frac = h & ((1u << man) - 1);
  double v = e ? ldexp(1 + ldexp(frac, -man), (int)e - bias) : 0;
  return h & 0x8000u ? -v : v;
}

static void set_elem(void *buf, clt_dtype dt, int64_t i, double v) {
  switch (dt) {
  case CLT_F16:
  case CLT_BF16:
    ((uint16_t *)buf)[i] = half_bits(dt, v);
    break;
  case CLT_F32:
    ((float *)buf)[i] = (float)v;
    break;
  case CLT_F64:
    ((double *)buf)[i] = v;
    break;
  case CLT_I32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case CLT_I64:
    ((int64_t *)buf)[i] = (int64_t)v;
    break;
  default:
    ((uint8_t *)buf)[i] = (uint8_t)v;
  }
}

static double get_elem(const void *buf, clt_dtype dt, int64_t i) {
  switch (dt) {
  case CLT_F16:
  case CLT_BF16:
    return half_value(dt, ((const uint16_t *)buf)[i]);
  case CLT_F32:
    return ((const float *)buf)[i];
  case CLT_F64:
    return ((const double *)buf)[i];
  case CLT_I32:
    return ((const int32_t *)buf)[i];
  case CLT_I64:
    return (double)((const int64_t *)buf)[i];
  default:
    return ((const uint8_t *)buf)[i];
  }
}

/* A tensor of rank r's data (element i + first) on dev; NULL on failure. */
static clt_tensor *make(clt_dtype dt, int ndim, const int64_t *shape, int r, int64_t first,
                        clt_device *dev) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++)
    n *= shape[d];
  void *buf = malloc((size_t)(n ? n : 1) * clt_dtype_size(dt));
  for (int64_t i = 0; i < n; i++)
    set_elem(buf, dt, i, gen(r, i + first, dt));
  clt_tensor *t = NULL;
  clt_status st = clt_from_host(buf, dt, ndim, shape, dev, &t);
  free(buf);
  CHECK(st == CLT_OK, "clt_from_host %s on %s", clt_dtype_name(dt), clt_device_name(dev));
  return t;
}

/* t's elements (a malloc'ed copy), or NULL. */
static void *contents(clt_tensor *t) {
  size_t n = clt_tensor_nbytes(t);
  void *buf = malloc(n ? n : 1);
  clt_status st = clt_tensor_read(t, buf, n);
  CHECK(st == CLT_OK, "clt_tensor_read");
  if (st != CLT_OK) {
    free(buf);
    return NULL;
  }
  return buf;
}

static double reference(clt_mpi_op op, clt_dtype dt, int64_t i) {
  double acc = gen(0, i, dt);
  for (int r = 1; r < size; r++) {
    double v = gen(r, i, dt);
    if (op == CLT_MPI_MAX || (op == CLT_MPI_SUM && dt == CLT_BOOL))
      acc = v > acc ? v : acc;
    else if (op == CLT_MPI_MIN)
      acc = v < acc ? v : acc;
    else
      acc += v;
  }
  return op == CLT_MPI_MEAN ? acc / size : acc;
}

static int close_enough(double got, double want) {
  return fabs(got - want) <= 1e-6 * (1 + fabs(want));
}

static void test_allreduce(clt_device *dev) {
  const int64_t shape[2] = {3, 5};
  for (int o = CLT_MPI_SUM; o <= CLT_MPI_MEAN; o++)
    for (size_t k = 0; k < sizeof dtypes / sizeof *dtypes; k++) {
      clt_dtype dt = dtypes[k];
      if (dt == CLT_F64 && !clt_device_has_fp64(dev))
        continue;
      clt_tensor *t = make(dt, 2, shape, rank, 0, dev);
      clt_status st = clt_mpi_allreduce(t, (clt_mpi_op)o, MPI_COMM_WORLD);
      if (dt == CLT_F16 || dt == CLT_BF16) { /* MPI cannot add them: refused on every rank */
        CHECK(st == CLT_ERR_DTYPE, "allreduce %s %s gives %s", op_names[o], clt_dtype_name(dt),
              clt_status_name(st));
        clt_tensor_release(t);
        continue;
      }
      if (o == CLT_MPI_MEAN && dt != CLT_F32 && dt != CLT_F64) {
        CHECK(st == CLT_ERR_DTYPE, "allreduce mean %s gives %s", clt_dtype_name(dt),
              clt_status_name(st));
        clt_tensor_release(t);
        continue;
      }
      CHECK(st == CLT_OK, "allreduce %s %s on %s", op_names[o], clt_dtype_name(dt),
            clt_device_name(dev));
      CHECK(clt_tensor_device(t) == dev, "allreduce moved the tensor");
      void *got = st == CLT_OK ? contents(t) : NULL;
      for (int64_t i = 0; got && i < 15; i++) {
        double want = reference((clt_mpi_op)o, dt, i);
        if (!close_enough(get_elem(got, dt, i), want)) {
          CHECK(0, "allreduce %s %s on %s: element %lld is %g, want %g", op_names[o],
                clt_dtype_name(dt), clt_device_name(dev), (long long)i, get_elem(got, dt, i), want);
          break;
        }
      }
      free(got);
      clt_tensor_release(t);
    }
}

static void test_broadcast(clt_device *dev) {
  const int64_t shape[1] = {7};
  for (size_t k = 0; k < sizeof dtypes / sizeof *dtypes; k++) {
    clt_dtype dt = dtypes[k];
    if (dt == CLT_F64 && !clt_device_has_fp64(dev))
      continue;
    int root = (int)k % size;
    clt_tensor *t = make(dt, 1, shape, rank, 0, dev);
    clt_status st = clt_mpi_broadcast(t, root, MPI_COMM_WORLD);
    CHECK(st == CLT_OK, "broadcast %s from %d on %s", clt_dtype_name(dt), root,
          clt_device_name(dev));
    void *got = st == CLT_OK ? contents(t) : NULL;
    for (int64_t i = 0; got && i < 7; i++)
      if (get_elem(got, dt, i) != gen(root, i, dt)) {
        CHECK(0, "broadcast %s on %s: element %lld is %g, want %g", clt_dtype_name(dt),
              clt_device_name(dev), (long long)i, get_elem(got, dt, i), gen(root, i, dt));
        break;
      }
    free(got);
    clt_tensor_release(t);
  }
}

/* Rank r passes r + 1 rows of 4: the first dimensions differ, the rest agree. */
static void test_allgather(clt_device *dev) {
  for (size_t k = 0; k < sizeof dtypes / sizeof *dtypes; k++) {
    clt_dtype dt = dtypes[k];
    if (dt == CLT_F64 && !clt_device_has_fp64(dev))
      continue;
    const int64_t shape[2] = {rank + 1, 4};
    clt_tensor *t = make(dt, 2, shape, rank, 0, dev), *out = NULL;
    clt_status st = clt_mpi_allgather(t, MPI_COMM_WORLD, &out);
    CHECK(st == CLT_OK, "allgather %s on %s", clt_dtype_name(dt), clt_device_name(dev));
    int64_t rows = (int64_t)size * (size + 1) / 2;
    if (st == CLT_OK) {
      CHECK(clt_tensor_device(out) == dev, "allgather result on %s",
            clt_device_name(clt_tensor_device(out)));
      CHECK(clt_tensor_ndim(out) == 2 && clt_tensor_shape(out)[0] == rows &&
                clt_tensor_shape(out)[1] == 4,
            "allgather shape");
      CHECK(clt_tensor_dtype(out) == dt, "allgather dtype");
      void *got = contents(out);
      int64_t j = 0;
      for (int r = 0; got && r < size; r++)
        for (int64_t i = 0; i < (r + 1) * 4; i++, j++)
          if (get_elem(got, dt, j) != gen(r, i, dt)) {
            CHECK(0, "allgather %s on %s: element %lld is %g, want %g", clt_dtype_name(dt),
                  clt_device_name(dev), (long long)j, get_elem(got, dt, j), gen(r, i, dt));
            r = size;
            break;
          }
      free(got);
    }
    clt_tensor_release(out);
    clt_tensor_release(t);
  }
}

/* Rank 0 sends to the last rank, which sends it on, modified by nothing, back to rank 0; the
 * sender's tensor on one device and the receiver's on the other. */
static void test_send_recv(clt_device *dev) {
  const int64_t shape[2] = {2, 3};
  int last = size - 1;
  for (size_t k = 0; k < sizeof dtypes / sizeof *dtypes; k++) {
    clt_dtype dt = dtypes[k];
    if (dt == CLT_F64 && !clt_device_has_fp64(dev))
      continue;
    if (rank == 0) {
      clt_tensor *t = make(dt, 2, shape, 0, 0, clt_cpu()), *back = NULL;
      CHECK(clt_mpi_send(t, last, 5, MPI_COMM_WORLD) == CLT_OK, "send %s", clt_dtype_name(dt));
      CHECK(clt_zeros(dt, 2, shape, dev, &back) == CLT_OK, "zeros");
      CHECK(clt_mpi_recv(back, last, 6, MPI_COMM_WORLD) == CLT_OK, "recv back %s",
            clt_dtype_name(dt));
      void *got = contents(back);
      for (int64_t i = 0; got && i < 6; i++)
        if (get_elem(got, dt, i) != gen(0, i, dt)) {
          CHECK(0, "send/recv %s: element %lld is %g", clt_dtype_name(dt), (long long)i,
                get_elem(got, dt, i));
          break;
        }
      free(got);
      clt_tensor_release(back);
      clt_tensor_release(t);
    } else if (rank == last) {
      clt_tensor *t = NULL;
      CHECK(clt_zeros(dt, 2, shape, dev, &t) == CLT_OK, "zeros");
      CHECK(clt_mpi_recv(t, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD) == CLT_OK, "recv %s",
            clt_dtype_name(dt));
      CHECK(clt_mpi_send(t, 0, 6, MPI_COMM_WORLD) == CLT_OK, "send back %s", clt_dtype_name(dt));
      clt_tensor_release(t);
    }
  }
}

/* Every rank must get want from every collective here, with a message naming the ranks. */
static void test_mismatch(clt_device *dev) {
  int64_t s3[1] = {3}, s2[1] = {2};
  clt_tensor *t = make(CLT_F32, 1, rank == 0 ? s3 : s2, rank, 0, dev);
  clt_status st = clt_mpi_allreduce(t, CLT_MPI_SUM, MPI_COMM_WORLD);
  CHECK(st == CLT_ERR_SHAPE_MISMATCH, "allreduce of different shapes gives %s",
        clt_status_name(st));
  CHECK(strstr(clt_last_error(), "rank 0 f32[3]") && strstr(clt_last_error(), "rank 1 f32[2]"),
        "the message names the ranks and shapes: %s", clt_last_error());
  clt_tensor_release(t);

  t = make(rank == 0 ? CLT_I32 : CLT_F32, 1, s2, rank, 0, dev);
  st = clt_mpi_broadcast(t, 0, MPI_COMM_WORLD);
  CHECK(st == CLT_ERR_DTYPE, "broadcast of different dtypes gives %s", clt_status_name(st));
  CHECK(strstr(clt_last_error(), "rank 0 i32[2]") != NULL, "message: %s", clt_last_error());
  st = clt_mpi_broadcast(t, rank, MPI_COMM_WORLD);
  CHECK(st == CLT_ERR_INVALID_ARGUMENT || st == CLT_ERR_DTYPE,
        "broadcast with different roots gives %s", clt_status_name(st));
  clt_tensor_release(t);

  int64_t a[2] = {2, rank == 0 ? 3 : 4};
  clt_tensor *out = NULL;
  t = make(CLT_F32, 2, a, rank, 0, dev);
  st = clt_mpi_allgather(t, MPI_COMM_WORLD, &out);
  CHECK(st == CLT_ERR_SHAPE_MISMATCH && out == NULL, "allgather of different rows gives %s",
        clt_status_name(st));
  st = clt_mpi_allreduce(t, rank == 0 ? CLT_MPI_MAX : CLT_MPI_MIN, MPI_COMM_WORLD);
  CHECK(st == CLT_ERR_INVALID_ARGUMENT || st == CLT_ERR_SHAPE_MISMATCH,
        "allreduce with different ops gives %s", clt_status_name(st));
  clt_tensor_release(t);

  /* A NULL tensor on the last rank fails every rank. */
  t = rank == size - 1 ? NULL : make(CLT_F32, 1, s2, rank, 0, dev);
  st = clt_mpi_allreduce(t, CLT_MPI_SUM, MPI_COMM_WORLD);
  CHECK(st == CLT_ERR_INVALID_ARGUMENT, "allreduce with a NULL tensor gives %s",
        clt_status_name(st));
  clt_tensor_release(t);

  /* send/recv that disagree: both ends fail, nothing is left in flight. */
  if (rank == 0 || rank == size - 1) {
    t = make(CLT_F32, 1, rank == 0 ? s3 : s2, rank, 0, dev);
    st = rank == 0 ? clt_mpi_send(t, size - 1, 9, MPI_COMM_WORLD)
                   : clt_mpi_recv(t, 0, 9, MPI_COMM_WORLD);
    CHECK(st == CLT_ERR_SHAPE_MISMATCH, "send/recv of different shapes gives %s",
          clt_status_name(st));
    clt_tensor_release(t);
  }

  /* The communicator still works. */
  t = make(CLT_I32, 1, s2, rank, 0, dev);
  CHECK(clt_mpi_allreduce(t, CLT_MPI_SUM, MPI_COMM_WORLD) == CLT_OK, "allreduce after errors");
  clt_tensor_release(t);
}

/* Element i of rank r's large tensor: integers below 1001, so sums over ranks are exact. */
static float big_val(int r, int64_t i) { return (float)((i * 7 + r * 13) % 1001); }

static float big_sum(int64_t i) {
  float acc = 0;
  for (int r = 0; r < size; r++)
    acc += big_val(r, i);
  return acc;
}

/* rank's big_val elements plus add, on dev; NULL on failure. */
static clt_tensor *make_big(int64_t n, float add, clt_device *dev) {
  float *buf = malloc((size_t)n * sizeof *buf);
  for (int64_t i = 0; i < n; i++)
    buf[i] = big_val(rank, i) + add;
  clt_tensor *t = NULL;
  CHECK(clt_from_host(buf, CLT_F32, 1, &n, dev, &t) == CLT_OK, "clt_from_host of %lld f32",
        (long long)n);
  free(buf);
  return t;
}

/* Checks that t (n f32) holds want(i) * scale + add for every i; names the first mismatch. */
static void check_big(clt_tensor *t, int64_t n, float (*want)(int64_t), float scale, float add,
                      const char *what) {
  float *got = t ? malloc((size_t)n * sizeof *got) : NULL;
  if (!got || clt_tensor_read(t, got, (size_t)n * sizeof *got) != CLT_OK) {
    CHECK(0, "%s: cannot read the result", what);
    free(got);
    return;
  }
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (got[i] != want(i) * scale + add)
      bad = i;
  CHECK(bad < 0, "%s: element %lld of %lld is %g, want %g", what, (long long)bad, (long long)n,
        bad < 0 ? 0.0 : (double)got[bad], bad < 0 ? 0.0 : (double)(want(bad) * scale + add));
  free(got);
}

static float big_root(int64_t i) { return big_val(size - 1, i); }
static float rank_val(int64_t i) { return big_val(rank, i); }

/* Allreduce (sum) and broadcast of n f32 on dev in chunks of chunk bytes. */
static void test_large(clt_device *dev, int64_t n, size_t chunk) {
  char what[160];
  size_t old = clt_mpi_chunk_set(chunk);
  clt_tensor *t = make_big(n, 0, dev);
  snprintf(what, sizeof what, "allreduce of %lld f32 (%.1f MiB) on %s in %zu-byte chunks",
           (long long)n, (double)n * 4 / (1 << 20), clt_device_name(dev), chunk);
  clt_status st = t ? clt_mpi_allreduce(t, CLT_MPI_SUM, MPI_COMM_WORLD) : CLT_ERR_INTERNAL;
  CHECK(st == CLT_OK, "%s", what);
  if (st == CLT_OK)
    check_big(t, n, big_sum, 1, 0, what);
  clt_tensor_release(t);

  t = make_big(n, 0, dev);
  snprintf(what, sizeof what, "broadcast of %lld f32 from rank %d on %s in %zu-byte chunks",
           (long long)n, size - 1, clt_device_name(dev), chunk);
  st = t ? clt_mpi_broadcast(t, size - 1, MPI_COMM_WORLD) : CLT_ERR_INTERNAL;
  CHECK(st == CLT_OK, "%s", what);
  if (st == CLT_OK)
    check_big(t, n, big_root, 1, 0, what);
  clt_tensor_release(t);
  clt_mpi_chunk_set(old);
}

/* The staging is ordered by the tensor's events: kernels still writing t when the call starts
 * are waited for, and work enqueued right after the call (on t's queue or another device's)
 * sees the result. Nothing synchronizes in between. On PoCL the work on one device's queue runs
 * in order anyway, and the driver itself orders a write on one device after earlier writes to
 * the same buffer on another, so only the broadcast over pending reads on another device fails
 * there when the staging ignores the events; the other cases matter on GPU drivers. */
static void test_ordering(clt_device *dev, int64_t n) {
  /* n: 1 << 22 (16 MiB), kernels that take long enough to be caught */
  size_t old = clt_mpi_chunk_set((size_t)1 << 20);
  clt_device *other = dev; /* another OpenCL device's queue, where there is one */
  for (int i = 0; i < clt_device_count(); i++)
    if (clt_device_at(i) != dev && strncmp(clt_device_name(clt_device_at(i)), "cl:", 3) == 0)
      other = clt_device_at(i);
  clt_tensor *t = make_big(n, 0, dev), *one = NULL, *u = NULL, *v = NULL;
  CHECK(clt_full(CLT_F32, 1, &n, 1.0, dev, &one) == CLT_OK, "clt_full");
  for (int k = 0; k < 4; k++) /* pending kernels writing t */
    CHECK(clt_add_(t, one) == CLT_OK, "clt_add_");
  CHECK(clt_mpi_allreduce(t, CLT_MPI_SUM, MPI_COMM_WORLD) == CLT_OK, "allreduce after clt_add_");
  CHECK(clt_copy_to(t, other, &u) == CLT_OK, "clt_copy_to %s", clt_device_name(other));
  CHECK(clt_mul_scalar(t, 2.0, &v) == CLT_OK, "clt_mul_scalar");
  check_big(u, n, big_sum, 1, 4.0f * size, "allreduce after pending kernels, copied at once");
  check_big(v, n, big_sum, 2, 8.0f * size, "allreduce after pending kernels, then a kernel");
  clt_tensor_release(u);
  clt_tensor_release(v);

  /* Broadcast into a tensor that a kernel is still reading and writing. */
  u = v = NULL;
  CHECK(clt_add_(t, one) == CLT_OK, "clt_add_");
  CHECK(clt_mpi_broadcast(t, 0, MPI_COMM_WORLD) == CLT_OK, "broadcast after clt_add_");
  CHECK(clt_copy_to(t, other, &u) == CLT_OK, "clt_copy_to %s", clt_device_name(other));
  /* rank 0's t was big_sum + 4 * size + 1 before the broadcast */
  check_big(u, n, big_sum, 1, 4.0f * size + 1, "broadcast after a pending kernel");
  clt_tensor_release(u);
  clt_tensor_release(t);

  /* Broadcast into a tensor that copies on another device's queue are still reading (kept busy
   * by kernels first): the copies must get the old contents. */
  if (other != dev) {
    clt_tensor *busy = make_big(n, 0, other), *cp[3] = {NULL, NULL, NULL};
    t = make_big(n, 0, dev);
    CHECK(clt_device_synchronize(dev) == CLT_OK, "synchronize");
    for (int k = 0; k < 6; k++)
      CHECK(clt_add_(busy, busy) == CLT_OK, "clt_add_ on %s", clt_device_name(other));
    for (int k = 0; k < 3; k++)
      CHECK(clt_copy_to(t, other, &cp[k]) == CLT_OK, "clt_copy_to %s", clt_device_name(other));
    CHECK(clt_mpi_broadcast(t, size - 1, MPI_COMM_WORLD) == CLT_OK, "broadcast over reads");
    for (int k = 0; k < 3; k++) {
      check_big(cp[k], n, rank_val, 1, 0, "a copy read before a broadcast into its source");
      clt_tensor_release(cp[k]);
    }
    check_big(t, n, big_root, 1, 0, "broadcast into a tensor being read");
    clt_tensor_release(t);
    clt_tensor_release(busy);

    /* The copies back of a broadcast wait on t's queue behind unrelated kernels; they are t's
     * last write, so a copy on another device's queue enqueued at once waits for them. */
    busy = make_big(n, 0, dev);
    t = make_big(n, 0, dev);
    CHECK(clt_device_synchronize(dev) == CLT_OK, "synchronize");
    for (int k = 0; k < 6; k++)
      CHECK(clt_add_(busy, busy) == CLT_OK, "clt_add_ on %s", clt_device_name(dev));
    CHECK(clt_mpi_broadcast(t, size - 1, MPI_COMM_WORLD) == CLT_OK, "broadcast behind kernels");
    CHECK(clt_copy_to(t, other, &cp[0]) == CLT_OK, "clt_copy_to %s", clt_device_name(other));
    check_big(cp[0], n, big_root, 1, 0, "a copy enqueued right after a broadcast");
    clt_tensor_release(cp[0]);
    clt_tensor_release(t);
    clt_tensor_release(busy);
  }

  /* A host tensor that an asynchronous copy is still filling. */
  clt_tensor *d = make_big(n, 0, dev), *h = NULL;
  CHECK(clt_add_(d, one) == CLT_OK, "clt_add_");
  CHECK(clt_to(d, clt_cpu(), &h) == CLT_OK, "clt_to cpu");
  CHECK(clt_mpi_allreduce(h, CLT_MPI_SUM, MPI_COMM_WORLD) == CLT_OK, "allreduce of a host copy");
  check_big(h, n, big_sum, 1, (float)size, "allreduce of a host tensor being copied into");
  clt_tensor_release(h);
  clt_tensor_release(d);
  clt_tensor_release(one);
  clt_mpi_chunk_set(old);
}

static float small_sum(int64_t i) { return big_sum(i); }
static float small_rows(int64_t i) { return (float)i; }

/* Even ranks pass tensors on `even` (the host, or a device of another backend), odd ranks on
 * `odd`, and rank 1 stages in 12-byte chunks while the others keep the default: the MPI calls
 * still match. */
static void test_mixed(clt_device *even, clt_device *odd) {
  const int64_t n = 1001;
  size_t old = clt_mpi_chunk_set(rank == 1 ? 12 : (size_t)1 << 20);
  clt_device *mine = rank % 2 ? odd : even;
  clt_tensor *t = make_big(n, 0, mine);
  clt_transfer_stats before, after;
  CHECK(clt_device_synchronize(mine) == CLT_OK, "synchronize");
  CHECK(clt_transfer_stats_get(mine, &before) == CLT_OK, "clt_transfer_stats_get");
  CHECK(clt_mpi_allreduce(t, CLT_MPI_SUM, MPI_COMM_WORLD) == CLT_OK, "mixed allreduce");
  CHECK(clt_transfer_stats_get(mine, &after) == CLT_OK, "clt_transfer_stats_get");
  /* A device tensor's staging counts as explicit copies, each way, of the whole tensor. */
  uint64_t bytes = clt_device_is_host(mine) ? 0 : (uint64_t)n * sizeof(float);
  CHECK(after.d2h_bytes - before.d2h_bytes == bytes && after.h2d_bytes - before.h2d_bytes == bytes,
        "the staging of %llu bytes on %s counted %llu down, %llu up", (unsigned long long)bytes,
        clt_device_name(mine), (unsigned long long)(after.d2h_bytes - before.d2h_bytes),
        (unsigned long long)(after.h2d_bytes - before.h2d_bytes));
  check_big(t, n, small_sum, 1, 0, "allreduce, host and device ranks, different chunks");
  clt_tensor_release(t);
  t = make_big(n, 0, mine);
  CHECK(clt_mpi_broadcast(t, size - 1, MPI_COMM_WORLD) == CLT_OK, "mixed broadcast");
  check_big(t, n, big_root, 1, 0, "broadcast, host and device ranks, different chunks");
  clt_tensor_release(t);

  /* allgather: rank r gives rows [r * (r + 1) / 2 * 3 ...) of arange, (r + 1) x 3 */
  int64_t shape[2] = {rank + 1, 3}, first = (int64_t)rank * (rank + 1) / 2 * 3;
  float buf[64];
  for (int64_t i = 0; i < shape[0] * 3; i++)
    buf[i] = (float)(first + i);
  clt_tensor *g = NULL, *out = NULL;
  CHECK(clt_from_host(buf, CLT_F32, 2, shape, mine, &g) == CLT_OK, "clt_from_host");
  CHECK(clt_mpi_allgather(g, MPI_COMM_WORLD, &out) == CLT_OK, "mixed allgather");
  CHECK(out && clt_tensor_device(out) == mine, "allgather result device");
  check_big(out, (int64_t)size * (size + 1) / 2 * 3, small_rows, 1, 0,
            "allgather, host and device ranks, different chunks");
  clt_tensor_release(out);
  clt_tensor_release(g);
  clt_mpi_chunk_set(old);
}

#ifdef CLT_FAULT_INJECTION
/* ---- failures in the middle of a collective (built with --enable-fault-injection) ----------
 * One rank, the faulty one, fails the n-th call of one kind (an OpenCL allocation, an enqueue, a
 * host allocation) that clt makes inside one collective on device tensors, for every n from 1 to
 * the number of such calls the collective makes (counted first, with nothing failing); the other
 * ranks run normally. Every rank must come back (mpi.sh bounds the run), with the same status on
 * every rank of a collective; an error must name the failing rank on the others; a call that
 * recovers must give the right result; and afterwards the same collective, with nothing failing,
 * must work and be right on every rank, and a tensor made before must be intact. */
enum { F_ALLREDUCE, F_BROADCAST, F_ALLGATHER, F_SENDRECV, F_OPS };
static const char *const fop_names[F_OPS] = {"allreduce", "broadcast", "allgather", "send/recv"};
enum { F_N = 23 }; /* elements: 5 chunks of 20 bytes (tests/mpi.sh), the last one short */

static long fault_counts[CLT__FAULT_KINDS];
static long fault_runs, fault_errors, fault_recovered;

/* Runs op once on fresh tensors on dev, with rank faulty armed for the n-th call of kind
 * (n = 0: only counted). Returns this rank's status; *right: whether this rank's result is right
 * (on CLT_OK; ranks with no part in a send/recv are right). On the faulty rank, *count gets the
 * calls of kind counted. */
static clt_status fault_once(int op, clt_device *dev, int faulty, clt_fault_kind kind, long n,
                             int *right, long *count) {
  const int64_t shape[1] = {F_N}, rows[2] = {rank + 1, F_N};
  int last = size - 1;
  *right = 1;
  if (op == F_SENDRECV && rank != 0 && rank != last)
    return CLT_OK;
  clt_tensor *t = op == F_ALLGATHER                  ? make(CLT_F32, 2, rows, rank, 0, dev)
                  : op == F_SENDRECV && rank == last ? make(CLT_F32, 1, shape, last, 100, dev)
                                                     : make(CLT_F32, 1, shape, rank, 0, dev);
  clt_tensor *out = NULL;
  if (!t)
    return CLT_ERR_INVALID_ARGUMENT;
  if (rank == faulty)
    clt__fault_set(kind, n, CLT__FAULT_THIS_THREAD);
  clt_status st;
  switch (op) {
  case F_ALLREDUCE:
    st = clt_mpi_allreduce(t, CLT_MPI_SUM, MPI_COMM_WORLD);
    break;
  case F_BROADCAST:
    st = clt_mpi_broadcast(t, 0, MPI_COMM_WORLD);
    break;
  case F_ALLGATHER:
    st = clt_mpi_allgather(t, MPI_COMM_WORLD, &out);
    break;
  default:
    st = rank == 0 ? clt_mpi_send(t, last, 11, MPI_COMM_WORLD)
                   : clt_mpi_recv(t, 0, 11, MPI_COMM_WORLD);
  }
  if (rank == faulty) {
    *count = clt__fault_count(kind);
    clt__fault_reset();
  }
  if (st == CLT_OK) {
    float *got = contents(out ? out : t);
    for (int64_t i = 0, j = 0; got && i < (out ? (int64_t)size * (size + 1) / 2 : 1); i++)
      for (int64_t e = 0; e < F_N; e++, j++) {
        int r = op == F_ALLGATHER ? 0 : rank;
        double want = op == F_ALLREDUCE   ? reference(CLT_MPI_SUM, CLT_F32, e)
                      : op == F_BROADCAST ? gen(0, e, CLT_F32)
                      : op == F_SENDRECV  ? gen(0, e, CLT_F32)
                                          : 0;
        if (op == F_ALLGATHER) { /* row i of the result: which rank's, and which of its rows */
          int64_t k = i;
          while (k > r) {
            k -= r + 1;
            r++;
          }
          want = gen(r, k * F_N + e, CLT_F32);
        }
        if (got[j] != want) {
          *right = 0;
          i = INT64_MAX - 1;
          break;
        }
      }
    if (!got)
      *right = 0;
    free(got);
  }
  clt_tensor_release(out);
  clt_tensor_release(t);
  return st;
}

static void test_faults(clt_device *dev) {
  const int64_t shape[1] = {64};
  fault_runs = fault_errors = fault_recovered = 0;
  memset(fault_counts, 0, sizeof fault_counts);
  clt_tensor *keep = make(CLT_F64, 1, shape, rank, 1000, dev); /* must stay intact */
  const clt_fault_kind kinds[] = {CLT__FAULT_ALLOC, CLT__FAULT_ENQUEUE, CLT__FAULT_HOST};
  int faulty_ranks[2] = {0, size - 1};
  for (int op = 0; op < F_OPS; op++)
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
      for (int fr = 0; fr < 2; fr++) {
        int faulty = faulty_ranks[fr], right = 0;
        long count = 0;
        clt_status st = fault_once(op, dev, faulty, kinds[k], 0, &right, &count);
        CHECK(st == CLT_OK && right, "%s with faults only counted", fop_names[op]);
        MPI_Bcast(&count, 1, MPI_LONG, faulty, MPI_COMM_WORLD);
        if (rank == faulty && count > fault_counts[kinds[k]])
          fault_counts[kinds[k]] = count;
        for (long n = 1; n <= count; n++) {
          st = fault_once(op, dev, faulty, kinds[k], n, &right, &(long){0});
          const char *what = fop_names[op], *kind = clt__fault_kind_name(kinds[k]);
          /* Every rank of a collective ends with the same status. */
          int mine[2] = {st, -(int)st}, ext[2] = {0, 0};
          int part = op != F_SENDRECV || rank == 0 || rank == size - 1;
          if (!part)
            mine[0] = INT32_MIN, mine[1] = INT32_MIN;
          MPI_Allreduce(mine, ext, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
          if (op != F_SENDRECV)
            CHECK(ext[0] == -ext[1],
                  "%s, %s call %ld failing on rank %d: ranks returned "
                  "different statuses",
                  what, kind, n, faulty);
          if (part && st == CLT_OK)
            CHECK(right, "%s, %s call %ld failing on rank %d: CLT_OK with a wrong result", what,
                  kind, n, faulty);
          if (part && st != CLT_OK && rank != faulty) {
            char who[32];
            snprintf(who, sizeof who, "rank %d", faulty);
            CHECK(strstr(clt_last_error(), who) != NULL,
                  "%s, %s call %ld failing on rank %d: the message does not name it: %s", what,
                  kind, n, faulty, clt_last_error());
          }
          if (rank == faulty) {
            fault_runs++;
            if (st != CLT_OK)
              fault_errors++;
            else if (right)
              fault_recovered++;
          }
          /* Afterwards, with nothing failing, the same collective works everywhere. */
          st = fault_once(op, dev, -1, kinds[k], 0, &right, &(long){0});
          CHECK(st == CLT_OK && right, "%s after %s call %ld failed on rank %d: %s", what, kind, n,
                faulty, clt_status_name(st));
        }
      }
  double *v = keep ? contents(keep) : NULL;
  for (int64_t i = 0; v && i < 64; i++)
    if (v[i] != gen(rank, 1000 + i, CLT_F64)) {
      CHECK(0, "a tensor made before the faults changed: element %lld", (long long)i);
      break;
    }
  free(v);
  clt_tensor_release(keep);
  long sums[3], local[3] = {fault_runs, fault_errors, fault_recovered};
  MPI_Reduce(local, sums, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  long most[CLT__FAULT_KINDS];
  MPI_Reduce(fault_counts, most, CLT__FAULT_KINDS, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("mpi_test: faults mid-collective on %s: %ld injected (%ld errors on every rank, %ld "
           "recovered); sites per call up to alloc %ld, enqueue %ld, host %ld\n",
           clt_device_name(dev), sums[0], sums[1], sums[2], most[CLT__FAULT_ALLOC],
           most[CLT__FAULT_ENQUEUE], most[CLT__FAULT_HOST]);
    /* .ci/lanes/10-asan adds up the OpenCL devices' figures; ref:0's is a figure of its own */
    if (strncmp(clt_device_name(dev), "ref:", 4) == 0)
      printf("figure: ref:0 mpi faults injected (%d ranks): %ld\n", size, sums[0]);
    else
      printf("figure: mpi faults injected (%d ranks): %ld\n", size, sums[0]);
  }
}
#endif

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double start = MPI_Wtime();
  int large = argc > 1 && strcmp(argv[1], "--large") == 0;
  /* --ref: the device tests on ref:0, the reference backend (CLT_REF_DEVICES=1), as well */
  int ref = argc > 1 && strcmp(argv[1], "--ref") == 0;

  clt_device *dev = NULL;
  CHECK(clt_mpi_device(MPI_COMM_WORLD, &dev) == CLT_OK && dev, "clt_mpi_device");
  CHECK(clt_mpi_device_reason()[0] != '\0', "clt_mpi_device_reason is empty");
  int ncl = 0; /* the OpenCL devices, listed first (not ref:0 of CLT_REF_DEVICES) */
  while (ncl < clt_device_count() && strncmp(clt_device_name(clt_device_at(ncl)), "cl:", 3) == 0)
    ncl++;
  if (ncl > 0)
    CHECK(dev == clt_device_at(rank % ncl), "rank %d got %s", rank, clt_device_name(dev));
  if (rank == 0)
    printf("mpi_test: %d ranks; rank 0: %s\n", size, clt_mpi_device_reason());

  clt_device *devs[2] = {clt_cpu(), dev};
  for (int d = 0; d < (dev == clt_cpu() ? 1 : 2); d++) {
    test_allreduce(devs[d]);
    test_broadcast(devs[d]);
    test_allgather(devs[d]);
    test_send_recv(devs[d]);
    test_mismatch(devs[d]);
  }
  if (dev != clt_cpu())
    test_mixed(clt_cpu(), dev);
#ifdef CLT_FAULT_INJECTION
  if (!large && !ref && dev != clt_cpu())
    test_faults(dev);
#endif
  if (ref) {
    /* Every rank stages through ref:0, whose memory the backend reaches with memcpy; then ranks
     * on ref:0 meet ranks on the host and on an OpenCL device in one collective. */
    clt_device *rd = NULL;
    CHECK(clt_device_get("ref:0", &rd) == CLT_OK && rd,
          "--ref needs ref:0: run with CLT_REF_DEVICES=1");
    if (rd) {
      if (rank == 0)
        printf("mpi_test: the device tests on %s\n", clt_device_name(rd));
      test_allreduce(rd);
      test_broadcast(rd);
      test_allgather(rd);
      test_send_recv(rd);
      test_mismatch(rd);
      test_mixed(clt_cpu(), rd);
      test_mixed(dev, rd);
#ifdef CLT_FAULT_INJECTION
      test_faults(rd);
#endif
    }
  }
  if (large && dev != clt_cpu()) {
    /* A simulated device (Oclgrind, the 60-gpu lane) interprets every kernel: two ranks on it
     * took 234 s with 64 MiB tensors. Where any rank's device is one, every rank (the sizes of
     * a collective must agree) uses tensors 16 times smaller, still several chunks each. */
    const char *desc = clt_device_description(dev);
    int sim = desc && strstr(desc, "Oclgrind") != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &sim, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int shrink = sim ? 4 : 0; /* log2 of the factor */
    if (rank == 0 && sim)
      printf("mpi_test: a simulated device among the ranks': --large tensors 16 times smaller\n");
    test_ordering(dev, ((int64_t)1 << 22) >> shrink);
    const int64_t n = ((int64_t)16 << 20) >> shrink;           /* 64 MiB of f32 (4 simulated) */
    const size_t mib = (size_t)1 << (20 - shrink);
    test_large(dev, n, sim ? mib : clt_mpi_chunk_get()); /* 64 chunks: the default 1 MiB */
    test_large(dev, n + 3, mib + 12);                    /* boundaries that do not divide */
    test_large(dev, (int64_t)mib + 5, 0);                /* whole, no chunks */
  }

  int totals[2] = {checks, failures}, sums[2];
  MPI_Reduce(totals, sums, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("mpi_test: %d ranks, %d checks, %d failed, %.2f s\n", size, sums[0], sums[1],
           MPI_Wtime() - start);
  int any = failures, all = 0;
  MPI_Allreduce(&any, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return all ? 1 : 0;
}
