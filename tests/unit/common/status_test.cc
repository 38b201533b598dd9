// Status: the message a user reads stays free of source locations; the check
// macros record them beside it for debug logging (Note [Messages and locations]).
#include "common/status.h"

#include <gtest/gtest.h>

#include "common/check.h"

namespace kolo {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Status innermost() { return invalid_argument("KOLO_TRANSPORT=\"bogus\" is not a transport"); }

Status middle() {
  KOLO_RETURN_IF_ERROR(innermost());
  return Status::OK();
}

Status outer() {
  KOLO_RETURN_IF_ERROR(middle());
  return Status::OK();
}

TEST(StatusTest, CheckMacrosRecordLocationsBesideTheMessage) {
  const Status s = outer();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "KOLO_TRANSPORT=\"bogus\" is not a transport");
  EXPECT_EQ(s.to_string(), "KOLO_ERR_INVALID_ARGUMENT: " + s.message());
  // Two hops, innermost (middle's) first.
  const size_t split = s.where().find(" < ");
  ASSERT_NE(split, std::string::npos) << s.where();
  EXPECT_TRUE(contains(s.where().substr(0, split), "status_test.cc:")) << s.where();
  EXPECT_TRUE(contains(s.where().substr(split), "status_test.cc:")) << s.where();
  EXPECT_LT(std::stoi(s.where().substr(s.where().rfind(':', split) + 1)),
            std::stoi(s.where().substr(s.where().rfind(':') + 1)));
  EXPECT_EQ(s.debug_string(), s.to_string() + " [at " + s.where() + "]");
}

TEST(StatusTest, ContextGoesToTheMessageAndKeepsTheLocations) {
  const Status s = outer().with_context("tensor 'w'");
  EXPECT_EQ(s.message(), "tensor 'w': KOLO_TRANSPORT=\"bogus\" is not a transport");
  EXPECT_EQ(s.where(), outer().where());
}

TEST(StatusTest, OkStaysOkAndPlain) {
  const Status ok = Status::OK().with_location("x.cc", 1).with_context("c");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.where(), "");
  EXPECT_EQ(ok.debug_string(), "KOLO_OK");
  const Status bare = internal_error("m");
  EXPECT_EQ(bare.debug_string(), "KOLO_ERR_INTERNAL: m");
}

}  // namespace
}  // namespace kolo
