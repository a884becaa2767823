//! The network budget of a fetch, enforced by a loopback relay between libgit2 and the remote.
//!
//! libgit2 has no per-fetch timeout: its socket timeouts are process-wide settings behind an
//! `unsafe` API, and it has no low-speed limit or size cap at all. So every fetch goes through a
//! relay on 127.0.0.1 that this module runs for the length of one fetch: a CONNECT proxy for
//! https remotes (TLS still runs end to end, certificates checked against the real host), and a
//! plain TCP forward for ssh and http ones (libgit2 is handed `ssh://user@127.0.0.1:PORT/path`
//! or `http://127.0.0.1:PORT/path`; SSH host keys are still checked against the real host's name;
//! libgit2 cannot send plain http through a proxy). The relay connects with the connect timeout and counts bytes; when the
//! transfer is slower than the low-speed limit for the low-speed time, runs past the total
//! timeout, or receives more than the size cap, it records why and closes every connection, so
//! libgit2's blocked read returns and the fetch fails with that reason instead of hanging.
//!
//! Plain threads, not tasks: the fetch itself runs on the blocking pool, and a relay holds at
//! most a few connections.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The limits of one fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchBudget {
    /// Connecting to the remote (TCP, per connection).
    pub connect_timeout: Duration,
    /// A transfer slower than `low_speed_limit` bytes per second for `low_speed_time` is cut.
    pub low_speed_limit: u64,
    pub low_speed_time: Duration,
    /// The whole fetch, from the first connection to the last byte.
    pub timeout: Duration,
    /// Bytes received from the remote in one fetch.
    pub max_fetch_bytes: u64,
    /// The size of one file read from a commit.
    pub max_file_bytes: u64,
}

impl Default for FetchBudget {
    fn default() -> FetchBudget {
        FetchBudget {
            connect_timeout: Duration::from_secs(15),
            low_speed_limit: 1024,
            low_speed_time: Duration::from_secs(30),
            timeout: Duration::from_secs(300),
            max_fetch_bytes: 1024 * 1024 * 1024,
            max_file_bytes: 16 * 1024 * 1024,
        }
    }
}

/// Why the relay cut a fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetExceeded {
    Connect {
        target: String,
        message: String,
    },
    LowSpeed {
        bytes: u64,
        window: Duration,
        limit: u64,
    },
    Timeout(Duration),
    TooLarge(u64),
}

impl std::fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetExceeded::Connect { target, message } => {
                write!(
                    f,
                    "connecting to {target} failed: {message} (fetch.connectTimeout)"
                )
            }
            BudgetExceeded::LowSpeed {
                bytes,
                window,
                limit,
            } => write!(
                f,
                "the transfer stalled: {bytes} bytes in {}s, under the limit of {limit} bytes/s \
                 (fetch.lowSpeedLimit, fetch.lowSpeedTime)",
                window.as_secs()
            ),
            BudgetExceeded::Timeout(timeout) => write!(
                f,
                "the fetch took longer than {}s (fetch.timeout)",
                timeout.as_secs()
            ),
            BudgetExceeded::TooLarge(cap) => write!(
                f,
                "the fetch received more than {} MiB (fetch.maxSize); raise it or fetch a smaller \
                 repository",
                cap / (1024 * 1024)
            ),
        }
    }
}

/// Where the relay sends libgit2's connections.
#[derive(Debug, Clone)]
pub enum RelayMode {
    /// An HTTP CONNECT proxy: the target comes from each connection's request.
    ConnectProxy,
    /// Every connection goes to this `host:port`.
    Forward(String),
}

#[derive(Debug, Default)]
struct RelayState {
    stop: AtomicBool,
    received: AtomicU64,
    sent: AtomicU64,
    exceeded: Mutex<Option<BudgetExceeded>>,
    sockets: Mutex<Vec<TcpStream>>,
}

