// The Open MPI backend.
//
// Thread level: MPI_THREAD_SERIALIZED. Every MPI call is made under one lock (mpi_), so at most one thread is inside
// MPI at a time; workers never block on it: send() queues the message and only flushes the queue itself if the lock
// is free, and poll() returns at once when another thread is polling. Progress is driven by idle workers through
// the runtime's progress hook (poll()): it starts queued sends (MPI_Isend), completes finished ones
// (MPI_Testsome) and receives with MPI_Improbe + MPI_Mrecv into 16-byte aligned buffers of the probed size. All
// active messages use one tag on a duplicate of MPI_COMM_WORLD, so the application may use MPI itself too.
#include "../transports.hpp"

#include <apgas/error.hpp>

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace apgas::transport {
namespace {

constexpr int am_tag = 7001;

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, static_cast<std::size_t>(len));
}

void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw transport_error(std::string("apgas transport mpi: ") + call + " failed: " + mpi_error_string(rc));
}

class mpi_transport final : public transport {
 public:
  mpi_transport() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
      if (provided < MPI_THREAD_SERIALIZED) {
        throw transport_error("apgas transport mpi: the MPI library provides thread level " +
                              std::to_string(provided) + ", apgas needs MPI_THREAD_SERIALIZED");
      }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }

  ~mpi_transport() override {
    MPI_Comm_free(&comm_);
    if (owns_mpi_) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    }
  }

  const char* name() const noexcept override { return "mpi"; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::size_t max_message() const noexcept override { return std::size_t{1} << 30; }

  void send(int dst, std::vector<std::byte> bytes) override {
    if (dst < 0 || dst >= size_) {
      throw transport_error("apgas transport mpi: send to rank " + std::to_string(dst) + " of " +
                            std::to_string(size_));
    }
    {
      std::lock_guard lock(out_mutex_);
      outbox_.push_back({dst, std::move(bytes)});
    }
    if (mpi_.try_lock()) {
      std::lock_guard lock(mpi_, std::adopt_lock);
      flush_locked();
    }
  }

  bool poll(handler& h) override {
    if (!mpi_.try_lock()) return false;
    std::vector<std::pair<int, aligned_buffer>> arrived;
    bool progress = false;
    {
      std::lock_guard lock(mpi_, std::adopt_lock);
      progress |= flush_locked();
      progress |= complete_sends_locked();
      for (int k = 0; k < 64; ++k) {
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        check(MPI_Improbe(MPI_ANY_SOURCE, am_tag, comm_, &flag, &msg, &st), "MPI_Improbe");
        if (!flag) break;
        int count = 0;
        check(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
        aligned_buffer buf(static_cast<std::size_t>(count));
        check(MPI_Mrecv(buf.data(), count, MPI_BYTE, &msg, MPI_STATUS_IGNORE), "MPI_Mrecv");
        arrived.emplace_back(st.MPI_SOURCE, std::move(buf));
      }
    }
    for (auto& [src, buf] : arrived) h.on_message(src, buf.span());
    return progress || !arrived.empty();
  }

  void barrier() override {
    std::lock_guard lock(mpi_);
    drain_sends_locked();
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }

  std::vector<std::byte> allgather(std::span<const std::byte> mine) override {
    std::lock_guard lock(mpi_);
    std::vector<std::byte> all(mine.size() * static_cast<std::size_t>(size_));
    check(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                        static_cast<int>(mine.size()), MPI_BYTE, comm_),
          "MPI_Allgather");
    return all;
  }

 private:
  struct outgoing {
    int dst;
    std::vector<std::byte> bytes;
  };
  struct in_flight {
    MPI_Request req;
    std::vector<std::byte> bytes;
  };

  bool flush_locked() {
    std::deque<outgoing> batch;
    {
      std::lock_guard lock(out_mutex_);
      batch.swap(outbox_);
    }
    for (auto& o : batch) {
      in_flight_.push_back({MPI_REQUEST_NULL, std::move(o.bytes)});
      in_flight& f = in_flight_.back();
      check(MPI_Isend(f.bytes.data(), static_cast<int>(f.bytes.size()), MPI_BYTE, o.dst, am_tag, comm_, &f.req),
            "MPI_Isend");
    }
    return !batch.empty();
  }

  bool complete_sends_locked() {
    bool any = false;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      int done = 0;
      check(MPI_Test(&it->req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) {
        it = in_flight_.erase(it);
        any = true;
      } else {
        ++it;
      }
    }
    return any;
  }

  void drain_sends_locked() {
    flush_locked();
    for (auto& f : in_flight_) check(MPI_Wait(&f.req, MPI_STATUS_IGNORE), "MPI_Wait");
    in_flight_.clear();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool owns_mpi_ = false;
  std::mutex mpi_;
  std::mutex out_mutex_;
  std::deque<outgoing> outbox_;
  std::deque<in_flight> in_flight_;
};

}  // namespace

std::unique_ptr<transport> make_mpi() { return std::make_unique<mpi_transport>(); }

bool launched_by_mpi() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "SLURM_NTASKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

}  // namespace apgas::transport
