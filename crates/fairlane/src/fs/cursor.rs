//! [`Cursor`]: the state behind a [`File`](super::File)'s `AsyncRead`,
//! `AsyncWrite` and `AsyncSeek`, with tokio's semantics.
//!
//! The file's position is the kernel's file offset (so it is shared with
//! a [`try_clone`](super::File::try_clone) and handed over by
//! [`into_std`](super::File::into_std)). At most one operation is in
//! flight, as a task of its own (a [`JoinHandle`]), and it hands back the
//! file's one buffer [`Buf`] with its result:
//!
//! - a read asks for up to `min(caller's room, max_buf_size)` bytes; the
//!   bytes of a read whose caller went away before it finished stay in
//!   [`Buf`] as read-ahead, for the next read;
//! - a write copies up to `max_buf_size` bytes into [`Buf`] and reports
//!   them written at once; the operation writes them all in the
//!   background, and its error, if any, is kept for the next write,
//!   flush, `sync_all`/`sync_data` or owned-buffer write (a read or seek
//!   meanwhile leaves it there); `flush` waits for the operation. A write
//!   first moves the offset back over unread read-ahead, so that its bytes
//!   land at the caller's position;
//! - a seek runs `lseek` on the blocking pool (after moving back over
//!   read-ahead).
//!
//! The task survives the [`File`](super::File): a dropped file's pending
//! write still completes. With io_uring, reads and writes are ring
//! operations (`READ`/`WRITE` at offset `-1`, the file offset) in a
//! spawned task; in the fallback backend, and for seeks and truncation,
//! they are system calls on the blocking pool.

use std::fs::File as StdFile;
use std::future::Future;
use std::io::{self, Seek, SeekFrom, Write};
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};

use super::rw::{self, At};
use crate::io::driver::Driver;
use crate::io::{IoBackend, IoBufMut};
use crate::runtime::Handle;
use crate::task::{JoinError, JoinHandle};

/// The most bytes one read or write operation moves, unless
/// [`File::set_max_buf_size`](super::File::set_max_buf_size) says
/// otherwise (tokio's default).
pub(super) const DEFAULT_MAX_BUF_SIZE: usize = 2 * 1024 * 1024;

/// The file's buffer: bytes read ahead (`data[pos..]`), or bytes being
/// written (all of `data`, while a write is in flight).
#[derive(Default)]
pub(super) struct Buf {
    data: Vec<u8>,
    pos: usize,
}

