// write_safetensors: the header as JSON padded to 8 bytes, then the tensor bytes.
#include "io/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/json.h"

namespace dsinfer::io {
namespace {

// The data region starts 8-aligned: the reference writer pads to 8 and readers may rely on it.
constexpr size_t kHeaderAlignment = 8;

void check_tensors(const std::string& path, const std::vector<NamedTensor>& tensors) {
  std::set<std::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    DSINFER_CHECK(name != "__metadata__", path, ": '__metadata__' is reserved, not a tensor name");
    DSINFER_CHECK(names.insert(name).second, path, ": tensor '", name, "' is given twice");
    DSINFER_CHECK(tensor.device() == Device::kCpu, path, ": tensor '", name, "' is not on the CPU");
    DSINFER_CHECK(tensor.raw() != nullptr || tensor.nbytes() == 0, path, ": tensor '", name, "' has no data");
  }
}

// Positions in `tensors`, in the order their bytes are laid out: larger elements first.
std::vector<size_t> data_order(const std::vector<NamedTensor>& tensors) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].second.dtype()) > dtype_size(tensors[b].second.dtype());
  });
  return order;
}

std::string header_text(const std::vector<NamedTensor>& tensors, const std::vector<size_t>& offsets,
                        const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json entries = Json::object();
    for (const auto& [key, value] : metadata) entries[key] = value;
    header["__metadata__"] = std::move(entries);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& tensor = tensors[i].second;
    Json shape = Json::array();
    for (int axis = 0; axis < tensor.rank(); ++axis) shape.push_back(tensor.dim(axis));
    Json entry = Json::object();
    entry["dtype"] = dtype_name(tensor.dtype());
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = Json(Json::Array{Json(offsets[i]), Json(offsets[i] + tensor.nbytes())});
    header[tensors[i].first] = std::move(entry);
  }
  std::string text = header.dump();
  text.append((kHeaderAlignment - text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  return text;
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  check_tensors(path, tensors);
  std::vector<size_t> order = data_order(tensors);
  std::vector<size_t> offsets(tensors.size());
  size_t next = 0;
  for (size_t index : order) {
    offsets[index] = next;
    next += tensors[index].second.nbytes();
  }
  std::string header = header_text(tensors, offsets, metadata);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  DSINFER_CHECK(out, path, ": cannot open for writing (", std::strerror(errno), ")");
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(length), sizeof(length));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (size_t index : order) {
    const Tensor& tensor = tensors[index].second;
    out.write(static_cast<const char*>(tensor.raw()), static_cast<std::streamsize>(tensor.nbytes()));
  }
  out.close();
  DSINFER_CHECK(out, path, ": write failed");
}

}  // namespace dsinfer::io
