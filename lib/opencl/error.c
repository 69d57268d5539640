/* SPDX-License-Identifier: MIT */
/* opencl/error.c - OpenCL error codes: their names, and the status and message an OpenCL
 * failure is reported with (lib/error.c keeps the thread's last error). */
#include "cl-internal.h"

const char *clt__cl_error_name(cl_int err) {
  switch (err) {
#define E_(x)                                                                                      \
  case x:                                                                                          \
    return #x;
    /* One code a line: clang-format would run these calls (no ';') together. */
    /* clang-format off */
    E_(CL_SUCCESS)
    E_(CL_DEVICE_NOT_FOUND)
    E_(CL_DEVICE_NOT_AVAILABLE)
    E_(CL_COMPILER_NOT_AVAILABLE)
    E_(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    E_(CL_OUT_OF_RESOURCES)
    E_(CL_OUT_OF_HOST_MEMORY)
    E_(CL_PROFILING_INFO_NOT_AVAILABLE)
    E_(CL_MEM_COPY_OVERLAP)
    E_(CL_IMAGE_FORMAT_MISMATCH)
    E_(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    E_(CL_BUILD_PROGRAM_FAILURE)
    E_(CL_MAP_FAILURE)
    E_(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    E_(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E_(CL_COMPILE_PROGRAM_FAILURE)
    E_(CL_LINKER_NOT_AVAILABLE)
    E_(CL_LINK_PROGRAM_FAILURE)
    E_(CL_DEVICE_PARTITION_FAILED)
    E_(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    E_(CL_INVALID_VALUE)
    E_(CL_INVALID_DEVICE_TYPE)
    E_(CL_INVALID_PLATFORM)
    E_(CL_INVALID_DEVICE)
    E_(CL_INVALID_CONTEXT)
    E_(CL_INVALID_QUEUE_PROPERTIES)
    E_(CL_INVALID_COMMAND_QUEUE)
    E_(CL_INVALID_HOST_PTR)
    E_(CL_INVALID_MEM_OBJECT)
    E_(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    E_(CL_INVALID_IMAGE_SIZE)
    E_(CL_INVALID_SAMPLER)
    E_(CL_INVALID_BINARY)
    E_(CL_INVALID_BUILD_OPTIONS)
    E_(CL_INVALID_PROGRAM)
    E_(CL_INVALID_PROGRAM_EXECUTABLE)
    E_(CL_INVALID_KERNEL_NAME)
    E_(CL_INVALID_KERNEL_DEFINITION)
    E_(CL_INVALID_KERNEL)
    E_(CL_INVALID_ARG_INDEX)
    E_(CL_INVALID_ARG_VALUE)
    E_(CL_INVALID_ARG_SIZE)
    E_(CL_INVALID_KERNEL_ARGS)
    E_(CL_INVALID_WORK_DIMENSION)
    E_(CL_INVALID_WORK_GROUP_SIZE)
    E_(CL_INVALID_WORK_ITEM_SIZE)
    E_(CL_INVALID_GLOBAL_OFFSET)
    E_(CL_INVALID_EVENT_WAIT_LIST)
    E_(CL_INVALID_EVENT)
    E_(CL_INVALID_OPERATION)
    E_(CL_INVALID_GL_OBJECT)
    E_(CL_INVALID_BUFFER_SIZE)
    E_(CL_INVALID_MIP_LEVEL)
    E_(CL_INVALID_GLOBAL_WORK_SIZE)
    E_(CL_INVALID_PROPERTY)
    E_(CL_INVALID_IMAGE_DESCRIPTOR)
    E_(CL_INVALID_COMPILER_OPTIONS)
    E_(CL_INVALID_LINKER_OPTIONS)
    E_(CL_INVALID_DEVICE_PARTITION_COUNT)
    /* clang-format on */
#undef E_
  case -1001:
    return "CL_PLATFORM_NOT_FOUND_KHR";
  }
  return "CL_UNKNOWN_ERROR";
}

clt_status clt__cl_error(cl_int err, const char *fn, const char *what, const clt_device *dev) {
  clt_status s = CLT_ERR_OPENCL;
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY ||
      err == CL_INVALID_BUFFER_SIZE)
    s = CLT_ERR_OUT_OF_MEMORY;
  char cause[1536];
  if ((err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST || err == CL_BUILD_PROGRAM_FAILURE) &&
      clt__deferred_failure(cause, sizeof cause))
    return clt__error(CLT_ERR_BUILD, fn, "%s failed on %s: %s (%d), since %s", what,
                      dev ? dev->name : "?", clt__cl_error_name(err), (int)err, cause);
  return clt__error(s, fn, "%s failed on %s: %s (%d)", what, dev ? dev->name : "?",
                    clt__cl_error_name(err), (int)err);
}
