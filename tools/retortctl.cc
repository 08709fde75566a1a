// retortctl: the operator's control client for a running retort job.
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "common/args.h"
#include "retort/v1/retort.grpc.pb.h"
#include "rpc/client_channel.h"
#include "rpc/grpc_status.h"
#include "rpc/job_state.h"
#include "tools/cert_generator.h"
#include "tools/ctl_report.h"
#include "tools/ctl_top.h"
#include "tools/ctl_trace.h"

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

const char* kCommands =
    "Commands:\n"
    "  status               job state, generation, members (--json: one JSON object)\n"
    "  watch                stream events until Ctrl-C (--count N / --for-ms T to stop; --json: "
    "JSON lines)\n"
    "  pause | resume       pause or resume training at the next step boundary\n"
    "  checkpoint           take a coordinated checkpoint\n"
    "  scale --min N --max M  change the elastic worker bounds live\n"
    "  drain ID             remove worker ID gracefully at a step boundary\n"
    "  stop [--reason R]    stop the job: workers leave, the coordinator exits\n"
    "  top [--once] [--interval-ms T] [--count N]  live view, one line per worker\n"
    "  trace --steps A:B    every worker records a step trace of steps A..B\n"
    "  trace merge DIR [--steps A:B] [--out F]  merge the ranks' traces into one file\n"
    "  report RUN_DIR [--out F]  one HTML file (and --json findings) from a run's step logs\n"
    "  certs --out DIR [--hosts H1,H2] [--days N]\n"
    "                       write a CA and coordinator/worker/operator certificates for a test\n"
    "                       cluster (OpenSSL; roles in the subject OU); a DIR that already holds\n"
    "                       ca.crt and ca.key keeps that CA (rotation). Talks to no coordinator.\n"
    "\nExit status: 0 success, 1 the coordinator refused or was unreachable, 2 usage error.";

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
  std::printf("\n\n%-5s %-10s %-20s %-5s %-8s %-9s %-10s %s\n", "RANK", "MEMBER", "NODE", "LOCAL",
              "STEP", "LOSS", "SAMPLES/S", "HEARTBEAT");
  for (const auto& m : r.members()) {
    std::string rank = m.rank() < 0 ? "-" : std::to_string(m.rank());
    std::printf("%-5s %-10s %-20s %-5d %-8lld %-9.4f %-10.1f %lld ms ago%s\n", rank.c_str(),
                m.member_id().c_str(), m.node().c_str(), m.local_rank(),
                static_cast<long long>(m.step()), m.metrics().loss(),
                m.metrics().samples_per_second(), static_cast<long long>(m.last_heartbeat_ms_ago()),
                m.draining() ? " (draining)" : "");
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

}  // namespace

