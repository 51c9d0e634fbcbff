#include "obs.hpp"

#include <apgas/error.hpp>
#include <apgas/transport/transport.hpp>
#include <apgas/runtime.hpp>

#include <atomic>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace apgas {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// Parse a whole decimal string into [lo, hi]; nullopt if it is not exactly that.
std::optional<unsigned long long> parse_uint(const std::string& s, unsigned long long multiplier = 1) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno == ERANGE || end == s.c_str()) return std::nullopt;
  if (*end != '\0') return std::nullopt;
  if (multiplier > 1 && v > std::numeric_limits<unsigned long long>::max() / multiplier) return std::nullopt;
  return v * multiplier;
}

std::optional<unsigned long long> parse_bytes(std::string s) {
  unsigned long long mult = 1;
  if (!s.empty()) {
    switch (std::toupper(static_cast<unsigned char>(s.back()))) {
      case 'K': mult = 1ull << 10; break;
      case 'M': mult = 1ull << 20; break;
      case 'G': mult = 1ull << 30; break;
      default: break;
    }
    if (mult != 1) s.pop_back();
  }
  return parse_uint(s, mult);
}

std::string gpus_expected() {
  return "auto, all, none, or a comma-separated list of distinct GPU ordinals from 0 to " +
         std::to_string(config::max_gpu_ordinal) + " (e.g. 0,2)";
}

std::string message_piece_expected() {
  return "0 (the transport's limit) or a byte count (optional suffix K, M or G) from " +
         std::to_string(config::min_message_piece) + " to " + std::to_string(config::max_message_piece);
}

std::string dma_expected() {
  return "a byte count (optional suffix K, M or G), a multiple of 4096 from " + std::to_string(config::min_dma_slice) +
         " to " + std::to_string(config::max_dma_slice);
}

std::string direct_copy_expected() {
  return "a byte count (optional suffix K, M or G) from 0 (every pageable copy through the spooler) to " +
         std::to_string(config::max_dma_slice);
}

[[noreturn]] void reject(const char* var, const std::string& value, const std::string& expected) {
  throw config_error(std::string("invalid ") + var + "='" + value + "': expected " + expected);
}

std::string trace_buffer_expected() {
  return "a byte count (optional suffix K, M or G) from " + std::to_string(config::min_trace_buffer) + " to " +
         std::to_string(config::max_trace_buffer);
}

std::atomic<bool> g_stats_requested{false};

// Parses a GPU list into out; returns what is wrong with it, or an empty string.
std::string parse_gpu_list(const std::string& gpus, std::vector<int>& out) {
  if (gpus == "auto" || gpus == "all" || gpus == "none") return {};
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = gpus.find(',', start);
    const std::string item = gpus.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto n = parse_uint(item);
    if (!n || *n > static_cast<unsigned long long>(config::max_gpu_ordinal)) {
      return "'" + item + "' is not a GPU ordinal";
    }
    for (int seen : out) {
      if (seen == static_cast<int>(*n)) return "GPU " + item + " is listed twice";
    }
    out.push_back(static_cast<int>(*n));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return {};
}

}  // namespace

void enable_stats() noexcept { g_stats_requested.store(true); }

bool detail::obs::stats_requested() noexcept { return g_stats_requested.load(); }

bool take_stats_option(int& argc, char** argv) noexcept {
  bool found = false;
  int out = 1;
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--stats") == 0) found = true;
    else argv[out++] = argv[i];
  }
  for (; i < argc; ++i) argv[out++] = argv[i];  // from `--` on: the program's parameters, kept as they are
  if (argc > 0) {
    argc = out;
    argv[argc] = nullptr;
  }
  if (found) enable_stats();
  return found;
}

