//! The process's standard streams for tasks, as tokio's `stdin`, `stdout`
//! and `stderr`.
//!
//! Descriptors 0, 1 and 2 are shared with the parent (a terminal, a file, a
//! pipe another process also holds), so they stay blocking: making them
//! non-blocking would change them for every process that shares them, and a
//! terminal or a file is no fit for readiness or ring reads. Each read or
//! write is instead a closure on the runtime's blocking pool that goes
//! through std's handle (`std::io::stdin()` and so on, whose locks keep
//! the bytes of one write together with `println!`'s).
//!
//! Each stream has one state for the whole process, shared by all its
//! handles: the bytes a blocking read brought beyond what its caller's
//! buffer took wait there for the next read of any [`Stdin`], and the
//! bytes each write accepted queue there in the order they were accepted,
//! written by one blocking closure at a time. So dropping a handle loses
//! nothing, and writes through different handles come out in the order
//! they were made.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The smallest read a blocking closure makes, whatever the caller's buffer.
const MIN_READ: usize = 8 * 1024;
/// The largest read a blocking closure makes.
const MAX_READ: usize = 64 * 1024;
/// The most bytes a stream's writes may have accepted and not yet handed
/// to the operating system; a write beyond it waits.
const MAX_QUEUED: usize = 64 * 1024;

fn no_runtime(what: &str) -> io::Error {
    io::Error::other(format!(
        "fairlane::io::{what} must be used inside a fairlane runtime (a task or \
         Runtime::block_on)"
    ))
}

fn shut_down(what: &str) -> io::Error {
    io::Error::other(format!(
        "fairlane::io::{what}: the runtime is shutting down and its blocking pool takes no more \
         work"
    ))
}

fn in_runtime() -> bool {
    crate::runtime::context::with_current(|_| ()).is_some()
}

/// Starts `job` on the current runtime's blocking pool, detached. With no
/// runtime current, or a pool that takes no more work, `job` is dropped
/// unrun (and its drop deals with that).
fn start(job: impl FnOnce() + Send + 'static) {
    crate::runtime::context::with_current(|h| drop(h.spawn_blocking(job)));
}

/// Locks `m`. The critical sections below do not panic (short of running
/// out of memory), so a poisoned lock carries no broken invariant.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds `waker` to `wakers` unless an equivalent one is there.
fn register(wakers: &mut Vec<Waker>, waker: &Waker) {
    if !wakers.iter().any(|w| w.will_wake(waker)) {
        wakers.push(waker.clone());
    }
}

fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        w.wake();
    }
}

// ---------------------------------------------------------------------------
// Standard input

/// The state of standard input, shared by every [`Stdin`].
struct ReadState {
    /// Bytes read and not yet handed out: `buf[pos..]`.
    buf: Vec<u8>,
    pos: usize,
    /// A blocking read is queued or running.
    reading: bool,
    /// What the last read brought when it brought no bytes: the end of the
    /// input (`Ok`) or an error, for the next poll.
    outcome: Option<io::Result<()>>,
    /// How many reads were started; names each read's job.
    started: u64,
    /// The last job dropped without running.
    unrun: u64,
    wakers: Vec<Waker>,
}

static STDIN: Mutex<ReadState> = Mutex::new(ReadState {
    buf: Vec::new(),
    pos: 0,
    reading: false,
    outcome: None,
    started: 0,
    unrun: 0,
    wakers: Vec::new(),
});

/// One blocking read of standard input into `buf` (up to `len` bytes).
/// Dropped without running (the runtime shut down), it leaves the state
/// ready for another read and wakes the waiting tasks.
struct ReadJob {
    id: u64,
    buf: Vec<u8>,
    len: usize,
    ran: bool,
}

