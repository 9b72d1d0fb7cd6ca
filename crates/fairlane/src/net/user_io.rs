//! What the sockets offer for I/O of the caller's own (a system call
//! fairlane does not wrap), as tokio's: `AsFd`, `try_io` and `async_io`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use super::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};
use crate::io::Interest;

/// `AsFd` for a socket type, from its `AsRawFd`.
macro_rules! as_fd {
    ($($t:ty),*) => {$(
        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                // SAFETY: the socket owns its descriptor and closes it
                // only when dropped (or turned into a std socket, which
                // takes it by value), so it stays open for as long as
                // `self` is borrowed.
                unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
            }
        }
    )*};
}

as_fd!(
    TcpListener,
    TcpStream,
    UdpSocket,
    UnixDatagram,
    UnixListener,
    UnixStream
);

/// `try_io` and `async_io` for a socket type with an async `ready`.
macro_rules! user_io {
    ($t:ident) => {
        impl $t {
            /// Runs the caller's non-blocking I/O `f` on the socket (through
            /// its descriptor, `AsRawFd`) without waiting, as tokio's
            /// method of that name: its result, `WouldBlock` included.
            /// fairlane keeps no readiness for its sockets, so `f` always
            /// runs; the next [`async_io`](Self::async_io) or `ready`
            /// asks the socket itself.
            ///
            /// # Errors
            /// `f`'s.
            ///
            /// # Example
            /// ```
            /// use std::os::fd::AsRawFd;
            /// use fairlane::io::Interest;
            #[doc = concat!("fn peek_one(s: &fairlane::net::", stringify!($t), ") -> std::io::Result<usize> {")]
            ///     let mut byte = [0u8; 1];
            ///     s.try_io(Interest::READABLE, || {
            ///         // SAFETY: one writable byte, on the socket's descriptor.
            ///         match unsafe {
            ///             libc::recv(s.as_raw_fd(), byte.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
            ///         } {
            ///             -1 => Err(std::io::Error::last_os_error()),
            ///             n => Ok(n as usize),
            ///         }
            ///     })
            /// }
            /// ```
            pub fn try_io<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                let _ = interest;
                f()
            }

            /// Runs the caller's non-blocking I/O `f` until it does not
            /// return `WouldBlock`, waiting for `interest` in between, as
            /// tokio's method of that name. `f` runs first at once (a
            /// socket that is ready already is served without a wait).
            /// `f` must not block: use `MSG_DONTWAIT` (the io_uring
            /// backend's sockets are in blocking mode) or a descriptor in
            /// non-blocking mode.
            ///
            /// # Errors
            /// `f`'s, or the wait's (the runtime shut down).
            ///
            /// # Example
            /// ```
            /// use std::os::fd::AsRawFd;
            /// use fairlane::io::Interest;
            #[doc = concat!("async fn peek_one(s: &fairlane::net::", stringify!($t), ") -> std::io::Result<u8> {")]
            ///     let mut byte = [0u8; 1];
            ///     s.async_io(Interest::READABLE, || {
            ///         // SAFETY: one writable byte, on the socket's descriptor.
            ///         match unsafe {
            ///             libc::recv(s.as_raw_fd(), byte.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
            ///         } {
            ///             -1 => Err(std::io::Error::last_os_error()),
            ///             n => Ok(n as usize),
            ///         }
            ///     })
            ///     .await?;
            ///     Ok(byte[0])
            /// }
            /// ```
            pub async fn async_io<R>(
                &self,
                interest: Interest,
                mut f: impl FnMut() -> io::Result<R>,
            ) -> io::Result<R> {
                loop {
                    match f() {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        result => return result,
                    }
                    self.ready(interest).await?;
                }
            }
        }
    };
}

user_io!(TcpStream);
user_io!(UnixStream);
user_io!(UdpSocket);
user_io!(UnixDatagram);
