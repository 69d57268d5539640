/* SPDX-License-Identifier: MIT */
/* crash_save.c - clt_save survives being killed in the middle (issue 6, item 6;
 * docs/reliability.md, "Crash-safe saves").
 *
 * A checkpoint is saved, then, trial after trial, a child process saves a different parameter set
 * (1.6 or 3.7 MB) over the same path and dies by SIGKILL before it is done:
 * - even trials: the parent sends SIGKILL after a random delay, counted from the moment the child
 *   calls clt_save, up to 1.25 times the time a whole save takes here (measured first);
 * - odd trials: the child dies inside write(): its RLIMIT_FSIZE is a random byte count below the
 *   file's size, and when a write reaches it, the kernel's SIGXFSZ is turned into SIGKILL.
 * After each kill, the file at the path must be byte for byte the previous checkpoint or the new
 * one (compared with reference files written by complete saves), and must load whole (clt_load in
 * a fresh process, every tensor compared with the set it should hold); the directory may hold
 * nothing else but the temporary file of the killed writer, "<path>.tmp-<pid>-<n>", which is
 * counted and removed (clt_save does not remove other processes' files). A save that ran to its
 * end must have left no temporary file. The next trial saves over whatever the file now holds.
 *
 * The parent never calls clt: every save and load runs in a child forked from a process that has
 * no clt state (OpenCL state does not survive fork). The children see no OpenCL platform
 * (OCL_ICD_VENDORS points nowhere): the tensors are host tensors, whose save path is the one every
 * device tensor takes after clt_tensor_read, and the 400-odd processes start fast.
 *
 * Usage: crash_save [TRIALS]   (default: $CLT_CRASH_TRIALS, else 200; $CLT_CRASH_SEED: the seed)
 * Prints "figure: crashes survived: N" (kills that landed while clt_save was running) and
 * "figure: saves killed mid-write: N" (of those, the kills that left a temporary file shorter than
 * the whole file). Exit status: 0 pass, 1 fail, 99 hard error (automake's conventions). */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clt.h"

#define CKPT "model.safetensors"

/* ---- the two parameter sets (built in children only) ------------------------------------- */

typedef struct spec {
  const char *name;
  clt_dtype dtype;
  int ndim;
  int64_t shape[2];
} spec;

static const spec set_a[] = {
    {"encoder.weight", CLT_F32, 2, {512, 600}},
    {"encoder.bias", CLT_F32, 1, {600}},
    {"embed", CLT_I64, 1, {40000}},
    {"mask", CLT_BOOL, 1, {100000}},
};
static const spec set_b[] = {
    {"layer0.weight", CLT_F64, 2, {384, 700}},
    {"layer0.bias", CLT_F64, 1, {700}},
    {"counts", CLT_I32, 1, {250000}},
    {"pixels", CLT_U8, 1, {500000}},
    {"step", CLT_I64, 0, {0}},
};
#define NSPEC(set) (sizeof(set) / sizeof(set)[0])

