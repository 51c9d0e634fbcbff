// Kernel closures sent to a GPU place from a file compiled by nvcc, against the fake driver: what the launch refuses
// on the host before it asks the CUDA runtime for the kernel (which the fake cannot stand in for), as a CPU place
// refuses it (tests/core/test_kernel_cpu.cpp, KernelCpu.SizesThatWouldOverflowAreRefused).
#include "cuda_fake/fake_fixture.hpp"

#include <apgas/apgas.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace apgas_test::fake_gpu;

// The message of the kernel_launch_error that at(p, k) threw (directly, or as the one exception of a finish); "" when
// it threw none.
template <class K>
std::string refusal(apgas::place p, const K& k) {
  try {
    apgas::at(p, k);
  } catch (const apgas::kernel_launch_error& e) {
    return e.what();
  } catch (const apgas::multiple_exceptions& m) {
    const auto errs = m.of_type<apgas::kernel_launch_error>();
    if (errs.size() == 1 && m.size() == 1) return errs[0]->what();
    ADD_FAILURE() << "other exceptions than one kernel_launch_error";
  }
  return "";
}

// Shared arrays whose sizes wrap a size_t round: on a GPU place the launch asked for 0 bytes of dynamic shared memory
// while its arrays lay at 2^63 and beyond (each block's threads then wrote far out of bounds, a sticky error that
// killed the GPU place). Refused with the CPU place's message; nothing reaches the GPU, which stays usable. (Kernel
// bodies are made in a function of namespace scope: nvcc refuses extended lambdas in a test's private TestBody.)
void overflowing_shared_arrays_are_refused() {
  ASSERT_FALSE(apgas::here().children().empty());
  const apgas::place gpu = apgas::here().children()[0];
  {
    constexpr std::size_t half = std::size_t{1} << 63;
    const auto body = [] APGAS_KERNEL(apgas::thread_block, apgas::shared_span<char>, apgas::shared_span<char>) {};
    const std::string sum = refusal(gpu, apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared_uninit<char>(half),
                                                            apgas::shared<char>(half, 'x'), body));
    EXPECT_NE(sum.find("a shared array of 9223372036854775808 elements of 1 bytes after 9223372036854775808 bytes of "
                       "others: the shared memory per block overflows a size_t"),
              std::string::npos)
        << sum;
    const std::string product = refusal(
        gpu, apgas::cuda_kernel(apgas::grid{1, 32},  // made by hand: shared_uninit<double>(n) refuses n itself
                                apgas::shared_array<double, std::dynamic_extent, false>{(std::size_t{1} << 61) + 1, 0.0},
                                [] APGAS_KERNEL(apgas::thread_block, apgas::shared_span<double>) {}));
    EXPECT_NE(product.find("a shared array of 2305843009213693953 elements of 8 bytes: the shared memory per block "
                           "overflows a size_t"),
              std::string::npos)
        << product;
    EXPECT_EQ(counter(-1, "kernel_launches"), 0);
    // The GPU place still works: an array there, filled and read back.
    auto a = apgas::make_remote_array<int>(gpu, 1000, 7);
    std::vector<int> back(1000);
    apgas::finish([&] { apgas::async_copy(a, 0, std::span<int>(back)); });
    EXPECT_EQ(back[999], 7);
    apgas::free_remote_array(a);
  }
}

TEST_F(FakeGpu, SharedArraysThatOverflowASizeTAreRefusedBeforeTheLaunch) {
  run_gpu(gpu_config(), [] { overflowing_shared_arrays_are_refused(); });
}

// The offsets the device code takes as constants (cuda/kernel.cuh, static_offset: ptxas then merges neighbouring
// shared loads, as for a static __shared__ array) are the ones the host lays out: each shared array at the next
// multiple of its alignment (16 bytes at least) after those before it, the first constant data at 0; none for an
// array after one sized at run time, nor for later constant data.
namespace layout = apgas::detail::cuda;
using f7 = apgas::shared_array<float, 7, true>;      // 28 bytes
using d3 = apgas::shared_array<double, 3, false>;    // 24 bytes
using c5 = apgas::shared_array<char, 5, true>;       // 5 bytes
using run_sized = apgas::shared_array<char, std::dynamic_extent, true>;
using k = apgas::constant_copy<int>;
static_assert(layout::static_offset<0, f7, d3, c5>() == 0);
static_assert(layout::static_offset<1, f7, d3, c5>() == 32);
static_assert(layout::static_offset<2, f7, k, d3, c5>() == 32);
static_assert(layout::static_offset<3, f7, k, d3, c5>() == 64);
static_assert(layout::static_offset<1, f7, k, d3>() == 0);
static_assert(layout::static_offset<2, k, f7, k>() == layout::no_static_offset);
static_assert(layout::static_offset<1, run_sized, f7>() == layout::no_static_offset);
static_assert(layout::static_offset<1, f7, apgas::global_copy<int>>() == layout::no_static_offset);

// And the launch checks that they are (it throws an internal error if not) before it asks the CUDA runtime for the
// kernel, which the fake cannot stand in for: that call's error is the one that comes back.
void static_offsets_match_the_host_layout() {
  const apgas::place gpu = apgas::here().children()[0];
  const std::vector<int> consts{1, 2, 3};
  std::string what;
  try {
    apgas::at(gpu, apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared<float, 7>(),
                                      apgas::constant_from(std::span(consts)), apgas::shared_uninit<double, 3>(),
                                      apgas::shared<char, 5>(),
                                      [] APGAS_KERNEL(apgas::thread_block, apgas::shared_span<float, 7>,
                                                      std::span<const int>, apgas::shared_span<double, 3>,
                                                      apgas::shared_span<char, 5>) {}));
  } catch (const std::exception& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("cudaGetFuncBySymbol"), std::string::npos) << what;
}

// A shared array of compile-time size made by hand with another size is the caller's error, and says so (the device
// code is compiled for N).
void a_hand_made_fixed_size_array_of_another_size_is_refused() {
  const apgas::place gpu = apgas::here().children()[0];
  const std::string what =
      refusal(gpu, apgas::cuda_kernel(apgas::grid{1, 32}, apgas::shared_array<float, 7, true>{5, 0.0f},
                                      [] APGAS_KERNEL(apgas::thread_block, apgas::shared_span<float, 7>) {}));
  EXPECT_NE(what.find("a shared_array<T, 7> of 5 elements: make it with apgas::shared<T, 7>()"), std::string::npos)
      << what;
}

TEST_F(FakeGpu, TheSharedOffsetsCompiledIntoTheKernelAreTheLaunchs) {
  run_gpu(gpu_config(), [] {
    static_offsets_match_the_host_layout();
    a_hand_made_fixed_size_array_of_another_size_is_refused();
  });
}

}  // namespace
