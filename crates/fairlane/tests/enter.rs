//! `Handle::enter`: a thread outside the runtime makes it current, spawns
//! and does I/O set-up there, and dropping the guard restores the previous
//! state.

mod common;

use std::thread;

#[test]
fn an_entered_thread_spawns_and_sees_its_handle() {
    let rt = common::runtime(2);
    let handle = rt.handle().clone();
    let task = thread::spawn(move || {
        assert!(fairlane::Handle::try_current().is_err());
        let guard = handle.enter();
        let current = fairlane::Handle::current();
        let task = fairlane::spawn(async {
            fairlane::yield_now().await;
            9
        });
        drop(current);
        drop(guard);
        assert!(
            fairlane::Handle::try_current().is_err(),
            "the guard restores no runtime"
        );
        task
    })
    .join()
    .unwrap();
    assert_eq!(rt.block_on(task).unwrap(), 9);
}

#[test]
fn guards_nest_and_restore_the_outer_runtime() {
    let a = common::runtime(1);
    let b = common::runtime(1);
    let outer = a.enter();
    let in_a = fairlane::spawn(async { fairlane::Handle::current().cluster().processors() });
    {
        let _inner = b.enter();
        let in_b = fairlane::spawn(async { fairlane::Handle::current().cluster().processors() });
        assert_eq!(b.block_on(in_b).unwrap(), b.handle().cluster().processors());
    }
    // Back to `a`.
    let again = fairlane::spawn(async { fairlane::Handle::current().cluster().processors() });
    assert_eq!(a.block_on(in_a).unwrap(), a.handle().cluster().processors());
    assert_eq!(
        a.block_on(again).unwrap(),
        a.handle().cluster().processors()
    );
    drop(outer);
}

#[test]
fn sockets_made_on_an_entered_thread_work() {
    let rt = common::runtime(1);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = rt.handle().clone();
    let stream = thread::spawn(move || {
        let _guard = handle.enter();
        let std_stream = std::net::TcpStream::connect(addr).unwrap();
        fairlane::net::TcpStream::from_std(std_stream).unwrap()
    })
    .join()
    .unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    rt.block_on(async {
        stream.write_all_owned(&b"entered"[..]).await.0.unwrap();
    });
    let mut buf = [0u8; 7];
    std::io::Read::read_exact(&mut peer, &mut buf).unwrap();
    assert_eq!(&buf, b"entered");
}

#[test]
fn dropping_the_runtime_while_entered_by_handle_is_no_misuse() {
    // An entered thread is not one of the runtime's own: dropping the
    // runtime there shuts it down normally (no panic).
    let rt = common::runtime(1);
    let handle = rt.handle().clone();
    let _guard = handle.enter();
    drop(rt);
}

fn small_runtime() -> fairlane::Runtime {
    fairlane::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

#[test]
fn guards_dropped_out_of_order_panic_and_leave_a_clean_thread() {
    let a = small_runtime();
    let b = small_runtime();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let first = a.enter();
        let second = b.enter();
        drop(first);
        drop(second);
    }));
    let payload = caught.expect_err("an out-of-order drop was accepted");
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap();
    assert!(message.contains("dropped out of order"), "{message}");
    // Nothing of either runtime stays current, and entering works again.
    assert!(fairlane::runtime::Handle::try_current().is_err());
    let c = small_runtime();
    let guard = c.enter();
    assert_eq!(fairlane::runtime::Handle::current().id(), c.handle().id());
    drop(guard);
    assert!(fairlane::runtime::Handle::try_current().is_err());
}

#[test]
fn the_same_runtime_entered_three_times_must_unwind_in_order() {
    let rt = small_runtime();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _first = rt.enter();
        let second = rt.enter();
        let third = rt.enter();
        drop(second);
        drop(third);
    }));
    assert!(caught.is_err());
    assert!(fairlane::runtime::Handle::try_current().is_err());
    // In order, any depth is fine.
    let first = rt.enter();
    let second = rt.enter();
    drop(second);
    drop(first);
}
