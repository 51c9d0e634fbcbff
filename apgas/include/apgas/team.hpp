#pragma once
#pragma GCC visibility push(default)  // libapgas exports what its public headers declare (docs/building.md)
/// @file team.hpp
/// Teams: SPMD collectives over host places (X10's Team). One activity per member place calls each operation of a
/// team, every member in the same order; the data are spans of trivially copyable elements.
///
/// Rooted operations (reduce, broadcast, gather, gatherv, scatter, scatterv) send one message per member straight to
/// or from the root; allreduce, allgather, alltoall, split, index_of_max/min and barrier send each member's part to
/// every other member. Results are bit-identical at every place (parts are combined in team rank order).
///
/// Every member passes the same root and the same element type; lengths may differ only where a `v` form says so.
/// Errors name the value and the limit. A wrong root (not a place, a GPU place, not a member) is refused with
/// bad_place_exception at the member that passes it, which still uses up the operation (its next operation is in step
/// with the others') and tells the other members, marked as failed: a member waiting for a part from it (a root that
/// receives from every member, a member whose root it is) throws illegal_operation_exception naming it instead of
/// waiting for ever; the others go on. Members are not checked against each other before
/// anything is sent; a part of another operation or root than the receiver's (at the same point of the team's
/// sequence) is refused with illegal_operation_exception naming this place's operation and the sender's team rank
/// and place, as soon as it arrives (the receiver does not wait for the parts still missing). A part whose elements
/// have another size than the receiver's (`int` against `long`), or another type of the same size (`float` against
/// `int`), is refused with illegal_operation_exception naming the sizes and the receiver's type. A part that reaches
/// a place which receives nothing in that operation (e.g. a reduce to another root), or has finished it, means that
/// its rightful receiver would wait for ever: that place stops the job with exit code 3 and a message saying so, and
/// the other places stop saying that it did. Members that are all waiting, each for a part none of them sends (a reduce
/// to place 0 at place 0, a broadcast from place 0 at the others), or waiting for a member that never calls the
/// operation (it returned, threw, or called another one first), still wait for ever; while the failure detector runs
/// (APGAS_HEARTBEAT_TIMEOUT > 0), a member that has waited twice its timeout says so once on stderr, naming the
/// operation and the places whose parts it waits for (8 such reports a run at most), and, once, while such a wait goes
/// on, the exceptions (up to 5) that finishes homed at its place hold so far (a member that threw instead of joining:
/// its exception was never seen, the finish holding it cannot end). Parts that arrived and that no
/// operation took (a member called fewer of the team's operations than the sender) are reported when the run ends. A
/// member whose own arguments are wrong (a length, counts) still sends its messages, marked as failed, so that no
/// member waits forever, and throws illegal_operation_exception; a member that receives a failed part, or a part of the
/// wrong length, throws illegal_operation_exception naming the other place. A team's parts carry the run's number: a
/// part still in flight when its apgas::run ends is dropped in the next run of the same processes.

#include <apgas/error.hpp>
#include <apgas/place.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace apgas {

