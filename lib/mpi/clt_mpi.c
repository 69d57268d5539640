/* SPDX-License-Identifier: MIT */
/* clt_mpi.c - MPI collectives on clt tensors (libclt_mpi; see include/clt_mpi.h).
 *
 * Each call runs in steps. First every rank checks its own arguments and prepares its memory:
 * the elements of a host tensor (once pending copies into or out of it are done), or pinned host
 * memory for the staging slots of a device tensor. A local failure is not returned yet. Then the
 * ranks exchange one small record each (status, dtype, shape, the op or root, the chunk size
 * they can take, whether the tensor is on a device) with MPI_Allgather, and every rank reaches
 * the same verdict from the same records: a rank's failure, different dtypes or shapes fail
 * everywhere, so no rank is left waiting in a collective the others skipped. Only then does data
 * move (move()), in chunks of the same number of elements on every rank: the smallest that any
 * rank proposed, so that the MPI calls match even when ranks set different chunk sizes.
 *
 * Host tensors go to MPI in place, in chunks of at most INT_MAX elements (MPI counts are int).
 * Device tensors go through SLOTS pinned host slots in one staging session of libclt's
 * (clt_internal_stage_begin), whose copies run in order on the device: while MPI works on chunk
 * k in one slot, the device-to-host read of chunk k + 1 (and k + 2) fills the next slots and the
 * host-to-device write of chunk k - 1 drains the previous one, all started without blocking, each
 * giving a handle to wait for. The session's first copy waits for the tensor's pending work (its
 * last write, and every read if we write it); at its end (clt_internal_stage_end) the last copy
 * becomes the tensor's last write and the slots stay alive until it completes, so the call
 * returns with the last writes still in flight and later kernels wait for them. Where the device
 * shares the host's memory, the session maps the tensor instead (clt_internal_stage_map) and MPI
 * works on it chunk by chunk as on a host tensor: no copies ($CLT_MPI_MAP=0 copies anyway).
 *
 * A rank that fails while moving (a device error) keeps making the MPI calls, so that no rank
 * hangs, and a last small MPI_Allreduce (only when some rank has a device tensor; host tensors
 * cannot fail there) tells every rank, which then all return the failure.
 *
 * Errors are reported with the public clt_set_error. The staging needs a little that clt.h does
 * not give (asynchronous copies of byte ranges ordered against the tensor's other work, the
 * transfer counters): libclt exports it as the small, versioned interface of
 * lib/clt-internal-mpi.h, which takes public types and opaque handles only, and which libclt
 * carries to the device's backend, so that this file knows no backend and makes no OpenCL call.
 * Nothing else of libclt's internals is visible here (libclt is built with -fvisibility=hidden).
 * Every public function first checks that the libclt.so it runs with has that interface's
 * version (check_libclt). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#include "clt-internal-mpi.h"
#include "clt_mpi.h"
#include "fault.h" /* a fault-injection build counts our host allocations too (tests/mpi_test) */

/* Staging slots per device tensor: one under MPI, one being read ahead, one being written back.
 * With one in-order queue the copies run one at a time anyway, so more slots only let reads
 * run further ahead. */
enum { SLOTS = 3 };
/* 1 MiB: in bench/mpi_allreduce (PoCL, Open MPI over shared memory) it beat 256 KiB, 4 MiB and
 * 16 MiB in every run; larger chunks also leave the start and the end of the pipeline exposed. */
#define DEFAULT_CHUNK ((size_t)1 << 20)

/* ---- settings ------------------------------------------------------------------------------ */

static atomic_size_t chunk_bytes;
static int64_t max_count = INT_MAX; /* elements per MPI call; CLT_MPI_MAX_COUNT, for tests */
static int map_memory = 1; /* MPI on mapped device memory where it can; CLT_MPI_MAP=0: copies */
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

/* "4194304", "4m", "512k", "1g" (KiB, MiB, GiB) -> bytes; 0 and 1 on success. */
static int parse_size(const char *e, unsigned long long *out) {
  if (!e || !*e || strchr(e, '-'))
    return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(e, &end, 10), mult = 1;
  if (end == e || errno)
    return 0;
  switch (*end) {
  case 'k':
  case 'K':
    mult = 1ull << 10;
    end++;
    break;
  case 'm':
  case 'M':
    mult = 1ull << 20;
    end++;
    break;
  case 'g':
  case 'G':
    mult = 1ull << 30;
    end++;
    break;
  }
  if (*end || (v && mult > ULLONG_MAX / v) || v * mult > SIZE_MAX)
    return 0;
  *out = v * mult;
  return 1;
}

static void settings_init(void) {
  unsigned long long v;
  const char *e = getenv("CLT_MPI_CHUNK");
  size_t c = DEFAULT_CHUNK;
  if (e && parse_size(e, &v))
    c = (size_t)v;
  else if (e && *e)
    fprintf(stderr,
            "clt_mpi: warning: CLT_MPI_CHUNK='%s' is not a size in bytes (such as 4194304, 4m, "
            "512k, or 0 for whole tensors); using %zu\n",
            e, c);
  atomic_store(&chunk_bytes, c);
  e = getenv("CLT_MPI_MAP");
  if (e && strcmp(e, "0") == 0)
    map_memory = 0;
  else if (e && *e && strcmp(e, "1") != 0)
    fprintf(stderr, "clt_mpi: warning: CLT_MPI_MAP='%s' is not 0 or 1; using 1\n", e);
  e = getenv("CLT_MPI_MAX_COUNT");
  if (e && parse_size(e, &v) && v >= 1 && v <= INT_MAX)
    max_count = (int64_t)v;
  else if (e && *e)
    fprintf(stderr, "clt_mpi: warning: CLT_MPI_MAX_COUNT='%s' is not in [1, %d]; using %d\n", e,
            INT_MAX, INT_MAX);
}

