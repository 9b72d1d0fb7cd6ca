//! TCP: [`TcpListener`] and [`TcpStream`].
//!
//! # Example
//! ```
//! use fairlane::net::{TcpListener, TcpStream};
//! use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! let got = rt.block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     let client = fairlane::spawn(async move { TcpStream::connect(addr).await?.write_all(b"ping").await });
//!     let (mut stream, _) = listener.accept().await?;
//!     client.await.unwrap()?; // the client's stream is dropped: the server reads to the end
//!     let mut got = Vec::new();
//!     stream.read_to_end(&mut got).await?;
//!     Ok::<_, std::io::Error>(got)
//! })?;
//! assert_eq!(got, b"ping");
//! # Ok::<(), std::io::Error>(())
//! ```

mod listener;
mod owned_split;
mod split;
mod stream;

pub use self::listener::{Incoming, TcpListener};
pub use self::owned_split::{OwnedReadHalf, OwnedWriteHalf, ReuniteError};
pub use self::split::{ReadHalf, WriteHalf};
pub use self::stream::TcpStream;