namespace detail {
/// The parts that arrived for one operation of a team, by team rank (dist_team.cpp).
struct team_parts {
  std::vector<std::vector<std::byte>> parts;
  std::vector<std::uint8_t> failed;  // the sender's own arguments (or its root) were wrong; its part is the message
  std::vector<std::uint64_t> elems;  // the sender's element signature (element_signature), 0 if none came
};
/// What a member sends with its part to tell its element type: sizeof in the low 32 bits, a hash of the type's
/// mangled name in the high 32 (every place runs the same program, so one type has one name everywhere). A member
/// that passed another type of the same size (float and int) is refused as one that passed another size is.
std::uint64_t element_signature(std::size_t size, const char* mangled_name) noexcept;
template <class T>
std::uint64_t element_signature_of() noexcept {
  static const std::uint64_t sig = element_signature(sizeof(T), typeid(T).name());
  return sig;
}
/// The next operation of team `team` at this place (checks that the caller is an unrestricted activity). The number
/// carries a signature of `what` and `root` (-1: none) in its top 16 bits: team::wait refuses a part sent by a member
/// that was at another operation, or named another root, at that point. `receives`: whether this place takes parts
/// in it (team::wait); a part that comes for an operation in which it takes none, or that it has finished, stops the
/// job with a message (its sender was at another operation or named another root, and whoever should have had the
/// part would wait for ever).
std::uint64_t team_begin(std::uint64_t team, const char* what, int root = -1, bool receives = true);
/// One part of operation `seq`, of elements of signature `elem` (element_signature), from team rank `from` to place
/// `to`.
void team_send(std::uint64_t team, std::uint64_t seq, std::uint64_t elem, int from, int to,
               std::span<const std::byte> bytes, bool failed = false);
/// A fresh number for a team split at this place.
std::uint64_t team_split_counter();
int team_rank() noexcept;
int team_size() noexcept;
/// The number of this run (dist_state::clock_epoch; 0 outside a run): a team serves the run it was made in.
std::uint32_t team_run() noexcept;
/// The teams this place keeps a record of (the world team's and each sub-team's that a copy of still lives here, once
/// it was used): for tests.
std::size_t team_records() noexcept;
[[noreturn]] void team_wrong_length(const char* what, int place, std::size_t got_bytes, std::size_t expected,
                                    std::size_t elem);
// The root's check of a v form's counts (gatherv: `buffer` "out", scatterv: "in"): one count per member, adding up
// to the buffer's length, the root's own count that of its part (`own` names it). Empty when they are right.
std::string team_counts_error(const char* what, std::span<const std::size_t> counts, int size, const char* buffer,
                              std::size_t buffer_size, int root, std::size_t own_size, const char* own);
}  // namespace detail

/// A team of host places (X10's Team): the world team (every host place) or a sub-team made by split.
class team {
 public:
  /// Every host place, ranked by place id.
  static team world() noexcept {
    team t;
    t.rank_ = detail::team_rank();
    t.size_ = detail::team_size();
    t.run_ = detail::team_run();
    return t;
  }
  /// Number of member places.
  int size() const noexcept { return size_; }
  /// This place's index in the team (0 .. size()-1).
  int rank() const noexcept { return rank_; }
  /// The place of member `i`; std::out_of_range outside 0 .. size()-1.
  place member(int i) const {
    if (i < 0 || i >= size_) {
      throw std::out_of_range("apgas::team::member: index " + std::to_string(i) + " is outside the team of " +
                              std::to_string(size_));
    }
    return place(place_at(i));
  }
  /// The index of place `p` in the team, or -1 if p is not a member.
  int rank_of(place p) const noexcept {
    if (!members_) return p.id() >= 0 && p.id() < size_ ? p.id() : -1;
    const auto it = std::find(members_->begin(), members_->end(), p.id());
    return it == members_->end() ? -1 : static_cast<int>(it - members_->begin());
  }

  void barrier();

