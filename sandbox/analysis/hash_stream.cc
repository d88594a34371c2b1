#include "sandbox/analysis/hash_stream.h"

#include <cmath>

#include "sandbox/analysis/image_analysis.h"

namespace inspection::sandbox::analysis_internal {

HashStream HashStream::For(const std::string& salt, const std::string& text) {
  // The separator keeps ("ab", "c") and ("a", "bc") apart.
  return HashStream(StableHash(salt + '\x1f' + text));
}

uint64_t HashStream::Next() {
  // SplitMix64: FNV-1a alone leaves nearby inputs ("1.jpg", "2.jpg") with correlated low
  // bits; this finaliser spreads every input bit over the whole output.
  state_ += 0x9e3779b97f4a7c15ULL;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double HashStream::Uniform() {
  // The top 53 bits make an exactly representable double in [0, 1).
  return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
}

double HashStream::Between(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

int HashStream::Below(int n) {
  if (n <= 0) return 0;
  return static_cast<int>(Next() % static_cast<uint64_t>(n));
}

int HashStream::IntIn(int lo, int hi) {
  if (hi < lo) return lo;
  return lo + Below(hi - lo + 1);
}

int HashStream::Weighted(std::initializer_list<int> weights) {
  int total = 0;
  for (int weight : weights) total += weight > 0 ? weight : 0;
  if (total == 0) return 0;
  int ticket = Below(total);
  int index = 0;
  for (int weight : weights) {
    if (weight > 0) {
      if (ticket < weight) return index;
      ticket -= weight;
    }
    ++index;
  }
  return 0;  // Unreachable: the tickets add up to `total`.
}

std::string HashStream::Hex(int digits) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(digits > 0 ? digits : 0);
  uint64_t word = 0;
  for (int i = 0; i < digits; ++i) {
    if (i % 16 == 0) word = Next();
    out.push_back(kDigits[word & 0xf]);
    word >>= 4;
  }
  return out;
}

std::string ObjectId(const std::string& text) { return HashStream::For("id", text).Hex(24); }

std::string JoinKey(const std::vector<std::string>& parts) {
  std::string key;
  for (const std::string& part : parts) {
    key += std::to_string(part.size());
    key += ':';
    key += part;
  }
  return key;
}

double Round4(double value) { return std::round(value * 10000.0) / 10000.0; }

}  // namespace inspection::sandbox::analysis_internal