size_t clt_mpi_chunk_set(size_t bytes) {
  pthread_once(&settings_once, settings_init);
  return atomic_exchange(&chunk_bytes, bytes);
}

size_t clt_mpi_chunk_get(void) {
  pthread_once(&settings_once, settings_init);
  return atomic_load(&chunk_bytes);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The elements per MPI call this rank proposes for moving numel elements of t. */
static int64_t propose_chunk(const clt_tensor *t, int64_t numel) {
  pthread_once(&settings_once, settings_init);
  int64_t c = numel;
  size_t bytes = atomic_load(&chunk_bytes);
  if (t && !clt_device_is_host(clt_tensor_device(t)) && bytes > 0)
    c = min64(c, (int64_t)(bytes / clt_dtype_size(clt_tensor_dtype(t))));
  c = min64(c, max_count);
  return c < 1 ? 1 : c;
}

/* ---- the record each rank contributes ------------------------------------------------------ */

enum {
  R_STATUS, /* the rank's own verdict on its arguments (clt_status) */
  R_KIND,   /* send/recv: REC_HEADER or REC_ACK; 0 in collectives */
  R_DTYPE,
  R_NDIM,
  R_NUMEL,
  R_PARAM,  /* the op (allreduce) or root (broadcast); 0 otherwise */
  R_CHUNK,  /* the elements per MPI call this rank proposes */
  R_DEVICE, /* 1 if the tensor is on a device (not the host) */
  R_SHAPE,  /* CLT_MAX_DIMS entries */
  R_LEN = R_SHAPE + CLT_MAX_DIMS
};
enum { REC_HEADER = 1, REC_ACK = 2 };

typedef struct record {
  int64_t v[R_LEN];
} record;

static record record_of(const clt_tensor *t, clt_status status, int64_t param, int64_t chunk) {
  record r;
  memset(&r, 0, sizeof r);
  r.v[R_STATUS] = status;
  r.v[R_PARAM] = param;
  r.v[R_CHUNK] = chunk;
  if (t) {
    r.v[R_DTYPE] = clt_tensor_dtype(t);
    r.v[R_NDIM] = clt_tensor_ndim(t);
    r.v[R_NUMEL] = clt_tensor_numel(t);
    r.v[R_DEVICE] = !clt_device_is_host(clt_tensor_device(t));
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
  return clt_set_error(CLT_ERR_IO, fn, "%s failed: %s", what, msg);
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

/* What the ranks agreed on, besides going ahead. */
typedef struct agreement {
  int nranks, me;
  int64_t chunk;  /* elements per MPI call: the smallest proposal */
  int any_device; /* some rank's tensor is on a device (not the host) */
  record *all;    /* every rank's record, if asked for (malloc'ed; the caller frees) */
} agreement;

/* Exchanges what the ranks need to agree on and returns the verdict every rank reaches.
 * mine.v[R_STATUS] is this rank's own status, whose message is already set. param_name names
 * R_PARAM ("op", "root"), or NULL if it is not compared. need_all: the caller needs every rank's
 * record (allgather: the rows of each). On CLT_OK, *a is filled; a->all (NULL unless need_all)
 * must be freed.
 *
 * First one MPI_Allreduce (MPI_MAX) of a vector of fixed size: each field of the record and its
 * negation (so the maximum gives the largest and the smallest value every rank has), the lowest
 * failing rank with its status, and the lowest rank that could not allocate the table of every
 * rank's record. That needs no memory that grows with the ranks, so a rank whose malloc fails
 * still takes part, and every rank learns of it, instead of leaving the others waiting in a
 * collective it skipped. Only when the table is needed (need_all, or fields that differ, to name
 * the ranks in the message) and every rank has it does an MPI_Allgather of the records follow. */
enum { V_HI = 0, V_LO = R_LEN, V_NOTABLE = 2 * R_LEN, V_LEN };

/* The key of rank me in a maximum: nranks - me, so that the lowest rank has the largest key, and
 * 0 stands for no rank. */
static int64_t rank_key(int nranks, int me) { return (int64_t)nranks - me; }

static clt_status agree(const char *fn, MPI_Comm comm, const record *mine, const char *param_name,
                        int tail_only, int need_all, agreement *a) {
  int nranks = 0, me = 0;
  int rc = MPI_Comm_size(comm, &nranks);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_rank(comm, &me);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Comm_size");
  record *all = malloc((size_t)nranks * sizeof *all);

  int64_t in[V_LEN], out[V_LEN];
  for (int i = 0; i < R_LEN; i++) {
    in[V_HI + i] = mine->v[i];
    in[V_LO + i] = -mine->v[i]; /* no field is INT64_MIN: its negation is defined */
  }
  /* The lowest failing rank wins the maximum: (nranks - rank) above, its status below. */
  clt_status own = (clt_status)mine->v[R_STATUS];
  in[V_HI + R_STATUS] =
      own == CLT_OK ? 0 : (rank_key(nranks, me) << 32) | (int64_t)(uint32_t)(int32_t)own;
  in[V_LO + R_STATUS] = 0;
  in[V_NOTABLE] = all ? 0 : rank_key(nranks, me);
  rc = MPI_Allreduce(in, out, V_LEN, MPI_INT64_T, MPI_MAX, comm);
  if (rc != MPI_SUCCESS) {
    free(all);
    return mpi_error(fn, rc, "MPI_Allreduce");
  }

  clt_status verdict = CLT_OK;
  if (out[V_HI + R_STATUS] != 0) {
    int r = nranks - (int)(out[V_HI + R_STATUS] >> 32);
    clt_status s = (clt_status)(int32_t)(uint32_t)(out[V_HI + R_STATUS] & 0xffffffff);
    verdict = r == me ? own
                      : clt_set_error(s, fn, "rank %d failed (%s); every rank returns its status",
                                      r, clt_status_message(s));
  } else if (out[V_NOTABLE] != 0) {
    int r = nranks - (int)out[V_NOTABLE];
    char who[32] = "this rank";
    if (r != me)
      snprintf(who, sizeof who, "rank %d", r);
    verdict = clt_set_error(CLT_ERR_OUT_OF_MEMORY, fn,
                            "%s could not allocate the records of %d ranks; every rank returns "
                            "this status",
                            who, nranks);
  }
  if (verdict != CLT_OK) {
    free(all);
    return verdict;
  }

  /* Which fields differ between ranks: the largest value is not the smallest. */
#define DIFFERS(i) (out[V_HI + (i)] != -out[V_LO + (i)])
  int param_differs = param_name && DIFFERS(R_PARAM);
  int dtype_differs = DIFFERS(R_DTYPE);
  int shape_differs = DIFFERS(R_NDIM) || (!tail_only && DIFFERS(R_NUMEL));
  for (int i = tail_only ? 1 : 0; i < CLT_MAX_DIMS; i++)
    shape_differs |= DIFFERS(R_SHAPE + i);
#undef DIFFERS

  if (need_all || param_differs || dtype_differs || shape_differs) {
    rc = MPI_Allgather(mine->v, R_LEN, MPI_INT64_T, all->v, R_LEN, MPI_INT64_T, comm);
    if (rc != MPI_SUCCESS) {
      free(all);
      return mpi_error(fn, rc, "MPI_Allgather");
    }
  }
  char list[1024];
  if (param_differs) {
    int r = 1;
    while (r < nranks - 1 && all[r].v[R_PARAM] == all[0].v[R_PARAM])
      r++;
    verdict = clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn,
                            "ranks pass different %s values: rank 0 %lld, rank %d %lld", param_name,
                            (long long)all[0].v[R_PARAM], r, (long long)all[r].v[R_PARAM]);
  } else if (dtype_differs) {
    describe_all(all, nranks, list, sizeof list);
    verdict = clt_set_error(CLT_ERR_DTYPE, fn, "ranks pass different dtypes: %s", list);
  } else if (shape_differs) {
    describe_all(all, nranks, list, sizeof list);
    verdict = clt_set_error(CLT_ERR_SHAPE_MISMATCH, fn, "ranks pass different shapes%s: %s",
                            tail_only ? " (beyond the first dimension)" : "", list);
  }
  if (verdict != CLT_OK) {
    free(all);
    return verdict;
  }
  a->nranks = nranks;
  a->me = me;
  a->chunk = -out[V_LO + R_CHUNK]; /* the smallest proposal */
  a->any_device = out[V_HI + R_DEVICE] != 0;
  if (!need_all) {
    free(all);
    all = NULL;
  }
  a->all = all;
  return CLT_OK;
}

/* After the data moved: every rank learns whether some rank failed locally while moving, so
 * that none returns CLT_OK with wrong data. */
static clt_status settle(const char *fn, MPI_Comm comm, clt_status local, int me) {
  struct {
    int status, rank;
  } in = {local, me}, out = {0, 0};
  int rc = MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, comm);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Allreduce");
  if (out.status == CLT_OK)
    return CLT_OK;
  if (local != CLT_OK)
    return local; /* our own message is set */
  return clt_set_error((clt_status)out.status, fn,
                       "rank %d failed while moving the data (%s); the result is undefined on "
                       "every rank",
                       out.rank, clt_status_message((clt_status)out.status));
}

/* ---- moving data in chunks ------------------------------------------------------------------ */

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
  case CLT_F16: /* moved as bits; allreduce refuses them (MPI has no 16-bit float sum) */
  case CLT_BF16:
    return MPI_UINT16_T;
  default: /* CLT_U8, CLT_BOOL */
    return MPI_UINT8_T;
  }
}

