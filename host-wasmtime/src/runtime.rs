//! Loading and calling the `.wasm` under wasmtime.
//!
//! The module is compiled once and pre-linked, so instantiation is cheap
//! (about 20 µs); each call gets its full bound (a time or fuel: `bound.rs`)
//! in an instance bounded by the memory limit. An instance whose call succeeded is reused by the next
//! call (its buffers are freed); any failure discards it. A breach, a trap or malformed output is a typed
//! [`HostError`], never a panic: the store's [`ResourceLimiter`] raises a
//! memory breach as its own error type, and running out of time or fuel is
//! wasmtime's typed trap. The JS imports of the wasm-bindgen glue are
//! stubbed as traps: the raw ABI never calls them.

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::{
    Engine, Instance, InstancePre, Linker, Memory, Module, ResourceLimiter, Store, StoreLimits,
    StoreLimitsBuilder, Trap, TypedFunc,
};

pub use crate::bound::Bound;
use crate::bound::{Running, Ticker};
use crate::error::{HostError, Result};
use crate::sync::lock;

/// The `.wasm` the npm package ships, embedded at build time
/// (`host-wasmtime/foldline_bg.wasm` links to `js/pkg/foldline_bg.wasm`, so
/// the crate packages with its own copy).
pub const EMBEDDED_WASM: &[u8] = include_bytes!("../foldline_bg.wasm");

/// The ABI major version this host speaks.
pub const ABI_MAJOR: u32 = 1;

/// Bounds of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The bound on a call's work: a time (default 30 s) or fuel.
    pub bound: Bound,
    /// Linear-memory bytes per call. Default 512 MiB.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bound: Bound::default(),
            memory_bytes: 512 << 20,
        }
    }
}

struct State {
    limits: StoreLimits,
    /// The memory limit, reported by [`MemoryBreach`].
    memory_bytes: usize,
}

/// A memory growth past the limit, raised by the store's limiter itself, so
/// the call's error says so by type (no reading of trap text).
#[derive(Debug, thiserror::Error)]
#[error("memory growth to {desired} bytes refused: the limit is {limit} bytes")]
struct MemoryBreach {
    desired: usize,
    limit: usize,
}

impl ResourceLimiter for State {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if self.limits.memory_growing(current, desired, maximum)? {
            return Ok(true);
        }
        Err(wasmtime::Error::new(MemoryBreach {
            desired,
            limit: self.memory_bytes,
        }))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }
}

/// An instance kept between calls: a call that succeeded leaves the
/// allocator clean (every buffer freed), so the next call reuses the instance
/// and its already-grown memory instead of faulting in fresh pages. A call
/// that fails for any reason drops its instance.
struct Warm {
    store: Store<State>,
    memory: Memory,
    alloc: TypedFunc<u32, u32>,
    free: TypedFunc<(u32, u32), ()>,
    call: TypedFunc<(u32, u32, u32, u32), u64>,
    /// `foldline_call_held` and `foldline_forget` (ABI 1.2 and later).
    held: Option<(HeldCall, TypedFunc<u32, ()>)>,
    /// Which instance this is: what it holds is gone with it.
    generation: u64,
}

type HeldCall = TypedFunc<(u32, u32, u32, u32, u32, u32, u32, u32), u64>;

/// One conversation's events held in the kept instance between calls
/// (`foldline_core::held`; ABI 1.2), as the host keeps track of them: which
/// instance holds them, under which id, and how many of the host's list.
/// [`Foldline::call_holding`] sends only what the instance does not hold
/// yet, and everything again after the instance was replaced.
#[derive(Debug, Default)]
pub struct Holding {
    /// The id in the instance (0: none yet).
    id: u32,
    /// The instance holding them.
    generation: u64,
    /// Held: the first `count` events of the host's list.
    count: usize,
    /// The host's list was rebuilt: start again.
    stale: bool,
}

