// The coordinator's transport security and identities, as real processes on 127.0.0.1: mutual
// TLS with certificates from `retortctl certs` (tools/cert_generator.h), bearer tokens, roles
// and per-member secrets. Every refusal comes with the right code and leaves the job as it was;
// a certificate rotated mid-run is served to new connections while the job keeps training; the
// plaintext --health-listen port answers health checks and nothing else.
#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/file_util.h"
#include "retort/v1/retort.grpc.pb.h"
#include "rpc/client_channel.h"
#include "rpc/grpc_status.h"
#include "rpc/metadata.h"
#include "testing/generic_call.h"
#include "testing/subprocess.h"
#include "tools/cert_generator.h"
#include "worker/coordinator_client.h"

namespace retort {
namespace {

using std::chrono::milliseconds;
using testing::BinaryPath;
using testing::Subprocess;
using testing::WaitFor;

void MakeCerts(const std::string& dir) {
  tools::CertOptions o;
  o.out_dir = dir;
  auto written = tools::GenerateClusterCertificates(o);
  ASSERT_TRUE(written.ok()) << written.status();
}

// Writes <out_dir>/<role>.crt and <role>.key: a client certificate with OU=<role>, signed by the
// CA in `ca_dir`, valid from `from_s` to `until_s` seconds from now (negative: in the past;
// `retortctl certs` makes only current ones). Otherwise as `retortctl certs` makes them.
void WriteClientCertificate(const std::string& ca_dir, const std::string& role,
                            const std::string& out_dir, long from_s, long until_s) {
  ASSERT_TRUE(MakeDirectories(out_dir).ok());
  auto read_pem = [](const std::string& path) {
    auto text = ReadFileToString(path);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : std::string();
  };
  const std::string ca_pem = read_pem(ca_dir + "/ca.crt"),
                    ca_key_pem = read_pem(ca_dir + "/ca.key");
  BIO* cb = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  BIO* kb = BIO_new_mem_buf(ca_key_pem.data(), static_cast<int>(ca_key_pem.size()));
  X509* ca = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  EVP_PKEY* ca_key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(cb);
  BIO_free(kb);
  ASSERT_TRUE(ca && ca_key);
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  ASSERT_TRUE(key && x);
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 4242);
  X509_gmtime_adj(X509_getm_notBefore(x), from_s);
  X509_gmtime_adj(X509_getm_notAfter(x), until_s);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  for (auto [field, value] :
       {std::pair{"O", std::string("retort")}, {"OU", role}, {"CN", "retort test " + role}})
    X509_NAME_add_entry_by_txt(name, field, MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, X509_get_subject_name(ca));
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
                            {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                            {NID_ext_key_usage, "clientAuth"}}) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, ca, x, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    ASSERT_NE(ext, nullptr);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  ASSERT_NE(X509_sign(x, ca_key, EVP_sha256()), 0);
  auto pem = [](const std::function<int(BIO*)>& write) {
    BIO* b = BIO_new(BIO_s_mem());
    EXPECT_EQ(write(b), 1);
    char* data = nullptr;
    const long n = BIO_get_mem_data(b, &data);
    std::string out(data, static_cast<size_t>(n));
    BIO_free(b);
    return out;
  };
  ASSERT_TRUE(WriteFileAtomically(out_dir + "/" + role + ".crt",
                                  pem([&](BIO* b) { return PEM_write_bio_X509(b, x); }))
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(out_dir + "/" + role + ".key", pem([&](BIO* b) {
                                    return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0,
                                                                    nullptr, nullptr);
                                  }))
                  .ok());
  X509_free(x);
  X509_free(ca);
  EVP_PKEY_free(key);
  EVP_PKEY_free(ca_key);
}

// A coordinator process with the given security flags, and clients of every kind.
class SecureCoordinator {
 public:
  SecureCoordinator(const std::string& dir, std::vector<std::string> security_flags,
                    const std::string& job_yaml)
      : dir_(dir) {
    std::ofstream(dir_ + "/job.yaml") << job_yaml;
    std::vector<std::string> argv = {BinaryPath("tools/retort-coordinator"),
                                     "--state-dir=" + dir_ + "/state",
                                     "--job=" + dir_ + "/job.yaml",
                                     "--listen=127.0.0.1:0",
                                     "--port-file=" + dir_ + "/port",
                                     "--heartbeat-interval-ms=250",
                                     "--eviction-timeout-ms=3000",
                                     "--settle-ms=200",
                                     "--tls-refresh-s=1",
                                     "--no-check-paths"};
    argv.insert(argv.end(), security_flags.begin(), security_flags.end());
    process_ = std::make_unique<Subprocess>(argv, dir_ + "/coordinator.log");
    started_ = WaitFor([&] { return PathExists(dir_ + "/port"); }, milliseconds(20000));
    if (started_) address_ = "127.0.0.1:" + *ReadFileToString(dir_ + "/port");
    while (!address_.empty() && std::isspace(static_cast<unsigned char>(address_.back())))
      address_.pop_back();
  }
  bool started() const { return started_; }
  const std::string& address() const { return address_; }
  std::string Log() const { return process_->Log(); }
  Subprocess& process() { return *process_; }

