// Decisions of the local launcher (retort-run) that do not need processes: how long to wait
// before restarting a failed worker slot, how to describe an exit status, whether a job can
// continue with the workers left, and how to read the coordinator's failure report.
// Pure functions; thread-compatible.
#pragma once

#include <google/protobuf/message.h>

#include <chrono>
#include <string>

namespace retort::tools {

// Restarts of one worker slot: at most max_restarts per slot over the life of the job (a slot
// never gets its budget back); restart k (1-based) starts after initial * 2^(k-1), capped at max.
struct RestartPolicy {
  int max_restarts = 3;
  std::chrono::milliseconds initial{1000};
  std::chrono::milliseconds max{30000};
};

std::chrono::milliseconds RestartDelay(const RestartPolicy& policy, int restart);

// "status 1", "status 137 (killed by SIGKILL)": an exit code as ProcessGroup::Poll reports it
// (128 + signal when killed).
std::string DescribeExit(int code);

// Whether an exit status is a death by a signal (ProcessGroup reports 128 + signal).
inline bool DiedOfSignal(int code) { return code > 128 && code < 128 + 65; }

// Worker exit code 2 is a usage error (bad flags): restarting cannot help.
inline bool WorthRestarting(int code) { return code != 0 && code != 2; }

// The coordinator's description of a failed job, read from StatusResponse.failure (a message
// with kind, message and member fields) by reflection, so that the launcher builds and runs
// against coordinators with and without that field. "" when the field does not exist or is unset.
// Format: "MESSAGE (KIND, member MEMBER)", leaving out parts that are empty.
std::string JobFailureText(const google::protobuf::Message& status);

// The documented exit codes of retort-coordinator: 0 the job completed or was stopped, 1 an
// error, 2 a usage error, 3 the job failed. Text for the launcher's last line.
std::string DescribeCoordinatorExit(int code);

}  // namespace retort::tools
