/* SPDX-License-Identifier: MIT */
/* opencl/program.c - run-time kernel builds: the embedded kernels/<family>.cl files (or those in
 * $CLT_KERNEL_PATH), built lazily once per (device, family, defines), and the programs of users'
 * own sources (clt_kernel_create), once per (device, source, options); cached in memory here and,
 * as program binaries, on disk (disk_cache.c) so that a second process starts warm; builds in the
 * background for lib/lazy.c's fused chains. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* syscall(SYS_gettid) */
#include "cl-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
  char *family;       /* NULL for a user's source (clt__get_user_program) */
  char *defines;      /* a user's source: the whole text */
  char *options;      /* a user's build options; NULL for clt's own programs */
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

/* Builds from source that this process has finished (the exit wait of background builds, below,
 * needs it). */
static atomic_int compiles_done;

/* Builds the program of the sources srcs (joined in this order) for dev with opts, through the
 * disk cache. A build failure is CLT_ERR_BUILD with the device, what was built (`what`), the
 * options, `detail` and the build log. */
static clt_status build_sources(clt_device *dev, const char *const srcs[3], const char *opts,
                                const char *what, const char *detail, const char *fn,
                                cl_program *out) {
  clt__cache_key key;
  bool disk = clt__cl_use_disk_cache(dev) && clt__cl_cache_key(dev, opts, srcs, &key);
  cl_program p = disk ? clt__cl_cache_load(dev, &key, opts) : NULL;
  if (p) {
    *out = p;
    return CLT_OK;
  }
  cl_int err;
  p = clCreateProgramWithSource(clt__cl(dev)->context, 3, (const char **)srcs, NULL, &err);
  if (err != CL_SUCCESS)
    return clt__cl_error(err, fn, "clCreateProgramWithSource", dev);
  err = clBuildProgram(p, 1, &clt__cl(dev)->id, opts, NULL, NULL);
  atomic_fetch_add(&compiles_done, 1);
  if (err != CL_SUCCESS) {
    size_t log_size = 0;
    clGetProgramBuildInfo(p, clt__cl(dev)->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size);
    char *log = malloc(log_size + 1);
    if (log) {
      log[0] = '\0';
      clGetProgramBuildInfo(p, clt__cl(dev)->id, CL_PROGRAM_BUILD_LOG, log_size, log, NULL);
      log[log_size] = '\0';
    }
    clt__error(CLT_ERR_BUILD, fn,
               "building %s for %s (%s) failed: %s\noptions: %s\n%sbuild log:\n%s", what, dev->name,
               dev->model, clt__cl_error_name(err), opts, detail, log ? log : "");
    free(log);
    clReleaseProgram(p);
    return CLT_ERR_BUILD;
  }
  if (disk)
    clt__cl_cache_store(dev, &key, p);
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
    if (!e || (family && !(e->family = clt__strdup(family))) ||
        !(e->defines = clt__strdup(defines)) || (options && !(e->options = clt__strdup(options)))) {
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
/* A build in the background runs on a detached thread of its own, at most BG_MAX at a time.
 * Oclgrind is not thread-safe: its builds stay in the caller's thread. CLT_BACKGROUND_BUILDS=0
 * turns them off (every build in the caller's thread, as before).
 *
 * The exit. A program may return from main while a build is still inside the driver's compiler,
 * and exit() then runs the destructors of the compiler's static objects under it: PoCL's clang
 * crashed so (in its header search) whenever the build in flight was the process's first
 * compile, as in any second run of a program whose per-operation kernels load from the disk
 * cache: the statics that compile constructs are registered with atexit after clt's handler, so
 * they are destroyed first. So exit() waits for the builds in flight (bg_wait_all), and that
 * handler is registered anew after every compile that may have registered statics of its own:
 * at the start of each background build when a compile has finished since the last
 * registration. And the process's first compile is never a background one: before it, a tiny
 * program is built in the caller's thread (warm_up, a few tens of milliseconds, once per process),
 * which constructs the compiler's statics before the handler that must outlive them. */
#define BG_MAX 2
static pthread_mutex_t bg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_done = PTHREAD_COND_INITIALIZER;
static int bg_running;
static int bg_registered_after = -1; /* compiles_done at the last atexit(bg_wait_all) */

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

/* Builds a kernel of nothing from source for dev: the first compile of the process, so that the
 * driver's compiler sets its statics up in the caller's thread (see above). Failures are
 * ignored: the real build reports its own. */
static void warm_up(clt_device *dev) {
  const char *src = "__kernel void clt_warm_up(void) {}\n";
  cl_int err;
  cl_program p = clCreateProgramWithSource(clt__cl(dev)->context, 1, &src, NULL, &err);
  if (err != CL_SUCCESS)
    return;
  clBuildProgram(p, 1, &clt__cl(dev)->id, "-cl-std=CL1.2", NULL, NULL);
  atomic_fetch_add(&compiles_done, 1);
  clReleaseProgram(p);
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
  clt__cl_builds_end();
  clt__cl_thread_end();
  return NULL;
}

bool clt__background_builds(const clt_device *dev) {
  if (dev->backend != &clt__opencl_backend)
    return false;
  const char *v = getenv("CLT_BACKGROUND_BUILDS");
  /* None in a process with a serial runtime (Oclgrind) at all: its compiler and another
   * runtime's, both in this process, building at once on two threads crashed CI's mixed run
   * (Oclgrind as cl:0, PoCL as cl:1) once, in a test that builds on both devices; a serial
   * runtime is a test tool, where builds in the caller's thread cost nothing that matters. */
  return !(v && strcmp(v, "0") == 0) && !clt__cl_any_serial();
}

/* Starts run(arg) on a detached thread of its own, counted among the threads exit() waits for
 * (bg_wait_all); false where none can start now (max of them running already, or no thread).
 * Takes bg_lock: call it without. */
static bool spawn(void *(*run)(void *), void *arg, int max) {
  pthread_mutex_lock(&bg_lock);
  bool ok = bg_running < max;
  int seen = atomic_load(&compiles_done);
  if (ok && seen != bg_registered_after) {
    ok = atexit(bg_wait_all) == 0;
    if (ok)
      bg_registered_after = seen;
  }
  pthread_attr_t a;
  pthread_t t;
  if (ok && pthread_attr_init(&a) == 0) {
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    ok = pthread_create(&t, &a, run, arg) == 0;
    pthread_attr_destroy(&a);
    if (ok)
      bg_running++;
  } else {
    ok = false;
  }
  pthread_mutex_unlock(&bg_lock);
  return ok;
}

/* Starts e's build on a thread of its own; false where none can start now. programs_lock held,
 * e neither built nor building. */
static bool bg_start(clt_device *dev, program_entry *e) {
  bg_job *j = malloc(sizeof *j);
  if (!j)
    return false;
  *j = (bg_job){dev, e};
  e->building = true; /* bg_build clears it, under programs_lock, which we hold */
  clt__cl_builds_begin();
  bool ok = spawn(bg_build, j, BG_MAX);
  if (!ok) {
    e->building = false;
    free(j);
    clt__cl_builds_end();
  }
  return ok;
}

bool clt__cl_thread_start(clt_device *dev, void *(*run)(void *), void *arg, int max) {
  if (!clt__background_builds(dev))
    return false;
  if (atomic_load(&compiles_done) == 0)
    warm_up(dev);
  return spawn(run, arg, max);
}

/* Builds that will store a cache entry: counted from when they are handed to a thread (the
 * background builds, the deferred launches' jobs) until their build is over, so that the cache
 * functions can wait for exactly those (not for the jobs' launches, which may wait on the
 * device and on user events). */
static int builds_pending;

void clt__cl_builds_begin(void) {
  pthread_mutex_lock(&bg_lock);
  builds_pending++;
  pthread_mutex_unlock(&bg_lock);
}

void clt__cl_builds_end(void) {
  pthread_mutex_lock(&bg_lock);
  builds_pending--;
  pthread_cond_broadcast(&bg_done);
  pthread_mutex_unlock(&bg_lock);
}

void clt__cl_builds_wait(void) {
  pthread_mutex_lock(&bg_lock);
  while (builds_pending > 0)
    pthread_cond_wait(&bg_done, &bg_lock);
  pthread_mutex_unlock(&bg_lock);
}

void clt__cl_thread_end(void) {
  pthread_mutex_lock(&bg_lock);
  bg_running--;
  pthread_cond_broadcast(&bg_done);
  pthread_mutex_unlock(&bg_lock);
}

bool clt__program_on_disk(clt_device *dev, const char *family, const char *defines) {
  if (!clt__cl_use_disk_cache(dev) || !clt__cache_dir())
    return false;
  char *common = load_source("common", "clt"), *body = common ? load_source(family, "clt") : NULL;
  const char *extra = getenv("CLT_BUILD_OPTIONS");
  size_t olen = (extra ? strlen(extra) : 0) + 32;
  char *opts = body ? malloc(olen) : NULL;
  bool found = false;
  if (opts) { /* as build() makes them */
    snprintf(opts, olen, "-cl-std=CL1.2 %s", extra ? extra : "");
    const char *srcs[3] = {defines, common, body};
    clt__cache_key k;
    found = clt__cl_cache_key(dev, opts, srcs, &k) && access(k.path, R_OK) == 0;
  }
  free(opts);
  free(body);
  free(common);
  return found;
}

bool clt__program_built(clt_device *dev, const char *family, const char *defines) {
  struct clt_cl_device *c = clt__cl(dev);
  bool built = false;
  pthread_mutex_lock(&c->programs_lock);
  for (program_entry *e = c->programs ? c->programs->head : NULL; e && !built; e = e->next)
    built = e->program && entry_is(e, family, defines, NULL);
  pthread_mutex_unlock(&c->programs_lock);
  return built;
}

clt_status clt__get_program(clt_device *dev, const char *family, const char *defines,
                            const char *fn, cl_program *out) {
  program_entry *e = NULL;
  pthread_mutex_lock(&clt__cl(dev)->programs_lock);
  clt_status st = built_entry(dev, family, defines, NULL, NULL, fn, &e);
  if (st == CLT_OK)
    *out = e->program;
  pthread_mutex_unlock(&clt__cl(dev)->programs_lock);
  return st;
}

clt_status clt__get_kernel_ready(clt_device *dev, const char *family, const char *defines,
                                 const char *kernel, const char *fn, cl_kernel *out) {
  if (!clt__background_builds(dev))
    return clt__get_kernel(dev, family, defines, kernel, fn, out);
  if (atomic_load(&compiles_done) == 0)
    warm_up(dev);
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