static const spec *set_specs(int which, size_t *n) {
  *n = which == 0 ? NSPEC(set_a) : NSPEC(set_b);
  return which == 0 ? set_a : set_b;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* The bytes of tensor k of set `which`: a pattern fixed by (which, k), valid for its dtype. */
static void *spec_bytes(int which, size_t k, const spec *sp, size_t *nbytes) {
  int64_t numel = 1;
  for (int d = 0; d < sp->ndim; d++)
    numel *= sp->shape[d];
  size_t size = clt_dtype_size(sp->dtype);
  *nbytes = (size_t)numel * size;
  unsigned char *b = malloc(*nbytes ? *nbytes : 1);
  if (!b)
    return NULL;
  uint64_t s = 1000 * (uint64_t)which + k;
  for (size_t i = 0; i < *nbytes; i++) {
    uint64_t r = splitmix(&s);
    b[i] = sp->dtype == CLT_BOOL ? (unsigned char)(r & 1) : (unsigned char)r;
  }
  if (sp->dtype == CLT_F32 || sp->dtype == CLT_F64) /* finite numbers: clear the exponent's top */
    for (size_t i = size - 1; i < *nbytes; i += size)
      b[i] &= 0x3f;
  return b;
}

/* Builds set `which` on the host; exits the (child) process on failure. */
static clt_params *make_set(int which) {
  size_t n;
  const spec *sp = set_specs(which, &n);
  clt_params *p;
  if (clt_params_create(&p) != CLT_OK)
    goto fail;
  for (size_t k = 0; k < n; k++) {
    size_t nbytes;
    void *b = spec_bytes(which, k, &sp[k], &nbytes);
    clt_tensor *t = NULL;
    if (!b || clt_from_host(b, sp[k].dtype, sp[k].ndim, sp[k].shape, clt_cpu(), &t) != CLT_OK ||
        clt_params_add(p, sp[k].name, t) != CLT_OK)
      goto fail;
    clt_tensor_release(t);
    free(b);
  }
  return p;
fail:
  fprintf(stderr, "crash_save: building set %c failed: %s\n", 'A' + which, clt_last_error());
  _exit(3);
}

/* ---- children ---------------------------------------------------------------------------- */

static void on_sigxfsz(int sig) {
  (void)sig;
  raise(SIGKILL);
}

/* The writer: builds set `which`, tells the parent 'S' just before clt_save and 'E' right after
 * it returns, then waits to be killed. limit > 0: the file size limit (odd trials). */
static void writer(const char *path, int which, long long limit, int wfd) {
  clt_params *p = make_set(which);
  if (limit > 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigxfsz;
    sigemptyset(&sa.sa_mask);
    struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
    if (sigaction(SIGXFSZ, &sa, NULL) != 0 || setrlimit(RLIMIT_FSIZE, &rl) != 0) {
      perror("crash_save: writer: SIGXFSZ or RLIMIT_FSIZE");
      _exit(3);
    }
  }
  if (write(wfd, "S", 1) != 1)
    _exit(3);
  clt_status s = clt_save(path, p);
  if (s != CLT_OK) {
    fprintf(stderr, "crash_save: writer: clt_save failed: %s\n", clt_last_error());
    _exit(4);
  }
  if (write(wfd, "E", 1) != 1)
    _exit(3);
  for (;;)
    pause();
}

/* The reader: loads path and compares it with set `which`. Exit 0 if equal. */
static int reader(const char *path, int which) {
  clt_params *q;
  if (clt_load(path, NULL, &q) != CLT_OK) {
    fprintf(stderr, "crash_save: clt_load(%s) failed: %s\n", path, clt_last_error());
    return 1;
  }
  size_t n;
  const spec *sp = set_specs(which, &n);
  int bad = clt_params_count(q) != n;
  for (size_t k = 0; k < n && !bad; k++) {
    clt_tensor *t = clt_params_get(q, sp[k].name);
    size_t nbytes;
    void *b = spec_bytes(which, k, &sp[k], &nbytes);
    bad = !b || !t || strcmp(clt_params_name_at(q, k), sp[k].name) != 0 ||
          clt_tensor_dtype(t) != sp[k].dtype || clt_tensor_ndim(t) != sp[k].ndim ||
          clt_tensor_nbytes(t) != nbytes || clt_tensor_device(t) != clt_cpu() ||
          (nbytes && memcmp(clt_tensor_data(t), b, nbytes) != 0);
    for (int d = 0; !bad && d < sp[k].ndim; d++)
      bad = clt_tensor_shape(t)[d] != sp[k].shape[d];
    if (bad)
      fprintf(stderr, "crash_save: %s: tensor '%s' differs from set %c\n", path, sp[k].name,
              'A' + which);
    free(b);
  }
  if (clt_params_count(q) != n)
    fprintf(stderr, "crash_save: %s: %zu tensors, set %c has %zu\n", path, clt_params_count(q),
            'A' + which, n);
  clt_params_release(q);
  return bad;
}

/* ---- the parent -------------------------------------------------------------------------- */

static char dir[256], ref[2][300], target[300];
static unsigned char *ref_bytes[2];
static size_t ref_size[2];

static _Noreturn void hard_error(const char *what) {
  fprintf(stderr, "crash_save: %s: %s (files kept in %s)\n", what, strerror(errno), dir);
  exit(99);
}

static _Noreturn void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: crash_save: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (files kept in %s)\n", dir);
  va_end(ap);
  exit(1);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static unsigned char *read_file(const char *path, size_t *size) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0)
    hard_error(path);
  unsigned char *b = malloc((size_t)st.st_size + 1);
  size_t got = 0;
  while (b && got < (size_t)st.st_size) {
    ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
    if (r <= 0)
      hard_error(path);
    got += (size_t)r;
  }
  close(fd);
  if (!b)
    hard_error("out of memory");
  *size = got;
  return b;
}

