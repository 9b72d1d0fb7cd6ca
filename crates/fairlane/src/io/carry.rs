//! What a socket keeps of the operations whose futures were dropped before
//! they handed back their result (io_uring backend), so that a byte stream
//! has no hole and no reordering, and no datagram is lost.
//!
//! With completions, a read dropped while it is in flight may already have
//! taken bytes from the kernel, and a write dropped while it is in flight
//! may be sending. So:
//! - A dropped read is cancelled. If the kernel completed it first (or its
//!   completion had arrived and nobody looked), its outcome waits here: its
//!   bytes (a datagram: with its sender, even an empty one), the end of the
//!   stream, or the error it reported (a reset connection is reported
//!   once). The socket's next read takes that outcome before it submits
//!   anything. That read first waits for the outcome of every dropped read
//!   still in flight, so it cannot overtake one. A carried end of stream
//!   also keeps a task whose every read times out from resubmitting the
//!   read that would report it, forever.
//! - A dropped write is not cancelled: it runs to completion (stream sends
//!   ask the kernel for every byte, `MSG_WAITALL`), and the socket's next
//!   write waits for it. Whatever the kernel did not send (its engine
//!   stopped in the middle) waits here, and the next write sends it first.
//! - When the socket is dropped, the writes still in flight are cancelled
//!   (`Carry::close`), so that a peer that never reads cannot keep the
//!   connection open.
//!
//! Lock order: a processor's engine lock (the completion side runs under
//! it), then this carry's lock. Every change to `in_flight` happens under
//! the engine lock of the processor it names, so a listed key is still that
//! operation's slot (see `uring::cancel_kept`).
//!
//! The fallback backend needs none of this: its reads and writes are
//! single non-blocking system calls made when the socket is ready, so a
//! dropped future has done nothing.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Poll, Waker};

use super::driver::ProcessorIo;
use crate::net::socket::SockAddrBuf;

/// What a dropped read's kernel completion delivered.
pub(crate) struct Received {
    /// Stream bytes (none: the end of the stream) or a datagram.
    bytes: Vec<u8>,
    /// Bytes already handed to later reads (a stream read takes part of an
    /// entry when its buffer is smaller).
    taken: usize,
    /// A datagram's sender as the kernel wrote it (`None` for stream
    /// bytes).
    from: Option<SockAddrBuf>,
    /// The error the read reported instead (an `errno`); `bytes` is empty.
    error: Option<i32>,
}

impl Received {
    /// Bytes of a stream; none is its end.
    pub(crate) fn bytes(bytes: Vec<u8>) -> Received {
        Received {
            bytes,
            taken: 0,
            from: None,
            error: None,
        }
    }

    /// One datagram (possibly empty) and its sender.
    pub(crate) fn datagram(bytes: Vec<u8>, from: SockAddrBuf) -> Received {
        Received {
            bytes,
            taken: 0,
            from: Some(from),
            error: None,
        }
    }

    /// The error (`errno`) a read reported.
    pub(crate) fn error(errno: i32) -> Received {
        Received {
            bytes: Vec::new(),
            taken: 0,
            from: None,
            error: Some(errno),
        }
    }
}

/// How an operation's resources give up what its dropped future did not
/// take, given the kernel's count.
pub(crate) enum Keep<T> {
    /// A read: what the kernel put into the resources.
    Read(fn(T, usize) -> Received),
    /// A write: the bytes the kernel did not send, if any.
    Write(fn(T, usize) -> Option<Vec<u8>>),
}

/// One socket's carried results (see the module comment).
pub(crate) struct Carry {
    /// Whether anything below is pending: the fast path of every read and
    /// write reads only this. Stored under the lock after each change;
    /// Release/Acquire so that a reader that sees `true` also sees the
    /// state that made it so (it then takes the lock anyway). A stale
    /// `false` is seen only by a task whose operation is not ordered after
    /// the drop that made the carry busy (two tasks using one socket at
    /// once), whose order no stream promises.
    busy: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Dropped reads whose completion has not arrived.
    reads: usize,
    /// Dropped writes whose completion has not arrived, by processor and
    /// operation key (for `close`).
    writes: Vec<(Weak<ProcessorIo>, usize)>,
    /// Tasks waiting for `reads` or `writes` to drain.
    waiters: Vec<Waker>,
    received: VecDeque<Received>,
    /// Bytes that dropped writes did not send, oldest first.
    unsent: VecDeque<Vec<u8>>,
    /// The socket is gone: what still completes is only freed.
    closed: bool,
}

