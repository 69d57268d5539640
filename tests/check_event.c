/* SPDX-License-Identifier: MIT */
/* check_event.c - events, timing and synchronization. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

#define EV_N ((INT64_C(1) << 20) + 3)

/* x = 1, then x = x + x four times: every element 16. */
static clt_tensor *busy_work(clt_device *dev) {
  int64_t shape[1] = {EV_N};
  clt_tensor *x = NULL;
  CU_OK(clt_ones(CLT_F32, 1, shape, dev, &x));
  for (int k = 0; k < 4; k++) {
    clt_tensor *y = NULL;
    CU_OK(clt_add(x, x, &y));
    clt_tensor_release(x);
    x = y;
  }
  return x;
}

START_TEST(test_elapsed) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    const char *dn = cu_dev_name(devs[d]);
    clt_event *start = CU_SENTINEL, *end = CU_SENTINEL;
    CU_OK(clt_event_record(devs[d], &start));
    ck_assert_msg(start != CU_SENTINEL && start != NULL, "no event on %s", dn);
    clt_tensor *x = busy_work(devs[d]);
    CU_OK(clt_event_record(devs[d], &end));
    double ms = -1;
    CU_OK(clt_event_elapsed_ms(start, end, &ms));
    ck_assert_msg(ms >= 0 && isfinite(ms), "elapsed on %s: %g ms", dn, ms);
    ck_assert_msg(ms < 600000, "elapsed on %s: %g ms (implausible)", dn, ms);
    /* Both events are complete now; waiting again is fine. */
    CU_OK(clt_event_wait(start));
    CU_OK(clt_event_wait(end));
    double ms2 = -1;
    CU_OK(clt_event_elapsed_ms(start, end, &ms2));
    ck_assert_msg(ms2 == ms, "elapsed on %s changed: %g then %g", dn, ms, ms2);
    /* The work is done: the data is right. */
    float *v = cu_read(x);
    ck_assert_msg(v[0] == 16.0f && v[EV_N - 1] == 16.0f, "busy work on %s: %g", dn, (double)v[0]);
    free(v);
    clt_tensor_release(x);
    clt_event_release(start);
    clt_event_release(end);
  }
}
END_TEST

START_TEST(test_wait) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  for (int d = 0; d < ndev; d++) {
    clt_tensor *x = busy_work(devs[d]);
    clt_event *ev = NULL;
    CU_OK(clt_event_record(devs[d], &ev));
    CU_OK(clt_event_wait(ev));
    clt_event_release(ev);
    float *v = cu_read(x);
    ck_assert_msg(v[EV_N / 2] == 16.0f, "after wait on %s: %g", cu_dev_name(devs[d]),
                  (double)v[EV_N / 2]);
    free(v);
    clt_tensor_release(x);
  }
}
END_TEST

