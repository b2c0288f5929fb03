// What a 64-bit ELF shared library asks of and offers to the dynamic loader, read from its
// section headers: the libraries it needs, the symbols it exports and the symbol versions it needs.
#pragma once

#include <set>
#include <string>

namespace acspeed::testing {

struct ElfDynamicInfo {
  std::set<std::string> needed;            // DT_NEEDED, e.g. "libc.so.6"
  std::set<std::string> exported;          // defined global/weak symbols of .dynsym
  std::set<std::string> version_needs;     // e.g. "GLIBC_2.34", "GCC_3.0"
  std::set<std::string> symtab_defined;    // defined symbols of .symtab, local ones included
                                           // (empty for a stripped file)
};

// Throws std::runtime_error naming the file when it cannot be read or is not a 64-bit ELF.
ElfDynamicInfo read_elf_dynamic_info(const std::string& path);

}  // namespace acspeed::testing