impl Holding {
    /// The host's list changed other than at its end (turns dropped under a
    /// new chain head): the next call sends it all again.
    pub fn rebuilt(&mut self) {
        self.stale = true;
    }
}

/// Linear memory past which the instance a call ran in is dropped instead of
/// kept for the next call (the same bound as the JS package's).
pub const MEMORY_RESET_BYTES: usize = foldline_core::defaults::MEMORY_RESET_BYTES as usize;

/// A loaded, version-checked foldline module.
pub struct Foldline {
    compiled: Compiled,
    sha256: String,
    limits: Limits,
    warm: Mutex<Option<Warm>>,
    /// Instances made so far (each one's generation).
    generations: AtomicU64,
    /// Held ids handed out so far.
    held_ids: AtomicU32,
    /// The module's ABI minor version.
    abi_minor: u32,
}

/// An artifact compiled for one kind of bound: its bytes (to compile it
/// again for the other kind), the engine, the ready-to-instantiate module,
/// and the engine's epoch ticker (time bounds only).
#[derive(Clone)]
struct Compiled {
    bytes: Arc<[u8]>,
    engine: Engine,
    pre: InstancePre<State>,
    ticker: Option<Ticker>,
}

/// Modules compiled in this process, by artifact hash and kind of bound
/// (fuel or not): an engine and a ready-to-instantiate module are shared by
/// every [`Foldline`] loaded from the same bytes, so only the first load of
/// an artifact compiles it (a second driver starts in microseconds; each
/// still gets its own instances).
static COMPILED: Mutex<BTreeMap<(String, bool), Compiled>> = Mutex::new(BTreeMap::new());

/// `bytes` compiled for `bound`'s kind, once per process; `tune` adjusts
/// the engine's configuration when it must be compiled (the disk cache).
fn compiled(
    sha256: &str,
    bytes: &[u8],
    bound: Bound,
    tune: impl FnOnce(&mut wasmtime::Config) -> Result<()>,
) -> Result<Compiled> {
    let mut cache = lock(&COMPILED);
    let key = (sha256.to_owned(), bound.fuel());
    if let Some(c) = cache.get(&key) {
        return Ok(c.clone());
    }
    let mut config = bound.config();
    tune(&mut config)?;
    let engine = Engine::new(&config).map_err(|e| HostError::Load(e.to_string()))?;
    let module = Module::new(&engine, bytes).map_err(|e| HostError::Load(format!("{e:#}")))?;
    let mut linker: Linker<State> = Linker::new(&engine);
    linker
        .define_unknown_imports_as_traps(&module)
        .map_err(|e| HostError::Load(e.to_string()))?;
    let pre = linker
        .instantiate_pre(&module)
        .map_err(|e| HostError::Load(e.to_string()))?;
    let ticker = match bound {
        Bound::Fuel(_) => None,
        Bound::Time(_) => Some(
            Ticker::start(&engine)
                .map_err(|e| HostError::Load(format!("the epoch ticker: {e}")))?,
        ),
    };
    let c = Compiled {
        bytes: Arc::from(bytes),
        engine,
        pre,
        ticker,
    };
    cache.insert(key, c.clone());
    Ok(c)
}

impl Foldline {
    /// Load the embedded artifact with default limits.
    ///
    /// # Errors
    /// `load_failed` or `unsupported_version`.
    pub fn embedded() -> Result<Foldline> {
        Foldline::from_bytes(EMBEDDED_WASM, Limits::default())
    }

    /// Load a `.wasm` file.
    ///
    /// # Errors
    /// `io`, `load_failed` or `unsupported_version`.
    pub fn from_file(path: &std::path::Path, limits: Limits) -> Result<Foldline> {
        Foldline::from_bytes(&std::fs::read(path)?, limits)
    }

    /// Compile bytes once and check the ABI version.
    ///
    /// # Errors
    /// `load_failed` or `unsupported_version`.
    pub fn from_bytes(bytes: &[u8], limits: Limits) -> Result<Foldline> {
        Foldline::load(bytes, limits, |_| Ok(()))
    }