/* This rank's memory for one call: host (a host tensor's elements) or slots (staging for a
 * device tensor dev: a pinned host tensor, or a pageable one where pinning failed) with the
 * last read into and write from each slot, which outlive one move (allgather makes several),
 * and the last command of all. */
typedef struct local_mem {
  void *host;
  clt_device *dev;
  clt_tensor *slots;
  clt_internal_done *rd[SLOTS], *wr[SLOTS], *last;
} local_mem;

/* Replaces *slot by ev (a handle of dev's, whose reference it takes), releasing the old one. */
static void hold(clt_device *dev, clt_internal_done **slot, clt_internal_done *ev) {
  clt_internal_done_release(dev, *slot);
  *slot = ev;
}

/* ---- staging memory kept between calls ------------------------------------------------------
 * Pinning and first touching the slots takes time (10 ms for 12 MiB on PoCL, as long as a
 * whole 64 MiB allreduce in 1 MiB chunks takes on two ranks), and a training loop makes the same
 * calls every step: so each device keeps its last staging block (up to CACHE_MAX_BYTES) with the
 * last command that used it. The next call takes it over without waiting: its slots start out
 * "being written back" by that command, which the pipeline already waits for before touching a
 * slot. The cache is emptied at MPI_Finalize (an attribute of MPI_COMM_SELF, deleted first thing
 * there). */

enum { CACHE_MAX = 16 };
#define CACHE_MAX_BYTES ((int64_t)64 << 20)

typedef struct cached {
  clt_device *dev;
  clt_tensor *slots;
  clt_internal_done *last;
} cached;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cached cache[CACHE_MAX];
static int ncached, cache_hooked;

static void cached_release(cached *c) {
  clt_tensor_release(c->slots); /* kept alive by its pending commands (clt_internal_keep_alive) */
  hold(c->dev, &c->last, NULL);
}

