/* SPDX-License-Identifier: MIT */
/* check_dlpack.c - DLPack exchange: host export without a copy, deleters called exactly once
 * after the last reference, OpenCL round trips sharing one cl_mem, and refusals (strided
 * layouts, unknown device types, dtypes clt lacks). Skipped when clt was built without
 * <dlpack/dlpack.h>. */
#include "config.h"

#include "check_util.h"

#include <stdlib.h>
#include <string.h>

#ifdef HAVE_DLPACK
#include "clt_dlpack.h"

static int deleted;

static void count_deleter(DLManagedTensor *self) {
  deleted++;
  free(self->dl_tensor.data);
  free(self);
}

/* A malloc'ed host DLPack tensor of n f32 (0, 1, 2, ...), shape {n}, with count_deleter. */
static DLManagedTensor *host_tensor(int64_t *shape, int ndim, int64_t *strides) {
  DLManagedTensor *m = cu_malloc(sizeof *m);
  memset(m, 0, sizeof *m);
  int64_t n = cu_numel(ndim, shape);
  float *data = cu_malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++)
    data[i] = (float)i;
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = ndim;
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = shape;
  m->dl_tensor.strides = strides;
  m->deleter = count_deleter;
  return m;
}

START_TEST(test_export_host) {
  static const struct {
    clt_dtype dt;
    uint8_t code, bits;
  } types[] = {{CLT_F32, kDLFloat, 32}, {CLT_F64, kDLFloat, 64}, {CLT_I32, kDLInt, 32},
               {CLT_I64, kDLInt, 64},   {CLT_U8, kDLUInt, 8},    {CLT_BOOL, 6, 8}};
  int64_t shape[2] = {3, 4};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    clt_tensor *t;
    CU_OK(clt_zeros(types[i].dt, 2, shape, clt_cpu(), &t));
    DLManagedTensor *m;
    CU_OK(clt_to_dlpack(t, &m));
    DLTensor *d = &m->dl_tensor;
    ck_assert_ptr_eq(d->data, clt_tensor_data(t)); /* no copy */
    ck_assert_int_eq(d->device.device_type, kDLCPU);
    ck_assert_int_eq(d->device.device_id, 0);
    ck_assert_int_eq(d->ndim, 2);
    ck_assert(d->shape[0] == 3 && d->shape[1] == 4);
    ck_assert(d->strides && d->strides[0] == 4 && d->strides[1] == 1); /* C order, in elements */
    ck_assert_uint_eq(d->byte_offset, 0);
    ck_assert_uint_eq(d->dtype.code, types[i].code);
    ck_assert_uint_eq(d->dtype.bits, types[i].bits);
    ck_assert_uint_eq(d->dtype.lanes, 1);
    /* The manager keeps the tensor alive: release ours, write through the export. */
    clt_tensor *view;
    CU_OK(clt_reshape(t, 1, (int64_t[]){12}, &view));
    clt_tensor_release(t);
    ((uint8_t *)d->data)[0] = 1;
    ck_assert_uint_eq(((uint8_t *)clt_tensor_data(view))[0], 1);
    clt_tensor_release(view);
    m->deleter(m); /* the last reference: freed here (valgrind/ASan would see a leak otherwise) */
  }
  CU_FAILS(clt_to_dlpack(NULL, &(DLManagedTensor *){NULL}), CLT_ERR_INVALID_ARGUMENT,
           "clt_to_dlpack");
}
END_TEST

