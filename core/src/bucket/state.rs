//! The life of a bucket, as the seed names it.

/// Where a bucket is in its life. Moves only forward: NULL, RUNNING, STOPPING, STOPPED, then NULL
/// again once the shutdown worker has freed it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum State {
    /// Not serving: the engine is still initialising, or the bucket has been freed.
    Null = 0,
    /// Serving calls.
    Running = 1,
    /// Deleted; clients already inside may finish, new ones are turned away.
    Stopping = 2,
    /// No client inside; the shutdown worker owns the engine.
    Stopped = 3,
}

impl State {
    /// The seed's names for the states (they appear in "Bucket exists: ..." and in stats).
    pub const fn name(self) -> &'static str {
        match self {
            State::Null => "NULL",
            State::Running => "running",
            State::Stopping => "stopping",
            State::Stopped => "stopped",
        }
    }

    pub(crate) const fn from_u8(value: u8) -> State {
        match value {
            1 => State::Running,
            2 => State::Stopping,
            3 => State::Stopped,
            _ => State::Null,
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::State;

    #[test]
    fn names_round_trip_through_u8() {
        for state in [State::Null, State::Running, State::Stopping, State::Stopped] {
            assert_eq!(State::from_u8(state as u8), state);
        }
        assert_eq!(State::Stopping.to_string(), "stopping");
        assert_eq!(State::from_u8(200), State::Null);
    }
}