static int cache_clear(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm;
  (void)keyval;
  (void)attr;
  (void)extra;
  pthread_mutex_lock(&cache_lock);
  cached all[CACHE_MAX];
  int n = ncached;
  memcpy(all, cache, sizeof all);
  ncached = 0;
  pthread_mutex_unlock(&cache_lock);
  for (int i = 0; i < n; i++)
    cached_release(&all[i]);
  return MPI_SUCCESS;
}

/* Takes dev's cached block into lm if it holds at least bytes; 1 if it did. */
static int cache_take(clt_device *dev, int64_t bytes, local_mem *lm) {
  cached c = {NULL, NULL, NULL};
  pthread_mutex_lock(&cache_lock);
  for (int i = 0; i < ncached; i++)
    if (cache[i].dev == dev && (int64_t)clt_tensor_nbytes(cache[i].slots) >= bytes) {
      c = cache[i];
      cache[i] = cache[--ncached];
      break;
    }
  pthread_mutex_unlock(&cache_lock);
  if (!c.slots)
    return 0;
  lm->slots = c.slots;
  for (int j = 0; j < SLOTS && c.last; j++) {
    clt_internal_done_retain(dev, c.last);
    lm->wr[j] = c.last; /* the device's copies are in order: every earlier use is done with it */
  }
  hold(dev, &c.last, NULL);
  return 1;
}

/* Gives lm's staging block to the cache (in place of dev's smaller one), or releases it. */
static void cache_give(local_mem *lm) {
  cached c = {lm->dev, lm->slots, lm->last}, out = {NULL, NULL, NULL};
  lm->slots = NULL;
  lm->last = NULL;
  if ((int64_t)clt_tensor_nbytes(c.slots) > CACHE_MAX_BYTES) {
    cached_release(&c);
    return;
  }
  pthread_mutex_lock(&cache_lock);
  int i = 0;
  while (i < ncached && cache[i].dev != c.dev)
    i++;
  if (i < ncached) { /* keep the larger block */
    out = clt_tensor_nbytes(cache[i].slots) >= clt_tensor_nbytes(c.slots) ? c : cache[i];
    if (out.slots != c.slots)
      cache[i] = c;
  } else if (ncached < CACHE_MAX) {
    cache[ncached++] = c;
  } else {
    out = c;
  }
  if (!cache_hooked) {
    int keyval;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, cache_clear, &keyval, NULL) == MPI_SUCCESS &&
        MPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL) == MPI_SUCCESS) {
      cache_hooked = 1;
      MPI_Comm_free_keyval(&keyval); /* freed for good once the attribute is deleted */
    }
  }
  pthread_mutex_unlock(&cache_lock);
  if (out.slots)
    cached_release(&out);
}

/* Prepares lm for moving numel elements of t in chunks of `chunk` elements (or fewer: a smaller
 * agreed chunk fits the same slots). */
static clt_status prepare(const char *fn, clt_tensor *t, int64_t numel, int64_t chunk,
                          local_mem *lm) {
  memset(lm, 0, sizeof *lm);
  clt_device *dev = clt_tensor_device(t);
  lm->dev = dev;
  if (clt_device_is_host(dev)) {
    lm->host = clt_tensor_data(t); /* waits for pending copies into or out of t */
    if (!lm->host && clt_tensor_nbytes(t) > 0)
      return clt_last_status() != CLT_OK ? clt_last_status()
                                         : clt_set_error(CLT_ERR_INTERNAL, fn, "no host data");
    return CLT_OK;
  }
  if (numel == 0)
    return CLT_OK;
  int64_t nchunks = (numel + chunk - 1) / chunk;
  int64_t bytes = min64(SLOTS, nchunks) * chunk * (int64_t)clt_dtype_size(clt_tensor_dtype(t));
  if (cache_take(dev, bytes, lm))
    return CLT_OK;
  clt_status st = clt_empty_pinned(CLT_U8, 1, &bytes, dev, &lm->slots);
  if (st != CLT_OK) {
    st = clt_empty(CLT_U8, 1, &bytes, clt_cpu(), &lm->slots);
    if (st != CLT_OK)
      return clt_set_error(st, fn, "no host memory to stage %s's tensor through: %s",
                           clt_device_name(dev), clt_last_error());
    clt_clear_error();
  }
  return CLT_OK;
}

/* Gives lm's staging block back (to the cache) and drops its events. */
static void release_mem(local_mem *lm) {
  for (int j = 0; j < SLOTS; j++) {
    hold(lm->dev, &lm->rd[j], NULL);
    hold(lm->dev, &lm->wr[j], NULL);
  }
  if (lm->slots)
    cache_give(lm);
  hold(lm->dev, &lm->last, NULL);
}

/* The MPI call on one chunk: count elements at buf. Returns MPI's code. */
typedef int (*mpi_step)(void *buf, int count, void *ctx);

/* One transfer through MPI: numel elements, read from src (from element src_first) and/or
 * written to dst (from element dst_first), chunk elements per step. src and dst are on one
 * device when both are given; host tensors use src_host/dst_host (their element 0), device
 * tensors the slots. */
typedef struct move {
  const char *fn, *what; /* the public function, the MPI call (for messages) */
  clt_tensor *src, *dst;
  int64_t src_first, dst_first, numel, chunk;
  void *src_host, *dst_host;
  local_mem *mem;
  mpi_step step;
  void *ctx;
} move;

static clt_status move_host(const move *m) {
  size_t elem = clt_dtype_size(clt_tensor_dtype(m->src ? m->src : m->dst));
  for (int64_t first = 0; first < m->numel; first += m->chunk) {
    int count = (int)min64(m->chunk, m->numel - first);
    char *s = m->src ? (char *)m->src_host + (size_t)(m->src_first + first) * elem : NULL;
    char *d = m->dst ? (char *)m->dst_host + (size_t)(m->dst_first + first) * elem : NULL;
    if (s && d && s != d)
      memcpy(d, s, (size_t)count * elem);
    int rc = m->step(d ? d : s, count, m->ctx);
    if (rc != MPI_SUCCESS)
      return mpi_error(m->fn, rc, m->what);
  }
  return CLT_OK;
}

