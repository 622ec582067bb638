//! Shared helpers for the CLI tests: run the built binary in an isolated temporary
//! directory (TMPDIR and XDG_RUNTIME_DIR point into it) so each test can check that
//! nothing was left behind.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

/// A sandbox directory for one test.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::Builder::new()
                .prefix("sbt")
                .tempdir_in("/tmp")
                .unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The sockbench command, with its temporary directories inside the sandbox.
    pub fn cmd(&self) -> Command {
        Command::from_std(self.sockbench())
    }

    /// `program` as a plain std Command (for spawning, tracing, waiting on it yourself),
    /// with its temporary directories inside the sandbox, and Ctrl-C's signals as a
    /// terminal gives them (see [`signals_as_from_a_terminal`]).
    pub fn std_cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut c = std::process::Command::new(program);
        c.env("TMPDIR", self.path())
            .env("XDG_RUNTIME_DIR", self.path())
            .env_remove("RUST_BACKTRACE");
        signals_as_from_a_terminal(&mut c);
        c
    }

    /// The sockbench binary as a plain std Command, see [`Sandbox::std_cmd`].
    pub fn sockbench(&self) -> std::process::Command {
        self.std_cmd(assert_cmd::cargo::cargo_bin("sockbench"))
    }

    /// Files and directories left in the sandbox (none is the goal).
    pub fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(self.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| {
                ![".json", ".csv", ".md", ".html", ".prom"]
                    .iter()
                    .any(|ext| n.ends_with(ext))
            })
            .collect()
    }
}

/// Start `c` with SIGINT and SIGQUIT at their default actions, as a command typed at a
/// terminal gets them. A non-interactive shell starts a background job (`cargo test &`,
/// a CI script's `setsid ... &`) with both ignored, and a child inherits that: a command
/// that installs no handler of its own (`report` reading its input) would then outlive
/// the Ctrl-C a test sends it. (The one unsafe block outside `sys`: std has no safe way
/// to set a child's signal dispositions.)
#[allow(unsafe_code)]
pub fn signals_as_from_a_terminal(c: &mut std::process::Command) {
    use nix::sys::signal::{signal, SigHandler, Signal};
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only signal(2) runs, which is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            for s in [Signal::SIGINT, Signal::SIGQUIT] {
                signal(s, SigHandler::SigDfl).map_err(std::io::Error::from)?;
            }
            Ok(())
        });
    }
}

/// Shared-memory objects sockbench left in /dev/shm.
pub fn shm_leftovers() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("sockbench-") && !n.starts_with("sockbench-test"))
                .collect()
        })
        .unwrap_or_default()
}

/// The sockbench rings in /dev/shm whose maker (the PID in `sockbench-PID-N`) has
/// exited: what finished runs left behind. A live process's ring is a run in progress,
/// perhaps another test's running beside this one, and no leftover yet.
pub fn shm_left_by_exited() -> Vec<String> {
    shm_leftovers()
        .into_iter()
        .filter(
            |n| match n.split('-').nth(1).and_then(|p| p.parse::<u32>().ok()) {
                Some(pid) => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                None => true,
            },
        )
        .collect()
}

