// Wire constants shared by the UCX transport's files (ucx_transport.cc: tag matching and
// bootstrap; ucx_rendezvous.cc: the CMA rendezvous and goodbyes). Internal to ucx/.
#pragma once

#include <cstdint>
#include <string>

namespace retort::collectives::ucx {

constexpr unsigned kCmaAckId = 7;   // UCX active message id of CMA acknowledgements
constexpr unsigned kGoodbyeId = 8;  // "this rank closes its endpoints on purpose"
constexpr uint64_t kCmaDescriptorMagic = 0x72746d61646573ULL;

inline std::string PeerName(int peer) { return "rank " + std::to_string(peer); }

}  // namespace retort::collectives::ucx
