//! Task names: a named task's name appears in its `JoinError` and its
//! handle's `Debug`.

use fairlane::Runtime;

use crate::common::clusters::build;

#[test]
fn a_named_tasks_join_error_names_it() {
    let rt = build(Runtime::builder().processors(1));
    let task = fairlane::task::Builder::new()
        .name("x")
        .spawn_on(async { panic!("boom") }, rt.handle())
        .expect("spawn");
    let err = rt.block_on(task).expect_err("it panicked");
    assert!(err.is_panic());
    let shown = err.to_string();
    assert!(shown.contains("\"x\""), "{shown}");
    assert!(shown.contains("boom"), "{shown}");

    let task = fairlane::task::Builder::new()
        .name("sleeper")
        .spawn_on(std::future::pending::<()>(), rt.handle())
        .expect("spawn");
    assert!(format!("{task:?}").contains("sleeper"), "{task:?}");
    task.abort();
    let err = rt.block_on(task).expect_err("aborted");
    assert!(err.is_cancelled());
    assert!(err.to_string().contains("\"sleeper\""), "{err}");

    // Unnamed: no name in the message.
    let err = rt
        .block_on(rt.spawn(async { panic!("plain") }))
        .expect_err("it panicked");
    assert_eq!(err.to_string(), r#"task panicked with message "plain""#);
}