/// Run sockbench with `args` plus `--format json -q`, expect success, parse stdout.
pub fn json(sb: &Sandbox, args: &[&str]) -> Value {
    let out = sb
        .cmd()
        .args(args)
        .args(["--format", "json", "-q"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sockbench {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// Fail with the process's stderr unless it exited 0.
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Unsigned integer at a JSON pointer.
pub fn u(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} missing in {v}"))
}

/// Float at a JSON pointer.
pub fn f(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{ptr} missing in {v}"))
}

/// A private network namespace with loopback up: `setup` (shell commands, e.g. iptables
/// rules) runs first, then `sockbench ARGS` in the background, then `after` (which may
/// refer to its pid as $SB_PID and must end by waiting for it), then `report` (e.g. the
/// firewall's counters), printed to stderr after a `---` line. `None` (with the reason
/// printed) where namespaces or iptables are not available: such tests skip.
pub fn in_netns(
    sb: &Sandbox,
    setup: &str,
    args: &[&str],
    after: &str,
    report: &str,
) -> Option<std::process::Output> {
    let have = |cmd: &str, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have("unshare", &["-n", "true"]) {
        eprintln!("skipped: `unshare -n` is not permitted here (needs root)");
        return None;
    }
    if !have("iptables", &["--version"]) {
        eprintln!("skipped: iptables is not installed (apt-get install iptables)");
        return None;
    }
    let bin = assert_cmd::cargo::cargo_bin("sockbench");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "set -e; ip link set lo up; {setup}; set +e; {} {} & SB_PID=$!; {after}; rc=$?; \
         echo --- >&2; {{ {report}; }} >&2; exit $rc",
        bin.display(),
        quoted.join(" ")
    );
    let out = std::process::Command::new("unshare")
        .args(["-n", "bash", "-c", &script])
        .env("TMPDIR", sb.path())
        .env("XDG_RUNTIME_DIR", sb.path())
        .output()
        .unwrap();
    Some(out)
}

/// Move the calling thread, and every process it starts from then on, into a network
/// namespace of its own with loopback up: its `/proc/thread-self/net/tcp` (and that of
/// the processes it starts) then lists this test's sockets only. On a machine that has
/// run many tests those tables hold tens of thousands of TIME-WAIT sockets, and reading
/// one takes the kernel so long that a test sampling them saw two samples in five
/// seconds. Where namespaces are not permitted (not root) the thread stays where it was,
/// and says so. A namespace belongs to a thread: each test runs on its own.
pub fn own_netns() {
    use nix::sched::{setns, unshare, CloneFlags};
    let Ok(before) = std::fs::File::open("/proc/thread-self/ns/net") else {
        eprintln!("note: no /proc/thread-self/ns/net: this test shares the machine's network");
        return;
    };
    if let Err(e) = unshare(CloneFlags::CLONE_NEWNET) {
        eprintln!("note: no network namespace of its own ({e}): this test shares the machine's");
        return;
    }
    let up = std::process::Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .output();
    if !up.as_ref().is_ok_and(|o| o.status.success()) {
        // Back to the machine's namespace: one without loopback would fail every test.
        setns(&before, CloneFlags::CLONE_NEWNET).expect("back to the machine's namespace");
        eprintln!(
            "note: `ip link set lo up` failed ({up:?}): this test shares the machine's network"
        );
    }
}

/// The `name=value` lines a namespace script's `report` printed (after its `---` line).
pub fn netns_figures(out: &std::process::Output) -> std::collections::HashMap<String, u64> {
    let err = String::from_utf8_lossy(&out.stderr);
    let tail = err.rsplit_once("---\n").map_or("", |(_, t)| t);
    tail.lines()
        .filter_map(|l| l.split_once('='))
        .filter_map(|(k, v)| Some((k.trim().to_string(), v.trim().parse().ok()?)))
        .collect()
}

/// A shell fragment printing `name=value` for one counter of /proc/net/snmp or
/// /proc/net/netstat (`proto` is the line's prefix, e.g. `Udp`, `Tcp`, `TcpExt`).
pub fn snmp(proto: &str, counter: &str, name: &str) -> String {
    format!(
        "awk '$1==\"{proto}:\" {{ if (!h) {{ for (i=1;i<=NF;i++) n[i]=$i; h=1 }} else {{ for (i=1;i<=NF;i++) \
         if (n[i]==\"{counter}\") print \"{name}=\" $i }} }}' /proc/net/snmp /proc/net/netstat"
    )
}

/// An iptables rule (`iptables -A CHAIN RULE`) tagged `name`, for [`rule_counts`].
pub fn rule(chain: &str, rule: &str, name: &str) -> String {
    format!("iptables -A {chain} {rule} -m comment --comment {name}")
}

/// A shell fragment printing `name=PACKETS` and `name_bytes=BYTES` (IP length: headers
/// included) for every rule made by [`rule`].
pub const RULE_COUNTS: &str = "iptables -L -v -x -n | awk '{ for (i=1;i<NF;i++) \
     if ($i==\"/*\" && $(i+2)==\"*/\") { print $(i+1) \"=\" $1; print $(i+1) \"_bytes=\" $2 } }'";

/// A shell fragment printing `lo_packets=` and `lo_bytes=` (transmitted on loopback;
/// loopback counts each packet from its IP header on, without an Ethernet header).
pub const LO_COUNTERS: &str =
    "awk '$1==\"lo:\" { print \"lo_bytes=\" $10; print \"lo_packets=\" $11 }' /proc/net/dev";

/// Run `sockbench ARGS --format json -q` in a private network namespace after `setup`,
/// then `report`; the JSON report and the figures `report` printed. `None` where
/// namespaces or iptables are not available (the reason is printed).
pub fn json_in_netns(
    sb: &Sandbox,
    setup: &str,
    args: &[&str],
    report: &str,
) -> Option<(Value, std::collections::HashMap<String, u64>)> {
    let mut all = args.to_vec();
    all.extend(["--format", "json", "-q"]);
    let out = in_netns(sb, setup, &all, "wait $SB_PID", report)?;
    assert!(
        out.status.success(),
        "sockbench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    Some((v, netns_figures(&out)))
}

/// Start `cmd` (a `sockbench server ... --port 0`) with stderr piped; its port, read from
/// the first line it prints ("... listening on ADDR:PORT ..."), and every line of its
/// stderr, the first included, as they come (on a channel).
pub fn spawn_server(
    cmd: &mut std::process::Command,
) -> (std::process::Child, u16, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let port = first
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {first:?}"));
    let (tx, rx) = std::sync::mpsc::channel();
    let _ = tx.send(first);
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    (child, port, rx)
}

/// A running `sockbench server` child at a port the kernel picked, every line of its
/// stderr kept as it comes; stopped with Ctrl-C ([`Server::stop`]) or killed when
/// dropped.
pub struct Server {
    child: std::process::Child,
    /// The control port it listens on.
    pub port: u16,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Lines [`Server::logged`] has handed out.
    read: std::sync::Mutex<usize>,
}

impl Server {
    /// `sockbench server --listen 127.0.0.1 --port 0` with `extra`.
    pub fn start(sb: &Sandbox, extra: &[&str]) -> Server {
        Server::from_command(
            sb.sockbench()
                .args(["server", "--listen", "127.0.0.1", "--port", "0"])
                .args(extra),
        )
    }

    /// A server started through `cmd` (a sockbench server command, perhaps wrapped or
    /// with an environment of its own).
    pub fn from_command(cmd: &mut std::process::Command) -> Server {
        let (child, port, lines) = spawn_server(cmd);
        // The first line is there already: it said the port.
        let first = lines.recv().expect("the line with the port");
        let log = std::sync::Arc::new(std::sync::Mutex::new(vec![first]));
        let sink = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            for l in lines {
                sink.lock().unwrap().push(l);
            }
        });
        Server {
            child,
            port,
            log,
            read: std::sync::Mutex::new(0),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The log once it holds `text` (the server logs a test after its client has its
    /// result, so a moment later), or as it is after 3 s.
    pub fn log_with(&self, text: &str) -> String {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while !self.log().contains(text) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.log()
    }

    /// The lines logged since the last call, once no new line has come for 300 ms (the
    /// line of the last test comes a moment after its client ends).
    pub fn logged(&self) -> String {
        let mut seen = self.log.lock().unwrap().len();
        loop {
            std::thread::sleep(std::time::Duration::from_millis(300));
            let now = self.log.lock().unwrap().len();
            if now == seen {
                break;
            }
            seen = now;
        }
        let log = self.log.lock().unwrap();
        let mut read = self.read.lock().unwrap();
        let new = log[*read..].join("\n");
        *read = log.len();
        new
    }

    /// The first line it logged (the one that says where it listens).
    pub fn first_line(&self) -> String {
        self.log.lock().unwrap()[0].clone()
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Ctrl-C; the exit status and the whole log.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let status = self.child.wait().unwrap();
        (status, self.log_with("stopped after"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run sockbench to its end, read its /proc/PID/io and CPU time (`cpu_ticks`) while it
/// is a zombie, then reap it.
pub fn io_accounting(args: &[&str]) -> (Value, usize, std::collections::HashMap<String, u64>) {
    let sb = Sandbox::new();
    let mut child = sb
        .sockbench()
        .args(args)
        .args(["--format", "json", "-q"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    std::io::Read::read_to_end(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_end(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    use nix::sys::wait::{waitid, Id, WaitPidFlag};
    waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT).unwrap();
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    assert!(child.wait().unwrap().success());
    let mut io: std::collections::HashMap<String, u64> = io
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect();
    // utime and stime (fields 14 and 15) of the whole process, in clock ticks.
    let fields: Vec<u64> = stat
        .rsplit_once(") ")
        .unwrap()
        .1
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    io.insert("cpu_ticks".into(), fields[11] + fields[12]);
    (
        serde_json::from_slice(&out).unwrap(),
        out.len() + err.len(),
        io,
    )
}

/// Descriptors a child started from this test inherits beside stdin, stdout and stderr:
/// those this process holds without close-on-exec (a test runner's, such as the
/// jobserver pipes cargo-mutants hands down). Each takes one of a child's descriptors,
/// so a test that limits a child's (`prlimit --nofile`) counts them in.
pub fn inherited_fds() -> u64 {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&fd| fd > 2)
        .filter(|&fd| {
            fcntl(fd, FcntlArg::F_GETFD)
                .is_ok_and(|f| !FdFlag::from_bits_truncate(f).contains(FdFlag::FD_CLOEXEC))
        })
        .count() as u64
}

/// Whether util-linux's prlimit is here (it says why not when it is not).
pub fn has_prlimit() -> bool {
    let ok = std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_ok();
    if !ok {
        eprintln!("skipped: no prlimit (util-linux)");
    }
    ok
}

/// Descriptors process `pid` holds that are sockets (0 once it is gone).
pub fn sockets_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| {
        d.flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
            })
            .count()
    })
}

/// Whether `tool` is on PATH; if not, the test says it skips (CI installs every tool the
/// tests use, so there they all run).
pub fn have(tool: &str) -> bool {
    let ok = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: {tool} is not installed");
    }
    ok
}

/// Mesh agents on loopback: `n` of `sockbench server --listen 127.0.0.1 --port 0 EXTRA`,
/// killed when stopped or dropped. Their logs stay open meanwhile (an agent whose stderr
/// is closed cannot log its tests), one line channel each.
pub struct Agents {
    children: Vec<std::process::Child>,
    /// `127.0.0.1:PORT` of each.
    pub hosts: Vec<String>,
    /// Each agent's stderr lines, as they come.
    pub logs: Vec<std::sync::mpsc::Receiver<String>>,
}

impl Agents {
    /// Start `n` agents with `extra` flags.
    pub fn start(sb: &Sandbox, n: usize, extra: &[&str]) -> Agents {
        let mut a = Agents {
            children: Vec::new(),
            hosts: Vec::new(),
            logs: Vec::new(),
        };
        for _ in 0..n {
            let (child, port, lines) = spawn_server(
                sb.sockbench()
                    .args(["server", "--listen", "127.0.0.1", "--port", "0"])
                    .args(extra),
            );
            a.hosts.push(format!("127.0.0.1:{port}"));
            a.children.push(child);
            a.logs.push(lines);
        }
        a
    }

    /// The agents' process ids.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(std::process::Child::id).collect()
    }

    /// The agents as `mesh --hosts` takes them.
    pub fn list(&self) -> String {
        self.hosts.join(",")
    }

    /// Kill and reap every agent.
    pub fn stop(&mut self) {
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The installed chromium, or `None` (with a printed reason) when it is not installed.
pub fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|tool| {
        std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        eprintln!(
            "skipped the browser checks: chromium is not installed (apt-get install chromium)"
        );
    }
    found
}

/// Headless chromium with a profile of its own in the sandbox.
pub fn browser(sb: &Sandbox, tool: &str, profile: &str) -> std::process::Command {
    let mut c = std::process::Command::new(tool);
    let dir = sb.path().join(profile);
    c.env("HOME", sb.path())
        .arg("--headless")
        .arg("--no-sandbox")
        .arg("--disable-gpu")
        .arg("--no-first-run")
        .arg("--hide-scrollbars")
        .arg(format!("--user-data-dir={}", dir.display()));
    c
}

/// A Python that can `import module` (`SOCKBENCH_PYTHON`, the tests' virtual
/// environment's, then the system's), or None with `install` printed as the way to get
/// one.
pub fn python_with(module: &str, install: &str) -> Option<String> {
    let candidates = std::env::var("SOCKBENCH_PYTHON").ok().into_iter().chain(
        [
            "/opt/sockbench-venv/bin/python3",
            "python3",
            "/usr/bin/python3",
        ]
        .map(String::from),
    );
    for py in candidates {
        let ok = std::process::Command::new(&py)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    eprintln!("skipped: no Python with {module} ({install})");
    None
}

/// A Python with prometheus_client's OpenMetrics parser (the strict one), or None with
/// why printed.
pub fn openmetrics_python() -> Option<String> {
    python_with(
        "prometheus_client.openmetrics.parser",
        "pip install prometheus-client, or apt-get install python3-prometheus-client",
    )
}

/// `text` through prometheus_client's strict OpenMetrics parser with `py`: each family
/// as JSON (name, type, unit, help, samples with name, labels and value), or the
/// parser's complaint.
pub fn openmetrics_families(py: &str, text: &str) -> Result<Vec<serde_json::Value>, String> {
    const PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type, "unit": f.unit, "help": f.documentation,
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value}
                            for s in f.samples]})
json.dump(out, sys.stdout)
"#;
    let mut child = std::process::Command::new(py)
        .args(["-c", PARSE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {py}: {e}"))?;
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("the parser's JSON: {e}"))
}

/// Where the committed JSON Schema of the one document is.
pub const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/document.schema.json");

/// The committed schema of the one document, compiled once for every test.
pub fn document_schema() -> &'static jsonschema::Validator {
    static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let text = std::fs::read_to_string(SCHEMA_PATH).expect("the committed schema");
        let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
        jsonschema::validator_for(&schema).expect("schema compiles")
    })
}

/// `doc` is a document of the committed schema; else the test fails naming each
/// mismatch and where, and the command that wrote the document.
pub fn assert_valid(doc: &Value) {
    let errors: Vec<String> = document_schema()
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "not the schema's document ({}): {errors:#?}",
        doc["command"]
    );
}

/// A command's stdout as JSON; the command must have succeeded (else its stderr and
/// stdout are shown).
pub fn json_of(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// A command's stdout as JSON, whatever its exit status (a failed run's document).
pub fn stdout_json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
