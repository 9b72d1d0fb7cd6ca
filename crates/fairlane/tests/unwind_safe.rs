//! The task handles and the runtime's types are `UnwindSafe` and `RefUnwindSafe`, as
//! tokio's are, so that code holding them inside `catch_unwind` ports.

use std::panic::{RefUnwindSafe, UnwindSafe};

fn is_unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}

#[test]
fn handles_and_runtimes_are_unwind_safe() {
    is_unwind_safe::<fairlane::JoinHandle<()>>();
    is_unwind_safe::<fairlane::task::AbortHandle>();
    is_unwind_safe::<fairlane::Runtime>();
    is_unwind_safe::<fairlane::Handle>();
}

/// `?` on a join in an `io::Result` function, as with tokio.
#[test]
fn a_join_error_converts_to_an_io_error() {
    fn joined(rt: &fairlane::Runtime) -> std::io::Result<()> {
        let handle = rt.spawn(async { panic!("boom") });
        rt.block_on(handle)?;
        Ok(())
    }
    let rt = fairlane::Runtime::builder().processors(1).build().unwrap();
    let err = joined(&rt).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Other);
    assert_eq!(err.to_string(), "task panicked");
}

#[test]
fn net_types_are_unwind_safe() {
    is_unwind_safe::<fairlane::net::TcpListener>();
    is_unwind_safe::<fairlane::net::TcpSocket>();
    is_unwind_safe::<fairlane::net::TcpStream>();
    is_unwind_safe::<fairlane::net::UdpSocket>();
    is_unwind_safe::<fairlane::net::UnixDatagram>();
    is_unwind_safe::<fairlane::net::UnixListener>();
    is_unwind_safe::<fairlane::net::UnixStream>();
    is_unwind_safe::<fairlane::net::UnixSocket>();
    is_unwind_safe::<fairlane::net::unix::pipe::Sender>();
    is_unwind_safe::<fairlane::net::unix::pipe::Receiver>();
    is_unwind_safe::<fairlane::net::tcp::OwnedReadHalf>();
    is_unwind_safe::<fairlane::net::tcp::OwnedWriteHalf>();
    is_unwind_safe::<fairlane::net::unix::OwnedReadHalf>();
    is_unwind_safe::<fairlane::net::unix::OwnedWriteHalf>();
}
