// retortctl: the operator's control client for a running retort job.
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string_view>
#include <vector>

#include "common/args.h"
#include "retort/v1/retort.grpc.pb.h"
#include "rpc/client_channel.h"
#include "rpc/grpc_status.h"
#include "rpc/job_state.h"
#include "tools/cert_generator.h"
#include "tools/ctl_report.h"
#include "tools/ctl_top.h"
#include "tools/ctl_trace.h"
#include "tools/exit_status.h"

using namespace retort;
using nlohmann::json;

namespace {

struct Options {
  std::string coordinator = "127.0.0.1:7070";
  bool json = false;
  int64_t timeout_ms = 5000;
  int min_workers = 0, max_workers = 0;
  std::string reason;
  int64_t count = 0, for_ms = 0;
  std::string command, argument;
  // Observability commands (ctl_top.h, ctl_trace.h, ctl_report.h).
  std::string path, steps;
  // trace merge, report: the file to write; certs: the folder.
  std::string out;
  bool once = false;
  int64_t interval_ms = 1000;
  rpc::ClientSecurity security;
  // certs
  std::string hosts;
  int64_t days = 365;
};

std::string StateName(v1::JobState s) { return rpc::JobStateName(s); }

void SetDeadline(grpc::ClientContext* ctx, int64_t ms) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

// Adds the operator's token (if any) to a call.
void Authorize(grpc::ClientContext* ctx, const Options& o) {
  rpc::AddTokenMetadata(o.security, ctx);
}

int Fail(const std::string& what, const grpc::Status& s) {
  std::fprintf(stderr, "retortctl: %s: %s\n", what.c_str(), FromGrpcStatus(s).ToString().c_str());
  return 1;
}

// The member and status objects of `status --json`; python/retort/types.py (Status, Member)
// has the same fields (tests/python keeps them equal).
json MemberJson(const v1::MemberStatus& m) {
  std::vector<std::string> devices;
  for (const auto& d : m.devices())
    devices.push_back(!d.name().empty()   ? d.name()
                      : d.kind() == "cpu" ? d.kind()
                                          : d.kind() + ":" + std::to_string(d.index()));
  return json{{"id", m.member_id()},
              {"rank", m.rank()},
              {"node", m.node()},
              {"local_rank", m.local_rank()},
              {"data_address", m.data_address()},
              {"step", m.step()},
              {"epoch", m.epoch()},
              {"loss", m.metrics().loss()},
              {"samples_per_second", m.metrics().samples_per_second()},
              {"local_batch", m.local_batch()},
              {"compute_samples_per_second", m.metrics().compute_samples_per_second()},
              {"last_heartbeat_ms_ago", m.last_heartbeat_ms_ago()},
              {"draining", m.draining()},
              {"generation", m.generation()},
              {"devices", devices}};
}

// The job's failure (StatusResponse.failure) or null when it has none.
json FailureJson(const v1::StatusResponse& r) {
  if (!r.has_failure()) return nullptr;
  const v1::JobFailure& f = r.failure();
  return json{{"kind", f.kind() == v1::FAILURE_KIND_RECURRING ? "recurring" : "transient"},
              {"message", f.message()},
              {"member_id", f.member_id()},
              {"node", f.node()},
              {"local_rank", f.local_rank()},
              {"step", f.step()},
              {"phase", f.phase()},
              {"unix_ms", f.unix_ms()}};
}

// null before the job's first evaluation during training.
json EvaluationJson(const v1::EvaluationResult& e) {
  if (e.step() == 0) return nullptr;
  return json{{"step", e.step()},
              {"epoch", e.epoch()},
              {"samples", e.samples()},
              {"top1", e.top1()},
              {"top5", e.top5()}};
}

int ShowStatus(v1::ControlService::Stub& stub, const Options& o) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, o.timeout_ms);
  Authorize(&ctx, o);
  v1::StatusResponse r;
  grpc::Status s = stub.Status(&ctx, v1::StatusRequest(), &r);
  if (!s.ok()) return Fail("status " + o.coordinator, s);
  if (o.json) {
    json j{{"job", r.job_name()},
           {"state", StateName(r.state())},
           {"generation", r.generation()},
           {"step", r.step()},
           {"total_steps", r.total_steps()},
           {"min_workers", r.min_workers()},
           {"max_workers", r.max_workers()},
           {"last_checkpoint_id", r.last_checkpoint_id()},
           {"last_checkpoint_step", r.last_checkpoint_step()},
           {"uptime_ms", r.uptime_ms()},
           {"version", r.coordinator_version()},
           {"failure", FailureJson(r)},
           {"checkpoint_failures", r.checkpoint_health().failures_total()},
           {"checkpoint_consecutive_failures", r.checkpoint_health().consecutive_failures()},
           {"last_checkpoint_failure", r.checkpoint_health().last_failure()},
           {"last_checkpoint_failure_step", r.checkpoint_health().last_failure_step()},
           {"last_evaluation", EvaluationJson(r.last_evaluation())},
           {"best_evaluation", EvaluationJson(r.best_evaluation())},
           {"batch_split", std::vector<int64_t>(r.batch_split().samples().begin(),
                                                r.batch_split().samples().end())},
           {"members", json::array()},
           {"awaiting_rejoin",
            std::vector<std::string>(r.awaiting_rejoin().begin(), r.awaiting_rejoin().end())}};
    for (const auto& m : r.members()) j["members"].push_back(MemberJson(m));
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::printf("job %s: %s, generation %llu, step %lld%s, %d worker(s) (min %d, max %d)",
              r.job_name().c_str(), StateName(r.state()).c_str(),
              static_cast<unsigned long long>(r.generation()), static_cast<long long>(r.step()),
              r.total_steps() > 0 ? ("/" + std::to_string(r.total_steps())).c_str() : "",
              r.members_size(), r.min_workers(), r.max_workers());
  if (r.last_checkpoint_id() > 0)
    std::printf(", checkpoint %llu at step %lld",
                static_cast<unsigned long long>(r.last_checkpoint_id()),
                static_cast<long long>(r.last_checkpoint_step()));
  if (r.last_evaluation().step() > 0)
    std::printf(
        "\nevaluation at step %lld: top-1 %.4f, top-5 %.4f on %lld test samples (best "
        "top-1 %.4f at step %lld)",
        static_cast<long long>(r.last_evaluation().step()), r.last_evaluation().top1(),
        r.last_evaluation().top5(), static_cast<long long>(r.last_evaluation().samples()),
        r.best_evaluation().top1(), static_cast<long long>(r.best_evaluation().step()));
  if (r.checkpoint_health().failures_total() > 0) {
    const v1::CheckpointHealth& h = r.checkpoint_health();
    std::printf("\ncheckpoints failing: %lld failed (%d in a row), the last at step %lld: %s",
                static_cast<long long>(h.failures_total()), h.consecutive_failures(),
                static_cast<long long>(h.last_failure_step()), h.last_failure().c_str());
  }
  if (r.batch_split().samples_size() > 0) {
    std::printf("\nbatch split by rank (straggler rebalancing):");
    for (int64_t n : r.batch_split().samples()) std::printf(" %lld", static_cast<long long>(n));
    if (!r.batch_split().reason().empty()) std::printf(" (%s)", r.batch_split().reason().c_str());
  }
  if (r.awaiting_rejoin_size() > 0) {
    std::printf("; after a restart, waiting for the previous generation's");
    for (const auto& m : r.awaiting_rejoin()) std::printf(" %s", m.c_str());
  }
  if (r.has_failure()) {
    const v1::JobFailure& f = r.failure();
    std::printf("\nfailed: %s\n  (member %s on %s/%d, %s, after step %lld)", f.message().c_str(),
                f.member_id().empty() ? "-" : f.member_id().c_str(), f.node().c_str(),
                f.local_rank(), f.phase().c_str(), static_cast<long long>(f.step()));
  }
  std::printf("\n\n%-5s %-10s %-20s %-5s %-8s %-9s %-10s %-6s %-10s %s\n", "RANK", "MEMBER", "NODE",
              "LOCAL", "STEP", "LOSS", "SAMPLES/S", "BATCH", "COMPUTE/S", "HEARTBEAT");
  for (const auto& m : r.members()) {
    std::string rank = m.rank() < 0 ? "-" : std::to_string(m.rank());
    std::printf(
        "%-5s %-10s %-20s %-5d %-8lld %-9.4f %-10.1f %-6lld %-10.1f %lld ms ago%s\n", rank.c_str(),
        m.member_id().c_str(), m.node().c_str(), m.local_rank(), static_cast<long long>(m.step()),
        m.metrics().loss(), m.metrics().samples_per_second(),
        static_cast<long long>(m.local_batch()), m.metrics().compute_samples_per_second(),
        static_cast<long long>(m.last_heartbeat_ms_ago()), m.draining() ? " (draining)" : "");
  }
  return 0;
}

