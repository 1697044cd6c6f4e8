//! The frame decoder's corpus: inputs that once mattered (foreign
//! protocols, oversized and truncated frames, other versions, forged
//! counts). Each must be rejected or left incomplete, never panic, and a
//! valid stream must decode. Add a file to `tests/corpus/` for every
//! input that ever broke the decoder.

use bytes::BytesMut;
use tessera_tcp::frame::{decode_hello, split_message, FrameReader};

fn drive(bytes: &[u8]) -> Result<usize, String> {
    let r = FrameReader { max: 1 << 16 };
    let mut buf = BytesMut::from(bytes);
    let mut frames = 0;
    let mut first = true;
    loop {
        match r.next(&mut buf) {
            Ok(Some(f)) => {
                if first {
                    decode_hello(&f).map_err(|e| e.to_string())?;
                    first = false;
                } else {
                    split_message(&f).map_err(|e| e.to_string())?;
                }
                frames += 1;
            }
            Ok(None) => return Ok(frames),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[test]
fn corpus_inputs_never_panic_and_foreign_ones_are_refused() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let res = drive(&bytes);
        match name.as_str() {
            "http.bin" | "oversized.bin" | "other-version.bin" | "bad-kind-huge-count.bin" => {
                assert!(res.is_err(), "{name} accepted: {res:?}")
            }
            "truncated.bin" | "empty.bin" => assert_eq!(res, Ok(0), "{name}"),
            _ => {}
        }
        seen += 1;
    }
    assert!(seen >= 8, "corpus has {seen} files");
}
