//! Compiles the gRPC adapter's .proto (feature `grpc`) with protox, a protobuf compiler in
//! Rust, so no system `protoc` is needed.

fn main() {
    println!("cargo::rerun-if-changed=src/transport/grpc/msgperf.proto");
    #[cfg(feature = "grpc")]
    {
        let fds = protox::compile(["src/transport/grpc/msgperf.proto"], ["src/transport/grpc"])
            .expect("src/transport/grpc/msgperf.proto compiles");
        tonic_prost_build::configure()
            .bytes(".msgperf.Frame.data")
            .compile_fds(fds)
            .expect("the gRPC service code is generated");
    }
}
