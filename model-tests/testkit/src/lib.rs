//! `mcb-testkit`: the one home of what the workspace's test crates share, as a crate that each of
//! them lists under `[dev-dependencies]` (none includes another crate's file by `#[path]`).
//!
//! - [`source`]: a crate's source tree read into modules, comments stripped, the paths each
//!   module names (`crate::`, `super::`, `self::`, a child's name) turned into a module graph,
//!   and its import circles found, between files and between folders. The module-graph tests of
//!   `core`, `ffi`, `ffi/abi` and `ffi/host` and the source-rule tests read sources through it.
//! - [`c_harness`]: the C engine harness in `examples-c/engine` built with make (plain or with
//!   gcc's sanitizers, in the ABI variant of the caller's features), and the checks its runs
//!   share (valgrind present, a program's success).
//! - [`shared_lib`]: a shared library cargo built for the test run, and the functions it
//!   exports.
//! - `header` (feature `header`): a committed cbindgen header is current and compiles.
//! - [`alloc`]: a global allocator counting the current thread's allocations, for the tests
//!   that show a hot path allocates nothing.
//! - [`process`]: a process's `/proc` figures (resident set now and at its peak) and the
//!   fixed-seed generator of the tests that bound resources (the store's in process, the
//!   host's on the server).
//!
//! Where it lives: `model-tests/` is the workspace's folder of crates that exist only for
//! tests, and this crate depends on no crate of ours (not `mcb-core`, not `mcb-ffi`, not
//! `mcb-abi`), so that any crate, `core` included, can dev-depend on it without a circle. It is
//! not under `ffi/` although most of its users are: `core` knows nothing of C, and its
//! dev-dependency should not point into the C side's folder.

pub mod alloc;
pub mod c_harness;
#[cfg(feature = "header")]
pub mod header;
pub mod process;
pub mod shared_lib;
pub mod source;
