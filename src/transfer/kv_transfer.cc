#include "transfer/kv_transfer.h"

#include "core/error.h"

namespace dsinfer::transfer {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::vector<Write> merge_contiguous(std::span<const Write> writes) {
  std::vector<Write> merged;
  for (const Write& w : writes) {
    if (w.bytes == 0) continue;
    if (!merged.empty()) {
      Write& last = merged.back();
      if (last.local_offset + last.bytes == w.local_offset && last.remote_offset + last.bytes == w.remote_offset) {
        last.bytes += w.bytes;
        continue;
      }
      // Pages listed high to low (a pool's free list hands them out so) run downwards in both.
      if (w.local_offset + w.bytes == last.local_offset && w.remote_offset + w.bytes == last.remote_offset) {
        last = {w.local_offset, w.remote_offset, last.bytes + w.bytes};
        continue;
      }
    }
    merged.push_back(w);
  }
  return merged;
}

std::string blob_to_hex(const Blob& blob) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(blob.size() * 2);
  for (unsigned char byte : blob) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

Blob blob_from_hex(std::string_view text, std::string_view what) {
  DSINFER_CHECK(text.size() % 2 == 0, what, " is not hex (", text.size(), " digits)");
  Blob blob(text.size() / 2, '\0');
  for (size_t i = 0; i < blob.size(); ++i) {
    const int high = hex_digit(text[2 * i]), low = hex_digit(text[2 * i + 1]);
    DSINFER_CHECK(high >= 0 && low >= 0, what, " is not hex (at digit ", 2 * i, ")");
    blob[i] = static_cast<char>(high << 4 | low);
  }
  return blob;
}

}  // namespace dsinfer::transfer
