//! The JSON document matches schema/document.schema.json: the committed schema is the one
//! the code generates (regenerate with `UPDATE_SCHEMA=1 cargo test --test integration schema::`), every
//! schema_version names exactly one schema (a change to the document's keys without a new
//! version fails), and real output of every workload, a failed run's included, validates
//! against the committed file. Versions 1 to 8 were the measuring commands' report alone
//! (schema/legacy/report-v8.schema.json is the last).

use crate::common::Sandbox;

use crate::common::SCHEMA_PATH;

fn generated() -> String {
    let schema = schemars::schema_for!(sockbench::document::Document);
    serde_json::to_string_pretty(&schema).unwrap() + "\n"
}

#[test]
fn committed_schema_is_up_to_date() {
    let now = generated();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(SCHEMA_PATH, &now).unwrap();
    }
    let committed = std::fs::read_to_string(SCHEMA_PATH).unwrap_or_default();
    assert!(
        committed == now,
        "schema/document.schema.json is stale: run `UPDATE_SCHEMA=1 cargo test --test integration schema::` and bump \
         SCHEMA_VERSION if the change is incompatible"
    );
}

/// Each released `schema_version` and the FNV-1a hash of its schema file (1 to 8: the
/// report's, 9 on: the document's). A document whose keys or types change gets a new
/// version and a new line here; an old line never changes.
const RELEASED: &[(u32, u64)] = &[
    (1, 0x444f_6492_3329_e7e6),
    (2, 0xf007_1dd7_c726_55b0),
    (3, 0xf13e_4288_ea3a_a64b),
    (4, 0xa884_ffd6_bd9b_37fb),
    (5, 0xf89b_415e_fa62_442e),
    (6, 0x4fad_cb93_11ad_34f0),
    (7, 0x4c55_430f_0da4_b7e0),
    (8, 0xc9bf_4968_ae4a_7848),
    (9, 0x7e0e_9f36_5f57_a2ed),
    (10, 0xc3c7_13b0_9177_4f00),
    (11, 0x368e_9062_0df7_4051),
];

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[test]
fn each_schema_version_names_one_schema() {
    let committed = std::fs::read_to_string(SCHEMA_PATH).unwrap();
    let hash = fnv1a(&committed);
    let version = sockbench::report::SCHEMA_VERSION;
    match RELEASED.iter().find(|(v, _)| *v == version) {
        Some((_, h)) => assert!(
            *h == hash,
            "the report's schema changed (hash {hash:#x}) but schema_version is still {version}: \
             bump SCHEMA_VERSION and add ({}, {hash:#x}) to RELEASED in tests/schema.rs",
            version + 1
        ),
        None => panic!("schema_version {version} is new: add ({version}, {hash:#x}) to RELEASED in tests/schema.rs"),
    }
    let versions: Vec<u32> = RELEASED.iter().map(|r| r.0).collect();
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "versions only grow: {versions:?}"
    );
}

#[test]
fn every_workloads_output_validates_against_the_committed_schema() {
    let sb = Sandbox::new();
    for args in [
        &["pingpong", "-t", "unix,udp", "-n", "200", "--runs", "2"][..],
        &[
            "pingpong", "-t", "tcp", "-n", "100", "--rate", "10k", "-e", "epoll",
        ],
        &["rate", "-t", "udp,mq", "-n", "500"],
        &["connect", "-t", "tcp,unix", "-n", "20", "--runs", "2"],
        &["stream", "-t", "pipe,unix-dgram", "-n", "100", "-P", "2"],
    ] {
        let out = sb
            .cmd()
            .args(args)
            .args(["-w", "0", "--format", "json", "-q"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!doc["body"]["results"].as_array().unwrap().is_empty());
        crate::common::assert_valid(&doc);
    }
}

#[test]
fn real_output_validates_against_the_schema() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "stream",
            "-t",
            "tcp,udp,shm",
            "-s",
            "1K",
            "-n",
            "300",
            "--runs",
            "2",
            "-w",
            "0",
            "--format",
            "json",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema_version"], sockbench::report::SCHEMA_VERSION);
    assert_eq!(doc["tool"]["name"], "sockbench");
    assert!(doc["command"].as_array().unwrap().len() > 3);
    assert!(doc["environment"]["sysctls"]["net.core.wmem_max"].is_string());
    crate::common::assert_valid(&doc);
    // The schema has teeth: a negative counter or a missing figure is rejected.
    let validator = crate::common::document_schema();
    let mut bad = doc.clone();
    bad["body"]["results"][0]["bytes_sent"] = serde_json::json!(-1);
    assert!(!validator.is_valid(&bad));
    let mut bad = doc.clone();
    bad["body"]["results"][0]
        .as_object_mut()
        .unwrap()
        .remove("transport");
    assert!(!validator.is_valid(&bad));
}

#[test]
fn failed_run_output_validates_too() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bind = busy.local_addr().unwrap().to_string();
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "stream", "-t", "tcp", "-n", "10", "-w", "0", "--format", "json", "-q", "--bind", &bind,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["error"].is_string());
    crate::common::assert_valid(&doc);
}