/* The device path of move(). *local is this rank's status: once it is an error, the remaining
 * chunks skip the device and only make their MPI calls. Returns an MPI failure (after which
 * nothing can be relied on), else CLT_OK. */
static clt_status move_device(const move *m, clt_status *local) {
  const char *fn = m->fn;
  clt_tensor *t = m->dst ? m->dst : m->src;
  clt_device *d = clt_tensor_device(t);
  size_t elem = clt_dtype_size(clt_tensor_dtype(t)), cbytes = (size_t)m->chunk * elem;
  int64_t nchunks = (m->numel + m->chunk - 1) / m->chunk;
  int nslots =
      (int)min64(min64(SLOTS, nchunks), (int64_t)(clt_tensor_nbytes(m->mem->slots) / cbytes));
  char *slots = clt_internal_host_ptr(m->mem->slots);
  clt_internal_done **rd = m->mem->rd, **wr = m->mem->wr, *last = NULL;
  /* The session's first copy waits for the tensors' pending work; the rest follow it in order. */
  clt_internal_stage *stage = NULL;
  if (*local == CLT_OK)
    *local = clt_internal_stage_begin(m->src, m->dst, fn, &stage);
  /* Where the device shares the host's memory, MPI works on the tensor itself: no copies, each
   * chunk as for a host tensor. Where it cannot (or mapping fails), the copies below. */
  void *src_map = NULL, *dst_map = NULL;
  if (*local == CLT_OK && map_memory) {
    if (clt_internal_stage_map(stage, (size_t)m->src_first * elem, (size_t)m->dst_first * elem,
                               (size_t)m->numel * elem, &src_map, &dst_map) == CLT_OK) {
      move h = *m;
      h.src_host = src_map;
      h.dst_host = dst_map;
      h.src_first = h.dst_first = 0;
      clt_status st = move_host(&h);
      *local = clt_internal_stage_end(stage, NULL);
      return st;
    }
    clt_clear_error();
  }
  int64_t next_read = 0;
  clt_status st = CLT_OK;

  for (int64_t k = 0; k < nchunks && st == CLT_OK; k++) {
    int j = (int)(k % nslots);
    char *buf = slots + (size_t)j * cbytes;
    int count = (int)min64(m->chunk, m->numel - k * m->chunk);
    /* Read ahead into the free slots: chunk i goes to slot i % nslots, which chunk i - nslots
     * left; its write-back was started before, and the read waits for it. */
    while (m->src && *local == CLT_OK && next_read < nchunks && next_read < k + nslots) {
      int64_t i = next_read;
      int ji = (int)(i % nslots);
      clt_internal_done *ev = NULL;
      size_t len = (size_t)min64(m->chunk, m->numel - i * m->chunk) * elem;
      *local = clt_internal_stage_read(stage, (size_t)(m->src_first + i * m->chunk) * elem, len,
                                       slots + (size_t)ji * cbytes, wr[ji], &ev);
      if (*local != CLT_OK)
        break;
      clt_internal_done_retain(d, ev);
      hold(d, &last, ev);
      hold(d, &rd[ji], ev);
      next_read++;
    }
    if (*local == CLT_OK)
      *local = clt_internal_done_wait(d, rd[j], fn, "reading a chunk to the host");
    /* Even after a failure: the slot may still be copied from, for this call or an earlier. */
    clt_status ws = clt_internal_done_wait(d, wr[j], fn, "writing a chunk to the device");
    if (*local == CLT_OK)
      *local = ws;
    int rc = m->step(buf, count, m->ctx);
    if (rc != MPI_SUCCESS) {
      st = mpi_error(fn, rc, m->what);
      break;
    }
    if (m->dst && *local == CLT_OK) {
      clt_internal_done *ev = NULL;
      *local = clt_internal_stage_write(stage, (size_t)(m->dst_first + k * m->chunk) * elem,
                                        (size_t)count * elem, buf, NULL, &ev);
      if (*local != CLT_OK)
        continue;
      clt_internal_done_retain(d, ev);
      hold(d, &last, ev);
      hold(d, &wr[j], ev);
    }
  }

  if (last) {
    clt_internal_done_retain(d, last);
    hold(d, &m->mem->last, last); /* for the next user of the slots */
  }
  /* The slots stay alive until the last copy completes, and the tensors record it, so that
   * later commands wait for the copies (lib/clt-internal-mpi.h). */
  clt_status s = clt_internal_stage_end(stage, m->mem->slots);
  hold(d, &last, NULL);
  if (*local == CLT_OK)
    *local = s;
  return st;
}

/* Runs m. Returns an MPI failure at once; a local failure (the device's) goes to *local, the MPI
 * calls still being made so that the other ranks do not wait forever. */
static clt_status move_run(const move *m, clt_status *local) {
  if (m->numel == 0)
    return CLT_OK;
  clt_tensor *t = m->dst ? m->dst : m->src;
  if (clt_device_is_host(clt_tensor_device(t)))
    return move_host(m);
  return move_device(m, local);
}

/* ---- the device --------------------------------------------------------------------------- */

static _Thread_local char device_reason[256];

/* How many OpenCL devices there are: the registry lists them first (clt_device_at(0) on), then
 * the devices of other backends (ref:0 under CLT_REF_DEVICES), which MPI stages as well but which
 * are for testing: a rank gets one only by asking for it. */
