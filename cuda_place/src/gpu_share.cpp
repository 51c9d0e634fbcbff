#include "gpu_share.hpp"

#include <cstdlib>
#include <string>
#include <vector>

namespace apgas::detail::gpu {
namespace {

/// A whole number >= 0, or -1.
int number(const char* s) {
  if (s == nullptr || *s == '\0') return -1;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < 0 || v > 1'000'000) return -1;
  return static_cast<int>(v);
}

}  // namespace

int slurm_tasks_on_node(const std::string& list, int node) {
  // Items separated by commas: "N" (one node) or "N(xR)" (R nodes with N tasks each). The whole list must be well
  // formed.
  int first = 0;
  int found = -1;
  std::size_t at = 0;
  while (at <= list.size()) {
    std::size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(at, end - at);
    const std::size_t paren = item.find('(');
    const int tasks = number(item.substr(0, paren).c_str());
    int repeat = 1;
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') return -1;
      repeat = number(item.substr(paren + 2, item.size() - paren - 3).c_str());
    }
    if (tasks < 1 || repeat < 1) return -1;
    if (found < 0 && node >= first && node < first + repeat) found = tasks;
    first += repeat;
    at = end + 1;
  }
  return found;
}

node_rank node_local_rank(const char* (*get)(const char*)) {
  struct pair {
    const char* rank;
    const char* size;
  };
  static constexpr pair pairs[] = {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                                   {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"},
                                   {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
                                   {"PMI_LOCAL_RANK", "PMI_LOCAL_SIZE"}};
  for (const pair& p : pairs) {
    const int rank = number(get(p.rank));
    const int size = number(get(p.size));
    if (rank >= 0 && size >= 1 && rank < size) return {rank, size, std::string(p.rank) + "/" + p.size};
  }
  const int rank = number(get("SLURM_LOCALID"));
  const int node = number(get("SLURM_NODEID"));
  for (const char* list : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    const char* v = get(list);
    if (rank < 0 || node < 0 || v == nullptr) continue;
    const int size = slurm_tasks_on_node(v, node);
    if (size >= 1 && rank < size) return {rank, size, std::string("SLURM_LOCALID/") + list};
  }
  return {};
}

std::vector<int> node_share(int gpus, int rank, int size) {
  std::vector<int> out;
  if (gpus <= 0) return out;
  if (size <= 1 || rank < 0 || rank >= size) {
    for (int i = 0; i < gpus; ++i) out.push_back(i);
    return out;
  }
  if (size > gpus) return {rank % gpus};
  const int per = gpus / size, extra = gpus % size;
  const int first = rank * per + (rank < extra ? rank : extra);
  const int count = per + (rank < extra ? 1 : 0);
  for (int i = first; i < first + count; ++i) out.push_back(i);
  return out;
}

}  // namespace apgas::detail::gpu
