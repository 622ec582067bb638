//! The `sockbench` command: parse, match the command, hand it to its mode, exit.

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

use sockbench::cli::{Args, Command, Format};
use sockbench::mode::{self, print_error_document, USAGE};

fn main() -> ExitCode {
    // The command line as given; an argument that is not UTF-8 is shown with U+FFFD.
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let args = match Args::try_parse_from(std::env::args_os()) {
        Ok(a) => a,
        Err(e) => return usage_error(e, &argv),
    };
    let status = match &args.command {
        Some(Command::Report(r)) => mode::report::run(r, &args),
        Some(Command::Compare(c)) => mode::compare::run(c, &args.output),
        Some(Command::Server(s)) => mode::server::run(s, &args.output),
        Some(Command::Listen(l)) => mode::listen::run(l, &args.output),
        Some(Command::Swarm(s)) => mode::swarm::run(s, &args.output, argv.clone()),
        Some(Command::Mesh(m)) => mode::mesh::run(m, &args.output, argv.clone()),
        Some(Command::Peer(p)) => mode::server::peer(p),
        Some(Command::Serve(s)) => mode::serve::run(s, &args.output, argv.clone()),
        Some(Command::Load(l)) => mode::load::run(l, &args.output, argv.clone()),
        Some(Command::Models(m)) => mode::models::run(m, &args.output, argv.clone()),
        Some(Command::Relay(r)) => mode::relay::run(r, &args.output, argv.clone()),
        Some(Command::Suite(_)) | None => mode::suite::run(&args, argv.clone()),
        Some(
            Command::Stream(_) | Command::Pingpong(_) | Command::Rate(_) | Command::Connect(_),
        ) => mode::bench::run(&args, argv.clone()),
    };
    // A usage error a mode found (after clap): under --format json, a JSON document too.
    if args.output.format == Format::Json {
        if let Some(e) = mode::take_usage_error() {
            print_error_document(&argv, &e);
        }
    }
    status
}

/// Whether the raw command line asks for JSON on stdout (clap could not parse it).
fn wants_json(argv: &[String]) -> bool {
    argv.iter().any(|a| a == "--format=json")
        || argv
            .windows(2)
            .any(|w| w[0] == "--format" && w[1] == "json")
}

/// The command the raw command line names: the first argument that is a command's name
/// (clap could not parse the line, so this is a guess; option values are not commands).
fn command_named(argv: &[String]) -> Option<String> {
    use clap::CommandFactory;
    let command = Args::command();
    let names: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
    argv.iter()
        .skip(1)
        .find(|a| names.contains(&a.as_str()))
        .cloned()
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
        if command_named(argv).as_deref() == Some("compare") {
            mode::compare::print_usage_error_document(first);
        } else {
            print_error_document(argv, first);
        }
    }
    let _ = e.print();
    if let Some(tip) = command_first_tip(&e, argv) {
        eprintln!("{tip}");
    }
    ExitCode::from(USAGE)
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
