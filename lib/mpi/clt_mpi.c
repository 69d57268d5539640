/* clt_mpi.c - MPI collectives on clt tensors (libclt_mpi; see include/clt_mpi.h).
 *
 * Each call runs in three steps. First every rank checks its own arguments and, for a device
 * tensor, stages the elements into a host tensor (pinned near the device where possible); a
 * local failure is not returned yet. Then the ranks exchange one small record each (status,
 * dtype, shape, the op or root) with MPI_Allgather, and every rank reaches the same verdict from
 * the same records: a rank's failure, different dtypes or shapes fail everywhere, so no rank is
 * left waiting in a collective the others skipped. Only then does data move, and a device
 * tensor gets the result back with clt_copy from the staging tensor. No overlap of transfers
 * and communication yet: each step completes before the next. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "clt-internal.h"
#include "clt_mpi.h"

/* ---- the record each rank contributes ------------------------------------------------------ */

enum {
  R_STATUS, /* the rank's own verdict on its arguments (clt_status) */
  R_KIND,   /* send/recv: REC_HEADER or REC_ACK; 0 in collectives */
  R_DTYPE,
  R_NDIM,
  R_NUMEL,
  R_PARAM, /* the op (allreduce) or root (broadcast); 0 otherwise */
  R_SHAPE, /* CLT_MAX_DIMS entries */
  R_LEN = R_SHAPE + CLT_MAX_DIMS
};
enum { REC_HEADER = 1, REC_ACK = 2 };

typedef struct record {
  int64_t v[R_LEN];
} record;

/* A tensor on its way to or from MPI: host is t itself (retained) for a host tensor, else a
 * host staging tensor of the same dtype and shape. data is host's elements. */
typedef struct stage {
  clt_tensor *t;
  clt_tensor *host;
  void *data;
  size_t nbytes;
} stage;

static record record_of(const clt_tensor *t, clt_status status, int64_t param) {
  record r;
  memset(&r, 0, sizeof r);
  r.v[R_STATUS] = status;
  r.v[R_PARAM] = param;
  if (t) {
    r.v[R_DTYPE] = clt_tensor_dtype(t);
    r.v[R_NDIM] = clt_tensor_ndim(t);
    r.v[R_NUMEL] = clt_tensor_numel(t);
    const int64_t *shape = clt_tensor_shape(t);
    for (int i = 0; i < clt_tensor_ndim(t); i++)
      r.v[R_SHAPE + i] = shape[i];
  }
  return r;
}

/* Appends "f32[3,4]" (or "no tensor") for r to buf. */
static void describe(const record *r, char *buf, size_t size) {
  size_t n = strlen(buf);
  if (n + 1 >= size)
    return;
  if (r->v[R_STATUS] != CLT_OK && r->v[R_NDIM] == 0 && r->v[R_NUMEL] == 0) {
    snprintf(buf + n, size - n, "no tensor");
    return;
  }
  int k = snprintf(buf + n, size - n, "%s[", clt_dtype_name((clt_dtype)r->v[R_DTYPE]));
  for (int i = 0; i < r->v[R_NDIM] && k > 0 && n + (size_t)k < size; i++)
    k += snprintf(buf + n + k, size - n - k, "%s%lld", i ? "," : "", (long long)r->v[R_SHAPE + i]);
  if (k > 0 && n + (size_t)k < size)
    snprintf(buf + n + k, size - n - k, "]");
}

/* "rank 0 f32[3], rank 1 f32[2]" for up to 16 ranks, then "and N more". */
static void describe_all(const record *all, int nranks, char *buf, size_t size) {
  buf[0] = '\0';
  for (int r = 0; r < nranks; r++) {
    size_t n = strlen(buf);
    if (r == 16) {
      snprintf(buf + n, size - n, ", and %d more", nranks - r);
      return;
    }
    snprintf(buf + n, size - n, "%srank %d ", r ? ", " : "", r);
    describe(&all[r], buf, size);
  }
}

static clt_status mpi_error(const char *fn, int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return clt__error(CLT_ERR_IO, fn, "%s failed: %s", what, msg);
}

/* Whether two records describe the same dtype and shape (tail_only: all but the first dim). */
static int same_shape(const record *a, const record *b, int tail_only) {
  if (a->v[R_NDIM] != b->v[R_NDIM])
    return 0;
  if (!tail_only && a->v[R_NUMEL] != b->v[R_NUMEL])
    return 0;
  for (int i = tail_only ? 1 : 0; i < a->v[R_NDIM]; i++)
    if (a->v[R_SHAPE + i] != b->v[R_SHAPE + i])
      return 0;
  return 1;
}

