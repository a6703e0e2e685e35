// The shared-token helpers and the listen policy, without gRPC traffic.
#include <gtest/gtest.h>

#include <fstream>

#include "listen_policy.h"
#include "test_db.h"
#include "token.h"

namespace evo::security {
namespace {

std::string write(const test::TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.file(name)) << text;
  return dir.file(name);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const SecurityError& e) {
    return e.what();
  }
  return "";
}

TEST(Token, EqualOnlyWhenEveryByteAndTheLengthAgree) {
  EXPECT_TRUE(tokens_equal("0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("0123456789abcdeF", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("1123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("0123456789abcde", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("0123456789abcdef0", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("", "0123456789abcdef"));
  // A presented token that is the expected one plus a NUL must not pass either.
  EXPECT_FALSE(tokens_equal(std::string("0123456789abcdef\0", 17), "0123456789abcdef"));
}

TEST(Token, FileLosesItsTrailingNewlineOnly) {
  test::TempDir dir;
  EXPECT_EQ(read_token_file(write(dir, "t", "0123456789abcdef\n")), "0123456789abcdef");
  EXPECT_EQ(read_token_file(write(dir, "crlf", "0123456789abcdef\r\n")), "0123456789abcdef");
}

TEST(Token, BadFilesAndValuesAreOneLineErrors) {
  test::TempDir dir;
  EXPECT_NE(error_of([&] { read_token_file(dir.file("missing")); }).find("cannot read token file"), std::string::npos);
  EXPECT_NE(error_of([&] { read_token_file(write(dir, "empty", "\n")); }).find("is empty"), std::string::npos);
  EXPECT_NE(error_of([&] { read_token_file(write(dir, "short", "abc")); }).find("too short"), std::string::npos);
  EXPECT_NE(error_of([&] { read_token_file(write(dir, "space", "0123456789 abcdef")); }).find("space"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_token_file(write(dir, "long", std::string(5000, 'a'))); }).find("too long"),
            std::string::npos);
  EXPECT_NE(error_of([&] { validate_token("0123456789abcdef\x01", "$EVO_TOKEN"); }).find("$EVO_TOKEN"),
            std::string::npos);
}

TEST(Token, FileWinsOverTheEnvironment) {
  test::TempDir dir;
  const std::string file = write(dir, "t", "from-the-file-0123456789");
  EXPECT_EQ(resolve_token(file, "from-the-env-0123456789"), "from-the-file-0123456789");
  EXPECT_EQ(resolve_token("", "from-the-env-0123456789"), "from-the-env-0123456789");
  EXPECT_EQ(resolve_token("", nullptr), "");
  EXPECT_FALSE(error_of([] { resolve_token("", ""); }).empty()) << "EVO_TOKEN set but empty is a mistake";
}

TEST(ListenPolicy, LoopbackAddresses) {
  for (const char* a : {"127.0.0.1:50051", "127.1.2.3:1", "localhost:50051", "[::1]:50051", "::1",
                        "unix:/tmp/evod.sock", "unix-abstract:evod"})
    EXPECT_TRUE(is_loopback_listen(a)) << a;
  for (const char* a : {"0.0.0.0:50051", "[::]:50051", ":50051", "10.0.0.5:50051", "evod.example.com:50051",
                        "[2001:db8::1]:50051", "128.0.0.1:50051", "", "localhost.evil.com:1"})
    EXPECT_FALSE(is_loopback_listen(a)) << a;
}

TEST(ListenPolicy, NonLoopbackNeedsATokenOrInsecure) {
  EXPECT_FALSE(listen_refusal("127.0.0.1:50051", false, false));
  auto refusal = listen_refusal("0.0.0.0:50051", false, false);
  ASSERT_TRUE(refusal);
  EXPECT_NE(refusal->find("--token-file"), std::string::npos);
  EXPECT_NE(refusal->find("--insecure"), std::string::npos);
  EXPECT_EQ(refusal->find('\n'), std::string::npos);
  EXPECT_FALSE(listen_refusal("0.0.0.0:50051", true, false));
  EXPECT_FALSE(listen_refusal("0.0.0.0:50051", false, true));
}

}  // namespace
}  // namespace evo::security
