//! Command-line flags, as clap parses them. No checking beyond syntax and no I/O here:
//! `plan/mod.rs` turns the measuring commands' flags into a checked plan (relay and swarm
//! still check theirs in their mode files, then run on the same runner).

use std::path::PathBuf;

use clap::{Args as ClapArgs, Parser, Subcommand, ValueEnum};

use crate::vocab::{Format, RecvMethod, SendMethod};

const ABOUT: &str = "Measure inter-process and network communication on Linux: Unix sockets, \
TCP, UDP, pipes, FIFOs, POSIX message queues and shared memory.";

const LONG_ABOUT: &str = "Measure inter-process and network communication on Linux: Unix sockets, \
TCP, UDP, pipes, FIFOs, POSIX message queues and shared memory.

With no command, runs the default suite: every local transport, one-way throughput at \
64 B, 4 KiB, 64 KiB and 1 MiB, in about a minute, and prints one table.";

const AFTER_HELP: &str = "Examples:
  sockbench                                   the default suite (about a minute)
  sockbench stream                            Unix stream socket, 64 KiB messages, 2 s
  sockbench stream -t tcp,unix -s 4K,1M       two transports at two sizes
  sockbench stream -t all -s 1..1M -d 1       every transport, sizes 1 B to 1 MiB
  sockbench stream -t tcp --runs 5 --format json > tcp.json

Exit status: 0 success, 1 a run failed, 2 bad usage, 130 interrupted.";

/// Help heading: the workload, transports, sizes and engines.
pub const HEAD_MEASURE: &str = "What to measure";
/// Help heading: duration, counts, warm-up and runs.
pub const HEAD_TIME: &str = "How long";
/// Help heading: socket options and addresses.
pub const HEAD_SOCKETS: &str = "Sockets";
/// Help heading: streams and CPUs.
pub const HEAD_PLACEMENT: &str = "Placement";
/// Help heading: formats and files.
pub const HEAD_OUTPUT: &str = "Output";

/// Top-level arguments.
#[derive(Debug, Parser)]
#[command(
    name = "sockbench",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
pub struct Args {
    /// The workload to run (default: the suite).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Output of the default suite (plain `sockbench`); a command takes its own after
    /// its name.
    #[command(flatten)]
    pub output: OutputArgs,
    /// `--by-placement` for the default suite.
    #[command(flatten)]
    pub by_placement: ByPlacementArg,
}

impl Args {
    /// `argv` with its command's name moved to the front (after the program's), so the
    /// flags written before it (as an older sockbench took output flags) follow it; `None`
    /// when no argument names a command or it is first already.
    pub fn command_first(argv: &[String]) -> Option<Vec<String>> {
        use clap::CommandFactory;
        let names: Vec<String> = Args::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        let rest = argv.get(1..)?;
        let at = rest.iter().position(|a| names.contains(a))?;
        if at == 0 {
            return None;
        }
        let mut moved = vec![argv[0].clone(), rest[at].clone()];
        moved.extend(rest[..at].iter().cloned());
        moved.extend(rest[at + 1..].iter().cloned());
        Some(moved)
    }

    /// The output flags of the command given (plain `sockbench`: the suite's).
    pub fn output(&self) -> &OutputArgs {
        match &self.command {
            None => &self.output,
            Some(Command::Stream(a)) => &a.common.output,
            Some(Command::Pingpong(a)) => &a.common.output,
            Some(Command::Rate(a)) => &a.common.output,
            Some(Command::Connect(a)) => &a.common.output,
            Some(Command::Suite(a)) => &a.output,
            Some(Command::Report(a)) => &a.output,
            Some(Command::Compare(a)) => &a.output,
            Some(Command::Listen(a)) => &a.output,
            Some(Command::Swarm(a)) => &a.output,
            Some(Command::Mesh(a)) => &a.output,
            Some(Command::Serve(a)) => &a.output,
            Some(Command::Load(a)) => &a.output,
            Some(Command::Models(a)) => &a.output,
            Some(Command::Relay(a)) => &a.output,
            // They print no document: their output is a log on stderr.
            Some(Command::Server(_) | Command::Peer(_)) => &self.output,
        }
    }
}

/// Workloads and other commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// One-way bulk throughput: a sender writes SIZE-byte messages as fast as it can, a
    /// receiver reads them; reports bits/s, messages/s, CPU of each side and buffers.
    #[command(after_help = "Examples:
  sockbench stream -t tcp -s 128K -d 5
  sockbench stream -t unix,pipe,shm -s 64K,1M --runs 5
  sockbench stream -t udp -s 1K --rcvbuf 4M
  sockbench stream -t unix,tcp -s 64K --rcvbuf 1,4K..4M
  sockbench stream -t tcp --bind 127.0.0.1:5300 --nodelay -s 64
  sockbench stream -t tcp -P 4 --cpus 0,1

Throughput is what the receiver got over its own interval (from the start until its last
byte, including draining the buffers), so it is never more than what was delivered.")]
    Stream(Box<StreamArgs>),
    /// Round-trip latency: a client sends SIZE bytes, a server echoes them; every round
    /// trip goes into an HDR histogram (min, mean, p50 ... p99.99, max).
    #[command(after_help = "Examples:
  sockbench pingpong -t tcp,udp,unix -s 64
  sockbench pingpong -t shm -s 64 -n 100000
  sockbench pingpong -t tcp -s 1K --rate 20k --histogram tcp.csv
  sockbench pingpong -t tcp -s 64 --writes 2          (watch for delayed-ACK stalls)")]
    Pingpong(Box<PingpongArgs>),
    /// Message rate: the sender pushes SIZE-byte messages (as fast as it can, or paced with
    /// --rate), the receiver counts them; sequence numbers count lost, reordered and
    /// duplicated messages exactly.
    #[command(after_help = "Examples:
  sockbench rate -t udp -s 64
  sockbench rate -t udp,unix-dgram,mq -s 64 --rate 100k

Each message carries a 64-bit sequence number in its first 8 bytes. Messages smaller
than 8 bytes carry only as many low-order bytes of it as fit, so reorder and duplicate
counts are not reported for them (null); loss is still exact (sent - received).")]
    Rate(Box<RateArgs>),
    /// Connection cost on tcp, tcp6, unix and unix-seqpacket: connect, accept, first
    /// request/response and close, each as a distribution, and connections per second.
    #[command(mut_arg("transport", |a| a.help(connect_transports_help())))]
    #[command(after_help = "Examples:
  sockbench connect -t tcp,unix -s 64
  sockbench connect -t tcp --linger0 --open 16")]
    Connect(Box<ConnectArgs>),
    /// The default suite (what plain `sockbench` runs): every local transport at 64 B,
    /// 4 KiB, 64 KiB and 1 MiB, one table; one run per cell, so no transport is ranked
    /// fastest (the table says how to rank them: `stream --runs 5`).
    #[command(mut_arg("duration", |a| a.help("Measured time per cell (default 1s).")))]
    #[command(mut_arg("warmup", |a| a.help("Unmeasured warm-up per cell (default 0.1s).")))]
    #[command(mut_arg("transport", |a| a.help("Transports to include, comma-separated, or `all` (default all).")))]
    Suite(SuiteArgs),
    /// Print a saved JSON report again: as a table (default), Markdown, CSV, JSON, an HTML
    /// page of charts or OpenMetrics, with --wide and --units as for a run.
    #[command(after_help = "Examples:
  sockbench stream -t tcp,unix --format json > run.json
  sockbench report run.json
  sockbench report run.json --units bytes --format markdown > run.md
  sockbench report run.json --format html > run.html

The file is a document of any command, of this sockbench's schema version (its
`schema_version`); older ones open too: reports of the measuring commands from schema
version 4 to 8, and the first documents of relay, swarm, load, models, serve, mesh and
compare. A `listen --format json` log prints its summary.")]
    Report(ReportArgs),
    /// Compare saved runs: match their scenarios, print each headline figure's ratio with
    /// a confidence interval and a verdict (faster, slower, no significant difference)
    /// from a test on the runs.
    #[command(after_help = "Examples:
  sockbench stream -t tcp,unix -s 4K,1M --runs 5 --export-json base.json
  sockbench stream -t tcp,unix -s 4K,1M --runs 5 --export-json new.json
  sockbench compare base.json new.json
  sockbench compare base.json new.json --fail-if-slower 5      (exit 1 on a significant loss over 5%)
  sockbench compare base.json new.json --format html > compare.html
  sockbench compare base.json small-sndbuf.json --ignore-option sndbuf

