//! What the suite asks a child process to measure, and what the child answers.
//!
//! Both travel as JSON: the spec as the argument of the hidden `__child`
//! subcommand, the outcome as one line on the child's stdout prefixed with
//! [`RESULT_MARKER`], so that nothing else a runtime prints can be mistaken
//! for it.

use serde::{Deserialize, Serialize};

/// Prefix of the one stdout line that carries a child's [`Outcome`].
pub const RESULT_MARKER: &str = "FAIRLANE_BENCH_RESULT ";

/// A workload of the suite (the scheduler workloads, echo, and the micro
/// measurements).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Rings of 5 tasks passing one token: one park and one unpark per operation.
    Cycle,
    /// Tasks looping on `yield_now`.
    Yield,
    /// Tasks posting and waiting on random counting semaphores, wakes from anywhere.
    Churn,
    /// Tasks dirtying their own data, then displacing each other from random seats.
    Locality,
    /// Fairness: a leader busy-waits until every other (yielding) task acknowledged.
    Transfer,
    /// Transfer where the others park and the leader wakes them.
    TransferPark,
    /// ns per spawn-and-join of an empty task, and bytes per parked task.
    Spawn,
    /// Latency of waking a task on an idle runtime from an outside thread.
    Wake,
    /// CPU time burnt per second by a runtime whose 10,000 tasks all wait.
    Idle,
    /// A TCP echo server driven by 100 loopback connections: ns/req, req/s, p99.
    Echo,
    /// A memcached server driven by 64 loopback connections, get/set 9:1:
    /// ns/op, ops/s, p99, server CPU per operation.
    Memcached,
    /// An HTTP/1.1 server (hyper) driven by 32 keep-alive loopback
    /// connections, `GET /` of a small body: ns/req, req/s, p99, server CPU
    /// per request.
    Http,
    /// The http workload's clients against an axum application served by
    /// the runtime's `serve` (`fairlane::axum::serve`, `axum::serve`).
    HttpAxum,
    /// Test hook: a child that never answers (checks the deadline kill).
    #[value(hide = true)]
    Hang,
}

impl Workload {
    /// Every workload of the suite, in table order.
    pub const ALL: [Workload; 13] = [
        Workload::Cycle,
        Workload::Yield,
        Workload::Churn,
        Workload::Locality,
        Workload::Transfer,
        Workload::TransferPark,
        Workload::Spawn,
        Workload::Wake,
        Workload::Idle,
        Workload::Echo,
        Workload::Memcached,
        Workload::Http,
        Workload::HttpAxum,
    ];

    /// The name used on the command line, in tables and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Cycle => "cycle",
            Workload::Yield => "yield",
            Workload::Churn => "churn",
            Workload::Locality => "locality",
            Workload::Transfer => "transfer",
            Workload::TransferPark => "transfer-park",
            Workload::Spawn => "spawn",
            Workload::Wake => "wake",
            Workload::Idle => "idle",
            Workload::Echo => "echo",
            Workload::Memcached => "memcached",
            Workload::Http => "http",
            Workload::HttpAxum => "http-axum",
            Workload::Hang => "hang",
        }
    }

    /// Whether the workload is run at both load levels (tasks per processor).
    pub fn uses_load(self) -> bool {
        matches!(
            self,
            Workload::Cycle
                | Workload::Yield
                | Workload::Churn
                | Workload::Locality
                | Workload::Transfer
                | Workload::TransferPark
        )
    }

    /// Fewest processors the workload makes sense on.
    pub fn min_processors(self) -> usize {
        match self {
            Workload::Transfer | Workload::TransferPark => 2,
            _ => 1,
        }
    }

    /// Whether the workload can starve (and so has a watchdog threshold).
    pub fn can_starve(self) -> bool {
        matches!(self, Workload::Transfer | Workload::TransferPark)
    }

    /// Whether the workload does network I/O (only runtimes with a network
    /// API run it).
    pub fn is_io(self) -> bool {
        matches!(
            self,
            Workload::Echo | Workload::Memcached | Workload::Http | Workload::HttpAxum
        )
    }

    /// Whether the workload is one of the HTTP servers (the same clients
    /// and runtimes).
    pub fn is_http(self) -> bool {
        matches!(self, Workload::Http | Workload::HttpAxum)
    }
}

/// A runtime under test.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeKind {
    /// fairlane (this project), on its default I/O backend (io_uring here).
    Fairlane,
    /// fairlane with the fallback I/O backend forced (only runs I/O
    /// workloads: the scheduler is the same).
    FairlaneFallback,
    /// tokio's multi-thread runtime with `worker_threads = processors`.
    Tokio,
    /// monoio on io_uring, thread-per-core: `processors` threads with a
    /// runtime each (only runs I/O workloads: it has no shared worker pool).
    Monoio,
    /// One `async_executor::Executor` run on `processors` threads.
    AsyncExecutor,
    /// Not a runtime: real memcached (`memcached -t processors`), only on
    /// the memcached workload, where it is installed.
    Memcached,
    /// Not a runtime: two std threads parking and unparking each other, the
    /// physical floor of the wake latency (only runs the wake workload).
    #[value(hide = true)]
    ThreadFloor,
}

impl RuntimeKind {
    /// The runtimes compared by default, fairlane first.
    pub const ALL: [RuntimeKind; 6] = [
        RuntimeKind::Fairlane,
        RuntimeKind::FairlaneFallback,
        RuntimeKind::Tokio,
        RuntimeKind::Monoio,
        RuntimeKind::AsyncExecutor,
        RuntimeKind::Memcached,
    ];

