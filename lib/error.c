/* SPDX-License-Identifier: MIT */
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
