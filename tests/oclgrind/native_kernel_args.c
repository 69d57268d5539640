/* SPDX-License-Identifier: MIT */
/* tests/oclgrind/native_kernel_args.c - Oclgrind 21.10's clEnqueueNativeKernel writes into the
 * caller's args block and then reads mem_list again.
 *
 * A native kernel whose mem_list points at the cl_mem stored in args itself (mem_list ==
 * args_mem_loc[0], which OpenCL 1.2 section 5.8 does not forbid). A conformant runtime (PoCL)
 * copies args, stores the buffer's host address into its copy, runs the function and prints
 * "ok". Oclgrind stores the address through args_mem_loc into the caller's args first, then
 * retains mem_list[0], which now holds that host address instead of the cl_mem: it crashes
 * (SIGSEGV in clReleaseMemObject when the command completes). clt's native matmul path gives
 * mem_list an array of its own (lib/opencl/matmul.c), which both runtimes accept.
 *
 *   cc -o native_kernel_args tests/oclgrind/native_kernel_args.c -lOpenCL
 *   OCL_ICD_VENDORS=<dir with only oclgrind's .icd> ./native_kernel_args
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>

typedef struct args {
  union {
    cl_mem mem;
    int *ptr;
  } buf;
} args;

static void CL_CALLBACK run(void *p) { ((args *)p)->buf.ptr[0] = 42; }

int main(void) {
  cl_platform_id plat;
  cl_device_id dev;
  cl_int err;
  if (clGetPlatformIDs(1, &plat, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
    fprintf(stderr, "no OpenCL device\n");
    return 2;
  }
  cl_device_exec_capabilities caps = 0;
  clGetDeviceInfo(dev, CL_DEVICE_EXECUTION_CAPABILITIES, sizeof caps, &caps, NULL);
  if (!(caps & CL_EXEC_NATIVE_KERNEL)) {
    printf("skip: the device runs no native kernels\n");
    return 77;
  }
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(int), NULL, &err);
  args a = {.buf.mem = buf};
  const void *loc = &a.buf.mem;
  err = clEnqueueNativeKernel(q, run, &a, sizeof a, 1, &a.buf.mem, &loc, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    printf("clEnqueueNativeKernel: %d\n", err);
    return 1;
  }
  int v = 0;
  clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof v, &v, 0, NULL, NULL);
  clFinish(q);
  printf("%s: the native kernel wrote %d\n", v == 42 ? "ok" : "FAILED", v);
  return v == 42 ? 0 : 1;
}
