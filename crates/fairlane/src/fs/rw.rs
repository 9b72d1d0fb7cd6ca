//! Reads and writes of an open file, at a position or at its cursor (the
//! kernel's file offset), on whichever engine the runtime has: one io_uring
//! `READ`/`WRITE` (offset `-1` for the cursor: the kernel reads or writes
//! at the file offset and advances it, as `read(2)`/`write(2)` do), or the
//! matching system call on the blocking pool.

use std::fs::File as StdFile;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use io_uring::{opcode, types};

use super::on_pool;
use crate::io::driver::Driver;
use crate::io::{submit_and_wait, IoBackend, IoBuf, IoBufMut};

/// Where a read or write happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum At {
    /// At this file position; the cursor does not move.
    Pos(u64),
    /// At the cursor, which moves past the bytes read or written.
    Cursor,
}

impl At {
    /// The io_uring offset: `-1` (all ones) is "the file offset"
    /// (`IORING_FEAT_RW_CUR_POS`, Linux 5.6, which the opcodes the io_uring
    /// backend requires imply).
    fn ring_offset(self) -> u64 {
        match self {
            At::Pos(pos) => pos,
            At::Cursor => u64::MAX,
        }
    }

    /// `n` bytes further on.
    pub(super) fn advanced(self, n: usize) -> At {
        match self {
            At::Pos(pos) => At::Pos(pos + n as u64),
            At::Cursor => At::Cursor,
        }
    }
}

/// `pos` as the kernel's `off_t`: positions from 2^63 on are bad input
/// (io_uring would take all ones for "the cursor").
pub(super) fn check_pos(pos: u64) -> io::Result<libc::off64_t> {
    libc::off64_t::try_from(pos).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a file position must be below 2^63",
        )
    })
}

