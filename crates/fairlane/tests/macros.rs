//! `#[fairlane::main]`'s and `#[fairlane::test]`'s options reach the
//! runtime they build.

use fairlane::io::IoBackend;
use fairlane::runtime::{Handle, RuntimeFlavor};

fn processors() -> usize {
    fairlane::Handle::current().cluster().processors().len()
}

fn flavor() -> RuntimeFlavor {
    Handle::current().runtime_flavor()
}

#[fairlane::test]
async fn a_test_runs_on_a_current_thread_runtime_by_default() {
    assert_eq!(flavor(), RuntimeFlavor::CurrentThread);
    assert_eq!(processors(), 1);
    // The test's own thread runs the tasks.
    let here = std::thread::current().id();
    let there = fairlane::spawn(async { std::thread::current().id() });
    assert_eq!(there.await.unwrap(), here);
}

#[fairlane::test(processors = 3)]
async fn processors_are_as_asked_on_a_multi_thread_runtime() {
    assert_eq!(flavor(), RuntimeFlavor::MultiThread);
    assert_eq!(processors(), 3);
}

#[fairlane::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_spellings_mean_the_same() {
    assert_eq!(flavor(), RuntimeFlavor::MultiThread);
    assert_eq!(processors(), 2);
}

#[fairlane::test(flavor = "multi_thread")]
async fn multi_thread_alone_has_one_processor_per_core() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(processors(), cores);
}

#[fairlane::test(flavor = "current_thread")]
async fn current_thread_is_one_processor() {
    assert_eq!(flavor(), RuntimeFlavor::CurrentThread);
    assert_eq!(processors(), 1);
}

#[fairlane::test(flavor = "current_thread", start_paused = true)]
async fn a_paused_current_thread_test() {
    let start = fairlane::time::Instant::now();
    fairlane::time::sleep(std::time::Duration::from_secs(60)).await;
    assert_eq!(start.elapsed(), std::time::Duration::from_secs(60));
}

/// `main` goes on any `async fn`, arguments and result included, and
/// defaults to the multi-thread flavor.
#[fairlane::main]
async fn main_of_another_name(x: u32) -> (u32, RuntimeFlavor) {
    (
        fairlane::spawn(async move { x * 2 }).await.unwrap(),
        flavor(),
    )
}

#[fairlane::main(flavor = "current_thread")]
async fn current_thread_main() -> (RuntimeFlavor, bool) {
    let here = std::thread::current().id();
    let same = fairlane::spawn(async move { std::thread::current().id() == here });
    (flavor(), same.await.unwrap())
}

#[test]
fn main_runs_any_async_fn_on_the_flavor_asked() {
    assert_eq!(main_of_another_name(21), (42, RuntimeFlavor::MultiThread));
    assert_eq!(current_thread_main(), (RuntimeFlavor::CurrentThread, true));
}

#[fairlane::test(io_backend = "fallback")]
async fn the_io_backend_is_as_asked() {
    assert_eq!(
        fairlane::Handle::current().io_backend(),
        IoBackend::Fallback
    );
}

#[fairlane::test]
async fn a_test_may_return_a_result() -> std::io::Result<()> {
    let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
    assert_ne!(listener.local_addr()?.port(), 0);
    Ok(())
}

#[fairlane::test]
#[should_panic(expected = "inside the body")]
async fn a_panic_in_the_body_fails_the_test() {
    panic!("inside the body");
}

mod renamed {
    // The `crate` option names the fairlane crate under another path.
    use fairlane as other_name;

    #[other_name::test(crate = "other_name")]
    async fn works_through_a_renamed_path() {
        assert_eq!(other_name::spawn(async { 1 }).await.unwrap(), 1);
    }
}

/// `flavor = "local"`: the body runs in a `LocalSet` on a current-thread
/// runtime, so `spawn_local` of a `!Send` future works in it.
#[fairlane::test(flavor = "local")]
async fn the_local_flavor_runs_the_body_in_a_local_set() {
    let shared = std::rc::Rc::new(std::cell::Cell::new(0));
    let inner = shared.clone();
    fairlane::task::spawn_local(async move {
        fairlane::task::yield_now().await;
        inner.set(inner.get() + 1);
    })
    .await
    .unwrap();
    assert_eq!(shared.get(), 1);
    assert_eq!(
        fairlane::runtime::Handle::current().runtime_flavor(),
        fairlane::runtime::RuntimeFlavor::CurrentThread
    );
}
