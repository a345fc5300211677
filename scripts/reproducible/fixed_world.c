/*
 * fixed_world.so — makes a build see the same world on every run.
 *
 * componentize-py snapshots a CPython interpreter after it has imported the
 * operator (its pre-initialisation). Everything that interpreter read from
 * the build machine ends up in the snapshot, directly or as leftovers in
 * freed heap memory: random bytes (string-hash secret, `random`'s seed),
 * clocks, file times, inode and device numbers (through the component's
 * `metadata-hash`) and the order in which directories list their entries.
 * Two builds of the same source therefore differed in ~13 MB of 19 MB.
 *
 * LD_PRELOAD'ed into the build (scripts/componentize-py does it), this
 * library pins each of those inputs:
 *   - getrandom: the same bytes on every call;
 *   - clock_gettime (libc): frozen at SOURCE_DATE_EPOCH;
 *   - stat/lstat/fstat/newfstatat/statx: access, change, birth and
 *     modification times set to SOURCE_DATE_EPOCH, and the fields that
 *     depend on the filesystem rather than the files (directory sizes and
 *     link counts, blocks, block size) set as on ext4; statx (what Rust's std,
 *     cap-std and wasmtime-wasi use) also reports inode 1, device 0:0 and
 *     mount 0 (glibc's loader uses fstat/newfstatat and keeps real inodes:
 *     it tells libraries apart by them);
 *   - getdents64: a whole directory sorted by name, inode 1.
 * Raw system calls (Rust's rustix makes them without libc) are caught with a
 * seccomp filter that traps them to a SIGSYS handler, which makes the real
 * call from its own code (the filter lets that address through) and then
 * rewrites the result. Linux x86-64 only. A process under this library must
 * not exec another program (the filter stays, the handler does not), so
 * execve fails with EPERM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* The one place this library makes system calls the filter lets through. */
long fixed_raw_syscall(long nr, long a, long b, long c, long d, long e, long f);
extern char fixed_raw_syscall_end[];
__asm__(".text\n"
        ".globl fixed_raw_syscall\n"
        ".type fixed_raw_syscall,@function\n"
        "fixed_raw_syscall:\n"
        "  mov %rdi, %rax\n"
        "  mov %rsi, %rdi\n"
        "  mov %rdx, %rsi\n"
        "  mov %rcx, %rdx\n"
        "  mov %r8, %r10\n"
        "  mov %r9, %r8\n"
        "  mov 8(%rsp), %r9\n"
        "  syscall\n"
        ".globl fixed_raw_syscall_end\n"
        "fixed_raw_syscall_end:\n"
        "  ret\n");

/* 1980-01-01, the earliest time zip archives can carry. */
static int64_t fixed_seconds = 315532800;

static void fixed_bytes(unsigned char *buf, size_t len) {
    uint64_t s = 0x5EED5EED5EED5EEDull; /* splitmix64 from a fixed seed */
    for (size_t i = 0; i < len; i += 8) {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        size_t n = len - i < 8 ? len - i : 8;
        memcpy(buf + i, &z, n);
    }
}

/* What differs between filesystems holding the same files: directory sizes,
 * allocated blocks, block sizes and directory link counts. */
static uint64_t blocks_of(uint64_t size) { return (size + 511) / 512; }

static void fix_stat(struct stat *st) {
    if (S_ISDIR(st->st_mode)) {
        st->st_size = 4096;
        st->st_nlink = 2;
    }
    st->st_blocks = (blkcnt_t)blocks_of((uint64_t)st->st_size);
    st->st_blksize = 4096;
    st->st_atim.tv_sec = st->st_mtim.tv_sec = st->st_ctim.tv_sec = fixed_seconds;
    st->st_atim.tv_nsec = st->st_mtim.tv_nsec = st->st_ctim.tv_nsec = 0;
}

static void fix_statx_time(struct statx_timestamp *t) {
    t->tv_sec = fixed_seconds;
    t->tv_nsec = 0;
}

static void fix_statx(struct statx *st) {
    fix_statx_time(&st->stx_atime);
    fix_statx_time(&st->stx_btime);
    fix_statx_time(&st->stx_ctime);
    fix_statx_time(&st->stx_mtime);
    if (S_ISDIR(st->stx_mode)) {
        st->stx_size = 4096;
        st->stx_nlink = 2;
    }
    st->stx_blocks = blocks_of(st->stx_size);
    st->stx_blksize = 4096;
    st->stx_ino = 1;
    st->stx_dev_major = st->stx_dev_minor = 0;
    st->stx_mnt_id = 0;
}

struct dirent64_header {
    uint64_t d_ino;
    int64_t d_off;
    uint16_t d_reclen;
    uint8_t d_type;
    char d_name[];
};

