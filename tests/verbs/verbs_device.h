// Device tests need an RDMA device: RCXL_RDMA_DEVICE names it (ci/rxe-vm sets
// rxe0 inside a SoftRoCE VM). Without one they skip and say how to run them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/verbs/verbs_nic.h"

namespace rcxl::verbs::testing {

// Empty when device tests must skip; `why` then says so.
inline std::string rdma_test_device(std::string& why) {
  const char* name = std::getenv("RCXL_RDMA_DEVICE");
  if (!name || !*name) {
    why = "RCXL_RDMA_DEVICE is unset: device tests run inside the SoftRoCE VM (ci/rxe-vm)";
    return {};
  }
  auto devices = rdma_device_names();
  if (std::find(devices.begin(), devices.end(), name) == devices.end()) {
    why = std::string("RDMA device ") + name + " not present (" + std::to_string(devices.size()) +
          " devices): run ci/rxe-vm";
    return {};
  }
  return name;
}

}  // namespace rcxl::verbs::testing
