#!/usr/bin/env bash
# The mutation run: plausible one-line bugs written into the real code (not through
# core/src/sync/mutant.rs), one at a time, on a scratch copy of the repository; for each, the loom
# models of its area (for the bucket, also CI's run of the real-code models at 4 preemptions)
# and then, if they pass, the std tests of core and model-tests. A mutant is caught only when a
# model or test of the real code fails: the deliberate-bug tests (each expects its own variant
# to fail in its own way) are switched off for mutants (MCB_MODELS_SKIP_BROKEN), since a mutant
# of the same path can make them fail for another reason while every real-code model passes.
# The unmodified run keeps them on. Prints a markdown table (model-tests/README.md shows one).
#
#   model-tests/mutate.sh [NAME...]      all mutants, or only those named
#
# LOOM_MAX_PREEMPTIONS is passed through (unset: the models' default bound, as in CI).
# MUTATE_DIR (default /tmp/mcb-mutate) holds the scratch copy and its build, kept between runs
# so that each mutant rebuilds only what it changed. Long (minutes per mutant): not part of CI.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${MUTATE_DIR:-/tmp/mcb-mutate}"
src="$work/src"
mkdir -p "$src"
# A fresh copy of the working tree; the scratch build (its target/) is kept.
find "$src" -mindepth 1 -maxdepth 1 ! -name target -exec rm -rf {} +
# Extracted with fresh times (-m): cargo must not take an older source for one it built.
tar -C "$repo" --exclude=./target --exclude=./.git --exclude=./examples-c/build -cf - . |
    tar -C "$src" -xmf -
cd "$src"

# name | file | loom test | the text replaced | its replacement | why it is a bug
mutants=()
add() { mutants+=("$1"$'\x1f'"$2"$'\x1f'"$3"$'\x1f'"$4"$'\x1f'"$5"$'\x1f'"$6"); }

add enter-increment-relaxed core/src/bucket/clients.rs bucket \
    $'Mutant::EnterCountsRelaxed,\n            Ordering::SeqCst,' \
    $'Mutant::EnterCountsRelaxed,\n            Ordering::Relaxed,' \
    "stripe increment SeqCst to Relaxed: breaks the Dekker handshake"
add leave-decrement-release core/src/bucket/clients.rs bucket \
    $'Mutant::LeaveUncountsRelease,\n            Ordering::SeqCst,' \
    $'Mutant::LeaveUncountsRelease,\n            Ordering::Release,' \
    "stripe decrement SeqCst to Release: a stopper can miss the last leaver"
add leaver-stripes-unordered core/src/bucket/clients.rs bucket \
    'state_seen.then_load(s, Ordering::SeqCst).0 == 0' \
    '{ let _ = state_seen; s.load(Ordering::SeqCst) == 0 }' \
    "stripe loads not tied to the state load: loom's SeqCst loads are only Acquire (std: equivalent)"
add enter-state-load-acquire core/src/bucket/handle.rs bucket \
    $'Mutant::EnterLoadsStateAcquire,\n            Ordering::SeqCst,' \
    $'Mutant::EnterLoadsStateAcquire,\n            Ordering::Acquire,' \
    "state load SeqCst to Acquire: the handshake from the reading side"
add start-relaxed core/src/bucket/handle.rs bucket \
    $'Mutant::StartStoresRelaxed,\n            Ordering::SeqCst,' \
    $'Mutant::StartStoresRelaxed,\n            Ordering::Relaxed,' \
    "NULL to RUNNING store Relaxed: RUNNING visible before the engine's initialisation"
add back-out-no-recheck core/src/bucket/handle.rs bucket \
    'Err(self.leave(stripe))' \
    '{ let _ = self.clients.leave(stripe); Err(false) }' \
    "a client backing out skips the last-leaver check: the bucket never shuts down"
