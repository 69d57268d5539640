/* SPDX-License-Identifier: MIT */
/* clt-cache - looks after clt's on-disk kernel cache.
 *
 *   $ clt-cache [info]              where the cache is, how many entries, how much space
 *   $ clt-cache list                one line per entry: name, size, age
 *   $ clt-cache clear               removes the entries (and nothing else in the directory)
 *   $ clt-cache warm [--device D]   builds every kernel for D (default: each OpenCL device)
 *
 * Exit status: 0 success, 1 failure, 2 a usage error (unknown command or option).
 */
#define _POSIX_C_SOURCE 200809L
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *program = "clt-cache";

static void usage(FILE *f) {
  fprintf(f,
          "Usage: %s [COMMAND] [OPTION]...\n"
          "Looks after clt's kernel cache: the OpenCL program binaries clt keeps on disk so\n"
          "that a program's first operations do not wait for kernel builds.\n"
          "\n"
          "Commands:\n"
          "  info               where the cache is, its entries and total size (the default)\n"
          "  list               one line per entry: file name, size, age\n"
          "  clear              remove every entry; other files in the directory stay\n"
          "  warm [--device D]  build every kernel clt uses for device D (cpu, cl:0, ...)\n"
          "                     ahead of time; default: every OpenCL device\n"
          "\n"
          "Options:\n"
          "  -d, --device D     the device for warm (may be repeated)\n"
          "  -h, --help         print this help and exit\n"
          "  -V, --version      print the version and exit\n"
          "\n"
          "The cache is $CLT_CACHE_DIR, else $XDG_CACHE_HOME/clt, else $HOME/.cache/clt;\n"
          "CLT_CACHE=0 turns it off. See clt-cache(1).\n",
          program);
}

static int usage_error(const char *fmt, const char *arg) __attribute__((format(printf, 1, 0)));
static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "%s: ", program);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nTry '%s --help' for more information.\n", program);
  return 2;
}

static int fail(const char *what, clt_status s) {
  fprintf(stderr, "%s: %s failed: %s: %s\n", program, what, clt_status_name(s), clt_last_error());
  return 1;
}

/* "1.5 MiB", "812 B". */
static void format_size(char *buf, size_t size, unsigned long long bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, size, "%llu B", bytes);
  else
    snprintf(buf, size, "%.1f %s", v, units[u]);
}

/* "42s", "5m", "3h", "12d". */
static void format_age(char *buf, size_t size, long long seconds) {
  if (seconds < 0)
    seconds = 0;
  if (seconds < 60)
    snprintf(buf, size, "%llds", seconds);
  else if (seconds < 3600)
    snprintf(buf, size, "%lldm", seconds / 60);
  else if (seconds < 86400)
    snprintf(buf, size, "%lldh", seconds / 3600);
  else
    snprintf(buf, size, "%lldd", seconds / 86400);
}

/* The entries, copied out of the callback. */
typedef struct entry {
  char name[80];
  unsigned long long size;
  long long mtime;
} entry;

typedef struct entries {
  entry *v;
  size_t n, cap;
  int oom;
} entries;

