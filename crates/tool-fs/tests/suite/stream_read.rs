//! Streamed windows of a file (issue 17 item 6): on any file the streamed page is the whole
//! read's page, with the same line count and version.

use dsh_tool_fs::{Workspace, text};
use proptest::prelude::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// `read_lines` agrees with reading the file whole: lines, numbers, total and version.
    #[test]
    fn issue17_6_streamed_lines_match_a_whole_read(
        content in "([a-zé\\r]{0,12}\\n){0,30}[a-z]{0,5}",
        offset in 1u64..35,
        limit in 1u64..40,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.txt");
        std::fs::write(&file, &content).unwrap();
        let ws = Workspace::new([dir.path()]).unwrap();
        let rt = rt();
        let whole = rt.block_on(ws.read(&file)).unwrap();
        let page = rt.block_on(ws.read_lines(&file, offset, limit, 1 << 20)).unwrap();
        let all = text::lines(text::decode(&whole.bytes).unwrap());
        prop_assert_eq!(page.total, all.len() as u64);
        prop_assert_eq!(page.version, whole.version);
        let expected: Vec<(u64, String)> = all
            .iter()
            .enumerate()
            .skip(offset as usize - 1)
            .take(limit as usize)
            .map(|(i, l)| (i as u64 + 1, text::shown_line(l)))
            .collect();
        prop_assert_eq!(page.lines, expected);
    }
}

#[test]
fn issue17_6_a_nul_byte_anywhere_is_not_text() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.bin");
    std::fs::write(&file, b"a\nb\n\0c\n").unwrap();
    let ws = Workspace::new([dir.path()]).unwrap();
    let e = rt()
        .block_on(ws.read_lines(&file, 1, 1, 1 << 20))
        .unwrap_err();
    assert_eq!(e.code(), "FS_NOT_TEXT", "{e}");
}
