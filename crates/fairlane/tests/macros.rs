//! `#[fairlane::main]`'s and `#[fairlane::test]`'s options reach the
//! runtime they build.

use fairlane::io::IoBackend;

fn processors() -> usize {
    fairlane::Handle::current().cluster().processors().len()
}

#[fairlane::test]
async fn a_test_runs_on_one_processor_by_default() {
    assert_eq!(processors(), 1);
    assert_eq!(fairlane::spawn(async { 2 + 2 }).await.unwrap(), 4);
}

#[fairlane::test(processors = 3)]
async fn processors_are_as_asked() {
    assert_eq!(processors(), 3);
}

#[fairlane::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_spellings_mean_the_same() {
    assert_eq!(processors(), 2);
}

#[fairlane::test(flavor = "current_thread")]
async fn current_thread_is_one_processor() {
    assert_eq!(processors(), 1);
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
