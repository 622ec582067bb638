//! The `sockbench` command: parse, match the command, hand it to its mode, and turn what
//! the mode returns into the exit status. The one place that says an error and picks
//! the status: 0 done, 1 a runtime failure, 2 bad usage (as clap's own), 130 after
//! Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, as shells report it).

use std::process::ExitCode;

// As in the library: a message that cannot be written (stderr closed or full) is lost,
// never a panic.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use clap::Parser;

use sockbench::cli::{Args, Command};
use sockbench::error::{Error, Status};
use sockbench::mode::{self, print_error_document};
use sockbench::report::{is_json, Kind};
use sockbench::vocab::text::terminal;

/// Exit status of a runtime failure.
const FAILED: u8 = 1;
/// Exit status of bad usage (as clap's own).
const USAGE: u8 = 2;
/// Exit status after Ctrl-C / SIGTERM / SIGHUP (128 + SIGINT, as shells report it).
const INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    // The command line as given; an argument that is not UTF-8 is shown with U+FFFD.
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let args = match Args::try_parse_from(std::env::args_os()) {
        Ok(a) => a,
        Err(e) => return usage_error(e, &argv),
    };
    let result = match &args.command {
        Some(Command::Report(r)) => mode::report::run(r),
        Some(Command::Compare(c)) => mode::compare::run(c, argv.clone()),
        Some(Command::Server(s)) => mode::server::run(s),
        Some(Command::Listen(l)) => mode::listen::run(l, argv.clone()),
        Some(Command::Swarm(s)) => mode::swarm::run(s, argv.clone()),
        Some(Command::Mesh(m)) => mode::mesh::run(m, argv.clone()),
        Some(Command::Peer(p)) => mode::server::peer(p),
        Some(Command::Serve(s)) => mode::serve::run(s, argv.clone()),
        Some(Command::Load(l)) => mode::load::run(l, argv.clone()),
        Some(Command::Models(m)) => mode::models::run(m, argv.clone()),
        Some(Command::Relay(r)) => mode::relay::run(r, argv.clone()),
        Some(Command::Suite(_)) | None => mode::suite::run(&args, argv.clone()),
        Some(
            Command::Stream(_) | Command::Pingpong(_) | Command::Rate(_) | Command::Connect(_),
        ) => mode::bench::run(&args, argv.clone()),
    };
    match result {
        Ok(outcome) => {
            for e in &outcome.errors {
                say(e);
            }
            match outcome.status {
                Status::Done => ExitCode::SUCCESS,
                Status::Failed => ExitCode::from(FAILED),
                Status::Interrupted => ExitCode::from(INTERRUPTED),
            }
        }
        Err(e) => {
            // Under --format json, stdout holds a document even so: the error in it.
            if let (true, Some(kind)) = (is_json(args.output().format), kind_of(&args.command)) {
                print_error_document(kind, &argv, &e.to_string());
            }
            say(&e.to_string());
            ExitCode::from(match e {
                Error::Usage(_) => USAGE,
                Error::Failed(_) => FAILED,
            })
        }
    }
}

/// Say an error on stderr, once. What a file or a peer said (quoted in the message)
/// never drives the terminal: each line's control characters are shown as escapes.
fn say(error: &str) {
    let said: Vec<String> = error.lines().map(terminal).collect();
    eprintln!("sockbench: error: {}", said.join("\n"));
}

/// The kind of document a command writes; none for those that write none of their own
/// (`report` prints another's, `server` and `peer` log).
fn kind_of(command: &Option<Command>) -> Option<Kind> {
    Some(match command {
        None | Some(Command::Suite(_)) => Kind::Suite,
        Some(Command::Stream(_)) => Kind::Stream,
        Some(Command::Pingpong(_)) => Kind::Pingpong,
        Some(Command::Rate(_)) => Kind::Rate,
        Some(Command::Connect(_)) => Kind::Connect,
        Some(Command::Relay(_)) => Kind::Relay,
        Some(Command::Swarm(_)) => Kind::Swarm,
        Some(Command::Load(_)) => Kind::Load,
        Some(Command::Serve(_)) => Kind::Serve,
        Some(Command::Models(_)) => Kind::Models,
        Some(Command::Mesh(_)) => Kind::Mesh,
        Some(Command::Listen(_)) => Kind::Listen,
        Some(Command::Compare(_)) => Kind::Compare,
        Some(Command::Report(_) | Command::Server(_) | Command::Peer(_)) => return None,
    })
}

