//! The coordinator of a mesh.
