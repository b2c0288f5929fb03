#include <gtest/gtest.h>

#include <set>

#include "acspeed/error.h"
#include "acspeed/testbed/layout.h"

namespace acspeed::testbed {
namespace {

TEST(TestbedLayout, NodesGetDistinctNamespacesAndAddressesInThePrivateSubnet) {
  const ClusterLayout layout = make_layout("ab12", 3);
  EXPECT_EQ(layout.hub_netns, "acst-ab12-hub");
  ASSERT_EQ(layout.nodes.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto& node = layout.nodes[static_cast<size_t>(i)];
    EXPECT_EQ(node.rank, i);
    EXPECT_EQ(node.netns, "acst-ab12-n" + std::to_string(i));
    EXPECT_EQ(node.address, "10.254.213." + std::to_string(i + 1));
    EXPECT_EQ(node.ifname, "eth0");
    EXPECT_EQ(node.hub_port, "p" + std::to_string(i));
  }
  EXPECT_EQ(layout.all_netns(),
            (std::vector<std::string>{"acst-ab12-n0", "acst-ab12-n1", "acst-ab12-n2", "acst-ab12-hub"}));
}

TEST(TestbedLayout, TwoClustersShareNoNamespaceName) {
  const auto a = make_layout("one", 4).all_netns();
  const auto b = make_layout("two", 4).all_netns();
  std::set<std::string> names(a.begin(), a.end());
  for (const auto& ns : b) EXPECT_FALSE(names.count(ns)) << ns;
}

TEST(TestbedLayout, LargestClusterStaysInsideTheSlash24) {
  const ClusterLayout layout = make_layout("big", 64);
  EXPECT_EQ(layout.nodes.back().address, "10.254.213.64");
  EXPECT_THROW(make_layout("big", 65), InvalidArgument);
  EXPECT_THROW(make_layout("big", 0), InvalidArgument);
}

TEST(TestbedLayout, ClusterNamesAreShortLowercaseAlphanumerics) {
  EXPECT_NO_THROW(validate_cluster_name("ci7"));
  EXPECT_NO_THROW(validate_cluster_name("abcdefghij12"));
  for (const char* bad : {"", "Upper", "a-b", "a_b", "abcdefghij123", "../x", "a b"}) {
    try {
      validate_cluster_name(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(TestbedLayout, RandomNamesAreValidAndDiffer) {
  std::set<std::string> names;
  for (int i = 0; i < 20; ++i) {
    const std::string name = random_cluster_name();
    EXPECT_NO_THROW(validate_cluster_name(name));
    names.insert(name);
  }
  EXPECT_GT(names.size(), 15u);
}

TEST(TestbedLayout, ClusterOfNetnsRecognisesOnlyOurNamespaces) {
  for (const auto& ns : make_layout("x9", 12).all_netns()) EXPECT_EQ(cluster_of_netns(ns), "x9") << ns;
  for (const char* foreign : {"acst-", "acst-x", "acst-x-", "acst-x-n", "acst-x-nx", "acst-x-hubs",
                              "other-x-n0", "acst--n0", "cni-1234", "acst-x-n0a"}) {
    EXPECT_EQ(cluster_of_netns(foreign), "") << foreign;
  }
  EXPECT_EQ(netns_path("acst-x-n0"), "/run/netns/acst-x-n0");
}

}  // namespace
}  // namespace acspeed::testbed
