/* SPDX-License-Identifier: MIT */
/* opencl/disk_cache.c - program binaries on disk, so that a second process starts warm: the
 * directory, each program's key, loading and storing an entry, and the public kernel cache API
 * (clt.h, "Kernel cache"). program.c builds through it. */
#define _POSIX_C_SOURCE 200809L
#include "cl-internal.h"
#include "sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the disk cache --------------------------------------------------------------------------
 *
 * One file per program, <dir>/<key>.bin, where key is the SHA-256 (hex) of everything that can
 * change the binary: the source text (defines, common.cl, <family>.cl), the build options, the
 * platform's name and version, the device's name, CL_DRIVER_VERSION, clt's version and
 * CACHE_FORMAT. The file is a header (see entry_header) followed by the binary that
 * clGetProgramInfo(CL_PROGRAM_BINARIES) gave. A file that is short, long, has the wrong magic,
 * format or key, fails its checksum, or that the driver refuses, is rebuilt from source and
 * rewritten. Files are written to a temp file in the same directory, fsync'ed and renamed over
 * the entry, so readers (in any process) see a whole old entry or a whole new one, never a part.
 * Nothing here fails an operation: any disk trouble falls back to building from source (with a
 * one-time warning on stderr when CLT_CACHE_DEBUG=1). Entries are never evicted: delete the
 * directory to reclaim the space. */

#define CACHE_FORMAT 1u
#define CACHE_MAGIC "CLTKBIN" /* 8 bytes with its terminator */

/* The header of an entry; integers little-endian. */
typedef struct entry_header {
  char magic[8];           /* CACHE_MAGIC */
  unsigned char format[4]; /* CACHE_FORMAT */
  unsigned char reserved[4];
  unsigned char length[8]; /* bytes of binary after the header */
  unsigned char key[32];   /* the key the file is named after */
  unsigned char sum[32];   /* SHA-256 of the binary */
} entry_header;

static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static char cache_dir[CLT__CACHE_DIR_MAX]; /* "" when the disk cache is off or unusable */
static bool cache_debug;
static atomic_int cache_warned;
static atomic_long cache_hits;

/* One warning per process, and only with CLT_CACHE_DEBUG=1: the cache is an optimisation and
 * its trouble must not clutter a program's output. */
static void cache_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void cache_warn(const char *fmt, ...) {
  if (!cache_debug || atomic_exchange(&cache_warned, 1))
    return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "clt: warning: kernel cache: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "; building kernels from source\n");
  va_end(ap);
}

/* mkdir -p with mode 0700 for the components it creates; true if path is a writable directory. */
static bool make_dirs(const char *path) {
  char buf[sizeof cache_dir];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
    return false;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
      return false;
    *p = '/';
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST)
    return false;
  struct stat st;
  return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) && access(buf, W_OK | X_OK) == 0;
}

/* The shared temp dir's subdirectory must be ours alone: another user could otherwise plant
 * binaries that we would run. */
static bool private_dir(const char *path) {
  if (mkdir(path, 0700) != 0 && errno != EEXIST)
    return false;
  struct stat st;
  return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
         (st.st_mode & 077) == 0 && access(path, W_OK | X_OK) == 0;
}

static bool env_set(const char *name) {
  const char *s = getenv(name);
  return s && *s;
}