/* Exchanges the records and returns the verdict every rank reaches. mine.v[R_STATUS] is this
 * rank's own status, whose message is already set. param_name names R_PARAM ("op", "root"),
 * or NULL if it is not compared. */
static clt_status agree(const char *fn, MPI_Comm comm, const record *mine, record **all_out,
                        int *nranks_out, const char *param_name, int tail_only) {
  int nranks = 0, me = 0;
  int rc = MPI_Comm_size(comm, &nranks);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_rank(comm, &me);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Comm_size");
  record *all = malloc((size_t)nranks * sizeof *all);
  if (!all) /* a few hundred bytes a rank: failing here leaves the others waiting */
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no memory for %d ranks' records", nranks);
  rc = MPI_Allgather(mine->v, R_LEN, MPI_INT64_T, all->v, R_LEN, MPI_INT64_T, comm);
  if (rc != MPI_SUCCESS) {
    free(all);
    return mpi_error(fn, rc, "MPI_Allgather");
  }
  *all_out = all;
  *nranks_out = nranks;

  for (int r = 0; r < nranks; r++) {
    if (all[r].v[R_STATUS] == CLT_OK)
      continue;
    if (r == me)
      return (clt_status)mine->v[R_STATUS];
    clt_status s = (clt_status)all[r].v[R_STATUS];
    return clt__error(s, fn, "rank %d failed (%s); every rank returns its status", r,
                      clt_status_message(s));
  }
  char list[1024];
  if (param_name) {
    for (int r = 1; r < nranks; r++)
      if (all[r].v[R_PARAM] != all[0].v[R_PARAM])
        return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                          "ranks pass different %s values: rank 0 %lld, rank %d %lld", param_name,
                          (long long)all[0].v[R_PARAM], r, (long long)all[r].v[R_PARAM]);
  }
  for (int r = 1; r < nranks; r++)
    if (all[r].v[R_DTYPE] != all[0].v[R_DTYPE]) {
      describe_all(all, nranks, list, sizeof list);
      return clt__error(CLT_ERR_DTYPE, fn, "ranks pass different dtypes: %s", list);
    }
  for (int r = 1; r < nranks; r++)
    if (!same_shape(&all[r], &all[0], tail_only)) {
      describe_all(all, nranks, list, sizeof list);
      return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "ranks pass different shapes%s: %s",
                        tail_only ? " (beyond the first dimension)" : "", list);
    }
  return CLT_OK;
}

/* ---- staging --------------------------------------------------------------------------------- */

/* Local checks shared by every call: t is there and small enough for an int count. */
static clt_status check_tensor(const char *fn, const clt_tensor *t) {
  if (!t)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "t is NULL");
  if (clt_tensor_nbytes(t) > (size_t)INT_MAX)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "t holds %zu bytes; MPI counts are int, at most %d bytes for now",
                      clt_tensor_nbytes(t), INT_MAX);
  return CLT_OK;
}

/* Prepares s for t; fill: read t's elements into the staging tensor. */
static clt_status stage_open(const char *fn, clt_tensor *t, int fill, stage *s) {
  memset(s, 0, sizeof *s);
  s->t = t;
  s->nbytes = clt_tensor_nbytes(t);
  clt_device *dev = clt_tensor_device(t);
  if (clt_device_is_host(dev)) {
    s->host = clt_tensor_retain(t);
  } else {
    if (clt_empty_pinned(clt_tensor_dtype(t), clt_tensor_ndim(t), clt_tensor_shape(t), dev,
                         &s->host) != CLT_OK) {
      clt_status st = clt_empty(clt_tensor_dtype(t), clt_tensor_ndim(t), clt_tensor_shape(t),
                                clt_cpu(), &s->host);
      if (st != CLT_OK)
        return st;
    }
    clt_clear_error();
  }
  s->data = clt_tensor_data(s->host); /* waits for pending copies into or out of t */
  if (!s->data && s->nbytes > 0) {
    clt_status st = clt_last_status();
    clt_tensor_release(s->host);
    s->host = NULL;
    return st != CLT_OK ? st : clt__error(CLT_ERR_INTERNAL, fn, "no host data");
  }
  if (fill && s->host != t) {
    clt_status st = clt_tensor_read(t, s->data, s->nbytes);
    if (st != CLT_OK) {
      clt_tensor_release(s->host);
      s->host = NULL;
      return st;
    }
  }
  return CLT_OK;
}

/* Releases s; writeback: copy the staging tensor into a device tensor t (asynchronous, ordered
 * like any clt_copy). */
