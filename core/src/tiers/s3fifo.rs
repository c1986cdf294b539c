//! S3-FIFO eviction for one L2 shard, after Yang, Zhang, Qiu, Yue and Vinayak, "FIFO queues
//! are all you need for cache eviction" (SOSP 2023): a small FIFO (about 10% of the bytes)
//! takes new entries, a main FIFO keeps those read again while in the small one, and a ghost
//! FIFO of hashes remembers what the small queue dropped, so that a returning key goes straight
//! to main. One-hit wonders (a scan) pass through the small queue without displacing main.
//!
//! Single-threaded: the shard's mutex guards it. Readers only bump an entry's frequency, an
//! atomic they reach without the mutex. Entries live in an index-linked slab, so the queues
//! allocate nothing per entry once the slab has grown. One deviation from the paper: an entry
//! read once (not twice) while in the small queue moves to main, because L1 absorbs repeated
//! reads and L2 sees few of them.

use super::sketch::Sketch;
use crate::linked_slab::{LinkedSlab, List};
use crate::sync::atomic::{AtomicU8, Ordering};
use std::collections::{HashMap, VecDeque};

/// Read-frequency ceiling (the paper's two bits).
pub(crate) const MAX_FREQ: u8 = 3;

/// What the policy holds for each entry: a handle whose frequency readers bump.
pub(crate) trait Tracked: Copy {
    /// The entry's read frequency.
    ///
    /// # Safety
    /// The entry the handle points to must be live for the returned borrow. A [`Policy`] calls
    /// this only on handles it holds, which [`Policy::insert`]'s contract keeps live.
    unsafe fn freq(&self) -> &AtomicU8;
}