impl ReadJob {
    fn run(mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.resize(self.len, 0);
        let result = loop {
            match io::stdin().lock().read(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        let wakers = {
            let mut s = lock(&STDIN);
            self.ran = true;
            s.reading = false;
            match result {
                Ok(n) => {
                    buf.truncate(n);
                    if n == 0 {
                        s.outcome = Some(Ok(()));
                    }
                }
                Err(e) => {
                    buf.clear();
                    s.outcome = Some(Err(e));
                }
            }
            s.buf = buf;
            s.pos = 0;
            std::mem::take(&mut s.wakers)
        };
        wake_all(wakers);
    }
}

impl Drop for ReadJob {
    fn drop(&mut self) {
        if self.ran {
            return;
        }
        let wakers = {
            let mut s = lock(&STDIN);
            s.reading = false;
            s.unrun = self.id;
            std::mem::take(&mut s.wakers)
        };
        wake_all(wakers);
    }
}

fn poll_read_stdin(cx: &mut Context<'_>, out: &mut [u8]) -> Poll<io::Result<usize>> {
    if !in_runtime() {
        return Poll::Ready(Err(no_runtime("stdin")));
    }
    if out.is_empty() {
        return Poll::Ready(Ok(0));
    }
    let mut s = lock(&STDIN);
    loop {
        if s.pos < s.buf.len() {
            let n = out.len().min(s.buf.len() - s.pos);
            out[..n].copy_from_slice(&s.buf[s.pos..s.pos + n]);
            s.pos += n;
            if s.pos == s.buf.len() {
                s.buf.clear();
                s.pos = 0;
            }
            return Poll::Ready(Ok(n));
        }
        if let Some(outcome) = s.outcome.take() {
            return Poll::Ready(outcome.map(|()| 0));
        }
        if s.reading {
            // The job's completion takes the wakers under this lock.
            register(&mut s.wakers, cx.waker());
            return Poll::Pending;
        }
        s.reading = true;
        s.started += 1;
        let job = ReadJob {
            id: s.started,
            buf: std::mem::take(&mut s.buf),
            len: out.len().clamp(MIN_READ, MAX_READ),
            ran: false,
        };
        drop(s);
        // Outside the lock: a pool that refuses the job drops it here, and
        // its drop takes the lock.
        start(move || job.run());
        s = lock(&STDIN);
        if s.unrun == s.started && !s.reading {
            return Poll::Ready(Err(shut_down("stdin")));
        }
    }
}

/// A handle to the process's standard input, as tokio's `Stdin`: implements
/// `futures_io::AsyncRead` (and tokio's `AsyncRead` with the `tokio-io`
/// feature). Made by [`stdin`].
///
/// Each read that finds no bytes waiting starts one blocking read (of at
/// least 8 KiB, at most 64 KiB, going by the caller's buffer) on the
/// runtime's blocking pool and waits for it; what the caller's buffer does
/// not take waits, in a buffer shared by every `Stdin` of the process, for
/// the next read (so the bytes of a dropped handle are not lost; bytes read
/// this way are not seen by `std::io::stdin()`, so read through one of the
/// two). The end of the input is a read of 0 bytes; reading again tries
/// again (a terminal has more after Ctrl-D).
///
/// A blocking read cannot be cancelled: a read waiting on a terminal holds
/// one pool thread until a line arrives, and dropping the runtime waits for
/// it, as with tokio (and, as any blocking closure, it keeps a paused clock
/// from auto-advancing). For interactive input, read `std::io::stdin()` on a
/// thread of your own, or shut the runtime down with
/// [`Runtime::shutdown_timeout`](crate::Runtime::shutdown_timeout).
///
/// Outside a fairlane runtime every read fails with an error that says so.
///
/// # Example
/// ```no_run
/// use futures_lite::io::AsyncReadExt;
/// # let rt = fairlane::Runtime::new()?;
/// # rt.block_on(async {
/// let mut input = String::new();
/// fairlane::io::stdin().read_to_string(&mut input).await?;
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Stdin {
    std: io::Stdin,
}

/// A handle to the process's standard input, as tokio's `stdin()`; see
/// [`Stdin`]. Making it needs no runtime; reading does.
///
/// # Example
/// ```no_run
/// use futures_lite::io::{AsyncBufReadExt, BufReader};
/// use futures_lite::StreamExt;
/// # let rt = fairlane::Runtime::new()?;
/// # rt.block_on(async {
/// let mut lines = BufReader::new(fairlane::io::stdin()).lines();
/// while let Some(line) = lines.next().await {
///     let line = line?;
///     // ...
/// #   drop(line);
/// }
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn stdin() -> Stdin {
    Stdin { std: io::stdin() }
}

impl futures_io::AsyncRead for Stdin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        poll_read_stdin(cx, buf)
    }
}

#[cfg(feature = "tokio-io")]
impl tokio::io::AsyncRead for Stdin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = std::task::ready!(poll_read_stdin(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsRawFd for Stdin {
    fn as_raw_fd(&self) -> RawFd {
        self.std.as_raw_fd()
    }
}

impl AsFd for Stdin {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.std.as_fd()
    }
}

impl fmt::Debug for Stdin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stdin").finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------
// Standard output and error

#[derive(Clone, Copy)]
enum Which {
    Stdout,
    Stderr,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Stdout => "stdout",
            Which::Stderr => "stderr",
        }
    }

    /// Writes all of `bytes` through std's handle, and flushes it (std's
    /// stdout keeps a line buffer).
    fn write_out(self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Which::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Which::Stderr => {
                let mut out = io::stderr().lock();
                out.write_all(bytes)?;
                out.flush()
            }
        }
    }
}

