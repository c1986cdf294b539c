//! Caches of any value type over one L2: [`Cache::of_type`] (as one `lua_shared_dict` serves
//! mlcache instances whatever they store). The values are [`AnyValue`]s.

use super::cache::Cache;
use super::error::Error;
use super::l2::L2;
use super::options::Options;
use super::weigh::AnyValue;
use crate::sync::PayloadArc;
use std::any::Any;

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
