// Well-formed UTF-8, and the escaping that makes any bytes safe to hand to Python or JSON.
#include "acspeed/utf8.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace acspeed {
namespace {

TEST(Utf8, WellFormedTextIsAcceptedAndComesBackUnchanged) {
  for (const std::string& text : std::vector<std::string>{"", "plain ascii", "caf\xc3\xa9", "\xe2\x82\xac 5", "\xf0\x9f\x98\x80",
                                 "\xf4\x8f\xbf\xbf", std::string("nul\0inside", 10)}) {
    EXPECT_TRUE(is_utf8(text)) << text;
    EXPECT_EQ(utf8_escaped(text), text);
  }
}

TEST(Utf8, MalformedSequencesAreRefused) {
  for (const std::string& text : std::vector<std::string>{"\xff", "\xc3", "\xc3\x28", "\xc0\x80", "\xe0\x80\x80", "\xed\xa0\x80",
                                 "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xe2\x82", "\x80"}) {
    EXPECT_FALSE(is_utf8(text)) << utf8_escaped(text);
    EXPECT_TRUE(is_utf8(utf8_escaped(text))) << utf8_escaped(text);
  }
}

TEST(Utf8, OnlyTheBadBytesAreEscaped) {
  EXPECT_EQ(utf8_escaped("a\xff" "b"), "a\\xffb");
  EXPECT_EQ(utf8_escaped("caf\xc3\xa9\xc3"), "caf\xc3\xa9\\xc3");
  // A truncated sequence: its lead byte is escaped and what follows is read again on its own.
  EXPECT_EQ(utf8_escaped("\xe2\x82" "x"), "\\xe2\\x82x");
  EXPECT_EQ(utf8_escaped("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
}

}  // namespace
}  // namespace acspeed
