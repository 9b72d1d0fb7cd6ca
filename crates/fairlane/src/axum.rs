//! axum on fairlane (`axum` feature): [`serve`] is `axum::serve`, with
//! fairlane's listeners and tasks.
//!
//! `axum::serve` needs tokio's listener and spawns every connection with
//! `tokio::spawn`, so it cannot run on fairlane. [`serve`] has its shapes
//! ([`Serve`], `.await` through [`IntoFuture`](std::future::IntoFuture),
//! [`with_graceful_shutdown`](Serve::with_graceful_shutdown) returning
//! [`WithGracefulShutdown`], [`local_addr`](Serve::local_addr), the
//! [`Listener`] trait with [`ListenerExt::tap_io`], [`IncomingStream`]) and
//! takes what `axum::serve` takes: a `Router`, a `MethodRouter`, a handler's
//! service, `into_make_service()`, and
//! `into_make_service_with_connect_info::<SocketAddr>()` for the
//! `ConnectInfo` extractor. Each connection is a fairlane task, served by
//! hyper over HTTP/1 or HTTP/2 on the same port (an HTTP/2 client that
//! opens with the preface, without TLS, gets HTTP/2), with
//! [`crate::hyper::Executor`] and [`crate::hyper::Timer`].
//!
//! What differs from `axum::serve`: the listener is fairlane's
//! ([`TcpListener`](crate::net::TcpListener),
//! [`UnixListener`](crate::net::UnixListener), or a [`Listener`] of one's
//! own whose streams implement hyper's `rt::Read`/`rt::Write`). As with
//! `axum::serve`, HTTP/1 connections have no header read timeout: an idle
//! keep-alive connection stays open until its client closes it or the
//! server shuts down. Accept errors are dealt with as axum does: the next
//! accept follows at once after an error about the one connection; any
//! other (out of descriptors, above all) is reported as a `tracing` event
//! at error level, and accepting resumes a second later. The loop never
//! ends on an error.
//!
//! # Porting from tokio
//! An axum program ports by replacing `axum::serve` with
//! `fairlane::axum::serve`, tokio's listener, runtime and signals with
//! fairlane's. The tokio program:
//! ```text
//! use axum::{extract::Path, routing::get, Router};
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let app = Router::new().route("/users/{id}", get(|Path(id): Path<u32>| async move {
//!         format!("user {id}")
//!     }));
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     axum::serve(listener, app)
//!         .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.unwrap() })
//!         .await
//! }
//! ```
//! on fairlane (`fairlane = { …, features = ["axum"] }`; axum itself is
//! unchanged, its default features included):
//! ```no_run
//! use axum::{extract::Path, routing::get, Router};
//!
//! #[fairlane::main]
//! async fn main() -> std::io::Result<()> {
//!     let app = Router::new().route("/users/{id}", get(|Path(id): Path<u32>| async move {
//!         format!("user {id}")
//!     }));
//!     let listener = fairlane::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     fairlane::axum::serve(listener, app)
//!         .with_graceful_shutdown(async { fairlane::signal::ctrl_c().await.unwrap() })
//!         .await
//! }
//! ```
//!
//! # Example
//! A server with `ConnectInfo`, a request to it, and its graceful shutdown:
//! ```
//! use std::future::IntoFuture;
//! use std::io::{Read, Write};
//! use std::net::SocketAddr;
//! use axum::{extract::ConnectInfo, routing::get, Router};
//!
//! let rt = fairlane::Runtime::builder().processors(2).build()?;
//! let (stop, stopped) = async_channel::bounded::<()>(1);
//! let (addr, server) = rt.block_on(async {
//!     let app = Router::new().route(
//!         "/",
//!         get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { format!("hello {}", peer.ip()) }),
//!     );
//!     let listener = fairlane::net::TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     let server = fairlane::axum::serve(
//!         listener,
//!         app.into_make_service_with_connect_info::<SocketAddr>(),
//!     )
//!     .with_graceful_shutdown(async move { let _ = stopped.recv().await; });
//!     Ok::<_, std::io::Error>((addr, fairlane::spawn(server.into_future())))
//! })?;
//!
//! let mut client = std::net::TcpStream::connect(addr)?;
//! client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")?;
//! let mut response = String::new();
//! client.read_to_string(&mut response)?;
//! assert!(response.starts_with("HTTP/1.1 200 OK"));
//! assert!(response.ends_with("hello 127.0.0.1"));
//!
//! drop(stop);
//! rt.block_on(server).unwrap()?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod drain;
mod listener;
mod serve;
mod service;

pub use listener::{Listener, ListenerExt, TapIo};
pub use serve::{serve, IncomingStream, Serve, ServeFuture, WithGracefulShutdown};
