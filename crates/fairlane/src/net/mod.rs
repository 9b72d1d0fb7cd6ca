//! Networking: TCP, UDP and Unix-domain sockets on the runtime's I/O
//! backend, with tokio's shapes and owned buffers.
//!
//! Reads take a buffer by value and hand it back with the result
//! (`(io::Result<usize>, B)`), because with io_uring the kernel writes into
//! it after the call returns; a read that is dropped before it completes is
//! cancelled and its buffer freed only once the kernel is done with it.
//! Streams also implement `futures_io::AsyncRead`/`AsyncWrite` (and, with
//! the `tokio-io` feature, tokio's `AsyncRead`/`AsyncWrite`). With io_uring
//! those trait reads read ahead into a buffer of the stream's own: read a
//! stream through the traits or through `read_owned`, not both, or bytes
//! read ahead come only to the trait's reads.
//!
//! Objects must be created inside a runtime (a task or `block_on`); they
//! use that runtime's backend for their whole life.
//!
//! # Example
//! ```
//! use fairlane::net::{TcpListener, TcpStream};
//! let rt = fairlane::Runtime::builder().processors(2).build()?;
//! rt.block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     fairlane::spawn(async move {
//!         loop {
//!             let (stream, _) = listener.accept().await.unwrap();
//!             fairlane::spawn(async move {
//!                 let mut buf = Vec::with_capacity(1024);
//!                 loop {
//!                     let (n, b) = stream.read_owned(buf).await;
//!                     if !matches!(n, Ok(n) if n > 0) { break; }
//!                     let (r, b) = stream.write_all_owned(b).await;
//!                     if r.is_err() { break; }
//!                     buf = b;
//!                 }
//!             });
//!         }
//!     });
//!     let client = TcpStream::connect(addr).await?;
//!     client.write_all_owned("echo").await.0?;
//!     let (n, buf) = client.read_owned(Vec::with_capacity(16)).await;
//!     assert_eq!(&buf[..n?], b"echo");
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod addr;
mod buf_reads;
mod into_std;
pub(crate) mod socket;
mod stream;
pub mod tcp;
mod tcp_options;
mod tcp_socket;
mod try_from_std;
mod udp;
mod udp_options;
mod udp_poll;
pub mod unix;
mod unix_datagram;
mod unix_datagram_poll;
mod unix_socket;
mod unwind_safe;
mod user_io;

pub use self::addr::{lookup_host, ToSocketAddrs};
pub use self::into_std::IntoStdError;
pub use self::tcp::{TcpListener, TcpStream};
pub use self::tcp_socket::TcpSocket;
pub use self::udp::UdpSocket;
pub use self::unix::{UnixListener, UnixStream};
pub use self::unix_datagram::UnixDatagram;
pub use self::unix_socket::UnixSocket;
