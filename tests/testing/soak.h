// How many rounds a soak test repeats (many short jobs in a row, say). One definition for every
// soak loop: a few rounds in CI (`scripts/test`), many in `scripts/soak`, which a person runs
// before a release. RETORT_SOAK_ROUNDS, when set to a positive number, overrides the default.
#pragma once

namespace retort::testing {

// The rounds a soak test runs: RETORT_SOAK_ROUNDS when it is a positive integer, else
// `ci_default`. A malformed value is a test configuration error: it aborts with a message rather
// than quietly running the default.
int SoakRounds(int ci_default);

}  // namespace retort::testing