/// Counts a read of an entry (saturating at [`MAX_FREQ`]).
#[inline]
pub(crate) fn touch(freq: &AtomicU8) {
    // Relaxed: a hint for eviction; a lost increment between racing readers costs nothing.
    let seen = freq.load(Ordering::Relaxed);
    if seen < MAX_FREQ {
        // Relaxed: as above.
        freq.store(seen + 1, Ordering::Relaxed);
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Queue {
    Small,
    Main,
}

#[derive(Debug)]
struct Slot<P> {
    item: P,
    hash: u64,
    weight: usize,
    queue: Queue,
}

/// The eviction state of one shard, bounded by `capacity` bytes.
#[derive(Debug)]
pub(crate) struct Policy<P> {
    slab: LinkedSlab<Slot<P>>,
    small: List,
    main: List,
    ghost: VecDeque<u64>,
    /// Keyed by entry hashes, which L2's randomly seeded hasher made: a fixed fast hasher
    /// suffices (SipHash cost every insert a few percent).
    ghost_counts: HashMap<u64, u32, foldhash::fast::FixedState>,
    used: usize,
    small_used: usize,
    capacity: usize,
    evictions: u64,
    /// How often keys were asked for, made by the first [`Policy::admits`] (a shard no
    /// cache with [`Admission::Frequency`](super::Admission) writes to keeps none).
    sketch: Option<Sketch>,
}

impl<P: Tracked> Policy<P> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            slab: LinkedSlab::new(),
            small: List::EMPTY,
            main: List::EMPTY,
            ghost: VecDeque::new(),
            ghost_counts: HashMap::default(),
            used: 0,
            small_used: 0,
            capacity,
            evictions: 0,
            sketch: None,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }

    /// Entries [`Policy::evict`] has returned so far.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Whether `weight` more bytes fit without evicting.
    pub(crate) fn fits(&self, weight: usize) -> bool {
        self.used + weight <= self.capacity
    }

    /// Admits an entry (room must have been made): to main if its hash is a ghost, else small.
    ///
    /// # Safety
    /// `item` must stay valid for [`Tracked::freq`] until it leaves the policy, through
    /// [`Policy::remove`] or as the return value of [`Policy::evict`].
    pub(crate) unsafe fn insert(&mut self, item: P, hash: u64, weight: usize) -> u32 {
        let queue = if self.ghost_counts.contains_key(&hash) {
            Queue::Main
        } else {
            Queue::Small
        };
        let slot = Slot {
            item,
            hash,
            weight,
            queue,
        };
        self.used += weight;
        if queue == Queue::Small {
            self.small_used += weight;
        }
        let (slab, list) = self.queue(queue);
        slab.push_front(list, slot)
    }

    /// Forgets the entry in `index` and returns its handle.
    pub(crate) fn remove(&mut self, index: u32) -> P {
        let (slab, list) = self.queue(self.slab.get(index).queue);
        let slot = slab.remove(list, index);
        self.used -= slot.weight;
        if slot.queue == Queue::Small {
            self.small_used -= slot.weight;
        }
        slot.item
    }

    /// Whether a new key of `hash` and `weight` should be stored (TinyLFU's admission): counts
    /// the request, then, in a shard within an eighth of full (evictions keep a full shard's
    /// live bytes a little below its capacity), lets it in only if it was asked for more often
    /// than the entry the next eviction would look at first. (Letting in what the ghost
    /// remembers as well gave 0.878 instead of 0.899 on the tiers bench's evicting regime.)
    pub(crate) fn admits(&mut self, hash: u64, weight: usize) -> bool {
        let full = self.used + weight + self.capacity / 8 > self.capacity;
        // The next victim's hash and its reads since eviction last looked at it (not in the
        // sketch yet: they count as well).
        let victim = match self.victim_queue().1.back() {
            Some(index) if full => {
                let victim = self.slab.get(index);
                // SAFETY: the victim is in the policy, so `insert`'s caller keeps it valid.
                // Relaxed: see `touch`.
                let unseen = unsafe { victim.item.freq() }.load(Ordering::Relaxed);
                Some((victim.hash, unseen))
            }
            _ => None,
        };
        let entries = self.len();
        let sketch = self.sketch.get_or_insert_with(Sketch::new);
        sketch.fit(entries);
        sketch.add(hash, 1);
        victim.is_none_or(|(victim, unseen)| {
            sketch.estimate(hash) > sketch.estimate(victim).saturating_add(unseen)
        })
    }

    /// The queue an eviction takes from: the small one while it holds over a tenth of the
    /// bytes (or main is empty), else main.
    fn victim_queue(&mut self) -> (&mut LinkedSlab<Slot<P>>, &mut List) {
        let queue = if self.small_used > self.capacity / 10 || self.main.len() == 0 {
            Queue::Small
        } else {
            Queue::Main
        };
        self.queue(queue)
    }

    /// Evicts one entry by S3-FIFO and returns it; `None` when the shard is empty.
    pub(crate) fn evict(&mut self) -> Option<P> {
        // Each step evicts or lowers a frequency, but readers may raise them again: bound the
        // second chances, then evict the oldest entry regardless.
        for _ in 0..=self.len() * usize::from(MAX_FREQ + 1) {
            let index = self.victim_queue().1.back()?;
            let slot = self.slab.get(index);
            // SAFETY: the item is still in the policy, so `insert`'s caller keeps it valid.
            let freq = unsafe { slot.item.freq() };
            // Relaxed: see `touch`.
            let seen = freq.load(Ordering::Relaxed);
            let (queue, hash) = (slot.queue, slot.hash);
            if seen == 0 {
                if queue == Queue::Small {
                    self.remember(hash);
                }
                self.evictions += 1;
                return Some(self.remove(index));
            }
            // Relaxed: see `touch`. Moving to main resets the count; in main it decays.
            freq.store(
                if queue == Queue::Small { 0 } else { seen - 1 },
                Ordering::Relaxed,
            );
            // For admission, the entry's count as it stands (its reads since the last look, and
            // what is left of earlier ones): readers only bump the count, without the lock.
            if let Some(sketch) = &mut self.sketch {
                sketch.add(hash, seen);
            }
            let slot = self.slab.get_mut(index);
            if slot.queue == Queue::Small {
                self.small_used -= slot.weight;
                slot.queue = Queue::Main;
                self.slab
                    .move_front(&mut self.small, Some(&mut self.main), index);
            } else {
                self.slab.move_front(&mut self.main, None, index);
            }
        }
        let oldest = self.main.back().or(self.small.back())?;
        self.evictions += 1;
        Some(self.remove(oldest))
    }

    /// Checks the policy's invariants: the slab's (see [`LinkedSlab::validate`]), each entry
    /// on the list of its queue, and the byte counts equal to the weights held.
    ///
    /// # Panics
    /// On the first broken invariant.
    pub(crate) fn validate(&self) {
        self.slab.validate(&[&self.small, &self.main]);
        let mut used = 0;
        for (queue, list) in [(Queue::Small, &self.small), (Queue::Main, &self.main)] {
            let mut weight = 0;
            for slot in self.slab.iter(list) {
                assert_eq!(slot.queue, queue, "entry on the other queue's list");
                weight += slot.weight;
            }
            if queue == Queue::Small {
                assert_eq!(self.small_used, weight, "small queue bytes");
            }
            used += weight;
        }
        assert_eq!(self.used, used, "bytes in use");
    }

    /// Remembers an evicted hash; the ghost holds about as many hashes as the shard has entries.
    fn remember(&mut self, hash: u64) {
        self.ghost.push_back(hash);
        *self.ghost_counts.entry(hash).or_insert(0) += 1;
        while self.ghost.len() > self.len().max(16) {
            let old = self.ghost.pop_front().expect("non-empty");
            if let Some(count) = self.ghost_counts.get_mut(&old) {
                *count -= 1;
                if *count == 0 {
                    self.ghost_counts.remove(&old);
                }
            }
        }
    }

    /// The slab and the list of `queue`, borrowed together.
    fn queue(&mut self, queue: Queue) -> (&mut LinkedSlab<Slot<P>>, &mut List) {
        match queue {
            Queue::Small => (&mut self.slab, &mut self.small),
            Queue::Main => (&mut self.slab, &mut self.main),
        }
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    struct Item(&'static AtomicU8);

    impl Tracked for Item {
        unsafe fn freq(&self) -> &AtomicU8 {
            self.0
        }
    }

    /// Test items are leaked, so valid forever.
    fn insert(policy: &mut Policy<Item>, item: Item, hash: u64, weight: usize) -> u32 {
        // SAFETY: a leaked item is valid for the rest of the process.
        unsafe { policy.insert(item, hash, weight) }
    }

    fn item() -> Item {
        Item(Box::leak(Box::new(AtomicU8::new(0))))
    }

    #[test]
    fn a_scan_does_not_displace_entries_read_again() {
        let mut policy = Policy::new(100);
        let hot: Vec<Item> = (0..5).map(|_| item()).collect();
        for (h, it) in hot.iter().enumerate() {
            insert(&mut policy, *it, h as u64, 10);
            touch(it.0);
        }
        // A scan of 20 one-hit entries, each evicting as needed.
        for h in 100..120 {
            while !policy.fits(10) {
                let gone = policy.evict().expect("full shard evicts");
                assert!(
                    hot.iter().all(|it| !std::ptr::eq(it.0, gone.0)),
                    "hot entry evicted"
                );
            }
            insert(&mut policy, item(), h, 10);
        }
        assert!(policy.used() <= policy.capacity());
    }

    #[test]
    fn admission_lets_in_a_key_asked_for_more_often_than_the_next_victim() {
        let mut policy = Policy::new(100);
        for h in 0..10 {
            let it = item();
            insert(&mut policy, it, h, 10);
            (0..3).for_each(|_| touch(it.0));
        }
        // Full, and the next victim was read three times since it was stored: a new key
        // needs four requests.
        for request in 1..=4 {
            assert_eq!(policy.admits(1000, 10), request == 4, "request {request}");
        }
        // A key read once is outbid by a key asked for twice.
        let mut policy = Policy::new(100);
        for h in 0..10 {
            let it = item();
            insert(&mut policy, it, h, 10);
            touch(it.0);
        }
        assert!(!policy.admits(2000, 10) && policy.admits(2000, 10));
        // With room to spare (an eighth of the shard after the new entry), no contest.
        let mut policy = Policy::new(100);
        let it = item();
        insert(&mut policy, it, 1, 70);
        (0..3).for_each(|_| touch(it.0));
        assert!(policy.admits(3000, 18));
        assert!(!policy.admits(3001, 19), "within an eighth of full");
    }

    #[test]
    fn a_ghost_hit_goes_straight_to_main_and_removal_frees_bytes() {
        let mut policy = Policy::new(20);
        insert(&mut policy, item(), 1, 10);
        insert(&mut policy, item(), 2, 10);
        policy
            .evict()
            .expect("evicts hash 1 from small into the ghost");
        let index = insert(&mut policy, item(), 1, 10);
        assert_eq!(policy.slab.get(index).queue, Queue::Main);
        policy.validate();
        policy.remove(index);
        assert_eq!(policy.used(), 10);
        policy.evict().expect("one left");
        assert!(policy.evict().is_none());
        assert_eq!(policy.used(), 0);
    }
}
