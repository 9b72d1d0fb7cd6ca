//! A runtime's name: `Builder::name`, `Handle::name`, and the macros'
//! `name = "…"` option.

use fairlane::runtime::{Builder, Handle};

#[test]
fn a_runtime_has_no_name_unless_given_one() {
    for mut builder in [Builder::new_multi_thread(), Builder::new_current_thread()] {
        let rt = builder.worker_threads(1).build().unwrap();
        assert_eq!(rt.handle().name(), None);
    }
}

#[test]
fn each_runtime_reports_its_own_name_on_both_flavors() {
    let multi = Builder::new_multi_thread()
        .worker_threads(1)
        .name("first")
        .build()
        .unwrap();
    let current = Builder::new_current_thread()
        .name("second")
        .build()
        .unwrap();
    assert_eq!(multi.handle().name(), Some("first"));
    assert_eq!(current.handle().name(), Some("second"));
    // From inside a task, through the current handle.
    let inside = multi
        .block_on(multi.spawn(async { Handle::current().name().map(String::from) }))
        .unwrap();
    assert_eq!(inside.as_deref(), Some("first"));
    let inside = current.block_on(async { Handle::current().name().map(String::from) });
    assert_eq!(inside.as_deref(), Some("second"));
}

#[test]
fn an_empty_name_panics_at_the_caller() {
    for name in ["", " ", "\t\n"] {
        let caught = std::panic::catch_unwind(|| {
            let _ = Builder::new_multi_thread().name(name);
        });
        let message = caught.expect_err("an empty name was accepted");
        let message = message
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| message.downcast_ref::<String>().cloned())
            .unwrap();
        assert!(message.contains("name must not be empty"), "{message}");
    }
}

#[fairlane::test(name = "from the macro")]
async fn the_macro_names_the_runtime() {
    assert_eq!(Handle::current().name(), Some("from the macro"));
}