The headline figure is throughput for stream, rate and connect and the median round trip
for pingpong (lower is better). Give --runs 3 or more to both runs (5 or more is better):
with fewer, no test can tell noise from a change. The test is Welch's t when both sides
have 3+ runs without outliers (Dixon's Q at 95% up to 10 runs), else Mann-Whitney U; each
row says which. Exit status: 0; 1 with --fail-if-slower when a scenario is significantly
slower by more than PCT, or ran in BASE and failed in or is missing from NEW, or when a
file cannot be read; 2 bad usage. The comparison is a document like every other: in
every --format, and in any --export-FORMAT.

Documents of relay, swarm, load, models, serve and mesh compare too, row by row (methods,
runs, models, pairs), each by its headline figure; give them --runs 3 or more where the
command takes it (relay, swarm, load, models). --ignore-option applies to the measuring
commands' documents only.")]
    Compare(CompareArgs),
    /// Wait for clients on another host (or this one) and play the other role of the
    /// tests they run: `sockbench stream --server HOST` on the client. Logs one line per
    /// test on stderr; runs until Ctrl-C.
    #[command(after_help = "Examples:
  sockbench server                                  every address, port 5290
  sockbench server --listen 10.0.0.2 --port 6000 --max-clients 2
  sockbench server --key-file sockbench.key         only clients with the same key
  sockbench server --once                           serve one client, then exit

On the client:
  sockbench stream --server 10.0.0.2 -t tcp -s 128K
  sockbench pingpong --server 10.0.0.2:6000 -t udp -s 64 --key-file sockbench.key
  sockbench stream --server 10.0.0.2 -t tcp --reverse      (the server sends)

Between hosts use tcp, tcp6, udp or udp6; with a server on the same host, unix,
unix-dgram, unix-seqpacket, fifo, mq and shm work too (the client learns the path or
name from the server). A key file holds at least 16 bytes and only its owner may read it,
e.g. `(umask 077; head -c 32 /dev/urandom | base64 > sockbench.key)`, copied to both
hosts.")]
    Server(ServerArgs),
    /// Listen on a socket and log what clients send, read by read: accept, every read
    /// (with monotonic and wall-clock times), disconnect; a summary per connection on
    /// Ctrl-C. Connect with nc, socat or your own client to see what it really writes.
    #[command(after_help = "Examples:
  sockbench listen -t tcp                      then: nc 127.0.0.1 5301
  sockbench listen -t unix -v 2                the bytes of every read, escaped
  sockbench listen -t tcp --read-size 1        one byte per read: see every write's bytes
  sockbench listen -t udp --echo               answer each datagram with itself
  sockbench listen -t tcp --format json        one JSON object per line (JSON Lines)

Verbosity (-v): 0 the listening line and the summary; 1 (default) also accepts, reads and
disconnects; 2 also each read's bytes, escaped (printable ASCII as it is, \\n \\r \\t, \\\\,
\\\", anything else \\xNN: no terminal sequence passes through); 3 also the bytes in hex.")]
    #[command(mut_arg("transport", |a| a.help("Transport: one of unix, unix-dgram, unix-seqpacket, tcp, tcp6, udp, udp6 (default tcp).").value_name("TRANSPORT")))]
    #[command(mut_arg("duration", |a| a.help("Stop after this long (default: at Ctrl-C).")))]
    Listen(ListenArgs),
    /// Many pairs at once: N connections (or socketpairs, or pipes) each streaming or
    /// ping-ponging, driven by two epoll threads (the receiving ends' in a child process
    /// with --placement processes); the aggregate, the spread across pairs, Jain's
    /// fairness index, the setup time and errors by kind.
    #[command(after_help = "Examples:
  sockbench swarm -n 1000 -t tcp
  sockbench swarm -n 10000 -t unix -W pingpong
  sockbench swarm -n 100 -t pipe -s 4K -d 5 --format json
  sockbench swarm -n 1000 -t tcp --placement processes -i 0.5

Before it starts, swarm checks the descriptor limit (raising the soft limit to the hard
one when that is enough, and saying so), the ephemeral ports TCP needs and the memory the
pairs' buffers may take; what cannot fit is an error naming the limit.")]
    #[command(mut_arg("transport", |a| a.help("Transport: one of unix, unix-seqpacket, tcp, tcp6 (through one listener), socketpair, pipe (default unix).").value_name("TRANSPORT")))]
    #[command(mut_arg("size", |a| a.help("Bytes per write (stream, default 64K) or per request and answer (pingpong, default 64): one size.").value_name("SIZE")))]
    #[command(mut_arg("duration", |a| a.help("How long to measure, once every pair is set up (default 2s).")))]
    #[command(mut_arg("runs", |a| a.help("Runs, 1 to 100, each with its pairs set up afresh: the figures are the median run's by the aggregate, with every run's beside them, so `compare` can tell a change from noise.")))]
    Swarm(SwarmArgs),
    /// Every pair of N hosts: a coordinator asks the agents (`sockbench server` on each
    /// host) to measure each ordered pair in turn, in rounds where no host takes part in
    /// two tests at once; prints source x destination matrices, the spread across pairs
    /// and the worst pairs.
    #[command(after_long_help = MESH_HELP)]
    #[command(mut_arg("duration", |a| a.help("How long each test measures (default 5s).")))]
    #[command(mut_arg("warmup", |a| a.help("Warm-up before each test's measured interval (default 0.5s).")))]
    #[command(mut_arg("size", |a| a.help("Message size, one (default: each test's own: 128K for tcp-stream, 64 B otherwise).").value_name("SIZE")))]
    Mesh(MeshArgs),
    /// An HTTP/1.1 server with a chosen concurrency model, for `sockbench load`, ab, wrk
    /// or h2load to drive: keep-alive, pipelining, HTTP/1.0, a fixed response body;
    /// malformed requests get 400, 431, 501 or 505. Prints what it served at Ctrl-C.
    #[command(after_help = SERVE_HELP)]
    #[command(mut_arg("duration", |a| a.help("Stop after this long (default: at Ctrl-C).")))]
    #[command(mut_arg("cpus", |a| a.help("Pin the server's threads to these CPUs, one per CPU in turn: numbers and ranges, comma-separated (0, 0,1, 0-3).")))]
    Serve(ServeArgs),
    /// An HTTP/1.1 load generator (as ab and wrk): N requests or a duration over C
    /// connections, keep-alive, pipelining, or an open loop at a fixed rate; ab's
    /// connection-times table, HDR percentiles, failures by cause and CPU per request.
    #[command(after_help = LOAD_HELP)]
    #[command(mut_arg("duration", |a| a.help("Run for this long instead of -n (as wrk's -d; default 10s when -n is not given).")))]
    #[command(mut_arg("cpus", |a| a.help("Pin the generator's threads to these CPUs, one per CPU in turn: numbers and ranges, comma-separated (1, 0,1, 0-3).")))]
    #[command(mut_arg("runs", |a| a.help("Run the load N times (1 to 100): the figures are the median run's by requests per second, with every run's beside them, so `compare` can tell a change from noise.")))]
    Load(LoadArgs),
    /// Every server model in turn, each in its own process, driven by the same load
    /// (the built-in one, or ab, wrk or h2load); one table: requests/s, p50, p99 and
    /// server CPU per request.
    #[command(after_help = MODELS_HELP)]
    #[command(mut_arg("duration", |a| a.help("Run each model for this long instead of -n (wrk runs by time only; default there 3s).")))]
    #[command(mut_arg("cpus", |a| a.help("The server's CPU, then the load's: two CPUs, e.g. 0,1 (default: the first two this process may use).")))]
    #[command(mut_arg("runs", |a| a.help("Measured runs of each model (1 to 100), each with a fresh server (the table shows the median run and the runs' spread). With one, no model is ranked fastest: 3 or more to tell models apart.")))]
    Models(ModelsArgs),
    /// The ways to copy between sockets: a source sends to a relay, the relay copies
    /// each connection's bytes to a sink with METHOD (read-write, vectored, buffered,
    /// splice, io-uring, io-uring-splice, async), the sink checks and counts them. Reports
    /// throughput, the relay's CPU per GB, system calls per MB and ns per message.
    #[command(after_help = RELAY_HELP)]
    #[command(mut_arg("transport", |a| a.help("Transports of the relay's two ends, comma-separated: tcp, tcp6, unix (default tcp).")))]
    #[command(mut_arg("size", |a| a.help("Message sizes: a list (64,10K,1M) or a range of powers of two (64..4M). With --connections, each connection's payload. Default: 64K; 10K with --connections; 64 with --mode pingpong.")))]
    #[command(mut_arg("duration", |a| a.help("How long each measured run of a long stream (or pingpong) lasts (default 2s).")))]
    #[command(mut_arg("runs", |a| a.help("Measured runs of each scenario, 1 to 100 (the table shows the median run and the runs' spread). With one, nothing is ranked: 3 or more to tell methods apart.")))]
    #[command(mut_arg("interval", |a| a.help("Print one line per TIME of each measured run while it goes (what reached the sink; with --placement processes, what the source sent), as iperf3's -i; kept in the JSON (each result's `intervals`, which add up to its bytes received).")))]
    #[command(mut_arg("placement", |a| a.help("Where the relay and the sink run: threads of this process beside the source, or a child process (the source stays here). --mode pingpong runs as threads only.")))]
    Relay(Box<RelayArgs>),
    /// (Internal) the child of a `--placement processes` run.
    #[command(hide = true)]
    Peer(PeerArgs),
}

