//! [`IntoStdError`]: an `into_std` that would have lost data.

use std::fmt;
use std::io;

/// The error inside the `io::Error` (kind `ResourceBusy`) of an
/// `into_std` that would have lost data: the runtime still holds bytes or
/// operations of the socket that the std socket would not see (bytes or
/// datagrams that reads dropped in flight received, writes dropped in
/// flight that are still sending or left bytes to send, or bytes the
/// stream's `AsyncRead` adapter read ahead). It gives the socket back,
/// unchanged: read the data out (or flush, or let the writes finish) and
/// try again.
///
/// # Example
/// ```
/// use fairlane::net::{IntoStdError, TcpStream};
/// fn to_std(stream: TcpStream) -> Result<std::net::TcpStream, TcpStream> {
///     stream.into_std().map_err(|e| {
///         let inner = e.into_inner().expect("into_std's errors carry the socket");
///         inner.downcast::<IntoStdError<TcpStream>>().unwrap().into_inner()
///     })
/// }
/// ```
pub struct IntoStdError<T> {
    socket: T,
}

impl<T> IntoStdError<T> {
    /// The socket, as it was.
    ///
    /// # Example
    /// See [`IntoStdError`].
    /// ```
    /// fn back(e: fairlane::net::IntoStdError<fairlane::net::UdpSocket>) -> fairlane::net::UdpSocket {
    ///     e.into_inner()
    /// }
    /// ```
    pub fn into_inner(self) -> T {
        self.socket
    }
}

/// The `io::Error` that hands `socket` back.
pub(crate) fn refused<T: fmt::Debug + Send + Sync + 'static>(socket: T) -> io::Error {
    io::Error::new(io::ErrorKind::ResourceBusy, IntoStdError { socket })
}

impl<T> fmt::Display for IntoStdError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "into_std would lose data: the runtime holds bytes or operations of this socket \
             (received by reads dropped in flight, writes still sending, or read ahead by the \
             AsyncRead adapter); read them out, flush or let the writes finish, \
             then call into_std again on the socket this error gives back",
        )
    }
}

impl<T: fmt::Debug> fmt::Debug for IntoStdError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntoStdError")
            .field("socket", &self.socket)
            .finish()
    }
}

impl<T: fmt::Debug> std::error::Error for IntoStdError<T> {}
