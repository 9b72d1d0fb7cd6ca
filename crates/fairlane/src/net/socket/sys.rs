//! Plain system calls on socket descriptors: error conversion, options,
//! `O_NONBLOCK`, and std views.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{FromRawFd, RawFd};

/// Converts a `-1`-on-error system call result.
pub(crate) fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub(super) fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Reads and clears the socket's pending error (`SO_ERROR`).
pub(crate) fn take_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: writes one c_int into the live local.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

pub(crate) fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on our own descriptor, no pointers.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let new = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    if new != flags {
        // SAFETY: as above.
        cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, new) })?;
    }
    Ok(())
}

/// Runs `f` on a std view of `fd` (for socket options and addresses)
/// without taking ownership.
pub(crate) fn with_std<S: FromRawFd, R>(fd: RawFd, f: impl FnOnce(&S) -> R) -> R {
    // SAFETY: the view is never dropped (ManuallyDrop), so `fd` stays owned
    // by its socket, which outlives this call.
    let view = std::mem::ManuallyDrop::new(unsafe { S::from_raw_fd(fd) });
    f(&view)
}

/// Sets socket option `name` at `level` to `value` (`setsockopt`).
pub(crate) fn set_option<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: T,
) -> io::Result<()> {
    // SAFETY: setsockopt reads `size_of::<T>()` bytes from the live local.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Reads socket option `name` at `level` (`getsockopt`); `T` must be a
/// plain C type for which all-zero bytes are a valid value.
pub(crate) fn option<T: Copy>(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    // SAFETY: the callers use C integer and struct types, for which
    // all-zero bytes are valid.
    let mut value: T = unsafe { zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the live local.
    cvt(unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut T).cast(), &mut len) })?;
    Ok(value)
}
