// The data plane accepts data only from members of its generation: an intruder that reaches
// a rank's UCX worker (it knows the worker's address and the tag layout) but not the
// generation's data-plane key matches no receive, and the same intruder given the key does
// (so the key, not chance, is what keeps it out).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/ucx/ucx_transport.h"
#include "collectives/ucx/ucx_wire.h"

namespace retort::collectives::ucx {
namespace {

constexpr uint64_t kGeneration = 12;
constexpr char kPrefix[] = "g12/ucx";

// Over TCP on loopback, as a process on another host would reach the data plane.
UcxContextOptions TcpOptions() {
  UcxContextOptions options;
  options.transports = "tcp,self";
  options.net_devices = "lo";
  options.cma_min_bytes = 0;
  return options;
}

// A UCX worker that is no member: it read rank 0's worker address (as an attacker who
// reconstructed or sniffed it could) and sends tag messages to it.
class Intruder {
 public:
  Intruder(BootstrapStore* store, const std::string& victim_key) {
    auto context = CreateUcpContext(TcpOptions());
    EXPECT_TRUE(context.ok()) << context.status();
    context_ = std::move(*context);
    auto worker = CreateUcpWorker(context_.get());
    EXPECT_TRUE(worker.ok()) << worker.status();
    worker_ = std::move(*worker);
    auto record = store->Get(victim_key, Deadline::AfterMs(1000));
    EXPECT_TRUE(record.ok()) << record.status();
    const std::string address = record->substr(record->find('\n') + 1);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    EXPECT_EQ(ucp_ep_create(worker_.get(), &params, &ep_), UCS_OK);
  }
  ~Intruder() {
    if (ep_ == nullptr) return;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* request = ucp_ep_close_nbx(ep_, &param);
    const Deadline limit = Deadline::AfterMs(2000);
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
      while (ucp_request_check_status(request) == UCS_INPROGRESS && !limit.Expired())
        ucp_worker_progress(worker_.get());
      ucp_request_free(request);
    }
  }
  // Posts a send of `bytes` with the raw wire tag `tag`; Progress() moves it along.
  void Post(uint64_t tag, const std::string& bytes) {
    ucp_request_param_t param{};
    void* request = ucp_tag_send_nbx(ep_, bytes.data(), bytes.size(), tag, &param);
    ASSERT_FALSE(UCS_PTR_IS_ERR(request));
    if (request != nullptr) pending_.push_back(request);
  }
  // True once every posted send left.
  bool Progress() {
    ucp_worker_progress(worker_.get());
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (ucp_request_check_status(*it) == UCS_INPROGRESS) return false;
      ucp_request_free(*it);
      it = pending_.erase(it);
    }
    return true;
  }

 private:
  UcpContext context_;
  UcpWorker worker_;
  ucp_ep_h ep_ = nullptr;
  std::vector<void*> pending_;
};

// Progresses rank 0's receive, the intruder and (when given) rank 1's send until the receive
// ends or `limit` passes; the receive's final status, or nothing while it is still open.
std::optional<Status> Drive(UcxTransport& rank0, UcxTransport::Request& recv, Intruder& intruder,
                            UcxTransport* rank1, UcxTransport::Request* send, Deadline limit) {
  std::optional<Status> done;
  while (!done.has_value() && !limit.Expired()) {
    done = rank0.PollDetached(recv);
    intruder.Progress();
    if (send != nullptr) rank1->PollDetached(*send);
  }
  return done;
}

TEST(UcxIntruderTest, AMessageWithoutTheGenerationsKeyMatchesNoReceive) {
  InMemoryStore store;
  std::unique_ptr<UcxTransport> ranks[2];
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      auto t = UcxTransport::Create(&store, kPrefix, r, 2, kGeneration, TcpOptions(),
                                    Deadline::AfterMs(20000));
      ASSERT_TRUE(t.ok()) << t.status();
      ranks[r] = std::move(*t);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(ranks[0] != nullptr && ranks[1] != nullptr);
  ASSERT_EQ(ranks[0]->wire_key_for_testing(), ranks[1]->wire_key_for_testing());
  ASSERT_NE(ranks[0]->wire_key_for_testing(), 0u);

  Intruder intruder(&store, std::string(kPrefix) + "/rank0");
  const std::string forged = "forged-by-anyone";  // 16 bytes
  const std::string genuine = "sent-by-rank-1!!";

  // The intruder knows everything but the key: it sends under the plain tag that rank 0's
  // receive would match without one, and gets a whole second to be matched.
  const MessageTag first{true, 5, 3};
  std::string landing(16, '\0');
  auto recv = ranks[0]->PostDetachedRecv(1, first, landing.data(), landing.size());
  ASSERT_TRUE(recv.ok()) << recv.status();
  intruder.Post(TagFields(kGeneration, 1, first), forged);
  EXPECT_FALSE(
      Drive(*ranks[0], **recv, intruder, nullptr, nullptr, Deadline::AfterMs(1000)).has_value())
      << "rank 0 accepted a message from a sender without the data-plane key";
  EXPECT_TRUE(intruder.Progress()) << "the intruder's message never left";
  // Rank 1's message, under the keyed tag, is the one that lands.
  auto send = ranks[1]->PostDetachedSend(0, first, genuine.data(), genuine.size());
  ASSERT_TRUE(send.ok()) << send.status();
  auto done =
      Drive(*ranks[0], **recv, intruder, ranks[1].get(), send->get(), Deadline::AfterMs(5000));
  ASSERT_TRUE(done.has_value()) << "rank 1's message never arrived";
  EXPECT_TRUE(done->ok()) << *done;
  EXPECT_EQ(landing, genuine);
  const Deadline flush = Deadline::AfterMs(5000);
  while (!ranks[1]->PollDetached(**send).has_value() && !flush.Expired()) {
  }

  // Control: the same intruder holding the key gets in, so the key is what kept it out.
  const MessageTag second{true, 6, 3};
  landing.assign(16, '\0');
  recv = ranks[0]->PostDetachedRecv(1, second, landing.data(), landing.size());
  ASSERT_TRUE(recv.ok()) << recv.status();
  intruder.Post(TagFields(kGeneration, 1, second) ^ ranks[0]->wire_key_for_testing(), forged);
  done = Drive(*ranks[0], **recv, intruder, nullptr, nullptr, Deadline::AfterMs(5000));
  ASSERT_TRUE(done.has_value()) << "the keyed message never arrived";
  EXPECT_TRUE(done->ok()) << *done;
  EXPECT_EQ(landing, forged);
}

TEST(UcxIntruderTest, EveryCommunicatorDrawsItsOwnKey) {
  uint64_t keys[2] = {0, 0};
  for (uint64_t& key : keys) {
    InMemoryStore store;
    auto t = UcxTransport::Create(&store, kPrefix, 0, 1, kGeneration, TcpOptions(),
                                  Deadline::AfterMs(5000));
    ASSERT_TRUE(t.ok()) << t.status();
    key = (*t)->wire_key_for_testing();
  }
  EXPECT_NE(keys[0], keys[1]);
}

}  // namespace
}  // namespace retort::collectives::ucx