static int cl_device_count(void) {
  int n = 0;
  while (n < clt_device_count() &&
         clt_device_cl(clt_device_at(n), NULL, NULL, NULL, NULL) == CLT_OK)
    n++;
  clt_clear_error();
  return n;
}

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
    return clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  int n = cl_device_count();
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

/* ---- collectives ---------------------------------------------------------------------------- */

/* The libclt.so this process loaded must speak our version of lib/clt-internal-mpi.h: a libclt_mpi
 * and a libclt from different builds fail every call here rather than misread each other. */
static clt_status check_libclt(const char *fn) {
  int theirs = clt_internal_mpi_version();
  if (theirs != CLT_INTERNAL_MPI_VERSION)
    return clt_set_error(CLT_ERR_INTERNAL, fn,
                         "libclt_mpi %s was built for version %d of libclt's internal MPI "
                         "interface, but the loaded libclt %s has version %d; install libclt and "
                         "libclt_mpi from the same build",
                         PACKAGE_VERSION, CLT_INTERNAL_MPI_VERSION, clt_version(), theirs);
  return CLT_OK;
}

static clt_status check_tensor(const char *fn, const clt_tensor *t) {
  clt_status st = check_libclt(fn);
  if (st != CLT_OK)
    return st;
  if (!t)
    return clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn, "t is NULL");
  if (!clt_is_contiguous(t))
    return clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn,
                         "t is a view whose elements are not contiguous; MPI moves contiguous "
                         "memory: use clt_contiguous(t, &c) (and clt_copy(t, c) afterwards to "
                         "write a received result back into the view)");
  return CLT_OK;
}

typedef struct reduce_ctx {
  MPI_Datatype type;
  MPI_Op op;
  MPI_Comm comm;
  clt_dtype dtype;
  int mean_of; /* CLT_MPI_MEAN: the number of ranks to divide by; 0 otherwise */
} reduce_ctx;

static int reduce_step(void *buf, int count, void *ctx) {
  reduce_ctx *c = ctx;
  int rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, c->type, c->op, c->comm);
  if (rc == MPI_SUCCESS && c->mean_of) {
    if (c->dtype == CLT_F32) {
      float *p = buf;
      for (int i = 0; i < count; i++)
        p[i] /= (float)c->mean_of;
    } else {
      double *p = buf;
      for (int i = 0; i < count; i++)
        p[i] /= (double)c->mean_of;
    }
  }
  return rc;
}

clt_status clt_mpi_allreduce(clt_tensor *t, clt_mpi_op op, MPI_Comm comm) {
  static const char fn[] = "clt_mpi_allreduce";
  local_mem lm = {0};
  int64_t numel = clt_tensor_numel(t), chunk = propose_chunk(t, numel);
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK && (op < CLT_MPI_SUM || op > CLT_MPI_MEAN))
    st = clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn, "unknown op %d", (int)op);
  clt_dtype dt = clt_tensor_dtype(t);
  if (st == CLT_OK && (dt == CLT_F16 || dt == CLT_BF16))
    st = clt_set_error(CLT_ERR_DTYPE, fn,
                       "%s is not supported: MPI has no 16-bit float arithmetic; cast to f32 "
                       "with clt_cast first (broadcast, send and gather move f16 and bf16 as they "
                       "are)",
                       clt_dtype_name(dt));
  if (st == CLT_OK && op == CLT_MPI_MEAN && dt != CLT_F32 && dt != CLT_F64)
    st = clt_set_error(CLT_ERR_DTYPE, fn, "CLT_MPI_MEAN takes f32 or f64, not %s: cast first",
                       clt_dtype_name(dt));
  if (st == CLT_OK)
    st = prepare(fn, t, numel, chunk, &lm);

  record mine = record_of(t, st, op, chunk);
  agreement a;
  clt_status verdict = agree(fn, comm, &mine, "op", 0, 0, &a);
  if (verdict != CLT_OK) {
    release_mem(&lm);
    return verdict;
  }
  free(a.all);

  reduce_ctx c = {mpi_type(dt),
                  op == CLT_MPI_MAX   ? MPI_MAX
                  : op == CLT_MPI_MIN ? MPI_MIN
                                      : MPI_SUM,
                  comm, dt, op == CLT_MPI_MEAN ? a.nranks : 0};
  if (dt == CLT_BOOL)
    c.op = op == CLT_MPI_MIN ? MPI_LAND : MPI_LOR;
  move m = {.fn = fn,
            .what = "MPI_Allreduce",
            .src = t,
            .dst = t,
            .numel = numel,
            .chunk = a.chunk,
            .src_host = lm.host,
            .dst_host = lm.host,
            .mem = &lm,
            .step = reduce_step,
            .ctx = &c};
  clt_status local = CLT_OK;
  st = move_run(&m, &local);
  release_mem(&lm);
  if (st != CLT_OK)
    return st;
  return a.any_device ? settle(fn, comm, local, a.me) : local;
}

typedef struct bcast_ctx {
  MPI_Datatype type;
  int root;
  MPI_Comm comm;
} bcast_ctx;

static int bcast_step(void *buf, int count, void *ctx) {
  bcast_ctx *c = ctx;
  return MPI_Bcast(buf, count, c->type, c->root, c->comm);
}

