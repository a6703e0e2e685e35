// The shared-token helpers and the listen policy, without gRPC traffic.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "captured_log.h"
#include "listen_policy.h"
#include "refusal_log.h"
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

TEST(Token, DirectoryIsNamedAsADirectoryNotAsEmpty) {
  test::TempDir dir;
  const std::string error = error_of([&] { read_token_file(dir.path()); });
  EXPECT_NE(error.find("is a directory"), std::string::npos) << error;
  EXPECT_EQ(error.find("empty"), std::string::npos) << error;
}

// The enrolment key is read and checked as the token is, and its errors name it.
TEST(Token, AnEnrolmentKeyFileIsReadAsATokenIsAndNamedInItsErrors) {
  test::TempDir dir;
  const std::string file = write(dir, "k", std::string(64, 'a') + "\n");
  EXPECT_EQ(read_secret_file(file, "enrolment key file"), std::string(64, 'a'));
  std::string error = error_of([&] { read_secret_file(dir.path(), "enrolment key file"); });
  EXPECT_NE(error.find("enrolment key file '" + dir.path() + "' is a directory"), std::string::npos) << error;
  error = error_of([&] { read_secret_file(dir.file("missing"), "enrolment key file"); });
  EXPECT_NE(error.find("cannot read enrolment key file"), std::string::npos) << error;
  ASSERT_EQ(chmod(file.c_str(), 0644), 0);
  const auto warning = secret_file_warning(file, "enrolment key file", "can register workers as this enrolment");
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("can register workers as this enrolment; chmod 600 it"), std::string::npos) << *warning;
}

TEST(Token, FileOpenToOtherUsersIsWarnedInOneLine) {
  test::TempDir dir;
  const std::string file = write(dir, "t", "0123456789abcdef\n");
  ASSERT_EQ(chmod(file.c_str(), 0600), 0);
  EXPECT_FALSE(token_file_warning(file));
  ASSERT_EQ(chmod(file.c_str(), 0644), 0);
  auto warning = token_file_warning(file);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("mode 0644"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("chmod 600"), std::string::npos) << *warning;
  EXPECT_EQ(warning->find('\n'), std::string::npos) << *warning;
  ASSERT_EQ(chmod(file.c_str(), 0640), 0);
  EXPECT_TRUE(token_file_warning(file)) << "readable by the group is open to other users too";
}

// A flood of refused calls: the first is logged whole, the rest counted into one line per interval.
TEST(RefusalLog, FirstRefusalIsLoggedThenTheRestAreCounted) {
  test::CapturedLog log;
  RefusalLog refusals(std::chrono::seconds(10));
  const auto t0 = RefusalLog::Clock::now();
  refusals.refused("ListRuns", "ipv4:127.0.0.1:1", "wrong token", t0);
  for (int i = 0; i < 999; ++i)
    refusals.refused("ListRuns", "ipv4:127.0.0.1:2", "wrong token", t0 + std::chrono::milliseconds(i));
  EXPECT_EQ(log.count("event=unauthenticated "), 1u) << log.text();
  EXPECT_EQ(refusals.pending(), 999u);
  refusals.flush(t0 + std::chrono::seconds(5));
  EXPECT_EQ(log.count("event=unauthenticated_more"), 0u) << "not before the interval ends";
  refusals.flush(t0 + std::chrono::seconds(11));
  EXPECT_EQ(log.count("event=unauthenticated_more count=999 since="), 1u) << log.text();
  EXPECT_NE(log.text().find("last_peer=ipv4:127.0.0.1:2"), std::string::npos) << log.text();
  refusals.flush(t0 + std::chrono::seconds(30));
  EXPECT_EQ(log.count("event=unauthenticated_more"), 1u) << "nothing more to count";
  // After a quiet interval the next refusal is logged whole again.
  refusals.refused("GetRun", "ipv4:127.0.0.1:3", "wrong token", t0 + std::chrono::seconds(31));
  EXPECT_EQ(log.count("event=unauthenticated "), 2u) << log.text();
  // A refusal after the interval writes the count of the one before it first.
  refusals.refused("GetRun", "ipv4:127.0.0.1:3", "wrong token", t0 + std::chrono::seconds(32));
  refusals.refused("GetRun", "ipv4:127.0.0.1:3", "wrong token", t0 + std::chrono::seconds(45));
  EXPECT_EQ(log.count("event=unauthenticated_more count=1 "), 1u) << log.text();
  EXPECT_EQ(log.count("event=unauthenticated "), 3u) << log.text();
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
