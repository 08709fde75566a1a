#pragma once

// Names of an enum's values as one table per enum: the single definition that both printing
// (NameIn) and parsing (ValueIn) read, in place of a switch of `case X: return "x";` lines.
// Tables are constexpr arrays; lookups are linear (tables hold a handful of entries).
// Thread-safe: pure functions over constant data.

#include <cstddef>
#include <string_view>

namespace retort {

template <typename Enum>
struct NamedValue {
  Enum value;
  const char* name;
};

// The name of `value` in `table`, or `fallback` when the table lacks it (a value cast from an
// integer the enum does not define).
template <typename Enum, size_t N>
constexpr const char* NameIn(const NamedValue<Enum> (&table)[N], Enum value, const char* fallback) {
  for (const NamedValue<Enum>& entry : table)
    if (entry.value == value) return entry.name;
  return fallback;
}

// Sets *value to the entry named `name` and returns true; false (and *value untouched) when no
// entry has that name.
template <typename Enum, size_t N>
constexpr bool ValueIn(const NamedValue<Enum> (&table)[N], std::string_view name, Enum* value) {
  for (const NamedValue<Enum>& entry : table) {
    if (name == entry.name) {
      *value = entry.value;
      return true;
    }
  }
  return false;
}

}  // namespace retort