START_TEST(test_event_errors) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  clt_event *ev[CU_MAX_DEVICES];
  for (int d = 0; d < ndev; d++)
    CU_OK(clt_event_record(devs[d], &ev[d]));
  for (int a = 0; a < ndev; a++) {
    for (int b = 0; b < ndev; b++) {
      if (a == b)
        continue;
      double ms = -777;
      clt_status s = clt_event_elapsed_ms(ev[a], ev[b], &ms);
      ck_assert_msg(s == CLT_ERR_INVALID_ARGUMENT,
                    "elapsed between events of %s and %s gave %s, expected ERR_INVALID_ARGUMENT",
                    cu_dev_name(devs[a]), cu_dev_name(devs[b]), clt_status_name(s));
      cu_assert_prefix(clt_last_error(), "clt_event_elapsed_ms", "events of two devices");
      ck_assert_msg(ms == -777, "failed clt_event_elapsed_ms changed ms");
    }
  }
  double ms = -777;
  CU_FAILS(clt_event_elapsed_ms(NULL, ev[0], &ms), CLT_ERR_INVALID_ARGUMENT,
           "clt_event_elapsed_ms");
  CU_FAILS(clt_event_elapsed_ms(ev[0], NULL, &ms), CLT_ERR_INVALID_ARGUMENT,
           "clt_event_elapsed_ms");
  CU_FAILS(clt_event_elapsed_ms(ev[0], ev[0], NULL), CLT_ERR_INVALID_ARGUMENT,
           "clt_event_elapsed_ms");
  ck_assert(ms == -777);
  clt_event *out = CU_SENTINEL;
  CU_FAILS(clt_event_record(NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_event_record");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  CU_FAILS(clt_event_record(clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_event_record");
  CU_FAILS(clt_event_wait(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_event_wait");
  clt_event_release(NULL);
  for (int d = 0; d < ndev; d++)
    clt_event_release(ev[d]);
}
END_TEST

START_TEST(test_synchronize_async) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  clt_tensor *x[CU_MAX_DEVICES];
  /* Work on every device at once, then one synchronize for all ... */
  for (int d = 0; d < ndev; d++)
    x[d] = busy_work(devs[d]);
  CU_OK(clt_device_synchronize(NULL));
  /* ... and per device, after a copy between devices. */
  for (int d = 1; d < ndev; d++) {
    clt_tensor *y = NULL, *z = NULL;
    CU_OK(clt_to(x[d - 1], devs[d], &y));
    CU_OK(clt_add(y, x[d], &z));
    CU_OK(clt_device_synchronize(devs[d]));
    float *v = cu_read(z);
    ck_assert_msg(v[0] == 32.0f && v[EV_N - 1] == 32.0f, "after synchronize on %s: %g",
                  cu_dev_name(devs[d]), (double)v[0]);
    free(v);
    clt_tensor_release(y);
    clt_tensor_release(z);
  }
  for (int d = 0; d < ndev; d++) {
    float *v = cu_read(x[d]);
    ck_assert_msg(v[1] == 16.0f, "x on %s: %g", cu_dev_name(devs[d]), (double)v[1]);
    free(v);
    clt_tensor_release(x[d]);
  }
  /* Host tensor data after an asynchronous copy home, with only the data pointer's wait. */
  if (ndev > 1) {
    clt_tensor *w = busy_work(devs[ndev - 1]), *h = NULL;
    CU_OK(clt_to(w, clt_cpu(), &h));
    clt_tensor_release(w);
    float *p = clt_tensor_data(h);
    ck_assert_ptr_nonnull(p);
    ck_assert_msg(p[0] == 16.0f && p[EV_N - 1] == 16.0f, "host data after copy home: %g",
                  (double)p[0]);
    clt_tensor_release(h);
  }
}
END_TEST

START_TEST(test_timer) {
  clt_device *devs[CU_MAX_DEVICES + 1];
  int ndev = cu_devices(devs);
  devs[ndev++] = NULL; /* NULL: every device */
  for (int d = 0; d < ndev; d++) {
    const char *dn = devs[d] ? cu_dev_name(devs[d]) : "all devices";
    clt_timer *t = CU_SENTINEL;
    CU_OK(clt_timer_start(devs[d], &t));
    ck_assert_msg(t != CU_SENTINEL && t != NULL, "no timer on %s", dn);
    clt_tensor *x = busy_work(devs[d] ? devs[d] : clt_cpu());
    double ms = -1, ms2 = -1;
    CU_OK(clt_timer_stop(t, &ms));
    ck_assert_msg(ms >= 0 && isfinite(ms), "timer on %s: %g ms", dn, ms);
    CU_OK(clt_timer_stop(t, &ms2)); /* a second lap, from the same start */
    ck_assert_msg(ms2 >= ms, "timer laps on %s: %g then %g ms", dn, ms, ms2);
    float *v = cu_read(x);
    ck_assert_msg(v[0] == 16.0f && v[EV_N - 1] == 16.0f, "work timed on %s: %g", dn, (double)v[0]);
    free(v);
    clt_tensor_release(x);
    clt_timer_release(t);
  }
  clt_timer_release(NULL);
  CU_FAILS(clt_timer_start(clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_timer_start");
  clt_timer *t = NULL;
  CU_OK(clt_timer_start(clt_cpu(), &t));
  double ms = -777;
  CU_FAILS(clt_timer_stop(NULL, &ms), CLT_ERR_INVALID_ARGUMENT, "clt_timer_stop");
  CU_FAILS(clt_timer_stop(t, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_timer_stop");
  ck_assert(ms == -777);
  clt_timer_release(t);
}
END_TEST

Suite *event_suite(void) {
  Suite *s = suite_create("event");
  TCase *tc = cu_tcase("events");
  tcase_add_test(tc, test_elapsed);
  tcase_add_test(tc, test_wait);
  tcase_add_test(tc, test_event_errors);
  tcase_add_test(tc, test_synchronize_async);
  tcase_add_test(tc, test_timer);
  suite_add_tcase(s, tc);
  return s;
}
