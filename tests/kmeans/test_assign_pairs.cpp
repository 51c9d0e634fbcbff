// The k-means GPU kernels' inner loop does two points at a time (samples/kmeans/kmeans_common.hpp,
// nearest_cluster_pair) so that each shared-memory load serves two points. It must give exactly what the one-point
// loop gives (the sample checks GPU places against CPU places bit for bit, and the native CUDA baseline against both):
// here both run on the host, compiled like the sample (-ffp-contract=off), on points and clusters made to tie often.
#include "kmeans_common.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

template <int D>
void check_pairs(std::int64_t n, int k, std::uint64_t seed) {
  std::vector<float> x(static_cast<std::size_t>(n) * D), c(static_cast<std::size_t>(k) * D);
  kmeans::generate_points(seed, D, 0, n, x.data(), n);
  std::vector<float> first(static_cast<std::size_t>(k) * D);
  kmeans::generate_points(seed + 1, D, 0, k, first.data(), k);
  for (int j = 0; j < D; ++j) {
    for (int q = 0; q < k; ++q) c[static_cast<std::size_t>(j * k + q)] = first[static_cast<std::size_t>(j * k + q)];
  }
  // Duplicate clusters and points on clusters: exact ties must go to the lowest index in both loops.
  for (int j = 0; j < D; ++j) {
    c[static_cast<std::size_t>(j * k + k - 1)] = c[static_cast<std::size_t>(j * k + 1)];
    x[static_cast<std::size_t>(j * n + 3)] = c[static_cast<std::size_t>(j * k + 1)];
  }
  std::vector<int> one(static_cast<std::size_t>(n), -1), two(static_cast<std::size_t>(n), -1);
  for (std::int64_t i = 0; i < n; ++i) one[static_cast<std::size_t>(i)] = kmeans::nearest_cluster<D>(x.data(), n, i, c.data(), k, D);
  // As a GPU thread walks its tile: i and i + step together.
  const std::int64_t step = 7;
  for (std::int64_t first_i = 0; first_i < step; ++first_i) {
    std::int64_t i = first_i;
    for (; i + step < n; i += 2 * step) kmeans::nearest_cluster_pair<D>(x.data(), n, i, i + step, c.data(), k, two.data());
    for (; i < n; i += step) two[static_cast<std::size_t>(i)] = kmeans::nearest_cluster<D>(x.data(), n, i, c.data(), k, D);
  }
  ASSERT_EQ(one, two) << "d=" << D << " k=" << k;
  EXPECT_EQ(one[3], 1);
}

TEST(KmeansAssign, TwoPointsAtATimeGiveTheSameNearestClusters) {
  check_pairs<2>(20011, 37, 5);
  check_pairs<3>(20011, 100, 6);
  check_pairs<4>(50021, 100, 1);
  check_pairs<4>(4099, 400, 9);
}

}  // namespace
