//! Recordings made to hurt the reader: a segment of one endless line, an empty or
//! corrupt segment, a FIFO, a device or a directory in a segment's place, a segment
//! copied beside itself, a recording of headers and no round. Each is an error naming
//! the file and what a recording must be, never a replay of nothing reported as full
//! agreement, and the reader's memory stays bounded, counted by this binary's allocator
//! (per thread, so the tests running beside one do not add to its figure).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use switchyard_control::{
    PolicySlot, RecordedRound, Recording, RecordingError, ReplayPolicy, replay,
};
use switchyard_runtime::{PolicyRef, Runtime, RuntimeOptions};
use switchyard_test_support::{CountingAllocator, make_fifo, peak_growth};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The checked-in recording of format version 1: one segment of a header, a policy
/// record and eight rounds.
fn checked_in_segment() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/recording-v1/segment-000000.jsonl.zst")
}

/// The checked-in segment's lines, decoded.
fn checked_in_lines() -> Vec<String> {
    let bytes = zstd::decode_all(std::fs::File::open(checked_in_segment()).unwrap()).unwrap();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Segment `n`'s name in a recording's directory.
fn segment(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("segment-{n:06}.jsonl.zst"))
}

/// Writes `lines` to `path` as a segment (a zstd stream, one line each).
fn write_segment(path: &Path, lines: &[String]) {
    let mut encoder = zstd::Encoder::new(std::fs::File::create(path).unwrap(), 3).unwrap();
    for line in lines {
        encoder.write_all(line.as_bytes()).unwrap();
        encoder.write_all(b"\n").unwrap();
    }
    encoder.finish().unwrap();
}

/// Every round the recording at `path` gives, up to the first error.
fn read(path: &Path) -> (Vec<RecordedRound>, Option<RecordingError>) {
    let recording = Recording::open(path).unwrap();
    let mut rounds = Vec::new();
    for round in recording.rounds() {
        match round {
            Ok(round) => rounds.push(round),
            Err(error) => return (rounds, Some(error)),
        }
    }
    (rounds, None)
}

#[test]
fn a_segment_of_one_endless_line_is_refused_at_the_record_limit_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = segment(dir.path(), 0);
    // The header, then 256 MiB without a line end: a few hundred kilobytes compressed.
    let header = &checked_in_lines()[0];
    let mut encoder = zstd::Encoder::new(std::fs::File::create(&path).unwrap(), 1).unwrap();
    encoder.write_all(header.as_bytes()).unwrap();
    encoder.write_all(b"\n").unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..256 {
        encoder.write_all(&chunk).unwrap();
    }
    encoder.finish().unwrap();
    drop(chunk);

    let limit = 1 << 20;
    let recording = Recording::open(dir.path())
        .unwrap()
        .with_max_record_bytes(limit);
    let (first, growth) = peak_growth(|| recording.rounds().next());
    let error = first.expect("an item").unwrap_err();
    assert!(
        matches!(error, RecordingError::RecordTooLarge { line: 2, .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("segment-000000.jsonl.zst")
            && message.contains("record 2")
            && message.contains("limit of 1048576 bytes"),
        "{message}"
    );
    // The line up to the limit, a read chunk past it, and zstd's window.
    assert!(
        growth < limit + (16 << 20),
        "the reader held {growth} bytes for a {limit}-byte record limit"
    );
}

#[test]
fn an_empty_or_corrupt_segment_is_an_error_naming_it_never_a_recording_of_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::File::create(segment(dir.path(), 0)).unwrap();
    let (rounds, error) = read(dir.path());
    assert!(rounds.is_empty());
    let error = error.expect("an error");
    assert!(
        matches!(error, RecordingError::Unreadable { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("segment-000000.jsonl.zst")
            && error.to_string().contains("it is empty"),
        "{error}"
    );

    let corrupt = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..4096u32)
        .map(|k| (k.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(segment(corrupt.path(), 0), bytes).unwrap();
    let (rounds, error) = read(corrupt.path());
    assert!(rounds.is_empty());
    let error = error.expect("an error");
    assert!(
        matches!(error, RecordingError::Unreadable { .. }),
        "{error}"
    );
    assert_eq!(error.metric_label(), "unreadable");
}

#[test]
fn a_fifo_a_device_or_a_directory_in_a_segments_place_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = tempfile::tempdir().unwrap();
    make_fifo(&segment(fifo.path(), 0));
    std::fs::create_dir(segment(dir.path(), 0)).unwrap();
    let device = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", segment(device.path(), 0)).unwrap();
    for path in [
        fifo.path(),
        dir.path(),
        device.path(),
        Path::new("/dev/zero"),
    ] {
        let error = Recording::open(path).unwrap_err();
        assert!(
            matches!(error, RecordingError::NotAFile { .. }),
            "{}: {error}",
            path.display()
        );
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }
}

#[test]
fn a_segment_swapped_for_a_fifo_after_opening_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let path = segment(dir.path(), 0);
    std::fs::copy(checked_in_segment(), &path).unwrap();
    let recording = Recording::open(dir.path()).unwrap();
    std::fs::remove_file(&path).unwrap();
    make_fifo(&path);
    let error = recording.rounds().next().unwrap().unwrap_err();
    assert!(matches!(error, RecordingError::NotAFile { .. }), "{error}");
}

#[test]
fn a_segment_copied_beside_itself_is_refused_not_counted_twice() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..3 {
        std::fs::copy(checked_in_segment(), segment(dir.path(), n)).unwrap();
    }
    let (rounds, error) = read(dir.path());
    assert_eq!(rounds.len(), 8, "the first copy's rounds, once");
    let error = error.expect("an error");
    assert!(
        matches!(error, RecordingError::OutOfOrder { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("segment-000001.jsonl.zst")
            && message.contains("segment-000000.jsonl.zst")
            && message.contains("read once each"),
        "{message}"
    );
}

#[test]
fn a_recording_of_headers_and_no_round_is_an_error_and_replays_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lines = checked_in_lines();
    write_segment(&segment(dir.path(), 0), &lines[..2]);
    let (rounds, error) = read(dir.path());
    assert!(rounds.is_empty());
    let error = error.expect("an error");
    assert!(matches!(error, RecordingError::NoRounds { .. }), "{error}");
    assert!(error.to_string().contains("holds no round"), "{error}");

    let runtime = Runtime::new(RuntimeOptions {
        cache_dir: None,
        ..Default::default()
    })
    .unwrap();
    let module = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    let policy = ReplayPolicy {
        label: "default".into(),
        slot: PolicySlot::configure(module, &Default::default()).unwrap(),
    };
    let recording = Recording::open(dir.path()).unwrap();
    let replayed = replay(&recording, &[policy]);
    let error = replayed.expect_err("no report over no round");
    assert!(error.to_string().contains("holds no round"), "{error}");
}
