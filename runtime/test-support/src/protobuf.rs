//! Protobuf compiled and encoded by Google's own implementation
//! (`tools/protobuf/write.py`: protoc from grpcio-tools and the protobuf
//! runtime, installed by `scripts/install-protobuf-writer.sh`), independent
//! of prost-reflect, which Weir reads with, so a test cannot pass on a
//! mistake both sides share.

use std::path::Path;

fn write(args: &[&str]) -> Vec<u8> {
    crate::needs("protobuf");
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    crate::run_writer("protobuf", "scripts/install-protobuf-writer.sh", &args)
}

/// Compiles `proto` (the text of one `.proto` file; Google's well-known
/// types may be imported) into a descriptor set at `out`, imports included.
pub fn descriptor_set(proto: &str, out: &Path) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("input.proto"), proto).unwrap();
    let dir_arg = dir.path().to_string_lossy().into_owned();
    write(&["desc", &dir_arg, "input.proto", &out.to_string_lossy()]);
}

/// Each of `records` (protobuf's JSON mapping) as `message`'s bytes, with
/// the descriptor set at `desc`.
pub fn encode(desc: &Path, message: &str, records: &[&str]) -> Vec<Vec<u8>> {
    let input = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(input.path(), records.join("\n")).unwrap();
    let out = write(&[
        "encode",
        &desc.to_string_lossy(),
        message,
        &input.path().to_string_lossy(),
    ]);
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| hex::decode(l).expect("hex from write.py"))
        .collect()
}