/// Flags of `server`.
#[derive(Debug, ClapArgs)]
pub struct ServerArgs {
    /// Address to listen on (default: every address, IPv6 and IPv4).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Port of the control connection (data connections use ports the kernel picks,
    /// unless --data-port is given).
    #[arg(short, long, value_name = "PORT", default_value_t = crate::control::DEFAULT_PORT)]
    pub port: u16,
    /// Take every test's TCP connections and UDP datagrams on this one port (TCP and UDP),
    /// instead of ports the kernel picks: one firewall or NetworkPolicy rule covers the
    /// server. Must differ from --port.
    #[arg(long, value_name = "PORT")]
    pub data_port: Option<u16>,
    /// Serve one client, then exit.
    #[arg(long)]
    pub once: bool,
    /// Tests that may run at once; a client over the limit is told the server is busy.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub max_clients: u32,
    /// Longest run a client may ask for (a run bounded by --count or --bytes is cut off
    /// here too).
    #[arg(long, value_name = "TIME", default_value = "300s")]
    pub max_duration: String,
    /// Largest message a client may ask for.
    #[arg(long, value_name = "SIZE", default_value = "64M")]
    pub max_size: String,
    /// Most parallel streams in one test.
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub max_streams: u32,
    /// Most buffer memory one test may make the server allocate (message buffers and the
    /// socket buffers a client requests, over all streams); above 0.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = some_memory)]
    pub max_memory: String,
    /// Require clients to prove they hold this pre-shared key (HMAC-SHA256 over fresh
    /// nonces, both ways), and prove it to them.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Directory for Unix socket files and FIFOs of local clients (default: a private
    /// directory under $XDG_RUNTIME_DIR or /tmp); it must exist.
    #[arg(long, value_name = "DIR", value_parser = existing_dir)]
    pub path: Option<PathBuf>,
    /// Also log connections that never became tests (port scans, idle connections).
    #[arg(short, long)]
    pub verbose: bool,
}

