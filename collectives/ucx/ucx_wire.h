// Wire constants shared by the UCX transport's files (ucx_transport.cc: tag matching and
// bootstrap; ucx_rendezvous.cc: the CMA rendezvous and goodbyes). Internal to ucx/.
#pragma once

#include <cstdint>
#include <string>

#include "collectives/transport.h"

namespace retort::collectives::ucx {

constexpr unsigned kCmaAckId = 7;   // UCX active message id of CMA acknowledgements
constexpr unsigned kGoodbyeId = 8;  // "this rank closes its endpoints on purpose"
constexpr uint64_t kCmaDescriptorMagic = 0x72746d61646573ULL;

// The 64 bits of a tag before keying: generation mod 2048 (11) | CMA flag (1) |
// point-to-point flag (1) | source rank (11) | sequence (20) | slot (20). On the wire every tag
// is XORed with the generation's data-plane key (ucx_transport.h), so only a holder of the key
// can address a receive. The CMA flag (kCmaTagBit) marks a message that carries a CMA
// descriptor instead of its payload; receives from a peer that may use CMA match with that bit
// masked out and learn the protocol from the tag that arrived.
constexpr uint64_t kCmaTagBit = uint64_t{1} << 52;
inline uint64_t TagFields(uint64_t generation, int source, MessageTag tag) {
  return ((generation & 0x7ff) << 53) | (uint64_t{tag.point_to_point} << 51) |
         ((static_cast<uint64_t>(source) & 0x7ff) << 40) |
         ((static_cast<uint64_t>(tag.sequence) & 0xfffff) << 20) |
         (static_cast<uint64_t>(tag.slot) & 0xfffff);
}

inline std::string PeerName(int peer) { return "rank " + std::to_string(peer); }

}  // namespace retort::collectives::ucx
