// CRC-32C combination: the CRC of a concatenation A||B from crc(A), crc(B) and len(B), without
// touching the data again. Lets a writer keep a whole-file CRC while checksumming fixed-size
// chunks, in one pass over the bytes. Same CRC convention as common/checksum.h (Crc32cExtend
// starting from 0). Thread-safe, no state.
#pragma once

#include <cstddef>
#include <cstdint>

namespace retort::checkpoint {

// The operator that shifts a CRC over `len` zero bytes; compute once, reuse for equal lengths.
uint32_t Crc32cShiftOperator(uint64_t len);
// crc(A||B) given crc_a, crc_b and the operator for len(B).
uint32_t Crc32cCombineWithOperator(uint32_t crc_a, uint32_t crc_b, uint32_t shift_operator);
// crc(A||B) given crc_a, crc_b and len(B).
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

}  // namespace retort::checkpoint
