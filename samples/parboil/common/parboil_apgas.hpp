#pragma once
// What the apgas versions of the Parboil programs share besides parboil.hpp: where a host computes (its GPU places,
// or its CPU place), how work is cut into parts, and the run's main function.
#include "parboil.hpp"

#include <apgas/apgas.hpp>

#include <string>
#include <utility>
#include <vector>

namespace parboil {

/// The places that compute at the calling host: its GPU places, or the host place itself when it has none or when
/// `cpu` is set (--cpu).
inline std::vector<apgas::place> compute_places(bool cpu) {
  const apgas::place h = apgas::here().parent();
  const auto gpus = h.children();
  if (cpu || gpus.empty()) return {h};
  return std::vector<apgas::place>(gpus.begin(), gpus.end());
}

/// Every compute place of the run, hosts in order: each host's GPU places, or the host place itself where it has
/// none or where `cpu` is set (compute_places() of every host, seen from any place).
inline std::vector<apgas::place> all_compute_places(bool cpu) {
  std::vector<apgas::place> all;
  for (const apgas::place h : apgas::places()) {
    const auto gpus = h.children();
    if (cpu || gpus.empty()) {
      all.push_back(h);
    } else {
      all.insert(all.end(), gpus.begin(), gpus.end());
    }
  }
  return all;
}

/// Part i of n items cut into `parts` contiguous parts whose sizes are multiples of `grain` (the last one takes the
/// rest): [first, second).
inline std::pair<long long, long long> share(long long n, int i, int parts, long long grain = 1) {
  const long long units = (n + grain - 1) / grain;
  const long long lo = std::min(n, units * i / parts * grain);
  const long long hi = i + 1 == parts ? n : std::min(n, units * (i + 1) / parts * grain);
  return {lo, hi};
}

/// "hosts=H gpus=G" for the report: G counts the GPU places that computed (0 on CPU places).
inline std::string places_field(bool cpu) {
  int gpus = 0;
  if (!cpu) {
    for (apgas::place h : apgas::places()) gpus += static_cast<int>(h.children().size());
  }
  return "hosts=" + std::to_string(apgas::num_hosts()) + " gpus=" + std::to_string(gpus);
}

/// CUDA's runtime started at every compute place of the run (an empty kernel each), as the native versions start it
/// with cudaSetDevice before their timers: apgas resolves kernels through the CUDA runtime at their first launch.
inline void start_compute_places(bool cpu) {
  apgas::finish([&] {
    for (const apgas::place p : all_compute_places(cpu)) {
      apgas::async_at(p.parent(), [p] {
        apgas::at(p, apgas::cuda_kernel(apgas::grid{1, 1}, [] APGAS_KERNEL(apgas::thread) {}));
      });
    }
  });
}

/// The whole main function of an apgas Parboil program: takes `--stats` (apgas::take_stats_option), parses the
/// options (exit 2 with `usage` on a bad one), starts the compute places (start_compute_places) and runs body(options)
/// as the main activity at place 0; body returns the exit code (report()'s). Input errors thrown inside give exit
/// code 2 with the message, at every place.
template <class Body>
int main(int argc, char** argv, const char* prog, const char* usage,
         std::initializer_list<std::string_view> sizes, Body body) {
  apgas::take_stats_option(argc, argv);  // --stats: the runtime's statistics at the end (APGAS_STATS=1)
  options o;
  if (const int rc = guarded(prog, usage, [&] {
        o = parse(argc, argv, sizes);
        return 0;
      });
      rc != 0) {
    return rc;
  }
  int code = 0;
  const int rc = apgas::run(argc, argv, [&] {
    code = guarded(prog, usage, [&] {
      start_compute_places(o.cpu);
      return body(o);
    });
  });
  return rc != 0 ? rc : code;
}

}  // namespace parboil
