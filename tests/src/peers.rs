//! Real peers as child processes for interop tests: [`NostrRsRelay`], [`Nginx`] and the
//! Python servers of `tests/peers/` ([`PythonServer`]), each on a free 127.0.0.1 port with
//! every file it writes in a [`TempDir`], killed when dropped.
//!
//! A test asks for its binary with [`peer`] (or for a Python that has the packages it needs
//! with [`python`]) and `?`: when it is missing the test returns [`Missing`], which the
//! [`trials`](crate::trials) harness reports as `ignored` with the reason, or as a failure
//! when `TETHER_REQUIRE_PEERS=1` (CI sets it). `TETHER_HIDE_PEERS` makes peers that are
//! installed count as missing, to see those reports without uninstalling anything.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub use tether_testserver::files::{TempDir, TestCa};

/// The environment variable that turns a missing peer from an ignored test into a failure.
pub const REQUIRE_PEERS: &str = "TETHER_REQUIRE_PEERS";

/// The environment variable naming peers to treat as missing although installed: names as
/// given to [`peer`] and `python` for [`python`], separated by commas, or `*` for all.
pub const HIDE_PEERS: &str = "TETHER_HIDE_PEERS";

/// The environment variable naming the Python interpreter for [`python`] (default
/// `python3` on `PATH`).
pub const PYTHON: &str = "TETHER_PYTHON";

/// How long a peer gets to start listening.
const START_WITHIN: Duration = Duration::from_secs(20);

/// A peer a test needs that this machine lacks: why (the ignored test's reason), and how to
/// get it ([`Missing::fix`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    why: String,
    fix: String,
}

impl Missing {
    /// What would provide the peer.
    pub fn fix(&self) -> &str {
        &self.fix
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.why)
    }
}

impl std::error::Error for Missing {}

/// Whether `TETHER_HIDE_PEERS` names `name`.
fn hidden(name: &str) -> bool {
    std::env::var(HIDE_PEERS).is_ok_and(|list| {
        list.split(',')
            .map(str::trim)
            .any(|hide| hide == "*" || hide == name)
    })
}

/// The path of the peer binary `name`.
///
/// Looks on `PATH`, then in `~/.cargo/bin` (where `cargo install` puts nostr-rs-relay) and
/// `/usr/sbin` (where Debian puts nginx, off a normal user's `PATH`).
///
/// # Errors
/// [`Missing`] when it is in none of them, or `TETHER_HIDE_PEERS` names it.
pub fn peer(name: &str) -> Result<PathBuf, Missing> {
    let why = if hidden(name) {
        format!("{name} hidden by {HIDE_PEERS}")
    } else if let Some(path) = find_peer(name) {
        return Ok(path);
    } else {
        format!("{name} not found on PATH, in ~/.cargo/bin or /usr/sbin")
    };
    Err(Missing {
        why,
        fix: format!("run .ci/run (it installs the peers) or install {name}"),
    })
}

/// A Python interpreter (`$TETHER_PYTHON`, else `python3`) that has every module in
/// `modules` installed.
///
/// # Errors
/// [`Missing`] when the interpreter cannot run or lacks a module, or `TETHER_HIDE_PEERS`
/// names `python`.
pub fn python(modules: &[&str]) -> Result<PathBuf, Missing> {
    let python = std::env::var_os(PYTHON).map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let fix = format!(
        "run .ci/run, or `{} -m pip install -r tests/peers/requirements.txt` (or set {PYTHON})",
        python.display()
    );
    if hidden("python") {
        let why = format!("python hidden by {HIDE_PEERS}");
        return Err(Missing { why, fix });
    }
    // Found, not imported: importing the MCP SDK takes seconds, and the server does it anyway.
    let check = "import importlib.util, sys\n\
                 missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\n\
                 sys.exit(', '.join(missing) if missing else 0)";
    let why = match Command::new(&python)
        .arg("-c")
        .arg(check)
        .args(modules)
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => return Ok(python),
        Ok(out) => format!(
            "{} lacks the Python modules {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("cannot run {}: {e}", python.display()),
    };
    Err(Missing { why, fix })
}

/// Where `name` is installed, if anywhere this module looks.
pub fn find_peer(name: &str) -> Option<PathBuf> {
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|c| c.join("bin"));
    path_dirs
        .into_iter()
        .chain(cargo_bin)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A port on 127.0.0.1 that was free a moment ago (bound, read, released).
