// Must not compile: an at() result that is an apgas::span_view would view the reply's buffer, freed when at()
// returns.
#include <apgas/apgas.hpp>

double f() {
  const auto v = apgas::at(apgas::here(), [] {
    static const double d[2] = {1, 2};
    return apgas::span_view<double>{std::span<const double>(d, 2)};
  });
  return v.data[0];
}
