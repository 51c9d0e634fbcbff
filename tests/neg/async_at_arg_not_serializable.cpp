// Must not compile: arguments of async_at travel to the target place serialized, so their type must be
// serializable. A type with neither trivial copies nor a serialize member is refused with a message that lists
// the three ways to make it serializable.
#include <apgas/apgas.hpp>

#include <string>

struct session {
  std::string name;
  session() = default;
  session(const session&) {}  // not trivially copyable, and no serialize member
};

void f() {
  apgas::async_at(apgas::here(), [](session s) { (void)s.name.size(); }, session{});
}
