// Must not compile: an argument sent to another place may not be a raw pointer (an address means nothing there);
// the message says what to send instead.
#include <apgas/apgas.hpp>

int f(int* p) {
  return apgas::at(apgas::here(), [](int* q) { return *q; }, p);
}
