#ifndef TESTS_SUPPORT_TEST_PKI_H_
#define TESTS_SUPPORT_TEST_PKI_H_

#include <string>
#include <vector>

namespace inspection::testing {

// A throwaway certificate authority made at test time with the openssl CLI (EC P-256 keys,
// valid for two days) in `dir`: ca.pem / ca.key, and leaf certificates it issues. No key
// is ever committed. Thread-compatible.
class TestPki {
 public:
  // Creates the CA (subject CN=`ca_name`). ok() says whether it worked; error() why not.
  TestPki(std::string dir, const std::string& ca_name = "inspection test CA");

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  // Issues <name>.pem and <name>.key, signed by this CA, with subject CN=`common_name` and
  // the subjectAltName `sans` ("DNS:localhost,IP:127.0.0.1", "URI:spiffe://test/a").
  // Written to a temporary name first and renamed, so a file watcher never reads half a
  // file. False (and error()) on failure.
  bool Issue(const std::string& name, const std::string& common_name, const std::string& sans);

  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  // The whole content of a file of `dir` ("" when unreadable).
  std::string Read(const std::string& file) const;

 private:
  bool Run(const std::vector<std::string>& argv);

  std::string dir_;
  std::string error_;
};

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_TEST_PKI_H_
