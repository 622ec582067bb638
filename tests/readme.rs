//! The README's examples run exactly as written, and its test command is the one CI runs.

mod common;

use common::Sandbox;

const README: &str = include_str!("../README.md");
const CI: &str = include_str!("../.ci/run");

#[test]
fn every_readme_example_runs_as_written() {
    let examples: Vec<&str> = README
        .lines()
        .filter_map(|l| l.strip_prefix("$ "))
        .collect();
    assert!(examples.len() >= 5, "the README has examples");
    // Run them side by side: each checks its own output and leftovers.
    std::thread::scope(|scope| {
        for line in examples {
            scope.spawn(move || run_example(line));
        }
    });
}

fn run_example(line: &str) {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "sockbench", "{line}");
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(&words[1..])
        .arg("-q")
        .current_dir(sb.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "README example `{line}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty(), "`{line}` printed nothing");
    assert!(
        sb.leftovers().is_empty(),
        "`{line}` left {:?}",
        sb.leftovers()
    );
}

#[test]
fn readme_test_command_is_what_ci_runs() {
    let command = "cargo fmt --check && cargo clippy --locked --all-targets --all-features -- -D warnings && cargo check --locked --no-default-features && cargo test --locked --features test-hooks";
    assert!(README.contains(command));
    assert!(CI.lines().any(|l| l.trim() == command));
}
