#include "devices/cxl_ssd_model/store_bandwidth.h"

#include <algorithm>
#include <optional>

#include "backends/sim/sim_nic.h"
#include "backends/sim/sim_world.h"

namespace rcxl::device {

namespace {

constexpr std::uint64_t kStoredBytesPerWrite = 4096;

double gbps(std::uint64_t bytes, runtime::Duration d) {
  return d.count() > 0 ? static_cast<double>(bytes) / static_cast<double>(d.count()) : 0.0;
}

nlohmann::json run_json(const StoreBandwidthRun& run) {
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& s : run.samples) samples.push_back({{"t_ms", s.t_ms}, {"gbps", s.gbps}});
  return {{"gbps", run.gbps},
          {"elapsed_ms", run.elapsed_ms},
          {"ok", run.ok},
          {"fills", run.counters.fills},
          {"write_allocate_fills", run.counters.write_allocate_fills},
          {"samples", samples}};
}

}  // namespace

StoreBandwidthRun run_store_bandwidth(const DeviceProfile& profile,
                                      const StoreBandwidthOptions& options, bool prepared) {
  StoreBandwidthRun run;
  const std::uint64_t write_bytes = std::max<std::uint64_t>(1, options.write_bytes);
  const std::uint64_t batch_bytes =
      std::max(write_bytes, options.batch_bytes / write_bytes * write_bytes);
  const std::uint64_t total = options.total_bytes / write_bytes * write_bytes;
  if (total == 0 || total > profile.device.capacity_bytes) {
    run.failure = "its store of " + std::to_string(total) + " bytes does not fit the device's " +
                  std::to_string(profile.device.capacity_bytes) + " (device.capacity_bytes)";
    return run;
  }

  sim::SimWorld world(options.seed);
  sim::SimFabric fabric(world, profile.nic);
  world.add_node("mem");
  sim::SimNode& gpu = world.add_node("gpu");
  sim::SimNic& mem_nic = fabric.add_nic("mem");
  sim::SimNic& gpu_nic = fabric.add_nic("gpu");
  CxlSsdDevice device(world.loop(), profile.device);
  auto reg = mem_nic.register_memory(device, 0, total,
                                     runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite);
  if (!reg.ok()) {
    run.failure = "the device could not be registered: " + reg.status().message();
    return run;
  }
  auto strand = gpu.make_strand("store");
  std::shared_ptr<runtime::QueuePair> qp;
  gpu_nic.connect("mem", *strand, [&](Result<std::shared_ptr<runtime::QueuePair>> r) {
    if (r.ok()) qp = r.value();
  });
  if (!world.run_until([&] { return qp != nullptr; }).ok()) {
    run.failure = "the queue pair did not connect";
    return run;
  }

  // The store's payload: a distinct byte per WRITE so the check below means something.
  // Payload-sampled: each WRITE is timed at full length, its first bytes stored.
  const std::uint64_t stored = std::min<std::uint64_t>(write_bytes, kStoredBytesPerWrite);
  std::vector<std::vector<std::byte>> payloads(256, std::vector<std::byte>(stored));
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    std::fill(payloads[i].begin(), payloads[i].end(), std::byte(i));
  }
  const Instant start = world.loop().now();
  if (prepared) {
    const PoolRange whole{0, total};
    (void)device.prepare_write(1, std::span(&whole, 1));  // the store's write hint
  }
  std::size_t batches_done = 0;
  bool all_ok = true;
  Instant last = start;
  const std::size_t batches = (total + batch_bytes - 1) / batch_bytes;
  for (std::uint64_t b = 0; b < total; b += batch_bytes) {
    std::vector<runtime::RdmaOp> ops;
    const std::uint64_t end = std::min(total, b + batch_bytes);
    for (std::uint64_t o = b; o < end; o += write_bytes) {
      auto& payload = payloads[(o / write_bytes) % payloads.size()];
      ops.push_back(
          {runtime::RdmaOp::Kind::kWrite, payload, reg->addr + o, reg->rkey, write_bytes});
    }
    const std::uint64_t bytes = end - b;
    qp->post(std::move(ops), [&, bytes](const std::vector<Status>& statuses) {
      for (const auto& s : statuses) all_ok = all_ok && s.ok();
      const Instant now = world.loop().now();
      run.samples.push_back({runtime::to_millis(now - start), gbps(bytes, now - last)});
      last = now;
      ++batches_done;
    });
  }
  if (!world.run_until([&] { return batches_done == batches; }).ok()) {
    run.failure = "its WRITEs did not complete";
    return run;
  }
  run.elapsed_ms = runtime::to_millis(last - start);
  run.gbps = gbps(total, last - start);
  run.counters = device.counters();
  // The last WRITE's bytes must be what the device now returns.
  std::vector<std::byte> back(stored);
  const std::uint64_t last_off = total - write_bytes;
  const bool wrote = all_ok;
  all_ok = all_ok && device.read(last_off, back).ok() &&
           back == payloads[(last_off / write_bytes) % payloads.size()];
  run.ok = all_ok;
  if (!run.ok) {
    run.failure =
        wrote ? "the device returned other bytes than the last WRITE's" : "a WRITE failed";
  }
  return run;
}

StoreBandwidthResult measure_store_bandwidth(const DeviceProfile& profile,
                                             const StoreBandwidthOptions& options) {
  return {run_store_bandwidth(profile, options, false),
          run_store_bandwidth(profile, options, true)};
}

nlohmann::json to_json(const StoreBandwidthResult& result) {
  return {{"unprepared_gbps", result.unprepared.gbps},
          {"prepared_gbps", result.prepared.gbps},
          {"unprepared", run_json(result.unprepared)},
          {"prepared", run_json(result.prepared)}};
}

}  // namespace rcxl::device
