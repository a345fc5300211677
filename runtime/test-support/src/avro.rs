//! Avro written by fastavro (`tools/avro/write.py`, installed by
//! `scripts/install-avro-writer.sh`): an implementation independent of
//! arrow-avro, which Weir reads with, so a test cannot pass on a mistake
//! both sides share.

fn write(args: &[&str], records: &[&str]) -> Vec<u8> {
    crate::needs("fastavro");
    let input = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(input.path(), records.join("\n")).unwrap();
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{records}", &input.path().to_string_lossy()))
        .collect();
    crate::run_writer("avro", "scripts/install-avro-writer.sh", &args)
}

/// An Avro object container file of `records` (JSON; numbers with a
/// fraction are decimals) written with `schema` (Avro JSON).
pub fn ocf(schema: &str, records: &[&str]) -> Vec<u8> {
    let out = tempfile::NamedTempFile::new().unwrap();
    let path = out.path().to_string_lossy().into_owned();
    write(&["ocf", schema, "{records}", &path], records);
    std::fs::read(out.path()).unwrap()
}

/// Each of `records` as a schema registry would frame it: `0x00`, the
/// 4-byte big-endian schema `id`, then the Avro body written with `schema`.
pub fn framed(schema: &str, id: u32, records: &[&str]) -> Vec<Vec<u8>> {
    let out = write(&["framed", schema, &id.to_string(), "{records}"], records);
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| hex::decode(l).expect("hex from write.py"))
        .collect()
}

/// Each of `values` (framed as [`framed`] frames them) read by fastavro
/// with `schema`: `{"id": <the frame's schema id>, "record": {…}}`, with
/// decimals as strings, timestamps as Unix milliseconds, dates as ISO
/// strings and bytes as hex.
pub fn read_framed(schema: &str, values: &[Vec<u8>]) -> Vec<serde_json::Value> {
    let hex_lines: Vec<String> = values.iter().map(hex::encode).collect();
    let hex_lines: Vec<&str> = hex_lines.iter().map(String::as_str).collect();
    let out = write(&["read", schema, "{records}"], &hex_lines);
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON from write.py"))
        .collect()
}