int main(int argc, char** argv) {
  Options o;
  ArgParser args("retortctl [--coordinator=HOST:PORT] [--json] COMMAND [ARG]",
                 "Controls a running retort job through its coordinator.");
  args.AddString("coordinator", &o.coordinator, "coordinator address host:port");
  args.AddBool("json", &o.json, "print JSON instead of text");
  args.AddInt("timeout-ms", &o.timeout_ms, "deadline of each call");
  args.AddInt("min", &o.min_workers, "scale: new minimum number of workers (0 = unchanged)");
  args.AddInt("max", &o.max_workers, "scale: new maximum number of workers (0 = unchanged)");
  args.AddString("reason", &o.reason, "stop: reason recorded in the event log");
  args.AddInt("count", &o.count, "watch: exit after this many events (0 = no limit)");
  args.AddInt("for-ms", &o.for_ms, "watch: exit after this long (0 = no limit)");
  args.AddString("tls-ca", &o.security.tls_ca,
                 "PEM CA that signed the coordinator's certificate: connect over TLS");
  args.AddString("tls-cert", &o.security.tls_cert,
                 "PEM client certificate (subject OU=operator) for mutual TLS");
  args.AddString("tls-key", &o.security.tls_key, "PEM private key of --tls-cert");
  args.AddString("token-file", &o.security.token_file,
                 "file holding the operator role's bearer token, sent with every call");
  args.AddString("hosts", &o.hosts,
                 "certs: comma-separated names/IPs the coordinator certificate is valid for "
                 "(besides localhost, 127.0.0.1, ::1)");
  args.AddInt("days", &o.days, "certs: validity in days");
  args.AddPositional("command", &o.command, "one of the commands below", true);
  args.AddPositional("arg", &o.argument,
                     "the command's argument (drain: member id; report: run folder; trace: merge)",
                     false);
  args.AddPositional("path", &o.path, "trace merge: the traces folder", false);
  args.AddString("steps", &o.steps, "trace: the window of steps A:B");
  args.AddString("out", &o.out,
                 "trace merge, report: the file to write; certs: the folder to write to");
  args.AddBool("once", &o.once, "top: one refresh, then exit");
  args.AddInt("interval-ms", &o.interval_ms, "top: time between refreshes");
  args.SetEpilog(kCommands);
  auto parsed = args.Parse(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "retortctl: %s\n", parsed.status().message().c_str());
    return 2;
  }
  if (!*parsed) return 0;
  if (o.timeout_ms <= 0) {
    std::fprintf(stderr, "retortctl: --timeout-ms must be > 0\n");
    return 2;
  }
  const std::string& cmd = o.command;
  if (cmd == "report") return tools::RunReport(o.argument, o.out, o.json);
  if (cmd == "trace" && o.argument == "merge")
    return tools::MergeTraces(o.path, o.steps, o.out, o.json);
  if (cmd != "drain" && (!o.argument.empty() || !o.path.empty())) {
    std::fprintf(stderr, "retortctl: %s takes no argument (got '%s')\n", cmd.c_str(),
                 o.argument.c_str());
    return 2;
  }
  if (cmd == "certs") return MakeCerts(o);
  if (Status valid = rpc::ValidateClientSecurity(o.security); !valid.ok()) {
    std::fprintf(stderr, "retortctl: %s\n", valid.message().c_str());
    return 2;
  }
  auto stub = v1::ControlService::NewStub(rpc::MakeCoordinatorChannel(o.coordinator, o.security));
  const auto authorize = [&o](grpc::ClientContext* ctx) { Authorize(ctx, o); };
  if (cmd == "status") return ShowStatus(*stub, o);
  if (cmd == "watch") return Watch(*stub, o);
  if (cmd == "top")
    return tools::RunTop(*stub, o.coordinator,
                         {o.once, o.json, o.interval_ms, o.count, o.timeout_ms, authorize});
  if (cmd == "trace")
    return tools::RequestTrace(*stub, o.coordinator, o.steps, o.timeout_ms, o.json, authorize);
  grpc::ClientContext ctx;
  SetDeadline(&ctx, o.timeout_ms);
  Authorize(&ctx, o);
  v1::ControlResponse r;
  if (cmd == "pause") return PrintControl(cmd, stub->Pause(&ctx, v1::PauseRequest(), &r), r, o);
  if (cmd == "resume") return PrintControl(cmd, stub->Resume(&ctx, v1::ResumeRequest(), &r), r, o);
  if (cmd == "scale") {
    if (o.min_workers == 0 && o.max_workers == 0) {
      std::fprintf(stderr, "retortctl: scale needs --min and/or --max\n");
      return 2;
    }
    v1::ScaleRequest req;
    req.set_min_workers(o.min_workers);
    req.set_max_workers(o.max_workers);
    return PrintControl(cmd, stub->Scale(&ctx, req, &r), r, o);
  }
  if (cmd == "drain") {
    if (o.argument.empty()) {
      std::fprintf(stderr, "retortctl: drain needs a member id (see `retortctl status`)\n");
      return 2;
    }
    v1::DrainRequest req;
    req.set_member_id(o.argument);
    return PrintControl(cmd, stub->Drain(&ctx, req, &r), r, o);
  }
  if (cmd == "stop") {
    v1::StopRequest req;
    req.set_reason(o.reason);
    return PrintControl(cmd, stub->Stop(&ctx, req, &r), r, o);
  }
  if (cmd == "checkpoint") {
    v1::CheckpointResponse cr;
    grpc::Status s = stub->Checkpoint(&ctx, v1::CheckpointRequest(), &cr);
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
  std::fprintf(stderr, "retortctl: unknown command '%s' (see --help)\n", cmd.c_str());
  return 2;
}
