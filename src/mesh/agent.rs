//! The agent's side of a mesh: a `sockbench server` asked to drive a test.
