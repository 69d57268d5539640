/* SPDX-License-Identifier: MIT */
/* dtype.c - the dtypes: names, sizes, OpenCL C types, kinds, and a value stored as one.
 * The bottom layer (docs/architecture.md): it calls nothing of clt's but the error report. */
#include "backend.h"

#include <math.h>

static const struct {
  const char *name;
  size_t size;
  const char *cl_type;
} dtypes[CLT_DTYPE_COUNT] = {
    [CLT_F32] = {"f32", 4, "float"}, [CLT_F64] = {"f64", 8, "double"},
    [CLT_I32] = {"i32", 4, "int"},   [CLT_I64] = {"i64", 8, "long"},
    [CLT_U8] = {"u8", 1, "uchar"},   [CLT_BOOL] = {"bool", 1, "uchar"},
    [CLT_F16] = {"f16", 2, "half"},  [CLT_BF16] = {"bf16", 2, "ushort"},
};

static bool dtype_valid(clt_dtype dt) { return (unsigned)dt < CLT_DTYPE_COUNT; }
const char *clt_dtype_name(clt_dtype dt) { return dtype_valid(dt) ? dtypes[dt].name : NULL; }
size_t clt_dtype_size(clt_dtype dt) { return dtype_valid(dt) ? dtypes[dt].size : 0; }
const char *clt__dtype_cl_type(clt_dtype dt) { return dtypes[dt].cl_type; }
bool clt__dtype_is_float(clt_dtype dt) {
  return dt == CLT_F32 || dt == CLT_F64 || dt == CLT_F16 || dt == CLT_BF16;
}
bool clt__dtype_is_half(clt_dtype dt) { return dt == CLT_F16 || dt == CLT_BF16; }

bool clt__dtype_is_int(clt_dtype dt) { return dt == CLT_I32 || dt == CLT_I64 || dt == CLT_U8; }

clt_status clt__check_dtype(clt_dtype dt, const char *fn, const char *arg) {
  if (!dtype_valid(dt))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "%s = %d is not a dtype (use CLT_F32, CLT_F64, CLT_I32, CLT_I64, CLT_U8, "
                      "CLT_BOOL, CLT_F16 or CLT_BF16)",
                      arg, (int)dt);
  return CLT_OK;
}

clt_status clt__scalar_bytes(clt_dtype dt, double v, void *buf, const char *fn) {
  if (clt__dtype_is_int(dt)) {
    double lo = dt == CLT_U8 ? 0 : dt == CLT_I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = dt == CLT_U8 ? 255 : dt == CLT_I32 ? 2147483647.0 : 9223372036854775807.0;
    if (isnan(v) || v != floor(v) || v < lo || (dt == CLT_I64 ? v >= hi : v > hi))
      /* hi is 2^63 for i64 (the first double past INT64_MAX): the bound printed is INT64_MAX */
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "value %g cannot be stored in %s (an integer in [%.0f, %s] is needed)", v,
                        clt_dtype_name(dt), lo,
                        dt == CLT_U8    ? "255"
                        : dt == CLT_I32 ? "2147483647"
                                        : "9223372036854775807");
  }
  switch (dt) {
  case CLT_F32:
    *(float *)buf = (float)v;
    break;
  case CLT_F64:
    *(double *)buf = v;
    break;
  case CLT_I32:
    *(int32_t *)buf = (int32_t)v;
    break;
  case CLT_I64:
    *(int64_t *)buf = (int64_t)v;
    break;
  case CLT_U8:
    *(uint8_t *)buf = (uint8_t)v;
    break;
  case CLT_BOOL:
    *(uint8_t *)buf = v != 0;
    break;
  case CLT_F16: /* through f32, as every conversion to f16 and bf16 (as PyTorch's) */
    *(uint16_t *)buf = clt__f32_to_f16((float)v);
    break;
  case CLT_BF16:
    *(uint16_t *)buf = clt__f32_to_bf16((float)v);
    break;
  }
  return CLT_OK;
}
