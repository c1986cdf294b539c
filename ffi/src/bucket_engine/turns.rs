//! The ends of turn of the engine libraries that buckets were loaded from (each library's
//! `mcb_end_turn`, see `mcb_abi::meta_ext::END_TURN_SYMBOL`). A host ends its turn with the
//! bucket engine's ([`end_turn`]), which ends it for the in-process (`builtin`) buckets and
//! then in each library recorded here, so that a bucket loaded from one of our libraries
//! serves its gets within the turn as a built-in one does. A library stays loaded once an
//! engine of it exists (`engine_lib`), so a function recorded here stays callable.

use crate::meta_ext::EndTurn;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Distinct libraries recorded (a host loads a handful of engine libraries); the buckets of a
/// library past this many keep counted holds, as under a host that never ends its turns.
const LIBRARIES: usize = 16;

/// The recorded functions, filled in order: readers stop at the first empty slot.
static ENDS: [OnceLock<EndTurn>; LIBRARIES] = [const { OnceLock::new() }; LIBRARIES];

/// Held by a recorder, so that two record a library once and fill the slots in order.
static RECORDING: Mutex<()> = Mutex::new(());

/// Records a library's end of turn (once however many buckets it serves); false when the
/// table is full.
pub(crate) fn record(end: EndTurn) -> bool {
    let _recording = RECORDING.lock().unwrap_or_else(PoisonError::into_inner);
    for slot in &ENDS {
        match slot.get() {
            Some(&known) if std::ptr::fn_addr_eq(known, end) => return true,
            Some(_) => {}
            None => return slot.set(end).is_ok(),
        }
    }
    false
}

/// Ends the calling thread's turn in the built-in buckets and in every recorded library.
///
/// # Safety
/// [`EndTurn`]'s promise, for the items of every bucket: each item a turn hands out is
/// released on the thread that got it, before its engine is destroyed.
pub unsafe fn end_turn() {
    // SAFETY: the caller's promise covers the built-in buckets' items.
    unsafe { crate::storage::end_turn() };
    for end in ENDS.iter().map_while(OnceLock::get) {
        // SAFETY: a library's own `mcb_end_turn` (recorded from its `dlsym`), and the
        // library is never unloaded; the caller's promise covers that library's items.
        unsafe { end() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static FIRST: AtomicUsize = AtomicUsize::new(0);
    static SECOND: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn first() {
        // Relaxed: a count read by this test's thread, which made the calls.
        FIRST.fetch_add(1, Ordering::Relaxed);
    }

    unsafe extern "C" fn second() {
        // Relaxed: as in `first`.
        SECOND.fetch_add(1, Ordering::Relaxed);
    }

    /// A library is recorded once however many of its buckets are loaded, and each recorded
    /// library's end of turn runs once per turn.
    #[test]
    fn each_library_ends_its_turn_once_per_turn() {
        assert!(record(first) && record(second) && record(first));
        // SAFETY: no item of any bucket is out on this thread.
        unsafe { end_turn() };
        // SAFETY: as above.
        unsafe { end_turn() };
        // Relaxed (both): this thread's own calls.
        let counts = (
            FIRST.load(Ordering::Relaxed),
            SECOND.load(Ordering::Relaxed),
        );
        assert_eq!(counts, (2, 2));
    }
}
