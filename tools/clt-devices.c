/* SPDX-License-Identifier: MIT */
/* clt-devices - lists the devices clt sees, under the names clt gives them.
 *
 *   $ clt-devices            one row per device: cpu first, then cl:0, cl:1, ...
 *   $ clt-devices --json     the same as a JSON array of objects
 *
 * The default device (the one clt_device_default() picks: $CLT_DEVICE, else the first GPU, else
 * cpu) is marked with '*' in the table and "default": true in the JSON.
 */
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *program = "clt-devices";

static void usage(FILE *f) {
  fprintf(f,
          "Usage: %s [--json]\n"
          "Lists the devices clt can use, under clt's names: cpu (the host), then cl:0, cl:1, ...\n"
          "for every OpenCL device of every installed platform.\n"
          "\n"
          "  --json      print a JSON array of objects instead of a table\n"
          "  --help      print this help and exit\n"
          "  --version   print the version and exit\n"
          "\n"
          "The default device is marked with '*': $CLT_DEVICE if set, else the first GPU,\n"
          "else cpu. POCL_DEVICES=\"pthread pthread\" gives two OpenCL CPU devices with PoCL.\n",
          program);
}

/* The devices in clt's order: cpu, cl:0, cl:1, ... *count receives their number. */
static clt_device **all_devices(int *count) {
  int n = clt_device_count();
  if (n < 0)
    n = 0;
  clt_device **devs = malloc(sizeof *devs * (size_t)(n + 1));
  if (devs == NULL) {
    fprintf(stderr, "%s: out of memory\n", program);
    exit(1);
  }
  int k = 0;
  devs[k++] = clt_cpu();
  for (int i = 0; i < n; i++) {
    clt_device *d = clt_device_at(i);
    if (d == NULL) {
      fprintf(stderr, "%s: cl:%d: %s\n", program, i, clt_last_error());
      exit(1);
    }
    devs[k++] = d;
  }
  *count = k;
  return devs;
}

static void get_info(const clt_device *d, clt_device_info *info) {
  clt_status s = clt_device_info_get(d, info);
  if (s != CLT_OK) {
    fprintf(stderr, "%s: clt_device_info_get(%s) failed: %s: %s\n", program, clt_device_name(d),
            clt_status_name(s), clt_last_error());
    exit(1);
  }
}

static const char *nonnull(const char *s) { return s != NULL ? s : ""; }

/* Writes s as a JSON string literal (quotes included). Bytes >= 0x80 pass through unchanged:
 * OpenCL strings are ASCII in practice, and UTF-8 stays valid. */
static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)nonnull(s); *p != '\0'; p++) {
    switch (*p) {
    case '"':
      fputs("\\\"", f);
      break;
    case '\\':
      fputs("\\\\", f);
      break;
    case '\b':
      fputs("\\b", f);
      break;
    case '\f':
      fputs("\\f", f);
      break;
    case '\n':
      fputs("\\n", f);
      break;
    case '\r':
      fputs("\\r", f);
      break;
    case '\t':
      fputs("\\t", f);
      break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        fprintf(f, "\\u%04x", *p);
      else
        fputc(*p, f);
    }
  }
  fputc('"', f);
}

static void print_json(clt_device **devs, int n, const clt_device *def) {
  printf("[");
  for (int i = 0; i < n; i++) {
    clt_device_info info;
    get_info(devs[i], &info);
    printf(i == 0 ? "\n  {" : ",\n  {");
    printf("\"name\": ");
    json_string(stdout, info.name);
    printf(", \"kind\": ");
    json_string(stdout, info.kind_name);
    printf(", \"vendor\": ");
    json_string(stdout, info.vendor);
    printf(", \"model\": ");
    json_string(stdout, info.model);
    printf(", \"driver_version\": ");
    json_string(stdout, info.driver_version);
    printf(", \"cl_version\": ");
    json_string(stdout, info.cl_version);
    printf(", \"platform\": ");
    json_string(stdout, info.platform);
    printf(", \"memory_bytes\": %llu, \"max_alloc_bytes\": %llu, \"compute_units\": %d",
           (unsigned long long)info.memory_bytes, (unsigned long long)info.max_alloc_bytes,
           info.compute_units);
    printf(", \"fp64\": %s, \"default\": %s}", info.fp64 ? "true" : "false",
           devs[i] == def ? "true" : "false");
  }
  printf(n > 0 ? "\n]\n" : "]\n");
}

static void print_table(clt_device **devs, int n, const clt_device *def) {
  int wname = (int)strlen("DEVICE"), wkind = (int)strlen("TYPE");
  for (int i = 0; i < n; i++) {
    clt_device_info info;
    get_info(devs[i], &info);
    int ln = (int)strlen(nonnull(info.name)), lk = (int)strlen(nonnull(info.kind_name));
    wname = ln > wname ? ln : wname;
    wkind = lk > wkind ? lk : wkind;
  }
  printf("  %-*s  %-*s  %10s  %-4s  %s\n", wname, "DEVICE", wkind, "TYPE", "MEMORY", "FP64",
         "DESCRIPTION");
  for (int i = 0; i < n; i++) {
    clt_device_info info;
    get_info(devs[i], &info);
    char mem[32];
    snprintf(mem, sizeof mem, "%.1f GiB", (double)info.memory_bytes / (1024.0 * 1024 * 1024));
    printf("%c %-*s  %-*s  %10s  %-4s  %s\n", devs[i] == def ? '*' : ' ', wname, nonnull(info.name),
           wkind, nonnull(info.kind_name), mem, info.fp64 ? "yes" : "no",
           nonnull(clt_device_description(devs[i])));
  }
  printf("* default device ($CLT_DEVICE, else the first GPU, else cpu)\n");
}

int main(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
      printf("clt-devices (clt) %s\n", clt_version());
      return 0;
    } else {
      fprintf(stderr, "%s: %s '%s'\nTry '%s --help' for more information.\n", program,
              argv[i][0] == '-' ? "unknown option" : "unexpected argument", argv[i], program);
      return 2;
    }
  }

  int n = 0;
  clt_device **devs = all_devices(&n);
  const clt_device *def = clt_device_default();
  if (json)
    print_json(devs, n, def);
  else
    print_table(devs, n, def);
  free(devs);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "%s: error writing the output\n", program);
    return 1;
  }
  return 0;
}
