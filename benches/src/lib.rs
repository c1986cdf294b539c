//! Helpers shared by the benches in `benches/`.