impl Buf {
    fn unread(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Hands up to `max` read-ahead bytes to `put`; how many.
    fn take_into(&mut self, max: usize, put: impl FnOnce(&[u8])) -> usize {
        let n = self.unread().min(max);
        put(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        if self.pos == self.data.len() {
            self.clear();
        }
        n
    }

    /// Drops the read-ahead; how many bytes it held.
    fn discard(&mut self) -> u64 {
        let n = self.unread() as u64;
        self.clear();
        n
    }

    fn clear(&mut self) {
        self.data.clear();
        self.pos = 0;
    }

    /// Copies up to `max` bytes of `srcs`, in order, into the (empty)
    /// buffer; how many.
    fn fill<S: Deref<Target = [u8]>>(&mut self, srcs: &[S], max: usize) -> usize {
        debug_assert_eq!(self.unread(), 0);
        self.clear();
        for src in srcs {
            let room = max - self.data.len();
            if room == 0 {
                break;
            }
            let n = src.len().min(room);
            self.data.extend_from_slice(&src[..n]);
        }
        self.data.len()
    }
}

/// What a background operation does. `rewind`: read-ahead bytes to move the
/// offset back over first.
enum Job {
    /// A read or write: io_uring operations where the runtime has them.
    Io(IoJob),
    /// `lseek`, on the blocking pool.
    Seek { rewind: u64, to: SeekFrom },
    /// `ftruncate`, on the blocking pool.
    SetLen { rewind: u64, size: u64 },
}

enum IoJob {
    /// Read up to `len` bytes into the buffer.
    Read { len: usize },
    /// Write the whole buffer.
    Write { rewind: u64 },
}

/// A background operation's result.
pub(super) enum Operation {
    /// The bytes read are in the buffer (none: the end of the file).
    Read(io::Result<()>),
    Write(io::Result<()>),
    /// The new position.
    Seek(io::Result<u64>),
    SetLen(io::Result<()>),
}

enum State {
    Idle(Buf),
    Busy {
        job: JoinHandle<(Operation, Buf)>,
        /// The target of a seek in flight: a seek call for the same target
        /// takes its result, any other waits for it and starts its own.
        seek: Option<SeekFrom>,
    },
}

/// A file's cursor state: see the [module](self) documentation.
pub(super) struct Cursor {
    state: State,
    /// The error of a background write, for the next write or flush.
    last_write_err: Option<io::Error>,
    /// The position the last seek reported.
    pos: u64,
}

/// The runtime that runs the file's background operations: the current
/// one, or an error (not a panic) outside any.
fn current() -> io::Result<Handle> {
    crate::runtime::context::with_current(Handle::clone).ok_or_else(super::no_runtime)
}

/// A background operation that never handed back its result (the runtime
/// shut down before running it, or it panicked).
fn lost(e: JoinError) -> io::Error {
    io::Error::other(format!("a background file operation did not finish: {e}"))
}

/// Runs `job` on the calling (blocking-pool) thread.
fn run_blocking(file: &StdFile, job: Job, buf: &mut Buf) -> Operation {
    match job {
        Job::Io(IoJob::Read { len }) => {
            buf.clear();
            Operation::Read(rw::sys_read_vec(file, &mut buf.data, len).map(drop))
        }
        Job::Io(IoJob::Write { rewind }) => {
            let result = rw::rewind(file, rewind).and_then(|()| (&*file).write_all(&buf.data));
            buf.clear();
            Operation::Write(result)
        }
        Job::Seek { rewind, to } => {
            Operation::Seek(rw::rewind(file, rewind).and_then(|()| (&*file).seek(to)))
        }
        Job::SetLen { rewind, size } => {
            Operation::SetLen(rw::rewind(file, rewind).and_then(|()| file.set_len(size)))
        }
    }
}

/// Runs a read or write `job` as io_uring operations at the file offset.
async fn run_on_ring(
    driver: Arc<Driver>,
    file: Arc<StdFile>,
    job: IoJob,
    mut buf: Buf,
) -> (Operation, Buf) {
    let op = match job {
        IoJob::Read { len } => {
            let mut data = std::mem::take(&mut buf.data);
            data.clear();
            data.reserve(len);
            let result = loop {
                let (r, d) = rw::read_some(&driver, &file, data, len, At::Cursor).await;
                data = d;
                match r {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    r => break r,
                }
            };
            buf.data = data;
            buf.pos = 0;
            Operation::Read(result.map(drop))
        }
        IoJob::Write { rewind } => {
            let result = match rw::rewind(&file, rewind) {
                Ok(()) => {
                    let data = std::mem::take(&mut buf.data);
                    let (r, data) = rw::write_all(&driver, &file, data, At::Cursor).await;
                    buf.data = data;
                    r
                }
                Err(e) => Err(e),
            };
            buf.clear();
            Operation::Write(result)
        }
    };
    // The file goes before the result is handed back, so that whoever
    // takes the result may unwrap the file's `Arc`.
    drop(file);
    (op, buf)
}

impl Cursor {
    pub(super) fn new() -> Cursor {
        Cursor {
            state: State::Idle(Buf::default()),
            last_write_err: None,
            pos: 0,
        }
    }

    /// Starts `job` on `rt` with `buf`.
    fn start(&mut self, rt: &Handle, file: &Arc<StdFile>, job: Job, buf: Buf) {
        let seek = match job {
            Job::Seek { to, .. } => Some(to),
            _ => None,
        };
        let file = file.clone();
        let driver = rt.io_driver();
        let job = match job {
            Job::Io(job) if driver.backend() == IoBackend::IoUring => {
                rt.spawn(run_on_ring(driver.clone(), file, job, buf))
            }
            job => rt.spawn_blocking(move || {
                let mut buf = buf;
                let op = run_blocking(&file, job, &mut buf);
                drop(file);
                (op, buf)
            }),
        };
        self.state = State::Busy { job, seek };
    }

    /// Waits for the operation in flight, if any: `None` if there was none.
    /// The state is idle afterwards.
    fn poll_busy(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Operation>>> {
        let State::Busy { job, .. } = &mut self.state else {
            return Poll::Ready(None);
        };
        let result = ready!(Pin::new(job).poll(cx));
        Poll::Ready(Some(match result {
            Ok((op, buf)) => {
                self.state = State::Idle(buf);
                Ok(op)
            }
            Err(e) => {
                self.state = State::Idle(Buf::default());
                Err(lost(e))
            }
        }))
    }

    /// Keeps what a finished operation that was not the caller's leaves
    /// for later: a write's error, a seek's position.
    fn absorb(&mut self, op: Operation) {
        match op {
            Operation::Write(Err(e)) => {
                self.last_write_err.get_or_insert(e);
            }
            Operation::Seek(Ok(pos)) => self.pos = pos,
            Operation::Read(_) | Operation::Write(Ok(())) | Operation::Seek(Err(_)) => {}
            Operation::SetLen(_) => {}
        }
    }

    /// The idle state's buffer.
    fn idle_buf(&mut self) -> &mut Buf {
        match &mut self.state {
            State::Idle(buf) => buf,
            State::Busy { .. } => unreachable!("called only when idle"),
        }
    }

    /// Reads into the caller's room of `want` bytes: `put` gets the bytes
    /// (at most `want`); the count. `Ok(0)` at the end of the file (or for
    /// no room).
    pub(super) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        file: &Arc<StdFile>,
        max_buf_size: usize,
        want: usize,
        put: impl FnOnce(&[u8]),
    ) -> Poll<io::Result<usize>> {
        loop {
            match &mut self.state {
                State::Idle(buf) => {
                    if buf.unread() > 0 || want == 0 {
                        return Poll::Ready(Ok(buf.take_into(want, put)));
                    }
                    let rt = current()?;
                    let buf = std::mem::take(buf);
                    let len = want.min(max_buf_size);
                    self.start(&rt, file, Job::Io(IoJob::Read { len }), buf);
                }
                State::Busy { .. } => match ready!(self.poll_busy(cx)).transpose()? {
                    Some(Operation::Read(Ok(()))) => {
                        return Poll::Ready(Ok(self.idle_buf().take_into(want, put)));
                    }
                    Some(Operation::Read(Err(e))) => return Poll::Ready(Err(e)),
                    Some(op) => self.absorb(op),
                    None => {}
                },
            }
        }
    }

    /// Takes up to `max_buf_size` bytes of `srcs` for a background write;
    /// the count. A previous write's error comes first.
    pub(super) fn poll_write<S: Deref<Target = [u8]>>(
        &mut self,
        cx: &mut Context<'_>,
        file: &Arc<StdFile>,
        max_buf_size: usize,
        srcs: &[S],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.last_write_err.take() {
            return Poll::Ready(Err(e));
        }
        if srcs.iter().all(|s| s.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        loop {
            match &mut self.state {
                State::Idle(buf) => {
                    let rt = current()?;
                    let rewind = buf.discard();
                    let n = buf.fill(srcs, max_buf_size);
                    let buf = std::mem::take(buf);
                    self.start(&rt, file, Job::Io(IoJob::Write { rewind }), buf);
                    return Poll::Ready(Ok(n));
                }
                State::Busy { .. } => match ready!(self.poll_busy(cx)).transpose()? {
                    Some(Operation::Write(r)) => r?,
                    // A read's bytes are read-ahead now: the next pass
                    // moves back over them.
                    Some(op) => self.absorb(op),
                    None => {}
                },
            }
        }
    }

    /// Waits for the background write, if any; its error (or an earlier
    /// one) comes back.
    pub(super) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if let Some(e) = self.last_write_err.take() {
                return Poll::Ready(Err(e));
            }
            match ready!(self.poll_busy(cx)) {
                None => return Poll::Ready(Ok(())),
                Some(op) => self.absorb(op?),
            }
        }
    }

    /// Waits for the operation in flight, keeping a write's error for
    /// later (tokio's "complete in-flight").
    pub(super) fn poll_settle(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while let Some(op) = ready!(self.poll_busy(cx)) {
            match op {
                Ok(op) => self.absorb(op),
                Err(e) => {
                    self.last_write_err.get_or_insert(e);
                }
            }
        }
        Poll::Ready(())
    }

    /// Settles without waiting: whether the state is idle now.
    pub(super) fn settle_now(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        self.poll_settle(&mut cx).is_ready()
    }

    /// The error a background write left, if any.
    pub(super) fn take_write_error(&mut self) -> Option<io::Error> {
        self.last_write_err.take()
    }

    /// How many bytes were read ahead (idle state only).
    pub(super) fn read_ahead(&mut self) -> u64 {
        self.idle_buf().unread() as u64
    }

    /// Drops the read-ahead (idle state only); how many bytes the offset
    /// is past the caller's position.
    pub(super) fn discard_read_ahead(&mut self) -> u64 {
        self.idle_buf().discard()
    }

    /// Moves the read-ahead (idle state only) to the end of `out`.
    pub(super) fn drain_read_ahead(&mut self, out: &mut Vec<u8>) {
        let buf = self.idle_buf();
        let n = buf.unread();
        buf.take_into(n, |bytes| out.extend_from_slice(bytes));
    }

    /// Moves read-ahead bytes (idle state only) into `out`, from its start
    /// and up to its capacity; how many.
    pub(super) fn read_ahead_into<B: IoBufMut>(&mut self, out: &mut B) -> usize {
        let room = out.bytes_total();
        let ptr = out.stable_mut_ptr();
        let n = self.idle_buf().take_into(room, |bytes| {
            // SAFETY: `ptr` has `room >= bytes.len()` writable bytes, in
            // the caller's buffer, which does not overlap the file's.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) }
        });
        if n > 0 {
            // SAFETY: the first `n` bytes were just written.
            unsafe { out.set_init(n) };
        }
        n
    }

    /// Starts a seek to `to` (tokio's `start_seek`): an error if an
    /// operation is in flight.
    pub(super) fn start_seek(&mut self, file: &Arc<StdFile>, to: SeekFrom) -> io::Result<()> {
        let State::Idle(buf) = &mut self.state else {
            return Err(io::Error::other(
                "another file operation is pending: call poll_complete before start_seek",
            ));
        };
        let rt = current()?;
        // Moving back over the read-ahead is a step of its own (not folded
        // into a relative seek), so that a seek that fails leaves the
        // offset at the caller's position.
        let rewind = buf.discard();
        let buf = std::mem::take(buf);
        self.start(&rt, file, Job::Seek { rewind, to }, buf);
        Ok(())
    }

    /// Waits for the operation in flight (tokio's `poll_complete`): a
    /// seek's result, else the position the last seek reported.
    pub(super) fn poll_complete(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        loop {
            match ready!(self.poll_busy(cx)) {
                None => return Poll::Ready(Ok(self.pos)),
                Some(op) => match op? {
                    Operation::Seek(r) => {
                        if let Ok(pos) = r {
                            self.pos = pos;
                        }
                        return Poll::Ready(r);
                    }
                    op => self.absorb(op),
                },
            }
        }
    }

    /// A seek to `to` in one call (futures-io's `poll_seek`): starts it,
    /// or waits for the one in flight to `to`.
    pub(super) fn poll_seek(
        &mut self,
        cx: &mut Context<'_>,
        file: &Arc<StdFile>,
        to: SeekFrom,
    ) -> Poll<io::Result<u64>> {
        loop {
            match &self.state {
                State::Idle(_) => self.start_seek(file, to)?,
                State::Busy { seek, .. } if *seek == Some(to) => return self.poll_complete(cx),
                State::Busy { .. } => {
                    if let Some(op) = ready!(self.poll_busy(cx)).transpose()? {
                        self.absorb(op);
                    }
                }
            }
        }
    }

    /// Starts truncating (or extending) the file to `size` (idle state
    /// only), after moving the offset back over the read-ahead.
    pub(super) fn start_set_len(&mut self, file: &Arc<StdFile>, size: u64) -> io::Result<()> {
        let rt = current()?;
        let buf = self.idle_buf();
        let rewind = buf.discard();
        let buf = std::mem::take(buf);
        self.start(&rt, file, Job::SetLen { rewind, size }, buf);
        Ok(())
    }

    /// Waits for the caller's own operation, started with the turn held.
    pub(super) fn poll_own(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Operation>> {
        match ready!(self.poll_busy(cx)) {
            Some(op) => Poll::Ready(op),
            None => Poll::Ready(Err(io::Error::other(
                "a file operation's result was taken by another call",
            ))),
        }
    }
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (busy, read_ahead) = match &self.state {
            State::Idle(buf) => (false, buf.unread()),
            State::Busy { .. } => (true, 0),
        };
        f.debug_struct("Cursor")
            .field("busy", &busy)
            .field("read_ahead", &read_ahead)
            .finish()
    }
}
