// RedactUrl (tools/matrix-report/src/internal/redact_url.h): the URLs
// matrix-report prints keep their user, host, port and path and lose their
// password, in the userinfo and in `password` query parameters.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "internal/redact_url.h"

namespace matrix::report::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RedactUrlTest, HidesTheUserinfoPassword) {
  EXPECT_EQ(RedactUrl("http://user:secret@host:8123/"), "http://user:***@host:8123/");
  EXPECT_EQ(RedactUrl("https://user:secret@host"), "https://user:***@host");
  EXPECT_EQ(RedactUrl("http://user:secret@host:8123/db?x=1"), "http://user:***@host:8123/db?x=1");
  EXPECT_EQ(RedactUrl("http://:secret@host:8123"), "http://:***@host:8123");
  EXPECT_EQ(RedactUrl("http://user:@host:8123"), "http://user:***@host:8123");
}

TEST(RedactUrlTest, KeepsAUserWithoutPassword) {
  EXPECT_EQ(RedactUrl("http://user@host:8123/"), "http://user@host:8123/");
  EXPECT_EQ(RedactUrl("http://@host:8123/"), "http://@host:8123/");
}

TEST(RedactUrlTest, LeavesAUrlWithoutCredentialsUnchanged) {
  for (const char* url : {"http://127.0.0.1:8123", "http://host:8123/", "https://host/a/b?x=1#f",
                          "http://host:8123/?user=app&database=matrix", "", "http://", "://",
                          "host:8123", "not a url", "http://host:8123/?", "http://host?&&="}) {
    EXPECT_EQ(RedactUrl(url), url);
  }
}

TEST(RedactUrlTest, HidesPasswordQueryParameters) {
  EXPECT_EQ(RedactUrl("http://host:8123/?user=app&password=secret"),
            "http://host:8123/?user=app&password=***");
  EXPECT_EQ(RedactUrl("http://host:8123/?password=secret&query=SELECT%201"),
            "http://host:8123/?password=***&query=SELECT%201");
  EXPECT_EQ(RedactUrl("http://host/?PASSWORD=secret#frag"), "http://host/?PASSWORD=***#frag");
  EXPECT_EQ(RedactUrl("http://host/?password=&password=secret"),
            "http://host/?password=***&password=***");
  // Only the parameter named so: others that merely contain the word stay.
  EXPECT_EQ(RedactUrl("http://host/?old_password_hint=x&mypassword=y"),
            "http://host/?old_password_hint=x&mypassword=y");
  EXPECT_EQ(RedactUrl("http://u:secret@host/?password=secret"), "http://u:***@host/?password=***");
}

TEST(RedactUrlTest, AnAtInThePathOrQueryIsNotAUserinfo) {
  EXPECT_EQ(RedactUrl("http://host:8123/a@b"), "http://host:8123/a@b");
  EXPECT_EQ(RedactUrl("http://host:8123/x:y@z"), "http://host:8123/x:y@z");
  EXPECT_EQ(RedactUrl("http://host:8123?q=a:b@c"), "http://host:8123?q=a:b@c");
  EXPECT_EQ(RedactUrl("http://host/?query=SELECT%20'a:b@c'"),
            "http://host/?query=SELECT%20'a:b@c'");
  EXPECT_EQ(RedactUrl("http://u:secret@host:8123/a@b"), "http://u:***@host:8123/a@b");
}

TEST(RedactUrlTest, HidesPasswordsWithUnescapedSpecialCharacters) {
  EXPECT_EQ(RedactUrl("http://user:se@cret@host:8123/"), "http://user:***@host:8123/");
  EXPECT_EQ(RedactUrl("http://user:se:cret@host:8123/"), "http://user:***@host:8123/");
  EXPECT_EQ(RedactUrl("http://user:se/cret@host:8123/"), "http://user:***@host:8123/");
  EXPECT_EQ(RedactUrl("http://user:se?cret@host:8123/"), "http://user:***@host:8123/");
  EXPECT_EQ(RedactUrl("http://user:se#cret@host:8123/"), "http://user:***@host:8123/");
  EXPECT_EQ(RedactUrl("http://user:se%40cret@host:8123/"), "http://user:***@host:8123/");
}

TEST(RedactUrlTest, Ipv6Hosts) {
  EXPECT_EQ(RedactUrl("http://[::1]:8123/"), "http://[::1]:8123/");
  EXPECT_EQ(RedactUrl("http://[::1]:8123/a@b"), "http://[::1]:8123/a@b");
  EXPECT_EQ(RedactUrl("http://user:secret@[::1]:8123/"), "http://user:***@[::1]:8123/");
  EXPECT_EQ(RedactUrl("http://user:secret@[fe80::1%25eth0]:8123/?password=secret"),
            "http://user:***@[fe80::1%25eth0]:8123/?password=***");
}

TEST(RedactUrlTest, TextWithoutSchemeIsReadAsAnAuthority) {
  EXPECT_EQ(RedactUrl("user:secret@host:8123"), "user:***@host:8123");
  EXPECT_EQ(RedactUrl("ftp://user:secret@host"), "ftp://user:***@host");
}

TEST(RedactUrlTest, NoSecretSurvivesInOddInputs) {
  for (const char* url :
       {"http://user:secret@", "http://user:secret@@host", "http://a:b:secret@host", "user:secret@",
        "http://user:secret/x@host/?password=secret", "http://?password=secret", "?password=secret",
        "http://h/?a=1&password=secret&b=2#password=x"}) {
    EXPECT_THAT(RedactUrl(url), Not(HasSubstr("secret"))) << url;
  }
}

}  // namespace
}  // namespace matrix::report::internal