    /// As [`Foldline::from_bytes`], with the compiled code kept on disk by
    /// wasmtime's cache, so a process after the first loads it instead of
    /// compiling (about 0.3 s of two cores for the embedded artifact). The
    /// cache is wasmtime's: entries are keyed by the bytes, the engine's
    /// settings and wasmtime's version, written atomically, and trimmed to
    /// its size limits; `dir` must be absolute, and `None` is wasmtime's
    /// default directory (`$XDG_CACHE_HOME/wasmtime` or `~/.cache/wasmtime`
    /// on Linux). The directory holds machine code this process will run:
    /// it must be writable by this user alone.
    ///
    /// # Errors
    /// `load_failed` (also when the cache directory cannot be made or is
    /// not absolute) or `unsupported_version`.
    #[cfg(feature = "compile-cache")]
    pub fn from_bytes_cached(
        bytes: &[u8],
        limits: Limits,
        dir: Option<&std::path::Path>,
    ) -> Result<Foldline> {
        Foldline::load(bytes, limits, |config| {
            let mut c = wasmtime::CacheConfig::new();
            if let Some(d) = dir {
                c.with_directory(d);
            }
            let cache = wasmtime::Cache::new(c)
                .map_err(|e| HostError::Load(format!("the compile cache: {e:#}")))?;
            config.cache(Some(cache));
            Ok(())
        })
    }

    fn load(
        bytes: &[u8],
        limits: Limits,
        tune: impl FnOnce(&mut wasmtime::Config) -> Result<()>,
    ) -> Result<Foldline> {
        let sha256 = format!("sha256:{:x}", Sha256::digest(bytes));
        let f = Foldline {
            compiled: compiled(&sha256, bytes, limits.bound, tune)?,
            sha256,
            limits,
            warm: Mutex::new(None),
            generations: AtomicU64::new(0),
            held_ids: AtomicU32::new(0),
            abi_minor: 0,
        };
        let (major, minor) = f.abi_version()?;
        if major != ABI_MAJOR {
            return Err(HostError::AbiMismatch {
                found: major,
                expected: ABI_MAJOR,
            });
        }
        Ok(Foldline {
            abi_minor: minor,
            ..f
        })
    }

    /// `sha256:<hex>` of the loaded artifact.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Change the limits of later calls (a change between a time and fuel
    /// compiles the artifact for the other kind, once per process).
    ///
    /// # Errors
    /// `load_failed` when that compilation fails.
    pub fn set_limits(&mut self, limits: Limits) -> Result<()> {
        if limits.bound.fuel() != self.limits.bound.fuel() {
            self.compiled = compiled(&self.sha256, &self.compiled.bytes, limits.bound, |_| Ok(()))?;
        }
        self.limits = limits;
        *self.warm.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(())
    }

    /// Give `store` the full bound of one call; a time bound runs the
    /// engine's ticker until the answer is dropped.
    fn budget(&self, store: &mut Store<State>) -> Result<Option<Running>> {
        match self.limits.bound {
            Bound::Fuel(fuel) => {
                store
                    .set_fuel(fuel)
                    .map_err(|e| HostError::Load(e.to_string()))?;
                Ok(None)
            }
            Bound::Time(limit) => {
                store.set_epoch_deadline(Bound::ticks(limit));
                Ok(self.compiled.ticker.as_ref().map(Ticker::enter))
            }
        }
    }

    fn store(&self) -> Result<Store<State>> {
        let mut store = Store::new(
            &self.compiled.engine,
            State {
                limits: StoreLimitsBuilder::new()
                    .memory_size(self.limits.memory_bytes)
                    .build(),
                memory_bytes: self.limits.memory_bytes,
            },
        );
        store.limiter(|s| s as &mut dyn ResourceLimiter);
        Ok(store)
    }

