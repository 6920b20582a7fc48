//! Opening files that a person, a workload or a recording names: regular files only,
//! opened without blocking, so a FIFO, a device or a directory is refused at once instead
//! of hanging the reader or feeding it without end, and read up to a limit. It owns no
//! format: what the bytes mean is for the caller.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// What [`open_regular_file`] says of a path that is not a regular file.
const NOT_REGULAR: &str = "not a regular file (a directory, device, FIFO or socket is never read)";

/// Opens `path` (through symlinks) for reading when it is a regular file. The open does
/// not block: a FIFO without a writer is refused like any other non-regular file, and
/// the file opened is checked again, so a path swapped between the two looks is
/// refused too. A refusal is an [`io::ErrorKind::InvalidInput`] error saying what is
/// read.
pub fn open_regular_file(path: &Path) -> io::Result<File> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, NOT_REGULAR));
    }
    let file = open_nonblocking(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, NOT_REGULAR));
    }
    Ok(file)
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// The whole of the regular file at `path` when it holds at most `limit` bytes. A
/// larger file (or one that grows past the limit while it is read) is an
/// [`io::ErrorKind::FileTooLarge`] error naming the limit, and no more than `limit + 1`
/// bytes of it are read.
pub fn read_regular_file(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular_file(path)?;
    let too_large = || {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than the limit of {limit} bytes"),
        )
    };
    let size = file.metadata()?.len();
    if size > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_a_device_and_a_fifo_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        switchyard_test_support::make_fifo(&fifo);
        for path in [dir.path(), Path::new("/dev/zero"), fifo.as_path()] {
            let error = open_regular_file(path).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{path:?}");
            assert!(error.to_string().contains("not a regular file"), "{error}");
        }
    }

    #[test]
    fn a_file_over_the_limit_is_refused_naming_the_limit_and_one_within_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let error = read_regular_file(&path, 9).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
        assert!(error.to_string().contains("limit of 9 bytes"), "{error}");
        assert_eq!(read_regular_file(&path, 10).unwrap(), b"0123456789");
    }
}
