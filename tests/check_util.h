/* SPDX-License-Identifier: MIT */
/* check_util.h - helpers shared by the Check suites of clt.
 *
 * Check forks a child per test, and OpenCL state created before a fork does not survive in the
 * child (PoCL's worker threads are gone). So nothing here is called outside a test body: every
 * clt call happens inside START_TEST. The suites are registered in check_main.c.
 */
#ifndef CLT_CHECK_UTIL_H
#define CLT_CHECK_UTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clt.h"

/* ---- the suites (one per tests/check_<area>.c) ------------------------------------------- */
Suite *error_suite(void);
Suite *device_suite(void);
Suite *tensor_suite(void);
Suite *transfer_suite(void);
Suite *dispatch_suite(void);
Suite *elementwise_suite(void);
Suite *reduce_suite(void);
Suite *print_suite(void);
Suite *event_suite(void);
Suite *program_suite(void);
Suite *memory_suite(void);
Suite *ops_suite(void);
Suite *half_suite(void);        /* check_half.c: f16 and bf16 bits, compute, files */
Suite *backend_ops_suite(void); /* check_backend_ops.c: every op of clt_ops.h, generated */
Suite *random_suite(void);
Suite *matmul_suite(void);
Suite *npy_suite(void);
Suite *dlpack_suite(void);
Suite *params_suite(void);
Suite *io_suite(void);
Suite *badinput_suite(void);
Suite *threads_suite(void);
Suite *fuzz_suite(void);
Suite *oom_suite(void);    /* check_oom.c: out of memory (reliability) */
Suite *faults_suite(void); /* check_faults.c: injected faults (reliability) */
Suite *ref_suite(void);    /* check_ref.c: the reference backend, lib/ref/ (issue 12) */
Suite *linalg_suite(void); /* check_linalg.c: factorizations and solvers (issue 27) */

/* 1 when Check runs each test in its own child process (the default); set by check_main.c
 * before any test runs. Tests that need a fresh process (environment variables read once at
 * clt's initialization) skip themselves when it is 0. */
extern int cu_forked;

/* A test case with a generous timeout: PoCL compiles kernels at first use. */
TCase *cu_tcase(const char *name);

/* Prints "SKIP <test>: <why>" to stdout (Check has no skip status). */
void cu_skip(const char *test, const char *why);

/* ---- devices ------------------------------------------------------------------------------ */
#define CU_MAX_DEVICES 16

/* Fills devs with cpu and every device of the registry, cl:0, cl:1, ... and then those of other
 * backends (ref:0 under CLT_REF_DEVICES=1), at most CU_MAX_DEVICES, and returns how many. */
int cu_devices(clt_device **devs);

/* Whether d is an OpenCL device ("cl:N"): what a test of an OpenCL-only feature (user kernels,
 * cl_mem handles, the program cache, matmul's OpenCL paths) runs on. The OpenCL devices are
 * clt_device_at(0) to clt_device_at(cu_cl_count() - 1), before any other backend's. */
bool cu_is_cl(const clt_device *d);
int cu_cl_count(void);

/* 1 if there are at least n OpenCL devices; otherwise prints a skip message and gives 0. */
int cu_need_cl(const char *test, int n);

/* True when d is Oclgrind, the OpenCL simulator (its description contains "Oclgrind"). */
bool cu_is_oclgrind(const clt_device *d);

/* 1 if dtype dt can live on d; otherwise (f64 without fp64) prints a skip message, gives 0. */
int cu_dtype_ok(const char *test, clt_device *d, clt_dtype dt);

const char *cu_dev_name(clt_device *d);
const char *cu_dt_name(clt_dtype dt);
int cu_is_float(clt_dtype dt); /* f32, f64, f16, bf16 */
/* f16 and bf16 computed by the tests themselves: v rounded to dt (nearest, ties to even; inf
 * past the largest), its bits, and the value of bits. */
double cu_round_narrow(double v, clt_dtype dt);
uint16_t cu_narrow_bits(double v, clt_dtype dt);
double cu_narrow_value(uint16_t h, clt_dtype dt);

/* ---- status assertions -------------------------------------------------------------------- */
#define CU_OK(call)                                                                                \
  do {                                                                                             \
    clt_status cu_st_ = (call);                                                                    \
    ck_assert_msg(cu_st_ == CLT_OK, "%s failed: %s: %s", #call, clt_status_name(cu_st_),           \
                  clt_last_error());                                                               \
  } while (0)

