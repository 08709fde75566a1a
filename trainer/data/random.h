// Portable pseudo-random numbers for the data pipeline. Every value derived here is identical on
// every platform and standard library (unlike std::shuffle or std::uniform_*_distribution, whose
// outputs are implementation-defined), so epoch orders and augmentations are reproducible
// across machines, world sizes and restarts. Header-only, std-only, thread-compatible.
#pragma once

#include <cmath>
#include <cstdint>

namespace retort::trainer::data {

// SplitMix64 (Steele, Lea, Flood 2014): 64-bit state, passes BigCrush, trivially seedable.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform integer in [0, bound), bound > 0, without modulo bias (rejection sampling).
  uint64_t Below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;  // multiple of bound
    uint64_t x = Next();
    while (x >= limit) x = Next();
    return x % bound;
  }

  // Uniform integer in [lo, hi] (inclusive), lo <= hi.
  int64_t Between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo) + 1));
  }

  // Uniform double in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform double in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

 private:
  uint64_t state_;
};

// A standard normal by Box-Muller: two uniforms per draw, the second value not kept (u1 in
// (0, 1], so the log is finite). Uses libm's log, sqrt and cos: identical wherever the C
// library is (the fill values of random erasing, mixing's Gamma draws).
inline double Normal(SplitMix64& rng) {
  const double u1 = 1.0 - rng.Uniform();
  const double u2 = rng.Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Mixes a value into a seed (one SplitMix64 finaliser round over seed ^ value).
inline uint64_t MixSeed(uint64_t seed, uint64_t value) {
  return SplitMix64(seed ^ (value * 0xD1B54A32D192ED03ull)).Next();
}

// Seed of the permutation of `epoch` for a job seeded with `seed`.
inline uint64_t EpochSeed(uint64_t seed, int64_t epoch) {
  return MixSeed(MixSeed(seed, 0x45504F4348ull /* "EPOCH" */), static_cast<uint64_t>(epoch));
}

// Seed of the augmentation of sample `index` in `epoch`. Never 0: 0 means "not augmented".
inline uint64_t AugmentationSeed(uint64_t seed, int64_t epoch, int64_t index) {
  uint64_t s = MixSeed(
      MixSeed(MixSeed(seed, 0x4155474D454E54ull /* "AUGMENT" */), static_cast<uint64_t>(epoch)),
      static_cast<uint64_t>(index));
  return s == 0 ? 1 : s;
}

}  // namespace retort::trainer::data
