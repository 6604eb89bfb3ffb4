#include "core/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace dsinfer {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(str_cat(path, ": cannot open (", std::strerror(errno), ")"));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw Error(str_cat(path, ": read failed"));
  return contents.str();
}

void write_file(const std::string& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(str_cat(path, ": cannot open for writing (", std::strerror(errno), ")"));
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out) throw Error(str_cat(path, ": write failed"));
}

bool file_exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(str_cat(path, ": cannot open (", std::strerror(errno), ")"));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int saved = errno;
    ::close(fd);
    throw Error(str_cat(path, ": cannot stat (", std::strerror(saved), ")"));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw Error(str_cat(path, ": not a regular file"));
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      int saved = errno;
      ::close(fd);
      throw Error(str_cat(path, ": mmap failed (", std::strerror(saved), ")"));
    }
    data_ = static_cast<const unsigned char*>(mapped);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace dsinfer