/// The kind of document the raw command line's command writes (clap could not parse it):
/// its first word that names a command, the suite when none does; none for a command
/// that writes no document of its own.
fn kind_of_argv(argv: &[String]) -> Option<Kind> {
    use clap::CommandFactory;
    let cli = Args::command();
    let named = |a: &String| {
        cli.get_subcommands()
            .any(|c| c.get_name() == a || c.get_all_aliases().any(|n| n == a))
    };
    match argv.iter().skip(1).find(|a| named(a)) {
        None => Some(Kind::Suite),
        Some(word) => Kind::ALL.into_iter().find(|k| k.name() == word),
    }
}

/// Whether the raw command line asks for JSON on stdout (clap could not parse it).
fn wants_json(argv: &[String]) -> bool {
    argv.iter().any(|a| a == "--format=json")
        || argv
            .windows(2)
            .any(|w| w[0] == "--format" && w[1] == "json")
}

/// Help and version go to stdout as clap prints them; anything else is a usage error (2).
fn usage_error(e: clap::Error, argv: &[String]) -> ExitCode {
    if !e.use_stderr() {
        let _ = e.print();
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(USAGE));
    }
    if wants_json(argv) {
        let text = e.render().to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ");
        if let Some(kind) = kind_of_argv(argv) {
            print_error_document(kind, argv, first);
        }
    }
    let _ = e.print();
    if let Some(tip) = flags_first_tip(&e, argv) {
        eprintln!("{tip}");
    }
    if let Some(tip) = server_output_tip(&e, argv) {
        eprintln!("{tip}");
    }
    if let Some(tip) = command_first_tip(&e, argv) {
        eprintln!("{tip}");
    }
    ExitCode::from(USAGE)
}

/// `sockbench server --export-json F`: the server has no document of its own; both
/// sides' figures meet on the client.
fn server_output_tip(e: &clap::Error, argv: &[String]) -> Option<String> {
    let asked = |a: &String| a.starts_with("--export-") || a.starts_with("--format");
    (e.kind() == clap::error::ErrorKind::UnknownArgument
        && argv.get(1).is_some_and(|c| c == "server")
        && argv.iter().any(asked))
    .then(|| {
        "tip: the server logs one line per test on stderr and writes no document: export \
         from the client (`sockbench stream --server HOST --export-json FILE`), where both \
         sides' figures meet"
            .to_string()
    })
}

/// `sockbench --format json stream`: a command's flags go after its name (before it,
/// they are the default suite's). Suggest the line with them moved.
fn flags_first_tip(e: &clap::Error, argv: &[String]) -> Option<String> {
    if e.kind() != clap::error::ErrorKind::ArgumentConflict {
        return None;
    }
    let moved = Args::command_first(argv)?;
    Some(format!(
        "tip: a command's flags follow its name: try `sockbench {}`",
        moved[1..].join(" ")
    ))
}

/// `sockbench -t tcp`: options given without a command. The options belong to a workload;
/// suggest the most common one with the same arguments.
fn command_first_tip(e: &clap::Error, argv: &[String]) -> Option<String> {
    use clap::CommandFactory;
    if e.kind() != clap::error::ErrorKind::UnknownArgument {
        return None;
    }
    let commands: Vec<String> = Args::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let rest = argv.get(1..).unwrap_or_default();
    if rest.iter().any(|a| commands.contains(a)) {
        return None;
    }
    // Only when `stream` would take them as they are.
    let with_stream = ["sockbench", "stream"].into_iter().map(String::from);
    Args::try_parse_from(with_stream.chain(rest.iter().cloned())).ok()?;
    Some(format!(
        "tip: options like these follow a command ({}): try `sockbench stream {}`",
        commands
            .iter()
            .filter(|c| !matches!(
                c.as_str(),
                "help"
                    | "report"
                    | "compare"
                    | "server"
                    | "listen"
                    | "swarm"
                    | "mesh"
                    | "peer"
                    | "serve"
                    | "load"
                    | "models"
                    | "relay"
            ))
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
        rest.join(" ")
    ))
}