static void cache_init(void) {
  cache_debug = env_set("CLT_CACHE_DEBUG") && strcmp(getenv("CLT_CACHE_DEBUG"), "0") != 0;
  if (env_set("CLT_CACHE") && strcmp(getenv("CLT_CACHE"), "0") == 0)
    return;
  char dir[sizeof cache_dir];
  if (env_set("CLT_CACHE_DIR")) {
    /* An explicit directory is used or nothing: no silent fallback elsewhere. */
    const char *d = getenv("CLT_CACHE_DIR");
    if (make_dirs(d))
      snprintf(cache_dir, sizeof cache_dir, "%s", d);
    else
      cache_warn("CLT_CACHE_DIR=%s is not a writable directory", d);
    return;
  }
  int n = -1;
  if (env_set("XDG_CACHE_HOME"))
    n = snprintf(dir, sizeof dir, "%s/clt", getenv("XDG_CACHE_HOME"));
  else if (env_set("HOME"))
    n = snprintf(dir, sizeof dir, "%s/.cache/clt", getenv("HOME"));
  if (n > 0 && n < (int)sizeof dir && make_dirs(dir)) {
    memcpy(cache_dir, dir, (size_t)n + 1);
    return;
  }
  const char *tmp = env_set("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  n = snprintf(dir, sizeof dir, "%s/clt-%ld", tmp, (long)geteuid());
  if (n > 0 && n < (int)sizeof dir && private_dir(dir)) {
    memcpy(cache_dir, dir, (size_t)n + 1);
    return;
  }
  cache_warn("no writable cache directory (tried $XDG_CACHE_HOME, $HOME/.cache, %s)", dir);
}

const char *clt__cache_dir(void) {
  pthread_once(&cache_once, cache_init);
  return cache_dir[0] ? cache_dir : NULL;
}

long clt__cache_hits(void) { return atomic_load(&cache_hits); }

/* Computes the key of a program and its file's path; false when the disk cache is off. */
bool clt__cl_cache_key(clt_device *dev, const char *opts, const char *const srcs[3],
                       clt__cache_key *k) {
  const char *dir = clt__cache_dir();
  if (!dir)
    return false;
  char platform_version[256] = "";
  clGetPlatformInfo(clt__cl(dev)->platform, CL_PLATFORM_VERSION, sizeof platform_version,
                    platform_version, NULL);
  platform_version[sizeof platform_version - 1] = '\0';
  char format[16];
  snprintf(format, sizeof format, "%u", CACHE_FORMAT);
  clt__sha256 c;
  clt__sha256_init(&c);
  clt__sha256_field(&c, "clt kernel cache");
  clt__sha256_field(&c, format);
  clt__sha256_field(&c, PACKAGE_VERSION);
  clt__sha256_field(&c, dev->platform_name);
  clt__sha256_field(&c, platform_version);
  clt__sha256_field(&c, dev->model);
  clt__sha256_field(&c, dev->driver);
  clt__sha256_field(&c, opts);
  for (int i = 0; i < 3; i++)
    clt__sha256_field(&c, srcs[i]);
  clt__sha256_final(&c, k->hash);
  char hex[65];
  for (int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", k->hash[i]);
  snprintf(k->path, sizeof k->path, "%s/%s.bin", dir, hex);
  return true;
}

/* Reads a whole file; NULL if it cannot be read. */
static unsigned char *read_all(const char *path, size_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat st;
  unsigned char *buf = NULL;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
      (buf = malloc((size_t)st.st_size))) {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    if (got != (size_t)st.st_size) {
      free(buf);
      buf = NULL;
    }
    *size = got;
  }
  close(fd);
  return buf;
}

/* The program for k from disk, built for dev with opts; NULL if there is no usable entry. */
cl_program clt__cl_cache_load(clt_device *dev, const clt__cache_key *k, const char *opts) {
  size_t size = 0;
  unsigned char *buf = read_all(k->path, &size);
  if (!buf)
    return NULL;
  cl_program p = NULL;
  entry_header h;
  if (size < sizeof h)
    goto out;
  memcpy(&h, buf, sizeof h);
  uint64_t len = get_le(h.length, 8);
  if (memcmp(h.magic, CACHE_MAGIC, 8) != 0 || get_le(h.format, 4) != CACHE_FORMAT ||
      memcmp(h.key, k->hash, 32) != 0 || len != size - sizeof h)
    goto out;
  unsigned char sum[32];
  clt__sha256 c;
  clt__sha256_init(&c);
  clt__sha256_update(&c, buf + sizeof h, (size_t)len);
  clt__sha256_final(&c, sum);
  if (memcmp(sum, h.sum, 32) != 0)
    goto out;
  const unsigned char *bin = buf + sizeof h;
  size_t bin_len = (size_t)len;
  cl_int bin_status = CL_SUCCESS, err;
  p = clCreateProgramWithBinary(clt__cl(dev)->context, 1, &clt__cl(dev)->id, &bin_len, &bin,
                                &bin_status, &err);
  if (err != CL_SUCCESS || bin_status != CL_SUCCESS) {
    if (p)
      clReleaseProgram(p);
    p = NULL;
    goto out;
  }
  if (clBuildProgram(p, 1, &clt__cl(dev)->id, opts, NULL, NULL) != CL_SUCCESS) {
    clReleaseProgram(p);
    p = NULL;
    goto out;
  }
  atomic_fetch_add(&cache_hits, 1);
out:
  free(buf);
  return p;
}

static bool write_all(int fd, const void *data, size_t n) {
  const unsigned char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* Writes p's binary for dev as the entry k: temp file, fsync, rename. Failures are ignored. */
void clt__cl_cache_store(clt_device *dev, const clt__cache_key *k, cl_program p) {
  cl_uint ndev = 0;
  if (clGetProgramInfo(p, CL_PROGRAM_NUM_DEVICES, sizeof ndev, &ndev, NULL) != CL_SUCCESS ||
      ndev == 0)
    return;
  cl_device_id *ids = calloc(ndev, sizeof *ids);
  size_t *sizes = calloc(ndev, sizeof *sizes);
  unsigned char **bins = calloc(ndev, sizeof *bins);
  unsigned char *bin = NULL;
  int fd = -1;
  char tmp[sizeof k->path + 16];
  tmp[0] = '\0';
  if (!ids || !sizes || !bins ||
      clGetProgramInfo(p, CL_PROGRAM_DEVICES, ndev * sizeof *ids, ids, NULL) != CL_SUCCESS ||
      clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, ndev * sizeof *sizes, sizes, NULL) != CL_SUCCESS)
    goto out;
  cl_uint at = 0;
  while (at < ndev && ids[at] != clt__cl(dev)->id)
    at++;
  if (at == ndev || sizes[at] == 0 || !(bin = malloc(sizes[at])))
    goto out;
  /* Only this device's slot gets a buffer: the driver skips NULL entries. */
  bins[at] = bin;
  if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, ndev * sizeof *bins, bins, NULL) != CL_SUCCESS)
    goto out;
  entry_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CACHE_MAGIC, 8);
  put_le(h.format, CACHE_FORMAT, 4);
  put_le(h.length, sizes[at], 8);
  memcpy(h.key, k->hash, 32);
  clt__sha256 c;
  clt__sha256_init(&c);
  clt__sha256_update(&c, bin, sizes[at]);
  clt__sha256_final(&c, h.sum);
  snprintf(tmp, sizeof tmp, "%s.XXXXXX", k->path);
  if ((fd = mkstemp(tmp)) < 0) {
    tmp[0] = '\0';
    cache_warn("cannot create a file next to %s: %s", k->path, strerror(errno));
    goto out;
  }
  if (!write_all(fd, &h, sizeof h) || !write_all(fd, bin, sizes[at]) || fsync(fd) != 0) {
    cache_warn("cannot write %s: %s", tmp, strerror(errno));
    goto out;
  }
  if (close(fd) != 0) {
    fd = -1;
    cache_warn("cannot write %s: %s", tmp, strerror(errno));
    goto out;
  }
  fd = -1;
  if (rename(tmp, k->path) != 0) {
    cache_warn("cannot rename %s to %s: %s", tmp, k->path, strerror(errno));
    goto out;
  }
  tmp[0] = '\0';
