//! tonic, gRPC over HTTP/2: its server runs each connection as a tokio
//! task, its `Channel` client a tokio task behind a buffer, both on tokio's
//! timers. A greeter service written as its generated code would be (a
//! prost message and a tower service around `tonic::server::Grpc`; no
//! protoc), served from a fairlane task on a tokio listener (`serve`) and on
//! connections a fairlane listener accepts (`serve_with_incoming`), called
//! from many fairlane tasks over one `Channel`.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::codegen::{http, BoxFuture, Service};
use tonic::transport::server::{Connected, Server};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use crate::common::assert_on_fairlane_task;

#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloRequest {
    #[prost(string, tag = "1")]
    pub name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HelloReply {
    #[prost(string, tag = "1")]
    pub message: String,
}

const SAY_HELLO: &str = "/fairlane.Greeter/SayHello";

/// The server side of the service: what tonic's code generator writes for
/// one unary method.
#[derive(Clone, Default)]
struct GreeterServer;

impl tonic::server::NamedService for GreeterServer {
    const NAME: &'static str = "fairlane.Greeter";
}

/// The method's handler.
struct SayHello;

impl tonic::server::UnaryService<HelloRequest> for SayHello {
    type Response = HelloReply;
    type Future = BoxFuture<Response<HelloReply>, Status>;

    fn call(&mut self, request: Request<HelloRequest>) -> Self::Future {
        Box::pin(async move {
            // The handler runs in the server's connection task, a tokio
            // task: tonic spawns it.
            let name = request.into_inner().name;
            if name.is_empty() {
                return Err(Status::invalid_argument("a name is needed"));
            }
            Ok(Response::new(HelloReply {
                message: format!("hello, {name}"),
            }))
        })
    }
}

impl<B> Service<http::Request<B>> for GreeterServer
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() == SAY_HELLO {
            Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(ProstCodec::default());
                Ok(grpc.unary(SayHello, request).await)
            })
        } else {
            Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) })
        }
    }
}

/// The client side: what the code generator writes, on a `Channel`.
#[derive(Clone)]
struct GreeterClient(tonic::client::Grpc<Channel>);

impl GreeterClient {
    async fn say_hello(&mut self, name: &str) -> Result<String, Status> {
        self.0
            .ready()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let request = Request::new(HelloRequest { name: name.into() });
        let path = http::uri::PathAndQuery::from_static(SAY_HELLO);
        let reply: Response<HelloReply> =
            self.0.unary(request, path, ProstCodec::default()).await?;
        Ok(reply.into_inner().message)
    }
}

/// Connects a `Channel` from a fairlane task and makes calls from many
/// fairlane tasks sharing it.
async fn call_from_many_tasks(addr: SocketAddr) {
    const TASKS: usize = 16;
    const CALLS: usize = 8;
    let client = fairlane::spawn(async move {
        assert_on_fairlane_task();
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        GreeterClient(tonic::client::Grpc::new(channel))
    })
    .await
    .unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let mut client = client.clone();
            fairlane::spawn(async move {
                assert_on_fairlane_task();
                for c in 0..CALLS {
                    let name = format!("task {t} call {c}");
                    let message = client.say_hello(&name).await.unwrap();
                    assert_eq!(message, format!("hello, {name}"));
                }
                let status = client.say_hello("").await.unwrap_err();
                assert_eq!(status.code(), tonic::Code::InvalidArgument);
                CALLS
            })
        })
        .collect();
    let mut calls = 0;
    for task in tasks {
        calls += task.await.unwrap();
    }
    assert_eq!(calls, TASKS * CALLS);
}

/// A port nothing listens on yet, for `Server::serve`, which binds it.
fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `Server::serve_with_shutdown` in a fairlane task (tonic binds a tokio
/// listener), called over a `Channel`, then shut down.
async fn serve_and_call() {
    let addr = free_port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = fairlane::spawn(async move {
        assert_on_fairlane_task();
        Server::builder()
            .add_service(GreeterServer)
            .serve_with_shutdown(addr, async {
                let _ = stopped.await;
            })
            .await
    });
    // The server binds when first polled: retry until it listens.
    let mut tries = 0;
    while std::net::TcpStream::connect(addr).is_err() {
        tries += 1;
        assert!(tries < 1000, "the server never listened on {addr}");
        fairlane::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    call_from_many_tasks(addr).await;
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[fairlane::test(processors = 2)]
async fn serve_and_call_multi_thread() {
    serve_and_call().await;
}

#[fairlane::test(flavor = "current_thread")]
async fn serve_and_call_current_thread() {
    serve_and_call().await;
}

/// A connection accepted by fairlane's listener, as tonic's server takes
/// it: tokio's I/O traits (fairlane's `tokio-io` feature) and `Connected`.
struct FairlaneConn(fairlane::net::TcpStream);

impl Connected for FairlaneConn {
    type ConnectInfo = Option<SocketAddr>;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.0.peer_addr().ok()
    }
}

impl tokio::io::AsyncRead for FairlaneConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for FairlaneConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// `Server::serve_with_incoming` on the connections a fairlane listener
/// accepts.
#[fairlane::test(processors = 2)]
async fn serve_with_incoming_fairlane_connections() {
    let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = futures_util::stream::unfold(listener, |listener| async move {
        let conn = listener.accept().await.map(|(s, _)| FairlaneConn(s));
        Some((conn, listener))
    });
    let server = fairlane::spawn(async move {
        assert_on_fairlane_task();
        Server::builder()
            .add_service(GreeterServer)
            .serve_with_incoming(incoming)
            .await
    });
    call_from_many_tasks(addr).await;
    server.abort();
}
