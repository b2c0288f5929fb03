// What every fuzz target shares: the input as text, and the one way a target reports a broken
// property (a crash libFuzzer and the corpus runner both notice, with the reason on stderr).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace acspeed::fuzz {

inline std::string text_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Aborts, naming the broken property: an input that reaches this is a bug to fix and a corpus file.
[[noreturn]] inline void broken(const char* property, const std::string& detail) {
  std::fprintf(stderr, "fuzz: property broken: %s\n%s\n", property, detail.c_str());
  std::abort();
}

}  // namespace acspeed::fuzz
