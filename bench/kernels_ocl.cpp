// The OpenCL anchors of apgas_bench_kernels (built where the OpenCL headers and loader are found; run where an OpenCL
// CPU device is installed, e.g. Debian's pocl-opencl-icd): the CUDA-shaped kernels — work-groups of the CUDA blocks'
// shape, local-memory tiles, barriers — as OpenCL C, compiled and run by the platform (PoCL turns each barrier into
// loops over the work-items). Program builds are not timed; the kernels' runs, waited for with clFinish, are.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "kernels_common.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace kbench {
namespace {

const char* const source = R"CL(
#define TILE 16
__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void sgemm(__global const float* a, __global const float* b, __global float* c, int n) {
  __local float as[TILE * TILE], bs[TILE * TILE];
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int row = get_group_id(1) * TILE + ty, col = get_group_id(0) * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    as[ty * TILE + tx] = a[row * n + k0 + tx];
    bs[ty * TILE + tx] = b[(k0 + ty) * n + col];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE; ++k) acc += as[ty * TILE + k] * bs[k * TILE + tx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  c[row * n + col] = acc;
}

#define TX 32
#define TY 8
#define SW (TX + 2)
__kernel __attribute__((reqd_work_group_size(TX, TY, 1)))
void stencil(__global const float* in, __global float* out, int nx, int ny, int nz, float c0, float c1) {
  __local float sh[(TX + 2) * (TY + 2)];
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int i = get_group_id(0) * TX + tx, j = get_group_id(1) * TY + ty;
  const int inside = i < nx && j < ny;
  const int interior = i > 0 && i < nx - 1 && j > 0 && j < ny - 1;
  #define AT(x, y, z) (((long)(z) * ny + (y)) * nx + (x))
  float bottom = inside ? in[AT(i, j, 0)] : 0.0f;
  float current = inside ? in[AT(i, j, 1)] : 0.0f;
  for (int k = 1; k < nz - 1; ++k) {
    const float top = inside ? in[AT(i, j, k + 1)] : 0.0f;
    sh[(ty + 1) * SW + tx + 1] = current;
    if (tx == 0 && i > 0 && j < ny) sh[(ty + 1) * SW] = in[AT(i - 1, j, k)];
    if (tx == TX - 1 && i + 1 < nx && j < ny) sh[(ty + 1) * SW + tx + 2] = in[AT(i + 1, j, k)];
    if (ty == 0 && j > 0 && i < nx) sh[tx + 1] = in[AT(i, j - 1, k)];
    if (ty == TY - 1 && j + 1 < ny && i < nx) sh[(ty + 2) * SW + tx + 1] = in[AT(i, j + 1, k)];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (interior) {
      out[AT(i, j, k)] = (sh[(ty + 1) * SW + tx] + sh[(ty + 1) * SW + tx + 2] + sh[ty * SW + tx + 1] +
                          sh[(ty + 2) * SW + tx + 1] + bottom + top) * c1 - current * c0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    bottom = current;
    current = top;
  }
}
)CL";

struct cl_state {
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  cl_program program = nullptr;
  std::string device;
  std::string why_not;
};

cl_state& state() {
  static cl_state s = [] {
    cl_state st;
    cl_platform_id platforms[8];
    cl_uint np = 0;
    if (clGetPlatformIDs(8, platforms, &np) != CL_SUCCESS || np == 0) {
      st.why_not = "no OpenCL platform (install pocl-opencl-icd for PoCL)";
      return st;
    }
    cl_device_id dev = nullptr;
    for (cl_uint p = 0; p < np && dev == nullptr; ++p) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_CPU, 1, &dev, &nd) != CL_SUCCESS || nd == 0) dev = nullptr;
    }
    if (dev == nullptr) {
      st.why_not = "no OpenCL CPU device";
      return st;
    }
    char name[256] = {};
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
    st.device = name;
    cl_int err = CL_SUCCESS;
    st.ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) {
      st.why_not = "clCreateContext failed: " + std::to_string(err);
      return st;
    }
    st.queue = clCreateCommandQueue(st.ctx, dev, 0, &err);
    const char* src = source;
    st.program = clCreateProgramWithSource(st.ctx, 1, &src, nullptr, &err);
    if (err != CL_SUCCESS || clBuildProgram(st.program, 1, &dev, "-cl-std=CL1.2", nullptr, nullptr) != CL_SUCCESS) {
      char log[4096] = {};
      clGetProgramBuildInfo(st.program, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, nullptr);
      st.why_not = std::string("the OpenCL program did not build: ") + log;
      st.ctx = nullptr;
    }
    return st;
  }();
  return s;
}

