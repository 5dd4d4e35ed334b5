//! Generates the `cuzk.v1` gRPC service (tonic + prost) from
//! `daemon/proto/cuzk/v1/proving.proto`. prost needs `protoc`:
//! `scripts/setup.sh` installs it (Debian's protobuf-compiler), or point
//! `PROTOC` at one.

fn main() {
    // Only the daemon speaks gRPC (an embedder without it needs no protoc).
    #[cfg(feature = "daemon")]
    generate();
}

#[cfg(feature = "daemon")]
fn generate() {
    let proto = "daemon/proto/cuzk/v1/proving.proto";
    println!("cargo:rerun-if-changed={proto}");
    if let Err(e) = tonic_prost_build::configure().compile_protos(&[proto], &["daemon/proto"]) {
        panic!(
            "generating the cuzk.v1 gRPC code from {proto}: {e}\n\
             (prost needs protoc: run scripts/setup.sh, install protobuf-compiler, or set PROTOC)"
        );
    }
}
