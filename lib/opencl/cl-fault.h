/* SPDX-License-Identifier: MIT */
/* cl-fault.h - injected faults of OpenCL calls (lib/fault.h has the switch and the kinds): the
 * wrappers of the OpenCL entry points that lib/opencl/ calls (libclt_mpi's staging among them:
 * lib/opencl/staging.c), and the macros that redirect those calls to them in a build configured
 * with --enable-fault-injection; nothing otherwise. Included by lib/opencl/cl-internal.h. */
#ifndef CLT_CL_FAULT_H
#define CLT_CL_FAULT_H

#include "fault.h"

#ifdef CLT_FAULT_INJECTION

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(default)
#endif

/* The wrappers, with the signatures of the functions they stand for. */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

cl_context clt__fault_clCreateContext(
    const cl_context_properties *props, cl_uint ndev, const cl_device_id *devs,
    void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *), void *user, cl_int *err);
cl_command_queue clt__fault_clCreateCommandQueue(cl_context ctx, cl_device_id dev,
                                                 cl_command_queue_properties props, cl_int *err);
cl_mem clt__fault_clCreateBuffer(cl_context ctx, cl_mem_flags flags, size_t size, void *host,
                                 cl_int *err);
cl_event clt__fault_clCreateUserEvent(cl_context ctx, cl_int *err);
cl_int clt__fault_clEnqueueReadBuffer(cl_command_queue q, cl_mem buf, cl_bool blocking,
                                      size_t offset, size_t size, void *ptr, cl_uint nwait,
                                      const cl_event *wait, cl_event *ev);
cl_int clt__fault_clEnqueueWriteBuffer(cl_command_queue q, cl_mem buf, cl_bool blocking,
                                       size_t offset, size_t size, const void *ptr, cl_uint nwait,
                                       const cl_event *wait, cl_event *ev);
cl_int clt__fault_clEnqueueCopyBuffer(cl_command_queue q, cl_mem src, cl_mem dst, size_t src_off,
                                      size_t dst_off, size_t size, cl_uint nwait,
                                      const cl_event *wait, cl_event *ev);
cl_int clt__fault_clEnqueueFillBuffer(cl_command_queue q, cl_mem buf, const void *pattern,
                                      size_t pattern_size, size_t offset, size_t size,
                                      cl_uint nwait, const cl_event *wait, cl_event *ev);
void *clt__fault_clEnqueueMapBuffer(cl_command_queue q, cl_mem buf, cl_bool blocking,
                                    cl_map_flags flags, size_t offset, size_t size, cl_uint nwait,
                                    const cl_event *wait, cl_event *ev, cl_int *err);
cl_int clt__fault_clEnqueueUnmapMemObject(cl_command_queue q, cl_mem mem, void *ptr, cl_uint nwait,
                                          const cl_event *wait, cl_event *ev);
cl_int clt__fault_clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim,
                                         const size_t *offset, const size_t *global,
                                         const size_t *local, cl_uint nwait, const cl_event *wait,
                                         cl_event *ev);
cl_int clt__fault_clEnqueueNativeKernel(cl_command_queue q, void(CL_CALLBACK *fn)(void *),
                                        void *args, size_t cb_args, cl_uint nmem,
                                        const cl_mem *mems, const void **locs, cl_uint nwait,
                                        const cl_event *wait, cl_event *ev);
cl_int clt__fault_clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint nwait,
                                              const cl_event *wait, cl_event *ev);
cl_int clt__fault_clEnqueueBarrierWithWaitList(cl_command_queue q, cl_uint nwait,
                                               const cl_event *wait, cl_event *ev);
cl_program clt__fault_clCreateProgramWithSource(cl_context ctx, cl_uint count, const char **strings,
                                                const size_t *lengths, cl_int *err);
cl_program clt__fault_clCreateProgramWithBinary(cl_context ctx, cl_uint ndev,
                                                const cl_device_id *devs, const size_t *lengths,
                                                const unsigned char **binaries, cl_int *status,
                                                cl_int *err);
cl_int clt__fault_clBuildProgram(cl_program p, cl_uint ndev, const cl_device_id *devs,
                                 const char *options, void(CL_CALLBACK *notify)(cl_program, void *),
                                 void *user);
cl_kernel clt__fault_clCreateKernel(cl_program p, const char *name, cl_int *err);
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#ifndef CLT_FAULT_NO_REDIRECT
#define clCreateContext clt__fault_clCreateContext
#define clCreateCommandQueue clt__fault_clCreateCommandQueue
#define clCreateBuffer clt__fault_clCreateBuffer
#define clCreateUserEvent clt__fault_clCreateUserEvent
#define clEnqueueReadBuffer clt__fault_clEnqueueReadBuffer
#define clEnqueueWriteBuffer clt__fault_clEnqueueWriteBuffer
#define clEnqueueCopyBuffer clt__fault_clEnqueueCopyBuffer
#define clEnqueueFillBuffer clt__fault_clEnqueueFillBuffer
#define clEnqueueMapBuffer clt__fault_clEnqueueMapBuffer
#define clEnqueueUnmapMemObject clt__fault_clEnqueueUnmapMemObject
#define clEnqueueNDRangeKernel clt__fault_clEnqueueNDRangeKernel
#define clEnqueueNativeKernel clt__fault_clEnqueueNativeKernel
#define clEnqueueMarkerWithWaitList clt__fault_clEnqueueMarkerWithWaitList
#define clEnqueueBarrierWithWaitList clt__fault_clEnqueueBarrierWithWaitList
#define clCreateProgramWithSource clt__fault_clCreateProgramWithSource
#define clCreateProgramWithBinary clt__fault_clCreateProgramWithBinary
#define clBuildProgram clt__fault_clBuildProgram
#define clCreateKernel clt__fault_clCreateKernel
#endif /* CLT_FAULT_NO_REDIRECT */

#endif /* CLT_FAULT_INJECTION */
#endif /* CLT_CL_FAULT_H */
