/* SPDX-License-Identifier: MIT */
/* check_main.c - runs every Check suite of clt (one per area, registered here).
 *
 * No clt function is called here: OpenCL state created in this parent process would not work
 * in the children Check forks for each test. Select parts with CK_RUN_SUITE / CK_RUN_CASE (several
 * suites: CLT_CHECK_SUITES="a b"), the output detail with CK_VERBOSITY; POCL_DEVICES="pthread
 * pthread" gives two OpenCL devices.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

Suite *views_suite(void);  /* check_views.c: strided views (issue 13) */
Suite *kernel_suite(void); /* check_kernel.c: user kernels, raw OpenCL handles (issue 14) */
Suite *lazy_suite(void);   /* check_lazy.c: lazy fusion (issue 15) */
Suite *compose_suite(void); /* check_compose.c: deferred results through views and consumers (issue 32) */
Suite *autograd_suite(void); /* check_autograd.c: reverse-mode autograd (issue 26) */
Suite *optim_suite(void);    /* check_optim.c: SGD and AdamW (issue 26) */
Suite *diff_suite(void);    /* check_diff.c: random programs, every device and mode (issue 32) */

static const struct {
  const char *name;
  Suite *(*make)(void);
} suites[] = {
    {"error", error_suite},
    {"device", device_suite},
    {"tensor", tensor_suite},
    {"transfer", transfer_suite},
    {"dispatch", dispatch_suite},
    {"elementwise", elementwise_suite},
    {"reduce", reduce_suite},
    {"print", print_suite},
    {"event", event_suite},
    {"program", program_suite},
    {"memory", memory_suite},
    {"ops", ops_suite},
    {"backend_ops", backend_ops_suite},
    {"half", half_suite},
    {"random", random_suite},
    {"matmul", matmul_suite},
    {"npy", npy_suite},
    {"dlpack", dlpack_suite},
    {"params", params_suite},
    {"io", io_suite},
    {"badinput", badinput_suite},
    {"threads", threads_suite},
    {"fuzz", fuzz_suite},
    {"oom", oom_suite},
    {"faults", faults_suite},
    {"views", views_suite},
    {"kernel", kernel_suite},
    {"lazy", lazy_suite},
    {"compose", compose_suite},
    {"ref", ref_suite},
    {"diff", diff_suite},
    {"autograd", autograd_suite},
    {"optim", optim_suite},
    {"linalg", linalg_suite},
};

/* Whether the space-separated list holds name. */
static bool listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    while (*p == ' ')
      p++;
    size_t w = strcspn(p, " ");
    if (w == n && strncmp(p, name, n) == 0)
      return true;
    p += w;
  }
  return false;
}

int main(void) {
  /* CLT_CHECK_SUITES="a b c" runs those suites only (CK_RUN_SUITE takes one); a name that is no
   * suite is an error, not an empty run. */
  const char *only = getenv("CLT_CHECK_SUITES");
  size_t count = sizeof suites / sizeof suites[0];
  if (only) {
    for (const char *p = only; *p;) {
      while (*p == ' ')
        p++;
      size_t w = strcspn(p, " "), i = 0;
      if (w == 0)
        break;
      while (i < count && !(strlen(suites[i].name) == w && strncmp(p, suites[i].name, w) == 0))
        i++;
      if (i == count) {
        fprintf(stderr, "check_clt: CLT_CHECK_SUITES names '%.*s', which is no suite\n", (int)w, p);
        return EXIT_FAILURE;
      }
      p += w;
    }
  }
  SRunner *sr = NULL;
  for (size_t i = 0; i < count; i++) {
    if (only && !listed(only, suites[i].name))
      continue;
    if (!sr)
      sr = srunner_create(suites[i].make());
    else
      srunner_add_suite(sr, suites[i].make());
  }
  if (!sr) {
    fprintf(stderr, "check_clt: CLT_CHECK_SUITES selects no suite\n");
    return EXIT_FAILURE;
  }

  cu_forked = srunner_fork_status(sr) != CK_NOFORK;
  srunner_run_all(sr, CK_ENV);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