config config::from_env() {
  config c;
  if (auto v = env("APGAS_NTHREADS")) {
    const auto n = parse_uint(*v);
    if (!n || *n < 1 || *n > static_cast<unsigned long long>(max_threads)) {
      reject("APGAS_NTHREADS", *v, "a whole number of worker threads from 1 to " + std::to_string(max_threads));
    }
    c.nthreads = static_cast<int>(*n);
  }
  if (auto v = env("APGAS_STACK_SIZE")) {
    const auto n = parse_bytes(*v);
    if (!n || *n < min_stack_size || *n > max_stack_size) {
      reject("APGAS_STACK_SIZE", *v,
             "a byte count (optional suffix K, M or G) from " + std::to_string(min_stack_size) + " to " +
                 std::to_string(max_stack_size));
    }
    c.stack_size = static_cast<std::size_t>(*n);
  }
  if (auto v = env("APGAS_GPUS")) {
    c.gpus = *v;
    std::vector<int> list;
    const std::string problem = parse_gpu_list(*v, list);
    if (!problem.empty()) reject("APGAS_GPUS", *v, gpus_expected() + " (" + problem + ")");
  }
  if (auto v = env("APGAS_CUDA_DMA_SLICE")) {
    const auto n = parse_bytes(*v);
    if (!n || *n < min_dma_slice || *n > max_dma_slice || *n % 4096 != 0) reject("APGAS_CUDA_DMA_SLICE", *v, dma_expected());
    c.cuda_dma_slice = static_cast<std::size_t>(*n);
  }
  if (auto v = env("APGAS_CUDA_DIRECT_COPY")) {
    const auto n = parse_bytes(*v);
    if (!n || *n > max_dma_slice) reject("APGAS_CUDA_DIRECT_COPY", *v, direct_copy_expected());
    c.cuda_direct_copy = static_cast<std::size_t>(*n);
  }
  if (auto v = env("APGAS_CONNECT_TIMEOUT")) {
    const auto n = parse_uint(*v);
    if (!n || *n < 1 || *n > static_cast<unsigned long long>(max_connect_timeout_s)) {
      reject("APGAS_CONNECT_TIMEOUT", *v,
             "a whole number of seconds from 1 to " + std::to_string(max_connect_timeout_s));
    }
    c.connect_timeout_s = static_cast<int>(*n);
  }
  if (auto v = env("APGAS_HEARTBEAT_TIMEOUT")) {
    const auto n = parse_uint(*v);
    if (!n || *n > static_cast<unsigned long long>(max_heartbeat_timeout_s)) {
      reject("APGAS_HEARTBEAT_TIMEOUT", *v,
             "a whole number of seconds from 0 (no failure detector) to " + std::to_string(max_heartbeat_timeout_s));
    }
    c.heartbeat_timeout_s = static_cast<int>(*n);
  }
  if (auto v = env("APGAS_MESSAGE_PIECE")) {
    const auto n = parse_bytes(*v);
    if (!n || (*n != 0 && (*n < min_message_piece || *n > max_message_piece))) {
      reject("APGAS_MESSAGE_PIECE", *v, message_piece_expected());
    }
    c.message_piece = static_cast<std::size_t>(*n);
  }
  if (auto v = env("APGAS_KERNEL_CHECK")) {
    if (*v != "0" && *v != "1") reject("APGAS_KERNEL_CHECK", *v, "0 (off) or 1 (on)");
    c.kernel_check = *v == "1";
  }
  if (auto v = env("APGAS_TRACE")) {
    if (v->empty()) reject("APGAS_TRACE", *v, "the path of the trace file to write");
    c.trace_file = *v;
  }
  if (auto v = env("APGAS_TRACE_FILTER")) {
    (void)detail::obs::parse_filter(*v, "APGAS_TRACE_FILTER");
    c.trace_filter = *v;
  }
  if (auto v = env("APGAS_TRACE_BUFFER")) {
    const auto n = parse_bytes(*v);
    if (!n || *n < min_trace_buffer || *n > max_trace_buffer) reject("APGAS_TRACE_BUFFER", *v, trace_buffer_expected());
    c.trace_buffer = static_cast<std::size_t>(*n);
  }
  if (auto v = env("APGAS_STATS")) {
    if (*v != "0" && *v != "1") reject("APGAS_STATS", *v, "0 (off) or 1 (on)");
    c.stats = *v == "1";
  }
  if (g_stats_requested.load()) c.stats = true;
  if (auto v = env("APGAS_TRANSPORT")) {
    // The backend itself is created at start-up (transport/src/select.cpp); here only the name is checked, so
    // that a typo is reported as early as the other variables.
    if (*v != "local" && *v != "mpi" && *v != "ofi") {
      reject("APGAS_TRANSPORT", *v, "local, mpi or ofi (this build has: " + transport::built_backends() + ")");
    }
  }
  return c;
}


std::vector<int> config::gpu_list() const {
  std::vector<int> out;
  const std::string problem = parse_gpu_list(gpus, out);
  if (!problem.empty()) {
    throw config_error("invalid apgas::config::gpus='" + gpus + "': " + problem + "; expected " + gpus_expected());
  }
  return out;
}

void config::validate() const {
  if (nthreads < 0 || nthreads > max_threads) {
    throw config_error("invalid apgas::config::nthreads=" + std::to_string(nthreads) + ": expected 0 (one per core) to " +
                       std::to_string(max_threads));
  }
  if (stack_size < min_stack_size || stack_size > max_stack_size) {
    throw config_error("invalid apgas::config::stack_size=" + std::to_string(stack_size) + ": expected " +
                       std::to_string(min_stack_size) + " to " + std::to_string(max_stack_size) + " bytes");
  }
  (void)gpu_list();
  if (message_piece != 0 && (message_piece < min_message_piece || message_piece > max_message_piece)) {
    throw config_error("invalid apgas::config::message_piece=" + std::to_string(message_piece) + ": expected " +
                       message_piece_expected());
  }
  if (cuda_dma_slice < min_dma_slice || cuda_dma_slice > max_dma_slice || cuda_dma_slice % 4096 != 0) {
    throw config_error("invalid apgas::config::cuda_dma_slice=" + std::to_string(cuda_dma_slice) + ": expected " +
                       dma_expected());
  }
  if (cuda_direct_copy > max_dma_slice) {
    throw config_error("invalid apgas::config::cuda_direct_copy=" + std::to_string(cuda_direct_copy) + ": expected " +
                       direct_copy_expected());
  }
  if (connect_timeout_s < 1 || connect_timeout_s > max_connect_timeout_s) {
    throw config_error("invalid apgas::config::connect_timeout_s=" + std::to_string(connect_timeout_s) +
                       ": expected 1 to " + std::to_string(max_connect_timeout_s) + " seconds");
  }
  if (heartbeat_timeout_s < 0 || heartbeat_timeout_s > max_heartbeat_timeout_s) {
    throw config_error("invalid apgas::config::heartbeat_timeout_s=" + std::to_string(heartbeat_timeout_s) +
                       ": expected 0 (no failure detector) to " + std::to_string(max_heartbeat_timeout_s) + " seconds");
  }
  (void)detail::obs::parse_filter(trace_filter, "apgas::config::trace_filter");
  if (trace_buffer < min_trace_buffer || trace_buffer > max_trace_buffer) {
    throw config_error("invalid apgas::config::trace_buffer=" + std::to_string(trace_buffer) + ": expected " +
                       trace_buffer_expected());
  }
}

}  // namespace apgas
