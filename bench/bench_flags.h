#ifndef BENCH_BENCH_FLAGS_H_
#define BENCH_BENCH_FLAGS_H_

#include <string>

namespace inspection::bench {

// The value of `--name=VALUE` among the arguments, or "" when absent. The bench binaries
// (bench_fanout_client, bench_hop_floor) take only such flags, set by bench/run.py.
inline std::string Flag(int argc, char** argv, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(prefix, 0) == 0) return arg.substr(prefix.size());
  }
  return "";
}

}  // namespace inspection::bench

#endif  // BENCH_BENCH_FLAGS_H_
