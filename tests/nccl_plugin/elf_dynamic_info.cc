#include "elf_dynamic_info.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace acspeed::testing {
namespace {

class ElfImage {
 public:
  explicit ElfImage(const std::string& path) : path_(path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    const auto& header = at<Elf64_Ehdr>(0);
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64) {
      throw std::runtime_error(path + " is not a 64-bit ELF file");
    }
    for (size_t i = 0; i < header.e_shnum; ++i) {
      sections_.push_back(at<Elf64_Shdr>(header.e_shoff + i * header.e_shentsize));
    }
  }

  template <typename T>
  const T& at(size_t offset) const {
    if (offset + sizeof(T) > bytes_.size()) throw std::runtime_error(path_ + " is truncated");
    return *reinterpret_cast<const T*>(bytes_.data() + offset);
  }
  std::string string_at(const Elf64_Shdr& strtab, size_t offset) const {
    const size_t start = strtab.sh_offset + offset;
    if (start >= bytes_.size()) throw std::runtime_error(path_ + ": string outside the file");
    return std::string(bytes_.data() + start);
  }
  const std::vector<Elf64_Shdr>& sections() const { return sections_; }
  const Elf64_Shdr& linked(const Elf64_Shdr& section) const { return sections_.at(section.sh_link); }

 private:
  std::string path_;
  std::vector<char> bytes_;
  std::vector<Elf64_Shdr> sections_;
};

}  // namespace

ElfDynamicInfo read_elf_dynamic_info(const std::string& path) {
  const ElfImage elf(path);
  ElfDynamicInfo info;
  for (const auto& section : elf.sections()) {
    if (section.sh_type == SHT_DYNSYM || section.sh_type == SHT_SYMTAB) {
      const auto& names = elf.linked(section);
      for (size_t off = section.sh_offset; off < section.sh_offset + section.sh_size; off += sizeof(Elf64_Sym)) {
        const auto& sym = elf.at<Elf64_Sym>(off);
        if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0) continue;
        const int binding = ELF64_ST_BIND(sym.st_info);
        if (section.sh_type == SHT_SYMTAB) {
          info.symtab_defined.insert(elf.string_at(names, sym.st_name));
        } else if (binding == STB_GLOBAL || binding == STB_WEAK) {
          info.exported.insert(elf.string_at(names, sym.st_name));
        }
      }
    } else if (section.sh_type == SHT_DYNAMIC) {
      const auto& names = elf.linked(section);
      for (size_t off = section.sh_offset; off < section.sh_offset + section.sh_size; off += sizeof(Elf64_Dyn)) {
        const auto& entry = elf.at<Elf64_Dyn>(off);
        if (entry.d_tag == DT_NULL) break;
        if (entry.d_tag == DT_NEEDED) info.needed.insert(elf.string_at(names, entry.d_un.d_val));
      }
    } else if (section.sh_type == SHT_GNU_verneed) {
      const auto& names = elf.linked(section);
      size_t need = section.sh_offset;
      for (size_t i = 0; i < section.sh_info; ++i) {
        const auto& vn = elf.at<Elf64_Verneed>(need);
        size_t aux = need + vn.vn_aux;
        for (size_t j = 0; j < vn.vn_cnt; ++j) {
          const auto& va = elf.at<Elf64_Vernaux>(aux);
          info.version_needs.insert(elf.string_at(names, va.vna_name));
          aux += va.vna_next;
        }
        need += vn.vn_next;
      }
    }
  }
  return info;
}

}  // namespace acspeed::testing
