/* SPDX-License-Identifier: MIT */
/* checkpoint.c - checkpoints remember devices; a map location moves them elsewhere.
 *
 *   $ POCL_DEVICES="pthread pthread" ./examples/checkpoint save model.safetensors
 *   $ POCL_DEVICES="pthread" ./examples/checkpoint load model.safetensors
 *
 * "save" builds a small model on cl:1 (the last OpenCL device there is) and writes it with
 * clt_save, which records each tensor's device. "load" reads it back with no map location,
 * which puts every tensor where it was saved; on a machine without that device the load fails
 * with CLT_ERR_DEVICE_NOT_FOUND and says what to do, and a map location (clt_cpu()) works.
 */
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "checkpoint: %s failed: %s\n  %s\n", what, clt_status_name(s),
            clt_last_error());
    exit(1);
  }
}

static void show(const clt_params *p) {
  for (size_t i = 0; i < clt_params_count(p); i++) {
    printf("  %-6s ", clt_params_name_at(p, i));
    clt_print(clt_params_tensor_at(p, i));
  }
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "save") != 0 && strcmp(argv[1], "load") != 0)) {
    fprintf(stderr, "usage: %s save|load FILE\n", argv[0]);
    return 2;
  }
  const char *path = argv[2];
  if (strcmp(argv[1], "save") == 0) {
    int n = clt_device_count();
    clt_device *dev = n > 0 ? clt_device_at(n - 1) : clt_cpu();
    int64_t sw[2] = {1, 2}, sb[1] = {1};
    const float w[2] = {2.0f, -3.4f}, b[1] = {4.2f};
    clt_tensor *tw, *tb;
    clt_params *model;
    check(clt_from_host(w, CLT_F32, 2, sw, clt_cpu(), &tw), "clt_from_host");
    check(clt_from_host(b, CLT_F32, 1, sb, clt_cpu(), &tb), "clt_from_host");
    check(clt_params_create(&model), "clt_params_create");
    check(clt_params_add(model, "weight", tw), "clt_params_add");
    check(clt_params_add(model, "bias", tb), "clt_params_add");
    check(clt_params_to(model, dev), "clt_params_to");
    check(clt_save(path, model), "clt_save");
    printf("saved to %s:\n", path);
    show(model);
    clt_tensor_release(tw);
    clt_tensor_release(tb);
    clt_params_release(model);
    return 0;
  }
  clt_params *model = NULL;
  clt_status s = clt_load(path, NULL, &model);
  printf("clt_load(\"%s\", NULL, &model) -> CLT_%s\n", path, clt_status_name(s));
  if (s != CLT_OK) {
    printf("  %s\n", clt_last_error());
    check(clt_load(path, clt_cpu(), &model), "clt_load with a map location");
    printf("clt_load(\"%s\", clt_cpu(), &model) -> CLT_OK\n", path);
  }
  show(model);
  clt_params_release(model);
  return 0;
}