  /// Element-wise reduction of every member's inout with op (op(a, b) -> T, associative and commutative); every
  /// member gets the result. Same length everywhere.
  template <class T, class Op>
  void allreduce(std::span<T> inout, Op op);
  /// Element-wise reduction of every member's inout with op; the result replaces inout at root only (the others'
  /// inout is left unchanged). Same length everywhere.
  template <class T, class Op>
  void reduce(std::span<T> inout, Op op, place root);
  /// root's data replaces data at every member (same length everywhere).
  template <class T>
  void broadcast(std::span<T> data, place root);
  /// Every member's `mine` (same length k everywhere) lands at root in `out`, member i's at [i*k, (i+1)*k); `out`
  /// must hold size()*k elements at root and is not used elsewhere (it may be empty).
  template <class T>
  void gather(std::span<const std::type_identity_t<T>> mine, std::span<T> out, place root);
  /// gather with a length per member: counts[i] elements from member i, placed one after the other in rank order.
  /// `counts` (size() entries) and `out` (their sum) are used at root only.
  template <class T>
  void gatherv(std::span<const std::type_identity_t<T>> mine, std::span<T> out, std::span<const std::size_t> counts,
               place root);
  /// root's `in` (size()*k elements) is cut into size() blocks of k = mine.size(); member i gets block i in `mine`.
  /// `in` is used at root only.
  template <class T>
  void scatter(std::span<const std::type_identity_t<T>> in, std::span<T> mine, place root);
  /// scatter with a length per member: member i gets counts[i] elements, the blocks one after the other in `in`.
  /// `in` and `counts` are used at root only; each member's `mine` must hold its count.
  template <class T>
  void scatterv(std::span<const std::type_identity_t<T>> in, std::span<const std::size_t> counts, std::span<T> mine,
                place root);
  /// Every member gets every member's `mine` (same length k everywhere) in `out` (size()*k elements), in rank order.
  template <class T>
  void allgather(std::span<const std::type_identity_t<T>> mine, std::span<T> out);
  /// Block j (of k = in.size()/size() elements) of member i's `in` lands in block i of member j's `out`.
  /// in.size() must be a multiple of size(), and out.size() == in.size().
  template <class T>
  void alltoall(std::span<const std::type_identity_t<T>> in, std::span<T> out);
  /// Split into sub-teams (X10 Team.split, MPI_Comm_split): the members that pass the same `color` form one team,
  /// ranked by `key` (ties by rank in this team). Every member calls it; each gets the team of its colour.
  team split(int color, int key);
  /// The `index` given by the member whose `value` is the largest (ties: the smallest index), at every member.
  template <class T>
  int index_of_max(const T& value, int index);
  /// The `index` given by the member whose `value` is the smallest (ties: the smallest index), at every member.
  template <class T>
  int index_of_min(const T& value, int index);

 private:
  team() = default;
  int place_at(int i) const noexcept { return members_ ? (*members_)[static_cast<std::size_t>(i)] : i; }
  /// The team rank of `root`. A root that is no host place of this team is refused (bad_place_exception) after the
  /// operation has been numbered here and the other members told (dist_team.cpp).
  int root_rank(const char* what, place root) const;
  /// The next operation of this team at this place (detail::team_begin); illegal_operation_exception if the team was
  /// made in an earlier run.
  std::uint64_t begin(const char* what, int root = -1, bool receives = true) const {
    check_run(what);
    return detail::team_begin(id_, what, root, receives);
  }
  void check_run(const char* what) const;
  /// Wait for the parts of operation `seq`: `expected` of them, or, when `from` is a team rank, that member's part
  /// only. Throws illegal_operation_exception if a member sent a part of another operation or root.
  detail::team_parts wait(const char* what, std::uint64_t seq, int expected, int from = -1) const;
  /// Throws illegal_operation_exception if a part is failed (its sender's arguments were wrong) or of elements of
  /// another type than this place's (signature `elem`, detail::element_signature; `type`: its mangled name).
  void check_parts(const char* what, const detail::team_parts& tp, std::uint64_t elem, const char* type) const;
  template <class T>
  void check_parts(const char* what, const detail::team_parts& tp) const {
    check_parts(what, tp, detail::element_signature_of<T>(), typeid(T).name());
  }
  /// Send `bytes`, elements of T (or, when err is not empty, the failure text) to member i.
  template <class T>
  void send_to(std::uint64_t seq, int i, std::span<const std::byte> bytes, const std::string& err) const {
    const std::uint64_t elem = detail::element_signature_of<T>();
    if (err.empty()) {
      detail::team_send(id_, seq, elem, rank_, place_at(i), bytes);
    } else {
      detail::team_send(id_, seq, elem, rank_, place_at(i), std::as_bytes(std::span<const char>(err)), true);
    }
  }
  [[noreturn]] static void fail(const std::string& err);
  template <class T>
  std::vector<std::vector<std::byte>> allgather_parts(const char* what, std::span<const T> mine,
                                                      const std::string& err);
  template <class T, class Better>
  int index_of_best(const char* what, const T& value, int index, Better better);

