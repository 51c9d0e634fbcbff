// Must not compile: a closure that captures a std::string cannot be shipped by async_at.
#include <apgas/apgas.hpp>

#include <string>

void f() {
  std::string s = "x";
  apgas::async_at(apgas::here(), [s] { (void)s.size(); });
}
