// CRC-32C (Castagnoli) used for checkpoint files and manifests. Uses the SSE4.2 instruction
// when the CPU has it (several GB/s), a table otherwise. Thread-safe, no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace retort {

// Extends `crc` (0 to start) over [data, data+size).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);
inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }
inline uint32_t Crc32c(const std::string& s) { return Crc32c(s.data(), s.size()); }
// 8 lowercase hex digits.
std::string Crc32cHex(uint32_t crc);

}  // namespace retort
