// The device rule of worker/worker_device.h on every branch, with the visible CUDA device count
// as a parameter (no GPU needed), and the --print-device report built from it.
#include "worker/worker_device.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace retort::worker {
namespace {

std::string Message(const StatusOr<std::string>& r) { return std::string(r.status().message()); }

TEST(WorkerDeviceTest, AutoIsTheCpuWithoutAGpu) {
  EXPECT_EQ(*ResolveDevice("auto", 0, 0), "cpu");
  EXPECT_EQ(*ResolveDevice("auto", 7, 0), "cpu");
  EXPECT_EQ(*ResolveDevice("", 1, 0), "cpu");
}

TEST(WorkerDeviceTest, OneVisibleGpuIsCuda0WhateverTheLocalRank) {
  // One GPU per pod (the StatefulSet index is the local rank) or per task.
  for (const char* spec : {"auto", "cuda"})
    for (int rank : {0, 1, 5, 4095}) EXPECT_EQ(*ResolveDevice(spec, rank, 1), "cuda:0") << spec;
}

TEST(WorkerDeviceTest, LocalRankBelowTheVisibleCountPicksThatGpu) {
  EXPECT_EQ(*ResolveDevice("auto", 0, 2), "cuda:0");
  EXPECT_EQ(*ResolveDevice("auto", 1, 2), "cuda:1");
  EXPECT_EQ(*ResolveDevice("cuda", 7, 8), "cuda:7");
}

TEST(WorkerDeviceTest, LocalRankNotBelowTheVisibleCountNamesBothCounts) {
  for (const char* spec : {"auto", "cuda"}) {
    auto r = ResolveDevice(spec, 4, 2);  // local rank 4 on a node where the process sees 2 GPUs
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(Message(r).find("local rank 4"), std::string::npos) << r.status();
    EXPECT_NE(Message(r).find("sees 2 CUDA devices"), std::string::npos) << r.status();
    EXPECT_NE(Message(r).find("--device " + std::string(spec)), std::string::npos) << r.status();
  }
  EXPECT_FALSE(ResolveDevice("auto", 2, 2).ok());  // the boundary: rank == count
}

TEST(WorkerDeviceTest, CudaWithoutAGpuIsRefused) {
  auto r = ResolveDevice("cuda", 0, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(Message(r).find("no CUDA device is visible"), std::string::npos) << r.status();
}

TEST(WorkerDeviceTest, CpuAndNamedDevices) {
  EXPECT_EQ(*ResolveDevice("cpu", 3, 8), "cpu");
  EXPECT_EQ(*ResolveDevice("cuda:5", 0, 8), "cuda:5");
  EXPECT_EQ(*ResolveDevice("cuda:0", 9, 1), "cuda:0");
  auto missing = ResolveDevice("cuda:0", 0, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(Message(missing).find("no CUDA device is visible"), std::string::npos);
  auto too_high = ResolveDevice("cuda:1", 0, 1);
  ASSERT_FALSE(too_high.ok());
  EXPECT_NE(Message(too_high).find("cuda:1 does not exist: 1 CUDA device(s)"), std::string::npos)
      << too_high.status();
}

TEST(WorkerDeviceTest, MalformedInputIsInvalidArgument) {
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CUDA:0", "cuda:99999"}) {
    auto r = ResolveDevice(bad, 0, 2);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ResolveDevice("auto", -1, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveDevice("auto", 0, -1).status().code(), StatusCode::kInvalidArgument);
}

TEST(WorkerDeviceTest, CudaIndexOfResolvedDevices) {
  EXPECT_EQ(CudaIndex("cuda:3"), 3);
  EXPECT_EQ(CudaIndex("cpu"), -1);
  EXPECT_EQ(CudaIndex("cuda:"), -1);
}

TEST(WorkerDeviceTest, ReportedDevicesAreTheResolvedDevice) {
  EXPECT_EQ(*ReportedDevices("", "cuda:1"), "cuda:1");
  EXPECT_EQ(*ReportedDevices("cuda:1", "cuda:1"), "cuda:1");
  EXPECT_EQ(*ReportedDevices("cuda:1,", "cuda:1"), "cuda:1");
  for (const char* wrong : {"cuda:0", "cpu", "cuda:1,cuda:0", ","}) {
    auto r = ReportedDevices(wrong, "cuda:1");
    ASSERT_FALSE(r.ok()) << wrong;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(Message(r).find("trains on cuda:1"), std::string::npos) << r.status();
  }
}

TEST(WorkerDeviceTest, PrintDeviceSingleQuery) {
  DeviceQuery q;
  q.local_rank = 3;
  q.visible_cuda_devices = 1;
  DeviceReport r = PrintDevice(q);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "cuda:0\n");
  EXPECT_EQ(r.err, "");
  q.visible_cuda_devices = 2;
  r = PrintDevice(q);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("local rank 3"), std::string::npos) << r.err;
  q.visible_cuda_devices = 4;
  q.devices_flag = "cuda:0";  // what the manifest reports; the worker trains on cuda:3
  r = PrintDevice(q);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--devices=cuda:0 but this worker trains on cuda:3"), std::string::npos)
      << r.err;
}

TEST(WorkerDeviceTest, PrintDeviceTableAsTextAndJson) {
  DeviceQuery q;
  q.spec = "cuda";
  q.visible_cuda_devices = 2;
  q.table_ranks = 3;
  DeviceReport r = PrintDevice(q);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out.substr(0, r.out.find("error")),
            "local rank 0: cuda:0\nlocal rank 1: cuda:1\nlocal rank 2: ");
  q.json = true;
  r = PrintDevice(q);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "");
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["device_spec"], "cuda");
  EXPECT_EQ(j["visible_cuda_devices"], 2);
  EXPECT_FALSE(j["ok"].get<bool>());
  ASSERT_EQ(j["ranks"].size(), 3u);
  EXPECT_EQ(j["ranks"][1]["device"], "cuda:1");
  EXPECT_NE(j["ranks"][2]["error"].get<std::string>().find("local rank 2"), std::string::npos);
  q.visible_cuda_devices = 1;
  r = PrintDevice(q);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["ok"].get<bool>());
}

}  // namespace
}  // namespace retort::worker