impl RelayState {
    fn cut(&self, reason: BudgetExceeded) {
        let mut exceeded = self.exceeded.lock().unwrap_or_else(PoisonError::into_inner);
        if exceeded.is_none() {
            tracing::debug!(%reason, "fetch relay cuts every connection");
            *exceeded = Some(reason);
        }
        drop(exceeded);
        self.stop.store(true, Ordering::Release);
        for socket in self
            .sockets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    fn track(&self, socket: &TcpStream) {
        if let Ok(clone) = socket.try_clone() {
            self.sockets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(clone);
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// A running relay; [`Relay::finish`] stops it and says whether it cut the fetch.
#[derive(Debug)]
pub struct Relay {
    addr: SocketAddr,
    state: Arc<RelayState>,
    monitor: Option<JoinHandle<()>>,
}

/// How often the relay checks its budget and its threads look for a stop.
const TICK: Duration = Duration::from_millis(50);

impl Relay {
    /// Starts a relay on an ephemeral loopback port.
    ///
    /// # Errors
    ///
    /// When no loopback port can be bound.
    pub fn start(mode: RelayMode, budget: FetchBudget) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(RelayState::default());
        let monitor_state = state.clone();
        let monitor = std::thread::Builder::new()
            .name("git-relay".to_owned())
            .spawn(move || monitor(listener, mode, budget, monitor_state))?;
        Ok(Relay {
            addr,
            state,
            monitor: Some(monitor),
        })
    }

    /// The loopback address libgit2 connects to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the relay (closing any connection left) and returns why it cut the fetch, if it did.
    pub fn finish(mut self) -> Option<BudgetExceeded> {
        self.stop();
        self.state
            .exceeded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn stop(&mut self) {
        self.state.stop.store(true, Ordering::Release);
        if let Some(monitor) = self.monitor.take() {
            let _ = monitor.join();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Accepts connections and checks the budget every tick until stopped.
fn monitor(listener: TcpListener, mode: RelayMode, budget: FetchBudget, state: Arc<RelayState>) {
    let started = Instant::now();
    let mut window_start = started;
    let mut window_base = 0u64;
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    while !state.stopped() {
        match listener.accept() {
            Ok((client, _)) => {
                let (mode, budget, state) = (mode.clone(), budget.clone(), state.clone());
                if let Ok(handle) = std::thread::Builder::new()
                    .name("git-relay-conn".to_owned())
                    .spawn(move || serve(client, &mode, &budget, &state))
                {
                    connections.push(handle);
                }
                continue;
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => tracing::debug!(%error, "fetch relay accept failed"),
        }
        let now = Instant::now();
        let moved = state.received.load(Ordering::Acquire) + state.sent.load(Ordering::Acquire);
        if now.duration_since(started) > budget.timeout {
            state.cut(BudgetExceeded::Timeout(budget.timeout));
        } else if now.duration_since(window_start) >= budget.low_speed_time {
            let window = now.duration_since(window_start);
            let bytes = moved - window_base;
            let floor = budget
                .low_speed_limit
                .saturating_mul(window.as_secs().max(1));
            if bytes < floor {
                state.cut(BudgetExceeded::LowSpeed {
                    bytes,
                    window,
                    limit: budget.low_speed_limit,
                });
            }
            window_start = now;
            window_base = moved;
        }
        std::thread::sleep(TICK);
    }
    for socket in state
        .sockets
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
    {
        let _ = socket.shutdown(Shutdown::Both);
    }
    for connection in connections {
        let _ = connection.join();
    }
}

/// One connection from libgit2: find the target, connect, then pump bytes both ways.
fn serve(mut client: TcpStream, mode: &RelayMode, budget: &FetchBudget, state: &RelayState) {
    state.track(&client);
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(TICK));
    let target = match mode {
        RelayMode::Forward(target) => target.clone(),
        RelayMode::ConnectProxy => match read_proxy_request(&mut client, state) {
            Some(target) => target,
            None => return,
        },
    };
    let upstream = match connect(&target, budget.connect_timeout) {
        Ok(upstream) => upstream,
        Err(error) => {
            state.cut(BudgetExceeded::Connect {
                target,
                message: error.to_string(),
            });
            return;
        }
    };
    state.track(&upstream);
    let _ = upstream.set_read_timeout(Some(TICK));
    let upstream_writer = match upstream.try_clone() {
        Ok(writer) => writer,
        Err(_) => return,
    };
    if matches!(mode, RelayMode::ConnectProxy)
        && client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .is_err()
    {
        return;
    }
    let Ok(client_writer) = client.try_clone() else {
        return;
    };
    std::thread::scope(|scope| {
        scope.spawn(|| pump(client, upstream_writer, &state.sent, None, state));
        pump(
            upstream,
            client_writer,
            &state.received,
            Some(budget.max_fetch_bytes),
            state,
        );
    });
}

/// Reads the proxy request head, `CONNECT host:port` (answered by the caller).
fn read_proxy_request(client: &mut TcpStream, state: &RelayState) -> Option<String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 4096];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        if head.len() > 64 * 1024 || state.stopped() {
            return None;
        }
        match client.read(&mut buffer) {
            Ok(0) => return None,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
            Err(error) if is_timeout(&error) => {}
            Err(_) => return None,
        }
    }
    let line_end = head.iter().position(|&byte| byte == b'\r')?;
    let line = std::str::from_utf8(&head[..line_end]).ok()?;
    match line.split(' ').collect::<Vec<_>>().as_slice() {
        ["CONNECT", target, ..] => Some((*target).to_owned()),
        _ => None,
    }
}

fn connect(target: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    let mut last_error = std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{target} resolves to no address"),
    );
    for addr in target.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = error,
        }
    }
    Err(last_error)
}

/// Copies `from` to `to` until end of stream, an error or a stop, counting into `counter`; past
/// `cap` bytes (counted over the whole fetch) it cuts the fetch before passing them on.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    counter: &AtomicU64,
    cap: Option<u64>,
    state: &RelayState,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                let total = counter.fetch_add(n as u64, Ordering::AcqRel) + n as u64;
                if let Some(cap) = cap.filter(|cap| total > *cap) {
                    state.cut(BudgetExceeded::TooLarge(cap));
                    return;
                }
                if to.write_all(&buffer[..n]).is_err() {
                    let _ = from.shutdown(Shutdown::Both);
                    return;
                }
            }
            Err(error) if is_timeout(&error) => {
                if state.stopped() {
                    return;
                }
            }
            Err(_) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

