// Two agents in one process, as a prefill and a decode instance: the decode side registers a page
// pool and describes it, the prefill side writes scattered pages into it with a note.
#include "transfer/ucx_transfer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace dsinfer::transfer {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint8_t kUntouched = 0xAB;

std::unique_ptr<KvTransfer> agent() { return make_ucx_transfer(UcxOptions{"tcp"}); }

// Polls both agents (the receiver's progress may be what carries the bytes in, over TCP) until every
// transfer has settled and `want_notes` notes have arrived; gives up after 20 s. The transfers' states.
std::vector<TransferState> settle(KvTransfer& sender, KvTransfer& receiver, const std::vector<uint64_t>& transfers,
                                  size_t want_notes, std::vector<Blob>& notes) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<TransferState> states(transfers.size(), TransferState::kInFlight);
  while (std::chrono::steady_clock::now() < deadline) {
    bool settled = true;
    for (size_t i = 0; i < transfers.size(); ++i) {
      if (states[i] == TransferState::kInFlight) states[i] = sender.poll(transfers[i]);
      settled = settled && states[i] != TransferState::kInFlight;
    }
    for (Blob& note : receiver.take_notes()) notes.push_back(std::move(note));
    if (settled && notes.size() >= want_notes) break;
  }
  return states;
}

struct Pair {
  std::unique_ptr<KvTransfer> prefill = agent(), decode = agent();
  std::vector<uint8_t> source = std::vector<uint8_t>(10 * kPage), pool = std::vector<uint8_t>(64 * kPage, kUntouched);
  int source_region = -1, remote_pool = -1;

  Pair() {
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 131 + i / kPage);
    source_region = prefill->register_memory(source.data(), source.size());
    const int pool_region = decode->register_memory(pool.data(), pool.size());
    const int peer = prefill->connect(decode->address());  // the addresses and descriptors cross the control plane
    remote_pool = prefill->import(peer, decode->describe(pool_region));
  }
};

Write page(uint64_t from, uint64_t to) { return {from * kPage, to * kPage, kPage}; }

TEST(UcxTransfer, WritesScatteredPagesThenTheNoteArrives) {
  Pair pair;
  // Pages 0-2 to 5-7 (one run), 4 to 20, 7-8 to 30-31 (another run).
  const std::vector<Write> writes = {page(0, 5), page(1, 6), page(2, 7), page(4, 20), page(7, 30), page(8, 31)};
  const uint64_t transfer = pair.prefill->post(pair.source_region, pair.remote_pool, writes, "request 17: layer 0-3");
  std::vector<Blob> notes;
  ASSERT_EQ(settle(*pair.prefill, *pair.decode, {transfer}, 1, notes)[0], TransferState::kDone)
      << pair.prefill->error(transfer);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "request 17: layer 0-3");
  std::vector<uint8_t> expected(pair.pool.size(), kUntouched);
  for (const Write& w : writes)
    std::copy_n(pair.source.begin() + static_cast<int64_t>(w.local_offset), w.bytes,
                expected.begin() + static_cast<int64_t>(w.remote_offset));
  EXPECT_TRUE(pair.pool == expected) << "the pool differs from the pages written (or a page outside them changed)";
  pair.prefill->release(transfer);
  EXPECT_THROW(pair.prefill->poll(transfer), Error);  // released
}

TEST(UcxTransfer, ProgressAloneCarriesThePagesInAndKeepsTheNoteForTakeNotes) {
  Pair pair;
  const std::vector<Write> writes = {page(0, 3), page(1, 4), page(9, 40)};
  const uint64_t transfer = pair.prefill->post(pair.source_region, pair.remote_pool, writes, "pushed by progress");
  std::vector<uint8_t> expected(pair.pool.size(), kUntouched);
  for (const Write& w : writes)
    std::copy_n(pair.source.begin() + static_cast<int64_t>(w.local_offset), w.bytes,
                expected.begin() + static_cast<int64_t>(w.remote_offset));
  // Only progress(), as an engine between the layers of a long step: no poll, no take_notes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (pair.pool != expected && std::chrono::steady_clock::now() < deadline) {
    pair.prefill->progress();
    pair.decode->progress();
  }
  EXPECT_TRUE(pair.pool == expected) << "progress() alone did not carry the pages in within 20 s";
  // The note that progress() received waits for take_notes; the push reports done to its poll.
  std::vector<Blob> notes;
  ASSERT_EQ(settle(*pair.prefill, *pair.decode, {transfer}, 1, notes)[0], TransferState::kDone)
      << pair.prefill->error(transfer);
  EXPECT_EQ(notes, std::vector<Blob>{"pushed by progress"});
  pair.prefill->release(transfer);
}

TEST(UcxTransfer, NotesArriveInOrderForManyTransfers) {
  Pair pair;
  std::vector<uint64_t> transfers;
  for (int i = 0; i < 8; ++i)
    transfers.push_back(pair.prefill->post(pair.source_region, pair.remote_pool, std::vector<Write>{page(i, 40 + i)},
                                           "note " + std::to_string(i)));
  std::vector<Blob> notes;
  for (TransferState state : settle(*pair.prefill, *pair.decode, transfers, transfers.size(), notes))
    EXPECT_EQ(state, TransferState::kDone);
  ASSERT_EQ(notes.size(), transfers.size());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(notes[i], "note " + std::to_string(i));
  for (int i = 0; i < 8; ++i)
    EXPECT_TRUE(std::equal(pair.source.begin() + i * kPage, pair.source.begin() + (i + 1) * kPage,
                           pair.pool.begin() + (40 + i) * kPage)) << "page " << i;
}