add disconnect-release-late core/src/bucket/connection.rs bucket \
    $'        if !late {\n            self.release_bucket();\n        }\n        // AcqRel: as in `release`. After this a concurrent release may free the state.\n        let before = self.reserved.fetch_sub(CONNECTED, Ordering::AcqRel);\n' \
    $'        // AcqRel: as in `release`. After this a concurrent release may free the state.\n        let before = self.reserved.fetch_sub(CONNECTED, Ordering::AcqRel);\n        self.release_bucket();\n' \
    "disconnect reads its bucket after giving up the CONNECTED bit: use after a concurrent free"
add release-cas-relaxed core/src/bucket/connection.rs bucket \
    $'Mutant::ReleaseCasRelaxed,\n                Ordering::AcqRel,' \
    $'Mutant::ReleaseCasRelaxed,\n                Ordering::Relaxed,' \
    "reservation CAS AcqRel to Relaxed: the freer may not see another user's accesses"
add store-tag-after-write core/src/tiers/cache.rs tiers \
    $'        let mut before = self.ns.generation(stripe);\n        let stored = l2.insert(ns, key, entry, pending.opts.tries, || {\n            let bump = strict && !mutant::active(Mutant::SetSkipsBump);\n            bump.then(|| self.ns.bump(stripe))\n        });\n' \
    $'        let stored = l2.insert(ns, key, entry, pending.opts.tries, || {\n            let bump = strict && !mutant::active(Mutant::SetSkipsBump);\n            bump.then(|| self.ns.bump(stripe))\n        });\n        let mut before = self.ns.generation(stripe);\n' \
    "load path tags its L1 copy after its L2 write: the copy can outlive a concurrent set"
add delete-no-bump core/src/tiers/cache.rs tiers \
    'if !mutant::active(Mutant::DeleteSkipsBump) {' 'if false {' \
    "delete does not bump the generation: other threads' L1 copies survive it"
add purge-no-bump core/src/tiers/cache.rs tiers \
    'if !mutant::active(Mutant::PurgeSkipsBump) {' 'if false {' \
    "purge does not bump the generations: other threads' L1 copies survive it"
add l2-retire-before-unlink core/src/tiers/l2.rs tiers \
    $'        link.store(next, Ordering::Release);\n        self.retire(state, node, guard);' \
    $'        self.retire(state, node, guard);\n        link.store(next, Ordering::Release);' \
    "node retired before it is unlinked: a reader can find it after its grace period began"
add l2-read-unpinned core/src/tiers/l2.rs tiers \
    $'        let guard = self.domain.pin();\n        let (_, found) = find(self.shard(probe.hash).bucket(probe.hash), &guard, |n| {' \
    $'        // SAFETY: none: the mutant reads without pinning.\n        let guard = unsafe { epoch::unprotected() };\n        let (_, found) = find(self.shard(probe.hash).bucket(probe.hash), guard, |n| {' \
    "L2 read without pinning the epoch: use after free"
add hold-after-leave core/src/bucket/registry.rs bucket \
    $'        handle.hold();\n        drop(self);\n        handle\n' \
    $'        drop(self);\n        handle.hold();\n        handle\n' \
    "an item's hold counted after its lease left: the shutdown can start in between and miss it"
add unhold-relaxed core/src/bucket/handle.rs bucket \
    'mutant::ordering(Mutant::UnholdRelaxed, Ordering::SeqCst, Ordering::Relaxed)' \
    'mutant::ordering(Mutant::UnholdRelaxed, Ordering::Release, Ordering::Relaxed)' \
    "give-back SeqCst to Release: a release that reads RUNNING can skip the wake-up of a worker whose sum missed it"
add unhold-state-load-acquire core/src/bucket/handle.rs bucket \
    $'need not be woken.\n        let (state, _) = counted.then_load(&self.state, Ordering::SeqCst);' \
    $'need not be woken.\n        let (state, _) = counted.then_load(&self.state, Ordering::Acquire);' \
    "last hold's state load SeqCst to Acquire: it can read RUNNING while the worker misses its decrement"
add held-sum-relaxed core/src/sync/tally.rs bucket \
    'self.cells[row * self.width + i].load(Ordering::Acquire)' \
    'self.cells[row * self.width + i].load(Ordering::Relaxed)' \
    "worker's sum of the hold rows Acquire to Relaxed: the destroy need not follow the held item's last call"