/// The state of standard output or error, shared by all its handles.
struct WriteState {
    /// Accepted bytes no job has taken yet, in the order accepted.
    queue: Vec<u8>,
    /// The job's buffer, reused between batches.
    spare: Vec<u8>,
    /// A writing job is queued or running.
    writing: bool,
    /// Bytes accepted since the process started.
    accepted: u64,
    /// Of those, the bytes a job is done with (written, or failed).
    done: u64,
    /// The first error since the last poll that reported one.
    error: Option<io::Error>,
    wakers: Vec<Waker>,
}

struct Output {
    which: Which,
    state: Mutex<WriteState>,
}

impl Output {
    const fn new(which: Which) -> Output {
        Output {
            which,
            state: Mutex::new(WriteState {
                queue: Vec::new(),
                spare: Vec::new(),
                writing: false,
                accepted: 0,
                done: 0,
                error: None,
                wakers: Vec::new(),
            }),
        }
    }

    /// Starts a job that writes the queue, if none is writing and there is
    /// something to write; unlocks `s`.
    fn kick(&'static self, mut s: MutexGuard<'_, WriteState>) {
        if s.writing || s.queue.is_empty() {
            return;
        }
        s.writing = true;
        let job = WriteJob {
            out: self,
            taken: 0,
            ran: false,
        };
        drop(s);
        // Outside the lock: a pool that refuses the job drops it here, and
        // its drop writes the queue.
        start(move || job.run());
    }

    /// Accepts what fits of `data`. `flushing` is the handle's flush in
    /// progress, which this write makes stale.
    fn poll_write(
        &'static self,
        cx: &mut Context<'_>,
        data: &[u8],
        flushing: &mut Option<u64>,
    ) -> Poll<io::Result<usize>> {
        *flushing = None;
        if !in_runtime() {
            return Poll::Ready(Err(no_runtime(self.which.name())));
        }
        let mut s = lock(&self.state);
        if let Some(e) = s.error.take() {
            return Poll::Ready(Err(e));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let room = MAX_QUEUED.saturating_sub(s.queue.len());
        if room == 0 {
            // The job wakes the wakers when it takes the queue.
            register(&mut s.wakers, cx.waker());
            self.kick(s);
            return Poll::Pending;
        }
        let n = room.min(data.len());
        s.queue.extend_from_slice(&data[..n]);
        s.accepted += n as u64;
        self.kick(s);
        Poll::Ready(Ok(n))
    }

    /// Waits until every byte accepted by the first poll of this flush
    /// (`target`, kept by the handle) is written.
    fn poll_flush(
        &'static self,
        cx: &mut Context<'_>,
        target: &mut Option<u64>,
    ) -> Poll<io::Result<()>> {
        if !in_runtime() {
            return Poll::Ready(Err(no_runtime(self.which.name())));
        }
        let mut s = lock(&self.state);
        let goal = *target.get_or_insert(s.accepted);
        if let Some(e) = s.error.take() {
            *target = None;
            return Poll::Ready(Err(e));
        }
        if s.done >= goal {
            *target = None;
            return Poll::Ready(Ok(()));
        }
        // The job wakes the wakers when it is done with a batch.
        register(&mut s.wakers, cx.waker());
        self.kick(s);
        Poll::Pending
    }
}

static STDOUT: Output = Output::new(Which::Stdout);
static STDERR: Output = Output::new(Which::Stderr);

/// Writes its stream's queue, batch after batch, until it finds it empty.
/// Dropped without running (the runtime is shutting down, or shut down),
/// it writes the queue on the thread that drops it: accepted bytes are
/// written whatever becomes of the runtime.
struct WriteJob {
    out: &'static Output,
    /// Bytes taken from the queue and not yet counted as done.
    taken: usize,
    ran: bool,
}

impl WriteJob {
    fn run(mut self) {
        self.drain();
    }

