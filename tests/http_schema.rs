//! The JSON documents of `serve`, `load` and `models` match their committed schemas
//! (schema/serve.schema.json, load.schema.json, models.schema.json): the committed files
//! are what the code generates (regenerate with `UPDATE_SCHEMA=1 cargo test --test
//! http_schema`), and real output of each validates against the committed file.

mod common;

use common::Sandbox;
use serde_json::Value;

fn path(name: &str) -> String {
    format!("{}/schema/{name}.schema.json", env!("CARGO_MANIFEST_DIR"))
}

fn generated(name: &str) -> String {
    let schema = match name {
        "serve" => schemars::schema_for!(sockbench::mode::serve::ServeReport),
        "load" => schemars::schema_for!(sockbench::load::LoadReport),
        "models" => schemars::schema_for!(sockbench::mode::models::ModelsReport),
        other => panic!("{other}"),
    };
    serde_json::to_string_pretty(&schema).unwrap() + "\n"
}

#[test]
fn committed_schemas_are_up_to_date() {
    for name in ["serve", "load", "models"] {
        let now = generated(name);
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(path(name), &now).unwrap();
        }
        let committed = std::fs::read_to_string(path(name)).unwrap_or_default();
        assert!(
            committed == now,
            "schema/{name}.schema.json is stale: run `UPDATE_SCHEMA=1 cargo test --test http_schema` \
             and bump the document's schema_version if the change is incompatible"
        );
    }
}

fn validate(name: &str, doc: &Value) {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(path(name)).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{name}: {errors:?}\n{doc}");
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn real_output_of_serve_load_and_models_validates() {
    let sb = Sandbox::new();
    let mut server = sb
        .sockbench()
        .args([
            "serve", "--port", "0", "-d", "3", "-v", "0", "--format", "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stderr.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    for args in [
        vec!["-n", "200", "-c", "4", "-k"],
        vec!["-d", "300ms", "--rate", "500"],
    ] {
        let out = sb
            .cmd()
            .arg("load")
            .args(&args)
            .args(["--format", "json", "-q", &url])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        validate("load", &json(&out));
    }
    // A load that fails is a document too.
    let out = sb
        .cmd()
        .args([
            "load",
            "-n",
            "5",
            "--format",
            "json",
            "-q",
            "http://127.0.0.1:1/",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let failed = json(&out);
    assert!(failed["error"].is_string(), "{failed}");
    validate("load", &failed);
    let out = server.wait_with_output().unwrap();
    validate("serve", &json(&out));
    let out = sb
        .cmd()
        .args([
            "models",
            "--model",
            "epoll,thread",
            "-n",
            "200",
            "-c",
            "4",
            "--format",
            "json",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    validate("models", &json(&out));
}