/* Runs the reader of set `which` on path in a child; returns its wait status. */
static int run_reader(const char *path, int which) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    hard_error("fork");
  if (pid == 0) /* exit(), not _exit(): a leak checker then checks the loader too */
    exit(reader(path, which));
  int st;
  if (waitpid(pid, &st, 0) != pid)
    hard_error("waitpid");
  return st;
}

typedef struct outcome {
  int started, ended; /* 'S' and 'E' received */
  double save_us;     /* from 'S' to 'E' */
} outcome;

/* Starts a writer of set `which` over path. kill_after_us < 0: let it finish, then kill it. */
static outcome run_writer(const char *path, int which, long long limit, double kill_after_us) {
  int fds[2];
  if (pipe(fds) != 0)
    hard_error("pipe");
  pid_t pid = fork();
  if (pid < 0)
    hard_error("fork");
  if (pid == 0) {
    close(fds[0]);
    writer(path, which, limit, fds[1]);
  }
  close(fds[1]);
  outcome o = {0, 0, 0};
  double t0 = 0;
  char c;
  struct pollfd pf = {.fd = fds[0], .events = POLLIN};
  /* 'S' (or the child's death before it). */
  if (poll(&pf, 1, 120000) == 1 && read(fds[0], &c, 1) == 1 && c == 'S') {
    o.started = 1;
    t0 = now_us();
  }
  if (o.started && kill_after_us >= 0) {
    struct timespec d = {
        (time_t)(kill_after_us / 1e6),
        (long)((kill_after_us - 1e6 * (double)(time_t)(kill_after_us / 1e6)) * 1e3)};
    while (nanosleep(&d, &d) != 0 && errno == EINTR)
      ;
    kill(pid, SIGKILL);
  } else if (o.started) {
    if (poll(&pf, 1, 120000) == 1 && read(fds[0], &c, 1) == 1 && c == 'E') {
      o.ended = 1;
      o.save_us = now_us() - t0;
    }
    kill(pid, SIGKILL);
  } else {
    kill(pid, SIGKILL);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid)
    hard_error("waitpid");
  while (!o.ended && read(fds[0], &c, 1) == 1) /* 'E' written before the kill landed */
    o.ended = c == 'E';
  close(fds[0]);
  if (!o.started || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
    if (WIFEXITED(st))
      fail("the writer of %s exited with status %d instead of being killed", path, WEXITSTATUS(st));
    fail("the writer of %s died by signal %d, not SIGKILL", path,
         WIFSIGNALED(st) ? WTERMSIG(st) : -1);
  }
  return o;
}

/* The temporary files beside the checkpoint: removes them, returns how many and the size of the
 * last one; fails on any other file. */
static int sweep(long long *tmp_size) {
  DIR *d = opendir(dir);
  if (!d)
    hard_error(dir);
  int ntmp = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || strcmp(e->d_name, CKPT) == 0)
      continue;
    if (strncmp(e->d_name, CKPT ".tmp-", strlen(CKPT ".tmp-")) != 0)
      fail("a stray file %s is beside the checkpoint", e->d_name);
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(p, &st) != 0)
      hard_error(p);
    *tmp_size = (long long)st.st_size;
    if (unlink(p) != 0)
      hard_error(p);
    ntmp++;
  }
  closedir(d);
  return ntmp;
}

/* Which reference the checkpoint equals byte for byte (0 or 1), or -1. */
static int which_ref(void) {
  size_t n;
  unsigned char *b = read_file(target, &n);
  int w = -1;
  for (int k = 0; k < 2 && w < 0; k++)
    if (n == ref_size[k] && memcmp(b, ref_bytes[k], n) == 0)
      w = k;
  free(b);
  return w;
}