///
/// # Errors
/// When no port can be bound.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Wait until something accepts TCP connections on `addr`, polling every 20 ms.
///
/// # Errors
/// `TimedOut` when nothing listens within `within`.
pub async fn wait_listening(addr: SocketAddr, within: Duration) -> io::Result<()> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("nothing listening on {addr} within {within:?}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A child process killed (SIGKILL) and reaped when dropped, so a failing test leaves
/// nothing running.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
}

impl ChildGuard {
    /// Spawn `command` with stdout and stderr appended to `log`.
    ///
    /// # Errors
    /// When the log cannot be opened or the process cannot be spawned.
    pub fn spawn(mut command: Command, log: &Path) -> io::Result<ChildGuard> {
        let out = OpenOptions::new().create(true).append(true).open(log)?;
        let err = out.try_clone()?;
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()?;
        Ok(ChildGuard { child })
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited (and so cannot be serving).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Limits written to nostr-rs-relay's `[limits]` section (`None` leaves a limit unset).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NostrRsLimits {
    /// Events written per second, averaged over a minute (server-wide).
    pub messages_per_sec: Option<u32>,
    /// REQs accepted per minute per connection: a burst of this many, then one every
    /// `60 / n` seconds. Over it the relay stalls the connection instead of refusing.
    pub subscriptions_per_min: Option<u32>,
}

/// nostr-rs-relay on 127.0.0.1 with a SQLite database in a temporary directory.
///
/// It runs with `RUST_LOG=nostr_rs_relay=debug` and its output in `relay.log`, which
/// [`NostrRsRelay::reqs_received`] counts REQs in.
#[derive(Debug)]
pub struct NostrRsRelay {
    binary: PathBuf,
    port: u16,
    child: Option<ChildGuard>,
    // Last: the process must be gone before its directory is removed.
    dir: TempDir,
}

impl NostrRsRelay {
    /// Start `binary` with `limits` and wait until it listens.
    ///
    /// # Errors
    /// When the files cannot be written, the process cannot start, or it does not listen
    /// within 20 s.
    pub async fn start(binary: &Path, limits: NostrRsLimits) -> io::Result<NostrRsRelay> {
        let dir = TempDir::new("nostr-rs-relay")?;
        let port = free_port()?;
        fs::create_dir_all(dir.path().join("db"))?;
        fs::write(
            dir.path().join("config.toml"),
            nostr_rs_config(dir.path(), port, limits),
        )?;
        let mut relay = NostrRsRelay {
            binary: binary.to_owned(),
            port,
            child: None,
            dir,
        };
        relay.restart().await?;
        Ok(relay)
    }

    /// `ws://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    /// Kill the process (SIGKILL: no goodbye to clients) and reap it. The database stays.
    pub fn kill(&mut self) {
        self.child = None;
    }

    /// Start the process again on the same port with the same database, and wait until it
    /// listens.
    ///
    /// # Errors
    /// As [`NostrRsRelay::start`].
    pub async fn restart(&mut self) -> io::Result<()> {
        self.kill();
        let mut command = Command::new(&self.binary);
        command
            .arg("--config")
            .arg(self.dir.path().join("config.toml"))
            .env("RUST_LOG", "warn,nostr_rs_relay=debug")
            .current_dir(self.dir.path());
        let mut child = ChildGuard::spawn(command, &self.dir.path().join("relay.log"))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let ready = wait_listening(addr, START_WITHIN).await;
        if child.exited() || ready.is_err() {
            return Err(io::Error::other(format!(
                "nostr-rs-relay did not start: {ready:?}\n{}",
                self.log()
            )));
        }
        self.child = Some(child);
        Ok(())
    }

    /// Everything the relay has logged (all runs).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("relay.log")).unwrap_or_default()
    }

    /// REQs the relay has read (all runs), counted from its debug log.
    pub fn reqs_received(&self) -> usize {
        self.log().matches("subscription requested").count()
    }
}

