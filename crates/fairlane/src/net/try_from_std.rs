//! `TryFrom` the std socket types, as tokio has it: the same as each
//! type's `from_std` (which adopts the socket into the current runtime,
//! making it non-blocking).

use std::io;

use super::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};

/// `impl TryFrom<$std> for $ours` through `$ours::from_std`.
macro_rules! try_from_std {
    ($($std:ty => $ours:ty),* $(,)?) => {$(
        impl TryFrom<$std> for $ours {
            type Error = io::Error;

            /// As [`from_std`](Self::from_std).
            ///
            /// # Example
            /// ```
            /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
            /// # rt.block_on(async {
            /// let std_l = std::net::TcpListener::bind("127.0.0.1:0")?;
            /// let l = fairlane::net::TcpListener::try_from(std_l)?;
            /// assert_ne!(l.local_addr()?.port(), 0);
            /// # Ok::<(), std::io::Error>(()) })?;
            /// # Ok::<(), std::io::Error>(())
            /// ```
            fn try_from(socket: $std) -> io::Result<Self> {
                <$ours>::from_std(socket)
            }
        }
    )*};
}

try_from_std!(
    std::net::TcpListener => TcpListener,
    std::net::TcpStream => TcpStream,
    std::net::UdpSocket => UdpSocket,
    std::os::unix::net::UnixListener => UnixListener,
    std::os::unix::net::UnixStream => UnixStream,
    std::os::unix::net::UnixDatagram => UnixDatagram,
);