/* Import of host memory: no copy, the deleter called once, after the last clt reference. */
START_TEST(test_import_host) {
  int64_t shape[2] = {2, 3};
  DLManagedTensor *m = host_tensor(shape, 2, NULL);
  float *data = m->dl_tensor.data;
  deleted = 0;
  clt_tensor *t, *view, *sum;
  CU_OK(clt_from_dlpack(m, &t));
  cu_assert_meta(t, CLT_F32, clt_cpu(), 2, shape, "imported");
  ck_assert_ptr_eq(clt_tensor_data(t), data);
  CU_OK(clt_reshape(t, 1, (int64_t[]){6}, &view));
  CU_OK(clt_sum(view, &sum));
  double s;
  CU_OK(clt_item(sum, &s));
  ck_assert(s == 15.0);
  clt_tensor_release(sum);
  clt_tensor_release(t);
  ck_assert_int_eq(deleted, 0); /* the view still uses the memory */
  /* An asynchronous copy from it keeps it alive until the copy has read it. */
  clt_tensor *copy = NULL;
  if (clt_device_count() > 0)
    CU_OK(clt_to(view, clt_device_at(0), &copy));
  clt_tensor_release(view);
  if (copy) {
    float *v = cu_read(copy);
    for (int i = 0; i < 6; i++)
      ck_assert(v[i] == (float)i);
    free(v);
    clt_tensor_release(copy);
  }
  ck_assert_int_eq(deleted, 1);

  /* Strides equal to C-contiguous ones (and any stride on a size-1 dimension) are taken. */
  int64_t shape3[3] = {2, 1, 3}, strides3[3] = {3, 99, 1};
  m = host_tensor(shape3, 3, strides3);
  CU_OK(clt_from_dlpack(m, &t));
  clt_tensor_release(t);
  ck_assert_int_eq(deleted, 2);

  /* A NULL deleter is allowed: nothing to call. */
  m = host_tensor(shape, 2, NULL);
  data = m->dl_tensor.data;
  m->deleter = NULL;
  CU_OK(clt_from_dlpack(m, &t));
  clt_tensor_release(t);
  free(data);
  free(m);
  ck_assert_int_eq(deleted, 2);

  /* The allocator's statistics and cache never see foreign memory. */
  clt_memory_stats before, after;
  CU_OK(clt_device_memory_stats(clt_cpu(), &before));
  m = host_tensor(shape, 2, NULL);
  CU_OK(clt_from_dlpack(m, &t));
  clt_tensor_release(t);
  CU_OK(clt_device_memory_stats(clt_cpu(), &after));
  ck_assert(after.cached_bytes == before.cached_bytes);
  ck_assert(after.allocated_bytes == before.allocated_bytes);
  ck_assert_int_eq(deleted, 3);
}
END_TEST

/* clt -> DLPack -> clt on the host: the same memory, and both deleters run. */
START_TEST(test_round_trip_host) {
  clt_tensor *t, *u;
  CU_OK(clt_arange(0, 5, 1, CLT_I64, clt_cpu(), &t));
  DLManagedTensor *m;
  CU_OK(clt_to_dlpack(t, &m));
  CU_OK(clt_from_dlpack(m, &u));
  ck_assert_ptr_eq(clt_tensor_data(u), clt_tensor_data(t));
  ((int64_t *)clt_tensor_data(u))[4] = 42;
  ck_assert(((int64_t *)clt_tensor_data(t))[4] == 42);
  clt_tensor_release(t);
  clt_tensor_release(u); /* calls m->deleter, which releases t's last reference */
}
END_TEST

