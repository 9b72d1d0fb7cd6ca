//! A TCP echo server.
//!
//! ```text
//! cargo run --release --example echo -- [ADDRESS] [PROCESSORS]
//! ```
//! `ADDRESS` defaults to `127.0.0.1:7000`, `PROCESSORS` to one per core.
//! `FAIRLANE_IO_BACKEND=fallback` selects the epoll backend.

use fairlane::net::{TcpListener, TcpStream};

async fn serve(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        let (n, b) = stream.read(buf).await;
        match n {
            Ok(n) if n > 0 => {}
            // End of stream or an error (reset): this connection is done.
            _ => return,
        }
        let (written, b) = stream.write_all(b).await;
        if written.is_err() {
            return;
        }
        buf = b;
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7000".to_string());
    let mut builder = fairlane::Runtime::builder();
    if let Some(p) = args.next() {
        let p: usize = p.parse().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the number of processors must be a number, not {p:?}"),
            )
        })?;
        builder.processors(p);
    }
    let rt = builder.build()?;
    rt.block_on(async {
        let listener = TcpListener::bind(addr.as_str()).await?;
        eprintln!(
            "echo: listening on {} ({} backend)",
            listener.local_addr()?,
            fairlane::Handle::current().io_backend()
        );
        loop {
            match listener.accept().await {
                Ok((stream, _peer)) => {
                    fairlane::spawn(serve(stream));
                }
                // Out of descriptors and the like: report and go on.
                Err(e) => eprintln!("echo: accept failed: {e}"),
            }
        }
    })
}
