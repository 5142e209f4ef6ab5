#include "scenarios/checked_runtime.h"

#include <utility>
#include <vector>

#include "core/protocol/frame_codec.h"

namespace rcxl::scenarios {

namespace {

// One accepted connection: frames in are shown before the agent reads them,
// frames out before they leave. Bytes pass unchanged.
class CheckedConn final : public runtime::Conn {
 public:
  CheckedConn(std::shared_ptr<runtime::Conn> inner, InvariantMonitor& monitor)
      : inner_(std::move(inner)),
        monitor_(monitor),
        in_(std::make_shared<Inbound>(monitor, inner_->id())) {}

  std::uint64_t id() const override { return inner_->id(); }
  runtime::Address peer() const override { return inner_->peer(); }
  runtime::Address local() const override { return inner_->local(); }
  void start(runtime::Strand& strand, DataHandler on_data, CloseHandler on_close) override {
    // The inbound watch lives as long as the stream may still deliver.
    inner_->start(
        strand,
        [in = in_, on_data = std::move(on_data)](std::string_view bytes) {
          for (const auto& frame : frames(in->decoder, bytes)) {
            in->monitor.on_agent_frame_in(in->conn, frame);
          }
          on_data(bytes);
        },
        [in = in_, on_close = std::move(on_close)](const Status& reason) {
          in->monitor.on_agent_wire_closed(in->conn);
          on_close(reason);
        });
  }
  void send(std::string bytes) override {
    for (const auto& frame : frames(out_, bytes)) monitor_.on_agent_frame_out(inner_->id(), frame);
    inner_->send(std::move(bytes));
  }
  void close() override { inner_->close(); }
  void abort() override { inner_->abort(); }
  void set_reading(bool on) override { inner_->set_reading(on); }
  void set_input_end_handler(InputEndHandler h) override {
    inner_->set_input_end_handler(std::move(h));
  }

 private:
  // A stream the agent will refuse as a bad frame shows nothing more.
  static std::vector<std::string> frames(protocol::FrameDecoder& decoder, std::string_view bytes) {
    std::vector<std::string> out;
    (void)decoder.feed(bytes, out);
    return out;
  }

  // The agent reads frames of any size it accepts; the watch must not cut them.
  struct Inbound {
    Inbound(InvariantMonitor& m, std::uint64_t c) : monitor(m), conn(c) {}
    InvariantMonitor& monitor;
    std::uint64_t conn;
    protocol::FrameDecoder decoder{UINT32_MAX};
  };

  std::shared_ptr<runtime::Conn> inner_;
  InvariantMonitor& monitor_;
  std::shared_ptr<Inbound> in_;
  protocol::FrameDecoder out_{UINT32_MAX};
};

}  // namespace

class CheckedRuntime::Transport final : public runtime::Transport {
 public:
  Transport(runtime::Transport& inner, InvariantMonitor& monitor)
      : inner_(inner), monitor_(monitor) {}

  Result<std::unique_ptr<runtime::Listener>> listen(const runtime::Address& address,
                                                    runtime::Strand& strand,
                                                    AcceptHandler on_accept) override {
    return inner_.listen(
        address, strand,
        [this, on_accept = std::move(on_accept)](std::shared_ptr<runtime::Conn> c) {
          on_accept(std::make_shared<CheckedConn>(std::move(c), monitor_));
        });
  }
  // The agent's own connections out (none today) are not watched.
  void connect(const runtime::Address& address, runtime::Strand& strand,
               ConnectHandler on_connected) override {
    inner_.connect(address, strand, std::move(on_connected));
  }

 private:
  runtime::Transport& inner_;
  InvariantMonitor& monitor_;
};

CheckedRuntime::CheckedRuntime(runtime::Runtime& inner, InvariantMonitor& monitor)
    : inner_(inner), transport_(std::make_unique<Transport>(inner.transport(), monitor)) {}

CheckedRuntime::~CheckedRuntime() = default;

runtime::Transport& CheckedRuntime::transport() {
  return *transport_;
}

}  // namespace rcxl::scenarios
