// Must not compile: async_at copies its closure to the target place, so the closure must be trivially copyable.
// A closure that owns a std::string breaks the shipping rule; the static_assert says what to do instead.
#include <apgas/apgas.hpp>

#include <string>

void f() {
  apgas::async_at(apgas::here(), [s = std::string("x")] { (void)s.size(); });
}
