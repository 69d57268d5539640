/* SPDX-License-Identifier: MIT */
/* fuzz_safetensors.c - the safetensors loader (clt_load) on hostile bytes.
 *
 * The input is a whole file: 8-byte header length, JSON header, data. It is loaded twice through
 * clt__load_mem, the in-memory twin of clt_load: first where the file says each tensor lives
 * (map_location NULL: __metadata__ names devices), then onto the host (clt_cpu()). Invariants:
 * - a failure is clean: an expected status, clt_last_error() "clt_load: ...", out untouched, and
 *   never CLT_ERR_IO (the bytes are all there: a read past the data is a validation bug);
 * - the two loads agree: both succeed with the same tensors, or fail with the same status and
 *   message, unless the first failed over a device (missing, or without fp64);
 * - each loaded tensor is consistent (numel = product of the shape, nbytes = numel x dtype size,
 *   a valid dtype and device, found under its own unique name), its bytes appear in the data
 *   section, bool elements are 0 or 1, and the tensors' sizes add up to the data section exactly
 *   (the loader refuses holes, overlaps and trailing bytes).
 */
#define _GNU_SOURCE /* memmem */
#include "fuzz.h"

#include "clt-internal.h" /* clt__load_mem */

#include <stdlib.h>
#include <string.h>

static const clt_status load_errors[] = {CLT_ERR_FORMAT, CLT_ERR_UNSUPPORTED,
                                         CLT_ERR_DEVICE_NOT_FOUND, CLT_OK};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_init();
  return 0;
}

