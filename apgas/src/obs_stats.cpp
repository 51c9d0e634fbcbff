// The run statistics (APGAS_STATS): one table per place, printed by place 0 at the end of the run from the records
// every place sent it (obs.cpp). The layout is fixed — one counter per line, a name and its value — so that scripts
// and tests can read it:
//   apgas stats: place 0: host vm (2 workers, 0.532 s)
//     activities run                 1346270
//     ...
//     peer   messages sent   bytes sent   messages received   bytes received
//        1              10         1234                  10              800
#include "obs.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace apgas::detail::obs {

namespace {

void line(std::string& s, const char* name, std::uint64_t v) {
  char b[128];
  std::snprintf(b, sizeof b, "  %-24s %14llu\n", name, static_cast<unsigned long long>(v));
  s += b;
}

std::string description(const std::vector<place_info>& places, int p) {
  if (p < 0 || p >= static_cast<int>(places.size())) return "?";
  const place_info& i = places[static_cast<std::size_t>(p)];
  if (i.parent >= 0) return "GPU place of place " + std::to_string(i.parent) + ": " + i.description;
  return i.description;
}

}  // namespace

std::string stats_table(const std::vector<place_record>& records, const std::vector<place_info>& places) {
  std::string s;
  char b[256];
  for (const place_record& r : records) {
    const double wall = static_cast<double>(r.t_stop - r.t_start) / 1e9;
    // The headers are built as strings: a place's description has no length limit (a driver's path, an error).
    std::snprintf(b, sizeof b, "%.3f", wall);
    s += "apgas stats: place " + std::to_string(r.place) + ": " + description(places, r.place) + " (" +
         std::to_string(r.workers) + (r.workers == 1 ? " worker, " : " workers, ") + b + " s)\n";
    line(s, "activities run", r.host.run);
    line(s, "activities stolen", r.host.stolen);
    line(s, "parks", r.host.parks);
    line(s, "finish waits", r.host.finish_waits);
    const double idle = static_cast<double>(r.host.idle_ns) / 1e9;
    const double capacity = wall * r.workers;
    std::snprintf(b, sizeof b, "  %-24s %14.6f s (%.1f %% of %d worker%s x %.3f s)\n", "time idle", idle,
                  capacity > 0 ? 100.0 * idle / capacity : 0.0, r.workers, r.workers == 1 ? "" : "s", wall);
    s += b;
    bool any_peer = false;
    for (std::size_t p = 0; p < r.peers.size(); ++p) {
      const peer_stats& x = r.peers[p];
      if (x.msgs_sent == 0 && x.bytes_sent == 0 && x.msgs_recv == 0 && x.bytes_recv == 0 &&
          static_cast<int>(p) == r.place) {
        continue;
      }
      if (!any_peer) {
        s += "  peer   messages sent     bytes sent   messages received   bytes received\n";
        any_peer = true;
      }
      std::snprintf(b, sizeof b, "  %4zu  %14llu %14llu %19llu %16llu\n", p,
                    static_cast<unsigned long long>(x.msgs_sent), static_cast<unsigned long long>(x.bytes_sent),
                    static_cast<unsigned long long>(x.msgs_recv), static_cast<unsigned long long>(x.bytes_recv));
      s += b;
    }
    for (int q = 0; q < r.gpus; ++q) {
      const gpu_stats& g = r.gpu[static_cast<std::size_t>(q)];
      const int place = r.first_gpu + q;
      s += "apgas stats: place " + std::to_string(place) + ": " + description(places, place) + "\n";
      line(s, "kernels", g.kernels);
      static const char* const dir[3] = {"copies host->GPU", "copies GPU->host", "copies GPU->GPU"};
      for (int d = 0; d < 3; ++d) {
        std::snprintf(b, sizeof b, "  %-24s %14llu (%llu bytes)\n", dir[d], static_cast<unsigned long long>(g.copies[d]),
                      static_cast<unsigned long long>(g.bytes[d]));
        s += b;
      }
    }
  }
  return s;
}

}  // namespace apgas::detail::obs
