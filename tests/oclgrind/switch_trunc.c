/* SPDX-License-Identifier: MIT */
/* switch_trunc.c - Oclgrind 21.10 takes the wrong case of `switch (k & 3u)` for k >= 4.
 *
 * What it shows: clang shrinks `switch (k & 3u)` to `%t = trunc i32 %k to i2` and
 * `switch i2 %t`. Oclgrind keeps an i2 in one byte and its trunc copies the low byte without
 * dropping bits 2..7 (WorkItem.cpp, itrunc), so for k = 4 the switch compares 4 with the cases
 * 0, 1, 2 and takes the default. clt's randn rotated its sincos by the quarter turn k this way
 * and came out a quarter turn off on Oclgrind (kernels/random.cl, rng_rotate_f32).
 *
 * What a conformant device prints: k = 0..7 -> case 0 1 2 3 0 1 2 3.
 * What Oclgrind 21.10 prints:       k = 0..7 -> case 0 1 2 3 3 3 3 3, and exits 1.
 *
 * Build and run: cc switch_trunc.c -lOpenCL -o switch_trunc
 *   OCL_ICD_VENDORS=DIR_WITH_ONLY_OCLGRIND_ICD ./switch_trunc   (or: oclgrind ./switch_trunc)
 * It uses the first device of the first platform. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>

static const char *src = "__kernel void quadrant(__global uint *out, uint base) {\n"
                         "  for (uint i = 0; i < 8; i++) {\n"
                         "    uint k = base + i, q;\n"
                         "    switch (k & 3u) {\n"
                         "    case 0: q = 0; break;\n"
                         "    case 1: q = 1; break;\n"
                         "    case 2: q = 2; break;\n"
                         "    default: q = 3; break;\n"
                         "    }\n"
                         "    out[i] = q;\n"
                         "  }\n"
                         "}\n";

int main(void) {
  cl_platform_id pl;
  cl_device_id dev;
  cl_int err;
  if (clGetPlatformIDs(1, &pl, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
    fprintf(stderr, "no OpenCL device\n");
    return 2;
  }
  char name[256] = "";
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  if (clBuildProgram(p, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
    fprintf(stderr, "build failed\n");
    return 2;
  }
  cl_kernel k = clCreateKernel(p, "quadrant", &err);
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, 8 * sizeof(cl_uint), NULL, &err);
  cl_uint base = 0; /* a kernel argument, so the compiler cannot fold the switch */
  clSetKernelArg(k, 0, sizeof buf, &buf);
  clSetKernelArg(k, 1, sizeof base, &base);
  size_t one = 1;
  clEnqueueNDRangeKernel(q, k, 1, NULL, &one, NULL, 0, NULL, NULL);
  cl_uint out[8];
  clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
  int bad = 0;
  printf("%s: k = 0..7 -> case", name);
  for (cl_uint i = 0; i < 8; i++) {
    printf(" %u", out[i]);
    bad |= out[i] != (i & 3u);
  }
  printf("%s\n", bad ? "  (wrong: expected 0 1 2 3 0 1 2 3)" : "");
  clReleaseMemObject(buf);
  clReleaseKernel(k);
  clReleaseProgram(p);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return bad;
}