int main(int argc, char **argv) {
  long trials = argc > 1                     ? atol(argv[1])
                : getenv("CLT_CRASH_TRIALS") ? atol(getenv("CLT_CRASH_TRIALS"))
                                             : 200;
  unsigned long long seed = getenv("CLT_CRASH_SEED") ? strtoull(getenv("CLT_CRASH_SEED"), NULL, 0)
                                                     : (unsigned long long)time(NULL) ^
                                                           ((unsigned long long)getpid() << 20);
  if (trials < 1) {
    fprintf(stderr, "usage: crash_save [TRIALS] (at least 1)\n");
    return 99;
  }
  /* The children see the host only (see the top of this file). */
  setenv("OCL_ICD_VENDORS", "/nonexistent/crash_save-host-only", 1);
  unsetenv("CLT_DEVICE");
  const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : ".";
  snprintf(dir, sizeof dir, "%s/crash_save.XXXXXX", base);
  if (!mkdtemp(dir)) {
    snprintf(dir, sizeof dir, "crash_save.XXXXXX");
    if (!mkdtemp(dir))
      hard_error("mkdtemp");
  }
  snprintf(target, sizeof target, "%s/" CKPT, dir);

  /* References: each set saved whole, and the time a save takes (the slowest of three). */
  double save_us[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    snprintf(ref[k], sizeof ref[k], "%s/ref-%c", dir, 'A' + k);
    for (int rep = 0; rep < 3; rep++) {
      outcome o = run_writer(ref[k], k, 0, -1);
      if (!o.ended)
        fail("saving the reference %s did not finish", ref[k]);
      if (o.save_us > save_us[k])
        save_us[k] = o.save_us;
    }
    if (run_reader(ref[k], k) != 0)
      fail("the reference %s does not load as set %c", ref[k], 'A' + k);
    ref_bytes[k] = read_file(ref[k], &ref_size[k]);
    if (unlink(ref[k]) != 0) /* kept in memory, out of the checkpoint's directory */
      hard_error(ref[k]);
  }
  printf("crash_save: %ld trials, seed %llu; set A: %zu bytes, saved in %.1f ms; set B: %zu "
         "bytes, saved in %.1f ms\n",
         trials, seed, ref_size[0], save_us[0] / 1000, ref_size[1], save_us[1] / 1000);
  fflush(stdout);

  /* The first checkpoint. */
  int current = 0;
  if (!run_writer(target, current, 0, -1).ended || which_ref() != 0)
    fail("the first save of %s did not finish whole", target);

  uint64_t rng = seed;
  long during = 0, by_limit = 0, returned = 0, tmp_files = 0;
  long before_write = 0, mid_write = 0, after_write = 0, after_rename = 0;
  for (long i = 0; i < trials; i++) {
    int next = 1 - current;
    long long limit = 0;
    double delay = -1;
    if (i % 2 == 0)
      delay = (double)(splitmix(&rng) % 1000000) / 1e6 * 1.25 * save_us[next];
    else /* 1 .. size - 1 bytes */
      limit = 1 + (long long)(splitmix(&rng) % (ref_size[next] - 1));
    outcome o = run_writer(target, next, limit, delay);
    long long tmp_size = -1;
    int ntmp = sweep(&tmp_size);
    int now = which_ref();
    if (now < 0)
      fail("trial %ld: %s is neither the old file nor the new one, byte for byte", i, target);
    if (ntmp > 1)
      fail("trial %ld: %d temporary files after one killed save", i, ntmp);
    if (o.ended && (now != next || ntmp != 0))
      fail("trial %ld: clt_save returned but left the old file or a temporary file", i);
    if (now == next && ntmp != 0)
      fail("trial %ld: the new file is in place but its temporary file is still there", i);
    if (limit > 0 && (o.ended || now != current))
      fail("trial %ld: the %lld-byte write limit did not stop the save", i, limit);
    int st = run_reader(target, now);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail("trial %ld: %s does not load whole after the kill", i, target);
    tmp_files += ntmp;
    if (o.ended) {
      returned++;
    } else {
      during++;
      by_limit += limit > 0;
      if (ntmp && tmp_size > 0 && tmp_size < (long long)ref_size[next])
        mid_write++;
      else if (ntmp && tmp_size > 0)
        after_write++;
      else if (now == next)
        after_rename++;
      else
        before_write++;
    }
    current = now;
  }

  /* A save that is not killed still works, and leaves nothing behind. */
  int next = 1 - current;
  long long tmp_size = -1;
  if (!run_writer(target, next, 0, -1).ended || sweep(&tmp_size) != 0 || which_ref() != next)
    fail("%s: a last, whole save over the survivor failed", target);

  printf("crash_save: %ld kills while clt_save ran (%ld of them by the write limit), %ld after it "
         "returned\n",
         during, by_limit, returned);
  printf("crash_save: killed %ld times before writing a byte, %ld times in the middle of the "
         "writes, %ld times after the last write, %ld times after the rename; %ld temporary files "
         "of killed writers removed\n",
         before_write, mid_write, after_write, after_rename, tmp_files);
  printf("figure: crashes survived: %ld\n", during);
  printf("figure: saves killed mid-write: %ld\n", mid_write);
  for (int k = 0; k < 2; k++)
    free(ref_bytes[k]);
  unlink(target);
  if (rmdir(dir) != 0)
    hard_error(dir);
  printf("crash_save: ok\n");
  return 0;
}
