/* SPDX-License-Identifier: MIT */
/* opencl/program.c - run-time kernel builds: the embedded kernels/<family>.cl files (or those in
 * $CLT_KERNEL_PATH), built lazily once per (device, family, defines), and the programs of users'
 * own sources (clt_kernel_create), once per (device, source, options); cached in memory and, as
 * program binaries, on disk so that a second process starts warm. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* syscall(SYS_gettid) */
#include "cl-internal.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#endif
#include <unistd.h>

typedef struct kernel_entry {
  char *name;
  cl_kernel kernel;
  struct kernel_entry *next;
} kernel_entry;

typedef struct program_entry {
  char *family;  /* NULL for a user's source (clt__get_user_program) */
  char *defines; /* a user's source: the whole text */
  char *options; /* a user's build options; NULL for clt's own programs */
  cl_program program; /* NULL until built (or after a failed build) */
  bool building;      /* a thread is building it, outside the lock */
  bool failed;        /* a background build failed: clt__get_kernel_ready stops asking for it */
  kernel_entry *kernels;
  struct program_entry *next;
} program_entry;

struct clt_program_cache {
  program_entry *head;
};


static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
      if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
      } else {
        buf[n] = '\0';
      }
    }
  }
  fclose(f);
  return buf;
}

/* The text of kernels/<name>.cl: from $CLT_KERNEL_PATH when set, else the embedded copy.
 * Returns malloc'ed text or NULL with the error set. */
static char *load_source(const char *name, const char *fn) {
  const char *dir = getenv("CLT_KERNEL_PATH");
  if (dir && *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.cl", dir, name);
    char *text = read_file(path);
    if (!text)
      clt__error(CLT_ERR_IO, fn, "cannot read %s (CLT_KERNEL_PATH is set)", path);
    return text;
  }
  for (size_t i = 0; i < clt__kernel_source_count; i++)
    if (strcmp(clt__kernel_sources[i].name, name) == 0) {
      char *text = clt__strdup(clt__kernel_sources[i].text);
      if (!text)
        clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
      return text;
    }
  clt__error(CLT_ERR_INTERNAL, fn, "no kernel source named %s.cl", name);
  return NULL;
}

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

/* SHA-256 (FIPS 180-4), enough for keys and checksums without a dependency. */
typedef struct sha256 {
  uint32_t h[8];
  uint64_t len; /* bytes hashed so far */
  unsigned char buf[64];
  size_t nbuf;
} sha256;

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(sha256 *c, const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4], f = c->h[5],
           g = c->h[6], h = c->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 =
        h + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) + ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
    uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = cc;
    cc = b;
    b = a;
    a = t1 + t2;
  }
  c->h[0] += a;
  c->h[1] += b;
  c->h[2] += cc;
  c->h[3] += d;
  c->h[4] += e;
  c->h[5] += f;
  c->h[6] += g;
  c->h[7] += h;
}

static void sha256_init(sha256 *c) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, h0, sizeof h0);
  c->len = 0;
  c->nbuf = 0;
}

static void sha256_update(sha256 *c, const void *data, size_t n) {
  const unsigned char *p = data;
  c->len += n;
  while (n > 0) {
    size_t take = 64 - c->nbuf < n ? 64 - c->nbuf : n;
    memcpy(c->buf + c->nbuf, p, take);
    c->nbuf += take;
    p += take;
    n -= take;
    if (c->nbuf == 64) {
      sha256_block(c, c->buf);
      c->nbuf = 0;
    }
  }
}

static void sha256_final(sha256 *c, unsigned char out[32]) {
  uint64_t bits = c->len * 8;
  unsigned char pad = 0x80, zero = 0, lenbe[8];
  sha256_update(c, &pad, 1);
  while (c->nbuf != 56)
    sha256_update(c, &zero, 1);
  for (int i = 0; i < 8; i++)
    lenbe[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_update(c, lenbe, 8);
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (unsigned char)(c->h[i] >> 24);
    out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
    out[4 * i + 3] = (unsigned char)c->h[i];
  }
}