clt_status clt_mpi_broadcast(clt_tensor *t, int root, MPI_Comm comm) {
  static const char fn[] = "clt_mpi_broadcast";
  local_mem lm = {0};
  int me = 0, nranks = 0;
  int rc = MPI_Comm_rank(comm, &me);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_size(comm, &nranks);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Comm_rank");
  int64_t numel = clt_tensor_numel(t), chunk = propose_chunk(t, numel);
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK && (root < 0 || root >= nranks))
    st = clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn, "root %d is not a rank of the %d", root,
                       nranks);
  if (st == CLT_OK)
    st = prepare(fn, t, numel, chunk, &lm);

  record mine = record_of(t, st, root, chunk);
  agreement a;
  clt_status verdict = agree(fn, comm, &mine, "root", 0, 0, &a);
  if (verdict != CLT_OK) {
    release_mem(&lm);
    return verdict;
  }
  free(a.all);
  bcast_ctx c = {mpi_type(clt_tensor_dtype(t)), root, comm};
  /* The root only reads t; the others only write it. */
  move m = {.fn = fn,
            .what = "MPI_Bcast",
            .src = me == root ? t : NULL,
            .dst = me == root ? NULL : t,
            .numel = numel,
            .chunk = a.chunk,
            .src_host = lm.host,
            .dst_host = lm.host,
            .mem = &lm,
            .step = bcast_step,
            .ctx = &c};
  clt_status local = CLT_OK;
  st = move_run(&m, &local);
  release_mem(&lm);
  if (st != CLT_OK)
    return st;
  return a.any_device ? settle(fn, comm, local, a.me) : local;
}

/* Every rank's piece goes to every rank as one chunked broadcast from its owner into its place
 * in the result: MPI_Allgatherv takes int counts and displacements, which would cap the result
 * at INT_MAX elements, and pieces of different sizes cannot be chunked in step with it. */
clt_status clt_mpi_allgather(clt_tensor *t, MPI_Comm comm, clt_tensor **out) {
  static const char fn[] = "clt_mpi_allgather";
  local_mem lm = {0};
  int64_t numel = clt_tensor_numel(t);
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK && !out)
    st = clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if (st == CLT_OK && clt_tensor_ndim(t) == 0)
    st = clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn,
                       "t is 0-d; allgather joins along the first dimension: reshape to [1]");
  if (st == CLT_OK && clt_device_is_host(clt_tensor_device(t)))
    st = prepare(fn, t, numel, 1, &lm); /* the slots come with the result, below */

  /* Pieces differ in size: propose the device chunk (or the largest count), not our size. */
  record mine = record_of(t, st, 0, propose_chunk(t, INT64_MAX));
  agreement a;
  clt_status verdict = agree(fn, comm, &mine, NULL, 1, 1, &a);
  if (verdict != CLT_OK)
    return verdict;

  int64_t rows = 0, largest = 0;
  for (int r = 0; r < a.nranks; r++) {
    rows += a.all[r].v[R_SHAPE];
    largest = largest > a.all[r].v[R_NUMEL] ? largest : a.all[r].v[R_NUMEL];
  }
  /* An allocation failure here is local; it is still reported after the exchange, so a rank
   * that fails does not leave the others waiting. */
  clt_tensor *res = NULL;
  local_mem res_mem = {0};
  int64_t shape[CLT_MAX_DIMS];
  memcpy(shape, clt_tensor_shape(t), (size_t)clt_tensor_ndim(t) * sizeof *shape);
  shape[0] = rows;
  int64_t chunk = min64(a.chunk, largest > 0 ? largest : 1); /* the same on every rank */
  st = clt_empty(clt_tensor_dtype(t), clt_tensor_ndim(t), shape, clt_tensor_device(t), &res);
  if (st == CLT_OK)
    st = prepare(fn, res, largest, chunk, &res_mem);
  /* Second exchange, of the allocation verdicts: all ranks go on or none does. The maximum of
   * nranks - rank over the ranks that failed names the lowest of them. */
  int failed = st == CLT_OK ? 0 : a.nranks - a.me, first_failed = 0;
  int rc = MPI_Allreduce(&failed, &first_failed, 1, MPI_INT, MPI_MAX, comm);
  if (rc != MPI_SUCCESS || first_failed) {
    free(a.all);
    clt_tensor_release(res);
    release_mem(&res_mem);
    if (rc != MPI_SUCCESS)
      return mpi_error(fn, rc, "MPI_Allreduce");
    return st != CLT_OK ? st
                        : clt_set_error(CLT_ERR_OUT_OF_MEMORY, fn,
                                        "rank %d could not allocate its result; every rank "
                                        "returns this status",
                                        a.nranks - first_failed);
  }

  bcast_ctx c = {mpi_type(clt_tensor_dtype(t)), 0, comm};
  clt_status local = CLT_OK;
  int64_t first = 0;
  for (int r = 0; r < a.nranks && st == CLT_OK; r++) {
    c.root = r;
    int64_t n = a.all[r].v[R_NUMEL];
    move m = {.fn = fn,
              .what = "MPI_Bcast",
              .src = r == a.me ? t : NULL,
              .dst = res,
              .dst_first = first,
              .numel = n,
              .chunk = chunk,
              .src_host = lm.host,
              .dst_host = res_mem.host,
              .mem = &res_mem,
              .step = bcast_step,
              .ctx = &c};
    st = move_run(&m, &local);
    first += n;
  }
  free(a.all);
  release_mem(&res_mem);
  if (st == CLT_OK && a.any_device)
    st = settle(fn, comm, local, a.me);
  else if (st == CLT_OK)
    st = local;
  if (st != CLT_OK) {
    clt_tensor_release(res);
    return st;
  }
  *out = res;
  return CLT_OK;
}

/* ---- point to point -------------------------------------------------------------------------
 * The sender sends a header record; the receiver answers with an ack record carrying its own
 * verdict; only on an ok does the data follow, in chunks of the smaller of the two proposals,
 * then the sender's own status while moving (so that a receiver never takes garbage for data).
 * Both ends therefore fail together on a mismatch, and no message is left unreceived. */

typedef struct p2p_ctx {
  MPI_Datatype type;
  int peer, tag;
  MPI_Comm comm;
} p2p_ctx;

static int send_step(void *buf, int count, void *ctx) {
  p2p_ctx *c = ctx;
  return MPI_Send(buf, count, c->type, c->peer, c->tag, c->comm);
}

