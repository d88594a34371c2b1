// What gRPC 1.51 (Debian bookworm) really puts in a server call's auth context and metadata,
// with certificates made at test time: the properties PeerOf reads (peer_uri, peer_dns,
// x509_subject, transport_security_type), with the TLS credentials the gateway's listener
// uses (TlsServerCredentials, a file-watching certificate provider), and the order of a
// repeated metadata key. The authorization policy relies on each.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gateway/security/peer_identity.h"
#include "gateway/services/unary_call.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_pki.h"

namespace inspection::testing {
namespace {

// What one call showed the server.
struct Seen {
  security::AuthzPeer peer;
  std::vector<std::string> common_names;  // x509_common_name
  std::vector<std::string> accounts;      // x-vendor-account, as client_metadata() has them
  std::optional<std::string> single_account;
  std::optional<errors::ApiError> refused;
};

// Answers every method at once, after noting what the call showed.
class Recorder final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    Seen seen;
    seen.peer = security::PeerOf(context->auth_context().get());
    if (context->auth_context() != nullptr) {
      for (const auto& cn : context->auth_context()->FindPropertyValues("x509_common_name")) {
        seen.common_names.emplace_back(cn.data(), cn.size());
      }
    }
    const auto [first, last] = context->client_metadata().equal_range("x-vendor-account");
    for (auto it = first; it != last; ++it) {
      seen.accounts.emplace_back(it->second.data(), it->second.size());
    }
    if (auto single = services::SingleMetadata(*context, "x-vendor-account")) {
      seen.single_account = std::string(*single);
    }
    seen.refused = services::RefuseRepeatedMetadata(*context);
    {
      absl::MutexLock lock(&mu_);
      last_ = std::move(seen);
    }
    class Done final : public grpc::ServerGenericBidiReactor {
     public:
      Done() { Finish(grpc::Status::OK); }
      void OnDone() override { delete this; }
    };
    return new Done;
  }

  Seen Last() {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  absl::Mutex mu_;
  Seen last_ ABSL_GUARDED_BY(mu_);
};

class PeerIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ok()) << pki_.error();
    ASSERT_TRUE(pki_.Issue("server", "gateway", "DNS:localhost,IP:127.0.0.1")) << pki_.error();
  }

  // A server as the gateway's listener: mTLS when `mtls`, else TLS without client
  // certificates; or plaintext when `tls` is false.
  void Start(bool tls, bool mtls) {
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
    if (tls) {
      auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          pki_.Path("server.key"), pki_.Path("server.pem"), pki_.Path("ca.pem"), 60);
      grpc::experimental::TlsServerCredentialsOptions options(provider);
      options.watch_identity_key_cert_pairs();
      if (mtls) {
        options.watch_root_certs();
        options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
      } else {
        options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
      }
      credentials = grpc::experimental::TlsServerCredentials(options);
    }
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterCallbackGenericService(&recorder_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  }

  // One call presenting the certificate `client` ("": none); false when it failed.
  bool Call(bool tls, const std::string& client, const std::vector<std::string>& accounts = {}) {
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (tls) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = pki_.Read("ca.pem");
      if (!client.empty()) {
        ssl.pem_private_key = pki_.Read(client + ".key");
        ssl.pem_cert_chain = pki_.Read(client + ".pem");
      }
      credentials = grpc::SslCredentials(ssl);
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port_), credentials, args);
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    for (const std::string& account : accounts) context.AddMetadata("x-vendor-account", account);
    grpc::Slice empty("");  // a ByteBuffer without a slice is no message at all
    grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    absl::Notification done;
    grpc::Status status;
    stub.UnaryCall(&context, "/test.Peer/Check", grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return status.ok();
  }

  TempDir temp_;
  TestPki pki_{temp_.path()};
  Recorder recorder_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(PeerIdentityTest, ACertificateGivesItsUriAndDnsSansAndItsWholeSubject) {
  // Subject O=corp, CN=... (openssl -subj escapes "/" in a value as "\/").
  ASSERT_TRUE(pki_.Issue("client", R"(spiffe:\/\/test\/claims-api/O=corp)",
                         "URI:spiffe://test/other,DNS:client.test,DNS:alt.test"))
      << pki_.error();
  Start(/*tls=*/true, /*mtls=*/true);
  ASSERT_TRUE(Call(/*tls=*/true, "client"));
  const Seen seen = recorder_.Last();
  EXPECT_TRUE(seen.peer.authenticated);
  EXPECT_EQ(seen.peer.uri_sans, std::vector<std::string>({"spiffe://test/other"}));
  EXPECT_EQ(seen.peer.dns_sans, std::vector<std::string>({"client.test", "alt.test"}));
  // RFC 2253: the last RDN first.
  EXPECT_EQ(seen.peer.subject, "O=corp,CN=spiffe://test/claims-api");
  // The bare CN is in the auth context too, but nothing of the policy reads it.
  EXPECT_EQ(seen.common_names, std::vector<std::string>({"spiffe://test/claims-api"}));
  EXPECT_EQ(security::CallerIdentityOf(seen.peer), "spiffe://test/other");
}