static void collect(const clt_kernel_cache_entry *e, void *ctx) {
  entries *es = ctx;
  if (es->n == es->cap) {
    size_t cap = es->cap ? 2 * es->cap : 64;
    entry *v = realloc(es->v, cap * sizeof *v);
    if (v == NULL) {
      es->oom = 1;
      return;
    }
    es->v = v;
    es->cap = cap;
  }
  entry *d = &es->v[es->n++];
  snprintf(d->name, sizeof d->name, "%s", e->name);
  d->size = e->size;
  d->mtime = e->mtime;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

/* Reads the entries, sorted by name; returns 0, or an exit status after a message. */
static int read_entries(entries *es) {
  memset(es, 0, sizeof *es);
  clt_status s = clt_kernel_cache_list(collect, es, NULL);
  if (s != CLT_OK)
    return fail("listing the cache", s);
  if (es->oom) {
    fprintf(stderr, "%s: out of memory\n", program);
    return 1;
  }
  if (es->n > 1)
    qsort(es->v, es->n, sizeof *es->v, by_name);
  return 0;
}

/* Prints why the cache is off; returns 1 when it is. */
static int say_if_off(void) {
  if (clt_kernel_cache_dir() != NULL)
    return 0;
  const char *env = getenv("CLT_CACHE");
  if (env != NULL && strcmp(env, "0") == 0)
    printf("kernel cache: off (CLT_CACHE=0)\n");
  else
    printf("kernel cache: off (no writable directory; set CLT_CACHE_DIR)\n");
  return 1;
}

static int cmd_info(void) {
  if (say_if_off())
    return 0;
  entries es;
  int rc = read_entries(&es);
  if (rc != 0)
    return rc;
  unsigned long long total = 0;
  for (size_t i = 0; i < es.n; i++)
    total += es.v[i].size;
  char size[32];
  format_size(size, sizeof size, total);
  printf("kernel cache: %s\n", clt_kernel_cache_dir());
  printf("entries:      %zu\n", es.n);
  printf("size:         %s (%llu bytes)\n", size, total);
  free(es.v);
  return 0;
}

static int cmd_list(void) {
  if (clt_kernel_cache_dir() == NULL) {
    fprintf(stderr, "%s: the kernel cache is off: nothing to list\n", program);
    return 0;
  }
  entries es;
  int rc = read_entries(&es);
  if (rc != 0)
    return rc;
  long long now = (long long)time(NULL);
  for (size_t i = 0; i < es.n; i++) {
    char size[32], age[32];
    format_size(size, sizeof size, es.v[i].size);
    format_age(age, sizeof age, now - es.v[i].mtime);
    printf("%s  %10s  %5s\n", es.v[i].name, size, age);
  }
  free(es.v);
  return 0;
}

static int cmd_clear(void) {
  if (clt_kernel_cache_dir() == NULL) {
    printf("kernel cache: off: nothing to clear\n");
    return 0;
  }
  size_t removed = 0;
  clt_status s = clt_kernel_cache_clear(&removed);
  if (s != CLT_OK)
    return fail("clearing the cache", s);
  printf("removed %zu %s from %s\n", removed, removed == 1 ? "entry" : "entries",
         clt_kernel_cache_dir());
  return 0;
}

typedef struct bar {
  const char *device;
  int shown; /* a bar was drawn and needs its line ended */
} bar;

static void draw_bar(int done, int total, void *ctx) {
  bar *b = ctx;
  int width = 30, fill = total > 0 ? done * width / total : width;
  fprintf(stderr, "\r%s: warming %-6s [", program, b->device);
  for (int i = 0; i < width; i++)
    fputc(i < fill ? '#' : '.', stderr);
  fprintf(stderr, "] %d/%d", done, total);
  fflush(stderr);
  b->shown = 1;
}

/* The message for an unknown device name: which ones there are. */
static void no_such_device(const char *name) {
  fprintf(stderr, "%s: no device '%s'; the devices are: cpu", program, name);
  int n = clt_device_count();
  for (int i = 0; i < n; i++)
    fprintf(stderr, ", cl:%d", i);
  fprintf(stderr, "\n");
}

static int cmd_warm(const char **names, int nnames) {
  int n = clt_device_count();
  clt_device **devs = malloc(sizeof *devs * (size_t)(nnames > 0 ? nnames : (n > 0 ? n : 1)));
  if (devs == NULL) {
    fprintf(stderr, "%s: out of memory\n", program);
    return 1;
  }
  int ndev = 0;
  if (nnames > 0) {
    for (int i = 0; i < nnames; i++) {
      if (clt_device_get(names[i], &devs[ndev]) != CLT_OK) {
        no_such_device(names[i]);
        free(devs);
        return 1;
      }
      ndev++;
    }
  } else {
    for (int i = 0; i < n; i++)
      if ((devs[ndev] = clt_device_at(i)) != NULL)
        ndev++;
    if (ndev == 0) {
      fprintf(stderr, "%s: no OpenCL device: nothing to warm (see clt-devices)\n", program);
      free(devs);
      return 0;
    }
  }
  if (clt_kernel_cache_dir() == NULL)
    fprintf(stderr, "%s: warning: the kernel cache is off: the kernels are built, not kept\n",
            program);
  int tty = isatty(STDERR_FILENO);
  int rc = 0;
  for (int i = 0; i < ndev && rc == 0; i++) {
    bar b = {clt_device_name(devs[i]), 0};
    clt_status s = clt_kernel_cache_warm(devs[i], tty ? draw_bar : NULL, &b);
    if (b.shown)
      fputc('\n', stderr);
    if (s != CLT_OK) {
      fprintf(stderr, "%s: warming %s failed: %s: %s\n", program, b.device, clt_status_name(s),
              clt_last_error());
      rc = 1;
    } else {
      printf("%s: %s\n", b.device,
             clt_device_is_host(devs[i]) ? "the host has no kernels to build" : "warm");
    }
  }
  free(devs);
  if (rc == 0 && clt_kernel_cache_dir() != NULL) {
    size_t count = 0;
    if (clt_kernel_cache_list(NULL, NULL, &count) == CLT_OK)
      printf("kernel cache: %s, %zu entries\n", clt_kernel_cache_dir(), count);
  }
  return rc;
}

int main(int argc, char **argv) {
  const char *command = NULL;
  const char **devices = calloc((size_t)argc, sizeof *devices);
  int ndevices = 0, rc = 0;
  if (devices == NULL) {
    fprintf(stderr, "%s: out of memory\n", program);
    return 1;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      goto out;
    } else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
      printf("clt-cache (clt) %s\n", clt_version());
      goto out;
    } else if (strcmp(a, "--device") == 0 || strcmp(a, "-d") == 0) {
      if (i + 1 >= argc) {
        rc = usage_error("option '%s' needs a device name (cpu, cl:0, ...)", a);
        goto out;
      }
      devices[ndevices++] = argv[++i];
    } else if (strncmp(a, "--device=", 9) == 0) {
      devices[ndevices++] = a + 9;
    } else if (a[0] == '-') {
      rc = usage_error("unknown option '%s'", a);
      goto out;
    } else if (command == NULL) {
      if (strcmp(a, "info") != 0 && strcmp(a, "list") != 0 && strcmp(a, "clear") != 0 &&
          strcmp(a, "warm") != 0) {
        rc = usage_error("unknown command '%s' (expected info, list, clear or warm)", a);
        goto out;
      }
      command = a;
    } else {
      rc = usage_error("unexpected argument '%s'", a);
      goto out;
    }
  }
  if (command == NULL)
    command = "info";
  if (ndevices > 0 && strcmp(command, "warm") != 0) {
    rc = usage_error("--device applies to warm only, not to %s", command);
    goto out;
  }
  if (strcmp(command, "info") == 0)
    rc = cmd_info();
  else if (strcmp(command, "list") == 0)
    rc = cmd_list();
  else if (strcmp(command, "clear") == 0)
    rc = cmd_clear();
  else
    rc = cmd_warm(devices, ndevices);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "%s: error writing the output\n", program);
    rc = 1;
  }
out:
  free(devices);
  return rc;
}
