#pragma once
// The trace of the fake CUDA driver (tests/cuda_fake/fake_cuda.cpp): what each stream of a device was given, in
// stream order, while tracing is on (apgas_fake_cuda_trace). Shared by the fake and the tests (fake_control.hpp);
// plain C so that it crosses the dlopen boundary as it is.

#ifdef __cplusplus
extern "C" {
#endif

/// One stream operation, recorded when it was enqueued (the stream's own order).
struct apgas_fake_cuda_trace_entry {
  unsigned long long stream;   ///< the stream's handle
  int kind;                    ///< 'h' host->device, 'd' device->host, 'D' device->device, 'p' peer, 'm' memset,
                               ///< 'r' event record, 'f' stream-ordered free, 'k' kernel launch
  int host;                    ///< 'h'/'d': 1 when the host side is page-locked, 0 when it is pageable
  unsigned long long address;  ///< destination (copies, memset, free); the CUfunction (kernel)
  unsigned long long bytes;    ///< bytes copied or set
  unsigned long long tag;      ///< 'h': the first 8 bytes of the source; 'k': the first 8 bytes of the first
                               ///< parameter (the body); 0 otherwise
  unsigned long long seen;     ///< 'k': the 8 bytes at the watched address (apgas_fake_cuda_watch) when the stream
                               ///< executed the kernel, i.e. what the kernel would have read there
};

#ifdef __cplusplus
}
#endif