  std::uint64_t id_ = 0;  // 0: the world team
  std::uint32_t run_ = 0;  // the run it was made in (its id may be another team's in a later run)
  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<const std::vector<int>> members_;  // member places by rank; null for the world team
};

template <class T>
std::vector<std::vector<std::byte>> team::allgather_parts(const char* what, std::span<const T> mine,
                                                          const std::string& err) {
  const std::uint64_t seq = begin(what);
  for (int i = 0; i < size_; ++i) {
    if (i != rank_) send_to<T>(seq, i, std::as_bytes(mine), err);
  }
  detail::team_parts tp = wait(what, seq, size_ - 1);
  if (!err.empty()) fail(err);
  check_parts<T>(what, tp);
  return std::move(tp.parts);
}

inline void team::barrier() { (void)allgather_parts<std::byte>("apgas::team::barrier", {}, {}); }

template <class T, class Op>
void team::allreduce(std::span<T> inout, Op op) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::allreduce: T must be trivially copyable");
  const char* what = "apgas::team::allreduce";
  std::vector<std::vector<std::byte>> parts = allgather_parts<T>(what, inout, {});
  const std::size_t n = static_cast<std::size_t>(size_);  // parts has an entry per host place; the team uses n
  const std::size_t me = static_cast<std::size_t>(rank_);
  for (std::size_t p = 0; p < n; ++p) {
    if (p != me && parts[p].size() != inout.size_bytes()) {
      detail::team_wrong_length(what, place_at(static_cast<int>(p)), parts[p].size(), inout.size(), sizeof(T));
    }
  }
  if (n < 2) return;
  // Every place combines the same parts in the same (rank) order: bit-identical results everywhere.
  if constexpr (alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    // The received parts are vectors of whole Ts, aligned for T: combine in place, the result building up in
    // parts[0] (in inout on rank 0), in a loop the compiler can vectorise.
    const auto elems = [&](std::size_t p) { return p == me ? inout.data() : reinterpret_cast<T*>(parts[p].data()); };
    T* acc = elems(0);
    for (std::size_t p = 1; p < n; ++p) {
      T* in = elems(p);
      for (std::size_t i = 0; i < inout.size(); ++i) acc[i] = op(acc[i], in[i]);
    }
    if (me != 0 && !inout.empty()) std::memcpy(inout.data(), acc, inout.size_bytes());
  } else {
    const auto load = [&](std::size_t p, std::size_t i, T& v) {
      if (p == me) {
        v = inout[i];
      } else {
        std::memcpy(&v, parts[p].data() + i * sizeof(T), sizeof(T));
      }
    };
    for (std::size_t i = 0; i < inout.size(); ++i) {
      T acc;
      load(0, i, acc);
      for (std::size_t p = 1; p < n; ++p) {
        T v;
        load(p, i, v);
        acc = op(acc, v);
      }
      inout[i] = acc;
    }
  }
}

template <class T, class Op>
void team::reduce(std::span<T> inout, Op op, place root) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::reduce: T must be trivially copyable");
  const char* what = "apgas::team::reduce";
  const int r = root_rank(what, root);
  const std::uint64_t seq = begin(what, r, rank_ == r);
  if (rank_ != r) {
    send_to<T>(seq, r, std::as_bytes(inout), {});
    return;
  }
  detail::team_parts tp = wait(what, seq, size_ - 1);
  check_parts<T>(what, tp);
  for (int p = 0; p < size_; ++p) {
    const std::size_t got = tp.parts[static_cast<std::size_t>(p)].size();
    if (p != r && got != inout.size_bytes()) detail::team_wrong_length(what, place_at(p), got, inout.size(), sizeof(T));
  }
  if (size_ < 2 || inout.empty()) return;
  // Rank order, as allreduce: acc = part0 op part1 op ... (the root's own part at its rank).
  const auto elem = [&](int p, std::size_t i) {
    if (p == r) return inout[i];
    T v;
    std::memcpy(&v, tp.parts[static_cast<std::size_t>(p)].data() + i * sizeof(T), sizeof(T));
    return v;
  };
  if (r == 0) {
    for (int p = 1; p < size_; ++p) {
      const std::byte* in = tp.parts[static_cast<std::size_t>(p)].data();
      for (std::size_t i = 0; i < inout.size(); ++i) {
        T v;
        std::memcpy(&v, in + i * sizeof(T), sizeof(T));
        inout[i] = op(inout[i], v);
      }
    }
    return;
  }
  for (std::size_t i = 0; i < inout.size(); ++i) {
    T acc = elem(0, i);
    for (int p = 1; p < size_; ++p) acc = op(acc, elem(p, i));
    inout[i] = acc;
  }
}