add held-row-store-relaxed core/src/sync/tally.rs bucket \
    'Ordered::store(cell, cell.load(Ordering::Relaxed).wrapping_sub(1), order)' \
    'Ordered::store(cell, cell.load(Ordering::Relaxed).wrapping_sub(1), Ordering::Relaxed)' \
    "a give-back's store to its own row Relaxed: neither Release for the destroy nor SeqCst for the wake-up handshake"
add held-unhold-before-call core/src/bucket/held.rs bucket \
    $'            let answer = call(handle.engine_unguarded());\n            handle.unhold();\n            answer' \
    $'            handle.unhold();\n            let answer = call(handle.engine_unguarded());\n            answer' \
    "a connection's held item given back before its release reaches the engine: the engine can be destroyed under the call"
add unhold-no-wake core/src/bucket/handle.rs bucket \
    'if state != State::Running as u8 {' \
    'if false {' \
    "the last hold does not wake the worker: the engine is never destroyed"
add destroy-ignores-holds core/src/bucket/registry.rs bucket \
    'let held = handle.is_held() && !mutant::active(Mutant::DestroyIgnoresHolds);' \
    'let held = false;' \
    "the worker destroys the engine as the delete completes, while an item of it is held"
add namespace-bump-relaxed core/src/tiers/namespace.rs tiers \
    'fetch_add(1, Ordering::Release) + 1' 'fetch_add(1, Ordering::Relaxed) + 1' \
    "generation bump Release to Relaxed: a reader that sees the bump may tag an older L2 read with it"
add access-stamp-load-store core/src/store/item.rs meta \
    $'            let _ = self\n                .item\n                .meta()\n                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {\n                    Some(word & KEPT | FETCHED | at << ACCESS_SHIFT)\n                });' \
    $'            let word = self.item.meta().load(Ordering::Relaxed);\n            self.item.meta().store(word & KEPT | FETCHED | at << ACCESS_SHIFT, Ordering::Relaxed);' \
    "access stamp a load then a store, not one RMW: a fetch a minute later erases another's token win; two clients get W"
add l2-batch-not-flushed core/src/tiers/l2.rs tiers \
    $'        #[cfg(not(mcb_loom))]\n        guard.flush();\n' '' \
    "a retired batch deferred without a flush: it waits in the retiring thread's bag, and an idle retirer keeps its bytes from every other writer"
add l2-batch-uncharged-early core/src/tiers/l2.rs tiers \
    'let bytes = std::mem::take(&mut state.retired_bytes);' \
    'let bytes = std::mem::take(&mut state.retired_bytes) * 0;' \
    "a batch's bytes uncharged when handed over, before its nodes are freed: the values alive outgrow the bound"
add seg-publish-relaxed core/src/store/seg/index.rs store \
    $'Mutant::SlotPublishedRelaxed,\n            Ordering::Release,' \
    $'Mutant::SlotPublishedRelaxed,\n            Ordering::Relaxed,' \
    "slot publish Release to Relaxed: a reader can find the slot before the item's bytes"
add seg-probe-relaxed core/src/store/seg/index.rs store \
    'let value = cell.load(Ordering::Acquire);' \
    'let value = cell.load(Ordering::Relaxed);' \
    "reader's slot load Acquire to Relaxed: it can read the item's bytes from before they were written"
add seg-reuse-grace-relaxed core/src/store/seg/segments.rs store \
    'self.grace[seg].load(Ordering::Acquire)' 'self.grace[seg].load(Ordering::Relaxed)' \
    "grace flag load Acquire to Relaxed: a segment reused need not follow the reads of its grace period"
add seg-find-moved-relaxed core/src/store/seg/index.rs store \
    'let moved = self.moved.load(Ordering::Acquire);' \
    'let moved = self.moved.load(Ordering::Relaxed);' \
    "reader's first move count load Acquire to Relaxed: it can probe a moved slot's buckets as before the move and miss"
