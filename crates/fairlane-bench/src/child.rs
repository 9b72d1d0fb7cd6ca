//! The measuring side: `fairlane-bench __child <spec-json>`.
//!
//! A child builds one runtime, runs one workload on it, prints one
//! [`RESULT_MARKER`] line and exits. It exits with `std::process::exit`, so
//! nothing (a runtime's `Drop`, a stuck thread) can keep it alive after it has
//! answered; teardown before that runs under a watchdog that reports a hang
//! on stderr and exits with [`TEARDOWN_HANG`].

use crate::runtimes::{
    AsyncExecutorRuntime, BenchRuntime, FairlaneRuntime, MonoioEchoServer, RealMemcached,
    TokioRuntime,
};
use crate::spec::{ChildSpec, Outcome, RuntimeKind, Status, Workload, RESULT_MARKER};
use crate::workloads;
use std::io::Write;
use std::time::Duration;

/// Exit code of a child whose runtime did not shut down in time after
/// answering.
pub const TEARDOWN_HANG: i32 = 3;
/// Exit code of a child that could not run its measurement.
pub const FAILED: i32 = 2;
/// How long teardown (stopping and joining tasks, dropping the runtime) may take.
pub const TEARDOWN_LIMIT: Duration = Duration::from_secs(3);

/// Runs the measurement described by `spec_json`; never returns.
pub fn main(spec_json: &str) -> ! {
    let spec: ChildSpec = match serde_json::from_str(spec_json) {
        Ok(spec) => spec,
        Err(e) => fail(format!("bad child spec: {e}")),
    };
    let mut emit = |outcome: Outcome| {
        let line = serde_json::to_string(&outcome).expect("outcomes serialize");
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{RESULT_MARKER}{line}");
        let _ = out.flush();
        let runtime = spec.runtime.name();
        std::thread::spawn(move || {
            std::thread::sleep(TEARDOWN_LIMIT);
            eprintln!("{runtime}: teardown did not finish within {TEARDOWN_LIMIT:?}");
            std::process::exit(TEARDOWN_HANG);
        });
    };
    match spec.runtime {
        RuntimeKind::Fairlane | RuntimeKind::FairlaneFallback => {
            with::<FairlaneRuntime>(&spec, &mut emit)
        }
        RuntimeKind::Tokio => with::<TokioRuntime>(&spec, &mut emit),
        RuntimeKind::AsyncExecutor => with::<AsyncExecutorRuntime>(&spec, &mut emit),
        RuntimeKind::Monoio => match spec.workload {
            Workload::Echo => workloads::echo::drive(&spec, &mut emit, |listener| {
                MonoioEchoServer::start(listener, spec.processors)
            }),
            other => fail(format!(
                "{} only runs the echo workload (thread-per-core: no shared worker pool to \
                 spawn onto), not {}",
                spec.runtime.name(),
                other.name()
            )),
        },
        RuntimeKind::Memcached => match spec.workload {
            Workload::Memcached => workloads::memcached::drive(&spec, &mut emit, |listener| {
                let server = RealMemcached::start(listener, spec.processors)?;
                let pid = server.pid();
                Ok((server, workloads::server_cpu::ServerProcess::Other(pid)))
            }),
            other => fail(format!(
                "{} only runs the memcached workload, not {}",
                spec.runtime.name(),
                other.name()
            )),
        },
        RuntimeKind::ThreadFloor => match spec.workload {
            Workload::Wake => workloads::wake::floor(&spec, &mut emit),
            other => fail(format!(
                "{} only measures the wake floor, not {}",
                spec.runtime.name(),
                other.name()
            )),
        },
    }
    std::process::exit(0)
}

fn with<R: BenchRuntime>(spec: &ChildSpec, emit: workloads::Emit<'_>) {
    let rt = match R::build(spec) {
        Ok(rt) => rt,
        Err(e) => fail(format!("building {} failed: {e}", spec.runtime.name())),
    };
    workloads::run(&rt, spec, emit);
    drop(rt);
}

/// Reports a measurement that could not run, and exits.
fn fail(detail: String) -> ! {
    let outcome = Outcome {
        status: Status::Crashed,
        detail: Some(detail),
        ..Outcome::default()
    };
    println!(
        "{RESULT_MARKER}{}",
        serde_json::to_string(&outcome).expect("outcomes serialize")
    );
    std::process::exit(FAILED)
}