 private:
  std::string dir_, address_;
  bool started_ = false;
  std::unique_ptr<Subprocess> process_;
};

rpc::ClientSecurity Mtls(const std::string& dir, const std::string& role,
                         const std::string& ca_dir) {
  rpc::ClientSecurity s;
  s.tls_ca = ca_dir + "/ca.crt";
  if (!role.empty()) {
    s.tls_cert = dir + "/" + role + ".crt";
    s.tls_key = dir + "/" + role + ".key";
  }
  s.refresh_s = 1;
  return s;
}

template <typename Service>
std::unique_ptr<typename Service::Stub> Stub(const std::string& address,
                                             const rpc::ClientSecurity& s) {
  return Service::NewStub(rpc::MakeCoordinatorChannel(address, s));
}

grpc::StatusCode StatusCall(v1::ControlService::Stub& stub, v1::StatusResponse* out = nullptr,
                            const std::string& token = "") {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  v1::StatusResponse r;
  grpc::Status s = stub.Status(&ctx, v1::StatusRequest(), &r);
  if (out) *out = r;
  return s.error_code();
}

v1::JoinRequest JoinAs(const std::string& node) {
  v1::JoinRequest r;
  r.mutable_identity()->set_node(node);
  r.mutable_identity()->set_incarnation("i-" + node);
  r.mutable_identity()->set_data_address("127.0.0.1");
  r.set_parameter_count(1000);
  return r;
}

grpc::StatusCode Heartbeat(v1::WorkerService::Stub& stub, const std::string& member,
                           const std::string& secret, const std::string& token = "") {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  if (!secret.empty()) ctx.AddMetadata(rpc::kMemberSecretMetadata, secret);
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  v1::HeartbeatRequest hb;
  hb.set_member_id(member);
  v1::HeartbeatResponse r;
  return stub.Heartbeat(&ctx, hb, &r).error_code();
}

// The coordinator's flags for mutual TLS with the certificates in `certs`.
std::vector<std::string> MtlsServerFlags(const std::string& certs) {
  return {"--tls-cert=" + certs + "/coordinator.crt", "--tls-key=" + certs + "/coordinator.key",
          "--tls-ca=" + certs + "/ca.crt"};
}

// A job that trains for as long as a test needs (stopped by it) on synthetic data, one thread
// per worker, no evaluation.
std::string TrainingJobYaml(const std::string& name, const std::string& dir, int min_workers,
                            int max_workers) {
  return "name: " + name +
         "\nstudent: {preset: fm-student-p7}\n"
         "dataset: {kind: synthetic, image_size: 28, num_classes: 10, synthetic_samples: 256}\n"
         "global_batch: 16\nsteps: 100000\nthreads_per_worker: 1\nevaluate: false\n"
         "elastic: {min_workers: " +
         std::to_string(min_workers) + ", max_workers: " + std::to_string(max_workers) +
         "}\noutput_dir: " + dir + "/out\n";
}

// `n` retort-worker processes on node n0 speaking mutual TLS with the worker certificate.
std::vector<std::unique_ptr<Subprocess>> StartMtlsWorkers(const std::string& address,
                                                          const std::string& certs,
                                                          const std::string& dir, int n) {
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int i = 0; i < n; ++i)
    workers.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{
            BinaryPath("tools/retort-worker"), "--coordinator=" + address, "--node=n0",
            "--local-rank=" + std::to_string(i), "--tls-cert=" + certs + "/worker.crt",
            "--tls-key=" + certs + "/worker.key", "--tls-ca=" + certs + "/ca.crt",
            "--tls-refresh-s=1", "--rpc-timeout-ms=3000"},
        dir + "/worker" + std::to_string(i) + ".log"));
  return workers;
}

// One Join through `stub`, answered within `deadline`.
grpc::Status JoinCall(v1::WorkerService::Stub& stub, const v1::JoinRequest& request,
                      milliseconds deadline = milliseconds(5000)) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  v1::JoinResponse joined;
  return stub.Join(&ctx, request, &joined);
}

const char* kIdleJob =
    "name: secure\nteacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n"
    "steps: 100\nelastic: {min_workers: 1, max_workers: 8}\n";

class MutualTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("retort_mtls");
    certs_ = dir_ + "/certs";
    MakeCerts(certs_);
    MakeCerts(dir_ + "/other");  // another CA: certificates the coordinator must not trust
    coordinator_ = std::make_unique<SecureCoordinator>(dir_, MtlsServerFlags(certs_), kIdleJob);
    ASSERT_TRUE(coordinator_->started()) << coordinator_->Log();
    operator_ = Stub<v1::ControlService>(address(), Mtls(certs_, "operator", certs_));
  }
  const std::string& address() const { return coordinator_->address(); }
  // Two members on nodes "na" and "nb", each through a client of its own with a worker's
  // certificate (the client attaches its member's secret to later calls).
  struct TwoMembers {
    std::unique_ptr<worker::CoordinatorClient> a, b;
    v1::JoinResponse ja, jb;
  };
  void JoinTwo(TwoMembers* m) {
    m->a = std::make_unique<worker::CoordinatorClient>(address(), 5000,
                                                       Mtls(certs_, "worker", certs_));
    m->b = std::make_unique<worker::CoordinatorClient>(address(), 5000,
                                                       Mtls(certs_, "worker", certs_));
    auto ja = m->a->Join(JoinAs("na"));
    auto jb = m->b->Join(JoinAs("nb"));
    ASSERT_TRUE(ja.ok()) << ja.status();
    ASSERT_TRUE(jb.ok()) << jb.status();
    m->ja = *ja;
    m->jb = *jb;
  }
  // After member A is gone (left or evicted): its secret is refused for itself (NOT_FOUND) and
  // for B (UNAUTHENTICATED), and B is the only member.
  void ExpectGoneWithItsSecret(v1::WorkerService::Stub& raw, const TwoMembers& m) {
    EXPECT_EQ(Heartbeat(raw, m.ja.member_id(), m.ja.member_secret()), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(Heartbeat(raw, m.jb.member_id(), m.ja.member_secret()),
              grpc::StatusCode::UNAUTHENTICATED);
    const auto st = Status();
    ASSERT_EQ(st.members_size(), 1);
    EXPECT_EQ(st.members(0).member_id(), m.jb.member_id());
  }
  v1::StatusResponse Status() {
    v1::StatusResponse r;
    EXPECT_EQ(StatusCall(*operator_, &r), grpc::StatusCode::OK);
    return r;
  }

  std::string dir_, certs_;
  std::unique_ptr<SecureCoordinator> coordinator_;
  std::unique_ptr<v1::ControlService::Stub> operator_;
};