/// Runs the system call `call` (an `ssize_t` result) until it is not
/// interrupted: the count, or the `errno` error.
fn retried(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        match call() {
            n if n >= 0 => return Ok(n as usize),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Whether `at` is a position the kernel takes.
fn check_at(at: At) -> io::Result<()> {
    match at {
        At::Pos(pos) => check_pos(pos).map(drop),
        At::Cursor => Ok(()),
    }
}

/// The io_uring read or write `build` makes for the file's descriptor and
/// `buf`. The operation also holds the file, so that its descriptor stays
/// open until the kernel is done, even if this future is dropped.
async fn on_ring<B: Send + 'static>(
    driver: &Driver,
    file: &Arc<StdFile>,
    buf: B,
    build: impl FnOnce(types::Fd, &mut B) -> io_uring::squeue::Entry,
) -> (io::Result<usize>, B) {
    let fd = types::Fd(file.as_raw_fd());
    let (r, (buf, _)) = submit_and_wait(driver, (buf, file.clone()), |(b, _)| build(fd, b)).await;
    (r, buf)
}

/// Reads into `buf` (from its start, at most `len` bytes and at most its
/// capacity) at `at`, marking the bytes read initialised; the count read.
pub(super) async fn read_some<B: IoBufMut>(
    driver: &Driver,
    file: &Arc<StdFile>,
    buf: B,
    len: usize,
    at: At,
) -> (io::Result<usize>, B) {
    if let Err(e) = check_at(at) {
        return (Err(e), buf);
    }
    let len = len.min(buf.bytes_total());
    let (result, mut buf) = if driver.backend() == IoBackend::IoUring {
        on_ring(driver, file, buf, |fd, b| {
            let len = len.min(u32::MAX as usize) as u32;
            opcode::Read::new(fd, b.stable_mut_ptr(), len)
                .offset(at.ring_offset())
                .build()
        })
        .await
    } else {
        let file = file.clone();
        on_pool(buf, move |buf| {
            let ptr = buf.stable_mut_ptr();
            sys_read(&file, ptr, len, at)
        })
        .await
    };
    if let Ok(n) = result {
        // SAFETY: the kernel wrote `n <= len <= bytes_total` bytes from the
        // buffer's start.
        unsafe { buf.set_init(n) };
    }
    (result, buf)
}

/// One `read`/`pread` of up to `len` bytes into `ptr`, retried when
/// interrupted.
///
/// The memory at `ptr` may be uninitialised, so it is passed to the kernel
/// as a raw pointer, never as a `&mut [u8]`.
pub(super) fn sys_read(file: &StdFile, ptr: *mut u8, len: usize, at: At) -> io::Result<usize> {
    let fd = file.as_raw_fd();
    match at {
        At::Pos(pos) => {
            let offset = check_pos(pos)?;
            // SAFETY: `ptr .. ptr + len` is writable memory (the caller's
            // buffer, alive across the call); the descriptor is owned by
            // `file`, alive here.
            retried(|| unsafe { libc::pread64(fd, ptr.cast(), len, offset) })
        }
        // SAFETY: as above.
        At::Cursor => retried(|| unsafe { libc::read(fd, ptr.cast(), len) }),
    }
}

/// Reads up to `len` bytes at the cursor into the spare capacity of the
/// empty `data`, which holds them afterwards.
pub(super) fn sys_read_vec(file: &StdFile, data: &mut Vec<u8>, len: usize) -> io::Result<usize> {
    data.clear();
    data.reserve(len);
    let n = sys_read(file, data.as_mut_ptr(), len, At::Cursor)?;
    // SAFETY: the kernel wrote `n <= len <= capacity` bytes from the start.
    unsafe { data.set_len(n) };
    Ok(n)
}

/// Writes some of `buf[start..]` at `at`; the count written.
pub(super) async fn write_some<B: IoBuf>(
    driver: &Driver,
    file: &Arc<StdFile>,
    buf: B,
    start: usize,
    at: At,
) -> (io::Result<usize>, B) {
    if let Err(e) = check_at(at) {
        return (Err(e), buf);
    }
    let start = start.min(buf.bytes_init());
    if driver.backend() == IoBackend::IoUring {
        on_ring(driver, file, buf, |fd, b| {
            let len = (b.bytes_init() - start).min(u32::MAX as usize) as u32;
            // SAFETY: `start <= bytes_init`: inside the buffer.
            let ptr = unsafe { b.stable_ptr().add(start) };
            opcode::Write::new(fd, ptr, len)
                .offset(at.ring_offset())
                .build()
        })
        .await
    } else {
        let file = file.clone();
        on_pool(buf, move |buf| {
            sys_write(&file, &crate::io::init_slice(buf)[start..], at)
        })
        .await
    }
}

/// Writes all of `buf` at `at` (from the position on, or at the cursor).
pub(super) async fn write_all<B: IoBuf>(
    driver: &Driver,
    file: &Arc<StdFile>,
    buf: B,
    at: At,
) -> (io::Result<()>, B) {
    crate::io::write_all_with(buf, |buf, done| {
        write_some(driver, file, buf, done, at.advanced(done))
    })
    .await
}

/// One `write`/`pwrite` of `data` at `at`, retried when interrupted.
fn sys_write(file: &StdFile, data: &[u8], at: At) -> io::Result<usize> {
    let (fd, ptr, len) = (file.as_raw_fd(), data.as_ptr().cast(), data.len());
    match at {
        At::Pos(pos) => {
            let offset = check_pos(pos)?;
            // SAFETY: `data` is readable for its length; the descriptor is
            // owned by `file`, alive here.
            retried(|| unsafe { libc::pwrite64(fd, ptr, len, offset) })
        }
        // SAFETY: as above.
        At::Cursor => retried(|| unsafe { libc::write(fd, ptr, len) }),
    }
}

/// Moves the cursor back by `n` bytes (read ahead and not handed out): a
/// relative `lseek`, which does not reach the file system's storage.
pub(super) fn rewind(file: &StdFile, n: u64) -> io::Result<()> {
    if n == 0 {
        return Ok(());
    }
    let back = libc::off64_t::try_from(n)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "rewind too far"))?;
    // SAFETY: a plain system call on a descriptor `file` owns.
    let r = unsafe { libc::lseek64(file.as_raw_fd(), -back, libc::SEEK_CUR) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
