/* SPDX-License-Identifier: MIT */
/* tests/oclgrind/foreign_callback.c - Oclgrind 21.10 must not be entered from another runtime's
 * thread: a user event of an Oclgrind context completed from PoCL's callback thread, while the
 * main thread waits inside Oclgrind, corrupts Oclgrind's queue.
 *
 * What it shows: the order of lib/opencl/order.c's bridge() for a copy from PoCL to Oclgrind, in
 * a loop. A non-blocking write on a PoCL queue gives event E; an Oclgrind user event U is set
 * CL_COMPLETE by a callback on E (which PoCL calls from its own thread); a write on an Oclgrind
 * queue waits for U, and the main thread waits for that write with clWaitForEvents. Oclgrind
 * runs a queue's commands in whichever thread gets there (clSetUserEventStatus runs the commands
 * waiting for U; clWaitForEvents runs the queue too) with no lock, so both threads update its
 * command lists at once: in one run of 20000 rounds out of ten or so it crashes (SIGSEGV in
 * std::_List_node_base::_M_unhook under oclgrind::Queue::execute) or aborts. OpenCL 1.2 (section
 * A.2) makes clSetUserEventStatus and clWaitForEvents thread-safe, so a conformant runtime in
 * Oclgrind's place prints "ok: ..." (exit 0). It needs both runtimes: Oclgrind's .icd and PoCL's
 * in the vendors directory (Oclgrind is picked by platform name, PoCL is the other one); it exits
 * 77 (skip) with fewer than two platforms.
 *
 * Why clt cares: the test suite's copies from PoCL to Oclgrind (transfer:matrix:test_copy in the
 * 60-gpu lane) crashed now and then (4 of 20 runs of 20000 clt_copy calls from cl:1 to cl:0 did).
 * clt marks Oclgrind's devices serial (struct clt_cl_device), and bridge() waits on the host for
 * another context's event instead of completing an Oclgrind user event from a foreign thread.
 *
 *   cc -std=c11 -Wall -Wextra -o foreign_callback tests/oclgrind/foreign_callback.c -lOpenCL
 *   OCL_ICD_VENDORS=<dir with oclgrind's and pocl's .icd> POCL_DEVICES=pthread \
 *     ./foreign_callback [rounds]   (500000 by default: 2 of 3 runs crashed here)
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1024 };

static void CL_CALLBACK complete_user(cl_event ev, cl_int status, void *data) {
  (void)ev;
  clSetUserEventStatus((cl_event)data, status < 0 ? status : CL_COMPLETE);
  clReleaseEvent((cl_event)data);
}

typedef struct side {
  cl_context ctx;
  cl_command_queue q;
  cl_mem buf;
} side;

static int open_side(cl_platform_id p, side *s) {
  cl_device_id d;
  cl_int err = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL);
  if (err == CL_SUCCESS)
    s->ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
  if (err == CL_SUCCESS)
    s->q = clCreateCommandQueue(s->ctx, d, 0, &err);
  if (err == CL_SUCCESS)
    s->buf = clCreateBuffer(s->ctx, CL_MEM_READ_WRITE, N * sizeof(int), NULL, &err);
  return err;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 500000; /* about 10 s */
  cl_platform_id plats[8];
  cl_uint np = 0;
  if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS || np < 2) {
    printf("skip: needs two OpenCL platforms (Oclgrind and PoCL), found %u\n", np);
    return 77;
  }
  int og = -1, other = -1;
  for (cl_uint i = 0; i < np && i < 8; i++) {
    char name[128] = "";
    clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
    if (strstr(name, "Oclgrind") && og < 0)
      og = (int)i;
    else if (other < 0)
      other = (int)i;
  }
  if (og < 0) /* two conformant platforms: the first waits, the second completes */
    og = other == 0 ? 1 : 0;
  side w, f; /* the waiting side (Oclgrind), the foreign side (PoCL) */
  if (open_side(plats[og], &w) != CL_SUCCESS || open_side(plats[other], &f) != CL_SUCCESS) {
    printf("skip: cannot open a device on both platforms\n");
    return 77;
  }
  int *host = malloc(N * sizeof(int)), *back = malloc(N * sizeof(int));
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < N; i++)
      host[i] = r + i;
    cl_event e, u_done, wrote;
    cl_int err = clEnqueueWriteBuffer(f.q, f.buf, CL_FALSE, 0, N * sizeof(int), host, 0, NULL, &e);
    cl_event u = clCreateUserEvent(w.ctx, &err);
    clRetainEvent(u); /* the callback's reference */
    clSetEventCallback(e, CL_COMPLETE, complete_user, u);
    clFlush(f.q);
    u_done = u;
    err = clEnqueueWriteBuffer(w.q, w.buf, CL_FALSE, 0, N * sizeof(int), host, 1, &u_done,
                               &wrote);
    clWaitForEvents(1, &wrote);
    clEnqueueReadBuffer(w.q, w.buf, CL_TRUE, 0, N * sizeof(int), back, 0, NULL, NULL);
    if (back[N - 1] != r + N - 1) {
      printf("wrong: round %d read %d, expected %d\n", r, back[N - 1], r + N - 1);
      return 1;
    }
    clWaitForEvents(1, &e);
    clReleaseEvent(e);
    clReleaseEvent(u);
    clReleaseEvent(wrote);
  }
  printf("ok: %d rounds of a user event completed from the other runtime's thread\n", rounds);
  free(host);
  free(back);
  return 0;
}
