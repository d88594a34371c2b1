#include "tests/support/test_pki.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace inspection::testing {
namespace {

constexpr char kDays[] = "2";
// Debian's openssl package (scripts/apt-packages.txt).
constexpr char kOpenssl[] = "/usr/bin/openssl";

}  // namespace

TestPki::TestPki(std::string dir, const std::string& ca_name) : dir_(std::move(dir)) {
  Run({kOpenssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
       "-nodes", "-keyout", Path("ca.key"), "-out", Path("ca.pem"), "-days", kDays, "-subj",
       "/CN=" + ca_name});
}

bool TestPki::Run(const std::vector<std::string>& argv) {
  Subprocess process(argv);
  const int code = process.Wait(std::chrono::seconds(30));
  if (code != 0) {
    error_ = "openssl failed (" + std::to_string(code) + "): " + process.output();
    return false;
  }
  return true;
}

bool TestPki::Issue(const std::string& name, const std::string& common_name,
                    const std::string& sans) {
  const std::string key = Path(name + ".key.tmp");
  const std::string csr = Path(name + ".csr");
  const std::string pem = Path(name + ".pem.tmp");
  const std::string ext = Path(name + ".ext");
  {
    std::ofstream out(ext);
    out << "subjectAltName=" << sans << "\nbasicConstraints=CA:FALSE\n";
  }
  if (!Run({kOpenssl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=" + common_name}) ||
      !Run({kOpenssl, "x509", "-req", "-in", csr, "-CA", Path("ca.pem"), "-CAkey", Path("ca.key"),
            "-CAcreateserial", "-out", pem, "-days", kDays, "-extfile", ext})) {
    return false;
  }
  // The key first: a watcher that sees the new certificate finds its key already there.
  if (std::rename(key.c_str(), Path(name + ".key").c_str()) != 0 ||
      std::rename(pem.c_str(), Path(name + ".pem").c_str()) != 0) {
    error_ = "cannot rename the issued files";
    return false;
  }
  return true;
}

std::string TestPki::Read(const std::string& file) const {
  std::ifstream in(Path(file));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace inspection::testing
