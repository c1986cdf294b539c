//! [`LinkedSlab`]: values in a growable slab, threaded on doubly linked lists of slot indices.
//!
//! The shape of an LRU or FIFO that allocates nothing per entry: a value lives in a slot of one
//! `Vec` for as long as it is held, the lists link slots by index (no pointers, no unsafe), and
//! a freed slot is reused by the next insertion. The L1 LRU, the S3-FIFO queues of L2 and the
//! top-keys LRU are all built on it. A slab may carry several lists (S3-FIFO's small and main
//! queues share one); each [`List`] is a plain value its owner keeps next to the slab.
//!
//! [`LinkedSlab::validate`] walks every list and checks the links, the lengths and the free
//! list; the property tests call it after every step.

/// Marks the end of a list (and the links of a slot on no list).
const NIL: u32 = u32::MAX;

#[derive(Debug)]
struct Slot<T> {
    /// `None` while the slot is free.
    value: Option<T>,
    /// Towards the front.
    prev: u32,
    /// Towards the back.
    next: u32,
}

/// One list threaded through a [`LinkedSlab`]: its two ends and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct List {
    head: u32,
    tail: u32,
    len: usize,
}

impl List {
    /// A list with nothing on it.
    pub(crate) const EMPTY: Self = Self {
        head: NIL,
        tail: NIL,
        len: 0,
    };

