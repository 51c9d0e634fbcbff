// The node-local GPU share (cuda_place/src/gpu_share.cpp): which GPUs a process takes by default in a multi-process
// job, as plain arithmetic, and where its local rank comes from. The same rule with a fake driver and real launcher
// variables: tests/cuda_fake (apgas.cuda_fake.node_share, apgas.cuda_fake.backend_dist_share_np2).
#include "gpu_share.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using apgas::detail::gpu::node_local_rank;
using apgas::detail::gpu::node_share;
using apgas::detail::gpu::slurm_tasks_on_node;

using list = std::vector<int>;

TEST(GpuShare, AProcessAloneTakesEveryGpu) {
  EXPECT_EQ(node_share(4, 0, 1), (list{0, 1, 2, 3}));
  EXPECT_EQ(node_share(1, 0, 1), (list{0}));
  EXPECT_EQ(node_share(0, 0, 1), list{});
  EXPECT_EQ(node_share(0, 1, 2), list{});
}

TEST(GpuShare, RanksGetContiguousBlocks) {
  EXPECT_EQ(node_share(8, 0, 2), (list{0, 1, 2, 3}));
  EXPECT_EQ(node_share(8, 1, 2), (list{4, 5, 6, 7}));
  EXPECT_EQ(node_share(8, 5, 8), (list{5}));
  EXPECT_EQ(node_share(2, 1, 2), (list{1}));
  // 8 GPUs, 3 ranks: 3, 3, 2
  EXPECT_EQ(node_share(8, 0, 3), (list{0, 1, 2}));
  EXPECT_EQ(node_share(8, 1, 3), (list{3, 4, 5}));
  EXPECT_EQ(node_share(8, 2, 3), (list{6, 7}));
}

TEST(GpuShare, EveryGpuGoesToExactlyOneRankWhenThereAreEnough) {
  for (int gpus = 1; gpus <= 16; ++gpus) {
    for (int ranks = 1; ranks <= gpus; ++ranks) {
      std::multiset<int> seen;
      for (int r = 0; r < ranks; ++r) {
        const list l = node_share(gpus, r, ranks);
        EXPECT_GE(l.size(), static_cast<std::size_t>(gpus / ranks)) << gpus << " GPUs, rank " << r << " of " << ranks;
        EXPECT_LE(l.size(), static_cast<std::size_t>(gpus / ranks + 1));
        seen.insert(l.begin(), l.end());
      }
      ASSERT_EQ(seen.size(), static_cast<std::size_t>(gpus));
      for (int g = 0; g < gpus; ++g) EXPECT_EQ(seen.count(g), 1u) << gpus << " GPUs, " << ranks << " ranks";
    }
  }
}

TEST(GpuShare, MoreRanksThanGpusShareThemRoundRobin) {
  EXPECT_EQ(node_share(2, 0, 4), (list{0}));
  EXPECT_EQ(node_share(2, 1, 4), (list{1}));
  EXPECT_EQ(node_share(2, 2, 4), (list{0}));
  EXPECT_EQ(node_share(2, 3, 4), (list{1}));
  EXPECT_EQ(node_share(1, 6, 7), (list{0}));
}

std::map<std::string, std::string> g_env;
const char* fake_env(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

TEST(GpuShare, TheLocalRankComesFromTheLauncher) {
  g_env = {};
  auto r = node_local_rank(&fake_env);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.size, 1);
  EXPECT_TRUE(r.source.empty());

  g_env = {{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
  r = node_local_rank(&fake_env);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.size, 4);
  EXPECT_EQ(r.source, "OMPI_COMM_WORLD_LOCAL_RANK/OMPI_COMM_WORLD_LOCAL_SIZE");

  g_env = {{"MV2_COMM_WORLD_LOCAL_RANK", "1"}, {"MV2_COMM_WORLD_LOCAL_SIZE", "2"}};
  EXPECT_EQ(node_local_rank(&fake_env).rank, 1);
  g_env = {{"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "8"}};  // MPICH's Hydra
  r = node_local_rank(&fake_env);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.size, 8);
  g_env = {{"PMI_LOCAL_RANK", "0"}, {"PMI_LOCAL_SIZE", "2"}};  // Cray PMI
  EXPECT_EQ(node_local_rank(&fake_env).size, 2);

  // Slurm: the node's task count from the step's compressed list.
  g_env = {{"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "3"}, {"SLURM_STEP_TASKS_PER_NODE", "4(x3),2"}};
  r = node_local_rank(&fake_env);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.size, 2);
  EXPECT_EQ(r.source, "SLURM_LOCALID/SLURM_STEP_TASKS_PER_NODE");
  g_env = {{"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"}, {"SLURM_TASKS_PER_NODE", "4(x3),2"}};
  EXPECT_EQ(node_local_rank(&fake_env).size, 4);

  // Incomplete or inconsistent pairs are ignored; the next launcher's pair counts.
  g_env = {{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "3"}};
  EXPECT_EQ(node_local_rank(&fake_env).size, 3);
  g_env = {{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  EXPECT_EQ(node_local_rank(&fake_env).size, 1);
  g_env = {{"OMPI_COMM_WORLD_LOCAL_RANK", "x"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  EXPECT_EQ(node_local_rank(&fake_env).size, 1);
  g_env = {{"SLURM_LOCALID", "2"}, {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "2"}};
  EXPECT_EQ(node_local_rank(&fake_env).size, 1);
  g_env = {};
}

TEST(GpuShare, SlurmsCompressedTaskLists) {
  EXPECT_EQ(slurm_tasks_on_node("2", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2", 1), -1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("1,3,5(x2)", 1), 3);
  EXPECT_EQ(slurm_tasks_on_node("1,3,5(x2)", 3), 5);
  for (const char* bad : {"", "x", "2(x)", "2(3)", "2(x3", "0", "2,,1", "2(x0)"}) {
    EXPECT_EQ(slurm_tasks_on_node(bad, 0), -1) << bad;
  }
}

}  // namespace
