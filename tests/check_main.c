/* SPDX-License-Identifier: MIT */
/* check_main.c - runs every Check suite of clt (one per area, registered here).
 *
 * No clt function is called here: OpenCL state created in this parent process would not work
 * in the children Check forks for each test. Select parts with CK_RUN_SUITE / CK_RUN_CASE, the
 * output detail with CK_VERBOSITY; POCL_DEVICES="pthread pthread" gives two OpenCL devices.
 */
#include <stdlib.h>

#include "check_util.h"

Suite *views_suite(void);  /* check_views.c: strided views (issue 13) */
Suite *kernel_suite(void); /* check_kernel.c: user kernels, raw OpenCL handles (issue 14) */
Suite *lazy_suite(void);   /* check_lazy.c: lazy fusion (issue 15) */
Suite *compose_suite(void); /* check_compose.c: deferred results through views and consumers (issue 32) */
Suite *autograd_suite(void); /* check_autograd.c: reverse-mode autograd (issue 26) */
Suite *optim_suite(void);    /* check_optim.c: SGD and AdamW (issue 26) */
Suite *diff_suite(void);    /* check_diff.c: random programs, every device and mode (issue 32) */

int main(void) {
  SRunner *sr = srunner_create(error_suite());
  srunner_add_suite(sr, device_suite());
  srunner_add_suite(sr, tensor_suite());
  srunner_add_suite(sr, transfer_suite());
  srunner_add_suite(sr, dispatch_suite());
  srunner_add_suite(sr, elementwise_suite());
  srunner_add_suite(sr, reduce_suite());
  srunner_add_suite(sr, print_suite());
  srunner_add_suite(sr, event_suite());
  srunner_add_suite(sr, program_suite());
  srunner_add_suite(sr, memory_suite());
  srunner_add_suite(sr, ops_suite());
  srunner_add_suite(sr, backend_ops_suite());
  srunner_add_suite(sr, half_suite());
  srunner_add_suite(sr, random_suite());
  srunner_add_suite(sr, matmul_suite());
  srunner_add_suite(sr, npy_suite());
  srunner_add_suite(sr, dlpack_suite());
  srunner_add_suite(sr, params_suite());
  srunner_add_suite(sr, io_suite());
  srunner_add_suite(sr, badinput_suite());
  srunner_add_suite(sr, threads_suite());
  srunner_add_suite(sr, fuzz_suite());
  srunner_add_suite(sr, oom_suite());
  srunner_add_suite(sr, faults_suite());
  srunner_add_suite(sr, views_suite());
  srunner_add_suite(sr, kernel_suite());
  srunner_add_suite(sr, lazy_suite());
  srunner_add_suite(sr, compose_suite());
  srunner_add_suite(sr, ref_suite());
  srunner_add_suite(sr, diff_suite());
  srunner_add_suite(sr, autograd_suite());
  srunner_add_suite(sr, optim_suite());

  cu_forked = srunner_fork_status(sr) != CK_NOFORK;
  srunner_run_all(sr, CK_ENV);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