/// Flags of `listen`.
#[derive(Debug, ClapArgs)]
pub struct ListenArgs {
    /// `-t`: one of unix, unix-dgram, unix-seqpacket, tcp, tcp6, udp, udp6.
    #[command(flatten)]
    pub transports: TransportsArg,
    /// Address to listen on (IP transports; default 127.0.0.1, or ::1 for tcp6 and udp6;
    /// 0.0.0.0 or :: to take clients from other hosts).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Port (IP transports; 0: one the kernel picks, printed).
    #[arg(short, long, value_name = "PORT", default_value_t = 5301)]
    pub port: u16,
    /// Socket file (Unix transports; default: listen.sock in a private directory under
    /// $XDG_RUNTIME_DIR or /tmp). Removed on exit; an existing file is never replaced.
    #[arg(long, value_name = "FILE")]
    pub path: Option<PathBuf>,
    /// Bytes asked for by each read (1 shows a client's bytes one read at a time).
    #[arg(long, value_name = "SIZE", default_value = "64K")]
    pub read_size: String,
    /// Receive buffer (SO_RCVBUF) of the listening socket, inherited by each connection;
    /// the granted size is printed.
    #[arg(long, value_name = "SIZE")]
    pub rcvbuf: Option<String>,
    /// Send each read's bytes back to its sender.
    #[arg(long)]
    pub echo: bool,
    /// `-d`: stop after this long (default: at Ctrl-C).
    #[command(flatten)]
    pub duration: DurationArg,
    /// How much to log, 0 to 3 (see below).
    #[arg(short, long, value_name = "LEVEL", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub verbose: u8,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `swarm`.
#[derive(Debug, ClapArgs)]
pub struct SwarmArgs {
    /// Pairs at once.
    #[arg(short = 'n', long = "pairs", value_name = "N", default_value_t = 100)]
    pub pairs: u64,
    /// `-t`: one of unix, unix-seqpacket, tcp, tcp6 (through one listener), socketpair,
    /// pipe.
    #[command(flatten)]
    pub transports: TransportsArg,
    /// What each pair does (`-w` is --warmup on every command that has one).
    #[arg(short = 'W', long, visible_alias = "workload", value_enum, value_name = "WORK", default_value_t = crate::reactor::Work::Stream, help_heading = HEAD_MEASURE)]
    pub work: crate::reactor::Work,
    /// `-s`: one size.
    #[command(flatten)]
    pub sizes: SizesArg,
    /// `-d`: how long to measure, once every pair is set up.
    #[command(flatten)]
    pub duration: DurationArg,
    /// `-r`: runs, each with its pairs set up afresh.
    #[command(flatten)]
    pub runs: RunsArg,
    /// `-i`: a line per interval of each run.
    #[command(flatten)]
    pub interval: IntervalArg,
    /// `--placement processes`: the receiving ends in a child process (unix,
    /// unix-seqpacket, tcp, tcp6).
    #[command(flatten)]
    pub placement: PlacementArg,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `mesh`.
#[derive(ClapArgs, Debug, Clone)]
pub struct MeshArgs {
    /// The agents: HOST or HOST:PORT, comma-separated (IPv6 as [ADDR]:PORT).
    #[arg(long, value_name = "HOSTS", value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// A file of agents, one HOST[:PORT] per line ('#' starts a comment).
    #[arg(long, value_name = "FILE")]
    pub hosts_file: Option<PathBuf>,
    /// Every address NAME resolves to is an agent (a Kubernetes headless Service gives
    /// one per pod), at --port.
    #[arg(long, value_name = "NAME")]
    pub hosts_from_dns: Option<String>,
    /// The agents' control port where a host gives none.
    #[arg(long, value_name = "PORT", default_value_t = crate::control::DEFAULT_PORT)]
    pub port: u16,
    /// Which ordered pairs: all; ring (each host with the next, both ways); random N (N
    /// random partners per host, both ways; --seed makes it repeatable).
    #[arg(long, value_name = "PAIRS", num_args = 1..=2, default_values_t = ["all".to_string()])]
    pub pairs: Vec<String>,
    /// The tests for each ordered pair, comma-separated: tcp-stream, tcp-pingpong,
    /// udp-pingpong, udp-rate.
    #[arg(long, value_name = "TESTS", value_delimiter = ',', default_values_t = ["tcp-stream".to_string(), "tcp-pingpong".to_string(), "udp-pingpong".to_string()])]
    pub tests: Vec<String>,
    /// `-d`: how long each test measures.
    #[command(flatten)]
    pub duration: DurationArg,
    /// `-w`: warm-up before each test's measured interval.
    #[command(flatten)]
    pub warmup: WarmupArg,
    /// Parallel streams of tcp-stream.
    #[arg(short = 'P', long, value_name = "N", default_value_t = 4)]
    pub parallel: u32,
    /// `-s`: one size.
    #[command(flatten)]
    pub sizes: SizesArg,
    /// Stress mode: run every pair's tests at once instead of in rounds (hosts share
    /// their NICs and CPUs between tests: the figures are labelled as such).
    #[arg(long)]
    pub concurrent: bool,
    /// Seed for --pairs random (default: from the clock, printed in the report).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Prove to every agent that we hold this pre-shared key (the agents' --key-file).
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Give an agent this long beyond a test's own duration before its pairs are marked
    /// failed.
    #[arg(long, value_name = "TIME", default_value = "30s")]
    pub timeout: String,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
}

const MESH_HELP: &str = "Examples:
  on each host:   sockbench server --key-file sockbench.key
  then anywhere:  sockbench mesh --hosts 10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4 --key-file sockbench.key
                  sockbench mesh --hosts-file hosts.txt --pairs ring --tests tcp-pingpong -d 2s
                  sockbench mesh --hosts-from-dns sockbench-agents.sockbench.svc.cluster.local \\
                                 --format json --export-json /results/mesh.json

Schedule: a round-robin tournament. With N hosts, N-1 rounds (N rounds if N is odd) of
disjoint pairs, each pair measured one way and then the other, so no host ever takes part
in two tests at once and every ordered pair is measured once per test. The coordinator
never carries measured data: it asks the source's agent to run the test as a client
against the destination's agent, and gets back that client's report. An agent that cannot
be reached, dies or runs past --timeout fails its pairs, with the reason, and the mesh
goes on; Ctrl-C stops the mesh: reports already in are kept, tests under way are marked
interrupted (their agents stop them), and what was measured is printed.

Output: a table of source x destination matrices (default), --format json (the whole
document), --format openmetrics, --format html (heat maps); --export-json, --export-html
and --export-openmetrics write them to files as well.";

const SERVE_HELP: &str = "Examples:
  sockbench serve                               epoll model, 127.0.0.1:1085
  sockbench serve --model thread -v 2           a thread per connection, log connections
  sockbench serve --model io-uring --port 8080 --backlog 1024
  sockbench serve --model async --unix /tmp/http.sock
then:
  ab -n 5000 -c 20 http://127.0.0.1:1085/
  wrk -t 2 -c 100 -d 3 http://127.0.0.1:1085/
  sockbench load -n 5000 -c 20 -k http://127.0.0.1:1085/

Models: thread (a thread per connection), pool (one epoll thread hands ready connections
to a fixed pool of worker threads), select, poll, epoll (one thread each; select takes
descriptors below 1024 only), epoll-workers (an epoll loop per CPU, each with its own
SO_REUSEPORT listener), io-uring (completions: multishot accept and receive),
async (tokio, a task per connection: the closest to fibers).

Every request gets the same answer: 200 with a body of --body-size bytes (HEAD: no body).
Verbosity (-v): 0 the listening line and the summary; 1 (default) also rejected requests
and connection errors; 2 also every accept and close; 3 also every request line.";

const LOAD_HELP: &str = "Examples:
  sockbench load -n 5000 -c 20 http://127.0.0.1:1085/         as ab -n 5000 -c 20
  sockbench load -n 5000 -c 20 -k http://127.0.0.1:1085/      as ab -k
  sockbench load -d 10 -c 100 http://127.0.0.1:1085/          as wrk -c 100 -d 10
  sockbench load -d 10 -c 20 --pipeline 16 http://127.0.0.1:1085/
  sockbench load -d 10 -c 50 --rate 20k http://127.0.0.1:1085/  open loop (as wrk2)
  sockbench load -n 1000 --unix-socket /tmp/http.sock http://localhost/

Times (ab's table, in microseconds): connect is the TCP or Unix connect (0 on a reused
connection), waiting from the request written to the first byte of the answer,
processing from connected to the last byte, total from start to the last byte.
With --rate, latency counts from when each request was due (corrected for coordinated
omission); the uncorrected figure, from when it was sent, is beside it.";

const MODELS_HELP: &str = "Examples:
  sockbench models                          every model, 5000 requests over 20 connections
  sockbench models -k -n 20000              keep-alive
  sockbench models --model epoll,io-uring,async -d 3 -c 100
  sockbench models --driver ab              drive them with ab (apache2-utils) instead
  sockbench models --driver wrk -d 3 -c 100

Each model runs in a child `sockbench serve` pinned to one CPU, the load on the other
(--cpus to choose); the server's CPU is read from /proc for the measured interval.

With --runs N each model runs N times; the table shows the median run and the runs'
spread (min-max), and names the fastest model only when it beats every other beyond the
noise of their runs (the test compare makes, at 0.05 over the number of comparisons).
From one run each, nothing is ranked.";

const RELAY_HELP: &str = "Examples:
  sockbench relay                               every method, tcp, 64 KiB writes, 2 s each
  sockbench relay -m splice,read-write -s 64..4M   a size sweep; prints where splice overtakes
  sockbench relay --connections 5000 -s 10K     the Go benchmark: 5000 connections of 10 KB
  sockbench relay --connections 5000 -s 10K --runs 5   ... with the noise, to rank the methods
  sockbench relay -m read-write --buffer 1M -t unix
  sockbench relay --mode pingpong -s 64         source-to-sink latency of one message
  sockbench relay -m splice -t unix --placement processes -i 0.5
                                                the relay and the sink in a child process
  sockbench relay -m splice --listen 127.0.0.1:5400 --to 127.0.0.1:5201
                                                relay only: put it between your own programs

Methods: read-write (read(2) into one --buffer, write(2) it out), vectored (readv/writev
over --iovecs buffers that make up --buffer), buffered (std's BufReader and BufWriter of
--buffer bytes each, as Go's bufio), splice (socket -> pipe -> socket, --pipe-size),
io-uring (reads and writes through a ring), io-uring-splice (splices through a ring),
async (tokio's copy_buf, the io.Copy of Rust, on a single-threaded runtime per worker).
sendfile cannot read from a socket, so it is no relay method: `sockbench stream --send
sendfile` measures it from a file.

The source, the relay and the sink are threads of this process (with --placement
processes the relay and the sink are in a child process); the relay's CPU is its own
threads' (and its io_uring workers'), and its system calls are counted as it makes them.
Each run is warmed up first with the same traffic (-w, 0.25 s; -w 0 skips it); a relay
pingpong runs as threads only, and a relay never runs on a server.

Each row shows its runs' spread (min-max). A `ranking:` line per transport and size names
the fastest method only when it beats every other beyond the noise of their runs (the
test compare makes, at 0.05 over the number of comparisons); from a single run nothing
is ranked and the crossover line says it cannot tell: give --runs 3 or more.";

/// A relay's mode of work.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RelayMode {
    /// Bulk: the source writes SIZE-byte messages as fast as it can (or, with
    /// --connections, one SIZE payload per connection).
    #[default]
    Stream,
    /// One SIZE message at a time: the time from the source's write to the sink's last
    /// byte of it, through the relay.
    Pingpong,
}

/// Flags of `relay`.
#[derive(Debug, ClapArgs)]
pub struct RelayArgs {
    /// Copy methods, comma-separated, or `all`: read-write, vectored, buffered, splice,
    /// io-uring, io-uring-splice, async.
    #[arg(short, long, value_name = "LIST", default_value = "all", help_heading = HEAD_MEASURE)]
    pub method: String,
    /// `-t`: tcp, tcp6, unix.
    #[command(flatten)]
    pub transports: TransportsArg,
    /// `-s`: the sizes.
    #[command(flatten)]
    pub sizes: SizesArg,
    /// Bulk (stream) or one message at a time (pingpong: source-to-sink latency).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = RelayMode::Stream, help_heading = HEAD_MEASURE)]
    pub mode: RelayMode,
    /// The relay's copy buffer (read-write, vectored, buffered, io-uring, async).
    #[arg(long, value_name = "SIZE", default_value = "64K", help_heading = HEAD_MEASURE)]
    pub buffer: String,
    /// The pipe between splice's two calls (F_SETPIPE_SZ; the kernel rounds it up to a
    /// power of two pages and caps it at /proc/sys/fs/pipe-max-size unless root).
    #[arg(long, value_name = "SIZE", default_value = "64K", help_heading = HEAD_MEASURE)]
    pub pipe_size: String,
    /// vectored: how many buffers --buffer is split into for each readv and writev.
    #[arg(long, value_name = "N", default_value_t = 4, help_heading = HEAD_MEASURE)]
    pub iovecs: usize,
    /// Many short connections instead of long streams: N connections in all, each
    /// carrying one SIZE payload (as the Go benchmark's clients do).
    #[arg(long, value_name = "N", conflicts_with_all = ["duration", "bytes"], help_heading = HEAD_TIME)]
    pub connections: Option<u64>,
    /// `-d`: how long each measured run lasts.
    #[command(flatten)]
    pub duration: DurationArg,
    /// A long stream: exactly this many bytes per connection instead of a time.
    #[arg(long, value_name = "SIZE", conflicts_with = "duration", help_heading = HEAD_TIME)]
    pub bytes: Option<String>,
    /// pingpong: exactly N messages instead of a time.
    #[arg(short = 'n', long, value_name = "N", conflicts_with = "duration", help_heading = HEAD_TIME)]
    pub count: Option<u64>,
    /// `-r`: measured runs.
    #[command(flatten)]
    pub runs: RunsArg,
    /// `-w`: warm-up before each measured run.
    #[command(flatten)]
    pub warmup: WarmupArg,
    /// `-i`: a line per interval of each run.
    #[command(flatten)]
    pub interval: IntervalArg,
    /// `--placement processes`: the relay and the sink in a child process.
    #[command(flatten)]
    pub placement: PlacementArg,
    /// Connections at once: source connections, relay workers and sink workers (each a
    /// thread).
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1, help_heading = HEAD_PLACEMENT)]
    pub parallel: u32,
    /// Relay only: accept on ADDR (host:port, or a Unix socket path) and copy every
    /// connection to --to, until Ctrl-C or -d; prints what it relayed.
    #[arg(long, value_name = "ADDR|PATH", requires = "to", help_heading = HEAD_SOCKETS)]
    pub listen: Option<String>,
    /// Relay only: where each accepted connection is copied to (host:port or a Unix
    /// socket path).
    #[arg(long, value_name = "ADDR|PATH", requires = "listen", help_heading = HEAD_SOCKETS)]
    pub to: Option<String>,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `serve`.
#[derive(Debug, ClapArgs)]
pub struct ServeArgs {
    /// Concurrency model: thread, pool, select, poll, epoll, epoll-workers, io-uring,
    /// async (see below).
    #[arg(short, long, value_name = "MODEL", default_value = "epoll")]
    pub model: String,
    /// Address to listen on (0.0.0.0 or :: to take clients from other hosts).
    #[arg(short, long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub address: String,
    /// TCP port (0: one the kernel picks, printed).
    #[arg(short, long, value_name = "PORT", default_value_t = 1085)]
    pub port: u16,
    /// Listen on this Unix socket file instead of TCP (removed on exit; an existing file
    /// is never replaced).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["address", "port"])]
    pub unix: Option<PathBuf>,
    /// Length of the accept queue (listen(2)'s backlog; the kernel caps it at
    /// net.core.somaxconn). 10 is the D benchmark's default and small: a burst of more
    /// connects than it holds makes clients wait a second for a SYN retransmission, so
    /// give 1024 for loads like wrk -c 100.
    #[arg(short, long, value_name = "N", default_value_t = 10)]
    pub backlog: u32,
    /// Bytes of every response's body.
    #[arg(long, value_name = "SIZE", default_value = "13")]
    pub body_size: String,
    /// Threads of the pool, epoll-workers and async models (default: one per CPU).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Close a connection that has sent nothing for this long (keep-alive idle or a
    /// request that stalls).
    #[arg(long, value_name = "TIME", default_value = "60s")]
    pub idle_timeout: String,
    /// `-d`: stop after this long (default: at Ctrl-C).
    #[command(flatten)]
    pub duration: DurationArg,
    /// `--cpus`: the server's threads, one per CPU in turn.
    #[command(flatten)]
    pub cpus: CpusArg,
    /// How much to log, 0 to 3 (see below).
    #[arg(short, long, value_name = "LEVEL", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub verbose: u8,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `load`.
#[derive(Debug, ClapArgs)]
pub struct LoadArgs {
    /// http://HOST[:PORT]/PATH (HOST an IP address or a name; with --unix-socket, the host
    /// only names the Host header).
    #[arg(value_name = "URL")]
    pub url: String,
    /// Total requests, over all connections (as ab's -n).
    #[arg(short = 'n', long, value_name = "N", conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// `-d`: run for this long instead.
    #[command(flatten)]
    pub duration: DurationArg,
    /// Connections open at once.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 1)]
    pub connections: u32,
    /// Keep connections open between requests (HTTP keep-alive, as ab -k; always on
    /// with --pipeline).
    #[arg(short = 'k', long)]
    pub keepalive: bool,
    /// Requests in flight on each connection (HTTP pipelining; implies -k).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub pipeline: u32,
    /// Open loop: R requests per second in all, on a fixed schedule (k and M suffixes).
    #[arg(long, value_name = "R")]
    pub rate: Option<String>,
    /// Generator threads (default: one per CPU, at most one per connection).
    #[arg(short, long, value_name = "N")]
    pub threads: Option<usize>,
    /// Connect to this Unix socket instead of the URL's host and port (as curl's).
    #[arg(long, value_name = "FILE")]
    pub unix_socket: Option<PathBuf>,
    /// Method of every request.
    #[arg(short = 'm', long, value_name = "METHOD", default_value = "GET")]
    pub method: String,
    /// Extra request header, "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// A request that has no answer after this long fails (read).
    #[arg(long, value_name = "TIME", default_value = "30s")]
    pub timeout: String,
    /// `--cpus`: the generator's threads, one per CPU in turn.
    #[command(flatten)]
    pub cpus: CpusArg,
    /// `-r`: runs of the load.
    #[command(flatten)]
    pub runs: RunsArg,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of `models`.
#[derive(Debug, ClapArgs)]
pub struct ModelsArgs {
    /// Models to run, comma-separated, or `all`.
    #[arg(long, value_name = "LIST", default_value = "all")]
    pub model: String,
    /// Who drives them: the built-in load generator, or ab, wrk or h2load when installed.
    #[arg(long, value_name = "DRIVER", default_value = "builtin")]
    pub driver: String,
    /// Total requests per model (as ab -n).
    #[arg(
        short = 'n',
        long,
        value_name = "N",
        default_value_t = 5000,
        conflicts_with = "duration"
    )]
    pub requests: u64,
    /// `-d`: run each model for this long instead.
    #[command(flatten)]
    pub duration: DurationArg,
    /// Connections open at once.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 20)]
    pub connections: u32,
    /// Keep-alive for every model (ab -k; wrk and h2load always keep connections).
    #[arg(short = 'k', long)]
    pub keepalive: bool,
    /// Requests in flight per connection (builtin and h2load's -m).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub pipeline: u32,
    /// Bytes of every response's body.
    #[arg(long, value_name = "SIZE", default_value = "13")]
    pub body_size: String,
    /// Accept queue of every server (the D tool used 10; at least -c here, so a burst of
    /// connects is not a measure of SYN retransmission).
    #[arg(short, long, value_name = "N", default_value_t = 128)]
    pub backlog: u32,
    /// `--cpus`: the server's CPU, then the load's.
    #[command(flatten)]
    pub cpus: CpusArg,
    /// `-r`: runs of each model.
    #[command(flatten)]
    pub runs: RunsArg,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Flags of the hidden `peer`.
#[derive(Debug, ClapArgs)]
pub struct PeerArgs {
    /// The inherited control socket.
    #[arg(long, value_name = "FD")]
    pub control_fd: i32,
    /// Where names go.
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
}

/// Where the other role of each stream runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum PlacementKind {
    /// Both roles are threads of this process.
    #[default]
    Threads,
    /// The receiving role runs in a child sockbench process (the same binary).
    Processes,
}

/// Flags of `report`.
#[derive(Debug, ClapArgs)]
pub struct ReportArgs {
    /// A JSON report written by `--format json` or `--export-json` ("-" for stdin).
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
    /// `--by-placement` (documents of the measuring commands and the suite).
    #[command(flatten)]
    pub by_placement: ByPlacementArg,
}

/// Flags of `compare`.
#[derive(Debug, ClapArgs)]
pub struct CompareArgs {
    /// The baseline report, then one or more reports to compare with it ("-" for stdin,
    /// once; each NEW file once).
    #[arg(value_names = ["BASE.json", "NEW.json"], num_args = 2.., required = true)]
    pub files: Vec<PathBuf>,
    /// Exit 1 if any matched scenario is significantly slower than the baseline (p below
    /// --alpha) by more than PCT percent: throughput down by more than PCT%, or for
    /// pingpong the latency up by more than PCT% (for CI gates). A scenario that ran in
    /// BASE and failed in NEW, or that NEW lacks, fails it too (named on stderr).
    #[arg(long, value_name = "PCT", allow_hyphen_values = true)]
    pub fail_if_slower: Option<f64>,
    /// Significance level of the test (default 0.05: a 95% confidence interval).
    #[arg(
        long,
        value_name = "P",
        default_value_t = 0.05,
        allow_hyphen_values = true
    )]
    pub alpha: f64,
    /// Options to leave out of a scenario's identity, comma-separated, to compare across a
    /// change of them (e.g. `--ignore-option sndbuf`). By default scenarios match by
    /// workload, transport, engine, size, sndbuf, rcvbuf, parallel, nodelay, cpus, runtime,
    /// send, recv, rate (--rate; unpaced is a value), open (connect --open) and placement
    /// (with the role in the other process, which --reverse flips); runs, warmup,
    /// duration, count and bytes never count.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub ignore_option: Vec<IdentityOption>,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `server --max-memory`: a size above 0 (kept as written; the server reads it).
