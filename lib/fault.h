/* SPDX-License-Identifier: MIT */
/* fault.h - injected faults, for testing clt's error paths (issue 6, item 5): the switch, and
 * the wrappers of the C allocation functions; not installed.
 *
 * Built only with `configure --enable-fault-injection` (which defines CLT_FAULT_INJECTION); a
 * default build has none of this. Then every file that includes clt-internal.h calls the C
 * allocation functions, and every file of the OpenCL backend (through lib/opencl/cl-fault.h) the
 * OpenCL entry points named below, through wrappers in lib/opencl/fault.c, by macros, so no call
 * site changes. A wrapper counts its call in one of four kinds and, when armed, fails the n-th call
 * of that kind with an error the real call can give:
 *
 *   alloc    clCreateContext, clCreateCommandQueue, clCreateBuffer (device and pinned memory),
 *            clCreateUserEvent: CL_MEM_OBJECT_ALLOCATION_FAILURE (buffers), else
 *            CL_OUT_OF_RESOURCES
 *   enqueue  every OpenCL enqueue call clt makes (reads, writes, copies, fills, maps, unmaps,
 *            kernels, native kernels, markers, barriers): CL_OUT_OF_RESOURCES
 *   build    clCreateProgramWithSource, clCreateProgramWithBinary, clBuildProgram (which gives
 *            CL_BUILD_PROGRAM_FAILURE) and clCreateKernel: CL_OUT_OF_HOST_MEMORY/RESOURCES
 *   host     malloc, calloc, realloc and aligned_alloc in clt's own code: NULL
 *
 * "any" counts the four together. Arm it with the environment variable CLT_FAULT (read at the
 * first counted call) or in-process with clt__fault_set:
 *
 *   CLT_FAULT=KIND:N     the N-th call of KIND fails, once (N from 1); KIND is alloc, enqueue,
 *                        build, host or any
 *   CLT_FAULT=KIND:N+    that call and every later one of KIND fail
 *   CLT_FAULT=count      nothing fails; at exit, the calls of each kind go to stderr
 *
 * Under CLT_FAULT each injected fault is reported on stderr as it happens.
 *
 * CLT_FAULT_DELAY_US=N makes the device run behind the host, as a real GPU does: every command
 * clt enqueues also waits for a user event that a timer thread completes N microseconds after
 * the enqueue (the ordering-sensitive suites run with it; see .ci/lanes/60-gpu). */
#ifndef CLT_FAULT_H
#define CLT_FAULT_H

typedef enum clt_fault_kind {
  CLT__FAULT_ALLOC,
  CLT__FAULT_ENQUEUE,
  CLT__FAULT_BUILD,
  CLT__FAULT_HOST,
  CLT__FAULT_ANY, /* the four above, counted as one sequence */
  CLT__FAULT_KINDS
} clt_fault_kind;

/* clt__fault_set flags. STICKY: the n-th call and every later one fail. THIS_THREAD: only the
 * calls of the thread that called clt__fault_set count (and fail); driver callback threads and
 * other user threads are left alone. */
#define CLT__FAULT_STICKY 1u
#define CLT__FAULT_THIS_THREAD 2u

#ifdef CLT_FAULT_INJECTION

/* The one place where libclt exports clt__ functions (tests/exports.sh allows these only in a
 * fault-injection build, which is for tests): tests/mpi_test arms them through libclt.so, which
 * makes libclt_mpi's OpenCL calls for it (lib/opencl/staging.c), so that one switch counts every
 * call. */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(default)
#endif

#include <stddef.h>

/* Restarts counting (every kind from 0) and arms kind: its n-th call from now fails (n >= 1), or
 * with n = 0 nothing fails and the calls are only counted. Replaces whatever CLT_FAULT said. */
void clt__fault_set(clt_fault_kind kind, long n, unsigned flags);
/* Disarms and stops counting (as if CLT_FAULT were unset); the counts keep their values. */
void clt__fault_reset(void);
/* Calls of kind counted since the last clt__fault_set. */
long clt__fault_count(clt_fault_kind kind);
/* Faults injected since the last clt__fault_set. */
long clt__fault_injected(void);
/* The function the first fault since the last clt__fault_set went into ("clCreateBuffer"), or ""
 * if none; static. */
const char *clt__fault_site(void);
/* "alloc", "enqueue", "build", "host" or "any". */
const char *clt__fault_kind_name(clt_fault_kind kind);

/* The wrappers of the C allocation functions (those of OpenCL calls: lib/opencl/cl-fault.h). */
void *clt__fault_malloc(size_t n);
void *clt__fault_calloc(size_t n, size_t size);
void *clt__fault_realloc(void *p, size_t n);
void *clt__fault_aligned_alloc(size_t align, size_t n);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

/* Counts a call of kind to site (lib/opencl/fault.c's wrappers); true if it must fail with
 * error (named in the report of CLT_FAULT). */
#include <stdbool.h>
bool clt__fault_hit(clt_fault_kind kind, const char *site, const char *error);

/* Every file that includes clt-internal.h calls the wrappers instead (opencl/fault.c defines
 * CLT_FAULT_NO_REDIRECT to reach the real functions, and so do tests that use the calls above). */
#ifndef CLT_FAULT_NO_REDIRECT
#include <stdlib.h> /* declared before the macros below rename its functions */

#define malloc(n) clt__fault_malloc(n)
#define calloc(n, size) clt__fault_calloc(n, size)
#define realloc(p, n) clt__fault_realloc(p, n)
#define aligned_alloc(align, n) clt__fault_aligned_alloc(align, n)
#endif /* CLT_FAULT_NO_REDIRECT */

#endif /* CLT_FAULT_INJECTION */
#endif /* CLT_FAULT_H */
