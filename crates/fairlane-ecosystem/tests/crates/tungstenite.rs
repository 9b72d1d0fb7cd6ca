//! tokio-tungstenite, WebSockets: `connect_async` opens its connection
//! with `tokio::net`, so it needs the bridge; the server side,
//! `accept_async` on a stream a fairlane listener accepted, needs only
//! tokio's I/O traits (fairlane's `tokio-io` feature).

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use crate::common::assert_on_fairlane_task;

/// A WebSocket echo server on fairlane: every connection a fairlane task.
async fn echo_server() -> std::net::SocketAddr {
    let listener = fairlane::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    fairlane::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            fairlane::spawn(async move {
                let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
                while let Some(Ok(message)) = ws.next().await {
                    match message {
                        message @ (Message::Text(_) | Message::Binary(_)) => {
                            ws.send(message).await.unwrap()
                        }
                        Message::Close(_) => break,
                        _ => {}
                    }
                }
            });
        }
    });
    addr
}

/// Clients in fairlane tasks connect with `connect_async`, exchange
/// messages with the echo server and close.
async fn clients_exchange_messages() {
    const CLIENTS: usize = 8;
    const MESSAGES: usize = 16;
    let addr = echo_server().await;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            fairlane::spawn(async move {
                assert_on_fairlane_task();
                let (mut ws, response) = tokio_tungstenite::connect_async(format!("ws://{addr}/"))
                    .await
                    .unwrap();
                assert_eq!(response.status(), 101);
                for m in 0..MESSAGES {
                    let text = format!("client {c} message {m}");
                    ws.send(Message::text(text.clone())).await.unwrap();
                    match ws.next().await.unwrap().unwrap() {
                        Message::Text(echo) => assert_eq!(echo.as_str(), text),
                        other => panic!("expected a text message, got {other:?}"),
                    }
                }
                ws.send(Message::binary(vec![c as u8; 3])).await.unwrap();
                assert_eq!(
                    ws.next().await.unwrap().unwrap(),
                    Message::binary(vec![c as u8; 3])
                );
                ws.close(None).await.unwrap();
                MESSAGES
            })
        })
        .collect();
    let mut echoed = 0;
    for client in clients {
        echoed += client.await.unwrap();
    }
    assert_eq!(echoed, CLIENTS * MESSAGES);
}

#[fairlane::test(processors = 2)]
async fn connect_async_multi_thread() {
    clients_exchange_messages().await;
}

#[fairlane::test(flavor = "current_thread")]
async fn connect_async_current_thread() {
    clients_exchange_messages().await;
}