fn some_memory(text: &str) -> Result<String, String> {
    match crate::vocab::units::parse_size(text)? {
        0 => Err("0 would refuse every test (each needs memory for its buffers): give a size such as 256M, or leave the flag out for 1G".into()),
        _ => Ok(text.to_string()),
    }
}

/// `server --path`: a directory that exists and this user may create files in, checked
/// before the server listens.
fn existing_dir(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err("not a directory: give a directory for the socket files and FIFOs".into()),
        Err(e) => {
            return Err(format!(
                "{e}: create the directory first (mkdir -p {text}), or leave --path out for a private one"
            ))
        }
    }
    use nix::unistd::{access, AccessFlags};
    access(&path, AccessFlags::W_OK | AccessFlags::X_OK).map_err(|e| {
        format!("this user cannot create files there ({e}): give a directory it may write to")
    })?;
    Ok(path)
}

fn connect_transports_help() -> String {
    let names: Vec<&str> = crate::workload::connect::TRANSPORTS
        .iter()
        .map(|t| t.name())
        .collect();
    format!(
        "Transports, comma-separated, or `all`: {} (the connection-oriented ones)",
        names.join(", ")
    )
}

/// Output flags: every command that writes a document takes these, after its name.
#[derive(Debug, Clone, Default, ClapArgs)]
pub struct OutputArgs {
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table, help_heading = HEAD_OUTPUT)]
    pub format: Format,
    /// Also write the JSON document to PATH ("-" for stdout); a measuring command
    /// rewrites it after every scenario.
    #[arg(long, value_name = "PATH", help_heading = HEAD_OUTPUT)]
    pub export_json: Option<PathBuf>,
    /// Also write a CSV file (one row per scenario, run or row of the table) to PATH.
    #[arg(long, value_name = "PATH", help_heading = HEAD_OUTPUT)]
    pub export_csv: Option<PathBuf>,
    /// Also write the tables in Markdown to PATH.
    #[arg(long, value_name = "PATH", help_heading = HEAD_OUTPUT)]
    pub export_markdown: Option<PathBuf>,
    /// Also write a self-contained HTML page with charts and every table to PATH.
    #[arg(long, value_name = "PATH", help_heading = HEAD_OUTPUT)]
    pub export_html: Option<PathBuf>,
    /// Also write the figures in the OpenMetrics text format to PATH (for a node
    /// exporter's textfile collector: name it *.prom).
    #[arg(long, value_name = "PATH", help_heading = HEAD_OUTPUT)]
    pub export_openmetrics: Option<PathBuf>,
    /// No progress on stderr.
    #[arg(short, long, help_heading = HEAD_OUTPUT)]
    pub quiet: bool,
    /// Tables: show every column, however wide (by default a table fits 100 columns and
    /// the rest is in --format json).
    #[arg(long, help_heading = HEAD_OUTPUT)]
    pub wide: bool,
    /// Tables: throughput in bits/s (SI, as iperf3), bytes/s (binary, as file tools), or
    /// both.
    #[arg(long, value_enum, value_name = "UNIT", default_value_t = crate::vocab::Units::Bits, help_heading = HEAD_OUTPUT)]
    pub units: crate::vocab::Units,
}