/* The call fails with status want and clt_last_error() starts with "<fn>: ". */
#define CU_FAILS(call, want, fn)                                                                   \
  do {                                                                                             \
    clt_status cu_st_ = (call);                                                                    \
    ck_assert_msg(cu_st_ == (want), "%s gave %s, expected %s (last error: %s)", #call,             \
                  clt_status_name(cu_st_), clt_status_name(want), clt_last_error());               \
    ck_assert_msg(clt_last_status() == (want), "%s: clt_last_status() is %s, expected %s", #call,  \
                  clt_status_name(clt_last_status()), clt_status_name(want));                      \
    cu_assert_prefix(clt_last_error(), fn, #call);                                                 \
  } while (0)

/* Asserts msg starts with "<fn>: ". */
void cu_assert_prefix(const char *msg, const char *fn, const char *what);

/* An address no clt object can have: out-parameters are set to it before a call that must fail,
 * and must still hold it afterwards. */
extern char cu_sentinel_storage[16];
#define CU_SENTINEL ((void *)cu_sentinel_storage)

/* ---- host data ---------------------------------------------------------------------------- */
typedef struct cu_rng {
  uint64_t s;
} cu_rng;

void cu_rng_seed(cu_rng *r, uint64_t seed);
uint64_t cu_rng_next(cu_rng *r);
/* Uniform in [0, 1). */
double cu_rng_uniform(cu_rng *r);

#define CU_NONZERO 1 /* cu_fill flag: never produce 0 */

/* Fills n elements of dtype dt at buf: floats uniform in [lo, hi), integers uniform in
 * [lo, hi] (inclusive), bool 0 or 1 (lo and hi ignored; CU_NONZERO gives all true). */
void cu_fill(void *buf, clt_dtype dt, int64_t n, cu_rng *r, double lo, double hi, int flags);

/* Element i of a buffer of dtype dt, as a double or an int64_t. */
double cu_get(const void *buf, clt_dtype dt, int64_t i);
int64_t cu_get_i64(const void *buf, clt_dtype dt, int64_t i);
/* Stores v converted to dt (integers wrap around like C's unsigned conversion). */
void cu_set(void *buf, clt_dtype dt, int64_t i, double v);
void cu_set_i64(void *buf, clt_dtype dt, int64_t i, int64_t v);

/* malloc that fails the test instead of returning NULL; at least one byte. */
void *cu_malloc(size_t n);

/* Creates a tensor on dev from host data (asserts success). */
clt_tensor *cu_tensor(const void *src, clt_dtype dt, int ndim, const int64_t *shape,
                      clt_device *dev);

/* A copy of t's elements (any device) in a new malloc'ed buffer (asserts success). */
void *cu_read(const clt_tensor *t);

/* t's elements as doubles, malloc'ed. */
double *cu_read_double(const clt_tensor *t);

/* The one element of t (any device) as a double, by clt_item (asserts success). */
double cu_item(const clt_tensor *t);

/* Makes a fresh directory "$TMPDIR/clt-<name>-XXXXXX" (/tmp without TMPDIR) into dir, which
 * holds size bytes (asserts success); the test removes it. */
void cu_temp_dir(char *dir, size_t size, const char *name);
/* What a piece of code writes on stderr: cu_stderr_begin redirects it into a temporary file,
 * cu_stderr_end restores it and puts the text (NUL-terminated, at most size - 1 bytes) in text. */
typedef struct cu_stderr {
  char path[64];
  int fd, saved;
} cu_stderr;
void cu_stderr_begin(cu_stderr *c);
void cu_stderr_end(cu_stderr *c, char *text, size_t size);

/* Asserts t has this dtype, device and shape. */
void cu_assert_meta(const clt_tensor *t, clt_dtype dt, clt_device *dev, int ndim,
                    const int64_t *shape, const char *what);

/* |got - want| <= rtol * |want| + atol; NaN equals NaN; infinities must match. */
int cu_close(double got, double want, double rtol, double atol);

/* Relative tolerance for results of elementwise ops in dt (0 for integers: exact). */
double cu_rtol(clt_dtype dt);

/* ---- broadcasting oracle ------------------------------------------------------------------ */
/* NumPy broadcast of two shapes; returns the result's ndim or -1 if incompatible. */
int cu_broadcast(int na, const int64_t *sa, int nb, const int64_t *sb, int64_t *out);
/* The flat index into an operand of shape (n, shape) for flat index i of the result. */
int64_t cu_bindex(int64_t i, int nout, const int64_t *oshape, int n, const int64_t *shape);
int64_t cu_numel(int ndim, const int64_t *shape);

#endif /* CLT_CHECK_UTIL_H */
