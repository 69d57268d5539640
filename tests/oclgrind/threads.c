/* SPDX-License-Identifier: MIT */
/* tests/oclgrind/threads.c - Oclgrind 21.10 is not thread-safe: two host threads, each with its
 * own buffer, kernel and in-order command queue of one context, each doing fill -> kernel ->
 * read -> clFinish in a loop, with nothing shared but the context and the program.
 *
 * OpenCL 1.2 (section A.2) makes every API call thread-safe except clSetKernelArg on one kernel
 * object, which this program never shares. A conformant device (PoCL) prints "ok: ...".
 * Oclgrind runs a queue's commands in whichever host thread waits for them (clFinish,
 * clWaitForEvents), with no lock: its command lists and the global maps of its runtime
 * (async_queue.cpp) are updated by both threads at once, and its Context holds one kernel
 * invocation at a time. It aborts (Context::notifyKernelBegin: Assertion
 * `m_kernelInvocation == NULL' failed), crashes (free(): invalid pointer, SIGSEGV) or, when it
 * survives, a thread reads values the other thread wrote. With argument "shared" both threads
 * use one queue (enqueues serialized by a mutex, as clt does with its device lock) and Oclgrind
 * fails the same way; with "nokernel" the threads only fill and read (no kernel invocation to
 * collide), and Oclgrind still crashes or hands a thread the other's data. This is why
 * tests/check_threads.c leaves Oclgrind out of the devices its threads share.
 *
 *   cc -o threads tests/oclgrind/threads.c -lOpenCL -lpthread
 *   OCL_ICD_VENDORS=<dir with only oclgrind's .icd> ./threads [shared] [nokernel]
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1024, ITERS = 200 };

static const char *src = "__kernel void inc(__global int *a) { a[get_global_id(0)] += 1; }";
static cl_context ctx;
static cl_device_id dev;
static cl_program prog;
static cl_command_queue shared_q;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int no_kernel;
static int bad[2];

static void *body(void *arg) {
  int id = (int)(size_t)arg;
  cl_int err;
  cl_command_queue q = shared_q ? shared_q : clCreateCommandQueue(ctx, dev, 0, &err);
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(int), NULL, &err);
  cl_kernel k = clCreateKernel(prog, "inc", &err);
  clSetKernelArg(k, 0, sizeof buf, &buf);
  int *out = malloc(N * sizeof(int));
  size_t global = N;
  for (int it = 0; it < ITERS && !bad[id]; it++) {
    int pattern = (id + 1) * 100000 + it;
    pthread_mutex_lock(&lock);
    clEnqueueFillBuffer(q, buf, &pattern, sizeof pattern, 0, N * sizeof(int), 0, NULL, NULL);
    if (!no_kernel)
      clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    clEnqueueReadBuffer(q, buf, CL_FALSE, 0, N * sizeof(int), out, 0, NULL, NULL);
    pthread_mutex_unlock(&lock);
    clFinish(q);
    for (int i = 0; i < N; i++)
      if (out[i] != pattern + !no_kernel) {
        printf("thread %d, iteration %d: element %d is %d, expected %d\n", id, it, i, out[i],
               pattern + !no_kernel);
        bad[id] = 1;
        break;
      }
  }
  free(out);
  clReleaseKernel(k);
  clReleaseMemObject(buf);
  if (!shared_q)
    clReleaseCommandQueue(q);
  return NULL;
}

int main(int argc, char **argv) {
  cl_platform_id plat;
  cl_int err;
  char name[256] = "";
  if (clGetPlatformIDs(1, &plat, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
    fprintf(stderr, "no OpenCL device\n");
    return 2;
  }
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
  ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
    fprintf(stderr, "build failed\n");
    return 2;
  }
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "shared") == 0)
      shared_q = clCreateCommandQueue(ctx, dev, 0, &err);
    else if (strcmp(argv[i], "nokernel") == 0)
      no_kernel = 1;
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, body, (void *)(size_t)i);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  if (bad[0] || bad[1]) {
    printf("FAILED on %s: a thread read what it did not write\n", name);
    return 1;
  }
  printf("ok: %s: 2 threads x %d x (fill,%s read, clFinish), %s\n", name, ITERS,
         no_kernel ? "" : " kernel,", shared_q ? "one shared queue" : "a queue each");
  return 0;
}