template <class T>
void team::broadcast(std::span<T> data, place root) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::broadcast: T must be trivially copyable");
  const char* what = "apgas::team::broadcast";
  const int r = root_rank(what, root);
  const std::uint64_t seq = begin(what, r, rank_ != r);
  if (rank_ == r) {
    for (int i = 0; i < size_; ++i) {
      if (i != r) send_to<T>(seq, i, std::as_bytes(data), {});
    }
    return;
  }
  detail::team_parts tp = wait(what, seq, 1, r);
  check_parts<T>(what, tp);
  const std::vector<std::byte>& from = tp.parts[static_cast<std::size_t>(r)];
  if (from.size() != data.size_bytes()) detail::team_wrong_length(what, root.id(), from.size(), data.size(), sizeof(T));
  if (!data.empty()) std::memcpy(data.data(), from.data(), data.size_bytes());
}

template <class T>
void team::gather(std::span<const std::type_identity_t<T>> mine, std::span<T> out, place root) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::gather: T must be trivially copyable");
  const char* what = "apgas::team::gather";
  const int r = root_rank(what, root);
  const std::uint64_t seq = begin(what, r, rank_ == r);
  if (rank_ != r) {
    send_to<T>(seq, r, std::as_bytes(mine), {});
    return;
  }
  const std::size_t k = mine.size();
  std::string err;
  if (out.size() != k * static_cast<std::size_t>(size_)) {
    err = std::string(what) + ": out holds " + std::to_string(out.size()) + " elements at the root, expected " +
          std::to_string(size_) + " members x " + std::to_string(k) + " = " + std::to_string(k * size_);
  }
  detail::team_parts tp = wait(what, seq, size_ - 1);
  if (!err.empty()) fail(err);
  check_parts<T>(what, tp);
  for (int p = 0; p < size_; ++p) {
    const std::vector<std::byte>& b = tp.parts[static_cast<std::size_t>(p)];
    if (p == r) {
      if (k != 0) std::memcpy(out.data() + static_cast<std::size_t>(p) * k, mine.data(), mine.size_bytes());
      continue;
    }
    if (b.size() != mine.size_bytes()) detail::team_wrong_length(what, place_at(p), b.size(), k, sizeof(T));
    if (k != 0) std::memcpy(out.data() + static_cast<std::size_t>(p) * k, b.data(), b.size());
  }
}

template <class T>
void team::gatherv(std::span<const std::type_identity_t<T>> mine, std::span<T> out, std::span<const std::size_t> counts,
                   place root) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::gatherv: T must be trivially copyable");
  const char* what = "apgas::team::gatherv";
  const int r = root_rank(what, root);
  const std::uint64_t seq = begin(what, r, rank_ == r);
  if (rank_ != r) {
    send_to<T>(seq, r, std::as_bytes(mine), {});
    return;
  }
  const std::string err =
      detail::team_counts_error(what, counts, size_, "out holds", out.size(), r, mine.size(), "the root gives");
  detail::team_parts tp = wait(what, seq, size_ - 1);
  if (!err.empty()) fail(err);
  check_parts<T>(what, tp);
  std::size_t off = 0;
  for (int p = 0; p < size_; ++p) {
    const std::size_t c = counts[static_cast<std::size_t>(p)];
    const std::byte* src =
        p == r ? reinterpret_cast<const std::byte*>(mine.data()) : tp.parts[static_cast<std::size_t>(p)].data();
    const std::size_t got = p == r ? mine.size_bytes() : tp.parts[static_cast<std::size_t>(p)].size();
    if (got != c * sizeof(T)) detail::team_wrong_length(what, place_at(p), got, c, sizeof(T));
    if (c != 0) std::memcpy(out.data() + off, src, got);
    off += c;
  }
}