static clt_status stage_close(stage *s, int writeback) {
  clt_status st = CLT_OK;
  if (writeback && s->host && s->host != s->t)
    st = clt_copy(s->t, s->host);
  clt_tensor_release(s->host);
  s->host = NULL;
  return st;
}

static MPI_Datatype mpi_type(clt_dtype dt) {
  switch (dt) {
  case CLT_F32:
    return MPI_FLOAT;
  case CLT_F64:
    return MPI_DOUBLE;
  case CLT_I32:
    return MPI_INT32_T;
  case CLT_I64:
    return MPI_INT64_T;
  default: /* CLT_U8, CLT_BOOL */
    return MPI_UINT8_T;
  }
}

/* ---- the device --------------------------------------------------------------------------- */

static _Thread_local char device_reason[256];

const char *clt_mpi_device_reason(void) { return device_reason; }

clt_status clt_mpi_device(MPI_Comm comm, clt_device **out) {
  static const char fn[] = "clt_mpi_device";
  MPI_Comm local;
  int rank = 0, lrank = 0, lsize = 1;
  int rc = MPI_Comm_rank(comm, &rank);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Comm_rank");
  rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Comm_split_type");
  rc = MPI_Comm_rank(local, &lrank);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_size(local, &lsize);
  MPI_Comm_free(&local);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Comm_rank on the node communicator");
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  int n = clt_device_count();
  clt_device *d = n > 0 ? clt_device_at(lrank % n) : NULL;
  if (!d) {
    clt_clear_error();
    d = clt_cpu();
    snprintf(device_reason, sizeof device_reason, "node-local rank %d of %d, no OpenCL device: cpu",
             lrank, lsize);
  } else {
    snprintf(device_reason, sizeof device_reason,
             "node-local rank %d of %d, %d OpenCL device%s: %s", lrank, lsize, n, n == 1 ? "" : "s",
             clt_device_name(d));
  }
  *out = d;
  return CLT_OK;
}

/* ---- collectives ------------------------------------------------------------------------------
 */

clt_status clt_mpi_allreduce(clt_tensor *t, clt_mpi_op op, MPI_Comm comm) {
  static const char fn[] = "clt_mpi_allreduce";
  stage s = {0};
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK && (op < CLT_MPI_SUM || op > CLT_MPI_MEAN))
    st = clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "unknown op %d", (int)op);
  clt_dtype dt = clt_tensor_dtype(t);
  if (st == CLT_OK && op == CLT_MPI_MEAN && dt != CLT_F32 && dt != CLT_F64)
    st = clt__error(CLT_ERR_DTYPE, fn, "CLT_MPI_MEAN takes f32 or f64, not %s: cast first",
                    clt_dtype_name(dt));
  if (st == CLT_OK)
    st = stage_open(fn, t, 1, &s);

  record mine = record_of(t, st, op), *all = NULL;
  int nranks = 0;
  clt_status verdict = agree(fn, comm, &mine, &all, &nranks, "op", 0);
  free(all);
  if (verdict != CLT_OK) {
    stage_close(&s, 0);
    return verdict;
  }

  MPI_Op mop = op == CLT_MPI_MAX ? MPI_MAX : op == CLT_MPI_MIN ? MPI_MIN : MPI_SUM;
  if (dt == CLT_BOOL)
    mop = op == CLT_MPI_MIN ? MPI_LAND : MPI_LOR;
  int count = (int)clt_tensor_numel(t);
  int rc = MPI_Allreduce(MPI_IN_PLACE, s.data, count, mpi_type(dt), mop, comm);
  if (rc != MPI_SUCCESS) {
    stage_close(&s, 0);
    return mpi_error(fn, rc, "MPI_Allreduce");
  }
  if (op == CLT_MPI_MEAN) {
    if (dt == CLT_F32) {
      float *p = s.data;
      for (int i = 0; i < count; i++)
        p[i] /= (float)nranks;
    } else {
      double *p = s.data;
      for (int i = 0; i < count; i++)
        p[i] /= (double)nranks;
    }
  }
  return stage_close(&s, 1);
}

