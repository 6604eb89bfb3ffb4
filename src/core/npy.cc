#include "core/npy.h"

#include <cstring>
#include <string_view>

#include "core/file.h"

namespace dsinfer {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

std::string_view descr_for(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "<f4";
    case DType::kI32: return "<i4";
    case DType::kI64: return "<i8";
    default: return "";
  }
}

}  // namespace

void write_npy(const std::string& path, const Tensor& tensor) {
  std::string_view descr = descr_for(tensor.dtype());
  DSINFER_CHECK(!descr.empty(), path, ": cannot write dtype ", dtype_name(tensor.dtype()), " as .npy");
  DSINFER_CHECK(tensor.device() == Device::kCpu, path, ": tensor is not on the CPU");
  std::string shape;  // Python tuple syntax: "(3, 4)", "(3,)", "()"
  for (int i = 0; i < tensor.rank(); ++i) shape += (i ? ", " : "") + std::to_string(tensor.dim(i));
  if (tensor.rank() == 1) shape += ',';
  std::string header = str_cat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", shape, "), }");
  size_t unpadded = kMagic.size() + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  auto length = static_cast<uint16_t>(header.size());
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>(length >> 8);
  out += header;
  out.append(static_cast<const char*>(tensor.raw()), tensor.nbytes());
  write_file(path, out);
}

Tensor read_npy(const std::string& path) {
  std::string bytes = read_file(path);
  DSINFER_CHECK(bytes.size() >= 10 && std::string_view(bytes).substr(0, 6) == kMagic, path,
                ": not a .npy file");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_length, header_start;
  if (major == 1) {
    header_length = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else {
    DSINFER_CHECK(bytes.size() >= 12, path, ": truncated .npy header");
    header_length = 0;
    for (int i = 3; i >= 0; --i) header_length = (header_length << 8) | static_cast<unsigned char>(bytes[8 + i]);
    header_start = 12;
  }
  DSINFER_CHECK(header_start + header_length <= bytes.size(), path, ": truncated .npy header");
  std::string_view header(bytes.data() + header_start, header_length);
  DSINFER_CHECK(header.find("'fortran_order': False") != std::string_view::npos, path,
                ": only C-order .npy is supported");
  DType dtype;
  if (header.find("'<f4'") != std::string_view::npos) dtype = DType::kF32;
  else if (header.find("'<i4'") != std::string_view::npos) dtype = DType::kI32;
  else if (header.find("'<i8'") != std::string_view::npos) dtype = DType::kI64;
  else throw Error(str_cat(path, ": unsupported .npy dtype in header ", header));
  size_t open = header.find("'shape': (");
  DSINFER_CHECK(open != std::string_view::npos, path, ": .npy header has no shape");
  size_t close = header.find(')', open);
  DSINFER_CHECK(close != std::string_view::npos, path, ": .npy header has a bad shape");
  std::vector<int64_t> dims;
  std::string_view list = header.substr(open + 10, close - open - 10);
  int64_t value = -1;
  for (char c : list) {
    if (c >= '0' && c <= '9') {
      value = (value < 0 ? 0 : value * 10) + (c - '0');
    } else if (c == ',' && value >= 0) {
      dims.push_back(value);
      value = -1;
    }
  }
  if (value >= 0) dims.push_back(value);
  Tensor tensor = Tensor::empty(dtype, Shape::from(dims));
  size_t data_start = header_start + header_length;
  DSINFER_CHECK(bytes.size() - data_start == tensor.nbytes(), path, ": .npy data size ",
                bytes.size() - data_start, " does not match shape ", tensor.shape().to_string());
  std::memcpy(tensor.raw(), bytes.data() + data_start, tensor.nbytes());
  return tensor;
}

}  // namespace dsinfer