impl State {
    fn busy(&self) -> bool {
        self.reads > 0
            || !self.writes.is_empty()
            || !self.received.is_empty()
            || !self.unsent.is_empty()
    }
}

impl Carry {
    pub(crate) fn new() -> Arc<Carry> {
        Arc::new(Carry {
            busy: AtomicBool::new(false),
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes `busy` after a change; the guard is released by the caller.
    fn update(&self, st: &State) {
        self.busy.store(st.busy(), Ordering::Release);
    }

    /// Whether a read or write must look here before it submits.
    pub(crate) fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Whether a dropped read is still in flight (its outcome unknown).
    pub(crate) fn reads_in_flight(&self) -> bool {
        self.lock().reads > 0
    }

    /// Whether a dropped read's outcome waits to be taken.
    pub(crate) fn has_received(&self) -> bool {
        !self.lock().received.is_empty()
    }

    /// Whether a dropped write is in flight or left bytes to send.
    pub(crate) fn writes_pending(&self) -> bool {
        let st = self.lock();
        !st.writes.is_empty() || !st.unsent.is_empty()
    }

    /// Waits until no dropped read is in flight.
    pub(crate) async fn settle_reads(&self) {
        poll_fn(|cx| {
            let mut st = self.lock();
            if st.reads == 0 {
                return Poll::Ready(());
            }
            if !st.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                st.waiters.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Waits until no dropped write is in flight.
    pub(crate) async fn settle_writes(&self) {
        poll_fn(|cx| {
            let mut st = self.lock();
            if st.writes.is_empty() {
                return Poll::Ready(());
            }
            if !st.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                st.waiters.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Stream read: copies carried bytes to `dst` (as many as fit in `cap`,
    /// oldest first), or hands over a carried end of stream (`Ok(0)`) or
    /// error once the bytes before it are taken. `None` if nothing is
    /// carried or `cap` is 0.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `cap` bytes (they may be
    /// uninitialised).
    pub(crate) unsafe fn take_bytes(&self, dst: *mut u8, cap: usize) -> Option<io::Result<usize>> {
        if cap == 0 {
            return None;
        }
        let mut st = self.lock();
        let mut n = 0;
        while n < cap {
            let Some(front) = st.received.front_mut() else {
                break;
            };
            if front.bytes.is_empty() {
                // An end of stream or an error: after the bytes before it.
                if n > 0 {
                    break;
                }
                let end = st.received.pop_front().expect("front exists");
                self.update(&st);
                return Some(match end.error {
                    Some(errno) => Err(io::Error::from_raw_os_error(errno)),
                    None => Ok(0),
                });
            }
            let m = (front.bytes.len() - front.taken).min(cap - n);
            // SAFETY: `n + m <= cap`, so the target lies in the caller's
            // writable bytes; the source lies in the entry's bytes; a Vec
            // of ours never overlaps the caller's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(front.bytes.as_ptr().add(front.taken), dst.add(n), m)
            };
            front.taken += m;
            n += m;
            if front.taken == front.bytes.len() {
                st.received.pop_front();
            }
        }
        self.update(&st);
        (n > 0).then_some(Ok(n))
    }

    /// Stream peek: copies the carried bytes of the oldest entry (those
    /// not taken yet, as many as fit in `cap`) to `dst` and leaves them
    /// carried, or reports a carried end of stream (`Ok(0)`) or error
    /// without taking it. `None` if nothing is carried or `cap` is 0.
    ///
    /// # Safety
    /// As for [`Carry::take_bytes`].
    pub(crate) unsafe fn peek_bytes(&self, dst: *mut u8, cap: usize) -> Option<io::Result<usize>> {
        if cap == 0 {
            return None;
        }
        let st = self.lock();
        let front = st.received.front()?;
        if front.bytes.is_empty() {
            return Some(match front.error {
                Some(errno) => Err(io::Error::from_raw_os_error(errno)),
                None => Ok(0),
            });
        }
        let m = (front.bytes.len() - front.taken).min(cap);
        // SAFETY: `m <= cap` writable bytes at `dst` (the caller's
        // promise), from the entry's own Vec, which the lock keeps.
        unsafe { std::ptr::copy_nonoverlapping(front.bytes.as_ptr().add(front.taken), dst, m) };
        Some(Ok(m))
    }

    /// Datagram read: the oldest carried datagram, copied to `dst` (cut to
    /// `cap` bytes, as a receive into a smaller buffer cuts it), with its
    /// sender, or a carried error. `None` if nothing is carried. With
    /// `peek` the datagram stays carried (a carried error is taken all the
    /// same, as the kernel's `MSG_PEEK` takes a pending error).
    ///
    /// # Safety
    /// As for [`Carry::take_bytes`].
    pub(crate) unsafe fn take_datagram(
        &self,
        dst: *mut u8,
        cap: usize,
        peek: bool,
    ) -> Option<io::Result<(usize, Option<SockAddrBuf>)>> {
        let mut st = self.lock();
        let front = st.received.front()?;
        if let Some(errno) = front.error {
            st.received.pop_front();
            self.update(&st);
            return Some(Err(io::Error::from_raw_os_error(errno)));
        }
        let n = front.bytes.len().min(cap);
        // SAFETY: `n <= cap` writable bytes at `dst` (the caller's
        // promise), from the datagram's own Vec, which the lock keeps.
        unsafe { std::ptr::copy_nonoverlapping(front.bytes.as_ptr(), dst, n) };
        let from = front.from;
        if !peek {
            st.received.pop_front();
            self.update(&st);
        }
        Some(Ok((n, from)))
    }

    /// The oldest bytes a dropped write did not send.
    pub(crate) fn take_unsent(&self) -> Option<Vec<u8>> {
        let mut st = self.lock();
        let bytes = st.unsent.pop_front();
        self.update(&st);
        bytes
    }

    /// Puts bytes back to be sent before any other (a carried write that
    /// the kernel sent only part of).
    pub(crate) fn put_back_unsent(&self, bytes: Vec<u8>) {
        let mut st = self.lock();
        st.unsent.push_front(bytes);
        self.update(&st);
    }

    /// The socket is dropped: later completions only free their resources.
    /// Returns the writes still in flight, for the caller to cancel.
    pub(crate) fn close(&self) -> Vec<(Weak<ProcessorIo>, usize)> {
        let mut st = self.lock();
        st.closed = true;
        st.received.clear();
        st.unsent.clear();
        st.writes.clone()
    }

    /// Whether write `key` of `proc` is still in flight. Called under that
    /// processor's engine lock.
    pub(crate) fn write_in_flight(&self, proc: &ProcessorIo, key: usize) -> bool {
        self.lock()
            .writes
            .iter()
            .any(|(p, k)| *k == key && std::ptr::eq(p.as_ptr(), proc))
    }

    /// A read's future was dropped with the result already there (engine
    /// lock held).
    pub(crate) fn received_now(&self, received: Received) {
        let mut st = self.lock();
        if !st.closed {
            st.received.push_back(received);
        }
        self.update(&st);
    }

    /// A read's future was dropped while it is in flight (engine lock held).
    pub(crate) fn read_dropped(&self) {
        let mut st = self.lock();
        st.reads += 1;
        self.update(&st);
    }

    /// A dropped read completed (engine lock held): what it received, if
    /// anything. The waiting tasks go to `fired`.
    pub(crate) fn read_done(&self, received: Option<Received>, fired: &mut Vec<Waker>) {
        let mut st = self.lock();
        st.reads -= 1;
        if let Some(r) = received.filter(|_| !st.closed) {
            st.received.push_back(r);
        }
        fired.append(&mut st.waiters);
        self.update(&st);
    }

    /// A write's future was dropped with the count already there (engine
    /// lock held): what it did not send.
    pub(crate) fn unsent_now(&self, bytes: Vec<u8>) {
        let mut st = self.lock();
        if !st.closed {
            st.unsent.push_front(bytes);
        }
        self.update(&st);
    }

    /// Write `key` of `proc` had its future dropped while in flight (engine
    /// lock held).
    pub(crate) fn write_dropped(&self, proc: &Arc<ProcessorIo>, key: usize) {
        let mut st = self.lock();
        st.writes.push((Arc::downgrade(proc), key));
        self.update(&st);
    }

    /// Dropped write `key` of `proc` completed (engine lock held): the bytes
    /// it did not send, if any, go first. The waiting tasks go to `fired`.
    pub(crate) fn write_done(
        &self,
        proc: &ProcessorIo,
        key: usize,
        unsent: Option<Vec<u8>>,
        fired: &mut Vec<Waker>,
    ) {
        let mut st = self.lock();
        st.writes
            .retain(|(p, k)| !(*k == key && std::ptr::eq(p.as_ptr(), proc)));
        if let Some(bytes) = unsent.filter(|_| !st.closed) {
            // Ahead of anything else: the next write waited for this one.
            st.unsent.push_front(bytes);
        }
        fired.append(&mut st.waiters);
        self.update(&st);
    }

    /// Whether the socket was dropped.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }
}
