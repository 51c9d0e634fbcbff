#pragma once
// What rpes needs beside common/parboil_apgas.hpp (a candidate for it): every compute place of a run.
#include "parboil_apgas.hpp"

#include <vector>

namespace parboil {

/// Every compute place of the run, host by host: each host's compute_places(cpu) (its GPU places, or the host).
inline std::vector<apgas::place> all_compute_places(bool cpu) {
  std::vector<apgas::place> all;
  for (const apgas::place h : apgas::places()) {
    const auto mine = apgas::at(
        h, [](bool c) { return compute_places(c); }, cpu);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  return all;
}

}  // namespace parboil
