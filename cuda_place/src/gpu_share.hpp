#pragma once
// Which GPUs of its host a process uses by default (APGAS_GPUS unset, i.e. "auto"): its node-local rank's share.
// A multi-process job usually starts one process per GPU or a few per node; if every process took every GPU of its
// node, each would hold a context on every GPU (hundreds of MB each), pin DMA slices for all of them, and on GPUs in
// EXCLUSIVE_PROCESS compute mode every process but the first would fail at start-up. Plain C++ (no CUDA): unit-tested
// as arithmetic (tests/cuda/test_gpu_share.cpp).

#include <string>
#include <vector>

namespace apgas::detail::gpu {

/// This process's rank among the processes of its job on its node, and their number.
struct node_rank {
  int rank = 0;
  int size = 1;
  std::string source;  ///< the variables it was read from ("OMPI_COMM_WORLD_LOCAL_RANK/..._SIZE"); empty: alone
};

/// From the launcher's variables: Open MPI (OMPI_COMM_WORLD_LOCAL_RANK/_SIZE), MVAPICH (MV2_COMM_WORLD_LOCAL_RANK/
/// _SIZE), MPICH's Hydra (MPI_LOCALRANKID/MPI_LOCALNRANKS), Cray PMI (PMI_LOCAL_RANK/PMI_LOCAL_SIZE), Slurm's srun
/// (SLURM_LOCALID, and the node's task count from SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE at SLURM_NODEID),
/// in that order; the first complete and consistent pair wins. None: rank 0 of 1. `get` is std::getenv in the runtime.
node_rank node_local_rank(const char* (*get)(const char*));

/// The number of tasks on node `node` from Slurm's compressed list ("2(x3),1": nodes 0-2 have 2, node 3 has 1); -1
/// when the list is malformed or shorter.
int slurm_tasks_on_node(const std::string& list, int node);

/// The GPUs (ordinals, ascending) of local rank `rank` of `size` on a node with `gpus` GPUs: a contiguous block of
/// gpus/size (the first gpus%size ranks get one more) when there are at least as many GPUs as ranks; one GPU,
/// rank % gpus, when there are fewer (ranks then share GPUs). All of them for a process alone; none when gpus is 0.
std::vector<int> node_share(int gpus, int rank, int size);

}  // namespace apgas::detail::gpu