static int recv_step(void *buf, int count, void *ctx) {
  p2p_ctx *c = ctx;
  return MPI_Recv(buf, count, c->type, c->peer, c->tag, c->comm, MPI_STATUS_IGNORE);
}

/* Moves t's data to (sending) or from peer in chunks, then releases lm; the one data phase of
 * clt_mpi_send and clt_mpi_recv. Returns an MPI failure; a local one goes to *local. */
static clt_status p2p_move(const char *fn, clt_tensor *t, int sending, int peer, int tag,
                           MPI_Comm comm, int64_t chunk, local_mem *lm, clt_status *local) {
  p2p_ctx c = {mpi_type(clt_tensor_dtype(t)), peer, tag, comm};
  move m = {.fn = fn,
            .what = sending ? "MPI_Send" : "MPI_Recv",
            .src = sending ? t : NULL,
            .dst = sending ? NULL : t,
            .numel = clt_tensor_numel(t),
            .chunk = chunk,
            .src_host = sending ? lm->host : NULL,
            .dst_host = sending ? NULL : lm->host,
            .mem = lm,
            .step = sending ? send_step : recv_step,
            .ctx = &c};
  clt_status st = move_run(&m, local);
  release_mem(lm);
  return st;
}

clt_status clt_mpi_send(clt_tensor *t, int dest, int tag, MPI_Comm comm) {
  static const char fn[] = "clt_mpi_send";
  local_mem lm = {0};
  int64_t numel = clt_tensor_numel(t), chunk = propose_chunk(t, numel);
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK)
    st = prepare(fn, t, numel, chunk, &lm);
  record hdr = record_of(t, st, 0, chunk), ack;
  hdr.v[R_KIND] = REC_HEADER;
  int rc = MPI_Send(hdr.v, R_LEN, MPI_INT64_T, dest, tag, comm);
  if (rc != MPI_SUCCESS) {
    release_mem(&lm);
    return mpi_error(fn, rc, "MPI_Send");
  }
  if (st != CLT_OK)
    return st; /* the receiver sees our failure in the header and sends no ack */
  rc = MPI_Recv(ack.v, R_LEN, MPI_INT64_T, dest, tag, comm, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    release_mem(&lm);
    return mpi_error(fn, rc, "MPI_Recv");
  }
  if (ack.v[R_KIND] != REC_ACK) {
    release_mem(&lm);
    return clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn,
                         "rank %d sent to this rank (tag %d) while this rank was sending to it: "
                         "order the sends and receives so that each send meets a receive",
                         dest, tag);
  }
  if (ack.v[R_STATUS] != CLT_OK) {
    release_mem(&lm);
    char mine[128] = "", theirs[128] = "";
    describe(&hdr, mine, sizeof mine);
    describe(&ack, theirs, sizeof theirs);
    clt_status vs = (clt_status)ack.v[R_STATUS];
    return clt_set_error(vs, fn,
                         "rank %d refused the tensor (%s): it receives into %s, this rank "
                         "sends %s",
                         dest, clt_status_message(vs), theirs, mine);
  }
  clt_status local = CLT_OK;
  st = p2p_move(fn, t, 1, dest, tag, comm, min64(chunk, ack.v[R_CHUNK]), &lm, &local);
  if (st != CLT_OK)
    return st;
  int64_t trailer = local;
  rc = MPI_Send(&trailer, 1, MPI_INT64_T, dest, tag, comm);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Send");
  return local;
}

clt_status clt_mpi_recv(clt_tensor *t, int src, int tag, MPI_Comm comm) {
  static const char fn[] = "clt_mpi_recv";
  local_mem lm = {0};
  int64_t numel = clt_tensor_numel(t), chunk = propose_chunk(t, numel);
  clt_status st = check_tensor(fn, t);
  if (st == CLT_OK)
    st = prepare(fn, t, numel, chunk, &lm);
  record hdr, mine = record_of(t, st, 0, chunk);
  MPI_Status mst;
  int rc = MPI_Recv(hdr.v, R_LEN, MPI_INT64_T, src, tag, comm, &mst);
  if (rc != MPI_SUCCESS) {
    release_mem(&lm);
    return mpi_error(fn, rc, "MPI_Recv");
  }
  int peer = mst.MPI_SOURCE;
  if (hdr.v[R_STATUS] != CLT_OK) {
    release_mem(&lm);
    clt_status hs = (clt_status)hdr.v[R_STATUS];
    return clt_set_error(hs, fn, "the sender, rank %d, failed (%s)", peer, clt_status_message(hs));
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
    clt_set_error(st, fn, "%s", list);
  }
  record ack = mine;
  ack.v[R_STATUS] = st;
  ack.v[R_KIND] = REC_ACK;
  rc = MPI_Send(ack.v, R_LEN, MPI_INT64_T, peer, tag, comm);
  if (rc != MPI_SUCCESS || st != CLT_OK) {
    release_mem(&lm);
    return rc != MPI_SUCCESS ? mpi_error(fn, rc, "MPI_Send") : st;
  }
  clt_status local = CLT_OK;
  st = p2p_move(fn, t, 0, peer, tag, comm, min64(chunk, hdr.v[R_CHUNK]), &lm, &local);
  if (st != CLT_OK)
    return st;
  int64_t trailer = CLT_OK;
  rc = MPI_Recv(&trailer, 1, MPI_INT64_T, peer, tag, comm, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS)
    return mpi_error(fn, rc, "MPI_Recv");
  if (local != CLT_OK)
    return local;
  if (trailer != CLT_OK)
    return clt_set_error((clt_status)trailer, fn,
                         "the sender, rank %d, failed while sending (%s); t's contents are "
                         "undefined",
                         peer, clt_status_message((clt_status)trailer));
  return CLT_OK;
}