clt_status clt_mpi_broadcast(clt_tensor *t, int root, MPI_Comm comm) {
  static const char fn[] = "clt_mpi_broadcast";
  stage s = {0};
  int me = 0, nranks = 0;
  int rc = MPI_Comm_rank(comm, &me);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_size(comm, &nranks);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Comm_rank");
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK && (root < 0 || root >= nranks))
    st = clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "root %d is not a rank of the %d", root, nranks);
  if (st == CLT_OK)
    st = stage_open(fn, t, me == root, &s);

  record mine = record_of(t, st, root), *all = NULL;
  clt_status verdict = agree(fn, comm, &mine, &all, &nranks, "root", 0);
  free(all);
  if (verdict != CLT_OK) {
    stage_close(&s, 0);
    return verdict;
  }
  rc = MPI_Bcast(s.data, (int)s.nbytes, MPI_BYTE, root, comm);
  if (rc != MPI_SUCCESS) {
    stage_close(&s, 0);
    return mpi_error(fn, rc, "MPI_Bcast");
  }
  return stage_close(&s, me != root);
}

clt_status clt_mpi_allgather(clt_tensor *t, MPI_Comm comm, clt_tensor **out) {
  static const char fn[] = "clt_mpi_allgather";
  stage s = {0};
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK && !out)
    st = clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (st == CLT_OK && clt_tensor_ndim(t) == 0)
    st = clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                    "t is 0-d; allgather joins along the first dimension: reshape to [1]");
  if (st == CLT_OK)
    st = stage_open(fn, t, 1, &s);

  record mine = record_of(t, st, 0), *all = NULL;
  int nranks = 0;
  clt_status verdict = agree(fn, comm, &mine, &all, &nranks, NULL, 1);
  if (verdict != CLT_OK) {
    free(all);
    stage_close(&s, 0);
    return verdict;
  }

  /* Counts and offsets in bytes; the total must fit an int as well. */
  size_t elem = clt_dtype_size(clt_tensor_dtype(t));
  int *counts = malloc(2 * (size_t)nranks * sizeof *counts);
  int64_t rows = 0, total = 0;
  for (int r = 0; r < nranks; r++) {
    rows += all[r].v[R_SHAPE];
    total += all[r].v[R_NUMEL] * (int64_t)elem;
  }
  if (total > INT_MAX) {
    free(counts);
    free(all);
    stage_close(&s, 0);
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "the gathered tensor would hold %lld bytes; at most %d for now",
                      (long long)total, INT_MAX);
  }
  /* An allocation failure here is local; it is still reported after the exchange, so a rank
   * that fails does not leave the others waiting. */
  clt_tensor *res = NULL, *res_host = NULL;
  int64_t shape[CLT_MAX_DIMS];
  memcpy(shape, clt_tensor_shape(t), (size_t)clt_tensor_ndim(t) * sizeof *shape);
  shape[0] = rows;
  clt_device *dev = clt_tensor_device(t);
  st = counts ? CLT_OK : clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no memory for counts");
  if (st == CLT_OK) {
    st = clt_empty(clt_tensor_dtype(t), clt_tensor_ndim(t), shape, dev, &res);
    if (st == CLT_OK && !clt_device_is_host(dev) &&
        clt_empty_pinned(clt_tensor_dtype(t), clt_tensor_ndim(t), shape, dev, &res_host) !=
            CLT_OK) {
      clt_clear_error();
      st = clt_empty(clt_tensor_dtype(t), clt_tensor_ndim(t), shape, clt_cpu(), &res_host);
    }
  }
  void *dst = NULL;
  if (st == CLT_OK) {
    dst = clt_tensor_data(res_host ? res_host : res);
    if (!dst && total > 0)
      st = clt_last_status();
  }
  /* Second exchange, of the allocation verdicts: all ranks go on or none does. */
  int ok = st == CLT_OK, all_ok = 0;
  int rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm);
  if (rc != MPI_SUCCESS || !all_ok) {
    free(counts);
    free(all);
    clt_tensor_release(res);
    clt_tensor_release(res_host);
    stage_close(&s, 0);
    if (rc != MPI_SUCCESS)
      return mpi_error(fn, rc, "MPI_Allreduce");
    return st != CLT_OK ? st
                        : clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                                     "another rank could not allocate the result");
  }
  int *displs = counts + nranks;
  int64_t off = 0;
  for (int r = 0; r < nranks; r++) {
    counts[r] = (int)(all[r].v[R_NUMEL] * (int64_t)elem);
    displs[r] = (int)off;
    off += counts[r];
  }
  free(all);
  rc = MPI_Allgatherv(s.data, (int)s.nbytes, MPI_BYTE, dst, counts, displs, MPI_BYTE, comm);
  free(counts);
  stage_close(&s, 0);
  if (rc == MPI_SUCCESS && res_host)
    st = clt_copy(res, res_host);
  clt_tensor_release(res_host);
  if (rc != MPI_SUCCESS || st != CLT_OK) {
    clt_tensor_release(res);
    return rc != MPI_SUCCESS ? mpi_error(fn, rc, "MPI_Allgatherv") : st;
  }
  *out = res;
  return CLT_OK;
}

