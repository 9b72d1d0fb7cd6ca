//! Unix-domain stream sockets: [`UnixListener`] and [`UnixStream`].

mod listener;
mod stream;

pub use self::listener::UnixListener;
pub use self::stream::UnixStream;
