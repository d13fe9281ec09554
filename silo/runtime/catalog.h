// File: silo/runtime/catalog.h
// -----------------------------------------------------------------------------
// The catalog: GrainId -> the activation hosted on this silo. Sharded maps,
// each under its own mutex; senders post while holding the shard's reader
// lock, which is what keeps an activation alive while a message is pushed
// into it (an activation leaves the catalog under the writer lock before it
// is deleted).
//
//   catalog.PostOrCreate(id, call, [&] { return new Activation(...); });
//   catalog.PostIfCurrent(id, activation_id, timer_tick);  // stale: false
//
// Threading: all methods are thread-safe.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "core/grain_id.h"
#include "core/sync.h"
#include "silo/runtime/activation.h"

namespace granary::silo {

class Catalog {
 public:
  // Offers `call` to the activation of `id` (Activation::Offer: a request
  // finding the mailbox full fails RESOURCE_EXHAUSTED, outside the lock);
  // false when there is no activation.
  bool PostIfExists(const GrainId& id, CallBase* call) {
    Shard& s = ShardFor(id);
    bool offered;
    {
      ReaderMutexLock lock(&s.mu);
      auto it = s.map.find(id);
      if (it == s.map.end()) return false;
      offered = (*it)->Offer(call);
    }
    if (!offered) RefuseMailboxFull(call);
    return true;
  }

  // Runs fn(Activation*) on the activation of `id`, if any, under the
  // shard's reader lock.
  template <typename Fn>
  void Find(const GrainId& id, Fn fn) {
    Shard& s = ShardFor(id);
    ReaderMutexLock lock(&s.mu);
    auto it = s.map.find(id);
    if (it != s.map.end()) fn(*it);
  }

  // Posts `m` to the activation of `id`, first creating it with `make()`
  // (called under the shard's writer lock, so exactly one activation is ever
  // created per id) when there is none. `make` may return nullptr to refuse;
  // then false is returned and `m` is untouched.
  template <typename MakeFn>
  bool PostOrCreate(const GrainId& id, CallBase* call, MakeFn make) {
    if (PostIfExists(id, call)) return true;
    Shard& s = ShardFor(id);
    bool offered;
    {
      MutexLock lock(&s.mu);
      auto it = s.map.find(id);
      if (it == s.map.end()) {
        Activation* a = make();
        if (a == nullptr) return false;
        it = s.map.insert(a).first;
        size_.fetch_add(1, std::memory_order_relaxed);
        grains_.fetch_add(1, std::memory_order_relaxed);
      }
      offered = (*it)->Offer(call);
    }
    if (!offered) RefuseMailboxFull(call);
    return true;
  }

