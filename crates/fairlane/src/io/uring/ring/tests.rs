//! The ring's tests.

use super::*;
use crate::io::driver::{Driver, Engine};

/// A ring that breaks with one entry consumed by the kernel and one
/// not: the unconsumed one's operation is settled (done elsewhere), the
/// consumed one's stays in flight until its completion (here the
/// cancellation of the broken ring's operations) arrives, and the ring
/// takes no more entries. Settling the consumed one too would free
/// memory the kernel may still write.
#[test]
fn a_broken_ring_settles_only_what_the_kernel_did_not_consume() {
    if Ring::probe().is_err() {
        return; // needs io_uring (the library prints nothing)
    }
    let driver = Driver::new(crate::io::IoBackend::IoUring, 1).expect("driver");
    driver.register_current(0);
    let proc = driver.current().expect("registered");
    let Engine::Uring(ring) = &proc.engine else {
        unreachable!("an io_uring driver")
    };
    let (rx, tx) = crate::io::test_pipe();
    let mut bufs = [Box::new([0u8; 8]), Box::new([0u8; 8])];
    let mut fired = Vec::new();
    let mut st = proc.lock();
    let read = |st: &mut State, buf: &mut [u8; 8], fired: &mut Vec<Waker>| {
        let key = st.ops.insert(OpSlot::Waiting(None));
        proc.work_added(st);
        let entry = opcode::Read::new(types::Fd(rx.as_raw_fd()), buf.as_mut_ptr(), 8)
            .build()
            .user_data(key as u64);
        ring.push(&proc, st, &entry, fired).expect("push");
        key
    };
    let [first, second] = &mut bufs;
    let consumed = read(&mut st, first, &mut fired);
    let unconsumed = read(&mut st, second, &mut fired);
    // The kernel consumes the wake-up read and the first read only.
    // SAFETY: no wait, no argument; the entries point into `bufs`,
    // which outlive them (and the ring's wake-up buffer).
    let n = unsafe { ring.ring.submitter().enter::<libc::sigset_t>(2, 0, 0, None) }.expect("enter");
    assert_eq!(n, 2);
    assert!(ring.has_unsubmitted(&st));
    ring.break_for_test(libc::EINVAL);
    ring.settle(&proc, &mut st, &mut fired);
    assert!(
        matches!(st.ops[unconsumed], OpSlot::Done(UNSUBMITTED)),
        "the entry the kernel never read is done elsewhere"
    );
    assert!(
        !matches!(st.ops[consumed], OpSlot::Done(UNSUBMITTED)),
        "the entry the kernel read is its until its completion"
    );
    assert!(!ring.has_unsubmitted(&st), "dead entries are not submitted");
    let nop = opcode::Nop::new().build().user_data(CANCEL);
    let refused = ring.push(&proc, &mut st, &nop, &mut fired).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EINVAL));
    // The consumed read was cancelled (`evacuate`): its completion says
    // the kernel did nothing, so its future would do it again.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(st.ops[consumed], OpSlot::Done(_)) {
        assert!(
            Instant::now() < deadline,
            "the consumed read never completed"
        );
        drop(st);
        ring.wait(Some(Duration::from_millis(10)));
        st = proc.lock();
        ring.reap(&proc, &mut st, &mut fired);
    }
    assert!(matches!(st.ops[consumed], OpSlot::Done(RESTART)));
    drop(st);
    driver.unregister_current();
    drop((rx, tx, bufs));
}

/// A wake-up read that stopping gave up on (`leak_wake` set while it is
/// in flight) but that completed before the ring is dropped: its
/// buffer is freed, not leaked; while it is in flight, it is kept.
#[test]
fn a_wake_read_that_completes_late_is_freed() {
    let mut ring = Ring::new().expect("an io_uring instance");
    let entry = opcode::Read::new(
        types::Fd(ring.wake_fd.as_raw_fd()),
        ring.wake_buf.get().cast(),
        8,
    )
    .build()
    .user_data(WAKE);
    // SAFETY: the buffer lives in `ring`, which outlives the read (it
    // is leaked if the read is still in flight when `ring` drops).
    unsafe { ring.ring.submission().push(&entry) }.expect("room in the queue");
    ring.ring.submit().expect("submit");
    // As `cancel_all` leaves it when its patience ran out.
    ring.leak_wake.store(true, Ordering::Relaxed);
    assert!(
        !ring.wake_read_finished(),
        "in flight: the kernel may still write the buffer"
    );
    ring.notify();
    ring.ring.submit_and_wait(1).expect("the read completes");
    assert!(ring.wake_read_finished(), "completed: the buffer is freed");
}