int Watch(v1::ControlService::Stub& stub, const Options& o) {
  grpc::ClientContext ctx;
  if (o.for_ms > 0) SetDeadline(&ctx, o.for_ms);
  Authorize(&ctx, o);
  auto reader = stub.Watch(&ctx, v1::WatchRequest());
  v1::Event e;
  int64_t seen = 0;
  while (reader->Read(&e)) {
    if (o.json) {
      std::cout << json{{"unix_ms", e.unix_ms()},     {"kind", e.kind()},
                        {"message", e.message()},     {"generation", e.generation()},
                        {"member_id", e.member_id()}, {"state", StateName(e.state())}}
                       .dump()
                << std::endl;
    } else {
      std::time_t secs = e.unix_ms() / 1000;
      std::tm tm{};
      localtime_r(&secs, &tm);
      char buf[32];
      std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
      std::printf("%s.%03lld  %-18s %s\n", buf, static_cast<long long>(e.unix_ms() % 1000),
                  e.kind().c_str(), e.message().c_str());
      std::fflush(stdout);
    }
    if (o.count > 0 && ++seen >= o.count) {
      ctx.TryCancel();
      break;
    }
  }
  grpc::Status s = reader->Finish();
  bool expected_end = (o.count > 0 && seen >= o.count) ||
                      (o.for_ms > 0 && s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  if (!s.ok() && !expected_end) return Fail("watch " + o.coordinator, s);
  return 0;
}

int MakeCerts(const Options& o) {
  tools::CertOptions c;
  c.out_dir = o.out;
  c.days = static_cast<int>(o.days);
  std::string item;
  for (char ch : o.hosts + ",") {
    if (ch != ',') {
      item.push_back(ch);
    } else if (!item.empty()) {
      c.hosts.push_back(item);
      item.clear();
    }
  }
  auto written = tools::GenerateClusterCertificates(c);
  if (!written.ok()) {
    std::fprintf(stderr, "retortctl: certs: %s\n", written.status().message().c_str());
    return written.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (o.json) {
    std::cout << json{{"files", *written}}.dump() << std::endl;
  } else {
    for (const auto& f : *written) std::printf("wrote %s\n", f.c_str());
  }
  return 0;
}

int PrintControl(const std::string& what, const grpc::Status& s, const v1::ControlResponse& r,
                 const Options& o) {
  if (!s.ok()) return Fail(what + " " + o.coordinator, s);
  if (o.json)
    std::cout << json{{"message", r.message()}, {"state", StateName(r.state())}}.dump()
              << std::endl;
  else
    std::printf("%s (job %s)\n", r.message().c_str(), StateName(r.state()).c_str());
  return 0;
}

using Stub = v1::ControlService::Stub;

// A unary control call (--timeout-ms deadline, the operator's token) whose reply is a
// ControlResponse.
template <typename Call>
int Control(const char* what, const Options& o, Call&& call) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, o.timeout_ms);
  Authorize(&ctx, o);
  v1::ControlResponse r;
  return PrintControl(what, call(&ctx, &r), r, o);
}

