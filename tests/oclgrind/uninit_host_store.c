/* SPDX-License-Identifier: MIT */
/* uninit_host_store.c - Oclgrind 21.10 with OCLGRIND_UNINITIALIZED=1 takes memory written by
 * clEnqueueFillBuffer for uninitialized; after a host write that does not cover the whole buffer,
 * or in a buffer that reuses a released one's slot, it no longer tracks what kernels write there.
 *
 * What it shows. Each host-side store (clEnqueueWriteBuffer, clEnqueueFillBuffer,
 * clEnqueueCopyBuffer) reaches Uninitialized::hostMemoryStore, which calls
 * allocAndStoreShadowMemory(address, size): that *replaces* the buffer's whole shadow with a new
 * one of `size` bytes (ShadowMemory::allocate), then marks [offset, offset + size) clean, which
 * ShadowMemory::store silently drops when offset + size exceeds the new shadow. So
 *   1. a fill of 8 floats is 8 stores of 4 bytes: the shadow ends 4 bytes long, the last store
 *      (offset 28) is dropped, and every element reads as uninitialized;
 *   2. a write of the first 16 bytes of a 32-byte buffer leaves a 16-byte shadow: a kernel's
 *      stores to bytes 16..31 are dropped from the shadow too, so a later kernel reading them is
 *      reported although the earlier kernel wrote them (a caching allocator that reuses a buffer
 *      once partly written by the host is reported forever after);
 *   3. the plugin has no hook for a released buffer, and Oclgrind gives a new buffer the slot
 *      (address) of the last released one: the new buffer inherits the old, shorter shadow
 *      (kernelBegin poisons only slots without one), so a kernel's stores past the old size are
 *      dropped again. An allocator that releases and creates buffers is reported at random.
 * The data themselves are right; only the tracking is wrong. Unchanged upstream (v26.03.1).
 *
 * Oclgrind (OCLGRIND_UNINITIALIZED=1): "Uninitialized value written to global memory address"
 * for `out[i] = in[i]` in case 1 (all 8 items), case 2 (items 4..7) and case 3 (items 1..7), and
 * "ok" three times. A conformant device, and Oclgrind without OCLGRIND_UNINITIALIZED: "ok" three
 * times, no report.
 *
 * Build: cc uninit_host_store.c -lOpenCL
 * Run:   OCL_ICD_VENDORS=DIR-WITH-OCLGRIND-ICD OCLGRIND_UNINITIALIZED=1 ./a.out
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>

static const char *src = "__kernel void copy(__global const float *in, __global float *out) {\n"
                         "  size_t i = get_global_id(0);\n"
                         "  out[i] = in[i];\n"
                         "}\n"
                         "__kernel void set(__global float *out) {\n"
                         "  out[get_global_id(0)] = 2.0f;\n"
                         "}\n";

enum { N = 8 };
static cl_command_queue q;
static cl_kernel kcopy, kset;

static int run(cl_kernel k, cl_mem a, cl_mem b) {
  size_t global = N;
  clSetKernelArg(k, 0, sizeof a, &a);
  if (b)
    clSetKernelArg(k, 1, sizeof b, &b);
  return clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL) != CL_SUCCESS;
}

static int check(const char *what, cl_mem out, float want) {
  float h[N];
  if (clEnqueueReadBuffer(q, out, CL_TRUE, 0, sizeof h, h, 0, NULL, NULL) != CL_SUCCESS)
    return 1;
  for (int i = 0; i < N; i++)
    if (h[i] != want) {
      printf("%s: out[%d] = %g, want %g\n", what, i, h[i], want);
      return 1;
    }
  printf("%s: ok\n", what);
  return 0;
}

int main(void) {
  cl_platform_id p;
  cl_device_id d;
  cl_int err;
  if (clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL) != CL_SUCCESS)
    return 2;
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
  q = clCreateCommandQueue(c, d, 0, &err);
  cl_program prog = clCreateProgramWithSource(c, 1, &src, NULL, &err);
  if (clBuildProgram(prog, 1, &d, "", NULL, NULL) != CL_SUCCESS)
    return 2;
  kcopy = clCreateKernel(prog, "copy", &err);
  kset = clCreateKernel(prog, "set", &err);
  cl_mem in = clCreateBuffer(c, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
  cl_mem out = clCreateBuffer(c, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
  int bad = 0;

  /* 1. in filled with ones by clEnqueueFillBuffer, then copied by a kernel. */
  float one = 1.0f;
  bad |= clEnqueueFillBuffer(q, in, &one, sizeof one, 0, N * sizeof(float), 0, NULL, NULL) != 0;
  bad |= run(kcopy, in, out) || check("fill, then copy", out, 1.0f);

  /* 2. the first half of in written by the host, then all of it by a kernel, then copied. */
  float half[N / 2] = {0};
  bad |= clEnqueueWriteBuffer(q, in, CL_TRUE, 0, sizeof half, half, 0, NULL, NULL) != 0;
  bad |= run(kset, in, NULL) || run(kcopy, in, out) || check("half written, set, copy", out, 2.0f);

  /* 3. a one-float buffer written by a kernel and released; a new buffer of 8 takes its slot. */
  size_t one_item = 1;
  cl_mem small = clCreateBuffer(c, CL_MEM_READ_WRITE, sizeof(float), NULL, &err);
  clSetKernelArg(kset, 0, sizeof small, &small);
  bad |= clEnqueueNDRangeKernel(q, kset, 1, NULL, &one_item, NULL, 0, NULL, NULL) != 0;
  bad |= clFinish(q) != 0;
  clReleaseMemObject(small);
  cl_mem fresh = clCreateBuffer(c, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
  bad |= run(kset, fresh, NULL) || run(kcopy, fresh, out) || check("slot reused, set, copy", out, 2.0f);
  return bad;
}
