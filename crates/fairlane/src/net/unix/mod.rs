//! Unix-domain stream sockets: [`UnixListener`] and [`UnixStream`], and
//! the stream's halves: borrowed ([`UnixStream::split`]) and owned
//! ([`UnixStream::into_split`]); and [`pipe`]s.

mod listener;
mod owned_split;
pub mod pipe;
mod split;
mod stream;
mod ucred;

pub use self::listener::UnixListener;
pub use self::owned_split::{OwnedReadHalf, OwnedWriteHalf, ReuniteError};
pub use self::split::{ReadHalf, WriteHalf};
pub use self::stream::UnixStream;
pub use self::ucred::UCred;
/// A Unix-domain socket address (std's type).
pub use std::os::unix::net::SocketAddr;