int RequestCheckpoint(const Options& o, Stub& stub) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, o.timeout_ms);
  Authorize(&ctx, o);
  v1::CheckpointResponse cr;
  grpc::Status s = stub.Checkpoint(&ctx, v1::CheckpointRequest(), &cr);
  if (!s.ok()) return Fail("checkpoint " + o.coordinator, s);
  if (o.json)
    std::cout << json{{"checkpoint_id", cr.checkpoint_id()}, {"step", cr.step()}}.dump()
              << std::endl;
  else
    std::printf("checkpoint %llu will be taken at step %lld\n",
                static_cast<unsigned long long>(cr.checkpoint_id()),
                static_cast<long long>(cr.step()));
  return 0;
}

int Scale(const Options& o, Stub& stub) {
  if (o.min_workers == 0 && o.max_workers == 0) {
    std::fprintf(stderr, "retortctl: scale needs --min and/or --max\n");
    return tools::kExitUsage;
  }
  v1::ScaleRequest req;
  req.set_min_workers(o.min_workers);
  req.set_max_workers(o.max_workers);
  return Control("scale", o, [&](auto* ctx, auto* r) { return stub.Scale(ctx, req, r); });
}

// The operator's commands: a name, its arguments, one line of help, its own flags (besides the
// common ones main registers), and what it does. `stub` is null for a command that talks to no
// coordinator.
struct Command {
  const char* name;
  const char* args;
  const char* help;
  void (*flags)(ArgParser& args, Options* o);
  int (*run)(const Options& o, Stub* stub);
  bool needs_coordinator = true;
};

