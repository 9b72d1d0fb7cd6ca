//! Backend selection through `FAIRLANE_IO_BACKEND`. One test in its own
//! binary: it changes the process environment.

use std::io;

use fairlane::io::IoBackend;
use fairlane::Runtime;

#[test]
fn environment_variable_selects_the_backend_and_the_builder_wins() {
    std::env::set_var("FAIRLANE_IO_BACKEND", "fallback");
    let rt = Runtime::builder().processors(1).build().unwrap();
    assert_eq!(rt.io_backend(), IoBackend::Fallback);
    assert_eq!(rt.handle().io_backend(), IoBackend::Fallback);
    drop(rt);

    // The builder's choice overrides the environment.
    let rt = Runtime::builder()
        .processors(1)
        .io_backend(IoBackend::IoUring)
        .build()
        .unwrap();
    assert_eq!(rt.io_backend(), IoBackend::IoUring);
    drop(rt);

    std::env::set_var("FAIRLANE_IO_BACKEND", "io_uring");
    let rt = Runtime::builder().processors(1).build().unwrap();
    assert_eq!(rt.io_backend(), IoBackend::IoUring);
    drop(rt);

    // A value that names no backend is a clear error, not a silent default.
    std::env::set_var("FAIRLANE_IO_BACKEND", "kqueue");
    let err = Runtime::builder().processors(1).build().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("FAIRLANE_IO_BACKEND"), "{err}");

    // Unset: io_uring where the kernel allows it, as it did above.
    std::env::remove_var("FAIRLANE_IO_BACKEND");
    let rt = Runtime::builder().processors(1).build().unwrap();
    assert_eq!(rt.io_backend(), IoBackend::IoUring);
}