/// `--by-placement`: for the measuring commands, the suite and `report` (the documents
/// whose runs record where their roles ran).
#[derive(Debug, Clone, Copy, Default, ClapArgs)]
pub struct ByPlacementArg {
    /// Tables: one row per placement of each scenario (runs with both roles on one CPU,
    /// runs across CPUs) instead of one row over all its runs.
    #[arg(long, help_heading = HEAD_OUTPUT)]
    pub by_placement: bool,
}

/// `-d/--duration TIME`, declared once. A command says in its own help what the time
/// bounds and its default (`mut_arg` on the command).
#[derive(Debug, Clone, Default, ClapArgs)]
pub struct DurationArg {
    /// How long each measured run lasts: 2, 500ms, 1.5s, 1m (default 2s).
    #[arg(short, long, value_name = "TIME", allow_hyphen_values = true, help_heading = HEAD_TIME)]
    pub duration: Option<String>,
}

impl DurationArg {
    /// The time given, checked; `None` when the flag was not given.
    ///
    /// # Errors
    /// Text that is not a duration, named as `--duration`.
    pub fn parsed(&self) -> Result<Option<std::time::Duration>, String> {
        parse_time("--duration", self.duration.as_deref())
    }

    /// The time given, or `default`.
    ///
    /// # Errors
    /// As [`DurationArg::parsed`].
    pub fn or(&self, default: std::time::Duration) -> Result<std::time::Duration, String> {
        Ok(self.parsed()?.unwrap_or(default))
    }
}

/// `text` of `flag` as a duration, if given.
fn parse_time(flag: &str, text: Option<&str>) -> Result<Option<std::time::Duration>, String> {
    text.map(|t| crate::vocab::units::parse_duration(t).map_err(|e| format!("{flag}: {e}")))
        .transpose()
}

/// `-w/--warmup TIME`, declared once: unmeasured time before what is measured.
#[derive(Debug, Clone, Default, ClapArgs)]
pub struct WarmupArg {
    /// Unmeasured warm-up before each measured run, on its own connection (0 to skip;
    /// default 0.25s).
    #[arg(short, long, value_name = "TIME", allow_hyphen_values = true, help_heading = HEAD_TIME)]
    pub warmup: Option<String>,
}

/// The most `--runs` any command takes.
pub const MAX_RUNS: u32 = 100;

/// `-i/--interval TIME`, declared once: a line per interval of each measured run.
#[derive(Debug, Clone, Default, ClapArgs)]
pub struct IntervalArg {
    /// Print one line per TIME of each measured run while it goes (throughput and messages,
    /// with loss and TCP retransmits where the run counts them), as iperf3's -i; kept in
    /// the JSON (`runs[].intervals`; a swarm's in `body.intervals`).
    #[arg(help_heading = HEAD_TIME, short, long, value_name = "TIME", allow_hyphen_values = true)]
    pub interval: Option<String>,
}

impl IntervalArg {
    /// The interval given, if any.
    ///
    /// # Errors
    /// Not a duration, or shorter than [`MIN_INTERVAL`].
    pub fn get(&self) -> Result<Option<std::time::Duration>, String> {
        let Some(t) = self.interval.as_deref() else {
            return Ok(None);
        };
        let d = crate::vocab::units::parse_duration(t).map_err(|e| format!("--interval: {e}"))?;
        if d < MIN_INTERVAL {
            return Err(format!(
                "--interval {t}: the shortest interval is {} ms; give 0.1, 1 or 500ms",
                MIN_INTERVAL.as_millis()
            ));
        }
        Ok(Some(d))
    }
}

/// `--placement WHERE`, declared once: where the other role runs on this host.
#[derive(Debug, Clone, Copy, Default, ClapArgs)]
pub struct PlacementArg {
    /// Where the other role runs on this host: threads of this process, or a child
    /// process, to see what two processes cost against two threads.
    #[arg(help_heading = HEAD_PLACEMENT, long, value_enum, value_name = "WHERE", default_value_t = PlacementKind::Threads)]
    pub placement: PlacementKind,
}

/// `-r/--runs N`, declared once: measured repetitions, so a figure comes with its noise
/// (1 to [`MAX_RUNS`], checked here for every command).
#[derive(Debug, Clone, Copy, ClapArgs)]
pub struct RunsArg {
    /// Measured runs of each scenario. With 2 or more, the median, a 95% confidence
    /// interval and the coefficient of variation are reported; things are ranked only
    /// beyond the noise of their runs, so with one, none is named fastest.
    #[arg(short, long, value_name = "N", default_value_t = 1, help_heading = HEAD_TIME,
          value_parser = clap::value_parser!(u32).range(1..=MAX_RUNS as i64))]
    pub runs: u32,
}

impl WarmupArg {
    /// The warm-up given, or `default`.
    ///
    /// # Errors
    /// Text that is not a duration, named as `--warmup`.
    pub fn or(&self, default: std::time::Duration) -> Result<std::time::Duration, String> {
        Ok(parse_time("--warmup", self.warmup.as_deref())?.unwrap_or(default))
    }
}

impl Default for RunsArg {
    fn default() -> RunsArg {
        RunsArg { runs: 1 }
    }
}

/// `-t/--transport`, declared once: a list (`tcp,unix`) or `all`; a command that runs
/// one transport at a time takes a list of one. Each command names its transports and
/// its default in its own help.
#[derive(Debug, Clone, Default, ClapArgs)]
pub struct TransportsArg {
    /// Transports, comma-separated, or `all`: unix, unix-dgram, unix-seqpacket, socketpair,
    /// tcp, tcp6, udp, udp6, pipe, fifo, mq, shm (default unix).
    #[arg(short, long, value_name = "LIST", help_heading = HEAD_MEASURE)]
    pub transport: Option<String>,
}

/// `-s/--size`, declared once: a list (1,64,4K,64K,1M) or a range of powers of two
/// (1..64M); K, M and G are binary (4K = 4096 bytes). A command that takes one size
/// takes a list of one.
#[derive(Debug, Clone, Default, ClapArgs)]
pub struct SizesArg {
    /// Message sizes: a list (1,64,4K,64K,1M) or a range of powers of two (1..64M); K, M
    /// and G are binary (4K = 4096 bytes). Default: 64 for pingpong, rate and connect;
    /// for stream 64K, but 1472 for udp and udp6 (a datagram that fits a 1500-byte
    /// Ethernet MTU) and 8K for mq.
    #[arg(short, long, value_name = "LIST|RANGE", help_heading = HEAD_MEASURE)]
    pub size: Option<String>,
}

/// `--cpus LIST`, declared once, one syntax everywhere: CPU numbers and ranges,
/// comma-separated (`1`, `0,1`, `0-3`, `0,2-3`), each one this process may run on. What
/// the CPUs are for is each command's (the measuring commands: sender, receiver).
#[derive(Debug, Clone, Default, ClapArgs)]
pub struct CpusArg {
    /// Pin the sender thread(s) to the first CPU and the receiver thread(s) to the second
    /// (one CPU: both there). Both on one CPU is refused for a role that waits by
    /// spinning (engine nonblocking, transport shm; under `all`, skipped): it would
    /// measure the scheduler. See --allow-shared-cpu. CPU lists are numbers and ranges,
    /// comma-separated (1, 0,1, 0-3), on every command.
    #[arg(long, value_name = "LIST", value_parser = cpu_list, help_heading = HEAD_PLACEMENT)]
    pub cpus: Option<CpuList>,
}

/// A parsed `--cpus` list, in the order given (ranges expanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Most CPU numbers a list may name (Linux's CONFIG_NR_CPUS tops out at 8192).
const MAX_CPU: usize = 8191;

