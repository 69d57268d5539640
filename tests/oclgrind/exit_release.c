/* SPDX-License-Identifier: MIT */
/* tests/oclgrind/exit_release.c - Oclgrind 21.10's runtime keeps a thread_local stack of the API
 * calls in progress, which exit() destroys first (__call_tls_dtors runs before the atexit
 * handlers and the libraries' destructors); an OpenCL call into Oclgrind after that writes freed
 * memory.
 *
 * What it shows: a program built, then released from an atexit handler. Under valgrind
 * _clReleaseProgram writes into a block freed by the std::stack destructor in __call_tls_dtors;
 * with glibc's heap checks (LD_PRELOAD=libc_malloc_debug.so.0 MALLOC_CHECK_=3) the process
 * aborts ("corrupted double-linked list"), and without them it may, depending on the heap.
 * PoCL is unaffected ("ok", exit 0 either way).
 *
 * Why clt cares: CLBlast 1.5.3 keeps the programs it builds in a static cache whose destructor
 * releases them at exit, so any process that ran a CLBlast GEMM on Oclgrind calls into Oclgrind
 * after that point (a 4 x 4 clt_matmul with CLT_MATMUL=clblast is enough). Nothing a library can
 * do at exit comes early enough; tests whose child processes crashed in that destructor empty
 * CLBlast's cache before they return (clt__cl_matmul_clear_cache).
 *
 *   cc -std=c11 -Wall -Wextra -o exit_release tests/oclgrind/exit_release.c -lOpenCL
 *   OCL_ICD_VENDORS=<dir with only oclgrind's .icd> \
 *     LD_PRELOAD=/lib/x86_64-linux-gnu/libc_malloc_debug.so.0 MALLOC_CHECK_=3 ./exit_release
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

static cl_program program;

static void release_at_exit(void) { clReleaseProgram(program); }

int main(void) {
  cl_platform_id p;
  cl_device_id d;
  cl_int err;
  if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL) != CL_SUCCESS) {
    puts("no OpenCL device");
    return 2;
  }
  cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
  const char *src = "__kernel void k(__global float *x) { x[get_global_id(0)] += 1.0f; }";
  program = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  if (err != CL_SUCCESS || clBuildProgram(program, 1, &d, "", NULL, NULL) != CL_SUCCESS) {
    puts("cannot build");
    return 2;
  }
  atexit(release_at_exit);
  puts("ok (a crash after this line is the bug)");
  return 0;
}