/* Checks the loaded set p against the input; returns the total bytes of its tensors. */
static uint64_t check_params(const clt_params *p, const uint8_t *data, size_t size, int on_cpu) {
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--)
    hlen = hlen << 8 | data[i];
  FUZZ_CHECK(size >= 8 && hlen <= size - 8, "a load succeeded with header length %llu of %zu bytes",
             (unsigned long long)hlen, size);
  const uint8_t *section = data + 8 + hlen;
  size_t section_size = size - 8 - (size_t)hlen;
  uint64_t total = 0;
  size_t n = clt_params_count(p);
  for (size_t i = 0; i < n; i++) {
    const char *name = clt_params_name_at(p, i);
    clt_tensor *t = clt_params_tensor_at(p, i);
    FUZZ_CHECK(name && *name && t, "tensor %zu has no name or no tensor", i);
    FUZZ_CHECK(clt_params_get(p, name) == t, "tensor '%s' is not found under its name", name);
    for (size_t k = 0; k < i; k++)
      FUZZ_CHECK(strcmp(clt_params_name_at(p, k), name) != 0, "the name '%s' appears twice", name);
    clt_dtype dt = clt_tensor_dtype(t);
    size_t esize = clt_dtype_size(dt);
    FUZZ_CHECK(esize > 0 && clt_dtype_name(dt), "tensor '%s' has dtype %d", name, (int)dt);
    int ndim = clt_tensor_ndim(t);
    FUZZ_CHECK(ndim >= 0 && ndim <= CLT_MAX_DIMS, "tensor '%s' has ndim %d", name, ndim);
    const int64_t *shape = clt_tensor_shape(t);
    int64_t numel = fuzz_numel(ndim, shape);
    FUZZ_CHECK(numel >= 0, "tensor '%s' has a negative dimension or too many elements", name);
    FUZZ_CHECK(clt_tensor_numel(t) == numel, "tensor '%s': numel %lld, product of shape %lld", name,
               (long long)clt_tensor_numel(t), (long long)numel);
    FUZZ_CHECK(clt_tensor_nbytes(t) == (size_t)numel * esize,
               "tensor '%s': nbytes %zu, numel x dtype size %zu", name, clt_tensor_nbytes(t),
               (size_t)numel * esize);
    size_t nbytes = clt_tensor_nbytes(t);
    FUZZ_CHECK(nbytes <= section_size, "tensor '%s' holds %zu bytes, more than the %zu of the data",
               name, nbytes, section_size);
    clt_device *dev = clt_tensor_device(t), *again = NULL;
    FUZZ_CHECK(dev && clt_device_get(clt_device_name(dev), &again) == CLT_OK && again == dev,
               "tensor '%s' is on an unknown device", name);
    FUZZ_CHECK(!on_cpu || clt_device_is_host(dev), "tensor '%s' is on %s, not on the map_location",
               name, clt_device_name(dev));
    uint8_t *buf = malloc(nbytes ? nbytes : 1);
    FUZZ_CHECK(buf, "out of memory in the fuzz target");
    FUZZ_CHECK(clt_tensor_read(t, buf, nbytes) == CLT_OK, "reading tensor '%s' back failed", name);
    FUZZ_CHECK(nbytes == 0 || memmem(section, section_size, buf, nbytes),
               "tensor '%s' holds bytes that are not in the file's data section", name);
    if (dt == CLT_BOOL)
      for (size_t k = 0; k < nbytes; k++)
        FUZZ_CHECK(buf[k] <= 1, "bool tensor '%s' holds %u", name, buf[k]);
    free(buf);
    total += nbytes;
  }
  FUZZ_CHECK(total == section_size,
             "the tensors hold %llu bytes but the data section has %zu: a hole, an overlap or "
             "trailing bytes went unnoticed",
             (unsigned long long)total, section_size);
  return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  clt_params *where = FUZZ_SENTINEL, *cpu = FUZZ_SENTINEL;
  clt_clear_error();
  clt_status s1 = clt__load_mem(data, size, "fuzz.safetensors", NULL, &where);
  char msg1[4096];
  strcpy(msg1, clt_last_error());
  if (s1 == CLT_OK) {
    FUZZ_CHECK(where && where != FUZZ_SENTINEL, "clt_load succeeded without a set");
    check_params(where, data, size, 0);
  } else {
    fuzz_check_failure(s1, "clt_load", load_errors);
    FUZZ_CHECK(where == FUZZ_SENTINEL, "a failed clt_load wrote its out-parameter");
    where = NULL;
  }

  clt_clear_error();
  clt_status s2 = clt__load_mem(data, size, "fuzz.safetensors", clt_cpu(), &cpu);
  if (s2 == CLT_OK) {
    FUZZ_CHECK(cpu && cpu != FUZZ_SENTINEL, "clt_load succeeded without a set");
    check_params(cpu, data, size, 1);
  } else {
    fuzz_check_failure(s2, "clt_load", load_errors);
    FUZZ_CHECK(cpu == FUZZ_SENTINEL, "a failed clt_load wrote its out-parameter");
    FUZZ_CHECK(s2 != CLT_ERR_DEVICE_NOT_FOUND, "loading onto cpu failed over a device");
    cpu = NULL;
  }

  /* Where the file puts tensors only decides devices: it cannot make a good file bad, nor change
   * why a bad one is refused. */
  if (s1 == CLT_OK) {
    FUZZ_CHECK(s2 == CLT_OK, "the load succeeded where saved but failed onto cpu");
  } else if (s1 != CLT_ERR_DEVICE_NOT_FOUND && !strstr(msg1, "fp64")) {
    FUZZ_CHECK(s2 == s1 && strcmp(msg1, clt_last_error()) == 0,
               "loading where saved failed with \"%s\" but onto cpu with \"%s\"", msg1,
               s2 == CLT_OK ? "(success)" : clt_last_error());
  }
  if (where && cpu) {
    FUZZ_CHECK(clt_params_count(where) == clt_params_count(cpu), "the two loads differ in count");
    for (size_t i = 0; i < clt_params_count(cpu); i++) {
      const char *name = clt_params_name_at(cpu, i);
      clt_tensor *a = clt_params_get(where, name), *b = clt_params_tensor_at(cpu, i);
      FUZZ_CHECK(a && clt_tensor_dtype(a) == clt_tensor_dtype(b) &&
                     clt_tensor_ndim(a) == clt_tensor_ndim(b) &&
                     clt_tensor_nbytes(a) == clt_tensor_nbytes(b) &&
                     !memcmp(clt_tensor_shape(a), clt_tensor_shape(b),
                             sizeof(int64_t) * (size_t)clt_tensor_ndim(b)),
                 "tensor '%s' differs between the two loads", name);
    }
  }
  fuzz_outcome = s2 == CLT_OK;
  clt_params_release(where);
  clt_params_release(cpu);
  return 0;
}