TEST(UcxTransfer, RefusesWritesOutsideTheRegionsAndPostsNothing) {
  Pair pair;
  const std::vector<std::pair<Write, const char*>> bad = {
      {{0, 64 * kPage - 100, kPage}, "runs past the remote region"},
      {{10 * kPage - 8, 0, 16}, "runs past the local region"},
      {{~uint64_t{0} - 10, 0, 100}, "runs past the local region"},  // offset + bytes wraps around
  };
  for (const auto& [write, message] : bad) {
    try {
      pair.prefill->post(pair.source_region, pair.remote_pool, std::vector<Write>{page(0, 1), write}, "bad");
      ADD_FAILURE() << "no error for " << message;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW(pair.prefill->post(pair.source_region, 7, {}, ""), Error);   // no such remote region
  EXPECT_THROW(pair.prefill->post(3, pair.remote_pool, {}, ""), Error);     // no such local region
  EXPECT_THROW(pair.prefill->post(pair.source_region, pair.remote_pool, {}, Blob(5000, 'x')), Error);  // a long note
  EXPECT_THROW(pair.prefill->import(4, "descriptor"), Error);               // no such peer
  EXPECT_THROW(pair.prefill->register_memory(nullptr, 10), Error);
  // Nothing was posted: the pool is as it was, and no note comes.
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(pair.decode->take_notes().empty());
  EXPECT_TRUE(std::all_of(pair.pool.begin(), pair.pool.end(), [](uint8_t b) { return b == kUntouched; }));
}

TEST(UcxTransfer, ATransferToAPeerThatIsGoneFailsAndTheAgentStaysUsable) {
  Pair pair;
  // A first transfer lands, so the connection is up; then the decode instance goes away.
  std::vector<Blob> notes;
  const uint64_t first = pair.prefill->post(pair.source_region, pair.remote_pool, std::vector<Write>{page(0, 0)}, "1");
  ASSERT_EQ(settle(*pair.prefill, *pair.decode, {first}, 1, notes)[0], TransferState::kDone);
  pair.decode.reset();
  const uint64_t second = pair.prefill->post(pair.source_region, pair.remote_pool, std::vector<Write>{page(1, 1)}, "2");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  TransferState state = TransferState::kInFlight;
  while (state == TransferState::kInFlight && std::chrono::steady_clock::now() < deadline)
    state = pair.prefill->poll(second);
  EXPECT_EQ(state, TransferState::kFailed);
  EXPECT_NE(pair.prefill->error(second), "");
  pair.prefill->release(second);
  // The agent still serves other peers.
  auto other = agent();
  std::vector<uint8_t> pool(4 * kPage, kUntouched);
  const int peer = pair.prefill->connect(other->address());
  const int remote = pair.prefill->import(peer, other->describe(other->register_memory(pool.data(), pool.size())));
  const uint64_t third = pair.prefill->post(pair.source_region, remote, std::vector<Write>{page(2, 3)}, "3");
  notes.clear();
  ASSERT_EQ(settle(*pair.prefill, *other, {third}, 1, notes)[0], TransferState::kDone);
  EXPECT_TRUE(std::equal(pair.source.begin() + 2 * kPage, pair.source.begin() + 3 * kPage, pool.begin() + 3 * kPage));
}

TEST(UcxTransfer, ATransferPastItsTimeoutFailsItsPeerAndFreesTheSource) {
  // The decode side never progresses (a stalled instance): over TCP nothing lands, the flush never
  // completes, and the timeout must end the transfer, so that the source pages can be freed.
  auto prefill = make_ucx_transfer(UcxOptions{"tcp", std::chrono::milliseconds(300)});
  auto decode = agent();
  std::vector<uint8_t> source(64 * kPage, 1), pool(64 * kPage, kUntouched);
  const int local = prefill->register_memory(source.data(), source.size());
  const int peer = prefill->connect(decode->address());
  const int remote = prefill->import(peer, decode->describe(decode->register_memory(pool.data(), pool.size())));
  const uint64_t stalled = prefill->post(local, remote, std::vector<Write>{{0, 0, 64 * kPage}}, "never");
  const auto start = std::chrono::steady_clock::now();
  TransferState state = TransferState::kInFlight;
  while (state == TransferState::kInFlight && std::chrono::steady_clock::now() - start < std::chrono::seconds(30))
    state = prefill->poll(stalled);
  EXPECT_EQ(state, TransferState::kFailed);
  EXPECT_NE(prefill->error(stalled).find("longer than 300 ms"), std::string::npos) << prefill->error(stalled);
  // The peer has failed: later transfers to it fail at once, and importing from it is refused.
  const uint64_t later = prefill->post(local, remote, std::vector<Write>{{0, 0, kPage}}, "later");
  EXPECT_EQ(prefill->poll(later), TransferState::kFailed);
  EXPECT_THROW(prefill->import(peer, decode->describe(0)), Error);
  // A new connection works once the decode side progresses again.
  const int again = prefill->connect(decode->address());
  const int remote_again = prefill->import(again, decode->describe(0));
  const uint64_t fresh = prefill->post(local, remote_again, std::vector<Write>{{0, kPage, kPage}}, "fresh");
  std::vector<Blob> notes;
  ASSERT_EQ(settle(*prefill, *decode, {fresh}, 1, notes)[0], TransferState::kDone) << prefill->error(fresh);
  EXPECT_EQ(notes.back(), "fresh");
}

}  // namespace
}  // namespace dsinfer::transfer