/* An OpenCL tensor exported as kDLOpenCL and imported back shares the same cl_mem. */
START_TEST(test_opencl_round_trip) {
  if (!cu_need_cl("test_opencl_round_trip", 1))
    return;
  for (int k = 0; k < cu_cl_count() && k < 2; k++) {
    clt_device *d = clt_device_at(k);
    clt_tensor *t, *u, *one;
    int64_t n = 1000;
    CU_OK(clt_arange(0, (double)n, 1, CLT_F32, d, &t));
    DLManagedTensor *m, *m2;
    CU_OK(clt_to_dlpack(t, &m));
    ck_assert_int_eq(m->dl_tensor.device.device_type, kDLOpenCL);
    ck_assert_int_eq(m->dl_tensor.device.device_id, k);
    ck_assert_ptr_nonnull(m->dl_tensor.data);
    ck_assert_uint_eq(m->dl_tensor.byte_offset, 0);
    clt_tensor_release(t); /* the manager keeps the buffer */
    CU_OK(clt_from_dlpack(m, &u));
    cu_assert_meta(u, CLT_F32, d, 1, &n, "imported");
    CU_OK(clt_to_dlpack(u, &m2));
    ck_assert_ptr_eq(m2->dl_tensor.data, m->dl_tensor.data); /* the same cl_mem */
    /* A write through u is seen through the exported handle (read back via a second import). */
    CU_OK(clt_ones(CLT_F32, 1, &n, d, &one));
    CU_OK(clt_add_(u, one));
    clt_tensor *w;
    CU_OK(clt_from_dlpack(m2, &w));
    float *v = cu_read(w);
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg(v[i] == (float)(i + 1), "%s: [%lld] = %g", cu_dev_name(d), (long long)i, v[i]);
    free(v);
    clt_tensor_release(one);
    clt_tensor_release(u);
    clt_tensor_release(w);
  }
  /* device_id naming no device of the buffer's context. */
  clt_tensor *t;
  CU_OK(clt_zeros(CLT_F32, 1, (int64_t[]){4}, clt_device_at(0), &t));
  DLManagedTensor *m;
  CU_OK(clt_to_dlpack(t, &m));
  m->dl_tensor.device.device_id = 99;
  clt_tensor *u = CU_SENTINEL;
  CU_FAILS(clt_from_dlpack(m, &u), CLT_ERR_DEVICE_NOT_FOUND, "clt_from_dlpack");
  ck_assert(u == CU_SENTINEL);
  m->dl_tensor.device.device_id = 0;
  m->dl_tensor.byte_offset = 2; /* not a whole element */
  CU_FAILS(clt_from_dlpack(m, &u), CLT_ERR_UNSUPPORTED, "clt_from_dlpack");
  m->dl_tensor.byte_offset = 4;
  m->dl_tensor.shape[0] = 100000; /* more than the buffer holds, from its second element */
  CU_FAILS(clt_from_dlpack(m, &u), CLT_ERR_INVALID_ARGUMENT, "clt_from_dlpack");
  ck_assert(u == CU_SENTINEL);
  /* 3 elements from the second: a view at offset 1 of the buffer (refusals left m ours) */
  m->dl_tensor.shape[0] = 3;
  m->dl_tensor.byte_offset = 4;
  CU_OK(clt_from_dlpack(m, &u));
  ck_assert_int_eq(clt_tensor_offset(u), 1);
  CU_OK(clt_fill_(u, 5));
  float z[4];
  CU_OK(clt_tensor_read(t, z, sizeof z));
  ck_assert(z[0] == 0 && z[1] == 5 && z[2] == 5 && z[3] == 5);
  clt_tensor_release(u); /* calls m's deleter */
  clt_tensor_release(t);
}
END_TEST

START_TEST(test_strided_import) {
  /* column-major 2 x 3 over the floats 0..5: a view, element (i, j) at i + 2 j */
  int64_t shape[2] = {2, 3}, strides[2] = {1, 2};
  DLManagedTensor *m = host_tensor(shape, 2, strides);
  deleted = 0;
  clt_tensor *t = NULL;
  CU_OK(clt_from_dlpack(m, &t));
  ck_assert(!clt_is_contiguous(t));
  ck_assert(clt_tensor_strides(t)[0] == 1 && clt_tensor_strides(t)[1] == 2);
  float v[6];
  CU_OK(clt_tensor_read(t, v, sizeof v));
  static const float want[6] = {0, 2, 4, 1, 3, 5};
  for (int i = 0; i < 6; i++)
    ck_assert_msg(v[i] == want[i], "element %d is %g, expected %g", i, v[i], want[i]);
  /* a write through the view lands in the producer's memory, at (1, 2) = element 5 */
  clt_tensor *row = NULL;
  CU_OK(clt_select(t, 0, 1, &row));
  CU_OK(clt_fill_(row, -7));
  const float *data = m->dl_tensor.data;
  ck_assert(data[1] == -7 && data[3] == -7 && data[5] == -7 && data[0] == 0 && data[4] == 4);
  clt_tensor_release(row);
  clt_tensor_release(t);
  ck_assert_int_eq(deleted, 1);
}
END_TEST

