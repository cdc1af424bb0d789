#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/testing/test_environment.h"

TEST(Smoke, PostDelayedRunsAfterFastForward) {
  matrix::testing::TestEnvironment env;
  matrix::Handler handler(env.looper());
  bool ran = false;
  handler.PostDelayed([&] { ran = true; }, absl::Seconds(5));
  env.FastForwardBy(absl::Seconds(4));
  EXPECT_FALSE(ran);
  env.FastForwardBy(absl::Seconds(1));
  EXPECT_TRUE(ran);
}
