//! The integer a typed constant of the ABI mirrors carries, for the `abi_*` tests that compare
//! the mirrors' constants with numbers (`abi_constants.rs`) and with the C header's
//! (`abi_c_harness.rs`).

use mcb_abi::abi::*;

/// The integer a typed constant carries.
pub trait Raw {
    fn raw(self) -> i64;
}

macro_rules! raw_newtype {
    ($($t:ty),*) => {$(
        impl Raw for $t {
            fn raw(self) -> i64 {
                i64::from(self.0)
            }
        }
    )*};
}
raw_newtype!(
    ENGINE_ERROR_CODE,
    ENGINE_STORE_OPERATION,
    ENGINE_EVENT_TYPE,
    tap_event_t,
    engine_feature_t,
    EXTENSION_ERROR_CODE,
    extension_type_t,
    EXTENSION_LOG_LEVEL,
    config_datatype,
    vbucket_state_t
);

macro_rules! raw_int {
    ($($t:ty),*) => {$(
        impl Raw for $t {
            fn raw(self) -> i64 {
                i64::try_from(self).expect("fits")
            }
        }
    )*};
}
raw_int!(u8, u16, u32, u64, usize);