/* getdents64 hands out a directory in batches, in an order that depends on
 * the filesystem. The first call on a directory (at position 0) reads all of
 * it, sorts it by name and serves it from here; later calls on the same open
 * directory continue from the copy. Handlers on several threads take turns
 * through the lock. */
#define DIR_SLOTS 1024
struct dir_copy {
    uint64_t dev, ino;
    int64_t end_pos;
    unsigned char *data;
    long len, served, capacity;
};
static struct dir_copy dirs[DIR_SLOTS];
static int dirs_lock;

static void *map(long bytes) {
    long p = fixed_raw_syscall(SYS_mmap, 0, bytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p < 0 && p > -4096 ? NULL : (void *)p;
}

static void unmap(void *p, long bytes) {
    if (p) fixed_raw_syscall(SYS_munmap, (long)p, bytes, 0, 0, 0, 0);
}

static const char *entry_name(const unsigned char *base, uint32_t at) {
    return ((const struct dirent64_header *)(const void *)(base + at))->d_name;
}

/* Sorts the entries in data[0..len) by name (insertion sort into a copy). */
static int sort_entries(unsigned char *data, long len) {
    long n = 0;
    for (long at = 0; at < len; n++) {
        uint16_t reclen = ((struct dirent64_header *)(void *)(data + at))->d_reclen;
        if (reclen == 0) return -EIO;
        at += reclen;
    }
    long index_bytes = (n + 1) * (long)sizeof(uint32_t);
    uint32_t *index = map(index_bytes);
    unsigned char *copy = map(len);
    if (!index || !copy) {
        unmap(index, index_bytes);
        unmap(copy, len);
        return -ENOMEM;
    }
    memcpy(copy, data, (size_t)len);
    long count = 0;
    for (long at = 0; at < len; count++) {
        struct dirent64_header *d = (void *)(copy + at);
        d->d_ino = 1;
        long j = count - 1;
        while (j >= 0 && strcmp(d->d_name, entry_name(copy, index[j])) < 0) {
            index[j + 1] = index[j];
            j--;
        }
        index[j + 1] = (uint32_t)at;
        at += d->d_reclen;
    }
    long out = 0;
    for (long i = 0; i < count; i++) {
        const struct dirent64_header *d = (const void *)(copy + index[i]);
        memcpy(data + out, d, d->d_reclen);
        out += d->d_reclen;
    }
    unmap(index, index_bytes);
    unmap(copy, len);
    return 0;
}

/* Reads the whole directory behind fd into slot, sorted. */
static long read_whole_dir(int fd, struct dir_copy *slot) {
    slot->len = slot->served = 0;
    for (;;) {
        if (slot->capacity - slot->len < 65536) {
            long grown = slot->capacity ? slot->capacity * 2 : 262144;
            unsigned char *bigger = map(grown);
            if (!bigger) return -ENOMEM;
            if (slot->data) memcpy(bigger, slot->data, (size_t)slot->len);
            unmap(slot->data, slot->capacity);
            slot->data = bigger;
            slot->capacity = grown;
        }
        long got = fixed_raw_syscall(SYS_getdents64, fd, (long)(slot->data + slot->len),
                                     slot->capacity - slot->len, 0, 0, 0);
        if (got < 0) return got;
        if (got == 0) break;
        slot->len += got;
    }
    slot->end_pos = fixed_raw_syscall(SYS_lseek, fd, 0, SEEK_CUR, 0, 0, 0);
    return sort_entries(slot->data, slot->len);
}

/* Copies the next whole entries that fit into buf. */
static long serve(struct dir_copy *slot, unsigned char *buf, long count) {
    long out = 0;
    while (slot->served < slot->len) {
        uint16_t reclen = ((struct dirent64_header *)(void *)(slot->data + slot->served))->d_reclen;
        if (out + reclen > count) break;
        memcpy(buf + out, slot->data + slot->served, reclen);
        out += reclen;
        slot->served += reclen;
    }
    if (out == 0 && slot->served < slot->len) return -EINVAL;
    return out;
}

static long sorted_getdents(long fd, unsigned char *buf, long count) {
    if (fd < 0 || fd >= DIR_SLOTS) return fixed_raw_syscall(SYS_getdents64, fd, (long)buf, count, 0, 0, 0);
    struct stat st;
    long err = fixed_raw_syscall(SYS_fstat, fd, (long)&st, 0, 0, 0, 0);
    if (err < 0) return err;
    long pos = fixed_raw_syscall(SYS_lseek, fd, 0, SEEK_CUR, 0, 0, 0);
    while (__atomic_exchange_n(&dirs_lock, 1, __ATOMIC_ACQUIRE)) {
    }
    struct dir_copy *slot = &dirs[fd];
    long ret;
    if (slot->data && slot->dev == st.st_dev && slot->ino == st.st_ino && pos == slot->end_pos &&
        pos != 0) {
        ret = serve(slot, buf, count);
    } else if (pos == 0) {
        slot->dev = st.st_dev;
        slot->ino = st.st_ino;
        ret = read_whole_dir((int)fd, slot);
        if (ret == 0) ret = serve(slot, buf, count);
    } else {
        ret = fixed_raw_syscall(SYS_getdents64, fd, (long)buf, count, 0, 0, 0);
    }
    __atomic_store_n(&dirs_lock, 0, __ATOMIC_RELEASE);
    return ret;
}

static long fix_result(long nr, long ret, const long *arg) {
    if (ret < 0) return ret;
    switch (nr) {
    case SYS_stat:
    case SYS_lstat:
    case SYS_fstat:
        fix_stat((struct stat *)arg[1]);
        break;
    case SYS_newfstatat:
        fix_stat((struct stat *)arg[2]);
        break;
    case SYS_statx:
        fix_statx((struct statx *)arg[4]);
        break;
    }
    return ret;
}

static void on_sigsys(int sig, siginfo_t *info, void *context) {
    (void)sig;
    greg_t *r = ((ucontext_t *)context)->uc_mcontext.gregs;
    long nr = info->si_syscall;
    long arg[6] = {r[REG_RDI], r[REG_RSI], r[REG_RDX], r[REG_R10], r[REG_R8], r[REG_R9]};
    long ret;
    if (nr == SYS_getrandom) {
        fixed_bytes((unsigned char *)arg[0], (size_t)arg[1]);
        ret = arg[1];
    } else if (nr == SYS_getdents64) {
        ret = sorted_getdents(arg[0], (unsigned char *)arg[1], arg[2]);
    } else if (nr == SYS_execve || nr == SYS_execveat) {
        static const char msg[] = "fixed_world: refusing exec (the seccomp filter would outlive "
                                  "its handler)\n";
        fixed_raw_syscall(SYS_write, 2, (long)msg, sizeof msg - 1, 0, 0, 0);
        ret = -EPERM;
    } else {
        ret = fix_result(nr, fixed_raw_syscall(nr, arg[0], arg[1], arg[2], arg[3], arg[4], arg[5]),
                         arg);
    }
    r[REG_RAX] = ret;
}

/* Frozen, so nothing the build measures or timestamps can vary. */
int clock_gettime(clockid_t id, struct timespec *ts) {
    (void)id;
    ts->tv_sec = fixed_seconds;
    ts->tv_nsec = 0;
    return 0;
}

/* Says why this build will not be reproducible, and carries on without it. */
static void give_up(const char *why) {
    static const char head[] = "fixed_world: ";
    static const char tail[] = ": this build will not be reproducible\n";
    fixed_raw_syscall(SYS_write, 2, (long)head, sizeof head - 1, 0, 0, 0);
    fixed_raw_syscall(SYS_write, 2, (long)why, (long)strlen(why), 0, 0, 0);
    fixed_raw_syscall(SYS_write, 2, (long)tail, sizeof tail - 1, 0, 0, 0);
}

#define ALLOW BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define TRAP BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP)
#define TRAP_IF(nr, skip) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), (skip), 0)

__attribute__((constructor)) static void install(void) {
    const char *epoch = getenv("SOURCE_DATE_EPOCH");
    if (epoch && *epoch) fixed_seconds = strtoll(epoch, NULL, 10);

    uint64_t lo = (uint64_t)(uintptr_t)fixed_raw_syscall;
    uint64_t hi = (uint64_t)(uintptr_t)fixed_raw_syscall_end + 1;
    if ((lo >> 32) != (hi >> 32)) return give_up("the syscall stub straddles a 4 GiB boundary");

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    if (sigaction(SIGSYS, &sa, NULL) != 0) return give_up("cannot handle SIGSYS");

    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        ALLOW,
        /* The handler's own calls pass. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(lo >> 32), 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)lo, 0, 2),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, (uint32_t)hi, 1, 0),
        ALLOW,
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        TRAP_IF(SYS_getrandom, 9),
        TRAP_IF(SYS_stat, 8),
        TRAP_IF(SYS_lstat, 7),
        TRAP_IF(SYS_fstat, 6),
        TRAP_IF(SYS_newfstatat, 5),
        TRAP_IF(SYS_statx, 4),
        TRAP_IF(SYS_getdents64, 3),
        TRAP_IF(SYS_execve, 2),
        TRAP_IF(SYS_execveat, 1),
        ALLOW,
        TRAP,
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return give_up("prctl(NO_NEW_PRIVS) failed");
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
        return give_up("this kernel refuses a seccomp filter");
}
