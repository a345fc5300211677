//! How the process's allocator gives memory back. glibc's defaults favour
//! speed over resident size in ways that hurt a long-running pipeline: a
//! freed block larger than the current mmap threshold raises that
//! threshold (up to 32 MiB), so an epoch's large buffers (decoded columns,
//! a state commit's write batch) come from the heap from then on, and the
//! heap keeps them resident, fragmented, after the epoch frees them. And
//! every thread that allocates gets an arena of its own (up to eight per
//! core), each keeping its own freed memory: the files source's decode
//! threads added 7–13 MiB that way. The windows bench measured 140–146 MiB
//! peak with the defaults and 102–105 MiB with [`tune_allocator`]
//! (docs/design/performance.md). Elsewhere than glibc these are no-ops.

/// Blocks this large or larger are mapped on their own and unmapped when
/// freed: 256 KiB is above a 10k-row batch's numeric columns (80 KiB) and
/// below an epoch's decoded input or write batch (megabytes).
const MMAP_THRESHOLD: usize = 256 << 10;

/// Makes glibc keep less freed memory: large blocks go back to the kernel
/// when they are freed (a fixed mmap threshold, which also stops glibc
/// from raising it, and its trim threshold, as blocks are freed), and
/// threads share one arena per core instead of up to eight. Called once,
/// at the start of a process that runs pipelines, before other threads.
#[allow(unsafe_code)] // a libc call with no safe wrapper in std
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only changes the allocator's tuning parameters.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

/// Hands memory the allocator holds free back to the operating system.
/// A long-running pipeline's heap fragments (RocksDB's block cache churns
/// next to each epoch's short-lived buffers), so glibc keeps ever more free
/// pages resident; trimming now and then keeps the resident size flat.
#[allow(unsafe_code)] // a libc call with no safe wrapper in std
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