template <class T>
void team::scatter(std::span<const std::type_identity_t<T>> in, std::span<T> mine, place root) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::scatter: T must be trivially copyable");
  const char* what = "apgas::team::scatter";
  const int r = root_rank(what, root);
  const std::uint64_t seq = begin(what, r, rank_ != r);
  const std::size_t k = mine.size();
  if (rank_ == r) {
    std::string err;
    if (in.size() != k * static_cast<std::size_t>(size_)) {
      err = std::string(what) + ": in holds " + std::to_string(in.size()) + " elements at the root, expected " +
            std::to_string(size_) + " members x " + std::to_string(k) + " = " + std::to_string(k * size_);
    }
    for (int i = 0; i < size_; ++i) {
      if (i != r)
        send_to<T>(
            seq, i,
            err.empty() ? std::as_bytes(in.subspan(static_cast<std::size_t>(i) * k, k)) : std::span<const std::byte>{},
            err);
    }
    if (!err.empty()) fail(err);
    if (k != 0) std::memcpy(mine.data(), in.data() + static_cast<std::size_t>(r) * k, mine.size_bytes());
    return;
  }
  detail::team_parts tp = wait(what, seq, 1, r);
  check_parts<T>(what, tp);
  const std::vector<std::byte>& b = tp.parts[static_cast<std::size_t>(r)];
  if (b.size() != mine.size_bytes()) detail::team_wrong_length(what, root.id(), b.size(), k, sizeof(T));
  if (k != 0) std::memcpy(mine.data(), b.data(), b.size());
}

template <class T>
void team::scatterv(std::span<const std::type_identity_t<T>> in, std::span<const std::size_t> counts, std::span<T> mine,
                    place root) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::scatterv: T must be trivially copyable");
  const char* what = "apgas::team::scatterv";
  const int r = root_rank(what, root);
  const std::uint64_t seq = begin(what, r, rank_ != r);
  if (rank_ == r) {
    const std::string err = detail::team_counts_error(what, counts, size_, "in holds", in.size(), r, mine.size(),
                                                      "the root's mine holds");
    std::size_t off = 0;
    for (int i = 0; i < size_; ++i) {
      const std::size_t c = err.empty() ? counts[static_cast<std::size_t>(i)] : 0;
      if (i != r)
        send_to<T>(seq, i, err.empty() ? std::as_bytes(in.subspan(off, c)) : std::span<const std::byte>{}, err);
      if (i == r && c != 0) std::memcpy(mine.data(), in.data() + off, c * sizeof(T));
      off += c;
    }
    if (!err.empty()) fail(err);
    return;
  }
  detail::team_parts tp = wait(what, seq, 1, r);
  check_parts<T>(what, tp);
  const std::vector<std::byte>& b = tp.parts[static_cast<std::size_t>(r)];
  if (b.size() != mine.size_bytes()) detail::team_wrong_length(what, root.id(), b.size(), mine.size(), sizeof(T));
  if (!mine.empty()) std::memcpy(mine.data(), b.data(), b.size());
}

