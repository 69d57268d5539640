/* SPDX-License-Identifier: MIT */
/* replay.c - runs a fuzz target over files without libFuzzer (make check: tests/fuzz/replay.sh).
 *
 *   replay_<target> [--min N] FILE|DIR...
 *
 * Each file (each regular file of a directory, in name order) is passed to the target's
 * LLVMFuzzerTestOneInput; a broken invariant aborts, as under libFuzzer. A file named ok-* must
 * make the call under test succeed and one named bad-* must make it fail (the target reports which
 * through fuzz_outcome); other names (regression inputs saved by the fuzzer) only have to pass
 * the target's checks. Fails when fewer than N files (default 1) were run, so that a corpus lost
 * from the tarball does not pass silently. Exit status: 0 pass, 1 fail.
 */
#define _POSIX_C_SOURCE 200809L
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int failures, runs, oks, bads;

static int read_file(const char *path, uint8_t **data, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fclose(f);
      return -1;
    }
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap)
      break;
    cap *= 2;
    uint8_t *b = realloc(buf, cap);
    if (!b)
      free(buf);
    buf = b;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return -1;
  }
  *data = buf;
  *size = n;
  return 0;
}

static void run_file(const char *path) {
  uint8_t *data;
  size_t size;
  if (read_file(path, &data, &size) != 0) {
    fprintf(stderr, "FAIL %s: cannot read: %s\n", path, strerror(errno));
    failures++;
    return;
  }
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  fuzz_outcome = -1;
  /* A copy of exactly size bytes, so that a read past the end is caught by ASan builds. */
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) {
    fprintf(stderr, "FAIL %s: out of memory\n", path);
    failures++;
    free(data);
    return;
  }
  memcpy(copy, data, size);
  LLVMFuzzerTestOneInput(copy, size);
  free(copy);
  free(data);
  runs++;
  int want = !strncmp(base, "ok-", 3) ? 1 : !strncmp(base, "bad-", 4) ? 0 : -1;
  if (want == 1)
    oks++;
  if (want == 0)
    bads++;
  if (want >= 0 && fuzz_outcome != want) {
    fprintf(stderr, "FAIL %s: the call %s but the file's name says it should %s (%s: %s)\n", path,
            fuzz_outcome == 1   ? "succeeded"
            : fuzz_outcome == 0 ? "failed"
                                : "was not made",
            want ? "succeed" : "fail", clt_status_name(clt_last_status()), clt_last_error());
    failures++;
  }
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_path(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    fprintf(stderr, "FAIL %s: %s\n", path, strerror(errno));
    failures++;
    return;
  }
  if (!S_ISDIR(sb.st_mode)) {
    run_file(path);
    return;
  }
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "FAIL %s: %s\n", path, strerror(errno));
    failures++;
    return;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn)
        break;
      names = nn;
    }
    size_t len = strlen(path) + strlen(e->d_name) + 2;
    if (!(names[n] = malloc(len)))
      break;
    snprintf(names[n++], len, "%s/%s", path, e->d_name);
  }
  closedir(d);
  if (n > 0)
    qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    run_file(names[i]);
    free(names[i]);
  }
  free(names);
}

int main(int argc, char **argv) {
  int min = 1, first = 1;
  if (argc > 2 && !strcmp(argv[1], "--min")) {
    min = atoi(argv[2]);
    first = 3;
  }
  if (first >= argc) {
    fprintf(stderr, "usage: %s [--min N] FILE|DIR...\n", argv[0]);
    return 1;
  }
  LLVMFuzzerInitialize(&argc, &argv);
  for (int i = first; i < argc; i++)
    run_path(argv[i]);
  printf("%s: %d inputs (%d ok-*, %d bad-*), %d failures\n", argv[0], runs, oks, bads, failures);
  if (runs < min) {
    fprintf(stderr, "FAIL: %d inputs run, expected at least %d\n", runs, min);
    return 1;
  }
  return failures ? 1 : 0;
}