    /// The name used on the command line, in tables and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Fairlane => "fairlane",
            RuntimeKind::FairlaneFallback => "fairlane-fallback",
            RuntimeKind::Tokio => "tokio",
            RuntimeKind::Monoio => "monoio",
            RuntimeKind::AsyncExecutor => "async-executor",
            RuntimeKind::Memcached => "memcached",
            RuntimeKind::ThreadFloor => "thread-floor",
        }
    }
}

/// Where a workload's tasks are spawned from (`--spawn`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum SpawnFrom {
    /// Every task from the future given to `block_on` (the driver thread,
    /// which is none of the runtime's workers), as a program's `main` does.
    #[default]
    Main,
    /// One spawner task per processor, each spawning its share (whole
    /// rings, for cycle) from inside the runtime.
    Spread,
}

/// A yes/no option value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum YesNo {
    Yes,
    No,
}

impl YesNo {
    pub fn yes(self) -> bool {
        self == YesNo::Yes
    }
}

/// How the shaped workloads (cycle, churn, yield) build their tasks and
/// synchronisation objects: the same on every runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Shape {
    /// Where the tasks are spawned from.
    pub spawn: SpawnFrom,
    /// Semaphores (and their queued wakers) on cache lines of their own
    /// (`sync::Padded`), or plain consecutive objects (`sync::Plain`).
    pub padded: bool,
    /// Task futures boxed as `Pin<Box<dyn Future + Send>>` before spawning.
    pub boxed: bool,
}

impl Default for Shape {
    fn default() -> Self {
        Shape::SUITE
    }
}

impl Shape {
    /// The suite's own shape: spawned from `main`, padded, unboxed.
    pub const SUITE: Shape = Shape {
        spawn: SpawnFrom::Main,
        padded: true,
        boxed: false,
    };

    /// The shape ordinary programs have: spawned from `main`, plain
    /// (unpadded) semaphores, boxed futures.
    pub const USER: Shape = Shape {
        spawn: SpawnFrom::Main,
        padded: false,
        boxed: true,
    };

    /// Whether `w` is built as a shape says (the others ignore it).
    pub fn applies_to(w: Workload) -> bool {
        matches!(w, Workload::Cycle | Workload::Churn | Workload::Yield)
    }

    /// What differs from [`Shape::SUITE`], e.g. `plain,boxed`; empty for it.
    pub fn label(&self) -> String {
        let mut parts = Vec::new();
        if self.spawn == SpawnFrom::Spread {
            parts.push("spread");
        }
        if !self.padded {
            parts.push("plain");
        }
        if self.boxed {
            parts.push("boxed");
        }
        parts.join(",")
    }
}

/// One measurement, as handed to a child process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildSpec {
    pub workload: Workload,
    pub runtime: RuntimeKind,
    pub processors: usize,
    /// Total tasks (not per processor).
    pub tasks: usize,
    /// Time the workload runs before the measurement window opens.
    pub warmup_ms: u64,
    /// Length of the measurement window.
    pub duration_ms: u64,
    /// A task that waits longer than this for its turn means "starved".
    pub starve_threshold_ms: u64,
    /// Seed of the tasks' random choices.
    pub seed: u64,
    /// fairlane's scheduler settings (the peers ignore them).
    #[serde(default)]
    pub fairlane: FairlaneKnobs,
    /// How the shaped workloads build their tasks.
    #[serde(default)]
    pub shape: Shape,
}

/// fairlane builder settings to tune with; `None` keeps fairlane's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairlaneKnobs {
    pub lanes_per_processor: Option<usize>,
    pub help_period: Option<u32>,
    pub help_factor_log2: Option<u32>,
    pub spin_rounds: Option<u32>,
    pub grow_after: Option<u64>,
}

impl FairlaneKnobs {
    /// "defaults", or the settings that differ from them.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = self.lanes_per_processor {
            parts.push(format!("lanes_per_processor={l}"));
        }
        if let Some(h) = self.help_period {
            parts.push(format!("help_period={h}"));
        }
        if let Some(f) = self.help_factor_log2 {
            parts.push(format!("help_factor_log2={f}"));
        }
        if let Some(r) = self.spin_rounds {
            parts.push(format!("spin_rounds={r}"));
        }
        if let Some(g) = self.grow_after {
            parts.push(format!("grow_after={g}"));
        }
        if parts.is_empty() {
            "defaults".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// How a measurement ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Measured.
    #[default]
    Ok,
    /// Some task waited longer than the threshold (transfer workloads).
    Starved,
    /// The child missed its deadline and was killed.
    Timeout,
    /// The child died (panic, signal) or answered nonsense.
    Crashed,
}

impl Status {
    /// The word shown in tables.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Starved => "starved",
            Status::Timeout => "timeout",
            Status::Crashed => "crashed",
        }
    }
}

/// One number a measurement produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// What was measured, e.g. `ns/op`, `wake p99`.
    pub name: String,
    pub value: f64,
    /// Unit of `value`, e.g. `ns`, `us`, `%`, `B`.
    pub unit: String,
}

impl Metric {
    pub fn new(name: &str, value: f64, unit: &str) -> Self {
        Metric {
            name: name.to_string(),
            value,
            unit: unit.to_string(),
        }
    }
}

/// What a child reports.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Outcome {
    pub status: Status,
    pub metrics: Vec<Metric>,
    /// Human-readable detail (why it starved, what crashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Wake latency distribution: (percentile 0..=100, ns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_percentiles: Vec<(f64, u64)>,
}
