// The host of the doc examples (`include!`d by them, with
// `include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"))`): not
// a module of the crate, which is `no_std`; the examples have std. A
// processor runs on a thread of its own (`start`), the clock is a counter,
// and `park` sleeps a moment (the `Host` contract allows a `park` that
// returns early; the core checks its own state again).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle as Thread;

use fairlane_core::{Executor, Config, Host};

std::thread_local! {
    /// The host and processor the calling thread runs, if it is a
    /// processor thread that `start` made.
    static RUNS: Cell<Option<(u64, usize)>> = const { Cell::new(None) };
}

/// A host with a counter for a clock, one per cluster (`id`).
struct DocHost {
    id: u64,
    clock: AtomicU64,
}

// SAFETY: a thread claims to be processor `p` of this host's cluster only
// while it runs `run_processor(p)` or `run_stand_in(p)` of it
// (`as_processor` sets and clears `RUNS` around that call), and nothing
// else blocks in `park`.
unsafe impl Host for DocHost {
    fn now(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }
    fn current_processor(&self) -> Option<usize> {
        RUNS.with(Cell::get)
            .filter(|&(id, _)| id == self.id)
            .map(|(_, p)| p)
    }
    fn park(&self, _processor: usize) {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    fn unpark(&self, _processor: usize) {}
    fn relax(&self) {
        std::thread::yield_now();
    }
}

/// A cluster of `processors` processors on a host of its own, with one
/// spare slot for `add_processor`. Its processors run once `start`ed.
fn cluster(processors: usize) -> Arc<Executor<DocHost>> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut config = Config::new(processors);
    config.max_processors = processors + 1;
    let host = DocHost {
        id: NEXT.fetch_add(1, Ordering::Relaxed),
        clock: AtomicU64::new(0),
    };
    Executor::new(config, host).expect("a valid configuration")
}

/// Runs `f` on a new thread that is processor `p` of `cluster` meanwhile.
fn as_processor<R: Send + 'static>(
    cluster: &Arc<Executor<DocHost>>,
    p: usize,
    f: impl FnOnce(&Executor<DocHost>) -> R + Send + 'static,
) -> Thread<R> {
    let cluster = cluster.clone();
    std::thread::spawn(move || {
        RUNS.with(|r| r.set(Some((cluster.host().id, p))));
        let r = f(&cluster);
        RUNS.with(|r| r.set(None));
        r
    })
}

/// Runs processor `p` of `cluster` on a new thread, until the cluster is
/// shut down (or `p` removed).
fn start(cluster: &Arc<Executor<DocHost>>, p: usize) -> Thread<()> {
    as_processor(cluster, p, move |c| c.run_processor(p))
}

/// A stand-in for processor `p`, on a new thread, while its own thread
/// (the caller, in a poll) blocks.
fn stand_in(cluster: &Arc<Executor<DocHost>>, p: usize) -> Thread<()> {
    as_processor(cluster, p, move |c| c.run_stand_in(p))
}

/// Shuts `cluster` down, waits for its processor threads and ends the
/// tasks left.
fn stop(cluster: &Executor<DocHost>, threads: impl IntoIterator<Item = Thread<()>>) {
    cluster.shutdown();
    for t in threads {
        t.join().expect("a processor thread panicked");
    }
    cluster.cancel_all();
}

/// Polls `future` on the calling thread until it is ready.
fn block_on<F: core::future::Future>(future: F) -> F::Output {
    let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    let mut future = core::pin::pin!(future);
    loop {
        if let core::task::Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// Pending once (waking itself), ready when polled again: the task goes to
/// the back of its lane.
async fn yield_once() {
    let mut yielded = false;
    core::future::poll_fn(|cx| {
        if yielded {
            return core::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        core::task::Poll::Pending
    })
    .await
}
