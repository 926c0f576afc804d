//! Builds what the transports' folders hold besides Rust, without naming any transport: the
//! protocol buffers of adapters that speak one (internal feature `_protobuf`, compiled with
//! protox, so no system `protoc` is needed), and the list of the folders' own tests
//! (`src/transport/NAME/tests.rs`), which `tests/adapters.rs` includes: each such file gates
//! itself on its transport's feature.

use std::path::{Path, PathBuf};

/// Files named `name` or ending in `.ext` one level down in `src/transport`, sorted.
fn in_transport_folders(want: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("src/transport")
        .expect("src/transport is readable")
        .flatten()
        .filter(|e| e.path().is_dir())
        .flat_map(|dir| {
            std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .filter(|p| want(p))
        .collect();
    found.sort();
    found
}

fn main() {
    println!("cargo::rerun-if-changed=src/transport");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let here = std::env::current_dir().expect("the package's directory");

    let tests: String = in_transport_folders(|p| p.file_name().is_some_and(|n| n == "tests.rs"))
        .iter()
        .map(|p| {
            let folder = p
                .parent()
                .and_then(Path::file_name)
                .unwrap()
                .to_string_lossy();
            format!("#[path = {:?}]\nmod {folder};\n", here.join(p))
        })
        .collect();
    std::fs::write(out.join("transport_tests.rs"), tests).expect("OUT_DIR is writable");

    #[cfg(feature = "_protobuf")]
    for proto in in_transport_folders(|p| p.extension().is_some_and(|x| x == "proto")) {
        let folder = proto.parent().unwrap();
        let fds = protox::compile([&proto], [folder])
            .unwrap_or_else(|e| panic!("{} compiles: {e}", proto.display()));
        // Every `bytes` field as `Bytes`: a message's data is handed over without a copy.
        tonic_prost_build::configure()
            .bytes(".")
            .compile_fds(fds)
            .unwrap_or_else(|e| panic!("{}'s service code is generated: {e}", proto.display()));
    }
}
