//! [`RoomKeepingWriter`]: a writer that stops, with an error, before its disk fills up.
//!
//! A decompressed copy's size is known only once it is written, and a small compressed file
//! can decompress to about a thousand times its size (deflate's limit is 1032:1, and GZIP
//! members can follow each other without end). A crafted or mistaken file must not fill the
//! disk that the system and other programs share: so copies are written through this, which
//! looks at the free space of the copy's file system every [`CHECK_EVERY`] bytes and stops
//! while its [reserve](DiskSpace::reserve) is still free.

use std::fs::File;
use std::io::{self, Write};

/// Bytes written between two looks at the free space. `fstatvfs` costs about a microsecond;
/// writing this much takes about a millisecond.
const CHECK_EVERY: u64 = 1 << 20;

/// The largest reserve: 1 GiB, however large the file system.
const MOST_RESERVED: u64 = 1 << 30;

/// A file system's free and total bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DiskSpace {
    /// The bytes this process may still write (`f_bavail`: without the root reserve).
    pub(crate) free: u64,
    /// The file system's size in bytes.
    pub(crate) total: u64,
}

impl DiskSpace {
    /// The space of the file system that holds `file`; `None` where it reports no size (some
    /// FUSE and network file systems say 0 of 0 bytes free).
    #[cfg(unix)]
    pub(crate) fn of(file: &File) -> io::Result<Option<Self>> {
        let stats = rustix::fs::fstatvfs(file)?;
        Ok(Self::reported(
            stats.f_bavail.saturating_mul(stats.f_frsize),
            stats.f_blocks.saturating_mul(stats.f_frsize),
        ))
    }

    /// The space a file system reports, `None` when it reports no size.
    #[cfg(unix)]
    fn reported(free: u64, total: u64) -> Option<Self> {
        (total > 0).then_some(Self { free, total })
    }

    /// `None`: not asked outside Unix, where copies are limited by the disk alone.
    #[cfg(not(unix))]
    pub(crate) fn of(_file: &File) -> io::Result<Option<Self>> {
        Ok(None)
    }

    /// The bytes a copy leaves free: 5% of the file system, at most 1 GiB (so that a nearly
    /// full large disk still takes copies that fit).
    pub(crate) fn reserve(self) -> u64 {
        (self.total / 20).min(MOST_RESERVED)
    }

    /// Whether [`CHECK_EVERY`] more bytes still leave the reserve free.
    fn has_room(self) -> bool {
        self.free >= self.reserve() + CHECK_EVERY
    }
}

/// Writes to `inner` while its file system has room: before each [`CHECK_EVERY`] bytes it asks
/// `space` and fails with [`io::ErrorKind::StorageFull`] (nothing of that write written) when
/// they would eat into the reserve.
pub(crate) struct RoomKeepingWriter<W, S> {
    inner: W,
    space: S,
    /// Bytes written in all. No write passes a multiple of [`CHECK_EVERY`], so `space` is
    /// asked whenever this is one.
    written: u64,
}

impl<W: Write, S: FnMut() -> io::Result<Option<DiskSpace>>> RoomKeepingWriter<W, S> {
    /// A writer to `inner` that asks `space` for the room left (`DiskSpace::of` the file).
    pub(crate) fn new(inner: W, space: S) -> Self {
        Self {
            inner,
            space,
            written: 0,
        }
    }

    /// Fails when the next [`CHECK_EVERY`] bytes would eat into the reserve.
    fn check_room(&mut self) -> io::Result<()> {
        match (self.space)()? {
            Some(space) if !space.has_room() => Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!(
                    "stopped after {} bytes, to keep {} bytes of its disk free ({} of {} \
                     free): set TMPDIR to a disk with room for the decompressed data, or \
                     decompress the file beforehand (gunzip)",
                    self.written,
                    space.reserve(),
                    space.free,
                    space.total
                ),
            )),
            _ => Ok(()),
        }
    }
}

impl<W: Write, S: FnMut() -> io::Result<Option<DiskSpace>>> Write for RoomKeepingWriter<W, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let since_check = self.written % CHECK_EVERY;
        if since_check == 0 {
            self.check_room()?;
        }
        // At most up to the next check, so that no write passes one.
        let room = (CHECK_EVERY - since_check).min(buf.len() as u64) as usize;
        let n = self.inner.write(&buf[..room])?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A disk of `total` bytes with `free` left at first, which shrinks as the writer writes.
    fn shrinking_disk(total: u64, free: u64, written: &std::cell::Cell<u64>) -> DiskSpace {
        DiskSpace {
            free: free.saturating_sub(written.get()),
            total,
        }
    }

    /// Writes `bytes` zeros through a writer on a disk of 100 MiB with `free` MiB left, in
    /// 64 KiB writes: how many got through, and the error that stopped it.
    fn write_zeros(free: u64, bytes: u64) -> (u64, Option<io::Error>) {
        let written = std::cell::Cell::new(0);
        let mut sink = Vec::new();
        let mut out = RoomKeepingWriter::new(&mut sink, || {
            Ok(Some(shrinking_disk(100 * MIB, free * MIB, &written)))
        });
        let chunk = vec![0u8; 1 << 16];
        let mut error = None;
        while written.get() < bytes {
            match out.write_all(&chunk) {
                Ok(()) => written.set(written.get() + chunk.len() as u64),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        assert_eq!(sink.len() as u64, written.get());
        (written.get(), error)
    }

    #[test]
    fn writes_while_the_reserve_stays_free() {
        // 5 MiB reserve of 100: 20 MiB free holds 10 MiB and 1 MiB to spare.
        let (written, error) = write_zeros(20, 10 * MIB);
        assert_eq!(written, 10 * MIB);
        assert!(error.is_none());
    }

    #[test]
    fn stops_before_eating_into_the_reserve() {
        let (written, error) = write_zeros(20, 100 * MIB);
        let error = error.expect("the reserve is kept");
        assert_eq!(error.kind(), io::ErrorKind::StorageFull);
        // It stopped at a check, with the 5 MiB reserve and less than a check's worth more
        // still free.
        assert_eq!(written % CHECK_EVERY, 0);
        let left = 20 * MIB - written;
        assert!((5 * MIB..6 * MIB).contains(&left), "{left} bytes left");
        let message = error.to_string();
        assert!(
            message.contains(&format!("stopped after {written} bytes")),
            "{message}"
        );
        assert!(message.contains("TMPDIR"), "{message}");
    }

    #[test]
    fn a_nearly_full_disk_takes_nothing() {
        let (written, error) = write_zeros(5, MIB);
        assert_eq!(written, 0);
        assert!(error.is_some());
    }

    #[test]
    fn the_reserve_is_5_percent_up_to_a_gib() {
        let of = |total| DiskSpace { free: 0, total }.reserve();
        assert_eq!(
            (of(100 * MIB), of(20 << 30), of(1 << 40)),
            (5 * MIB, 1 << 30, 1 << 30)
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_file_system_without_a_size_is_not_limited() {
        assert_eq!(DiskSpace::reported(0, 0), None);
        let space = DiskSpace::reported(6 * MIB, 100 * MIB);
        assert_eq!(space.map(DiskSpace::has_room), Some(true));
    }

    #[cfg(unix)]
    #[test]
    fn a_real_file_system_is_measured() {
        let file = tempfile::tempfile().unwrap();
        let space = DiskSpace::of(&file).unwrap().expect("Unix answers");
        assert!(0 < space.free && space.free <= space.total, "{space:?}");
    }
}
