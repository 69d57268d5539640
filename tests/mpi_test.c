/* mpi_test.c - libclt_mpi under mpirun (run by tests/mpi.sh with 2 and 3 ranks).
 *
 * Every collective x every dtype x (host, this rank's device) against a reference that each
 * rank computes alone from the generator gen(), which gives every rank's data; then the error
 * paths: ranks passing different shapes, dtypes, ops, a NULL tensor, and a send/recv pair that
 * disagree must all fail with the same status on every rank, promptly, and leave the
 * communicator usable. Exit status 0 if every check passed on every rank, 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clt_mpi.h"

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

static const clt_dtype dtypes[] = {CLT_F32, CLT_F64, CLT_I32, CLT_I64, CLT_U8, CLT_BOOL};
static const char *op_names[] = {"sum", "max", "min", "mean"};

/* Element i of rank r's tensor: small integers, so that sums are exact in every dtype. */
static double gen(int r, int64_t i, clt_dtype dt) {
  if (dt == CLT_BOOL)
    return (r + i) % 3 == 0;
  double v = (double)((r * 7 + i * 3) % 11);
  return dt == CLT_U8 ? v : v - 5;
}

static void set_elem(void *buf, clt_dtype dt, int64_t i, double v) {
  switch (dt) {
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

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double start = MPI_Wtime();

  clt_device *dev = NULL;
  CHECK(clt_mpi_device(MPI_COMM_WORLD, &dev) == CLT_OK && dev, "clt_mpi_device");
  CHECK(clt_mpi_device_reason()[0] != '\0', "clt_mpi_device_reason is empty");
  if (clt_device_count() > 0)
    CHECK(dev == clt_device_at(rank % clt_device_count()), "rank %d got %s", rank,
          clt_device_name(dev));
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
