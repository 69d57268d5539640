/* SPDX-License-Identifier: MIT */
/* tests/oclgrind/late_callback.c - Oclgrind 21.10 runs a queue's commands only in a host thread
 * that flushes or waits for them, and never calls a completion callback (clSetEventCallback)
 * registered on an event that has already completed.
 *
 * What it shows: a non-blocking clEnqueueWriteBuffer with an event, clFlush, then a CL_COMPLETE
 * callback that sets a flag, and 2 s of polling the flag with no waiting call: the order of
 * lib/transfer.c's bridge(). Oclgrind's clFlush is its clFinish (runtime.cpp: "TODO: Implement
 * properly?"), so the command completes inside clFlush; its callbacks run only when a command is
 * retired (async_queue.cpp, asyncQueueRelease), and clSetEventCallback just appends to the list,
 * so a callback set after that never fires, not even after clFinish ("no callback: ...", exit 1).
 * With argument "early" the callback is set before clFlush, and Oclgrind calls it inside clFlush.
 * OpenCL 1.2 (section 5.9) says a CL_COMPLETE callback "will be called when the command has
 * completed", with no exception for one set late; a conformant device (PoCL) calls it either way
 * ("ok: ...", exit 0).
 *
 * Why clt cares: lib/transfer.c's bridge() hands an event to a queue of another context as a
 * user event that the callback completes. With Oclgrind that user event would never complete
 * and the other queue (PoCL) would wait for ever (clt_move from Oclgrind to PoCL hung), so
 * bridge() makes no bridge for an event that is complete after the flush.
 *
 *   cc -std=c11 -Wall -Wextra -o late_callback tests/oclgrind/late_callback.c -lOpenCL -lpthread
 *   OCL_ICD_VENDORS=<dir with only oclgrind's .icd> ./late_callback [early]
 */
#define _POSIX_C_SOURCE 199309L
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { N = 1024, POLL_MS = 10, LIMIT_MS = 2000 };

static atomic_int done;

static void CL_CALLBACK on_complete(cl_event ev, cl_int status, void *data) {
  (void)ev;
  (void)data;
  atomic_store(&done, status == CL_COMPLETE ? 1 : -1);
}

int main(int argc, char **argv) {
  cl_platform_id plat;
  cl_device_id dev;
  cl_int err, status = 1;
  char name[256] = "";
  int early = argc > 1 && strcmp(argv[1], "early") == 0;
  if (clGetPlatformIDs(1, &plat, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
    fprintf(stderr, "no OpenCL device\n");
    return 2;
  }
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(int), NULL, &err);
  static int host[N];
  cl_event ev;
  if (clEnqueueWriteBuffer(q, buf, CL_FALSE, 0, sizeof host, host, 0, NULL, &ev) != CL_SUCCESS ||
      (early && clSetEventCallback(ev, CL_COMPLETE, on_complete, NULL) != CL_SUCCESS) ||
      clFlush(q) != CL_SUCCESS ||
      (!early && clSetEventCallback(ev, CL_COMPLETE, on_complete, NULL) != CL_SUCCESS)) {
    fprintf(stderr, "enqueue, callback or flush failed\n");
    return 2;
  }
  struct timespec nap = {0, POLL_MS * 1000000L};
  for (int ms = 0; ms <= LIMIT_MS; ms += POLL_MS) {
    if (atomic_load(&done)) {
      printf("ok: %s: the callback set %s clFlush fired after %d ms\n", name,
             early ? "before" : "after", ms);
      return 0;
    }
    nanosleep(&nap, NULL);
  }
  clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  printf("no callback: %s: the callback set %s clFlush had not fired after 2 s; event status %d "
         "(%s)\n",
         name, early ? "before" : "after", status, status == CL_COMPLETE ? "CL_COMPLETE" : "pending");
  clFinish(q);
  for (int i = 0; i < 100 && !atomic_load(&done); i++) /* callbacks may run in another thread */
    nanosleep(&nap, NULL);
  printf("after clFinish: the callback %s\n", atomic_load(&done) ? "fired" : "still had not fired");
  return 1;
}