START_TEST(test_refusals) {
  int64_t shape[2] = {2, 3}, strides[2] = {-1, 2}; /* a negative stride */
  DLManagedTensor *m = host_tensor(shape, 2, strides);
  deleted = 0;
  clt_tensor *t = CU_SENTINEL;
  CU_FAILS(clt_from_dlpack(m, &t), CLT_ERR_UNSUPPORTED, "clt_from_dlpack");
  ck_assert(strstr(clt_last_error(), "contiguous") != NULL);
  m->dl_tensor.strides = NULL;
  m->dl_tensor.device.device_type = kDLCUDA;
  CU_FAILS(clt_from_dlpack(m, &t), CLT_ERR_UNSUPPORTED, "clt_from_dlpack");
  ck_assert(strstr(clt_last_error(), "kDLCUDA") != NULL);
  m->dl_tensor.device.device_type = (DLDeviceType)77;
  CU_FAILS(clt_from_dlpack(m, &t), CLT_ERR_UNSUPPORTED, "clt_from_dlpack");
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.dtype.bits = 8; /* float8: no clt dtype (float16 is f16) */
  CU_FAILS(clt_from_dlpack(m, &t), CLT_ERR_DTYPE, "clt_from_dlpack");
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 4;
  CU_FAILS(clt_from_dlpack(m, &t), CLT_ERR_DTYPE, "clt_from_dlpack");
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.dtype.code = kDLComplex;
  CU_FAILS(clt_from_dlpack(m, &t), CLT_ERR_DTYPE, "clt_from_dlpack");
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.ndim = 9;
  CU_FAILS(clt_from_dlpack(m, &t), CLT_ERR_INVALID_ARGUMENT, "clt_from_dlpack");
  m->dl_tensor.ndim = 2;
  shape[1] = -3;
  CU_FAILS(clt_from_dlpack(m, &t), CLT_ERR_INVALID_ARGUMENT, "clt_from_dlpack");
  shape[1] = 3;
  m->dl_tensor.byte_offset = 2; /* misaligned floats */
  CU_FAILS(clt_from_dlpack(m, &t), CLT_ERR_UNSUPPORTED, "clt_from_dlpack");
  m->dl_tensor.byte_offset = 0;
  CU_FAILS(clt_from_dlpack(NULL, &t), CLT_ERR_INVALID_ARGUMENT, "clt_from_dlpack");
  CU_FAILS(clt_from_dlpack(m, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_from_dlpack");
  ck_assert(t == CU_SENTINEL);
  ck_assert_int_eq(deleted, 0); /* a refused import never calls the deleter */
  m->deleter(m);
  ck_assert_int_eq(deleted, 1);
}
END_TEST

Suite *dlpack_suite(void) {
  Suite *s = suite_create("dlpack");
  TCase *tc = cu_tcase("dlpack");
  tcase_add_test(tc, test_export_host);
  tcase_add_test(tc, test_import_host);
  tcase_add_test(tc, test_round_trip_host);
  tcase_add_test(tc, test_opencl_round_trip);
  tcase_add_test(tc, test_strided_import);
  tcase_add_test(tc, test_refusals);
  suite_add_tcase(s, tc);
  return s;
}

#else /* !HAVE_DLPACK */

START_TEST(test_dlpack_missing) {
  cu_skip("dlpack", "clt was built without <dlpack/dlpack.h> (apt-get install libdlpack-dev)");
}
END_TEST

Suite *dlpack_suite(void) {
  Suite *s = suite_create("dlpack");
  TCase *tc = cu_tcase("dlpack");
  tcase_add_test(tc, test_dlpack_missing);
  suite_add_tcase(s, tc);
  return s;
}

#endif