add seg-displace-moving-relaxed core/src/store/seg/index.rs store \
    'index.moving.fetch_sub(1, Ordering::Release);' \
    'index.moving.fetch_sub(1, Ordering::Relaxed);' \
    "end of a move Release to Relaxed: a reader that sees no move running need not see the move counted, and misses"
add index-first-bucket-skipped core/src/store/seg/index.rs store \
    'if used < FIRST_UNTIL {' 'if false {' \
    "inserts go to the emptier bucket, not the first until it holds six: half the keys are found by the second probe only"
add index-evicts-before-doubling core/src/store/seg/mod.rs store \
    'Vacancy::Full { .. } if !grown && self.index.may_get_room() =>' 'Vacancy::Full { .. } if false =>' \
    "a new key whose buckets are full evicts an item while the table may still double"
add index-room-not-migrated core/src/store/seg/mod.rs store \
    'self.index.migrate(usize::MAX, |loc| self.hash_at(loc));' '' \
    "a write that waits for the index to double retries before the doubling moved its buckets"
add counts-claim-relaxed core/src/sync/counts.rs store \
    '.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)' \
    '.compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)' \
    "slot claim Acquire to Relaxed: a thread taking a slot number can count on from before its last holder's counts"
add counts-release-relaxed core/src/sync/counts.rs store \
    $'Mutant::ClaimReleasedRelaxed,\n                Ordering::Release,' \
    $'Mutant::ClaimReleasedRelaxed,\n                Ordering::Relaxed,' \
    "slot number given back Relaxed, not Release: its next holder can count on from before this thread's counts"
add counts-base-load-relaxed core/src/sync/counts.rs store \
    'let base = self.base[i].load(Ordering::Acquire);' \
    'let base = self.base[i].load(Ordering::Relaxed);' \
    "reset baseline load Acquire to Relaxed: a read can sum cells older than the baseline and wrap below zero"
add counts-reset-relaxed core/src/sync/counts.rs store \
    'fetch_max(self.sum(i), Ordering::Release)' \
    'fetch_max(self.sum(i), Ordering::Relaxed)' \
    "reset baseline Release to Relaxed: a read that sees the baseline can sum cells older than it and wrap below zero"
add tally-sub-relaxed core/src/sync/tally.rs store \
    'let _ = self.sub_then(i, Ordering::Release);' \
    'let _ = self.sub_then(i, Ordering::Relaxed);' \
    "a hold let go with a Relaxed store, not Release: the segment's reuse need not follow the holder's reads"
add tally-shared-sub-relaxed core/src/sync/tally.rs store \
    'Ordered::fetch_sub(self.shared(i), 1, order).1' \
    'Ordered::fetch_sub(self.shared(i), 1, Ordering::Relaxed).1' \
    "a hold of a thread without a row let go Relaxed, not Release: as tally-sub-relaxed"
add tally-sum-relaxed core/src/sync/tally.rs store \
    'self.cells[row * self.width + i].load(Ordering::Acquire)' \
    'self.cells[row * self.width + i].load(Ordering::Relaxed)' \
    "hold cells summed Relaxed, not Acquire: a segment reused need not follow the reads of the holds it saw let go"
add tally-skip-shared-row core/src/sync/tally.rs store \
    $'        } else {\n            self.owned + 1\n        };' \
    $'        } else {\n            self.owned\n        };' \
    "the holds' sum leaves out the shared row: a hold of a thread without a row of its own does not keep its segment"
add seg-holds-before-grace core/src/store/seg/segments.rs store \
    $'            let graced =\n                self.grace[seg].load(Ordering::Acquire) || mutant::active(Mutant::ReuseSkipsGrace);\n            let reusable =\n                graced && (self.holds.is_zero(seg) || mutant::active(Mutant::ReuseSkipsHolds));' \
    $'            let unheld = self.holds.is_zero(seg);\n            let reusable = unheld && self.grace[seg].load(Ordering::Acquire);' \
    "holds read before the grace flag: a hold taken after the read, by a reader pinned before the grace period ended, is missed"
add l1-slot-outlives-its-caches core/src/tiers/l1.rs tiers \
    'let held = h.caches > 0 ||' 'let held = true ||' \
    "a new cache of a name takes the slot of dropped ones: their L1 copies outlive them"