fn nostr_rs_config(dir: &Path, port: u16, limits: NostrRsLimits) -> String {
    let mut limit_lines = String::new();
    if let Some(n) = limits.messages_per_sec {
        limit_lines += &format!("messages_per_sec = {n}\n");
    }
    if let Some(n) = limits.subscriptions_per_min {
        limit_lines += &format!("subscriptions_per_min = {n}\n");
    }
    format!(
        "[info]\nrelay_url = \"ws://127.0.0.1:{port}/\"\nname = \"tether-test\"\n\n\
         [database]\ndata_directory = \"{db}\"\n\n\
         [network]\naddress = \"127.0.0.1\"\nport = {port}\n\n\
         [options]\nreject_future_seconds = 1800\n\n\
         [limits]\n{limit_lines}",
        db = dir.join("db").display(),
    )
}

/// nginx as a reverse proxy for an SSE endpoint: `proxy_buffering off`, HTTP/1.1 upstream,
/// a chosen `proxy_read_timeout`. Runs in the foreground as a single process (no master, so
/// killing it leaves no orphaned worker) with its pid, logs and temp paths in a temp dir.
#[derive(Debug)]
pub struct Nginx {
    port: u16,
    child: Option<ChildGuard>,
    dir: TempDir,
}

impl Nginx {
    /// Proxy 127.0.0.1:(free port) to `upstream` with `proxy_read_timeout` = `read_timeout`
    /// (whole seconds, at least 1) and wait until it listens.
    ///
    /// # Errors
    /// When the files cannot be written, nginx cannot start, or it does not listen in time.
    pub async fn start_sse_proxy(
        binary: &Path,
        upstream: SocketAddr,
        read_timeout: Duration,
    ) -> io::Result<Nginx> {
        Nginx::start(binary, upstream, read_timeout, None).await
    }

    /// [`Nginx::start_sse_proxy`] serving https:// with `ca`'s certificate for `localhost`
    /// and 127.0.0.1 ([`Nginx::https_url`]).
    ///
    /// # Errors
    /// As [`Nginx::start_sse_proxy`].
    pub async fn start_tls_sse_proxy(
        binary: &Path,
        upstream: SocketAddr,
        read_timeout: Duration,
        ca: &TestCa,
    ) -> io::Result<Nginx> {
        Nginx::start(binary, upstream, read_timeout, Some(ca)).await
    }

    async fn start(
        binary: &Path,
        upstream: SocketAddr,
        read_timeout: Duration,
        tls: Option<&TestCa>,
    ) -> io::Result<Nginx> {
        let dir = TempDir::new("nginx")?;
        let port = free_port()?;
        let conf = dir.path().join("nginx.conf");
        fs::write(
            &conf,
            nginx_config(dir.path(), port, upstream, read_timeout, tls),
        )?;
        let mut command = Command::new(binary);
        command
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-g")
            .arg("daemon off; master_process off;");
        let mut child = ChildGuard::spawn(command, &dir.path().join("stdout.log"))?;
        let ready = wait_listening(SocketAddr::from(([127, 0, 0, 1], port)), START_WITHIN).await;
        let mut nginx = Nginx {
            port,
            child: None,
            dir,
        };
        if child.exited() || ready.is_err() {
            return Err(io::Error::other(format!(
                "nginx did not start: {ready:?}\n{}",
                nginx.error_log()
            )));
        }
        nginx.child = Some(child);
        Ok(nginx)
    }

    /// `http://127.0.0.1:port{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `https://localhost:port{path}` (for [`Nginx::start_tls_sse_proxy`]).
    pub fn https_url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    /// nginx's error log (upstream timeouts are logged here).
    pub fn error_log(&self) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        read("error.log") + &read("stdout.log")
    }
}

fn nginx_config(
    dir: &Path,
    port: u16,
    upstream: SocketAddr,
    read_timeout: Duration,
    tls: Option<&TestCa>,
) -> String {
    let d = dir.display();
    let timeout = read_timeout.as_secs().max(1);
    let listen = match tls {
        Some(ca) => format!(
            "listen 127.0.0.1:{port} ssl;\n        ssl_certificate {};\n        \
             ssl_certificate_key {};",
            ca.leaf_cert().display(),
            ca.leaf_key().display()
        ),
        None => format!("listen 127.0.0.1:{port};"),
    };
    format!(
        "pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        {listen}
        location / {{
            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout {timeout}s;
        }}
    }}
}}
"
    )
}

