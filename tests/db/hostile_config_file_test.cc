// ACSPEED_CONFIG naming something hostile (docs/reliability.md): a directory, a FIFO nobody writes
// to, a huge file, bytes that are not UTF-8. The lookup `import acspeed` runs returns at once with
// one error naming the path and what is wrong, and the job runs with DDP's defaults.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>

#include "acspeed/resolve.h"
#include "acspeed/utf8.h"
#include "test_util.h"

namespace acspeed {
namespace {
using testing::sample_decision;
using testing::TempDir;

class HostileConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("ACSPEED_DISABLE");
    request.key = sample_decision("amp").key;
    request.torch_version = "2.15.1";
    request.store_path = dir.file("acspeed.db");
  }
  void TearDown() override { unsetenv("ACSPEED_CONFIG"); }
  // Resolves with ACSPEED_CONFIG=path; expects an error with DDP defaults whose message is UTF-8.
  Resolution refused(const std::string& path) {
    setenv("ACSPEED_CONFIG", path.c_str(), 1);
    Resolution r = resolve_config(request);
    EXPECT_EQ(r.source, ResolveSource::kError) << r.message;
    EXPECT_TRUE(r.config.is_default());
    EXPECT_FALSE(r.applied);
    EXPECT_TRUE(is_utf8(r.message)) << utf8_escaped(r.message);
    return r;
  }
  TempDir dir;
  ResolveRequest request;
};

TEST_F(HostileConfigFile, ADirectoryIsNamedAsOne) {
  const auto r = refused(dir.file(""));
  EXPECT_NE(r.message.find("is a directory"), std::string::npos) << r.message;
  // The reason alone: the job's line says what follows (no change, or raised with ACSPEED_STRICT=1).
  EXPECT_EQ(r.message.find("using DDP defaults"), std::string::npos) << r.message;
}

// Opening a FIFO for reading blocks until someone writes: the lookup must not. A lookup still
// blocked after a minute (a hang, not a slow machine) is unblocked by writing to the FIFO, and fails.
TEST_F(HostileConfigFile, AFifoNobodyWritesToDoesNotHang) {
  const auto fifo = dir.file("config.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  setenv("ACSPEED_CONFIG", fifo.c_str(), 1);
  auto lookup = std::async(std::launch::async, [&] { return resolve_config(request); });
  if (lookup.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    const int writer = ::open(fifo.c_str(), O_WRONLY);
    ::close(writer);
    FAIL() << "the lookup blocked on the FIFO";
  }
  const auto r = lookup.get();
  EXPECT_EQ(r.source, ResolveSource::kError);
  EXPECT_NE(r.message.find("is a FIFO"), std::string::npos) << r.message;
  EXPECT_TRUE(r.config.is_default());
}

TEST_F(HostileConfigFile, AHugeFileIsRefusedWithoutBeingRead) {
  const auto huge = dir.file("huge.json");
  std::ofstream(huge) << R"({"version":1})";
  ASSERT_EQ(::truncate(huge.c_str(), (int64_t{1} << 30)), 0);  // 1 GiB, sparse: no disk used
  const auto r = refused(huge);
  EXPECT_NE(r.message.find("more than 64 MiB"), std::string::npos) << r.message;
}

TEST_F(HostileConfigFile, InvalidUtf8IsAnErrorPythonCanCarry) {
  const auto bad = dir.file("latin1.json");
  std::ofstream(bad) << "{\"version\":1,\"algorithm\":\"r\xe9" "duction\xff\"}";
  const auto r = refused(bad);
  EXPECT_NE(r.message.find("latin1.json"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("not valid JSON"), std::string::npos) << r.message;
}

TEST_F(HostileConfigFile, APathThatIsNotUtf8IsEscapedInTheMessage) {
  const auto r = refused(dir.file("conf\xff.json"));
  EXPECT_NE(r.message.find("conf\\xff.json"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace acspeed
