/* error.c - status codes and the thread-local last error. */
#include "clt-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_message[4096];
static _Thread_local clt_status last_status = CLT_OK;

const char *clt_status_name(clt_status s) {
  switch (s) {
#define NAME_(name, value, msg)                                                                    \
  case CLT_##name:                                                                                 \
    return #name;
    CLT_STATUS_MAP(NAME_)
#undef NAME_
  }
  return "UNKNOWN";
}

const char *clt_status_message(clt_status s) {
  switch (s) {
#define MSG_(name, value, msg)                                                                     \
  case CLT_##name:                                                                                 \
    return msg;
    CLT_STATUS_MAP(MSG_)
#undef MSG_
  }
  return "unknown status";
}

const char *clt_last_error(void) { return last_message; }
clt_status clt_last_status(void) { return last_status; }
void clt_clear_error(void) {
  last_message[0] = '\0';
  last_status = CLT_OK;
}

/* Sets the last error to "<fn>: <fmt formatted>" and returns s. */
static clt_status set_error(clt_status s, const char *fn, const char *fmt, va_list ap) {
  char detail[sizeof last_message];
  vsnprintf(detail, sizeof detail, fmt, ap);
  /* The detail may quote the previous message (a nested call's error), so format apart. */
  size_t n = strlen(fn);
  if (n > 256)
    n = 256;
  memmove(last_message, fn, n); /* fn may be a prefix of the previous message */
  memcpy(last_message + n, ": ", 2);
  size_t room = sizeof last_message - n - 3, dl = strlen(detail);
  if (dl > room)
    dl = room;
  memcpy(last_message + n + 2, detail, dl);
  last_message[n + 2 + dl] = '\0';
  last_status = s;
  return s;
}

clt_status clt__error(clt_status s, const char *fn, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error(s, fn, fmt, ap);
  va_end(ap);
  return s;
}

/* 1 if s is a row of CLT_STATUS_MAP. */
static int known_status(clt_status s) {
  switch (s) {
#define KNOWN_(name, value, msg)                                                                   \
  case CLT_##name:                                                                                 \
    return 1;
    CLT_STATUS_MAP(KNOWN_)
#undef KNOWN_
  }
  return 0;
}

clt_status clt_set_error(clt_status s, const char *fn, const char *fmt, ...) {
  static const char me[] = "clt_set_error";
  if (!fn || !fn[0])
    return clt__error(CLT_ERR_INVALID_ARGUMENT, me, "fn is %s; pass the failing function's name",
                      fn ? "empty" : "NULL");
  if (!fmt)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, me, "fmt is NULL (the error of %.256s)", fn);
  if (s == CLT_OK)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, me,
                      "s is CLT_OK, which is not an error (the call for %.256s); forget an error "
                      "with clt_clear_error()",
                      fn);
  if (!known_status(s))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, me,
                      "s = %d is not a clt_status (the call for %.256s); use a CLT_ERR_ value",
                      (int)s, fn);
  va_list ap;
  va_start(ap, fmt);
  set_error(s, fn, fmt, ap);
  va_end(ap);
  return s;
}

const char *clt__cl_error_name(cl_int err) {
  switch (err) {
#define E_(x)                                                                                      \
  case x:                                                                                          \
    return #x;
    E_(CL_SUCCESS)
    E_(CL_DEVICE_NOT_FOUND) E_(CL_DEVICE_NOT_AVAILABLE) E_(CL_COMPILER_NOT_AVAILABLE) E_(
        CL_MEM_OBJECT_ALLOCATION_FAILURE) E_(CL_OUT_OF_RESOURCES) E_(CL_OUT_OF_HOST_MEMORY)
        E_(CL_PROFILING_INFO_NOT_AVAILABLE) E_(CL_MEM_COPY_OVERLAP) E_(CL_IMAGE_FORMAT_MISMATCH) E_(
            CL_IMAGE_FORMAT_NOT_SUPPORTED) E_(CL_BUILD_PROGRAM_FAILURE) E_(CL_MAP_FAILURE)
            E_(CL_MISALIGNED_SUB_BUFFER_OFFSET) E_(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) E_(
                CL_COMPILE_PROGRAM_FAILURE) E_(CL_LINKER_NOT_AVAILABLE) E_(CL_LINK_PROGRAM_FAILURE)
                E_(CL_DEVICE_PARTITION_FAILED) E_(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E_(
                    CL_INVALID_VALUE) E_(CL_INVALID_DEVICE_TYPE) E_(CL_INVALID_PLATFORM)
                    E_(CL_INVALID_DEVICE) E_(CL_INVALID_CONTEXT) E_(CL_INVALID_QUEUE_PROPERTIES) E_(
                        CL_INVALID_COMMAND_QUEUE) E_(CL_INVALID_HOST_PTR) E_(CL_INVALID_MEM_OBJECT)
                        E_(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E_(CL_INVALID_IMAGE_SIZE) E_(
                            CL_INVALID_SAMPLER) E_(CL_INVALID_BINARY) E_(CL_INVALID_BUILD_OPTIONS)
                            E_(CL_INVALID_PROGRAM) E_(CL_INVALID_PROGRAM_EXECUTABLE) E_(
                                CL_INVALID_KERNEL_NAME) E_(CL_INVALID_KERNEL_DEFINITION)
                                E_(CL_INVALID_KERNEL) E_(CL_INVALID_ARG_INDEX) E_(
                                    CL_INVALID_ARG_VALUE) E_(CL_INVALID_ARG_SIZE)
                                    E_(CL_INVALID_KERNEL_ARGS) E_(CL_INVALID_WORK_DIMENSION) E_(
                                        CL_INVALID_WORK_GROUP_SIZE) E_(CL_INVALID_WORK_ITEM_SIZE)
                                        E_(CL_INVALID_GLOBAL_OFFSET) E_(CL_INVALID_EVENT_WAIT_LIST)
                                            E_(CL_INVALID_EVENT) E_(CL_INVALID_OPERATION) E_(
                                                CL_INVALID_GL_OBJECT) E_(CL_INVALID_BUFFER_SIZE)
                                                E_(CL_INVALID_MIP_LEVEL)
                                                    E_(CL_INVALID_GLOBAL_WORK_SIZE) E_(
                                                        CL_INVALID_PROPERTY)
                                                        E_(CL_INVALID_IMAGE_DESCRIPTOR) E_(
                                                            CL_INVALID_COMPILER_OPTIONS)
                                                            E_(CL_INVALID_LINKER_OPTIONS) E_(
                                                                CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E_
                                                                case -1001
        : return "CL_PLATFORM_NOT_FOUND_KHR";
  }
  return "CL_UNKNOWN_ERROR";
}

clt_status clt__cl_error(cl_int err, const char *fn, const char *what, const clt_device *dev) {
  clt_status s = CLT_ERR_OPENCL;
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY ||
      err == CL_INVALID_BUFFER_SIZE)
    s = CLT_ERR_OUT_OF_MEMORY;
  return clt__error(s, fn, "%s failed on %s: %s (%d)", what, dev ? dev->name : "?",
                    clt__cl_error_name(err), (int)err);
}