/// tinyproxy (Debian's package), an HTTP forward proxy on 127.0.0.1: plain requests in
/// absolute form, and `CONNECT` tunnels to any port. It adds `Via: 1.1 tinyproxy (...)` to
/// what it forwards and logs every request and tunnel ([`Tinyproxy::log`]).
#[derive(Debug)]
pub struct Tinyproxy {
    port: u16,
    child: Option<ChildGuard>,
    dir: TempDir,
}

impl Tinyproxy {
    /// Start it on a free port and wait until it listens.
    ///
    /// # Errors
    /// When the files cannot be written, it cannot start, or it does not listen in time.
    pub async fn start(binary: &Path) -> io::Result<Tinyproxy> {
        let dir = TempDir::new("tinyproxy")?;
        let port = free_port()?;
        let conf = dir.path().join("tinyproxy.conf");
        // No `ConnectPort` line: tunnels to every port (the servers are on random ones).
        fs::write(
            &conf,
            format!(
                "Port {port}\nListen 127.0.0.1\nTimeout 600\nMaxClients 64\nAllow 127.0.0.1\n\
                 LogFile \"{}\"\nLogLevel Connect\nDisableViaHeader No\n",
                dir.path().join("tinyproxy.log").display()
            ),
        )?;
        let mut command = Command::new(binary);
        command.arg("-d").arg("-c").arg(&conf);
        let mut child = ChildGuard::spawn(command, &dir.path().join("stdout.log"))?;
        let ready = wait_listening(SocketAddr::from(([127, 0, 0, 1], port)), START_WITHIN).await;
        let mut proxy = Tinyproxy {
            port,
            child: None,
            dir,
        };
        if child.exited() || ready.is_err() {
            return Err(io::Error::other(format!(
                "tinyproxy did not start: {ready:?}\n{}",
                proxy.log()
            )));
        }
        proxy.child = Some(child);
        Ok(proxy)
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its log and output.
    pub fn log(&self) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        read("tinyproxy.log") + &read("stdout.log")
    }
}

/// One of the Python servers in `tests/peers/` (`mcp_server.py`, `llm_server.py`), started as
/// `python SCRIPT --port PORT` on a free port. It is ready when it prints a line starting with
/// `ready `, which it does once uvicorn listens (an open port alone could be another process
/// that took the port first).
#[derive(Debug)]
pub struct PythonServer {
    port: u16,
    child: Option<ChildGuard>,
    // Last: the process must be gone before its directory is removed.
    dir: TempDir,
}

impl PythonServer {
    /// Start `tests/peers/{script}` with `python` and wait for its ready line.
    ///
    /// # Errors
    /// When the process cannot start, exits, or is not ready within 20 s (the error carries
    /// its log).
    pub async fn start(python: &Path, script: &str) -> io::Result<PythonServer> {
        PythonServer::start_with(python, script, &[]).await
    }

    /// [`PythonServer::start`] with `args` after `--port PORT`.
    ///
    /// # Errors
    /// As [`PythonServer::start`].
    pub async fn start_with(
        python: &Path,
        script: &str,
        args: &[&str],
    ) -> io::Result<PythonServer> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("peers")
            .join(script);
        let dir = TempDir::new(script.trim_end_matches(".py"))?;
        let port = free_port()?;
        let mut command = Command::new(python);
        command
            .arg(&path)
            .arg("--port")
            .arg(port.to_string())
            .args(args)
            // Everything it logs reaches the file before a failure message reads it.
            .env("PYTHONUNBUFFERED", "1")
            .current_dir(dir.path());
        let mut child = ChildGuard::spawn(command, &dir.path().join("server.log"))?;
        let mut server = PythonServer {
            port,
            child: None,
            dir,
        };
        let deadline = tokio::time::Instant::now() + START_WITHIN;
        while !server.log().lines().any(|l| l.starts_with("ready ")) {
            if child.exited() || tokio::time::Instant::now() >= deadline {
                return Err(io::Error::other(format!(
                    "{script} did not start within {START_WITHIN:?}:\n{}",
                    server.log()
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server.child = Some(child);
        Ok(server)
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `http://127.0.0.1:port{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Everything the server printed (its ready line, uvicorn's access log, tracebacks).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

/// The process's resident set size in bytes (Linux `/proc/self/status` `VmRSS`), or `None`
/// where that file does not exist.
pub fn rss_bytes() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