fn is_timeout(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers every connection with `bytes` bytes (until the reader goes), then
    /// closes it.
    fn sending_server(bytes: usize) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            while let Ok((mut stream, _)) = listener.accept() {
                let chunk = vec![b'x'; 16 * 1024];
                let mut left = bytes;
                while left > 0 {
                    let n = left.min(chunk.len());
                    if stream.write_all(&chunk[..n]).is_err() {
                        break;
                    }
                    left -= n;
                }
            }
        });
        addr
    }

    fn read_all_through(relay: &Relay) -> usize {
        let mut client = TcpStream::connect(relay.addr()).expect("connect to the relay");
        let mut buffer = vec![0u8; 64 * 1024];
        let mut total = 0;
        while let Ok(n) = client.read(&mut buffer) {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    }

    #[test]
    fn a_transfer_within_budget_passes_untouched() {
        let server = sending_server(200_000);
        let relay = Relay::start(
            RelayMode::Forward(server.to_string()),
            FetchBudget::default(),
        )
        .expect("relay");
        assert_eq!(read_all_through(&relay), 200_000);
        assert_eq!(relay.finish(), None);
    }

    #[test]
    fn a_transfer_over_the_size_cap_is_cut() {
        let server = sending_server(usize::MAX);
        let budget = FetchBudget {
            max_fetch_bytes: 1024 * 1024,
            ..FetchBudget::default()
        };
        let relay = Relay::start(RelayMode::Forward(server.to_string()), budget).expect("relay");
        let received = read_all_through(&relay);
        assert!(received <= 1024 * 1024, "received {received} bytes");
        assert_eq!(relay.finish(), Some(BudgetExceeded::TooLarge(1024 * 1024)));
    }

    #[test]
    fn a_connect_failure_is_reported() {
        // Nothing listens on port 9 of loopback.
        let relay = Relay::start(
            RelayMode::Forward("127.0.0.1:9".to_owned()),
            FetchBudget::default(),
        )
        .expect("relay");
        assert_eq!(read_all_through(&relay), 0);
        assert!(matches!(
            relay.finish(),
            Some(BudgetExceeded::Connect { .. })
        ));
    }
}