    /// The slot at the front (the most recently pushed).
    #[inline]
    pub(crate) fn front(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// The slot at the back (the next to go).
    #[inline]
    pub(crate) fn back(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// Values on the list.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct LinkedSlab<T> {
    slots: Vec<Slot<T>>,
    /// Free slots, reused last freed first.
    free: Vec<u32>,
}

impl<T> LinkedSlab<T> {
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Makes room for `additional` more slots, so that up to that many values are held without
    /// allocating.
    pub(crate) fn reserve_exact(&mut self, additional: usize) {
        self.slots.reserve_exact(additional);
        self.free.reserve_exact(additional);
    }

    /// Whether no room was ever made.
    pub(crate) fn is_unsized(&self) -> bool {
        self.slots.capacity() == 0
    }

    /// Stores `value` at the front of `list`; returns its slot.
    pub(crate) fn push_front(&mut self, list: &mut List, value: T) -> u32 {
        let slot = Slot {
            value: Some(value),
            prev: NIL,
            next: NIL,
        };
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index as usize] = slot;
                index
            }
            None => {
                self.slots.push(slot);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 slots")
            }
        };
        self.link_front(list, index);
        index
    }

    /// Takes the value in `index` off `list` (which holds it) and frees its slot.
    pub(crate) fn remove(&mut self, list: &mut List, index: u32) -> T {
        self.unlink(list, index);
        self.free.push(index);
        self.slots[index as usize]
            .value
            .take()
            .expect("a linked slot holds a value")
    }

    /// Moves `index` from `from` (which holds it) to the front of `to` (which may be `from`).
    #[inline]
    pub(crate) fn move_front(&mut self, from: &mut List, to: Option<&mut List>, index: u32) {
        self.unlink(from, index);
        self.link_front(to.unwrap_or(from), index);
    }

    /// The value in `index`.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> &T {
        self.slots[index as usize]
            .value
            .as_ref()
            .expect("a held slot")
    }

    /// The value in `index`, to change.
    #[inline]
    pub(crate) fn get_mut(&mut self, index: u32) -> &mut T {
        self.slots[index as usize]
            .value
            .as_mut()
            .expect("a held slot")
    }

    /// The slot after `index` on its list (towards the back).
    #[inline]
    pub(crate) fn next(&self, index: u32) -> Option<u32> {
        let next = self.slots[index as usize].next;
        (next != NIL).then_some(next)
    }

    /// The values of `list`, front to back.
    pub(crate) fn iter<'a>(&'a self, list: &List) -> impl Iterator<Item = &'a T> + 'a {
        let mut cursor = list.front();
        std::iter::from_fn(move || {
            let index = cursor?;
            cursor = self.next(index);
            Some(self.get(index))
        })
    }

    /// Checks the slab against `lists`, which must be every list threaded through it: each list
    /// links both ways from its head to its tail over exactly `len` held slots, every held slot
    /// is on exactly one list, and every other slot is free exactly once.
    ///
    /// # Panics
    /// On the first broken invariant, naming it.
    pub(crate) fn validate(&self, lists: &[&List]) {
        let mut on_list = vec![false; self.slots.len()];
        for (n, list) in lists.iter().enumerate() {
            let mut prev = NIL;
            let mut cursor = list.head;
            let mut len = 0;
            while cursor != NIL {
                let slot = self
                    .slots
                    .get(cursor as usize)
                    .unwrap_or_else(|| panic!("list {n}: link to slot {cursor} past the slab"));
                assert!(slot.value.is_some(), "list {n}: free slot {cursor} linked");
                assert!(
                    !std::mem::replace(&mut on_list[cursor as usize], true),
                    "list {n}: slot {cursor} linked twice (a cycle or two lists)"
                );
                assert_eq!(slot.prev, prev, "list {n}: slot {cursor}'s back link");
                prev = cursor;
                cursor = slot.next;
                len += 1;
            }
            assert_eq!(list.tail, prev, "list {n}: tail is not the last slot");
            assert_eq!(list.len, len, "list {n}: length");
        }
        let mut free = vec![false; self.slots.len()];
        for &index in &self.free {
            let slot = &self.slots[index as usize];
            assert!(slot.value.is_none(), "slot {index} free and held");
            assert!(
                !std::mem::replace(&mut free[index as usize], true),
                "slot {index} free twice"
            );
        }
        for (index, slot) in self.slots.iter().enumerate() {
            if slot.value.is_some() {
                assert!(on_list[index], "held slot {index} on no list");
            } else {
                assert!(free[index], "vacant slot {index} not free");
            }
        }
    }

    #[inline]
    fn link_front(&mut self, list: &mut List, index: u32) {
        let old = list.head;
        let slot = &mut self.slots[index as usize];
        slot.prev = NIL;
        slot.next = old;
        if old == NIL {
            list.tail = index;
        } else {
            self.slots[old as usize].prev = index;
        }
        list.head = index;
        list.len += 1;
    }

    #[inline]
    fn unlink(&mut self, list: &mut List, index: u32) {
        let Slot { prev, next, .. } = self.slots[index as usize];
        if prev == NIL {
            list.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        list.len -= 1;
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A random walk of pushes, removals and moves over two lists, checked against two
    /// `VecDeque`s and validated after every step.
    #[test]
    fn random_steps_match_a_model_and_keep_the_invariants() {
        let mut slab = LinkedSlab::new();
        let mut lists = [List::EMPTY, List::EMPTY];
        let mut model: [VecDeque<(u32, u64)>; 2] = [VecDeque::new(), VecDeque::new()];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut random = |below: usize| {
            // xorshift64: a fixed sequence, so a failure replays.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % below as u64) as usize
        };
        for step in 0..5_000u64 {
            let which = random(2);
            let len = model[which].len();
            match random(4) {
                0 | 1 => {
                    let index = slab.push_front(&mut lists[which], step);
                    model[which].push_front((index, step));
                }
                2 if len > 0 => {
                    let (index, value) = model[which].remove(random(len)).expect("in range");
                    assert_eq!(slab.remove(&mut lists[which], index), value);
                }
                3 if len > 0 => {
                    let (index, value) = model[which].remove(random(len)).expect("in range");
                    let to = random(2);
                    let [a, b] = &mut lists;
                    let (from, other) = if which == 0 { (a, b) } else { (b, a) };
                    slab.move_front(from, (to != which).then_some(other), index);
                    model[to].push_front((index, value));
                }
                _ => {}
            }
            slab.validate(&[&lists[0], &lists[1]]);
            for (list, model) in lists.iter().zip(&model) {
                let got: Vec<u64> = slab.iter(list).copied().collect();
                let want: Vec<u64> = model.iter().map(|&(_, value)| value).collect();
                assert_eq!(got, want, "step {step}");
                assert_eq!(list.back(), model.back().map(|&(index, _)| index));
            }
        }
    }

    #[test]
    fn validate_catches_a_broken_link() {
        let mut slab = LinkedSlab::new();
        let mut list = List::EMPTY;
        for value in 0..3 {
            slab.push_front(&mut list, value);
        }
        slab.slots[1].prev = NIL;
        let broken = std::panic::catch_unwind(|| slab.validate(&[&list]));
        assert!(broken.is_err(), "a wrong back link must fail validation");
        let mut short = list;
        short.len = 2;
        slab.slots[1].prev = 2;
        slab.validate(&[&list]);
        assert!(std::panic::catch_unwind(|| slab.validate(&[&short])).is_err());
        assert!(
            std::panic::catch_unwind(|| slab.validate(&[])).is_err(),
            "held, unlisted"
        );
    }
}
