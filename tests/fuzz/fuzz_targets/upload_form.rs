//! The admin API's upload body on arbitrary bytes: the multipart reader
//! the server runs (multer, with the same field handling) and Weir's form
//! assembly. Never a panic; a body either yields a complete form or is
//! refused with a reason.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use weir_upload_form::FormParts;

const BOUNDARY: &str = "weirfuzzboundary";

fuzz_target!(|data: &[u8]| {
    let body = Bytes::copy_from_slice(data);
    let stream = futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(body) });
    let mut multipart = multer::Multipart::new(stream, BOUNDARY);
    let result: Result<_, String> = futures_executor::block_on(async {
        let mut parts = FormParts::default();
        while let Some(field) = multipart.next_field().await.map_err(|e| e.to_string())? {
            let name = field.name().unwrap_or("").to_string();
            let file_name = field.file_name().map(str::to_string);
            let bytes = field.bytes().await.map_err(|e| e.to_string())?;
            parts.set(&name, bytes.to_vec(), file_name)?;
        }
        parts.finish()
    });
    if result.is_ok() {
        assert!(
            data.windows(9).any(|w| w == b"component"),
            "a form was accepted without a component field"
        );
    }
});
