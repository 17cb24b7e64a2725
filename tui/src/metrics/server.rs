//! The HTTP side of `--metrics`: `std::net`, one accepting thread and at
//! most [`MAX_CLIENTS`] handler threads, every socket with read and write
//! timeouts, so that a client that never sends or never reads costs one
//! bounded thread for a bounded time and never the capture loop, which
//! this module does not touch (a scrape clones the latest snapshot's
//! `Arc`).

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use anyhow::anyhow;
use flate2::Compression;
use flate2::write::GzEncoder;

use super::MetricsConfig;
use super::exposition::Format;
use super::families::{ProcessHealth, render};
use crate::model::Snapshot;

/// Clients served at once; more get 503 and a closed connection.
pub const MAX_CLIENTS: usize = 4;
/// How long a client may take to send its request, or to read (a scrape
/// of a large fleet view is a few MB at most).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// How often the accepting thread looks at the stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(10);

/// Where a scrape takes its snapshot from.
pub type SnapshotSource = Arc<dyn Fn() -> Arc<Snapshot> + Send + Sync>;

/// The running server; [`Server::stop`] (or drop) closes the listener.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `addr` (`HOST:PORT`) and serves. The errors name the address
    /// and what is wrong with it.
    pub fn start(addr: &str, source: SnapshotSource, cfg: MetricsConfig) -> anyhow::Result<Server> {
        Server::serve(bind(addr)?, source, cfg)
    }

    /// Serves on a listener of [`bind`]'s.
    pub fn serve(
        listener: TcpListener,
        source: SnapshotSource,
        cfg: MetricsConfig,
    ) -> anyhow::Result<Server> {
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept_loop(&listener, &flag, &source, cfg))?;
        Ok(Server {
            addr: local,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the port, when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and closes the listener: a scrape from then on
    /// finds the port closed. Scrapes under way finish (bounded by the
    /// timeouts) on their own threads.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shut();
    }
}

/// `addr` as a listener, or an error a user can act on.
pub fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| {
            anyhow!(
                "bad --metrics address '{addr}': {e} (expected HOST:PORT, e.g. 127.0.0.1:9794 or [::1]:9794)"
            )
        })?
        .collect();
    TcpListener::bind(&addrs[..]).map_err(|e| {
        let why = match e.kind() {
            ErrorKind::AddrInUse => {
                "the port is in use (another exporter or metaroce-top?)".to_string()
            }
            ErrorKind::AddrNotAvailable => "that address is not one of this host's".to_string(),
            ErrorKind::PermissionDenied => {
                "permission denied (ports below 1024 need root or cap_net_bind_service)".to_string()
            }
            _ => e.to_string(),
        };
        anyhow!("cannot serve metrics on {addr}: {why}")
    })
}

fn accept_loop(
    listener: &TcpListener,
    stop: &AtomicBool,
    source: &SnapshotSource,
    cfg: MetricsConfig,
) {
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                thread::sleep(ACCEPT_POLL);
                continue;
            }
            // A connection reset before it was accepted, or out of file
            // descriptors: try again later.
            Err(_) => {
                thread::sleep(ACCEPT_POLL);
                continue;
            }
        };
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            active.fetch_sub(1, Ordering::AcqRel);
            busy(stream);
            continue;
        }
        let (mine, source) = (active.clone(), source.clone());
        let spawned = thread::Builder::new()
            .name("metrics-client".into())
            .spawn(move || {
                let _ = serve(stream, &source, cfg);
                mine.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Too many clients: a short 503 if the socket takes it at once, then
/// close (a reset, if the request arrives after the close).
fn busy(mut stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    let _ = stream.write_all(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n",
    );
    let _ = stream.shutdown(std::net::Shutdown::Write);
    // What the client already sent, read so that the close is not a reset.
    let mut buf = [0u8; 1024];
    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
}

/// One request, one response, then close.
fn serve(mut stream: TcpStream, source: &SnapshotSource, cfg: MetricsConfig) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let head = read_head(&mut stream)?;
    let head = String::from_utf8_lossy(&head);
    let mut lines = head.split("\r\n");
    let mut request = lines.next().unwrap_or("").split_whitespace();
    let (method, target) = (request.next().unwrap_or(""), request.next().unwrap_or(""));
    let headers: Vec<(&str, &str)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|&(_, v)| v)
    };
    let accept = header("accept");
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    let (status, content_type, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let format = Format::negotiate(accept);
            let snap = source();
            let body = render(&snap, &cfg, format, ProcessHealth::read());
            ("200 OK", format.content_type(), body)
        }
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/html; charset=utf-8",
            "<html><head><title>metaroce-top</title></head><body><h1>metaroce-top</h1>\
             <p><a href=\"/metrics\">/metrics</a></p></body></html>\n"
                .to_string(),
        ),
        (_, "/metrics" | "/") => (
            "405 Method Not Allowed",
            "text/plain",
            "GET or HEAD\n".into(),
        ),
        _ => (
            "404 Not Found",
            "text/plain",
            "not found: try /metrics\n".into(),
        ),
    };
    // Prometheus asks for gzip: a scrape of many series is a tenth the
    // size on the wire.
    let gzip = path == "/metrics" && accepts_gzip(header("accept-encoding"));
    let (body, encoding) = if gzip {
        (gzipped(body.as_bytes())?, "Content-Encoding: gzip\r\n")
    } else {
        (body.into_bytes(), "")
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{encoding}Vary: Accept-Encoding\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        response.extend_from_slice(&body);
    }
    stream.write_all(&response)?;
    stream.flush()?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// Whether an `Accept-Encoding` value takes gzip (listed, or `*`, and
/// not with `q=0`).
fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    accept_encoding.is_some_and(|v| {
        v.split(',').any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or("");
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
        })
    })
}

/// `body` gzipped at the fastest level (the scrape's time matters more
/// than the last bytes).
pub fn gzipped(body: &[u8]) -> io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::with_capacity(body.len() / 8), Compression::fast());
    gz.write_all(body)?;
    gz.finish()
}

/// The request line and headers (up to the blank line).
fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

#[cfg(test)]
mod test {
    use super::accepts_gzip;

    #[test]
    fn gzip_is_used_when_the_client_takes_it() {
        // Prometheus' own header.
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, GZIP;q=0.5")));
        assert!(accepts_gzip(Some("*")));
        assert!(!accepts_gzip(None));
        assert!(!accepts_gzip(Some("identity")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("br, gzip ; q=0.0")));
    }
}