TEST_F(MutualTlsTest, NoCertificateOrOneFromAnotherCaIsRefusedAtTheHandshake) {
  auto plain = v1::ControlService::NewStub(
      grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(StatusCall(*plain), grpc::StatusCode::UNAVAILABLE);
  auto no_cert = Stub<v1::ControlService>(address(), Mtls(certs_, "", certs_));
  EXPECT_EQ(StatusCall(*no_cert), grpc::StatusCode::UNAVAILABLE);
  auto wrong_ca = Stub<v1::ControlService>(address(), Mtls(dir_ + "/other", "operator", certs_));
  EXPECT_EQ(StatusCall(*wrong_ca), grpc::StatusCode::UNAVAILABLE);
  auto wrong_worker = Stub<v1::WorkerService>(address(), Mtls(dir_ + "/other", "worker", certs_));
  EXPECT_EQ(JoinCall(*wrong_worker, JoinAs("intruder")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // The coordinator trusts only its CA, and nothing changed.
  const auto st = Status();
  EXPECT_EQ(st.members_size(), 0);
  EXPECT_EQ(st.state(), v1::JOB_STATE_WAITING);
}

// Handshakes the coordinator refused so far, as its log (gRPC's TLS layer) tells them.
int RefusedHandshakes(const std::string& log) {
  int n = 0;
  for (size_t at = log.find("certificate verify failed"); at != std::string::npos;
       at = log.find("certificate verify failed", at + 1))
    ++n;
  return n;
}

// Certificates the coordinator must refuse at the handshake, each tried while a good worker is a
// member: ones of its own CA that expired yesterday (worker and operator), and current ones from
// another CA. Each call is UNAVAILABLE, the coordinator logs the failed certificate verification,
// no member is added, and the good worker is served before, between and after them (on its
// connection and on new ones). The same certificates but current are accepted: expiry is what
// the coordinator refused.
TEST_F(MutualTlsTest, ExpiredOrForeignClientCertificatesAreRefusedWhileGoodClientsAreServed) {
  const long day = 86400;
  for (const char* role : {"worker", "operator"}) {
    WriteClientCertificate(certs_, role, dir_ + "/expired", -3 * day, -day);
    WriteClientCertificate(certs_, role, dir_ + "/current", -day, day);
  }
  worker::CoordinatorClient good(address(), 5000, Mtls(certs_, "worker", certs_));
  auto joined = good.Join(JoinAs("good"));
  ASSERT_TRUE(joined.ok()) << joined.status();
  v1::HeartbeatRequest hb;
  hb.set_member_id(joined->member_id());
  ASSERT_TRUE(good.Heartbeat(hb).ok());

  struct Refused {
    const char* what;
    std::string cert_dir;
  };
  for (const Refused& bad :
       {Refused{"expired", dir_ + "/expired"}, Refused{"another CA's", dir_ + "/other"}}) {
    SCOPED_TRACE(bad.what);
    const int refused_before = RefusedHandshakes(coordinator_->Log());
    auto worker = Stub<v1::WorkerService>(address(), Mtls(bad.cert_dir, "worker", certs_));
    const grpc::Status join = JoinCall(*worker, JoinAs(std::string("intruder-") + bad.what[0]));
    EXPECT_EQ(join.error_code(), grpc::StatusCode::UNAVAILABLE) << join.error_message();
    auto op = Stub<v1::ControlService>(address(), Mtls(bad.cert_dir, "operator", certs_));
    EXPECT_EQ(StatusCall(*op), grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(
        WaitFor([&] { return RefusedHandshakes(coordinator_->Log()) >= refused_before + 2; },
                milliseconds(5000)))
        << "the coordinator logs each refused certificate\n"
        << coordinator_->Log();
    EXPECT_TRUE(good.Heartbeat(hb).ok());
    auto fresh = Stub<v1::WorkerService>(address(), Mtls(certs_, "worker", certs_));
    EXPECT_EQ(Heartbeat(*fresh, joined->member_id(), joined->member_secret()),
              grpc::StatusCode::OK);
    const auto st = Status();
    ASSERT_EQ(st.members_size(), 1) << "a refused handshake adds no member";
    EXPECT_EQ(st.members(0).member_id(), joined->member_id());
  }
  // The control: current certificates made the same way are served.
  auto current_op =
      Stub<v1::ControlService>(address(), Mtls(dir_ + "/current", "operator", certs_));
  EXPECT_EQ(StatusCall(*current_op), grpc::StatusCode::OK);
  auto current = Stub<v1::WorkerService>(address(), Mtls(dir_ + "/current", "worker", certs_));
  EXPECT_EQ(Heartbeat(*current, joined->member_id(), joined->member_secret()),
            grpc::StatusCode::OK);
}

// A join flood from callers without the right to join (no certificate, another CA's, an
// operator's, and workers sending identities that are malformed or name the live member's node
// and rank) against a running job: every Join is refused, membership and generation stay as they
// were, and the real member's heartbeats are answered promptly throughout. Bounded: 4 threads,
// at most 3 s and 400 calls each.
TEST_F(MutualTlsTest, JoinFloodFromForgedCallersNeitherGrowsMembershipNorStallsTheJob) {
  worker::CoordinatorClient good(address(), 5000, Mtls(certs_, "worker", certs_));
  v1::JoinRequest identity = JoinAs("good");
  auto joined = good.Join(identity);
  ASSERT_TRUE(joined.ok()) << joined.status();
  // A live member: its generation stream open (a join naming its node and rank cannot replace
  // it), its heartbeats on time.
  auto watch = good.WatchGenerations(joined->member_id(), 0);
  std::thread watcher([&] {
    v1::Generation g;
    while (watch->Read(&g)) {
    }
  });
  struct StopWatch {  // however the test ends (an ASSERT returns early)
    std::function<void()> stop;
    ~StopWatch() { stop(); }
  } stop_watch{[&] {
    watch->Cancel();
    watcher.join();
  }};
  v1::HeartbeatRequest hb;
  hb.set_member_id(joined->member_id());
  ASSERT_TRUE(WaitFor(
      [&] {
        hb.set_generation(Status().generation());
        return good.Heartbeat(hb).ok() && Status().state() == v1::JOB_STATE_RUNNING;
      },
      milliseconds(20000)))
      << coordinator_->Log();
  const v1::StatusResponse before = Status();
  ASSERT_EQ(before.members_size(), 1);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::atomic<int> calls{0}, admitted{0}, unexpected{0};
  auto flood = [&](int kind) {
    std::unique_ptr<v1::WorkerService::Stub> stub;
    if (kind == 0) stub = Stub<v1::WorkerService>(address(), Mtls(certs_, "", certs_));
    if (kind == 1)
      stub = Stub<v1::WorkerService>(address(), Mtls(dir_ + "/other", "worker", certs_));
    if (kind == 2) stub = Stub<v1::WorkerService>(address(), Mtls(certs_, "operator", certs_));
    if (kind == 3) stub = Stub<v1::WorkerService>(address(), Mtls(certs_, "worker", certs_));
    for (int i = 0; i < 400 && std::chrono::steady_clock::now() < deadline; ++i) {
      v1::JoinRequest forged = identity;  // the live member's node and rank, a new incarnation
      forged.mutable_identity()->set_incarnation("forged-" + std::to_string(i));
      if (kind == 3 && i % 2 == 1)
        forged.mutable_identity()->set_node("bad node/" + std::to_string(i));
      const grpc::StatusCode code = JoinCall(*stub, forged).error_code();
      if (code == grpc::StatusCode::OK) ++admitted;
      // Each caller's refusal names its own reason.
      const grpc::StatusCode expected[] = {
          grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::UNAVAILABLE,
          grpc::StatusCode::PERMISSION_DENIED,
          i % 2 ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::ALREADY_EXISTS};
      if (code != expected[kind]) ++unexpected;
      ++calls;
    }
  };
  std::vector<std::thread> flooders;
  for (int kind = 0; kind < 4; ++kind) flooders.emplace_back(flood, kind);
  int64_t slowest_ms = 0;
  int heartbeats = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = good.Heartbeat(hb);
    EXPECT_TRUE(r.ok()) << r.status();
    slowest_ms = std::max<int64_t>(
        slowest_ms,
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count());
    ++heartbeats;
    std::this_thread::sleep_for(milliseconds(100));
  }
  for (auto& t : flooders) t.join();
  EXPECT_GT(calls.load(), 40) << "the flood ran";
  EXPECT_EQ(admitted.load(), 0) << "no forged Join is admitted";
  EXPECT_EQ(unexpected.load(), 0) << "every refusal has its caller's code";
  EXPECT_GE(heartbeats, 10);
  EXPECT_LT(slowest_ms, 1000) << "the member's heartbeats were answered throughout the flood";
  const v1::StatusResponse after = Status();
  ASSERT_EQ(after.members_size(), 1) << coordinator_->Log();
  EXPECT_EQ(after.members(0).member_id(), joined->member_id());
  EXPECT_EQ(after.generation(), before.generation()) << "no new generation: the job went on";
  EXPECT_EQ(after.state(), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(good.Heartbeat(hb).ok());
}

// A member evicted for silence (no heartbeats past the 3 s eviction timeout): replaying its
// secret afterwards, for itself or for the member still in the job, is refused and changes
// nothing; a new Join under its node gets a new member and a new secret.
TEST_F(MutualTlsTest, AnEvictedMembersSecretIsRefusedWhenReplayed) {
  TwoMembers m;
  ASSERT_NO_FATAL_FAILURE(JoinTwo(&m));
  v1::HeartbeatRequest hb;
  hb.set_member_id(m.jb.member_id());
  // B keeps heartbeating; A goes silent until the coordinator evicts it.
  ASSERT_TRUE(WaitFor(
      [&] {
        EXPECT_TRUE(m.b->Heartbeat(hb).ok());
        return Status().members_size() == 1;
      },
      milliseconds(15000)))
      << coordinator_->Log();
  auto raw = Stub<v1::WorkerService>(address(), Mtls(certs_, "worker", certs_));
  ASSERT_NO_FATAL_FAILURE(ExpectGoneWithItsSecret(*raw, m));
  auto again = m.a->Join(JoinAs("na"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->member_id(), m.ja.member_id());
  EXPECT_NE(again->member_secret(), m.ja.member_secret());
}

TEST_F(MutualTlsTest, EachRoleCallsOnlyItsOwnService) {
  auto as_worker = Stub<v1::ControlService>(address(), Mtls(certs_, "worker", certs_));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  v1::ControlResponse resp;
  EXPECT_EQ(as_worker->Stop(&ctx, v1::StopRequest(), &resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  auto operator_as_worker = Stub<v1::WorkerService>(address(), Mtls(certs_, "operator", certs_));
  EXPECT_EQ(JoinCall(*operator_as_worker, JoinAs("op")).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  const auto st = Status();
  EXPECT_EQ(st.state(), v1::JOB_STATE_WAITING) << "a refused Stop stops nothing";
  EXPECT_EQ(st.members_size(), 0) << "a refused Join adds no member";
  EXPECT_NE(coordinator_->Log().find("refused Stop from ipv4:127.0.0.1"), std::string::npos)
      << "refusals are logged with the peer";
}

TEST_F(MutualTlsTest, MemberSecretsKeepOneWorkerFromActingForAnother) {
  TwoMembers m;
  ASSERT_NO_FATAL_FAILURE(JoinTwo(&m));
  ASSERT_FALSE(m.ja.member_secret().empty());
  v1::HeartbeatRequest hb;
  hb.set_member_id(m.jb.member_id());
  ASSERT_TRUE(m.b->Heartbeat(hb).ok()) << "the client carries its own member's secret";
  auto raw = Stub<v1::WorkerService>(address(), Mtls(certs_, "worker", certs_));
  EXPECT_EQ(Heartbeat(*raw, m.jb.member_id(), m.ja.member_secret()),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Heartbeat(*raw, m.jb.member_id(), ""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Heartbeat(*raw, m.jb.member_id(), std::string(64, '0')),
            grpc::StatusCode::UNAUTHENTICATED);
  // A's client leaves B's job only with B's secret: it has A's.
  v1::LeaveRequest forged;
  forged.set_member_id(m.jb.member_id());
  EXPECT_EQ(ToGrpcStatus(m.a->Leave(forged)).error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << "a client attaches only its own member's secret";
  EXPECT_EQ(Status().members_size(), 2) << "refused calls change nothing";
  // A leaves for real; its secret dies with it.
  v1::LeaveRequest leave;
  leave.set_member_id(m.ja.member_id());
  ASSERT_TRUE(m.a->Leave(leave).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectGoneWithItsSecret(*raw, m));
  EXPECT_TRUE(m.b->Heartbeat(hb).ok());
}

// The served certificate (PEM) as a new connection sees it, or "" when the call fails.
std::string ServedCertificate(const std::string& address, const rpc::ClientSecurity& s) {
  auto stub = Stub<v1::ControlService>(address, s);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  v1::StatusResponse r;
  if (!stub->Status(&ctx, v1::StatusRequest(), &r).ok()) return "";
  auto values = ctx.auth_context()->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  return values.empty() ? "" : std::string(values.front().data(), values.front().size());
}

// A loopback port that was free a moment ago.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

// grpc.health.v1.Health/Check for the whole server over `channel`; the reply's bytes in *out.
grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel, std::string* out) {
  testing::GenericReply r = testing::CallGeneric(channel, testing::kHealthCheckMethod, "");
  *out = std::move(r.bytes);
  return r.status;
}

// The coordinator binary with mutual TLS and --health-listen (what the Kubernetes manifests
// run): a probe without a certificate gets SERVING on the health port and nothing on the TLS
// port; the health port serves no WorkerService or ControlService call; mTLS clients are served.
TEST(HealthListenTest, MutualTlsCoordinatorAnswersPlaintextHealthChecksOnlyOnItsHealthPort) {
  const std::string dir = testing::MakeTempDir("retort_health_listen");
  const std::string certs = dir + "/certs";
  MakeCerts(certs);
  const int health_port = FreePort();
  ASSERT_GT(health_port, 0);
  SecureCoordinator coordinator(
      dir,
      {"--tls-cert=" + certs + "/coordinator.crt", "--tls-key=" + certs + "/coordinator.key",
       "--tls-ca=" + certs + "/ca.crt", "--health-listen=127.0.0.1:" + std::to_string(health_port)},
      kIdleJob);
  ASSERT_TRUE(coordinator.started()) << coordinator.Log();
  auto health = grpc::CreateChannel("127.0.0.1:" + std::to_string(health_port),
                                    grpc::InsecureChannelCredentials());
  std::string reply;
  const grpc::Status checked = HealthCheck(health, &reply);
  ASSERT_TRUE(checked.ok()) << checked.error_message() << "\n" << coordinator.Log();
  EXPECT_EQ(reply, testing::kHealthServing) << "HealthCheckResponse{status: SERVING}";
  std::string ignored;
  EXPECT_EQ(
      HealthCheck(grpc::CreateChannel(coordinator.address(), grpc::InsecureChannelCredentials()),
                  &ignored)
          .error_code(),
      grpc::StatusCode::UNAVAILABLE)
      << "the control-plane port requires a client certificate";
  auto worker = v1::WorkerService::NewStub(health);
  EXPECT_EQ(JoinCall(*worker, JoinAs("via-health-port")).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  auto control = v1::ControlService::NewStub(health);
  EXPECT_EQ(StatusCall(*control), grpc::StatusCode::UNIMPLEMENTED);
  auto op = Stub<v1::ControlService>(coordinator.address(), Mtls(certs, "operator", certs));
  v1::StatusResponse st;
  ASSERT_EQ(StatusCall(*op, &st), grpc::StatusCode::OK);
  EXPECT_EQ(st.members_size(), 0) << "nothing joined through the health port";
}

TEST(CertificateRotationTest, RotatedCertificateIsServedWhileTheJobKeepsTraining) {
  const std::string dir = testing::MakeTempDir("retort_rotate");
  const std::string certs = dir + "/certs";
  MakeCerts(certs);
  SecureCoordinator coordinator(dir, MtlsServerFlags(certs), TrainingJobYaml("rotate", dir, 2, 2));
  ASSERT_TRUE(coordinator.started()) << coordinator.Log();
  auto workers = StartMtlsWorkers(coordinator.address(), certs, dir, 2);
  auto op = Stub<v1::ControlService>(coordinator.address(), Mtls(certs, "operator", certs));
  auto step_and_generation = [&]() -> std::pair<int64_t, uint64_t> {
    v1::StatusResponse st;
    if (StatusCall(*op, &st) != grpc::StatusCode::OK || st.members_size() != 2) return {-1, 0};
    return {st.step(), st.generation()};
  };
  ASSERT_TRUE(WaitFor([&] { return step_and_generation().first >= 3; }, milliseconds(120000)))
      << coordinator.Log() << workers[0]->Log();
  const auto [step_before, generation] = step_and_generation();
  const std::string old_pem =
      ServedCertificate(coordinator.address(), Mtls(certs, "operator", certs));
  ASSERT_FALSE(old_pem.empty());

  // New coordinator certificate from the same CA, swapped in by rename (never half-written).
  const std::string next = dir + "/next";
  ASSERT_TRUE(MakeDirectories(next).ok());
  std::filesystem::copy_file(certs + "/ca.crt", next + "/ca.crt");
  std::filesystem::copy_file(certs + "/ca.key", next + "/ca.key");
  MakeCerts(next);
  std::filesystem::rename(next + "/coordinator.key", certs + "/coordinator.key");
  std::filesystem::rename(next + "/coordinator.crt", certs + "/coordinator.crt");
  const std::string new_pem = *ReadFileToString(certs + "/coordinator.crt");
  ASSERT_NE(new_pem, old_pem);
  EXPECT_TRUE(WaitFor(
      [&] {
        return ServedCertificate(coordinator.address(), Mtls(certs, "operator", certs)) == new_pem;
      },
      milliseconds(30000)))
      << "new connections get the rotated certificate without a restart";
  // Training went on through the rotation, with the same members (no generation change).
  EXPECT_TRUE(
      WaitFor([&] { return step_and_generation().first >= step_before + 3; }, milliseconds(60000)))
      << coordinator.Log();
  EXPECT_EQ(step_and_generation().second, generation) << "no worker was lost";
  // Stop the job; every process ends by itself.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  v1::ControlResponse resp;
  EXPECT_TRUE(op->Stop(&ctx, v1::StopRequest(), &resp).ok());
  for (auto& w : workers) EXPECT_EQ(w->Wait(milliseconds(60000)), 0) << w->Log();
  EXPECT_EQ(coordinator.process().Wait(milliseconds(30000)), 0) << coordinator.Log();
}

// Resident memory of process `pid` in bytes (VmRSS), or -1.
int64_t ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

// 10,000 Joins from callers without the right to join, against a job of two real training
// workers and max_workers 8: callers without a certificate or with another CA's (refused at
// the handshake; a new channel every 50 calls) and with an operator's certificate
// (PERMISSION_DENIED). Training goes on through the flood in the same generation with the same
// two members, and the coordinator's resident memory stays bounded. (Workers' certificates with
// forged identities are MutualTlsTest.JoinFlood...; a holder of a worker certificate joining new
// identities is a worker, admitted up to max_workers.)
TEST(JoinFloodTest, TenThousandForgedJoinsLeaveTheRealWorkersTrainingAndMemoryBounded) {
  const std::string dir = testing::MakeTempDir("retort_flood");
  const std::string certs = dir + "/certs";
  MakeCerts(certs);
  MakeCerts(dir + "/other");
  SecureCoordinator coordinator(dir, MtlsServerFlags(certs), TrainingJobYaml("flood", dir, 2, 8));
  ASSERT_TRUE(coordinator.started()) << coordinator.Log();
  auto workers = StartMtlsWorkers(coordinator.address(), certs, dir, 2);
  auto op = Stub<v1::ControlService>(coordinator.address(), Mtls(certs, "operator", certs));
  auto status = [&] {
    v1::StatusResponse st;
    EXPECT_EQ(StatusCall(*op, &st), grpc::StatusCode::OK);
    return st;
  };
  ASSERT_TRUE(WaitFor([&] { return status().members_size() == 2 && status().step() >= 3; },
                      milliseconds(120000)))
      << coordinator.Log() << workers[0]->Log();
  const v1::StatusResponse before = status();
  const int64_t rss_before = ResidentBytes(coordinator.process().pid());
  ASSERT_GT(rss_before, 0);

  constexpr int kCalls = 10000, kThreads = 8, kPerConnection = 20;
  std::atomic<int> next{0}, admitted{0}, unexpected{0};
  std::atomic<int64_t> rss_peak{rss_before};
  const int refused_before = RefusedHandshakes(coordinator.Log());
  auto flood = [&](int thread) {
    const int kind = thread % 3;
    const std::string cert_dir = kind == 1 ? dir + "/other" : certs;
    const std::string role = kind == 0 ? "" : kind == 1 ? "worker" : "operator";
    rpc::ClientSecurity security = Mtls(cert_dir, role, certs);
    security.refresh_s = 0;
    const auto credentials = rpc::MakeChannelCredentials(security);
    std::unique_ptr<v1::WorkerService::Stub> stub;
    for (int i = next++; i < kCalls; i = next++) {
      if (!stub || i % kPerConnection == 0) {
        // A connection of its own (not gRPC's shared one): a new TLS handshake.
        grpc::ChannelArguments args;
        args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
        stub = v1::WorkerService::NewStub(
            grpc::CreateCustomChannel(coordinator.address(), credentials, args));
      }
      const grpc::StatusCode code =
          JoinCall(*stub, JoinAs("fake-" + std::to_string(i)), milliseconds(10000)).error_code();
      const grpc::StatusCode expected[] = {grpc::StatusCode::UNAVAILABLE,
                                           grpc::StatusCode::UNAVAILABLE,
                                           grpc::StatusCode::PERMISSION_DENIED};
      if (code == grpc::StatusCode::OK) ++admitted;
      if (code != expected[kind]) ++unexpected;
      if (i % 500 == 0) {
        const int64_t rss = ResidentBytes(coordinator.process().pid());
        int64_t peak = rss_peak.load();
        while (rss > peak && !rss_peak.compare_exchange_weak(peak, rss)) {
        }
      }
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> flooders;
  for (int t = 0; t < kThreads; ++t) flooders.emplace_back(flood, t);
  for (auto& t : flooders) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const v1::StatusResponse during = status();
  const int64_t rss_after = ResidentBytes(coordinator.process().pid());
  const int refused_handshakes = RefusedHandshakes(coordinator.Log()) - refused_before;
  std::cout << "[ measured ] " << kCalls << " forged Joins in " << seconds << " s ("
            << refused_handshakes << " handshakes refused by the coordinator); step "
            << before.step() << " -> " << during.step() << "; coordinator RSS "
            << rss_before / (1 << 20) << " MiB before, peak " << rss_peak.load() / (1 << 20)
            << " MiB, " << rss_after / (1 << 20) << " MiB after\n";
  EXPECT_EQ(admitted.load(), 0) << "no forged Join is admitted";
  EXPECT_EQ(unexpected.load(), 0) << "every refusal has its caller's code";
  EXPECT_GT(refused_handshakes, 50) << "the coordinator saw the handshakes, not only the client";
  EXPECT_EQ(during.members_size(), 2) << coordinator.Log();
  EXPECT_EQ(during.generation(), before.generation()) << "the real workers were never disturbed";
  EXPECT_GT(during.step(), before.step()) << "training went on through the flood";
  EXPECT_LT(rss_peak.load() - rss_before, int64_t{64} << 20)
      << "the coordinator's memory grew by more than 64 MiB during the flood";
  // And after it: the job still trains.
  EXPECT_TRUE(WaitFor([&] { return status().step() >= during.step() + 3; }, milliseconds(60000)))
      << coordinator.Log();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  v1::ControlResponse resp;
  EXPECT_TRUE(op->Stop(&ctx, v1::StopRequest(), &resp).ok());
  for (auto& w : workers) EXPECT_EQ(w->Wait(milliseconds(60000)), 0) << w->Log();
  EXPECT_EQ(coordinator.process().Wait(milliseconds(30000)), 0) << coordinator.Log();
}

class TokenAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("retort_tokens");
    certs_ = dir_ + "/certs";
    MakeCerts(certs_);
    std::ofstream(dir_ + "/worker.token") << "worker-token-0123456789\n";
    std::ofstream(dir_ + "/operator.token") << "operator-token-9876543210\n";
    // TLS without client certificates (it terminates here, but tokens carry the roles).
    coordinator_ = std::make_unique<SecureCoordinator>(
        dir_,
        std::vector<std::string>{"--tls-cert=" + certs_ + "/coordinator.crt",
                                 "--tls-key=" + certs_ + "/coordinator.key",
                                 "--worker-token-file=" + dir_ + "/worker.token",
                                 "--operator-token-file=" + dir_ + "/operator.token"},
        kIdleJob);
    ASSERT_TRUE(coordinator_->started()) << coordinator_->Log();
    server_only_ = Mtls(certs_, "", certs_);
  }
  std::string dir_, certs_;
  std::unique_ptr<SecureCoordinator> coordinator_;
  rpc::ClientSecurity server_only_;
};

TEST_F(TokenAuthTest, TokensCarryRolesAndTheWrongOneIsRefused) {
  const std::string& address = coordinator_->address();
  auto workers = Stub<v1::WorkerService>(address, server_only_);
  auto control = Stub<v1::ControlService>(address, server_only_);
  EXPECT_EQ(StatusCall(*control), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(StatusCall(*control, nullptr, "worker-token-0123456789"),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(StatusCall(*control, nullptr, "operator-token-987654321"),
            grpc::StatusCode::UNAUTHENTICATED)
      << "a token one character short is no token";
  v1::StatusResponse st;
  ASSERT_EQ(StatusCall(*control, &st, "operator-token-9876543210"), grpc::StatusCode::OK);
  EXPECT_EQ(st.members_size(), 0);

  rpc::ClientSecurity as_worker = server_only_;
  as_worker.token_file = dir_ + "/worker.token";
  worker::CoordinatorClient client(address, 5000, as_worker);
  auto joined = client.Join(JoinAs("n0"));
  ASSERT_TRUE(joined.ok()) << joined.status();
  // The operator's token on a worker call, even with the member's own secret.
  EXPECT_EQ(Heartbeat(*workers, joined->member_id(), joined->member_secret(),
                      "operator-token-9876543210"),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Heartbeat(*workers, joined->member_id(), joined->member_secret(), ""),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(
      Heartbeat(*workers, joined->member_id(), joined->member_secret(), "worker-token-0123456789"),
      grpc::StatusCode::OK);
  ASSERT_EQ(StatusCall(*control, &st, "operator-token-9876543210"), grpc::StatusCode::OK);
  EXPECT_EQ(st.members_size(), 1);
}

}  // namespace
}  // namespace retort
