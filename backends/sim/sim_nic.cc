#include "backends/sim/sim_nic.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "backends/sim/memory_timing.h"
#include "backends/sim/sim_network.h"
#include "backends/sim/sim_strand.h"

namespace rcxl::sim {

using runtime::Duration;
using runtime::Instant;
using runtime::RdmaOp;

namespace {

constexpr std::uint64_t kAddressBase = 1ull << 40;  // remote addresses look like VAs

Duration wire_time(std::uint64_t bytes, double bytes_per_second) {
  return Duration(static_cast<std::int64_t>(std::ceil(bytes * 1e9 / bytes_per_second)));
}

}  // namespace

// An RC queue pair: ops complete in order; READ responses never overtake.
class SimQueuePair final : public runtime::QueuePair,
                           public std::enable_shared_from_this<SimQueuePair> {
 public:
  SimQueuePair(SimNic& local, SimNic& remote, SimStrand& strand, std::string proof)
      : local_(local),
        remote_(remote),
        strand_(strand),
        alive_(strand.alive_token()),
        proof_(std::move(proof)),
        remote_process_(remote.process_count()) {}

  std::string peer() const override { return remote_.node(); }

  void post(std::vector<RdmaOp> ops, CompletionHandler done) override {
    auto batch = std::make_shared<Batch>();
    batch->first_seq = next_post_seq_;
    batch->statuses.resize(ops.size());
    batch->done = std::move(done);
    if (ops.empty()) {
      // Reported in its turn too: after the ops posted before it. It takes one
      // sequence number with no status to fill.
      ++next_post_seq_;
      batch->remaining = 1;
      return finish_op(batch, 0, Status(), loop().now());
    }
    next_post_seq_ += ops.size();
    batch->remaining = ops.size();
    // The peer's process ended and its DREQ has arrived: this QP is known gone.
    if (remote_process_ != remote_.process_count() &&
        loop().now() >= remote_.process_ended_at() + params().latency) {
      broken_ = true;
    }
    if (broken_) {
      // A reconnect sends the connect's proof again (verbs: the stored private
      // data): a peer that no longer takes it rejects the connect, every op
      // fails, and the QP stays broken.
      if (!remote_.accepts_proof(proof_)) {
        const Instant at = loop().now() + params().latency * 4;
        for (std::size_t i = 0; i < ops.size(); ++i) {
          finish_op(batch, i,
                    Error(ErrorCode::kUnauthenticated,
                          "the RDMA peer at '" + remote_.node() +
                              "' rejected the reconnect: no valid proof (it restarted?)"),
                    at);
        }
        return;
      }
      // The QP left the error state: reconnecting (rdma_cm) takes ~2 round trips.
      broken_ = false;
      remote_process_ = remote_.process_count();
      reconnects_.insert(batch->first_seq);
      write_tx_free_ = std::max(write_tx_free_, loop().now() + params().latency * 4);
    }
    batch->process = remote_process_;
    SimWorld& world = local_.fabric().world();
    world.trace().record(world.loop().now().count(), "rdma post " + local_.node() + "->" +
                                                         remote_.node() +
                                                         " ops=" + std::to_string(ops.size()));
    for (std::size_t i = 0; i < ops.size(); ++i) start(ops[i], batch, i);
  }

 private:
  struct Batch {
    std::uint64_t first_seq = 0;  // posting order of its first op on this QP
    std::vector<Status> statuses;
    std::size_t remaining = 0;
    CompletionHandler done;
    std::uint64_t process = 0;  // the peer's process its connection was made with
  };

  // One WRITE, as its sender books it and its responder applies it.
  struct WriteStream {
    RdmaOp op;
    std::shared_ptr<std::string> payload;
    std::shared_ptr<Batch> batch;
    std::size_t index = 0;
    std::uint64_t sent = 0;         // bytes booked on the wire
    std::vector<Instant> starts;    // per booked segment: when it starts on the sender's TX
    std::vector<Instant> arrivals;  // per booked segment: its last byte at the responder
    bool failed = false;            // refused where it arrived: nothing more is sent
    bool abandoned = false;         // failed or flushed: the sender stopped booking it
  };

  // A request in the QP's send queue: WRITE data, or (write null) a READ request.
  struct Send {
    std::shared_ptr<WriteStream> write;
    RdmaOp op;
    std::shared_ptr<Batch> batch;
    std::size_t index = 0;
  };

  const NicParams& params() const { return local_.fabric().params(); }
  // A QP's WRITE data streams on this TX and the peer's RX, its READ
  // responses on the peer's TX and this RX: transfers there take turns.
  void write_streaming(bool on) { streaming(local_.tx(), remote_.rx(), on); }
  void read_streaming(bool on) { streaming(remote_.tx(), local_.rx(), on); }
  static void streaming(PortTimeline& a, PortTimeline& b, bool on) {
    if (on) {
      a.join();
      b.join();
    } else {
      a.leave();
      b.leave();
    }
  }
  EventLoop& loop() { return local_.fabric().world().loop(); }
  bool partitioned() {
    auto& net = local_.fabric().world().network();
    return net.partitioned(local_.node()) || net.partitioned(remote_.node());
  }
  // The QP `batch` went out on went with the peer's process, or none listens.
  bool peer_gone(const Batch& batch) const {
    return batch.process != remote_.process_count() || !remote_.accepting();
  }

  void start(const RdmaOp& op, std::shared_ptr<Batch> batch, std::size_t index) {
    auto self = shared_from_this();
    // The rkey is checked for wire_length() bytes: a longer buffer would move
    // bytes past them. Only a longer wire (a sampled payload) is the sim's own.
    if (op.length != 0 && op.length < op.local.size()) {
      finish_op(batch, index,
                Error(ErrorCode::kBadRequest, "RDMA op length " + std::to_string(op.length) +
                                                  " is shorter than its local buffer (" +
                                                  std::to_string(op.local.size()) + " bytes)"),
                loop().now());
      return;
    }
    if (op.wire_length() == 0) {
      finish_op(batch, index, Error(ErrorCode::kBadRequest, "RDMA op of zero bytes"), loop().now());
      return;
    }
    Send send{nullptr, op, std::move(batch), index};
    if (op.kind == RdmaOp::Kind::kWrite) {
      // Copied at post: the NIC reads the local buffer as it sends.
      send.write = std::make_shared<WriteStream>();
      send.write->op = op;
      send.write->payload = std::make_shared<std::string>(
          reinterpret_cast<const char*>(op.local.data()), op.local.size());
      send.write->batch = send.batch;
      send.write->index = index;
    }
    sends_.push_back(std::move(send));
    if (!sending_) send_next();
  }

  // A QP sends its requests in order: WRITE data segment by segment through
  // this port's TX into the peer's RX, each in the first gap both have; a READ
  // request after the data of the WRITEs posted before it. A WRITE alone on
  // its ports books up to kBookAhead at once; while another transfer streams
  // on one of them it books a segment at a time, so transfers in flight take
  // turns segment by segment (the fair share DESIGN.md asks for).
  void send_next() {
    sending_ = true;
    const Instant now = loop().now();
    auto self = shared_from_this();
    while (!sends_.empty()) {
      Send& s = sends_.front();
      if (!s.write) {
        const Instant tx_start = std::max(now, write_tx_free_) + params().per_op;
        write_tx_free_ = tx_start;  // each work request pays per_op in posting order
        loop().schedule_at(tx_start + params().latency,
                           [self, op = s.op, batch = std::move(s.batch), index = s.index] {
                             self->read_arrived(op, batch, index);
                           });
        sends_.pop_front();
        continue;
      }
      WriteStream& w = *s.write;
      const std::uint64_t total = w.op.wire_length();
      const bool first = w.arrivals.empty();
      // A WRITE refused at the responder, or flushed behind a failure, sends
      // nothing more (the QP is in the error state): its data holds no port.
      if (w.failed || flushed_by(w.batch->first_seq + w.index)) {
        w.abandoned = true;
        if (first) {
          loop().schedule_after(params().latency,
                                [self, stream = s.write] { self->write_arrived(stream); });
        } else {
          write_streaming(false);
        }
        if (write_waits_for_sender_) {
          write_waits_for_sender_ = false;
          apply_writes();
        }
        sends_.pop_front();
        continue;
      }
      if (first) {
        write_streaming(true);
      }
      const bool shared = local_.tx().shared() || remote_.rx().shared();
      const std::uint64_t budget = shared ? params().stream_segment_bytes : kBookAhead;
      Instant earliest = std::max(now, write_tx_free_) + (first ? params().per_op : Duration(0));
      std::uint64_t booked = 0;
      do {
        const std::uint64_t len = std::min(params().stream_segment_bytes, total - w.sent);
        // Cumulative rounding: a WRITE booked without gaps takes wire_time(total).
        const Duration wire = wire_time(w.sent + len, params().bytes_per_second) -
                              wire_time(w.sent, params().bytes_per_second);
        const Instant tx = book_both(local_.tx(), remote_.rx(), earliest, wire, now);
        write_tx_free_ = tx + wire;
        earliest = write_tx_free_;
        w.starts.push_back(tx);
        w.arrivals.push_back(write_tx_free_ + params().latency);
        w.sent += len;
        booked += len;
      } while (w.sent < total && booked < budget);
      if (first) {
        loop().schedule_at(w.arrivals.front(),
                           [self, stream = s.write] { self->write_arrived(stream); });
      }
      // The responder may be waiting for a segment that was not booked yet.
      if (write_waits_for_sender_) {
        write_waits_for_sender_ = false;
        apply_writes();
      }
      if (w.sent < total) {
        wake_sender_at(write_tx_free_);
        return;
      }
      write_streaming(false);
      sends_.pop_front();
    }
    sending_ = false;
  }

  // Where the responder executes an op: nothing for an op flushed by an earlier
  // failure; a failure here breaks the QP (RC: the QP goes to the error state).
  const SimNic::Exposed* check(const RdmaOp& op, unsigned access, std::shared_ptr<Batch> batch,
                               std::size_t index) {
    const std::uint64_t seq = batch->first_seq + index;
    if (auto flushed = flushed_by(seq)) {
      finish_op(batch, index, *flushed, loop().now() + params().latency);
      return nullptr;
    }
    if (partitioned()) {
      fail(batch, index, Error(ErrorCode::kUnavailable, "RDMA peer unreachable"));
      return nullptr;
    }
    if (peer_gone(*batch)) {
      fail(batch, index,
           Error(ErrorCode::kUnavailable, "RDMA connection lost: the peer's process ended"));
      return nullptr;
    }
    const auto* exposed = remote_.find(op.rkey, op.remote_addr, op.wire_length(), access);
    if (!exposed) {
      local_.fabric().count_remote_access_error();
      fail(batch, index,
           Error(ErrorCode::kRemoteAccess, "remote access error: rkey " + std::to_string(op.rkey) +
                                               " does not cover the range"));
    }
    return exposed;
  }

  // An op failed at the responder: the QP is in the error state, so every op
  // posted behind it that has not been reported is flushed, run or not (verbs:
  // WR_FLUSH_ERR, which the verbs NIC reports as `unavailable`), and the next
  // post reconnects (docs/simulator.md).
  void fail(std::shared_ptr<Batch> batch, std::size_t index, Status why) {
    const std::uint64_t seq = batch->first_seq + index;
    // Only the connection the op went out on: ops posted after a reconnect since run.
    auto reconnect = reconnects_.upper_bound(seq);
    const std::uint64_t to = reconnect == reconnects_.end() ? next_post_seq_ : *reconnect;
    if (seq + 1 < to) {
      // A failure found late (a READ's registration checked again as it ends)
      // may cover ranges of later failures: one range per op, for one lookup.
      flushes_.erase(flushes_.lower_bound(seq + 1), flushes_.lower_bound(to));
      const Status flushed(Error(ErrorCode::kUnavailable,
                                 "flushed: an earlier RDMA op failed (" + why.message() +
                                     "); it may have run; the queue pair reconnects on the next "
                                     "post"));
      flushes_[seq + 1] = {to, flushed};
      // Ops behind it that already ran wait to be reported in order: as on an
      // RC QP in the error state, they complete flushed too, whatever they did.
      // (Not one refused at posting, bad_request: it never became a work request.)
      for (auto it = finished_.upper_bound(seq); it != finished_.end() && it->first < to; ++it) {
        if (it->second.status.code() != ErrorCode::kBadRequest) it->second.status = flushed;
      }
    }
    if (reconnect == reconnects_.end()) broken_ = true;
    finish_op(std::move(batch), index, std::move(why), loop().now() + params().latency);
  }

  // The flush status of op `seq`, if an earlier failure flushed it.
  std::optional<Status> flushed_by(std::uint64_t seq) {
    // Flushes whose ops have all been reported are done with.
    while (!flushes_.empty() && flushes_.begin()->second.first <= next_completion_seq_) {
      flushes_.erase(flushes_.begin());
    }
    auto it = flushes_.upper_bound(seq);
    if (it == flushes_.begin()) return std::nullopt;
    --it;
    if (seq >= it->second.first) return std::nullopt;
    return it->second.second;
  }

  // A WRITE's data lands in order (RC), segment by segment: the device is asked
  // for a segment when it has arrived and the one before it is in -- never
  // ahead of time, so write-allocate fills and the write-backs they cause are
  // booked on the flash in time order with other requesters' fills.
  struct PendingWrite {
    std::shared_ptr<WriteStream> stream;
    runtime::MemoryPool* pool = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t next = 0;  // next segment's byte offset within the WRITE
  };

  void write_arrived(const std::shared_ptr<WriteStream>& stream) {
    const auto* exposed =
        check(stream->op, runtime::kAccessRemoteWrite, stream->batch, stream->index);
    if (!exposed) {
      stop_sending(*stream);
      return;
    }
    const std::uint64_t offset =
        exposed->pool_offset + (stream->op.remote_addr - exposed->reg.addr);
    writes_.push_back({stream, exposed->pool, offset, 0});
    ++writes_accepted_;
    if (!write_applying_) apply_writes();
  }

  // Applies arrived segments; otherwise waits (one event) until the next
  // segment has arrived and the one before it is in, or (no event) until the
  // sender has booked it.
  void apply_writes() {
    write_applying_ = true;
    const Instant now = loop().now();
    while (!writes_.empty()) {
      PendingWrite& w = writes_.front();
      const RdmaOp& op = w.stream->op;
      const std::uint64_t seg = params().stream_segment_bytes;
      const std::uint64_t len = std::min(seg, op.wire_length() - w.next);
      const std::size_t k = static_cast<std::size_t>(w.next / seg);
      const bool booked = k < w.stream->arrivals.size();
      if (!booked && !w.stream->abandoned) {
        write_waits_for_sender_ = true;
        write_applying_ = false;
        return;
      }
      const Instant at = std::max(booked ? w.stream->arrivals[k] : now, last_write_applied_);
      if (at > now) {
        auto self = shared_from_this();
        loop().schedule_at(at, [self] { self->apply_writes(); });
        return;
      }
      // A WRITE whose registration went (or whose peer was cut off) since it
      // arrived is refused by the responder: the device is asked nothing more,
      // and land_write reports why.
      const bool accepted = !partitioned() && !peer_gone(*w.stream->batch) &&
                            !flushed_by(w.stream->batch->first_seq + w.stream->index) &&
                            remote_.find(op.rkey, op.remote_addr, op.wire_length(),
                                         runtime::kAccessRemoteWrite) != nullptr;
      // A segment waits for the device (write-allocate fills).
      auto* timing = dynamic_cast<MemoryTiming*>(w.pool);
      const Instant ready =
          accepted && timing && len > 0
              ? std::max(now, timing->access_ready(w.offset + w.next, len, true, now))
              : now;
      last_write_applied_ = ready;
      if (!accepted) stop_sending(*w.stream);
      w.next = accepted ? w.next + len : op.wire_length();
      if (w.next >= op.wire_length()) {
        finish_write(std::move(w), ready);
        writes_.pop_front();
      }
    }
    write_applying_ = false;
  }

  // A WRITE refused at the responder (RC: a NAK; the QP goes to the error
  // state): the sender learns it one latency later and sends nothing more, so
  // its segments booked to start after that give their port time back.
  void stop_sending(WriteStream& w) {
    if (w.failed) return;
    w.failed = true;
    const Instant nak = loop().now() + params().latency;
    std::size_t kept = w.starts.size();
    while (kept > 0 && w.starts[kept - 1] >= nak) --kept;
    if (kept == w.starts.size()) return;
    const Instant booked_end = w.arrivals.back() - params().latency;
    for (std::size_t k = kept; k < w.starts.size(); ++k) {
      const Duration len = w.arrivals[k] - params().latency - w.starts[k];
      local_.tx().release(w.starts[k], len);
      remote_.rx().release(w.starts[k], len);
    }
    // Nothing of this QP was booked behind it: its send queue is free at the NAK.
    if (write_tx_free_ == booked_end) {
      write_tx_free_ = kept > 0 ? std::max(nak, w.arrivals[kept - 1] - params().latency) : nak;
      if (sending_ && !sends_.empty() && sends_.front().write.get() == &w) {
        wake_sender_at(write_tx_free_);
      }
    }
  }

  // One wake of send_next pending at a time: a newer one replaces it.
  void wake_sender_at(Instant at) {
    auto self = shared_from_this();
    const std::uint64_t wake = ++sender_wake_;
    loop().schedule_at(at, [self, wake] {
      if (wake == self->sender_wake_) self->send_next();
    });
  }

  void finish_write(PendingWrite w, Instant applied) {
    auto self = shared_from_this();
    loop().schedule_at(applied, [self, w = std::move(w)] {
      self->land_write(w);
      // READs posted after this WRITE may read now (RC).
      ++self->writes_landed_;
      if (!self->read_fetching_ && !self->reads_.empty()) self->fetch_reads();
    });
  }

  void land_write(const PendingWrite& w) {
    const WriteStream& s = *w.stream;
    // The registration may have gone while the device filled the pages.
    const auto* still = check(s.op, runtime::kAccessRemoteWrite, s.batch, s.index);
    if (!still) return;
    const auto payload =
        std::as_bytes(std::span(*s.payload));  // <= wire_length(): start() refuses more
    auto* timing = dynamic_cast<MemoryTiming*>(still->pool);
    if (!timing || !timing->land_write(w.offset, s.op.wire_length(), payload, loop().now())) {
      (void)still->pool->write(w.offset, payload);
    }
    finish_op(s.batch, s.index, Status(), loop().now() + params().latency);
  }

  // A READ responder serves one READ of the QP at a time, in order (RC). It asks
  // the device for a segment when it fetches it -- after the previous segment's
  // data is in -- never for later segments or later READs ahead of time, so the
  // device sees its demand reads in time order, as a DMA engine issues them.
  struct PendingRead {
    RdmaOp op;
    std::shared_ptr<Batch> batch;
    std::size_t index = 0;
    runtime::MemoryPool* pool = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t next = 0;  // next segment's byte offset within the READ
    // The responder executes a QP's requests in order: the READ reads nothing
    // before the WRITEs that came before it are in memory (RC).
    std::uint64_t writes_before = 0;
  };

  void read_arrived(const RdmaOp& op, std::shared_ptr<Batch> batch, std::size_t index) {
    const auto* exposed = check(op, runtime::kAccessRemoteRead, batch, index);
    if (!exposed) return;
    const std::uint64_t offset = exposed->pool_offset + (op.remote_addr - exposed->reg.addr);
    if (reads_.empty()) {
      read_streaming(true);
    }
    reads_.push_back({op, std::move(batch), index, exposed->pool, offset, 0, writes_accepted_});
    if (!read_fetching_) fetch_reads();
  }

  // Fetches segments while the device has them at once; otherwise waits (one
  // event) for the segment's data before fetching the next, of this READ or the next.
  void fetch_reads() {
    read_fetching_ = true;
    const Instant now = loop().now();
    while (!reads_.empty()) {
      PendingRead& r = reads_.front();
      if (r.next == 0 && writes_landed_ < r.writes_before) {
        read_fetching_ = false;  // the WRITE landing calls again
        return;
      }
      if (flushed_by(r.batch->first_seq + r.index)) {
        // Flushed behind a failure: the responder sends nothing for it.
        (void)check(r.op, runtime::kAccessRemoteRead, r.batch, r.index);
        pop_read();
        continue;
      }
      auto* timing = dynamic_cast<MemoryTiming*>(r.pool);
      // The response stream may not start before the READ reached the responder.
      if (r.next == 0) read_tx_free_ = std::max(read_tx_free_, now);
      const std::uint64_t len =
          std::min(params().stream_segment_bytes, r.op.wire_length() - r.next);
      const Instant ready = timing ? timing->access_ready(r.offset + r.next, len, false, now) : now;
      // The device holds each early segment until it is in (PAPER P6); responses
      // of one QP leave in order at line rate, sharing the responder's TX and
      // the requester's RX with the other QPs on those ports.
      // Cumulative rounding, as for WRITEs: a READ streamed without gaps takes wire_time(total).
      const Duration wire = wire_time(r.next + len, params().bytes_per_second) -
                            wire_time(r.next, params().bytes_per_second);
      read_tx_free_ =
          book_both(remote_.tx(), local_.rx(), std::max(ready, read_tx_free_), wire, now) + wire;
      r.next += len;
      if (r.next >= r.op.wire_length()) {
        finish_read(r);
        pop_read();
      }
      if (ready > now + kFetchSlack) {
        auto self = shared_from_this();
        loop().schedule_at(ready, [self] { self->fetch_reads(); });
        return;
      }
      // Sharing a port with another transfer: the next segment takes its turn
      // when this one has left, so transfers in flight alternate (fair share).
      if (!reads_.empty() && (remote_.tx().shared() || local_.rx().shared())) {
        auto self = shared_from_this();
        loop().schedule_at(read_tx_free_, [self] { self->fetch_reads(); });
        return;
      }
    }
    read_fetching_ = false;
  }

  // The front READ is done with: the ports are free of this QP's responses
  // once no READ is left.
  void pop_read() {
    reads_.pop_front();
    if (reads_.empty()) read_streaming(false);
  }

  void finish_read(const PendingRead& r) {
    auto self = shared_from_this();
    loop().schedule_at(
        read_tx_free_, [self, op = r.op, batch = r.batch, index = r.index, offset = r.offset] {
          const auto* still = self->check(op, runtime::kAccessRemoteRead, batch, index);
          if (!still) return;
          Status read;
          if (*self->alive_) read = still->pool->read(offset, op.local);
          if (auto* timing = dynamic_cast<MemoryTiming*>(still->pool)) {
            if (read.ok() && timing->lost(offset, op.wire_length())) {
              read = Error(ErrorCode::kIoError, "bytes lost in a device reset");
            }
            timing->accessed(offset, op.wire_length(), false, self->loop().now());
          }
          // Memory that cannot be read (poison) fails the READ at the responder,
          // as verbs reports a remote operation error.
          if (!read.ok()) {
            return self->fail(
                batch, index,
                Error(ErrorCode::kRemoteAccess, "remote operation error: " + read.message()));
          }
          self->finish_op(batch, index, read, self->loop().now() + self->params().latency);
        });
  }

  // Completions are delivered in posting order (an RC send queue): an op that
  // finished before one posted ahead of it (a WRITE to resident pages behind a
  // READ of cold ones) is reported after it.
  void finish_op(std::shared_ptr<Batch> batch, std::size_t index, Status status, Instant at) {
    const std::uint64_t seq = batch->first_seq + index;
    finished_.emplace(seq, Finished{std::move(batch), index, std::move(status), at});
    for (auto it = finished_.begin(); it != finished_.end() && it->first == next_completion_seq_;
         it = finished_.erase(it), ++next_completion_seq_) {
      Finished& f = it->second;
      const Instant when = std::max(f.at, last_completion_);
      last_completion_ = when;
      auto self = shared_from_this();
      loop().schedule_at(
          when, [self, batch = std::move(f.batch), index = f.index, status = std::move(f.status)] {
            if (index < batch->statuses.size()) batch->statuses[index] = status;  // else empty
            if (--batch->remaining == 0) self->complete_batch(batch);
          });
    }
  }

  void complete_batch(std::shared_ptr<Batch> batch) {
    if (!*alive_) return;
    // Completions decide load times: a change in when (or how) one ends must
    // change the hash, not only the run's numbers.
    std::size_t failed = 0;
    for (const Status& st : batch->statuses) failed += st.ok() ? 0 : 1;
    SimWorld& world = local_.fabric().world();
    world.trace().record(world.loop().now().count(),
                         "rdma done " + local_.node() + "->" + remote_.node() +
                             " ops=" + std::to_string(batch->statuses.size()) +
                             " failed=" + std::to_string(failed));
    auto done = std::move(batch->done);
    auto statuses = std::move(batch->statuses);
    strand_.run_inline([done, statuses] { done(statuses); });
  }

  SimNic& local_;
  SimNic& remote_;
  SimStrand& strand_;
  std::shared_ptr<bool> alive_;
  std::string proof_;             // the connect's private data, sent again on a reconnect
  std::uint64_t remote_process_;  // the peer's process the current connection was made with
  Instant write_tx_free_{0};
  Instant last_write_applied_{0};    // when the last segment asked of the device is in
  std::deque<PendingWrite> writes_;  // WRITEs of this QP not yet fully applied
  bool write_applying_ = false;
  bool write_waits_for_sender_ = false;  // apply_writes needs a segment not yet booked
  std::deque<Send> sends_;               // requests not yet (fully) on the wire
  bool sending_ = false;
  std::uint64_t sender_wake_ = 0;  // the pending wake of send_next that counts
  // What a transfer alone on its ports books at once (one event per this much).
  static constexpr std::uint64_t kBookAhead = std::uint64_t{4} << 20;
  std::uint64_t writes_accepted_ = 0;  // WRITEs that reached the responder
  std::uint64_t writes_landed_ = 0;    // of those, in memory (or failed there)
  Instant read_tx_free_{0};
  Instant last_completion_{0};
  // An op finished before the ops posted ahead of it waits here, by posting order.
  struct Finished {
    std::shared_ptr<Batch> batch;
    std::size_t index = 0;
    Status status;
    Instant at{0};
  };
  std::map<std::uint64_t, Finished> finished_;
  // Ops [from, to) flushed by a failure before them: from -> (to, status).
  std::map<std::uint64_t, std::pair<std::uint64_t, Status>> flushes_;
  bool broken_ = false;                 // a failure since the last post: the next one reconnects
  std::set<std::uint64_t> reconnects_;  // first seq posted on each new connection
  std::uint64_t next_post_seq_ = 0;
  std::uint64_t next_completion_seq_ = 0;
  std::deque<PendingRead> reads_;  // READs of this QP not yet fully fetched
  bool read_fetching_ = false;
  // A segment ready within this of its fetch is taken as a plain memory access
  // (DRAM load-to-use), so all-DRAM reads cost no event per segment.
  static constexpr Duration kFetchSlack = std::chrono::microseconds(1);
};

SimFabric::~SimFabric() = default;

SimNic& SimFabric::add_nic(const std::string& node) {
  auto& slot = nics_[node];
  if (!slot) slot = std::make_unique<SimNic>(*this, node);
  return *slot;
}

SimNic* SimFabric::nic(const std::string& node) {
  auto it = nics_.find(node);
  return it == nics_.end() ? nullptr : it->second.get();
}

Result<runtime::Registration> SimNic::register_memory(runtime::MemoryPool& pool,
                                                      std::uint64_t offset, std::uint64_t length,
                                                      unsigned access) {
  if (offset > pool.size() || length > pool.size() - offset || length == 0) {
    return Error(ErrorCode::kBadRange, "registration outside the pool");
  }
  const std::uint32_t rkey = next_rkey_++;
  Exposed exposed{&pool, offset, {kAddressBase + offset, rkey, length}, access};
  exposed_[rkey] = exposed;
  SimWorld& world = fabric_.world();
  world.trace().record(world.loop().now().count(),
                       "rdma reg " + node_ + " rkey=" + std::to_string(rkey) +
                           " off=" + std::to_string(offset) + " len=" + std::to_string(length));
  return exposed.reg;
}

Status SimNic::deregister(const runtime::Registration& registration) {
  // As the verbs NIC: an rkey alone names no registration (rkeys come back).
  auto it = exposed_.find(registration.rkey);
  if (it == exposed_.end() || it->second.reg.addr != registration.addr ||
      it->second.reg.length != registration.length) {
    return Error(ErrorCode::kNotFound, "no registration with rkey " +
                                           std::to_string(registration.rkey) +
                                           " at that address and length");
  }
  exposed_.erase(it);
  SimWorld& world = fabric_.world();
  world.trace().record(world.loop().now().count(),
                       "rdma dereg " + node_ + " rkey=" + std::to_string(registration.rkey));
  return {};
}

const SimNic::Exposed* SimNic::find(std::uint32_t rkey, std::uint64_t addr, std::uint64_t length,
                                    unsigned access) const {
  auto it = exposed_.find(rkey);
  if (it == exposed_.end()) return nullptr;
  const Exposed& e = it->second;
  if ((e.access & access) != access) return nullptr;
  if (addr < e.reg.addr || addr - e.reg.addr > e.reg.length ||
      length > e.reg.length - (addr - e.reg.addr)) {
    return nullptr;
  }
  return &e;
}

void SimNic::end_process() {
  exposed_.clear();  // its memory registrations die with it, deregistered or not
  ++process_count_;
  process_ended_at_ = fabric_.world().loop().now();
}

void SimNic::connect(const std::string& endpoint, runtime::Strand& strand, ConnectHandler done) {
  connect_with_proof(endpoint, strand, std::string(), std::move(done));
}

void SimNic::connect_with_proof(const std::string& endpoint, runtime::Strand& strand,
                                std::string proof, ConnectHandler done) {
  auto& sim_strand = static_cast<SimStrand&>(strand);
  // rdma_cm pads the private data of an RC connect to its full size with zeros.
  if (proof.size() > kMaxConnectProofBytes) {
    return sim_strand.post(
        [done] { done(Error(ErrorCode::kBadRequest, "a connect proof is at most 56 bytes")); });
  }
  proof.resize(kMaxConnectProofBytes, '\0');
  auto alive = sim_strand.alive_token();
  // rdma_cm address + route resolution and the connect handshake: ~2 round trips.
  const Duration setup = fabric_.params().latency * 4;
  fabric_.world().loop().schedule_after(setup, [this, endpoint, &sim_strand, alive, done,
                                                proof = std::move(proof)] {
    if (!*alive) return;
    SimNic* remote = fabric_.nic(endpoint);
    auto& net = fabric_.world().network();
    if (!remote || !remote->accepting() || net.partitioned(node_) || net.partitioned(endpoint)) {
      sim_strand.run_inline([done, endpoint] {
        done(Error(ErrorCode::kUnavailable, "no RDMA peer reachable at '" + endpoint + "'"));
      });
      return;
    }
    if (remote->connect_check_ && !remote->connect_check_(proof)) {
      sim_strand.run_inline([done, endpoint] {
        done(Error(ErrorCode::kUnauthenticated,
                   "the RDMA peer at '" + endpoint + "' rejected the connect: no valid proof"));
      });
      return;
    }
    auto qp = std::make_shared<SimQueuePair>(*this, *remote, sim_strand, proof);
    sim_strand.run_inline([done, qp] { done(std::shared_ptr<runtime::QueuePair>(qp)); });
  });
}

}  // namespace rcxl::sim
