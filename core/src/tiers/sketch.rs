//! How often keys were asked for, approximately: TinyLFU's count-min sketch (Einziger, Friedman
//! and Manes, "TinyLFU: A Highly Efficient Cache Admission Policy", 2017), for the
//! [`Admission::Frequency`](super::Admission) rule of an L2 shard.
//!
//! Four counters per key (saturating at 15) in one array of eight to sixteen per entry the
//! shard holds (a power of two; one byte each); a key's count is the least of its four. Every
//! `2.5 x counters` additions (the count of them halved too) all counters are halved, so that
//! what was popular long ago fades.
//! Single-threaded: the shard's mutex guards it, like the policy that owns it. (Four counters
//! per entry kept 0.521 of the reads on the tiers bench's Zipf with a scan, eight 0.526, sixteen
//! 0.531; its evicting regime 0.900-0.903 with each.)

/// The most a counter holds.
const MAX: u8 = 15;
/// The fewest counters (a power of two).
const MIN_COUNTERS: usize = 64;

#[derive(Debug)]
pub(crate) struct Sketch {
    counters: Vec<u8>,
    /// Additions since the last halving.
    adds: usize,
}

impl Sketch {
    pub(crate) fn new() -> Self {
        Self {
            counters: vec![0; MIN_COUNTERS],
            adds: 0,
        }
    }

    /// Grows to at least eight counters per entry for `entries` (a power of two), starting
    /// over: a shard that grew has little history worth keeping. Never shrinks.
    pub(crate) fn fit(&mut self, entries: usize) {
        let want = entries
            .saturating_mul(8)
            .next_power_of_two()
            .max(MIN_COUNTERS);
        if want > self.counters.len() {
            self.counters = vec![0; want];
            self.adds = 0;
        }
    }

    /// The four counters of `hash` (double hashing over the two halves of a seeded hash).
    fn slots(&self, hash: u64) -> [usize; 4] {
        let mask = self.counters.len() - 1;
        let (a, b) = (hash as usize, ((hash >> 32) as usize) | 1);
        [0, 1, 2, 3].map(|i: usize| a.wrapping_add(i.wrapping_mul(b)) & mask)
    }

    /// Counts `n` requests of `hash`.
    pub(crate) fn add(&mut self, hash: u64, n: u8) {
        for slot in self.slots(hash) {
            self.counters[slot] = self.counters[slot].saturating_add(n).min(MAX);
        }
        self.adds += usize::from(n);
        if self.adds >= self.counters.len() / 4 * 10 {
            for counter in &mut self.counters {
                *counter /= 2;
            }
            self.adds /= 2;
        }
    }

    /// About how often `hash` was asked for lately.
    pub(crate) fn estimate(&self, hash: u64) -> u8 {
        self.slots(hash)
            .into_iter()
            .map(|slot| self.counters[slot])
            .min()
            .unwrap_or(0)
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_saturate_fade_and_stay_apart() {
        let mut sketch = Sketch::new();
        sketch.fit(1000);
        let (hot, cold) = (0x1234_5678_9abc_def1, 0x0fed_cba9_8765_4321);
        for _ in 0..20 {
            sketch.add(hot, 1);
        }
        sketch.add(cold, 1);
        assert_eq!((sketch.estimate(hot), sketch.estimate(cold)), (MAX, 1));
        assert_eq!(sketch.estimate(0x5555_0000_aaaa_0003), 0, "never added");
        // 60,000 requests of another key: all counts halve after 20,480 additions (8,192
        // counters), then every 10,240 (the count of additions halves too): four times.
        let other = 0x5a5a_1111_3c3c_2227;
        for _ in 0..60_000 {
            sketch.add(other, 1);
        }
        assert_eq!((sketch.estimate(hot), sketch.estimate(other)), (0, MAX));
    }
}
