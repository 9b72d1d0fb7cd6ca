//! The workloads, each written once against [`BenchRuntime`].
//!
//! A workload builds its tasks on a runtime the child process already built,
//! lets them run through a warm-up, measures a window (see
//! [`crate::harness::measure`]), hands its [`Outcome`] to `emit` *before*
//! tearing down, and then stops and joins every task. Emitting first means a
//! runtime that hangs or crashes at shutdown still gets its measurement
//! recorded; the child's teardown watchdog reports the hang separately.
//!
//! Each module's documentation defines its workload: what a task does, what
//! one operation is, and what is measured.

use crate::runtimes::BenchRuntime;
use crate::spec::{ChildSpec, Outcome, Status, Workload};
use std::time::Duration;

pub mod churn;
pub mod cycle;
pub mod echo;
pub mod http;
pub mod idle;
pub mod locality;
pub mod memcached;
pub mod serve;
pub mod server_cpu;
pub mod spawn;
pub mod transfer;
pub mod wake;
pub mod yielding;

/// Where a workload hands its result, before teardown.
pub type Emit<'a> = &'a mut dyn FnMut(Outcome);

/// Runs `spec.workload` on `rt`.
pub fn run<R: BenchRuntime>(rt: &R, spec: &ChildSpec, emit: Emit<'_>) {
    match spec.workload {
        Workload::Cycle => cycle::run(rt, spec, emit),
        Workload::Yield => yielding::run(rt, spec, emit),
        Workload::Churn => churn::run(rt, spec, emit),
        Workload::Locality => locality::run(rt, spec, emit),
        Workload::Transfer => transfer::run(rt, spec, false, emit),
        Workload::TransferPark => transfer::run(rt, spec, true, emit),
        Workload::Spawn => spawn::run(rt, spec, emit),
        Workload::Wake => wake::run(rt, spec, emit),
        Workload::Idle => idle::run(rt, spec, emit),
        Workload::Echo => echo::run(rt, spec, emit),
        Workload::Memcached => memcached::run(rt, spec, emit),
        Workload::Http => http::run(rt, spec, emit),
        Workload::HttpAxum => http::run_axum(rt, spec, emit),
        Workload::Hang => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
    }
}

/// The outcome of a measurement that could not run.
pub(crate) fn crashed(detail: String) -> Outcome {
    Outcome {
        status: Status::Crashed,
        detail: Some(detail),
        ..Outcome::default()
    }
}

/// Joins every task of a workload on the driver thread.
pub(crate) fn join_all<R: BenchRuntime, F: std::future::Future>(rt: &R, joins: Vec<F>) {
    rt.block_on(async move {
        for j in joins {
            j.await;
        }
    });
}

impl ChildSpec {
    /// The warm-up before a measurement window.
    pub fn warmup(&self) -> Duration {
        Duration::from_millis(self.warmup_ms)
    }
    /// The measurement window.
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }
    /// The starvation threshold.
    pub fn starve_threshold(&self) -> Duration {
        Duration::from_millis(self.starve_threshold_ms)
    }
}
