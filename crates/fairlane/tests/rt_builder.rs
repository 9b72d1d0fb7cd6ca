//! tokio's builder settings on fairlane's builder: the flavors, the
//! threads the runtime starts (names, stack size, start and stop hooks,
//! on processors, blocking-pool threads and `block_in_place`
//! replacements), and the settings accepted for tokio's sake.

mod common;

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{wait_until, with_deadline, DEADLINE};
use fairlane::runtime::{Builder, Handle, RuntimeFlavor};

/// The stack size of the calling thread, as the C library reports it.
fn own_stack_size() -> usize {
    // SAFETY: `attr` is initialised by `pthread_getattr_np` before it is
    // read, and destroyed once; the calling thread is alive throughout.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
        let mut size = 0;
        assert_eq!(libc::pthread_attr_getstacksize(&attr, &mut size), 0);
        libc::pthread_attr_destroy(&mut attr);
        size
    }
}

#[test]
fn the_flavors_build_as_tokio_spells_them() {
    let multi = Builder::new_multi_thread()
        .worker_threads(3)
        .enable_all()
        .enable_io()
        .enable_time()
        .event_interval(61)
        .global_queue_interval(31)
        .build()
        .unwrap();
    assert_eq!(multi.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
    assert_eq!(multi.metrics().processors.len(), 3);
    let current = Builder::new_current_thread().enable_all().build().unwrap();
    assert_eq!(
        current.handle().runtime_flavor(),
        RuntimeFlavor::CurrentThread
    );
    let inside = current.block_on(async { Handle::current().runtime_flavor() });
    assert_eq!(inside, RuntimeFlavor::CurrentThread);
}

#[test]
fn out_of_range_settings_are_errors_naming_them() {
    let zero_workers = Builder::new_multi_thread()
        .worker_threads(0)
        .build()
        .unwrap_err();
    assert_eq!(zero_workers.kind(), io::ErrorKind::InvalidInput);
    assert!(
        zero_workers.to_string().contains("processors"),
        "{zero_workers}"
    );
    let zero_interval = Builder::new_multi_thread()
        .global_queue_interval(0)
        .build()
        .unwrap_err();
    assert_eq!(zero_interval.kind(), io::ErrorKind::InvalidInput);
    assert!(
        zero_interval.to_string().contains("global_queue_interval"),
        "{zero_interval}"
    );
}

#[test]
fn thread_name_fn_names_processors_and_blocking_threads() {
    let next = Arc::new(AtomicUsize::new(0));
    let counter = next.clone();
    let rt = Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name_fn(move || format!("named-{}", counter.fetch_add(1, Ordering::Relaxed)))
        .build()
        .unwrap();
    let name = || std::thread::current().name().map(String::from);
    let processor = rt.block_on(rt.spawn(async move { name() })).unwrap();
    let blocking = rt.block_on(rt.spawn_blocking(name)).unwrap();
    assert_eq!(processor.as_deref(), Some("named-0"));
    assert_eq!(blocking.as_deref(), Some("named-1"));
    // The builder still prints.
    let debug = format!(
        "{:?}",
        Builder::new_current_thread().thread_name_fn(String::new)
    );
    assert!(debug.contains("thread_name_fn"), "{debug}");
}

#[test]
fn thread_stack_size_applies_to_every_thread_the_runtime_starts() {
    const SIZE: usize = 16 << 20;
    let rt = Builder::new_multi_thread()
        .worker_threads(1)
        .thread_stack_size(SIZE)
        .build()
        .unwrap();
    let processor = rt.block_on(rt.spawn(async { own_stack_size() })).unwrap();
    let blocking = rt.block_on(rt.spawn_blocking(own_stack_size)).unwrap();
    let replacement = rt
        .block_on(rt.spawn(async {
            fairlane::task::block_in_place(|| {
                // Run on the replacement: a task queued behind this one.
                Handle::current()
                    .block_on(fairlane::spawn(async { own_stack_size() }))
                    .unwrap()
            })
        }))
        .unwrap();
    // The default is 2 MiB; the C library may keep a guard page out of it.
    for (what, size) in [
        ("processor", processor),
        ("blocking", blocking),
        ("replacement", replacement),
    ] {
        assert!(size > SIZE / 2, "{what} thread has a {size}-byte stack");
    }
}

/// Start and stop hooks that count, and note whether the runtime was
/// current in them.
#[derive(Default)]
struct Hooks {
    started: AtomicUsize,
    stopped: AtomicUsize,
    outside_runtime: Mutex<Vec<&'static str>>,
}

impl Hooks {
    fn install(self: &Arc<Self>, builder: &mut Builder) {
        let (on_start, on_stop) = (self.clone(), self.clone());
        builder
            .on_thread_start(move || {
                if Handle::try_current().is_err() {
                    on_start.outside_runtime.lock().unwrap().push("start");
                }
                on_start.started.fetch_add(1, Ordering::SeqCst);
            })
            .on_thread_stop(move || {
                if Handle::try_current().is_err() {
                    on_stop.outside_runtime.lock().unwrap().push("stop");
                }
                on_stop.stopped.fetch_add(1, Ordering::SeqCst);
            });
    }
}

#[test]
fn thread_hooks_run_on_processors_blocking_threads_and_replacements() {
    with_deadline("thread_hooks", DEADLINE, String::new, || {
        let hooks = Arc::new(Hooks::default());
        let mut builder = Builder::new_multi_thread();
        builder.worker_threads(2);
        hooks.install(&mut builder);
        let rt = builder.build().unwrap();
        wait_until("both processors' start hooks", || {
            hooks.started.load(Ordering::SeqCst) == 2
        });
        rt.block_on(rt.spawn_blocking(|| ())).unwrap();
        assert_eq!(
            hooks.started.load(Ordering::SeqCst),
            3,
            "the blocking thread"
        );
        rt.block_on(rt.spawn(async { fairlane::task::block_in_place(|| ()) }))
            .unwrap();
        // The replacement thread has been joined by then.
        assert_eq!(hooks.started.load(Ordering::SeqCst), 4, "the replacement");
        assert_eq!(hooks.stopped.load(Ordering::SeqCst), 1, "the replacement");
        drop(rt);
        assert_eq!(
            hooks.stopped.load(Ordering::SeqCst),
            4,
            "every thread stopped"
        );
        assert!(hooks.outside_runtime.lock().unwrap().is_empty());
    });
}

#[test]
fn a_current_thread_runtime_starts_only_blocking_threads() {
    with_deadline("current_thread_hooks", DEADLINE, String::new, || {
        let hooks = Arc::new(Hooks::default());
        let mut builder = Builder::new_current_thread();
        hooks.install(&mut builder);
        let rt = builder.build().unwrap();
        rt.block_on(async { fairlane::spawn(async {}).await.unwrap() });
        assert_eq!(hooks.started.load(Ordering::SeqCst), 0);
        rt.block_on(rt.spawn_blocking(|| ())).unwrap();
        assert_eq!(hooks.started.load(Ordering::SeqCst), 1);
        rt.shutdown_timeout(DEADLINE);
        assert_eq!(hooks.stopped.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_panicking_hook_leaves_the_threads_running() {
    with_deadline("panicking_hook", DEADLINE, String::new, || {
        let rt = Builder::new_multi_thread()
            .worker_threads(1)
            .on_thread_start(|| panic!("hook"))
            .on_thread_stop(|| panic!("hook"))
            .build()
            .unwrap();
        assert_eq!(rt.block_on(rt.spawn(async { 1 })).unwrap(), 1);
        assert_eq!(rt.block_on(rt.spawn_blocking(|| 2)).unwrap(), 2);
    });
}

#[test]
fn shutdown_background_and_an_unbounded_timeout_return() {
    with_deadline("shutdown", DEADLINE, String::new, || {
        let rt = Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let (started, wait) = std::sync::mpsc::channel();
        rt.spawn_blocking(move || {
            started.send(()).unwrap();
            std::thread::sleep(Duration::from_secs(3600));
        });
        let pending = rt.spawn(std::future::pending::<()>());
        wait.recv().unwrap();
        rt.shutdown_background();
        assert!(futures_lite::future::block_on(pending)
            .unwrap_err()
            .is_cancelled());
        let rt = Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        rt.shutdown_timeout(Duration::MAX);
    });
}

#[test]
fn every_handle_of_a_runtime_reports_its_id_and_runtimes_differ() {
    let rt = Builder::new_multi_thread()
        .worker_threads(1)
        .cluster("batch", 1)
        .build()
        .unwrap();
    let other = Builder::new_current_thread().build().unwrap();
    let id = rt.handle().id();
    assert_ne!(id, other.handle().id());
    let batch = rt.cluster("batch").unwrap();
    assert_eq!(batch.handle().id(), id);
    let inside = rt
        .block_on(batch.spawn(async { Handle::current().id() }))
        .unwrap();
    assert_eq!(inside, id);
}