/// Parse `--cpus`: `1`, `0,1`, `0-3`, `0,2-3`.
///
/// # Errors
/// Anything that is not a CPU number or an ascending range of them.
pub fn cpu_list(text: &str) -> Result<CpuList, String> {
    let bad =
        || format!("'{text}' is not a CPU list: give CPU numbers and ranges, e.g. 1 or 0,1 or 0-3");
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if a > b || b > MAX_CPU {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    Ok(CpuList(out))
}

impl CpuList {
    /// Check each CPU is one this process may run on (`allowed`, its affinity mask;
    /// empty: not known, so anything goes).
    ///
    /// # Errors
    /// The first CPU outside `allowed`, with the ones it may use.
    pub fn within(&self, allowed: &[usize]) -> Result<(), String> {
        match self
            .0
            .iter()
            .find(|c| !allowed.is_empty() && !allowed.contains(c))
        {
            Some(c) => Err(format!(
                "--cpus: CPU {c} is not one this process may run on (it may use {})",
                allowed
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )),
            None => Ok(()),
        }
    }
}

impl OutputArgs {
    /// The report exports these flags ask for (`--export-json/csv/markdown`), by format.
    pub fn report_exports(&self) -> Vec<(Format, PathBuf)> {
        [
            (Format::Json, &self.export_json),
            (Format::Csv, &self.export_csv),
            (Format::Markdown, &self.export_markdown),
            (Format::Html, &self.export_html),
            (Format::Openmetrics, &self.export_openmetrics),
        ]
        .into_iter()
        .filter_map(|(f, p)| Some((f, p.clone()?)))
        .collect()
    }

    /// How tables present figures (one row over all of a scenario's runs).
    pub fn view(&self) -> crate::vocab::View {
        self.view_by(ByPlacementArg::default())
    }

    /// How tables present figures, with `--by-placement` where a command takes it.
    pub fn view_by(&self, placement: ByPlacementArg) -> crate::vocab::View {
        crate::vocab::View {
            wide: self.wide,
            units: self.units,
            by_placement: placement.by_placement,
        }
    }
}

/// Flags every workload takes.
#[derive(Debug, ClapArgs)]
pub struct CommonArgs {
    /// `-t`: the transports.
    #[command(flatten)]
    pub transports: TransportsArg,
    /// `-s`: the message sizes.
    #[command(flatten)]
    pub sizes: SizesArg,
    /// `-d`: how long each run lasts.
    #[command(flatten)]
    pub duration: DurationArg,
    /// Exactly N messages (stream, rate), round trips (pingpong) or connections (connect)
    /// per run and per stream (`-P 2 -n 1000` is 2000 in all), instead of running for a
    /// time.
    #[arg(help_heading = HEAD_TIME, short = 'n', long, value_name = "N", allow_hyphen_values = true, conflicts_with = "duration")]
    pub count: Option<u64>,
    /// `-w`: the warm-up.
    #[command(flatten)]
    pub warmup: WarmupArg,
    /// `-r`: measured runs.
    #[command(flatten)]
    pub runs: RunsArg,
    /// `-i`: intervals.
    #[command(flatten)]
    pub interval: IntervalArg,
    /// Requested send buffer: SO_SNDBUF for sockets, the pipe size for pipe and fifo, the
    /// ring size for shm, the queue depth (in messages of SIZE) for mq. A list or range
    /// as for --size (e.g. 4K,64K or 4K..4M): each value is a scenario, and the table
    /// shows what the kernel granted.
    #[arg(help_heading = HEAD_SOCKETS, long, value_name = "SIZE")]
    pub sndbuf: Option<String>,
    /// Requested receive buffer (SO_RCVBUF; sockets only). Setting it turns off TCP's
    /// receive-buffer autotuning. A list or range as for --size (e.g. 1,4K..4M): each
    /// value is a scenario, and the table shows what the kernel granted (Linux doubles a
    /// request and clamps it to net.core.rmem_max).
    #[arg(help_heading = HEAD_SOCKETS, long, value_name = "SIZE")]
    pub rcvbuf: Option<String>,
    /// Disable Nagle's algorithm (TCP_NODELAY) on TCP.
    #[arg(help_heading = HEAD_SOCKETS, long)]
    pub nodelay: bool,
    /// Parallel streams: N sender/receiver pairs, each on its own connection and threads.
    #[arg(help_heading = HEAD_PLACEMENT, short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u32,
    /// I/O engines, comma-separated, or `all`: blocking (plain blocking calls; alias
    /// blocking-sync), nonblocking (O_NONBLOCK, retry on EAGAIN without sleeping; alias
    /// nonblocking-sync), poll (O_NONBLOCK, poll(2) on EAGAIN; alias blocking-async: the
    /// thread blocks in the readiness call, not the transfer), epoll (O_NONBLOCK,
    /// epoll_wait(2) on EAGAIN), io-uring (each send and receive submitted to io_uring;
    /// alias nonblocking-async), async (a tokio runtime per side; see --runtime). shm
    /// runs on blocking only; connect too, so far.
    #[arg(help_heading = HEAD_MEASURE, short, long, value_name = "LIST", default_value = "blocking")]
    pub engine: String,
    /// The async engine's tokio runtime: current (the side's own thread runs the
    /// reactor) or multi (a worker thread does, so each wake-up crosses threads).
    #[arg(help_heading = HEAD_MEASURE, long, value_enum, default_value_t = crate::engine::RuntimeKind::Current)]
    pub runtime: crate::engine::RuntimeKind,
    /// `--cpus`: sender, receiver.
    #[command(flatten)]
    pub cpus: CpusArg,
    /// With --cpus A,A: run a spinning engine (nonblocking) or transport (shm) with both
    /// roles on one CPU anyway. The figure is then the scheduler's, and its row says so
    /// (warning spinning-shared-cpu).
    #[arg(help_heading = HEAD_PLACEMENT, long)]
    pub allow_shared_cpu: bool,
    /// tcp/udp: address the receiver binds, IP or IP:PORT (default 127.0.0.1 or ::1, port
    /// chosen by the kernel). On one host, traffic between two of its own addresses goes
    /// through the loopback device whatever the address: an interface's address does not
    /// put the data on its link.
    #[arg(help_heading = HEAD_SOCKETS, long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// tcp/udp: address the sender connects to (default: the bound address).
    #[arg(help_heading = HEAD_SOCKETS, long, value_name = "IP")]
    pub connect: Option<String>,
    /// Directory for Unix socket files and FIFOs (default: a private directory under
    /// $XDG_RUNTIME_DIR or /tmp, removed afterwards).
    #[arg(help_heading = HEAD_SOCKETS, long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// `--placement`: threads or processes.
    #[command(flatten)]
    pub placement: PlacementArg,
    /// Run against `sockbench server` at HOST (port 5290 unless given: HOST:PORT,
    /// [IPV6]:PORT). This side sends; the server receives (see --reverse).
    #[arg(help_heading = HEAD_PLACEMENT, long, value_name = "HOST[:PORT]", conflicts_with = "placement")]
    pub server: Option<String>,
    /// The other side sends: the server (with --server) or the child (with --placement
    /// processes); pingpong: the other side starts each exchange; connect: it dials.
    #[arg(help_heading = HEAD_PLACEMENT, short = 'R', long)]
    pub reverse: bool,
    /// stream and rate with --server or --placement processes: both directions at once,
    /// -P streams each way; the table shows their sum, the JSON each direction
    /// (`runs[].directions`).
    #[arg(help_heading = HEAD_PLACEMENT, long, conflicts_with = "reverse")]
    pub bidir: bool,
    /// With --server: the pre-shared key the server was started with (--key-file there).
    #[arg(help_heading = HEAD_PLACEMENT, long, value_name = "FILE", requires = "server")]
    pub key_file: Option<PathBuf>,
    /// io-uring engine: a kernel thread polls each ring's submission queue
    /// (IORING_SETUP_SQPOLL), so sends and receives need no system call. The thread's CPU
    /// is read from /proc and counted with the role's, not hidden.
    #[arg(help_heading = HEAD_MEASURE, long)]
    pub sqpoll: bool,
    /// Count each role's CPU cycles, instructions and cache misses per message
    /// (perf_event_open); where the kernel (perf_event_paranoid) or the hypervisor does
    /// not allow it, the report says why and the run goes on without them.
    #[arg(help_heading = HEAD_MEASURE, long)]
    pub counters: bool,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
    /// `--by-placement`.
    #[command(flatten)]
    pub by_placement: ByPlacementArg,
}

/// Flags of `stream`.
#[derive(Debug, ClapArgs)]
pub struct StreamArgs {
    /// Flags every workload takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Send exactly this many bytes per run and per stream (e.g. 1G; with -P 2, 2G in
    /// all); the last message may be short.
    #[arg(long, value_name = "SIZE", conflicts_with_all = ["duration", "count"], help_heading = HEAD_TIME)]
    pub bytes: Option<String>,
    /// How the sender sends: write (default), sendfile (from a file on tmpfs), splice
    /// (from a pipe of vmsplice'd pages) or zerocopy (MSG_ZEROCOPY; the report says how
    /// many sends the kernel really did not copy).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = SendMethod::Write, help_heading = HEAD_MEASURE)]
    pub send: SendMethod,
    /// How the receiver receives: read (default) or zerocopy (TCP_ZEROCOPY_RECEIVE, tcp
    /// and tcp6: received pages are mapped, not copied, where the MSS allows).
    #[arg(long, value_enum, value_name = "HOW", default_value_t = RecvMethod::Read, help_heading = HEAD_MEASURE)]
    pub recv: RecvMethod,
    /// N messages per call: one sendmmsg/recvmmsg for N datagrams (udp, udp6, unix-dgram),
    /// or N operations in flight on the io-uring engine (any transport it drives). The
    /// report gives messages per call.
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = HEAD_MEASURE)]
    pub batch: u32,
}

