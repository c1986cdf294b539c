//! [`AnyValue`]: what one L2 keeps for caches of different value types (as one
//! `lua_shared_dict` serves mlcache instances whatever they store).

use super::cache::Cache;
use super::error::Error;
use super::l2::L2;
use super::options::Options;
use super::weigh::default_weight;
use crate::sync::PayloadArc;
use std::any::Any;
use std::fmt;

/// A value of any type, shared (no copy when a cache hands it out as its own type).
#[derive(Clone)]
pub struct AnyValue {
    value: PayloadArc<dyn Any + Send + Sync>,
    /// What the value weighs in L2 by default (see `weigh::default_weight`).
    weight: usize,
}

impl AnyValue {
    /// Wraps `value`.
    pub fn new<V: Any + Send + Sync>(value: V) -> Self {
        Self {
            weight: default_weight(&value),
            value: PayloadArc::new(value),
        }
    }

    /// What the wrapped value weighs by default.
    pub(crate) fn weight(&self) -> usize {
        self.weight
    }

    /// The value, if it is a `V`.
    pub fn downcast<V: Any + Send + Sync>(&self) -> Option<PayloadArc<V>> {
        self.value.clone().downcast().ok()
    }
}

impl fmt::Debug for AnyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AnyValue(..)")
    }
}

impl<V: Any + Send + Sync> Cache<AnyValue, V> {
    /// A cache of `V`s named `name` over a store that caches of other value types share: its
    /// loaders return (and `set` takes) [`AnyValue`]s, its gets hand back `V`s without a copy.
    /// A value of another type under this name is an [`Error::Transform`].
    pub fn of_type(
        name: &str,
        l2: PayloadArc<L2<AnyValue>>,
        opts: Options<AnyValue>,
    ) -> Result<Self, Error> {
        if opts.transform.is_some() {
            return Err(Error::InvalidOption("transform: of_type keeps V in L1"));
        }
        Self::build(
            name,
            l2,
            opts,
            PayloadArc::new(|v: &PayloadArc<AnyValue>| {
                v.downcast()
                    .ok_or_else(|| Error::Transform("a value of another type".into()))
            }),
        )
    }
}
