//! `UnwindSafe` and `RefUnwindSafe` for the `net` types, as tokio's have
//! them, so that code holding them inside `catch_unwind` ports.
//!
//! Their shared state is the runtime's driver (atomics and locks that
//! recover from poisoning), the socket's carry and kept polls (locks that
//! recover from poisoning), and the trait adapters' state, which a panic
//! during a poll leaves as a valid state (an operation in flight is polled
//! again, or cancelled when dropped): nothing another use could see
//! half-changed.

use std::panic::{RefUnwindSafe, UnwindSafe};

use super::unix::pipe::{Receiver, Sender};
use super::unix::{OwnedReadHalf as UnixOwnedReadHalf, OwnedWriteHalf as UnixOwnedWriteHalf};
use super::{
    tcp, TcpListener, TcpSocket, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixSocket,
    UnixStream,
};

macro_rules! unwind_safe {
    ($($t:ty),* $(,)?) => {$(
        impl UnwindSafe for $t {}
        impl RefUnwindSafe for $t {}
    )*};
}

unwind_safe!(
    TcpListener,
    TcpSocket,
    TcpStream,
    tcp::OwnedReadHalf,
    tcp::OwnedWriteHalf,
    UdpSocket,
    UnixDatagram,
    UnixListener,
    UnixSocket,
    UnixStream,
    UnixOwnedReadHalf,
    UnixOwnedWriteHalf,
    Sender,
    Receiver,
);
