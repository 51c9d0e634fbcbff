#pragma once
// Run-time state shared by the core's translation units.

#include <apgas/place.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace apgas::detail {

/// The logical place tree: hosts 0..num_hosts-1, then every host's accelerators.
struct place_tree {
  int num_hosts = 1;
  int here_host = 0;                          // the host place of this process
  int gpus_before_here = 0;                   // GPU places of the hosts before this one
  std::vector<place> all;                     // every place, by id
  std::vector<std::vector<place>> children;   // per host: its accelerator places
  std::vector<int> parent_of;                 // per accelerator (id - num_hosts): its host
  std::vector<std::string> description;       // per place: "host <name>", or the GPU's name and ordinal
  static place_tree single_host();
};

const place_tree& tree() noexcept;
void set_tree(place_tree t);

/// At the end of a run, once every activity has ended and the workers are gone: destroy the place-local instances
/// this place still holds (never freed), the last made first (place_local.cpp).
void place_local_end_of_run() noexcept;

/// Ends this process at once (std::_Exit: no destructors, no exit handlers) with `code`, after removing what its
/// transport would leave behind in the operating system (transport::before_abrupt_exit: libfabric shm regions), its
/// own and dead_peer's (a place found dead, >= 0). Every place that stops on a fatal error ends through here.
[[noreturn]] void end_process(int code, int dead_peer = -1) noexcept;

/// The number of the run in progress, or of the last one (this process's runs counted from 1; 0 before the first).
std::uint32_t run_number() noexcept;

}  // namespace apgas::detail
