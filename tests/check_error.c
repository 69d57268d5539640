/* SPDX-License-Identifier: MIT */
/* check_error.c - the thread-local last error and clt_set_error, the public way for libraries
 * built on clt to report through it. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check_util.h"

START_TEST(test_set_error) {
  clt_status s = clt_set_error(CLT_ERR_IO, "my_reader", "cannot open %s (%d tries)", "a.bin", 3);
  ck_assert_int_eq(s, CLT_ERR_IO);
  ck_assert_int_eq(clt_last_status(), CLT_ERR_IO);
  ck_assert_str_eq(clt_last_error(), "my_reader: cannot open a.bin (3 tries)");

  /* Every error status is accepted and comes back as given. */
  for (int v = -1; v >= -15; v--) {
    s = clt_set_error((clt_status)v, "f", "status %d", v);
    ck_assert_int_eq(s, v);
    ck_assert_int_eq(clt_last_status(), v);
    char want[32];
    snprintf(want, sizeof want, "f: status %d", v);
    ck_assert_str_eq(clt_last_error(), want);
  }
  clt_clear_error();
  ck_assert_str_eq(clt_last_error(), "");
  ck_assert_int_eq(clt_last_status(), CLT_OK);
}
END_TEST

/* Wrapping the message of a failed nested call, as libclt_mpi does. */
START_TEST(test_set_error_quotes_last) {
  clt_device *d = CU_SENTINEL;
  ck_assert_int_ne(clt_device_get("nonsense", &d), CLT_OK);
  char inner[4096];
  snprintf(inner, sizeof inner, "%s", clt_last_error());
  clt_status s =
      clt_set_error(CLT_ERR_DEVICE_NOT_FOUND, "outer", "while loading: %s", clt_last_error());
  ck_assert_int_eq(s, CLT_ERR_DEVICE_NOT_FOUND);
  char want[4200];
  snprintf(want, sizeof want, "outer: while loading: %s", inner);
  ck_assert_str_eq(clt_last_error(), want);
}
END_TEST

/* Long names and messages are cut, never overflowed. */
START_TEST(test_set_error_long) {
  static char fn[1000], detail[10000];
  memset(fn, 'f', sizeof fn - 1);
  memset(detail, 'd', sizeof detail - 1);
  ck_assert_int_eq(clt_set_error(CLT_ERR_INTERNAL, fn, "%s", detail), CLT_ERR_INTERNAL);
  const char *m = clt_last_error();
  ck_assert_uint_eq(strlen(m), 4095);
  ck_assert_int_eq(strspn(m, "f"), 256);
  ck_assert(strncmp(m + 256, ": ddd", 5) == 0);
  ck_assert_int_eq(clt_last_status(), CLT_ERR_INTERNAL);
}
END_TEST

START_TEST(test_set_error_invalid) {
  CU_FAILS(clt_set_error((clt_status)-99, "f", "x"), CLT_ERR_INVALID_ARGUMENT, "clt_set_error");
  ck_assert_msg(strstr(clt_last_error(), "-99 is not a clt_status") != NULL, "message: %s",
                clt_last_error());
  CU_FAILS(clt_set_error((clt_status)1, "f", "x"), CLT_ERR_INVALID_ARGUMENT, "clt_set_error");
  CU_FAILS(clt_set_error(CLT_OK, "f", "x"), CLT_ERR_INVALID_ARGUMENT, "clt_set_error");
  ck_assert_msg(strstr(clt_last_error(), "clt_clear_error") != NULL, "message: %s",
                clt_last_error());
  CU_FAILS(clt_set_error(CLT_ERR_IO, NULL, "x"), CLT_ERR_INVALID_ARGUMENT, "clt_set_error");
  ck_assert_msg(strstr(clt_last_error(), "fn is NULL") != NULL, "message: %s", clt_last_error());
  CU_FAILS(clt_set_error(CLT_ERR_IO, "", "x"), CLT_ERR_INVALID_ARGUMENT, "clt_set_error");
  ck_assert_msg(strstr(clt_last_error(), "fn is empty") != NULL, "message: %s", clt_last_error());
  const char *no_fmt = NULL; /* through a variable: gcc warns about a literal NULL format */
  CU_FAILS(clt_set_error(CLT_ERR_IO, "f", no_fmt), CLT_ERR_INVALID_ARGUMENT, "clt_set_error");
  ck_assert_msg(strstr(clt_last_error(), "fmt is NULL") != NULL, "message: %s", clt_last_error());
}
END_TEST

static void *fail_in_thread(void *arg) {
  int *ok = arg;
  *ok = clt_set_error(CLT_ERR_IO, "there", "theirs") == CLT_ERR_IO &&
        strcmp(clt_last_error(), "there: theirs") == 0;
  return NULL;
}

/* The last error is per thread: another thread's failure does not show here. */
START_TEST(test_set_error_thread_local) {
  clt_set_error(CLT_ERR_FORMAT, "here", "mine");
  pthread_t th;
  int ok = 0;
  ck_assert_int_eq(pthread_create(&th, NULL, fail_in_thread, &ok), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_msg(ok, "the other thread did not see its own error");
  ck_assert_str_eq(clt_last_error(), "here: mine");
  ck_assert_int_eq(clt_last_status(), CLT_ERR_FORMAT);
}
END_TEST

Suite *error_suite(void) {
  Suite *s = suite_create("error");
  TCase *tc = cu_tcase("set_error");
  tcase_add_test(tc, test_set_error);
  tcase_add_test(tc, test_set_error_quotes_last);
  tcase_add_test(tc, test_set_error_long);
  tcase_add_test(tc, test_set_error_invalid);
  tcase_add_test(tc, test_set_error_thread_local);
  suite_add_tcase(s, tc);
  return s;
}
