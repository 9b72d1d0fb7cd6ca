//! An axum application on fairlane, served by `fairlane::axum::serve`.
//!
//! ```text
//! cargo run --release --example axum -- [ADDRESS] [PROCESSORS]
//! ```
//! `ADDRESS` defaults to `127.0.0.1:3000`, `PROCESSORS` to one per core.
//!
//! Routes: `GET /` (a greeting), `POST /users` (a JSON body
//! `{"name": …}`, answered with the user and its id), `GET /users/{id}`,
//! and `GET /peer` (the client's address, from `ConnectInfo`). HTTP/1 and
//! HTTP/2 (`curl --http2-prior-knowledge`) on the same port.
//!
//! On SIGINT or SIGTERM it shuts down gracefully: it stops accepting,
//! closes idle connections, answers the requests in flight, and exits with
//! status 0; connections still busy after [`GRACE`] are closed.

use std::collections::HashMap;
use std::future::IntoFuture;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use fairlane::net::TcpListener;
use fairlane::signal::unix::{signal, SignalKind};

/// How long requests in flight may go on after a shutdown signal.
const GRACE: Duration = Duration::from_secs(10);

#[derive(Deserialize)]
struct NewUser {
    name: String,
}

#[derive(Clone, Serialize)]
struct User {
    id: u64,
    name: String,
}

/// The users, by id.
#[derive(Default)]
struct Users {
    next: AtomicU64,
    by_id: Mutex<HashMap<u64, User>>,
}

async fn create_user(
    State(users): State<Arc<Users>>,
    Json(new): Json<NewUser>,
) -> (StatusCode, Json<User>) {
    let id = users.next.fetch_add(1, Ordering::Relaxed) + 1;
    let user = User { id, name: new.name };
    users.by_id.lock().unwrap().insert(id, user.clone());
    (StatusCode::CREATED, Json(user))
}

async fn user(
    State(users): State<Arc<Users>>,
    Path(id): Path<u64>,
) -> Result<Json<User>, StatusCode> {
    let user = users.by_id.lock().unwrap().get(&id).cloned();
    user.map(Json).ok_or(StatusCode::NOT_FOUND)
}

async fn peer(ConnectInfo(peer): ConnectInfo<SocketAddr>) -> String {
    format!("you are {peer}\n")
}

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "Hello from axum on fairlane!\n" }))
        .route("/users", post(create_user))
        .route("/users/{id}", get(user))
        .route("/peer", get(peer))
        .with_state(Arc::new(Users::default()))
}

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3000".to_string());
    let mut builder = fairlane::Runtime::builder();
    if let Some(p) = args.next() {
        let p = p.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the number of processors must be a number, not {p:?}"),
            )
        })?;
        builder.processors(p);
    }
    let rt = builder.build()?;
    rt.block_on(async {
        // Listening before the server is announced: from then on, SIGINT
        // and SIGTERM no longer end the process, they stop the server.
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let listener = TcpListener::bind(addr.as_str()).await?;
        eprintln!("axum: listening on http://{}", listener.local_addr()?);

        // The signal ends the accept loop and starts the grace period.
        let (stopping, stopped) = async_channel::bounded::<()>(1);
        let shutdown = async move {
            let name = futures_lite::future::or(
                async {
                    interrupt.recv().await;
                    "SIGINT"
                },
                async {
                    terminate.recv().await;
                    "SIGTERM"
                },
            )
            .await;
            eprintln!("axum: {name}: no longer accepting; finishing the requests in flight");
            drop(stopping);
        };
        let server = fairlane::axum::serve(
            listener,
            app().into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .into_future();
        let grace = async {
            // Fails (the sender dropped) once the signal came.
            let _ = stopped.recv().await;
            fairlane::time::sleep(GRACE).await;
            eprintln!("axum: closing the connections still busy after {GRACE:?}");
            Ok::<(), io::Error>(())
        };
        futures_lite::future::or(server, grace).await
    })?;
    // Cancels what the grace period left.
    rt.shutdown_timeout(Duration::from_secs(1));
    eprintln!("axum: stopped");
    Ok(())
}