    /// Create one bounded instance and drop it: what every call pays before
    /// its own work (benchmarks measure it).
    ///
    /// # Errors
    /// A trap during instantiation.
    pub fn instantiate_only(&self) -> Result<()> {
        let mut store = self.store()?;
        let _running = self.budget(&mut store)?;
        self.compiled
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.classify(e))?;
        Ok(())
    }

    /// The module's ABI (major, minor).
    ///
    /// # Errors
    /// A trap or a missing export.
    pub fn abi_version(&self) -> Result<(u32, u32)> {
        let mut store = self.store()?;
        let _running = self.budget(&mut store)?;
        let inst = self
            .compiled
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.classify(e))?;
        let get = |name: &str, store: &mut Store<State>| -> Result<u32> {
            let f = inst
                .get_typed_func::<(), u32>(&mut *store, name)
                .map_err(|e| HostError::Load(format!("{name}: {e}")))?;
            f.call(&mut *store, ()).map_err(|e| self.classify(e))
        };
        Ok((
            get("foldline_abi_major", &mut store)?,
            get("foldline_abi_minor", &mut store)?,
        ))
    }

    fn fresh(&self) -> Result<Warm> {
        let mut store = self.store()?;
        let _running = self.budget(&mut store)?;
        let inst: Instance = self
            .compiled
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.classify(e))?;
        let memory = inst
            .get_memory(&mut store, "memory")
            .ok_or_else(|| HostError::Load("the module exports no memory".into()))?;
        let load = |e: wasmtime::Error| HostError::Load(e.to_string());
        Ok(Warm {
            alloc: inst
                .get_typed_func(&mut store, "foldline_alloc")
                .map_err(load)?,
            free: inst
                .get_typed_func(&mut store, "foldline_free")
                .map_err(load)?,
            call: inst
                .get_typed_func(&mut store, "foldline_call")
                .map_err(load)?,
            held: inst
                .get_typed_func(&mut store, "foldline_call_held")
                .ok()
                .zip(inst.get_typed_func(&mut store, "foldline_forget").ok()),
            generation: self.generations.fetch_add(1, Ordering::Relaxed) + 1,
            memory,
            store,
        })
    }

    /// Call an entry point with JSON bytes; answers the canonical envelope bytes.
    ///
    /// Each call gets its full bound (a time or fuel); the memory limit
    /// bounds the instance. Calls are serialized per `Foldline`; use one per
    /// thread for parallelism.
    ///
    /// # Errors
    /// `time_limit` or `fuel_exhausted`, `memory_limit`, `trap`,
    /// `malformed_output`.
    pub fn call_raw(&self, entry: &str, input: &[u8]) -> Result<Vec<u8>> {
        self.with_instance(|f, w| {
            f.exchange(w, [entry.as_bytes(), input, &[]], |w, [e, i, _]| {
                w.call.call(&mut w.store, (e.0, e.1, i.0, i.1))
            })
        })
    }

    /// Whether the module holds events between calls (ABI 1.2 and later):
    /// [`Foldline::call_holding`] needs it.
    pub fn holds_events(&self) -> bool {
        self.abi_minor >= 2
    }

    /// [`Foldline::call_raw`] with `events` (the host's whole list for one
    /// conversation) held in the instance in front of the request's own:
    /// the same answer as the plain call with them written into the request
    /// (`step`'s `view.events`, `select`'s `events`), but only the events
    /// the instance does not hold yet are sent and parsed. An answer that is
    /// an error, or a failed call, leaves nothing held (the next call sends
    /// them all).
    ///
    /// # Errors
    /// As [`Foldline::call_raw`]; `load_failed` for a module before ABI 1.2.
    pub fn call_holding(
        &self,
        h: &mut Holding,
        events: &[foldline_core::event::Event],
        entry: &str,
        input: &[u8],
    ) -> Result<Vec<u8>> {
        self.with_instance(|f, w| {
            let Some((held, forget)) = w.held.clone() else {
                return Err(HostError::Load(
                    "the module holds no events (ABI before 1.2)".into(),
                ));
            };
            let here = h.id != 0 && h.generation == w.generation;
            let from = if here && !h.stale && h.count <= events.len() {
                h.count
            } else {
                if here {
                    forget.call(&mut w.store, h.id).map_err(|e| f.classify(e))?;
                }
                h.id = f.held_ids.fetch_add(1, Ordering::Relaxed) + 1;
                0
            };
            // Lost unless the call answers: a failure forgets it below.
            (h.generation, h.count, h.stale) = (0, 0, false);
            let update = if from == events.len() {
                Vec::new()
            } else {
                let mut u = b"{\"events\":".to_vec();
                serde_json::to_writer(&mut u, &events[from..])
                    .map_err(|e| HostError::Input(e.to_string()))?;
                u.push(b'}');
                u
            };
            let count = u32::try_from(from)
                .map_err(|_| HostError::Input("more than 2^32 events held".into()))?;
            let id = h.id;
            let out = f.exchange(w, [entry.as_bytes(), input, &update], |w, [e, i, u]| {
                held.call(&mut w.store, (id, count, e.0, e.1, i.0, i.1, u.0, u.1))
            })?;
            if out.starts_with(b"{\"ok\"") {
                (h.generation, h.count) = (w.generation, events.len());
            } else {
                forget.call(&mut w.store, id).map_err(|e| f.classify(e))?;
            }
            Ok(out)
        })
    }

    /// Let the instance drop the events `h` holds (a conversation the host
    /// forgets); nothing when they are held by an instance no longer kept.
    ///
    /// # Errors
    /// A trap of the instance.
    pub fn release(&self, h: &mut Holding) -> Result<()> {
        let mut slot = lock(&self.warm);
        if let Some(w) = slot.as_mut() {
            if h.id != 0 && h.generation == w.generation {
                if let Some((_, forget)) = w.held.clone() {
                    forget
                        .call(&mut w.store, h.id)
                        .map_err(|e| self.classify(e))?;
                }
            }
        }
        (h.generation, h.count) = (0, 0);
        Ok(())
    }

    /// Run `work` on the kept instance (or a new one) with its full bound;
    /// keep the instance for the next call only after a success, and
    /// only if its memory is still of a usual size: linear memory never
    /// shrinks, so an instance that one huge request grew is dropped rather
    /// than kept for the process's life.
    fn with_instance<T>(&self, work: impl FnOnce(&Self, &mut Warm) -> Result<T>) -> Result<T> {
        let mut slot = lock(&self.warm);
        let mut w = match slot.take() {
            Some(w) => w,
            None => self.fresh()?,
        };
        let running = self.budget(&mut w.store)?;
        let out = work(self, &mut w)?;
        drop(running);
        if w.memory.data_size(&w.store) <= MEMORY_RESET_BYTES {
            *slot = Some(w);
        }
        Ok(out)
    }

    /// Bytes of linear memory the instance kept for the next call holds
    /// (0 when none is kept); at most [`MEMORY_RESET_BYTES`].
    pub fn memory_bytes(&self) -> usize {
        let slot = lock(&self.warm);
        slot.as_ref().map_or(0, |w| w.memory.data_size(&w.store))
    }

    /// Copy `parts` into the instance (an empty part as pointer 0, length
    /// 0), `invoke` an export with their `(pointer, length)`, and read the
    /// `(ptr << 32) | len` answer it returns; every buffer is freed after.
    fn exchange(
        &self,
        w: &mut Warm,
        parts: [&[u8]; 3],
        invoke: impl FnOnce(&mut Warm, [(u32, u32); 3]) -> wasmtime::Result<u64>,
    ) -> Result<Vec<u8>> {
        let mut at = [(0u32, 0u32); 3];
        for (slot, part) in at.iter_mut().zip(parts) {
            let len = u32::try_from(part.len())
                .map_err(|_| HostError::Input("request larger than 4 GiB".into()))?;
            let ptr = w
                .alloc
                .call(&mut w.store, len)
                .map_err(|e| self.classify(e))?;
            w.memory
                .write(&mut w.store, ptr as usize, part)
                .map_err(|e| HostError::MalformedOutput(e.to_string()))?;
            *slot = (ptr, len);
        }
        let packed = invoke(w, at).map_err(|e| self.classify(e))?;
        let (ptr, n) = ((packed >> 32) as u32, (packed & 0xffff_ffff) as u32);
        let mut out = vec![0u8; n as usize];
        w.memory
            .read(&w.store, ptr as usize, &mut out)
            .map_err(|e| HostError::MalformedOutput(format!("result out of bounds: {e}")))?;
        for (p, l) in at.into_iter().chain([(ptr, n)]) {
            w.free
                .call(&mut w.store, (p, l))
                .map_err(|e| self.classify(e))?;
        }
        Ok(out)
    }

    /// Call an entry point with a typed request; the typed answer or the
    /// core's typed error.
    ///
    /// # Errors
    /// The core's error, or a host error.
    pub fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        entry: &str,
        request: &Req,
    ) -> Result<Resp> {
        Self::answer(&self.call_raw(entry, &encode(request)?)?)
    }

    /// The typed answer in an envelope `call_raw` returned, or the core's
    /// typed error.
    pub(crate) fn answer<Resp: DeserializeOwned>(out: &[u8]) -> Result<Resp> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        enum Envelope<T> {
            Ok(T),
            Error(foldline_core::Error),
        }
        match serde_json::from_slice::<Envelope<Resp>>(out) {
            Ok(Envelope::Ok(v)) => Ok(v),
            Ok(Envelope::Error(e)) => Err(HostError::Core(e)),
            Err(e) => Err(HostError::MalformedOutput(format!(
                "{e}: {}",
                String::from_utf8_lossy(&out[..out.len().min(200)])
            ))),
        }
    }

    /// `plan`.
    ///
    /// # Errors
    /// As [`Foldline::call`].
    pub fn plan(&self, r: &foldline_core::PlanRequest) -> Result<foldline_core::PlanOutcome> {
        self.call("plan", r)
    }

    /// `step`: the compaction loop's next effect.
    ///
    /// # Errors
    /// As [`Foldline::call`].
    pub fn step(&self, r: &foldline_core::StepRequest) -> Result<foldline_core::Step> {
        self.call("step", r)
    }

    /// `validate`.
    ///
    /// # Errors
    /// As [`Foldline::call`].
    pub fn validate(
        &self,
        r: &foldline_core::ValidateRequest,
    ) -> Result<foldline_core::ValidateResponse> {
        self.call("validate", r)
    }

    /// `select`.
    ///
    /// # Errors
    /// As [`Foldline::call`].
    pub fn select(&self, r: &foldline_core::SelectRequest) -> Result<foldline_core::Selection> {
        self.call("select", r)
    }

    /// `timeline`.
    ///
    /// # Errors
    /// As [`Foldline::call`].
    pub fn timeline(&self, r: &foldline_core::TimelineRequest) -> Result<foldline_core::Timeline> {
        self.call("timeline", r)
    }

    fn classify(&self, e: wasmtime::Error) -> HostError {
        if e.downcast_ref::<MemoryBreach>().is_some() {
            return HostError::MemoryLimit(self.limits.memory_bytes);
        }
        match e.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel | Trap::Interrupt) => match self.limits.bound {
                Bound::Fuel(fuel) => HostError::FuelExhausted(fuel),
                Bound::Time(limit) => HostError::TimeLimit(limit),
            },
            _ => HostError::Trap(e.to_string()),
        }
    }
}

/// A typed request as the JSON bytes a call sends.
pub(crate) fn encode<Req: Serialize>(request: &Req) -> Result<Vec<u8>> {
    serde_json::to_vec(request).map_err(|e| HostError::Input(e.to_string()))
}
