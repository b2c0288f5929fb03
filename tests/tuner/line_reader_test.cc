// The JSON-lines framing shared by the worker group and the node link (tuner/src/line_reader.h).
#include "line_reader.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace acspeed::tuner {
namespace {

struct SocketPair {
  int fds[2] = {-1, -1};
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0); }
  ~SocketPair() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
  void send(const std::string& bytes) const { ASSERT_EQ(write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size())); }
  void close_writer() {
    close(fds[1]);
    fds[1] = -1;
  }
};

TEST(LineReader, GivesWholeLinesAndKeepsAnUnfinishedOneForLater) {
  SocketPair pair;
  LineReader reader;
  pair.send("{\"a\":1}\n{\"b\":2}\n{\"c\":");
  EXPECT_TRUE(reader.fill(pair.fds[0]));  // open: nothing more to read yet
  EXPECT_EQ(reader.next(), "{\"a\":1}");
  EXPECT_EQ(reader.next(), "{\"b\":2}");
  EXPECT_EQ(reader.next(), std::nullopt);
  pair.send("3}\n");
  EXPECT_TRUE(reader.fill(pair.fds[0]));
  EXPECT_EQ(reader.next(), "{\"c\":3}");
  EXPECT_EQ(reader.next(), std::nullopt);
}

TEST(LineReader, WhatThePeerSentBeforeClosingIsStillRead) {
  SocketPair pair;
  LineReader reader;
  pair.send("last report\n");
  pair.close_writer();
  EXPECT_FALSE(reader.fill(pair.fds[0]));  // closed
  EXPECT_EQ(reader.next(), "last report");
  EXPECT_FALSE(reader.fill(pair.fds[0]));
}

TEST(LineReader, AnUnfinishedLineBeyondTheBoundIsOverlong) {
  SocketPair pair;
  LineReader reader(8);
  pair.send("12345678");
  ASSERT_TRUE(reader.fill(pair.fds[0]));
  EXPECT_FALSE(reader.overlong());  // 8 bytes: at the bound
  pair.send("9");
  ASSERT_TRUE(reader.fill(pair.fds[0]));
  EXPECT_TRUE(reader.overlong());
  reader.clear();
  EXPECT_FALSE(reader.overlong());
  pair.send("ok\n");
  ASSERT_TRUE(reader.fill(pair.fds[0]));
  EXPECT_EQ(reader.next(), "ok");
}

}  // namespace
}  // namespace acspeed::tuner
