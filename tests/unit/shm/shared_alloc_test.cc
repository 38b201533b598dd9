// kolo_alloc's memory (transports/shm/shared_alloc.h): allocations, their spans,
// bad frees, and a second mapping through /proc/<pid>/fd, as a peer makes it,
// dropped when an allocation of the owner goes (its epoch moves); a forked
// child's writes stay in the child.
#include "transports/shm/shared_alloc.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace kolo::shm {
namespace {

TEST(SharedAlloc, ZeroedPageAlignedAndFound) {
  void* p = nullptr;
  ASSERT_TRUE(shared_alloc(10000, &p).ok());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  const char* c = static_cast<const char*>(p);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(c[i], 0) << i;
  SharedSpan span;
  ASSERT_TRUE(find_shared(c + 100, 9000, &span));
  EXPECT_EQ(span.pid, getpid());
  EXPECT_EQ(span.offset, 100u);
  EXPECT_GE(span.bytes, 10000u);
  EXPECT_TRUE(find_shared(c, span.bytes, &span));           // all of the rounded size
  EXPECT_FALSE(find_shared(c + 1, span.bytes, &span));      // one byte past its end
  EXPECT_FALSE(find_shared(c - 4096, 8, &span));            // before it
  char heap[64];
  EXPECT_FALSE(find_shared(heap, sizeof heap, &span));
  ASSERT_TRUE(shared_free(p).ok());
  EXPECT_FALSE(find_shared(c + 100, 8, &span));
}

TEST(SharedAlloc, BadArgumentsAreNamed) {
  void* p = reinterpret_cast<void*>(1);
  Status zero = shared_alloc(0, &p);
  EXPECT_EQ(zero.code(), Code::kInvalidArgument);
  EXPECT_NE(zero.message().find("0 bytes"), std::string::npos) << zero.to_string();
  EXPECT_EQ(p, nullptr);
  int on_stack = 0;
  Status bogus = shared_free(&on_stack);
  EXPECT_EQ(bogus.code(), Code::kInvalidArgument);
  EXPECT_NE(bogus.message().find("kolo_free"), std::string::npos) << bogus.to_string();
  ASSERT_TRUE(shared_alloc(64, &p).ok());
  ASSERT_TRUE(shared_free(p).ok());
  EXPECT_EQ(shared_free(p).code(), Code::kInvalidArgument);  // twice
  EXPECT_TRUE(shared_free(nullptr).ok());
}

TEST(SharedAlloc, APeerMappingSharesTheOwnersBytes) {
  void* p = nullptr;
  ASSERT_TRUE(shared_alloc(1 << 20, &p).ok());
  SharedSpan span;
  ASSERT_TRUE(find_shared(static_cast<char*>(p) + 4096, 16, &span));
  PeerMappings peer;
  char* seen = nullptr;
  ASSERT_TRUE(peer.map(span, &seen).ok());
  EXPECT_NE(seen, static_cast<char*>(p) + 4096);  // a mapping of its own
  std::memcpy(static_cast<char*>(p) + 4096, "kolo", 5);
  EXPECT_STREQ(seen, "kolo");
  std::memcpy(seen, "peer", 5);  // and the owner sees the peer's writes
  EXPECT_STREQ(static_cast<char*>(p) + 4096, "peer");
  ASSERT_TRUE(shared_free(p).ok());
}

// After a free, the same fd number may name a new allocation: the owner's epoch
// moved, so the peer maps again instead of reading the freed memory.
TEST(SharedAlloc, AFreeDropsThePeersMappings) {
  void* a = nullptr;
  ASSERT_TRUE(shared_alloc(8192, &a).ok());
  std::memcpy(a, "old", 4);
  SharedSpan first;
  ASSERT_TRUE(find_shared(a, 8, &first));
  PeerMappings peer;
  char* seen = nullptr;
  ASSERT_TRUE(peer.map(first, &seen).ok());
  EXPECT_STREQ(seen, "old");
  ASSERT_TRUE(shared_free(a).ok());
  void* b = nullptr;
  ASSERT_TRUE(shared_alloc(8192, &b).ok());
  std::memcpy(b, "new", 4);
  SharedSpan second;
  ASSERT_TRUE(find_shared(b, 8, &second));
  EXPECT_EQ(second.fd, first.fd) << "the test wants the fd number reused";
  EXPECT_NE(second.epoch, first.epoch);
  ASSERT_TRUE(peer.map(second, &seen).ok());
  EXPECT_STREQ(seen, "new");
  ASSERT_TRUE(shared_free(b).ok());
}

TEST(SharedAlloc, AnUnknownPeerFdIsAClearError) {
  SharedSpan span;
  span.pid = getpid();
  span.fd = 100000;
  span.bytes = 4096;
  PeerMappings peer;
  char* seen = nullptr;
  Status s = peer.map(span, &seen);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/fd/100000"), std::string::npos) << s.to_string();
}

// Note [kolo_alloc memory across fork]: a child writing an inherited block (or
// one it reuses) leaves the parent's bytes alone, its blocks are no longer the
// node's to read, and it can still free them and allocate new ones.
TEST(SharedAlloc, AForkedChildWritesItsOwnCopy) {
  void* p = nullptr;
  ASSERT_TRUE(shared_alloc(1 << 16, &p).ok());
  std::memcpy(p, "parent", 7);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SharedSpan span;
    int code = 0;
    if (std::strcmp(static_cast<char*>(p), "parent") != 0) code |= 1;  // inherited as it was
    std::memcpy(p, "child!", 7);
    if (find_shared(p, 8, &span)) code |= 2;
    if (!shared_free(p).ok()) code |= 4;
    void* q = nullptr;
    if (!shared_alloc(4096, &q).ok() || !find_shared(q, 8, &span) || !shared_free(q).ok()) code |= 8;
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bits: 1 not inherited, 2 still shared, 4 free, 8 alloc";
  EXPECT_STREQ(static_cast<char*>(p), "parent");
  SharedSpan span;
  EXPECT_TRUE(find_shared(p, 8, &span));
  ASSERT_TRUE(shared_free(p).ok());
}

}  // namespace
}  // namespace kolo::shm