cl_mem buffer(std::size_t bytes, void* host) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(state().ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, host, &err);
  return err == CL_SUCCESS ? m : nullptr;
}

double finish_seconds(std::chrono::steady_clock::time_point t0) {
  clFinish(state().queue);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string ocl_device(std::string& why_not) {
  why_not = state().why_not;
  return state().ctx != nullptr ? state().device : std::string();
}

double sgemm_ocl(const float* a, const float* b, float* c, int n) {
  const std::size_t bytes = static_cast<std::size_t>(n) * n * sizeof(float);
  cl_mem ma = buffer(bytes, const_cast<float*>(a)), mb = buffer(bytes, const_cast<float*>(b)), mc = buffer(bytes, c);
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(state().program, "sgemm", &err);
  clSetKernelArg(k, 0, sizeof ma, &ma);
  clSetKernelArg(k, 1, sizeof mb, &mb);
  clSetKernelArg(k, 2, sizeof mc, &mc);
  clSetKernelArg(k, 3, sizeof n, &n);
  const std::size_t global[2] = {static_cast<std::size_t>(n), static_cast<std::size_t>(n)};
  const std::size_t local[2] = {tile, tile};
  const auto t0 = std::chrono::steady_clock::now();
  clEnqueueNDRangeKernel(state().queue, k, 2, nullptr, global, local, 0, nullptr, nullptr);
  const double s = finish_seconds(t0);
  void* p = clEnqueueMapBuffer(state().queue, mc, CL_TRUE, CL_MAP_READ, 0, bytes, 0, nullptr, nullptr, &err);
  clEnqueueUnmapMemObject(state().queue, mc, p, 0, nullptr, nullptr);
  clFinish(state().queue);
  clReleaseKernel(k);
  clReleaseMemObject(ma);
  clReleaseMemObject(mb);
  clReleaseMemObject(mc);
  return s;
}

double stencil_ocl(float* a0, float* a1, int nx, int ny, int nz, int iterations) {
  const std::size_t bytes = static_cast<std::size_t>(nx) * ny * nz * sizeof(float);
  cl_mem m[2] = {buffer(bytes, a0), buffer(bytes, a1)};
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(state().program, "stencil", &err);
  const float c0 = stencil_c0, c1 = stencil_c1;
  clSetKernelArg(k, 2, sizeof nx, &nx);
  clSetKernelArg(k, 3, sizeof ny, &ny);
  clSetKernelArg(k, 4, sizeof nz, &nz);
  clSetKernelArg(k, 5, sizeof c0, &c0);
  clSetKernelArg(k, 6, sizeof c1, &c1);
  const std::size_t global[2] = {static_cast<std::size_t>((nx + stencil_tx - 1) / stencil_tx * stencil_tx),
                                 static_cast<std::size_t>((ny + stencil_ty - 1) / stencil_ty * stencil_ty)};
  const std::size_t local[2] = {stencil_tx, stencil_ty};
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < iterations; ++it) {  // an in-order queue: each launch after the one before, one wait at the end
    clSetKernelArg(k, 0, sizeof(cl_mem), &m[it % 2]);
    clSetKernelArg(k, 1, sizeof(cl_mem), &m[(it + 1) % 2]);
    clEnqueueNDRangeKernel(state().queue, k, 2, nullptr, global, local, 0, nullptr, nullptr);
  }
  const double s = finish_seconds(t0);
  for (cl_mem x : m) {
    void* p = clEnqueueMapBuffer(state().queue, x, CL_TRUE, CL_MAP_READ, 0, bytes, 0, nullptr, nullptr, &err);
    clEnqueueUnmapMemObject(state().queue, x, p, 0, nullptr, nullptr);
  }
  clFinish(state().queue);
  clReleaseKernel(k);
  clReleaseMemObject(m[0]);
  clReleaseMemObject(m[1]);
  return s;
}

}  // namespace kbench
