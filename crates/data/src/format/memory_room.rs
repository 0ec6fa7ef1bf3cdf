//! [`grow_within_memory`]: an index that stops, with an error, before it would take the memory
//! the rest of the process needs; [`buffer_within_memory`]: a record's bytes, read only when
//! they fit.
//!
//! A TFRecord index keeps 16 bytes per record (where it starts, how long it is), and a record
//! can be as small as its own 16 bytes of framing: a file of empty records needs an index as
//! large as itself. Compressed, such a file decompresses about a thousandfold (a 10 MB GZIP
//! file, 10 GB of records), so its index could outgrow the machine's memory, and the kernel
//! would kill the process without a word; TF, which reads records as they come, needs none.
//! So an index asks before each time it grows whether the memory available (the kernel's
//! estimate, or a container's cgroup limit when less) holds twice the growth. Its `Vec` doubles
//! each time, so it asks about log2(records) times, each a read of `/proc/meminfo` and the
//! cgroup's files (tens of microseconds).
//!
//! The numbers come from `sysinfo` (the version burn-train's system metrics use), which knows
//! cgroup v1 and v2 and the other systems' calls: by hand it would be a parser of
//! `/proc/meminfo` and of two cgroup layouts, on Linux alone.

/// The memory a process may still use, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Memory {
    /// What it can still allocate without pushing others out: `MemAvailable` on Linux, or the
    /// cgroup's limit less its usage when that is less.
    pub(crate) available: u64,
    /// The machine's memory, or the cgroup's limit when less.
    pub(crate) total: u64,
}

impl Memory {
    /// Now; `None` where the system does not say.
    pub(crate) fn now() -> Option<Self> {
        let mut system = sysinfo::System::new();
        system.refresh_memory();
        let (mut available, mut total) = (system.available_memory(), system.total_memory());
        if let Some(cgroup) = system.cgroup_limits() {
            available = available.min(cgroup.free_memory);
            total = total.min(cgroup.total_memory);
        }
        (total > 0).then_some(Self { available, total })
    }
}

/// The memory `memory` reports when taking `bytes` would leave less than that again available
/// (the rule both checks apply: at most half of the memory available); `None` when there is
/// room, or when it reports nothing.
fn short_of(bytes: u64, memory: impl FnOnce() -> Option<Memory>) -> Option<Memory> {
    memory().filter(|memory| memory.available / 2 < bytes)
}

/// The fewest items an index grows by, so that small files do not ask for memory at all.
const LEAST_GROWTH: usize = 1024;

/// Makes room in `items` for one more item: nothing to do while it has spare capacity; else it
/// doubles (by at least [`LEAST_GROWTH`] items) if `memory` reports at least twice the bytes
/// that takes, or when it reports nothing. Otherwise `items` is left as it is, and the error
/// says how large the index was, what it needed, and what there was.
pub(crate) fn grow_within_memory<T>(
    items: &mut Vec<T>,
    memory: impl FnOnce() -> Option<Memory>,
) -> Result<(), String> {
    if items.len() < items.capacity() {
        return Ok(());
    }
    let growth = items.capacity().max(LEAST_GROWTH);
    let bytes = (growth * size_of::<T>()) as u64;
    if let Some(memory) = short_of(bytes, memory) {
        return Err(format!(
            "its index of {} records would grow by {bytes} bytes, more than half of the {} \
             bytes of memory available ({} in all): records this small cannot be indexed \
             here; join them into fewer, larger records, or give the process more memory",
            items.len(),
            memory.available,
            memory.total
        ));
    }
    items.reserve_exact(growth);
    Ok(())
}

/// The bytes a read buffer may take without asking: chunks of ordinary records never ask.
const ASK_ABOVE: u64 = 64 << 20;

/// Whether a buffer of `bytes` may be allocated for records about to be read: yes up to
/// [`ASK_ABOVE`] bytes, or when `memory` reports nothing; above, only if `memory` reports at
/// least twice as many bytes available. A record's length comes from its file: a TFRecord
/// header, or an image file's size, and a sparse file claims terabytes in a few bytes of disk
/// (`truncate -s 1T x.jpg`). Allocated as claimed, such a length would abort the process
/// ("memory allocation failed") or wake the kernel's OOM killer; refused, it is an error.
pub(crate) fn buffer_within_memory(
    bytes: u64,
    memory: impl FnOnce() -> Option<Memory>,
) -> Result<(), String> {
    if bytes <= ASK_ABOVE {
        return Ok(());
    }
    match short_of(bytes, memory) {
        Some(memory) => Err(format!(
            "reading it takes {bytes} bytes, more than half of the {} bytes of memory available \
             ({} in all)",
            memory.available, memory.total
        )),
        None => Ok(()),
    }
}

/// A report of `available` bytes of memory, of four times as many in all, for the tests of
/// what asks.
#[cfg(test)]
pub(crate) fn reporting(available: u64) -> impl Fn() -> Option<Memory> {
    move || {
        Some(Memory {
            available,
            total: 4 * available,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_vec_with_spare_capacity_does_not_ask() {
        let mut items: Vec<u64> = Vec::with_capacity(8);
        items.push(1);
        grow_within_memory(&mut items, || panic!("asked")).unwrap();
        assert_eq!(items.capacity(), 8);
    }

    #[test]
    fn a_full_vec_doubles_while_memory_holds_twice_the_growth() {
        let mut items: Vec<u64> = vec![0; MIB as usize];
        // Doubling takes 8 MiB more: 16 MiB available is just enough.
        grow_within_memory(&mut items, reporting(16 * MIB)).unwrap();
        assert_eq!(items.capacity(), 2 * MIB as usize);
    }

    #[test]
    fn a_full_vec_stays_as_it_is_when_memory_holds_less() {
        let mut items: Vec<u64> = vec![0; MIB as usize];
        let error = grow_within_memory(&mut items, reporting(16 * MIB - 1)).unwrap_err();
        assert_eq!(items.capacity(), MIB as usize);
        for words in [
            "index of 1048576 records would grow by 8388608 bytes",
            "16777215 bytes of memory available (67108860 in all)",
            "join them into fewer, larger records",
        ] {
            assert!(error.contains(words), "no `{words}` in: {error}");
        }
    }

    #[test]
    fn small_and_unreported_growth_is_taken() {
        let mut items: Vec<u16> = Vec::new();
        grow_within_memory(&mut items, reporting(2 * LEAST_GROWTH as u64 * 2)).unwrap();
        assert_eq!(items.capacity(), LEAST_GROWTH);
        let mut items: Vec<u64> = vec![0; LEAST_GROWTH];
        grow_within_memory(&mut items, || None).unwrap();
        assert_eq!(items.capacity(), 2 * LEAST_GROWTH);
    }

    #[test]
    fn a_buffer_is_taken_up_to_half_the_memory_available() {
        buffer_within_memory(ASK_ABOVE, || panic!("asked")).unwrap();
        buffer_within_memory(100 * MIB, reporting(200 * MIB)).unwrap();
        buffer_within_memory(1 << 40, || None).unwrap();
        let error = buffer_within_memory(100 * MIB + 1, reporting(200 * MIB)).unwrap_err();
        let words = "takes 104857601 bytes, more than half of the 209715200 bytes of memory \
                     available (838860800 in all)";
        assert!(error.contains(words), "no `{words}` in: {error}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_machine_reports_its_memory() {
        let memory = Memory::now().expect("Linux reports its memory");
        assert!(memory.available > 0 && memory.available <= memory.total);
    }
}