out:
  if (fd >= 0)
    close(fd);
  if (tmp[0])
    unlink(tmp);
  free(bin);
  free(bins);
  free(sizes);
  free(ids);
}

/* Whether programs for dev go through the disk cache: always, PoCL included. PoCL caches
 * builds by itself (POCL_KERNEL_CACHE, on by default), so we measured before stacking ours on it
 * (bench/program: the first clt_add of 1000 f32 on cl:0 in a fresh process, kernel build
 * included; medians of 5 processes; PoCL 3.1 pthread on a 2-core AMD EPYC):
 *
 *                      PoCL cache off   PoCL cache on (warm)
 *   clt cache off          1173 ms             36 ms
 *   clt cache cold         1381 ms             45 ms
 *   clt cache warm          2.5 ms            3.3 ms
 *
 * PoCL's cache still preprocesses and hashes the source on every clBuildProgram, while a PoCL
 * binary already holds the compiled kernels, so ours is ten times faster warm; a cold entry
 * costs a one-time ~10 ms (clGetProgramInfo, the write and fsync). So ours stays on for PoCL
 * as for every other vendor; this is the place to skip a platform that does better alone. */
bool clt__cl_use_disk_cache(const clt_device *dev) {
  (void)dev;
  return true;
}

/* ---- the public kernel cache API (clt.h, "Kernel cache") ------------------------------------ */