void NoFlags(ArgParser&, Options*) {}

const Command kCommands[] = {
    {"status", "", "job state, generation, members (--json: one JSON object)", NoFlags,
     [](const Options& o, Stub* stub) { return ShowStatus(*stub, o); }},
    {"watch", "[--count N] [--for-ms T]",
     "stream events until Ctrl-C, --count events or --for-ms (--json: JSON lines)",
     [](ArgParser& args, Options* o) {
       args.AddInt("count", &o->count, "exit after this many events (0 = no limit)");
       args.AddInt("for-ms", &o->for_ms, "exit after this long (0 = no limit)");
     },
     [](const Options& o, Stub* stub) { return Watch(*stub, o); }},
    {"pause", "", "pause training at the next step boundary", NoFlags,
     [](const Options& o, Stub* stub) {
       return Control("pause", o,
                      [&](auto* ctx, auto* r) { return stub->Pause(ctx, v1::PauseRequest(), r); });
     }},
    {"resume", "", "resume training at the next step boundary", NoFlags,
     [](const Options& o, Stub* stub) {
       return Control("resume", o, [&](auto* ctx, auto* r) {
         return stub->Resume(ctx, v1::ResumeRequest(), r);
       });
     }},
    {"checkpoint", "", "take a coordinated checkpoint", NoFlags,
     [](const Options& o, Stub* stub) { return RequestCheckpoint(o, *stub); }},
    {"scale", "--min N --max M", "change the elastic worker bounds live",
     [](ArgParser& args, Options* o) {
       args.AddInt("min", &o->min_workers, "new minimum number of workers (0 = unchanged)");
       args.AddInt("max", &o->max_workers, "new maximum number of workers (0 = unchanged)");
     },
     [](const Options& o, Stub* stub) { return Scale(o, *stub); }},
    {"drain", "ID", "remove worker ID gracefully at a step boundary",
     [](ArgParser& args, Options* o) {
       args.AddPositional("id", &o->argument, "the member id (see `retortctl status`)", true);
     },
     [](const Options& o, Stub* stub) {
       v1::DrainRequest req;
       req.set_member_id(o.argument);
       return Control("drain", o, [&](auto* ctx, auto* r) { return stub->Drain(ctx, req, r); });
     }},
    {"stop", "[--reason R]", "stop the job: workers leave, the coordinator exits",
     [](ArgParser& args, Options* o) {
       args.AddString("reason", &o->reason, "reason recorded in the event log");
     },
     [](const Options& o, Stub* stub) {
       v1::StopRequest req;
       req.set_reason(o.reason);
       return Control("stop", o, [&](auto* ctx, auto* r) { return stub->Stop(ctx, req, r); });
     }},
    {"top", "[--once] [--interval-ms T] [--count N]", "live view, one line per worker",
     [](ArgParser& args, Options* o) {
       args.AddBool("once", &o->once, "one refresh, then exit");
       args.AddInt("interval-ms", &o->interval_ms, "time between refreshes");
       args.AddInt("count", &o->count, "exit after this many refreshes (0 = no limit)");
     },
     [](const Options& o, Stub* stub) {
       return tools::RunTop(*stub, o.coordinator,
                            {o.once, o.json, o.interval_ms, o.count, o.timeout_ms,
                             [&o](grpc::ClientContext* ctx) { Authorize(ctx, o); }});
     }},
    {"trace", "--steps A:B | merge DIR [--steps A:B] [--out F]",
     "every worker records a step trace of steps A..B; `trace merge` merges the ranks' traces "
     "into one file (a track per rank) and talks to no coordinator",
     [](ArgParser& args, Options* o) {
       args.AddString("steps", &o->steps, "the window of steps A:B");
       args.AddPositional("merge", &o->argument, "merge: merge a run's traces", false);
       args.AddPositional("dir", &o->path, "merge: the traces folder", false);
       args.AddString("out", &o->out, "merge: the file to write");
     },
     [](const Options& o, Stub* stub) {
       if (o.argument == "merge") return tools::MergeTraces(o.path, o.steps, o.out, o.json);
       if (!o.argument.empty() || !o.path.empty()) {
         std::fprintf(stderr, "retortctl: trace takes no argument but merge (got '%s')\n",
                      o.argument.c_str());
         return tools::kExitUsage;
       }
       return tools::RequestTrace(*stub, o.coordinator, o.steps, o.timeout_ms, o.json,
                                  [&o](grpc::ClientContext* ctx) { Authorize(ctx, o); });
     }},
    {"report", "RUN_DIR [--out F]",
     "one HTML file (and --json findings) from a run's step logs; talks to no coordinator",
     [](ArgParser& args, Options* o) {
       args.AddPositional("run_dir", &o->argument, "the run's output folder", true);
       args.AddString("out", &o->out, "the file to write (default RUN_DIR/report.html)");
     },
     [](const Options& o, Stub*) { return tools::RunReport(o.argument, o.out, o.json); }, false},
    {"certs", "--out DIR [--hosts H1,H2] [--days N]",
     "write a CA and coordinator/worker/operator certificates for a test cluster (OpenSSL; "
     "roles in the subject OU); a DIR that already holds ca.crt and ca.key keeps that CA "
     "(rotation). Talks to no coordinator",
     [](ArgParser& args, Options* o) {
       args.AddString("out", &o->out, "the folder to write to");
       args.AddString("hosts", &o->hosts,
                      "comma-separated names/IPs the coordinator certificate is valid for "
                      "(besides localhost, 127.0.0.1, ::1)");
       args.AddInt("days", &o->days, "validity in days");
     },
     [](const Options& o, Stub*) { return MakeCerts(o); }, false},
};

