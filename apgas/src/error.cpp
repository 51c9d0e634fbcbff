#include <apgas/error.hpp>

#include <string>

namespace apgas {

namespace {
std::string describe(const std::vector<std::exception_ptr>& es) {
  std::string s = std::to_string(es.size()) + (es.size() == 1 ? " exception" : " exceptions") + " in a finish";
  for (const auto& e : es) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      s += "; ";
      s += x.what();
      break;  // the first message only: the count says there are more
    } catch (...) {
      s += "; (a non-std exception)";
      break;
    }
  }
  return s;
}
}  // namespace

multiple_exceptions::multiple_exceptions(std::vector<std::exception_ptr> exceptions)
    : error(describe(exceptions)), exceptions_(std::move(exceptions)) {}

}  // namespace apgas
