#include "acspeed/kernel_class.h"

#include <cctype>

namespace acspeed {
namespace {

constexpr std::string_view kNcclPrefixes[] = {"ncclDevKernel_", "ncclSymkDevKernel_", "ncclKernel_"};

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The function's own name: "_Z30ncclDevKernel_AllReduce_...Args" -> "ncclDevKernel_AllReduce_...".
// A mangled global function name is "_Z" <decimal length> <name>; anything else is kept as is.
std::string_view unmangled_head(std::string_view name) {
  if (!starts_with(name, "_Z")) return name;
  size_t i = 2;
  size_t length = 0;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) {
    length = length * 10 + size_t(name[i] - '0');
    ++i;
  }
  if (i == 2 || i + length > name.size()) return name;
  return name.substr(i, length);
}

}  // namespace

KernelClass classify_kernel(std::string_view name) {
  const std::string_view head = unmangled_head(name);
  for (auto prefix : kNcclPrefixes) {
    if (starts_with(head, prefix)) return KernelClass::kCommunication;
  }
  return KernelClass::kCompute;
}

}  // namespace acspeed