add l2-recycle-at-handover core/src/tiers/l2.rs tiers \
    'if mutant::active(Mutant::L2RecyclesAtHandover) {' 'if true {' \
    "retired nodes recycled when handed over, not after the grace period: a writer reuses a node under its reader"
add l2-block-links-each-node-to-itself core/src/tiers/l2.rs tiers \
    'base.as_ptr().wrapping_add(i + 1)' 'base.as_ptr().wrapping_add(i)' \
    "a new block's spare list links each node to itself: every write of the shard reuses one node, linked or not"
add l2-drop-keeps-linked-values core/src/tiers/l2.rs tiers \
    $'                let node = unsafe { &mut *cur.as_raw().cast_mut() };\n                node.clear();' \
    $'                let node = unsafe { &mut *cur.as_raw().cast_mut() };' \
    "a dropped store leaves its values in their nodes: a batch still in flight keeps them alive"
add tiers-bulk-helpers-unbounded core/src/tiers/bulk.rs tiers \
    'let got = want.min(BULK_HELPERS_MAX.saturating_sub(now));' \
    'let got = want;' \
    "a bulk get takes every helper it asks for: threads grow with callers and their concurrency"
add tiers-bulk-helpers-kept core/src/tiers/bulk.rs tiers \
    'HELPERS.fetch_sub(self.0, Ordering::Relaxed);' \
    'let _ = self.0;' \
    "a bulk get keeps its helpers' share of the bound: later bulk gets run on their callers alone"
add flight-waiter-uncounted core/src/tiers/flight.rs tiers \
    'state.sleepers += 1;' 'state.sleepers += 0;' \
    "a caller that waits for a loader lock does not count itself a sleeper: the holder's release wakes nobody"
add flight-wakes-only-crowds core/src/tiers/flight.rs tiers \
    'if early.unwrap_or(state.sleepers) > 0 {' 'if early.unwrap_or(state.sleepers) > 1 {' \
    "the loader lock's release wakes its sleepers only when more than one waits: a lone waiter sleeps on"
add flight-release-by-key core/src/tiers/flight.rs tiers \
    'list.iter().position(|f| Arc::ptr_eq(f, &self.flight))' 'list.iter().position(|f| f.key == self.flight.key)' \
    "a loader lock's release removes whatever lock its key has: an expired holder's release frees the lock of the caller that took it over"
add meta-kept-drops-base64-mark core/src/store/seg/item.rs store \
    'pub(crate) const KEPT: u32 = STALE | WON | KEY_BINARY;' 'pub(crate) const KEPT: u32 = STALE | WON;' \
    "a note of an access drops the base64 mark: the meta commands then answer a key ms … b stored plainly"
add meta-look-takes-the-token core/src/store/meta.rs store \
    'let token = if fetch.look {' 'let token = if false && fetch.look {' \
    "a look (me, md … C0's read of the CAS) takes a stale item's recache token: the next fetch loses it"
add meta-invalidation-resets-access core/src/store/meta.rs store \
    'meta: meta & !WON | STALE,' 'meta: Store::meta_word(now, STALE),' \
    "an invalidation forgets the fetched mark, the access time and the base64 mark, which memcached keeps (it marks in place)"
add meta-invalidation-keeps-the-token core/src/store/meta.rs store \
    'meta: meta & !WON | STALE,' 'meta: meta | STALE,' \
    "an invalidation keeps a token already taken: no fetch of the new stale item wins it"
add clock-ticker-stands-still core/src/tiers/clock.rs tiers \
    $'                return;\n            }\n            NOW.store(coarse_ms() + 1, Ordering::Relaxed);' \
    $'                return;\n            }' \
    "the ticker stops storing the time: every cache on the system clock sees it stand still"
add clock-no-fallback core/src/tiers/clock.rs tiers \
    '0 => coarse_ms(),' '0 => 1,' \
    "without a ticker the time reads 0: ttls never end"
