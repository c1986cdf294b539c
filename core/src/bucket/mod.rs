//! Buckets.