  // Adds the activation `make()` makes (under the shard's writer lock) when
  // `id` has none here; false, without calling `make`, when it has one, or
  // when `make` returns nullptr to refuse.
  template <typename MakeFn>
  bool CreateIfAbsent(const GrainId& id, MakeFn make) {
    Shard& s = ShardFor(id);
    MutexLock lock(&s.mu);
    if (s.map.find(id) != s.map.end()) return false;
    Activation* a = make();
    if (a == nullptr) return false;
    s.map.insert(a);
    size_.fetch_add(1, std::memory_order_relaxed);
    grains_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Posts `m` only to the activation `activation_id` of `id` (timers address
  // the activation that registered them, never a later one).
  bool PostIfCurrent(const GrainId& id, uint64_t activation_id, Message* m) {
    Shard& s = ShardFor(id);
    ReaderMutexLock lock(&s.mu);
    auto it = s.map.find(id);
    if (it == s.map.end() || (*it)->activation_id() != activation_id) {
      auto pool = s.workers.find(id);
      if (pool == s.workers.end()) return false;
      for (Activation* a : pool->second) {
        if (a->activation_id() == activation_id) {
          a->Post(m);
          return true;
        }
      }
      return false;
    }
    (*it)->Post(m);
    return true;
  }

  // Offers `call` to a worker of stateless worker grain `id` (its type's
  // GrainOptions.stateless_worker): an idle one (nothing queued or
  // running), else a new one made by `make()` (under the shard's writer
  // lock) while the grain has fewer than `max_workers`, else the one with
  // the least work. False when there is no worker and `make` refused
  // (returned nullptr); `call` is then untouched.
  template <typename MakeFn>
  bool PostToWorker(const GrainId& id, CallBase* call, size_t max_workers,
                    MakeFn make) {
    Shard& s = ShardFor(id);
    bool offered = false;
    bool posted = false;
    {
      ReaderMutexLock lock(&s.mu);
      auto it = s.workers.find(id);
      if (it != s.workers.end()) {
        Activation* a = LeastBusy(it->second);
        // All busy and room to grow: below, under the writer lock.
        if (a->Load() == 0 || it->second.size() >= max_workers) {
          posted = true;
          offered = a->Offer(call);
        }
      }
    }
    if (!posted) {
      MutexLock lock(&s.mu);
      auto it = s.workers.find(id);
      Activation* a = it == s.workers.end() ? nullptr : LeastBusy(it->second);
      if (a == nullptr || (a->Load() > 0 && it->second.size() < max_workers)) {
        if (Activation* made = make()) {
          if (it == s.workers.end()) {
            it = s.workers.emplace(id, std::vector<Activation*>()).first;
          }
          it->second.push_back(made);
          size_.fetch_add(1, std::memory_order_relaxed);
          a = made;
        }
      }
      if (a == nullptr) return false;
      offered = a->Offer(call);
    }
    if (!offered) RefuseMailboxFull(call);
    return true;
  }

  // After this returns no sender can reach `a` any more.
  void Remove(Activation* a) {
    Shard& s = ShardFor(a->id());
    MutexLock lock(&s.mu);
    if (a->stateless()) {
      auto it = s.workers.find(a->id());
      if (it == s.workers.end()) return;
      std::vector<Activation*>& pool = it->second;
      auto w = std::find(pool.begin(), pool.end(), a);
      if (w == pool.end()) return;
      pool.erase(w);
      if (pool.empty()) s.workers.erase(it);
      size_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    auto it = s.map.find(a->id());
    if (it != s.map.end() && *it == a) {
      s.map.erase(it);
      size_.fetch_sub(1, std::memory_order_relaxed);
      grains_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  // The workers of every stateless worker grain of type `type` (for
  // metrics): how many, and the calls queued at them.
  void CountWorkers(absl::string_view type, size_t* workers, size_t* queued) {
    *workers = 0;
    *queued = 0;
    for (Shard& s : shards_) {
      ReaderMutexLock lock(&s.mu);
      for (auto& [id, pool] : s.workers) {
        if (id.type() != type) continue;
        *workers += pool.size();
        for (Activation* a : pool) *queued += a->Queued();
      }
    }
  }

  // Calls fn(Activation*) for every activation, under each shard's reader
  // lock (fn may post to the activation, nothing more).
  template <typename Fn>
  void ForEach(Fn fn) {
    for (Shard& s : shards_) {
      ReaderMutexLock lock(&s.mu);
      for (Activation* a : s.map) fn(a);
      for (auto& [id, pool] : s.workers) {
        for (Activation* a : pool) fn(a);
      }
    }
  }

  // Removes and returns every activation (silo teardown, workers stopped).
  std::vector<Activation*> TakeAll() {
    std::vector<Activation*> all;
    for (Shard& s : shards_) {
      MutexLock lock(&s.mu);
      all.insert(all.end(), s.map.begin(), s.map.end());
      size_.fetch_sub(s.map.size(), std::memory_order_relaxed);
      grains_.fetch_sub(s.map.size(), std::memory_order_relaxed);
      s.map.clear();
      for (auto& [id, pool] : s.workers) {
        all.insert(all.end(), pool.begin(), pool.end());
        size_.fetch_sub(pool.size(), std::memory_order_relaxed);
      }
      s.workers.clear();
    }
    return all;
  }

  size_t size() const { return size_.load(std::memory_order_relaxed); }
  // Activations of grains, stateless workers left out.
  size_t grains() const { return grains_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kShards = 64;
  // Activations found by their own id: the table holds a pointer per
  // activation and no copy of its id.
  struct ById {
    using is_transparent = void;
    size_t operator()(const Activation* a) const {
      return absl::HashOf(a->id());
    }
    size_t operator()(const GrainId& id) const { return absl::HashOf(id); }
    bool operator()(const Activation* a, const Activation* b) const {
      return a->id() == b->id();
    }
    bool operator()(const Activation* a, const GrainId& id) const {
      return a->id() == id;
    }
    bool operator()(const GrainId& id, const Activation* a) const {
      return a->id() == id;
    }
  };
  struct alignas(64) Shard {
    Mutex mu;
    absl::flat_hash_set<Activation*, ById, ById> map ABSL_GUARDED_BY(mu);
    // Stateless worker grains: each grain's workers, none empty.
    absl::flat_hash_map<GrainId, std::vector<Activation*>> workers
        ABSL_GUARDED_BY(mu);
  };
  static Activation* LeastBusy(const std::vector<Activation*>& pool) {
    Activation* best = pool.front();
    for (Activation* a : pool) {
      if (a->Load() < best->Load()) best = a;
      if (best->Load() == 0) break;
    }
    return best;
  }
  Shard& ShardFor(const GrainId& id) {
    return shards_[absl::HashOf(id) % kShards];
  }

  std::array<Shard, kShards> shards_;
  std::atomic<size_t> size_{0};
  std::atomic<size_t> grains_{0};
};

}  // namespace granary::silo
