/* SPDX-License-Identifier: MIT */
/* uninit_freeze.c - Oclgrind 21.10 with OCLGRIND_UNINITIALIZED=1 aborts any kernel whose
 * optimized IR holds LLVM's `freeze` instruction, and leaves its output unwritten.
 *
 * What it shows: the kernel below divides and takes the remainder by the same divisor (as a
 * kernel that splits a flat index into row and column does). Oclgrind builds kernels at -Oz with
 * LLVM 14, whose DivRemPairs pass rewrites `g % n` as `g - (g / n) * n` on frozen operands.
 * Oclgrind's Uninitialized plugin has no case for `freeze` (src/plugins/Uninitialized.cpp:1805,
 * "Unsupported instruction: freeze"; added upstream in commit ee3a739, 2026, not in 21.10). The
 * FATAL_ERROR it raises is caught by KernelInvocation::run, which abandons the rest of the
 * kernel: clFinish still returns CL_SUCCESS, and `out` keeps the -1 written before the launch.
 *
 * Oclgrind (OCLGRIND_UNINITIALIZED=1): "OCLGRIND FATAL ERROR ... Unsupported instruction:
 * freeze", then "out[0] = -1, want 0", exit status 1. Without OCLGRIND_UNINITIALIZED, or with
 * OCLGRIND_BUILD_OPTIONS=-O0 (no DivRemPairs), and on any conformant device (PoCL): "ok".
 *
 * Build: cc uninit_freeze.c -lOpenCL
 * Run:   OCL_ICD_VENDORS=DIR-WITH-OCLGRIND-ICD OCLGRIND_UNINITIALIZED=1 ./a.out
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>

static const char *src = "__kernel void split(__global int *out, ulong n) {\n"
                         "  ulong g = get_global_id(0);\n"
                         "  out[g] = (int)(g / n * 1000 + g % n);\n"
                         "}\n";

int main(void) {
  cl_platform_id p;
  cl_device_id d;
  cl_int err;
  if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL) != CL_SUCCESS)
    return 2;
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueue(c, d, 0, &err);
  cl_program prog = clCreateProgramWithSource(c, 1, &src, NULL, &err);
  if (clBuildProgram(prog, 1, &d, "", NULL, NULL) != CL_SUCCESS)
    return 2;
  cl_kernel k = clCreateKernel(prog, "split", &err);
  enum { N = 8 };
  int host[N];
  for (int i = 0; i < N; i++)
    host[i] = -1;
  cl_mem out = clCreateBuffer(c, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &err);
  cl_ulong n = 3;
  clSetKernelArg(k, 0, sizeof out, &out);
  clSetKernelArg(k, 1, sizeof n, &n);
  size_t global = N;
  err = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
  err |= clEnqueueReadBuffer(q, out, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL);
  if (err != CL_SUCCESS)
    return 2;
  for (int i = 0; i < N; i++) {
    int want = i / 3 * 1000 + i % 3;
    if (host[i] != want) {
      printf("out[%d] = %d, want %d\n", i, host[i], want);
      return 1;
    }
  }
  printf("ok\n");
  return 0;
}
