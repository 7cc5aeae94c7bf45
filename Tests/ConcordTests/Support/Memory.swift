import Foundation

#if canImport(Darwin)
  import Darwin
#endif

/// The resident memory of this process in bytes, where the platform reports it.
///
/// NB: resident memory, not allocator statistics: glibc's `mallinfo2` only sees the main arena,
/// and tests run on many threads.
func residentBytes() -> Int? {
  #if os(Linux)
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
      let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
    else { return nil }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
  #elseif canImport(Darwin)
    var info = mach_task_basic_info()
    var count = mach_msg_type_number_t(
      MemoryLayout<mach_task_basic_info>.size / MemoryLayout<natural_t>.size)
    let status = withUnsafeMutablePointer(to: &info) {
      $0.withMemoryRebound(to: integer_t.self, capacity: Int(count)) {
        task_info(mach_task_self_, task_flavor_t(MACH_TASK_BASIC_INFO), $0, &count)
      }
    }
    return status == KERN_SUCCESS ? Int(info.resident_size) : nil
  #else
    return nil
  #endif
}

/// Whether AddressSanitizer or ThreadSanitizer is in the process. ASan's quarantine holds freed
/// memory back on purpose, and TSan's allocator keeps freed blocks and their shadow (resident
/// memory grew 42 MB over a million entities under it), so resident memory says nothing about
/// reuse under either.
var isSanitized: Bool {
  let process = dlopen(nil, RTLD_NOW)
  return dlsym(process, "__asan_init") != nil || dlsym(process, "__tsan_init") != nil
}