/// Flags of `pingpong`.
#[derive(Debug, ClapArgs)]
pub struct PingpongArgs {
    /// Flags every workload takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Open loop: each stream sends R requests per second on a fixed schedule and time each round trip
    /// from when its request was due, so a stall delays (and counts against) every request
    /// queued behind it (coordinated-omission correction). Default: closed loop. Accepts
    /// k and M suffixes (10k = 10000).
    #[arg(long, value_name = "R", help_heading = HEAD_MEASURE)]
    pub rate: Option<String>,
    /// Write every scenario's full latency distribution to PATH: CSV (value_ns, count)
    /// or, if PATH ends in .json, JSON.
    #[arg(long, value_name = "PATH", help_heading = HEAD_OUTPUT)]
    pub histogram: Option<PathBuf>,
    /// Send each request as N separate writes (the request/response pattern that meets
    /// Nagle's algorithm and delayed ACKs on TCP; see --nodelay).
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = HEAD_MEASURE)]
    pub writes: u32,
    /// Kernel timestamps (SO_TIMESTAMPING, software): split each request's and reply's
    /// one-way time into the sender's user->kernel, kernel->kernel and the receiver's
    /// kernel->user parts, each a distribution, plus the server's turnaround (tcp, tcp6,
    /// udp, udp6 on the blocking engine; both roles on this host; at least 8 bytes). Each
    /// transmit stamp costs one more system call per message (an error-queue read, made
    /// after the reply is in, outside the timed round trip). A role keeps at most 16384
    /// records per run, then 1 in 2 (1 in 4, ...): the breakdown says how many round
    /// trips it covers of how many.
    #[arg(long, help_heading = HEAD_MEASURE)]
    pub timestamps: bool,
}

/// Flags of `rate`.
#[derive(Debug, ClapArgs)]
pub struct RateArgs {
    /// Flags every workload takes.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Pace each sender at R messages per second (default: as fast as it can). Accepts k
    /// and M suffixes.
    #[arg(long, value_name = "R", help_heading = HEAD_MEASURE)]
    pub rate: Option<String>,
    /// N messages per call: one sendmmsg/recvmmsg for N datagrams (udp, udp6, unix-dgram),
    /// or N operations in flight on the io-uring engine. The report gives messages per
    /// call.
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = HEAD_MEASURE)]
    pub batch: u32,
    /// Kernel timestamps (SO_TIMESTAMPING, software): split each message's one-way time
    /// into the sender's user->kernel, kernel->kernel and the receiver's kernel->user
    /// parts, each a distribution, beside the one-way time measured from the send time
    /// each message carries (tcp, tcp6, udp, udp6 on the blocking engine; both roles on
    /// this host; at least 16 bytes; not with --batch). Each transmit stamp costs the
    /// sender one more system call per message (an error-queue read). A role keeps at
    /// most 16384 records per run, then a sample: the breakdown says how many messages
    /// it covers of how many.
    #[arg(long, help_heading = HEAD_MEASURE)]
    pub timestamps: bool,
}

/// Flags of `connect`.
#[derive(Debug, ClapArgs)]
pub struct ConnectArgs {
    /// Flags every workload takes (`--size` is the request and response size).
    #[command(flatten)]
    pub common: CommonArgs,
    /// Close with SO_LINGER 0: the connection is reset instead of closed, so TCP leaves
    /// no TIME_WAIT state behind.
    #[arg(long, help_heading = HEAD_SOCKETS)]
    pub linger0: bool,
    /// Connections kept open at once: each is closed only when this many are open.
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = HEAD_MEASURE)]
    pub open: u32,
}

/// Flags of `suite`.
#[derive(Debug, ClapArgs)]
pub struct SuiteArgs {
    /// `-d`: measured time per cell (default 1s).
    #[command(flatten)]
    pub duration: DurationArg,
    /// `-w`: warm-up per cell (default 0.1s).
    #[command(flatten)]
    pub warmup: WarmupArg,
    /// `-t`: the transports (default all).
    #[command(flatten)]
    pub transports: TransportsArg,
    /// Output.
    #[command(flatten)]
    pub output: OutputArgs,
    /// `--by-placement`.
    #[command(flatten)]
    pub by_placement: ByPlacementArg,
}

/// Options `--ignore-option` can leave out of a scenario's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IdentityOption {
    /// The engine (blocking, epoll, ...).
    Engine,
    /// The requested send buffer (`--sndbuf`).
    Sndbuf,
    /// The requested receive buffer (`--rcvbuf`).
    Rcvbuf,
    /// Parallel streams (`--parallel`).
    Parallel,
    /// TCP_NODELAY (`--nodelay`).
    Nodelay,
    /// CPU pinning (`--cpus`).
    Cpus,
    /// The async engine's runtime.
    Runtime,
    /// stream's `--send` method.
    Send,
    /// stream's `--recv` method.
    Recv,
    /// pingpong's and rate's target rate (`--rate`; unpaced when absent).
    Rate,
    /// connect's connections kept open at once (`--open`).
    Open,
    /// Where the roles ran (threads, processes, server), which role ran in the other
    /// process (`--reverse` flips it) and `--bidir`.
    Placement,
}

impl IdentityOption {
    /// The name `--ignore-option` takes.
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
}

/// The shortest `--interval`: a line every 10 ms is more than anyone reads, and the
/// sampler's own wake-ups would start to show in what it measures.
pub const MIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

#[cfg(test)]
mod tests {
    use super::{cpu_list, Args, Command, CpuList};
    use clap::Parser;

    #[test]
    fn cpu_lists_take_numbers_and_ranges_in_the_order_given() {
        assert_eq!(cpu_list("1").unwrap(), CpuList(vec![1]));
        assert_eq!(cpu_list("0,2-3").unwrap(), CpuList(vec![0, 2, 3]));
        assert_eq!(cpu_list(" 3 , 1 ").unwrap(), CpuList(vec![3, 1]));
        assert_eq!(cpu_list("8191").unwrap(), CpuList(vec![8191]));
        for bad in ["3-1", "", "a", "1,", "-1", "8192", "0-8192"] {
            assert!(cpu_list(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_cpu_outside_the_mask_is_named_with_those_allowed() {
        let e = CpuList(vec![0, 5]).within(&[0, 1]).unwrap_err();
        assert!(e.contains("CPU 5") && e.contains("0,1"), "{e}");
        assert!(CpuList(vec![1, 0]).within(&[0, 1]).is_ok());
        // An unknown mask checks nothing.
        assert!(CpuList(vec![7]).within(&[]).is_ok());
    }

    /// The shared flags mean the same on every command that takes them: one parser, one
    /// syntax.
    #[test]
    fn every_command_takes_the_shared_flags_in_one_syntax() {
        let cpus = |line: &[&str]| -> Option<CpuList> {
            let a = Args::try_parse_from(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            match a.command {
                Some(Command::Stream(s)) => s.common.cpus.cpus,
                Some(Command::Serve(s)) => s.cpus.cpus,
                Some(Command::Load(l)) => l.cpus.cpus,
                Some(Command::Models(m)) => m.cpus.cpus,
                other => panic!("{other:?}"),
            }
        };
        let want = Some(CpuList(vec![0, 1]));
        assert_eq!(cpus(&["sockbench", "stream", "--cpus", "0-1"]), want);
        assert_eq!(cpus(&["sockbench", "serve", "--cpus", "0,1"]), want);
        assert_eq!(
            cpus(&["sockbench", "load", "--cpus", "0-1", "http://h/"]),
            want
        );
        assert_eq!(cpus(&["sockbench", "models", "--cpus", "0-1"]), want);
        for line in [
            ["sockbench", "stream", "--cpus", "x"],
            ["sockbench", "serve", "--cpus", "2-1"],
        ] {
            assert!(Args::try_parse_from(line).is_err(), "{line:?}");
        }
        // -d, -r and the output flags, after the command's name.
        for cmd in [
            "stream", "relay", "swarm", "mesh", "load", "models", "serve", "listen", "suite",
        ] {
            let mut line = vec!["sockbench", cmd, "-d", "1.5s", "--format", "json", "-q"];
            if cmd == "load" {
                line.push("http://h/");
            }
            let a = Args::try_parse_from(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert_eq!(a.output().format, super::Format::Json, "{cmd}");
            assert!(a.output().quiet, "{cmd}");
        }
        for cmd in ["stream", "relay", "load", "models", "swarm"] {
            let mut line = vec!["sockbench", cmd, "-r", "3"];
            if cmd == "load" {
                line.push("http://h/");
            }
            Args::try_parse_from(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        }
    }

    /// A flag a command does not take is refused, not accepted and ignored, and absent
    /// from its help.
    #[test]
    fn a_flag_a_command_does_not_take_is_refused() {
        use clap::CommandFactory;
        for line in [
            &["sockbench", "server", "--format", "json"][..],
            &["sockbench", "server", "--export-json", "x.json"],
            &["sockbench", "relay", "--by-placement"],
            &["sockbench", "swarm", "--by-placement"],
            &["sockbench", "mesh", "-r", "3"],
            &["sockbench", "serve", "--warmup", "1"],
        ] {
            assert!(Args::try_parse_from(line).is_err(), "{line:?} was accepted");
        }
        let mut cmd = Args::command();
        let server = cmd.find_subcommand_mut("server").unwrap();
        let help = server.render_long_help().to_string();
        assert!(!help.contains("--format"), "{help}");
        assert!(!help.contains("--export-json"), "{help}");
    }

    /// Output flags before the command are the suite's: with a command they are refused
    /// (main prints where they go), never silently dropped.
    #[test]
    fn output_flags_before_a_command_are_refused() {
        let e = Args::try_parse_from(["sockbench", "--format", "json", "stream"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{e}");
        let a = Args::try_parse_from(["sockbench", "--format", "json"]).unwrap();
        assert!(a.command.is_none());
        assert_eq!(a.output().format, super::Format::Json);
    }
}
