#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Whether two values have the same bits: the same inline fields, the same references.
///
/// Then they are the same value, whatever their type's `==` says, and writing one over the
/// other changes nothing: the write can skip its propagation. Values with the same contents in
/// different buffers (two decodings of one string), or with different padding bytes, are
/// simply not identical, and are written as usual.
///
/// NB: `==` cannot serve here: it may be looser than the value (comparing ids only), and a write
/// it calls unchanged must still reach every aggregate holding the entity.
@inlinable
func _identical<T>(_ first: T, _ second: T) -> Bool {
  let size = MemoryLayout<T>.size
  guard size > 0 else { return true }
  return withUnsafeBytes(of: first) { firstBytes in
    withUnsafeBytes(of: second) { secondBytes in
      memcmp(firstBytes.baseAddress!, secondBytes.baseAddress!, size) == 0
    }
  }
}

/// Whether the value at `first` and the value at `second` have the same bits; see
/// `_identical(_:_:)`. Compares in place, without copying (and retaining) either value.
@inlinable
func _identical<T>(at first: UnsafePointer<T>, _ second: UnsafePointer<T>) -> Bool {
  let size = MemoryLayout<T>.size
  return size == 0 || memcmp(first, second, size) == 0
}
