/* SPDX-License-Identifier: MIT */
/* fuzz_npy.c - the .npy loader (clt_load_npy) on hostile bytes.
 *
 * The input is a whole .npy file, loaded onto the host through clt__load_npy_mem (the in-memory
 * twin of clt_load_npy) and, when it loads and an OpenCL device exists, onto cl:0 as well.
 * Invariants:
 * - a failure is clean: CLT_ERR_FORMAT or CLT_ERR_DTYPE, clt_last_error() "clt_load_npy: ...",
 *   out untouched; never CLT_ERR_IO (all the bytes are there);
 * - a loaded tensor is consistent (numel = product of the shape, nbytes = numel x dtype size) and
 *   its elements are the file's last nbytes bytes (the data follows the header to the end of the
 *   file), possibly reordered (Fortran order) and possibly each byte-reversed (the other byte
 *   order), as a whole: the sorted elements match; bool elements are 0 or 1;
 * - the copy loaded onto cl:0 holds the same bytes as the host one.
 */
#include "fuzz.h"

#include "clt-internal.h" /* clt__load_npy_mem */

#include <stdlib.h>
#include <string.h>

static const clt_status npy_errors[] = {CLT_ERR_FORMAT, CLT_ERR_DTYPE, CLT_OK};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_init();
  return 0;
}

static size_t elem_size; /* for cmp_elem (qsort has no context argument in C11) */

static int cmp_elem(const void *a, const void *b) { return memcmp(a, b, elem_size); }

static void reverse_each(uint8_t *p, size_t n, size_t size) {
  for (size_t i = 0; i < n; i++, p += size)
    for (size_t a = 0, b = size - 1; a < b; a++, b--) {
      uint8_t t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

/* 1 if the n elements of size bytes at got are those at want in some order. */
static int same_elements(const uint8_t *got, const uint8_t *want, size_t n, size_t size,
                         int reverse) {
  size_t bytes = n * size;
  uint8_t *a = malloc(bytes ? bytes : 1), *b = malloc(bytes ? bytes : 1);
  FUZZ_CHECK(a && b, "out of memory in the fuzz target");
  memcpy(a, got, bytes);
  memcpy(b, want, bytes);
  if (reverse)
    reverse_each(b, n, size);
  elem_size = size;
  qsort(a, n, size, cmp_elem);
  qsort(b, n, size, cmp_elem);
  int same = memcmp(a, b, bytes) == 0;
  free(a);
  free(b);
  return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  clt_tensor *t = FUZZ_SENTINEL;
  clt_clear_error();
  clt_status s = clt__load_npy_mem(data, size, "fuzz.npy", clt_cpu(), &t);
  fuzz_outcome = s == CLT_OK;
  if (s != CLT_OK) {
    fuzz_check_failure(s, "clt_load_npy", npy_errors);
    FUZZ_CHECK(t == FUZZ_SENTINEL, "a failed clt_load_npy wrote its out-parameter");
    return 0;
  }
  FUZZ_CHECK(t && t != FUZZ_SENTINEL, "clt_load_npy succeeded without a tensor");
  FUZZ_CHECK(clt_device_is_host(clt_tensor_device(t)), "the tensor is not on cpu");
  clt_dtype dt = clt_tensor_dtype(t);
  size_t esize = clt_dtype_size(dt);
  FUZZ_CHECK(esize > 0, "the tensor has dtype %d", (int)dt);
  int ndim = clt_tensor_ndim(t);
  FUZZ_CHECK(ndim >= 0 && ndim <= CLT_MAX_DIMS, "the tensor has ndim %d", ndim);
  const int64_t *shape = clt_tensor_shape(t);
  int64_t numel = fuzz_numel(ndim, shape);
  FUZZ_CHECK(numel >= 0, "the tensor has a negative dimension or too many elements");
  FUZZ_CHECK(clt_tensor_numel(t) == numel, "numel %lld, product of the shape %lld",
             (long long)clt_tensor_numel(t), (long long)numel);
  size_t nbytes = clt_tensor_nbytes(t);
  FUZZ_CHECK(nbytes == (size_t)numel * esize, "nbytes %zu, numel x dtype size %zu", nbytes,
             (size_t)numel * esize);
  FUZZ_CHECK(nbytes + 10 <= size, "a %zu-byte tensor from a %zu-byte file", nbytes, size);
  const uint8_t *tail = data + size - nbytes;
  const uint8_t *got = clt_tensor_data(t);
  FUZZ_CHECK(got || nbytes == 0, "clt_tensor_data gave NULL: %s", clt_last_error());
  if (nbytes > 0) {
    FUZZ_CHECK(same_elements(got, tail, (size_t)numel, esize, 0) ||
                   (esize > 1 && same_elements(got, tail, (size_t)numel, esize, 1)),
               "the tensor's elements are not the file's last %zu bytes, reordered or swapped",
               nbytes);
    if (dt == CLT_BOOL)
      for (size_t k = 0; k < nbytes; k++)
        FUZZ_CHECK(got[k] <= 1, "bool element %zu is %u", k, got[k]);
  }

  clt_device *cl0 = clt_device_count() > 0 ? clt_device_at(0) : NULL;
  if (cl0 && (dt != CLT_F64 || clt_device_has_fp64(cl0))) {
    clt_tensor *u = FUZZ_SENTINEL;
    FUZZ_CHECK(clt__load_npy_mem(data, size, "fuzz.npy", cl0, &u) == CLT_OK,
               "the file loads onto cpu but not onto cl:0");
    FUZZ_CHECK(clt_tensor_device(u) == cl0 && clt_tensor_nbytes(u) == nbytes &&
                   clt_tensor_ndim(u) == ndim &&
                   !memcmp(clt_tensor_shape(u), shape, sizeof(int64_t) * (size_t)ndim),
               "the tensor loaded onto cl:0 differs from the one on cpu");
    uint8_t *buf = malloc(nbytes ? nbytes : 1);
    FUZZ_CHECK(buf, "out of memory in the fuzz target");
    FUZZ_CHECK(clt_tensor_read(u, buf, nbytes) == CLT_OK, "reading back from cl:0 failed");
    FUZZ_CHECK(nbytes == 0 || !memcmp(buf, got, nbytes),
               "the tensor loaded onto cl:0 holds other bytes than on cpu");
    free(buf);
    clt_tensor_release(u);
  }
  clt_tensor_release(t);
  return 0;
}