    fn drain(&mut self) {
        self.ran = true;
        let mut batch = Vec::new();
        loop {
            let wakers = {
                let mut s = lock(&self.out.state);
                batch.clear();
                s.done += self.taken as u64;
                self.taken = 0;
                if s.queue.is_empty() {
                    s.writing = false;
                    s.spare = std::mem::take(&mut batch);
                    let wakers = std::mem::take(&mut s.wakers);
                    drop(s);
                    wake_all(wakers);
                    return;
                }
                if batch.capacity() == 0 {
                    batch = std::mem::take(&mut s.spare);
                }
                std::mem::swap(&mut batch, &mut s.queue);
                self.taken = batch.len();
                std::mem::take(&mut s.wakers)
            };
            // Room in the queue, or a batch done: the waiting tasks look.
            wake_all(wakers);
            if let Err(e) = self.out.which.write_out(&batch) {
                let mut s = lock(&self.out.state);
                s.error.get_or_insert(e);
            }
        }
    }
}

impl Drop for WriteJob {
    fn drop(&mut self) {
        if !self.ran {
            self.drain();
            return;
        }
        if self.taken == 0 {
            return;
        }
        // Unwinding out of a write: the next job writes what is queued.
        let wakers = {
            let mut s = lock(&self.out.state);
            s.writing = false;
            s.done += self.taken as u64;
            s.error
                .get_or_insert_with(|| io::Error::other("the write panicked"));
            std::mem::take(&mut s.wakers)
        };
        wake_all(wakers);
    }
}

/// The documentation both write handles share (`$example` writes to the
/// stream with futures' `AsyncWriteExt`).
macro_rules! write_handle {
    ($t:ident, $f:ident, $state:ident, $what:literal, $example:literal) => {
        #[doc = concat!("A handle to the process's standard ", $what, ", as tokio's `", stringify!($t), "`:")]
        /// implements `futures_io::AsyncWrite` (and tokio's `AsyncWrite`
        /// with the `tokio-io` feature). Made by
        #[doc = concat!("[`", stringify!($f), "`].")]
        ///
        /// A write copies what it accepts into a queue the stream's handles
        /// share and returns; one closure on the runtime's blocking pool at
        /// a time writes the queue, in order, through std's handle, and
        /// flushes that. A write waits only while 64 KiB are queued. So
        /// writes through different handles come out in the order they were
        /// made, and dropping a handle whose bytes are still queued or being
        /// written loses nothing: they are written all the same, and
        /// shutting the runtime down writes them before it returns (the
        /// thread that shuts it down writes what no pool thread had begun
        /// to). Only `std::process::exit` (or a `shutdown_timeout` that
        /// expires) can leave them unwritten: flush first. A flush waits until every
        /// byte accepted before it began, through any handle, is written;
        /// `close` (tokio's `shutdown`) is a flush, and leaves the
        /// descriptor open.
        ///
        /// An error from the operating system (`BrokenPipe` once the reader
        /// of a pipe is gone: Rust programs ignore `SIGPIPE`) comes out of
        /// the next write or flush through any of the stream's handles; the
        /// bytes of the failed write are gone. Outside a fairlane runtime
        /// every write and flush fails with an error that says so.
        ///
        /// # Example
        /// ```
        /// use futures_lite::io::AsyncWriteExt;
        /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
        /// # rt.block_on(async {
        #[doc = concat!("let mut out = fairlane::io::", stringify!($f), "();")]
        #[doc = $example]
        /// out.flush().await?;
        /// # Ok::<(), std::io::Error>(()) })?;
        /// # Ok::<(), std::io::Error>(())
        /// ```
        pub struct $t {
            std: io::$t,
            /// What the flush in progress waits for.
            flushing: Option<u64>,
        }

        #[doc = concat!("A handle to the process's standard ", $what, ", as tokio's `", stringify!($f), "()`; see")]
        #[doc = concat!("[`", stringify!($t), "`]. Making it needs no runtime; writing does.")]
        ///
        /// # Example
        /// ```
        /// use futures_lite::io::AsyncWriteExt;
        /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
        /// # rt.block_on(async {
        #[doc = concat!("let mut out = fairlane::io::", stringify!($f), "();")]
        #[doc = $example]
        /// out.flush().await?;
        /// # Ok::<(), std::io::Error>(()) })?;
        /// # Ok::<(), std::io::Error>(())
        /// ```
        pub fn $f() -> $t {
            $t {
                std: io::$f(),
                flushing: None,
            }
        }

        impl futures_io::AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                $state.poll_write(cx, buf, &mut self.get_mut().flushing)
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                $state.poll_flush(cx, &mut self.get_mut().flushing)
            }

            fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                $state.poll_flush(cx, &mut self.get_mut().flushing)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                $state.poll_write(cx, buf, &mut self.get_mut().flushing)
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                $state.poll_flush(cx, &mut self.get_mut().flushing)
            }

            fn poll_shutdown(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<io::Result<()>> {
                $state.poll_flush(cx, &mut self.get_mut().flushing)
            }
        }

        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.std.as_raw_fd()
            }
        }

        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.std.as_fd()
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($t)).finish_non_exhaustive()
            }
        }
    };
}

write_handle!(
    Stdout,
    stdout,
    STDOUT,
    "output",
    "out.write_all(b\"hello\\n\").await?;"
);
write_handle!(
    Stderr,
    stderr,
    STDERR,
    "error",
    "out.write_all(b\"warning: something\\n\").await?;"
);