const Command* FindCommand(std::string_view name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

// The command a command line names: its first argument that is a command's name.
const Command* CommandOf(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (const Command* c = FindCommand(argv[i])) return c;
  return nullptr;
}

// The first argument that is not a flag: what the user meant as a command.
std::string FirstWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') return argv[i];
  return "";
}

std::string CommandList() {
  std::string text = "Commands (retortctl COMMAND --help for a command's own flags):\n";
  for (const Command& c : kCommands) {
    std::string line = std::string("  ") + c.name + (*c.args ? " " : "") + c.args;
    text += line + "\n      " + c.help + "\n";
  }
  return text +
         "\nExit status: 0 success, 1 the coordinator refused or was unreachable, 2 usage "
         "error.";
}

// The flags every command takes.
void AddCommonFlags(ArgParser& args, Options* o) {
  args.AddString("coordinator", &o->coordinator, "coordinator address host:port");
  args.AddBool("json", &o->json, "print JSON instead of text");
  args.AddInt("timeout-ms", &o->timeout_ms, "deadline of each call");
  rpc::AddClientSecurityFlags(args, &o->security, "operator");
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kProgram = "retortctl";
  Options o;
  const Command* command = CommandOf(argc, argv);
  if (command == nullptr) {
    ArgParser args("retortctl [--coordinator=HOST:PORT] [--json] COMMAND [ARG] [flags]",
                   "Controls a running retort job through its coordinator.");
    AddCommonFlags(args, &o);
    args.AddPositional("command", &o.command, "one of the commands below", true);
    args.SetEpilog(CommandList());
    if (auto code = args.ParseOrExitCode(argc, argv, kProgram)) return *code;
    std::fprintf(stderr, "retortctl: unknown command '%s' (see --help)\n",
                 FirstWord(argc, argv).c_str());
    return tools::kExitUsage;
  }
  ArgParser args(std::string("retortctl [--coordinator=HOST:PORT] [--json] ") + command->name +
                     (*command->args ? " " : "") + command->args,
                 command->help);
  AddCommonFlags(args, &o);
  args.AddPositional("command", &o.command, command->name, true);
  command->flags(args, &o);
  if (auto code = args.ParseOrExitCode(argc, argv, kProgram)) return *code;
  if (o.command != command->name)
    return tools::ExitCode(
        kProgram, InvalidArgumentError("unknown command '" + o.command + "' (see --help)"));
  if (o.timeout_ms <= 0)
    return tools::ExitCode(kProgram, InvalidArgumentError("--timeout-ms must be > 0"));
  const bool merge = std::string_view(command->name) == "trace" && o.argument == "merge";
  if (!command->needs_coordinator || merge) return command->run(o, nullptr);
  if (Status valid = rpc::ValidateClientSecurity(o.security); !valid.ok())
    return tools::ExitCode(kProgram, valid);
  auto stub = v1::ControlService::NewStub(rpc::MakeCoordinatorChannel(o.coordinator, o.security));
  return command->run(o, stub.get());
}