TEST_F(PeerIdentityTest, ACertificateWithoutSansIsNamedByItsSubject) {
  ASSERT_TRUE(pki_.Issue("client", R"(spiffe:\/\/test\/claims-api)", "email:ops@test.example"))
      << pki_.error();
  Start(/*tls=*/true, /*mtls=*/true);
  ASSERT_TRUE(Call(/*tls=*/true, "client"));
  const Seen seen = recorder_.Last();
  EXPECT_TRUE(seen.peer.uri_sans.empty());
  EXPECT_TRUE(seen.peer.dns_sans.empty());
  EXPECT_EQ(seen.peer.subject, "CN=spiffe://test/claims-api");
  EXPECT_EQ(security::CallerIdentityOf(seen.peer), "CN=spiffe://test/claims-api");
}

TEST_F(PeerIdentityTest, TlsWithoutAClientCertificateIsAuthenticatedWithoutIdentity) {
  Start(/*tls=*/true, /*mtls=*/false);
  ASSERT_TRUE(Call(/*tls=*/true, ""));
  const Seen seen = recorder_.Last();
  EXPECT_TRUE(seen.peer.authenticated);
  EXPECT_TRUE(seen.peer.uri_sans.empty());
  EXPECT_TRUE(seen.peer.dns_sans.empty());
  EXPECT_EQ(seen.peer.subject, "");
  EXPECT_EQ(security::CallerIdentityOf(seen.peer), "");
}

TEST_F(PeerIdentityTest, PlaintextIsNotAuthenticated) {
  Start(/*tls=*/false, /*mtls=*/false);
  ASSERT_TRUE(Call(/*tls=*/false, ""));
  EXPECT_FALSE(recorder_.Last().peer.authenticated);
}

TEST_F(PeerIdentityTest, RepeatedMetadataArrivesInOrderAndIsRefused) {
  Start(/*tls=*/false, /*mtls=*/false);
  ASSERT_TRUE(Call(/*tls=*/false, "", {"default", "preprod"}));
  Seen seen = recorder_.Last();
  EXPECT_EQ(seen.accounts, std::vector<std::string>({"default", "preprod"}));
  EXPECT_FALSE(seen.single_account.has_value());
  ASSERT_TRUE(seen.refused.has_value());
  EXPECT_EQ(seen.refused->code, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(seen.refused->reason, errors::kReasonInvalidRequest);
  ASSERT_EQ(seen.refused->violations.size(), 1u);
  EXPECT_EQ(seen.refused->violations[0].field, "x-vendor-account");
  EXPECT_EQ(seen.refused->violations[0].description, "metadata sent 2 times; send it once");
  // The values themselves are not echoed.
  EXPECT_EQ(seen.refused->message.find("preprod"), std::string::npos);

  ASSERT_TRUE(Call(/*tls=*/false, "", {"preprod"}));
  seen = recorder_.Last();
  EXPECT_EQ(seen.single_account, "preprod");
  EXPECT_FALSE(seen.refused.has_value());
}

}  // namespace
}  // namespace inspection::testing
