// Reading files whole, and mapping them read-only.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dsinfer {

// Throws dsinfer::Error "PATH: reason" when the file cannot be read.
std::string read_file(const std::string& path);
void write_file(const std::string& path, std::string_view contents);
bool file_exists(const std::string& path);

// A read-only memory map of a whole file. Move-only; unmaps on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws dsinfer::Error naming the path
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dsinfer