add tiers-admission-on-sets core/src/tiers/cache.rs tiers \
    'let admit = !strict && self.opts.admission' 'let admit = self.opts.admission' \
    "frequency admission applied to sets as well as loads: a set returns Ok and stores nothing"
add s3fifo-admission-skips-unseen-reads core/src/tiers/s3fifo.rs tiers \
    '.saturating_add(unseen)' '.saturating_add(0)' \
    "the victim's reads since eviction last looked left out: a key asked for once outbids an entry read three times"

# Replaces exactly one occurrence of $FROM by $TO in the file.
patch_one() {
    FROM="$2" TO="$3" perl -0777 -i -pe '
        my $n = () = /\Q$ENV{FROM}\E/g;
        die "the mutant text occurs $n times in $ARGV\n" unless $n == 1;
        s/\Q$ENV{FROM}\E/$ENV{TO}/' "$1"
}

# The copy's own `cargo loom` alias (.cargo/config.toml), on one model file; with a third
# argument, the real-code models only.
loom() {
    if [ $# -gt 2 ]; then
        MCB_MODELS_SKIP_BROKEN=1 cargo loom --locked --test "$1" >"$2" 2>&1
    else
        cargo loom --locked --test "$1" >"$2" 2>&1
    fi
}

# CI's deeper run of the bucket models of the real code (.ci/run).
deep() {
    MCB_MODELS_SKIP_BROKEN=1 MCB_LOOM_CPUS=2 LOOM_MAX_PREEMPTIONS=4 cargo loom --locked --test bucket -- --exact bucket_stops_exactly_once \
        bucket_client_never_sees_stopped bucket_connection_freed_once_after_every_user \
        bucket_create_publishes_initialised_engine bucket_delete_completes_with_a_hold_out \
        bucket_unhold_races_delete bucket_held_item_released_during_delete >"$1" 2>&1
}

std_tests() {
    MCB_MODELS_SKIP_BROKEN=1 cargo test --locked -p mcb-core -p mcb-model-tests >"$1" 2>&1
}

selected() {
    [ $# -eq 1 ] && return 0
    local name=$1 want
    shift
    for want in "$@"; do [ "$want" = "$name" ] && return 0; done
    return 1
}

# Warm both builds on the unmodified copy, so that the times below are per mutant; the real
# code must pass, or the run proves nothing.
echo "building and checking the unmodified code..." >&2
loom bucket "$work/base-loom-bucket.log" || { echo "loom models fail on the real code" >&2; exit 1; }
loom tiers "$work/base-loom-tiers.log" || { echo "loom models fail on the real code" >&2; exit 1; }
loom meta "$work/base-loom-meta.log" || { echo "loom models fail on the real code" >&2; exit 1; }
loom store "$work/base-loom-store.log" || { echo "loom models fail on the real code" >&2; exit 1; }
std_tests "$work/base-std.log" || { echo "std tests fail on the real code" >&2; exit 1; }

echo "| mutant | where | why it is a bug | loom models (real code) | std tests | result | seconds |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
escaped=0
for m in "${mutants[@]}"; do
    IFS=$'\x1f' read -r -d '' name file test from to why < <(printf '%s\0' "$m") || true
    selected "$name" "$@" || continue
    cp "$file" "$work/saved"
    if ! patch_one "$file" "$from" "$to"; then
        echo "| $name | \`$file\` | $why | | | NOT APPLIED (the code changed: update the runner) | |"
        continue
    fi
    start=$(date +%s)
    loom_result=passed std_result="not run" result=caught
    if ! loom "$test" "$work/$name-loom.log" real-only; then
        loom_result="failed ($test)"
    elif [ "$test" = bucket ] && ! deep "$work/$name-deep.log"; then
        loom_result="failed (bucket at 4 preemptions, as in CI)"
    elif ! std_tests "$work/$name-std.log"; then
        std_result=failed
    else
        std_result=passed result=ESCAPED escaped=$((escaped + 1))
    fi
    cp "$work/saved" "$file"
    echo "| $name | \`$file\` | $why | $loom_result | $std_result | $result | $(($(date +%s) - start)) |"
done
echo "escaped: $escaped (logs in $work)" >&2
