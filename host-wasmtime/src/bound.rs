//! What bounds the work of one call: a time (the default) or fuel.
//!
//! A time limit is wasmtime's epoch interruption: compiled code checks a
//! counter at function entries and loop heads, and a ticker thread advances
//! the counter every [`TICK`] while a call runs. It costs a call little, but
//! where a call stops depends on the machine. Fuel counts instructions
//! (`Config::consume_fuel`): a call runs out at the same point on every
//! machine, reproducible from its input alone, at a cost to every call
//! (BENCHMARKS.md, session 20: what each bound costs). Both raise a typed
//! error (`time_limit`, `fuel_exhausted`), never a hang.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use wasmtime::{Config, Engine, EngineWeak};

use crate::sync::lock;

/// The bound on one call's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Wall-clock time per call (epoch interruption). The default: 30 s.
    Time(Duration),
    /// Fuel (roughly, wasm instructions) per call.
    Fuel(u64),
}

impl Default for Bound {
    fn default() -> Self {
        Bound::Time(Duration::from_secs(30))
    }
}

/// How often the epoch advances while a call runs: the resolution of a
/// time limit.
pub const TICK: Duration = Duration::from_millis(10);

/// The most ticks a call may be given (about 1.5 billion years).
const MAX_TICKS: u64 = 1 << 62;

impl Bound {
    /// Whether engines for this bound count fuel (else: epochs).
    pub(crate) fn fuel(self) -> bool {
        matches!(self, Bound::Fuel(_))
    }

    /// The engine configuration this bound needs.
    pub(crate) fn config(self) -> Config {
        let mut config = Config::new();
        if self.fuel() {
            config.consume_fuel(true);
        } else {
            config.epoch_interruption(true);
        }
        config
    }

    /// Epoch ticks a call may run: the limit rounded up to whole ticks, and
    /// one more, since the first tick may come at once (at most 2^62: the
    /// engine adds it to its current epoch).
    pub(crate) fn ticks(limit: Duration) -> u64 {
        let whole = limit.as_nanos().div_ceil(TICK.as_nanos()).max(1);
        u64::try_from(whole).map_or(MAX_TICKS, |t| t.min(MAX_TICKS - 1) + 1)
    }
}

/// The thread that advances one engine's epoch every [`TICK`] while at
/// least one call runs on it, and sleeps (no wake-ups) while none does.
/// It ends when its engine is dropped.
#[derive(Clone)]
pub(crate) struct Ticker {
    running: Arc<(Mutex<usize>, Condvar)>,
}

/// A call in progress on a ticker's engine (the ticker runs while one is
/// held).
pub(crate) struct Running(Arc<(Mutex<usize>, Condvar)>);

impl Drop for Running {
    fn drop(&mut self) {
        *lock(&self.0 .0) -= 1;
    }
}

impl Ticker {
    /// Start the ticker of `engine`.
    pub(crate) fn start(engine: &Engine) -> std::io::Result<Ticker> {
        let running = Arc::new((Mutex::new(0usize), Condvar::new()));
        let weak = engine.weak();
        let shared = running.clone();
        std::thread::Builder::new()
            .name("foldline-epoch".into())
            .spawn(move || tick(&weak, &shared))?;
        Ok(Ticker { running })
    }

    /// Mark a call as running until the answer is dropped.
    pub(crate) fn enter(&self) -> Running {
        let (count, wake) = &*self.running;
        *lock(count) += 1;
        wake.notify_one();
        Running(self.running.clone())
    }
}

fn tick(engine: &EngineWeak, running: &(Mutex<usize>, Condvar)) {
    let (count, wake) = running;
    loop {
        {
            let mut n = lock(count);
            while *n == 0 {
                // Woken by a call starting; the timeout only lets the thread
                // notice that its engine is gone.
                n = wake
                    .wait_timeout(n, Duration::from_secs(60))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                if *n == 0 && engine.upgrade().is_none() {
                    return;
                }
            }
        }
        std::thread::sleep(TICK);
        match engine.upgrade() {
            Some(e) => e.increment_epoch(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_limit_is_whole_ticks_and_one_more() {
        assert_eq!(Bound::ticks(Duration::ZERO), 2);
        assert_eq!(Bound::ticks(Duration::from_millis(1)), 2);
        assert_eq!(Bound::ticks(TICK), 2);
        assert_eq!(Bound::ticks(TICK + Duration::from_nanos(1)), 3);
        assert_eq!(Bound::ticks(Duration::from_secs(30)), 3_001);
        assert_eq!(Bound::ticks(Duration::MAX), MAX_TICKS);
    }
}
