/* SPDX-License-Identifier: MIT */
/* fuzz_device_name.c - device names (clt_device_get) and operation names (clt_result_dtype) on
 * arbitrary strings.
 *
 * The input, with a NUL appended, is used as a C string: bytes after an embedded NUL are not part
 * of the name. The oracle is written here from the documented names: "cpu" and "host" are the
 * host; "cl:N" is OpenCL device N for N = 0 .. clt_device_count() - 1, written in decimal without
 * sign, spaces or leading zeros; nothing else names a device. Invariants:
 * - clt_device_get succeeds exactly for those names and gives that device, whose own name looks
 *   the same device up again; otherwise CLT_ERR_DEVICE_NOT_FOUND with "clt_device_get: ..." and
 *   the out-parameter untouched;
 * - clt_result_dtype(name, ...) succeeds exactly for the binary operation names of clt_ops.h.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

static const clt_status name_errors[] = {CLT_ERR_DEVICE_NOT_FOUND, CLT_OK};
static const clt_status op_errors[] = {CLT_ERR_INVALID_ARGUMENT, CLT_ERR_DTYPE, CLT_OK};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_init();
  return 0;
}

/* The device the oracle says name names, or NULL. */
static clt_device *expected_device(const char *name) {
  if (!strcmp(name, "cpu") || !strcmp(name, "host"))
    return clt_cpu();
  if (strncmp(name, "cl:", 3) != 0)
    return NULL;
  const char *digits = name + 3;
  size_t n = strlen(digits);
  if (n == 0 || n > 9 || (n > 1 && digits[0] == '0'))
    return NULL;
  long index = 0;
  for (size_t i = 0; i < n; i++) {
    if (digits[i] < '0' || digits[i] > '9')
      return NULL;
    index = index * 10 + (digits[i] - '0');
  }
  return index < clt_device_count() ? clt_device_at((int)index) : NULL;
}

/* The binary operations: the rows of arity 2 of the op table in clt_ops.h (the spec), NULL for
 * the others. */
#define BINARY_NAME_(name, arity, ...) (arity) == 2 ? #name : NULL,
static const char *const binary_ops[] = {CLT_ELEMENTWISE_OPS(BINARY_NAME_)};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *name = malloc(size + 1);
  FUZZ_CHECK(name, "out of memory in the fuzz target");
  memcpy(name, data, size);
  name[size] = '\0';

  clt_device *want = expected_device(name), *got = FUZZ_SENTINEL;
  clt_clear_error();
  clt_status s = clt_device_get(name, &got);
  fuzz_outcome = s == CLT_OK;
  if (want) {
    FUZZ_CHECK(s == CLT_OK, "clt_device_get(\"%s\") failed", name);
    FUZZ_CHECK(got == want, "clt_device_get(\"%s\") gave %s", name, clt_device_name(got));
    const char *canonical = clt_device_name(got);
    FUZZ_CHECK(canonical && *canonical, "a device without a name");
    FUZZ_CHECK(want == clt_cpu() || !strcmp(canonical, name), "\"%s\" named %s", name, canonical);
    clt_device *again = NULL;
    FUZZ_CHECK(clt_device_get(canonical, &again) == CLT_OK && again == got,
               "the device's own name %s does not look it up", canonical);
    FUZZ_CHECK(clt_device_is_host(got) == (want == clt_cpu()), "%s: wrong kind", name);
    const char *desc = clt_device_description(got);
    FUZZ_CHECK(desc && *desc, "%s has no description", name);
  } else {
    fuzz_check_failure(s, "clt_device_get", name_errors);
    FUZZ_CHECK(got == FUZZ_SENTINEL, "a failed clt_device_get(\"%s\") wrote its out-parameter",
               name);
  }

  int is_op = 0;
  for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
    is_op |= binary_ops[i] && !strcmp(name, binary_ops[i]);
  clt_dtype dt = (clt_dtype)-7;
  clt_clear_error();
  s = clt_result_dtype(name, CLT_I32, CLT_F32, &dt);
  if (is_op) {
    FUZZ_CHECK(s == CLT_OK, "clt_result_dtype(\"%s\", i32, f32) failed", name);
    FUZZ_CHECK(dt == CLT_F32 || dt == CLT_BOOL, "clt_result_dtype(\"%s\", i32, f32) gave %d", name,
               (int)dt);
  } else {
    fuzz_check_failure(s, "clt_result_dtype", op_errors);
    FUZZ_CHECK(dt == (clt_dtype)-7, "a failed clt_result_dtype wrote its out-parameter");
  }
  free(name);
  return 0;
}
