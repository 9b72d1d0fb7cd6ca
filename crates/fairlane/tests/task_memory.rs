//! What a parked task costs in memory, counted by a counting allocator
//! (this test binary's global allocator): many boxed futures
//! (`Pin<Box<dyn Future + Send>>`) spawned from the `block_on` future,
//! each parked on a semaphore that is never posted. The same shape runs on
//! tokio's current-thread runtime for comparison.
//!
//! Run `cargo test -p fairlane --release --test task_memory -- --nocapture`
//! to see the figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Counts the bytes allocated and not yet freed, and remembers the size of
/// the last allocation aligned to 128 bytes (a task cell).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static LAST_CELL: AtomicUsize = AtomicUsize::new(0);

// Relaxed: lone counters, read after the tasks that moved them parked.
fn grown(layout: Layout) {
    LIVE.fetch_add(layout.size(), Ordering::Relaxed);
    if layout.align() == 128 {
        LAST_CELL.store(layout.size(), Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to the system allocator with the
// caller's arguments; the counting touches no memory of the blocks.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's promises about `layout` are System's.
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            grown(layout);
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let block = unsafe { System.alloc_zeroed(layout) };
        if !block.is_null() {
            grown(layout);
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: the caller gives back a block System allocated with
        // `layout`.
        unsafe { System.dealloc(block, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`, and `new_size` is the caller's promise.
        let moved = unsafe { System.realloc(block, layout, new_size) };
        if !moved.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Parked tasks per measurement.
const TASKS: usize = 10_000;

/// One measurement at a time: the counters are the whole process's.
static SERIAL: Mutex<()> = Mutex::new(());

type Boxed = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A task of the measured shape: counts itself as started, then waits on
/// `gate` for ever.
fn parked(gate: &Arc<tokio::sync::Semaphore>, started: &Arc<AtomicUsize>) -> Boxed {
    let (gate, started) = (gate.clone(), started.clone());
    Box::pin(async move {
        started.fetch_add(1, Ordering::Relaxed);
        let _ = gate.acquire().await;
    })
}

/// What the measurement found: heap bytes per parked task (everything the
/// runtime and the task's future hold), the boxed future's own share, and
/// the size of the last task cell allocated.
#[derive(Debug)]
struct Figures {
    per_task: usize,
    boxed: usize,
    cell: usize,
}

/// The boxed future's allocation, as the tasks' futures are.
fn boxed_size() -> usize {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let before = LIVE.load(Ordering::Relaxed);
    let future = parked(&gate, &started);
    let size = LIVE.load(Ordering::Relaxed) - before;
    drop(future);
    size
}

/// Spawns [`TASKS`] parked tasks with `spawn` from inside the runtime's
/// `block_on` (`yield_once` lets them run) and counts the bytes they hold.
async fn measure<J>(spawn: impl Fn(Boxed) -> J, yield_once: impl Fn() -> Boxed) -> Figures {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(TASKS);
    let boxed = boxed_size();
    let before = LIVE.load(Ordering::Relaxed);
    for _ in 0..TASKS {
        handles.push(spawn(parked(&gate, &started)));
    }
    while started.load(Ordering::Relaxed) < TASKS {
        yield_once().await;
    }
    // The last task to start may still be inside its first poll.
    for _ in 0..10 {
        yield_once().await;
    }
    let per_task = (LIVE.load(Ordering::Relaxed) - before) / TASKS;
    let cell = LAST_CELL.load(Ordering::Relaxed);
    gate.close();
    drop(handles);
    Figures {
        per_task,
        boxed,
        cell,
    }
}

fn fairlane_figures(processors: usize) -> Figures {
    let rt = fairlane::Runtime::builder()
        .processors(processors)
        .build()
        .unwrap();
    rt.block_on(measure(fairlane::spawn, || {
        Box::pin(fairlane::task::yield_now())
    }))
}

fn tokio_figures() -> Figures {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(measure(tokio::spawn, || Box::pin(tokio::task::yield_now())))
}

/// A parked boxed future costs fairlane no more memory than it costs
/// tokio, and its task cell is one pair of cache lines.
#[test]
fn a_parked_boxed_task_costs_no_more_than_on_tokio() {
    let _serial = SERIAL.lock().unwrap();
    let tokio = tokio_figures();
    let one = fairlane_figures(1);
    let two = fairlane_figures(2);
    for (runtime, f) in [
        ("tokio, current thread", &tokio),
        ("fairlane, 1 processor", &one),
        ("fairlane, 2 processors", &two),
    ] {
        println!(
            "{runtime}: {} bytes per parked task ({} of them the boxed future), cell {} bytes",
            f.per_task, f.boxed, f.cell
        );
    }
    assert_eq!(
        one.cell, 128,
        "a boxed future's task cell outgrew 128 bytes"
    );
    assert!(
        one.per_task <= tokio.per_task && two.per_task <= tokio.per_task,
        "a parked task costs fairlane more than tokio: {one:?} {two:?} > {tokio:?}"
    );
}