const char *clt_kernel_cache_dir(void) { return clt__cache_dir(); }

/* 1 for an entry's name, "<64 lowercase hex>.bin"; 2 for a temp file of cache_store,
 * "<64 hex>.bin.XXXXXX"; 0 for anything else. */
static int entry_kind(const char *name) {
  for (int i = 0; i < 64; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
      return 0;
  if (strncmp(name + 64, ".bin", 4) != 0)
    return 0;
  if (name[68] == '\0')
    return 1;
  return name[68] == '.' && strlen(name + 69) == 6 ? 2 : 0;
}

/* Visits the regular files of the cache directory of the given kinds (a mask of 1 << kind);
 * visit returns false to stop with an error already set. */
static clt_status cache_walk(const char *fn, int kinds,
                             bool (*visit)(const char *dir, const char *name, const struct stat *st,
                                           void *ctx),
                             void *ctx) {
  const char *dir = clt__cache_dir();
  if (!dir)
    return CLT_OK;
  DIR *dp = opendir(dir);
  if (!dp)
    return errno == ENOENT
               ? CLT_OK
               : clt__error(CLT_ERR_IO, fn, "cannot read the kernel cache directory %s: %s", dir,
                            strerror(errno));
  struct dirent *de;
  clt_status st = CLT_OK;
  char path[sizeof cache_dir + 300];
  while ((de = readdir(dp)) != NULL) {
    int kind = entry_kind(de->d_name);
    if (kind == 0 || !(kinds & (1 << kind)))
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
      continue; /* gone meanwhile, or not ours (a directory, a link) */
    if (!visit(dir, de->d_name, &sb, ctx)) {
      st = clt_last_status();
      break;
    }
  }
  closedir(dp);
  return st;
}

typedef struct list_ctx {
  void (*each)(const clt_kernel_cache_entry *e, void *ctx);
  void *ctx;
  size_t count;
} list_ctx;

static bool list_visit(const char *dir, const char *name, const struct stat *st, void *ctx) {
  (void)dir;
  list_ctx *l = ctx;
  l->count++;
  if (l->each) {
    clt_kernel_cache_entry e = {name, (uint64_t)st->st_size, (int64_t)st->st_mtime};
    l->each(&e, l->ctx);
  }
  return true;
}

clt_status clt_kernel_cache_list(void (*each)(const clt_kernel_cache_entry *e, void *ctx),
                                 void *ctx, size_t *count) {
  list_ctx l = {each, ctx, 0};
  clt__cl_builds_wait(); /* this process's builds in flight store their entries first */
  clt_status st = cache_walk("clt_kernel_cache_list", 1 << 1, list_visit, &l);
  if (st == CLT_OK && count)
    *count = l.count;
  return st;
}

static bool clear_visit(const char *dir, const char *name, const struct stat *st, void *ctx) {
  (void)st;
  size_t *removed = ctx;
  char path[sizeof cache_dir + 300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (unlink(path) != 0 && errno != ENOENT) {
    clt__error(CLT_ERR_IO, "clt_kernel_cache_clear",
               "cannot remove %s: %s (%zu files removed before)", path, strerror(errno), *removed);
    return false;
  }
  ++*removed;
  return true;
}

clt_status clt_kernel_cache_clear(size_t *removed) {
  size_t n = 0;
  clt__cl_builds_wait(); /* nor does a build in flight store an entry after the clear */
  clt_status st = cache_walk("clt_kernel_cache_clear", 1 << 1 | 1 << 2, clear_visit, &n);
  if (st == CLT_OK && removed)
    *removed = n;
  return st;
}
