#ifndef SANDBOX_ANALYSIS_HASH_STREAM_H_
#define SANDBOX_ANALYSIS_HASH_STREAM_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

// Internal to sandbox/analysis: the deterministic "randomness" every analysis result is
// drawn from. Nothing here depends on time, the process or the platform's RNG, so a URL
// gets byte-identical results across runs, builds and machines.
namespace inspection::sandbox::analysis_internal {

// A SplitMix64 stream seeded from a hash. Each aspect of a result ("quality",
// "silhouette", ...) draws from its own stream (see For), so adding a draw to one aspect
// never changes another. Cheap to create; not thread-safe (make one per use).
class HashStream {
 public:
  explicit HashStream(uint64_t seed) : state_(seed) {}

  // The stream for `text` salted with `salt` (the aspect's name).
  static HashStream For(const std::string& salt, const std::string& text);

  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform();
  // Uniform in [lo, hi).
  double Between(double lo, double hi);
  // Uniform integer in [0, n); 0 when n <= 0.
  int Below(int n);
  // Uniform integer in [lo, hi], both included; lo when hi < lo.
  int IntIn(int lo, int hi);
  // An index of `weights` chosen in proportion to its (non-negative) weight; 0 when all
  // weights are zero.
  int Weighted(std::initializer_list<int> weights);
  // `digits` lower-case hexadecimal digits.
  std::string Hex(int digits);

 private:
  uint64_t state_;
};

// 24 lower-case hex digits (the length of the vendor's object ids) derived from `text`.
std::string ObjectId(const std::string& text);

// An injective key for a list of strings (length-prefixed), so that {"a,b"} and
// {"a", "b"} never hash alike.
std::string JoinKey(const std::vector<std::string>& parts);

// `value` rounded to 4 decimals: short JSON numbers, identical on every platform.
double Round4(double value);

}  // namespace inspection::sandbox::analysis_internal

#endif  // SANDBOX_ANALYSIS_HASH_STREAM_H_