/* Hashes a field as its length then its bytes, so that ("ab", "c") and ("a", "bc") differ. */
static void sha256_field(sha256 *c, const char *s) {
  uint64_t n = s ? strlen(s) : 0;
  unsigned char len[8];
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)(n >> (8 * i));
  sha256_update(c, len, 8);
  if (n)
    sha256_update(c, s, (size_t)n);
}

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
static char cache_dir[4096]; /* "" when the disk cache is off or unusable */
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

typedef struct cache_key {
  unsigned char hash[32];
  char path[sizeof cache_dir + 80];
} cache_key;

/* Computes the key of a program and its file's path; false when the disk cache is off. */
static bool cache_key_for(clt_device *dev, const char *opts, const char *const srcs[3],
                          cache_key *k) {
  const char *dir = clt__cache_dir();
  if (!dir)
    return false;
  char platform_version[256] = "";
  clGetPlatformInfo(clt__cl(dev)->platform, CL_PLATFORM_VERSION, sizeof platform_version,
                    platform_version, NULL);
  platform_version[sizeof platform_version - 1] = '\0';
  char format[16];
  snprintf(format, sizeof format, "%u", CACHE_FORMAT);
  sha256 c;
  sha256_init(&c);
  sha256_field(&c, "clt kernel cache");
  sha256_field(&c, format);
  sha256_field(&c, PACKAGE_VERSION);
  sha256_field(&c, dev->platform_name);
  sha256_field(&c, platform_version);
  sha256_field(&c, dev->model);
  sha256_field(&c, dev->driver);
  sha256_field(&c, opts);
  for (int i = 0; i < 3; i++)
    sha256_field(&c, srcs[i]);
  sha256_final(&c, k->hash);
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
static cl_program cache_load(clt_device *dev, const cache_key *k, const char *opts) {
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
  sha256 c;
  sha256_init(&c);
  sha256_update(&c, buf + sizeof h, (size_t)len);
  sha256_final(&c, sum);
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
static void cache_store(clt_device *dev, const cache_key *k, cl_program p) {
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
  sha256 c;
  sha256_init(&c);
  sha256_update(&c, bin, sizes[at]);
  sha256_final(&c, h.sum);
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
static bool use_disk_cache(const clt_device *dev) {
  (void)dev;
  return true;
}

/* Builds the program of the sources srcs (joined in this order) for dev with opts, through the
 * disk cache. A build failure is CLT_ERR_BUILD with the device, what was built (`what`), the
 * options, `detail` and the build log. */
static clt_status build_sources(clt_device *dev, const char *const srcs[3], const char *opts,
                                const char *what, const char *detail, const char *fn,
                                cl_program *out) {
  cache_key key;
  bool disk = use_disk_cache(dev) && cache_key_for(dev, opts, srcs, &key);
  cl_program p = disk ? cache_load(dev, &key, opts) : NULL;
  if (p) {
    *out = p;
    return CLT_OK;
  }
  cl_int err;
  p = clCreateProgramWithSource(clt__cl(dev)->context, 3, (const char **)srcs, NULL, &err);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clCreateProgramWithSource", dev);
  err = clBuildProgram(p, 1, &clt__cl(dev)->id, opts, NULL, NULL);
  if (err != CL_SUCCESS) {
    size_t log_size = 0;
    clGetProgramBuildInfo(p, clt__cl(dev)->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
    char *log = malloc(log_size + 1);
    if (log) {
      log[0] = '\0';
      clGetProgramBuildInfo(p, clt__cl(dev)->id, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
      log[log_size] = '\0';
    }
    clt__error(CLT_ERR_BUILD, fn, "building %s for %s (%s) failed: %s\noptions: %s\n%sbuild log:\n%s",
               what, dev->name, dev->model, clt__cl_error_name(err), opts, detail,
               log ? log : "");
    free(log);
    clReleaseProgram(p);
    return CLT_ERR_BUILD;
  }
  if (disk)
    cache_store(dev, &key, p);
  *out = p;
  return CLT_OK;
}

static clt_status build(clt_device *dev, const char *family, const char *defines, const char *fn,
                        cl_program *out) {
  char *common = load_source("common", fn);
  if (!common)
    return clt_last_status();
  char *body = load_source(family, fn);
  const char *extra = getenv("CLT_BUILD_OPTIONS");
  size_t olen = (extra ? strlen(extra) : 0) + 32;
  char *opts = body ? malloc(olen) : NULL;
  size_t dlen = strlen(defines) + 16, wlen = strlen(family) + 32;
  char *detail = opts ? malloc(dlen) : NULL, *what = detail ? malloc(wlen) : NULL;
  clt_status st;
  if (!what) {
    st = body ? clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory") : clt_last_status();
  } else {
    snprintf(opts, olen, "-cl-std=CL1.2 %s", extra ? extra : "");
    snprintf(detail, dlen, "defines:\n%s", defines);
    snprintf(what, wlen, "kernels/%s.cl", family);
    const char *srcs[3] = {defines, common, body};
    st = build_sources(dev, srcs, opts, what, detail, fn, out);
  }
  free(what);
  free(detail);
  free(opts);
  free(body);
  free(common);
  return st;
}

/* A user's program: the source alone, with the user's options and CLT_BUILD_OPTIONS. The empty
 * first source keeps its key apart from every program of clt's own (whose defines never are). */
static clt_status build_user(clt_device *dev, const char *source, const char *options,
                             const char *what, const char *fn, cl_program *out) {
  const char *extra = getenv("CLT_BUILD_OPTIONS");
  size_t olen = strlen(options) + (extra ? strlen(extra) : 0) + 2;
  char *opts = malloc(olen);
  if (!opts)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  snprintf(opts, olen, "%s%s%s", options, *options && extra && *extra ? " " : "",
           extra ? extra : "");
  const char *srcs[3] = {"", source, ""};
  clt_status st = build_sources(dev, srcs, opts, what, "", fn, out);
  free(opts);
  return st;
}

/* The entry for (family, defines) with its program built, building it if no thread has. The
 * build runs without the device's programs_lock, so that launches of kernels already built, and
 * builds of other programs, go on meanwhile; threads that want the same program wait for it on
 * programs_built. A failed build leaves the entry without a program: the next caller builds
 * again (and gets its own error, build log included). Called and returns with programs_lock
 * held. */
static bool entry_is(const program_entry *e, const char *family, const char *defines,
                     const char *options) {
  if (family ? !e->family || strcmp(e->family, family) != 0 : e->family != NULL)
    return false;
  if (options && (!e->options || strcmp(e->options, options) != 0))
    return false;
  return strcmp(e->defines, defines) == 0;
}

/* (A user's program: family NULL, defines its source, options its build options, what names it
 * in messages.) */
static clt_status built_entry(clt_device *dev, const char *family, const char *defines,
                              const char *options, const char *what, const char *fn,
                              program_entry **out) {
  struct clt_cl_device *c = clt__cl(dev);
  if (!c->programs && !(c->programs = calloc(1, sizeof *c->programs)))
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  program_entry *e = c->programs->head;
  while (e && !entry_is(e, family, defines, options))
    e = e->next;
  if (!e) {
    e = calloc(1, sizeof *e);
    if (!e || (family && !(e->family = clt__strdup(family))) || !(e->defines = clt__strdup(defines)) ||
        (options && !(e->options = clt__strdup(options)))) {
      if (e) {
        free(e->family);
        free(e->defines);
      }
      free(e);
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
    }
    e->next = c->programs->head;
    c->programs->head = e; /* entries stay until exit, so e stays valid while unlocked */
  }
  while (e->building)
    pthread_cond_wait(&c->programs_built, &c->programs_lock);
  if (!e->program) {
    e->building = true;
    pthread_mutex_unlock(&c->programs_lock);
    cl_program p = NULL;
    clt_status st = family ? build(dev, family, defines, fn, &p)
                           : build_user(dev, defines, options, what, fn, &p);
    pthread_mutex_lock(&c->programs_lock);
    e->program = p;
    e->building = false;
    pthread_cond_broadcast(&c->programs_built);
    if (st != CLT_OK)
      return st;
  }
  *out = e;
  return CLT_OK;
}

/* The kernel `kernel` of the built entry e (created once, kept with e). programs_lock held. */
static clt_status kernel_of(clt_device *dev, program_entry *e, const char *kernel, const char *fn,
                            cl_kernel *out) {
  kernel_entry *k = e->kernels;
  while (k && strcmp(k->name, kernel) != 0)
    k = k->next;
  if (!k) {
    cl_int err;
    cl_kernel kern = clCreateKernel(e->program, kernel, &err);
    if (err != CL_SUCCESS)
      return clt__cl_error(err, fn, "clCreateKernel", dev);
    k = calloc(1, sizeof *k);
    if (!k || !(k->name = clt__strdup(kernel))) {
      free(k);
      clReleaseKernel(kern);
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
    }
    k->kernel = kern;
    k->next = e->kernels;
    e->kernels = k;
  }
  *out = k->kernel;
  return CLT_OK;
}

clt_status clt__get_kernel(clt_device *dev, const char *family, const char *defines,
                           const char *kernel, const char *fn, cl_kernel *out) {
  program_entry *e = NULL;
  pthread_mutex_lock(&clt__cl(dev)->programs_lock);
  clt_status st = built_entry(dev, family, defines, NULL, NULL, fn, &e);
  if (st == CLT_OK)
    st = kernel_of(dev, e, kernel, fn, out);
  pthread_mutex_unlock(&clt__cl(dev)->programs_lock);
  return st;
}

/* ---- background builds ---------------------------------------------------------------------- */
/* A build in the background runs on a detached thread of its own, at most BG_MAX at a time; the
 * exit handler waits for those still running (a build must not be inside the driver's compiler
 * while exit tears the driver down). Oclgrind is not thread-safe: its builds stay in the
 * caller's thread. CLT_BACKGROUND_BUILDS=0 turns them off (every build in the caller's thread,
 * as before). */
#define BG_MAX 2
static pthread_mutex_t bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_done = PTHREAD_COND_INITIALIZER;
static int bg_running;
static bool bg_exit_registered;

typedef struct bg_job {
  clt_device *dev;
  program_entry *e; /* entries stay until exit */
} bg_job;

static void bg_wait_all(void) {
  pthread_mutex_lock(&bg_lock);
  while (bg_running > 0)
    pthread_cond_wait(&bg_done, &bg_lock);
  pthread_mutex_unlock(&bg_lock);
}

static void *bg_build(void *arg) {
  bg_job *j = arg;
#ifdef __linux__
  /* below the threads that run the chain meanwhile: on a CPU device (PoCL) they share the cores
   * (Linux gives each thread a nice value of its own) */
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
#endif
  struct clt_cl_device *c = clt__cl(j->dev);
  cl_program p = NULL;
  /* e's family and defines do not change while e->building is set */
  clt_status st = build(j->dev, j->e->family, j->e->defines, "a background build", &p);
  pthread_mutex_lock(&c->programs_lock);
  j->e->program = p;
  j->e->building = false;
  j->e->failed = st != CLT_OK;
  pthread_cond_broadcast(&c->programs_built);
  pthread_mutex_unlock(&c->programs_lock);
  free(j);
  pthread_mutex_lock(&bg_lock);
  bg_running--;
  pthread_cond_broadcast(&bg_done);
  pthread_mutex_unlock(&bg_lock);
  return NULL;
}

bool clt__background_builds(const clt_device *dev) {
  if (dev->backend != &clt__opencl_backend)
    return false;
  const char *v = getenv("CLT_BACKGROUND_BUILDS");
  return !(v && strcmp(v, "0") == 0) && !clt__cl(dev)->serial;
}

/* Starts e's build on a thread of its own; false where none can start now. programs_lock held,
 * e neither built nor building. */
static bool bg_start(clt_device *dev, program_entry *e) {
  bg_job *j = malloc(sizeof *j);
  if (!j)
    return false;
  *j = (bg_job){dev, e};
  pthread_mutex_lock(&bg_lock);
  bool ok = bg_running < BG_MAX;
  if (ok && !bg_exit_registered)
    ok = bg_exit_registered = atexit(bg_wait_all) == 0;
  pthread_attr_t a;
  pthread_t t;
  if (ok && pthread_attr_init(&a) == 0) {
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    e->building = true;
    ok = pthread_create(&t, &a, bg_build, j) == 0;
    pthread_attr_destroy(&a);
    if (ok)
      bg_running++;
    else
      e->building = false;
  } else {
    ok = false;
  }
  pthread_mutex_unlock(&bg_lock);
  if (!ok)
    free(j);
  return ok;
}

clt_status clt__get_kernel_ready(clt_device *dev, const char *family, const char *defines,
                                 const char *kernel, const char *fn, cl_kernel *out) {
  if (!clt__background_builds(dev))
    return clt__get_kernel(dev, family, defines, kernel, fn, out);
  struct clt_cl_device *c = clt__cl(dev);
  *out = NULL;
  pthread_mutex_lock(&c->programs_lock);
  if (!c->programs && !(c->programs = calloc(1, sizeof *c->programs))) {
    pthread_mutex_unlock(&c->programs_lock);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  program_entry *e = c->programs->head;
  while (e && !entry_is(e, family, defines, NULL))
    e = e->next;
  clt_status st = CLT_OK;
  if (e && e->program) {
    st = kernel_of(dev, e, kernel, fn, out);
  } else if (!e || (!e->building && !e->failed)) {
    if (!e) {
      e = calloc(1, sizeof *e);
      if (!e || !(e->family = clt__strdup(family)) || !(e->defines = clt__strdup(defines))) {
        if (e)
          free(e->family);
        free(e);
        pthread_mutex_unlock(&c->programs_lock);
        return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
      }
      e->next = c->programs->head;
      c->programs->head = e;
    }
    bg_start(dev, e); /* none started (too many running): a later call tries again */
  }
  pthread_mutex_unlock(&c->programs_lock);
  return st;
}

clt_status clt__get_user_program(clt_device *dev, const char *source, const char *options,
                                 const char *what, const char *fn, cl_program *out) {
  program_entry *e = NULL;
  pthread_mutex_lock(&clt__cl(dev)->programs_lock);
  clt_status st = built_entry(dev, NULL, source, options ? options : "", what, fn, &e);
  if (st == CLT_OK)
    *out = e->program;
  pthread_mutex_unlock(&clt__cl(dev)->programs_lock);
  return st;
}

int clt__program_count(clt_device *dev) {
  if (dev->backend != &clt__opencl_backend)
    return 0; /* the host builds no programs */
  struct clt_cl_device *c = clt__cl(dev);
  int n = 0; /* built programs only: an entry whose build failed holds none */
  pthread_mutex_lock(&c->programs_lock);
  for (program_entry *e = c->programs ? c->programs->head : NULL; e; e = e->next)
    n += e->program != NULL;
  pthread_mutex_unlock(&c->programs_lock);
  return n;
}

void clt__program_cache_free(struct clt_program_cache *c) {
  if (!c)
    return;
  program_entry *e = c->head;
  while (e) {
    program_entry *next = e->next;
    kernel_entry *k = e->kernels;
    while (k) {
      kernel_entry *kn = k->next;
      clReleaseKernel(k->kernel);
      free(k->name);
      free(k);
      k = kn;
    }
    if (e->program)
      clReleaseProgram(e->program);
    free(e->family);
    free(e->defines);
    free(e->options);
    free(e);
    e = next;
  }
  free(c);
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
  clt_status st = cache_walk("clt_kernel_cache_clear", 1 << 1 | 1 << 2, clear_visit, &n);
  if (st == CLT_OK && removed)
    *removed = n;
  return st;
}