template <class T>
void team::allgather(std::span<const std::type_identity_t<T>> mine, std::span<T> out) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::allgather: T must be trivially copyable");
  const char* what = "apgas::team::allgather";
  const std::size_t k = mine.size();
  std::string err;
  if (out.size() != k * static_cast<std::size_t>(size_)) {
    err = std::string(what) + ": out holds " + std::to_string(out.size()) + " elements at place " +
          std::to_string(place_at(rank_)) + ", expected " + std::to_string(size_) + " members x " + std::to_string(k) +
          " = " + std::to_string(k * size_);
  }
  std::vector<std::vector<std::byte>> parts = allgather_parts<T>(what, mine, err);
  for (int p = 0; p < size_; ++p) {
    const std::vector<std::byte>& b = parts[static_cast<std::size_t>(p)];
    if (p == rank_) {
      if (k != 0) std::memcpy(out.data() + static_cast<std::size_t>(p) * k, mine.data(), mine.size_bytes());
      continue;
    }
    if (b.size() != mine.size_bytes()) detail::team_wrong_length(what, place_at(p), b.size(), k, sizeof(T));
    if (k != 0) std::memcpy(out.data() + static_cast<std::size_t>(p) * k, b.data(), b.size());
  }
}

template <class T>
void team::alltoall(std::span<const std::type_identity_t<T>> in, std::span<T> out) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::alltoall: T must be trivially copyable");
  const char* what = "apgas::team::alltoall";
  const std::size_t n = static_cast<std::size_t>(size_);
  const std::size_t k = in.size() / n;
  std::string err;
  if (in.size() % n != 0) {
    err = std::string(what) + ": in holds " + std::to_string(in.size()) + " elements at place " +
          std::to_string(place_at(rank_)) + ", not a multiple of the team's " + std::to_string(n) + " members";
  } else if (out.size() != in.size()) {
    err = std::string(what) + ": out holds " + std::to_string(out.size()) + " elements at place " +
          std::to_string(place_at(rank_)) + ", in holds " + std::to_string(in.size());
  }
  const std::uint64_t seq = begin(what);
  for (int i = 0; i < size_; ++i) {
    if (i != rank_) {
      send_to<T>(
          seq, i,
          err.empty() ? std::as_bytes(in.subspan(static_cast<std::size_t>(i) * k, k)) : std::span<const std::byte>{},
          err);
    }
  }
  detail::team_parts tp = wait(what, seq, size_ - 1);
  if (!err.empty()) fail(err);
  check_parts<T>(what, tp);
  for (int p = 0; p < size_; ++p) {
    T* to = out.data() + static_cast<std::size_t>(p) * k;
    if (p == rank_) {
      if (k != 0) std::memcpy(to, in.data() + static_cast<std::size_t>(p) * k, k * sizeof(T));
      continue;
    }
    const std::vector<std::byte>& b = tp.parts[static_cast<std::size_t>(p)];
    if (b.size() != k * sizeof(T)) detail::team_wrong_length(what, place_at(p), b.size(), k, sizeof(T));
    if (k != 0) std::memcpy(to, b.data(), b.size());
  }
}

template <class T, class Better>
int team::index_of_best(const char* what, const T& value, int index, Better better) {
  static_assert(std::is_trivially_copyable_v<T>, "apgas::team::index_of_max/min: T must be trivially copyable");
  struct entry {
    T value;
    int index;
  };
  const entry mine{value, index};
  std::vector<std::vector<std::byte>> parts = allgather_parts<entry>(what, std::span<const entry>(&mine, 1), {});
  entry best = mine;
  bool first = true;
  for (int p = 0; p < size_; ++p) {
    entry e;
    if (p == rank_) {
      e = mine;
    } else {
      const std::vector<std::byte>& b = parts[static_cast<std::size_t>(p)];
      if (b.size() != sizeof(entry)) detail::team_wrong_length(what, place_at(p), b.size(), 1, sizeof(entry));
      std::memcpy(&e, b.data(), sizeof(entry));
    }
    if (first || better(e.value, best.value) || (!better(best.value, e.value) && e.index < best.index)) best = e;
    first = false;
  }
  return best.index;
}

template <class T>
int team::index_of_max(const T& value, int index) {
  return index_of_best("apgas::team::index_of_max", value, index, [](const T& a, const T& b) { return b < a; });
}

template <class T>
int team::index_of_min(const T& value, int index) {
  return index_of_best("apgas::team::index_of_min", value, index, [](const T& a, const T& b) { return a < b; });
}

}  // namespace apgas
#pragma GCC visibility pop