/* ---- point to point -------------------------------------------------------------------------
 * The sender sends a header record; the receiver answers with an ack record carrying its own
 * verdict; only on an ok does the data follow. Both ends therefore fail together on a mismatch,
 * and no message is left unreceived. */

clt_status clt_mpi_send(clt_tensor *t, int dest, int tag, MPI_Comm comm) {
  static const char fn[] = "clt_mpi_send";
  stage s = {0};
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK)
    st = stage_open(fn, t, 1, &s);
  record hdr = record_of(t, st, 0), ack;
  hdr.v[R_KIND] = REC_HEADER;
  int rc = MPI_Send(hdr.v, R_LEN, MPI_INT64_T, dest, tag, comm);
  if (rc != MPI_SUCCESS) {
    stage_close(&s, 0);
    return mpi_error(fn, rc, "MPI_Send");
  }
  if (st != CLT_OK)
    return st; /* the receiver sees our failure in the header and sends no ack */
  rc = MPI_Recv(ack.v, R_LEN, MPI_INT64_T, dest, tag, comm, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    stage_close(&s, 0);
    return mpi_error(fn, rc, "MPI_Recv");
  }
  if (ack.v[R_KIND] != REC_ACK) {
    stage_close(&s, 0);
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "rank %d sent to this rank (tag %d) while this rank was sending to it: "
                      "order the sends and receives so that each send meets a receive",
                      dest, tag);
  }
  if (ack.v[R_STATUS] != CLT_OK) {
    stage_close(&s, 0);
    char mine[128] = "", theirs[128] = "";
    describe(&hdr, mine, sizeof mine);
    describe(&ack, theirs, sizeof theirs);
    clt_status vs = (clt_status)ack.v[R_STATUS];
    return clt__error(vs, fn,
                      "rank %d refused the tensor (%s): it receives into %s, this rank "
                      "sends %s",
                      dest, clt_status_message(vs), theirs, mine);
  }
  rc = MPI_Send(s.data, (int)s.nbytes, MPI_BYTE, dest, tag, comm);
  stage_close(&s, 0);
  return rc == MPI_SUCCESS ? CLT_OK : mpi_error(fn, rc, "MPI_Send");
}

clt_status clt_mpi_recv(clt_tensor *t, int src, int tag, MPI_Comm comm) {
  static const char fn[] = "clt_mpi_recv";
  stage s = {0};
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK)
    st = stage_open(fn, t, 0, &s);
  record hdr, mine = record_of(t, st, 0);
  MPI_Status mst;
  int rc = MPI_Recv(hdr.v, R_LEN, MPI_INT64_T, src, tag, comm, &mst);
  if (rc != MPI_SUCCESS) {
    stage_close(&s, 0);
    return mpi_error(fn, rc, "MPI_Recv");
  }
  int peer = mst.MPI_SOURCE;
  if (hdr.v[R_STATUS] != CLT_OK) {
    stage_close(&s, 0);
    clt_status hs = (clt_status)hdr.v[R_STATUS];
    return clt__error(hs, fn, "the sender, rank %d, failed (%s)", peer, clt_status_message(hs));
  }
  char list[256] = "";
  if (st == CLT_OK && hdr.v[R_DTYPE] != mine.v[R_DTYPE])
    st = CLT_ERR_DTYPE;
  else if (st == CLT_OK && !same_shape(&hdr, &mine, 0))
    st = CLT_ERR_SHAPE_MISMATCH;
  if (st == CLT_ERR_DTYPE || st == CLT_ERR_SHAPE_MISMATCH) {
    snprintf(list, sizeof list, "rank %d sends ", peer);
    describe(&hdr, list, sizeof list);
    strncat(list, ", this rank receives into ", sizeof list - strlen(list) - 1);
    describe(&mine, list, sizeof list);
    clt__error(st, fn, "%s", list);
  }
  record ack = mine;
  ack.v[R_STATUS] = st;
  ack.v[R_KIND] = REC_ACK;
  rc = MPI_Send(ack.v, R_LEN, MPI_INT64_T, peer, tag, comm);
  if (rc != MPI_SUCCESS || st != CLT_OK) {
    stage_close(&s, 0);
    return rc != MPI_SUCCESS ? mpi_error(fn, rc, "MPI_Send") : st;
  }
  rc = MPI_Recv(s.data, (int)s.nbytes, MPI_BYTE, peer, tag, comm, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    stage_close(&s, 0);
    return mpi_error(fn, rc, "MPI_Recv");
  }
  return stage_close(&s, 1);
}
