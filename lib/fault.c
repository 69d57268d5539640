/* SPDX-License-Identifier: MIT */
/* fault.c - the fault-injection switch (CLT_FAULT, clt__fault_set) and the wrappers of the C
 * allocation functions (lib/fault.h); the OpenCL calls' wrappers are lib/opencl/fault.c's. The
 * bottom layer: every file that allocates calls it. Compiled to nothing unless configure ran
 * with --enable-fault-injection. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#ifdef CLT_FAULT_INJECTION

#define CLT_FAULT_NO_REDIRECT /* this file calls the real functions */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

static const char *const kind_names[CLT__FAULT_KINDS] = {"alloc", "enqueue", "build", "host",
                                                         "any"};

const char *clt__fault_kind_name(clt_fault_kind kind) {
  return (unsigned)kind < CLT__FAULT_KINDS ? kind_names[kind] : "?";
}

/* Everything under one lock: these builds are for tests, and a lock per call costs nothing
 * next to an OpenCL call. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static struct {
  bool counting;       /* calls are counted (and one may fail) */
  bool armed;          /* n >= 1 */
  clt_fault_kind kind; /* the kind whose n-th call fails */
  long n;
  unsigned flags;  /* CLT__FAULT_STICKY, CLT__FAULT_THIS_THREAD */
  pthread_t owner; /* with CLT__FAULT_THIS_THREAD: the only thread counted */
  bool verbose;    /* armed by CLT_FAULT: report each fault on stderr */
  long count[CLT__FAULT_KINDS];
  long injected;
  const char *site;
} st = {.site = ""};

static void report_counts(void) {
  fprintf(stderr,
          "clt: fault injection: calls counted: alloc %ld, enqueue %ld, build %ld, host %ld\n",
          st.count[CLT__FAULT_ALLOC], st.count[CLT__FAULT_ENQUEUE], st.count[CLT__FAULT_BUILD],
          st.count[CLT__FAULT_HOST]);
}

/* Parses CLT_FAULT once; a malformed value is reported and ignored. */
static void env_init(void) {
  const char *e = getenv("CLT_FAULT");
  if (!e || !*e)
    return;
  if (strcmp(e, "count") == 0) {
    st.counting = true;
    atexit(report_counts);
    return;
  }
  const char *colon = strchr(e, ':');
  int kind = -1;
  for (int k = 0; colon && k < CLT__FAULT_KINDS; k++)
    if (strlen(kind_names[k]) == (size_t)(colon - e) && strncmp(e, kind_names[k], colon - e) == 0)
      kind = k;
  char *end = NULL;
  long n = colon ? strtol(colon + 1, &end, 10) : 0;
  bool sticky = end && *end == '+';
  if (kind < 0 || n < 1 || !end || end == colon + 1 || *(end + sticky) != '\0') {
    fprintf(stderr,
            "clt: warning: CLT_FAULT='%s' is not KIND:N, KIND:N+ or count (KIND: alloc, enqueue, "
            "build, host or any; N >= 1); no faults injected\n",
            e);
    return;
  }
  st.counting = st.armed = st.verbose = true;
  st.kind = (clt_fault_kind)kind;
  st.n = n;
  st.flags = sticky ? CLT__FAULT_STICKY : 0;
}

void clt__fault_set(clt_fault_kind kind, long n, unsigned flags) {
  pthread_once(&env_once, env_init);
  pthread_mutex_lock(&lock);
  memset(st.count, 0, sizeof st.count);
  st.injected = 0;
  st.site = "";
  st.counting = true;
  st.armed = n >= 1 && (unsigned)kind < CLT__FAULT_KINDS;
  st.kind = kind;
  st.n = n;
  st.flags = flags;
  st.owner = pthread_self();
  st.verbose = false;
  pthread_mutex_unlock(&lock);
}

void clt__fault_reset(void) {
  pthread_once(&env_once, env_init);
  pthread_mutex_lock(&lock);
  st.counting = false;
  st.armed = false;
  pthread_mutex_unlock(&lock);
}

long clt__fault_count(clt_fault_kind kind) {
  pthread_mutex_lock(&lock);
  long c = (unsigned)kind < CLT__FAULT_KINDS ? st.count[kind] : 0;
  pthread_mutex_unlock(&lock);
  return c;
}

long clt__fault_injected(void) {
  pthread_mutex_lock(&lock);
  long c = st.injected;
  pthread_mutex_unlock(&lock);
  return c;
}

const char *clt__fault_site(void) {
  pthread_mutex_lock(&lock);
  const char *s = st.site;
  pthread_mutex_unlock(&lock);
  return s;
}

bool clt__fault_hit(clt_fault_kind kind, const char *site, const char *error) {
  pthread_once(&env_once, env_init);
  bool fail = false;
  pthread_mutex_lock(&lock);
  if (st.counting &&
      (!(st.flags & CLT__FAULT_THIS_THREAD) || pthread_equal(st.owner, pthread_self()))) {
    long c = ++st.count[kind];
    long a = ++st.count[CLT__FAULT_ANY];
    long at = st.kind == CLT__FAULT_ANY ? a : st.kind == kind ? c : 0;
    fail = st.armed && at > 0 && (at == st.n || ((st.flags & CLT__FAULT_STICKY) && at > st.n));
    if (fail) {
      if (st.injected++ == 0)
        st.site = site;
      if (st.verbose)
        fprintf(stderr, "clt: fault injection: %s call %ld (%s) fails with %s\n",
                kind_names[st.kind], at, site, error);
    }
  }
  pthread_mutex_unlock(&lock);
  return fail;
}

/* ---- host ----------------------------------------------------------------------------------- */

void *clt__fault_malloc(size_t n) {
  return clt__fault_hit(CLT__FAULT_HOST, "malloc", "NULL") ? NULL : malloc(n);
}

void *clt__fault_calloc(size_t n, size_t size) {
  return clt__fault_hit(CLT__FAULT_HOST, "calloc", "NULL") ? NULL : calloc(n, size);
}

void *clt__fault_realloc(void *p, size_t n) {
  return clt__fault_hit(CLT__FAULT_HOST, "realloc", "NULL") ? NULL : realloc(p, n);
}

void *clt__fault_aligned_alloc(size_t align, size_t n) {
  return clt__fault_hit(CLT__FAULT_HOST, "aligned_alloc", "NULL") ? NULL : aligned_alloc(align, n);
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int clt_fault_disabled;
#endif /* CLT_FAULT_INJECTION */
